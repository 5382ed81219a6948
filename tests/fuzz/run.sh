#!/usr/bin/env bash
# run.sh BUILD SECONDS [TARGET...]: fuzzes each target (default: every fuzz_* binary in
# BUILD/tests/fuzz, a build configured with AB_FUZZ) for SECONDS, from its committed corpus.
# New inputs go to BUILD/fuzz/corpus/TARGET, never into the repository; a crashing input is
# kept as BUILD/fuzz/artifacts/TARGET/crash-* (copy it into tests/fuzz/corpus/TARGET, named
# for what it caught, once it is fixed). Prints one line per target: executions, seconds,
# new corpus inputs, crashes in this run; exits 1 if a target crashed.
set -u
build=${1:?usage: run.sh BUILD SECONDS [TARGET...]}
seconds=${2:?usage: run.sh BUILD SECONDS [TARGET...]}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for bin in "$build"/tests/fuzz/fuzz_*; do
    name=$(basename "$bin")
    case $name in *_corpus) continue ;; esac
    [ -x "$bin" ] && targets+=("${name#fuzz_}")
  done
fi
if [ ${#targets[@]} -eq 0 ]; then
  echo "run.sh: no fuzz targets in $build/tests/fuzz (configure with -DCMAKE_C_COMPILER=clang -DAB_FUZZ=ON)" >&2
  exit 1
fi
failed=0
printf '%-14s %12s %8s %8s %8s\n' target executions seconds new crashes
for t in "${targets[@]}"; do
  bin=$build/tests/fuzz/fuzz_$t
  corpus=$build/fuzz/corpus/$t
  artifacts=$build/fuzz/artifacts/$t
  log=$build/fuzz/$t.log
  mkdir -p "$corpus" "$artifacts"
  before=$(ls "$corpus" | wc -l)
  before_crashes=$(ls "$artifacts" | wc -l) # inputs of earlier runs not yet taken away
  # Inputs up to 64 KiB (the seeds are cut-down traces); a unit slower than 10 s is a hang.
  "$bin" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$corpus" "$here/corpus/$t" >"$log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  secs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | grep -o 'in [0-9]*' | grep -o '[0-9]*')
  crashes=$(($(ls "$artifacts" | wc -l) - before_crashes))
  printf '%-14s %12s %8s %8s %8s\n' "$t" "${runs:-?}" "${secs:-$seconds}" $(($(ls "$corpus" | wc -l) - before)) "$crashes"
  if [ $rc -ne 0 ] || [ "$crashes" -ne 0 ]; then
    failed=1
    echo "run.sh: $t: exit $rc; the end of $log:" >&2
    tail -n 30 "$log" >&2
  fi
done
exit $failed
