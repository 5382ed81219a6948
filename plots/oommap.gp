# oommap.gp MAP OUT FMT: the memory at an OOM, from a segment map file (harness/run/oommap.h,
# written as DIR/oommap_<workload>[_conf-<hash>]_<strategy>.csv at every OOM): one horizontal bar per
# segment, in address order, its blocks coloured by state (allocated; freed but not yet
# reusable; free and cached; address space with no memory behind it). The free blocks
# scattered between allocated ones are the picture of fragmentation.
#
#   gnuplot -c plots/oommap.gp DIR/oommap_W_S.csv OUT png|svg      (as plots/draw.sh runs it)
#   gnuplot -e "map='DIR/oommap_W_S.csv'" plots/oommap.gp          (PNG and SVG beside the map)
#   gnuplot -e "map='...csv'; out='figure.png'" plots/oommap.gp    (or out='figure.svg')
if (ARGC >= 3) {
  map = ARG1; stem = ARG2; formats = ARG3
} else {
  if (!exists("map")) { print "oommap.gp: give the map: gnuplot -e \"map='FILE.csv'\" plots/oommap.gp"; exit status 2 }
  if (exists("out")) {
    stem = out[1:strlen(out) - 4]; formats = out[strlen(out) - 2:]
  } else {
    stem = map[1:strlen(map) - 4]; formats = "png svg"
  }
}
# A map that cannot be read is said, not drawn as an empty figure.
if (int(system(sprintf("test -r '%s' && echo 1 || echo 0", map))) == 0) {
  print sprintf("oommap.gp: cannot read the map '%s'", map); exit status 2
}
here(p) = strstrt(p, "/") ? p[1:strstrt(p, "/")] . here(p[strstrt(p, "/") + 1:]) : ""
COMMON = here(ARG0) . "common.gp"

# The figures of the title, and the height: 10 pixels a segment, within reason. A strategy
# that held nothing at the OOM leaves a map of no rows, drawn as an empty figure that says so.
set datafile separator comma
set datafile columnheaders
MiB = 2.0 ** 20
nseg = 0; widest = 1; free_mib = 0; largest_free = 0; nfree = 0
rows = int(system(sprintf("tail -n +2 '%s' | grep -c .", map)))
if (rows > 0) {
  stats map using (column("segment")) nooutput
  nseg = STATS_max + 1
  stats map using ((column("offset") + column("size")) / MiB) nooutput
  widest = STATS_max
  is_free(dummy) = strcol("state") eq "free"
  stats map using (is_free(0) ? column("size") / MiB : 0) nooutput
  free_mib = STATS_sum
  largest_free = STATS_max
  stats map using (is_free(0) ? 1 : 0) nooutput
  nfree = STATS_sum
}
height = nseg * 10 + 240 < 700 ? 700 : (nseg * 10 + 240 > 4000 ? 4000 : nseg * 10 + 240)
after(p, c) = strstrt(p, c) ? p[strstrt(p, c) + strlen(c):] : p
name = after(map, "oommap_")
name = name[1:strlen(name) - 4]

# One plot per state, for its colour and its legend entry.
in_state(s) = strcol("state") eq s ? column("segment") : NaN
x_mid(dummy) = (column("offset") + column("size") / 2) / MiB
half(dummy) = column("size") / 2 / MiB
STATES = "allocated pending_free free unmapped"
array LABEL[4] = ["allocated", "freed, not yet reusable", "free (cached)", "unmapped"]
array SHADE[4] = ["#4878b0", "#f0a030", "#d03030", "#c8c8c8"]

do for [fmt in formats] {
  out = stem
  load COMMON
  if (rows > 0) {
    set title sprintf("Segment map at the OOM: %s\n%d segment%s; %.1f MiB free in %d block%s, the largest %.2f MiB", \
                      name, nseg, nseg == 1 ? "" : "s", free_mib, nfree, nfree == 1 ? "" : "s", largest_free) noenhanced
  } else {
    set title sprintf("Segment map at the OOM: %s\nno segments: the strategy held no memory then", name) noenhanced
  }
  set xlabel "offset inside the segment (MiB)"
  set ylabel "segment (in address order)"
  set xrange [0:widest * 1.02]
  set yrange [-0.6:nseg - 0.4] reverse
  set grid xtics noytics
  set border 3
  set key below horizontal noreverse Right title ""
  # Blocks are filled without edges, so that a run of small blocks of one state reads as that
  # state (white edges of thousands of allocated blocks would turn them white); a thin white
  # edge tells apart neighbours wide enough to show one (1/150 of the widest segment).
  set style fill solid 1.0 noborder
  edged(dummy) = column("size") / MiB >= widest / 150.0
  if (nseg <= 40) { set ytics 1 format "%.0f" } else { set ytics autofreq format "%.0f" }
  if (rows > 0) {
    plot for [k=1:4] map using (x_mid(0)):(in_state(word(STATES, k))):(half(0)):(0.4) \
         with boxxyerror lc rgb SHADE[k] title LABEL[k], \
         map using (edged(0) ? x_mid(0) : NaN):(column("segment")):(half(0)):(0.4) \
         with boxxyerror fs empty lc rgb "white" lw 0.5 notitle
  } else {
    set yrange [0:1]
    plot NaN notitle
  }
  set output
}
