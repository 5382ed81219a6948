# timeline.gp RESULTS_DIR WORKLOAD OUT FMT: memory over a run, one colour per strategy: the
# peak reserved (solid) and allocated (dashed) within each step, from
# RESULTS_DIR/timeline_WORKLOAD*_STRATEGY.csv (a sample at each step's start, with the peaks
# of the step before it: peak_* at the row of step n belong to step n - 1). WORKLOAD
# is the workload's name as it begins the file names ("dynamic-shapes" also takes the files
# of "dynamic-shapes:ARGS"); where one strategy has several files, the newest is drawn.
# What the program requested is the same under every strategy and drawn once, as a grey
# area. Each strategy has its colour and marker of every figure (common.gp); lines that
# coincide stay visible: each is drawn thinner than the one before it, on top of it, with its
# markers at an interval of its own.
dir = ARG1
workload = ARG2
out = ARG3
fmt = ARG4
here(p) = strstrt(p, "/") ? p[1:strstrt(p, "/")] . here(p[strstrt(p, "/") + 1:]) : ""
load here(ARG0) . "common.gp"

# The strategy of a file is what follows its last '_'.
after_last(p, c) = strstrt(p, c) ? after_last(p[strstrt(p, c) + 1:], c) : p
strategy_of(f) = after_last(f, "_")[1:strlen(after_last(f, "_")) - 4]
FILES = system(sprintf("ls -t '%s'/timeline_%s_*.csv 2>/dev/null", dir, workload))
if (words(FILES) == 0) { print sprintf("timeline.gp: no %s/timeline_%s_*.csv", dir, workload); exit }
# The strategies in the order of summary.csv (S), where there is one.
S = ""
if (system(sprintf("test -f '%s/summary.csv' && echo yes", dir)) eq "yes") {
  stats dir . "/summary.csv" using (note_row(strcol("workload"), strcol("strategy"), $0)) nooutput
}
# The newest file of each strategy (FS, F), then strategies missing from summary.csv last.
FS = ""
F = ""
do for [i=1:words(FILES)] {
  if (!index_of(FS, strategy_of(word(FILES, i)))) {
    FS = add_word(FS, strategy_of(word(FILES, i)))
    F = add_word(F, word(FILES, i))
  }
}
# Drawn: the strategies that have a file, in the order of S; colours by position in S.
do for [i=1:words(FS)] { S = add_word(S, word(FS, i)) }
D = ""
do for [i=1:words(S)] { if (index_of(FS, word(S, i))) { D = add_word(D, word(S, i)) } }
file_of(s) = word(F, index_of(FS, s))
ND = words(D)
GiB = 2.0 ** 30

set title sprintf("Peak memory in each step on %s: reserved (solid) and allocated (dashed) per strategy", workload) noenhanced
set xlabel "training step"
set ylabel "memory (GiB)"
set yrange [0:*]
set xrange [0:*]
set key title "strategy"

# The row of step n holds the peaks of step n - 1; the first row has no step before it.
before(c) = column("step") > 0 ? column("step") - 1 : NaN
width(k) = 1.5 + 3.0 * (ND - k) / (ND > 1 ? ND - 1 : 1)
plot word(F, 1) using (before(0)):(column("peak_requested") / GiB) with filledcurves y1=0 fs solid 1.0 noborder \
       lc rgb "#d9d9d9" title "requested", \
     for [k=1:ND] file_of(word(D, k)) using (before(0)):(column("peak_reserved") / GiB) with linespoints lw width(k) \
       pt point_of(word(D, k)) pi interval_of(word(D, k)) ps 1.4 lc rgb color_of(word(D, k)) title word(D, k), \
     for [k=1:ND] file_of(word(D, k)) using (before(0)):(column("peak_allocated") / GiB) with lines lw width(k) / 2 dt 2 \
       lc rgb color_of(word(D, k)) notitle, \
     NaN with lines lw 1.5 dt 2 lc rgb "#333333" title "allocated (dashed)"
