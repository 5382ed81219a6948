# ranks_wait_test.sh ALLOCBENCH: every wait of a job of several ranks ends
# (Note [Bounded waits], kernels/kernels.h), on simulated cards, the ranks as processes meeting through a
# store on 127.0.0.1 (tests/store_server.py, held as torchrun's agent holds its store) or as
# threads:
#   - a peer that never comes: the meeting gives up at AB_RENDEZVOUS_TIMEOUT, naming it;
#   - SIGTERM or SIGINT at each wait (the meeting on either side, a barrier on either side,
#     the threads' barriers): the rank stops within two seconds with 143 or 130 and one line
#     saying what it waited for, and records nothing;
#   - a peer stopped or killed mid-run (the store cannot see a process die; torchrun ends the
#     others when one dies): the barrier gives up at AB_COLLECTIVE_TIMEOUT, naming it, and
#     rank 0 still writes every row, the lost rank's saying error.
# Without python3 (the store) only the threads' part runs.
set -u
ab=${1:?usage: ranks_wait_test.sh PATH_TO_ALLOCBENCH}
source "$(dirname "$0")/lib.sh"
unset RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT AB_RENDEZVOUS_TIMEOUT AB_COLLECTIVE_TIMEOUT \
  TORCHELASTIC_RUN_ID TORCHELASTIC_USE_AGENT_STORE OMPI_COMM_WORLD_RANK PMI_RANK PMIX_RANK SLURM_PROCID
pids=()
trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
# Long enough (seconds, once met: --check looks at the strategy after every event) that
# every signal below lands mid-run.
long=(-w zero:steps=1000,layers=4 -s caching --check)

# rank R WORLD NAME [ENV...] -- ARGS: starts rank R of WORLD in the background as torchrun
# would (its run id NAME's case, so that cases share the store without sharing keys), its
# output in $work/NAME.{out,err}; $last_pid is its pid.
rank() {
  local r=$1 world=$2 name=$3
  shift 3
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env RANK="$r" WORLD_SIZE="$world" LOCAL_RANK="$r" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
    TORCHELASTIC_RUN_ID="$case" TORCHELASTIC_USE_AGENT_STORE=True "${envs[@]}" \
    "$ab" run "$@" --ranks env --device sim --out "$work/$name.results" >"$work/$name.out" 2>"$work/$name.err" &
  last_pid=$!
  pids+=("$last_pid")
}

