/* tune.h: the runs behind `allocbench tune`: each configuration of a grid (tune_grid.h) over
 * one event stream, spread over threads, and their ranking.
 *
 * For each configuration, one run (peak reserved, device allocations), under the job's memory
 * cap when there is one, and the search of the smallest budget (bisect.h): in cap mode for
 * the caching configurations (PyTorch's set_per_process_memory_fraction, as the user would
 * bisect it), in budget mode (a card of that size) for the reference strategies, which have
 * no cap. Without a cap the run is the search's own unbudgeted probe, not a second replay. On
 * the simulated card the run is kept at a few places as it goes, and the search's probes go on
 * from them (Note [A prefix shared], prefix.h).
 *
 * Threads: each worker prepares one ab_run_t and takes the next configuration until none is
 * left; every run opens its own device and strategy through the pipeline (pipeline.h), and the
 * events are only read, so nothing else is shared (events.h). A configuration whose runs fail
 * with an error (not an OOM, which is a result) says so in its result; the others go on.
 * On a real GPU the runs would share its memory, so the caller asks for one worker there.
 *
 * Stopping: with *stop set, the run in progress stops within 64k events and no further
 * configuration starts; the results of those stopped say interrupted.
 */
#ifndef AB_TUNE_H
#define AB_TUNE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/device/device.h"
#include "workloads/events/events.h"
#include "harness/run/band.h"
#include "harness/run/bisect.h"
#include "harness/run/engine.h"
#include "harness/tune/tune_grid.h"

typedef enum ab_tune_objective_e {
  AB_TUNE_RESERVED, /* the lowest peak reserved bytes of the run */
  AB_TUNE_BUDGET,   /* the smallest cap (or budget) the stream runs under */
  AB_TUNE_TIME,     /* the least allocator time over the job (Note [Allocator time], tune.c) */
} ab_tune_objective_t;

/* PyTorch's caching allocator's own host time per allocation or free, outside device calls:
 * the median of 21 warm passes of torch_compare (results/h200/torch_compare: a random
 * sequence of 200 000 operations on an H200, PyTorch 2.11, its defaults; 365 ns under
 * max_split_size_mb:128, 436 ns under expandable_segments:True). */
#define AB_TUNE_HOST_NS_PER_OP 387.0

typedef struct ab_tune_result_s {
  ab_tune_candidate_t cand;
  size_t order;              /* its place in the grid: ties go to the earlier (simpler) one */
  size_t alike;              /* the configuration (its order) whose runs these are: its own order, or
                              * an earlier one's alike it on this trace (Note [Settings alike]) */
  ab_run_status_t status;    /* of the run: ok, oom (under the cap, or on the card), error, interrupted */
  char message[AB_DIAG_BYTES]; /* the error, when status is error */
  ab_oom_kind_t oom_kind;    /* of the run's OOM; none when it completed */
  ab_stats_t stats;          /* of the run, at its end or its OOM */
  ab_band_t band;            /* the run's placement band (band.h); ranked by its worst end */
  ab_bisect_result_t search; /* the smallest budget */
  double wall_s;             /* host time of the run and the search */
  double alloc_time_s;       /* the allocator's time over the job (Note [Allocator time], tune.c);
                              * < 0: not modelled (a library's run, in a process of its own) */
  size_t rank;               /* 1-based, set by ab_tune_rank */
  size_t trace;              /* of a job of several traces tuned together: which one these figures are
                              * of (its worst, tune_job.h); 0 otherwise */
} ab_tune_result_t;

/* Whether r's run completed under every placement of its band: a setting that runs out of
 * memory under one ranks after those that complete, and is never recommended. */
bool ab_tune_completes(const ab_tune_result_t *r);

/* The most replays a configuration's cap map may take in tune by default (Note [Cap map],
 * bisect.c; --cap-map); beyond them its caps are bisected and its row says so. Most settings
 * of a recorded job map in a few dozen intervals; max_split_size_mb settings can take
 * thousands, each a replay, which `allocbench oom --search cap` walks in full. */
#define AB_TUNE_MAP_PROBES 128

typedef struct ab_tune_opts_s {
  const char *device;        /* a device spec (device_open.h) */
  ab_device_config_t dev;    /* the cost model; budgets are set per run */
  uint64_t cap;              /* the job's memory cap in bytes; 0: none */
  unsigned map_probes;       /* each configuration's cap map: at most this many replays (0: no limit) */
  bool no_map;               /* bisect the caps instead of mapping them */
  bool check;                /* the strategy's invariant checks after every event */
  unsigned jobs;             /* worker threads; 0: one per core online */
  const volatile sig_atomic_t *stop; /* may be NULL */
  /* The recorded run's cudaMalloc addresses (Note [Recorded addresses], cmd_replay.c), taken
   * by the recorded configuration's runs; NULL: none, or the cap is not the recorded one. */
  const ab_addr_hint_t *plan;
  size_t plan_len;
  /* Called as each configuration is done, one call at a time; may be NULL. */
  void (*on_done)(void *ctx, const ab_tune_result_t *r, size_t done, size_t total);
  void *on_done_ctx;
  uint64_t *replayed;        /* the runs add the events they replayed here (ab_run_t.replayed), but
                              * a library's, in a process of its own; may be NULL */
} ab_tune_opts_t;

