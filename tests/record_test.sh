#!/usr/bin/env bash
# record_test.sh ALLOCBENCH: `allocbench record` on a stand-in torch (tests/record/torch, the
# calls the start-up hook makes and a small allocator; tests/record/job.py drives it). The
# program's exit status is passed through; the snapshot is written at exit, on an uncaught
# OutOfMemoryError and on SIGTERM, SIGINT and SIGHUP (the status then a death by the signal,
# unless the program catches KeyboardInterrupt), one file per rank under torchrun's variables; the
# summary of each file is printed; the hook does nothing outside record and runs the
# program's own sitecustomize; bad commands are refused.
set -u
ab=${1:?usage: record_test.sh ALLOCBENCH}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
command -v python3 >/dev/null || { echo "record_test: no python3: skipped"; exit 77; }
# The interpreter itself: a wrapper on PATH (pyenv) can take seconds a start.
py=$(python3 -c 'import sys; print(sys.executable)')
job=$here/record/job.py
export PYTHONPATH=$here/record
export TMPDIR=$work/tmp # where record keeps its private folder, which must be gone afterwards
mkdir -p "$TMPDIR"
unset RANK LOCAL_RANK PYTORCH_CUDA_ALLOC_CONF
# What job.py allocates: 5 blocks (16 trace events, 16 MiB of segments), 2 of them freed.
summary="16 events, 5 allocations, peak requested 8.07 MiB, peak reserved 16.00 MiB in 5 device allocations, settings: default"

# record ARGS...: runs allocbench record, output in $work/out and $work/err, status in $rc.
record() {
  "$ab" record "$@" >"$work/out" 2>"$work/err"
  rc=$?
}

# wrote FILE WHY: the file is a snapshot the trace reader takes, summarised on stderr.
wrote() {
  local file=$1 why=$2
  [ -s "$file" ] || { fail "$file was not written: $(cat "$work/err")"; return; }
  grep -qF "allocbench record: wrote $file ($why): $summary" "$work/err" || fail "no summary of $file ($why): $(cat "$work/err")"
  "$ab" replay --info "$file" --format csv >"$work/info" 2>&1 || fail "replay --info $file: $(cat "$work/info")"
  [ -z "$(ls "$TMPDIR")" ] || fail "record left its private folder: $(ls "$TMPDIR")"
  [ -z "$(find "$(dirname "$file")" -name '*.tmp.*')" ] || fail "a temporary snapshot was left beside $file"
}

# The program's exit status, and the snapshot at its exit.
record -o "$work/a/job.pickle" -- "$py" "$job" exit 3
[ $rc -eq 3 ] || fail "exit 3 came back as $rc: $(cat "$work/err")"
wrote "$work/a/job.pickle" "at exit"
grep -qF "allocbench record: next: allocbench tune -w replay:$work/a/job.pickle" "$work/err" || fail "no next step: $(cat "$work/err")"
[ ! -s "$work/out" ] || fail "record wrote on stdout: $(cat "$work/out")"
# The same from another folder, with a relative -o: the snapshot lands where -o said.
(cd "$work" && "$ab" record -o rel/job.pickle -- "$py" "$job" exit 0 >/dev/null 2>"$work/err") || fail "a relative -o failed"
[ -s "$work/rel/job.pickle" ] || fail "-o rel/job.pickle was not written relative to the current folder"

# An uncaught OutOfMemoryError: the snapshot, with the OOM in it, and Python's own report.
record -o "$work/oom/job.pickle" -- "$py" "$job" oom
[ $rc -eq 1 ] || fail "the uncaught OOM exited $rc"
summary="17 events, 5 allocations, peak requested 8.07 MiB, peak reserved 16.00 MiB in 5 device allocations, 1 OOM in the trace, settings: default" wrote "$work/oom/job.pickle" "on an uncaught OutOfMemoryError"
grep -q "^torch.cuda.OutOfMemoryError: CUDA out of memory" "$work/err" || fail "Python's traceback is gone: $(cat "$work/err")"

# SIGTERM, SIGINT and SIGHUP to record reach the program, which dumps and dies of the signal.
set -m # job control: a background job keeps SIGINT instead of starting with it ignored
for sig in TERM INT HUP; do
  rm -f "$work/ready"
  "$ab" record -o "$work/sig/$sig.pickle" -- "$py" "$job" wait "$work/ready" >"$work/out" 2>"$work/err" &
  pid=$!
  for _ in $(seq 1 100); do [ -s "$work/ready" ] && break; sleep 0.1; done
  [ -e "$work/ready" ] || fail "SIG$sig: the program never got going: $(cat "$work/err")"
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  want=$((128 + $(kill -l "$sig")))
  [ $rc -eq $want ] || fail "after SIG$sig record exited $rc, expected $want"
  wrote "$work/sig/$sig.pickle" "on SIG$sig"
