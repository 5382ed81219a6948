# micro.gp MICRO_CSV OUT FMT: the micro-benchmarks (allocbench_micro, micro.csv). Left: the
# time of one allocation and its free against the size, per strategy (alloc_free). Right:
# replay speed of whole sequences (random: RMM's random_allocations; replay: a recorded
# trace), in events per second. Both on log scales; failed runs are left out, and a panel
# with nothing to draw says so (micro.csv may hold any subset). On cuda the times are the
# GPU's (CUDA events); on sim host time plus modelled device time.
input = ARG1
out = ARG2
fmt = ARG3
here(p) = strstrt(p, "/") ? p[1:strstrt(p, "/")] . here(p[strstrt(p, "/") + 1:]) : ""
height = 780
load here(ARG0) . "common.gp"

DEVICE = ""
# The sequence benchmarks (every workload but alloc_free) and the arguments each ran with.
Q = ""
QA = ""
note_sequence(w, a) = (w eq "alloc_free" || index_of(Q, w)) ? 0 : (Q = add_word(Q, w), QA = QA . " " . a, 0)
# What each panel has to draw: the runs of its benchmarks that did not fail, with a time.
NPAIRS = 0
NSEQS = 0
count_drawn(w) = strcol("error") ne "" || strcol("run_type") ne "iteration" ? 0 : \
                 w eq "alloc_free" ? (column("real_ns") > 0 ? (NPAIRS = NPAIRS + 1) : 0) : \
                 (column("items_per_second") > 0 ? (NSEQS = NSEQS + 1) : 0)
stats input using (DEVICE = strcol("device"), note_sequence(strcol("workload"), strcol("args")), \
                   count_drawn(strcol("workload")), note_row(strcol("workload"), strcol("strategy"), $0)) nooutput
NS = words(S)
ok(k) = strcol("strategy") eq word(S, k) && strcol("error") eq "" && strcol("run_type") eq "iteration"
bytes_of(args) = args[1:6] eq "bytes:" ? real(args[7:]) : NaN
NQ = words(Q)

# Log ranges from whole decades around the data, so a single value still has an axis; a panel
# with nothing to draw is not asked its range (gnuplot would warn of no valid point).
decades(lo, hi) = sprintf("[%g:%g]", 10 ** floor(log10(lo)), 10 ** (floor(log10(hi)) + 1))
PAIR_RANGE = "[10:1e6]"
if (NPAIRS > 0) {
  stats input using (strcol("error") eq "" && strcol("workload") eq "alloc_free" && column("real_ns") > 0 ? \
                     column("real_ns") : NaN) nooutput
  PAIR_RANGE = decades(STATS_min, STATS_max)
}
SEQ_RANGE = "[1e4:1e8]"
if (NSEQS > 0) {
  stats input using (strcol("error") eq "" && strcol("workload") ne "alloc_free" && column("items_per_second") > 0 ? \
                     column("items_per_second") : NaN) nooutput
  SEQ_RANGE = decades(STATS_min, STATS_max)
}

# A panel with nothing to draw (micro.csv holds a subset: --benchmark_filter, or runs that all
# failed) says so in place of an empty range, then the axes come back for the next panel.
EMPTY_TEXT = ""
EMPTY_PANEL = "unset logscale; unset xlabel; unset ylabel; unset key; set xrange [0:1]; set yrange [0:1]; " . \
              "unset tics; set border 0; set label 1 EMPTY_TEXT at 0.5, 0.5 center noenhanced; plot NaN notitle; " . \
              "unset label 1; set border 3; set xtics nomirror; set ytics nomirror"

set bmargin 9
set multiplot layout 1, 2 title sprintf("Micro-benchmarks on %s (Google Benchmark)", DEVICE) noenhanced
# Below the panels, where it hides no line.
set key outside below center horizontal Left reverse samplen 3 maxrows 3 font ",10"

set title "One allocation and its free (lower is better)"
set logscale x 2
set logscale y 10
set xlabel "bytes allocated"
set ylabel "time per alloc + free (log scale)"
set xtics ("512 B" 512, "4 KiB" 4096, "64 KiB" 65536, "1 MiB" 2**20, "16 MiB" 2**24, "256 MiB" 2**28)
set ytics ("1 ns" 1, "10 ns" 10, "100 ns" 100, "1 µs" 1e3, "10 µs" 1e4, "100 µs" 1e5, "1 ms" 1e6, "10 ms" 1e7)
set mytics 10
set yrange @PAIR_RANGE
set grid xtics ytics lt 1 lw 1 lc rgb "#e4e4e4"
set xrange [256:2**29]
if (NPAIRS > 0) {
  plot for [k=1:NS] input using (ok(k) && strcol("workload") eq "alloc_free" ? bytes_of(strcol("args")) : NaN):"real_ns" \
         with linespoints lw 2 dt dash_of(word(S, k)) pt point_of(word(S, k)) ps 1.3 lc rgb color_of(word(S, k)) \
         title word(S, k)
} else {
  set title "One allocation and its free"
  EMPTY_TEXT = "no alloc_free benchmark ran in this micro.csv"
  eval EMPTY_PANEL
}

if (NSEQS == 0) {
  set title "Whole sequences replayed"
  EMPTY_TEXT = NQ == 0 ? "no sequence benchmark in this micro.csv" : "every sequence benchmark failed (see its error column)"
  eval EMPTY_PANEL
  unset multiplot
  exit
}
set title "Whole sequences replayed (higher is better)"
unset logscale x
set logscale y 10
unset xlabel
set ylabel "events per second (log scale)"
set ytics auto
set format y "10^{%T}"
set yrange @SEQ_RANGE
set xrange [0.5:NQ + 0.5]
set xtics () noenhanced
set for [i=1:NQ] xtics add (word(Q, i) . "\n" . word(QA, i) i)
set grid noxtics ytics
# The strategies' key is the left panel's; without one, this panel has its own.
if (NPAIRS > 0) { unset key } else { set key outside below center horizontal Left reverse samplen 3 maxrows 3 font ",10" }
plot for [k=1:NS] input \
       using (ok(k) && index_of(Q, strcol("workload")) ? bar_x(index_of(Q, strcol("workload")), k, NS) : NaN): \
             "items_per_second":(bar_width(NS)) with boxes lc rgb color_of(word(S, k)) title (NPAIRS > 0 ? "" : word(S, k))
unset multiplot
