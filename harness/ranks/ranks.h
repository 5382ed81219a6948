/* ranks.h: the zero workload as N data-parallel ranks at once (`allocbench run --ranks`),
 * each rank with its own device, strategy instance and event stream (zero's world=N,
 * rank=r), and the stream's collectives run for real between them.
 *
 * Two ways to run:
 *   --ranks N    N threads of this process. Rank r runs on the r-th GPU from the one --device
 *                names (cuda: cuda:0 to cuda:N-1; cuda:K: from cuda:K), with NCCL
 *                communicators made together in one NCCL group; or each rank on a simulated card of its
 *                own (--device sim[:PROFILE]), where collectives move nothing (the card has
 *                no memory to move) but the ranks keep the same lockstep as on GPUs.
 *   --ranks env  one rank per process, started by a launcher (launch.h: mpirun, srun, torchrun)
 *                and joined through its engine (link.h): rank r of the launch's world on the
 *                GPU of its rank on its host, its communicator from ncclCommInitRankConfig with
 *                the id rank 0 handed out at the meeting. Rank 0 writes every rank's rows.
 * --ranks 1 runs the same path with one rank (a communicator of one GPU).
 *
 * Only zero makes collectives, so only zero runs with --ranks; other workloads are refused
 * (replicated, they would only repeat the one-GPU run N times). world= and rank= come from
 * --ranks: a world= that disagrees, and any rank=, are refused. A library (-s pluggable:PATH)
 * is refused: its every run is made in a process of its own (supervise.h), and the ranks share
 * this one.
 *
 * Before anything runs: the strategy and its -c options are tried on a simulated card; the
 * streams are checked, every collective's full buffer holding world x its bytes per rank
 * (NCCL's contract, which the events alone cannot check), and every rank making the same
 * collectives, kinds and sizes, in the same order (a launched rank sends a digest of them to
 * rank 0 at the meeting).
 *
 * One rank failing (Note [Ranks in lockstep], group.h): its own row says what happened (oom,
 * with where and the kind; or error); the other ranks stop at their next collective, with
 * status stopped. An OOM is a result: the command exits 0, as for one rank; an error exits
 * non-zero. A rank that waited longer than r->waits allows (Note [Bounded waits],
 * kernels/kernels.h) fails with AB_ERR_IO, naming the collective and the ranks it waited for.
 * When *r->waits.stop is set (a signal), the ranks stop at their next wait or collective and
 * ab_ranks_run returns AB_ERR_IO with diag saying what this process waited for.
 *
 * Results: one summary row per rank, its workload column its own spec (ending in
 * world=N,rank=r), then the combined row (ab_ranks_combine). NCCL's device memory is in
 * nccl_bytes, per rank (measured on its GPU) and summed in the combined row.
 */
#ifndef AB_RANKS_H
#define AB_RANKS_H

#include "harness/ranks/group.h"
#include "harness/ranks/launch.h"
#include "harness/ranks/link.h"
#include "harness/run/run_one.h"
#include "harness/run/table.h"

#define AB_RANKS_MAX 1024 /* ranks as threads of one process */

typedef struct ab_ranks_opts_s {
  unsigned n;                /* --ranks N: ranks as threads; 0 with link */
  ab_link_t *link;           /* --ranks env: this process's launch, opened by the caller; NULL with n */
  const char *nccl;          /* NCCL's path (--nccl, AB_NCCL_LIBRARY); NULL: search */
  ab_waits_t waits;          /* every wait's bound, and the stop flag (Note [Bounded waits]) */
  FILE *say;                 /* where the meeting says what it waits for; NULL: quiet */
} ab_ranks_opts_t;

/* Runs o->workload (zero) as the ranks of r, o->strategy on each rank, and adds the rows,
 * each rank's and the combined one, to summary where this process reports them (a launched
 * rank other than 0 adds none). results, when not NULL, receives every rank's result (n, or
 * WORLD_SIZE of them) where the rows are added; *nresults says how many (0 elsewhere).
 * Returns AB_OK when every rank ran to its end, to an OOM or to a stop; else the status of
 * the first rank that failed, with diag naming it. AB_ERR_INVALID before anything ran for
 * bad arguments (the workload, -c, the streams, --device, --faults). */
ab_status ab_ranks_run(const ab_run_spec_t *o, const ab_ranks_opts_t *r, ab_table_t *summary, ab_rank_result_t *results,
                       unsigned *nresults, ab_diag_t *diag);

/* Checks a rank's stream for a world of `world` ranks: every collective's full buffer holds
 * world x its bytes per rank (AB_ERR_INVALID naming the event otherwise). *digest receives
 * a digest of the stream's collectives, their kinds and sizes in order, equal for streams
 * that make the same collectives. */
ab_status ab_ranks_check_stream(const ab_events_t *es, unsigned world, uint64_t *digest, ab_diag_t *diag);

/* Adds the combined row of n ranks' results to summary (columns ab_summary_cols):
 *   workload      the spec with rank=all; device "N x CARD" (rank 0's card)
 *   status        ok when every rank was ok; else error if a rank failed, else oom (with the
 *                 oom_kind and oom_event of the first rank that ran out of memory)
 *   peaks, counts summed over the ranks (ab_stats_merge): the sum of each rank's peak, which
 *                 bounds the peak of the ranks' total and is what the N cards held between
 *                 them at worst; events, device calls, retries, OOMs, kernel time,
 *                 nccl_bytes and, when every rank has them, the plan columns summed
 *   latencies     percentiles over every rank's calls (the histograms merged)
 *   wall_s, step_ms_p50  the slowest rank's (the job runs at its pace); events_per_s the
 *                 ranks' events over that wall time */
ab_status ab_ranks_combine(ab_table_t *summary, const ab_run_spec_t *o, const ab_rank_result_t *results, unsigned n);

#endif
