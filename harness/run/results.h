/* results.h: the results files of a run, with their columns declared once.
 *
 * summary.csv gets one row per run (harness/README.md, "Results", documents every column):
 *   workload, strategy, conf, device, budget_bytes, seed, events   what ran
 *   approximate       "no", or why the figures cannot be exact: a snapshot whose pools could
 *                     not all be told (trace_builder.h, Note [Pools of a trace]), releases
 *                     that only the cap could tell apart (trace_builder.c,
 *                     Note [Releases inside a malloc]), OOMs the program caught that the run served
 *   status (ok | oom | error | stopped: another rank failed first, ranks.h),
 *   oom_kind (none | fragmentation | capacity), oom_event (-1: none)
 *   peak_<gauge>      the peak of each gauge of stats.h (peak_requested_bytes, ...), PyTorch's
 *                     names
 *   frag_pct = 100 * (1 - peak allocated / peak reserved)
 *   <counter>         each counter of stats.h (num_device_alloc, ...)
 *   alloc_ns_p50, alloc_ns_p99, free_ns_p50   per-call latency, host time (+ modelled device
 *                                             time on the simulated card)
 *   wall_s            the replay loop's host time; events_per_s  events / wall_s
 *   step_ms_p50       the median time of a step, from one STEP event to the next (the last
 *                     to the end of the stream): device time from CUDA events recorded on
 *                     stream 0 when kernels ran (cuda), else the loop's host time plus the
 *                     simulated card's modelled call time; 0 when the stream has no STEP
 *   kernel_ms_total   the summed device time of the kernels launched (CUDA events around
 *                     each launch); 0 when none ran (sim, --no-kernels)
 *   harness_ns_per_event  the harness's own cost: host time of the loop outside strategy
 *                     calls, kernel launches, lockstep waits and --verify checks, per event
 *   nccl_bytes        device memory NCCL's communicator took, outside the strategy and its
 *                     budget (kernels.h, Note [Collectives]); 0 without one
 *   peak_<device gauge>  the peak of each device gauge of stats.h: peak_footprint_bytes, the
 *                     device memory the run's device calls really took at most (cudaMemGetInfo
 *                     on cuda, the driver model on sim), beside the strategy's peak_reserved
 *   live_peak_bytes   the most bytes the workload's stream has live at once, whatever the
 *                     strategy: the lower bound on peak_reserved (no allocator holds less than
 *                     what is live); peak_requested_bytes falls short of it only when the run
 *                     stopped before its peak (an OOM)
 *   plan_hits, plan_misses, plan_bytes   a planning strategy's allocation calls served at
 *                     their planned place, those served otherwise, and its plan's region
 *                     (strategy.h, Note [Plan statistics]); empty for a strategy without a
 *                     plan
 *   peak_reserved_low, peak_reserved_high, device_allocs_low, device_allocs_high
 *                     peak_reserved_bytes and num_device_alloc over the placements the driver
 *                     is seen to make (band.h, Note [Placement bands]): equal to the figure
 *                     where no placement choice decides it, and on a GPU
 * A run of several ranks (--ranks, ranks.h) adds one row per rank, its workload naming the
 * rank, and then the combined row (ab_ranks_combine: peaks and counts summed over the
 * ranks, the slowest rank's times). Columns are only ever added at the end.
 * timeline_<workload>_<strategy>.csv gets the samples taken at each STEP: event, step,
 * requested, allocated, reserved (the values as the step begins), and peak_requested,
 * peak_allocated, peak_reserved (the highest since the previous sample: at the row of step n,
 * the peaks of step n - 1; engine.h, Note [Step peaks]).
 *
 * oom.csv gets one row per budget search (bisect.h):
 *   workload, strategy, conf, device   what ran
 *   min_budget_bytes   the smallest budget seen to pass (empty: none passed)
 *   max_fail_bytes     the largest budget seen to fail (empty: none failed); the true smallest
 *                      budget lies above it and at most at min_budget_bytes
 *   peak_requested_bytes   the stream's; no budget below it can pass
 *   overhead_pct       100 * (min_budget / peak_requested - 1)
 *   oom_kind_at_fail, oom_event_at_fail   the OOM of the run at max_fail (none / -1)
 *   probes, wall_s     replays made (the unbudgeted one included) and the search's host time
 *   limit              budget (the device's hard limit: a card of that size) or cap (PyTorch's
 *                      set_per_process_memory_fraction, `oom --cap`)
 *   note               what qualifies the answer, in words; empty when nothing does
 *   trace_ooms         OOMs the traced program survived; above 0 the budget is an upper bound
 * (A column that can be empty never comes last: gnuplot misreads an empty last field.)
 * compare.csv gets one row per strategy of `allocbench compare`: an unbudgeted run and a
 * search side by side (the columns of the same names above), with the run's latency, and
 * device_time_s, the time its device calls took over the run by the simulated card's cost
 * model (measured per call on an H200; 0 on cuda, whose calls are timed in the latency), and
 * the run's peak reserved band (peak_reserved_low, peak_reserved_high, as in summary.csv).
 */
