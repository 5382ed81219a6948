#!/usr/bin/env bash
# tune_test.sh ALLOCBENCH DATA_DIR: `allocbench tune` on the simulated card. The ranking
# follows the objective; every row of tune.csv is what `run` and `oom` give for the same conf;
# the line to paste is a conf `run -c` takes, predicting what that run reserves; a cap brings
# garbage_collection_threshold in and every run under it; a recorded memory fraction is the
# cap and stays in the line to paste; a trace that survived OOMs is warned about; a signal
# stops it with nothing written; bad arguments are one-line errors. The predictions for the
# recorded job (DATA_DIR, tests/data) equal what PyTorch measured under each conf.
set -u
ab=${1:?usage: tune_test.sh ALLOCBENCH DATA_DIR}
data=${2:?usage: tune_test.sh ALLOCBENCH DATA_DIR}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
command -v python3 >/dev/null || { echo "tune_test: no python3 to read the CSV: skipped"; exit 77; }
# The interpreter itself: a wrapper on PATH (pyenv) can take seconds a start.
py=$(python3 -c 'import sys; print(sys.executable)')

w="random:ops=4000,max=48MiB,max_live=200"

# check.py CSV ARGS: the rows of a tune.csv checked in Python (csv and json need a real reader).
check() { "$py" - "$@" <<'EOF'
import csv, json, sys
mode, path = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(path)))
fails = []
def fail(msg): fails.append(msg)
num = lambda r, k: int(r[k]) if r[k] != "" else None
if mode in ("reserved", "budget"):
    if [int(r["rank"]) for r in rows] != list(range(1, len(rows) + 1)): fail("ranks are not 1..n in order")
    for k in ("conf", "peak_reserved_bytes", "min_budget_bytes", "num_device_alloc"):
        if k not in rows[0]: fail("no column " + k)
    big = 1 << 64
    def key(r):
        ok = r["status"] != "ok"
        budget = num(r, "min_budget_bytes") if r["min_budget_bytes"] else big
        return (ok, int(r["peak_reserved_bytes"]), budget) if mode == "reserved" else (budget, ok, int(r["peak_reserved_bytes"]))
    keys = [key(r) for r in rows]
    if keys != sorted(keys): fail("not ranked by %s: %s" % (mode, keys))
    won = [r for r in rows if r["recommended"] == "1"]
    first = [r for r in rows if r["strategy"] == "caching" and r["status"] == "ok"][0]
    if len(won) != 1 or won[0] is not first: fail("the recommended row is not the best caching row")
    if sum(r["recorded"] == "1" for r in rows) != 1: fail("not one recorded row")
    if {r["strategy"] for r in rows} != {"caching", "raw", "pooled", "async"}: fail("strategies: %s" % {r["strategy"] for r in rows})
    if any(r["limit"] != ("cap" if r["strategy"] == "caching" else "budget") for r in rows): fail("limits")
elif mode == "rows":  # strategy|conf|figures, one row a line, for the shell to run them again
    for r in rows: print("%s|%s|%s|%s|%s|%s" % (r["strategy"], r["conf"], r["peak_reserved_bytes"], r["num_device_alloc"], r["min_budget_bytes"], r["recommended"]))
elif mode == "field":  # field CONF COLUMN
    print([r for r in rows if r["conf"] == sys.argv[3] and r["strategy"] == "caching"][0][sys.argv[4]])
elif mode == "column":  # column NAME: the distinct values
    print("\n".join(sorted({r[sys.argv[3]] for r in rows})))
elif mode == "json":  # json FILE: the same rows as the CSV
    j = json.load(open(sys.argv[3]))
    if [str(x["conf"]) for x in j] != [r["conf"] for r in rows]: fail("json rows differ from the csv")
for f in fails: print("FAIL: " + f)
sys.exit(1 if fails else 0)
EOF
}

# The ranking, by each objective, in tune.csv and on stdout alike.
for objective in reserved budget; do
  out=$work/$objective
  "$ab" tune -w "$w" --objective "$objective" --format csv --out "$out" >"$work/stdout.csv" 2>"$work/err" ||
    fail "tune --objective $objective: $(cat "$work/err")"
  check "$objective" "$out/tune.csv" || fail "tune --objective $objective ranks wrongly"
  cmp -s "$work/stdout.csv" "$out/tune.csv" || fail "--format csv printed other rows than tune.csv has"
  grep -q "^export PYTORCH_CUDA_ALLOC_CONF='" "$work/err" || fail "--format csv: no line to paste on stderr"
  grep -q "allocbench tune: \[1/" "$work/err" || fail "no progress on stderr"
