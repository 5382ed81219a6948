#!/usr/bin/env bash
# launch_test.sh ALLOCBENCH STORE_TEST: ranks started by the launchers users run, on simulated
# cards, against the one-process result (harness/ranks/launch.h, Note [Which launcher]):
#   - torchrun's store: the TCPStore client's checks (STORE_TEST) and two ranks started as
#     torchrun starts them (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT,
#     TORCHELASTIC_USE_AGENT_STORE=True), MASTER_PORT held by a store as torchrun's agent holds
#     it: tests/store_server.py (PyTorch 2.x's protocol, classic and libuv, and 1.13's, its
#     answer early or late) always, PyTorch's own TCPStore and torchrun itself where PyTorch is
#     installed;
#   - mpirun: 2 and 4 ranks of `run -w zero:stage=3 --ranks env`; tune over several traces and
#     matrix over two workloads, their runs dealt out between 3 ranks, against one process'
#     tune.csv, answer and summary.csv; a launcher's variables that MPI does not see (a world
#     of one) refused; where mpirun is installed and the build has MPI (CI installs OpenMPI:
#     .ci/deps.sh).
# Each launched run's rows equal `--ranks N`'s (timing columns aside). Exits 77 when neither
# python3 nor mpirun is here.
set -u
ab=${1:?usage: launch_test.sh PATH_TO_ALLOCBENCH PATH_TO_STORE_TEST}
store_test=${2:?usage: launch_test.sh PATH_TO_ALLOCBENCH PATH_TO_STORE_TEST}
source "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT AB_RENDEZVOUS_TIMEOUT AB_COLLECTIVE_TIMEOUT \
  TORCHELASTIC_RUN_ID TORCHELASTIC_USE_AGENT_STORE TORCHELASTIC_RESTART_COUNT OMPI_COMM_WORLD_RANK PMI_RANK PMIX_RANK \
  SLURM_PROCID OMPI_COMM_WORLD_SIZE PMI_SIZE SLURM_NTASKS
pids=()
trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
export AB_RENDEZVOUS_TIMEOUT=60 AB_COLLECTIVE_TIMEOUT=60
zero=(-w zero:stage=3 -s caching --device sim)
ran=0

# The columns that do not depend on time: all but alloc_ns_p50 to harness_ns_per_event.
figures() {
  drop_cols "$1" alloc_ns_p50 alloc_ns_p99 free_ns_p50 wall_s events_per_s step_ms_p50 kernel_ms_total harness_ns_per_event
}
# FILE without the named columns (CSV, quoted cells with commas kept whole).
drop_cols() {
  local file=$1
  shift
  awk -F'"' -v OFS='"' '{ for (i = 2; i <= NF; i += 2) gsub(/,/, "\001", $i); print }' "$file" |
    awk -F, -v drop="$*" 'BEGIN { n = split(drop, d, " "); for (i = 1; i <= n; i++) gone[d[i]] = 1 }
      NR == 1 { for (c = 1; c <= NF; c++) skip[c] = $c in gone }
      { line = ""; for (c = 1; c <= NF; c++) if (!skip[c]) line = line $c ","; print line }'
}
# The rows of `--ranks N` on this card, once per N.
threads() {
  [ -s "$work/threads$1/summary.csv" ] ||
    "$ab" run "${zero[@]}" --ranks "$1" --out "$work/threads$1" -q >/dev/null 2>"$work/threads$1.err" ||
    fail "--ranks $1 exited $?: $(cat "$work/threads$1.err")"
}
same_rows() { # same_rows N DIR WHAT
  threads "$1"
  if ! cmp -s <(figures "$work/threads$1/summary.csv") <(figures "$2/summary.csv"); then
    fail "$3: its rows differ from --ranks $1's: $(diff <(figures "$work/threads$1/summary.csv") <(figures "$2/summary.csv") | head -5)"
  fi
}

# A server on a port of its own, started by COMMAND...; $port is its port (the command prints
# it on its first line), $server_pid its pid.
servers=0
serve() {
  servers=$((servers + 1))
  local out=$work/server$servers
  "$@" >"$out.port" 2>"$out.err" &
  server_pid=$!
  pids+=("$server_pid")
  port=
  for _ in $(seq 1 200); do
    port=$(head -n 1 "$out.port" 2>/dev/null)
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || fail "$*: no port: $(cat "$out.err")"
}

# Two ranks as torchrun starts them, against the store at $port; NAME names the case.
torchrun_like() {
  local name=$1 r
  local rp=()
  for r in 1 0; do
    env RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
      TORCHELASTIC_RUN_ID="$name" TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_USE_AGENT_STORE=True \
      "$ab" run "${zero[@]}" --ranks env --out "$work/$name" >"$work/$name.$r.out" 2>"$work/$name.$r.err" &
    rp[$r]=$!
    pids+=("${rp[$r]}")
  done
  wait "${rp[0]}" || fail "$name: rank 0 exited $?: $(cat "$work/$name.0.err")"
  wait "${rp[1]}" || fail "$name: rank 1 exited $?: $(cat "$work/$name.1.err")"
  grep -q "rank 1 of 2 done; rank 0 writes the results" "$work/$name.1.err" || fail "$name: rank 1 said $(cat "$work/$name.1.err")"
  same_rows 2 "$work/$name" "$name"
}

