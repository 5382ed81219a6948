#!/usr/bin/env bash
# replay_test.sh ALLOCBENCH DATA_DIR: `allocbench replay` on the recorded runs of DATA_DIR,
# checked against what Python's own pickle module finds in them and against the statistics
# PyTorch recorded (cnn_dyn.json); malformed inputs; exports read by Python and replayed back.
# Python is used by this test only, never by allocbench. Exits 77 (skipped) without python3.
set -u
ab=$1
fx=$2/pytorch-2.11-h200
here=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
# The interpreter itself: a wrapper on PATH (pyenv) can take seconds a start, and this test
# starts it many times.
py=$(python3 -c 'import sys; print(sys.executable)')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# value FILE KEY: the value on --info's line for KEY
value() { awk -v k="$2" '$1 == k { print $2 }' "$1"; }

# 1. --info on the snapshot: the event count and each action's count are what pickle finds.
"$ab" replay --info "$fx/cnn_dyn.default.pickle.gz" > "$tmp/info.txt" || fail "--info exited $?"
"$py" - "$fx/cnn_dyn.default.pickle.gz" "$tmp/info.txt" <<'EOF' || fail "--info disagrees with Python's pickle"
import collections, gzip, pickle, sys
snap = pickle.load(gzip.open(sys.argv[1]))
trace = snap["device_traces"][0]
want = collections.Counter(e["action"] for e in trace)
lines = [l.split() for l in open(sys.argv[2]) if l.strip()]
got = {l[0]: l[1] if len(l) > 1 else "" for l in lines}
names = [l[0] for l in lines]
actions = names[names.index("events") + 1 : names.index("streams")]
bad = []
if int(got["events"]) != len(trace):
    bad.append(f"events {got['events']} != {len(trace)}")
if set(actions) != set(want):
    bad.append(f"actions {sorted(actions)} != {sorted(want)}")
for a, n in want.items():
    if int(got.get(a, -1)) != n:
        bad.append(f"{a}: {got.get(a)} != {n}")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
EOF
[ "$(value "$tmp/info.txt" events)" = 56975 ] || fail "events: $(value "$tmp/info.txt" events), expected 56975"
# For people, sizes in binary units, exact where they are held against PyTorch's
# memory_stats(), and PyTorch's default settings said so; --format csv keeps every figure raw.
for want in "peak_requested  *7.27 GiB (7810783516 B)" "peak_reserved  *10.32 GiB (11079254016 B)" \
  "reserved_start  *0 B" "reserved_end  *10.32 GiB" "settings  *default"; do
  grep -qx "$want" "$tmp/info.txt" || fail "--info has no line '$want': $(grep -E '^(peak|reserved|settings)' "$tmp/info.txt")"
done
"$ab" replay --info "$fx/cnn_dyn.default.pickle.gz" --format csv > "$tmp/info.csv" || fail "--info --format csv exited $?"
"$py" -c 'import csv, sys; r = next(csv.DictReader(open(sys.argv[1])))
sys.exit(not (r["peak_requested_bytes"] == "7810783516" and r["settings"] == ""))' "$tmp/info.csv" ||
  fail "--info --format csv is not raw: $(cat "$tmp/info.csv")"

# 2. Against what PyTorch measured: every recorded run implies its recorded peaks; the
# segment files (decisions only) imply those of the segments.
"$py" - "$ab" "$fx" <<'EOF' || fail "--info disagrees with cnn_dyn.json"
import csv, io, json, os, subprocess, sys
ab, fx = sys.argv[1], sys.argv[2]
runs = json.load(open(os.path.join(fx, "cnn_dyn.json")))["runs"]
bad = []
checked = 0
for name, run in runs.items():
    st = run["stats"]
    decisions = [("peak_reserved_bytes", st["reserved_bytes.all.peak"]),
                 ("reserved_end_bytes", st["reserved_bytes.all.current"]),
                 ("device_allocs", st["num_device_alloc"]), ("device_frees", st["num_device_free"]),
                 ("segments_peak", st["segment.all.peak"]), ("ooms_survived", st["num_ooms"])]
    whole = [("events", run["trace_events"]), ("peak_requested_bytes", st["requested_bytes.all.peak"])] + decisions
    files = [(f"cnn_dyn.{name}.trace.csv.gz", whole), (f"cnn_dyn.{name}.pickle.gz", whole),
             (f"cnn_dyn.{name}.segments.csv.gz", decisions)]
    for f, keys in [(os.path.join(fx, f), keys) for f, keys in files if os.path.exists(os.path.join(fx, f))]:
        checked += 1
        out = subprocess.run([ab, "replay", "--info", f, "--format", "csv"], capture_output=True, text=True)
        if out.returncode != 0:
            bad.append(f"{f}: exit {out.returncode}: {out.stderr.strip()}")
            continue
        got = next(csv.DictReader(io.StringIO(out.stdout)))
        for key, want in keys:
            if int(got[key].strip()) != want:
                bad.append(f"{os.path.basename(f)}: {key} {got[key].strip()}, PyTorch recorded {want}")
