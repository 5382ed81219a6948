#!/usr/bin/env bash
# anchor_build.sh COMMIT DIR: builds allocbench as it was at COMMIT (the simulated card only)
# into DIR/build/allocbench, from a copy of that commit's files in DIR/src, once; prints the
# binary's path. tests/trace_bench --anchor BINARY replays the same trace through it and
# through this build in one run, so that their ratio is what a busy machine does not move.
#   tests/bench/anchor_build.sh f955107 /tmp/allocbench-f955107
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 COMMIT DIR" >&2; exit 2; }
commit=$1 dir=$2
repo=$(cd "$(dirname "$0")/../.." && pwd)
if [ ! -x "$dir/build/allocbench" ]; then
  git -C "$repo" rev-parse --verify --quiet "$commit^{commit}" >/dev/null ||
    { echo "$0: $commit: not a commit of $repo" >&2; exit 2; }
  rm -rf "$dir/src"
  mkdir -p "$dir/src"
  git -C "$repo" archive "$commit" | tar -x -C "$dir/src"
  cmake -S "$dir/src" -B "$dir/build" -DAB_CUDA=OFF >"$dir/configure.log"
  cmake --build "$dir/build" -j "$(nproc 2>/dev/null || echo 2)" --target allocbench >"$dir/build.log"
fi
echo "$dir/build/allocbench"
