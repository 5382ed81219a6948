#!/usr/bin/env bash
# install_test.sh BUILD_DIR SOURCE_DIR: `cmake --install` into a temporary prefix gives a tree
# that works on its own: bin/allocbench says its version, lists, and records tests/record's
# stand-in job with the hook it finds in lib/allocbench/record; the example plugins are in
# lib/allocbench/plugins and load as -s pluggable:PATH; report draws with the figure scripts of
# lib/allocbench/plots, which the hints after a run name; allocbench_micro replays the trace of
# share/allocbench from wherever the tree is. The build folder is not on the path.
set -u
build=${1:?usage: install_test.sh BUILD_DIR SOURCE_DIR}
src=${2:?usage: install_test.sh BUILD_DIR SOURCE_DIR}
ab=/nonexistent # refuse() is not used here
source "$src/tests/lib.sh"
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >"$work/out" 2>&1 || fail "cmake --install exited $?: $(cat "$work/out")"
ab=$prefix/bin/allocbench
[ -x "$ab" ] || { fail "no $ab: $(cat "$work/out")"; finish install_test; }
[ -r "$prefix/lib/allocbench/record/sitecustomize.py" ] || fail "the record hook is not installed"
for p in malloc_each small_pool; do
  [ -f "$prefix/lib/allocbench/plugins/lib$p.so" ] || fail "plugin lib$p.so is not installed: $(ls -R "$prefix/lib")"
done
cd "$work" || exit 1

"$ab" --version >"$work/v" 2>&1 || fail "--version exited $?"
grep -qE "^allocbench [0-9]+\.[0-9]+ \(commit [^)]+\)$" "$work/v" || fail "--version's first line: $(cat "$work/v")"
grep -qE "^built with: CUDA (ON|OFF), MPI (ON|OFF), PyTorch comparison harness (ON|OFF), Google Benchmark (ON|OFF)" "$work/v" ||
  fail "--version names no build options: $(cat "$work/v")"

"$ab" list --strategies >"$work/list" 2>&1 || fail "list exited $?: $(cat "$work/list")"
grep -qx caching "$work/list" || fail "list has no caching: $(cat "$work/list")"

# The page of a results folder, drawn with the figure scripts installed beside the binary.
[ -x "$prefix/lib/allocbench/plots/draw.sh" ] && [ -r "$prefix/lib/allocbench/plots/common.gp" ] ||
  fail "the figure scripts are not installed: $(ls "$prefix/lib/allocbench")"
"$ab" oom -w random:ops=200 -s caching --device sim --out "$work/o" >/dev/null 2>&1 || fail "oom from the prefix exited $?"
env -u AB_PLOTS_DIR "$ab" report "$work/o" >"$work/out" 2>"$work/err" || fail "report from the prefix exited $?: $(cat "$work/err")"
grep -qF "drawing the figures with $prefix/lib/allocbench/plots/draw.sh" "$work/err" ||
  fail "report from the prefix does not draw with the installed scripts: $(head -n 2 "$work/err")"
[ -s "$work/o/report.html" ] || fail "report from the prefix wrote no page"

# The hints a run prints name the installed figure scripts, which are there and draw.
env -u AB_PLOTS_DIR "$ab" run -w fragmenter -s caching --device sim --budget 300MiB --out "$work/f" >"$work/out" 2>&1
hint=$(grep -o "gnuplot -e \"map='[^']*'\" [^ ]*oommap.gp" "$work/out")
[ "${hint##* }" = "$prefix/lib/allocbench/plots/oommap.gp" ] || fail "the segment map's hint from the prefix: '$hint'"
if command -v gnuplot >/dev/null && [ -n "$hint" ]; then
  (cd "$work" && eval "$hint") 2>"$work/err" || fail "the hint as printed failed: $hint: $(cat "$work/err")"
  [ -s "$work/f/oommap_fragmenter_caching.png" ] || fail "the hint as printed drew nothing: $hint"
fi

# The micro-benchmarks from the installed tree, moved elsewhere after the install, outside the
# source tree: the replay benchmarks run the trace installed beside the binary.
micro=$prefix/bin/allocbench_micro
if [ -x "$micro" ]; then
  [ -r "$prefix/share/allocbench/traces/cnn_dyn.default.trace.csv.gz" ] ||
    fail "the micro-benchmarks' trace is not installed: $(ls -R "$prefix/share" 2>&1)"
  mv "$prefix" "$work/moved"
  "$work/moved/bin/allocbench_micro" --device sim --benchmark_min_time=0.01 '--benchmark_filter=^replay/raw/' \
    --out "$work/micro" >"$work/out" 2>"$work/err" || fail "the installed allocbench_micro's replay exited $?: $(cat "$work/err")"
  grep -qF "\"trace\": \"$work/moved/share/allocbench/traces/cnn_dyn.default.trace.csv.gz\"" "$work/micro/micro.json" ||
    fail "the installed allocbench_micro did not replay its installed trace: $(grep -F '"trace"' "$work/micro/micro.json")"
  grep -q '^replay/raw/cnn_dyn.default' "$work/micro/micro.csv" || fail "no replay row: $(cat "$work/micro/micro.csv")"
  mv "$work/moved" "$prefix"
else
  echo "install_test: built without Google Benchmark: allocbench_micro not tried"
fi

# A plugin from the installed tree, on the simulated card.
"$ab" run -w random:ops=200 -s "pluggable:$prefix/lib/allocbench/plugins/libmalloc_each.so" --device sim \
  --out "$work/r" -q >"$work/out" 2>&1 || fail "run with the installed plugin exited $?: $(cat "$work/out")"

# record's stand-in job, with the installed hook (the build's allocbench_record/ is not beside it).
if command -v python3 >/dev/null; then
  py=$(python3 -c 'import sys; print(sys.executable)')
  PYTHONPATH=$src/tests/record "$ab" record -o "$work/job.pickle" -- "$py" "$src/tests/record/job.py" exit 0 \
    >"$work/out" 2>"$work/err" || fail "record from the prefix exited $?: $(cat "$work/err")"
  grep -qF "allocbench record: wrote $work/job.pickle" "$work/err" || fail "record wrote nothing: $(cat "$work/err")"
  [ -s "$work/job.pickle" ] || fail "no snapshot from the installed record"
  # Without the hook, record says where it looked.
  rm "$prefix/lib/allocbench/record/sitecustomize.py"
  PYTHONPATH=$src/tests/record "$ab" record -o "$work/job2.pickle" -- "$py" "$src/tests/record/job.py" exit 0 \
    >"$work/out" 2>"$work/err" && fail "record without its hook succeeded"
  grep -qF "lib/allocbench/record" "$work/err" || fail "record without its hook does not say where it looked: $(cat "$work/err")"
else
  echo "install_test: no python3: record not tried"
fi

finish install_test
