/* rendezvous.h: ranks as processes, one per GPU, started by a launcher on one host or many:
 * where this process stands (a torchrun-style environment), the TCP rendezvous that hands
 * NCCL's unique id from rank 0 to the others, and the group (group.h) over the same
 * connections, which keeps the ranks in lockstep and brings every rank's result to rank 0.
 *
 * The environment, as torchrun sets it (`torchrun --nnodes H --nproc-per-node G --no-python
 * allocbench run ... --ranks env`), or as a scheduler's script sets it by hand:
 *   RANK         this process's rank, 0 <= RANK < WORLD_SIZE
 *   WORLD_SIZE   the number of ranks, 1 to 65536
 *   LOCAL_RANK   the GPU this rank drives on its host, cuda:LOCAL_RANK (default: RANK,
 *                right on one host)
 *   MASTER_ADDR  the host of rank 0, a name or an address
 *   MASTER_PORT  the TCP port rank 0 listens on, 1 to 65535
 *   AB_RENDEZVOUS_TIMEOUT  seconds the ranks wait for each other to meet, and for NCCL's
 *                communicator to be made (default 300)
 *   AB_COLLECTIVE_TIMEOUT  seconds a rank waits at one collective: for the others at its
 *                barriers, for it to complete on the device, for the teardown (default 300;
 *                also for --ranks N; `run --collective-timeout` overrides it)
 * MPI is not needed; where a job is started by mpirun, set these from OMPI_COMM_WORLD_RANK
 * (or PMI_RANK) and the size, with MASTER_ADDR the first host.
 *
 * The rendezvous: rank 0 listens on MASTER_PORT (every interface); each other rank connects
 * to MASTER_ADDR:MASTER_PORT, retrying until the timeout, and says hello: its rank, the world
 * size, and a digest of its stream's collectives, which must equal rank 0's (every rank
 * makes the same collectives in the same order). Rank 0 answers each with the 128-byte id
 * (NCCL's ncclUniqueId, made by ncclGetUniqueId on rank 0; any 128 bytes on the simulated
 * card, where nothing else uses it) or with why it refuses. The connections then carry the
 * lockstep (Note [Ranks in lockstep]): at each barrier a rank sends where it is and waits
 * for rank 0's verdict; rank 0 hears every rank, decides, answers. A rank that ends sends its
 * result. Rank 0 writes the rows of every rank. Messages are in the host's byte order and
 * layout: every host runs the same allocbench build.
 * A rank that ends sends its result and goes on to tear down its communicator without
 * waiting (NCCL's teardown waits for every rank's, so a rank must not wait for rank 0 before
 * it: Note [Bounded waits]); it waits for rank 0 to close the connection only in destroy.
 * A process that dies is noticed when its connection closes: the others stop and abort
 * their communicators at their next barrier (it may have died with a collective on its
 * device). One that dies while a collective runs on the GPUs leaves the others' collective
 * unfinished: their watchdogs abort it after AB_COLLECTIVE_TIMEOUT.
 * Every wait here is bounded and ends at once when waits.stop is set (Note [Bounded waits],
 * kernels/kernels.h); what a rank waited for is in the message: the ranks, the collective,
 * the address.
 *
 * Statuses: AB_ERR_INVALID for a bad variable (named, with its value and what was expected)
 * or ranks that do not match; AB_ERR_IO when the ranks could not meet (the address, the
 * port, the ranks missing, the timeout named) or a signal ended the wait.
 */
#ifndef AB_RENDEZVOUS_H
#define AB_RENDEZVOUS_H

#include <stdint.h>
#include <stdio.h>

#include "kernels/kernels.h"
#include "ranks/group.h"

#define AB_RENDEZVOUS_TIMEOUT_S 300.0
#define AB_COLLECTIVE_TIMEOUT_S 300.0

typedef struct ab_launch_s {
  unsigned rank, world, local_rank;
  char addr[256];   /* MASTER_ADDR */
  char port[8];     /* MASTER_PORT, checked to be 1 to 65535 */
  double timeout_s; /* AB_RENDEZVOUS_TIMEOUT */
} ab_launch_t;

/* The two timeouts (AB_RENDEZVOUS_TIMEOUT, AB_COLLECTIVE_TIMEOUT) through get, defaults
 * where unset; stop and give_up are left NULL. AB_ERR_INVALID names a bad value. */
ab_status ab_waits_parse(const char *(*get)(const char *name, void *ctx), void *ctx, ab_waits_t *out, ab_diag_t *diag);
/* The same, from the process's environment. */
ab_status ab_waits_from_env(ab_waits_t *out, ab_diag_t *diag);
/* Seconds in text, more than 0 and at most a day, for name (a variable or an option). */
ab_status ab_parse_seconds(const char *name, const char *text, double *out, ab_diag_t *diag);

/* Reads the variables above through get (a getenv-like lookup: NULL when a variable is not
 * set). */
ab_status ab_launch_parse(const char *(*get)(const char *name, void *ctx), void *ctx, ab_launch_t *out,
                          ab_diag_t *diag);
/* The same, from the process's environment. */
ab_status ab_launch_from_env(ab_launch_t *out, ab_diag_t *diag);

/* Meets the other ranks of l (see above), within w->meet_s. Rank 0 hands out *id; the others
 * receive it into *id. say, when not NULL, hears once what this rank waits for. On success
 * *out is the job's group of l->world ranks, of which this process is l->rank, with w's
 * waits at its barriers; destroy it after the communicator (ab_comm_destroy). */
ab_status ab_rendezvous(const ab_launch_t *l, const ab_waits_t *w, FILE *say, uint64_t digest, ab_comm_id_t *id,
                        ab_group_t **out, ab_diag_t *diag);

#endif
