#!/usr/bin/env bash
# busy.sh ALLOCBENCH OUT [REPEATS]: cudaMallocAsync's pool on a busy and on an idle GPU. Runs
# `-s async` on each bench workload with its kernels, then with --no-kernels (the same
# allocation calls with nothing running on the device), REPEATS times each (default 2), and
# prints each run's peak reserved bytes (the pool's reserve) over peak requested. Rows go to
# OUT/summary.csv in that order. From the repository root, on a GPU machine; AB_DEVICE=sim
# runs it on the simulated card instead (which runs no kernels: both halves alike).
set -u
ab=${1:?usage: busy.sh ALLOCBENCH OUT [REPEATS]}
out=${2:?usage: busy.sh ALLOCBENCH OUT [REPEATS]}
repeats=${3:-2}
mkdir -p "$out"
echo "workload,kernels,run,peak_requested_bytes,peak_reserved_bytes,ratio"
for w in dynamic-shapes cnn-dynamic mixed-precision zero:stage=3 random fragmenter; do
  for k in yes no; do
    flag=
    [ "$k" = no ] && flag=--no-kernels
    for r in $(seq "$repeats"); do
      "$ab" run -w "$w" -s async --device "${AB_DEVICE:-cuda}" $flag --no-timeline --out "$out" --format csv 2>>"$out/stderr.log" |
        awk -F, -v w="$w" -v k="$k" -v r="$r" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
          { req = $col["peak_requested_bytes"]; res = $col["peak_reserved_bytes"]
            printf "%s,%s,%d,%s,%s,%.3f\n", w, k, r, req, res, res / req }'
    done
  done
done
