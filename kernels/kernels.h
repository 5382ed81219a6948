/* kernels.h: real GPU work on the buffers the strategies hand out, so that time is measured
 * with the allocator in the loop as it is in training. Plain C; the CUDA lives in the .cu
 * files beside this header, and a build without CUDA links kernels_stub.c instead.
 * Layer: kernels (kernels/), above the device; it knows nothing of strategies or events.
 *
 * What runs (one launch per KERNEL event of the event stream (kernel_desc.h), on the event's stream):
 *   gemm            cuBLAS (cublasGemmEx_64), row-major C[m,n] = A[m,k] B[k,n], fp32
 *                   accumulation; inputs and output f32/f32, bf16/bf16, bf16/f32, f16/f16 or
 *                   f16/f32 (what cuBLAS offers with fp32 compute)
 *   gelu, cast      elementwise, any input and output type, computed in fp32 (gelu is the
 *                   erf form, PyTorch's default)
 *   adam            AdamW on f32 parameters and moments with gradients of dtype[0], with the
 *                   AB_ADAM_* constants below at step 1
 *   scale_check     grads *= AB_INV_LOSS_SCALE in place; the f32 flag is set to 1 when a
 *                   gradient was not finite (PyTorch's _amp_foreach_non_finite_check_and_unscale_,
 *                   which also leaves the flag alone otherwise)
 *   copy            a device-to-device copy of n bytes
 *   allgather, reduce_scatter  with a communicator (ab_kernels_set_comm), the NCCL collective
 *                   of n bytes per rank (Note [Collectives]); without one, a copy of the
 *                   n-byte shard into (out of) the full buffer: the traffic of the
 *                   collective's local part, no communication
 * Besides: fill and check of the verification pattern (pattern.h, Note [Verify pattern]),
 * and timing with CUDA events (kernel time per launch, time between step marks).
 *
 * Memory: the module never allocates device memory through the CUDA API (only the device
 * layer does). cuBLAS keeps the default workspace pool it allocates when its handle is
 * created (ab_kernels_open), as every program that uses cuBLAS without setting a workspace.
 * cuBLAS itself is loaded by the first ab_kernels_open on a GPU (kernels/cublas_check.h).
 * NCCL keeps the device memory of its communicators (buffers, FIFOs), made when a
 * communicator is created and when its first collectives connect the ranks; ab_comm_bytes
 * reports it.
 *
 * Statuses: AB_OK; AB_ERR_INVALID for a kernel cuBLAS cannot run (an unsupported type pair,
 * a shape too large); AB_ERR_CUDA for a failed CUDA or cuBLAS call, named with its file and
 * line, or a cuBLAS that cannot be loaded. Errors of calls that work on a device are written
 * to that device's diag.
 *
 * Thread-safety: a context belongs to one thread, like its device.
 */
#ifndef AB_KERNELS_H
#define AB_KERNELS_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/status.h"
#include "kernels/device/device.h"
#include "kernels/kernel_desc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* AdamW as the adam kernel runs it (PyTorch's defaults but weight decay, which is AdamW's). */
#define AB_ADAM_LR 1e-3f
#define AB_ADAM_BETA1 0.9f
#define AB_ADAM_BETA2 0.999f
#define AB_ADAM_EPS 1e-8f
#define AB_ADAM_WEIGHT_DECAY 1e-2f
/* The inverse of the loss scale scale_check unscales by (2^-16; PyTorch's initial scale). */
#define AB_INV_LOSS_SCALE (1.0f / 65536.0f)

typedef struct ab_kernels_s ab_kernels_t;

/* Opens the kernels on dev. When dev cannot run kernels (the simulated device, or a build
 * without CUDA) *out is NULL and the status AB_OK: callers skip the work. */
ab_status ab_kernels_open(ab_device_t *dev, ab_kernels_t **out, ab_diag_t *diag);
/* Waits for the device, then frees the context. NULL is a no-op. */
ab_status ab_kernels_close(ab_kernels_t *kx, ab_diag_t *diag);

