#!/usr/bin/env bash
# serve_test.sh ALLOCBENCH: vLLM's start-up fragmentation (described in vllm-project/vllm#41158,
# a pull request for expandable segments that was closed; fixed by #41268) reproduced by the
# serve workload under caching on the simulated device: gpt-oss 120B's shard on one of two
# cards, its mxfp4 experts repacked layer by layer after loading, the KV cache sized by vLLM's
# rule and the CUDA graphs of its default mode (workloads/serve.c). Under the default config it
# runs out of memory from fragmentation while loading or at the KV cache. max_split_size_mb:20
# (vLLM's fix sets it only while loading; -c sets it for the whole run) gets past both, but
# the graph pool then keeps its wholly free 20 MiB segments, which that setting makes too
# large for any smaller request and which no empty_cache frees while the graphs live, and an
# eager warm-up between two captures runs out: on both cards with max_batch=128, on the 36 GiB
# card with vLLM's default max_batch. Without graphs (graphs=none, vLLM's enforce_eager) it
# serves on both. Then the command line's refusals.
set -u
ab=$1
. "$(dirname "$0")/lib.sh"

layers=36
model="hidden=2880,layers=$layers,heads=32,kv_heads=4,vocab=100544,ffn=1440,experts=128,topk=4,moe_bits=4.25"
model="$model,repack=true,repack_pad=12MiB,requests=16"

# run NAME CARD CONF [ARGS]: runs serve with the card as its budget; leaves $status, $kind and
# the step the run reached (the timeline's last sample) in $step.
run() {
  local name=$1 card=$2 conf=$3 more=${4:-}
  "$ab" run -w "serve:$model,card=$card$more" -s caching -c "$conf" --device sim --out "$work/$name" \
    >"$work/$name.txt" 2>"$work/$name.err"
  status=$(awk '$1 == "status" { print $2 }' "$work/$name.txt")
  kind=$(awk '/^OOM kind / { print $3 }' "$work/$name.txt")
  step=$(tail -n 1 "$work/$name"/timeline_*.csv | cut -d, -f2)
}

# Steps: 0 the model, 1..layers the repack of each layer (loading), then the profile, the KV
# cache, one step per graph captured (its eager warm-up, then the capture), the sampler's
# warm-up and the requests. With max_batch=128 the captures are the 35 sizes up to 256 for the
# piecewise graphs and the 19 up to 128 for the decode graphs.
captures128=$((35 + 19))

# in_captures NAME: the run ran out after the KV cache, within the captures' steps, with the
# graph pool holding free memory (PyTorch's message counts it as "allocated in private pools").
in_captures() {
  [ "$status" = oom ] && [ "$kind" = fragmentation ] && [ -n "$step" ] && [ "$step" -gt $((layers + 2)) ] &&
    [ "$step" -le $((layers + 2 + ${2:-$captures128})) ] && grep -q "in private pools" "$work/$1.err"
}

# 1. A card of 36 GiB: the default config runs out while loading, from fragmentation (the
#    pinned rests of the w13 segments the w2s were carved from); max_split_size_mb:20 gets
#    past loading and the KV cache and runs out among the captures; without graphs it serves.
run load36 36GiB ""
[ "$status" = oom ] && [ "$kind" = fragmentation ] || fail "36GiB default: status '$status', oom_kind '$kind'"
[ -n "$step" ] && [ "$step" -ge 1 ] && [ "$step" -le $layers ] || fail "36GiB default: ran out at step '$step', not while loading"
run load36_split 36GiB max_split_size_mb:20
in_captures load36_split $((51 + 35)) || fail "36GiB max_split_size_mb:20: status '$status' at step '$step' ($(cat "$work/load36_split.err"))"
run load36_split128 36GiB max_split_size_mb:20 ,max_batch=128
in_captures load36_split128 || fail "36GiB max_split_size_mb:20 max_batch=128: status '$status' at step '$step'"
run load36_eager 36GiB max_split_size_mb:20 ,max_batch=128,graphs=none
[ "$status" = ok ] || fail "36GiB max_split_size_mb:20 graphs=none: status '$status' ($(cat "$work/load36_eager.err"))"

# 2. The issue's card, 80 GiB at gpu_memory_utilization 0.9: loading fits, but the KV cache,
#    sized from the memory allocated, finds the 10% headroom eaten by the fragmentation and
#    start-up fails before the graphs are captured; max_split_size_mb:20 with max_batch=128
#    runs out among the captures; without graphs it serves.
run card80 80GiB ""
[ "$status" = oom ] && [ "$kind" = fragmentation ] || fail "80GiB default: status '$status', oom_kind '$kind'"
[ -n "$step" ] && [ "$step" -gt $layers ] && [ "$step" -le $((layers + 2)) ] ||
  fail "80GiB default: ran out at step '$step', not at the KV cache"
run card80_split128 80GiB max_split_size_mb:20 ,max_batch=128
in_captures card80_split128 || fail "80GiB max_split_size_mb:20 max_batch=128: status '$status' at step '$step'"
run card80_eager 80GiB max_split_size_mb:20 ,max_batch=128,graphs=none
[ "$status" = ok ] || fail "80GiB max_split_size_mb:20 graphs=none: status '$status' ($(cat "$work/card80_eager.err"))"

# 2b. Memory outside PyTorch comes off the suggested budget (vLLM's sizing leaves it out).
"$ab" run -w "serve:requests=2,outside=1GiB" -s caching --device sim --out "$work/outside" --format csv \
  >"$work/outside.csv" 2>"$work/outside.err"
grep -q 'runs under its suggested 79.00 GiB' "$work/outside.err" || fail "outside=1GiB: $(cat "$work/outside.err")"

# 3. Without the repack's larger layout nothing fragments: the case is the repack's.
"$ab" run -w "serve:${model/repack=true/repack=false},card=36GiB" -s caching --device sim --out "$work/plain" \
  >"$work/plain.txt" 2>"$work/plain.err"
[ "$(awk '$1 == "status" { print $2 }' "$work/plain.txt")" = ok ] || fail "36GiB without repack: $(cat "$work/plain.err")"

# 4. Refusals: one line naming the argument.
refuse "util" run -w serve:util=2 -s caching --device sim
refuse "heads" run -w serve:heads=7 -s caching --device sim
refuse "prompt_min" run -w serve:prompt_min=50,prompt_max=5 -s caching --device sim
refuse "util x card" run -w serve:card=10GiB -s caching --device sim
refuse "outside < card" run -w serve:outside=80GiB -s caching --device sim
refuse "util x card" run -w serve:outside=9GiB -s caching --device sim
refuse "graphs" run -w serve:graphs=eager -s caching --device sim
# A card larger than the device's (80 GiB on an H100's 79.18): refused with the way out.
refuse "more than the device's total of 139.80 GiB: give a smaller --budget, or the workload a smaller card (serve: card=SIZE)" \
  run -w serve:card=200GiB -s caching --device sim:h200

finish serve_test
