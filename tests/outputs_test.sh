#!/usr/bin/env bash
# outputs_test.sh ALLOCBENCH: every output option pointed at what allocbench did not create
# (a device node, a FIFO, a link to a file, the input trace itself) leaves it as it was
# when the write fails; empty paths are refused; a failed append to summary.csv leaves the
# file as it was; a full stdout fails the command (output.h,
# Note [Writing where the user points]). Device nodes need root, as CI runs the tests; elsewhere that part is skipped.
set -u
ab=$1
. "$(dirname "$0")/lib.sh"

# A CSV trace of 3000 allocations and frees: its export is about 150 KB.
trace=$work/in.csv
awk 'BEGIN { print "action,addr,size,stream,time_us";
             for (i = 1; i <= 3000; i++) { printf "alloc,%d,1000,0,%d\n", 4096 * i, 2 * i;
                                           printf "free_completed,%d,1000,0,%d\n", 4096 * i, 2 * i + 1 } }' >"$trace"
cp "$trace" "$work/in.orig"
replay() { "$ab" replay "$trace" -s raw --device sim --quiet "$@"; }

# A file size limit of 64 KiB makes writes fail past it, as a full disk does (SIGXFSZ ignored,
# so that the write returns its error instead of killing the process).
limited() { (ulimit -f 64 && trap '' XFSZ && "$@"); }

# survives WHAT CHECK: CHECK (a test expression) must still hold after a failed write.
survives() {
  local what=$1
  shift
  "$@" || fail "$what did not survive"
}
no_temps() {
  local left
  left=$(find "$work" -name '*.tmp.*' | head -n 3)
  [ -z "$left" ] || fail "$1: temporary files left: $left"
}

# The names of the run's files under --out.
replay --out "$work/names" >/dev/null || fail "a plain run failed"
timeline=$(basename "$(ls "$work"/names/timeline_*.csv)")

# 1. A device node: /dev/full's numbers, made here so that the machine's own is never at stake.
if [ "$(id -u)" = 0 ] && mknod "$work/full" c 1 7 2>/dev/null; then
  is_full() { [ -c "$work/full" ] && [ "$(stat -c %t,%T "$work/full")" = 1,7 ]; }
  for opt in --export-trace --export-snapshot; do
    replay --out "$work/res" $opt "$work/full" >/dev/null 2>"$work/err" && fail "$opt to a full device exited 0"
    grep -q "No space left" "$work/err" || fail "$opt to a full device: $(cat "$work/err")"
    survives "the device node given to $opt" is_full
  done
  replay --out "$work/full" >/dev/null 2>&1 && fail "--out a device node exited 0"
  survives "the device node given to --out" is_full
  mkdir "$work/dev_out"
  ln -s "$work/full" "$work/dev_out/summary.csv"
  replay --out "$work/dev_out" --no-timeline >/dev/null 2>"$work/err" && fail "summary.csv linked to a full device: exited 0"
  survives "summary.csv linked to the device node" [ -L "$work/dev_out/summary.csv" ]
  survives "the device node behind summary.csv" is_full
  rm "$work/dev_out/summary.csv"
  ln -s "$work/full" "$work/dev_out/$timeline"
  replay --out "$work/dev_out" >/dev/null 2>"$work/err" && fail "a timeline linked to a full device: exited 0"
  survives "the timeline linked to the device node" [ -L "$work/dev_out/$timeline" ]
  survives "the device node behind the timeline" is_full
  no_temps "device node"
else
  echo "skipped: device nodes (needs root)"
fi