/* One trace of a job (one per rank of a torchrun job, say), as tune runs it. */
typedef struct ab_tune_trace_s {
  const ab_events_t *es;
  const char *name;           /* as tune.csv names it */
  const ab_addr_hint_t *plan; /* its recorded addresses (tune.h); NULL: none */
  size_t plan_len;
  uint64_t digest;            /* of what its runs replay (ab_tune_alike) */
  size_t same;                /* the first trace alike it (ab_tune_alike); its own index when none */
} ab_tune_trace_t;

/* Note [Traces alike]
 * A data-parallel job's ranks mostly make the same requests: replayed alike, their traces give
 * the same figures under every configuration. So each configuration runs once per distinct
 * trace, and a trace alike an earlier one takes that one's results (its own name in the rows).
 * Alike: the same events and kernels (compared whole where the digests agree), the same OOMs
 * the program caught (the search's bounds depend on them) and the same recorded addresses (the
 * recorded configuration's runs take them). The digest: ab_events_hash, mixed with the caught
 * OOMs and the addresses. Names, call stacks and the recorded settings may differ: they change
 * what is said about a trace, not what its runs do. */

/* Fills each trace's digest and same. */
void ab_tune_alike(ab_tune_trace_t *traces, size_t n);

/* Note [Settings alike]
 * Two caching configurations that round every request of a trace to the same size make the
 * same decisions on it (ab_caching_conf_alike_but_rounding, caching_conf.h): a
 * roundup_power2_divisions setting acts only on the sizes it covers, so on a trace with no
 * request there (the list form [256:1,512:2,1024:4,>:8] rounds nothing below 512 MiB more
 * than the defaults do) it is the defaults, and its runs would replay the same decisions. So
 * they are made once: the later configuration takes the earlier one's results, and its row
 * says whose. The sizes are compared at every allocation of the trace, so the two are alike
 * exactly, never by a sample; the recorded configuration, whose runs take the recorded
 * addresses where the trace has them, is alike only another that takes them. */

/* For each configuration i of c[0, n), same[i]: the first configuration alike it on es
 * (Note [Settings alike]), i itself where none is; plan says whether the recorded
 * configuration's runs take recorded addresses. */
void ab_tune_settings_alike(const ab_events_t *es, const ab_tune_candidate_t *c, size_t n, bool plan, size_t *same);

/* Fills each r[i].cand (from cands), order and results. AB_OK once every configuration has
 * its result (errors included); AB_ERR_INTERNAL when not even one worker could start. */
ab_status ab_tune_run(const ab_events_t *es, const ab_tune_candidate_t *cands, size_t n, size_t first_order,
                      const ab_tune_opts_t *o, ab_tune_result_t *r, ab_diag_t *diag);

/* A task of ab_tune_each: task i, with the calling thread's run, prepared for the events. */
typedef void (*ab_tune_task_fn)(void *ctx, size_t i, ab_run_t *run);

/* Calls fn(ctx, i, run) for every i of [0, n), in order of i, spread over up to o->jobs
 * threads (0: one per core online), this thread among them; each thread prepares one run
 * for es and passes it to its every task, and adds what it replayed to o->replayed. false
 * when no thread could prepare its run (the host's memory), and so no task ran. */
bool ab_tune_each(const ab_events_t *es, size_t n, const ab_tune_opts_t *o, ab_tune_task_fn fn, void *ctx);

/* Walks the placement variants of each r[i]'s safe cap, left by its search
 * (Note [Bands where the answer rests], tune_job.h), spread over o's threads, and merges them
 * into its result (ab_bisect_band_merge); a walk that fails with an error makes its result's
 * status error, with the message. AB_ERR_INTERNAL when the host has no memory for them. */
ab_status ab_tune_walk_bands(const ab_events_t *es, const ab_tune_opts_t *o, ab_tune_result_t **r, size_t n,
                             ab_diag_t *diag);

/* Whether r's safe cap awaits its walks under the placement variants (ab_tune_walk_bands). */
bool ab_tune_band_pending(const ab_tune_result_t *r);

/* The options of a run of configuration c under o (its device, its recorded addresses, a cap
 * for the caching strategy and a budget for the others), as every run of ab_tune_run has them;
 * the caller adds what it watches (on_probe, map). */
void ab_tune_probe_opts(const ab_tune_opts_t *o, const ab_tune_candidate_t *c, ab_bisect_opts_t *b);

/* The cap (or budget) to deploy r under: its safe cap where its caps were mapped (every cap
 * from it up completes), else the smallest found; UINT64_MAX when none was. */
uint64_t ab_tune_deployable(const ab_tune_result_t *r);

/* <0 when a ranks before b by the objective: runs that completed first, then the objective's
 * figure (for budget, ab_tune_deployable), then the other figure; where both tie, the earlier
 * in the grid, the simpler setting (a setting is recommended only for the memory it saves). */
int ab_tune_compare(const ab_tune_result_t *a, const ab_tune_result_t *b, ab_tune_objective_t objective);

/* Sorts r by ab_tune_compare and numbers the ranks from 1. */
void ab_tune_rank(ab_tune_result_t *r, size_t n, ab_tune_objective_t objective);

/* The index in r of the best-ranked result of each family that ran to its end (SIZE_MAX for
 * none), for the second stage of the grid; r need not be sorted. */
void ab_tune_best_of_families(const ab_tune_result_t *r, size_t n, ab_tune_objective_t objective,
                              size_t best[AB_TUNE_FAMILIES]);

#endif
