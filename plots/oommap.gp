# oommap.gp: the memory at an OOM, from a segment map file (harness/oommap.h):
# one horizontal bar per segment, in address order, its blocks coloured by state.
#
#   gnuplot -e "map='results/latest/oommap_W_S.csv'" plots/oommap.gp
#   gnuplot -e "map='...csv'; out='figure.png'" plots/oommap.gp     (or out='figure.svg')
#
# Without `out` it writes the map's name with .png and .svg in place of .csv. The PNG uses
# the cairo terminal where gnuplot has it, else the libgd one.
if (!exists("map")) { print "oommap.gp: give the map file: gnuplot -e \"map='FILE.csv'\" plots/oommap.gp"; exit status 2 }

set datafile separator ","
MiB = 1048576.0
# Columns of the map file.
SEG = 1; OFF = 2; SIZE = 3; STATE = 4

# Figures for the title and the layout.
stats map skip 1 using SEG nooutput
nseg = STATS_max + 1
stats map skip 1 using (column(SIZE) / MiB) nooutput
largest_block = STATS_max
stats map skip 1 using ((column(OFF) + column(SIZE)) / MiB) nooutput
widest = STATS_max
free_mib = 0; largest_free = 0; nfree = 0
stats map skip 1 using (strcol(STATE) eq "free" ? column(SIZE) / MiB : 0) nooutput
free_mib = STATS_sum; largest_free = STATS_max
stats map skip 1 using (strcol(STATE) eq "free" ? 1 : 0) nooutput
nfree = STATS_sum

base = map[strstrt(map, "oommap_") > 0 ? strstrt(map, "oommap_") + 7 : 1 : strlen(map) - 4]
set title sprintf("Segment map at the OOM: %s\n%d segments; %.1f MiB free in %d blocks, the largest %.2f MiB", \
                  base, nseg, free_mib, nfree, largest_free) noenhanced
set xlabel "offset inside the segment (MiB)"
set ylabel "segment (in address order)"
set xrange [0:widest * 1.02]
set yrange [-0.6:nseg - 0.4] reverse
set ytics out nomirror
set xtics out nomirror
set grid xtics lc rgb "#dddddd"
set key below horizontal
set style fill solid 1.0 noborder
height = nseg * 10 + 220 < 600 ? 600 : (nseg * 10 + 220 > 4000 ? 4000 : nseg * 10 + 220)

# One plot per state, so that each gets its colour and its legend entry.
in_state(s) = strcol(STATE) eq s ? column(SEG) : NaN
draw = "plot map skip 1 using ((column(OFF) + column(SIZE) / 2) / MiB):(in_state('allocated')):(column(SIZE) / 2 / MiB):(0.4) with boxxyerror lc rgb '#4878b0' title 'allocated', " . \
       "'' skip 1 using ((column(OFF) + column(SIZE) / 2) / MiB):(in_state('pending_free')):(column(SIZE) / 2 / MiB):(0.4) with boxxyerror lc rgb '#f0a030' title 'freed, not yet reusable', " . \
       "'' skip 1 using ((column(OFF) + column(SIZE) / 2) / MiB):(in_state('free')):(column(SIZE) / 2 / MiB):(0.4) with boxxyerror lc rgb '#d03030' title 'free (cached)', " . \
       "'' skip 1 using ((column(OFF) + column(SIZE) / 2) / MiB):(in_state('unmapped')):(column(SIZE) / 2 / MiB):(0.4) with boxxyerror lc rgb '#c8c8c8' title 'unmapped'"

png_terminal = strstrt(GPVAL_TERMINALS, "pngcairo") > 0 ? "pngcairo" : "png"
stem = map[1:strlen(map) - 4]
if (!exists("out")) { out_png = stem . ".png"; out_svg = stem . ".svg" } else {
  if (out[strlen(out) - 3:] eq ".svg") { out_svg = out; out_png = "" } else { out_png = out; out_svg = "" }
}
if (out_png ne "") {
  eval sprintf("set terminal %s size 1200,%d font 'sans,10'", png_terminal, height)
  set output out_png
  eval draw
  set output
}
if (out_svg ne "") {
  eval sprintf("set terminal svg size 1200,%d font 'sans,10'", height)
  set output out_svg
  eval draw
  set output
}