# The default run in both formats and its decisions, and the decisions of the five others.
if checked != 8:
    bad.append(f"{checked} recorded files checked, expected 8")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
EOF

# 3. The capped run that survived caught OOMs: their count (cnn_dyn.json: 119).
cap="$fx/cnn_dyn.default.cap8103750000.segments.csv.gz"
"$ab" replay --info "$cap" > "$tmp/cap.txt" || fail "--info on $cap exited $?"
[ "$(value "$tmp/cap.txt" ooms_survived)" = 119 ] || fail "ooms_survived $(value "$tmp/cap.txt" ooms_survived), the run recorded 119"

# 3b. A trace that starts late (the history's ring buffer kept only the last 3000 entries): the
# blocks live at its start, and the peak of live requested bytes, as Python rebuilds them from
# the end state the way PyTorch's viewer does.
"$py" - "$ab" "$fx/cnn_dyn.default.pickle.gz" "$tmp/late.pickle" <<'EOF' || fail "a late-starting trace is not rebuilt as Python rebuilds it"
import csv, gzip, io, pickle, subprocess, sys
ab, src, dst = sys.argv[1:4]
snap = pickle.load(gzip.open(src))
trace = snap["device_traces"][0] = snap["device_traces"][0][-3000:]
open(dst, "wb").write(pickle.dumps(snap))
seen, pre, live = set(), 0, 0
for e in trace:
    if e["action"] in ("alloc", "free_requested", "free_completed"):
        if e["addr"] not in seen and e["action"] != "alloc":
            pre, live = pre + 1, live + e["size"]
        seen.add(e["addr"])
for s in snap["segments"]:
    for b in s["blocks"]:
        if b["state"] in ("active_allocated", "active_pending_free") and b["address"] not in seen:
            pre, live = pre + 1, live + b["requested_size"]
peak = live
for e in trace:
    live += e["size"] if e["action"] == "alloc" else -e["size"] if e["action"] == "free_completed" else 0
    peak = max(peak, live)
out = subprocess.run([ab, "replay", "--info", dst, "--format", "csv"], capture_output=True, text=True, check=True).stdout
got = next(csv.DictReader(io.StringIO(out)))
want = [("preexisting_allocs", pre), ("peak_requested_bytes", peak), ("ignored_records", 0)]
bad = [f"{k}: {got[k].strip()}, expected {v}" for k, v in want if int(got[k]) != v]
print("\n".join(bad))
sys.exit(1 if bad else 0)
EOF
"$py" "$here/snapshot_check.py" "$tmp/late.pickle" || fail "the viewer's checks refuse the late-starting trace itself"
"$ab" replay "$tmp/late.pickle" -s raw --device sim --quiet --out "$tmp/res" --no-timeline \
  --export-snapshot "$tmp/late_out.pickle" > /dev/null || fail "replay of the late-starting trace exited $?"
"$py" "$here/snapshot_check.py" "$tmp/late_out.pickle" || fail "the late-starting trace's export does not pass the viewer's checks"
"$ab" replay --info "$tmp/late.pickle" > "$tmp/late.txt"
"$ab" replay --info "$tmp/late_out.pickle" > "$tmp/late_out.txt"
[ "$(value "$tmp/late.txt" events_hash)" = "$(value "$tmp/late_out.txt" events_hash)" ] ||
  fail "the late-starting trace's export replays to other events"

