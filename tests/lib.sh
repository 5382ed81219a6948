# lib.sh: what the shell tests share. Source it after setting `ab` (the allocbench binary);
# it makes $work (removed at exit) and counts failures.
#   fail MESSAGE             records a failure and goes on
#   refuse SAYS ARGS...      runs allocbench ARGS --out DIR and requires a refusal: an exit
#                            from 1 to 127, one line on stderr containing SAYS, nothing on
#                            stdout, no results written
#   polling_fifo PID         returns once PID waits for a FIFO's reader, or after 30 s
#   catching PID SIGNAL      returns once PID has its handler for SIGNAL (TERM, INT), or after 30 s
#   finish NAME              prints the outcome and exits 0 or 1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

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

# A FIFO without a reader is opened in polls with a short sleep between them (output.c): PID's
# wchan, as the kernel names where it sleeps, says it is there. Waiting for that, rather than
# a fixed pause, holds on a loaded machine, where what comes before the open takes longer.
polling_fifo() {
  local tries=0
  until [ "$(cat "/proc/$1/wchan" 2>/dev/null)" = hrtimer_nanosleep ] || [ $tries -ge 300 ]; do
    sleep 0.1
    tries=$((tries + 1))
  done
}

# A signal sent before allocbench sets its handler ends it by the default action, with no line
# of its own: /proc/PID/status lists the signals a process catches (SigCgt, a mask in hex whose
# bit N-1 is signal N), so a test waits for that rather than for a fixed pause.
catching() {
  local pid=$1 bit tries=0 mask
  bit=$(($(kill -l "$2") - 1))
  while [ $tries -lt 300 ]; do
    mask=$(awk '/^SigCgt:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
    [ -n "$mask" ] && [ $(((0x$mask >> bit) & 1)) -eq 1 ] && return 0
    sleep 0.1
    tries=$((tries + 1))
  done
}

finish() {
  if [ $failures -gt 0 ]; then
    echo "$1: $failures failure(s)"
    exit 1
  fi
  echo "$1: all checks passed"
  exit 0
}
