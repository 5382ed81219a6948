#!/usr/bin/env bash
# plots_test.sh PLOTS_DIR: every figure script (the bench's and tune's) draws from small CSVs in the layout allocbench
# writes, as PNG and SVG; a figure whose CSV is missing is passed over with a note; a CSV
# without the columns a figure needs fails the drawing. Skipped (77) without gnuplot.
# ALLOCBENCH names the binary whose registry orders the colours.
set -u
plots=${1:?usage: plots_test.sh PLOTS_DIR}
: "${ALLOCBENCH:?plots_test.sh needs ALLOCBENCH, the allocbench binary}"
command -v gnuplot >/dev/null 2>&1 || { echo "skipped: no gnuplot"; exit 77; }
source "$(dirname "$0")/lib.sh"

d=$work/all
mkdir -p "$d"
cat >"$d/summary.csv" <<'CSV'
workload,strategy,conf,device,budget_bytes,seed,events,status,oom_kind,oom_event,peak_requested_bytes,peak_allocated_bytes,peak_reserved_bytes,frag_pct,num_device_alloc,num_device_free,num_alloc_retries,num_ooms,alloc_ns_p50,alloc_ns_p99,free_ns_p50,wall_s,events_per_s
random,raw,,sim:h200,0,42,1000,ok,none,-1,1000,1000,1000,0,10,10,0,0,43519,78000,36000,0.1,10000
random,pooled,,sim:h200,0,42,1000,ok,none,-1,1000,1100,2000,45,1,0,0,0,70,120,60,0.1,10000
random,pooled,,sim:h200,0,42,1000,ok,none,-1,1000,1100,1500,26,1,0,0,0,70,120,60,0.1,10000
"zero:steps=2,stage=3",raw,,sim:h200,0,42,1000,ok,none,-1,5000,5000,5000,0,10,10,0,0,43519,78000,36000,0.1,10000
"zero:steps=2,stage=3",pooled,,sim:h200,0,42,1000,error,none,-1,0,0,0,0,0,0,0,0,0,0,0,0.1,0
fragmenter,raw,,sim:h200,0,42,1000,ok,none,-1,5000,5000,5000,0,10,10,0,0,43519,78000,36000,0.1,10000
fragmenter,pooled,,sim:h200,0,42,1000,oom,fragmentation,12,5000,5100,6000,15,1,0,1,1,70,120,60,0.1,10000
replay:/some/dir/cnn_dyn.default.trace.csv.gz,raw,,sim:h200,0,42,1000,ok,none,-1,5000,5000,5000,0,10,10,0,0,43519,78000,36000,0.1,10000
CSV
cat >"$d/oom.csv" <<'CSV'
workload,strategy,conf,device,min_budget_bytes,max_fail_bytes,peak_requested_bytes,overhead_pct,oom_kind_at_fail,oom_event_at_fail,probes,wall_s
random,raw,,sim:h200,1000,999,1000,0,capacity,10,20,0.1
random,pooled,,sim:h200,1600,1500,1000,60,fragmentation,10,20,0.1
fragmenter,raw,,sim:h200,0,0,5000,0,capacity,10,20,0.1
CSV
for s in raw pooled; do
  printf 'event,step,requested,allocated,reserved,peak_requested,peak_allocated,peak_reserved\n0,0,0,0,0,0,0,0\n10,1,1000000,1100000,2000000,1500000,1600000,2000000\n20,2,500000,600000,2000000,1200000,1300000,2000000\n' \
    >"$d/timeline_dynamic-shapes_steps_2_$s.csv"
done
cat >"$d/micro.csv" <<'CSV'
name,workload,strategy,args,device,run_type,aggregate,error,real_ns,cpu_ns,items_per_second,device_allocs,iterations
alloc_free/raw/bytes:512/manual_time,alloc_free,raw,bytes:512,sim:h200,iteration,,,79000,100,12600,1,100
alloc_free/raw/bytes:1048576/manual_time,alloc_free,raw,bytes:1048576,sim:h200,iteration,,,80000,100,12500,1,100
alloc_free/pooled/bytes:512/manual_time,alloc_free,pooled,bytes:512,sim:h200,iteration,,,50,80,2e+07,0,1000000
alloc_free/pooled/bytes:1048576/manual_time,alloc_free,pooled,bytes:1048576,sim:h200,iteration,,,55,80,1.8e+07,0,1000000
random/raw/ops:200000/manual_time,random,raw,ops:200000,sim:h200,iteration,,,8e+09,4e+07,25000,100124,1
random/pooled/ops:200000/manual_time,random,pooled,ops:200000,sim:h200,iteration,,out of memory: at event 3,0,0,0,0,0
CSV

