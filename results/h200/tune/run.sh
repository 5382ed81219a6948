#!/usr/bin/env bash
# run.sh ALLOCBENCH [OUT]: the check of `allocbench tune` against PyTorch, on a GPU machine
# with PyTorch, in one go (a few minutes of GPU time at most):
#   1. allocbench record -o OUT/job.pickle -- python3 job.py     (the job, recorded unchanged)
#   2. allocbench tune -w replay:OUT/job.pickle --device sim:h200 --format csv --out OUT
#      (predictions on a simulated card of the H200's size: 150109880320 bytes)
#   3. job.py again under the recommended PYTORCH_CUDA_ALLOC_CONF and two others from the
#      table (the recorded one, the defaults, and the worst-ranked one that completed)
#   4. OUT/comparison.csv: each conf, tune's predicted peak reserved bytes and device
#      allocations, and what PyTorch measured (torch.cuda.memory_stats()); exit 1 if they differ.
# OUT defaults to the folder of this script. PYTHON names the interpreter (default python3);
# AB_COMMIT names the commit built (default: the checkout's HEAD).
set -euo pipefail
ab=$(realpath "${1:?usage: run.sh ALLOCBENCH [OUT]}")
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "${2:-$here}")
py=${PYTHON:-python3}
mkdir -p "$out"
cd "$out"
"$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' ||
  { echo "run.sh: $py has no PyTorch with a usable GPU" >&2; exit 1; }
unset PYTORCH_CUDA_ALLOC_CONF
# This script's own outputs of an earlier run (tune.csv is appended to, not replaced).
rm -f job.pickle tune.csv comparison.csv measured_*.txt

{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: ${AB_COMMIT:-$(git -C "$here" rev-parse HEAD 2>/dev/null || echo unknown)}"
  "$py" -c 'import torch; p = torch.cuda.get_device_properties(0)
print("torch:", torch.__version__, "cuda", torch.version.cuda)
print("gpu:", p.name, p.total_memory, "bytes")'
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
} >env.txt

t0=$(date +%s)
echo "run.sh: 1. record" >&2
"$ab" record -o "$out/job.pickle" -- "$py" "$here/job.py" >measured_recorded.txt 2>record.log
cat record.log >&2

echo "run.sh: 2. tune" >&2
"$ab" tune -w "replay:$out/job.pickle" --device sim:h200 --format csv --out "$out" >/dev/null 2>tune.log
grep -v '^allocbench tune: \[' tune.log >&2

# conf|role|predicted peak reserved|predicted device allocations, one line each.
"$py" - tune.csv >chosen.txt <<'EOF'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["strategy"] == "caching"]
done = [r for r in rows if r["status"] == "ok"]
picks = [(r, "recommended") for r in rows if r["recommended"] == "1"]
picks += [(r, "recorded") for r in rows if r["recorded"] == "1"]
picks += [(done[-1], "worst-ranked")] if done else []
for r in done:  # fill up to three from the ranking
    picks.append((r, "rank %s" % r["rank"]))
seen = []
for r, role in picks:
    if r["conf"] not in [s["conf"] for s, _ in seen] and len(seen) < 3:
        seen.append((r, role))
for r, role in seen:
    print("%s|%s|%s|%s" % (r["conf"], role, r["peak_reserved_bytes"], r["num_device_alloc"]))
EOF

echo "run.sh: 3. the job under three of the configurations" >&2
echo "conf,role,predicted_peak_reserved_bytes,measured_peak_reserved_bytes,predicted_num_device_alloc,measured_num_device_alloc,equal" >comparison.csv
mismatches=0
i=0
while IFS='|' read -r conf role reserved allocs; do
  i=$((i + 1))
  PYTORCH_CUDA_ALLOC_CONF=$conf "$py" "$here/job.py" >"measured_$i.txt"
  measured=$(awk '$1 == "reserved_bytes.all.peak" {print $2}' "measured_$i.txt")
  measured_allocs=$(awk '$1 == "num_device_alloc" {print $2}' "measured_$i.txt")
  equal=$([ "$measured" = "$reserved" ] && [ "$measured_allocs" = "$allocs" ] && echo 1 || echo 0)
  [ "$equal" = 1 ] || mismatches=$((mismatches + 1))
  echo "\"$conf\",$role,$reserved,$measured,$allocs,$measured_allocs,$equal" >>comparison.csv
  echo "run.sh: PYTORCH_CUDA_ALLOC_CONF='$conf' ($role): predicted $reserved bytes, $allocs device allocations; PyTorch $measured, $measured_allocs" >&2
done <chosen.txt
# The recorded run itself (default settings, history on) against the defaults' prediction.
default=$("$py" -c 'import csv, sys
print([r for r in csv.DictReader(open("tune.csv")) if r["strategy"] == "caching" and r["conf"] == ""][0]["peak_reserved_bytes"])')
recorded=$(awk '$1 == "reserved_bytes.all.peak" {print $2}' measured_recorded.txt)
echo "run.sh: the recorded run (history on, default settings) reserved $recorded bytes at its peak; predicted for the defaults: $default" >&2

echo "run.sh: done in $(($(date +%s) - t0)) s; $out/comparison.csv:" >&2
cat comparison.csv
[ $mismatches -eq 0 ] || { echo "run.sh: $mismatches of $i predictions differ from PyTorch's measurements" >&2; exit 1; }
