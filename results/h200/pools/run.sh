#!/usr/bin/env bash
# run.sh OUT: records each program of programs.py under its PYTORCH_CUDA_ALLOC_CONF into OUT
# (NAME.pickle.gz, NAME.json, NAME.log), each within a time limit, on a machine with PyTorch
# and a GPU. The fixtures of tests/data/pytorch-2.11-h200/pools/ were recorded with it, the
# moe_* ones with run_moe.sh, which sets the cap from an uncapped run.
set -u
out=${1:?usage: run.sh OUT}
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
mkdir -p "$out"
{
  date -u +%FT%TZ
  "$py" -c 'import torch; p = torch.cuda.get_device_properties(0)
print("torch", torch.__version__, "cuda", torch.version.cuda, p.name, p.total_memory)'
} >"$out/env.txt" 2>&1
# name|seconds|conf|file (default: name)
while IFS='|' read -r name limit conf file; do
  file=${file:-$name}
  echo "== $file ($conf)" >&2
  t0=$(date +%s)
  PYTORCH_CUDA_ALLOC_CONF=$conf timeout "$limit" "$py" "$here/programs.py" "$name" "$out" "$file" >"$out/$file.log" 2>&1
  rc=$?
  [ -f "$out/$file.pickle" ] && gzip -9nf "$out/$file.pickle"
  echo "   exit $rc in $(($(date +%s) - t0)) s" >&2
  tail -c 600 "$out/$file.log" >&2
done <<'LIST'
graph_pool|45|
mempool_oom|40|per_process_memory_fraction:0.05
mempool_gone|30|
gc|60|garbage_collection_threshold:0.7,max_split_size_mb:128,per_process_memory_fraction:0.03|gc07split128
compiled|130||compiled
compiled|80|expandable_segments:True|compiled_expandable
LIST
