# peak_reserved.gp SUMMARY_CSV OUT FMT: peak reserved memory per strategy per workload,
# normalised to the workload's peak requested bytes. 1.0 is the limit: a strategy that held
# exactly what the program asked for. Bars of runs that ended in OOM are hatched (their
# peaks are those reached before the OOM); runs that failed are left out. A black mark on a
# bar is the device footprint (peak_footprint_bytes: what the card really lost, cudaMemGetInfo
# on cuda, the driver model on sim), where the file has that column.
input = ARG1
out = ARG2
fmt = ARG3
here(p) = strstrt(p, "/") ? p[1:strstrt(p, "/")] . here(p[strstrt(p, "/") + 1:]) : ""
load here(ARG0) . "common.gp"

stats input using (note_row(strcol("workload"), strcol("strategy"), $0)) nooutput
NW = words(W)
NS = words(S)
ratio(status) = (status eq "ok" || status eq "oom") && column("peak_requested_bytes") > 0 ? \
                column("peak_reserved_bytes") / column("peak_requested_bytes") : NaN
# Files written before the footprint column have no such column: no marks then.
HAS_FP = strstrt(system("head -n 1 '" . input . "'"), "peak_footprint_bytes") > 0
fp_ratio(status) = (status eq "ok" || status eq "oom") && column("peak_requested_bytes") > 0 && \
                   column("peak_footprint_bytes") > 0 ? column("peak_footprint_bytes") / column("peak_requested_bytes") : NaN
stats input using (is_last(strcol("workload"), strcol("strategy"), $0) ? ratio(strcol("status")) : NaN) nooutput
YMAX = STATS_max > 1 ? STATS_max * 1.12 : 1.25
# The marks are spliced into the plot only where the column exists (gnuplot warns otherwise).
FP_MARKS = !HAS_FP ? "" : \
  ", input using (is_last(strcol('workload'), strcol('strategy'), $0) ? " . \
  "bar_x(index_of(W, strcol('workload')), index_of(S, strcol('strategy')), NS) : NaN):(fp_ratio(strcol('status'))) " . \
  "with points pt 9 ps 1.4 lc rgb 'black' title 'device footprint'"
if (HAS_FP) {
  stats input using (is_last(strcol("workload"), strcol("strategy"), $0) ? fp_ratio(strcol("status")) : NaN) nooutput
  if (exists("STATS_max") && STATS_max * 1.12 > YMAX) { YMAX = STATS_max * 1.12 }
}

set title "Peak reserved memory relative to peak requested (lower is better; 1.0 = nothing held beyond the requests)" noenhanced
set ylabel "peak reserved / peak requested"
set xlabel "workload"
set yrange [0:YMAX]
set xrange [0.5:NW + 0.5]
set xtics () noenhanced
set for [i=1:NW] xtics add (workload_label(word(W, i)) i)
if (NW > 4) { set xtics rotate by -20 }
stats input using (is_last(strcol("workload"), strcol("strategy"), $0) && strcol("status") eq "oom") nooutput
NOOM = STATS_sum
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lw 2 dt 2 lc rgb "black" front

plot for [k=1:NS] input \
       using (strcol("strategy") eq word(S, k) && is_last(strcol("workload"), strcol("strategy"), $0) ? \
              bar_x(index_of(W, strcol("workload")), k, NS) : NaN):(ratio(strcol("status"))):(bar_width(NS)) \
       with boxes lc rgb color_of(word(S, k)) title word(S, k), \
     NaN with lines lw 2 dt 2 lc rgb "black" title "1.0 = peak requested", \
     for [o=1:(NOOM > 0)] input using (strcol("status") eq "oom" && is_last(strcol("workload"), strcol("strategy"), $0) ? \
              bar_x(index_of(W, strcol("workload")), index_of(S, strcol("strategy")), NS) : NaN):(ratio(strcol("status"))):(bar_width(NS)) \
       with boxes fs transparent pattern 4 border rgb "black" lc rgb "black" title "ended in OOM" @FP_MARKS
