#!/usr/bin/env bash
# repeat.sh OUT: does job.py ask for the same memory every time? It runs job.py under the
# defaults twice as it is and twice under allocbench record's start-up hook (history on),
# once with CUDA's modules loaded eagerly, then once under roundup_power2_divisions:8 and
# max_split_size_mb:512 (more of tune's rows); each prints PyTorch's peak reserved bytes and
# device allocations, and writes OUT/NAME.json, the sizes and addresses of its segments at the end.
# Run from the repository root on a GPU machine with PyTorch.
set -u
out=$(realpath -m "${1:?usage: repeat.sh OUT}")
mkdir -p "$out"
py=${PYTHON:-python3}
probe='
import json, os, sys
sys.path.insert(0, "results/h200/tune")
import job, torch
job.main()
segs = sorted((s["address"], s["total_size"]) for s in torch.cuda.memory._snapshot()["segments"])
json.dump(segs, open(os.environ["SEG_OUT"], "w"))'
one() { # NAME CONF RECORD [VAR=VALUE...]
  local name=$1 conf=$2 record=$3
  shift 3
  local hook=()
  [ "$record" = 1 ] && hook=(AB_RECORD_OUT="$out/$name.pickle" PYTHONPATH=harness/cli/record)
  env "$@" "${hook[@]}" PYTORCH_CUDA_ALLOC_CONF="$conf" SEG_OUT="$out/$name.json" "$py" -c "$probe" >"$out/$name.txt" 2>&1
  echo "$name: $(tr '\n' ' ' <"$out/$name.txt")"
}
one plain1 "" 0
one rec1 "" 1
one plain2 "" 0
one rec2 "" 1
one eager1 "" 0 CUDA_MODULE_LOADING=EAGER
one rp8 "roundup_power2_divisions:8" 0
one ms512 "max_split_size_mb:512" 0
"$py" - "$out" <<'PY'
import json, sys
sizes = {n: sorted(s for _, s in json.load(open("%s/%s.json" % (sys.argv[1], n))))
         for n in ("plain1", "rec1", "plain2", "rec2", "eager1")}
same = all(v == sizes["plain1"] for v in sizes.values())
print("segment sizes under the defaults: %s in all five runs" % ("the same" if same else "NOT the same"))
PY
