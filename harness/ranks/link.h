/* link.h: the processes of one launched job (launch.h) and the messages between each of them
 * and rank 0, over the launcher's own engine: MPI under mpirun and srun, torchrun's store
 * (store.h) under torchrun. On it: the ranks' meeting, the lockstep of a run of several ranks
 * (group.h, ab_group_link) and the gathering of tune's and matrix's shares of runs.
 *
 * Note [Messages through rank 0]
 * Every message goes between rank 0 and another rank; none between two others. Rank 0 hears
 * each rank in turn and answers: the lockstep's verdicts (group.h) are decided in one place,
 * and a rank that has left (ended its run, failed) sends its result where the others would
 * have sent their arrival, so nobody waits for a collective a departed rank will never join
 * (which MPI's own collectives, made by every rank or none, cannot express). Messages from
 * one rank to another arrive in the order they were sent.
 *   MPI     each message is one MPI_Isend of its kind and bytes, received with MPI_Iprobe and
 *           MPI_Recv; polled, so that every wait is bounded and a signal ends it (MPI's own
 *           blocking calls wait for ever). MPI_Finalize only when every message went through:
 *           after a wait given up, the process ends without it and the launcher ends the
 *           others.
 *   store   the message numbered k from rank a to rank b is the key PREFIX/USE/m/a/b/k (chunks of
 *           at most AB_STORE_VALUE_MAX_BYTES as .../k.1, .../k.2 after it), PREFIX the launch's
 *           (launch.h) and USE the how-many-th job this rank of the launch is (an ADD), so that a
 *           second allocbench under the same torchrun reads none of the first one's keys. The
 *           receiver waits for the key, reads it and deletes it. The store cannot tell that a
 *           process died: a rank that waits for one gives up at its bound, and torchrun ends the
 *           others when a worker dies.
 * The meeting (ab_link_meet): each rank sends rank 0 its rank, the world and a digest of what
 * it is about to do (its collectives, its tune job); rank 0 answers each with a welcome, and in
 * it 128 bytes it chose (NCCL's unique id), or with why it refuses the job. Messages are in the
 * host's byte order and layout: every host runs the same allocbench build.
 *
 * Every wait is bounded (Note [Bounded waits], kernels/kernels.h): recv gives up at its deadline
 * or at once when *waits.stop is set, and says which.
 * Statuses: AB_ERR_INVALID for a launch that cannot be joined (no MPI in this build, a bad
 * variable) or ranks that do not match; AB_ERR_IO when the ranks could not meet (the engine,
 * the ranks missing, the timeout named) or a signal ended the wait.
 * Thread-safety: one thread at a time.
 */
#ifndef AB_LINK_H
#define AB_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/kernels.h"
#include "harness/ranks/launch.h"

typedef struct ab_link_s ab_link_t;

/* The kinds of message (Note [Messages through rank 0]). */
enum {
  AB_MSG_HELLO = 1, /* a rank to rank 0: its place and digest */
  AB_MSG_WELCOME,   /* rank 0's answer: the id, or why it refuses */
  AB_MSG_ARRIVE,    /* a rank at a barrier of the lockstep (group.h) */
  AB_MSG_VERDICT,   /* rank 0's verdict at a barrier */
  AB_MSG_LEAVE,     /* a rank's result: it has left the lockstep */
  AB_MSG_DONE,      /* rank 0 to each rank at the end: whether it records the rows, or why not */
  AB_MSG_BLOB,      /* ab_link_gather's and ab_link_bcast's bytes */
};

typedef struct ab_link_ops_s {
  /* Sends kind and bytes of payload to rank `to` (0, or any rank from rank 0) without waiting
   * for it to be received. false when the link is lost (the reason in l->lost). */
  bool (*send)(ab_link_t *l, unsigned to, uint32_t kind, const void *payload, size_t bytes);
  /* The next message from rank `from`: its kind, and its payload malloc'd into *payload (never
   * NULL on DONE; the caller frees it), *bytes long. Waits until deadline (ab_clock_s). */
  ab_wait_t (*recv)(ab_link_t *l, unsigned from, uint32_t *kind, void **payload, size_t *bytes, double deadline);
  /* Ends this process's part. clean: as far as the caller knows, every rank ends as it should,
   * so that MPI_Finalize may wait for the others; a link lost, or a wait given up (gave_up),
   * ends it without. */
  void (*close)(ab_link_t *l, bool clean);
} ab_link_ops_t;

struct ab_link_s {
  const ab_link_ops_t *ops;
  unsigned rank, world;        /* this process's rank of the job, and the job's size */
  unsigned local_rank, local;  /* its rank among the job's processes on its host, and how many there are */
  ab_waits_t waits;            /* every wait's bound and the stop flag */
  char engine[300];            /* what carries the messages, for messages: "MPI", "the store at HOST:PORT" */
  char lost[256];              /* why the link is lost; "" while it is not */
  bool gave_up;                /* a wait on it gave up (its bound, a signal): the others may be stuck */
};

/* Joins the job l describes (MPI_Init, or a connection to the store), within w->meet_s. */
ab_status ab_link_open(const ab_launch_t *l, const ab_waits_t *w, ab_link_t **out, ab_diag_t *diag);
/* The same for MPI alone; AB_ERR_INVALID in a build without MPI (link_mpi.c). */
ab_status ab_link_open_mpi(const ab_waits_t *w, ab_link_t **out, ab_diag_t *diag);
/* The same for a store alone (link_store.c). */
ab_status ab_link_open_store(const ab_launch_t *l, const ab_waits_t *w, ab_link_t **out, ab_diag_t *diag);
/* Whether this build has MPI. */
bool ab_link_have_mpi(void);

/* The meeting (Note [Messages through rank 0]) within l->waits.meet_s: every rank's digest must
 * equal rank 0's (what names the difference in the refusal: "collectives", "tune job"). Rank 0
 * hands out *id (may be NULL: nothing to hand out); the others receive it. say, when not NULL,
 * hears once, after a second, what this rank waits for ("allocbench run: rank 1 of 2 waits for
 * rank 0 through MPI (up to 300 s)"), prog naming the command. */
ab_status ab_link_meet(ab_link_t *l, uint64_t digest, const char *what, ab_comm_id_t *id, FILE *say, const char *prog,
                       ab_diag_t *diag);

/* Every rank's blob at rank 0, waiting for each at most until deadline: rank 0 gets all[r] and
 * sizes[r] for each rank r (its own copied; free each), the others send theirs and get nothing.
 * what names the blobs in messages ("tune's runs"). */
ab_status ab_link_gather(ab_link_t *l, const void *mine, size_t bytes, void **all, size_t *sizes, double deadline,
                         const char *what, ab_diag_t *diag);
/* Rank 0's blob at every rank: rank 0 sends *blob, the others receive it into *blob (malloc'd)
 * and *bytes, waiting at most until deadline. */
ab_status ab_link_bcast(ab_link_t *l, void **blob, size_t *bytes, double deadline, const char *what, ab_diag_t *diag);

#endif
