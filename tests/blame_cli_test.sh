#!/usr/bin/env bash
# blame_cli_test.sh ALLOCBENCH DATA: `allocbench blame` on the recorded ResNet-50 job of
# tests/data (no stacks: blamed by allocation size and lifetime, and said so): the table, the
# three changes of the first sites and the answer; blame.csv holds a row per site and per
# change, and --change replays one change to the figures the full blame gave it; bad input is
# refused with one line.
set -u
ab=${1:?usage: blame_cli_test.sh ALLOCBENCH DATA}
data=${2:?}
. "$(dirname "$0")/lib.sh"
trace=$data/pytorch-2.11-h200/cnn_dyn.default.pickle.gz

"$ab" blame "$trace" --top 1 --cap-map 64 -q --out "$work/b" >"$work/out" 2>"$work/err" || fail "blame exited $?: $(cat "$work/err")"
grep -q "The trace has no call stacks: blamed by allocation size and lifetime" "$work/out" || fail "no word on stacks: $(cat "$work/out")"
grep -qE "^ +1  size [0-9.]+ [KMG]iB, lives" "$work/out" || fail "no first site: $(cat "$work/out")"
for c in pool early round; do grep -qE "^    $c " "$work/out" || fail "no line for $c: $(cat "$work/out")"; done
[ "$(tail -n 1 "$work/out" | cut -c1-1)" != "" ] || fail "no answer"
read -r sites changes < <(python3 -c 'import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print(sum(r["change"] == "" for r in rows), sum(r["change"] != "" for r in rows))' "$work/b/blame.csv")
[ "$sites" -gt 1 ] && [ "$changes" -eq 3 ] || fail "blame.csv: $sites sites, $changes changes (expected 3)"
# The page of the folder: the answer and the sites.
"$ab" report "$work/b" >/dev/null 2>&1 || fail "report on a blame folder failed"
grep -q "Which code holds the memory" "$work/b/report.html" && grep -q "None of the changes tried\|Change <code>" "$work/b/report.html" ||
  fail "the page has no blame section"
# --change replays one change: the same peak as the full blame's row for it.
peak=$(python3 -c 'import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["rank"] == "1" and r["change"] == "pool"]
print(rows[0]["peak_reserved_bytes"])' "$work/b/blame.csv")
"$ab" blame "$trace" --cap-map 64 -q --out "$work/c" --change pool:1 >"$work/one" 2>&1 || fail "--change exited $?: $(cat "$work/one")"
python3 - "$peak" "$work/one" <<'PY' || fail "--change pool:1 does not give the full blame's peak $peak: $(cat "$work/one")"
import re, sys
want = int(sys.argv[1])
text = open(sys.argv[2]).read()
m = re.search(r"changed peak reserved ([0-9.]+) (MiB|GiB)", text)
unit = {"MiB": 2**20, "GiB": 2**30}[m.group(2)]
sys.exit(0 if abs(float(m.group(1)) * unit - want) < 0.006 * unit else 1)
PY

# A snapshot PyTorch recorded with stacks on the H200 (tests/data/.../blame/README.md): the
# cache is the site ranked first, and moving it into a MemPool gives the peak reserved that
# PyTorch itself reached with the program changed so, 836763648 B.
frag=$data/pytorch-2.11-h200/blame/frag.pickle
"$ab" blame "$frag" --top 1 -q --format csv --out "$work/f" >"$work/frag.csv" 2>"$work/err" || fail "blame frag.pickle: $(cat "$work/err")"
python3 - "$work/frag.csv" <<'PY' || fail "blame frag.pickle: $(cat "$work/frag.csv")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
first = [r for r in rows if r["rank"] == "1"]
assert first[0]["site"].endswith("frag.py:23 cache_kv"), first[0]["site"]
pool = [r for r in first if r["change"] == "pool"][0]
assert pool["peak_reserved_bytes"] == "836763648", pool
PY

# tune --report blames a trace with stacks too: its page has the sites.
"$ab" tune -w "replay:$frag" --report -q --out "$work/t" >/dev/null 2>"$work/err" || fail "tune --report: $(cat "$work/err")"
grep -q "Which code holds the memory" "$work/t/report.html" && grep -q "cache_kv" "$work/t/report.html" ||
  fail "tune --report's page has no blame: $(ls "$work/t")"

# Bad input: one line, a usage error, nothing written.
refuse "--at 'never': expected peak, oom or an event number" blame "$trace" --at never
refuse "--at 999999: the trace has 38064 events (expected 0 to 38063)" blame "$trace" --at 999999
"$ab" blame "$trace" --at 999999 --out "$work/refused" >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--at past the trace's end exited $rc, expected 2 (a bad argument)"
refuse "--change 'shrink:1': expected pool:RANK, early:RANK or round:RANK" blame "$trace" --change shrink:1
refuse "--change 'pool:0'" blame "$trace" --change pool:0
refuse "--frames '0': expected a whole number from 1 to 64" blame "$trace" --frames 0
refuse "--frames '-2': expected a whole number from 1 to 64" blame "$trace" --frames -2
refuse "expected the trace to blame" blame
refuse "no-such.pickle" blame "$work/no-such.pickle"

finish blame_cli_test