# Two segments at the fragmenter's OOM: every state of a block (harness/run/oommap.h's columns).
cat >"$d/oommap_fragmenter_caching.csv" <<'CSV'
segment,offset,size,state,alloc_id,requested,segment_size,segment_address,pool,stream
0,0,1048576,allocated,3,1000000,20971520,17592186044416,large,0
0,1048576,2097152,free,-1,0,20971520,17592186044416,large,0
0,3145728,1048576,pending_free,7,1048576,20971520,17592186044416,large,0
0,4194304,16777216,free,-1,0,20971520,17592186044416,large,0
1,0,2097152,allocated,9,2097152,4194304,17592207015936,large,0
1,2097152,2097152,unmapped,-1,0,4194304,17592207015936,large,0
CSV

"$plots/draw.sh" "$d" >"$work/out" 2>"$work/err" || fail "draw.sh exited $?: $(cat "$work/err")"
for f in peak_reserved timeline_dynamic-shapes latency min_budget micro oommap_fragmenter; do
  head -c 8 "$d/$f.png" 2>/dev/null | od -An -c | grep -q 'P   N   G' || fail "$f.png is not a PNG"
  grep -q '<svg' "$d/$f.svg" 2>/dev/null || fail "$f.svg is not an SVG"
done
[ -s "$work/err" ] && fail "gnuplot complained: $(cat "$work/err")"

# A micro.csv of the pair benchmarks alone (--benchmark_filter=alloc_free) still draws.
d=$work/pairs
mkdir -p "$d"
grep -v '^random' "$work/all/micro.csv" >"$d/micro.csv"
"$plots/draw.sh" "$d" >"$work/out" 2>"$work/err" || fail "draw.sh on the pairs alone exited $?: $(cat "$work/err")"
head -c 8 "$d/micro.png" 2>/dev/null | od -An -c | grep -q 'P   N   G' || fail "micro.png of the pairs alone: $(cat "$work/err")"
grep -q "empty x range" "$work/err" && fail "micro.gp on the pairs alone: $(cat "$work/err")"
# So does any other subset: the sequences alone (--benchmark_filter=random), runs that all
# failed; a panel with nothing to draw says so, and gnuplot has nothing to complain of.
for keep in '^random' '^random/pooled/' '^alloc_free/raw/'; do
  d=$work/subset
  rm -rf "$d" && mkdir -p "$d"
  { head -n 1 "$work/all/micro.csv"; grep "$keep" "$work/all/micro.csv"; } >"$d/micro.csv"
  "$plots/draw.sh" "$d" >"$work/out" 2>"$work/err" || fail "draw.sh on the rows $keep exited $?: $(cat "$work/err")"
  head -c 8 "$d/micro.png" 2>/dev/null | od -An -c | grep -q 'P   N   G' || fail "micro.png of the rows $keep: $(cat "$work/err")"
  [ -s "$work/err" ] && fail "gnuplot complained on the rows $keep: $(cat "$work/err")"
done

# colour SVG NAME: the colour of the first mark drawn for NAME's legend entry.
colour() { grep -A12 "<title>$2</title>" "$1" | grep -o "'rgb([0-9, ]*)'" | head -n 1; }
# Each strategy keeps its colour in every figure, though oom.csv lists them in another order
# than summary.csv; budgets are labelled finely enough to tell 256 from 320 MiB.
d=$work/order
mkdir -p "$d"
cp "$work/all/summary.csv" "$d/"
cat >"$d/oom.csv" <<'CSV'
workload,strategy,conf,device,min_budget_bytes,max_fail_bytes,peak_requested_bytes,overhead_pct,oom_kind_at_fail,oom_event_at_fail,probes,wall_s
fragmenter,pooled,,sim:h200,335544320,335544319,268435456,25,fragmentation,10,20,0.1
fragmenter,raw,,sim:h200,268435456,268435455,268435456,0,capacity,10,20,0.1
CSV
for s in raw pooled; do cp "$work/all/timeline_dynamic-shapes_steps_2_$s.csv" "$d/"; done
"$plots/draw.sh" "$d" >"$work/out" 2>"$work/err" || fail "draw.sh on the reordered files exited $?: $(cat "$work/err")"
for s in raw pooled; do
  want=$(colour "$d/peak_reserved.svg" $s)
  [ -n "$want" ] || fail "no colour for $s in peak_reserved.svg"
  for f in min_budget latency timeline_dynamic-shapes; do
    [ "$(colour "$d/$f.svg" $s)" = "$want" ] || fail "$s is $(colour "$d/$f.svg" $s) in $f.svg, $want in peak_reserved.svg"
  done