/* Launches k on stream, buf[i] being the address of k->buf[i], bracketed by CUDA events
 * whose elapsed time adds to the kernel time (ab_kernels_timing). */
ab_status ab_kernels_launch(ab_kernels_t *kx, const ab_kernel_t *k, const ab_dptr_t buf[AB_KERNEL_MAX_BUFS],
                            unsigned stream);

/* The buffers k writes, as a bit mask over k->buf (bit i: buf[i]). */
static inline unsigned ab_kernel_writes(const ab_kernel_t *k) {
  switch ((ab_kernel_op_t)k->op) {
    case AB_K_GEMM: return 1u << 2;
    case AB_K_ADAM: return 1u << 0 | 1u << 2 | 1u << 3;
    case AB_K_SCALE_CHECK: return 1u << 0 | 1u << 1;
    case AB_K_GELU:
    case AB_K_CAST:
    case AB_K_COPY:
    case AB_K_ALLGATHER:
    case AB_K_REDUCE_SCATTER: return 1u << 1;
    case AB_K_COUNT: break;
  }
  return 0;
}

/* ---- collectives across GPUs -----------------------------------------------------------------
 *
 * Note [Collectives]
 * A communicator is one rank's membership of an NCCL clique: rank r of N, on one GPU.
 * Several ranks in one process get theirs from ab_comm_init_all (one per GPU, made together
 * in one NCCL group); a rank in its own process gets its own from ab_comm_init_rank with the
 * unique id rank 0 made (ab_comm_unique_id) and the launcher handed round
 * (harness/ranks/link.h). Every communicator is non-blocking (Note [Bounded waits]).
 * With a communicator set on a kernels context, each allgather and reduce_scatter KERNEL
 * event runs as ncclAllGather / ncclReduceScatter of its n bytes per rank on the event's
 * stream: the shard buffer holds n bytes, the full buffer N x n, rank r's part at r x n.
 * An event naming the same buffer on both sides is NCCL's in-place form (the shard is the
 * rank's part of the full buffer). Bytes are reduced as bytes (ncclUint8, ncclSum): the
 * traffic and the memory of the collective, not its arithmetic. A communicator's collectives
 * run on the device in the order they were launched, whatever their streams (each waits
 * for the one before), so that all ranks' GPUs meet them in the same order. The caller checks the
 * full buffers against N beforehand (the events carry no world size) and keeps the ranks
 * in lockstep (harness/ranks/ranks.h): every rank launches the same collectives in the same
 * order, which NCCL needs.
 * NCCL is loaded at run time (nccl_check.h) and NCCL 2.14 or later is needed. Before NCCL
 * first initialises, ab_comm_load sets NCCL_NVLS_ENABLE=0 in the environment unless it is
 * set already: NVLink multicast (NVLS) stays off, and allocbench never creates multicast
 * objects itself.
 * Memory: the device memory a communicator takes is measured with cudaMemGetInfo around its
 * creation and around the first collective of each kind and size (NCCL connects ranks
 * lazily, at their first collective); each difference counts when free memory went down.
 * The strategies' budget does not include it.
 * Thread-safety: a communicator is used by one thread at a time, besides its watchdog
 * (Note [Bounded waits]); ab_comm_load and ab_comm_unique_id may be called from any thread.
 *
 * Note [Bounded waits]
 * Ranks wait for each other in four places: their meeting (harness/ranks/link.h), the
 * lockstep barriers (harness/ranks/group.h), NCCL's making and tearing down of communicators, and
 * a collective on the device, which ends only once every rank has launched it. A rank whose
 * peer died, hangs or was stopped would wait in any of them for ever, and a launcher's
 * SIGTERM would not end it. So no wait blocks without bound:
 *   - the host waits (sockets, condition variables) poll in slices of at most 100 ms, and
 *     give up at their deadline or as soon as *stop is set (a signal's number), saying what
 *     they waited for: which ranks, which collective, which address;
 *   - communicators are non-blocking (ncclConfig_t.blocking = 0): their making and each
 *     launch return at once, and the caller polls ncclCommGetAsyncError against the same
 *     deadline and *stop, aborting the communicator when it gives up;
 *   - a collective on the device is watched by the communicator's watchdog thread (as
 *     PyTorch's ProcessGroupNCCL watches its work): every 50 ms it polls the event recorded
 *     after the last collective (cudaEventQuery) and ncclCommGetAsyncError, and calls
 *     ncclCommAbort when NCCL reports an error, when *stop is set, or when the oldest
 *     unfinished collective has run longer than collective_s. The abort ends the collective's
 *     kernels, so whatever call of the rank's thread waited for the device (a cudaFree, a
 *     synchronisation) returns, and the rank's next launch fails, naming why;
 *   - ncclCommDestroy waits inside NCCL until the other ranks' communicators have let go of
 *     this one's proxy (NCCL's proxy thread serves its peers until they close). Nothing can
 *     interrupt that call, so while it runs the watchdog calls waits.give_up when *stop is
 *     set or collective_s has passed; the harness's give_up says why and ends the process
 *     (nothing has been recorded yet: rank 0 writes the rows after the teardown).
 * NCCL calls and the watchdog's abort are serialised by the communicator's lock, so the
 * abort never runs inside another NCCL call on the same communicator. */

