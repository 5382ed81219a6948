#!/usr/bin/env bash
# tune_scale_bench.sh ALLOCBENCH SMALL BIG [TURNS]: how `allocbench tune` grows with its trace.
# Prints figures; asserts nothing (speed is measured here, never tested).
#
# SMALL and BIG are two snapshots drawn alike at two sizes, say the frameless ones
# `snapshot_bench --frameless 1450000 15000000` keeps in $TMPDIR/allocbench-snapshots (about
# 1 M and 10 M replayed events). Each is tuned TURNS times (default 3), the two taking turns, so
# that a machine busy for a while slows both alike. For each: the fastest and the median wall
# time, the processor time of the fastest turn, the events its runs replayed (tune's own count:
# the run, the placement variants, the cap map's probes and the walks), and the processor
# time per replayed event, which includes reading the trace; then BIG's cost per event over
# SMALL's. A tune whose cost is the replays it needs has that ratio near 1: a run of ten
# times the events costs ten times as much per replay, and the rest is how many replays the
# trace's decisions ask for.
set -eu
ab=${1:?usage: tune_scale_bench.sh ALLOCBENCH SMALL BIG [TURNS]}
small=${2:?usage: tune_scale_bench.sh ALLOCBENCH SMALL BIG [TURNS]}
big=${3:?usage: tune_scale_bench.sh ALLOCBENCH SMALL BIG [TURNS]}
turns=${4:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg)"
# one NAME FILE: a tune of FILE, its figures a line of $work/NAME: wall, processor time (user
# and system), events replayed.
one() {
  local wall user sys events
  TIMEFORMAT='%R %U %S'
  { time "$ab" tune -w "replay:$2" --device sim:h200 --out "$work/out-$1" >"$work/out-$1.txt" 2>"$work/err-$1.txt"; } 2>"$work/time-$1.txt"
  read -r wall user sys <"$work/time-$1.txt"
  events=$(sed -n 's/.*(\([0-9.]*\) M events replayed).*/\1/p' "$work/err-$1.txt")
  [ -n "$events" ] || { echo "tune of $2 said no events replayed: $(tail -3 "$work/err-$1.txt")" >&2; exit 1; }
  echo "$wall $(echo "$user + $sys" | bc) $events" >>"$work/$1"
}
for t in $(seq "$turns"); do
  one small "$small"
  one big "$big"
done
# report NAME FILE: fastest and median wall, the fastest turn's processor time and events, and
# its processor time per event in ns (printed; also left in $work/NAME.ns for the ratio).
report() {
  sort -n "$work/$1" >"$work/$1.sorted"
  local n fastest median cpu events ns
  n=$(wc -l <"$work/$1.sorted")
  read -r fastest cpu events <"$work/$1.sorted"
  median=$(awk -v m=$(((n + 1) / 2)) 'NR == m { print $1 }' "$work/$1.sorted")
  ns=$(echo "scale=1; $cpu * 1000 / $events" | bc)
  echo "$ns" >"$work/$1.ns"
  printf '%-5s %s: wall fastest %.1f s, median %.1f s; processor %.1f s; %.1f M events replayed; %s ns of processor time per event\n' \
    "$1" "$(basename "$2")" "$fastest" "$median" "$cpu" "$events" "$ns"
}
report small "$small"
report big "$big"
echo "per event, big over small: $(echo "scale=3; $(cat "$work/big.ns") / $(cat "$work/small.ns")" | bc)"