# 4. The snapshot and the CSV of the same run give the same event stream.
"$ab" replay --info "$fx/cnn_dyn.default.trace.csv.gz" > "$tmp/csv.txt"
[ "$(value "$tmp/info.txt" events_hash)" = "$(value "$tmp/csv.txt" events_hash)" ] || fail "the pickle and the CSV give other events"

# 5. Exports: Python loads them, PyTorch's viewer can draw them, and they replay to the same events.
# What the viewer's segment timeline rebuilds peaks where summary.csv's peak reserved does;
# for async, whose segments are the pool's reserve in PyTorch's terms (async.c,
# Note [The pool's reserve as segments]), not one segment per request. (The viewer's checks and its peak
# in one reading of each export: that of raw takes seconds, a segment per request.)
for s in raw pooled async; do
  "$ab" replay "$fx/cnn_dyn.default.pickle.gz" -s "$s" --device sim --quiet --out "$tmp/peak_$s" --no-timeline \
    --export-trace "$tmp/$s.csv" --export-snapshot "$tmp/$s.pickle" > /dev/null || fail "replay -s $s exited $?"
  "$py" "$here/snapshot_check.py" "$tmp/$s.pickle" peak >"$tmp/$s.peak" ||
    fail "$s: the exported snapshot does not pass the viewer's checks"
  for f in "$tmp/$s.csv" "$tmp/$s.pickle"; do
    "$ab" replay --info "$f" > "$tmp/back.txt" || fail "--info on the export $f exited $?"
    [ "$(value "$tmp/back.txt" events_hash)" = "$(value "$tmp/info.txt" events_hash)" ] || fail "$f replays to other events"
    [ "$(value "$tmp/back.txt" preexisting_allocs)" = 0 ] || fail "$f: allocations before the trace"
  done
  [ "$s" = pooled ] && continue
  want=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "peak_reserved_bytes") c = i } NR == 2 { print $c }' \
    "$tmp/peak_$s/summary.csv")
  got=$(awk '$1 == "segment_peak" { print $2 }' "$tmp/$s.peak")
  [ -n "$want" ] && [ "$got" = "$want" ] || fail "$s: the viewer's segment timeline peaks at '$got' B, summary.csv at '$want' B"
done
# The export records the segment decisions as PyTorch does, one per cudaMalloc and one per
# expansion of an expandable segment: as many device allocations as the replay made.
for s in caching expandable; do
  "$ab" replay "$fx/cnn_dyn.default.pickle.gz" -s "$s" --device sim --out "$tmp/res" --no-timeline \
    --export-snapshot "$tmp/$s.pickle" > "$tmp/run.txt" || fail "replay -s $s exited $?"
  "$ab" replay --info "$tmp/$s.pickle" > "$tmp/back.txt" || fail "--info on the $s export exited $?"
  made=$(awk '/^device allocations / { print $3 }' "$tmp/run.txt")
  [ -n "$made" ] && [ "$(value "$tmp/back.txt" device_allocs)" = "$made" ] ||
    fail "$s: the export holds $(value "$tmp/back.txt" device_allocs) device allocations, the replay made '$made'"
done
# An export watches the run without changing it: under a cap its OOM is explained against the
# cap (capacity, not fragmentation), as the same run without the export explains it.
capped_row() {
  "$ab" replay "$fx/pools/compiled.pickle.gz" --cap 100MB --device sim --format csv --out "$tmp/res" --no-timeline "$@" \
    2>/dev/null | awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i }
      NR == 2 { print $c["status"], $c["oom_kind"], $c["oom_event"], $c["peak_reserved_bytes"] }'
}
plain=$(capped_row)
[ "${plain%% *}" = oom ] || fail "replay --cap 100MB: '$plain', expected an OOM"
for opt in --export-trace --export-snapshot; do
  got=$(capped_row $opt "$tmp/capped.export")
  [ "$got" = "$plain" ] || fail "replay --cap 100MB $opt: '$got', without the export '$plain'"
done
# The settings as PyTorch writes them (snapshot.c, Note [The settings a snapshot holds]): the
# default caching export holds what the recorded snapshot holds, key for key and in order; a
# conf is written out in PyTorch's types; a strategy that is not PyTorch's allocator has only
# its conf string.
"$ab" replay "$fx/cnn_dyn.default.pickle.gz" -s split-limited -c roundup_power2_divisions:4,release_lock_on_cudamalloc:True \
  --device sim --quiet --out "$tmp/res" --no-timeline --export-snapshot "$tmp/split.pickle" > /dev/null ||
  fail "replay -s split-limited exited $?"
