#!/usr/bin/env bash
# sim.sh ALLOCBENCH OUT: `serve` on the simulated H200 (--device sim), as the workload models
# vLLM now (its KV rule and its default CUDA graphs, workloads/serve.c): workloads/README.md's
# vLLM start-up cases, their margins (the smallest budget `allocbench oom` finds, the KV cache
# still sized for the card) and the default model under caching and expandable. Writes
# OUT/<name>.txt per run (its report, then its table), with the runs' summary.csv, timelines
# and OOM segment maps, and OUT/<name>_oom.csv per search. Run from the repository root.
set -u
ab=${1:?usage: sim.sh ALLOCBENCH OUT}
out=${2:?usage: sim.sh ALLOCBENCH OUT}
mkdir -p "$out"
M=hidden=2880,layers=36,heads=32,kv_heads=4,vocab=100544,ffn=1440,experts=128,topk=4,moe_bits=4.25,repack=true,repack_pad=12MiB
run() { # NAME WORKLOAD STRATEGY [CONF]
  "$ab" run -w "$2" -s "$3" -c "${4:-}" --device sim --out "$out" >"$out/$1.txt" 2>&1
  echo "$1 exit $?" >>"$out/exits.txt"
}
margin() { # NAME WORKLOAD CARD CONF
  "$ab" oom -w "$2" -s caching -c "$4" --device sim --lo "$3" --hi 139GiB --tolerance 1MiB --out "$out/$1" -q \
    >/dev/null 2>&1
  mv "$out/$1/oom.csv" "$out/$1_oom.csv" && rm -rf "${out:?}/$1"
}
: >"$out/exits.txt"
run caching serve caching
run expandable serve expandable
run card80_default "serve:$M,card=80GiB" caching
run card80_split20 "serve:$M,card=80GiB" caching max_split_size_mb:20
run card80_split20_batch128 "serve:$M,card=80GiB,max_batch=128" caching max_split_size_mb:20
run card80_split20_batch128_none "serve:$M,card=80GiB,max_batch=128,graphs=none" caching max_split_size_mb:20
run card36_default "serve:$M,card=36GiB" caching
run card36_split20 "serve:$M,card=36GiB" caching max_split_size_mb:20
run card36_split20_batch128 "serve:$M,card=36GiB,max_batch=128" caching max_split_size_mb:20
run card36_split20_batch128_none "serve:$M,card=36GiB,max_batch=128,graphs=none" caching max_split_size_mb:20
margin card80_split20_batch128 "serve:$M,card=80GiB,max_batch=128" 80GiB max_split_size_mb:20
margin card36_split20_batch128 "serve:$M,card=36GiB,max_batch=128" 36GiB max_split_size_mb:20
margin card36_split20 "serve:$M,card=36GiB" 36GiB max_split_size_mb:20
