#!/usr/bin/env bash
# scripts_test.sh ROOT CC [NVCC CUDA_INCLUDE]: the scripts and programs that nothing else runs
# here, the benchmarks' scripts in tests/bench/ (the build compiles the programs there) and the
# measurements of results/ (which need a GPU, and some PyTorch), are at least read as their
# interpreter or compiler would: shell scripts by
# `bash -n`, Python by its parser, the C and CUDA programs compiled (without a CUDA toolkit,
# they are left out, and the test says so).
set -u
root=${1:?usage: scripts_test.sh ROOT CC [NVCC CUDA_INCLUDE]}
cc=${2:?usage: scripts_test.sh ROOT CC [NVCC CUDA_INCLUDE]}
nvcc=${3:-}
cuda_include=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
cd "$root" || exit 1
checked=0
while IFS= read -r f; do
  checked=$((checked + 1))
  case $f in
    *.sh) bash -n "$f" 2>"$work/err" || fail "$f: $(cat "$work/err")" ;;
    *.py) python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$f" 2>"$work/err" ||
            fail "$f: $(tail -3 "$work/err")" ;;
    *.c | *.cu)
      if [ -z "$nvcc" ]; then
        echo "$f: not compiled (no CUDA toolkit)"
        checked=$((checked - 1))
      elif [ "${f##*.}" = c ]; then
        "$cc" -std=c11 -D_GNU_SOURCE -fsyntax-only -Wall -I"$root" -I"$cuda_include" "$f" 2>"$work/err" || fail "$f: $(head -5 "$work/err")"
      else
        "$nvcc" -c -o "$work/probe.o" -I"$root" "$f" 2>"$work/err" || fail "$f: $(head -5 "$work/err")"
      fi ;;
  esac
done < <({ find tests/bench -name '*.sh'
           find results -path 'results/latest*' -prune -o -type f \
             \( -name '*.sh' -o -name '*.py' -o -name '*.c' -o -name '*.cu' \) -print; } | sort)
[ "$checked" -gt 20 ] || fail "only $checked scripts and programs found"
echo "$checked scripts and programs checked"
finish scripts_test