"$py" - "$fx/cnn_dyn.default.pickle.gz" "$tmp/caching.pickle" "$tmp/split.pickle" "$tmp/raw.pickle" <<'EOF' ||
import gzip, pickle, sys
recorded, caching, split, raw = [pickle.load(gzip.open(p) if p.endswith(".gz") else open(p, "rb"))["allocator_settings"]
                                 for p in sys.argv[1:]]
bad = []
if list(caching.items()) != list(recorded.items()):
    bad.append(f"default: {caching} != {recorded}")
want = dict(recorded, PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:128,roundup_power2_divisions:4,release_lock_on_cudamalloc:True",
            max_split_size=128 << 20, release_lock_on_cudamalloc=True,
            roundup_power2_divisions={k: 4 for k in recorded["roundup_power2_divisions"]})
if list(split.items()) != list(want.items()) or [type(v) for v in split.values()] != [type(v) for v in want.values()]:
    bad.append(f"split-limited: {split} != {want}")
if list(raw) != ["PYTORCH_CUDA_ALLOC_CONF"]:
    bad.append(f"raw: {raw}")
print("\n".join(bad))
sys.exit(1 if bad else 0)
EOF
  fail "the exported allocator_settings are not PyTorch's"
# Replayed under the recorded settings, the export's segments end as PyTorch's did, block for
# block, an inactive block with the last request it served as PyTorch keeps it.
"$py" - "$fx/cnn_dyn.default.pickle.gz" "$tmp/caching.pickle" <<'EOF' || fail "the export's blocks are not PyTorch's"
import collections, gzip, pickle, sys
def blocks(snap):
    return collections.Counter((s["total_size"], b["size"], b["requested_size"], b["state"])
                               for s in snap["segments"] for b in s["blocks"])
want, got = blocks(pickle.load(gzip.open(sys.argv[1]))), blocks(pickle.load(open(sys.argv[2], "rb")))
inactive = sum(n for k, n in want.items() if k[3] == "inactive" and k[2] > 0)
for k in sorted(set(want) | set(got)):
    if want[k] != got[k]:
        print(f"(segment, size, requested_size, state) {k}: PyTorch {want[k]}, the export {got[k]}")
sys.exit(0 if want == got and inactive > 0 else 1)
EOF
# What PyTorch recorded: replayed under its own setting, an expandable run exports one
# segment_map per expansion however many pages it maps, and its decisions are PyTorch's.
# The replay of a snapshot ends comparing its peak with what PyTorch recorded: under the
# recorded settings the same, under expandable segments less (cnn_dyn.json: 10.32 GiB).
"$ab" replay "$fx/cnn_dyn.default.pickle.gz" --device sim --quiet --out "$tmp/res" --no-timeline >"$tmp/run.txt" ||
  fail "replay under the recorded settings exited $?"
grep -qF "PyTorch recorded 10.32 GiB; this replay 10.32 GiB: equal." "$tmp/run.txt" || fail "no comparison with PyTorch: $(tail -3 "$tmp/run.txt")"
# A trace draws nothing at random: its run shows no seed, which a generated workload's does.
grep -q '^seed ' "$tmp/run.txt" && fail "replay shows a seed: $(grep '^seed ' "$tmp/run.txt")"
"$ab" run -w random:ops=100 -s raw --device sim --quiet --out "$tmp/res" --no-timeline >"$tmp/random.txt" ||
  fail "run -w random exited $?"
grep -q '^seed  *42$' "$tmp/random.txt" || fail "a generated workload's run shows no seed: $(head -5 "$tmp/random.txt")"
"$ab" replay "$fx/cnn_dyn.default.pickle.gz" -s expandable --device sim --quiet --out "$tmp/res" --no-timeline >"$tmp/run.txt" ||
  fail "replay -s expandable exited $?"
grep -qE "PyTorch recorded 10.32 GiB; this replay [0-9.]+ GiB: [0-9.]+ GiB less \([0-9.]+%\)\." "$tmp/run.txt" ||
  fail "no comparison with PyTorch under expandable: $(tail -3 "$tmp/run.txt")"
