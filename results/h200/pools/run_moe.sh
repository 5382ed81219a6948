#!/usr/bin/env bash
# run_moe.sh OUT: records programs.py's `moe` uncapped (moe_default), then under a cap of 1.15
# times the peak reserved it reached, with garbage collection on, in the configurations
# named below (moe_NAME.pickle.gz, .json, .log in OUT).
set -u
out=${1:?usage: run_moe.sh OUT}
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
mkdir -p "$out"
record() { # STEM CONF
  echo "== $1 ($2)" >&2
  PYTORCH_CUDA_ALLOC_CONF=$2 timeout 120 "$py" "$here/programs.py" moe "$out" "$1" >"$out/$1.log" 2>&1
  echo "   exit $?" >&2
  [ -f "$out/$1.pickle" ] && gzip -9nf "$out/$1.pickle"
}
record moe_default ""
fraction=$("$py" -c 'import json, sys; r = json.load(open(sys.argv[1]))
print("%.4f" % (1.15 * r["stats"]["reserved_bytes.all.peak"] / r["total_memory"]))' "$out/moe_default.json") || exit 1
echo "cap: per_process_memory_fraction $fraction" >&2
record moe_gc07split128 "garbage_collection_threshold:0.7,max_split_size_mb:128,per_process_memory_fraction:$fraction"
record moe_gc06 "garbage_collection_threshold:0.6,per_process_memory_fraction:$fraction"
record moe_gc08split64 "garbage_collection_threshold:0.8,max_split_size_mb:64,per_process_memory_fraction:$fraction"
