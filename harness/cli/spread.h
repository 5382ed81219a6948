/* spread.h: the runs of `tune` and `matrix` spread over the ranks of a launch. Under mpirun,
 * srun or torchrun each process is one rank (harness/ranks/launch.h, Note [Which launcher]);
 * every rank reads the same input and lists the same runs, run i is rank (i mod world)'s, and
 * the results come together at rank 0 (harness/ranks/link.h), which writes them as one process
 * would. A process no launcher started, or the only one of its launch, is alone: every run
 * is its own.
 *
 * Statuses: as link.h's; a wait at the gathering is bounded by AB_RESULTS_TIMEOUT and ends at
 * once on a signal (ab_run_stop).
 * Thread-safety: the main thread only.
 */
#ifndef AB_SPREAD_H
#define AB_SPREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness/ranks/link.h"

typedef struct ab_spread_s {
  const char *say_as;   /* the command, in what a long wait says (NULL: quiet); set before ab_spread_open */
  ab_link_t *link;      /* NULL: alone */
  unsigned rank, world; /* 0 and 1 when alone */
  unsigned local;       /* the launch's processes on this host (1 when alone) */
} ab_spread_t;

/* Joins the launch this process belongs to, if any (the launcher's variables), within
 * AB_RENDEZVOUS_TIMEOUT. */
ab_status ab_spread_open(ab_spread_t *sp, ab_diag_t *diag);
/* Leaves it; clean when nothing went wrong that the others may wait on. */
void ab_spread_close(ab_spread_t *sp, bool clean);

/* Whether run i is this rank's. */
static inline bool ab_spread_mine(const ab_spread_t *sp, size_t i) { return i % sp->world == sp->rank; }

/* Every rank is about to make the same runs: digest says what they are (ab_link_meet), so
 * that a rank given other arguments or other files is refused rather than mixed in. */
ab_status ab_spread_meet(const ab_spread_t *sp, uint64_t digest, const char *prog, bool quiet, ab_diag_t *diag);

/* items[0..n), size bytes each, item i rank (i mod world)'s: each rank has filled its own;
 * afterwards rank 0 holds them all, and so does every rank when to_all. what names them in
 * messages ("tune's runs"). */
ab_status ab_spread_share(const ab_spread_t *sp, void *items, size_t n, size_t size, bool to_all, const char *what,
                          ab_diag_t *diag);

#endif
