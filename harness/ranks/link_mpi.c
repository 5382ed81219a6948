/* link_mpi.c: the messages of a launch through MPI (link.h, Note [Messages through rank 0]):
 * mpirun and srun start the processes and MPI says their ranks, as nccl-tests takes them.
 * Every call that could wait is non-blocking and polled against the bound. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/base/clock.h"
#include "harness/ranks/link.h"

#define TAG 43

typedef struct pending_s {
  MPI_Request req;
  void *buf;
} pending_t;

typedef struct mpi_link_s {
  ab_link_t l;        /* first: the link.h view */
  pending_t *p;       /* sends not yet known to be complete */
  size_t np, cap;
} mpi_link_t;

static mpi_link_t *mpi_of(ab_link_t *l) { return (mpi_link_t *)(void *)l; }

bool ab_link_have_mpi(void) { return true; }

static void failed(ab_link_t *l, const char *call, int rc) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int n = 0;
  MPI_Error_string(rc, text, &n);
  if (l->lost[0] == '\0') snprintf(l->lost, sizeof l->lost, "%s failed: %s", call, text);
}

/* Frees the sends that have completed; true when none is left. */
static bool progress(mpi_link_t *x) {
  size_t keep = 0;
  for (size_t i = 0; i < x->np; i++) {
    int done = 0;
    int rc = MPI_Test(&x->p[i].req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) failed(&x->l, "MPI_Test", rc);
    if (done || rc != MPI_SUCCESS) free(x->p[i].buf);
    else x->p[keep++] = x->p[i];
  }
  x->np = keep;
  return keep == 0;
}

/* A pause between polls: short at first, since answers usually come within microseconds,
 * then up to a millisecond, so that ranks sharing a core leave it to each other. */
static void pause_for(unsigned *round) {
  long ns = *round < 8 ? 20000L << *round : 1000000L;
  if (ns > 1000000L) ns = 1000000L;
  (*round)++;
  struct timespec t = {0, ns};
  nanosleep(&t, NULL);
}

static bool mpi_send(ab_link_t *l, unsigned to, uint32_t kind, const void *payload, size_t bytes) {
  mpi_link_t *x = mpi_of(l);
  if (l->lost[0]) return false;
  progress(x);
  size_t n = sizeof kind + bytes;
  if (n > (size_t)1 << 30) {
    snprintf(l->lost, sizeof l->lost, "a message of %zu bytes, more than one MPI call sends here", n);
    return false;
  }
  if (x->np == x->cap) {
    size_t cap = x->cap ? 2 * x->cap : 16;
    pending_t *more = realloc(x->p, cap * sizeof *more);
    if (more == NULL) {
      snprintf(l->lost, sizeof l->lost, "out of host memory");
      return false;
    }
    x->p = more;
    x->cap = cap;
  }
  unsigned char *buf = malloc(n);
  if (buf == NULL) {
    snprintf(l->lost, sizeof l->lost, "out of host memory");
    return false;
  }
  memcpy(buf, &kind, sizeof kind);
  if (bytes) memcpy(buf + sizeof kind, payload, bytes);
  pending_t *p = &x->p[x->np];
  int rc = MPI_Isend(buf, (int)n, MPI_BYTE, (int)to, TAG, MPI_COMM_WORLD, &p->req);
  if (rc != MPI_SUCCESS) {
    free(buf);
    failed(l, "MPI_Isend", rc);
    return false;
  }
  p->buf = buf;
  x->np++;
  return true;
}

static ab_wait_t mpi_recv(ab_link_t *l, unsigned from, uint32_t *kind, void **payload, size_t *bytes, double deadline) {
  mpi_link_t *x = mpi_of(l);
  unsigned round = 0;
  for (;;) {
    if (l->lost[0]) return AB_WAIT_LOST;
    int flag = 0;
    MPI_Status status;
    int rc = MPI_Iprobe((int)from, TAG, MPI_COMM_WORLD, &flag, &status);
    if (rc != MPI_SUCCESS) {
      failed(l, "MPI_Iprobe", rc);
      return AB_WAIT_LOST;
    }
    if (flag) {
      int n = 0;
      MPI_Get_count(&status, MPI_BYTE, &n);
      unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
      if (buf == NULL) {
        snprintf(l->lost, sizeof l->lost, "out of host memory");
        return AB_WAIT_LOST;
      }
      /* Iprobe saw it: this receive takes it at once. */
      rc = MPI_Recv(buf, n, MPI_BYTE, (int)from, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS || (size_t)n < sizeof *kind) {
        free(buf);
        if (rc != MPI_SUCCESS) failed(l, "MPI_Recv", rc);
        else snprintf(l->lost, sizeof l->lost, "rank %u sent a message of %d bytes", from, n);
        return AB_WAIT_LOST;
      }
      memcpy(kind, buf, sizeof *kind);
      *bytes = (size_t)n - sizeof *kind;
      memmove(buf, buf + sizeof *kind, *bytes);
      *payload = buf;
      return AB_WAIT_DONE;
    }
    progress(x);
    if (l->waits.stop && *l->waits.stop) return AB_WAIT_STOPPED;
    if (ab_clock_s() >= deadline) return AB_WAIT_TIMEOUT;
    pause_for(&round);
  }
}

static void mpi_close(ab_link_t *l, bool clean) {
  mpi_link_t *x = mpi_of(l);
  /* The sends go through before MPI ends; bounded, as every wait. */
  double deadline = ab_clock_s() + l->waits.collective_s;
  unsigned round = 0;
  while (!progress(x) && !l->lost[0] && !(l->waits.stop && *l->waits.stop) && ab_clock_s() < deadline)
    pause_for(&round);
  /* MPI_Finalize waits for every process: only when nothing was lost. Otherwise the process
   * ends without it, and the launcher ends the others (Note [Messages through rank 0]). */
  if (clean && x->np == 0 && !l->lost[0] && !l->gave_up) MPI_Finalize();
  for (size_t i = 0; i < x->np; i++) free(x->p[i].buf);
  free(x->p);
  free(x);
}

static const ab_link_ops_t mpi_ops = {mpi_send, mpi_recv, mpi_close};

ab_status ab_link_open_mpi(const ab_waits_t *w, ab_link_t **out, ab_diag_t *diag) {
  mpi_link_t *x = calloc(1, sizeof *x);
  if (x == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  int inited = 0, provided = 0;
  MPI_Initialized(&inited);
  /* One thread of the process calls MPI, the main one: FUNNELED. */
  if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    free(x);
    return ab_diag_set(diag, AB_ERR_IO, "MPI_Init_thread failed: is this process started by mpirun or srun?");
  }
  /* Errors come back as codes, for a line naming the call, rather than ending the job. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1, local_rank = 0, local = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* The rank on this host, which picks the GPU (as LOCAL_RANK does under torchrun). */
  MPI_Comm node;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
  }
  x->l.ops = &mpi_ops;
  x->l.rank = (unsigned)rank;
  x->l.world = (unsigned)size;
  x->l.local_rank = (unsigned)local_rank;
  x->l.local = (unsigned)local;
  x->l.waits = *w;
  snprintf(x->l.engine, sizeof x->l.engine, "MPI");
  *out = &x->l;
  return AB_OK;
}
