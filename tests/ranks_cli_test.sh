#!/usr/bin/env bash
# ranks_cli_test.sh ALLOCBENCH: `allocbench run --ranks` on simulated cards: the rows, the
# combined row, an OOM on one rank, and bad input refused with one line and no results.
# Processes started by a launcher: tests/launch_test.sh.
set -u
ab=${1:?usage: ranks_cli_test.sh PATH_TO_ALLOCBENCH}
source "$(dirname "$0")/lib.sh"
small=zero:steps=2,layers=2,d_model=256,heads=4,vocab=1024,batch=2,seq=128
# The launcher's variables come only from the cases below.
unset RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT AB_RENDEZVOUS_TIMEOUT AB_COLLECTIVE_TIMEOUT \
  TORCHELASTIC_RUN_ID TORCHELASTIC_USE_AGENT_STORE OMPI_COMM_WORLD_RANK PMI_RANK PMIX_RANK SLURM_PROCID

# refuse (lib.sh): VAR=VALUE before it reaches allocbench.

refuse "--ranks '0': expected 1 to 1024 ranks, or env" run -w zero -s raw --device sim --ranks 0
refuse "--ranks 'two'" run -w zero -s raw --device sim --ranks two
refuse "only -w zero runs as several ranks" run -w random -s raw --device sim --ranks 2
refuse "rank= comes from --ranks" run -w zero:rank=1 -s raw --device sim --ranks 2
refuse "world=4, but there are 2 ranks" run -w zero:world=4 -s raw --device sim --ranks 2
refuse "--faults rank=1: only a run of several ranks" run -w zero -s raw --device sim --faults nth=3,rank=1
refuse "--faults: a budget search needs runs that fail only for want of memory" oom -w random:ops=100 -s raw --device sim --faults nth=3,rank=1
refuse "--faults rank=2: there are ranks 0 to 1" run -w zero -s raw --device sim --ranks 2 --faults nth=3,rank=2
refuse "--nccl: only runs of several ranks" run -w zero -s raw --device sim --nccl /x/libnccl.so.2
refuse "unknown key 'bogus'" run -w zero -s pooled -c bogus:1 --device sim --ranks 2
refuse "fault injection works on the simulated device only" run -w zero -s raw --device cuda --ranks 2 --faults nth=1
refuse "--ranks env: no launcher started this process" run -w zero -s raw --device sim --ranks env
MASTER_PORT=1 refuse "WORLD_SIZE is not set" run -w zero -s raw --device sim --ranks env
TORCHELASTIC_RUN_ID=j TORCHELASTIC_USE_AGENT_STORE=False RANK=0 WORLD_SIZE=2 MASTER_ADDR=h MASTER_PORT=1 \
  refuse "torchrun shares no store with its workers here" run -w zero -s raw --device sim --ranks env
refuse "--collective-timeout='0': expected seconds" run -w zero -s raw --device sim --ranks 2 --collective-timeout 0
refuse "--collective-timeout: only runs of several ranks" run -w zero -s raw --device sim --collective-timeout 5
AB_COLLECTIVE_TIMEOUT=soon refuse "AB_COLLECTIVE_TIMEOUT='soon': expected seconds" run -w zero -s raw --device sim --ranks 2
RANK=2 WORLD_SIZE=2 MASTER_ADDR=h MASTER_PORT=1 refuse "RANK='2': expected a whole number from 0 to 1" run -w zero -s raw --device sim --ranks env
RANK=0 WORLD_SIZE=2 MASTER_ADDR=h MASTER_PORT=99999 refuse "MASTER_PORT='99999'" run -w zero -s raw --device sim --ranks env
RANK=0 WORLD_SIZE=2 MASTER_PORT=1 refuse "MASTER_ADDR is not set" run -w zero -s raw --device sim --ranks env
RANK=0 WORLD_SIZE=1 MASTER_ADDR=h MASTER_PORT=1 refuse "each rank drives the GPU of its rank on its host" run -w zero -s raw --device cuda:1 --ranks env
"$ab" run --help | grep -q -- '--ranks N' || fail "--ranks not in --help"

# Three ranks: a row each, then the combined one, whose peaks and counts are the sums;
# the plan columns follow live_peak_bytes, and the placement band's close the header.
out="$work/three"
"$ab" run -w "$small" -s pooled --device sim --ranks 3 --out "$out" --format csv >"$work/csv" 2>"$work/err" ||
  fail "--ranks 3 exited $?: $(cat "$work/err")"
