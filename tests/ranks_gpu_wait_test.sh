#!/usr/bin/env bash
# ranks_gpu_wait_test.sh ALLOCBENCH: two processes on two GPUs of this host, started as torchrun
# starts them, meeting through a store (tests/store_server.py, as torchrun's agent holds one;
# skipped, exit 77, with fewer than two GPUs or without python3):
#   - they complete, under caching and expandable, with NCCL's memory counted on each rank
#     (the teardown of one rank's communicator waits for the other's: Note [Bounded waits]);
#   - SIGTERM to both mid-run: each stops within seconds, 143, one line, nothing recorded;
#   - rank 1 killed mid-run: rank 0 ends within AB_COLLECTIVE_TIMEOUT and some seconds, exit 1,
#     naming what it waited for, its collective aborted.
set -u
ab=${1:?usage: ranks_gpu_wait_test.sh PATH_TO_ALLOCBENCH}
source "$(dirname "$0")/lib.sh"
unset RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT AB_RENDEZVOUS_TIMEOUT AB_COLLECTIVE_TIMEOUT \
  TORCHELASTIC_RUN_ID TORCHELASTIC_USE_AGENT_STORE OMPI_COMM_WORLD_RANK PMI_RANK PMIX_RANK SLURM_PROCID
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
pids=()
trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$work"' EXIT

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "${gpus:-0}" -lt 2 ]; then
  echo "ranks_gpu_wait_test: skipped: needs two GPUs ($gpus found)"
  exit 77
fi
small=zero:stage=3,steps=3,layers=2,d_model=256,heads=4,vocab=1024,batch=2,seq=128
long=zero:stage=3,steps=400

command -v python3 >/dev/null 2>&1 || { echo "ranks_gpu_wait_test: skipped: needs python3 (the store)"; exit 77; }
python3 "$(dirname "$0")/store_server.py" >"$work/store.port" &
pids+=("$!")
for _ in $(seq 1 100); do
  port=$(head -n 1 "$work/store.port" 2>/dev/null)
  [ -n "$port" ] && break
  sleep 0.05
done
# Each case its own run id, so that the cases share the store and none of its keys.
case=0
next_case() { case=$((case + 1)); }

# rank R NAME [ENV...] -- ARGS: rank R of 2 on cuda:R in the background; $last_pid.
rank() {
  local r=$1 name=$2
  shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env RANK="$r" WORLD_SIZE=2 LOCAL_RANK="$r" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" TORCHELASTIC_RUN_ID="case$case" \
    TORCHELASTIC_USE_AGENT_STORE=True "${envs[@]}" \
    "$ab" run "$@" --ranks env --device cuda --out "$work/$name.results" >"$work/$name.out" 2>"$work/$name.err" &
  last_pid=$!
  pids+=("$last_pid")
}

# Ends PID within LIMIT seconds? Sets $rc (999: it did not) and $took (seconds).
ends_within() {
  local pid=$1 limit=$2 i t0
  t0=$(date +%s.%N)
  rc=999
  for i in $(seq 1 $((limit * 10))); do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"
      rc=$?
      break
    fi
    sleep 0.1
  done
  took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}

# Both complete, rank 0 writing both rows and the combined one, NCCL's bytes on each.
for s in caching expandable; do
  next_case
  rank 1 "$s"1 -- -w "$small" -s "$s"
  r1=$last_pid
  rank 0 "$s"0 -- -w "$small" -s "$s" --format csv
  r0=$last_pid
  ends_within "$r0" 120
  rc0=$rc
  ends_within "$r1" 30
  [ "$rc0" -eq 0 ] && [ "$rc" -eq 0 ] || fail "$s: the ranks exited $rc0 and $rc: $(cat "$work/${s}0.err" "$work/${s}1.err")"
  csv=$work/${s}0.results/summary.csv
  [ "$(wc -l <"$csv" 2>/dev/null)" = 4 ] || fail "$s: summary.csv: $(cat "$csv" 2>&1)"
  for r in 0 1; do
    awk -F, -v r="rank=$r\"" 'index($0, r) && $(NF - 3) > 0 { ok = 1 } END { exit !ok }' "$csv" ||
      fail "$s: rank $r's row has no nccl_bytes: $(cat "$csv" 2>&1)"
  done
  grep -q 'rank 1 of 2 done; rank 0 writes the results' "$work/${s}1.err" || fail "$s: rank 1 said: $(cat "$work/${s}1.err")"
done

# Two ranks well into a long run: NCCL has made the communicators and the steps are running.
pair() {
  next_case
  rank 1 "$1"1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "${@:2}" -- -w "$long" -s caching
  r1=$last_pid
  rank 0 "$1"0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "${@:2}" -- -w "$long" -s caching
  r0=$last_pid
  local i
  for i in $(seq 1 600); do
    grep -q 'Init COMPLETE' "$work/${1}0.out" "$work/${1}0.err" 2>/dev/null && break
    sleep 0.1
  done
  sleep 2
  kill -0 "$r0" 2>/dev/null && kill -0 "$r1" 2>/dev/null || fail "$1: the ranks ended before the test could stop them"
}

pair term
kill -TERM "$r0" "$r1"
ends_within "$r0" 5
rc0=$rc
echo "  SIGTERM mid-run: rank 0 ended in $took s"
ends_within "$r1" 5
[ "$rc0" -eq 143 ] && [ "$rc" -eq 143 ] || fail "SIGTERM mid-run: the ranks exited $rc0 and $rc"
for r in 0 1; do
  tail -n 1 "$work/term$r.err" | grep -q "interrupted (SIGTERM) .*; nothing recorded" ||
    fail "rank $r after SIGTERM: $(tail -n 3 "$work/term$r.err")"
  echo "  rank $r after SIGTERM: $(tail -n 1 "$work/term$r.err")"
done
[ -e "$work/term0.results/summary.csv" ] && fail "SIGTERM mid-run: rank 0 recorded results"

pair killed AB_COLLECTIVE_TIMEOUT=5
kill -KILL "$r1"
ends_within "$r0" 30
echo "  rank 1 killed mid-run: rank 0 ended in $took s"
[ "$rc" -eq 1 ] || fail "rank 1 killed: rank 0 exited $rc: $(tail -n 3 "$work/killed0.err")"
grep -q "rank 1" "$work/killed0.err" || fail "rank 1 killed: rank 0 does not name it: $(tail -n 3 "$work/killed0.err")"
echo "  rank 0 after rank 1 was killed: $(grep -v ' NCCL INFO ' "$work/killed0.err" | tail -n 1)"

finish ranks_gpu_wait_test
