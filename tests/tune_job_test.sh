#!/usr/bin/env bash
# tune_job_test.sh ALLOCBENCH: `allocbench tune` of a job of several traces (a torchrun job's
# ranks) on the simulated card. Two traces whose own winners differ: each configuration runs on
# both, tune.csv has a row per trace and configuration with its worst trace marked, the
# ranking follows the worst trace's figure, and the setting recommended (the line to paste) is
# the one whose worst trace is best, compared worst against worst with the recorded one. Every
# row is what tuning that trace alone gives for the same setting. The order of -w does not
# matter; a quoted glob is expanded by tune itself, sorted; a glob matching nothing and a trace
# given twice are refused.
set -u
ab=${1:?usage: tune_job_test.sh ALLOCBENCH}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
command -v python3 >/dev/null || { echo "tune_job_test: no python3 to write the traces: skipped"; exit 77; }
# The interpreter itself: a wrapper on PATH (pyenv) can take seconds a start.
py=$(python3 -c 'import sys; print(sys.executable)')

# Two ranks' CSV traces of 600 allocations each, drawn from fixed seeds: rank 0 large blocks
# (20 to 400 MiB, at most 12 live), rank 1 a mix of small and large ones (at most 60 live).
mkdir -p "$work/job"
"$py" - "$work/job" <<'EOF'
import random, sys
MiB = 1 << 20
for rank, (seed, mix) in enumerate([(2, False), (2, True)]):
    rng, live, lines, addr, t = random.Random(seed), [], ["action,addr,size,stream,time_us"], 1 << 32, 0
    for _ in range(600):
        if mix:
            size, most = rng.choice([rng.randint(1, 2000) * 1024, rng.randint(2, 200) * MiB]), 60
        else:
            size, most = rng.randint(20, 400) * MiB + rng.randint(0, MiB), 12
        t += 1
        lines.append("alloc,%d,%d,0,%d" % (addr, size, t))
        live.append((addr, size))
        addr += size + 1024
        while len(live) > most or (live and rng.random() < 0.3):
            a, s = live.pop(rng.randrange(len(live)))
            t += 1
            lines.append("free_completed,%d,%d,0,%d" % (a, s, t))
    for a, s in live:
        t += 1
        lines.append("free_completed,%d,%d,0,%d" % (a, s, t))
    open("%s/job.rank%d.csv" % (sys.argv[1], rank), "w").write("\n".join(lines) + "\n")
EOF
r0=replay:$work/job/job.rank0.csv
r1=replay:$work/job/job.rank1.csv

# tune ARGS... OUT: tune on the simulated card into OUT, the table on $work/OUT.txt.
tune() {
  local out=${*: -1}
  "$ab" tune "${@:1:$#-1}" --device sim --jobs 2 --out "$work/$out" >"$work/$out.txt" 2>"$work/$out.err" ||
    fail "tune ${*:1:$#-1}: $(cat "$work/$out.err")"
}

# Each trace alone: its own winner. The two must differ, or the job's answer says nothing.
tune -w "$r0" alone0
tune -w "$r1" alone1
winner() { sed -n "s/^export PYTORCH_CUDA_ALLOC_CONF='\(.*\)'$/\1/p" "$work/$1.txt"; }
[ -n "$(winner alone0)" ] && [ "$(winner alone0)" != "$(winner alone1)" ] ||
  fail "the two traces' own winners do not differ ('$(winner alone0)', '$(winner alone1)'): the test needs traces that disagree"

