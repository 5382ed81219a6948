#!/usr/bin/env bash
# run.sh OUTDIR: builds measure_footprint.c and runs it on GPU 0 (see its header); from the
# repository root. The committed footprint.csv and probe.csv came from this on the H200.
set -euo pipefail
out=${1:?usage: run.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
nvcc -O2 -arch=sm_90 -I"$here/../../.." "$here/measure_footprint.c" -o "$out/measure" -lcudart
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/machine.txt"
"$out/measure" "$out"
rm "$out/measure"