done
[ "$(check column "$work/reserved/tune.csv" conf | grep -c garbage_collection)" -eq 0 ] ||
  fail "garbage_collection_threshold tried without a cap"
check column "$work/reserved/tune.csv" conf | grep -q '^roundup_power2_divisions:\[' || fail "no list form of roundup_power2_divisions"
check column "$work/reserved/tune.csv" conf | grep -q '^max_split_size_mb:32,max_non_split_rounding_mb:32$' ||
  fail "no max_non_split_rounding_mb"
check column "$work/reserved/tune.csv" conf | grep -q '^max_split_size_mb:64' && fail "max_split_size_mb above every segment tried"

# Every row is what `run` and `oom` give for the same strategy and conf.
i=0
while IFS='|' read -r strategy conf reserved allocs budget recommended; do
  i=$((i + 1))
  echo "$strategy|$conf|$reserved $allocs $budget" >"$work/row$i"
  "$ab" run -w "$w" -s "$strategy" -c "$conf" --device sim --format csv --out "$work/again" >"$work/run$i.csv" 2>/dev/null ||
    fail "run -s $strategy -c '$conf' failed"
  cap="--search cap"
  [ "$strategy" = caching ] || cap=
  "$ab" oom -w "$w" -s "$strategy" -c "$conf" $cap --device sim --format csv --out "$work/again" >"$work/oom$i.csv" 2>/dev/null ||
    fail "oom -s $strategy -c '$conf' failed"
done < <(check rows "$work/reserved/tune.csv")
[ $i -gt 10 ] || fail "only $i rows in tune.csv"
# oom --search cap walks each setting's whole cap map; tune walks it up to a number of intervals, and
# past them bisects above the failures it saw: its smallest cap is then one that completes, so
# at or above the exact one, and its row says the caps were not mapped.
"$py" - "$work" "$i" <<'EOF' || fail "tune.csv differs from run and oom"
import csv, sys
work, n, bad = sys.argv[1], int(sys.argv[2]), 0
notes = {(t["strategy"], t["conf"]): t["note"] for t in csv.DictReader(open("%s/reserved/tune.csv" % work))}
for i in range(1, n + 1):
    strategy, conf, want = open("%s/row%d" % (work, i)).read().rstrip("\n").split("|")
    r = list(csv.DictReader(open("%s/run%d.csv" % (work, i))))[0]
    o = list(csv.DictReader(open("%s/oom%d.csv" % (work, i))))[0]
    got = "%s %s %s" % (r["peak_reserved_bytes"], r["num_device_alloc"], o["min_budget_bytes"])
    cut = "caps bisected" in notes.get((strategy, conf), "")
    if cut and got.split()[:2] == want.split()[:2] and int(want.split()[2]) >= int(got.split()[2]):
        continue
    if got != want:
        print("FAIL: %s '%s': tune says %s, run and oom %s" % (strategy, conf, want, got))
        bad += 1
sys.exit(bad)
EOF

# Settings alike on this trace (harness/tune/tune.h, Note [Settings alike]): with every request
# under 48 MiB, the list forms of roundup_power2_divisions round each as the defaults do, so their
# rows are the defaults' runs (each checked against run and oom above) and say so; a division
# count that rounds them otherwise is run on its own.
"$py" - "$work/reserved/tune.csv" <<'EOF' || fail "the settings alike are not told"
import csv, sys
rows = {r["conf"]: r for r in csv.DictReader(open(sys.argv[1])) if r["strategy"] == "caching"}
said = lambda conf: "the runs of the defaults, which rounds every request alike" in rows[conf]["note"]
bad = []
for conf in ("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", "roundup_power2_divisions:[64:0,>:4]"):
    if not said(conf) or float(rows[conf]["wall_s"]) != 0: bad.append(conf + " is not told the defaults' runs")
for conf in ("", "roundup_power2_divisions:4"):
    if "the runs of" in rows[conf]["note"] or float(rows[conf]["wall_s"]) == 0: bad.append("'%s' is told another's runs" % conf)
for b in bad: print("FAIL: " + b)
sys.exit(1 if bad else 0)
EOF
grep -qF "roundup_power2_divisions:[64:0,>:4]: rounds every request as (default) does" "$work/err" ||
  fail "tune does not say which settings take another's runs: $(cat "$work/err")"

