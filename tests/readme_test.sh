#!/usr/bin/env bash
# readme_test.sh BUILD_DIR SOURCE_DIR [gpu]: the examples of every README (the top one and
# those of strategies/, workloads/, harness/ and results/, which hold the reference) run as
# written, as a newcomer runs them: the build installed into a temporary prefix, its bin/ on
# the PATH, in a folder that sees the repository's tests/ and plots/ (the examples name them)
# and writes its own results/latest. Every command of a README's code blocks that starts with
# `allocbench` or `gnuplot`, with that README's variables (M=..., P=...), is taken, README by
# README in the order below and each in its own order:
#   - a synopsis (WORKLOAD, [-s STRATEGY], A|B, ...) is not an example and is passed over;
#   - job.pickle, what `record` would write of your job, is the recorded job of tests/data;
#   - one that needs a GPU (--device cuda, --ranks env, torchrun), PyTorch (python3, record) or
#     gnuplot runs only where there is one: without a GPU it is named and passed over, and the
#     run with the argument `gpu` (ctest -L gpu) runs those alone, exiting with CTest's skip
#     code where no GPU is usable; one that needs more than the machine has (two GPUs, two
#     hosts, serve's default 80 GiB card) is named and passed over;
#   - each must exit 0; where its comment says what it ends in ("# oom, fragmentation", "# ok")
#     the run's status and OOM kind must be that; tune's answer for the recorded job must read
#     as the README that runs it shows it.
# Every link of these READMEs to a file of the repository must reach it, and a link to a
# section (FILE#anchor, #anchor) must name a heading or an anchor there, since the reference
# moves between them.
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
# serve models an 80 GiB card by default, which a smaller one (an H100's 79.18 GiB) refuses.
card_mib=0
$gpu && card_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 2>/dev/null | head -n 1)
if [ "$mode" = gpu ] && ! $gpu; then
  echo "readme_test gpu: no usable GPU: skipped"
  exit 77
fi

readmes=(README.md strategies/README.md workloads/README.md harness/README.md results/README.md)

# heading_anchors FILE: the anchors of FILE's headings as GitHub makes them (lower case, what
# is not a letter, digit, space, hyphen or underscore dropped, spaces as hyphens), and its
# explicit ones (<a id="...">), a line each.
heading_anchors() {
  awk '/^ *```/ { fenced = !fenced; next } !fenced && /^#+ / { sub(/^#+ +/, ""); print }' "$1" |
    tr 'A-Z' 'a-z' | sed -e 's/[^a-z0-9 _-]//g' -e 's/ /-/g'
  grep -o '<a id="[^"]*"' "$1" | sed -e 's/^<a id="//' -e 's/"$//'
}
if [ "$mode" != gpu ]; then
  for readme in "${readmes[@]}"; do
    [ -f "$src/$readme" ] || { fail "$readme is missing"; continue; }
    dir=$(dirname "$src/$readme")
    # Links outside code: ](TARGET), TARGET a path relative to the README, #anchor, or both.
    while IFS= read -r target; do
      case $target in http://* | https://* | mailto:*) continue ;; esac
      file=${target%%#*}
      anchor=""
      [[ $target == *"#"* ]] && anchor=${target#*#}
      path=$src/$readme
      [ -n "$file" ] && path=$dir/$file
      [ -e "$path" ] || { fail "$readme links to $target: no $file"; continue; }
      [ -z "$anchor" ] && continue
      heading_anchors "$path" | grep -qxF "$anchor" || fail "$readme links to $target: no such section in ${file:-$readme}"
    done < <(awk '/^ *```/ { fenced = !fenced; next } !fenced && !/^    / { print }' "$src/$readme" |
               grep -o '\]([^)]*)' | sed -e 's/^](//' -e 's/)$//')
  done
fi

ran=0
passed_over=0
found=0
# pass_over WHY LINE
pass_over() {
  echo "passed over ($1): $2"
  passed_over=$((passed_over + 1))
}

# run_examples README: the commands of README's code blocks (indented four spaces, or fenced),
# a line each, continuation lines joined; the variables its blocks set come first on their own
# lines, and hold for that README alone.
run_examples() {
  local readme=$1 vars="" line cmd say needs rc kind shown
  awk '
    /^ *```/ { fenced = !fenced; next }
    { line = $0 }
    fenced || /^    / {
      sub(/^ +/, "", line)
      if (cont != "") { line = cont " " line; cont = "" }
      if (line ~ /\\$/) { sub(/\\$/, "", line); cont = line; next }
      if (line ~ /^(allocbench|gnuplot|for |torchrun|[A-Z]+=)/) print line
    }
  ' "$src/$readme" >"$work/examples"
  found=$((found + $(grep -c '^allocbench' "$work/examples")))
  echo "$readme:"
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
    if [[ $cmd =~ -w\ serve\  ]] && [[ $cmd =~ --device\ cuda ]] && [ "${card_mib:-0}" -lt 81920 ]; then
      pass_over "needs a card of 80 GiB, serve's default" "$cmd"
      continue
    fi
    ran=$((ran + 1))
    bash -c "$vars$cmd" </dev/null >"$work/out" 2>"$work/err"
    rc=$?
    if [ $rc -ne 0 ]; then
      fail "$readme: exit $rc: $cmd: $(tail -3 "$work/err")"
      continue
    fi
    echo "ran: $cmd"
    # What the comment says it ends in: the run's status and its OOM kind.
    if [[ $cmd =~ ^allocbench\ run ]] && [[ $say =~ ^(ok|oom)(,\ ([a-z]+))? ]]; then
      grep -qE "^status +${BASH_REMATCH[1]}\$" "$work/out" || fail "$readme: $cmd: it says '$say': $(grep -E '^(status|oom_kind|OOM kind) ' "$work/out")"
      kind=${BASH_REMATCH[3]}
      # The table says what the kind means after it, in parentheses.
      [ -z "$kind" ] || grep -qiE "^(oom_kind|OOM kind) +$kind( \(.*\))?\$" "$work/out" ||
        fail "$readme: $cmd: it says '$say': $(grep -iE '^(oom_kind|OOM kind) ' "$work/out")"
    fi
    # tune of the recorded job: the answer as the README shows it, line for line.
    if [[ $cmd =~ ^allocbench\ tune\ -w\ replay:job.pickle\ *$ ]]; then
      shown=$(awk '/^    export PYTORCH_CUDA_ALLOC_CONF=/ { on = 1 } on && !/^    / { exit } on { sub(/^    /, ""); print }' "$src/$readme")
      [ -n "$shown" ] || fail "$readme shows no answer of tune"
      [ "$(tail -n "$(wc -l <<<"$shown")" "$work/out")" = "$shown" ] ||
        fail "tune's answer is not $readme's: $(diff <(echo "$shown") <(tail -n "$(wc -l <<<"$shown")" "$work/out"))"
    fi
  done <"$work/examples"
}

for readme in "${readmes[@]}"; do
  [ -f "$src/$readme" ] && run_examples "$readme"
done
[ "$found" -ge 10 ] || fail "the READMEs' examples were not found"
echo "$ran examples ran, $passed_over passed over"
[ $ran -gt 0 ] || { [ "$mode" = gpu ] && exit 77; fail "no example ran"; }
finish readme_test
