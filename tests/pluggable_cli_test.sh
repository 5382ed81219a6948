#!/usr/bin/env bash
# pluggable_cli_test.sh ALLOCBENCH CC SOURCE_DIR PLUGINS_DIR TEST_PLUGINS_DIR DATA_DIR:
# -s pluggable:PATH on the command line.
#   1. The acceptance: a library built here with `cc -shared -fPIC` from a file that declares
#      cudaMalloc and cudaFree itself (strategies/plugins/malloc_each.c: no CUDA header, no CUDA library)
#      gives on --device sim exactly raw's status, OOM event, peak reserved bytes and device
#      allocation and free counts, on every workload, with and without --budget (and with
#      injected faults); so does the build's copy linked against libcudart.so, where there is one.
#   2. Every command takes it: run, replay, oom (raw's smallest budget), compare, matrix.
#   3. Bad libraries and bad names: one line on stderr, a non-zero exit.
set -u
ab=${1:?usage: pluggable_cli_test.sh ALLOCBENCH CC SOURCE_DIR PLUGINS_DIR TEST_PLUGINS_DIR DATA_DIR}
cc=$2
src=$3
plugins=$4
test_plugins=$5
data=${6:?usage: pluggable_cli_test.sh ALLOCBENCH CC SOURCE_DIR PLUGINS_DIR TEST_PLUGINS_DIR DATA_DIR}
source "$(dirname "$0")/lib.sh"

# ---- 1. the acceptance ---------------------------------------------------------------------

lib=$work/libeach.so
"$cc" -shared -fPIC -o "$lib" "$src/strategies/plugins/malloc_each.c" || fail "cc -shared -fPIC strategies/plugins/malloc_each.c exited $?"
nm -D --undefined-only "$lib" | grep -qw cudaMalloc || fail "the library does not leave cudaMalloc undefined"
nm -D --undefined-only "$lib" | grep -qw cudaFree || fail "the library does not leave cudaFree undefined"
if readelf -d "$lib" | grep NEEDED | grep -qi cuda; then fail "the library links a CUDA library"; fi

cols="status oom_kind oom_event peak_requested_bytes peak_allocated_bytes peak_reserved_bytes num_device_alloc num_device_free num_ooms num_alloc_retries"

# row WORKLOAD STRATEGY ARGS...: the compared columns of one run on sim, "col=value ...".
row() {
  local w=$1 s=$2
  shift 2
  "$ab" run -w "$w" -s "$s" --device sim --format csv --no-timeline -q --out "$work/rows" "$@" 2>>"$work/row.err" |
    awk -F, -v want="$cols" 'NR == 1 { for (i = 1; i <= NF; i++) idx[$i] = i; next }
      { n = split(want, c, " "); for (j = 1; j <= n; j++) printf "%s=%s ", c[j], $(idx[c[j]]); print "" }'
}

# value ROW COLUMN
value() { tr ' ' '\n' <<<"$1" | awk -F= -v k="$2" '$1 == k { print $2 }'; }

workloads="dynamic-shapes cnn-dynamic mixed-precision zero random fragmenter replay:$data/pytorch-2.11-h200/cnn_dyn.default.trace.csv.gz"
libraries=$lib
[ -r "$plugins/libmalloc_each_cudart.so" ] && libraries="$libraries $plugins/libmalloc_each_cudart.so"
ooms=0
for w in $workloads; do
  free_run=$(row "$w" raw)
  peak=$(value "$free_run" peak_reserved_bytes)
  [ -n "$peak" ] && [ "$peak" -gt 0 ] || { fail "$w: raw gave no peak ($free_run)"; continue; }
  # Three runs each: no budget; 60% of raw's peak, where raw runs out; injected device failures.
  for args in "" "--budget $((peak * 6 / 10))" "--faults rate=0.02,seed=5"; do
    want=$(row "$w" raw $args)
    case "$(value "$want" status)" in ok | oom) ;; *) fail "$w $args: raw: $want" ;; esac
    [ "$(value "$want" status)" = oom ] && ooms=$((ooms + 1))
    for l in $libraries; do
      got=$(row "$w" "pluggable:$l" $args)
      [ "$got" = "$want" ] || fail "$w $args: pluggable:$(basename "$l") differs from raw:
    raw:       $want
    pluggable: $got"
    done
  done
