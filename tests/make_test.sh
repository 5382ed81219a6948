#!/usr/bin/env bash
# make_test.sh SOURCE_DIR [BUILD_DIR]: the Makefile's own logic. `make bench` starts from an
# empty RESULTS (make fresh-results): whatever is there, results or stray files, is moved aside
# whole; an empty or missing RESULTS is left as it is. `make` on a configured BUILD_DIR is quiet:
# progress lines and its commands, none of the makes' "Entering directory" lines.
set -u
src=${1:?usage: make_test.sh SOURCE_DIR [BUILD_DIR]}
build=${2:-}
source "$(dirname "$0")/lib.sh"

mkdir "$work/r"
echo "segment" >"$work/r/oommap_stray.csv"
make -s -C "$src" fresh-results RESULTS="$work/r" >"$work/out" 2>&1 || fail "fresh-results exited $?: $(cat "$work/out")"
[ -e "$work/r" ] && fail "RESULTS with a stray file was not moved aside: $(ls "$work/r")"
moved=$(ls -d "$work"/r.* 2>/dev/null)
[ -f "$moved/oommap_stray.csv" ] || fail "the stray file is not in the folder moved aside: '$moved'"
grep -qF "earlier results moved to $moved" "$work/out" || fail "not said: $(cat "$work/out")"
# Twice in one second: the second goes beside the first (NAME.N), never into it.
for i in 1 2; do
  mkdir "$work/twice"
  echo "$i" >"$work/twice/summary.csv"
  make -s -C "$src" fresh-results RESULTS="$work/twice" >/dev/null 2>&1 || fail "fresh-results $i exited $?"
done
[ "$(cat "$work"/twice.*/summary.csv | sort | tr '\n' ' ')" = "1 2 " ] || fail "two moves aside: $(ls -R "$work"/twice.*)"
[ "$(find "$work" -path "$work/twice.*/twice*" | wc -l)" -eq 0 ] || fail "a folder moved into another: $(ls -R "$work"/twice.*)"

mkdir "$work/empty"
make -s -C "$src" fresh-results RESULTS="$work/empty" >"$work/out" 2>&1 || fail "fresh-results on an empty folder exited $?"
[ -d "$work/empty" ] && [ -z "$(ls -d "$work"/empty.* 2>/dev/null)" ] || fail "an empty RESULTS was moved"
make -s -C "$src" fresh-results RESULTS="$work/none" >"$work/out" 2>&1 || fail "fresh-results on no folder exited $?"
[ -s "$work/out" ] && fail "a missing RESULTS said: $(cat "$work/out")"

if [ -n "$build" ]; then
  (cd "$src" && make BUILD="$build" build) >"$work/out" 2>&1 || fail "make build exited $?: $(tail -5 "$work/out")"
  grep -q "directory '" "$work/out" && fail "make prints directory chatter: $(grep -m3 "directory '" "$work/out")"
  grep -q "Built target allocbench$" "$work/out" || fail "make build shows no progress: $(head -5 "$work/out")"
fi

finish make_test
