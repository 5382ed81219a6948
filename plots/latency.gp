# latency.gp SUMMARY_CSV OUT FMT: allocation latency per strategy per workload, from
# summary.csv: the bar is the median (alloc_ns_p50), the triangle the 99th percentile
# (alloc_ns_p99). Log scale: a call served from a cache takes tens of nanoseconds, a
# cudaMalloc tens of microseconds. Latency is host time of the strategy call, plus on the
# simulated card the modelled time of the device calls it made. Failed runs are left out.
input = ARG1
out = ARG2
fmt = ARG3
here(p) = strstrt(p, "/") ? p[1:strstrt(p, "/")] . here(p[strstrt(p, "/") + 1:]) : ""
load here(ARG0) . "common.gp"

stats input using (note_row(strcol("workload"), strcol("strategy"), $0)) nooutput
NW = words(W)
NS = words(S)
drawn(k) = strcol("strategy") eq word(S, k) && strcol("status") ne "error" && \
           is_last(strcol("workload"), strcol("strategy"), $0)
positive(v) = v > 0 ? v : NaN
stats input using (is_last(strcol("workload"), strcol("strategy"), $0) && strcol("status") ne "error" ? \
                   positive(column("alloc_ns_p99")) : NaN) nooutput
YMAX = STATS_max
stats input using (is_last(strcol("workload"), strcol("strategy"), $0) && strcol("status") ne "error" ? \
                   positive(column("alloc_ns_p50")) : NaN) nooutput
YMIN = STATS_min

set title "Allocation latency per call: median (bar) and 99th percentile (triangle); lower is better" noenhanced
set ylabel "latency of one allocation (log scale)"
set xlabel "workload"
set logscale y 10
set yrange [10 ** floor(log10(YMIN) - 0.3):10 ** ceil(log10(YMAX) + 0.3)]
set ytics ("1 ns" 1, "10 ns" 10, "100 ns" 100, "1 µs" 1e3, "10 µs" 1e4, "100 µs" 1e5, "1 ms" 1e6, \
           "10 ms" 1e7, "100 ms" 1e8, "1 s" 1e9, "10 s" 1e10)
set mytics 10
set xrange [0.5:NW + 0.5]
set xtics () noenhanced
set for [i=1:NW] xtics add (workload_label(word(W, i)) i)
if (NW > 4) { set xtics rotate by -20 }
# Bars stand on the bottom of the axis, as usual on a log scale.
set boxwidth 1 absolute

plot for [k=1:NS] input \
       using (drawn(k) ? bar_x(index_of(W, strcol("workload")), k, NS) : NaN):(positive(column("alloc_ns_p50"))):(bar_width(NS)) \
       with boxes lc rgb color_of(word(S, k)) title word(S, k), \
     for [k=1:NS] input \
       using (drawn(k) ? bar_x(index_of(W, strcol("workload")), k, NS) : NaN):(positive(column("alloc_ns_p99"))) \
       with points pt 9 ps 1.3 lc rgb "black" notitle, \
     NaN with points pt 9 ps 1.3 lc rgb "black" title "p99"
