#!/usr/bin/env bash
# band_test.sh ALLOCBENCH DATA_DIR: placement bands (sim_place.c, Note [Placement bands]).
#  1. Every program PyTorch ran in DATA_DIR, replayed with the simulated card placing its
#     segments, has PyTorch's own peak reserved bytes and device allocations inside its band;
#     and the mixture-of-experts job whose driver placed it two ways (363 device allocations in
#     seven runs, 365 in one) has a band that is not a point and holds both.
#  2. Where no placement choice arises the band is a point: raw (a device call per request,
#     no ties between blocks) and caching on a trace whose blocks never tie.
#  3. A band's end is a run of its own: --placement V replays it, with the band's figure.
#  4. tune.csv carries the band, and no row outside it; a row that ran out of memory under
#     some placement is never recommended.
#  5. compare.csv carries each run's band as summary.csv does.
# Python reads PyTorch's JSON here only. Exits 77 (skipped) without python3 or the data.
set -u
ab=$1
fx=$2/pytorch-2.11-h200
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
# The interpreter itself: a wrapper on PATH (pyenv) can take seconds a start, and this test
# starts it many times.
py=$(python3 -c 'import sys; print(sys.executable)')
[ -r "$fx/pools/moe_gc08split64.pickle.gz" ] || { echo "skipped: no recordings in $fx"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# inside CSV FIELD VALUE: the row's band of FIELD (peak_reserved or device_allocs) holds VALUE
inside() {
  "$py" - "$@" <<'PY'
import csv, sys
row = list(csv.DictReader(open(sys.argv[1])))[0]
lo, hi, v = int(row[sys.argv[2] + "_low"]), int(row[sys.argv[2] + "_high"]), int(sys.argv[3])
if not lo <= v <= hi:
    print("%s: %d outside [%d, %d]" % (sys.argv[2], v, lo, hi))
    sys.exit(1)
PY
}

# stat JSON KEY [CONFIG]: PyTorch's statistic (cnn_dyn.json holds one run per config)
stat() {
  "$py" -c '
import json, sys
j = json.load(open(sys.argv[1]))
st = j["runs"][sys.argv[3]]["stats"] if len(sys.argv) > 3 else j["stats"]
print(st[sys.argv[2]])' "$@"
}

# 1. The recorded programs, the simulated card placing every segment.
for name in graph_pool compiled compiled_expandable mempool_oom gc07split128 moe_gc07split128 moe_gc06 moe_gc08split64; do
  "$ab" replay "$fx/pools/$name.pickle.gz" --device sim:h200 --sim-addresses --format csv --out "$tmp/out" -q \
    >"$tmp/$name.csv" 2>"$tmp/$name.err" || { fail "$name: replay exited $?: $(cat "$tmp/$name.err")"; continue; }
  inside "$tmp/$name.csv" peak_reserved "$(stat "$fx/pools/$name.json" reserved_bytes.all.peak)" || fail "$name: PyTorch's peak reserved outside its band"
  inside "$tmp/$name.csv" device_allocs "$(stat "$fx/pools/$name.json" num_device_alloc)" || fail "$name: PyTorch's device allocations outside its band"
done
for v in 363 365; do inside "$tmp/moe_gc08split64.csv" device_allocs $v || fail "moe_gc08split64: the driver's $v outside the band"; done
for config in default split128 split512 expandable pow2div4 gc06split256; do
  conf=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["runs"][sys.argv[2]]["PYTORCH_CUDA_ALLOC_CONF"])' \
    "$fx/cnn_dyn.json" $config)
  "$ab" replay "$fx/cnn_dyn.default.pickle.gz" -c "$conf" --device sim:h200 --format csv --out "$tmp/out" -q \
    >"$tmp/cnn.$config.csv" 2>"$tmp/err" || { fail "cnn_dyn $config: replay exited $?: $(cat "$tmp/err")"; continue; }
  inside "$tmp/cnn.$config.csv" peak_reserved "$(stat "$fx/cnn_dyn.json" reserved_bytes.all.peak $config)" ||
    fail "cnn_dyn $config: PyTorch's peak reserved outside its band"
done

# 2. Points: raw makes a device call per request; a trace of three allocations of different
#    sizes in one segment never ties two blocks.
"$ab" replay "$fx/pools/moe_gc08split64.pickle.gz" -s raw --device sim:h200 --format csv --out "$tmp/out" -q >"$tmp/raw.csv" 2>"$tmp/err" ||
  fail "raw: replay exited $?: $(cat "$tmp/err")"
printf 'action,addr,size,stream,time_us\nalloc,4096,4096,0,0\nalloc,12288,8192,0,1\nfree_completed,4096,4096,0,2\nalloc,32768,1024,0,3\nfree_completed,12288,8192,0,4\nfree_completed,32768,1024,0,5\n' >"$tmp/tiny.csv"
"$ab" replay "$tmp/tiny.csv" -s caching --device sim:h200 --format csv --out "$tmp/out" -q >"$tmp/tiny_run.csv" 2>"$tmp/err" ||
  fail "tiny: replay exited $?: $(cat "$tmp/err")"