done
[ "$ooms" -ge 6 ] || fail "only $ooms of the budgeted and faulty runs of raw ran out of memory: the comparison says little"
[ -s "$work/row.err" ] && fail "the runs said: $(head -3 "$work/row.err")"

# ---- 2. every command ---------------------------------------------------------------------

p=pluggable:$lib
"$ab" list >"$work/list" || fail "list exited $?"
grep -q "pluggable:PATH\[:ALLOC_FN:FREE_FN\]" "$work/list" || fail "list does not show pluggable:PATH"

printf 'action,addr,size,stream,time_us\nalloc,4096,1000000,0,1\nalloc,8192000,3000000,1,2\nfree_completed,4096,1000000,0,3\nalloc,4096,500000,0,4\nfree_completed,4096,500000,0,5\nfree_completed,8192000,3000000,1,6\n' >"$work/trace.csv"
"$ab" replay "$work/trace.csv" -s "$p" --device sim --format csv -q --out "$work/replay" >"$work/replay.csv" ||
  fail "replay exited $?"
grep -q ",ok,none,-1,4000000,4000000,4000000," "$work/replay.csv" || fail "replay: $(tail -1 "$work/replay.csv")"

# replay's exports of a library's run: recorded in the library's own process, and what raw's
# are (the time stamps aside): every alloc, free and segment decision, at the same addresses.
trace=$data/pytorch-2.11-h200/cnn_dyn.default.trace.csv.gz
for s in raw "$p"; do
  name=$([ "$s" = raw ] && echo raw || echo lib)
  "$ab" replay "$trace" -s "$s" --device sim -q --no-timeline --out "$work/exports" --export-trace "$work/export.$name.csv" \
    --export-snapshot "$work/export.$name.pickle" >/dev/null 2>"$work/export.err" || fail "replay -s $s with exports exited $?: $(cat "$work/export.err")"
done
[ "$(wc -l <"$work/export.lib.csv")" -gt 1000 ] || fail "the library's exported trace is short: $(wc -l <"$work/export.lib.csv") lines"
cmp -s <(cut -d, -f1-4 "$work/export.raw.csv") <(cut -d, -f1-4 "$work/export.lib.csv") ||
  fail "the library's exported trace is not raw's: $(diff <(cut -d, -f1-4 "$work/export.raw.csv") <(cut -d, -f1-4 "$work/export.lib.csv") | head -3)"
for name in raw lib; do
  "$ab" replay "$work/export.$name.pickle" --info --format csv >"$work/info.$name" 2>/dev/null || fail "the $name snapshot does not read back"
done
peak() { awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i } NR == 2 { print $c["peak_reserved_bytes"], $c["device_allocs"] }' "$1"; }
[ -n "$(peak "$work/info.lib")" ] && [ "$(peak "$work/info.lib")" = "$(peak "$work/info.raw")" ] ||
  fail "the library's exported snapshot ($(peak "$work/info.lib")) is not raw's ($(peak "$work/info.raw"))"

# The smallest budget: raw's, to the byte.
"$ab" oom -w random:ops=4000 -s raw,"$p" --device sim --format csv -q --out "$work/oom" >"$work/oom.csv" 2>/dev/null ||
  fail "oom exited $?"
budgets=$(awk -F, 'NR > 1 { print $5 }' "$work/oom.csv" | sort -u)
[ "$(wc -l <"$work/oom.csv")" -eq 3 ] && [ "$(wc -w <<<"$budgets")" -eq 1 ] ||
  fail "oom: raw and the library differ: $(cat "$work/oom.csv")"

