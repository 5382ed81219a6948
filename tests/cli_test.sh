#!/usr/bin/env bash
# cli_test.sh ALLOCBENCH: the command line, good and bad. Every refusal must exit with a code
# from 1 to 127 and say one line on stderr naming the bad input, and write no results.
set -u
ab=${1:?usage: cli_test.sh PATH_TO_ALLOCBENCH}
source "$(dirname "$0")/lib.sh"


# -c takes PYTORCH_CUDA_ALLOC_CONF's value: the variable's name pasted with it is refused with the fix.
refuse "-c takes the variable's value, without 'PYTORCH_CUDA_ALLOC_CONF=': -c 'expandable_segments:True'" \
  run -w random -s caching -c PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
refuse "without 'export PYTORCH_CUDA_ALLOC_CONF=': -c 'expandable_segments:True'" \
  oom -w random -s caching -c "export PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'"
refuse "unknown strategy" run -w random -s nosuch --device sim
refuse "unknown workload 'nosuch'" run -w nosuch -s raw --device sim
refuse "unknown simulated card 'h300'" run -w random -s raw --device sim:h300
refuse "--device 'tpu'" run -w random -s raw --device tpu
refuse "--device '': expected a device" run -w random -s raw --device ''
refuse "--budget '-3GB'" run -w random -s raw --device sim --budget -3GB
refuse "unknown unit 'XB'" run -w random -s raw --device sim --budget 12XB
refuse "--budget '0'" run -w random -s raw --device sim --budget 0
refuse "--budget '1.5': at position 2: a fractional size needs a unit" run -w random -s raw --device sim --budget 1.5
refuse "--budget 200.00 GiB is more than the device's" run -w random -s raw --device sim --budget 200GiB
refuse "--seed 'abc'" run -w random -s raw --device sim --seed abc
refuse "chunk" run -w random -s pooled -c chunk:abc --device sim
refuse "unknown key 'bogus'" run -w random -s raw -c bogus:1 --device sim
refuse "chunk of 5.17 PiB holds more than 4194304 blocks of min_class 512 B: at most 2.00 GiB" run -w random -s pooled -c chunk:5555555552MiB --device sim
refuse "ops" run -w random:ops=0 -s raw --device sim
refuse "-w WORKLOAD and -s STRATEGY are required" run -s raw --device sim
refuse "--frobnicate" run -w random -s raw --frobnicate
refuse "--format 'xml'" run -w random -s raw --device sim --format xml
refuse "--faults" run -w random -s raw --device sim --faults rate=2
refuse "'nth' given again (first at position 1)" run -w random -s raw --device sim --faults nth=1,nth=2
refuse "--faults 'nth=1,rate=0.5': expected nth=N or rate=F (one of them)" run -w random -s raw --device sim --faults nth=1,rate=0.5
refuse "capacity must be more than 526.81 MiB, and at most 128.00 TiB" run -w random -s raw --device sim:1000TiB
refuse "fault injection works on the simulated device only" run -w random -s raw --device cuda --faults nth=1
refuse "/no/such/trace.csv" run -w replay:/no/such/trace.csv -s raw --device sim
refuse "$work: is a directory (expected a file)" run -w "replay:$work" -s raw --device sim
refuse "unknown command 'frobnicate'" frobnicate
refuse "'layers' given again (first at position 1)" run -w dynamic-shapes:layers=12,layers=13 -s raw --device sim
# An option that takes one value, given twice, is refused: the first would be dropped unseen.
refuse "-w given twice ('random', then 'zero'): allocbench run takes one" run -w random -w zero -s raw --device sim
refuse "-w given twice ('random', then 'zero'): allocbench oom takes one" oom -w random -w zero -s raw --device sim
refuse "-w given twice ('random', then 'zero'): allocbench compare takes one" compare -w random -w zero -s raw --device sim
refuse "-s given twice ('raw', then 'pooled')" run -w random -s raw -s pooled --device sim
refuse "--device given twice ('sim', then 'sim:a100-40gb')" replay "$(dirname "$0")/data/pytorch-2.11-h200/cnn_dyn.default.trace.csv.gz" --device sim --device sim:a100-40gb
refuse "--info describes the trace and runs nothing: --export-trace is for a replay" replay "$(dirname "$0")/data/pytorch-2.11-h200/cnn_dyn.default.trace.csv.gz" --info --export-trace "$work/x.csv"
refuse "--info describes the trace and runs nothing: -s is for a replay" replay "$(dirname "$0")/data/pytorch-2.11-h200/cnn_dyn.default.trace.csv.gz" --info -s raw
# A missing value is named, also where getopt would take the next option for it.
refuse "--budget needs a value (SIZE), but the option '--out' follows it" run -w random -s raw --device sim --budget
"$ab" run -w random -s raw --device sim --out "$work/refused" --budget >"$work/out" 2>"$work/err"
[ $? -eq 2 ] && grep -qF "allocbench run: --budget needs a value (SIZE) after it" "$work/err" ||
  fail "--budget last on the line: $(cat "$work/err")"
