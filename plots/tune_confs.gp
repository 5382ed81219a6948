# tune_confs.gp: loaded by the tune_*.gp figures, with tune_csv set to a tune.csv. Sets
# TUNE_FIRST (the row where the file's last tune run begins: each run appends its rows in rank
# order, a row per trace, so the first of the last rows of rank 1), mine(0) (true for a row of
# that run that stands for its configuration: the row of its worst trace), and REC_CONF and
# WIN_CONF, the recorded and the recommended configurations of that run as the figures name
# them ("the defaults" for an empty conf; WIN_CONF "" when none was recommended).
# A run begins at a row of rank 1 after a row of another rank, or within rows of rank 1 at
# its first trace again or at another workload (a run of one configuration before it).
TUNE_FIRST = 0
PREV_RANK = 0
BLOCK = ""
begins(dummy) = column("rank") == 1 && (PREV_RANK != 1 || strcol("trace") eq BLOCK || strcol("workload") ne BLOCK_W)
BLOCK_W = ""
stats tune_csv using (begins(0) ? (TUNE_FIRST = $0, BLOCK = strcol("trace"), BLOCK_W = strcol("workload")) : 0, \
                      PREV_RANK = column("rank"), 0) nooutput
mine(dummy) = $0 >= TUNE_FIRST && column("worst") == 1
conf_name(c) = c eq "" ? "the defaults" : c
REC_CONF = ""
WIN_CONF = ""
stats tune_csv using (mine(0) && strcol("recorded") eq "1" ? (REC_CONF = conf_name(strcol("conf")), 0) : 0) nooutput
stats tune_csv using (mine(0) && strcol("recommended") eq "1" ? (WIN_CONF = conf_name(strcol("conf")), 0) : 0) nooutput