# The line to paste: a conf that run -c takes, predicting the run's peak reserved.
"$ab" tune -w "$w" --out "$work/table" >"$work/table.txt" 2>"$work/err" || fail "tune (table): $(cat "$work/err")"
line=$(grep "^export PYTORCH_CUDA_ALLOC_CONF=" "$work/table.txt")
conf=$(eval "$line"; printf %s "$PYTORCH_CUDA_ALLOC_CONF")
[ -n "$line" ] && grep -q "<- recommended" "$work/table.txt" || fail "no line to paste or no mark: $(cat "$work/table.txt")"
"$ab" run -w "$w" -s caching -c "$conf" --device sim --format csv --out "$work/again" >"$work/run.csv" 2>"$work/err" ||
  fail "run -c '$conf' (the line to paste): $(cat "$work/err")"
want=$(check field "$work/table/tune.csv" "$conf" peak_reserved_bytes)
"$py" -c 'import csv,sys; sys.exit(list(csv.DictReader(open(sys.argv[1])))[0]["peak_reserved_bytes"] != sys.argv[2])' \
  "$work/run.csv" "$want" || fail "run -c '$conf' reserved other than the $want predicted"
# A workload generated here recorded nothing: the comparison is with the defaults. The table
# fits 132 columns, marks the references, and each stage's progress counts to one total.
grep -q "^# against the defaults: peak reserved" "$work/table.txt" && grep -q "^# the recommended: .* at the peak" "$work/table.txt" ||
  fail "no saving over the defaults: $(cat "$work/table.txt")"
grep -q "recorded" "$work/table.txt" && fail "a generated workload's defaults called recorded: $(cat "$work/table.txt")"
awk 'length($0) > 132 { bad = 1; print "FAIL: wider than 132 columns: " $0 } END { exit bad }' "$work/table.txt" || fail "tune's output is too wide"
# Every conf whole, however long (wrapped on lines of its own under its row, never cut to read
# as another), and each column of sizes in one form.
"$py" - "$work/table.txt" "$work/table/tune.csv" <<'EOF' || fail "tune's table cuts a conf or mixes number forms: $(cat "$work/table.txt")"
import csv, re, sys
lines = open(sys.argv[1]).read().splitlines()
head = next(i for i, l in enumerate(lines) if l.startswith("rank "))
at = lines[head].index("conf")
confs, figures, bad = [], {"peak reserved": [], "smallest cap": []}, []
for l in lines[head + 1:]:
    if not l.strip():
        break
    word = l[at:].split()[0] if l[at:].strip() else ""
    if re.match(r"^ +[0-9]+ ", l):
        confs.append(word)
        cells = re.split(r"\s{2,}", l.strip())  # rank, strategy, conf, peak reserved, smallest cap, ...
        figures["peak reserved"].append(cells[3])
        figures["smallest cap"].append(cells[4])
    else:
        confs[-1] += word
want = [r["conf"] or "(default)" if r["strategy"] == "caching" else "-" for r in csv.DictReader(open(sys.argv[2]))]
if sorted(confs) != sorted(want[-len(confs):]):
    bad.append(f"confs {sorted(confs)} != {sorted(want[-len(confs):])}")
bad += [f"a cut conf: {c}" for c in confs if "..." in c]
for name, cells in figures.items():
    # A figure's form: its digits after the point kept as a count, the rest of its digits as one.
    forms = {re.sub(r"\(\d+ B\)", "(N B)", re.sub(r"^\d+", "9", re.sub(r"\.(\d+)", lambda m: "." + "9" * len(m.group(1)), c)))
             for c in cells if "." in c}
    if len(forms) > 1 or any(c not in ("-", "OOM") and "." not in c for c in cells):
        bad.append(f"{name}: {sorted(forms)}")
print("\n".join(bad))
sys.exit(1 if bad else 0)
EOF
for s in raw pooled async; do
  grep -qE "^ +[0-9]+  $s +- .* reference( |$)" "$work/table.txt" || fail "$s is not marked a reference: $(grep " $s " "$work/table.txt")"
done
grep -E "^ +[0-9]+  caching " "$work/table.txt" | grep -q "reference" && fail "a setting marked as a reference"
sed -nE 's/^allocbench tune: \[[0-9]+\/([0-9]+)\].*/\1/p' "$work/err" | uniq | awk 'seen[$0]++ { bad = 1 } END { exit bad }' ||
  fail "progress counts to more than one total per stage: $(grep -o '\[[0-9]*/[0-9]*\]' "$work/err" | tr '\n' ' ')"
