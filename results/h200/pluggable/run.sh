#!/usr/bin/env bash
# run.sh [BUILD_DIR [OUT]]: the example plugins as a user builds them for PyTorch (linked
# against libcudart.so), on a GPU: -s pluggable under --device cuda through the matrix
# workloads beside raw and caching, a budget that runs out, and the conformance suite; then
# the supervision of each library run in a process of its own (harness/run/supervise.h) on the
# GPU: a library that crashes in alloc leaves the rest of a matrix recorded, one in a loop
# is stopped within 2 s of SIGTERM, and what a supervised run costs (supervise.txt); replay's
# exports of a library's run, made in its process, as raw's (exports/).
#
# Run from the repository root on the GPU machine. BUILD_DIR (default build-gpu) is a build
# made with the CUDA toolkit, e.g. on another machine:
#   cmake -S . -B build-gpu -DCMAKE_CUDA_ARCHITECTURES=90 -DAB_BENCH=OFF
#   cmake --build build-gpu -j --target allocbench conformance_test ab_plugin_malloc_each_cudart \
#     ab_plugin_small_pool_cudart ab_test_plugin_hostile
# and it needs of it only allocbench, plugins/ and tests/conformance_test. OUT (default $OUT,
# else results/latest/pluggable) receives summary.csv, oom.csv, the timelines and segment
# maps, budget.csv, the logs, machine.txt, and verdict.txt (one line per check, PASS or FAIL).
# Exits 1 when a check failed. Each step has a time limit, so that the whole stays under ten
# minutes.
set -u
build=${1:-build-gpu}
out=${2:-${OUT:-results/latest/pluggable}}
ab=$build/allocbench
device=${AB_DEVICE:-cuda} # sim: a dry run of this script on a machine without a GPU
mkdir -p "$out"
# The plugins need libcudart.so.13 from the toolkit, wherever this machine keeps it.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

each=pluggable:$build/plugins/libmalloc_each_cudart.so
pool=pluggable:$build/plugins/libsmall_pool_cudart.so
hooks=init:pool_init,reset:pool_reset,memory_fraction:pool_memory_fraction,record_stream:pool_record_stream
verdict=$out/verdict.txt
: >"$verdict"
check() { # check NAME COMMAND...: runs it, records PASS or FAIL (SKIP: a comparison without python3)
  local name=$1
  shift
  if [ "$1" = python3 ] || [ "$1" = same_as_raw ] && ! command -v python3 >/dev/null; then
    echo "SKIP $name (no python3 to read the CSV)" >>"$verdict"
  elif "$@"; then echo "PASS $name" >>"$verdict"; else echo "FAIL $name" >>"$verdict"; fi
}

{
  git log -1 --format='commit %h date %cI' 2>/dev/null || echo "commit unknown"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  /usr/local/cuda/bin/nvcc --version 2>&1 | tail -2
  ldd "$build/plugins/libmalloc_each_cudart.so" | grep cudart
} >"$out/machine.txt"

# 1. The matrix workloads, each with its smallest budget, the plugins beside raw and caching.
t0=$(date +%s)
check matrix timeout 450 "$ab" matrix --device "$device" -s "raw,caching,$each,$pool" -c '' -c '' -c '' -c "$hooks" \
  --out "$out" >"$out/matrix.txt" 2>"$out/matrix.log"
echo "matrix: $(($(date +%s) - t0)) s" >>"$out/machine.txt"

# One cudaMalloc per request is raw on the GPU too: the same peaks, device calls and status.
same_as_raw() { # same_as_raw FILE: the library's rows of FILE match raw's, strategy and timings aside
  python3 - "$1" "$each" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
keys = ["status", "oom_event", "peak_requested_bytes", "peak_reserved_bytes", "num_device_alloc", "num_device_free", "num_ooms"]
def of(s):
    return {r["workload"]: [r[k] for k in keys] for r in rows if r["strategy"] == s}
raw, lib = of("raw"), of(sys.argv[2])
bad = [w for w in raw if raw[w] != lib.get(w)]
for w in bad:
    print(f"{w}: raw {raw[w]}, library {lib.get(w)}")
sys.exit(1 if bad or not raw else 0)
EOF
}
check malloc_each_is_raw same_as_raw "$out/summary.csv"

# 2. A budget that runs out: the budget holds for the library's own cudaMalloc calls, and the
# OOM comes at raw's event.
for s in raw "$each" "$pool"; do
  c=
  [ "$s" = "$pool" ] && c=$hooks
  timeout 60 "$ab" run -w dynamic-shapes --device "$device" --budget 20GiB -s "$s" -c "$c" --no-kernels --format csv --no-timeline \
    --out "$out/budget" 2>>"$out/budget.log"
