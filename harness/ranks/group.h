/* group.h: the ranks of a multi-rank run (ranks.h) as one group: they keep in lockstep at
 * every collective, and each hands in its result when its run ends.
 *
 * Note [Ranks in lockstep]
 * An NCCL collective completes only once every rank has launched it. A rank that ends early
 * (an OOM, an error) would leave its peers' collectives waiting on their devices for ever,
 * and with them their next call that waits for the device (cudaFree, a synchronisation, the
 * end of the run). In one process it is worse: the driver serialises some calls across
 * devices (allocation and mapping calls wait for the device while holding a process-wide
 * lock), so a rank blocked in cudaFree behind its own collective can keep another rank from
 * ever reaching the matching launch (NCCL's documented "concurrency between NCCL and CUDA
 * calls" hazard). So the engine brackets every collective with two barriers of the group:
 *   ENTER     every rank has come to this collective and none has left: all launch it. If
 *             one has left (failed, or ended), all stop here, before launching it, and no
 *             device holds a collective that no peer will match.
 *   LAUNCHED  every rank has launched it (or failed to): only now may a rank make a call
 *             that waits for its device. If a launch failed, some devices hold a collective
 *             that will never be matched: every rank aborts its communicator (ncclCommAbort
 *             ends the collective on the device) and stops.
 * Between the two a rank does nothing but the launch. A rank that ends, for any reason,
 * leaves the group with its result (ab_group_leave), after its own run has finished and
 * freed what it held; the others stop at their next ENTER with status "stopped", naming the
 * rank and what happened to it. So an OOM on one rank is reported for that rank, and
 * nobody hangs.
 * The barriers are on the host: device work stays queued behind them. They cost two meetings
 * of the ranks' threads per collective (microseconds), or two round trips to rank 0's
 * process (link.h).
 *
 * Every wait at a barrier is bounded (Note [Bounded waits], kernels/kernels.h): a rank that
 * waited waits.collective_s for the others, or was interrupted (*waits.stop), gives up with
 * AB_VERDICT_FAIL, naming the collective and the ranks it waited for, and the others are
 * told to stop and abort.
 *
 * Implementations: ranks as threads of one process (ab_group_threads, group.c) and ranks as
 * processes of a launch, through rank 0 over their link (ab_group_link, group_link.c; link.h).
 * Every rank must make the same collectives in the same order; ranks.h checks the streams
 * before they run.
 *
 * Thread-safety: arrive and leave are called by each rank's own thread; results once every
 * rank has left.
 */
#ifndef AB_GROUP_H
#define AB_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "harness/run/engine.h"

/* What a rank hands in when its run ends. */
typedef struct ab_rank_result_s {
  ab_run_t run;            /* its results; the scratch pointers (ptr, timeline, step_ms) are NULL */
  uint64_t events;         /* events in its stream */
  uint64_t live_peak;      /* the most bytes its stream has live at once */
  uint64_t budget_bytes;   /* the budget it ran under */
  char workload[256];      /* its workload spec, which names the rank */
  char device[96];         /* what it ran on */
  ab_status status;        /* what its run returned (ab_run_one) */
  char diag[AB_DIAG_BYTES]; /* why, when status is not AB_OK */
} ab_rank_result_t;

typedef struct ab_group_s ab_group_t;

/* What a rank does after a barrier. */
typedef enum ab_verdict_e {
  AB_VERDICT_GO,    /* every rank is here: go on */
  AB_VERDICT_STOP,  /* stop before launching: every collective launched so far was launched
                     * by every rank, so nothing is left unmatched on a device */
  AB_VERDICT_ABORT, /* stop and abort the communicator: a device may hold a collective some
                     * rank never launched (a launch failed, a rank vanished or gave up) */
  AB_VERDICT_FAIL,  /* this rank gave up waiting (deadline or signal): abort, and its run
                     * fails with why */
} ab_verdict_t;

typedef struct ab_group_ops_s {
  /* Rank `rank` is at a collective (Note [Ranks in lockstep]); what names it in messages
   * ("collective 12 of 40 (allgather of 8 MiB per rank, event 3456)"). Anything but GO comes
   * with the reason in why. */
  ab_verdict_t (*arrive)(ab_group_t *g, unsigned rank, ab_lockstep_t phase, const char *what, char *why, size_t size);
  /* Rank `rank` has ended, with res (copied). It does not wait for the others: a rank's
   * communicator must be free to be torn down while its peers still collect results
   * (ab_comm_destroy waits for every rank's). */
  void (*leave)(ab_group_t *g, unsigned rank, const ab_rank_result_t *res);
  /* Every rank's result, in rank order, into all[0..size), waiting (boundedly) for those
   * still running. *have is false where another process collects them (a rank other than 0
   * of a launch); there AB_ERR_IO says that rank 0 could not be reached before it had this
   * rank's result. */
  ab_status (*results)(ab_group_t *g, ab_rank_result_t *all, bool *have, ab_diag_t *diag);
  void (*destroy)(ab_group_t *g);
} ab_group_ops_t;

struct ab_group_s {
  const ab_group_ops_t *ops;
  unsigned size; /* ranks in the group */
};

/* A group of `size` ranks, each a thread of this process; w is copied. */
ab_status ab_group_threads(unsigned size, const ab_waits_t *w, ab_group_t **out, ab_diag_t *diag);

typedef struct ab_link_s ab_link_t;
/* The group of the processes of l, this one rank l->rank of l->world, with l's waits at its
 * barriers; l must outlive it. */
ab_status ab_group_link(ab_link_t *l, ab_group_t **out, ab_diag_t *diag);

/* "rank 1", "ranks 1 and 3", "ranks 1, 3 and 4", ... of the ranks r < n with pick[r] set,
 * into buf (a long list is cut, with the count). */
void ab_rank_list(const bool *pick, unsigned n, char *buf, size_t size);

/* Why the others stop when this rank leaves: "rank 1 ran out of memory at event 812
 * (capacity)", "rank 0 failed: ...", "rank 2 reached the end of its stream". */
void ab_rank_failure(const ab_rank_result_t *res, unsigned rank, char *why, size_t size);

#endif