done
# The colours follow the registry's order, as the binary lists it: the first strategy listed
# takes the first colour, whichever the file names first.
first=$(colour "$d/peak_reserved.svg" "$("$ALLOCBENCH" list --strategies | grep -xE 'raw|pooled' | head -n 1)")
printf '#!/bin/sh\nprintf "pooled\\nraw\\n"\n' >"$work/pooled_first"
chmod +x "$work/pooled_first"
ALLOCBENCH=$work/pooled_first "$plots/draw.sh" "$d" >"$work/out" 2>"$work/err" || fail "draw.sh with pooled listed first exited $?"
[ "$(colour "$d/peak_reserved.svg" pooled)" = "$first" ] ||
  fail "pooled, listed first, is $(colour "$d/peak_reserved.svg" pooled), not the first colour $first"
"$plots/draw.sh" "$d" >"$work/out" 2>"$work/err" || fail "draw.sh on the reordered files exited $?"
grep -q '>256 MiB<' "$d/min_budget.svg" && grep -q '>320 MiB<' "$d/min_budget.svg" ||
  fail "min_budget.svg does not label 256 and 320 MiB apart: $(grep -o '>[0-9.]* [MG]iB<' "$d/min_budget.svg" | tr '\n' ' ')"
# The two strategies' timelines are the same: the one drawn on top is thinner, so both show.
widths=$(for s in raw pooled; do grep -A2 "<title>$s</title>" "$d/timeline_dynamic-shapes.svg" | grep -o 'stroke-width="[0-9.]*"' | head -n 1; done | sort -u | wc -l)
[ "$widths" -eq 2 ] || fail "coinciding timelines are drawn with one width"
# A segment of small allocated blocks reads as allocated: only blocks wide enough to show an
# edge get the white one (here the two of segment 1, not the 300 of 1 MiB of segment 0).
{
  echo "segment,offset,size,state,alloc_id,requested,segment_size,segment_address,pool,stream"
  for i in $(seq 0 299); do echo "0,$((i * 1048576)),1048576,allocated,$i,1048576,314572800,17592186044416,large,0"; done
  echo "1,0,104857600,allocated,300,1,209715200,17592500617216,large,0"
  echo "1,104857600,104857600,free,-1,0,209715200,17592500617216,large,0"
} >"$d/small_blocks.csv"
gnuplot -c "$plots/oommap.gp" "$d/small_blocks.csv" "$d/small_blocks" svg 2>"$work/err" || fail "oommap.gp on small blocks: $(cat "$work/err")"
edges=$(grep -c "stroke='rgb(255, 255, 255)'" "$d/small_blocks.svg")
[ "$edges" -eq 2 ] || fail "$edges white edges in the map of small blocks, expected 2"

# A cap map whose status is not monotonic: the safe cap is one past the highest failing interval
# (4 GiB here), not the smallest that completes (2 GiB), and both are in the title.
{
  echo "cap_lo_bytes,cap_hi_bytes,status,oom_event"
  echo "1073741824,2147483647,oom,10"
  echo "2147483648,3221225471,ok,-1"
  echo "3221225472,4294967295,oom,20"
  echo "4294967296,,ok,-1"
} >"$d/capmap_w_caching.csv"
gnuplot -c "$plots/capmap.gp" "$d/capmap_w_caching.csv" "$d/capmap" svg 2>"$work/err" || fail "capmap.gp: $(cat "$work/err")"
grep -q "smallest that completes 2.000 GiB, safe from 4.000 GiB" "$d/capmap.svg" || fail "capmap.gp: the title's caps are not 2 and 4 GiB"
grep -q "out of memory" "$d/capmap.svg" && grep -q "completes" "$d/capmap.svg" || fail "capmap.gp: a status is missing from the key"

