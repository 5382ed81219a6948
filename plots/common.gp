# common.gp: what every figure shares, loaded first by each script in this folder.
#
# Scripts are run as `gnuplot -c plots/NAME.gp INPUT OUT FMT [...]`: they read CSV files
# written by allocbench (the first line names the columns) and write OUT.png or OUT.svg
# (FMT png or svg). Rows are picked by column name, so columns added later change nothing.
# Each script sets `out` and `fmt` from its arguments before loading this file.
#
# The table figures read files with one row per run, a workload and a strategy in each
# (summary.csv, oom.csv). A file may hold several rows of one pair (runs are appended): the
# last one wins. scan(FILE) lists the workloads in W and the strategies in S, in order of
# first appearance, and keeps the row number of each pair's last row; is_last() then tells
# a plot which rows to draw.

set datafile separator comma
set datafile columnheaders
set encoding utf8

# A figure that grows with its data sets `height` (and may set `width`; pixels) before loading this file. PNG
# comes from the cairo terminal, or from the libgd one where gnuplot was built without cairo.
if (!exists("height")) { height = 700 }
if (!exists("width")) { width = 1200 }
if (fmt eq "svg") {
  set terminal svg size width,height dynamic enhanced font "DejaVu Sans,13" background rgb "white"
} else {
  if (strstrt(GPVAL_TERMINALS, "pngcairo")) {
    set terminal pngcairo size width,height enhanced font "DejaVu Sans,11"
  } else {
    set terminal png size width,height enhanced font "DejaVu Sans,11"
  }
}
set output out . "." . fmt

# One colour per strategy, the same in every figure whatever order a file lists them in: the
# strategies of allocbench's registry by name (REGISTRY, given by draw.sh from `allocbench
# list --strategies`); any other takes the colours after them, by its place in the file (S,
# from scan()).
array PALETTE[10] = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666", "#1f78b4", "#b2df8a"]
color(k) = PALETTE[(k - 1) % 10 + 1]
if (!exists("REGISTRY")) { REGISTRY = "" }
color_of(s) = index_of(REGISTRY, s) ? color(index_of(REGISTRY, s)) : color(words(REGISTRY) + index_of(S, s))
# Lines that coincide (raw and oracle in the micro-benchmarks, the strategies that reserve the
# same at every step) must each stay visible: each strategy also has its own marker, drawn at
# its own interval so that markers of equal lines fall on different points, and dash pattern.
array MARKS[10] = [6, 4, 8, 12, 10, 14, 1, 2, 3, 5]
place_of(s) = index_of(REGISTRY, s) ? index_of(REGISTRY, s) : words(REGISTRY) + index_of(S, s)
point_of(s) = MARKS[(place_of(s) - 1) % 10 + 1]
interval_of(s) = 3 + (place_of(s) - 1) % 5
dash_of(s) = (place_of(s) - 1) % 5 + 1

set style fill solid 0.85 border rgb "#333333"
set grid ytics lt 1 lw 1 lc rgb "#e4e4e4"
set border 3
set tics nomirror
set key outside right top vertical Left reverse noenhanced samplen 3 spacing 1.2 title "strategy" left

# ---- word lists and the last row of each pair ----------------------------------------------

# Position of w in the space-separated list (1-based), 0 when absent.
index_from(list, w, i) = i > words(list) ? 0 : (word(list, i) eq w ? i : index_from(list, w, i + 1))
index_of(list, w) = index_from(list, w, 1)
add_word(list, w) = index_of(list, w) ? list : (list eq "" ? w : list . " " . w)

MAXPAIRS = 64
array LAST[MAXPAIRS * MAXPAIRS]
pair(wi, si) = (wi - 1) * MAXPAIRS + si
# Remembers a row (n: its number) of the pair (w, s); returns 0 for stats.
note_row(w, s, n) = (W = add_word(W, w), S = add_word(S, s), \
                     LAST[pair(index_of(W, w), index_of(S, s))] = n, 0)
W = ""
S = ""
is_last(w, s, n) = (index_of(W, w) && index_of(S, s) && LAST[pair(index_of(W, w), index_of(S, s))] == n)

# A workload as a tick label: a replayed trace by its file name.
basename(p) = strstrt(p, "/") ? basename(p[strstrt(p, "/") + 1:]) : p
strip_trace(f) = strstrt(f, ".trace") ? f[1:strstrt(f, ".trace") - 1] : (strstrt(f, ".pickle") ? f[1:strstrt(f, ".pickle") - 1] : f)
workload_label(w) = w[1:7] eq "replay:" ? "replay " . strip_trace(basename(w[8:])) : w

# Clustered bars: cluster i holds one bar per strategy k, side by side.
bar_width(n) = 0.8 / n
bar_x(i, k, n) = i + (k - (n + 1) / 2.0) * bar_width(n)
