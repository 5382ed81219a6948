#!/usr/bin/env bash
# run.sh OUT: programs whose figures the driver's placement decides, each run five times side
# by side on one GPU (each in a process of its own), to set against their placement bands
# (check.sh): the mixture-of-experts program of results/h200/pools under the settings of
# tests/data's moe_gc08split64, and under a setting it was not recorded with (a what-if of
# that recording); the garbage-collecting program under gc07split128's. Needs a GPU and
# PyTorch.
set -u
out=${1:?usage: run.sh OUT}
pools=$(cd "$(dirname "$0")/../../pools" && pwd)
mkdir -p "$out"
for i in 1 2 3 4 5; do
  PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.8,max_split_size_mb:64,per_process_memory_fraction:0.0521 \
    timeout 300 python3 "$pools/programs.py" moe "$out" "moe_gc08split64_$i" >"$out/moe_$i.log" 2>&1 &
  PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6,max_split_size_mb:128,per_process_memory_fraction:0.0521 \
    timeout 300 python3 "$pools/programs.py" moe "$out" "moe_gc06split128_$i" >"$out/moe_whatif_$i.log" 2>&1 &
  PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.7,max_split_size_mb:128,per_process_memory_fraction:0.03 \
    timeout 300 python3 "$pools/programs.py" gc "$out" "gc07split128_$i" >"$out/gc_$i.log" 2>&1 &
done
wait