# ---- torchrun's store ------------------------------------------------------------------------
# Below the kernel's range of ephemeral ports (32768 up, as Linux sets it), so that no
# connection of another test running beside this one holds it as its own end.
free_port=$((20000 + $$ % 10000))
while (: <"/dev/tcp/127.0.0.1/$free_port") 2>/dev/null; do free_port=$((free_port + 1)); done
if command -v python3 >/dev/null 2>&1; then
  ran=1
  # 2.x's two servers, and 1.13's, answering at once and answering the first query late. The
  # check of an address nobody listens at (its half-second deadline) runs once.
  nobody=AB_TEST_NOBODY=1
  for kind in classic libuv old old-slow; do
    args=()
    protocol=2
    case $kind in
      libuv) args=(--libuv) ;;
      old) args=(--old); protocol=1 ;;
      old-slow) args=(--old --slow-first 1); protocol=1 ;;
    esac
    serve python3 "$here/store_server.py" "${args[@]}"
    env AB_TEST_STORE=127.0.0.1:$port AB_TEST_STORE_PROTOCOL=$protocol $nobody "$store_test" >"$work/st.out" 2>&1 ||
      fail "store_test against the listener ($kind): $(cat "$work/st.out")"
    [ $kind = old-slow ] || torchrun_like "listener-$kind"
    kill "$server_pid" 2>/dev/null
    nobody=
  done
else
  echo "launch_test: no python3: torchrun's store is not tested here"
fi

# PyTorch's own TCPStore, in whichever python has torch, and then torchrun itself.
torch_py=
for py in python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import torch.distributed' >/dev/null 2>&1; then torch_py=$py; break; fi
done
if [ -n "$torch_py" ]; then
  version=$("$torch_py" -c 'import torch; print(torch.__version__)')
  serve "$torch_py" -c '