# 2. A FIFO: written straight through (a reader gets the export), never replaced; a reader
# that goes away fails the write (SIGPIPE or EPIPE) and the FIFO stays.
mkfifo "$work/fifo"
cat "$work/fifo" >"$work/from_fifo" &
replay --out "$work/res" --export-trace "$work/fifo" >/dev/null || fail "--export-trace to a FIFO with a reader failed"
wait
head -n 1 "$work/from_fifo" | grep -qx 'action,addr,size,stream,time_us' || fail "the FIFO's reader got no CSV trace"
for opt in --export-trace --export-snapshot; do
  head -c 10 "$work/fifo" >/dev/null &
  replay --out "$work/res" $opt "$work/fifo" >/dev/null 2>&1 && fail "$opt to a FIFO closed early exited 0"
  wait
  survives "the FIFO given to $opt" [ -p "$work/fifo" ]
done
replay --out "$work/fifo" >/dev/null 2>&1 && fail "--out a FIFO exited 0"
survives "the FIFO given to --out" [ -p "$work/fifo" ]
mkdir "$work/fifo_out"
mkfifo "$work/fifo_out/summary.csv"
cat "$work/fifo_out/summary.csv" >"$work/from_fifo" &
replay --out "$work/fifo_out" --no-timeline >/dev/null || fail "summary.csv as a FIFO with a reader failed"
wait
survives "summary.csv as a FIFO" [ -p "$work/fifo_out/summary.csv" ]
[ "$(wc -l <"$work/from_fifo")" = 2 ] || fail "the FIFO's reader got $(wc -l <"$work/from_fifo") lines, expected header and row"
no_temps "FIFO"

# 3. A link to a regular file: the write fails past the size limit; the link stays a link and
# the file keeps its content.
echo "the user's own file" >"$work/precious"
cp "$work/precious" "$work/precious.orig"
ln -s precious "$work/link"
for opt in --export-trace --export-snapshot; do
  limited "$ab" replay "$trace" -s raw --device sim --quiet --out "$work/res" $opt "$work/link" >/dev/null 2>"$work/err" &&
    fail "$opt past the file size limit exited 0"
  grep -q "$work/link" "$work/err" || fail "$opt: the error does not name the path: $(cat "$work/err")"
  survives "the link given to $opt" [ -L "$work/link" ]
  survives "the file behind the link given to $opt" cmp -s "$work/precious" "$work/precious.orig"
done
# --out whose summary.csv and timeline are links to the user's files: with no room to write,
# both links and both files stay as they were.
mkdir "$work/link_out"
cp "$work/names/summary.csv" "$work/user_summary"
echo "the user's timeline" >"$work/user_timeline"
cp "$work/user_summary" "$work/user_summary.orig"
cp "$work/user_timeline" "$work/user_timeline.orig"
ln -s "$work/user_summary" "$work/link_out/summary.csv"
ln -s "$work/user_timeline" "$work/link_out/$timeline"
(ulimit -f 0 && trap '' XFSZ && "$ab" replay "$trace" -s raw --device sim --quiet --out "$work/link_out" >/dev/null 2>&1) &&
  fail "--out with no room to write exited 0"
survives "summary.csv linked to the user's file" [ -L "$work/link_out/summary.csv" ]
survives "the timeline linked to the user's file" [ -L "$work/link_out/$timeline" ]
survives "the user's file behind summary.csv" cmp -s "$work/user_summary" "$work/user_summary.orig"
survives "the user's file behind the timeline" cmp -s "$work/user_timeline" "$work/user_timeline.orig"
# Written when nothing fails: through the link, onto the file, the link kept.
replay --out "$work/res" --export-trace "$work/link" >/dev/null || fail "--export-trace through a link failed"
[ -L "$work/link" ] && head -n 1 "$work/precious" | grep -qx 'action,addr,size,stream,time_us' ||
  fail "--export-trace through a link: the link was replaced or the file not written"
no_temps "link"

# 4. The input named as the output, by its name, through a link, through a hard link and
# through a folder not made yet: refused before the run, the trace unchanged.
ln -s in.csv "$work/in_link"
ln "$trace" "$work/in_hard"
for target in "$trace" "$work/in_link" "$work/in_hard" "$work/not_made/../in.csv"; do
  for opt in --export-trace --export-snapshot; do
    replay --out "$work/res" $opt "$target" >"$work/out" 2>"$work/err"
    rc=$?
    [ $rc = 2 ] || fail "$opt $target (the input): exited $rc"
    grep -q "is an input of this run" "$work/err" || fail "$opt $target: $(cat "$work/err")"
    [ -s "$work/out" ] && fail "$opt $target: ran anyway"
  done
