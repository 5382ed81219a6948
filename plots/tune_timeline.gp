# tune_timeline.gp TIMELINE_CSV TUNE_CSV OUT FMT: memory over the job under the recorded
# configuration and under the one `allocbench tune` recommends, from tune_timeline.csv
# (harness/tune/tune_figures.h): reserved (solid) and allocated (dashed), the highest between
# samples (Note [Step peaks]), against the events of the job in order. Where the trace
# recorded its allocator's own segment decisions, what PyTorch held (the reserved bytes it
# recorded) is drawn as dots over the recorded configuration's line: the check of the
# replay. One panel per trace (per rank of a job), top to bottom; the panel of the trace
# that holds the most under the recommended configuration is marked "worst".
input = ARG1
tune_csv = ARG2
out = ARG3
fmt = ARG4
here(p) = strstrt(p, "/") ? p[1:strstrt(p, "/")] . here(p[strstrt(p, "/") + 1:]) : ""
set datafile separator comma
set datafile columnheaders
# The traces, in order of first appearance, and the worst one (counted before the terminal).
T = ""
add_trace(t) = (T = strstrt(" " . T . " ", " " . t . " ") ? T : (T eq "" ? t : T . " " . t), 0)
stats input using (add_trace(strcol("trace"))) nooutput
NT = words(T)
height = NT == 1 ? 650 : (NT * 380 + 120 > 4000 ? 4000 : NT * 380 + 120)
load here(ARG0) . "common.gp"
load here(ARG0) . "tune_confs.gp"
GiB = 2.0 ** 30
WORST = ""
WORST_PEAK = -1
keep_worst(t, p) = (p > WORST_PEAK ? (WORST_PEAK = p, WORST = t) : 0, 0)
CFG = WIN_CONF eq "" ? "recorded" : "recommended"
stats input using (strcol("config") eq CFG ? keep_worst(strcol("trace"), column("peak_reserved")) : 0) nooutput
at(t, c, col) = strcol("trace") eq t && strcol("config") eq c ? column(col) / GiB : NaN
HAS_PYTORCH = 0
stats input using (strcol("config") eq "pytorch" ? 1 : 0) nooutput
HAS_PYTORCH = STATS_sum > 0

REC = "#d95f02"
WIN = "#1b9e77"
set xlabel "event of the job (allocations and frees, in order)"
set ylabel "memory (GiB)"
set yrange [0:*]
set xrange [0:*]
set key below horizontal maxrows 3 reverse Left samplen 3 spacing 1.1 title "" noenhanced
set grid ytics
if (NT > 1) { set multiplot layout NT, 1 title "Memory over the job per trace: recorded against recommended" noenhanced }
do for [i=1:NT] {
  t = word(T, i)
  set title sprintf("Memory over the job%s: %s%s", NT > 1 ? "" : "", t, NT > 1 && t eq WORST ? "  (worst: the most reserved)" : "") noenhanced
  plot input using (column("event")):(at(t, "recorded", "peak_reserved")) with lines lw 2.5 lc rgb REC \
         title "reserved, recorded (" . REC_CONF . ")", \
       input using (column("event")):(at(t, "recorded", "peak_allocated")) with lines lw 1.5 dt 2 lc rgb REC \
         title "allocated, recorded", \
       for [w=1:(WIN_CONF ne "" && WIN_CONF ne REC_CONF)] input using (column("event")):(at(t, "recommended", "peak_reserved")) \
         with lines lw 2.5 lc rgb WIN title "reserved, recommended (" . WIN_CONF . ")", \
       for [w=1:(WIN_CONF ne "" && WIN_CONF ne REC_CONF)] input using (column("event")):(at(t, "recommended", "peak_allocated")) \
         with lines lw 1.5 dt 2 lc rgb WIN title "allocated, recommended", \
       for [p=1:HAS_PYTORCH] input using (column("event")):(at(t, "pytorch", "peak_reserved")) \
         with points pt 7 ps 0.35 lc rgb "black" title "reserved as PyTorch recorded it (the check)"
}
if (NT > 1) { unset multiplot }
