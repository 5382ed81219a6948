/* launch.h: where this process stands in a job a launcher started, read from the variables the
 * launcher set, and how long its ranks wait for each other.
 *
 * Note [Which launcher]
 * allocbench starts under the launchers users already run, and speaks to the others through
 * the engine that launcher brings, never through a listener of its own:
 *   mpirun, srun   OpenMPI sets OMPI_COMM_WORLD_RANK, MPICH's hydra PMI_RANK, PMIx launchers
 *                  PMIX_RANK, Slurm SLURM_PROCID: MPI (link.h) gives the rank, the world, the
 *                  rank on its host, and carries the messages.
 *   torchrun       TORCHELASTIC_RUN_ID, with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
 *                  MASTER_ADDR and MASTER_PORT: the store torchrun's agent already runs at MASTER_ADDR:MASTER_PORT
 *                  (PyTorch's TCPStore, store.h) carries the messages. torchrun says that its
 *                  workers may use that store with TORCHELASTIC_USE_AGENT_STORE=True; where it says
 *                  False nothing listens there for them, and the launch is refused.
 *   by hand        RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT without torchrun: a TCPStore
 *                  someone runs at MASTER_ADDR:MASTER_PORT, as a job's script can start with
 *                  `python3 -c 'from torch.distributed import TCPStore; ...'`.
 * torchrun's variables win over MPI's: a job started by `srun torchrun ...` has both, and its
 * workers are torchrun's. Keys in the store live under /allocbench/RUN/ATTEMPT/ (RUN the
 * TORCHELASTIC_RUN_ID, "none" by hand; ATTEMPT the TORCHELASTIC_RESTART_COUNT, 0 by hand), so
 * that a job torchrun restarts never reads its earlier attempt's keys.
 *
 * Waits (Note [Bounded waits], kernels/kernels.h), from the environment:
 *   AB_RENDEZVOUS_TIMEOUT  seconds the ranks wait for each other to meet, and for NCCL's
 *                          communicator to be made (default 300)
 *   AB_COLLECTIVE_TIMEOUT  seconds a rank waits at one collective: for the others at its
 *                          barriers, for it to complete on the device, for the teardown
 *                          (default 300; also for --ranks N; `run --collective-timeout`)
 *   AB_RESULTS_TIMEOUT     seconds rank 0 of tune or matrix waits for the other ranks' share of
 *                          the runs once its own is done (default 86400: their runs take what
 *                          they take, and a signal ends the wait at once)
 *
 * Statuses: AB_ERR_INVALID for a bad variable, named with its value and what was expected.
 * Thread-safety: none needed; the functions read the environment through get.
 */
#ifndef AB_LAUNCH_H
#define AB_LAUNCH_H

#include <stdbool.h>

#include "kernels/base/status.h"
#include "kernels/kernels.h"

#define AB_RENDEZVOUS_TIMEOUT_S 300.0
#define AB_COLLECTIVE_TIMEOUT_S 300.0
#define AB_RESULTS_TIMEOUT_S 86400.0

/* How a bounded wait ended. */
typedef enum ab_wait_e {
  AB_WAIT_DONE,    /* what it waited for came */
  AB_WAIT_LOST,    /* the other end went away (a connection closed, a message that made no sense) */
  AB_WAIT_TIMEOUT, /* its deadline passed */
  AB_WAIT_STOPPED, /* *stop was set: a signal */
} ab_wait_t;

typedef enum ab_launch_kind_e {
  AB_LAUNCH_NONE,  /* no launcher's variables: not a launched job */
  AB_LAUNCH_MPI,   /* mpirun, srun: MPI */
  AB_LAUNCH_STORE, /* torchrun, or by hand: a TCPStore at MASTER_ADDR:MASTER_PORT */
} ab_launch_kind_t;

typedef struct ab_launch_s {
  ab_launch_kind_t kind;
  char by[32];           /* the variable that told the launcher ("OMPI_COMM_WORLD_RANK", "TORCHELASTIC_RUN_ID") */
  /* AB_LAUNCH_MPI only: the ranks the launcher says it started, 0 where it says none, and
   * the variable that says so (link.c, Note [A world MPI agrees with]). */
  unsigned announced;
  char announced_by[32];
  /* AB_LAUNCH_STORE only (MPI says these itself once it has started): */
  unsigned rank, world;  /* RANK, WORLD_SIZE */
  unsigned local_rank;   /* LOCAL_RANK, default RANK */
  unsigned local_world;  /* LOCAL_WORLD_SIZE (torchrun's processes on this host), default 1 */
  char addr[256];        /* MASTER_ADDR */
  char port[8];          /* MASTER_PORT, 1 to 65535 */
  char prefix[160];      /* the keys' folder: /allocbench/RUN/ATTEMPT/ */
} ab_launch_t;

/* Reads where this process stands through get (a getenv-like lookup: NULL when a variable is
 * not set) into *out; kind AB_LAUNCH_NONE when no launcher's variable is set. */
ab_status ab_launch_parse(const char *(*get)(const char *name, void *ctx), void *ctx, ab_launch_t *out,
                          ab_diag_t *diag);
/* The same, from the process's environment. */
ab_status ab_launch_from_env(ab_launch_t *out, ab_diag_t *diag);

/* The timeouts above through get, defaults where unset; stop and give_up are left NULL. */
ab_status ab_waits_parse(const char *(*get)(const char *name, void *ctx), void *ctx, ab_waits_t *out, ab_diag_t *diag);
/* The same, from the process's environment. */
ab_status ab_waits_from_env(ab_waits_t *out, ab_diag_t *diag);
/* Seconds in text, more than 0 and at most a day, for name (a variable or an option). */
ab_status ab_parse_seconds(const char *name, const char *text, double *out, ab_diag_t *diag);

#endif