done
# A program that catches KeyboardInterrupt still does: the snapshot is taken, and it goes on.
rm -f "$work/ready"
"$ab" record -o "$work/sig/catch.pickle" -- "$py" "$job" catch "$work/ready" >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 1 100); do [ -e "$work/ready" ] && break; sleep 0.1; done
kill -INT "$pid"
wait "$pid"
rc=$?
[ $rc -eq 5 ] || fail "the program that catches KeyboardInterrupt exited $rc, not its own 5: $(cat "$work/err")"
wrote "$work/sig/catch.pickle" "on SIGINT"
set +m

# torchrun: each rank its own file, the rank in its name (RANK, else LOCAL_RANK); a further
# process without a rank gets the plain name, and one more the pid in its name.
record -o "$work/ranks/job.pickle" -- sh -c "RANK=0 '$py' '$job' exit 0 & RANK=1 '$py' '$job' exit 0 &
  LOCAL_RANK=2 '$py' '$job' exit 0 & '$py' '$job' exit 0 & '$py' '$job' exit 0 & wait"
[ $rc -eq 0 ] || fail "the ranks' job exited $rc"
for f in job.rank0.pickle job.rank1.pickle job.rank2.pickle job.pickle; do wrote "$work/ranks/$f" "at exit"; done
[ "$(find "$work/ranks" -name 'job.pid*.pickle' | wc -l)" -eq 1 ] || fail "the second unranked process: $(ls "$work/ranks")"
[ "$(grep -c 'allocbench record: wrote' "$work/err")" -eq 5 ] || fail "not 5 files summarised: $(cat "$work/err")"
grep -qxF "allocbench record: next: allocbench tune -w 'replay:$work/ranks/job.rank*.pickle'" "$work/err" ||
  fail "the next step does not tune the ranks together: $(grep next: "$work/err")"

# --max-entries keeps the last N events.
record --max-entries 3 -o "$work/me.pickle" -- "$py" "$job" exit 0
grep -qF "wrote $work/me.pickle (at exit): 3 events," "$work/err" || fail "--max-entries 3: $(cat "$work/err")"

# Each allocation's Python stack by default (context="alloc"), innermost first, the program's
# own lines in it; none with --no-stacks (context=None).
frames_of() { # FILE: the alloc entries' frames, one line per entry: "file:line name" innermost first
  "$py" -c 'import pickle, sys
for e in pickle.load(open(sys.argv[1], "rb"))["device_traces"][0]:
    if e["action"] == "alloc":
        print(" ".join("%s:%d:%s" % (f["filename"].split("/")[-1], f["line"], f["name"]) for f in e["frames"]))' "$1"
}
record -o "$work/stacks.pickle" -- "$py" "$job" exit 0
[ "$(frames_of "$work/stacks.pickle" | grep -c 'job.py:[0-9]*:allocate job.py:[0-9]*:<module>')" -eq 5 ] ||
  fail "the default records no Python stacks: $(frames_of "$work/stacks.pickle")"
record --stacks all -o "$work/stacks_all.pickle" -- "$py" "$job" exit 0
[ "$(frames_of "$work/stacks_all.pickle" | grep -c 'job.py')" -eq 5 ] || fail "--stacks all: $(frames_of "$work/stacks_all.pickle")"
record --no-stacks -o "$work/nostacks.pickle" -- "$py" "$job" exit 0
wrote "$work/nostacks.pickle" "at exit"
[ -z "$(frames_of "$work/nostacks.pickle" | tr -d '\n')" ] || fail "--no-stacks recorded stacks: $(frames_of "$work/nostacks.pickle")"

# The settings the snapshot's structured allocator_settings leave out come from the conf string
# it keeps: a memory fraction is the job's cap, which tune needs.
PYTORCH_CUDA_ALLOC_CONF="max_non_split_rounding_mb:64, per_process_memory_fraction:0.5" \
  record -o "$work/conf.pickle" -- "$py" "$job" exit 0
grep -qF "settings: max_non_split_rounding_mb:64,per_process_memory_fraction:0.5" "$work/err" ||
  fail "the recorded conf string's settings: $(cat "$work/err")"

