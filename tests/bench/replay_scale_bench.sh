#!/usr/bin/env bash
# replay_scale_bench.sh ALLOCBENCH SMALL BIG [TURNS] [STRATEGY...]: how replay's speed per event
# holds as the trace grows. Prints figures; asserts nothing (speed is measured here, never tested).
#
# SMALL and BIG are two snapshots drawn alike at two sizes, say the frameless ones
# `snapshot_bench --frameless 1450000 50000000` keeps in $TMPDIR/allocbench-snapshots (about
# 1 M and 33 M events). Each is replayed TURNS times (default 5) by `allocbench replay` through
# each STRATEGY (default caching and raw) on the simulated H200, SMALL and BIG taking turns, so
# that a machine busy for a while slows both alike; the figure is the replay loop's own events
# per second, as summary.csv reports it (reading the trace is not in it). For each: the fastest
# and the median turn, and BIG's time per event over SMALL's, of the fastest turns and of the
# medians.
set -eu
usage="usage: replay_scale_bench.sh ALLOCBENCH SMALL BIG [TURNS] [STRATEGY...]"
ab=${1:?$usage}
small=${2:?$usage}
big=${3:?$usage}
turns=${4:-5}
shift $(($# < 4 ? $# : 4))
strategies=("$@")
[ ${#strategies[@]} -gt 0 ] || strategies=(caching raw)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg)"
# one STRATEGY NAME FILE: a replay of FILE, its events per second a line of $work/STRATEGY.NAME.
one() {
  "$ab" replay "$3" -s "$1" --device sim:h200 --no-timeline --format csv --out "$work/out" >"$work/row.csv" 2>"$work/err" ||
    { echo "replay -s $1 $3: $(tail -3 "$work/err")" >&2; exit 1; }
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "events_per_s") c = i } NR == 2 { print $c }' "$work/row.csv" >>"$work/$1.$2"
}
for t in $(seq "$turns"); do
  for s in "${strategies[@]}"; do
    one "$s" small "$small"
    one "$s" big "$big"
  done
done
# fastest and median events per second of $work/STRATEGY.NAME
figures() {
  sort -rn "$work/$1.$2" | awk '{ v[NR] = $1 } END { printf "%.0f %.0f\n", v[1], v[int((NR + 1) / 2)] }'
}
for s in "${strategies[@]}"; do
  read -r sf sm < <(figures "$s" small)
  read -r bf bm < <(figures "$s" big)
  printf '%-8s %s: %.2f M events/s fastest, %.2f M median; %s: %.2f M fastest, %.2f M median\n' "$s" \
    "$(basename "$small")" "$(echo "$sf / 1000000" | bc -l)" "$(echo "$sm / 1000000" | bc -l)" \
    "$(basename "$big")" "$(echo "$bf / 1000000" | bc -l)" "$(echo "$bm / 1000000" | bc -l)"
  printf '%-8s time per event, big over small: %.3f (fastest), %.3f (medians)\n' "$s" \
    "$(echo "$sf / $bf" | bc -l)" "$(echo "$sm / $bm" | bc -l)"
done
