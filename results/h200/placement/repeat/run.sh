#!/usr/bin/env bash
# run.sh OUT: two capped garbage-collecting PyTorch programs of results/h200/pools, each run
# four times side by side (each in a process of its own), with the settings they were
# recorded under in tests/data; then, per run, PyTorch's figures and the offsets of its first
# 24 segments from the first one, in units of 2 MiB (repeat.txt beside this file). Needs a GPU
# and PyTorch.
set -u
out=${1:?usage: run.sh OUT}
pools=$(cd "$(dirname "$0")/../../pools" && pwd)
mkdir -p "$out"
for i in 1 2 3 4; do
  PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.8,max_split_size_mb:64,per_process_memory_fraction:0.0521 \
    timeout 240 python3 "$pools/programs.py" moe "$out" "moe_gc08split64_$i" >"$out/moe_$i.log" 2>&1 &
  PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.7,max_split_size_mb:128,per_process_memory_fraction:0.03 \
    timeout 240 python3 "$pools/programs.py" gc "$out" "gc07split128_$i" >"$out/gc_$i.log" 2>&1 &
done
wait
python3 "$(dirname "$0")/figures.py" "$out"
