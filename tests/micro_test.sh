#!/usr/bin/env bash
# micro_test.sh MICRO ALLOCBENCH: a smoke test of the micro-benchmarks. A short run of the
# random benchmarks must cover every strategy of `allocbench list`, name them
# WORKLOAD/STRATEGY/ARGS, and leave a CSV converted from the JSON; bad options are refused.
set -u
micro=${1:?usage: micro_test.sh MICRO ALLOCBENCH}
ab=${2:?usage: micro_test.sh MICRO ALLOCBENCH}
source "$(dirname "$0")/lib.sh"
quick=(--benchmark_min_time=0.01 --device sim)

"$micro" "${quick[@]}" --benchmark_filter=random --out "$work/r" >"$work/out" 2>"$work/err"
rc=$?
[ $rc -eq 0 ] || fail "random run exited $rc: $(cat "$work/err")"
[ -s "$work/r/micro.json" ] || fail "no micro.json"
# A library built as DEBUG (Debian's) warns; the note says what that warning does not touch.
if grep -q '"library_build_type": "debug"' "$work/r/micro.json"; then
  grep -q 'note: "Library was built as DEBUG" is Google Benchmark speaking of its own build' "$work/err" ||
    fail "the DEBUG warning is left unexplained: $(cat "$work/err")"
fi
csv="$work/r/micro.csv"
if [ ! -s "$csv" ]; then
  fail "no micro.csv"
else
  head -n 1 "$csv" | grep -q '^name,workload,strategy,args,device,' || fail "micro.csv header: $(head -n 1 "$csv")"
  for s in $("$ab" list --strategies); do
    row=$(awk -F, -v s="$s" '$2 == "random" && $3 == s' "$csv")
    [ -n "$row" ] || fail "no random row for strategy $s"
    case "$row" in
      random/"$s"/ops:*",sim:"*) ;;
      *) fail "row for $s is not random/$s/ops:N on sim: $row" ;;
    esac
    err=$(echo "$row" | cut -d, -f8)
    [ -z "$err" ] || fail "random/$s failed: $err"
  done
  n=$(($(wc -l <"$csv") - 1))
  m=$("$ab" list --strategies | wc -l)
  [ "$n" -eq "$m" ] || fail "$n rows for $m strategies (the filter selects random only)"
fi

# A filter picks single benchmarks by name; a missing trace drops only the replay ones.
"$micro" "${quick[@]}" --trace "$work/none.csv" '--benchmark_filter=^alloc_free/raw/bytes:512/' >"$work/out" 2>"$work/err" ||
  fail "alloc_free/raw/bytes:512 exited $?: $(cat "$work/err")"
grep -q '^alloc_free/raw/bytes:512/manual_time ' "$work/out" || fail "alloc_free/raw/bytes:512 not run: $(cat "$work/out")"
grep -q 'no replay benchmarks' "$work/err" || fail "a missing trace is not reported"

# refuse RC "WHAT STDERR SAYS" ARGS...
refuse() {
  local want=$1 says=$2
  shift 2
  "$micro" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  [ $rc -eq "$want" ] || fail "$* exited $rc, expected $want"
  grep -qF -- "$says" "$work/err" || fail "$*: stderr does not say '$says': $(cat "$work/err")"
}
refuse 2 "bad option '--frobnicate'" --frobnicate
refuse 2 "bad option '--budget'" --budget 1GiB
refuse 2 "--device 'tpu'" --device tpu
refuse 2 "--out writes DIR/micro.json itself" --out "$work/x" --benchmark_out=x.json
refuse 1 "no benchmark matched" "${quick[@]}" --benchmark_filter=nosuchbenchmark

finish micro_test