done
cmp -s "$trace" "$work/in.orig" || fail "the input trace changed"
[ -e "$work/not_made" ] && fail "an export refused through a folder not made yet made it"
# A trace kept in the results folder under summary.csv's name is not appended to.
mkdir "$work/in_res"
cp "$trace" "$work/in_res/summary.csv"
"$ab" replay "$work/in_res/summary.csv" -s raw --device sim --quiet --out "$work/in_res" --no-timeline >/dev/null 2>"$work/err" &&
  fail "a run whose summary.csv is its trace exited 0"
cmp -s "$work/in_res/summary.csv" "$work/in.orig" || fail "the trace named summary.csv changed"
[ "$(ls "$work/in_res")" = summary.csv ] || fail "the trace named summary.csv was moved aside: $(ls "$work/in_res")"

# An export naming a file the run itself writes in --out (its summary, a timeline) is refused
# before the run: one of the two would be lost.
for name in summary.csv oom.csv "$timeline"; do
  for opt in --export-trace --export-snapshot; do
    rm -rf "$work/own"
    replay --out "$work/own" $opt "$work/own/$name" >"$work/out" 2>"$work/err"
    rc=$?
    [ $rc = 2 ] || fail "$opt naming the run's own $name: exited $rc"
    grep -qF -- "$opt '$work/own/$name': is a file this run writes in --out $work/own" "$work/err" || fail "$opt $name: $(cat "$work/err")"
    [ -e "$work/own" ] && fail "$opt naming the run's own $name: wrote results"
  done
done

# A FIFO nobody reads, as summary.csv or an export: SIGTERM stops the command waiting for a
# reader within 2 s (output.h, item 8), with exit 143, and the FIFO stays.
mkdir -p "$work/no_reader"
rm -f "$work/no_reader/summary.csv"
mkfifo "$work/no_reader/summary.csv" "$work/no_reader_export"
for opt in summary --export-trace; do
  extra=()
  [ $opt = summary ] || extra=($opt "$work/no_reader_export")
  "$ab" replay "$trace" -s raw --device sim --quiet --out "$work/no_reader" --no-timeline "${extra[@]}" >/dev/null 2>"$work/err" &
  pid=$!
  polling_fifo $pid
  start=$(date +%s%3N)
  kill -TERM $pid
  wait $pid
  rc=$? took=$(($(date +%s%3N) - start))
  [ $rc = 143 ] || fail "$opt as a FIFO without a reader, after SIGTERM: exit $rc: $(cat "$work/err")"
  [ $took -le 2000 ] || fail "$opt as a FIFO without a reader: $took ms to stop after SIGTERM"
  grep -q "stopped while waiting for a reader of the FIFO" "$work/err" || fail "$opt: $(cat "$work/err")"
done
survives "a FIFO without a reader" [ -p "$work/no_reader/summary.csv" ] && [ -p "$work/no_reader_export" ]

# 5. Empty paths are refused, as the options are read. (With an unknown strategy too, so that
# an allocbench that took the empty path writes nothing at the root: it stops at the strategy.)
for opt in --out --export-trace --export-snapshot; do
  "$ab" replay "$trace" -s nosuch --device sim "$opt" "" >"$work/out" 2>"$work/err"
  rc=$?
  [ $rc = 2 ] || fail "$opt '' exited $rc"
  [ "$(wc -l <"$work/err")" = 1 ] && grep -qF -- "$opt '': an empty path" "$work/err" || fail "$opt '': $(cat "$work/err")"
done
"$ab" run -w random:ops=1000 -s nosuch --device sim --out "" >/dev/null 2>"$work/err"
grep -q "an empty path" "$work/err" || fail "run --out '': $(cat "$work/err")"

