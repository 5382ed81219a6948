# tune_confs.gp: loaded by the tune_*.gp figures after common.gp, with tune_csv set to a
# tune.csv. Sets TUNE_FIRST (the row where the file's last tune run begins: each run appends
# its rows in rank order, so the last row of rank 1), and REC_CONF and WIN_CONF, the
# recorded and the recommended configurations of that run as the figures name them ("the
# defaults" for an empty conf; WIN_CONF "" when none was recommended).
TUNE_FIRST = 0
stats tune_csv using (column("rank") == 1 ? TUNE_FIRST = $0 : 0) nooutput
conf_name(c) = c eq "" ? "the defaults" : c
REC_CONF = ""
WIN_CONF = ""
stats tune_csv using ($0 >= TUNE_FIRST && strcol("recorded") eq "1" ? (REC_CONF = conf_name(strcol("conf")), 0) : 0) nooutput
stats tune_csv using ($0 >= TUNE_FIRST && strcol("recommended") eq "1" ? (WIN_CONF = conf_name(strcol("conf")), 0) : 0) nooutput