# Errors that say the fix: several strategies where one is taken, a trace given as a workload,
# and PYTORCH_CUDA_ALLOC_CONF's own words followed by the spelling it takes.
refuse "-s 'caching,expandable': one strategy here; compare, oom and matrix take several" run -w random -s caching,expandable --device sim
trace=$(dirname "$0")/data/pytorch-2.11-h200/cnn_dyn.default.trace.csv.gz
refuse "'$trace' is a file: a recorded trace is -w replay:$trace" tune -w "$trace"
refuse "got 'true': use True" run -w random -s caching -c expandable_segments:true --device sim
refuse "Unrecognized key 'max_split_sise_mb' in Accelerator allocator config. Did you mean 'max_split_size_mb'?" run -w random -s caching -c max_split_sise_mb:128 --device sim
refuse "Unrecognized key 'True' in Accelerator allocator config. Separate the keys with ',', not ';'." run -w random -s caching -c "max_split_size_mb:128;expandable_segments:True" --device sim
refuse "Unrecognized key 'bogus' in Accelerator allocator config." run -w random -s caching -c bogus:1 --device sim
grep -q "Did you mean" "$work/err" && fail "a key far from every known one got a guess: $(cat "$work/err")"
refuse "-w and a trace as the argument: give one of them" tune -w random "$trace"
# `tune TRACE` is `tune -w replay:TRACE`.
# (The line to paste and the predictions; the rows also hold each run's time.) Of the recorded
# trace's first thousand records: what is compared is the two spellings, which any trace shows,
# and tune takes a tenth of the time of the whole one.
gunzip -c "$trace" | awk 'NR <= 1001' | gzip >"$work/head.csv.gz"
"$ab" tune "$work/head.csv.gz" -q --out "$work/tune" >"$work/a" 2>"$work/err" || fail "tune TRACE exited $?: $(cat "$work/err")"
"$ab" tune -w "replay:$work/head.csv.gz" -q --out "$work/tune" >"$work/b" 2>&1 || fail "tune -w replay:TRACE exited $?"
grep -q "^export PYTORCH_CUDA_ALLOC_CONF=" "$work/a" && cmp -s <(tail -3 "$work/a") <(tail -3 "$work/b") ||
  fail "tune TRACE and tune -w replay:TRACE differ: $(tail -3 "$work/a")"
# A budget in decimal units is said in binary too, once; -q anywhere silences it; a card
# named in GB states its capacity in GB.
"$ab" run -w random:ops=200 -s raw --device sim --budget 40GB --out "$work/dec" >/dev/null 2>"$work/err" || fail "--budget 40GB failed"
[ "$(grep -c "allocbench run: --budget 40GB = 37.25 GiB" "$work/err")" = 1 ] || fail "--budget 40GB not said once: $(cat "$work/err")"
"$ab" run -w random:ops=200 -s raw --device sim --budget 40GB --out "$work/dec" -q >/dev/null 2>"$work/err"
[ -s "$work/err" ] && fail "-q did not silence the decimal note: $(cat "$work/err")"
"$ab" run -w random:ops=200 -s raw --device sim --budget 40GiB --out "$work/dec" >/dev/null 2>"$work/err"
grep -q "decimal" "$work/err" && fail "a binary budget was called decimal: $(cat "$work/err")"
"$ab" list | grep -qE "^  a100-40gb +40.00 GiB = 42.95 GB " || fail "list does not state a100-40gb in GB: $("$ab" list | grep a100-40gb)"
# `help CMD` is `CMD --help`; --version names the commit and the build's options.
"$ab" help run >"$work/a" 2>&1 && "$ab" run --help >"$work/b" 2>&1 && cmp -s "$work/a" "$work/b" ||
  fail "help run is not run --help: $(head -2 "$work/a")"
"$ab" --version >"$work/a" 2>&1 && grep -q "(commit " "$work/a" && grep -q "^built with: CUDA " "$work/a" ||
  fail "--version: $(cat "$work/a")"
refuse "batch x seq x vocab" run -w mixed-precision:batch=1048576,seq=1048576,vocab=4194304 -s raw --device sim

# A workload too large for host memory is refused before it is generated, naming what to
# lower: beyond any machine's allocation ids; beyond a 1 GB address space (not under
# AddressSanitizer, which needs terabytes of address space of its own).
start=$(date +%s%N)
refuse "lower steps or layers" run -w dynamic-shapes:steps=1000000,layers=1024 -s raw --device sim
if ! ldd "$ab" 2>/dev/null | grep -q libasan; then
  (failures=0 && ulimit -v 1000000 && refuse "available: lower steps" run -w cnn-dynamic:steps=100000 -s raw --device sim &&
    [ $failures = 0 ]) || fail "cnn-dynamic:steps=100000 under a 1 GB address space"
fi
took_ms=$((($(date +%s%N) - start) / 1000000))
[ $took_ms -lt 3000 ] || fail "refusing the workloads too large took $took_ms ms: they were generated"

# Without a GPU, --device cuda says so in those words (the runtime's "driver version is
# insufficient" reads as "update the driver").
if "$ab" run -w random:ops=10 -s raw --out "$work/auto" 2>&1 >/dev/null | grep -q "no usable GPU" &&
  ! "$ab" run -w random:ops=10 -s raw --device cuda --out "$work/auto" 2>&1 | grep -q "no CUDA support"; then
  refuse "--device cuda: no GPU here" run -w random -s raw --device cuda
fi

# A refused conf is one line, even where --device auto would name its device, and quotes
# what the user typed, not the preset in front of it.
refuse "-c 'bogus:1': at position 1: Unrecognized key 'bogus'" run -w random -s caching -c bogus:1
refuse "-c 'max_split_size_mb:abc': at position 19:" run -w random -s split-limited -c max_split_size_mb:abc
refuse "expandable: -c 'bogus:1': at position 1:" oom -w random -s caching,expandable -c max_split_size_mb:128 -c bogus:1
refuse "-c 'bogus:1': at position 1:" matrix -w random -s expandable -c bogus:1
refuse "-s 'raw,raw': raw is named at positions 1 and 2 with the same options" matrix -w random -s raw,raw --device sim
refuse "-s 'raw,raw': raw is named at positions 1 and 2 with the same options; name it once" tune -w random -s raw,raw --device sim
refuse "the list opened at position 26 lacks its closing ']'" run -w random -s caching -c "roundup_power2_divisions:[64:8,256:4"
# PyTorch takes a fraction of 0; a cap of 0 bytes is refused here as --cap 0 is, not run as a
# cap that its OOMs are not explained against.
refuse "-c 'per_process_memory_fraction:0': per_process_memory_fraction is a cap of 0 bytes on sim:h200" run -w random -s caching -c per_process_memory_fraction:0
refuse "per_process_memory_fraction:1e-12': per_process_memory_fraction is a cap of 0 bytes" replay "$(dirname "$0")/data/pytorch-2.11-h200/blame/frag.pickle" \
  -c per_process_memory_fraction:1e-12

