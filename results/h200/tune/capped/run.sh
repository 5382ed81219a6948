#!/usr/bin/env bash
# run.sh ALLOCBENCH [OUT]: the capped job recorded and run again by PyTorch, on a GPU machine
# with PyTorch (about four minutes):
#   1. for each cap (17 GB, 16 GB), job.py recorded by `allocbench record` twice: under
#      garbage_collection_threshold:0.7,max_split_size_mb:128 (gc_*.pickle) and under the
#      defaults (nogc_*.pickle);
#   2. job.py run again, without recording, at each cap under eleven settings, and the job of
#      ../job.py uncapped under three more: measured.txt, one "== cap CAP conf 'CONF'" header
#      (or "== uncapped conf 'CONF'") and memory_stats() lines per run.
# compare.py then sets allocbench's predictions beside these figures, on any machine.
set -u
ab=$(realpath "${1:?usage: run.sh ALLOCBENCH [OUT]}")
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "${2:-$here}")
py=${PYTHON:-python3}
mkdir -p "$out"
unset PYTORCH_CUDA_ALLOC_CONF
{
  "$py" -c 'import torch; print(torch.__version__, torch.cuda.get_device_properties(0).total_memory)'
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
} >"$out/env.txt"
: >"$out/measured.txt"
for cap in 17000000000 16000000000; do
  suffix=$([ $cap = 17000000000 ] || echo _16GB)
  PYTORCH_CUDA_ALLOC_CONF='garbage_collection_threshold:0.7,max_split_size_mb:128' \
    "$ab" record -o "$out/gc$suffix.pickle" -- "$py" "$here/job.py" $cap >"$out/record_gc$suffix.txt" 2>&1
  "$ab" record -o "$out/nogc$suffix.pickle" -- "$py" "$here/job.py" $cap >"$out/record_nogc$suffix.txt" 2>&1
  for conf in '' 'garbage_collection_threshold:0.7,max_split_size_mb:128' 'max_split_size_mb:128' \
    'expandable_segments:True' 'max_split_size_mb:64' 'roundup_power2_divisions:16' 'garbage_collection_threshold:0.7' \
    'garbage_collection_threshold:0.8,max_split_size_mb:64' 'max_split_size_mb:256' 'roundup_power2_divisions:4' \
    'garbage_collection_threshold:0.6,expandable_segments:True'; do
    echo "== cap $cap conf '$conf'" >>"$out/measured.txt"
    PYTORCH_CUDA_ALLOC_CONF=$conf timeout 120 "$py" "$here/job.py" $cap >>"$out/measured.txt" 2>&1 || echo "exit $?" >>"$out/measured.txt"
  done
done
for conf in 'roundup_power2_divisions:16' 'roundup_power2_divisions:2' 'max_split_size_mb:200'; do
  echo "== uncapped conf '$conf'" >>"$out/measured.txt"
  PYTORCH_CUDA_ALLOC_CONF=$conf "$py" "$here/../job.py" >>"$out/measured.txt" 2>&1
done
gzip -9nf "$out"/*.pickle
