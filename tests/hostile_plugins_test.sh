#!/usr/bin/env bash
# hostile_plugins_test.sh ALLOCBENCH TEST_PLUGINS_DIR PLUGINS_DIR: a library that takes its
# process down takes only its own run (supervise.h). Each plugin of tests/plugins/hostile.c,
# crash_on_load.c and stuck.c, and a truncated copy of an example plugin, through `run`: one
# line naming the library, the call and the signal, exit status, stop or deadline, exit 1,
# the CSV on stdout whole, an error row in summary.csv, nothing left running. One call past
# --plugin-timeout (in alloc, its constructor, its destructor, its destructor at exit), or
# as long without a call in allocbench's own code once it is loaded: killed within seconds. What a library prints reaches neither stdout nor stderr, but its last line
# is quoted when its run fails; what it writes into the descriptors it finds harms nothing,
# or fails its run saying so. A FIFO is refused as a library without waiting. A library in a
# loop, and one deaf to SIGTERM and SIGINT: stopped within 2 s of the signal, with a line,
# exit 143 or 130. A matrix with a crashing or a stopping library among its strategies
# records every other run; tune goes on past one; replay's exports are made where the
# library runs.
set -u
ab=${1:?usage: hostile_plugins_test.sh ALLOCBENCH TEST_PLUGINS_DIR PLUGINS_DIR}
hostile=$(cd "${2:?}" && pwd)/libhostile.so
on_load=$(dirname "$hostile")/libcrash_on_load.so
stuck=$(dirname "$hostile")/libstuck.so
each=$(cd "${3:?}" && pwd)/libmalloc_each.so
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
# A sanitized build's own handlers would turn the library's crash into an exit of their own.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0:handle_sigbus=0:handle_abort=0
unset AB_HOSTILE_AT AB_HOSTILE_READY AB_STUCK
wl=random:ops=4000

now_ms() { date +%s%3N; }

# crashes NAME SAYS ARGS...: `run` of the library fails: one line on stderr with SAYS, exit
# 1, the CSV on stdout whole (the header, then the run's row), the run's row with status
# error in summary.csv.
crashes() {
  local name=$1 says=$2
  shift 2
  rm -rf "$work/out.$name"
  "$ab" run -w "$wl" --device sim:h200 --quiet --no-timeline --format csv --out "$work/out.$name" "$@" \
    >"$work/stdout" 2>"$work/stderr"
  local rc=$?
  [ $rc -eq 1 ] || fail "$name: exit $rc, expected 1: $(cat "$work/stderr")"
  [ "$(wc -l <"$work/stderr")" -eq 1 ] || fail "$name: expected one line on stderr: $(cat "$work/stderr")"
  grep -qF -- "$says" "$work/stderr" || fail "$name: stderr does not say '$says': $(cat "$work/stderr")"
  csv_whole "$name" error
  grep -q ',error,' "$work/out.$name/summary.csv" 2>/dev/null || fail "$name: no error row in summary.csv"
}

# csv_whole NAME STATUS: stdout is the CSV of one run, its header first, its row of STATUS
# next, and nothing of the library's.
csv_whole() {
  head -n 1 "$work/stdout" | grep -q '^workload,strategy,' || fail "$1: stdout does not open with the header: $(head -c 300 "$work/stdout")"
  [ "$(wc -l <"$work/stdout")" -eq 2 ] || fail "$1: expected the header and one row on stdout: $(head -c 300 "$work/stdout")"
  sed -n 2p "$work/stdout" | grep -q ",$2," || fail "$1: the row on stdout is not $2: $(sed -n 2p "$work/stdout")"
  grep -q 'hostile:' "$work/stdout" && fail "$1: the library's output is on stdout"
}

crashes segv "pluggable:$hostile:segv_alloc:my_free crashed in alloc: SIGSEGV" -s "pluggable:$hostile:segv_alloc:my_free"
crashes abort "crashed in alloc: SIGABRT" -s "pluggable:$hostile:abort_alloc:my_free"
crashes exit "pluggable:$hostile:exit_alloc:my_free ended its process in alloc with exit status 0" \
  -s "pluggable:$hostile:exit_alloc:my_free"
