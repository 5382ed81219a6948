#!/usr/bin/env bash
# check.sh ALLOCBENCH OUT DATA_DIR: for each run of run.sh in OUT, PyTorch's peak reserved
# bytes and device allocations against the placement band allocbench gives the program's
# trace on a simulated H200 (the card placing every segment): the run's own recording
# replayed under its recorded settings, and, for the what-if runs, tests/data's recording of
# the same program under other settings replayed with theirs (-c). Prints one line per run
# (band.txt beside this file); exits 1 if a figure lies outside its band.
set -u
ab=${1:?usage: check.sh ALLOCBENCH OUT DATA_DIR}
out=${2:?usage: check.sh ALLOCBENCH OUT DATA_DIR}
data=${3:?usage: check.sh ALLOCBENCH OUT DATA_DIR}
bad=0
for json in "$out"/*.json; do
  name=$(basename "$json" .json)
  conf=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["conf"])' "$json")
  case $name in
    moe_gc06split128_*) src=$data/pytorch-2.11-h200/pools/moe_gc08split64.pickle.gz; how="what-if of moe_gc08split64" ;;
    *) src=$out/$name.pickle; how="its own recording" ;;
  esac
  "$ab" replay "$src" -c "$conf" --device sim:h200 --sim-addresses --format csv --out "$out/replays" -q >"$out/$name.band.csv" 2>"$out/$name.err" ||
    { echo "$name: replay failed: $(cat "$out/$name.err")"; bad=1; continue; }
  python3 - "$json" "$out/$name.band.csv" "$name" "$how" <<'PY' || bad=1
import csv, json, sys
st = json.load(open(sys.argv[1]))["stats"]
r = list(csv.DictReader(open(sys.argv[2])))[0]
ok = True
line = sys.argv[3] + " (" + sys.argv[4] + "):"
for key, col, band in (("reserved_bytes.all.peak", "peak_reserved_bytes", "peak_reserved"),
                       ("num_device_alloc", "num_device_alloc", "device_allocs")):
    v, lo, hi = st[key], int(r[band + "_low"]), int(r[band + "_high"])
    inside = lo <= v <= hi
    ok &= inside
    line += " %s PyTorch %d, band %d-%d (point %s)%s" % (col, v, lo, hi, r[col], "" if inside else " OUTSIDE")
print(line)
sys.exit(0 if ok else 1)
PY
done
exit $bad