for f in raw tiny_run; do
  "$py" - "$tmp/$f.csv" <<'PY' || fail "$f: the band is not the point"
import csv, sys
r = list(csv.DictReader(open(sys.argv[1])))[0]
assert r["peak_reserved_low"] == r["peak_reserved_high"] == r["peak_reserved_bytes"], r
assert r["device_allocs_low"] == r["device_allocs_high"] == r["num_device_alloc"], r
PY
done
# ... and the moe job's band is not: it holds 363 and 365, as above, and its table says so.
"$ab" replay "$fx/pools/moe_gc08split64.pickle.gz" --device sim:h200 --sim-addresses --out "$tmp/out" >"$tmp/moe.txt" 2>&1 ||
  fail "moe table: exited $?"
grep -q "^device allocations  *365 (363-365)$" "$tmp/moe.txt" || fail "moe table: no band beside the device allocations: $(grep device "$tmp/moe.txt")"

# 3. --placement V replays one variant: some variant gives the band's low end, 363.
found=0
for v in 1 2 3 4 5 6; do
  "$ab" replay "$fx/pools/moe_gc08split64.pickle.gz" --device sim:h200 --sim-addresses --placement $v --format csv --out "$tmp/out" -q \
    >"$tmp/v.csv" 2>"$tmp/err" || { fail "--placement $v exited $?: $(cat "$tmp/err")"; continue; }
  "$py" -c 'import csv, sys; r = list(csv.DictReader(open(sys.argv[1])))[0]; sys.exit(not (r["num_device_alloc"] == r["device_allocs_low"] == r["device_allocs_high"] == "363"))' "$tmp/v.csv" && found=1
done
[ $found = 1 ] || fail "no --placement variant replays the band's 363"
"$ab" replay "$fx/pools/moe_gc08split64.pickle.gz" --device sim:h200 --placement 9 >/dev/null 2>"$tmp/err" && fail "--placement 9 accepted"
grep -q -- "--placement '9'" "$tmp/err" || fail "--placement 9: $(cat "$tmp/err")"
"$ab" replay "$fx/pools/moe_gc08split64.pickle.gz" --device sim:h200 --placement 0 >/dev/null 2>"$tmp/err" && fail "--placement 0 accepted"
grep -q -- "--placement '0': expected a variant from 1 to 6" "$tmp/err" || fail "--placement 0: $(cat "$tmp/err")"

# 4. tune under a cap where placement decides: every row's figure inside its band, bands
#    that are not points, and the recommended row complete under every placement.
"$ab" tune -w "replay:$fx/cnn_dyn.default.pickle.gz" --device sim:h200 --cap 7.5GiB --cap-map 16 --out "$tmp/tune" -q \
  >"$tmp/tune.txt" 2>"$tmp/err" || fail "tune exited $?: $(cat "$tmp/err")"
"$py" - "$tmp/tune/tune.csv" <<'PY' || fail "tune.csv's bands"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
wide = 0
for r in rows:
    lo, hi, p = int(r["peak_reserved_low"]), int(r["peak_reserved_high"]), int(r["peak_reserved_bytes"])
    assert lo <= p <= hi, r
    assert int(r["device_allocs_low"]) <= int(r["num_device_alloc"]) <= int(r["device_allocs_high"]), r
    wide += lo < hi or r["device_allocs_low"] != r["device_allocs_high"]
    if r["recommended"] == "1":  # its safe cap walked under every placement variant
        assert r["status"] == "ok" and "under some placements" not in r["note"], r
        assert "placements not checked" not in r["note"], r
assert wide > 0, "no band is wider than a point under the cap"
PY

# 5. compare: under the cap and setting where tune found a wide band, compare.csv carries the
#    band of each run as summary.csv does.
"$ab" compare -w "replay:$fx/cnn_dyn.default.pickle.gz" -s caching,expandable -c max_split_size_mb:256 --cap 7.5GiB \
  --cap-map 16 --device sim:h200 --out "$tmp/cmp" -q >/dev/null 2>"$tmp/err" || fail "compare exited $?: $(cat "$tmp/err")"
"$py" - "$tmp/cmp" <<'PY' || fail "compare.csv's bands differ from summary.csv's"
import csv, sys
summary = {r["strategy"]: r for r in csv.DictReader(open(sys.argv[1] + "/summary.csv"))}
rows = list(csv.DictReader(open(sys.argv[1] + "/compare.csv")))
assert len(rows) == 2, rows
for r in rows:
    for c in ("peak_reserved_low", "peak_reserved_high"):
        assert r[c] == summary[r["strategy"]][c], (c, r, summary[r["strategy"]])
assert any(r["peak_reserved_low"] != r["peak_reserved_high"] for r in rows), rows
PY
exit $((failures > 0))
