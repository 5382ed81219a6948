/* autograd.h: what PyTorch's autograd, optimizers and loss scaler do with memory, as events.
 * The pieces every training workload shares.
 *
 * The tape: tensors with reference counts over an event stream. ab_tape_new appends an
 * ALLOC and gives the tensor one reference (the code that made it); ab_tape_hold adds one
 * (an autograd node saved it for backward, a Python variable keeps it); ab_tape_drop
 * removes one and appends the FREE when none is left. A tensor therefore dies at its last
 * use, as under PyTorch's reference counting, and a generator never has to work out who
 * the last user is. AB_NO_TENSOR may be dropped or held (nothing happens), so optional
 * tensors need no branches.
 *
 * Kernels: ab_tape_gemm and friends describe the compute on live tensors (events.h
 * ab_kernel_t) so that the kernels can run it; shapes must fit the buffers, which
 * ab_events_finish checks.
 *
 * Optimizers (ab_optim_*): torch.optim's foreach implementations, the default on CUDA.
 *   Adam/AdamW: exp_avg and exp_avg_sq (fp32, the size of each parameter) made lazily at
 *     the first step that runs; every step `torch._foreach_sqrt(exp_avg_sqs)` makes a
 *     parameter-sized fp32 temporary list that lives until the update is done.
 *   SGD with momentum: the momentum buffer is `clone(grad)` at the first step that runs;
 *     later steps update in place. Without momentum SGD has no state.
 *
 * Loss scaling (ab_scaler_*): torch.amp.GradScaler. Its scale and growth tracker are 4-byte
 * tensors made at the first scale(); scale(loss) makes the scaled loss; unscale_ makes
 * inv_scale and found_inf and checks every gradient in place. Whether a step overflows is
 * modelled: the largest |gradient| of a step (unscaled) is grad_max * exp(grad_sigma * z),
 * z standard normal, and the step overflows when that times the scale exceeds the largest
 * finite value of the gradient's dtype (65504 for fp16). An overflow skips the optimizer
 * step and multiplies the scale by the backoff factor (0.5); growth_interval (2000) clean
 * steps in a row multiply it by the growth factor (2.0): PyTorch's defaults (peers.md
 * §8.1). With the default init_scale 2^16 and grad_max 6 the first three steps usually
 * overflow, as the first three of the recorded ResNet-50 run did (its momentum buffers appear only
 * at the fourth step; fixtures/pytorch-2.11-h200).
 *
 * Host memory: the tape grows with the stream; a failed host allocation marks the stream
 * failed (ab_events_finish reports it) and later calls do nothing harmful.
 * Thread-safety: one tape per thread.
 */
#ifndef AB_AUTOGRAD_H
#define AB_AUTOGRAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/rng.h"
#include "workloads/events/events.h"

#define AB_NO_TENSOR UINT32_MAX

typedef struct ab_tape_s {
  ab_events_t *es;       /* the stream appended to; not owned */
  uint16_t *refs;        /* per allocation id: references held */
  uint32_t cap;          /* entries in refs */
  uint64_t cublas_bytes; /* cuBLAS workspace of each thread that runs GEMMs; 0: none */
  unsigned thread;       /* who issues work now: 0 the Python thread, 1 autograd's device thread */
  uint32_t workspace[3]; /* per thread its cuBLAS workspace, then the cuBLASLt one; AB_NO_TENSOR until made */
} ab_tape_t;

/* Note [cuBLAS workspaces]: PyTorch allocates a cuBLAS workspace through the caching
 * allocator for each (handle, stream) at its first GEMM and keeps it for the life of the
 * process: 32 MiB on sm_90 (pytorch_caching_allocator.md §9.1 W). Backward runs on
 * autograd's own device thread, whose handle is another, so a training job holds two; the
 * first GEMM also makes cuBLASLt's 1 MiB workspace. The recorded ResNet-50 run shows all
 * three (fixtures/pytorch-2.11-h200). ab_tape_gemm makes them on demand, after the GEMM's
 * output, where PyTorch does. */
#define AB_CUBLASLT_WORKSPACE_BYTES (1ULL << 20)

void ab_tape_init(ab_tape_t *t, ab_events_t *es, uint64_t cublas_bytes);
void ab_tape_free(ab_tape_t *t);

/* A new tensor of bytes (> 0) on the default stream, or on stream, with one reference. */
uint32_t ab_tape_new(ab_tape_t *t, uint64_t bytes, ab_tag_t tag);
uint32_t ab_tape_new_on(ab_tape_t *t, uint64_t bytes, ab_tag_t tag, unsigned stream);
/* One more reference; returns id. */
uint32_t ab_tape_hold(ab_tape_t *t, uint32_t id);
/* One reference less; the tensor is freed when none is left. */
void ab_tape_drop(ab_tape_t *t, uint32_t id);
/* Drops *id and sets it to AB_NO_TENSOR. */
void ab_tape_clear(ab_tape_t *t, uint32_t *id);

