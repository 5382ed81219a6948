/* kernels.h: real GPU work on the buffers the strategies hand out, so that time is measured
 * with the allocator in the loop as it is in training. Plain C; the CUDA lives in the .cu
 * files beside this header, and a build without CUDA links kernels_stub.c instead.
 *
 * What runs (one launch per KERNEL event of harness/events.h, on the event's stream):
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
 *   allgather, reduce_scatter  on one GPU, a copy of the n-byte shard into (out of) the full
 *                   buffer: the traffic of the collective's local part, no communication
 * Besides: fill and check of the verification pattern (pattern.h, Note [Verify pattern]),
 * and timing with CUDA events (kernel time per launch, time between step marks).
 *
 * Memory: the module never allocates device memory through the CUDA API (only the device
 * layer does). cuBLAS keeps the default workspace pool it allocates when its handle is
 * created (ab_kernels_open), as every program that uses cuBLAS without setting a workspace.
 * cuBLAS itself is loaded by the first ab_kernels_open on a GPU (kernels/cublas_check.h).
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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness/events.h"
#include "strategies/device/device.h"
#include "strategies/status.h"

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