"$ab" replay "$fx/cnn_dyn.default.pickle.gz" -s expandable --device sim --quiet --out "$tmp/res" --no-timeline \
  --export-trace "$tmp/expandable.csv" --export-snapshot "$tmp/expandable.pickle" > /dev/null || fail "replay -s expandable exited $?"
"$py" "$here/snapshot_check.py" "$tmp/expandable.pickle" || fail "expandable: the exported snapshot does not pass the viewer's checks"
"$ab" replay --info "$tmp/expandable.pickle" > "$tmp/back.txt"
want_maps=$(zcat "$fx/cnn_dyn.expandable.segments.csv.gz" | grep -c '^segment_map,')
[ "$want_maps" -gt 0 ] || fail "the recorded expandable run has no segment_map"
[ "$(value "$tmp/back.txt" segment_map)" = "$want_maps" ] ||
  fail "the export has $(value "$tmp/back.txt" segment_map) segment_map entries; PyTorch recorded $want_maps"
[ "$(value "$tmp/back.txt" device_allocs)" = "$want_maps" ] || fail "the export reports $(value "$tmp/back.txt" device_allocs) device allocations"
diff <(grep '^segment_' "$tmp/expandable.csv" | cut -d, -f1,3) <(zcat "$fx/cnn_dyn.expandable.segments.csv.gz" | grep '^segment_' | cut -d, -f1,3) \
  > "$tmp/decisions.diff" || fail "the exported decisions are not PyTorch's: $(head -n 4 "$tmp/decisions.diff")"
# An OOM run exports what happened up to the OOM.
"$ab" replay "$fx/cnn_dyn.default.pickle.gz" -s raw --device sim --budget 6GB --quiet --out "$tmp/res" --no-timeline \
  --export-snapshot "$tmp/oom.pickle" > /dev/null || fail "replay under a budget exited $?"
"$py" "$here/snapshot_check.py" "$tmp/oom.pickle" counts > "$tmp/oom_counts.txt" || fail "the OOM export does not pass the viewer's checks"
grep -qx "oom 1" "$tmp/oom_counts.txt" || fail "the OOM export has no oom entry"
# The replay workload takes the same traces.
"$ab" run -w "replay:$fx/cnn_dyn.default.pickle.gz" -s raw --device sim --quiet --out "$tmp/res" --no-timeline > /dev/null ||
  fail "run -w replay: exited $?"

# 5b. Call stacks: --info says how many a trace holds, and an export of a trace that held them
# writes each alloc's frames back (snapshot.h, Note [Stacks written back]), as Python reads them.
frames="$here/fuzz/corpus/snapshot/stream_frames.pickle"
"$ab" replay --info "$frames" > "$tmp/frames.txt" || fail "--info on $frames exited $?"
grep -qx "stacks  *3 distinct of 5 distinct frames, on 4 of 6 allocations" "$tmp/frames.txt" ||
  fail "--info's stacks: $(grep '^stacks' "$tmp/frames.txt")"
grep -qx "stacks  *none recorded" "$tmp/info.txt" || fail "a snapshot without frames: $(grep '^stacks' "$tmp/info.txt")"
"$ab" replay "$frames" --device sim --quiet --out "$tmp/res" --no-timeline --export-snapshot "$tmp/frames_out.pickle" \
  > /dev/null || fail "replay of $frames exited $?"
"$py" "$here/snapshot_check.py" "$tmp/frames_out.pickle" || fail "the export with frames does not pass the viewer's checks"
"$ab" replay --info "$tmp/frames_out.pickle" > "$tmp/frames_back.txt" || fail "--info on the export with frames exited $?"
[ "$(grep '^stacks' "$tmp/frames_back.txt")" = "$(grep '^stacks' "$tmp/frames.txt")" ] ||
  fail "the export's stacks: $(grep '^stacks' "$tmp/frames_back.txt")"
"$py" - "$frames" "$tmp/frames_out.pickle" <<'EOF' || fail "the export's allocs have other frames than the trace's"
import pickle, sys
def stacks(path):
    trace = pickle.load(open(path, "rb"))["device_traces"][0]
    return [[(f["filename"], f["line"], f["name"]) for f in e.get("frames", [])] for e in trace if e["action"] == "alloc"]
