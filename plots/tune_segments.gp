# tune_segments.gp RECORDED_MAP RECOMMENDED_MAP NOTES TUNE_CSV OUT FMT: where the memory sits
# at the peak under the recorded configuration (left) and the recommended one (right): the
# segment maps tune wrote at the moment each run's reserved bytes first reached their peak (or
# at its OOM), as plots/oommap.gp draws a map: one bar per segment in address order, its
# blocks coloured by state. NOTES is tune_segments.txt (harness/tune/tune_figures.h): the trace,
# and for each map its event and reserved bytes. A map that is missing (the recorded
# configuration was the one recommended: one panel) is left out.
array MAP[2] = [ARG1, ARG2]
notes = ARG3
tune_csv = ARG4
out = ARG5
fmt = ARG6
here(p) = strstrt(p, "/") ? p[1:strstrt(p, "/")] . here(p[strstrt(p, "/") + 1:]) : ""
set datafile separator comma
set datafile columnheaders
MiB = 2.0 ** 20
GiB = 2.0 ** 30
array WHO[2] = ["recorded", "recommended"]
note(key) = system(sprintf("sed -n 's/^%s //p' '%s'", key, notes))
have(f) = system(sprintf("test -s '%s' && echo 1 || echo 0", f)) + 0
# The figures of each map (counted before the terminal is set, for the height).
array NSEG[2]
array WIDEST[2]
array FREE_MIB[2]
array NFREE[2]
array LARGEST[2]
array DRAW[2]
tallest = 1
do for [k=1:2] {
  DRAW[k] = have(MAP[k])
  NSEG[k] = 0; WIDEST[k] = 1; FREE_MIB[k] = 0; NFREE[k] = 0; LARGEST[k] = 0
  if (DRAW[k]) {
    stats MAP[k] using (column("segment")) nooutput
    NSEG[k] = STATS_max + 1
    stats MAP[k] using ((column("offset") + column("size")) / MiB) nooutput
    WIDEST[k] = STATS_max
    stats MAP[k] using (strcol("state") eq "free" ? column("size") / MiB : 0) nooutput
    FREE_MIB[k] = STATS_sum
    LARGEST[k] = STATS_max
    stats MAP[k] using (strcol("state") eq "free" ? 1 : 0) nooutput
    NFREE[k] = STATS_sum
    if (NSEG[k] > tallest) { tallest = NSEG[k] }
  }
}
height = tallest * 8 + 260 < 700 ? 700 : (tallest * 8 + 260 > 4000 ? 4000 : tallest * 8 + 260)
load here(ARG0) . "common.gp"
load here(ARG0) . "tune_confs.gp"
array CONF[2] = [REC_CONF, WIN_CONF]
# The recorded configuration recommended: one map stands for both.
if (REC_CONF eq WIN_CONF) { DRAW[2] = 0 }

in_state(s) = strcol("state") eq s ? column("segment") : NaN
x_mid(dummy) = (column("offset") + column("size") / 2) / MiB
half(dummy) = column("size") / 2 / MiB
STATES = "allocated pending_free free unmapped"
array LABEL[4] = ["allocated", "freed, not yet reusable", "free (cached)", "unmapped"]
array SHADE[4] = ["#4878b0", "#f0a030", "#d03030", "#c8c8c8"]
set style fill solid 1.0 noborder
set grid xtics noytics
set border 3
set key below horizontal noreverse Right title ""
set xlabel "offset inside the segment (MiB)"
set ylabel "segment (in address order)"
ND = DRAW[1] + DRAW[2]
same = REC_CONF eq WIN_CONF
set multiplot layout 1, (ND > 0 ? ND : 1) title sprintf("Segment map at the peak: %s", note("trace")) noenhanced
do for [k=1:2] {
  if (DRAW[k]) {
    at = note(WHO[k] . "_at") eq "oom" ? "at its OOM" : "at its peak"
    set title sprintf("%s%s (%s), %s:\nevent %s, %.2f GiB reserved in %d segment%s;\n%.1f MiB free in %d block%s, the largest %.2f MiB", \
                      WHO[k], same ? " and recommended" : "", CONF[k], at, note(WHO[k] . "_event"), \
                      note(WHO[k] . "_reserved") / GiB, NSEG[k], NSEG[k] == 1 ? "" : "s", FREE_MIB[k], NFREE[k], \
                      NFREE[k] == 1 ? "" : "s", LARGEST[k]) noenhanced
    set xrange [0:WIDEST[k] * 1.02]
    set yrange [-0.6:NSEG[k] - 0.4] reverse
    if (NSEG[k] <= 40) { set ytics 1 format "%.0f" } else { set ytics autofreq format "%.0f" }
    plot for [s=1:4] MAP[k] using (x_mid(0)):(in_state(word(STATES, s))):(half(0)):(0.4) \
         with boxxyerror lc rgb SHADE[s] title LABEL[s]
  }
}
unset multiplot
