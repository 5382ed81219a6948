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
 *   AB_RENDEZVOUS_TIMEOUT  seconds the ranks wait for each other to meet (default 300)
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
 * A process that dies is noticed when its connection closes: the others stop at their next
 * barrier, and abort their communicators when it was a LAUNCHED barrier (it may have died
 * before its launch). One that dies while a collective runs on the GPUs leaves the others
 * waiting inside NCCL, where only the launcher can end them.
 *
 * Statuses: AB_ERR_INVALID for a bad variable (named, with its value and what was expected)
 * or ranks that do not match; AB_ERR_IO when the ranks could not meet (the address, the
 * port, the timeout named).
 */
#ifndef AB_RENDEZVOUS_H
#define AB_RENDEZVOUS_H

#include <stdint.h>

#include "group.h"
#include "kernels.h"

#define AB_RENDEZVOUS_TIMEOUT_S 300.0

typedef struct ab_launch_s {
  unsigned rank, world, local_rank;
  char addr[256];   /* MASTER_ADDR */
  char port[8];     /* MASTER_PORT, checked to be 1 to 65535 */
  double timeout_s; /* AB_RENDEZVOUS_TIMEOUT */
} ab_launch_t;

/* Reads the variables above through get (a getenv-like lookup: NULL when a variable is not
 * set). */
ab_status ab_launch_parse(const char *(*get)(const char *name, void *ctx), void *ctx, ab_launch_t *out,
                          ab_diag_t *diag);
/* The same, from the process's environment. */
ab_status ab_launch_from_env(ab_launch_t *out, ab_diag_t *diag);

/* Meets the other ranks of l (see above). Rank 0 hands out *id; the others receive it into
 * *id. On success *out is the job's group of l->world ranks, of which this process is
 * l->rank; destroy it when the results are in. */
ab_status ab_rendezvous(const ab_launch_t *l, uint64_t digest, ab_comm_id_t *id, ab_group_t **out, ab_diag_t *diag);

#endif
