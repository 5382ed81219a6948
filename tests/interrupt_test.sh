#!/usr/bin/env bash
# interrupt_test.sh ALLOCBENCH: results survive a stop. SIGINT, SIGTERM or SIGHUP stops `allocbench
# matrix` and `allocbench run` within moments (while generating a workload too), with the
# exit status of the signal and a line saying how many runs were recorded and where; the
# rows match it. SIGKILL at any moment of
# a matrix leaves every CSV parseable: a header, then rows of its column count, each ending
# in a newline (no half rows).
set -u
ab=${1:?usage: interrupt_test.sh ALLOCBENCH}
. "$(dirname "$0")/lib.sh"
pids=()
trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$work"' EXIT

# Every CSV under DIR: the header's column count on every line (commas inside quotes do not
# count), no quote left open, a newline at the end. Adds the files checked to $checked. The
# files are read together, by one tail and one awk: a matrix leaves hundreds, and the check runs
# after every kill.
checked=0
check_csvs() {
  local dir=$1 f files=()
  for f in $(find "$dir" -name '*.csv'); do
    checked=$((checked + 1))
    [ -s "$f" ] || { fail "$f is empty"; continue; }
    files+=("$f")
  done
  [ ${#files[@]} -gt 0 ] || return 0
  # Each file's last byte: a newline each, else the files that end otherwise are named.
  if [ "$(tail -q -c 1 "${files[@]}" | tr -d '\n' | wc -c)" -ne 0 ]; then
    for f in "${files[@]}"; do
      [ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" = '\n' ] || fail "$f does not end in a newline (a half row)"
    done
  fi
  rm -f "$work/bad_csvs"
  awk -v bad_files="$work/bad_csvs" '
    function columns(line,   i, c, quoted, k) {
      k = 1; quoted = 0
      for (i = 1; i <= length(line); i++) {
        c = substr(line, i, 1)
        if (c == "\"") quoted = !quoted
        else if (c == "," && !quoted) k++
      }
      return quoted ? -1 : k
    }
    FNR == 1 { want = columns($0); next }
    columns($0) != want {
      printf "FAIL: %s:%d: %d columns, the header has %d: %s\n", FILENAME, FNR, columns($0), want, $0
      if (!(FILENAME in bad)) { bad[FILENAME] = 1; n++ }
    }
    END { print n + 0 > bad_files }' "${files[@]}" || fail "awk could not read the CSV files under $dir"
  failures=$((failures + $(cat "$work/bad_csvs" 2>/dev/null || echo 0)))
}

# Waits until FILE has more than LINES lines or PID ends.
wait_rows() {
  local file=$1 lines=$2 pid=$3 i
  for i in $(seq 1 600); do
    [ -f "$file" ] && [ "$(wc -l <"$file")" -gt "$lines" ] && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# Waits up to 30 s for PID; its exit status, or 999 if it did not end.
wait_exit() {
  local pid=$1 i
  for i in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid"; return $?; }
    sleep 0.1
  done
  return 999
}

# The check catches what a kill mid-write would leave: a cut row, a row without its newline.
mkdir -p "$work/broken"
printf 'a,b,c\n"x,y",2,3\n1,2\n' >"$work/broken/cut.csv"
printf 'a,b,c\n1,2,3\n1,2,' >"$work/broken/unterminated.csv"
before=$failures
check_csvs "$work/broken" >/dev/null
[ $((failures - before)) -eq 2 ] && failures=$before || fail "the CSV check missed a broken file"
checked=0

big=(-w random:ops=3000000 -w random:ops=3000000,dist=lognormal -w random:ops=3000000,streams=4)
planned=$((3 * $("$ab" list --strategies | wc -l)))

# SIGINT, SIGTERM and SIGHUP (a closed terminal) stop a matrix once its first row is in; two
# SIGINTs at once (a Ctrl-C forwarded by a launcher as well) are one request, said once.
for how in INT TERM HUP INT-twice; do
  sig=${how%-twice}
  out=$work/matrix_$how
  "$ab" matrix --device sim "${big[@]}" --out "$out" >"$work/out" 2>"$work/err" &
  pid=$!
  pids+=("$pid")
  if ! wait_rows "$out/summary.csv" 1 "$pid"; then
    fail "matrix ($how) ended or wrote no row: $(cat "$work/err")"
    continue
  fi
  kill -"$sig" "$pid"
  [ "$how" = "$sig" ] || kill -"$sig" "$pid"
  wait_exit "$pid"
  rc=$?
  want=$((128 + $(kill -l "$sig")))
  [ $rc -eq "$want" ] || fail "matrix after SIG$how exited $rc, expected $want: $(cat "$work/err")"
  rows=$(($(wc -l <"$out/summary.csv") - 1))
  grep -q "interrupted (SIG$sig): $rows of $planned runs recorded in $out/summary.csv" "$work/err" ||
    fail "matrix after SIG$how does not say where its $rows rows are: $(cat "$work/err")"
  [ "$(grep -c "interrupted" "$work/err")" -eq 1 ] || fail "matrix after SIG$how: not one line: $(cat "$work/err")"
  [ "$(find "$out" -name 'timeline_*.csv' | wc -l)" -eq "$rows" ] ||
    fail "SIG$sig: $rows rows but other timelines: $(ls "$out")"
  [ -z "$(find "$out" -name '*.tmp.*')" ] || fail "SIG$sig left temporary files: $(ls "$out")"
  check_csvs "$out"
done

# SIGINT stops a single long run (slow: checked after every event): nothing recorded, the rows
# already there kept.
out=$work/run
"$ab" run --device sim -w random:ops=200 -s raw --out "$out" >/dev/null 2>&1 || fail "a short run failed"
"$ab" run --device sim -w random:ops=2000000 -s pooled --check --out "$out" >"$work/out" 2>"$work/err" &
pid=$!
pids+=("$pid")
sleep 1
kill -INT "$pid"
wait_exit "$pid"
rc=$?
[ $rc -eq 130 ] || fail "run after SIGINT exited $rc: $(cat "$work/err")"
said="interrupted (SIGINT): 0 of 1 runs recorded in $out/summary.csv; what was in progress was stopped and not recorded"
building="interrupted (SIGINT) while building the workload: nothing was run or written" # a slow (sanitized) build
grep -qF "$said" "$work/err" || grep -qF "$building" "$work/err" || fail "run after SIGINT: $(cat "$work/err")"
[ "$(wc -l <"$out/summary.csv")" -eq 2 ] || fail "the interrupted run changed summary.csv: $(cat "$out/summary.csv")"

# SIGINT once the run itself has ended, while its placement variants replay (Placement bands,
# harness/README.md; planned's note of its plan comes between the two): the same line, exit
# 130, nothing recorded.
"$ab" run --device sim -w random:ops=300000 -s planned --out "$out" >"$work/out" 2>"$work/err" &
pid=$!
pids+=("$pid")
for i in $(seq 1 600); do
  grep -q "allocations at their planned offsets" "$work/err" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.01
done
kill -INT "$pid"
wait_exit "$pid"
rc=$?
[ $rc -eq 130 ] || fail "run after SIGINT in its placement variants exited $rc: $(cat "$work/err")"
grep -qF "$said" "$work/err" || fail "run after SIGINT in its placement variants: $(cat "$work/err")"
[ "$(wc -l <"$out/summary.csv")" -eq 2 ] || fail "the run interrupted in its variants changed summary.csv"

# SIGTERM while the workload is still being generated (some seconds of it: 57 million events):
# the run stops within moments, not once the generation is done.
"$ab" run --device sim -w dynamic-shapes:steps=6000,layers=48 -s raw --out "$out" >"$work/out" 2>"$work/err" &
pid=$!
pids+=("$pid")
catching "$pid" TERM
start=$(date +%s%N)
kill -TERM "$pid"
wait_exit "$pid"
rc=$?
took_ms=$((($(date +%s%N) - start) / 1000000))
[ $rc -eq 143 ] || fail "run after SIGTERM while generating exited $rc: $(cat "$work/err")"
[ $took_ms -lt 2000 ] || fail "SIGTERM while generating took $took_ms ms to stop the run"
grep -qF "interrupted (SIGTERM) while building the workload: nothing was run or written" "$work/err" || fail "SIGTERM while generating: $(cat "$work/err")"

# report stopped while its figure scripts draw: the scripts (all of their process group)
# stopped with it, one line, no page. A script deaf to SIGTERM is killed at a second signal
# more than a second later, which ends the command at once.
mkdir -p "$work/page" "$work/plots"
"$ab" run --device sim -w random:ops=200 -s raw --out "$work/page" >/dev/null 2>&1 || fail "a run for the page failed"
for script in slow deaf; do
  deaf='trap "" TERM'
  [ $script = slow ] && deaf=
  printf '%s\ntouch "%s/drawing"\nsleep 30\n' "$deaf" "$work/plots" >"$work/plots/draw.sh"
  rm -f "$work/plots/drawing"
  AB_PLOTS_DIR=$work/plots "$ab" report "$work/page" >"$work/out" 2>"$work/err" &
  pid=$!
  pids+=("$pid")
  for i in $(seq 1 300); do
    [ -e "$work/plots/drawing" ] && break
    sleep 0.1
  done
  kill -TERM "$pid"
  [ $script = deaf ] && sleep 1.5 && kill -TERM "$pid"
  wait_exit "$pid"
  rc=$?
  [ $rc -eq 143 ] || fail "report ($script script) after SIGTERM exited $rc: $(cat "$work/err")"
  said="interrupted (SIGTERM) while drawing the figures: the page was not written"
  [ $script = deaf ] && said="stopped at once by a second signal"
  grep -qF "$said" "$work/err" || fail "report ($script script) after SIGTERM: $(cat "$work/err")"
  sleep 0.2
  pgrep -f "$work/plots/draw.sh" >/dev/null && fail "report ($script script): the script outlived it"
  pkill -KILL -f "$work/plots/draw.sh"
  [ -e "$work/page/report.html" ] && fail "report ($script script) stopped, but wrote its page"
done

# SIGKILL at moments spread over a matrix of short runs, whose rows and timelines are written
# all the time: every CSV parses after each kill, and the next matrix appends to them.
out=$work/killed
many=()
for i in $(seq 1 40); do many+=(-w "random:ops=$((2000 + i * 97))"); done
checked=0
for delay in 0.2 0.35 0.5 0.65 0.8 0.95 1.1 1.25; do
  "$ab" matrix --device sim "${many[@]}" --out "$out" >/dev/null 2>"$work/err" &
  pid=$!
  pids+=("$pid")
  sleep "$delay"
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  check_csvs "$out"
done
[ "$checked" -gt 8 ] || fail "the killed matrices left only $checked CSV files to check"

if [ $failures -eq 0 ]; then echo "interrupt_test: ok ($checked CSV files checked after SIGKILL)"; fi
exit $((failures > 0))
