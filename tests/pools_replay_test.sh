#!/usr/bin/env bash
# pools_replay_test.sh ALLOCBENCH DATA_DIR: the recordings of PyTorch programs whose memory
# lives in private pools (DATA_DIR/pytorch-2.11-h200/pools, results/h200/pools/programs.py)
# replayed under caching on a simulated H200, against the statistics PyTorch itself kept
# (NAME.json): peak reserved and device allocations exactly, peak allocated within 0.1%, and
# an OOM where PyTorch ran out. Then what --info says of their pools, and the approximate
# column and stderr line of a snapshot whose pools cannot all be told.
# Python reads PyTorch's JSON here only. Exits 77 (skipped) without python3 or the data.
set -u
ab=$1
fx=$2/pytorch-2.11-h200/pools
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
# The interpreter itself: a wrapper on PATH (pyenv) can take seconds a start, and this test
# starts it many times.
py=$(python3 -c 'import sys; print(sys.executable)')
[ -r "$fx/graph_pool.pickle.gz" ] || { echo "skipped: no recordings in $fx"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# 1. Each recording replays as PyTorch ran it (the conf is the one the snapshot recorded; the
#    segments get the recorded addresses by default, so that ties between equal free blocks
#    break as they did on the card: strategies/README.md, "Where segments lie"; Note [Recorded addresses]). The moe_* recordings
#    are training steps under a cap with garbage collection, where those ties decide which
#    segments are collected.
#    With --sim-addresses the simulated card places the segments as the driver does (Note
#    [Driver placement]), which gives PyTorch's figures too for all but moe_gc08split64
#    (365 device allocations against 363), whose first segments filled holes the CUDA context
#    had left and whose chunks the driver split between two ranges (the Note says how).
for run in graph_pool compiled compiled_expandable mempool_oom gc07split128 moe_gc07split128 moe_gc06 moe_gc08split64 \
           graph_pool:sim compiled:sim compiled_expandable:sim mempool_oom:sim gc07split128:sim moe_gc07split128:sim \
           moe_gc06:sim; do
  name=${run%:sim}
  mode=()
  [ "$run" = "$name" ] || mode=(--sim-addresses)
  "$ab" replay "$fx/$name.pickle.gz" --device sim:h200 "${mode[@]}" --format csv --out "$tmp/out" >"$tmp/$name.csv" 2>"$tmp/$name.err" ||
    { fail "$run: replay exited $?: $(cat "$tmp/$name.err")"; continue; }
  # expandable segments map memory into reserved ranges: no cudaMalloc addresses to take
  [ "$name" = compiled_expandable ] || [ "$run" != "$name" ] || grep -q "at the address the recorded run got" "$tmp/$name.err" || fail "$name: not replayed at the recorded addresses: $(cat "$tmp/$name.err")"
  "$py" - "$fx/$name.json" "$tmp/$name.csv" <<'PY' || fail "$run: the replay is not what PyTorch did"
import csv, json, sys
want = json.load(open(sys.argv[1]))
st = want["stats"]
row = list(csv.DictReader(open(sys.argv[2])))[0]
bad = []
status = "oom" if want["oom"] else "ok"
if row["status"] != status:
    bad.append("status %s, PyTorch %s" % (row["status"], status))
for col, key in (("peak_reserved_bytes", "reserved_bytes.all.peak"), ("num_device_alloc", "num_device_alloc")):
    if int(row[col]) != st[key]:
        bad.append("%s %s, PyTorch %s" % (col, row[col], st[key]))
got, ref = int(row["peak_allocated_bytes"]), st["allocated_bytes.all.peak"]
if abs(got - ref) > ref / 1000:
    bad.append("peak_allocated_bytes %d, PyTorch %d" % (got, ref))
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PY
done

# 1b. Under other settings, or with --sim-addresses, the simulated card places the segments.
"$ab" replay "$fx/moe_gc06.pickle.gz" --device sim:h200 --sim-addresses --format csv --out "$tmp/out" >/dev/null 2>"$tmp/sim.err" ||
  fail "--sim-addresses: replay exited $?: $(cat "$tmp/sim.err")"
"$ab" replay "$fx/moe_gc06.pickle.gz" --device sim:h200 -c max_split_size_mb:64 --format csv --out "$tmp/out" >/dev/null 2>"$tmp/other.err" ||
  fail "-c max_split_size_mb:64: replay exited $?: $(cat "$tmp/other.err")"
for f in "$tmp/sim.err" "$tmp/other.err"; do
  ! grep -q "recorded run got" "$f" || fail "recorded addresses taken: $(cat "$f")"
done
"$ab" replay "$fx/moe_gc06.pickle.gz" --sim-addresses --recorded-addresses >/dev/null 2>&1
[ $? = 2 ] || fail "--sim-addresses with --recorded-addresses is not refused"

# 1c. The exports keep the pools (the CSV's pool column, a snapshot's pool ids), the program's
#     empty_cache calls and the OOM it ended in: replayed, each gives what the recording gave.
cols() { "$py" -c 'import csv, sys; r = list(csv.DictReader(open(sys.argv[1])))[0]
print(r["status"], r["num_device_alloc"], r["peak_reserved_bytes"], r["peak_allocated_bytes"])' "$1"; }
for name in graph_pool mempool_oom; do
  "$ab" replay --info "$fx/$name.pickle.gz" --format csv >"$tmp/$name.info" 2>/dev/null || fail "$name: --info exited $?"
  "$ab" replay "$fx/$name.pickle.gz" --device sim:h200 --format csv --out "$tmp/out" --export-trace "$tmp/$name.x.csv" \
    --export-snapshot "$tmp/$name.x.pickle" >"$tmp/$name.rec.csv" 2>/dev/null || fail "$name: the exporting replay exited $?"
  head -1 "$tmp/$name.x.csv" | grep -q ',pool$' || fail "$name: the CSV export has no pool column"
  for x in "$tmp/$name.x.csv" "$tmp/$name.x.pickle"; do
    # the recorded settings, for the CSV, which has none
    "$ab" replay "$x" --device sim:h200 -c "$("$py" -c 'import csv, sys; print(next(csv.DictReader(open(sys.argv[1])))["settings"])' "$tmp/$name.info")" \
      --recorded-addresses --format csv --out "$tmp/out" >"$tmp/x.csv" 2>"$tmp/x.err" ||
      { fail "$name: replay of $(basename "$x") exited $?: $(cat "$tmp/x.err")"; continue; }
    [ "$(cols "$tmp/$name.rec.csv")" = "$(cols "$tmp/x.csv")" ] ||
      fail "$name: $(basename "$x") replays as $(cols "$tmp/x.csv"), the recording as $(cols "$tmp/$name.rec.csv")"
  done
done
grep -q '^empty_cache,' "$tmp/graph_pool.x.csv" || fail "graph_pool: the CSV export has no empty_cache row"

# 1d. --cap: PyTorch's cap given on the command line, as a program sets it in code, is the cap
#     the trace is read under and the one the replay runs under: the same figures as PyTorch's,
#     the conf of the row naming the fraction. A strategy without that cap, or --cap with
#     --budget, is refused; --help says which of the two is PyTorch's.
cap=$("$py" -c 'import json, sys; j = json.load(open(sys.argv[1])); print(int(0.0521 * j["total_memory"]))' "$fx/moe_gc06.json")
"$ab" replay "$fx/moe_gc06.pickle.gz" --device sim:h200 --cap "${cap}B" --format csv --out "$tmp/out" >"$tmp/cap.csv" 2>"$tmp/cap.err" ||
  fail "--cap $cap: replay exited $?: $(cat "$tmp/cap.err")"
"$py" - "$fx/moe_gc06.json" "$tmp/cap.csv" <<'PY' || fail "--cap: the replay is not what PyTorch did"
import csv, json, sys
st = json.load(open(sys.argv[1]))["stats"]
row = list(csv.DictReader(open(sys.argv[2])))[0]
bad = ["%s %s, PyTorch %s" % (c, row[c], st[k]) for c, k in (("peak_reserved_bytes", "reserved_bytes.all.peak"),
       ("num_device_alloc", "num_device_alloc"), ("num_device_free", "num_device_free")) if int(row[c]) != st[k]]
if "per_process_memory_fraction" not in row["conf"] or row["approximate"] != "no":
    bad.append("conf %r, approximate %r" % (row["conf"], row["approximate"]))
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
"$ab" replay "$fx/moe_gc06.pickle.gz" -s raw --cap 1GiB --device sim:h200 --out "$tmp/out" >/dev/null 2>"$tmp/raw.err"
[ $? = 2 ] && grep -q "raw has no memory cap" "$tmp/raw.err" || fail "--cap with raw: $(cat "$tmp/raw.err")"
"$ab" run -w "replay:$fx/moe_gc06.pickle.gz" -s caching --cap 1GiB --budget 2GiB --out "$tmp/out" >/dev/null 2>"$tmp/both.err"
[ $? = 2 ] && grep -q "choose one" "$tmp/both.err" || fail "--cap with --budget: $(cat "$tmp/both.err")"
for cmd in replay run matrix; do
  "$ab" $cmd --help | grep -q "PyTorch's memory cap, torch.cuda.set_per_process_memory_fraction" || fail "$cmd --help: --cap is not said to be PyTorch's"
  "$ab" $cmd --help | grep -q "not PyTorch's cap" || fail "$cmd --help: --budget is not told from the cap"
done

# 2. --info lists the pools: the graphs' shared pool, and the default pool, with allocations.
"$ab" replay --info "$fx/graph_pool.pickle.gz" >"$tmp/info.txt" 2>"$tmp/info.err" || fail "--info exited $?"
pools=$(awk '$1 == "private_pools" { print $2 }' "$tmp/info.txt")
[ "$pools" = 1 ] || fail "graph_pool: private_pools '$pools', want the one shared pool"
grep -q '^pool_allocs .*(0,0):[1-9][0-9]* (0,1):[1-9]' "$tmp/info.txt" || fail "graph_pool: pool_allocs: $(grep '^pool_allocs ' "$tmp/info.txt")"
grep -q '^approximate  *no$' "$tmp/info.txt" || fail "graph_pool: every pool can be told, yet: $(grep '^approximate' "$tmp/info.txt")"

# 3. A MemPool deleted before the dump: its allocations cannot be told, and every output says
#    so (the --info line, the result row's column, a line on stderr).
"$ab" replay --info "$fx/mempool_gone.pickle.gz" >"$tmp/gone.txt" 2>"$tmp/gone.err" || fail "--info exited $?"
unknown=$(awk '$1 == "pool_allocs_unknown" { print $2 }' "$tmp/gone.txt")
[ "${unknown:-0}" -gt 0 ] || fail "mempool_gone: no allocation of unknown pool"
grep -q "approximate: the pools of $unknown allocations cannot be told" "$tmp/gone.err" || fail "mempool_gone: no stderr line: $(cat "$tmp/gone.err")"
"$ab" replay "$fx/mempool_gone.pickle.gz" --device sim:h200 --format csv --out "$tmp/out" >"$tmp/gone.csv" 2>"$tmp/gone_run.err" || fail "replay exited $?"
"$py" - "$tmp/gone.csv" "$unknown" <<'PY' || fail "mempool_gone: the result row does not say it is approximate"
import csv, sys
row = list(csv.DictReader(open(sys.argv[1])))[0]
sys.exit(0 if ("the pools of %s allocations" % sys.argv[2]) in row.get("approximate", "") else 1)
PY
grep -q "approximate" "$tmp/gone_run.err" || fail "mempool_gone: replay printed no approximate line on stderr"
# 4. The CSV trace's pool column: a block freed in pool 1 cannot serve the default pool, so the
#    same records with the column make one more segment than without it.
printf 'action,addr,size,stream,time_us,pool\nalloc,1000000000,4194304,0,1,1\nfree_requested,1000000000,4194304,0,2,1\nfree_completed,1000000000,4194304,0,3,1\nalloc,2000000000,4194304,0,4,0\n' >"$tmp/pooled.csv"
sed '1s/,pool$//; 2,$s/,[0-9]*$//' "$tmp/pooled.csv" >"$tmp/plain.csv"
for f in pooled plain; do
  "$ab" replay "$tmp/$f.csv" -s caching --device sim:h200 --format csv --out "$tmp/out" >"$tmp/$f.out" 2>/dev/null || fail "$f.csv: replay exited $?"
done
allocs() { "$py" -c 'import csv,sys; print(list(csv.DictReader(open(sys.argv[1])))[0]["num_device_alloc"])' "$1"; }
[ "$(allocs "$tmp/pooled.out")" = 2 ] && [ "$(allocs "$tmp/plain.out")" = 1 ] ||
  fail "device allocations with the pool column $(allocs "$tmp/pooled.out"), without $(allocs "$tmp/plain.out"); want 2 and 1"
"$ab" replay --info "$tmp/pooled.csv" >"$tmp/pinfo.txt" 2>/dev/null || fail "--info on pooled.csv exited $?"
grep -q '^private_pools  *1$' "$tmp/pinfo.txt" || fail "pooled.csv: $(grep private_pools "$tmp/pinfo.txt")"
printf 'action,addr,size,stream,time_us,pool\nalloc,1000000000,4194304,0,1,x\n' >"$tmp/bad.csv"
"$ab" replay --info "$tmp/bad.csv" >/dev/null 2>"$tmp/bad.err" && fail "a pool that is not a number was taken"
grep -q "bad.csv:2: column 'pool': expected a whole number" "$tmp/bad.err" || fail "bad pool: $(cat "$tmp/bad.err")"

[ "$failures" -eq 0 ] && echo "pools_replay_test: all passed"
exit $((failures > 0))