# As Note [One grammar for a cap] says, every command that runs a trace reads --cap alike. A bare number
# is refused with the forms that are caps; 20G is said back as GiB; 20e9 is bytes; 0.05x is
# that fraction of the card, as per_process_memory_fraction:0.05 in -c, to the byte.
for cmd in run oom compare matrix tune; do
  refuse "--cap '20': at position 3: a bare number is no cap: give its unit (20GiB, 20GB or 20G)" \
    $cmd -w random:ops=300 -s caching --device sim --cap 20
  refuse "--cap '0.05': at position 5: a fraction of the card is written 0.05x" $cmd -w random:ops=300 -s caching --device sim --cap 0.05
  refuse "--cap '1.5x': at position 1: a fraction of the card is a number above 0 and at most 1" \
    $cmd -w random:ops=300 -s caching --device sim --cap 1.5x
  # A fraction too small to make a byte of the card is refused, never taken as no cap at all.
  refuse "--cap: a fraction of 1e-12 is a cap of 0 bytes on a card of 150109880320 bytes" \
    $cmd -w random:ops=300 -s caching --device sim --cap 0.000000000001x
  strategy="-s caching"
  [ $cmd = tune ] && strategy= # tune chooses the caching allocator's settings itself
  for cap in 20G 20e9 0.05x; do
    "$ab" $cmd -w random:ops=300 $strategy --device sim --cap $cap --out "$work/caps" >/dev/null 2>"$work/err" ||
      fail "$cmd --cap $cap exited $?: $(cat "$work/err")"
  done
done
"$ab" run -w random:ops=300 -s caching --device sim --cap 20G --out "$work/caps" 2>&1 >/dev/null |
  grep -qF -- "--cap 20G = 20.00 GiB (G read as GiB; 20GB would be decimal)" || fail "20G is not said back as GiB"
replay_at() {
  "$ab" replay "$(dirname "$0")/data/pytorch-2.11-h200/cnn_dyn.default.pickle.gz" "$@" --device sim --format csv \
    --out "$work/caps" 2>"$work/replay.err" | python3 -c '
import csv, sys
row = list(csv.DictReader(sys.stdin))[0]
print(" ".join(row[k] for k in ("conf", "status", "peak_reserved_bytes", "num_device_alloc", "num_device_free", "num_alloc_retries")))'
}
by_cap=$(replay_at --cap 0.06x)
by_conf=$(replay_at -c per_process_memory_fraction:0.06)
[ -n "$by_cap" ] && [ "$by_cap" = "$by_conf" ] || fail "--cap 0.06x ($by_cap) and -c per_process_memory_fraction:0.06 ($by_conf) differ"
grep -q "each cudaMalloc at the address the recorded run got" "$work/replay.err" ||
  fail "-c per_process_memory_fraction does not keep the recorded addresses: $(cat "$work/replay.err")"

# The budget search and the comparison refuse the same way, before anything runs.
for cmd in oom compare; do
  refuse "--lo 1.86 GiB is above --hi 953.67 MiB" $cmd -w random -s raw --device sim --lo 2GB --hi 1GB
  refuse "--tolerance '0': must be more than 0 bytes" $cmd -w random -s raw --device sim --tolerance 0
  refuse "-s 'nosuch': unknown strategy" $cmd -w random -s raw,nosuch --device sim
  refuse "empty strategy name at position 5" $cmd -w random -s raw,,pooled --device sim
  refuse "--lo '-3GB'" $cmd -w random -s raw --device sim --lo -3GB
  refuse "--hi '-3GB'" $cmd -w random -s raw --device sim --hi -3GB
  refuse "--budget: the search sets the budget" $cmd -w random -s raw --device sim --budget -3GB
  refuse "--hi 200.00 GiB is more than the device's total" $cmd -w random -s raw --device sim --hi 200GiB
  refuse "-c given 3 times for 2 strategies" $cmd -w random -s raw,pooled -c a:1 -c b:2 -c c:3 --device sim
  refuse "-s 'caching,raw,caching': caching is named at positions 1 and 3 with the same options" $cmd -w random -s caching,raw,caching --device sim
  refuse "caching is named at positions 1 and 2 with the same options" $cmd -w random -s caching,caching -c a:1 -c a:1 --device sim
  refuse "chunk" $cmd -w random -s raw,pooled -c chunk:abc --device sim
  refuse "-w WORKLOAD and -s STRATEGY" $cmd -s raw --device sim
  refuse "--cap: raw has no memory cap" $cmd -w random -s raw,pooled --device sim --search cap -c '' -c chunk:4MiB
  refuse "--cap and --search budget" $cmd -w random -s caching --device sim --search budget --cap 1GiB
  refuse "--search 'card': expected budget or cap" $cmd -w random -s caching --device sim --search card
done

