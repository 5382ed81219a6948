/* tune_job.h: a tuning job, whole: the traces `allocbench tune` is given (one, or one per rank
 * of a torchrun job), the grid of tune_grid.h run on each in its two stages (tune.h), spread
 * over the ranks of a launch, every configuration judged by its worst trace, ranked, and the
 * recommendation; then the rows of tune.csv and the data of the figures. The command line
 * (harness/cli/cmd_tune.c) parses the request into one ab_tune_request_t and prints the answer
 * from the ab_tune_job_t this fills.
 *
 * Note [A job of several traces]
 * A torchrun job records one snapshot per rank, and PYTORCH_CUDA_ALLOC_CONF is one setting
 * for all of them. Given several traces (-w repeated, or a glob in replay:PATTERN), every
 * configuration is run on each of them, under the same cap (a cap is per process, so per
 * rank), and it is judged by its worst trace: the one whose result ranks last by the
 * objective (ab_tune_compare: an OOM first, then the highest peak reserved, or the largest
 * smallest cap). The configurations are ranked by those worst results, the second stage of
 * the grid combines the best of each family by them, and the winner is the setting whose worst
 * rank is best: the rank that runs out of memory first decides whether the job does.
 * tune.csv keeps every trace's row; the table shows each configuration's worst. Traces alike
 * are replayed once (tune.h, Note [Traces alike]), and files of the same bytes read once.
 *
 * Under a launcher (mpirun, srun, torchrun) every rank reads the job and lists the same
 * configurations; the runs, each configuration on each distinct trace, are dealt out between
 * the ranks; each stage's results come together at rank 0 (the first stage's go back to every
 * rank, whose second stage they decide), and rank 0 ranks them and writes what one process
 * would write.
 *
 * Note [Headroom]
 * Under the job's cap, a setting whose safe cap (Note [Cap map], bisect.c) is the cap itself,
 * or above it, completes only by a hair: caps a little different fail, and a job's memory
 * moves from run to run (the driver's placement, a library's workspace). The headroom is the
 * cap less the safe cap (less the smallest cap, where the caps were not mapped). The
 * recommendation is the best by the objective among the settings with at least
 * AB_TUNE_HEADROOM_PCT of the cap as headroom, where any has it, and says whom it passed over
 * and why.
 *
 * Note [Bands where the answer rests]
 * A safe cap is checked under the placement variants by walking each variant's cap intervals
 * up from it (Note [A safe cap across the band], bisect.c). Where the map's runs are alike
 * under every variant the map answers the walks, at no cost (Note [Walks the map answers]);
 * elsewhere the walks replay, and on recorded jobs they cost three to four times the maps
 * themselves (the ResNet-50 job: 55 M of the 76 M events that tune replayed, every row
 * walked), while tune needs them only where its answer deploys a safe cap. So every
 * configuration's cap map is walked under the card's rules, and the variants are walked, where
 * the map does not answer them, for the configurations the answer names: the recommendation,
 * and the one it was preferred to for its headroom. A walk can only raise a safe cap, which can change the choice (less
 * headroom; under --objective budget, a worse rank), so the choice is made again after each
 * walk, until the configurations it names have all been walked. The winner is then right:
 * every other configuration's true safe cap is at least the one it was ranked by. The other
 * rows the map does not answer give the safe cap under the card's rules, and their note says
 * "placements not checked"; `allocbench oom --search cap -c CONF` walks them all.
 *
 * Ownership: the job owns its traces, their events and results, and the ranked results;
 * ab_tune_job_free releases them. The request and the spec are the caller's: the job keeps
 * the spec's device name (in opts), which must outlive it.
 * Statuses: AB_OK, or the first error with diag set: AB_ERR_INVALID for input the user is to
 * change (a pattern that matches nothing, a trace given twice, a cap above the card, a strategy
 * the device refuses), otherwise the error of what failed; job->step says which step it was.
 * A signal (ab_run_stop) stops the runs (tune.h): the job then ends with its results partial
 * and not ranked. What the job says as it goes (progress, warnings) goes to stderr, each line
 * "CMD: ..." (the spec's cmd), unless the spec is quiet; at ranks other than 0, never.
 * Thread-safety: the main thread only; the runs use threads of their own (tune.h).
 */
