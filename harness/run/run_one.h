/* run_one.h: the run as a service: a run's spec, and running one strategy over one event
 * stream on a fresh device, recording its summary row, its timeline and, at an OOM, its
 * segment map. Every command runs through it (cli.h parses a command line into a spec), and
 * so do the ranks (ranks.h) and a library's run in a process of its own (supervise.h).
 *
 * Stopping: a command that runs catches SIGINT, SIGTERM, SIGHUP and SIGQUIT (stop.h). The run in
 * progress (or the budget search, ab_run_search_opts) stops within 1024 events, frees what
 * it holds and is not recorded (a result of part of a stream would mislead).
 */
#ifndef AB_RUN_ONE_H
#define AB_RUN_ONE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/device/device.h"
#include "workloads/events/events.h"
#include "workloads/traces/trace_builder.h"
#include "harness/run/band.h"
#include "harness/run/bisect.h"
#include "harness/run/engine.h"
#include "harness/run/table.h"
#include "strategies/common/adaptor_trace.h"

typedef struct ab_supervise_child_s ab_supervise_child_t; /* supervise.h */

/* The exit status of a command (cli.h) and of a run's process of its own (supervise.h). */
#define AB_EXIT_OK 0
#define AB_EXIT_FAIL 1
#define AB_EXIT_USAGE 2

/* How a command shows its tables (cli.h prints them); the spec carries it to a run in a
 * process of its own, whose notes follow it. */
typedef enum ab_format_e { AB_FORMAT_TABLE, AB_FORMAT_CSV, AB_FORMAT_JSON } ab_format_t;

/* A command's hooks around each run; every member may be NULL. */
typedef struct ab_run_hooks_s {
  void *ctx;
  /* Where the run is recorded, in PyTorch's trace vocabulary (replay's exports): the
   * strategy is wrapped in a trace adaptor (adaptor_trace.h) and the log taken at the run's
   * end or OOM. A run in a process of its own (supervise.h) records there and sends the log
   * back. */
  ab_trace_log_t *record;
  /* Called with the replay's options just before it starts, to add to them (a rank's
   * communicator and lockstep, ranks.h). Runs in this process only: the ranks share it. */
  void (*replay_opts)(void *ctx, ab_run_opts_t *ro);
  /* Handed the run's progress (done events of total, about every 64k) instead of its being
   * drawn on a terminal: a run in a process of its own hands it to its parent, which draws
   * it (supervise.h). */
  void (*progress)(void *ctx, size_t done, size_t total);
} ab_run_hooks_t;

/* A run's spec: what the command line says of the runs it asks for (cli.h parses it), or what
 * a caller sets after ab_run_spec_defaults. */
typedef struct ab_run_spec_s {
  const char *cmd;        /* "allocbench run": the command as its messages name it */
  const char *workload;   /* -w NAME[:ARGS] */
  const char *strategy;   /* -s NAME (or a comma list where the command takes several) */
  const char *conf;       /* -c CONF */
  const char *device;     /* --device SPEC */
  const char *out_dir;    /* --out DIR */
  uint64_t seed;          /* --seed N */
  ab_device_config_t dev; /* --budget, --faults */
  uint64_t cap_bytes;     /* --cap SIZE: PyTorch's memory cap (set_per_process_memory_fraction)
                           * in bytes, for the strategy (pipeline.h) and a trace's reader; 0: none */
  double cap_fraction;    /* --cap Fx: the cap as a fraction of the card, until the card is known
                           * (ab_run_resolve_cap makes it cap_bytes); 0: none */
  int faults_rank;        /* --faults ...,rank=R: only rank R's card fails (ranks.h); -1: every card */
  ab_format_t format;     /* --format */
  bool timeline;          /* not --no-timeline */
  bool check;             /* --check: invariants after every event */
  bool kernels;           /* not --no-kernels: launch the workload's kernels on cuda */
  bool verify;            /* --verify: no two live allocations may share memory */
  bool quiet;             /* --quiet: no progress, no device notice */
  bool verbose;           /* -v: list's keys and arguments; compare's OOM reports */
  bool cap;               /* the limits are memory caps (--cap): the tables say cap, not budget */
  uint64_t recorded_peak_reserved; /* replay: the peak reserved the trace recorded, said beside the run's; 0: none */
  bool recorded_addresses; /* --recorded-addresses: the trace's cudaMalloc addresses (sim) */
  const ab_run_hooks_t *hooks; /* NULL: none */
} ab_run_spec_t;