# 6. A failed append leaves summary.csv as it was: the file is padded to just under the size
# limit, so that the row is cut part way.
mkdir "$work/full_disk"
replay --out "$work/full_disk" --no-timeline >/dev/null || fail "the first run failed"
pad=$((64 * 1024 - 60 - $(stat -c %s "$work/full_disk/summary.csv")))
head -c $pad /dev/zero | tr '\0' x >>"$work/full_disk/summary.csv"
echo >>"$work/full_disk/summary.csv"
cp "$work/full_disk/summary.csv" "$work/summary.before"
limited "$ab" replay "$trace" -s raw --device sim --quiet --out "$work/full_disk" --no-timeline >/dev/null 2>"$work/err" &&
  fail "an append past the size limit exited 0"
grep -q "summary.csv" "$work/err" || fail "the failed append does not name summary.csv: $(cat "$work/err")"
cmp -s "$work/full_disk/summary.csv" "$work/summary.before" || fail "a failed append changed summary.csv"

# 7. A full stdout fails the command with a line.
for args in "replay --info --format csv $trace" "run -w random:ops=1000 -s raw --device sim --quiet --out $work/res" "list"; do
  "$ab" $args >/dev/full 2>"$work/err"
  rc=$?
  [ $rc != 0 ] || fail "$args > /dev/full exited 0"
  grep -q "stdout" "$work/err" || fail "$args > /dev/full: no line about stdout: $(cat "$work/err")"
done

# 8. Temporary files left by killed runs go when the same file is next written; those of a
# process still running stay.
mkdir "$work/stale"
true &
dead=$!
wait $dead
sleep 60 &
live=$!
name=timeline_random_ops_1000_raw.csv
touch "$work/stale/$name.tmp.$dead" "$work/stale/$name.tmp.$live"
"$ab" run -w random:ops=1000 -s raw --device sim --quiet --out "$work/stale" >/dev/null || fail "the run after a killed one failed"
[ -e "$work/stale/$name.tmp.$dead" ] && fail "a dead run's temporary file stayed"
[ -e "$work/stale/$name.tmp.$live" ] || fail "a running process's temporary file was removed"
kill $live

# 9. Two traces of one name from different folders keep a timeline each in one --out; the
# same trace reached by another path keeps its one.
mkdir "$work/a" "$work/b" "$work/two"
cp "$trace" "$work/a/t.csv"
head -n 5 "$trace" >"$work/b/t.csv"
for t in "$work/a/t.csv" "$work/b/t.csv" "$work/a/../a/t.csv"; do
  "$ab" replay "$t" -s raw --device sim --quiet --out "$work/two" >/dev/null || fail "replay $t failed"
done
[ "$(ls "$work"/two/timeline_t.csv-*_raw.csv | wc -l)" = 2 ] || fail "timelines of two traces named t.csv: $(ls "$work/two")"

# Two long specs that differ only at their end (workloads/README.md's two serve runs): each has files of
# its own, short (the workload's name and a hash of the whole spec), whose rows name the spec
# whole (results.c, Note [Names of a run's files]).
M=hidden=2880,layers=36,heads=32,kv_heads=4,vocab=100544,ffn=1440,experts=128,topk=4,moe_bits=4.25,repack=true,repack_pad=12MiB
for card in 80GiB 36GiB; do
  "$ab" run -w "serve:$M,card=$card" -s caching --device sim --quiet --out "$work/long" >/dev/null || fail "serve card=$card failed"
done
[ "$(ls "$work"/long/timeline_serve-*_caching.csv | wc -l)" = 2 ] || fail "two long specs share a timeline: $(ls "$work/long")"
for f in "$work"/long/timeline_*; do
  [ "$(basename "$f" | wc -c)" -le 48 ] || fail "a long spec's file name is long: $(basename "$f")"