#ifndef AB_TUNE_JOB_H
#define AB_TUNE_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "workloads/events/events.h"
#include "harness/run/run_one.h"
#include "harness/run/table.h"
#include "harness/tune/tune.h"
#include "harness/tune/tune_grid.h"

/* The least headroom, in percent of the cap, of a comfortable setting (Note [Headroom]). */
#define AB_TUNE_HEADROOM_PCT 2

/* The ranks of a launch between which the runs are dealt out
 * (Note [A job of several traces]). This layer does not link the ranks' (harness/ranks,
 * beside it): the command line brings them (harness/cli/spread.h). Without join (NULL) the process
 * is alone, rank 0 of 1; meet and share are called only where join said there are several,
 * and must then be set. */
typedef struct ab_tune_ranks_s {
  void *ctx;
  /* Joins the launch this process belongs to, if any: its rank, how many ranks, and how many
   * of them run on this host (they share its cores). */
  ab_status (*join)(void *ctx, unsigned *rank, unsigned *world, unsigned *local, ab_diag_t *diag);
  /* Every rank is about to make the same runs, digest what they are: a rank given other
   * arguments or files is refused. quiet: say nothing of the wait. */
  ab_status (*meet)(void *ctx, uint64_t digest, bool quiet, ab_diag_t *diag);
  /* items[0..n), size bytes each, item i rank (i mod world)'s, each rank having filled its
   * own: afterwards rank 0 holds them all, and so does every rank when to_all. what names
   * them in messages. */
  ab_status (*share)(void *ctx, void *items, size_t n, size_t size, bool to_all, const char *what, ab_diag_t *diag);
} ab_tune_ranks_t;

/* What the command line asks of the job; the spec (run_one.h) says the rest: the device,
 * the cost model, --check, quiet, and how a trace is read (ab_run_build). */
typedef struct ab_tune_request_s {
  const char *const *workloads;  /* each -w as given, in order; a replay:PATTERN with a wildcard
                                  * that names no file is expanded here (glob); not owned */
  size_t nworkloads;
  const char *const *references; /* -s: more strategies tried for reference, registry names; not owned */
  size_t nreferences;
  ab_tune_objective_t objective;
  uint64_t cap;                  /* --cap in bytes; 0: not given (the recorded fraction, if any, caps) */
  unsigned jobs;                 /* --jobs: worker threads; 0: the host's cores over its ranks */
  unsigned map_probes;           /* --cap-map N: replays per cap map at most (0: no limit) */
  bool no_map;                   /* --cap-map off: caps bisected, not mapped */
} ab_tune_request_t;

/* One trace of the job. */
typedef struct ab_tune_job_trace_s {
  char *spec;           /* the -w it runs, a glob expanded; owned */
  uint64_t dev, ino;    /* a replay's file, to know it by any path (0, 0: none) */
  ab_events_t es;       /* its events; es.source the name people read */
  ab_trace_info_t info; /* a replay's: what its reader found (zero for a workload) */
  bool built;
  bool borrowed;        /* es's arrays are an earlier trace's, read from a file of the same bytes */
  ab_tune_result_t *r;  /* each configuration's result on this trace, by its place in the grid; owned */
  ab_addr_hint_t *plan; /* the recorded run's addresses, for the recorded configuration; may be NULL; owned */
  size_t plan_len;
} ab_tune_job_trace_t;

/* How far the job went: where it failed, or DONE. */
typedef enum ab_tune_step_e {
  AB_TUNE_STEP_LIST,  /* the -w options expanded into traces, the ranks joined */
  AB_TUNE_STEP_BUILD, /* the traces read or generated (ab_run_build) */
  AB_TUNE_STEP_SETUP, /* the device, the recorded configuration, the cap */
  AB_TUNE_STEP_RUNS,  /* the grid run on every trace, over the ranks, and ranked */
  AB_TUNE_STEP_DONE,
} ab_tune_step_t;