# A results folder that cannot be written is refused before any work: one line naming it,
# nothing on stdout, the file in its way untouched.
: >"$work/afile"
trace=$(cd "$(dirname "$0")" && pwd)/data/pytorch-2.11-h200/cnn_dyn.default.trace.csv.gz
# refuse_out OUT SAYS ARGS...
refuse_out() {
  local out=$1 says=$2
  shift 2
  "$ab" "$@" --device sim --out "$out" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ $rc -lt 1 ] || [ $rc -gt 127 ]; then fail "$* --out $out exited $rc"; fi
  [ "$(wc -l <"$work/err")" -eq 1 ] || fail "$* --out $out: not one line on stderr: $(cat "$work/err")"
  grep -qF -- "--out '$out': $says" "$work/err" || fail "$* --out $out: stderr does not say '$says': $(cat "$work/err")"
  [ -s "$work/out" ] && fail "$* --out $out: wrote to stdout"
  [ -f "$work/afile" ] && [ ! -s "$work/afile" ] || fail "$* --out $out: the file in the way changed"
}
for out in "$work/afile" "$work/afile/sub"; do
  refuse_out "$out" "$work/afile is not a directory" run -w random:ops=2000 -s caching
  refuse_out "$out" "$work/afile is not a directory" oom -w random:ops=2000 -s raw
  refuse_out "$out" "$work/afile is not a directory" compare -w random:ops=2000 -s raw,pooled
  refuse_out "$out" "$work/afile is not a directory" matrix --quick -w fragmenter
  refuse_out "$out" "$work/afile is not a directory" replay "$trace"
  refuse_out "$out" "$work/afile is not a directory" run -w zero:steps=1,layers=1 -s raw --ranks 2
  refuse_out "$out" "$work/afile is not a directory" tune -w random:ops=2000
done
refuse_out "" "an empty path" run -w random:ops=2000 -s raw
if [ "$(id -u)" -ne 0 ]; then # root writes anywhere
  mkdir "$work/readonly" && chmod 555 "$work/readonly"
  refuse_out "$work/readonly" "cannot write there: Permission denied" run -w random:ops=2000 -s raw
fi
# The check leaves nothing behind when a later input is refused.
"$ab" run -w nosuch -s raw --device sim --out "$work/new/deeper" >/dev/null 2>&1
[ -e "$work/new" ] && fail "a refused run left its --out folder behind"
# replay --info writes nothing, so it does not need a folder.
"$ab" replay --info "$trace" --out "$work/afile" >/dev/null || fail "replay --info checked --out"

# Help comes from the one option table: each command's --help lists exactly the options it
# takes (each accepted, each in its usage line), and an option another command lists is
# refused by the commands whose help leaves it out.
sample() { # a value the option accepts
  case $1 in
    workload) echo random ;; strategy) echo raw ;; conf) echo "" ;; device) echo sim ;;
    seed | trace-device) echo 0 ;; ranks) echo 2 ;;
    out) echo "$work/sample" ;; format) echo csv ;; faults) echo nth=1 ;; placement) echo 1 ;; nccl) echo libnccl.so.2 ;;
    export-trace | export-snapshot) echo "$work/export" ;;
    budget | lo | hi | tolerance | cap | max-inflated) echo 1GB ;; objective) echo reserved ;; search) echo cap ;; cap-map) echo 128 ;;
    stacks) echo python ;; at) echo peak ;; frames | top) echo 1 ;; change) echo pool:1 ;;
    jobs | max-entries | collective-timeout | plugin-timeout) echo 10 ;; output) echo "$work/snapshot.pickle" ;;
    *) return 1 ;;
  esac
}
# help_options CMD: "NAME LETTER ARG" for each option of CMD's --help ("-" for none)
help_options() {
  "$ab" "$1" --help | sed -nE 's/^  (-([a-z]), |    )--([a-z-]+)( ([^ ]+))?( .*)?$/\3\t\2\t\5/p' |
    awk -F '\t' '{ print $1, ($2 == "" ? "-" : $2), ($3 == "" ? "-" : $3) }'
}
# try CMD NAME ARG: CMD with the option (and a value for it) before --help
try() {
  local operand=()
  [ "$1" = replay ] && operand=("$trace")
  if [ "$3" = - ]; then
    "$ab" "$1" "${operand[@]}" "--$2" --help
  else
    "$ab" "$1" "${operand[@]}" "--$2" "$(sample "$2")" --help
  fi
}
commands="list run replay oom compare matrix tune record"
for cmd in $commands; do help_options $cmd; done | sort -u >"$work/all_options"
[ "$(grep -c . "$work/all_options")" -ge 30 ] || fail "the help lists only $(grep -c . "$work/all_options") options in all"
for cmd in $commands; do
  "$ab" $cmd --help >"$work/help" 2>&1 || fail "$cmd --help exited $?"
  grep -q "^usage: allocbench $cmd" "$work/help" || fail "$cmd --help shows no usage"
  sed '/^$/q' "$work/help" >"$work/usage"
  help_options $cmd >"$work/options"
  while read -r name letter arg; do
    [ "$arg" = - ] || sample "$name" >/dev/null || fail "no sample value for --$name (add it to sample())"
    try $cmd "$name" "$arg" >"$work/out" 2>"$work/err" || fail "$cmd --help lists --$name, which it refuses: $(cat "$work/err")"
    [ "$name" = help ] && continue
    if [ "$letter" = - ]; then form="--$name"; else form="-$letter"; fi
    grep -qE -- "(^|[ [])$form( |]|$)" "$work/usage" || fail "$cmd: --$name is not in the usage: $(cat "$work/usage")"
  done <"$work/options"
  while read -r name letter arg; do
    grep -q "^$name" "$work/options" && continue # taken, or the abbreviation of one taken
    try $cmd "$name" "$arg" >"$work/out" 2>"$work/err"
    rc=$?
    [ $rc -eq 2 ] || fail "$cmd takes --$name (exit $rc), which its --help leaves out"
    [ -s "$work/out" ] && fail "$cmd --$name: wrote to stdout"
  done <"$work/all_options"
done
grep -q "^budget " <(help_options oom) && fail "oom --help lists --budget"
grep -q "^seed " <(help_options replay) && fail "replay --help lists --seed"
grep -q "rank=R" <("$ab" replay --help) && fail "replay --help speaks of ranks"
refuse "-w: the trace is the argument" replay "$trace" -w random --device sim
refuse "--seed: a trace replays as it was recorded" replay "$trace" --seed 3 --device sim
for cmd in oom compare matrix; do
  refuse "--faults: a budget search needs runs that fail only for want of memory" $cmd -w random -s raw --device sim --faults nth=1