# Waits until FILE contains TEXT (up to 10 s); false if it does not.
wait_for_text() {
  local file=$1 text=$2 i
  for i in $(seq 1 200); do
    grep -qF -- "$text" "$file" 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

# Ends PID within LIMIT seconds? Sets $rc (999: it did not) and $took (seconds).
ends_within() {
  local pid=$1 limit=$2 t0 i
  t0=$(date +%s.%N)
  rc=999
  for i in $(seq 1 $((limit * 20))); do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"
      rc=$?
      break
    fi
    sleep 0.05
  done
  took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
}

# expect NAME RC SAYS: the rank NAME exited RC, its last line on stderr says SAYS (and, after
# a signal, that nothing was recorded), and it wrote no results.
expect() {
  local name=$1 want=$2 says=$3
  [ "$rc" -eq "$want" ] || fail "$name exited $rc (expected $want) after $took s: $(cat "$work/$name.err")"
  tail -n 1 "$work/$name.err" | grep -qF -- "$says" || fail "$name: its last line does not say '$says': $(cat "$work/$name.err")"
  if [ "$want" -gt 128 ]; then
    tail -n 1 "$work/$name.err" | grep -qF -- "; nothing recorded" || fail "$name: $(tail -n 1 "$work/$name.err")"
    [ -e "$work/$name.results/summary.csv" ] && fail "$name recorded results after a signal"
  fi
  return 0
}

store=
if command -v python3 >/dev/null 2>&1; then
  python3 "$(dirname "$0")/store_server.py" >"$work/store.port" 2>"$work/store.err" &
  store=$!
  pids+=("$store")
  wait_for_text "$work/store.port" "" && sleep 0.2
  port=$(head -n 1 "$work/store.port")
  [ -n "$port" ] || { fail "the store did not start: $(cat "$work/store.err")"; store=; }
else
  echo "ranks_wait_test: no python3: the launched ranks' waits are not tested here"
fi

if [ -n "$store" ]; then
  where="the store at 127.0.0.1:$port"
  # A peer that never comes: rank 0 gives up at the timeout and names rank 1; rank 1 names
  # rank 0.
  case=alone
  rank 0 2 alone0 AB_RENDEZVOUS_TIMEOUT=1 -- -w zero -s raw
  ends_within "$last_pid" 5
  expect alone0 1 "rank 0 waited 1 s for rank 1 of 2 through $where to meet (AB_RENDEZVOUS_TIMEOUT)"
  case=alone1
  rank 1 2 alone1 AB_RENDEZVOUS_TIMEOUT=1 -- -w zero -s raw
  ends_within "$last_pid" 5
  expect alone1 1 "rank 1 waited 1 s for rank 0 through $where to meet (AB_RENDEZVOUS_TIMEOUT)"

  # SIGTERM and SIGINT at the meeting, once the rank has said what it waits for.
  case=meet1
  rank 1 2 meet1 -- -w zero -s raw
  wait_for_text "$work/meet1.err" "rank 1 of 2 waits for rank 0 through $where" || fail "meet1 did not say what it waits for"
  kill -TERM "$last_pid"
  ends_within "$last_pid" 2
  expect meet1 143 "interrupted (SIGTERM) while rank 1 waited for rank 0 through $where to meet"
  case=meet0
  rank 0 3 meet0 -- -w zero -s raw
  wait_for_text "$work/meet0.err" "rank 0 of 3 waits for ranks 1 to 2 through $where" || fail "meet0 did not say what it waits for"
  kill -INT "$last_pid"
  ends_within "$last_pid" 2
  expect meet0 130 "interrupted (SIGINT) while rank 0 waited for ranks 1 and 2 of 3 through $where to meet"
  # Rank 1 has said hello, rank 0 waits for rank 2: rank 1 waits for rank 0's answer.
  case=three
  rank 0 3 three0 -- -w zero -s raw
  root=$last_pid
  rank 1 3 three1 -- -w zero -s raw
  wait_for_text "$work/three1.err" "rank 1 of 3 waits for rank 0 through $where" ||
    fail "three1 did not say what it waits for: $(cat "$work/three1.err")"
  wait_for_text "$work/three0.err" "rank 0 of 3 waits for ranks 1 to 2" || fail "three0 did not say what it waits for"
  kill -TERM "$last_pid" "$root"
  ends_within "$last_pid" 2
  expect three1 143 "interrupted (SIGTERM) while rank 1 waited for rank 0 through $where to meet"
  ends_within "$root" 2
  expect three0 143 "interrupted (SIGTERM) while rank 0 waited for rank 2 of 3 through $where to meet"

  # How long the workload takes to build and replay once without --check: the ranks are well
  # into their run of it with --check after that.
  t0=$(date +%s.%N)
  "$ab" run -w zero:steps=1000,layers=4 -s caching --device sim --quiet --no-timeline --out "$work/plain.results" \
    >/dev/null 2>&1 || fail "a plain run of the workload exited $?"
  settle=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { s = 2 * (b - a); print (s < 1 ? 1 : s) }')

  # Two ranks mid-run, each case its own run id; $r0 and $r1 their pids.
  pair() {
    case=$1
    rank 1 2 "$1"1 "${@:2}" -- "${long[@]}"
    r1=$last_pid
    rank 0 2 "$1"0 "${@:2}" -- "${long[@]}"
    r0=$last_pid
    sleep "$settle"
    kill -0 "$r0" 2>/dev/null && kill -0 "$r1" 2>/dev/null || fail "$1: the ranks ended before the test could stop them"
  }

  # SIGTERM at a barrier: rank 1 is stopped, rank 0 waits for it there, and stops at once,
  # naming the collective and rank 1; rank 1, let go, hears from rank 0 that nothing is
  # recorded.
  pair bar AB_COLLECTIVE_TIMEOUT=20
  kill -STOP "$r1"
  sleep 0.3
  kill -TERM "$r0"
  ends_within "$r0" 2
  expect bar0 143 "interrupted (SIGTERM) while rank 0 waited at collective "
  grep -q "interrupted (SIGTERM) while rank 0 waited at collective [0-9]* of [0-9]* (.* bytes per rank, event [0-9]*) for rank 1; nothing recorded" "$work/bar0.err" ||
    fail "bar0 does not name the collective: $(tail -n 1 "$work/bar0.err")"
  kill -CONT "$r1"
  ends_within "$r1" 6 # its next barrier comes after a stretch of replay
  expect bar1 1 "rank 0 was interrupted (SIGTERM)"

  # The other way round: rank 1 waits for rank 0's verdict.
  pair verdict AB_COLLECTIVE_TIMEOUT=2
  kill -STOP "$r0"
  sleep 0.3
  kill -TERM "$r1"
  ends_within "$r1" 2
  expect verdict1 143 "for rank 0 through $where; nothing recorded"
  grep -q "interrupted (SIGTERM) while rank 1 waited at collective [0-9]* of [0-9]* (" "$work/verdict1.err" ||
    fail "verdict1 does not name the collective: $(tail -n 1 "$work/verdict1.err")"
  kill -CONT "$r0"
  ends_within "$r0" 8
  expect verdict0 1 "rank 1"

  # A peer stopped mid-run: the barrier gives up at AB_COLLECTIVE_TIMEOUT, naming it.
  pair slow AB_COLLECTIVE_TIMEOUT=1
  kill -STOP "$r1"
  ends_within "$r0" 6
  expect slow0 1 "rank 0 waited 1 s at collective "
  grep -q "rank 0 waited 1 s at collective [0-9]* of [0-9]* (.*) for rank 1 (AB_COLLECTIVE_TIMEOUT)" "$work/slow0.err" ||
    fail "slow0: $(cat "$work/slow0.err")"
  kill -KILL "$r1"

  # A peer killed mid-run, either one: the other gives up at the bound, exit 1, saying so.
  # Rank 0 still writes every row, rank 1's saying error.
  pair kill1 AB_COLLECTIVE_TIMEOUT=1
  kill -KILL "$r1"
  ends_within "$r0" 6
  [ "$rc" -eq 1 ] || fail "rank 0 exited $rc after rank 1 was killed: $(cat "$work/kill10.err")"
  grep -q "for rank 1 (AB_COLLECTIVE_TIMEOUT)" "$work/kill10.err" ||
    fail "rank 0 after rank 1 was killed: $(cat "$work/kill10.err")"
  grep -q 'rank=1",caching,.*,error,' "$work/kill10.results/summary.csv" 2>/dev/null ||
    fail "rank 1's row does not say error: $(cat "$work/kill10.results/summary.csv" 2>&1)"
  pair kill0 AB_COLLECTIVE_TIMEOUT=1
  kill -KILL "$r0"
  ends_within "$r1" 6
  expect kill01 1 "for rank 0 through $where (AB_COLLECTIVE_TIMEOUT)"
fi

# Ranks as threads: SIGTERM mid-run stops them at their next collective. The streams are built
# before the ranks run (and a signal then stops the building instead), so the signal comes
# after twice the time a plain run of the workload takes, building included: the run with
# --check replays far longer than that.
t0=$(date +%s.%N)
"$ab" run -w zero:steps=1000,layers=4 -s caching --device sim --quiet --no-timeline --out "$work/plain.results" \
  >/dev/null 2>&1 || fail "a plain run of the workload exited $?"
settle=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { s = 2 * (b - a); print (s < 1 ? 1 : s) }')
"$ab" run "${long[@]}" --device sim --ranks 2 --out "$work/threads.results" >"$work/threads.out" 2>"$work/threads.err" &
pid=$!
pids+=("$pid")
sleep "$settle"
kill -TERM "$pid"
ends_within "$pid" 2
expect threads 143 "interrupted (SIGTERM) while rank "

finish ranks_wait_test
