# min_budget.gp OOM_CSV OUT FMT: the smallest budget under which each strategy completes
# each workload (`allocbench oom`, oom.csv), normalised to the workload's peak requested
# bytes: 1.0 would be a perfect packing, and the bar above it is the memory a strategy needs
# on top of what the program asks for. The label on a bar is the budget itself, in MiB below
# a GiB (to the MiB: 256 and 320 MiB read apart) and in GiB to the hundredth above. A pair with
# no budget found (min_budget_bytes 0 or empty) is left out.
input = ARG1
out = ARG2
fmt = ARG3
here(p) = strstrt(p, "/") ? p[1:strstrt(p, "/")] . here(p[strstrt(p, "/") + 1:]) : ""
load here(ARG0) . "common.gp"

stats input using (note_row(strcol("workload"), strcol("strategy"), $0)) nooutput
NW = words(W)
NS = words(S)
GiB = 2.0 ** 30
ratio_of(budget, requested) = budget > 0 && requested > 0 ? budget / requested : NaN
ratio(row) = ratio_of(column("min_budget_bytes"), column("peak_requested_bytes"))
budget_label(b) = b < GiB ? sprintf("%.0f MiB", b / 2.0 ** 20) : sprintf("%.2f GiB", b / GiB)
drawn(k) = strcol("strategy") eq word(S, k) && is_last(strcol("workload"), strcol("strategy"), $0)
stats input using (is_last(strcol("workload"), strcol("strategy"), $0) ? ratio($0) : NaN) nooutput
YMAX = STATS_max > 1 ? STATS_max * 1.18 : 1.25

set title "Smallest budget each strategy completes in, relative to peak requested (lower is better)" noenhanced
set ylabel "smallest budget / peak requested"
set xlabel "workload (label on a bar: the budget)"
set yrange [0:YMAX]
set xrange [0.5:NW + 0.5]
set xtics () noenhanced
set for [i=1:NW] xtics add (workload_label(word(W, i)) i)
if (NW > 4) { set xtics rotate by -20 }
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lw 2 dt 2 lc rgb "black" front

plot for [k=1:NS] input \
       using (drawn(k) ? bar_x(index_of(W, strcol("workload")), k, NS) : NaN):(ratio($0)):(bar_width(NS)) \
       with boxes lc rgb color_of(word(S, k)) title word(S, k), \
     for [k=1:NS] input \
       using (drawn(k) ? bar_x(index_of(W, strcol("workload")), k, NS) : NaN):(ratio($0)): \
             (budget_label(column("min_budget_bytes"))) \
       with labels rotate by 90 left offset 0, 0.4 font ",8" notitle, \
     NaN with lines lw 2 dt 2 lc rgb "black" title "1.0 = peak requested"