done
# list -v: each strategy's keys once, indented under it; presets point to those they share.
"$ab" list -v >"$work/out" || fail "list -v exited $?"
[ "$(grep -c 'max_split_size_mb:N' "$work/out")" -eq 1 ] || fail "list -v shows caching's keys $(grep -c 'max_split_size_mb:N' "$work/out") times"
grep -q '^      max_split_size_mb:N ' "$work/out" || fail "caching's keys are not indented under it: $(grep 'max_split_size_mb:N' "$work/out")"
grep -q '^  caching ' "$work/out" || fail "list -v does not show caching"
grep -q '^      -c keys: those of caching$' "$work/out" || fail "split-limited does not point to caching's keys"
grep -q '^      ops=N ' "$work/out" || fail "random's arguments are not indented under it"
"$ab" --help >/dev/null || fail "--help exited $?"
"$ab" list >"$work/out" || fail "list exited $?"
for name in raw pooled async random replay dynamic-shapes cnn-dynamic mixed-precision zero fragmenter h200 a100-40gb; do
  grep -qw "$name" "$work/out" || fail "list does not show $name"
done
[ "$("$ab" list --strategies | head -n 1)" = raw ] || fail "list --strategies does not start with raw"

# A run prints its row and appends it; a second run appends another.
out="$work/results"
"$ab" run -w random:ops=3000 -s raw --device sim --out "$out" --format csv >"$work/csv" 2>"$work/err" || fail "run exited $?"
[ "$(wc -l <"$work/csv")" -eq 2 ] || fail "--format csv printed $(wc -l <"$work/csv") lines"
head -n 1 "$work/csv" | grep -q '^workload,strategy,conf,device,budget_bytes,seed,events,approximate,status,oom_kind,oom_event,peak_requested_bytes' ||
  fail "unexpected header: $(head -n 1 "$work/csv")"
grep -q '^random:ops=3000,raw,,sim:h200,0,42,' "$work/csv" || fail "unexpected row: $(tail -n 1 "$work/csv")"
"$ab" run -w random:ops=3000 -s pooled --device sim --out "$out" --quiet >"$work/table" || fail "table run exited $?"
# The run ends with its answer, and where it wrote.
tail -2 "$work/table" | head -1 | grep -qx "pooled on random:ops=3000: ran to the end, [0-9.]* MiB reserved at the peak\." ||
  fail "run's answer: $(tail -2 "$work/table")"
tail -1 "$work/table" | grep -qxF "Written to $out/summary.csv and $out/timeline_random_ops_3000_pooled.csv." ||
  fail "run does not say where it wrote: $(tail -1 "$work/table")"
grep -qE '^peak reserved +[0-9]+\.[0-9]{2} MiB$' "$work/table" || fail "the table does not show the peak reserved in MiB: $(cat "$work/table")"
# As Note [Tables for people] says: words, times with their unit, nothing that does not apply (a
# random sequence has no kernels, no NCCL, no conf, no budget; its OOM kind is none).
grep -qE '^alloc p99 +[0-9.]+ (ns|us)$' "$work/table" || fail "the table's times have no unit: $(cat "$work/table")"
grep -qE '^peak fragmentation +[0-9.]+%$' "$work/table" || fail "the table's percentages: $(cat "$work/table")"
grep -qE '_bytes|_ns_|_pct|^(conf|budget|NCCL bytes|OOM kind|kernel time|approximate) ' "$work/table" &&
  fail "the table shows column names or what does not apply: $(cat "$work/table")"
grep -q '^random:ops=3000,pooled,,sim:h200,0,42,[0-9]*,no,ok,none,-1,[0-9]*,' "$out/summary.csv" || fail "summary.csv does not keep bytes"
[ "$(wc -l <"$out/summary.csv")" -eq 3 ] || fail "summary.csv has $(wc -l <"$out/summary.csv") lines, expected 3"
[ -s "$out/timeline_random_ops_3000_raw.csv" ] || fail "no timeline file"
head -n 1 "$out/timeline_random_ops_3000_raw.csv" | grep -q '^event,step,requested,allocated,reserved,peak_requested,peak_allocated,peak_reserved,workload,conf,strategy$' || fail "timeline header: $(head -n 1 "$out/timeline_random_ops_3000_raw.csv")"
sed -n 2p "$out/timeline_random_ops_3000_raw.csv" | grep -q ',random:ops=3000,,raw$' || fail "the timeline's rows do not name their run: $(sed -n 2p "$out/timeline_random_ops_3000_raw.csv")"

# --device auto says which device it chose.
"$ab" run -w random:ops=100 -s raw --out "$out" >/dev/null 2>"$work/err" || fail "auto run exited $?"
grep -q -- "--device auto: using" "$work/err" || fail "auto does not say which device: $(cat "$work/err")"

# An OOM is a result: exit 0, status oom, the kind and the event recorded.
"$ab" run -w random:ops=3000 -s raw --device sim --budget 64MiB --out "$out" --format csv >"$work/csv" 2>"$work/err" ||
  fail "an OOM run exited $?"
tail -n 1 "$work/csv" | grep -q ',oom,capacity,' || fail "OOM row: $(tail -n 1 "$work/csv")"

# ... and its report explains it, and the segment map at that moment is written.
grep -q "Kind: capacity" "$work/err" || fail "no OOM report on stderr: $(cat "$work/err")"
map="$out/oommap_random_ops_3000_raw.csv"
[ -s "$map" ] || fail "no segment map at the OOM"
head -n 1 "$map" | grep -q '^segment,offset,size,state,alloc_id,' || fail "segment map header: $(head -n 1 "$map")"