done
for card in 80GiB 36GiB; do
  [ "$(grep -l "serve:$M,card=$card" "$work"/long/timeline_serve-*_caching.csv | wc -l)" = 1 ] ||
    fail "no one timeline names serve:...,card=$card whole: $(head -n 2 "$work"/long/timeline_serve-*)"
done
# Replays of one trace under two settings keep a timeline each; the settings are in it.
for conf in max_split_size_mb:128 expandable_segments:True; do
  "$ab" replay "$trace" -s caching -c "$conf" --device sim --quiet --out "$work/confs" >/dev/null || fail "replay -c $conf failed"
done
[ "$(ls "$work"/confs/timeline_*_conf-*_caching.csv | wc -l)" = 2 ] || fail "replays under two -c share a timeline: $(ls "$work/confs")"
grep -q ',max_split_size_mb:128,caching$' "$work"/confs/timeline_*_conf-*_caching.csv || fail "the timeline does not name its conf"

# 10. The page never replaces what it shows: report -o onto a results file of its folder (by
# any path, or a link) is refused before anything is drawn, and the folder reads as before.
"$ab" compare -w random:ops=300 -s caching,raw --device sim --quiet --out "$work/page" >/dev/null || fail "compare failed"
cp -r "$work/page" "$work/page.orig"
ln -s "$work/page/compare.csv" "$work/page_link.html"
for o in "$work/page/compare.csv" "$work/page/summary.csv" "$work/page/../page/oom.csv" "$work/page_link.html"; do
  "$ab" report "$work/page" -o "$o" >/dev/null 2>"$work/err" && fail "report -o $o exited 0"
  grep -q "in the results folder" "$work/err" || fail "report -o $o: $(cat "$work/err")"
done
diff -r "$work/page" "$work/page.orig" >/dev/null || fail "a refused report changed its folder"
"$ab" report "$work/page" -o "$work/page/mine.html" >/dev/null 2>&1 || fail "report -o a page in the folder failed"
"$ab" report "$work/page" >/dev/null 2>&1 || fail "report after the pages failed"

# 11. A trace kept in --out under a name the command writes there (oom.csv for oom, a
# timeline's name) is refused before the run, by every command, and left as it was.
mkdir "$work/keep"
for name in oom.csv compare.csv timeline_x.csv tune_timeline.csv; do
  cp "$trace" "$work/keep/$name"
  for cmd in oom compare run replay tune blame; do
    case $cmd in
      replay | blame) args="$work/keep/$name" ;;
      tune) args="-w replay:$work/keep/$name" ;;
      *) args="-w replay:$work/keep/$name -s raw" ;;
    esac
    "$ab" $cmd $args --device sim --quiet --out "$work/keep" >/dev/null 2>"$work/err" &&
      fail "$cmd on a trace named $name in --out exited 0"
    grep -q "is an input of this run and a file it writes" "$work/err" || fail "$cmd, $name: $(cat "$work/err")"
    [ "$(ls "$work/keep")" = "$name" ] || fail "$cmd, $name: wrote $(ls "$work/keep")"
    cmp -s "$work/keep/$name" "$trace" || fail "$cmd changed the trace named $name"
  done
  rm "$work/keep/$name"
done

# 11a. A last line shorter than a row and without its newline is taken for a row a kill cut
# short and removed, saying so with what it held (a note a person added is not lost unseen).
"$ab" run -w random:ops=200 -s raw --device sim --quiet --no-timeline --out "$work/noted" >/dev/null || fail "a run to note failed"
printf 'my notes, keep' >>"$work/noted/summary.csv"
"$ab" run -w random:ops=200 -s raw --device sim --quiet --no-timeline --out "$work/noted" >/dev/null 2>"$work/err" ||
  fail "the run after a note failed: $(cat "$work/err")"
grep -qF "summary.csv: its last line (14 bytes, 2 of" "$work/err" && grep -qF 'removed: "my notes, keep"' "$work/err" ||
  fail "a removed note was not said: $(cat "$work/err")"