[ "$(wc -l <"$work/csv")" -eq 5 ] || fail "--ranks 3 printed $(wc -l <"$work/csv") lines"
head -n 1 "$out/summary.csv" | grep -q ',harness_ns_per_event,nccl_bytes,peak_footprint_bytes,live_peak_bytes,plan_hits,plan_misses,plan_bytes,peak_reserved_low,peak_reserved_high,device_allocs_low,device_allocs_high$' || fail "header: $(head -n 1 "$out/summary.csv")"
for r in 0 1 2; do
  grep -q "world=3,rank=$r\",pooled,,sim:h200,0,42,[0-9]*,no,ok," "$out/summary.csv" || fail "no ok row for rank $r"
  # The spec is long: its timeline is zero-<hash>, and its rows name the rank's spec whole.
  [ "$(grep -l "world=3,rank=$r\"*,,pooled$" "$out"/timeline_zero-*_pooled.csv 2>/dev/null | wc -l)" = 1 ] ||
    fail "no timeline for rank $r: $(ls "$out")"
done
# Counted from the end (the quoted workload holds commas): events (before approximate), the
# peaks and counts (frag_pct excepted), nccl_bytes, peak_footprint_bytes, live_peak_bytes, past
# the three plan columns (empty for pooled) and the four of the placement band.
awk -F, 'NR > 1 { n = NF; for (c = 1; c <= NF; c++) v[NR, c] = $c }
         END { split("30 25 24 23 21 20 19 18 9 8 7", back, " ");
               for (i = 1; i <= 11; i++) { c = n - back[i]; s = v[2, c] + v[3, c] + v[4, c];
                 if (s != v[5, c]) { print "column " c ": " s " != " v[5, c]; bad = 1 } }
               exit bad }' "$out/summary.csv" || fail "the combined row is not the sum of the ranks"
grep -q 'rank=all",pooled,,3 x sim:h200,' "$out/summary.csv" || fail "combined row: $(tail -n 1 "$out/summary.csv")"

# An OOM on rank 1: its row says oom, the others stopped, the combined row oom, exit 0,
# and the table names the rank.
"$ab" run -w "$small" -s raw --device sim --ranks 3 --faults nth=100,rank=1 --out "$work/oom" >"$work/table" 2>"$work/err" ||
  fail "an OOM on one rank exited $?: $(cat "$work/err")"
grep -q 'rank=1",raw,,sim:h200,0,42,[0-9]*,no,oom,' "$work/oom/summary.csv" || fail "rank 1 is not oom"
[ "$(grep -c ',stopped,' "$work/oom/summary.csv")" -eq 2 ] || fail "the other ranks did not stop"
grep -q 'rank=all",raw,,3 x sim:h200,0,42,[0-9]*,no,oom,' "$work/oom/summary.csv" || fail "the combined row is not oom"
grep -q "rank 0: stopped before event [0-9]*: rank 1 ran out of memory at event" "$work/table" || fail "table: $(cat "$work/table")"

# Nobody at the address: one clear line once the timeout passes (a port nobody answers on:
# bash's own /dev/tcp tells).
nobody=$((20000 + $$ % 20000))
while (: <"/dev/tcp/127.0.0.1/$nobody") 2>/dev/null; do nobody=$((nobody + 1)); done
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$nobody AB_RENDEZVOUS_TIMEOUT=0.5 \
  refuse "rank 1: could not reach the store at 127.0.0.1:$nobody within 0.5 s" run -w zero -s raw --device sim --ranks env
# A longer wait says once, a second in, what it waits for and why it has not got there; -q
# keeps it silent.
for quiet in "" -q; do
  RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$nobody AB_RENDEZVOUS_TIMEOUT=2 \
    "$ab" run -w zero -s raw --device sim --ranks env $quiet --out "$work/waits" >/dev/null 2>"$work/err" &&
    fail "a rank with nobody at its store exited 0"
  said=$(grep -c "allocbench run: rank 1 of 2 waits for the store at 127.0.0.1:$nobody (up to 2 s): Connection refused" "$work/err")
  [ "$said" -eq "$([ -z "$quiet" ] && echo 1 || echo 0)" ] || fail "the wait for the store ($quiet): $(cat "$work/err")"
done

finish ranks_cli_test