# The budget search prints one row per strategy and appends them to oom.csv.
"$ab" oom -w random:ops=3000 -s raw,pooled --device sim --out "$out" --format csv >"$work/csv" 2>"$work/err" ||
  fail "oom exited $?: $(cat "$work/err")"
[ "$(head -n 1 "$work/csv")" = "workload,strategy,conf,device,min_budget_bytes,max_fail_bytes,safe_cap_bytes,fail_ranges,peak_requested_bytes,overhead_pct,oom_kind_at_fail,oom_event_at_fail,probes,wall_s,limit,note,trace_ooms" ] ||
  fail "oom header: $(head -n 1 "$work/csv")"
[ "$(wc -l <"$work/csv")" -eq 3 ] || fail "oom printed $(wc -l <"$work/csv") lines, expected 3"
# raw holds exactly what is live: its smallest budget is the peak requested, and one byte less fails.
grep -q '^random:ops=3000,raw,,sim:h200,94177280,94177279,,,94177280,0.000,capacity,' "$work/csv" ||
  fail "raw's row: $(grep ',raw,' "$work/csv")"
grep -q ',pooled,.*,fragmentation,' "$work/csv" || fail "pooled's row: $(grep ',pooled,' "$work/csv")"
grep -q "pooled ran out of memory" "$work/err" || fail "no report of the failing probe: $(cat "$work/err")"
[ -s "$out/oommap_random_ops_3000_pooled.csv" ] || fail "no segment map of the failing probe"
"$ab" oom -w random:ops=3000 -s pooled --device sim --out "$out" --quiet >"$work/table" || fail "oom table exited $?"
grep -qE '^smallest budget +[0-9]+\.[0-9]{2} MiB$' "$work/table" || fail "oom's table does not show the smallest budget in MiB: $(cat "$work/table")"
"$ab" oom -w random:ops=3000 -s caching --search cap --device sim --out "$work/cap" --quiet >"$work/table" || fail "oom --search cap exited $?"
grep -qE '^smallest cap +[0-9]+\.[0-9]{2} MiB( \([0-9]+ B\))?$' "$work/table" || fail "oom --cap's table does not call the cap a cap: $(cat "$work/table")"
# The table ends with the answer in words, the smallest budget first.
"$ab" oom -w fragmenter -s caching,expandable,raw --device sim --out "$out" --quiet >"$work/table" || fail "oom of three exited $?"
[ "$(tail -n 1 "$work/table")" = "It fits 256.00 MiB with raw; needs 260.12 MiB with expandable; needs 320.00 MiB with caching." ] ||
  fail "the answer in words: $(tail -n 1 "$work/table")"
[ "$(wc -l <"$out/oom.csv")" -eq 7 ] || fail "oom.csv has $(wc -l <"$out/oom.csv") lines, expected 7"

# The kinds say what is in the way: expandable's failing probe on the fragmenter fails for its
# 20 MiB pages (rounding), caching's for its scattered holes (fragmentation).
"$ab" oom -w fragmenter -s expandable,caching --device sim --out "$out" --format csv >"$work/csv" 2>"$work/err" ||
  fail "oom on the fragmenter exited $?"
grep -q '^fragmenter,expandable,.*,rounding,' "$work/csv" || fail "expandable's row: $(grep ',expandable,' "$work/csv")"
grep -q '^fragmenter,caching,.*,fragmentation,' "$work/csv" || fail "caching's row: $(grep ',caching,' "$work/csv")"
grep -q "Kind: rounding.*expandable takes 260.00 MiB from the device" "$work/err" || fail "no rounding report: $(cat "$work/err")"
# A run that ends in a fragmentation OOM after a peak with nothing unallocated: the table says
# what each of its two fragmentations is, the whole run's at its peaks and the OOM's kind.
"$ab" run -w fragmenter -s caching --device sim --out "$out" >"$work/table" 2>/dev/null || fail "run -w fragmenter exited $?"
grep -qx 'peak fragmentation  *0\.0%' "$work/table" || fail "the fragmenter's peak fragmentation: $(grep -i fragmentation "$work/table")"
grep -qx 'OOM kind  *fragmentation (fits, but the free memory was scattered or cached at the OOM)' "$work/table" ||
  fail "the fragmenter's OOM kind says not what it means: $(grep -i fragmentation "$work/table")"
# A workload larger than the card is said first, in words.
"$ab" oom -w fragmenter:block=512MiB -s raw,expandable --device sim:1GiB --out "$out" -q >"$work/table" ||
  fail "oom of a workload larger than the card exited $?"
head -n 1 "$work/table" | grep -q "requests 4.00 GiB at its peak, more than the device's 1.00 GiB" ||
  fail "not said first: $(cat "$work/table")"
"$ab" oom -w fragmenter -s raw --device sim --out "$out" -q >"$work/table"
grep -q "at its peak, more than" "$work/table" && fail "said of a workload that fits: $(cat "$work/table")"

# compare: one table, with the runs and searches recorded too.
"$ab" compare -w random:ops=3000 -s raw,pooled,async --device sim --out "$out" >"$work/table" 2>"$work/err" ||
  fail "compare exited $?"
grep -q "ran out of memory" "$work/err" && fail "compare printed OOM reports without -v: $(cat "$work/err")"
grep -qE '^raw +ok +89\.81 MiB +0\.0% +89\.81 MiB ' "$work/table" || fail "compare's bytes are not in MiB: $(cat "$work/table")"
head -n 1 "$work/table" | grep -q 'peak reserved.*fragmentation.*smallest budget.*alloc p50' ||
  fail "compare's table: $(head -n 1 "$work/table")"
