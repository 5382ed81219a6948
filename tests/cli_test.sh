#!/usr/bin/env bash
# cli_test.sh ALLOCBENCH: the command line, good and bad. Every refusal must exit with a code
# from 1 to 127 and say one line on stderr naming the bad input, and write no results.
set -u
ab=${1:?usage: cli_test.sh PATH_TO_ALLOCBENCH}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# refuse "WHAT THE MESSAGE MUST SAY" ARGS...
refuse() {
  local says=$1
  shift
  "$ab" "$@" --out "$work/refused" >"$work/out" 2>"$work/err"
  local rc=$? lines
  lines=$(wc -l <"$work/err")
  if [ $rc -lt 1 ] || [ $rc -gt 127 ]; then fail "$* exited $rc"; fi
  if [ "$lines" -ne 1 ]; then fail "$*: $lines lines on stderr: $(cat "$work/err")"; fi
  if ! grep -qF -- "$says" "$work/err"; then fail "$*: stderr does not say '$says': $(cat "$work/err")"; fi
  if [ -s "$work/out" ]; then fail "$*: wrote to stdout"; fi
  if [ -e "$work/refused" ]; then fail "$*: wrote results"; rm -rf "$work/refused"; fi
}

refuse "unknown strategy" run -w random -s nosuch --device sim
refuse "unknown workload 'nosuch'" run -w nosuch -s raw --device sim
refuse "unknown simulated card 'h300'" run -w random -s raw --device sim:h300
refuse "--device 'tpu'" run -w random -s raw --device tpu
refuse "--budget '-3GB'" run -w random -s raw --device sim --budget -3GB
refuse "unknown unit 'XB'" run -w random -s raw --device sim --budget 12XB
refuse "--budget '0'" run -w random -s raw --device sim --budget 0
refuse "--budget 200.00 GiB is more than the device's" run -w random -s raw --device sim --budget 200GiB
refuse "--seed 'abc'" run -w random -s raw --device sim --seed abc
refuse "chunk" run -w random -s pooled -c chunk:abc --device sim
refuse "unknown key 'bogus'" run -w random -s raw -c bogus:1 --device sim
refuse "ops" run -w random:ops=0 -s raw --device sim
refuse "-w WORKLOAD and -s STRATEGY are required" run -s raw --device sim
refuse "--frobnicate" run -w random -s raw --frobnicate
refuse "--format 'xml'" run -w random -s raw --device sim --format xml
refuse "--faults" run -w random -s raw --device sim --faults rate=2
refuse "fault injection works on the simulated device only" run -w random -s raw --device cuda --faults nth=1
refuse "/no/such/trace.csv" run -w replay:/no/such/trace.csv -s raw --device sim
refuse "unknown command 'frobnicate'" frobnicate

# Help on every command, and the list.
for cmd in list run; do
  "$ab" $cmd --help >"$work/out" 2>&1 || fail "$cmd --help exited $?"
  grep -q "usage: allocbench $cmd" "$work/out" || fail "$cmd --help shows no usage"
done
"$ab" --help >/dev/null || fail "--help exited $?"
"$ab" list >"$work/out" || fail "list exited $?"
for name in raw pooled async random replay dynamic-shapes cnn-dynamic mixed-precision zero fragmenter h200 a100-40gb; do
  grep -qw "$name" "$work/out" || fail "list does not show $name"
done
[ "$("$ab" list --strategies | head -n 1)" = raw ] || fail "list --strategies does not start with raw"

# A run prints its row and appends it; a second run appends another.
out="$work/results"
"$ab" run -w random:ops=3000 -s raw --device sim --out "$out" --format csv >"$work/csv" 2>"$work/err" || fail "run exited $?"
[ "$(wc -l <"$work/csv")" -eq 2 ] || fail "--format csv printed $(wc -l <"$work/csv") lines"
head -n 1 "$work/csv" | grep -q '^workload,strategy,conf,device,budget_bytes,seed,events,status,oom_kind,oom_event,peak_requested_bytes' ||
  fail "unexpected header: $(head -n 1 "$work/csv")"
grep -q '^random:ops=3000,raw,,sim:h200,0,42,' "$work/csv" || fail "unexpected row: $(tail -n 1 "$work/csv")"
"$ab" run -w random:ops=3000 -s pooled --device sim --out "$out" --quiet >"$work/table" || fail "table run exited $?"
grep -q '^peak_reserved_bytes' "$work/table" || fail "the table does not show peak_reserved_bytes"
[ "$(wc -l <"$out/summary.csv")" -eq 3 ] || fail "summary.csv has $(wc -l <"$out/summary.csv") lines, expected 3"
[ -s "$out/timeline_random_ops_3000_raw.csv" ] || fail "no timeline file"
head -n 1 "$out/timeline_random_ops_3000_raw.csv" | grep -q '^event,step,requested,allocated,reserved$' || fail "timeline header"

# --device auto says which device it chose.
"$ab" run -w random:ops=100 -s raw --out "$out" >/dev/null 2>"$work/err" || fail "auto run exited $?"
grep -q -- "--device auto: using" "$work/err" || fail "auto does not say which device: $(cat "$work/err")"

# An OOM is a result: exit 0, status oom, the kind and the event recorded.
"$ab" run -w random:ops=3000 -s raw --device sim --budget 64MiB --out "$out" --format csv >"$work/csv" 2>"$work/err" ||
  fail "an OOM run exited $?"
tail -n 1 "$work/csv" | grep -q ',oom,capacity,' || fail "OOM row: $(tail -n 1 "$work/csv")"

# A workload's suggested budget applies when --budget is absent, and is said; --budget wins.
"$ab" run -w fragmenter -s raw --device sim --out "$out" --format csv >"$work/csv" 2>"$work/err" ||
  fail "fragmenter run exited $?"
grep -q '^fragmenter,raw,,sim:h200,301989888,' "$work/csv" || fail "suggested budget not applied: $(tail -n 1 "$work/csv")"
grep -q "no --budget: fragmenter runs under its suggested 288.00 MiB" "$work/err" || fail "not said: $(cat "$work/err")"
"$ab" run -w fragmenter -s raw --device sim --budget 1GiB --out "$out" --format csv >"$work/csv" 2>"$work/err" ||
  fail "fragmenter run exited $?"
grep -q '^fragmenter,raw,,sim:h200,1073741824,' "$work/csv" || fail "--budget did not win: $(tail -n 1 "$work/csv")"

# JSON parses.
"$ab" run -w random:ops=300 -s async --device sim --out "$out" --format json >"$work/json" || fail "json run exited $?"
if command -v python3 >/dev/null; then
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r[0]["strategy"]=="async" and r[0]["status"]=="ok"' "$work/json" ||
    fail "JSON does not parse: $(cat "$work/json")"
fi

if [ $failures -gt 0 ]; then
  echo "$failures failures"
  exit 1
fi
echo "cli_test: all passed"
