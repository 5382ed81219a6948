#!/usr/bin/env bash
# eager.sh OUT: the mixture-of-experts program of results/h200/pools under the settings it was
# recorded with in tests/data (moe_gc08split64), run four times side by side: three with
# CUDA_MODULE_LOADING=EAGER (every kernel module loaded when the context starts, so that no
# library takes device memory between two of PyTorch's calls), one with the default (lazy).
# Prints PyTorch's figures and the offsets of each run's first 24 segments from its first one,
# in units of 2 MiB (eager.txt beside this file). Needs a GPU and PyTorch.
set -u
out=${1:?usage: eager.sh OUT}
pools=$(cd "$(dirname "$0")/../../pools" && pwd)
conf=garbage_collection_threshold:0.8,max_split_size_mb:64,per_process_memory_fraction:0.0521
mkdir -p "$out"
for i in 1 2 3; do
  CUDA_MODULE_LOADING=EAGER PYTORCH_CUDA_ALLOC_CONF=$conf timeout 300 python3 "$pools/programs.py" moe "$out" "moe_eager_$i" \
    >"$out/eager_$i.log" 2>&1 &
done
PYTORCH_CUDA_ALLOC_CONF=$conf timeout 300 python3 "$pools/programs.py" moe "$out" moe_lazy_1 >"$out/lazy_1.log" 2>&1 &
wait
python3 "$(dirname "$0")/figures.py" "$out"