crashes _exit "ended its process in alloc with exit status 3" -s "pluggable:$hostile:quick_exit_alloc:my_free"
crashes free "crashed in free: SIGSEGV" -s "pluggable:$hostile:my_malloc:segv_free"
crashes reset "crashed in reset: SIGSEGV" -s "pluggable:$hostile" -c reset:segv_reset

# A constructor that crashes, and a library cut short (its loader touches pages past the
# file's end: SIGBUS).
crashes on_load "pluggable:$on_load crashed in loading it (its constructors): SIGSEGV" -s "pluggable:$on_load"
head -c 6000 "$each" >"$work/libtruncated.so"
crashes truncated "pluggable:$work/libtruncated.so crashed in loading it (its constructors): SIGBUS" \
  -s "pluggable:$work/libtruncated.so"

# A library that sends allocbench SIGTERM (once each time it is loaded) stops no command: its
# run fails, saying so, and a matrix goes on with the rest.
AB_HOSTILE_AT=5 crashes sigterm "pluggable:$hostile:term_alloc:my_free sent SIGTERM (Terminated) to allocbench: killed" \
  -s "pluggable:$hostile:term_alloc:my_free"
AB_HOSTILE_AT=5 "$ab" matrix -w "$wl" --device sim:h200 --quiet --no-timeline -s "raw,pluggable:$hostile:term_alloc:my_free,caching" \
  --out "$work/matrix_term" >"$work/stdout" 2>"$work/stderr"
rc=$?
[ $rc -eq 1 ] || fail "matrix with a library sending SIGTERM: exit $rc, expected 1: $(cat "$work/stderr")"
grep -q "interrupted" "$work/stderr" && fail "matrix with a library sending SIGTERM: taken for a stop: $(cat "$work/stderr")"
for s in raw caching; do
  n=$(grep -c ",$s," "$work/matrix_term/summary.csv")
  [ "$n" -eq 1 ] || fail "matrix with a library sending SIGTERM: $n rows of $s in summary.csv, expected 1"
done

# What a library starts ends with its run, however the run ends: a process it forked that
# sleeps for 300 s is gone once allocbench exits (a zombie left to init has ended).
running() {
  local state
  state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) && [ "$state" != Z ]
}
none_left() {
  [ -s "$work/pids" ] || fail "$1: the library started no process"
  for p in $(cat "$work/pids" 2>/dev/null); do
    running "$p" && fail "$1: process $p that the library started outlived its run" && kill -9 "$p"
  done
  rm -f "$work/pids"
}
export AB_HOSTILE_PIDS=$work/pids
"$ab" run -w "$wl" --device sim:h200 --quiet --no-timeline --out "$work/out.fork" -s "pluggable:$hostile:fork_alloc:my_free" \
  >"$work/stdout" 2>"$work/stderr"
rc=$?
[ $rc -eq 0 ] || fail "fork: exit $rc: $(cat "$work/stderr")"
none_left fork
crashes fork_segv "pluggable:$hostile:fork_segv_alloc:my_free crashed in alloc: SIGSEGV" -s "pluggable:$hostile:fork_segv_alloc:my_free"
none_left fork_segv
unset AB_HOSTILE_PIDS

# A library that stops its process (raise(SIGSTOP), or SIGTTOU, which a write to the terminal
# from the background draws) is killed at once, saying how.
crashes sigstop "pluggable:$hostile:stop_alloc:my_free stopped its process in alloc: SIGSTOP" \
  -s "pluggable:$hostile:stop_alloc:my_free"
crashes sigttou "stopped its process in alloc: SIGTTOU" -s "pluggable:$hostile:ttou_alloc:my_free"

# late NAME SAYS ARGS...: as crashes, with --plugin-timeout 1: the run ends in 1 to 5 s.
late() {
  local name=$1 says=$2 t0 took
  shift 2
  t0=$(now_ms)
  crashes "$name" "$says" --plugin-timeout 1 "$@"
  took=$(($(now_ms) - t0))
  [ $took -ge 1000 ] && [ $took -le 5000 ] || fail "$name: took $took ms with --plugin-timeout 1"
}
late loop "pluggable:$hostile:loop_alloc:my_free did not return from alloc within 1 s (--plugin-timeout): killed" \
  -s "pluggable:$hostile:loop_alloc:my_free"