/* ---- kernels on live tensors ------------------------------------------------------------ */

/* C[m,n] = A[m,k] B[k,n], with the workspaces of Note [cuBLAS workspaces]. */
void ab_tape_gemm(ab_tape_t *t, uint32_t a, uint32_t b, uint32_t c, uint64_t m, uint64_t n, uint64_t k, ab_dtype_t in,
                  ab_dtype_t out);
/* out = op(in) over n elements: AB_K_GELU or AB_K_CAST. */
void ab_tape_unary(ab_tape_t *t, ab_kernel_op_t op, uint32_t in, uint32_t out, uint64_t n, ab_dtype_t din,
                   ab_dtype_t dout);
/* n bytes from src to dst: AB_K_COPY, AB_K_ALLGATHER (src the shard) or AB_K_REDUCE_SCATTER
 * (dst the shard), on stream. */
void ab_tape_move(ab_tape_t *t, ab_kernel_op_t op, uint32_t src, uint32_t dst, uint64_t bytes, unsigned stream);

/* ---- optimizers -------------------------------------------------------------------------- */

typedef enum ab_optim_kind_e { AB_OPTIM_ADAM, AB_OPTIM_SGD } ab_optim_kind_t;

typedef struct ab_optim_s {
  ab_optim_kind_t kind;
  bool momentum;        /* SGD: keeps a momentum buffer */
  size_t n;             /* parameter tensors */
  uint32_t *exp_avg;    /* per tensor: Adam's m, or SGD's momentum buffer; AB_NO_TENSOR until made */
  uint32_t *exp_avg_sq; /* per tensor: Adam's v */
} ab_optim_t;

/* AB_ERR_INTERNAL when host memory runs out. */
ab_status ab_optim_init(ab_optim_t *o, ab_optim_kind_t kind, bool momentum, size_t n, ab_diag_t *diag);
void ab_optim_free(ab_optim_t *o);
/* optimizer.step() over the n tensors: param[i] (fp32, numel[i] elements) with gradient
 * grad[i] of dtype gdtype. State tensors are tagged AB_TAG_OPTIM. */
void ab_optim_step(ab_optim_t *o, ab_tape_t *t, const uint32_t *param, const uint32_t *grad, const uint64_t *numel,
                   ab_dtype_t gdtype);

/* ---- loss scaling ------------------------------------------------------------------------ */

typedef struct ab_scaler_s {
  bool enabled;
  double scale;          /* now; starts at init_scale */
  double growth_factor;  /* 2.0 */
  double backoff_factor; /* 0.5 */
  uint64_t growth_interval, clean_steps;
  double grad_max;       /* median of a step's largest unscaled |gradient| */
  double grad_sigma;     /* its log-normal spread */
  double finite_max;     /* largest finite value of the gradient dtype */
  ab_rng_t rng;          /* the overflow draws, apart from the workload's own */
  uint64_t skipped;      /* steps skipped so far */
  uint32_t scale_t, tracker_t;    /* the scaler's own tensors, once made */
  uint32_t inv_scale, found_inf;  /* between unscale and update */
} ab_scaler_t;

/* A scaler for gradients of dtype (disabled: every call below is a no-op and nothing
 * overflows). */
void ab_scaler_init(ab_scaler_t *s, bool enabled, ab_dtype_t dtype, double init_scale, double grad_max,
                    double grad_sigma, uint64_t seed);
/* scaler.scale(loss): a new reference to the tensor backward starts from (the scaled loss,
 * or loss itself when disabled). */
uint32_t ab_scaler_scale_loss(ab_scaler_t *s, ab_tape_t *t, uint32_t loss);
/* The first half of unscale_: makes inv_scale and found_inf (whose id s->found_inf the
 * caller's check kernels use) and draws whether this step overflowed. */
bool ab_scaler_begin_unscale(ab_scaler_t *s, ab_tape_t *t);
/* GradScaler.unscale_ of n gradients in place: begin, then one check kernel per gradient.
 * Returns true when the step overflowed (the optimizer step must be skipped). */
bool ab_scaler_unscale(ab_scaler_t *s, ab_tape_t *t, size_t n, const uint32_t *grad, const uint64_t *numel,
                       ab_dtype_t dtype);
/* scaler.update(): moves the scale after the step's outcome, frees the unscale tensors. */
void ab_scaler_update(ab_scaler_t *s, ab_tape_t *t, bool overflowed);

#endif
