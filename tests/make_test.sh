#!/usr/bin/env bash
# make_test.sh SOURCE_DIR: the Makefile's own logic. `make bench` starts from an empty
# RESULTS (make fresh-results): whatever is there, results or stray files, is moved aside
# whole; an empty or missing RESULTS is left as it is.
set -u
src=${1:?usage: make_test.sh SOURCE_DIR}
source "$(dirname "$0")/lib.sh"

mkdir "$work/r"
echo "segment" >"$work/r/oommap_stray.csv"
make -s -C "$src" fresh-results RESULTS="$work/r" >"$work/out" 2>&1 || fail "fresh-results exited $?: $(cat "$work/out")"
[ -e "$work/r" ] && fail "RESULTS with a stray file was not moved aside: $(ls "$work/r")"
moved=$(ls -d "$work"/r.* 2>/dev/null)
[ -f "$moved/oommap_stray.csv" ] || fail "the stray file is not in the folder moved aside: '$moved'"
grep -qF "earlier results moved to $moved" "$work/out" || fail "not said: $(cat "$work/out")"

mkdir "$work/empty"
make -s -C "$src" fresh-results RESULTS="$work/empty" >"$work/out" 2>&1 || fail "fresh-results on an empty folder exited $?"
[ -d "$work/empty" ] && [ -z "$(ls -d "$work"/empty.* 2>/dev/null)" ] || fail "an empty RESULTS was moved"
make -s -C "$src" fresh-results RESULTS="$work/none" >"$work/out" 2>&1 || fail "fresh-results on no folder exited $?"
[ -s "$work/out" ] && fail "a missing RESULTS said: $(cat "$work/out")"

finish make_test