typedef struct ab_tune_job_s {
  ab_tune_step_t step;
  /* The traces. */
  ab_tune_job_trace_t *t; /* owned */
  size_t n, room;         /* traces, and room for them */
  char name[512];         /* the workload column and the headings: the trace's name, or the -w as given */
  ab_tune_trace_t *tt;    /* each trace as tune.h takes it: its digest, the first alike (Note [Traces alike]); owned */
  size_t distinct;        /* traces not alike an earlier one */
  unsigned rank, world;   /* this process's rank of the launch, and how many (0 and 1 alone) */
  unsigned local;         /* the launch's ranks on this host (1 alone) */
  /* The setup: the recorded configuration (the first trace's), the device and the cap. */
  char recorded_conf[AB_TUNE_CONF_BYTES]; /* the recorded conf without its memory fraction */
  char fraction[64];                 /* the recorded per_process_memory_fraction item, as written; "" for none */
  char device[96];                   /* the card, as the rows name it */
  uint64_t total;                    /* the card's bytes */
  uint64_t cap;                      /* every run's cap: --cap, or the recorded fraction's; 0: none */
  unsigned jobs;                     /* worker threads of each stage; 0: one per core */
  bool addresses;                    /* the recorded configuration's runs take the recorded addresses */
  ab_tune_objective_t objective;
  ab_tune_opts_t opts;               /* every run's options, as the figures' runs take them too */
  /* The results, rank 0's. */
  ab_tune_list_t list;               /* the configurations tried, both stages */
  ab_tune_result_t *ranked;          /* each configuration as its worst trace's result, ranked; list.n; owned */
  const ab_tune_result_t *winner;    /* in ranked: the recommendation; NULL: none ran the whole job */
  const ab_tune_result_t *recorded;  /* in ranked: the recorded configuration; may be NULL */
  const ab_tune_result_t *tight;     /* in ranked: first by the objective, passed over for its headroom; may be NULL */
  double t0;                         /* ab_clock_s when the runs began */
  uint64_t replayed;                 /* events this process's runs replayed (ab_tune_opts_t.replayed) */
} ab_tune_job_t;

/* Runs the job of req into job (zeroed by the caller): lists and reads its traces, joins the
 * ranks (ranks may be NULL: alone), sets up the device and the cap, runs both stages of the
 * grid on every distinct trace and, at rank 0, ranks the configurations by their worst trace
 * and picks the recommendation (Note [Headroom]). A rank other than 0 returns once its share
 * of the runs is done and sent. With ab_run_stop set once the runs began (job->step RUNS or
 * DONE), whatever the status, the job was stopped: its results are not to be reported. */
ab_status ab_tune_job_run(ab_tune_job_t *job, const ab_run_spec_t *o, const ab_tune_request_t *req,
                          const ab_tune_ranks_t *ranks, ab_diag_t *diag);
void ab_tune_job_free(ab_tune_job_t *job);

/* The cap less r's deployable cap (ab_tune_deployable), signed (Note [Headroom]); false when
 * the job has no cap or no cap completed. */
bool ab_tune_job_headroom(const ab_tune_job_t *job, const ab_tune_result_t *r, int64_t *headroom);

/* What qualifies r, a result on trace k, in words ("" when nothing does): an error, an OOM,
 * a cap map's ranges and how far it went, a safe cap whose placements were not walked, a bound
 * rather than a prediction. brief: for the table, where a width is kept, the walks are said
 * only beside a safe cap that differs from the smallest. */
void ab_tune_job_note(const ab_tune_job_t *job, size_t k, const ab_tune_result_t *r, bool brief, char *out, size_t size);

/* tune.csv's rows into rows (initialised here; the caller frees it): one per configuration
 * tried and trace, in rank order (harness/README.md, "Recording a job, and tuning its
 * settings"). */
ab_status ab_tune_job_rows(const ab_tune_job_t *job, ab_table_t *rows);

/* The data of the figures (tune_figures.h) into dir: the recorded configuration against the
 * recommended one, on every trace. Nothing when the job has no recorded configuration. */
ab_status ab_tune_job_figures(const ab_tune_job_t *job, const char *dir, bool *interrupted, ab_diag_t *diag);

/* A trace's name as the table and the progress show it: without the replay: every trace has. */
static inline const char *ab_tune_job_short_name(const char *name) {
  return strncmp(name, "replay:", 7) == 0 ? name + 7 : name;
}

#endif
