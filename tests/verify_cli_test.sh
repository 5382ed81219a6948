#!/usr/bin/env bash
# verify_cli_test.sh ALLOCBENCH: --verify, --no-kernels and the timing columns from the
# command line, on the simulated card.
set -u
ab=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The broken strategy is caught: exit 1 and a line naming both allocations.
if "$ab" run -w random:ops=3000 -s overlap --device sim --verify --out "$out" -q >"$out/stdout" 2>"$out/stderr"; then
  fail "overlap --verify exited 0"
fi
grep -Eq 'verify: id [0-9]+ at \[0x[0-9a-f]+, \+[0-9]+\) overlaps id [0-9]+ at \[0x[0-9a-f]+, \+[0-9]+\), which is live' "$out/stderr" ||
  fail "overlap --verify: no verify message in: $(cat "$out/stderr")"
grep -q '^status *error$' "$out/stdout" || fail "overlap --verify: the row does not say error"

# A real strategy passes, and so does the broken one without --verify.
"$ab" run -w random:ops=3000 -s pooled --device sim --verify --out "$out" -q >/dev/null || fail "pooled --verify failed"
"$ab" run -w random:ops=3000 -s overlap --device sim --out "$out" -q >/dev/null || fail "overlap without --verify failed"

# Hidden from users.
"$ab" list | grep -q overlap && fail "overlap is listed"
"$ab" list --strategies | grep -q overlap && fail "overlap is in the strategy names"

# The timing columns come before nccl_bytes, peak_footprint_bytes, live_peak_bytes and the plan
# columns, which close the header, and every row has them.
head -n 1 "$out/summary.csv" | grep -q ',step_ms_p50,kernel_ms_total,harness_ns_per_event,nccl_bytes,peak_footprint_bytes,live_peak_bytes,plan_hits,plan_misses,plan_bytes,peak_reserved_low,peak_reserved_high,device_allocs_low,device_allocs_high$' ||
  fail "summary.csv header: $(head -n 1 "$out/summary.csv")"
awk -F, 'NR > 1 && $(NF-7) !~ /^[0-9.]+$/ { bad = 1 } END { exit bad }' "$out/summary.csv" || fail "kernel_ms_total not numeric"
# The live peak is the workload's: a run that went to its end requested exactly that much at
# its peak, and held no less (overlap, broken on purpose, holds less).
awk -F, 'NR == 1 { for (c = 1; c <= NF; c++) col[$c] = c; next }
         $col["status"] == "ok" && $col["strategy"] != "overlap" && ($col["peak_requested_bytes"] != $col["live_peak_bytes"] || $col["peak_reserved_bytes"] < $col["live_peak_bytes"] || $col["live_peak_bytes"] == 0) { bad = 1 }
         END { exit bad }' "$out/summary.csv" || fail "live_peak_bytes is not the peak requested of an ok run"

# --no-kernels is taken; --help mentions both options.
"$ab" run -w random:ops=100 -s raw --device sim --no-kernels --out "$out" -q >/dev/null || fail "--no-kernels refused"
"$ab" run --help | grep -q -- '--verify' || fail "--verify not in --help"
"$ab" run --help | grep -q -- '--no-kernels' || fail "--no-kernels not in --help"

[ "$failures" -eq 0 ] && echo "ok" || exit 1
