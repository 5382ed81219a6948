#!/usr/bin/env bash
# tune_alike_bench.sh ALLOCBENCH [TRACE] [COPIES] [TURNS]: what a job of many ranks that make
# the same requests costs `allocbench tune` (harness/tune/tune.h, Note [Traces alike]). Times
# tune on TRACE (default: the recorded ResNet-50 job of tests/data) alone and on COPIES copies of
# it (default 64) as one job, the two taking turns TURNS times (default 3) so that the machine's
# load falls on each alike. Prints the median wall and processor time (user and system) of
# each and their ratios, and the line tune said of the job. Asserts nothing: speed is measured
# here, never tested.
set -eu
ab=${1:?usage: tune_alike_bench.sh ALLOCBENCH [TRACE] [COPIES] [TURNS]}
trace=${2:-$(dirname "$0")/../data/pytorch-2.11-h200/cnn_dyn.default.pickle.gz}
copies=${3:-64}
turns=${4:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

name=$(basename "$trace")
mkdir "$work/job"
for i in $(seq 0 $((copies - 1))); do cp "$trace" "$work/job/rank$i.$name"; done
echo "cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg); trace: $name, $copies copies"
for turn in $(seq "$turns"); do
  for job in one many; do
    spec="replay:$trace"
    [ $job = many ] && spec="replay:$work/job/rank*"
    TIMEFORMAT="$job %R %U %S"
    { time "$ab" tune -w "$spec" --device sim:h200 --out "$work/$job" >"$work/$job.out" 2>/dev/null; } 2>>"$work/times"
  done
done
# median JOB FIELD: of the wall times (2) or the processor times (user + system: 3).
median() {
  awk -v job="$1" -v f="$2" '$1 == job { print f == 2 ? $2 : $3 + $4 }' "$work/times" | sort -g |
    awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
for f in 2 3; do
  one=$(median one $f)
  many=$(median many $f)
  echo "$([ $f = 2 ] && echo wall || echo processor): one trace $one s, $copies copies $many s, ratio $(awk -v a="$one" -v b="$many" 'BEGIN { printf "%.2f", b / a }')"
done
echo "tune said: $(head -n 1 "$work/many.out")"
