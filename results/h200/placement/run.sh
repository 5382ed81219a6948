#!/usr/bin/env bash
# run.sh [OUT]: builds probe.cu and runs it three times, each in a process of its own, into
# OUT/probe_N.csv (default: this folder). Needs nvcc and a GPU.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
mkdir -p "$out"
nvcc -O2 -o "$out/probe" "$here/probe.cu" -lcuda
for i in 1 2 3; do "$out/probe" >"$out/probe_$i.csv"; done
rm -f "$out/probe"
