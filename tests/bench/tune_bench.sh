#!/usr/bin/env bash
# tune_bench.sh ALLOCBENCH [OPS] [DIR]: how long `allocbench tune` takes on a recorded trace
# of OPS events (default 1000000). Prints figures; asserts nothing (speed is measured here,
# never tested).
#
# The trace: RMM's random_allocations pattern (at most 1000 blocks live, each operation an
# allocation or a free of a random live block) with log-normal sizes (median 1 MiB, up to
# 256 MiB, so that every family of settings matters), drawn by a Park-Miller generator (exact
# in awk's doubles, so the same on every awk), written as allocbench's CSV trace; then replayed
# once through caching with --export-snapshot, which writes it as PyTorch lays out a snapshot
# (its segment decisions included), the file `allocbench record` would have written.
set -eu
ab=${1:?usage: tune_bench.sh ALLOCBENCH [OPS] [DIR]}
ops=${2:-1000000}
dir=${3:-$(mktemp -d)}
mkdir -p "$dir"

awk -v ops="$ops" 'BEGIN {
  m = 2147483647; s = 42
  print "action,addr,size,stream,time_us"
  live = 0
  for (i = 0; i < ops; i++) {
    s = (16807 * s) % m; u = s / m
    if (live == 0 || (live < 1000 && u < 0.5)) {
      s = (16807 * s) % m; u1 = (s + 1) / (m + 1)
      s = (16807 * s) % m; u2 = s / m
      size = int(1048576 * exp(1.5 * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2)))
      if (size < 1) size = 1
      if (size > 268435456) size = 268435456
      addr[live] = (i + 1) * 4096; bytes[live] = size; live++
      printf "alloc,%.0f,%d,0,%d\n", (i + 1) * 4096, size, i
    } else {
      s = (16807 * s) % m; k = int(s / m * live)
      printf "free_completed,%.0f,%d,0,%d\n", addr[k], bytes[k], i
      live--; addr[k] = addr[live]; bytes[k] = bytes[live]
    }
  }
}' >"$dir/trace.csv"

"$ab" replay "$dir/trace.csv" -s caching --device sim --export-snapshot "$dir/trace.pickle" --out "$dir/replayed" \
  --format csv >/dev/null
"$ab" replay --info "$dir/trace.pickle" | grep -E '^(events|alloc|replay_events) '
ls -l "$dir/trace.pickle"
echo "cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s.%N)
"$ab" tune -w "replay:$dir/trace.pickle" --device sim:h200 --out "$dir" >"$dir/tune.txt"
end=$(date +%s.%N)
tail -3 "$dir/tune.txt"
echo "tune of $ops operations: $(echo "$end - $start" | bc) s wall"