done | awk 'NR == 1 || !/^workload,/' >"$out/budget.csv"
check budget_oom_as_raw python3 - "$out/budget.csv" "$each" <<'EOF'
import csv, sys
rows = {r["strategy"]: r for r in csv.DictReader(open(sys.argv[1]))}
raw, lib = rows.get("raw"), rows.get(sys.argv[2])
ok = raw and lib and raw["status"] == "oom" and all(raw[k] == lib[k] for k in ("status", "oom_event", "peak_reserved_bytes"))
ok = ok and all(int(r["peak_reserved_bytes"]) <= 20 << 30 for r in rows.values())
sys.exit(0 if ok else 1)
EOF

# 3. The conformance suite, on the GPU, through each plugin. The test runs in a temporary
# folder of its own, so it is given the libraries by absolute path.
absolute() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
each_abs=pluggable:$(absolute "$build")/plugins/libmalloc_each_cudart.so
pool_abs=pluggable:$(absolute "$build")/plugins/libsmall_pool_cudart.so
check conformance_malloc_each timeout 60 "$build/tests/conformance_test" --device="$device" --strategy="$each_abs" >"$out/conformance.log" 2>&1
check conformance_small_pool timeout 60 "$build/tests/conformance_test" --device="$device" --strategy="$pool_abs" --conf="$hooks" \
  >>"$out/conformance.log" 2>&1

# 4. Supervision on the GPU (tests/plugins/hostile.c: its alloc functions fail on their
# AB_HOSTILE_AT-th call). A crash in alloc among a matrix's strategies: raw's rows all there,
# the library's an error row per workload naming the call and the signal.
hostile=pluggable:$build/tests/plugins/libhostile.so
AB_HOSTILE_AT=5 timeout 120 "$ab" matrix --device "$device" -w random:ops=20000 -w fragmenter -s "raw,$hostile:segv_alloc:my_free" \
  --no-timeline --out "$out/supervise" >"$out/supervise.log" 2>&1
crash_leaves_the_rest() {
  [ "$(grep -c ',raw,' "$out/supervise/summary.csv")" -eq 2 ] && [ "$(grep -c ',error,' "$out/supervise/summary.csv")" -eq 2 ] &&
    [ "$(grep -c 'crashed in alloc: SIGSEGV' "$out/supervise.log")" -eq 2 ]
}
check crash_leaves_the_rest crash_leaves_the_rest
# A library in a loop, then SIGTERM: gone within 2 s, exit 143.
rm -f "$out/supervise/ready"
AB_HOSTILE_READY=$out/supervise/ready "$ab" run --device "$device" -w random:ops=20000 -s "$hostile:loop_alloc:my_free" \
  --no-timeline --out "$out/supervise" >>"$out/supervise.log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do [ -e "$out/supervise/ready" ] && break; sleep 0.05; done
t0=$(date +%s%3N)
kill -TERM "$pid"
wait "$pid"
rc=$? took=$(($(date +%s%3N) - t0))
echo "loop_alloc on $device: exit $rc, $took ms after SIGTERM" >>"$out/supervise.log"
stops_within_2s() { [ "$rc" -eq 143 ] && [ "$took" -le 2000 ]; }
check stops_within_2s stops_within_2s
# What a supervised run costs: the same small run, 20 times, through raw (in process) and
# through malloc_each (the same calls, in a child), whole commands timed.
{
  for s in raw "$each"; do
    t0=$(date +%s%N)
    for _ in $(seq 1 20); do
      "$ab" run --device "$device" -w random:ops=100 -s "$s" --no-timeline --quiet --format csv --out "$out/supervise/cost" >/dev/null
    done
    echo "$s: $((($(date +%s%N) - t0) / 20000)) us per command (run -w random:ops=100, 20 times)"
  done
} >"$out/supervise.txt" 2>&1

# 5. replay's exports of a library's run, recorded in the library's own process on the GPU
# (the trace adaptor in the supervised child): the same calls, sizes and segment decisions as
# raw's exports (the driver's addresses and the times aside).
mkdir -p "$out/exports"
trace=tests/data/pytorch-2.11-h200/cnn_dyn.default.trace.csv.gz
for s in raw "$each"; do
  name=$([ "$s" = raw ] && echo raw || echo lib)
  timeout 120 "$ab" replay "$trace" -s "$s" --device "$device" --no-timeline -q --out "$out/exports" \
    --export-trace "$out/exports/$name.csv" >>"$out/exports.log" 2>&1
done
exports_as_raw() {
  [ -s "$out/exports/lib.csv" ] && cmp -s <(cut -d, -f1,3 "$out/exports/raw.csv") <(cut -d, -f1,3 "$out/exports/lib.csv")
}
check exports_as_raw exports_as_raw

cat "$verdict"
! grep -q FAIL "$verdict"