[ "$(wc -l <"$work/table")" -eq 8 ] || fail "compare printed $(wc -l <"$work/table") lines, expected 8: $(cat "$work/table")"
# ... and ends with the answer: the best strategy per objective, and by how much.
grep -qx "Lowest peak reserved: raw, 89.81 MiB, [0-9.]* [MG]iB ([0-9.]*%) below [a-z]*\." "$work/table" ||
  fail "compare names no lowest peak: $(tail -3 "$work/table")"
grep -qx "Smallest budget: raw, 89.81 MiB, [0-9.]* [MG]iB ([0-9.]*%) below [a-z]*\." "$work/table" ||
  fail "compare names no smallest budget: $(tail -3 "$work/table")"
grep -qxE "Fastest allocation \(p99\): (pooled|async|raw), [0-9]+ ns(, against [0-9]+ ns for [a-z]+|, as [a-z]+)\." "$work/table" ||
  fail "compare names no fastest: $(tail -3 "$work/table")"
[ "$(wc -l <"$out/compare.csv")" -eq 4 ] || fail "compare.csv has $(wc -l <"$out/compare.csv") lines, expected 4"
[ "$(wc -l <"$out/oom.csv")" -eq 15 ] || fail "compare did not append its searches to oom.csv"
"$ab" compare -w random:ops=3000 -s raw,pooled -v --device sim --out "$out" >/dev/null 2>"$work/err" || fail "compare -v exited $?"
[ "$(grep -c "ran out of memory" "$work/err")" -eq 2 ] || fail "compare -v did not report both failing probes: $(cat "$work/err")"

# The segment map draws, as PNG and SVG (where gnuplot is installed).
if command -v gnuplot >/dev/null; then
  script=$(cd "$(dirname "$0")/.." && pwd)/plots/oommap.gp
  gnuplot -e "map='$out/oommap_random_ops_3000_pooled.csv'" "$script" 2>"$work/err" || fail "oommap.gp: $(cat "$work/err")"
  [ -s "$out/oommap_random_ops_3000_pooled.png" ] || fail "oommap.gp drew no PNG"
  [ -s "$out/oommap_random_ops_3000_pooled.svg" ] || fail "oommap.gp drew no SVG"
fi

# A workload's suggested budget applies when --budget is absent, and is said; --budget wins.
"$ab" run -w fragmenter -s raw --device sim --out "$out" --format csv >"$work/csv" 2>"$work/err" ||
  fail "fragmenter run exited $?"
grep -q '^fragmenter,raw,,sim:h200,301989888,' "$work/csv" || fail "suggested budget not applied: $(tail -n 1 "$work/csv")"
grep -q "no --budget: fragmenter runs under its suggested 288.00 MiB" "$work/err" || fail "not said: $(cat "$work/err")"
"$ab" run -w fragmenter -s raw --device sim --budget 1GiB --out "$out" --format csv >"$work/csv" 2>"$work/err" ||
  fail "fragmenter run exited $?"
grep -q '^fragmenter,raw,,sim:h200,1073741824,' "$work/csv" || fail "--budget did not win: $(tail -n 1 "$work/csv")"

