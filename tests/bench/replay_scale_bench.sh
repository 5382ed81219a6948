#!/usr/bin/env bash
# replay_scale_bench.sh ALLOCBENCH SMALL BIG [TURNS] [STRATEGY...]: how replay's speed per event
# holds as the trace grows. Prints figures; asserts nothing (speed is measured here, never tested).
#
# SMALL and BIG are two snapshots drawn alike at two sizes, say the frameless ones
# `snapshot_bench --frameless 1450000 50000000` keeps in $TMPDIR/allocbench-snapshots (about
# 1 M and 33 M events). Each STRATEGY (default caching and raw) replays them on the simulated
# H200 with `allocbench replay`, TURNS times each (default 5), SMALL and BIG taking turns; the
# figure is the replay loop's own events per second, as summary.csv reports it (reading the
# trace is not in it). For each: the fastest and the median turn, and BIG's time per event over
# SMALL's, of the fastest turns and of the medians.
#
# A turn of SMALL is as many replays of it as make BIG's events, its figure their events over
# their summed time. Machines shared with others run the same code at different speeds for
# stretches of seconds: a replay of a tenth of a second falls in one stretch, and the fastest
# of five such is the fast stretch's speed, while one of seconds is the mean over the stretches
# it spans. Turns of equal length meet the stretches alike, so that their ratio is the trace's.
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
# one STRATEGY FILE: a replay of FILE; prints its events and the replay loop's seconds.
one() {
  "$ab" replay "$2" -s "$1" --device sim:h200 --no-timeline --format csv --out "$work/out" >"$work/row.csv" 2>"$work/err" ||
    { echo "replay -s $1 $2: $(tail -3 "$work/err")" >&2; exit 1; }
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "events") e = i; if ($i == "wall_s") w = i } }
           NR == 2 { print $e, $w }' "$work/row.csv"
}
# turn STRATEGY NAME FILE REPS: REPS replays of FILE, their events per second a line of $work/STRATEGY.NAME.
turn() {
  local i
  for i in $(seq "$4"); do one "$1" "$3"; done | awk '{ e += $1; s += $2 } END { printf "%.0f\n", e / s }' >>"$work/$1.$2"
}
read -r small_events _ < <(one "${strategies[0]}" "$small")
read -r big_events _ < <(one "${strategies[0]}" "$big")
reps=$(((big_events + small_events / 2) / small_events))
[ "$reps" -ge 1 ] || reps=1
echo "$(basename "$small"): $small_events events, $reps replays a turn; $(basename "$big"): $big_events events, one a turn"
for t in $(seq "$turns"); do
  for s in "${strategies[@]}"; do
    turn "$s" small "$small" "$reps"
    turn "$s" big "$big" 1
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
