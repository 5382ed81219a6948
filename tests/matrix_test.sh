#!/usr/bin/env bash
# matrix_test.sh ALLOCBENCH DATA_DIR: `allocbench matrix`. Every strategy meets every
# workload of the list, one summary row and one timeline each; --quick shortens a workload
# but the user's arguments win; the default list is the bench list as far as this build has
# it, with the recorded trace of DATA_DIR; bad input is refused before anything runs.
set -u
ab=${1:?usage: matrix_test.sh ALLOCBENCH DATA_DIR}
data=${2:?usage: matrix_test.sh ALLOCBENCH DATA_DIR}
source "$(dirname "$0")/lib.sh"
rows() { echo $(($(wc -l <"$1") - 1)); }
strategies=$("$ab" list --strategies)
nstrat=$(echo "$strategies" | wc -l)

# Two workloads, every strategy.
"$ab" matrix --device sim -w random:ops=3000 -w random:ops=2000,dist=lognormal --out "$work/a" >"$work/out" 2>"$work/err" ||
  fail "matrix exited $?: $(cat "$work/err")"
[ "$(rows "$work/a/summary.csv")" -eq $((2 * nstrat)) ] || fail "$(rows "$work/a/summary.csv") rows, expected $((2 * nstrat))"
for s in $strategies; do
  [ -s "$work/a/timeline_random_ops_3000_$s.csv" ] || fail "no timeline for random:ops=3000 and $s"
  [ -s "$work/a/timeline_random_ops_2000_dist_lognormal_$s.csv" ] || fail "no timeline for the lognormal run and $s"
  sed -n '/^random:ops=3000: live peak [0-9.]* MiB$/,/^$/p' "$work/out" | grep -qE "^$s +ok +[0-9.]+ MiB\*? +[0-9.]+ MiB\*? " ||
    fail "the table of random:ops=3000 has no ok row for $s with its smallest budget: $(cat "$work/out")"
done
grep -q "$((2 * nstrat)) runs (2 workloads x $nstrat strategies)" "$work/out" || fail "no closing line: $(tail -n 1 "$work/out")"
# For people, 120 columns; the CSV has the wide form (cmd_matrix.c, Note [The matrix for people]).
awk 'length($0) > 120 { print "FAIL: wider than 120 columns: " $0; bad = 1 } END { exit bad }' "$work/out" || fail "matrix's table is too wide"
# Each pair's smallest budget is searched: a row in oom.csv, a map of the failing probe.
[ "$(rows "$work/a/oom.csv")" -eq $((2 * nstrat)) ] || fail "$(rows "$work/a/oom.csv") rows in oom.csv, expected $((2 * nstrat))"
grep -q '^random:ops=3000,raw,,[^,]*,[0-9][0-9]*,[0-9][0-9]*,' "$work/a/oom.csv" || fail "raw's search: $(cat "$work/a/oom.csv")"
[ -s "$work/a/oommap_random_ops_3000_pooled.csv" ] || fail "no segment map of pooled's failing probe"

# --quick takes the workload's short arguments; the user's arguments come after and win.
"$ab" matrix --device sim -s raw --quick -w random -w random:ops=500 --format csv --out "$work/q" >"$work/out" 2>"$work/err" ||
  fail "--quick exited $?: $(cat "$work/err")"
# workload,strategy,conf,device,budget_bytes,seed,events: the events of 20000 and 500 ops, plus steps.
grep -q '^random:ops=20000,raw,,[^,]*,0,42,200[0-9][0-9],' "$work/q/summary.csv" ||
  fail "--quick did not shorten random: $(cat "$work/q/summary.csv")"
grep -q '^random:ops=500,raw,,[^,]*,0,42,50[0-9],' "$work/q/summary.csv" ||
  fail "the user's ops did not win: $(cat "$work/q/summary.csv")"
head -n 1 "$work/out" | grep -q '^workload,strategy,conf,device,' || fail "--format csv printed no header"

# The default list: the bench workloads this build has, and the recorded trace.
"$ab" matrix --device sim --quick -q -s raw --out "$work/d" >"$work/out" 2>"$work/err" || fail "default matrix exited $?: $(cat "$work/err")"
expected=0
for w in dynamic-shapes cnn-dynamic mixed-precision zero random fragmenter; do
  "$ab" list --workloads | grep -qx "$w" && expected=$((expected + 1))
