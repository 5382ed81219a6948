/* tune_figures.h: the data of `tune`'s figures beyond tune.csv (plots/tune_*.gp draw them):
 * what the memory does over the job, and where it sits at the peak, under the recorded
 * configuration and under the recommended one.
 *
 * For each trace (one, or one per rank of a job) and each of the two configurations, one run
 * with the timeline sampled (engine.h, Note [Step peaks]), under the job's cap as tune ran it
 * and, for the recorded configuration, at the recorded addresses (tune.h). The same run takes
 * the segment map at the moment its reserved bytes first reached their peak: tune's own run of
 * the configuration saw that peak (ab_tune_seen_t), and a replay goes as the first did, so the
 * map is taken after the first event at which reserved reaches it (engine.h, at_reserved); a
 * run that ended in OOM is mapped at its OOM instead. The maps written are those of the trace
 * that holds the most under the recommended configuration (the worst rank). The runs of the
 * two configurations are made at once, on tune's threads (ab_tune_each).
 *
 * Files, rewritten whole by each call (tune.csv keeps every run; these, the last):
 *   DIR/tune_timeline.csv  trace, config, event, step, allocated, reserved, peak_allocated,
 *                          peak_reserved: one row per sample, config recorded | recommended
 *                          (the same rows twice when the recorded configuration is the one
 *                          recommended), and, where the trace recorded its allocator's
 *                          segment decisions, config pytorch: the reserved bytes PyTorch
 *                          itself held at the same events (allocated left empty), the check
 *                          of the replay
 *   DIR/tune_segments_recorded.csv, DIR/tune_segments_recommended.csv
 *                          the segment maps (oommap.h's columns) of the worst trace
 *   DIR/tune_segments.txt  what the maps show, one "key value" a line: trace (the worst
 *                          one's name), and for each configuration its event and reserved
 *                          bytes and at (peak or oom)
 *
 * Statuses: AB_OK, or the run's error or the file's with diag set; an interrupted run (stop)
 * writes nothing and returns AB_OK with *interrupted set. Not thread-safe.
 */
#ifndef AB_TUNE_FIGURES_H
#define AB_TUNE_FIGURES_H

#include <stdbool.h>
#include <stddef.h>

#include "workloads/events/events.h"
#include "harness/tune/tune.h"

/* What tune's run of a configuration on a trace ended with: its status and its peak
 * reserved bytes. */
typedef struct ab_tune_seen_s {
  ab_run_status_t status;
  int64_t peak_reserved;
} ab_tune_seen_t;

/* Writes the files above into dir for the traces under o; recommended may be NULL (no
 * configuration ran the whole job): then the recorded one alone. seen[k * 2] is what tune saw
 * of the recorded configuration on trace k, seen[k * 2 + 1] of the recommended one. A trace
 * alike an earlier one (ab_tune_alike) takes that one's runs. */
ab_status ab_tune_figures_write(const ab_tune_trace_t *traces, size_t ntraces, const ab_tune_opts_t *o,
                                const ab_tune_candidate_t *recorded, const ab_tune_candidate_t *recommended,
                                const ab_tune_seen_t *seen, const char *dir, bool *interrupted, ab_diag_t *diag);

#endif