"$ab" tune -w "$w" --format json --out "$work/json" >"$work/rows.json" 2>/dev/null || fail "tune --format json"
check json "$work/json/tune.csv" "$work/rows.json" || fail "tune --format json: $(head -c 300 "$work/rows.json")"

# Under a cap: garbage_collection_threshold comes in, every run is made under the cap, and a
# cap too small for some ranks them after the ones that fit.
"$ab" tune -w "$w" --cap 1.22GiB --format csv --out "$work/cap" >/dev/null 2>"$work/err" || fail "tune --cap: $(cat "$work/err")"
check reserved "$work/cap/tune.csv" || fail "tune --cap ranks wrongly"
check column "$work/cap/tune.csv" conf | grep -q '^garbage_collection_threshold:0.6$' || fail "--cap: no garbage_collection_threshold"
[ "$(check column "$work/cap/tune.csv" cap_bytes)" = "$("$py" -c 'print(int(1.22 * 2**30))')" ] || fail "--cap: the runs' cap"
[ "$(check column "$work/cap/tune.csv" status | tr '\n' ' ')" = "ok oom " ] || fail "--cap 1.22GiB should leave some runs out of memory"
grep -q ',oom,none,' "$work/cap/tune.csv" && fail "a run out of memory under the cap without its kind"

# A recorded trace: its memory fraction is the cap, and stays in the line to paste; the
# recorded conf is a row of its own; OOMs the program survived are warned about.
{
  echo "action,addr,size,stream,time_us"
  for i in $(seq 1 30); do
    echo "alloc,$((i << 32)),$(((i * 7919 % 40 + 1) << 20)),0,$i"
    [ $((i % 3)) -eq 0 ] && echo "free_completed,$(((i - 1) << 32)),$((((i - 1) * 7919 % 40 + 1) << 20)),0,$i"
  done
} >"$work/small.csv"
"$ab" replay "$work/small.csv" -s caching -c 'max_split_size_mb:48,per_process_memory_fraction:0.25' --device sim \
  --export-snapshot "$work/small.pickle" --out "$work/replayed" >/dev/null 2>&1 || fail "replay --export-snapshot failed"
"$ab" tune -w "replay:$work/small.pickle" --out "$work/fraction" >"$work/table.txt" 2>"$work/err" || fail "tune of the snapshot"
grep -q "^export PYTORCH_CUDA_ALLOC_CONF='.*per_process_memory_fraction:0.25'$" "$work/table.txt" ||
  fail "the recorded fraction is not in the line to paste: $(grep export "$work/table.txt")"
[ "$(check column "$work/fraction/tune.csv" cap_bytes)" = "$("$py" -c 'print(int(0.25 * 150109880320))')" ] ||
  fail "the recorded fraction is not the cap: $(check column "$work/fraction/tune.csv" cap_bytes)"
check column "$work/fraction/tune.csv" conf | grep -q '^garbage_collection_threshold' || fail "a recorded cap brings no gc"
[ "$(check field "$work/fraction/tune.csv" max_split_size_mb:48 recorded)" = 1 ] || fail "the recorded conf is not a row"
grep -q "warning" "$work/err" && fail "a warning for a trace without OOMs: $(cat "$work/err")"
echo "oom,0,$((1 << 30)),0,99" >>"$work/small.csv"
"$ab" tune -w "replay:$work/small.csv" --format csv --out "$work/bounds" >/dev/null 2>"$work/err" || fail "tune of a trace with an OOM"
grep -q "warning: the traced program caught 1 OOMs and went on" "$work/err" || fail "no warning of the OOM: $(cat "$work/err")"
check column "$work/bounds/tune.csv" note | grep -q "upper bound" || fail "no upper bound in the notes"

# A signal stops it, nothing written. (It is sent once the first configuration is done, so
# that tune has taken SIGINT over: a background job starts with it ignored.)
"$ab" tune -w random:ops=400000 --jobs 1 --out "$work/stopped" >/dev/null 2>"$work/err" &
pid=$!
for _ in $(seq 1 600); do grep -q '^allocbench tune: \[1/' "$work/err" && break; sleep 0.1; done
kill -INT "$pid"
wait "$pid"
rc=$?
[ $rc -eq 130 ] || fail "tune after SIGINT exited $rc: $(cat "$work/err")"
grep -q "interrupted (SIGINT)" "$work/err" || fail "tune after SIGINT: $(cat "$work/err")"
[ ! -e "$work/stopped/tune.csv" ] || fail "an interrupted tune wrote tune.csv"