"$ab" compare -w random:ops=3000 -s raw,"$p" --device sim -q --out "$work/compare" >"$work/compare.txt" 2>&1 ||
  fail "compare exited $?: $(tail -2 "$work/compare.txt")"
grep -q "libeach.so" "$work/compare.txt" || fail "compare does not show the library"
# A library that crashes is a row of the comparison, its status error, beside the others'.
crash="pluggable:$test_plugins/libhostile.so:my_malloc:segv_free"
"$ab" compare -w random:ops=400 -s raw,"$crash",caching --device sim --format csv --out "$work/compare_crash" \
  >"$work/compare_crash.csv" 2>"$work/compare_crash.err"
rc=$?
[ $rc -eq 1 ] || fail "compare with a crashing library exited $rc: $(cat "$work/compare_crash.err")"
statuses=$(awk -F, 'NR > 1 { print $5 }' "$work/compare_crash/compare.csv" | tr '\n' ' ')
[ "$statuses" = "ok error ok " ] || fail "compare.csv with a crashing library: $(cat "$work/compare_crash/compare.csv")"

"$ab" matrix -w random:ops=3000 -w zero:steps=2 -s raw,"$p" --device sim -q --out "$work/matrix" >/dev/null 2>"$work/matrix.err" ||
  fail "matrix exited $?: $(head -2 "$work/matrix.err")"
# A library deep in folders: the table names it by its file and stays within 120 columns.
deep=$work/a-folder-of-allocators/built-for-this-job/with-a-long-name/and-another-level/plugins
mkdir -p "$deep" && cp "$lib" "$deep/libeach.so"
"$ab" matrix -w random:ops=3000 -s raw,"pluggable:$deep/libeach.so" --device sim -q --out "$work/deep" >"$work/deep.txt" \
  2>"$work/deep.err" || fail "matrix with a deep path exited $?: $(head -2 "$work/deep.err")"
grep -q "^libeach.so " "$work/deep.txt" || fail "matrix does not name the library by its file: $(cat "$work/deep.txt")"
awk 'length($0) > 120 { print "FAIL: wider than 120 columns: " $0; bad = 1 } END { exit bad }' "$work/deep.txt" ||
  fail "matrix's table is too wide with a deep path"
grep -qF ",pluggable:$deep/libeach.so," "$work/deep/summary.csv" || fail "summary.csv does not keep the whole name"
for f in summary.csv oom.csv; do
  n=$(awk -F, -v lib="$p" 'NR > 1 && $2 == lib' "$work/matrix/$f" | wc -l)
  [ "$n" -eq 2 ] || fail "matrix: $n rows of the library in $f"
done
# Its rows, as raw's, strategy aside (the wall clock and the times per call aside too).
strip() { awk -F, -v s="$2" 'NR > 1 && $2 == s { $2 = ""; print $1, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16 }' "$1"; }
[ "$(strip "$work/matrix/summary.csv" raw)" = "$(strip "$work/matrix/summary.csv" "$p")" ] ||
  fail "matrix: the library's rows differ from raw's"
[ "$(awk -F, 'NR > 1 { print $1, $5 }' "$work/matrix/oom.csv" | sort | uniq | wc -l)" -eq 2 ] ||
  fail "matrix: the smallest budgets differ: $(cat "$work/matrix/oom.csv")"

# tune ranks the library beside the settings, for reference: raw's figures, never the
# recommendation; caching is what tune searches, and a library that cannot load is refused.
"$ab" tune -w random:ops=3000 -s "$p" --device sim -q --jobs 2 --format csv --out "$work/tune" >"$work/tune.csv" 2>"$work/tune.err" ||
  fail "tune exited $?: $(head -2 "$work/tune.err")"
row() { awk -F, -v s="$1" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i }
  NR > 1 && $c["strategy"] == s { print $c["peak_reserved_bytes"], $c["min_budget_bytes"], $c["num_device_alloc"], $c["recommended"] }' "$work/tune.csv"; }