# A thread of the library that freezes the process in allocbench's own code between its
# calls (a signal handler that never returns): killed as a call that does not return is.
late freeze "pluggable:$hostile:freeze_alloc:freeze_free stalled its process in allocbench's code between or after its calls: no progress within 1 s (--plugin-timeout): killed" \
  -s "pluggable:$hostile:freeze_alloc:freeze_free"
AB_STUCK=load late stuck_load "pluggable:$stuck did not return from loading it (its constructors) within 1 s" \
  -s "pluggable:$stuck"
AB_STUCK=unload late stuck_unload "pluggable:$stuck did not return from unloading it (its destructors) within 1 s" \
  -s "pluggable:$stuck"
AB_STUCK=exit late stuck_exit "pluggable:$stuck did not return from ending its process (destructors at exit) within 1 s" \
  -s "pluggable:$stuck"
refuse "--plugin-timeout='0': expected seconds" run -w "$wl" -s raw --plugin-timeout 0

# What a library prints reaches neither allocbench's stdout, where the CSV stays whole, nor
# its stderr; when its run fails, the last line of it is quoted in the failure's.
"$ab" run -w "$wl" --device sim:h200 --quiet --no-timeline --format csv --out "$work/out.chatty" \
  -s "pluggable:$hostile:chatty_alloc:my_free" >"$work/stdout" 2>"$work/stderr"
rc=$?
[ $rc -eq 0 ] || fail "chatty: exit $rc: $(cat "$work/stderr")"
[ -s "$work/stderr" ] && fail "chatty: the library's output is on stderr: $(head -c 300 "$work/stderr")"
csv_whole chatty ok
crashes said "crashed in alloc: SIGSEGV (Segmentation fault); its last output: \"hostile: pool.c:42: carve: assertion 'block->size >= bytes' failed\"" \
  -s "pluggable:$hostile:said_segv_alloc:my_free"

# Writes into descriptors 3 to 9 reach nothing of allocbench's: the run is whole. A scan of
# every descriptor up to 1023 finds the results' own: the run fails, saying so.
"$ab" run -w "$wl" --device sim:h200 --quiet --no-timeline --format csv --out "$work/out.scribble" \
  -s "pluggable:$hostile:scribble_alloc:my_free" >"$work/stdout" 2>"$work/stderr"
rc=$?
[ $rc -eq 0 ] || fail "scribble: exit $rc: $(cat "$work/stderr")"
[ -s "$work/stderr" ] && fail "scribble: said something: $(cat "$work/stderr")"
csv_whole scribble ok
crashes scribble_all \
  "pluggable:$hostile:scribble_all_alloc:my_free wrote to a descriptor it does not own (allocbench's results: " \
  -s "pluggable:$hostile:scribble_all_alloc:my_free"
# Closing every descriptor, or putting /dev/null in their place, is said as what it is, not
# as an exit of the library's.
crashes close_all \
  "pluggable:$hostile:close_all_alloc:my_free closed or replaced a descriptor it does not own (allocbench's results)" \
  -s "pluggable:$hostile:close_all_alloc:my_free"
crashes null_all \
  "pluggable:$hostile:null_all_alloc:my_free closed or replaced a descriptor it does not own (allocbench's results)" \
  -s "pluggable:$hostile:null_all_alloc:my_free"
# The same with a pipe whose reader is gone on descriptor 9, as a make's jobserver or a
# script can leave one: allocbench's own inheritance never reaches the library (no SIGPIPE).
exec 9> >(true)
sleep 0.2
crashes scribble_all_inherited \
  "pluggable:$hostile:scribble_all_alloc:my_free wrote to a descriptor it does not own (allocbench's results: " \
  -s "pluggable:$hostile:scribble_all_alloc:my_free"
exec 9>&-

# A library that moves its process to / and sets its umask to 0777 changes nothing of the
# run's files: under the relative --out, with the user's umask.
name=out.wander.$$
rm -rf "/${name:?}"
mkdir "$work/cwd"
(cd "$work/cwd" && umask 022 && "$ab" run -w "$wl" --device sim:h200 --quiet --out "$name" \
  -s "pluggable:$hostile:wander_alloc:my_free") >"$work/stdout" 2>"$work/stderr"
