#!/usr/bin/env bash
# run.sh ALLOCBENCH OUT: the H200 part of `allocbench blame` (README, "Your own job").
#  1. tests/data/pytorch-2.11-h200/blame/frag.py recorded with stacks (allocbench record's default), and run by PyTorch as it is
#     and with its cache in a MemPool (--pool): the peak reserved of each, measured.
#  2. What recording costs a job: cost.py (an MLP trained 1000 steps) run plainly, and under
#     record --no-stacks, record (Python stacks) and record --stacks all, two turns each,
#     alternated: wall time, the job's peak host memory (ru_maxrss of the children) and the
#     snapshot's size.
# Then, anywhere: allocbench blame OUT/frag.pickle (blame.txt in this folder, of the recording
# kept in tests/data/pytorch-2.11-h200/blame/frag.pickle).
set -u
ab=${1:?usage: run.sh ALLOCBENCH OUT}
out=${2:?}
here=$(cd "$(dirname "$0")" && pwd)
frag=$here/../../../tests/data/pytorch-2.11-h200/blame/frag.py # the program, kept with its recording
mkdir -p "$out"
"$ab" record -o "$out/frag.pickle" -- python3 "$frag" >"$out/frag_record.txt" 2>&1
python3 "$frag" >"$out/frag_as_is.txt" 2>&1
python3 "$frag" --pool >"$out/frag_pool.txt" 2>&1
measure() { # NAME COMMAND...: one line "NAME wall_s maxrss_kib"
  local name=$1
  shift
  python3 - "$name" "$@" <<'PY'
import resource, subprocess, sys, time
t = time.time()
subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
print("%s %.3f %d" % (sys.argv[1], time.time() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
PY
}
for turn in 1 2; do
  measure plain python3 "$here/cost.py"
  measure no-stacks "$ab" record --no-stacks -o "$out/cost_none.pickle" -- python3 "$here/cost.py"
  measure python "$ab" record -o "$out/cost_python.pickle" -- python3 "$here/cost.py"
  measure all "$ab" record --stacks all -o "$out/cost_all.pickle" -- python3 "$here/cost.py"
done >"$out/cost.txt" 2>&1
ls -l "$out"/cost_*.pickle >>"$out/cost.txt"
rm -f "$out"/cost_*.pickle