a, b = stacks(sys.argv[1]), stacks(sys.argv[2])
a = [[(fi, max(li, 0), na) for fi, li, na in s] for s in a]  # a line below 1 is kept as 0, unknown
if a != b:
    print(f"{a} != {b}")
sys.exit(a != b)
EOF

# 6. Malformed input: one line naming the file and the byte or line, an exit in 1..127, no hang.
# expect_error FILE PATTERN
expect_error() {
  timeout 60 "$ab" replay --info "$1" > /dev/null 2> "$tmp/err.txt"
  local rc=$?
  if [ $rc -lt 1 ] || [ $rc -gt 127 ] || [ $rc = 124 ]; then
    fail "$1: exit $rc"
  elif [ "$(wc -l < "$tmp/err.txt")" != 1 ]; then
    fail "$1: expected one line on stderr, got: $(cat "$tmp/err.txt")"
  elif ! grep -qF "$1" "$tmp/err.txt" || ! grep -qE "$2" "$tmp/err.txt"; then
    fail "$1: '$(cat "$tmp/err.txt")' does not name the file or match '$2'"
  fi
}
: > "$tmp/empty"
expect_error "$tmp/empty" "empty file"
mkdir "$tmp/folder"
expect_error "$tmp/folder" "is a directory \(expected a file\)"
# A device that never ends is refused before a byte is read, not read up to the 8 GiB limit.
expect_error /dev/zero "is a device or a socket \(expected a file, a FIFO or a pipe\)"
# Two snapshots joined into one file: refused at the first byte after the first's STOP, plain
# and gzipped (a second gzip member inflates on after the first).
zcat "$fx/cnn_dyn.default.pickle.gz" > "$tmp/one.pickle"
cat "$tmp/one.pickle" "$tmp/one.pickle" > "$tmp/joined.pickle"
cat "$fx/cnn_dyn.default.pickle.gz" "$fx/cnn_dyn.default.pickle.gz" > "$tmp/joined.pickle.gz"
at=$(stat -c %s "$tmp/one.pickle")
expect_error "$tmp/joined.pickle" "byte $at: $at bytes after the pickle's STOP"
expect_error "$tmp/joined.pickle.gz" "byte $at: $at bytes after the pickle's STOP"
printf '\x80\x04\xff' > "$tmp/opcode.pickle"
expect_error "$tmp/opcode.pickle" "byte 2: not a pickle opcode: 0xff"
printf '\x80\x02c__builtin__\nset\n.' > "$tmp/global.pickle"
expect_error "$tmp/global.pickle" "byte 2: unsupported pickle opcode GLOBAL \(0x63\)"
"$py" - "$tmp" <<'EOF'
import pickle, sys
d = sys.argv[1]
open(f"{d}/listdict.pickle", "wb").write(pickle.dumps({"device_traces": [[[1, 2]]], "segments": []}, protocol=4))
open(f"{d}/notsnap.pickle", "wb").write(pickle.dumps({"a": 1}, protocol=2))
open(f"{d}/set.pickle", "wb").write(pickle.dumps({"device_traces": [[{1, 2}]]}, protocol=5))
# Settings PyTorch refuses at start-up: a snapshot cannot hold them as they stand.
trace = [{"action": "alloc", "addr": 1 << 40, "size": 512, "stream": 0}]
for name, settings in [("split1", {"max_split_size": 1}),
                       ("gcnan", {"max_split_size": -1, "garbage_collection_threshold": float("nan")}),
                       ("fraction", {"PYTORCH_CUDA_ALLOC_CONF": "per_process_memory_fraction:nan"})]:
    snap = {"device_traces": [trace], "segments": [], "allocator_settings": settings}
    open(f"{d}/{name}.pickle", "wb").write(pickle.dumps(snap, protocol=4))
