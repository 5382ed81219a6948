#!/usr/bin/env bash
# runtime_test.sh BUILD_DIR: which binaries of a CUDA build need the shared CUDA runtime.
# Only torch_compare may (PyTorch brings it); allocbench, allocbench_micro and the tests link it
# statically, since -s pluggable cannot run in a process where libcudart.so serves cudaMalloc
# (strategies/pluggable/pluggable_shim.h). The example plugins' _cudart variants are a user's libraries,
# built as one builds them for PyTorch, and are not looked at.
set -u
build=${1:?usage: runtime_test.sh BUILD_DIR}
command -v readelf >/dev/null || { echo "runtime_test: no readelf: skipped"; exit 77; }
failures=0 seen=0
while IFS= read -r f; do
  head -c 4 "$f" | grep -q ELF || continue
  readelf -h "$f" 2>/dev/null | grep -q "Type: *\(EXEC\|DYN\)" || continue
  case $f in *.so) continue ;; esac
  seen=$((seen + 1))
  needs=$(readelf -d "$f" | grep -c "NEEDED.*libcudart\.so")
  if [ "$(basename "$f")" = torch_compare ]; then
    [ "$needs" -gt 0 ] || { echo "FAIL: torch_compare does not need libcudart.so (PyTorch's runtime)"; failures=$((failures + 1)); }
  elif [ "$needs" -gt 0 ]; then
    echo "FAIL: $f needs libcudart.so; only torch_compare may"
    failures=$((failures + 1))
  fi
done < <(find "$build" -path "$build/CMakeFiles" -prune -o -path "*/CMakeFiles/*" -prune -o -type f -perm -u+x -print)
[ $seen -gt 0 ] || { echo "FAIL: no binaries found in $build"; exit 1; }
[ $failures -eq 0 ] || { echo "runtime_test: $failures failure(s) among $seen binaries"; exit 1; }
echo "runtime_test: $seen binaries, none but torch_compare on the shared CUDA runtime"