/* How long the ranks wait for each other, and what ends a wait early (Note [Bounded waits]). */
typedef struct ab_waits_s {
  double meet_s;       /* the ranks' meeting and the making of communicators (AB_RENDEZVOUS_TIMEOUT) */
  double collective_s; /* one barrier, one collective on the device, the teardown (AB_COLLECTIVE_TIMEOUT) */
  double results_s;    /* rank 0 of tune or matrix, for the others' share of the runs (AB_RESULTS_TIMEOUT) */
  const volatile sig_atomic_t *stop; /* nonzero: give up now (the signal's number); may be NULL */
  /* Called by a watchdog when a wait it cannot interrupt (ncclCommDestroy) must end: code is
   * 128 + the signal, or 1 at the deadline. Expected not to return; NULL: wait on. */
  void (*give_up)(int code, const char *why);
  /* The command's name, for the line a rank says once a second into reaching its launcher's
   * store ("allocbench run: rank 1 of 2 waits for the store at ..."); NULL: quiet. */
  const char *say_as;
} ab_waits_t;

#define AB_WAIT_SLICE_MS 100 /* the longest a host wait sleeps before looking at stop */

/* The name of a signal that stops a command ("SIGTERM"; harness/run/stop.h), else "a signal",
 * for the messages of what it stopped. */
static inline const char *ab_signal_name(int sig) {
  return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : sig == SIGHUP ? "SIGHUP" : sig == SIGQUIT ? "SIGQUIT" : "a signal";
}

typedef struct ab_comm_s ab_comm_t;

#define AB_COMM_ID_BYTES 128 /* NCCL's ncclUniqueId */
typedef struct ab_comm_id_s {
  unsigned char bytes[AB_COMM_ID_BYTES];
} ab_comm_id_t;

/* Loads NCCL once per process: from path when it is not NULL or "" (only there), else from the
 * toolkit allocbench was built with, the loader's search path, and the Python packages of
 * PyTorch (site-packages/nvidia/nccl/lib) in the usual places. A later call returns the
 * first outcome. AB_ERR_CUDA, naming what was tried, when it cannot be loaded. */
ab_status ab_comm_load(const char *path, ab_diag_t *diag);
/* Where NCCL was loaded from and its version code (22809 for 2.28.9); NULL and 0 before a
 * successful ab_comm_load. */
const char *ab_comm_library(int *version);
/* A new unique id for a clique (ncclGetUniqueId). */
ab_status ab_comm_unique_id(ab_comm_id_t *id, ab_diag_t *diag);
/* One communicator per GPU, rank i on GPU ordinals[i], into out[0..n) (a new id and
 * ncclCommInitRankConfig for each, in one group). AB_ERR_INVALID for an ordinal that names
 * no GPU; AB_ERR_IO when they were not made within w->meet_s or *w->stop was set (the diag
 * says which). The current device is left as it was. w is copied. */