#ifndef AB_RESULTS_H
#define AB_RESULTS_H

#include <stdint.h>

#include "harness/run/band.h"
#include "harness/run/bisect.h"
#include "harness/run/engine.h"
#include "harness/run/table.h"
#include "strategies/common/stats.h"

/* The columns in order: COL(name, numeric) for the run's own, and for the statistics of
 * stats.h, from its lists: PEAK(gauge, doc) for the column peak_<gauge> of each gauge, and
 * COUNTER(counter, doc) for each counter. The device's gauges came later and sit at the end,
 * where columns are added. */
#define AB_SUMMARY_COLUMNS(COL, PEAK, COUNTER)                                                 \
  COL(workload, 0) COL(strategy, 0) COL(conf, 0) COL(device, 0) COL(budget_bytes, 1) COL(seed, 1) \
  COL(events, 1) COL(approximate, 0) COL(status, 0) COL(oom_kind, 0) COL(oom_event, 1) AB_STAT_STRATEGY_GAUGES(PEAK) \
  COL(frag_pct, 1) AB_STAT_COUNTERS(COUNTER) COL(alloc_ns_p50, 1) COL(alloc_ns_p99, 1)           \
  COL(free_ns_p50, 1) COL(wall_s, 1) COL(events_per_s, 1) COL(step_ms_p50, 1)                    \
  COL(kernel_ms_total, 1) COL(harness_ns_per_event, 1) COL(nccl_bytes, 1) AB_STAT_DEVICE_GAUGES(PEAK)   \
  COL(live_peak_bytes, 1) COL(plan_hits, 1) COL(plan_misses, 1) COL(plan_bytes, 1)             \
  COL(peak_reserved_low, 1) COL(peak_reserved_high, 1) COL(device_allocs_low, 1) COL(device_allocs_high, 1)

extern const ab_col_t ab_summary_cols[];
extern const size_t ab_summary_ncols;

#define AB_OOM_COLUMNS(X)                                                                   \
  X(workload, 0) X(strategy, 0) X(conf, 0) X(device, 0) X(min_budget_bytes, 1)              \
  X(max_fail_bytes, 1) X(safe_cap_bytes, 1) X(fail_ranges, 1) X(peak_requested_bytes, 1)    \
  X(overhead_pct, 1) X(oom_kind_at_fail, 0) X(oom_event_at_fail, 1) X(probes, 1) X(wall_s, 1) \
  X(limit, 0) X(note, 0) X(trace_ooms, 1)

extern const ab_col_t ab_oom_cols[];
extern const size_t ab_oom_ncols;

#define AB_COMPARE_COLUMNS(X)                                                                  \
  X(workload, 0) X(strategy, 0) X(conf, 0) X(device, 0) X(status, 0) X(peak_requested_bytes, 1) \
  X(peak_reserved_bytes, 1) X(frag_pct, 1) X(min_budget_bytes, 1) X(safe_cap_bytes, 1)        \
  X(overhead_pct, 1)                                                                             \
  X(oom_kind_at_fail, 0) X(note, 0) X(alloc_ns_p50, 1) X(alloc_ns_p99, 1) X(free_ns_p50, 1)    \
  X(wall_s, 1) X(device_time_s, 1) X(peak_reserved_low, 1) X(peak_reserved_high, 1)

extern const ab_col_t ab_compare_cols[];
extern const size_t ab_compare_ncols;

/* What ran, next to the run's results. */
typedef struct ab_run_desc_s {
  const char *workload;
  const char *strategy;
  const char *conf;
  const char *device;
  uint64_t budget_bytes;
  uint64_t seed;
  uint64_t live_peak_bytes; /* 0: counted from the events (a rank's shell row gives its own) */
  const ab_band_t *band;    /* the run's placement band; NULL: its figures, a point */
} ab_run_desc_t;