# Bad arguments.
refuse "-w replay:TRACE (or TRACE alone, or -w WORKLOAD) is required" tune
refuse "unknown workload" tune -w nosuch
refuse "$work/none.pickle: cannot open" tune -w "replay:$work/none.pickle"
refuse "--objective 'fast': expected reserved, budget or time" tune -w "$w" --objective fast
refuse "--cap '0': must be more than 0 bytes" tune -w "$w" --cap 0
refuse "--cap 'lots'" tune -w "$w" --cap lots
refuse "--cap 200.00 GiB is more than the device's total of 139.80 GiB" tune -w "$w" --cap 200GiB
refuse "--jobs '0': expected a whole number from 1 to 1024" tune -w "$w" --jobs 0
refuse "--jobs '-1': expected a whole number from 1 to 1024" tune -w "$w" --jobs -1
refuse "-s caching: tune searches the caching allocator's settings itself" tune -w "$w" -s caching
refuse "-c: tune chooses the strategies" tune -w "$w" -c expandable_segments:True
refuse "--budget: tune chooses" tune -w "$w" --budget 1GB
refuse "--device 'sim:nosuch'" tune -w "$w" --device sim:nosuch
refuse "-w and a trace as the argument: give one of them" tune -w "$w" extra
refuse "unexpected argument 'two'" tune one two

# The recorded job: the prediction for each conf PyTorch ran it under is what PyTorch
# measured (reserved_bytes.all.peak, num_device_alloc; cnn_dyn.json). What is checked here and
# below is each setting's own run and its figures, which the cap maps do not change: without
# them (--cap-map off) tune takes a fifth of the time. The maps are checked in bisect_test, and
# tune with them runs on this job in readme_test and report_test.
trace=$data/pytorch-2.11-h200/cnn_dyn.default.pickle.gz
"$ab" tune -w "replay:$trace" --device sim:h200 --cap-map off --format csv --out "$work/recorded" >/dev/null 2>"$work/err" ||
  fail "tune of the recorded job: $(cat "$work/err")"
"$py" - "$work/recorded/tune.csv" "$data/pytorch-2.11-h200/cnn_dyn.json" <<'EOF' || fail "tune's predictions differ from PyTorch's"
import csv, json, sys
rows = {r["conf"]: r for r in csv.DictReader(open(sys.argv[1])) if r["strategy"] == "caching"}
runs = json.load(open(sys.argv[2]))["runs"]
bad = 0
for name in ("default", "expandable", "split128", "pow2div4"):
    run = runs[name]
    r = rows[run["PYTORCH_CUDA_ALLOC_CONF"]]
    want = (run["stats"]["reserved_bytes.all.peak"], run["stats"]["num_device_alloc"])
    got = (int(r["peak_reserved_bytes"]), int(r["num_device_alloc"]))
    if got != want:
        print("FAIL: %s: tune predicts %s, PyTorch measured %s" % (name, got, want))
        bad += 1
sys.exit(bad)
EOF

# The figures' data (harness/tune/tune_figures.h): each configuration's timeline peaks where its
# row of tune.csv says; the recorded configuration's timeline is, sample by sample, the
# reserved bytes PyTorch recorded; each map at the peak holds that peak in its segments.
"$py" - "$work/recorded" <<'EOF' || fail "the figures' data of the recorded job"
import csv, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(d + "/tune.csv")))
tl = list(csv.DictReader(open(d + "/tune_timeline.csv")))
notes = dict(l.rstrip("\n").split(" ", 1) for l in open(d + "/tune_segments.txt"))
bad = []
by = {c: [r for r in tl if r["config"] == c] for c in ("recorded", "recommended", "pytorch")}
for c in ("recorded", "recommended"):
    row = [r for r in rows if r[c] == "1"][0]
    peak = max(int(r["peak_reserved"]) for r in by[c])
    if peak != int(row["peak_reserved_bytes"]): bad.append("%s: timeline peaks at %d, tune.csv %s" % (c, peak, row["peak_reserved_bytes"]))
    if int(notes[c + "_reserved"]) != peak: bad.append("%s: the map is at %s, the peak is %d" % (c, notes[c + "_reserved"], peak))
    segs = {}
    for b in csv.DictReader(open("%s/tune_segments_%s.csv" % (d, c))): segs[b["segment"]] = int(b["segment_size"])
    if sum(segs.values()) != peak: bad.append("%s: the map's segments hold %d, the peak is %d" % (c, sum(segs.values()), peak))
