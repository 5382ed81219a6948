#!/usr/bin/env bash
# run.sh ALLOCBENCH OUT: `serve` on a GPU with its kernels, and vLLM's start-up fragmentation
# case, as workloads/README.md's `serve` entry runs them on the simulated card; then the memory a
# process holds outside PyTorch once CUDA is up (the CUDA context and what the runtime takes),
# the figure serve's outside= stands for (Note [vLLM's KV cache bytes], workloads/serve.c).
# Writes OUT/<name>.txt per run, OUT/summary.csv and OUT/outside.txt. Run from the repository
# root.
set -u
ab=${1:?usage: run.sh ALLOCBENCH OUT}
out=${2:?usage: run.sh ALLOCBENCH OUT}
mkdir -p "$out"
M=hidden=2880,layers=36,heads=32,kv_heads=4,vocab=100544,ffn=1440,experts=128,topk=4,moe_bits=4.25,repack=true,repack_pad=12MiB
run() { # NAME WORKLOAD STRATEGY [CONF]
  "$ab" run -w "$2" -s "$3" -c "${4:-}" --device cuda --out "$out" >"$out/$1.txt" 2>&1
  echo "$1 exit $?" | tee -a "$out/exits.txt"
}
run caching serve caching
run expandable serve expandable
run vllm_default "serve:$M,card=36GiB" caching
run vllm_split20 "serve:$M,card=36GiB" caching max_split_size_mb:20
run vllm_split20_batch128 "serve:$M,card=36GiB,max_batch=128" caching max_split_size_mb:20
run vllm_split20_batch128_none "serve:$M,card=36GiB,max_batch=128,graphs=none" caching max_split_size_mb:20
run card80_default "serve:$M,card=80GiB" caching
run card80_split20_batch128 "serve:$M,card=80GiB,max_batch=128" caching max_split_size_mb:20
run card80_split20_batch128_none "serve:$M,card=80GiB,max_batch=128,graphs=none" caching max_split_size_mb:20
python3 - >"$out/outside.txt" 2>&1 <<'PY'
import torch
torch.zeros(1, device="cuda")  # the context, as vLLM's worker has it before its snapshot
torch.cuda.synchronize()
free, total = torch.cuda.mem_get_info()
print(f"total {total} used {total - free} reserved_by_torch {torch.cuda.memory_reserved()} "
      f"outside {total - free - torch.cuda.memory_reserved()}")
PY
cat "$out/outside.txt"
