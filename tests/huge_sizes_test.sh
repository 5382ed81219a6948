#!/usr/bin/env bash
# huge_sizes_test.sh ALLOCBENCH: a trace may carry any size up to 2^64 - 1. A CSV trace with
# two allocations of 2^63 bytes live together and one of 2^64 - 1 replays through every
# strategy without a sanitizer's report or a crash, to an OOM (a result, exit 0); oracle,
# which cannot plan sizes that add up past 2^64 - 1, says so in its OOM with the sizes, not
# "out of host memory". The sanitized build (SANITIZE=1) runs it with UBSan, which stops at
# the first overflow.
set -u
ab=${1:?usage: huge_sizes_test.sh ALLOCBENCH}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
trace=$work/huge.csv
{
  echo "action,addr,size,stream,time_us"
  echo "alloc,4096,9223372036854775808,0,1"
  echo "alloc,8192,9223372036854775808,0,2"
  echo "alloc,12288,18446744073709551615,0,3"
  echo "free_requested,4096,9223372036854775808,0,4"
  echo "free_completed,4096,9223372036854775808,0,5"
  echo "alloc,16384,1024,0,6"
} >"$trace"
# Every strategy of the registry (pluggable, which needs a library, is not among them).
strategies=$("$ab" list --strategies) || fail "allocbench list --strategies failed"
[ -n "$strategies" ] || fail "allocbench list --strategies listed no strategy"
for s in $strategies; do
  "$ab" replay "$trace" -s "$s" --device sim:h200 --format csv --out "$work/out" >"$work/stdout" 2>"$work/stderr"
  rc=$?
  if grep -qE "runtime error|AddressSanitizer|LeakSanitizer" "$work/stderr"; then
    fail "$s: a sanitizer's report: $(head -5 "$work/stderr")"
    continue
  fi
  status=$(awk -F, 'NR == 2 { print $9 }' "$work/stdout")
  [ "$rc:$status" = 0:oom ] || fail "$s: exit $rc, status '$status': $(cat "$work/stderr")"
  if [ "$s" = oracle ]; then
    grep -qF "no plan: oracle: the 4 allocations to plan ask more than 2^64 - 1 bytes together (the largest 18446744073709551615 bytes)" \
      "$work/stderr" || fail "oracle: its OOM does not say why there was no plan: $(cat "$work/stderr")"
  fi
  grep -q "out of host memory" "$work/stderr" && fail "$s: 'out of host memory' for sizes past any card"
done
finish huge_sizes_test