import time
from datetime import timedelta
from torch.distributed import TCPStore
store = TCPStore("127.0.0.1", 0, 1, True, timedelta(seconds=300), wait_for_workers=False)
print(store.port, flush=True)
time.sleep(3600)'
  protocol=$("$torch_py" -c 'import torch; print(1 if int(torch.__version__.split(".")[0]) < 2 else 0)')
  AB_TEST_STORE=127.0.0.1:$port AB_TEST_STORE_PROTOCOL=$([ "$protocol" = 1 ] && echo 1 || echo 2) "$store_test" \
    >"$work/st.out" 2>&1 || fail "store_test against PyTorch $version's TCPStore: $(cat "$work/st.out")"
  # What the client set, PyTorch's own client reads (it adds the "/").
  got=$("$torch_py" -c "
from datetime import timedelta
from torch.distributed import TCPStore
print(TCPStore('127.0.0.1', $port, 1, False, timedelta(seconds=10)).get('allocbench/test/visible').decode())" 2>&1)
  [ "$got" = hello ] || fail "PyTorch's client read '$got' where the store test set hello"
  torchrun_like "tcpstore"
  kill "$server_pid" 2>/dev/null
  # torchrun holds MASTER_PORT with its agent's store and starts the ranks. --redirects and
  # --tee name no Std.NONE, which torch 1.13's parser loses under Python 3.11.
  # A port found free can be taken before torchrun binds it (a closing connection's, another
  # test's): torchrun is started again on the next one, up to three times.
  tport=$free_port
  for try in 1 2 3; do
    tport=$((tport + 1))
    while (: <"/dev/tcp/127.0.0.1/$tport") 2>/dev/null; do tport=$((tport + 1)); done
    rm -rf "$work/torchrun" "$work/torchrun.logs"
    "$torch_py" -m torch.distributed.run --nnodes 1 --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$tport" \
      --redirects 2 --tee 2 --log_dir "$work/torchrun.logs" --no_python \
      "$ab" run "${zero[@]}" --ranks env --out "$work/torchrun" -q >"$work/torchrun.out" 2>&1 && break
    rc=$?
    grep -q "Address already in use" "$work/torchrun.out" && [ "$try" -lt 3 ] && continue
    fail "torchrun (PyTorch $version) exited $rc: $(tail -n 5 "$work/torchrun.out")"
    break
  done
  same_rows 2 "$work/torchrun" "torchrun (PyTorch $version)"
else
  echo "launch_test: no PyTorch: its TCPStore and torchrun are not tested here (tests/store_server.py stands in)"
fi

# ---- mpirun ----------------------------------------------------------------------------------
if command -v mpirun >/dev/null 2>&1 && "$ab" --version | grep -q "MPI ON"; then
  ran=1
  # OpenMPI keeps memory past MPI_Finalize in components it has unloaded by then, which no
  # suppression can name: the sanitized build's leak check is left to the other launches.
  export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
  mpi=(mpirun --oversubscribe --allow-run-as-root --mca btl self,tcp -x ASAN_OPTIONS)
  for n in 2 4; do
    "${mpi[@]}" -n $n "$ab" run "${zero[@]}" --ranks env --out "$work/mpi$n" -q >"$work/mpi$n.out" 2>&1 ||
      fail "mpirun -n $n exited $?: $(tail -n 5 "$work/mpi$n.out")"
    same_rows $n "$work/mpi$n" "mpirun -n $n"
  done
  # tune over several traces, three copies of one and another, dealt out between 3 ranks: the
  # same tune.csv (timing aside), the same ranking and answer, each distinct trace replayed once.
  # Small recorded runs (a CUDA graph's pool, and blame/'s): the runs are dealt out alike
  # whatever their size, and tune of the ResNet-50 run would take twenty times as long.
  data=$here/data/pytorch-2.11-h200
  mkdir -p "$work/job"
  for r in 0 1 2; do cp "$data/pools/graph_pool.pickle.gz" "$work/job/rank$r.pickle.gz"; done
  cp "$data/blame/frag.pickle" "$work/job/rank3.pickle"
  "$ab" tune -w "replay:$work/job/rank*" --out "$work/tune1" >"$work/tune1.out" 2>"$work/tune1.err" ||
    fail "tune in one process exited $?: $(tail -n 3 "$work/tune1.err")"
  head -n 1 "$work/tune1.out" | grep -q "(4 traces, 2 distinct)" || fail "tune does not say the traces alike: $(head -n 1 "$work/tune1.out")"
  "${mpi[@]}" -n 3 "$ab" tune -w "replay:$work/job/rank*" --out "$work/tune3" >"$work/tune3.out" 2>"$work/tune3.err" ||
    fail "mpirun -n 3 tune exited $?: $(tail -n 3 "$work/tune3.err")"
  cmp -s <(drop_cols "$work/tune1/tune.csv" wall_s) <(drop_cols "$work/tune3/tune.csv" wall_s) ||
    fail "mpirun -n 3 tune: tune.csv differs: $(diff <(drop_cols "$work/tune1/tune.csv" wall_s) <(drop_cols "$work/tune3/tune.csv" wall_s) | head -4)"
  cmp -s "$work/tune1.out" "$work/tune3.out" || fail "mpirun -n 3 tune: its answer differs: $(diff "$work/tune1.out" "$work/tune3.out" | head -4)"
  grep -q "rank 1 of 3: its share of the runs done; rank 0 writes the results" "$work/tune3.err" ||
    fail "mpirun -n 3 tune: rank 1 said $(grep 'rank 1' "$work/tune3.err")"
  # matrix, its pairs dealt out between 3 ranks: the same rows in the same order.
  m=(matrix --quick -w random -w fragmenter -s raw,caching,pooled)
  "$ab" "${m[@]}" --out "$work/matrix1" -q >/dev/null 2>"$work/matrix1.err" || fail "matrix exited $?: $(cat "$work/matrix1.err")"
  "${mpi[@]}" -n 3 "$ab" "${m[@]}" --out "$work/matrix3" -q >/dev/null 2>"$work/matrix3.err" ||
    fail "mpirun -n 3 matrix exited $?: $(tail -n 3 "$work/matrix3.err")"
  cmp -s <(figures "$work/matrix1/summary.csv") <(figures "$work/matrix3/summary.csv") ||
    fail "mpirun -n 3 matrix: summary.csv differs: $(diff <(figures "$work/matrix1/summary.csv") <(figures "$work/matrix3/summary.csv") | head -4)"
  cmp -s <(drop_cols "$work/matrix1/oom.csv" wall_s) <(drop_cols "$work/matrix3/oom.csv" wall_s) ||
    fail "mpirun -n 3 matrix: oom.csv differs"
  # An mpirun whose ranks this MPI does not see (another MPI's): MPI_Init gives a world of one,
  # which is refused rather than run as a whole job per process
  # (harness/ranks/link.c, Note [A world MPI agrees with]).
  for said in OMPI_COMM_WORLD_RANK=0,OMPI_COMM_WORLD_SIZE=2 PMI_RANK=1,PMI_SIZE=4; do
    env ${said//,/ } "$ab" run "${zero[@]}" --ranks env --out "$work/alone" >"$work/out" 2>"$work/err"
    rc=$?
    size=${said#*,}
    [ $rc = 2 ] && grep -qF -- "--ranks env: $size, but MPI gives this process a world of 1" "$work/err" ||
      fail "$said without its launcher: exit $rc: $(cat "$work/err")"
    [ -e "$work/alone" ] && fail "$said without its launcher: wrote results"
  done
  # A Slurm batch script has its allocation's task count and runs one process: it runs alone.
  SLURM_PROCID=0 SLURM_NTASKS=4 "$ab" run "${zero[@]}" --ranks env --out "$work/batch" -q >/dev/null 2>"$work/err" ||
    fail "in a Slurm batch script (SLURM_NTASKS=4, no srun): exit $?: $(cat "$work/err")"
else
  echo "launch_test: no mpirun, or a build without MPI: MPI launches are not tested here"
fi

[ $ran = 1 ] || { echo "launch_test: neither python3 nor mpirun here: skipped"; exit 77; }
finish launch_test
