#!/usr/bin/env bash
# replay_gpu_test.sh ALLOCBENCH DATA_DIR: `allocbench replay SNAPSHOT` with no option on a GPU
# machine runs on the GPU, where the driver places each cudaMalloc (the recorded addresses are
# the simulated card's; Note [Recorded addresses]), and reserves at its peak what PyTorch did.
# Skipped (77) without a usable GPU.
set -u
ab=$1
snap=$2/pytorch-2.11-h200/cnn_dyn.default.pickle.gz
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "${gpus:-0}" -lt 1 ]; then
  echo "replay_gpu_test: skipped: no GPU"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

(cd "$work" && "$ab" replay "$snap" >out.txt 2>err.txt)
rc=$?
[ $rc = 0 ] || fail "replay with no options exited $rc: $(cat "$work/err.txt")"
! grep -q "recorded run got" "$work/err.txt" || fail "recorded addresses taken on a GPU: $(cat "$work/err.txt")"
summary=$work/results/latest/summary.csv
if [ -r "$summary" ]; then
  row=$(tail -1 "$summary")
  device=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "device") c = i } NR == 2 { print $c }' "$summary")
  case "$device" in cuda*) ;; *) fail "ran on '$device', not the GPU" ;; esac
  reserved=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "peak_reserved_bytes") c = i } NR == 2 { print $c }' "$summary")
  # PyTorch's peak reserved bytes in the recorded run (cnn_dyn.json, default)
  [ "$reserved" = 11079254016 ] || fail "peak reserved $reserved, PyTorch's 11079254016"
else
  fail "no summary.csv: $(cat "$work/err.txt")"
fi
[ $failures = 0 ] && echo "replay_gpu_test: ok"
[ $failures = 0 ]
