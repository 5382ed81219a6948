#!/usr/bin/env bash
# tune_map_bench.sh ALLOCBENCH [TRACE] [TURNS]: what the cap maps cost `allocbench tune` (Note
# [Cap map], harness/run/bisect.c). Times tune on TRACE (default: the recorded ResNet-50 job of
# tests/data) with --cap-map off (every setting's caps bisected), with tune's default (each map
# up to 128 intervals) and with all (every map in full), the three taking turns TURNS times
# (default 5) so that the machine's load falls on each alike. Prints the median wall time of
# each, their ratios to off, and how many settings each mapped. Asserts nothing: speed is
# measured here, never tested.
set -eu
ab=${1:?usage: tune_map_bench.sh ALLOCBENCH [TRACE] [TURNS]}
trace=${2:-$(dirname "$0")/../data/pytorch-2.11-h200/cnn_dyn.default.pickle.gz}
turns=${3:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg); trace: $(basename "$trace")"
for turn in $(seq "$turns"); do
  for map in off 128 all; do
    start=$(date +%s.%N)
    "$ab" tune -w "replay:$trace" --device sim:h200 --cap-map $map -q --format csv --out "$work/$map" >/dev/null 2>&1
    end=$(date +%s.%N)
    echo "$map $(echo "$end - $start" | bc)" >>"$work/times"
  done
done
python3 - "$work" <<'EOF'
import csv, statistics, sys
work = sys.argv[1]
times = {}
for line in open(work + "/times"):
    map, s = line.split()
    times.setdefault(map, []).append(float(s))
med = {m: statistics.median(v) for m, v in times.items()}
for m in ("off", "128", "all"):
    rows = [r for r in csv.DictReader(open("%s/%s/tune.csv" % (work, m))) if r["limit"] == "cap"]
    rows = rows[-len({r["conf"] for r in rows}):]  # the last run's rows
    mapped = sum(1 for r in rows if r["fail_ranges"] != "")
    print("--cap-map %-3s  median %7.2f s wall over %d turns  (%.2f to %.2f)  ratio to off %6.2f  settings mapped %d of %d"
          % (m, med[m], len(times[m]), min(times[m]), max(times[m]), med[m] / med["off"], mapped, len(rows)))
EOF
