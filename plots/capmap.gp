# capmap.gp MAP OUT FMT: the status of a run at every memory cap, from a cap map (written by
# `allocbench oom --search cap` as DIR/capmap_<workload>[_conf-<hash>]_<strategy>.csv, one row per interval of
# caps that replay alike). A strip along the cap: green where the run completes, red where it
# runs out of memory. The smallest cap that completes and the safe cap (every cap from it up
# completes) are marked; red to the right of the first green is what a bisection does not see.
#
#   gnuplot -c plots/capmap.gp DIR/capmap_W_S.csv OUT png|svg      (as plots/draw.sh runs it)
#   gnuplot -e "map='DIR/capmap_W_S.csv'" plots/capmap.gp          (PNG and SVG beside the map)
#   gnuplot -e "map='...csv'; out='figure.png'" plots/capmap.gp    (or out='figure.svg')
if (ARGC >= 3) {
  map = ARG1; stem = ARG2; formats = ARG3
} else {
  if (!exists("map")) { print "capmap.gp: give the map: gnuplot -e \"map='FILE.csv'\" plots/capmap.gp"; exit status 2 }
  if (exists("out")) {
    stem = out[1:strlen(out) - 4]; formats = out[strlen(out) - 2:]
  } else {
    stem = map[1:strlen(map) - 4]; formats = "png svg"
  }
}
if (int(system(sprintf("test -r '%s' && echo 1 || echo 0", map))) == 0) {
  print sprintf("capmap.gp: cannot read the map '%s'", map); exit status 2
}
rows = int(system(sprintf("tail -n +2 '%s' | grep -c .", map)))
if (rows == 0) { print sprintf("capmap.gp: the map '%s' has no intervals", map); exit status 2 }
here(p) = strstrt(p, "/") ? p[1:strstrt(p, "/")] . here(p[strstrt(p, "/") + 1:]) : ""
COMMON = here(ARG0) . "common.gp"

set datafile separator comma
set datafile columnheaders
GiB = 2.0 ** 30
# The last interval holds every cap above it (an empty cap_hi_bytes): it is drawn as far as the
# others reach, and a twentieth more.
is_ok(dummy) = strcol("status") eq "ok"
stats map using (column("cap_lo_bytes") / GiB) nooutput
first_lo = STATS_min; last_lo = STATS_max
stats map using (strcol("cap_hi_bytes") eq "" ? NaN : column("cap_hi_bytes") / GiB) nooutput
top = STATS_max > last_lo ? STATS_max : last_lo
span = top - first_lo > 0 ? top - first_lo : 1
right = top + span / 20
# The smallest cap that completes, and the safe cap: one past the highest interval that fails.
stats map using (is_ok(0) ? column("cap_lo_bytes") / GiB : NaN) nooutput
smallest = STATS_min
stats map using (is_ok(0) ? NaN : (column("cap_hi_bytes") + 1) / GiB) nooutput
safe = STATS_records > 0 && STATS_max > smallest ? STATS_max : smallest
hi_of(dummy) = strcol("cap_hi_bytes") eq "" ? right : (column("cap_hi_bytes") + 1) / GiB
mid(dummy) = (column("cap_lo_bytes") / GiB + hi_of(0)) / 2
half(dummy) = (hi_of(0) - column("cap_lo_bytes") / GiB) / 2
after(p, c) = strstrt(p, c) ? p[strstrt(p, c) + strlen(c):] : p
name = after(map, "capmap_")
name = name[1:strlen(name) - 4]

do for [fmt in formats] {
  out = stem
  height = 360
  load COMMON
  set title sprintf("%s: the status at each cap (smallest that completes %.3f GiB, safe from %.3f GiB)", name, smallest, safe) noenhanced
  set xlabel "memory cap (GiB; torch.cuda.set_per_process_memory_fraction)" noenhanced
  set xrange [first_lo:right]
  set yrange [0:1]
  unset ytics
  set key outside bottom center horizontal noenhanced title ""
  set style fill solid 1 noborder
  set arrow 1 from smallest, graph 0 to smallest, graph 1 nohead dt 2 lc rgb "#206020"
  set arrow 2 from safe, graph 0 to safe, graph 1 nohead lw 2 lc rgb "#000000"
  set label 1 "safe cap" at safe, graph 1.02 center
  plot map using (is_ok(0) ? mid(0) : NaN):(0.5):(half(0)):(0.4) with boxxyerror lc rgb "#40a040" title "completes", \
       map using (is_ok(0) ? NaN : mid(0)):(0.5):(half(0)):(0.4) with boxxyerror lc rgb "#d03030" title "out of memory"
  unset arrow 1; unset arrow 2; unset label 1
}
