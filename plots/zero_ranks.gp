# zero_ranks.gp TWO_GPU_CSV ONE_GPU_CSV OUT FMT: what one rank of ZeRO holds, per stage, on
# one GPU (`--ranks 1`) and as one of two (`--ranks 2`), under caching and expandable: the
# strategy's peak reserved bytes (bar), its peak allocated bytes (black mark), and NCCL's
# memory on that GPU on top (hatched: outside the strategy, nccl_bytes). Rows are rank 0's,
# told by their device (cuda:0 ...): gnuplot cuts a quoted field at its first comma, so the
# workload column gives only "zero:stage=S", and the file gives the world. The last row of
# each stage and strategy wins, as elsewhere.
two = ARG1
one = ARG2
out = ARG3
fmt = ARG4
here(p) = strstrt(p, "/") ? p[1:strstrt(p, "/")] . here(p[strstrt(p, "/") + 1:]) : ""
load here(ARG0) . "common.gp"

# Variant v of a stage: 1 caching on one GPU, 2 caching per rank of two, 3 and 4 the same
# with expandable.
NV = 4
array RES[3 * NV]
array ALLOC[3 * NV]
array NCCL[3 * NV]
do for [i=1:3 * NV] { RES[i] = NaN; ALLOC[i] = NaN; NCCL[i] = NaN }
GB = 1e9
slot(stage, v) = (stage - 1) * NV + v
variant(world, s) = (s eq "caching" ? 1 : s eq "expandable" ? 3 : 0) + (world == 2 ? 1 : 0)
# The stage of a rank-0 row ("zero:stage=3", on cuda:0), 0 for any other row.
stage_of(w, dev) = dev[1:7] eq "cuda:0 " && w[1:11] eq "zero:stage=" ? int(w[12:12]) : 0
keep(w, s, world) = (st = stage_of(w, strcol("device")), v = variant(world, s), \
              st >= 1 && st <= 3 && v >= 1 && v <= NV && strcol("status") eq "ok" ? \
              (RES[slot(st, v)] = column("peak_reserved_bytes") / GB, \
               ALLOC[slot(st, v)] = column("peak_allocated_bytes") / GB, \
               NCCL[slot(st, v)] = column("nccl_bytes") / GB, 0) : 0)
stats two using (keep(strcol("workload"), strcol("strategy"), 2)) nooutput
stats one using (keep(strcol("workload"), strcol("strategy"), 1)) nooutput
YMAX = 0
do for [i=1:3 * NV] { if (RES[i] + NCCL[i] > YMAX) { YMAX = RES[i] + NCCL[i] } }
YMAX = YMAX > 0 ? YMAX * 1.15 : 1

W = 0.8 / NV
x(stage, v) = stage - 0.4 + (v - 0.5) * W
array LABEL[NV] = ["caching, one GPU", "caching, per rank of two", "expandable, one GPU", "expandable, per rank of two"]
array SHADE[NV] = ["#d95f02", "#fdb863", "#e7298a", "#f4a6c8"]

set title "ZeRO on H200s: what one rank holds, one GPU against one of two (GB)" noenhanced
set ylabel "GB per GPU"
set xlabel "ZeRO stage"
set xrange [0.5:3.5]
set yrange [0:YMAX]
set xtics ("stage 1" 1, "stage 2" 2, "stage 3" 3)
set boxwidth W * 0.92 absolute
set key title ""
set style fill solid 0.85 border rgb "#333333"

# One line per bar: x, reserved, allocated, NCCL's, variant.
set print $BARS
do for [st=1:3] { do for [v=1:NV] { print sprintf("%g,%g,%g,%g,%d", x(st, v), RES[slot(st, v)], ALLOC[slot(st, v)], NCCL[slot(st, v)], v) } }
set print
set datafile nocolumnheaders
plot for [v=1:NV] $BARS using ($5 == v ? $1 : NaN):2 with boxes lc rgb SHADE[v] title LABEL[v], \
     $BARS using 1:($2 + $4 / 2):(W * 0.46):($4 / 2) with boxxyerror fs transparent pattern 4 border rgb "#333333" \
       lc rgb "#333333" title "NCCL's memory (outside the strategy)", \
     $BARS using ($1 - W * 0.46):3:(W * 0.92):(0) with vectors nohead lw 3 lc rgb "black" title "peak allocated"
