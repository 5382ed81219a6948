#!/usr/bin/env bash
# run.sh ALLOCBENCH OUT: --verify on a GPU for stitching, planned, arena and oracle on each workload
# of the bench matrix. Every run fills each block it is handed with a pattern and checks the
# pattern before the block is freed, so a strategy that hands out memory still in use fails.
# Writes OUT/summary.csv (one row per pair) and OUT/exits.txt (each run's exit status).
# Run from the repository root.
set -u
ab=${1:?usage: run.sh ALLOCBENCH OUT}
out=${2:?usage: run.sh ALLOCBENCH OUT}
mkdir -p "$out"
for w in dynamic-shapes cnn-dynamic mixed-precision zero:stage=3 random fragmenter \
  replay:tests/data/pytorch-2.11-h200/cnn_dyn.default.trace.csv.gz; do
  for s in stitching planned arena oracle; do
    timeout 200 "$ab" run -w "$w" -s "$s" --device cuda --verify --no-timeline --out "$out" -q >/dev/null 2>>"$out/stderr.log"
    echo "$w $s exit $?" | tee -a "$out/exits.txt"
  done
done