# A replayed trace is named by its file name, not the path it had on this machine.
"$ab" run -w "replay:$trace" -s raw --device sim --out "$work/named" -q >/dev/null || fail "run -w replay: exited $?"
"$ab" replay "$trace" -s raw --device sim --out "$work/named" -q >/dev/null || fail "replay exited $?"
[ "$(cut -d, -f1 "$work/named/summary.csv" | sort | uniq -c | awk '{print $1, $2}')" = "2 replay:cnn_dyn.default.trace.csv.gz
1 workload" ] || fail "replays are not named by their file: $(cut -d, -f1 "$work/named/summary.csv")"

# JSON parses.
"$ab" run -w random:ops=300 -s async --device sim --out "$out" --format json >"$work/json" || fail "json run exited $?"
if command -v python3 >/dev/null; then
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r[0]["strategy"]=="async" and r[0]["status"]=="ok"' "$work/json" ||
    fail "JSON does not parse: $(cat "$work/json")"
fi

# async: a refused cudaMallocAsync is PyTorch's OutOfMemoryError at once (Note [Refusals] in
# strategies/async.c): the fifth request, refused once by the card, ends the run there, with
# no trim and no retry.
"$ab" run -w random:ops=300 -s async --device sim --faults nth=5 --out "$work/async_oom" -q --no-timeline >/dev/null 2>&1 ||
  fail "async under a refusal exited $?"
if command -v python3 >/dev/null; then
  python3 - "$work/async_oom/summary.csv" <<'PY' || fail "async did not end at its first refusal: $(cat "$work/async_oom/summary.csv")"
import csv, sys
r = list(csv.DictReader(open(sys.argv[1])))[-1]
assert r["status"] == "oom" and r["num_alloc_retries"] == "0" and r["num_ooms"] == "1", r
assert int(r["oom_event"]) >= 4, r
PY
fi

# A planning strategy's hits and misses close its summary.csv row; other strategies leave them
# empty. planned's calls are all one or the other.
for s in planned caching oracle; do
  "$ab" run -w zero:steps=3 -s $s --device sim --out "$work/plans" -q --no-timeline >/dev/null 2>&1 || fail "$s on zero exited $?"
done
if command -v python3 >/dev/null; then
  python3 - "$work/plans/summary.csv" <<'PY' || fail "plan columns: $(cat "$work/plans/summary.csv")"
import csv, sys
rows = {r["strategy"]: r for r in csv.DictReader(open(sys.argv[1]))}
head = open(sys.argv[1]).readline().strip().split(",")
assert head[-7:-4] == ["plan_hits", "plan_misses", "plan_bytes"], head
p = rows["planned"]
assert int(p["plan_hits"]) > 0 and int(p["plan_misses"]) >= 0 and int(p["plan_bytes"]) > 0, p
assert int(p["plan_hits"]) + int(p["plan_misses"]) == int(rows["oracle"]["plan_hits"]) + int(rows["oracle"]["plan_misses"]), rows
assert rows["caching"]["plan_hits"] == rows["caching"]["plan_misses"] == rows["caching"]["plan_bytes"] == "", rows["caching"]
PY
fi

# Expandable segments reserve more than the card on each stream: past the simulated address
# space (two streams of a 100 TiB card) that is an OOM, as the driver's, not an error.
"$ab" run -w random:ops=2000,streams=2 -s expandable --device sim:100TiB --quiet --no-timeline --out "$out" >"$work/va" 2>"$work/err" ||
  fail "expandable past the address space exited $?: $(cat "$work/err")"
grep -q '^status *oom$' "$work/va" || fail "expandable past the address space: $(grep status "$work/va")"

# Two sizes that differ never read the same, however close: the smallest budget beside the
# largest failing one (one byte apart where the search narrows to the byte), and the answer's
# budgets of two strategies a few KiB apart at 7.55 GiB. Checked against oom.csv's bytes.
# apart_cells FILE STRATEGY: the row's smallest and largest failing budget, one a line (the
# table's columns stand two or more blanks apart; a figure holds single blanks).
apart_cells() { awk -F '   *' -v s="$2" '$1 == s { print $2; print $3 }' "$1"; }
"$ab" oom -w mixed-precision:steps=2 -s raw,oracle,arena -q --out "$work/apart" >"$work/out" 2>"$work/err" ||
  fail "oom of close budgets exited $?: $(cat "$work/err")"
for s in raw oracle arena; do
  bytes=$(awk -F, -v s="$s" '$2 == s { print $5; print $6 }' "$work/apart/oom.csv")
  shown=$(apart_cells "$work/out" "$s")
  [ "$(sort -u <<<"$bytes" | wc -l)" -eq 2 ] || fail "$s: the budgets searched are not apart: $bytes"
  [ "$(sort -u <<<"$shown" | wc -l)" -eq 2 ] || fail "$s: two budgets that differ read the same: $(tr '\n' '|' <<<"$shown")"
done
# The answer names each budget once; as many figures read apart as oom.csv has budgets.
budgets=$(awk -F, 'NR > 1 { print $5 }' "$work/apart/oom.csv" | sort -u | wc -l)
said=$(grep '^It fits' "$work/out" | grep -oE '(fits|needs) [^;]* with' | sed -E 's/^(fits|needs) //; s/ with$//' | sort -u | wc -l)
[ "$budgets" -ge 3 ] || fail "the close budgets of raw, oracle and arena are no longer three: $(cat "$work/apart/oom.csv")"
[ "$said" -eq "$budgets" ] || fail "the answer reads $said budgets for $budgets: $(grep '^It fits' "$work/out")"
# So does a matrix's table, where each figure of a workload is set beside the others; in its 120
# columns two that would need their bytes to read apart are marked, their bytes said below it.
"$ab" matrix -w mixed-precision:steps=2 -s raw,oracle -q --out "$work/apart_matrix" >"$work/out" 2>"$work/err" ||
  fail "matrix of close budgets exited $?: $(cat "$work/err")"
budgets=$(awk -F, '$2 == "raw" || $2 == "oracle" { print $5 }' "$work/apart_matrix/oom.csv" | sort -u | tr '\n' ' ')
shown=$(awk -F '   *' '$1 == "raw" || $1 == "oracle" { print $4 }' "$work/out" | sort -u)
if [ "$(wc -l <<<"$shown")" -ne 2 ]; then
  [[ $shown == *'*' ]] || fail "matrix: raw's and oracle's smallest budgets read the same, unmarked: $(cat "$work/out")"
  for b in $budgets; do
    grep -q "^\* in bytes, smallest budget: .* $b B" "$work/out" || fail "matrix: the marked budget $b is not said in bytes: $(cat "$work/out")"
  done
fi

# A planning strategy that made no plan says why, in one line: a profile that held no
# allocation (a quarter of three, on a stream without steps), sizes past one address range.
printf 'action,addr,size,stream,time_us\nalloc,4096,1000,0,1\nalloc,8192,2000,0,2\nalloc,12288,3000,0,3\nfree_completed,4096,1000,0,4\nfree_completed,8192,2000,0,5\nfree_completed,12288,3000,0,6\n' >"$work/three.csv"
for s in planned arena; do
  "$ab" run -w "replay:$work/three.csv" -s $s --device sim --no-timeline --out "$work/plan" >/dev/null 2>"$work/err" || fail "$s on three allocations exited $?"
  grep -qF "allocbench run: $s: no plan: its profile, profile_share of the 3 allocations (the stream has no steps), held none; every allocation missed it" "$work/err" ||
    fail "$s with an empty profile does not say why it has no plan: $(cat "$work/err")"
done
"$ab" run -w "replay:$work/three.csv" -s planned -c profile_share:1 --device sim --no-timeline --out "$work/plan" >/dev/null 2>"$work/err" || fail "planned of the whole stream exited $?"
grep -qF "planned: 3 allocations at their planned offsets, 0 missed the plan" "$work/err" || fail "planned with a plan: $(cat "$work/err")"
sed 's/,[0-9]000,0,/,9223372036854775808,0,/' "$work/three.csv" >"$work/huge.csv"
"$ab" run -w "replay:$work/huge.csv" -s planned -c profile_share:1 --device sim --no-timeline --out "$work/plan" >/dev/null 2>"$work/err" || fail "planned of 2^63-byte allocations exited $?"
grep -qF "planned: no plan: the 3 profiled allocations' sizes add up past what one address range holds (2^64 bytes)" "$work/err" ||
  fail "planned of sizes past 2^64 bytes does not say why it has no plan: $(cat "$work/err")"

finish cli_test
