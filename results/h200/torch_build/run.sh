#!/usr/bin/env bash
# run.sh BUILD OUT: the -DAB_TORCH=ON configuration on a GPU machine with PyTorch. It builds
# torch_compare beside everything else; only torch_compare may take the shared CUDA runtime
# (runtime_test reads every binary's NEEDED entries), so -s pluggable still runs and the GPU
# tests, the pluggable conformance ones among them, pass as in the default build.
# Writes OUT/configure.log, OUT/build.log, OUT/runtime.log, OUT/gpu_tests.log and
# OUT/pluggable.log (run -s pluggable with the example plugin linked to libcudart.so).
# Run from the repository root.
set -u
build=${1:?usage: run.sh BUILD OUT}
out=${2:?usage: run.sh BUILD OUT}
mkdir -p "$out"
cmake -S . -B "$build" -DAB_TORCH=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_MESSAGE_LOG_LEVEL=NOTICE >"$out/configure.log" 2>&1 ||
  { echo "configure failed: $out/configure.log"; exit 1; }
grep -q "PyTorch comparison harness ON" "$out/configure.log" || { echo "PyTorch was not found: $out/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" >"$out/build.log" 2>&1 || { echo "build failed: $out/build.log"; exit 1; }
bash tests/runtime_test.sh "$build" >"$out/runtime.log" 2>&1
echo "runtime_test exit $?" | tee -a "$out/runtime.log"
ctest --test-dir "$build" -L gpu --output-on-failure >"$out/gpu_tests.log" 2>&1
echo "ctest -L gpu exit $?" | tee -a "$out/gpu_tests.log"
grep -E "tests passed|Failed|Skipped" "$out/gpu_tests.log"
"$build/allocbench" run -w random:ops=3000 -s "pluggable:$build/plugins/libmalloc_each_cudart.so" --device cuda \
  --out "$out/pluggable" >"$out/pluggable.log" 2>&1
echo "run -s pluggable exit $?" | tee -a "$out/pluggable.log"