# A program that never uses CUDA: nothing written, record says why and exits 125, its own
# status for "no snapshot", so that `record ... && tune ...` stops there.
record -o "$work/none.pickle" -- "$py" "$job" nocuda
[ $rc -eq 125 ] || fail "nocuda exited $rc, expected 125"
grep -qF "allocbench record: the program exited 0; exiting 125: no snapshot" "$work/err" || fail "nocuda: $(cat "$work/err")"
[ ! -e "$work/none.pickle" ] || fail "a snapshot of a program that never used CUDA"
grep -q "no snapshot was written" "$work/err" && grep -q "never used CUDA" "$work/err" || fail "nocuda: $(cat "$work/err")"
record -o "$work/none.pickle" -- sh -c 'exit 4'
[ $rc -eq 125 ] || fail "sh -c 'exit 4', which wrote no snapshot, came back as $rc"
grep -qF "the program exited 4; exiting 125: no snapshot" "$work/err" || fail "sh -c 'exit 4': $(cat "$work/err")"
grep -q "no Python process of the program started the hook" "$work/err" || fail "sh -c 'exit 4': $(cat "$work/err")"

# A program that ends by os._exit after using CUDA: no exit hook ran, and record says so
# rather than doubting it is a Python program.
record -o "$work/osexit.pickle" -- "$py" "$job" osexit
[ $rc -eq 125 ] || fail "osexit exited $rc, expected 125"
grep -qF "(pid " "$work/err" && grep -qF "used CUDA but ended without the interpreter's exit path (os._exit, a crash or SIGKILL)" "$work/err" ||
  fail "osexit: $(cat "$work/err")"
grep -q "is it a Python program" "$work/err" && fail "osexit: record doubts it is Python: $(cat "$work/err")"

# A record killed (SIGKILL) while its job runs: the job dumps beside -o as it ends, and
# --recover (once the job has ended; not before) or the next record of that -o writes it.
set -m
killed_record() { # OUT: starts record of a waiting job, kills record, leaves $jobpid running
  rm -f "$work/ready"
  "$ab" record -o "$1" -- "$py" "$job" wait "$work/ready" >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 1 100); do [ -s "$work/ready" ] && break; sleep 0.1; done
  [ -s "$work/ready" ] || fail "killed record: the program never got going"
  jobpid=$(cat "$work/ready")
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null
}
end_job() {
  kill -TERM "$jobpid"
  for _ in $(seq 1 100); do kill -0 "$jobpid" 2>/dev/null || break; sleep 0.1; done
}
killed_record "$work/kill/job.pickle"
record --recover -o "$work/kill/job.pickle"
[ $rc -eq 125 ] || fail "--recover while the job runs exited $rc, expected 125: $(cat "$work/err")"
grep -qF "still runs: run allocbench record --recover -o $work/kill/job.pickle once it has ended" "$work/err" ||
  fail "--recover while the job runs: $(cat "$work/err")"
end_job
record --recover -o "$work/kill/job.pickle"
[ $rc -eq 0 ] || fail "--recover exited $rc: $(cat "$work/err")"
grep -qF "allocbench record: recovered $work/kill/job.pickle (on SIGTERM): $summary" "$work/err" || fail "--recover: $(cat "$work/err")"
"$ab" replay --info "$work/kill/job.pickle" --format csv >/dev/null 2>&1 || fail "the recovered snapshot does not read"
[ -z "$(find "$work/kill" -name '*.unfinished-*')" ] || fail "--recover left its folder: $(ls "$work/kill")"
record --recover -o "$work/kill/job.pickle"
[ $rc -eq 125 ] && grep -qF "nothing to recover" "$work/err" || fail "a second --recover: $rc: $(cat "$work/err")"
killed_record "$work/kill2/job.pickle"
end_job
record -o "$work/kill2/job.pickle" -- "$py" "$job" exit 0
[ $rc -eq 0 ] || fail "the record after a killed one exited $rc: $(cat "$work/err")"
grep -qF "allocbench record: recovered $work/kill2/job.recovered.pickle (on SIGTERM): $summary" "$work/err" ||
  fail "the next record did not collect: $(cat "$work/err")"
wrote "$work/kill2/job.pickle" "at exit"
[ "$(ls "$work/kill2")" = "$(printf 'job.pickle\njob.recovered.pickle')" ] || fail "beside the output: $(ls "$work/kill2")"
set +m