[ -n "$(row "$p")" ] || fail "tune: no row of the library: $(cut -d, -f1-4 "$work/tune.csv")"
[ "$(row "$p")" = "$(row raw)" ] || fail "tune: the library's row ($(row "$p")) is not raw's ($(row raw))"
refuse "tune searches the caching allocator's settings itself" tune -w random:ops=3000 -s caching --device sim
refuse "expandable" tune -w random:ops=3000 -s expandable --device sim
refuse "nosuch.so" tune -w random:ops=3000 -s "pluggable:$work/nosuch.so" --device sim

# The example pool, with its hooks, through a run that empties the cache and a capped search.
# Ten steps of the workload reach every line of the pool that its default forty do, in a
# quarter of the time (--check looks at the pool after every event).
hooks=init:pool_init,reset:pool_reset,memory_fraction:pool_memory_fraction,record_stream:pool_record_stream
"$ab" run -w dynamic-shapes:steps=10 -s "pluggable:$plugins/libsmall_pool.so" -c "$hooks" --device sim --check -q --out "$work/pool" \
  >/dev/null 2>"$work/pool.err" || fail "the pool with --check exited $?: $(head -2 "$work/pool.err")"
"$ab" oom -w random:ops=3000 -s "pluggable:$plugins/libsmall_pool.so" -c "$hooks" --search cap --device sim -q \
  --out "$work/pool" >/dev/null 2>"$work/pool.err" || fail "oom --cap of the pool exited $?: $(head -2 "$work/pool.err")"

# ---- 3. refusals ----------------------------------------------------------------------------

refuse "pluggable: cannot load $src/README.md: invalid ELF header" run -w random -s "pluggable:$src/README.md" --device sim
refuse "pluggable: /no/such.so: No such file or directory" run -w random -s pluggable:/no/such.so --device sim
refuse "exports no function 'nosuch' (name the functions" run -w random -s "$p:nosuch:my_free" --device sim
refuse "calls cudaGraphLaunch, which the simulated card does not provide" run -w random \
  -s "pluggable:$test_plugins/libimports_graph.so" --device sim
refuse "exports no function 'my_init' (-c init:FN)" run -w random -s "$p" -c init:my_init --device sim
refuse "expected pluggable:PATH or pluggable:PATH:ALLOC_FN:FREE_FN" run -w random -s pluggable:a:b --device sim
for cmd in oom compare matrix; do
  refuse "pluggable: cannot load $src/README.md" $cmd -w random -s "raw,pluggable:$src/README.md" --device sim
done
refuse "--cap: $p has no memory cap" oom -w random -s "$p" --device sim --search cap
# The ranks share allocbench's process; a library runs in one of its own.
refuse "--ranks: -s $p: a library runs in a process of its own, and the ranks share this one" \
  run -w zero:steps=2 -s "$p" --ranks 2 --device sim
# A CUDA runtime loaded with the program would take the library's calls: refused, not run on
# the real runtime, naming the first of its calls the linker listed. (Not under AddressSanitizer,
# whose runtime must come first.)
cudart=$(ldd "$plugins/libmalloc_each_cudart.so" 2>/dev/null | awk '/libcudart/ { print $3 }')
if [ -n "$cudart" ] && ! ldd "$ab" | grep -q libasan; then
  LD_PRELOAD=$cudart refuse "would reach $cudart, not allocbench's device" run -w random -s "$p" --device sim
fi

# A library that fails during the run: the run's error, one line, exit 1.
"$ab" run -w random -s "pluggable:$test_plugins/libmisbehaving.so:null_alloc:my_free" --device sim -q \
  --out "$work/bad" >/dev/null 2>"$work/err"
rc=$?
[ $rc -eq 1 ] || fail "a NULL that is no OOM: exit $rc"
[ "$(wc -l <"$work/err")" -eq 1 ] || fail "a NULL that is no OOM: $(wc -l <"$work/err") lines on stderr"
grep -q "null_alloc(.*) returned NULL without running out of memory" "$work/err" ||
  fail "a NULL that is no OOM: $(cat "$work/err")"

finish pluggable_cli_test