ab_status ab_comm_init_all(unsigned n, const int *ordinals, const ab_waits_t *w, ab_comm_t **out, ab_diag_t *diag);
/* This process's rank of nranks, on GPU ordinal, in the clique of id
 * (ncclCommInitRankConfig); returns once every rank has joined, or with AB_ERR_IO as above.
 * Leaves ordinal the current device. w is copied. */
ab_status ab_comm_init_rank(int ordinal, unsigned nranks, unsigned rank, const ab_comm_id_t *id, const ab_waits_t *w,
                            ab_comm_t **out, ab_diag_t *diag);
unsigned ab_comm_rank(const ab_comm_t *c);
unsigned ab_comm_size(const ab_comm_t *c);
/* Device memory the communicator has taken so far (see the note). */
uint64_t ab_comm_bytes(const ab_comm_t *c);
/* Ends what the communicator has in flight on the device (ncclCommAbort): for a collective
 * this rank launched and another rank never will. why says what happened, for the errors
 * that follow. The communicator can no longer be used; ab_comm_destroy still frees it. */
ab_status ab_comm_abort(ab_comm_t *c, const char *why, ab_diag_t *diag);
/* Why the communicator was aborted (by ab_comm_abort or its watchdog); "" while it is not. */
void ab_comm_aborted(ab_comm_t *c, char *why, size_t size);
/* Frees the communicator (ncclCommDestroy, unless it was aborted). NULL is a no-op. Every
 * rank's communicator must be on its way to this call, or aborted: NCCL waits for them. */
ab_status ab_comm_destroy(ab_comm_t *c, ab_diag_t *diag);

/* The collectives launched on kx run on c from now on; NULL: the one-GPU copy. */
void ab_kernels_set_comm(ab_kernels_t *kx, ab_comm_t *c);

/* Makes stream `to` wait for the work queued so far on stream `from`, without the host
 * waiting (Note [Buffers on other streams] in harness/run/engine.c). */
ab_status ab_kernels_join(ab_kernels_t *kx, unsigned from, unsigned to);

/* Records a step mark on stream 0 (the default stream, where the workloads compute). */
ab_status ab_kernels_mark(ab_kernels_t *kx);
/* Waits for the device; writes the device time between successive marks, in ms, to
 * mark_ms[0..*n) (at most cap of them), and the summed time of the launched kernels to
 * *kernel_ms. The marks and the kernel time start again from zero. */
ab_status ab_kernels_timing(ab_kernels_t *kx, double *mark_ms, size_t cap, size_t *n, double *kernel_ms);

/* What ab_kernels_check found. */
typedef struct ab_pattern_fault_s {
  bool bad;            /* a byte differs from the pattern */
  uint64_t offset;     /* the first such byte, from the allocation's start */
  bool have_word;      /* the 8-byte pattern word holding it lies wholly inside the allocation */
  uint64_t word;       /* that word, as found (byte offset & ~7) */
} ab_pattern_fault_t;

/* Fills [p, p+bytes) with the pattern of id (Note [Verify pattern]), on stream. */
ab_status ab_kernels_fill(ab_kernels_t *kx, ab_dptr_t p, uint64_t bytes, uint32_t id, unsigned stream);
/* Waits for all work on the device, then checks [p, p+bytes) against the pattern of id. */
ab_status ab_kernels_check(ab_kernels_t *kx, ab_dptr_t p, uint64_t bytes, uint32_t id, ab_pattern_fault_t *fault);

/* Synchronous copies between the host and the device, for tests and checks. */
ab_status ab_kernels_upload(ab_kernels_t *kx, ab_dptr_t dst, const void *src, uint64_t bytes);
ab_status ab_kernels_download(ab_kernels_t *kx, void *dst, ab_dptr_t src, uint64_t bytes);

#ifdef __cplusplus
}
#endif

#endif