# A folder left behind whose manifest names a file that is no snapshot of -o, or a dump that
# is no regular file (a FIFO would hold the command), is not written from, saying so.
mkdir -p "$work/forged/job.pickle.unfinished-AAAAAA" "$work/forged/elsewhere"
state=$work/forged/job.pickle.unfinished-AAAAAA
echo 999999 >"$state/owner"
printf 'x' >"$state/dump.1.pickle"
mkfifo "$state/dump.2.pickle"
printf 'wrote\t999998\tend\t%s\t%s\nwrote\t999997\tend\t%s\t%s\n' "$work/forged/elsewhere/stolen.pickle" \
  "$state/dump.1.pickle" "$work/forged/job.rank1.pickle" "$state/dump.2.pickle" >"$state/manifest"
timeout 30 "$ab" record --recover -o "$work/forged/job.pickle" >"$work/out" 2>"$work/err"
rc=$?
[ $rc -eq 125 ] || fail "--recover of a forged manifest exited $rc: $(cat "$work/err")"
grep -qF "names $work/forged/elsewhere/stolen.pickle, which is not a snapshot of $work/forged/job.pickle" "$work/err" ||
  fail "--recover of a forged manifest: $(cat "$work/err")"
grep -qF "cannot read the dump $state/dump.2.pickle: not a regular file" "$work/err" ||
  fail "--recover of a FIFO dump: $(cat "$work/err")"
[ -z "$(ls "$work/forged/elsewhere")" ] && [ ! -e "$work/forged/job.rank1.pickle" ] ||
  fail "--recover wrote from a forged manifest: $(ls -R "$work/forged")"

# Outside record the hook does nothing: torch is not even imported.
hook=$(dirname "$ab")/allocbench_record
[ -f "$hook/sitecustomize.py" ] || fail "the build did not put the hook beside the binary"
imported=$(PYTHONPATH=$hook:$PYTHONPATH "$py" -c 'import sys; print("torch" in sys.modules)')
[ "$imported" = False ] || fail "the hook imported torch outside record: $imported"

# The program's own sitecustomize still runs, and recording goes on.
mkdir -p "$work/user"
echo 'import os; open(os.environ["USER_MARK"], "w").close()' >"$work/user/sitecustomize.py"
USER_MARK=$work/mark PYTHONPATH=$work/user:$PYTHONPATH record -o "$work/chain.pickle" -- "$py" "$job" exit 0
[ -e "$work/mark" ] || fail "the program's sitecustomize did not run"
wrote "$work/chain.pickle" "at exit"

# -o as every output is written (output.h): a regular file replaced whole, keeping its mode
# (and, as root, its owner); a link written through, staying a link; a FIFO and a device
# written straight to, never replaced.
echo old >"$work/kept.pickle"
chmod 600 "$work/kept.pickle"
owner=
if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1; then
  chown nobody "$work/kept.pickle"
  owner=nobody
fi
record -o "$work/kept.pickle" -- "$py" "$job" exit 0
wrote "$work/kept.pickle" "at exit"
[ "$(stat -c %a "$work/kept.pickle")" = 600 ] || fail "the replaced file's mode: $(stat -c %a "$work/kept.pickle"), was 600"
[ -z "$owner" ] || [ "$(stat -c %U "$work/kept.pickle")" = "$owner" ] || fail "the replaced file's owner: $(stat -c %U "$work/kept.pickle")"
mkdir -p "$work/real"
echo old >"$work/real/target.pickle"
ln -s "$work/real/target.pickle" "$work/link.pickle"
record -o "$work/link.pickle" -- "$py" "$job" exit 0
[ -L "$work/link.pickle" ] || fail "-o a link replaced the link"
"$ab" replay --info "$work/real/target.pickle" --format csv >"$work/info" 2>&1 || fail "-o a link did not write through it: $(cat "$work/err")"
mkfifo "$work/fifo"
cat "$work/fifo" >"$work/from-fifo" &
reader=$!
record -o "$work/fifo" -- "$py" "$job" exit 0
wait "$reader"
[ $rc -eq 0 ] || fail "-o a FIFO exited $rc: $(cat "$work/err")"
[ -p "$work/fifo" ] || fail "-o a FIFO replaced the FIFO"
"$ab" replay --info "$work/from-fifo" --format csv >"$work/info" 2>&1 || fail "the snapshot through the FIFO does not read: $(cat "$work/info")"
# No reader: SIGTERM stops record waiting on the FIFO within 2 s, and says so.
"$ab" record -o "$work/fifo" -- "$py" "$job" exit 0 >"$work/out" 2>"$work/err" &
pid=$!
polling_fifo "$pid" # the program has ended: record waits for a reader
start=$(date +%s%3N)
kill -TERM "$pid"
wait "$pid"
rc=$? took=$(($(date +%s%3N) - start))
[ $rc -eq 143 ] || fail "record blocked on a FIFO, after SIGTERM: exit $rc: $(cat "$work/err")"
[ $took -le 2000 ] || fail "record blocked on a FIFO took $took ms to stop"
grep -qF "stopped while waiting for a reader of the FIFO" "$work/err" || fail "the FIFO without a reader: $(cat "$work/err")"
[ -z "$(ls "$TMPDIR")" ] || fail "record stopped on a FIFO left its private folder: $(ls "$TMPDIR")"
[ -p "$work/fifo" ] || fail "the FIFO was replaced"
if [ "$(id -u)" -eq 0 ]; then
  mknod "$work/node" c 1 3 # /dev/null's numbers: it takes what is written
  record -o "$work/node" -- "$py" "$job" exit 0
  [ $rc -eq 0 ] || fail "-o a device node exited $rc: $(cat "$work/err")"
  [ -c "$work/node" ] || fail "-o a device node replaced the node: $(ls -l "$work/node")"
