#!/usr/bin/env bash
# hostile_plugins_test.sh ALLOCBENCH TEST_PLUGINS_DIR PLUGINS_DIR: a library that takes its
# process down takes only its own run (supervise.h). Each plugin of tests/plugins/hostile.c
# and crash_on_load.c, and a truncated copy of an example plugin, through `run`: one line
# naming the library, the call and the signal or exit status, exit 1, an error row in
# summary.csv, nothing left running. A library in a loop, and one deaf to SIGTERM and SIGINT:
# stopped within 2 s of the signal, with a line, exit 143 or 130. A matrix with a crashing
# library among its strategies records every other run; tune goes on past one; replay's
# exports are made where the library runs.
set -u
ab=${1:?usage: hostile_plugins_test.sh ALLOCBENCH TEST_PLUGINS_DIR PLUGINS_DIR}
hostile=$(cd "${2:?}" && pwd)/libhostile.so
on_load=$(dirname "$hostile")/libcrash_on_load.so
each=$(cd "${3:?}" && pwd)/libmalloc_each.so
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
# A sanitized build's own handlers would turn the library's crash into an exit of their own.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0:handle_sigbus=0:handle_abort=0
unset AB_HOSTILE_AT AB_HOSTILE_READY
wl=random:ops=4000

now_ms() { date +%s%3N; }

# crashes NAME SAYS ARGS...: `run` of the library fails: one line on stderr with SAYS, exit
# 1, the run's row with status error.
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
  grep -q ',error,' "$work/out.$name/summary.csv" 2>/dev/null || fail "$name: no error row in summary.csv"
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