[ "$(wc -l <"$work/noted/summary.csv")" -eq 3 ] || fail "summary.csv after the note: $(cat "$work/noted/summary.csv")"

# 11b. A directory under a results file's name in --out is refused before anything runs, by
# every command that writes one: nothing is written beside it.
mkdir -p "$work/dirs/summary.csv"
for cmd in run matrix oom tune; do
  case $cmd in
    tune) args="-w random:ops=200" ;;
    *) args="-w random:ops=200 -s raw" ;;
  esac
  "$ab" $cmd $args --device sim --quiet --out "$work/dirs" >/dev/null 2>"$work/err" && fail "$cmd with a directory summary.csv exited 0"
  grep -qF "$work/dirs/summary.csv is a directory, where the results go" "$work/err" || fail "$cmd, directory summary.csv: $(cat "$work/err")"
  [ "$(ls "$work/dirs")" = summary.csv ] || fail "$cmd with a directory summary.csv wrote $(ls "$work/dirs")"
done

# 12. Under a file size limit, with SIGXFSZ at its default action (Note [A file size limit],
# cli.h): no death by the signal; one line naming the file, exit 1, no temporary left, and
# what was written whole.
for cmd in "tune -w random:ops=20000" "replay $trace -s raw --export-snapshot $work/xfsz/e.pickle"; do
  rm -rf "$work/xfsz"
  mkdir "$work/xfsz"
  (ulimit -f 4 && exec $ab $cmd --device sim --quiet --out "$work/xfsz" >/dev/null 2>"$work/err")
  rc=$?
  [ $rc -eq 1 ] || fail "$cmd under ulimit -f: exit $rc, expected 1: $(cat "$work/err")"
  [ "$(wc -l <"$work/err")" -eq 1 ] && grep -q "^allocbench [a-z]*: $work/xfsz/[^ ]*: write failed: File too large$" "$work/err" ||
    fail "$cmd under ulimit -f: $(cat "$work/err")"
  [ -z "$(find "$work/xfsz" -name '*.tmp.*')" ] || fail "$cmd under ulimit -f left $(find "$work/xfsz" -name '*.tmp.*')"
  for csv in "$work"/xfsz/*.csv; do
    [ -e "$csv" ] || continue
    [ "$(tail -c 1 "$csv" | od -An -c | tr -d ' ')" = '\n' ] || fail "$cmd under ulimit -f: $csv ends mid-row"
  done
done

# 13. An output's folder is made as --out's is, and one that cannot be (a path through a file)
# is refused before the work (item 9 of the Note): no row appended, no figure drawn.
touch "$work/plain"
for opt in --export-trace --export-snapshot; do
  rm -rf "$work/early" "$work/made"
  replay --out "$work/early" $opt "$work/made/sub/e.out" >/dev/null || fail "$opt into a folder not yet made failed"
  [ -s "$work/made/sub/e.out" ] || fail "$opt into a folder not yet made: nothing written"
  rm -rf "$work/early"
  replay --out "$work/early" $opt "$work/plain/e.out" >/dev/null 2>"$work/err" && fail "$opt through a file exited 0"
  grep -q -- "^allocbench replay: $opt '$work/plain/e.out': its folder '$work/plain'" "$work/err" || fail "$opt through a file: $(cat "$work/err")"
  [ ! -e "$work/early" ] || fail "$opt through a file: the run went ahead ($(ls "$work/early"))"
done
replay --out "$work/early" >/dev/null || fail "a run for the page failed"
before=$(ls "$work/early")
"$ab" report "$work/early" -o "$work/plain/page.html" >/dev/null 2>"$work/err" && fail "report -o through a file exited 0"
grep -q -- "^allocbench report: -o '$work/plain/page.html': its folder '$work/plain'" "$work/err" || fail "report -o through a file: $(cat "$work/err")"
[ "$(ls "$work/early")" = "$before" ] || fail "report -o through a file drew into the results first"

finish outputs_test