if len(by["pytorch"]) != len(by["recorded"]) or len(by["recorded"]) < 100: bad.append("samples: %s" % {c: len(v) for c, v in by.items()})
for a, b in zip(by["recorded"], by["pytorch"]):
    if (a["event"], a["reserved"], a["peak_reserved"]) != (b["event"], b["reserved"], b["peak_reserved"]):
        bad.append("at event %s the replay reserved %s (peak %s), PyTorch %s (peak %s)" % (a["event"], a["reserved"], a["peak_reserved"], b["reserved"], b["peak_reserved"]))
        break
if notes["trace"] != "replay:cnn_dyn.default.pickle.gz": bad.append("trace " + notes["trace"])
for b in bad: print("FAIL: " + b)
sys.exit(1 if bad else 0)
EOF

# The recorded configuration under the recorded cap is the recorded run, at its addresses: on
# MoE training steps with garbage collection its row is what PyTorch measured. (That row is its
# run's, not its cap map's: --cap-map off, as above, a quarter of the time.)
trace=$data/pytorch-2.11-h200/pools/moe_gc08split64.pickle.gz
"$ab" tune -w "replay:$trace" --device sim:h200 --cap-map off -q --format csv --out "$work/moe" >/dev/null 2>"$work/err" ||
  fail "tune of the MoE job: $(cat "$work/err")"
"$py" - "$work/moe/tune.csv" "${trace%.pickle.gz}.json" <<'EOF' || fail "tune's recorded row is not PyTorch's"
import csv, json, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["recorded"] == "1"]
stats = json.load(open(sys.argv[2]))["stats"]
want = (stats["reserved_bytes.all.peak"], stats["num_device_alloc"])
got = [(int(r["peak_reserved_bytes"]), int(r["num_device_alloc"])) for r in rows]
if got != [want]:
    print("FAIL: the recorded configuration: tune has %s, PyTorch measured %s" % (got, want))
    sys.exit(1)
EOF

# Note [Headroom] (tune_job.h): under the job's cap (the MemPool program's, 5% of the card in its
# settings), the line to paste says the fraction in the fewest digits, the recommended setting
# has at least 2% of the cap as headroom, and the answer names the setting first by peak
# reserved that it passed over for too little; what makes the figures approximate is in it.
trace=$data/pytorch-2.11-h200/pools/mempool_oom.pickle.gz
"$ab" tune "$trace" --device sim:h200 --out "$work/room" >"$work/room.txt" 2>"$work/err" || fail "tune of the MemPool job: $(cat "$work/err")"
grep -q "^export PYTORCH_CUDA_ALLOC_CONF='.*per_process_memory_fraction:0.05'$" "$work/room.txt" ||
  fail "the recorded fraction is not in its shortest form: $(grep export "$work/room.txt")"
grep -q "^# approximate: " "$work/room.txt" || fail "the answer does not say it is approximate"
"$py" - "$work/room/tune.csv" "$work/room.txt" <<'EOF' || fail "the recommendation does not hold to its headroom"
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["strategy"] == "caching" and r["status"] == "ok"]
answer = open(sys.argv[2]).read()
cap = int(rows[0]["cap_bytes"])
roomy = lambda r: r["headroom_bytes"] != "" and int(r["headroom_bytes"]) * 100 >= cap * 2
winner = [r for r in rows if r["recommended"] == "1"]
first = min(rows, key=lambda r: int(r["rank"]))
bad = 0
if len(winner) != 1 or not roomy(winner[0]) or winner[0] != min((r for r in rows if roomy(r)), key=lambda r: int(r["rank"])):
    print("FAIL: the recommended row is not the first with 2%% of the cap as headroom: %s" % winner); bad += 1
if roomy(first):
    print("FAIL: the MemPool job's first setting has room: the case is not exercised"); bad += 1
elif "# preferred to %s (first by peak reserved)" % (first["conf"] or "the defaults") not in answer:
    print("FAIL: the answer does not say it passed over %s: %s" % (first["conf"], answer)); bad += 1
sys.exit(bad)
EOF

finish tune_test