# Only summary.csv: the figures of the other files are passed over, one note each.
d=$work/some
mkdir -p "$d"
cp "$work/all/summary.csv" "$d/"
"$plots/draw.sh" "$d" >"$work/out" 2>"$work/err" || fail "draw.sh with summary.csv only exited $?"
[ -s "$d/peak_reserved.png" ] && [ -s "$d/latency.png" ] || fail "the summary figures were not drawn"
for what in "no oom.csv" "no micro.csv" "memory over time on dynamic-shapes not drawn" "memory map at the fragmenter's OOM"; do
  grep -q "$what" "$work/out" || fail "no note '$what': $(cat "$work/out")"
done

# A summary.csv without the latency columns fails the drawing, not silently.
d=$work/bad
mkdir -p "$d"
cut -d, -f1-18 "$work/all/summary.csv" >"$d/summary.csv"
"$plots/draw.sh" "$d" >"$work/out" 2>"$work/err" && fail "draw.sh accepted a summary.csv without alloc_ns_p50"

"$plots/draw.sh" "$work/nonexistent" >/dev/null 2>&1 && fail "draw.sh accepted a missing directory"

# ZeRO per rank: rank 0's rows of `run --ranks 2` and of `run --ranks 1`, told by their device.
d=$work/zero
mkdir -p "$d"
head="workload,strategy,conf,device,budget_bytes,seed,events,status,oom_kind,oom_event,peak_requested_bytes,peak_allocated_bytes,peak_reserved_bytes,frag_pct,num_device_alloc,num_device_free,num_alloc_retries,num_ooms,alloc_ns_p50,alloc_ns_p99,free_ns_p50,wall_s,events_per_s,step_ms_p50,kernel_ms_total,harness_ns_per_event,nccl_bytes"
{
  echo "$head"
  for st in 1 2 3; do
    for s in caching expandable; do
      for r in 0 1; do
        echo "\"zero:stage=$st,world=2,rank=$r\",$s,,cuda:$r NVIDIA H200,0,42,100,ok,none,-1,8e9,8.4e9,9.8e9,13,112,0,0,0,200,60000,230,0.4,9e4,21.4,160,97,903872512"
      done
      echo "\"zero:stage=$st,world=2,rank=all\",$s,,2 x NVIDIA H200,0,42,200,ok,none,-1,16e9,16.8e9,19.6e9,13,224,0,0,0,200,60000,230,0.4,9e4,21.4,320,97,1807745024"
    done
  done
} >"$d/summary.csv"
{
  echo "$head"
  for st in 1 2 3; do
    for s in caching expandable; do
      echo "\"zero:stage=$st,world=1,rank=0\",$s,,cuda:0 NVIDIA H200,0,42,100,ok,none,-1,9e9,9.5e9,11.9e9,19,114,0,0,0,200,60000,230,0.3,9e4,21.9,160,97,608174080"
    done
  done
} >"$d/one_gpu.csv"
"$plots/draw.sh" "$d" >"$work/out" 2>"$work/err" || fail "draw.sh on ZeRO ranks exited $?: $(cat "$work/err")"
head -c 8 "$d/zero_ranks.png" 2>/dev/null | od -An -c | grep -q 'P   N   G' || fail "zero_ranks.png is not a PNG: $(cat "$work/out")"
grep -q '<svg' "$d/zero_ranks.svg" 2>/dev/null || fail "zero_ranks.svg is not an SVG"
[ -s "$work/err" ] && fail "gnuplot complained on ZeRO ranks: $(cat "$work/err")"