/* The defaults: device auto, seed 42, out results/latest, format table, timeline and
 * kernels on. cmd names the command in messages ("allocbench run", "allocbench_micro"). */
void ab_run_spec_defaults(ab_run_spec_t *o, const char *cmd);

/* Where a run says what it has to say (its notes, progress, the OOM report): stderr when
 * NULL. A library's run in a process of its own gathers them in memory and its parent says
 * them (supervise.h): the library's own output goes nowhere near allocbench's. */
extern FILE *ab_run_notes;

/* Says on ab_run_notes, once per command, which device `--device auto` chose. */
void ab_run_note_device(const ab_run_spec_t *o, const char *name, ab_device_kind_t kind);
/* Whether it was said (a supervised run's process says it for the command, supervise.h). */
extern bool ab_run_device_said;

/* Builds the workload spec with the run's seed, stopping at ab_run_stop (workload.h). A trace
 * is read knowing the cap the program ran under (o->cap, else -c's per_process_memory_fraction)
 * and the card of o->device (trace.h); what its reader found goes to info (may be NULL). */
ab_status ab_run_build(const ab_run_spec_t *o, const char *spec, ab_events_t *es, ab_trace_info_t *info, ab_diag_t *diag);
/* The card's total of o->device, as a run opens it. */
ab_status ab_run_card_total(const ab_run_spec_t *o, uint64_t *total, ab_diag_t *diag);
/* Makes a cap given as a fraction of the card (o->cap_fraction) bytes, as PyTorch makes
 * set_per_process_memory_fraction's cap: (size_t)(fraction * total). AB_OK when there is none. */
ab_status ab_run_resolve_cap(ab_run_spec_t *o, ab_diag_t *diag);
/* What a trace's reader is told of the run (trace.h): the card of o->device, and the cap the
 * program ran under: --cap, else -c's per_process_memory_fraction of that card; 0: none. */
ab_status ab_run_trace_limits(const ab_run_spec_t *o, uint64_t *cap, uint64_t *card, ab_diag_t *diag);

/* Runs one strategy over es on a fresh device (under o's budget or, when o has none, the
 * stream's suggested budget) and adds its summary row to summary (columns ab_summary_cols).
 * The run keeps its results. At an OOM the segment map is written to
 * DIR/oommap_<workload>_<strategy>.csv and the OOM report (oommap.h) goes to ab_run_notes unless
 * quiet. AB_OK when the run completed or ended in OOM; otherwise the row says error and diag
 * says why. A run stopped by a signal (run->status interrupted) adds no row and returns
 * AB_OK. band, when not NULL, gets the run's placement band, as its row gives it. */
ab_status ab_run_one(const ab_run_spec_t *o, const ab_events_t *es, const char *strategy, ab_run_t *run,
                     ab_table_t *summary, ab_band_t *band, ab_diag_t *diag);

/* The search options of o for one strategy of the list (device, faults, check). */
ab_bisect_opts_t ab_run_search_opts(const ab_run_spec_t *o, const ab_bisect_opts_t *search, const char *strategy,
                                    const char *conf);

/* The child's side of a library's run, made in a process of its own (ab_run_one,
 * Note [A library in a process of its own], supervise.h): reads the job, runs, writes the
 * results; whether they were written whole. */
bool ab_run_one_child(ab_supervise_child_t *c);

#endif