# check.py JOB_CSV OBJECTIVE ALONE_CSV...: tune.csv of the job against what it must hold.
check() { "$py" - "$@" <<'EOF'
import csv, sys
path, objective, alone = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = list(csv.DictReader(open(path)))
fails = []
def fail(msg): fails.append(msg)
traces = sorted({r["trace"] for r in rows})
if len(traces) != 2: fail("traces in tune.csv: %s" % traces)
big = 1 << 64
def key(r):  # as tune ranks: completed first, then the objective's figure, then the other
    # the cap to deploy: the safe cap where the caps were mapped, else the smallest
    budget = int(r["safe_cap_bytes"] or r["min_budget_bytes"]) if r["min_budget_bytes"] else big
    failed, reserved = r["status"] != "ok", int(r["peak_reserved_bytes"])
    return (failed, reserved, budget) if objective == "reserved" else (budget, failed, reserved)
configs = {}
for r in rows: configs.setdefault((r["strategy"], r["conf"]), []).append(r)
ranked = []
for (strategy, conf), rs in configs.items():
    if sorted(r["trace"] for r in rs) != traces: fail("%s '%s': rows for %s" % (strategy, conf, [r["trace"] for r in rs]))
    worst = [r for r in rs if r["worst"] == "1"]
    if len(worst) != 1: fail("%s '%s': %d rows marked worst" % (strategy, conf, len(worst))); continue
    if any(key(r) > key(worst[0]) for r in rs): fail("%s '%s': the row marked worst is not the worst" % (strategy, conf))
    if len({r["rank"] for r in rs}) != 1 or len({r["recommended"] for r in rs}) != 1: fail("%s '%s': rows disagree" % (strategy, conf))
    ranked.append((int(rs[0]["rank"]), key(worst[0]), strategy, conf, rs[0]["recommended"]))
ranked.sort()
if [r[0] for r in ranked] != list(range(1, len(ranked) + 1)): fail("ranks are not 1..n")
if [r[1] for r in ranked] != sorted(r[1] for r in ranked): fail("not ranked by the worst trace's %s" % objective)
won = [r for r in ranked if r[4] == "1"]
settings = [r for r in ranked if r[2] == "caching" and not r[1][objective == "budget"]]
if len(won) != 1: fail("%d configurations recommended" % len(won))
elif won[0][2] != "caching" or won[0][1] != min(r[1] for r in settings):
    fail("recommended %s '%s' (worst %s), not the setting whose worst trace is best (%s)" %
         (won[0][2], won[0][3], won[0][1], min(settings, key=lambda r: r[1])))
else:
    print(won[0][3])
# Every row is what that trace alone gives under the same setting.
figures = ("status", "peak_reserved_bytes", "num_device_alloc", "min_budget_bytes")
for one in alone:
    for a in csv.DictReader(open(one)):
        for r in configs.get((a["strategy"], a["conf"]), []):
            if r["trace"] == a["trace"] and [r[k] for k in figures] != [a[k] for k in figures]:
                fail("%s '%s' on %s: %s in the job, %s alone" % (a["strategy"], a["conf"], a["trace"],
                     [r[k] for k in figures], [a[k] for k in figures]))
for f in fails: print("FAIL: " + f, file=sys.stderr)
sys.exit(1 if fails else 0)
EOF
}

# The job, both objectives: the winner is the setting whose worst trace is best.
for objective in reserved budget; do
  tune -w "$r0" -w "$r1" --objective $objective --format csv job_$objective
  won=$(check "$work/job_$objective/tune.csv" $objective "$work/alone0/tune.csv" "$work/alone1/tune.csv") ||
    fail "tune of the job (--objective $objective) is wrong"
  grep -qxF "export PYTORCH_CUDA_ALLOC_CONF='$won'" "$work/job_$objective.err" ||
    fail "--objective $objective: the line to paste is not the recommended '$won': $(grep export "$work/job_$objective.err")"
done

# The table: each configuration's worst trace, named; the line to paste and the comparison
# speak of the worst trace; the order of -w changes nothing.
tune -w "$r1" -w "$r0" table
grep -q "(2 traces) on sim:h200, .* ranked by peak reserved on their worst trace" "$work/table.txt" ||
  fail "no heading for a job: $(head -1 "$work/table.txt")"
grep -q "worst trace" "$work/table.txt" && grep -q "job.rank[01].csv  *<- recommended" "$work/table.txt" ||
  fail "the table does not name each configuration's worst trace: $(cat "$work/table.txt")"
[ "$(winner table)" = "$(sed -n "s/^export PYTORCH_CUDA_ALLOC_CONF='\(.*\)'$/\1/p" "$work/job_reserved.err")" ] ||
  fail "the order of -w changed the answer: '$(winner table)'"
grep -q "^# predicted peak reserved .* on the worst of its 2 traces, job.rank[01].csv$" "$work/table.txt" ||
  fail "the prediction does not name its worst trace: $(grep '^#' "$work/table.txt")"
grep -q "^# against the recorded configuration (the defaults): .* on the worst of its 2 traces, job.rank[01].csv$" "$work/table.txt" &&
  grep -q "^# the recommended: .*, worst trace against worst trace$" "$work/table.txt" ||
  fail "the comparison is not worst against worst: $(grep '^#' "$work/table.txt")"