/* The approximate column: "no", or the reasons in short, the stream's (es->approximate) and
 * the run's (caught OOMs it served: engine.c, Note [Caught OOMs]); run may be NULL. */
void ab_results_approximate(const ab_events_t *es, const ab_run_t *run, char *out, size_t size);

/* Appends the summary row of a finished run to t (whose columns are ab_summary_cols). */
ab_status ab_results_add_summary(ab_table_t *t, const ab_run_desc_t *desc, const ab_events_t *es, const ab_run_t *run);

/* Appends the row of a budget search to t (whose columns are ab_oom_cols). */
ab_status ab_results_add_oom(ab_table_t *t, const ab_run_desc_t *desc, const ab_events_t *es,
                             const ab_bisect_result_t *res);

/* Appends the row of `allocbench compare` for one strategy: its unbudgeted run and its
 * search (t's columns are ab_compare_cols). */
ab_status ab_results_add_compare(ab_table_t *t, const ab_run_desc_t *desc, const ab_events_t *es,
                                 const ab_run_t *run, const ab_bisect_result_t *res);

/* Writes the run's timeline file (ab_results_run_file) atomically: a sample per step, then the
 * run (ab_results_run_cells). */
ab_status ab_results_write_timeline(const char *dir, const ab_run_desc_t *desc, const ab_run_t *run, ab_diag_t *diag);

/* Writes a search's cap map (bisect.h, Note [Cap map]) to its run's capmap file
 * (ab_results_run_file), one row per interval of caps that replay alike, in ascending caps:
 * cap_lo_bytes,cap_hi_bytes,status,oom_event (cap_hi_bytes empty: every cap from cap_lo_bytes
 * up; status ok or oom; oom_event -1 for ok), then the run (ab_results_run_cells). The path written goes to path (may be NULL). */
ab_status ab_results_write_capmap(const char *dir, const ab_run_desc_t *desc, const ab_capmap_t *map, char *path,
                                  size_t path_size, ab_diag_t *diag);

/* A workload as results and messages name it: a generator's spec as given; a trace
 * (replay:PATH, or the path `replay` was given) as replay:FILE, by its file name, since where
 * it lay on the machine that ran is no part of a result. */
void ab_results_workload_name(const char *workload, char *out, size_t size);
/* Makes a string safe as part of a file name: keeps letters, digits, '-', '.' and '_',
 * turns runs of anything else into one '_'; a path keeps only its last component. */
void ab_results_file_part(const char *in, char *out, size_t size);
/* The file of one run's KIND (timeline, oommap, capmap) in dir: DIR/KIND_<workload>[_conf-<hash>]_
 * <strategy>.csv (Note [Names of a run's files] in results.c): two runs that differ in their
 * workload, conf or strategy never share one, and a long spec is a short hash. */
void ab_results_run_file(const char *dir, const char *kind, const ab_run_desc_t *d, char *path, size_t size);
/* The cells every row of such a file ends with, naming the run whole: workload (as
 * ab_results_workload_name), conf, strategy; cells holds them, row points at them. */
#define AB_RESULTS_RUN_CELL 1200
void ab_results_run_cells(const ab_run_desc_t *d, char (*cells)[AB_RESULTS_RUN_CELL], const char **row);

/* Whether name is a file allocbench writes into a results folder: the results CSVs, the
 * per-run files (timeline_, oommap_, capmap_), tune's (tune_*.csv, tune_*.txt), commands.txt,
 * the page and the figures. */
bool ab_results_writes_name(const char *name);
/* --out before anything runs: a folder allocbench can write in (ab_output_check_dir), whose
 * results files, where they exist, are files it can write: a directory under one of their
 * names, or a file that cannot be opened for writing, is refused now rather than after the
 * runs. */
ab_status ab_results_check_out(const char *dir, ab_diag_t *diag);
/* Refuses (AB_ERR_INVALID, naming both) an input of this process (input.h) that lies in dir
 * under a name allocbench writes there: checked once the inputs are read and before anything
 * is written, so that a run never writes over the trace it replays. */
ab_status ab_results_check_inputs(const char *dir, ab_diag_t *diag);

/* The folder of the figure scripts (plots/: draw.sh and one NAME.gp per figure), absolute:
 * AB_PLOTS_DIR in the environment, else the one make install put beside this binary
 * (PREFIX/lib/allocbench/plots, kernels/base/installed.h), else the source tree's it was built from.
 * What a hint names, so that it names a file that is there. */
const char *ab_results_plots_dir(void);

#endif
