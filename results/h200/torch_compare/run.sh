#!/usr/bin/env bash
# results/h200/torch_compare/run.sh [BUILD_DIR]: PyTorch's caching allocator and allocbench's
# caching side by side in one process on the H200 (harness/micro/torch_compare.cpp), on the random
# sequence (seed 42), under the defaults, expandable segments and max_split_size_mb:128. Builds
# torch_compare with -DAB_TORCH=ON into BUILD_DIR (default build-torch) and writes one log per
# setting here: ns per operation of each allocator (cold pass, median and best of the warm
# passes), their ratio, and whether the segment decisions were the same (exit status 1 when not).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
build=${1:-$repo/build-torch}
cmake -S "$repo" -B "$build" -DAB_TORCH=ON -DCMAKE_CUDA_ARCHITECTURES=90 >"$here/configure.log" 2>&1
grep -q "PyTorch comparison harness ON" "$here/configure.log" || { echo "$0: PyTorch was not found" >&2; exit 2; }
cmake --build "$build" -j "$(nproc)" --target torch_compare >/dev/null
status=0
for conf in "" "expandable_segments:True" "max_split_size_mb:128"; do
  name=${conf%%:*}
  echo "== PYTORCH_CUDA_ALLOC_CONF='$conf'"
  PYTORCH_CUDA_ALLOC_CONF=$conf "$build/torch_compare" --reps 21 | tee "$here/${name:-defaults}.txt" || status=1
done
exit $status
