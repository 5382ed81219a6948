/* kernels_internal.h: what the CUDA files of kernels/ share: the context, the communicator,
 * the launch geometry, and each file's launcher. CUDA C++ only; the rest of allocbench sees kernels.h.
 */
#ifndef AB_KERNELS_INTERNAL_H
#define AB_KERNELS_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <pthread.h>

/* The C headers of allocbench declare C functions. */
extern "C" {
#include "kernels/base/hashmap.h"
#include "kernels/base/status.h"
#include "kernels/device/device.h"
}
#include "kernels/device/cuda_check.h"
#include "kernels/cublas_check.h"
#include "kernels/kernels.h"
#include "kernels/nccl_check.h"

/* Kernel timing: each launch is bracketed by a pair of events, kept in a ring. A slot is
 * read (waiting for its end event) only when the ring comes round to it, by which time the
 * launch queue has long since throttled the host, so the reading never adds a wait. Step
 * marks use a smaller ring the same way. */
#define AB_KX_PAIRS 4096
#define AB_KX_MARKS 64

struct ab_kernels_s {
  ab_device_t *dev;                       /* not owned; errors go to its diag */
  ab_comm_t *comm;                        /* not owned; NULL: collectives are local copies */
  const ab_cublas_t *cublas;              /* the loaded library */
  cublasHandle_t blas;
  cudaEvent_t pair[AB_KX_PAIRS][2];       /* start and end of a launch; created on first use */
  size_t pairs_created;
  uint64_t pairs_recorded;                /* launches timed since the last ab_kernels_timing */
  double kernel_ms;                       /* elapsed time of the pairs already read */
  cudaEvent_t mark[AB_KX_MARKS];          /* step marks; created on first use */
  size_t marks_created;
  uint64_t marks_recorded;
  double *mark_ms;                        /* intervals between marks already read, in order */
  size_t nmark_ms, capmark_ms;
  cudaEvent_t join;                       /* orders two streams (ab_kernels_join); NULL until used */
};

struct ab_comm_s {
  const ab_nccl_t *nccl;
  ab_nccl_comm_t handle;
  unsigned rank, size;
  int ordinal;          /* its GPU */
  uint64_t bytes;       /* device memory it took, as measured (Note [Collectives]) */
  ab_map_t measured;    /* collectives already measured: n << 1 | (op is reduce_scatter) */
  cudaEvent_t last;     /* recorded after each collective; NULL before the first */
  cudaStream_t last_stream; /* where the last collective ran */
  ab_waits_t waits;     /* Note [Bounded waits] */
  /* Shared with the watchdog, under lock (which also serialises every NCCL call on handle). */
  pthread_mutex_t lock;
  pthread_t dog;        /* the watchdog thread */
  bool dog_started, dog_quit;
  bool aborted;
  char why[AB_DIAG_BYTES]; /* why it was aborted */
  uint64_t launched;    /* collectives launched */
  bool pending;         /* launched ones not yet seen complete on the device */
  double pending_since; /* when the oldest of them was launched (ab_comm_now_s) */
  char pending_what[128]; /* and which it was */
  bool tearing_down;    /* in ncclCommDestroy, which only give_up can end */
  double teardown_since;
};

/* Threads per block of the elementwise and pattern kernels; the grid is capped, and the
 * kernels stride over the rest (4096 blocks of 256 fill an H200's 132 SMs several times). */
#define AB_KX_THREADS 256
#define AB_KX_MAX_BLOCKS 4096u

static inline unsigned ab_kx_blocks(uint64_t items) {
  uint64_t b = (items + AB_KX_THREADS - 1) / AB_KX_THREADS;
  return b == 0 ? 1u : b > AB_KX_MAX_BLOCKS ? AB_KX_MAX_BLOCKS : (unsigned)b;
}

/* gemm.cu: the AB_K_GEMM launch. */
ab_status ab_gemm_launch(ab_kernels_t *kx, const ab_kernel_t *k, const ab_dptr_t *buf, cudaStream_t s);
/* comm.cu: AB_K_ALLGATHER and AB_K_REDUCE_SCATTER on kx->comm. */
ab_status ab_collective_launch(ab_kernels_t *kx, const ab_kernel_t *k, const ab_dptr_t *buf, cudaStream_t s);
/* elementwise.cu: AB_K_GELU, AB_K_CAST, AB_K_ADAM and AB_K_SCALE_CHECK. */
ab_status ab_elementwise_launch(ab_kernels_t *kx, const ab_kernel_t *k, const ab_dptr_t *buf, cudaStream_t s);

#endif