rc=$?
[ $rc -eq 0 ] || fail "wander: exit $rc: $(cat "$work/stderr")"
[ -e "/$name" ] && fail "wander: the run wrote into /$name" && rm -rf "/${name:?}"
ls "$work/cwd/$name"/timeline_*.csv >/dev/null 2>&1 || fail "wander: no timeline under --out: $(ls -R "$work/cwd")"
[ "$(stat -c %a "$work/cwd/$name" 2>/dev/null)" = 755 ] || fail "wander: --out is mode $(stat -c %a "$work/cwd/$name" 2>&1)"
for f in "$work/cwd/$name"/*; do
  [ "$(stat -c %a "$f")" = 644 ] || fail "wander: $f is mode $(stat -c %a "$f"), expected 644 (umask 022)"
done

# A library named without a slash is the file in the working folder that was checked, never
# another that dlopen would find through LD_LIBRARY_PATH.
mkdir "$work/here" "$work/elsewhere"
cp "$each" "$work/here/libfoo.so"
cp "$on_load" "$work/elsewhere/libfoo.so"
(cd "$work/here" && LD_LIBRARY_PATH="$work/elsewhere" "$ab" run -w "$wl" --device sim:h200 --quiet --no-timeline \
  --format csv --out "$work/out.noslash" -s pluggable:libfoo.so) >"$work/stdout" 2>"$work/stderr"
rc=$?
[ $rc -eq 0 ] || fail "no slash: exit $rc: $(cat "$work/stderr")"
csv_whole noslash ok

# A FIFO is no library: refused at once, not opened to wait for a writer.
mkfifo "$work/lib.fifo"
timeout 20 "$ab" run -w "$wl" --device sim:h200 --quiet --no-timeline --out "$work/out.fifo" -s "pluggable:$work/lib.fifo" \
  >"$work/stdout" 2>"$work/stderr"
rc=$?
[ $rc -ne 124 ] || fail "fifo: allocbench waited on a FIFO given as a library"
[ $rc -ge 1 ] && [ $rc -le 2 ] || fail "fifo: exit $rc, expected 1 or 2: $(cat "$work/stderr")"
grep -qF "pluggable: $work/lib.fifo: not a file (a FIFO)" "$work/stderr" || fail "fifo: no line saying so: $(cat "$work/stderr")"

# stops NAME SIG WANT ALLOC: a library stuck in alloc, sent SIG: gone within 2 s with exit
# WANT and the line saying it was killed; no process of it left.
set -m # job control: a background job keeps SIGINT instead of starting with it ignored
stops() {
  local name=$1 sig=$2 want=$3 alloc=$4
  rm -f "$work/ready"
  AB_HOSTILE_READY=$work/ready "$ab" run -w "$wl" --device sim:h200 --quiet --no-timeline \
    -s "pluggable:$hostile:$alloc:my_free" --out "$work/out.$name" >"$work/stdout" 2>"$work/stderr" &
  local pid=$!
  for _ in $(seq 1 100); do [ -e "$work/ready" ] && break; sleep 0.05; done
  [ -e "$work/ready" ] || fail "$name: the library never got to its loop: $(cat "$work/stderr")"
  local t0
  t0=$(now_ms)
  kill -"$sig" "$pid"
  wait "$pid"
  local rc=$? took=$(($(now_ms) - t0))
  [ $rc -eq "$want" ] || fail "$name: after SIG$sig exit $rc, expected $want: $(cat "$work/stderr")"
  [ $took -le 2000 ] || fail "$name: took $took ms to stop after SIG$sig"
  grep -qF "did not stop within 1.0 s of the signal (in alloc): killed" "$work/stderr" ||
    fail "$name: no line saying the library was killed: $(cat "$work/stderr")"
  grep -qF "interrupted (SIG$sig)" "$work/stderr" || fail "$name: no line saying the command was interrupted: $(cat "$work/stderr")"
  pgrep -f -- "--supervised-child" -P "$pid" >/dev/null 2>&1 && fail "$name: a child was left running"
  echo "$name: stopped $took ms after SIG$sig"
}
stops loop TERM 143 loop_alloc
stops deaf TERM 143 deaf_alloc
stops deaf_int INT 130 deaf_alloc
set +m

# replay's exports are recorded where the library runs: its crash is its run's, said in one
# line, and nothing is exported.
trace=$here/data/pytorch-2.11-h200/cnn_dyn.default.trace.csv.gz
AB_HOSTILE_AT=5 "$ab" replay "$trace" -s "pluggable:$hostile:segv_alloc:my_free" --device sim:h200 --quiet --no-timeline \
  --export-trace "$work/exported.csv" --export-snapshot "$work/exported.pickle" --out "$work/replay" >"$work/stdout" 2>"$work/stderr"
rc=$?
[ $rc -eq 1 ] || fail "replay with exports of a crashing library: exit $rc, expected 1: $(cat "$work/stderr")"
grep -qF "pluggable:$hostile:segv_alloc:my_free crashed in alloc: SIGSEGV" "$work/stderr" ||
  fail "replay with exports: no line naming the crash: $(cat "$work/stderr")"
grep -q ',error,' "$work/replay/summary.csv" 2>/dev/null || fail "replay with exports: no error row in summary.csv"
[ -e "$work/exported.csv" ] || [ -e "$work/exported.pickle" ] && fail "replay with exports: a failed run was exported"

# A matrix with a crashing library among its strategies: every other run recorded.
AB_HOSTILE_AT=5 "$ab" matrix -w "$wl" -w fragmenter --device sim:h200 --quiet --no-timeline -s "raw,pluggable:$hostile:segv_alloc:my_free,caching" \
  --out "$work/matrix" >"$work/stdout" 2>"$work/stderr"
rc=$?
[ $rc -eq 1 ] || fail "matrix with a crashing library: exit $rc, expected 1: $(cat "$work/stderr")"
for s in raw caching; do
  n=$(grep -c ",$s," "$work/matrix/summary.csv")
  [ "$n" -eq 2 ] || fail "matrix: $n rows of $s in summary.csv, expected 2"
  n=$(grep -c ",$s," "$work/matrix/oom.csv")
  [ "$n" -eq 2 ] || fail "matrix: $n budget searches of $s in oom.csv, expected 2"
done
n=$(grep -c ',error,' "$work/matrix/summary.csv")
[ "$n" -eq 2 ] || fail "matrix: $n error rows, expected 2 (the library on each workload): $(cat "$work/matrix/summary.csv")"
[ "$(grep -c 'crashed in alloc: SIGSEGV' "$work/stderr")" -eq 2 ] || fail "matrix: the crash is not said once per workload: $(cat "$work/stderr")"

# compare names the library once in the line of its failure.
"$ab" compare -w "$wl" --device sim:h200 --quiet --out "$work/compare" -s "pluggable:$hostile" -c init:segv_reset \
  >"$work/stdout" 2>"$work/stderr"
rc=$?
[ $rc -ne 0 ] || fail "compare with a crashing library: exit 0"
grep -qxF "allocbench compare: pluggable:$hostile crashed in init: SIGSEGV (Segmentation fault)" "$work/stderr" ||
  fail "compare with a crashing library: $(cat "$work/stderr")"

# A library that crashes in its init, before any run: the matrix runs the others, and the
# library's run is an error row (exit 1, not a refusal of the arguments).
"$ab" matrix -w "$wl" --device sim:h200 --quiet --no-timeline -s "raw,pluggable:$hostile,caching" -c '' \
  -c init:segv_reset -c '' --out "$work/matrix_init" >"$work/stdout" 2>"$work/stderr"
rc=$?
[ $rc -eq 1 ] || fail "matrix with a library crashing in init exited $rc: $(cat "$work/stderr")"
statuses=$(awk -F, 'NR > 1 { print $2 }' "$work/matrix_init/summary.csv" | tr '\n' ' ')
[ "$statuses" = "raw pluggable:$hostile caching " ] || fail "matrix with a library crashing in init: rows $statuses"
grep -qF "crashed in init: SIGSEGV" "$work/stderr" || fail "matrix with a library crashing in init: $(cat "$work/stderr")"

# tune the same, with a library whose constructor crashes: the others are ranked, its row an
# error, exit 1.
"$ab" tune -w "$wl" --device sim:h200 --quiet -s "pluggable:$on_load" --out "$work/tune_load" >"$work/stdout" 2>"$work/stderr"
rc=$?
[ $rc -eq 1 ] || fail "tune with a library crashing as it loads exited $rc: $(cat "$work/stderr")"
grep -q "^export PYTORCH_CUDA_ALLOC_CONF=" "$work/stdout" || fail "tune with a library crashing as it loads: no answer"
grep -qF ",error,none," "$work/tune_load/tune.csv" && grep -qF "pluggable:$on_load" "$work/tune_load/tune.csv" ||
  fail "tune with a library crashing as it loads: no error row: $(cat "$work/tune_load/tune.csv")"

# The same with a library that stops its process: it is killed, the matrix goes on.
AB_HOSTILE_AT=5 timeout 120 "$ab" matrix -w "$wl" -w fragmenter --device sim:h200 --quiet --no-timeline \
  -s "raw,pluggable:$hostile:stop_alloc:my_free,caching" --out "$work/matrix_stop" >"$work/stdout" 2>"$work/stderr"
rc=$?
[ $rc -eq 1 ] || fail "matrix with a stopping library: exit $rc, expected 1: $(cat "$work/stderr")"
for s in raw caching; do
  n=$(grep -c ",$s," "$work/matrix_stop/summary.csv")
  [ "$n" -eq 2 ] || fail "matrix with a stopping library: $n rows of $s in summary.csv, expected 2"
done
n=$(grep -c ',error,' "$work/matrix_stop/summary.csv")
[ "$n" -eq 2 ] || fail "matrix with a stopping library: $n error rows, expected 2: $(cat "$work/matrix_stop/summary.csv")"
[ "$(grep -c 'stopped its process in alloc: SIGSTOP' "$work/stderr")" -eq 2 ] ||
  fail "matrix with a stopping library: the stop is not said once per workload: $(cat "$work/stderr")"

# The same with a library that freezes its process between its calls: killed at the
# deadline, the matrix goes on.
timeout 120 "$ab" matrix -w "$wl" --device sim:h200 --quiet --no-timeline --plugin-timeout 1 \
  -s "raw,pluggable:$hostile:freeze_alloc:freeze_free,caching" --out "$work/matrix_freeze" >"$work/stdout" 2>"$work/stderr"
rc=$?
[ $rc -eq 1 ] || fail "matrix with a freezing library: exit $rc, expected 1: $(cat "$work/stderr")"
for s in raw caching; do
  n=$(grep -c ",$s," "$work/matrix_freeze/summary.csv")
  [ "$n" -eq 1 ] || fail "matrix with a freezing library: $n rows of $s in summary.csv, expected 1"
done
grep -q ',error,' "$work/matrix_freeze/summary.csv" || fail "matrix with a freezing library: no error row"
grep -qF "stalled its process in allocbench's code between or after its calls" "$work/stderr" ||
  fail "matrix with a freezing library: the stall is not said: $(cat "$work/stderr")"

# tune with a crashing library among its configurations: the others ranked, the library's
# row an error naming the crash, and the command's last line says so, exiting 1 as matrix does.
AB_HOSTILE_AT=5 "$ab" tune -w "$wl" -s "pluggable:$hostile:segv_alloc:my_free" --device sim:h200 -q --jobs 2 --format csv \
  --out "$work/tune" >"$work/tune.csv" 2>"$work/stderr"
rc=$?
[ $rc -eq 1 ] || fail "tune with a crashing library: exit $rc, expected 1: $(cat "$work/stderr")"
grep -qF "1 of 15 configurations failed (status error in $work/tune/tune.csv): pluggable:$hostile:segv_alloc:my_free crashed in alloc: SIGSEGV" \
  "$work/stderr" || fail "tune: no line naming the crash: $(cat "$work/stderr")"
grep -q "peak reserved error" "$work/stderr" && fail "tune: progress says 'peak reserved error': $(cat "$work/stderr")"
grep -q "^export PYTORCH_CUDA_ALLOC_CONF=" "$work/stderr" || fail "tune with a crashing library recommended nothing: $(cat "$work/stderr")"
grep -qF "error: pluggable:$hostile:segv_alloc:my_free crashed in alloc: SIGSEGV" "$work/tune.csv" ||
  fail "tune: the library's row does not say it crashed: $(grep pluggable "$work/tune.csv")"
[ "$(grep -c ',ok,' "$work/tune.csv")" -ge 10 ] || fail "tune: the other configurations were not ranked: $(cat "$work/tune.csv")"

finish hostile_plugins_test
