# tune_ranking.gp TUNE_CSV OUT FMT: the settings `allocbench tune` tried, in its ranking
# (the last run of the file: tune.csv keeps every run), one row each (of a job of several
# traces, its worst trace's, by which it is ranked): the peak reserved
# bytes of the run (blue) and the smallest cap it runs under (amber) side by side, in GiB.
# The recommended setting's row is highlighted and labelled, the recorded one is labelled;
# the reference strategies (not PyTorch settings, never recommended) are hatched, and their
# limit is a budget, a card of that size. A run that ran out of memory has no reserved bar
# and says OOM.
# gnuplot 5.4's strcol() ends a quoted field at its first comma (the columns after it are
# read right), and confs hold commas: the file is read through awk, which writes the commas
# inside quotes as U+201A, a low single quote that reads as one. The keys are shortened
# there too, so that the labels leave the bars room (the page's table has them in full).
SHORT = "gsub(/expandable_segments:True/, \"expandable\"); gsub(/max_split_size_mb/, \"max_split\"); " . \
        "gsub(/max_non_split_rounding_mb/, \"non_split_rounding\"); gsub(/roundup_power2_divisions/, \"pow2_div\"); " . \
        "gsub(/garbage_collection_threshold/, \"gc_threshold\")"
tune_csv = sprintf("< awk 'BEGIN { FS = OFS = \"\\\"\" } { for (i = 2; i <= NF; i += 2) gsub(/,/, \"\342\200\232\", $i); %s } 1' '%s'", SHORT, ARG1)
out = ARG2
fmt = ARG3
here(p) = strstrt(p, "/") ? p[1:strstrt(p, "/")] . here(p[strstrt(p, "/") + 1:]) : ""
# The height follows the rows (counted before the terminal is set).
set datafile separator comma
set datafile columnheaders
load here(ARG0) . "tune_confs.gp"
stats tune_csv using (mine(0) ? 1 : 0) nooutput
N = int(STATS_sum)
height = N * 34 + 190 < 500 ? 500 : N * 34 + 190
width = 1400
load here(ARG0) . "common.gp"

GiB = 2.0 ** 30
is_ref(dummy) = strcol("limit") eq "budget"
label(dummy) = sprintf("%d. %s%s", column("rank"), \
  is_ref(0) ? strcol("strategy") . " (reference)" : (strcol("conf") eq "" ? "(default)" : strcol("conf")), \
  strcol("recorded") eq "1" ? "  [recorded]" : "")
reserved(dummy) = mine(0) && strcol("status") eq "ok" ? column("peak_reserved_bytes") / GiB : NaN
cap(dummy) = mine(0) && strcol("min_budget_bytes") ne "" ? column("min_budget_bytes") / GiB : NaN
y(dummy) = column("rank")
# The labels, one per rank, set before the plot (a row of another trace would otherwise put
# an empty label at its rank).
array LABELS[N > 0 ? N : 1]
keep_label(r, t) = (r >= 1 && r <= N ? (LABELS[r] = t) : "", 0)
stats tune_csv using (mine(0) ? keep_label(int(column("rank")), label(0)) : 0) nooutput
stats tune_csv using (mine(0) ? (reserved(0) > cap(0) ? reserved(0) : cap(0)) : NaN) nooutput
XMAX = STATS_max * 1.16

set title "Settings ranked by tune: peak reserved and smallest cap (shorter is better)\nshortened: expandable = expandable_segments:True, max_split = max_split_size_mb, pow2_div = roundup_power2_divisions,\nnon_split_rounding = max_non_split_rounding_mb, gc_threshold = garbage_collection_threshold" noenhanced
set xlabel "GiB"
set xrange [0:XMAX]
set yrange [N + 0.6:0.4]
set ytics () noenhanced font ",10"
set for [i=1:N] ytics add (LABELS[i] i)
set grid xtics noytics
set border 3
set key below horizontal reverse Left title "" noenhanced
set style fill solid 0.9 noborder
BAND = 0.17
plot tune_csv using (mine(0) && strcol("recommended") eq "1" ? XMAX / 2 : NaN):(y(0)):(XMAX / 2):(0.48) \
       with boxxyerror fs solid 1.0 noborder lc rgb "#dff2d8" title "recommended", \
     tune_csv using (reserved(0) / 2):(y(0) - BAND):(reserved(0) / 2):(BAND * 0.95) \
       with boxxyerror lc rgb "#4878b0" title "peak reserved", \
     tune_csv using (cap(0) / 2):(y(0) + BAND):(cap(0) / 2):(BAND * 0.95) \
       with boxxyerror lc rgb "#e6ab02" title "smallest cap (a budget for a reference)", \
     tune_csv using (mine(0) && is_ref(0) ? XMAX / 2 : NaN):(y(0)):(XMAX / 2):(0.45) \
       with boxxyerror fs transparent pattern 4 noborder lc rgb "#777777" title "reference: not a PyTorch setting", \
     tune_csv using (mine(0) && strcol("status") ne "ok" ? 0 : NaN):(y(0) - BAND):("OOM") \
       with labels left offset 0.5, 0 font ",10" notitle, \
     tune_csv using (mine(0) ? reserved(0) : NaN):(y(0) - BAND):(sprintf("%.2f", reserved(0))) \
       with labels left offset 0.4, 0 font ",9" notitle, \
     tune_csv using (mine(0) ? cap(0) : NaN):(y(0) + BAND):(sprintf("%.2f", cap(0))) \
       with labels left offset 0.4, 0 font ",9" notitle, \
     tune_csv using (mine(0) && strcol("recommended") eq "1" ? XMAX : NaN):(y(0)):("recommended") \
       with labels right offset -0.5, 0 font ",11" textcolor rgb "#2b7a18" notitle