# tune's figures: the ranking of the last run in tune.csv (a conf with commas named whole),
# memory over the job per trace (the worst one marked), the maps at the peak side by side.
d=$work/tune
mkdir -p "$d"
{
  echo "workload,trace,worst,device,objective,cap_bytes,rank,strategy,conf,recommended,recorded,status,oom_kind,peak_requested_bytes,peak_allocated_bytes,peak_reserved_bytes,num_device_alloc,num_device_free,num_alloc_retries,min_budget_bytes,max_fail_bytes,limit,probes,wall_s,note,trace_ooms"
  echo "old,old,1,sim:h200,reserved,0,1,caching,max_split_size_mb:20,1,0,ok,none,1,1,1,1,0,0,1,0,cap,3,0.1,,0"
  # A job of two traces: a row per trace, the worst one marked.
  for t in 0 1; do
    echo "job,r$t,$t,sim:h200,reserved,0,1,raw,,0,0,ok,none,7000,7000,$((6000 + t * 1000)),10,10,0,7000,6999,budget,3,0.1,reference: not a PyTorch setting; its limit is a budget,0"
  done
  for t in 0 1; do
    echo "job,r$t,$((1 - t)),sim:h200,reserved,0,2,caching,\"expandable_segments:True,roundup_power2_divisions:[64:0,>:4]\",1,0,ok,none,7000,7100,$((7300 - t * 1000)),5,0,0,7200,7100,cap,9,0.1,,0"
  done
  for t in 0 1; do
    echo "job,r$t,$t,sim:h200,reserved,0,3,caching,,0,1,ok,none,7000,7100,$((8000 + t * 1000)),12,0,0,7600,7500,cap,9,0.1,,0"
  done
  for t in 0 1; do
    echo "job,r$t,$t,sim:h200,reserved,0,4,caching,max_split_size_mb:32,0,0,oom,fragmentation,7000,7100,9100,12,0,0,,9000,cap,9,0.1,out of memory on the card,0"
  done
} >"$d/tune.csv"
{
  echo "trace,config,event,step,allocated,reserved,peak_allocated,peak_reserved"
  for t in replay:job.rank0.pickle replay:job.rank1.pickle; do
    extra=0
    [ $t = replay:job.rank1.pickle ] && extra=500
    for c in recorded recommended pytorch; do
      for e in 0 10 20; do
        r=$((e * 300 + extra)); [ $c = recommended ] && r=$((e * 200 + extra))
        a=$((e * 100)); [ $c = pytorch ] && a=
        echo "$t,$c,$e,$((e / 10)),$a,$r,$a,$r"
      done
    done
  done
} >"$d/tune_timeline.csv"
cp "$work/all/oommap_fragmenter_caching.csv" "$d/tune_segments_recorded.csv"
cp "$work/all/oommap_fragmenter_caching.csv" "$d/tune_segments_recommended.csv"
printf 'trace replay:job.rank1.pickle\nrecorded_event 20\nrecorded_reserved 6000\nrecorded_at peak\nrecommended_event 19\nrecommended_reserved 4500\nrecommended_at peak\n' \
  >"$d/tune_segments.txt"
"$plots/draw.sh" "$d" >"$work/out" 2>"$work/err" || fail "draw.sh on tune's results exited $?: $(cat "$work/err")"
[ -s "$work/err" ] && fail "gnuplot complained on tune's results: $(cat "$work/err")"
for f in tune_ranking tune_timeline tune_segments; do
  grep -q '<svg' "$d/$f.svg" 2>/dev/null || fail "$f.svg is not an SVG: $(cat "$work/out")"
done
grep -q "no summary.csv" "$work/out" && fail "notes of the bench's figures in a folder of tune's results: $(cat "$work/out")"
grep -q '2. expandable‚pow2_div:\[64:0‚>:4\]' "$d/tune_ranking.svg" || fail "the ranking does not name the conf with commas whole"
grep -q 'max_split:20' "$d/tune_ranking.svg" && fail "the ranking drew a row of an earlier run"
[ "$(grep -c '>[1-4]\. ' "$d/tune_ranking.svg")" -eq 4 ] || fail "the ranking does not draw one row per configuration"
grep -q '3. (default)  \[recorded\]' "$d/tune_ranking.svg" || fail "the ranking does not mark the recorded row"
grep -q 'replay:job.rank1.pickle  (worst' "$d/tune_timeline.svg" || fail "the worst trace is not marked"
grep -q 'replay:job.rank0.pickle  (worst' "$d/tune_timeline.svg" && fail "the wrong trace is marked worst"
grep -q 'recorded (the defaults), at its peak' "$d/tune_segments.svg" || fail "the recorded map has no title"

finish plots_test
