#!/usr/bin/env bash
# oracle_bench.sh ALLOCBENCH [DIR]: how long `allocbench run -s oracle` takes on hostile
# traces of 37 500, 75 000 and 150 000 allocations and of a million events, and how the time
# grows with the size; then what --check costs where 20 000 blocks stay live
# (Note [What --check costs], harness/run/engine.c). Prints figures; asserts nothing (speed is measured
# here, never tested).
#
# The trace, like the one of the report that made oracle plan from the free space (Note
# [Greedy by size over the free space], strategies/planned/dsa.c): one stream, at most 5 000
# blocks live, each operation an allocation (9 times in 10 while fewer are live, so that the
# live count stays near the cap) or the free of a random live block, so that lifetimes run
# from one event to the whole trace; sizes log-normal (median 1 MiB, up to 256 MiB). Drawn by
# a Park-Miller generator (exact in awk's doubles, so the same on every awk) and written as
# allocbench's CSV trace; everything is freed by its end. Then, for strategies/README.md's figure, the
# random workload of a million events (random:ops=1000000: 1 000 live, lives short next to
# the run).
#
# Each line: the allocations and events, the wall time of the whole command (reading the
# trace, the plan, the replay), the replay's own part of it (wall_s of the run), and the
# growth exponent from the line above: log(t / t_before) / log(n / n_before).
set -eu
ab=${1:?usage: oracle_bench.sh ALLOCBENCH [DIR]}
dir=${2:-$(mktemp -d)}
mkdir -p "$dir"

trace() { # trace ALLOCS CAP FILE
  awk -v allocs="$1" -v cap="$2" 'BEGIN {
    m = 2147483647; s = 7
    print "action,addr,size,stream,time_us"
    live = 0; n = 0; t = 0
    while (n < allocs || live > 0) {
      s = (16807 * s) % m; u = s / m
      if (n < allocs && (live == 0 || (live < cap && u < 0.9))) {
        s = (16807 * s) % m; u1 = (s + 1) / (m + 1)
        s = (16807 * s) % m; u2 = s / m
        size = int(1048576 * exp(1.5 * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2)))
        if (size < 1) size = 1
        if (size > 268435456) size = 268435456
        n++
        addr[live] = n * 4096; bytes[live] = size; live++
        printf "alloc,%.0f,%d,0,%d\n", n * 4096, size, t++
      } else {
        s = (16807 * s) % m; k = int(s / m * live)
        printf "free_completed,%.0f,%d,0,%d\n", addr[k], bytes[k], t++
        live--; addr[k] = addr[live]; bytes[k] = bytes[live]
      }
    }
  }' >"$3"
}

echo "cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-20s %12s %10s %8s %9s\n' workload allocations events run_s replay_s
prev_n='' prev_t=''
# run LABEL ALLOCS WORKLOAD: one timed run, its line, and the exponent from the line before
# (none where ALLOCS is -).
run() {
  local start end t events replay growth=''
  start=$(date +%s.%N)
  "$ab" run -w "$3" -s oracle --device sim:h200 --out "$dir/results" -q --no-timeline --format json >"$dir/run.json"
  end=$(date +%s.%N)
  t=$(echo "$end - $start" | bc -l)
  events=$(sed -n 's/.*"events": *\([0-9]*\).*/\1/p' "$dir/run.json" | head -1)
  replay=$(sed -n 's/.*"wall_s": *\([0-9.e+-]*\).*/\1/p' "$dir/run.json" | head -1)
  if [ -n "$prev_n" ] && [ "$2" != - ]; then growth=$(echo "l($t / $prev_t) / l($2 / $prev_n)" | bc -l); fi
  printf '%-20s %12s %10d %8.2f %9.2f%s\n' "$1" "$2" "$events" "$t" "$replay" "${growth:+   n^$(printf '%.2f' "$growth")}"
  prev_n=$2 prev_t=$t
}
for allocs in 37500 75000 150000 500000; do
  trace "$allocs" 5000 "$dir/hostile_$allocs.csv"
  run "hostile" "$allocs" "replay:$dir/hostile_$allocs.csv"
done
run "random:ops=1000000" - "random:ops=1000000"

# --check: 30 000 allocations, 20 000 of them live at once, through raw (a segment per block)
# and caching, without and with the checks.
trace 30000 20000 "$dir/live20k.csv"
printf '\n%-20s %10s %10s\n' "60 000 events" run_s check_s
for s in raw caching; do
  t=()
  for check in "" --check; do
    start=$(date +%s.%N)
    "$ab" run -w "replay:$dir/live20k.csv" -s "$s" --device sim:h200 --out "$dir/results" -q --no-timeline \
      $check >/dev/null
    end=$(date +%s.%N)
    t+=("$(echo "$end - $start" | bc -l)")
  done
  printf '%-20s %10.2f %10.2f\n' "$s, 20 000 live" "${t[0]}" "${t[1]}"
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