done
expected=$((expected + 1))
[ "$(rows "$work/d/summary.csv")" -eq $expected ] || fail "default list: $(rows "$work/d/summary.csv") rows, expected $expected"
[ -f "$data/pytorch-2.11-h200/cnn_dyn.default.trace.csv.gz" ] || fail "no recorded trace in $data"
grep -q "^replay:cnn_dyn.default.trace.csv.gz,raw," "$work/d/summary.csv" ||
  fail "the default list did not replay the recorded trace: $(cut -d, -f1 "$work/d/summary.csv")"

# A long workload spec is whole in summary.csv, and whole above its table, which it leaves narrow.
long="random:ops=1000,max_live=100,dist=lognormal,min=1KiB,max=4MiB,median=64KiB,sigma=1.5,step_ops=100"
"$ab" matrix --device sim -s raw -w "$long" --out "$work/long" >"$work/out" 2>/dev/null || fail "a long spec exited $?"
grep -qF "\"$long\",raw," "$work/long/summary.csv" || fail "summary.csv cut the spec: $(cut -c1-120 "$work/long/summary.csv")"
grep -qxF "$long: live peak $(sed -n 's/^.*live peak //p' "$work/out")" "$work/out" && grep -qE '^raw +ok ' "$work/out" ||
  fail "the long spec is not whole above its table: $(cat "$work/out")"

# -c goes with exactly one strategy, and reaches it.
"$ab" matrix --device sim -s pooled -c chunk:4MiB -w random:ops=1000 -q --out "$work/c" >/dev/null 2>"$work/err" ||
  fail "-c with one strategy exited $?: $(cat "$work/err")"
grep -q ',pooled,chunk:4MiB,' "$work/c/summary.csv" || fail "-c did not reach the row"
# One -c per strategy, in the order of -s, as `allocbench oom` takes them.
"$ab" matrix --device sim -s raw,pooled -c '' -c chunk:8MiB -w random:ops=1000 -q --out "$work/c2" >/dev/null 2>"$work/err" ||
  fail "one -c per strategy exited $?: $(cat "$work/err")"
grep -q ',raw,,' "$work/c2/summary.csv" && grep -q ',pooled,chunk:8MiB,' "$work/c2/summary.csv" ||
  fail "the -c of each strategy did not reach its row: $(cat "$work/c2/summary.csv")"

# Refusals of the matrix on the simulated card (refuse: lib.sh).
refuse_matrix() { refuse "$1" matrix --device sim "${@:2}"; }
refuse_matrix "unknown workload 'nosuch'" -w random -w nosuch
refuse_matrix "ops" -w random:ops=0
refuse_matrix "unknown strategy" -s raw,nosuch -w random
refuse_matrix "-c: name the strategies it is for with -s" -c chunk:4MiB -w random
refuse_matrix "unknown key 'chunk'" -s raw,pooled -c chunk:4MiB -w random
refuse_matrix "-c given 3 times for 2 strategies" -s raw,pooled -c '' -c '' -c '' -w random
refuse_matrix "chunk" -s pooled -c chunk:abc -w random
refuse_matrix "bad option '--frobnicate'" --frobnicate
refuse_matrix "unexpected argument 'extra'" -w random extra
refuse_matrix "no-such-trace.csv: cannot open" -w replay:"$work/no-such-trace.csv"
# Rows are known by the workload's name: one -w twice, or two traces of one file name, refused.
refuse_matrix "-w 'random:ops=300': its rows would be named random:ops=300, as an earlier -w's are" \
  -w random:ops=300 -w random:ops=300
mkdir -p "$work/jobA" "$work/jobB"
printf 'action,addr,size,stream,time_us\nalloc,4096,512,0,1\n' >"$work/jobA/trace.csv"
printf 'action,addr,size,stream,time_us\nalloc,4096,1024,0,1\n' >"$work/jobB/trace.csv"
refuse_matrix "its rows would be named replay:trace.csv, as an earlier -w's are" \
  -w "replay:$work/jobA/trace.csv" -w "replay:$work/jobB/trace.csv"

finish matrix_test
