#!/usr/bin/env bash
# readme_test.sh BUILD_DIR SOURCE_DIR [gpu]: the README's examples run as written, as a newcomer
# runs them: the build installed into a temporary prefix, its bin/ on the PATH, in a folder
# that sees the repository's tests/ and plots/ (the examples name them) and writes its own
# results/latest. Every command of the README's code blocks that starts with `allocbench` or
# `gnuplot`, with the blocks' variables (M=..., P=...), is taken, in the README's order:
#   - a synopsis (WORKLOAD, [-s STRATEGY], A|B, ...) is not an example and is passed over;
#   - job.pickle, what `record` would write of your job, is the recorded job of tests/data;
#   - one that needs a GPU (--device cuda, --ranks env, torchrun), PyTorch (python3, record) or
#     gnuplot runs only where there is one: without a GPU it is named and passed over, and the
#     run with the argument `gpu` (ctest -L gpu) runs those alone, exiting with CTest's skip
#     code where no GPU is usable;
#   - each must exit 0; where its comment says what it ends in ("# oom, fragmentation", "# ok")
#     the run's status and OOM kind must be that; tune's answer for the recorded job must read
#     as the README shows it.
set -u
build=${1:?usage: readme_test.sh BUILD_DIR SOURCE_DIR [gpu]}
src=$(cd "${2:?usage: readme_test.sh BUILD_DIR SOURCE_DIR [gpu]}" && pwd)
mode=${3:-cpu}
ab=/nonexistent # refuse() is not used here
source "$src/tests/lib.sh"
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { fail "cmake --install exited $?: $(cat "$work/install.log")"; finish readme_test; }
export PATH=$prefix/bin:$PATH
mkdir "$work/newcomer"
ln -s "$src/tests" "$work/newcomer/tests"
ln -s "$src/plots" "$work/newcomer/plots"
cp "$src/tests/data/pytorch-2.11-h200/cnn_dyn.default.pickle.gz" "$work/newcomer/job.pickle"
cd "$work/newcomer" || exit 1

gpu=false
allocbench run -w random:ops=10 -s raw --device cuda -q --no-timeline --out "$work/probe" >/dev/null 2>&1 && gpu=true
torch=false
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1 && torch=true
gpus=0
$gpu && gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$mode" = gpu ] && ! $gpu; then
  echo "readme_test gpu: no usable GPU: skipped"
  exit 77
fi

# The commands of the README's code blocks (indented four spaces, or fenced), a line each,
# continuation lines joined; the variables the blocks set come first on their own lines.
awk '
  /^ *```/ { fenced = !fenced; next }
  { line = $0 }
  fenced || /^    / {
    sub(/^ +/, "", line)
    if (cont != "") { line = cont " " line; cont = "" }
    if (line ~ /\\$/) { sub(/\\$/, "", line); cont = line; next }
    if (line ~ /^(allocbench|gnuplot|for |torchrun|[A-Z]+=)/) print line
  }
' "$src/README.md" >"$work/examples"
[ "$(grep -c '^allocbench' "$work/examples")" -ge 10 ] || fail "the README's examples were not found: $(cat "$work/examples")"

vars=""
ran=0
passed_over=0
# pass_over WHY LINE
pass_over() {
  echo "passed over ($1): $2"
  passed_over=$((passed_over + 1))
}
while IFS= read -r line; do
  if [[ $line =~ ^[A-Z]+= ]] && [[ ! $line =~ [[:space:]]allocbench ]]; then
    # The README's PREFIX is the default, /usr/local; this one is the test's.
    vars+="${line//\/usr\/local/$prefix}"$'\n'
    continue
  fi
  cmd=${line%%#*}
  say=""
  [[ $line == *"#"* ]] && say=${line#*# }
  # A synopsis names what to give, in capitals, brackets or alternatives.
  if [[ $cmd =~ (^|[^A-Z_])(WORKLOAD|STRATEGY|TRACE|COMMAND|ARGS|SIZE|CONF|FILE|PROFILE|DIR)([^A-Z_]|$) ]] || [[ $cmd =~ (\[|\|) ]]; then
    continue
  fi
  needs=""
  [[ $cmd =~ (--device\ cuda|--ranks\ env) ]] && needs=gpu
  [[ $cmd =~ (python3|torchrun|allocbench\ record) ]] && needs=pytorch
  if [[ $cmd =~ torchrun.*--nnodes\ 2 ]]; then pass_over "needs two hosts" "$cmd"; continue; fi
  [[ $cmd =~ ^gnuplot ]] && ! command -v gnuplot >/dev/null && { pass_over "no gnuplot" "$cmd"; continue; }
  if [ "$mode" = gpu ] && [ -z "$needs" ]; then continue; fi
  if [ "$mode" != gpu ] && [ -n "$needs" ]; then
    pass_over "needs a GPU$([ $needs = pytorch ] && echo ' and PyTorch'): ctest -L gpu" "$cmd"
    continue
  fi
  if [ "$needs" = pytorch ] && ! $torch; then pass_over "no PyTorch with CUDA" "$cmd"; continue; fi
  if [[ $cmd =~ --ranks\ env ]] && [ "$gpus" -lt 2 ]; then pass_over "needs two GPUs" "$cmd"; continue; fi
  ran=$((ran + 1))
  bash -c "$vars$cmd" </dev/null >"$work/out" 2>"$work/err"
  rc=$?
  if [ $rc -ne 0 ]; then
    fail "exit $rc: $cmd: $(tail -3 "$work/err")"
    continue
  fi
  echo "ran: $cmd"
  # What the comment says it ends in: the run's status and its OOM kind.
  if [[ $cmd =~ ^allocbench\ run ]] && [[ $say =~ ^(ok|oom)(,\ ([a-z]+))? ]]; then
    grep -qE "^status +${BASH_REMATCH[1]}\$" "$work/out" || fail "$cmd: the README says '$say': $(grep -E '^(status|oom_kind|OOM kind) ' "$work/out")"
    kind=${BASH_REMATCH[3]}
    # The table says what the kind means after it, in parentheses.
    [ -z "$kind" ] || grep -qiE "^(oom_kind|OOM kind) +$kind( \(.*\))?\$" "$work/out" ||
      fail "$cmd: the README says '$say': $(grep -iE '^(oom_kind|OOM kind) ' "$work/out")"
  fi
  # tune of the recorded job: the answer as the README shows it, line for line.
  if [[ $cmd =~ ^allocbench\ tune\ -w\ replay:job.pickle\ *$ ]]; then
    shown=$(awk '/^    export PYTORCH_CUDA_ALLOC_CONF=/ { on = 1 } on && !/^    / { exit } on { sub(/^    /, ""); print }' "$src/README.md")
    [ -n "$shown" ] || fail "the README shows no answer of tune"
    [ "$(tail -n "$(wc -l <<<"$shown")" "$work/out")" = "$shown" ] ||
      fail "tune's answer is not the README's: $(diff <(echo "$shown") <(tail -n "$(wc -l <<<"$shown")" "$work/out"))"
  fi
done <"$work/examples"
echo "$ran examples ran, $passed_over passed over"
[ $ran -gt 0 ] || { [ "$mode" = gpu ] && exit 77; fail "no example ran"; }
finish readme_test