else
  echo "record_test: not root: -o a device node (mknod) skipped"
fi
# An output that is an input of the job is refused before the job starts.
cp "$job" "$work/job-copy.py"
record -o "$work/job-copy.py" -- "$py" "$work/job-copy.py" exit 0
[ $rc -eq 2 ] || fail "-o the program's script exited $rc"
grep -qF "is '$work/job-copy.py', named among the program's arguments (an input of the job); refusing to write over it" "$work/err" ||
  fail "-o the program's script: $(cat "$work/err")"
cmp -s "$job" "$work/job-copy.py" || fail "-o the program's script changed the script"
record -o "$work/job-copy.py" -- "$py" "$job" exit 0 --config="$work/job-copy.py"
grep -qF "named among the program's arguments" "$work/err" || fail "-o a file named after '=': $(cat "$work/err")"
cp "$(type -P true)" "$work/prog"
record -o "$work/prog" -- "$work/prog"
grep -qF "is the program '$work/prog'; refusing to write over it" "$work/err" || fail "-o the program itself: $(cat "$work/err")"
cmp -s "$(type -P true)" "$work/prog" || fail "-o the program changed it"

# Bad input: one line, a non-zero exit, nothing run.
refused() {
  local want=$1 says=$2
  shift 2
  record "$@"
  [ $rc -eq "$want" ] || fail "record $*: exited $rc, expected $want"
  [ "$(wc -l <"$work/err")" -eq 1 ] || fail "record $*: $(wc -l <"$work/err") lines on stderr: $(cat "$work/err")"
  grep -qF -- "$says" "$work/err" || fail "record $*: stderr does not say '$says': $(cat "$work/err")"
  [ ! -s "$work/out" ] || fail "record $*: wrote on stdout"
}
refused 127 "cannot run 'no-such-program-here': not found on PATH" -o "$work/bad.pickle" -- no-such-program-here
refused 127 "cannot run '$work/nothing': no such file" -o "$work/bad.pickle" -- "$work/nothing"
refused 126 "cannot run '$work': Permission denied" -o "$work/bad.pickle" -- "$work"
# The folders -o names that record made are gone again when it wrote nothing in them.
refused 127 "cannot run '$work/nothing': no such file" -o "$work/made/deeper/bad.pickle" -- "$work/nothing"
[ -e "$work/made" ] && fail "a record that ran nothing left the folders it made for -o"
refused 2 "expected -- COMMAND [ARGS...]" -o "$work/bad.pickle" "$py" "$job" exit 0
refused 2 "expected the program to run after --" -o "$work/bad.pickle" --
refused 2 "--max-entries '0': expected a whole number of events from 1 to 9223372036854775807" --max-entries 0 -- true
refused 2 "--max-entries '-1': expected a whole number of events from 1 to 9223372036854775807" --max-entries -1 -- true
refused 2 "--max-entries 'x'" --max-entries x -- true
refused 2 "--stacks 'c++': expected python or all (or --no-stacks)" --stacks c++ -- true
refused 2 "--stacks and --no-stacks: give one of them" --no-stacks --stacks all -- true
refused 2 "--stacks and --no-stacks: give one of them" --stacks python --no-stacks -- true
refused 2 "-o '': an empty path (expected a file name)" -o '' -- true
refused 2 "-o '$work': is a directory (expected a file)" -o "$work" -- true
refused 2 "-o '$work/': is a directory (expected a file)" -o "$work/" -- true
refused 2 "-o '$work/new/': expected a file, not a folder" -o "$work/new/" -- true
refused 2 "bad option '-w'" -w random -- true
[ ! -e "$work/bad.pickle" ] || fail "a refused record wrote a snapshot"

finish record_test