EOF
expect_error "$tmp/split1.pickle" "allocator_settings\['max_split_size'\]: 1 bytes, under its floor"
expect_error "$tmp/gcnan.pickle" "allocator_settings\['garbage_collection_threshold'\]: not a fraction from 0 up to 1"
expect_error "$tmp/fraction.pickle" "allocator_settings\['PYTORCH_CUDA_ALLOC_CONF'\]: .*per_process_memory_fraction is invalid"
expect_error "$tmp/listdict.pickle" "byte [0-9]+: device_traces\[0\]\[0\]: expected a dict, got a list"
expect_error "$tmp/notsnap.pickle" "byte [0-9]+: not a PyTorch memory snapshot"
expect_error "$tmp/set.pickle" "byte [0-9]+: unsupported pickle opcode EMPTY_SET"
zcat "$fx/cnn_dyn.default.pickle.gz" > "$tmp/full.pickle"
size=$(stat -c %s "$tmp/full.pickle")
for cut in 1 2 11 100 4099 65536 1000003 $((size / 2)) $((size - 100)) $((size - 1)); do
  head -c "$cut" "$tmp/full.pickle" > "$tmp/cut$cut.pickle"
  expect_error "$tmp/cut$cut.pickle" "byte [0-9]+: "
done
gzsize=$(stat -c %s "$fx/cnn_dyn.default.pickle.gz")
for cut in 5 30 1000 $((gzsize / 2)) $((gzsize - 4)); do
  head -c "$cut" "$fx/cnn_dyn.default.pickle.gz" > "$tmp/cut$cut.pickle.gz"
  expect_error "$tmp/cut$cut.pickle.gz" "gzip"
done
printf 'action,addr,size,stream,time_us\nalloc,4096,100,0,1\nalloc,8192,100,0\n' > "$tmp/column.csv"
expect_error "$tmp/column.csv" ":3: expected 5 columns"
printf 'action,addr,size,stream,time_us\nalloc,4096,1e3,0,1\n' > "$tmp/number.csv"
expect_error "$tmp/number.csv" ":2: column 'size': expected a whole number"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000001,allocate,0xg00d,64,0x0\n' > "$tmp/pointer.rmm.csv"
expect_error "$tmp/pointer.rmm.csv" ":2: column 'Pointer': expected a pointer"
printf 'hello\n' > "$tmp/text.txt"
expect_error "$tmp/text.txt" "not a recognised trace"

# A trace through a FIFO is read whole once its writer closes it, as the file is; one that
# nobody writes does not hold the command: SIGTERM stops it at once, saying why.
mkfifo "$tmp/trace.fifo"
(cat "$fx/cnn_dyn.default.pickle.gz" >"$tmp/trace.fifo") &
"$ab" replay "$tmp/trace.fifo" --device sim --format csv --out "$tmp/fifo" >"$tmp/fifo.csv" 2>"$tmp/fifo.err" ||
  fail "replay of a written FIFO: $(cat "$tmp/fifo.err")"
"$ab" replay "$fx/cnn_dyn.default.pickle.gz" --device sim --format csv --out "$tmp/fifo" >"$tmp/file.csv" 2>/dev/null
# events to num_ooms: the figures, not the name or the time
[ "$(tail -1 "$tmp/fifo.csv" | cut -d, -f7-19)" = "$(tail -1 "$tmp/file.csv" | cut -d, -f7-19)" ] ||
  fail "a FIFO replays otherwise than its file: $(cat "$tmp/fifo.csv") against $(cat "$tmp/file.csv")"
"$ab" replay "$tmp/trace.fifo" --device sim --out "$tmp/fifo" >/dev/null 2>"$tmp/fifo.err" &
pid=$!
# Until it polls for the writer (the kernel names that wait poll_schedule_timeout), or 30 s.
for i in $(seq 300); do
  case "$(cat "/proc/$pid/wchan" 2>/dev/null)" in poll_schedule_timeout*) break ;; esac
  sleep 0.1
done
kill -TERM "$pid"
for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
  kill -KILL "$pid"
  fail "SIGTERM did not stop a replay waiting for a FIFO's writer within 5 s"
fi
wait "$pid"
rc=$?
[ $rc -eq 143 ] || fail "replay waiting for a FIFO's writer exited $rc after SIGTERM, expected 143"
grep -qF "$tmp/trace.fifo: stopped while waiting for the FIFO's writer" "$tmp/fifo.err" ||
  fail "SIGTERM while waiting for a FIFO's writer: $(cat "$tmp/fifo.err")"

if [ $failures -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "ok"