# A quoted glob, expanded by tune: the same job, the traces in sorted order.
tune -w "replay:$work/job/job.rank*.csv" --format csv glob
"$py" - "$work/glob/tune.csv" "$work/job_reserved/tune.csv" <<'EOF' || fail "the glob tuned another job than -w rank0 -w rank1"
import csv, sys
glob, job = ([{k: v for k, v in r.items() if k not in ("workload", "wall_s")} for r in csv.DictReader(open(p))] for p in sys.argv[1:])
if glob != job: sys.exit(1)
if [r["trace"] for r in glob[:2]] != ["replay:job.rank0.csv", "replay:job.rank1.csv"]:
    print("the glob's traces are not in sorted order")
    sys.exit(1)
EOF
grep -q "^replay:job.rank\*.csv,replay:job.rank0.csv," "$work/glob/tune.csv" || fail "the workload column is not the -w as given"

# Under a cap per rank: every row of every trace under it, the threshold tried.
tune -w "replay:$work/job/job.rank*.csv" --cap 6GiB --format csv capped
check "$work/capped/tune.csv" reserved >/dev/null || fail "tune --cap of the job is wrong"
[ "$("$py" -c 'import csv,sys; print(*sorted({r["cap_bytes"] for r in csv.DictReader(open(sys.argv[1]))}))' "$work/capped/tune.csv")" = \
  $((6 << 30)) ] || fail "--cap: the runs' cap"
grep -q ",garbage_collection_threshold:0.6," "$work/capped/tune.csv" || fail "--cap: no garbage_collection_threshold"

# Traces alike (harness/tune/tune.h, Note [Traces alike]): a copy of rank 0's file (the same
# bytes, read once) and rank 0's requests at other times (other bytes, the same events) are
# replayed once with rank 0: the heading says so, each has rank 0's rows under its own name, and
# the answer is the two-trace job's.
cp "$work/job/job.rank0.csv" "$work/job/job.rank2.csv"
awk -F, -v OFS=, 'NR > 1 { $5 = $5 * 3 + 7 } { print }' "$work/job/job.rank0.csv" >"$work/job/job.rank3.csv"
tune -w "replay:$work/job/job.rank*.csv" --format csv alike
tune -w "replay:$work/job/job.rank*.csv" alike_table
grep -q "^replay:job.rank\*.csv (4 traces, 2 distinct) on sim:h200" "$work/alike_table.txt" ||
  fail "the heading does not say the traces alike: $(head -n 1 "$work/alike_table.txt")"
"$py" - "$work/alike/tune.csv" <<'EOF2' || fail "the traces alike do not have rank 0's rows"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows: by.setdefault(r["trace"], []).append({k: v for k, v in r.items() if k not in ("trace", "wall_s", "worst")})
zero = by.get("replay:job.rank0.csv")
for alike in ("replay:job.rank2.csv", "replay:job.rank3.csv"):
    if by.get(alike) != zero:
        print("FAIL: %s's rows are not rank 0's" % alike, file=sys.stderr)
        sys.exit(1)
EOF2
grep -qxF "$(grep '^export' "$work/job_reserved.err")" "$work/alike.err" ||
  fail "the traces alike changed the answer: $(grep '^export' "$work/alike.err")"
rm "$work/job/job.rank2.csv" "$work/job/job.rank3.csv"

# Bad input: one line, nothing written.
refuse "-w 'replay:$work/job/none*.csv': no file matches '$work/job/none*.csv'" tune -w "replay:$work/job/none*.csv"
refuse "-w 'replay:$work/job/job.rank*.csv': replay:$work/job/job.rank0.csv is in the job already" \
  tune -w "$r0" -w "replay:$work/job/job.rank*.csv"
refuse "$work/job/nosuch.csv: cannot open" tune -w "$r0" -w "replay:$work/job/nosuch.csv"
# One file by another path or a link is the same trace.
ln -s job.rank0.csv "$work/job/link.csv"
refuse "replay:$work/job/./job.rank0.csv is in the job already (as $r0)" tune -w "$r0" -w "replay:$work/job/./job.rank0.csv"
refuse "replay:$work/job/link.csv is in the job already (as $r0)" tune -w "$r0" -w "replay:$work/job/link.csv"

finish tune_job_test
