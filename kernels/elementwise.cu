/* elementwise.cu: GELU, casts, the AdamW update and the loss-scale check (kernels.h says
 * what each computes). Every kernel loads its element types, computes in fp32 and stores
 * with round-to-nearest-even, as PyTorch's elementwise kernels do; each is a grid-stride
 * loop, so one launch covers any n. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/kernels_internal.h"

static __device__ __forceinline__ float load(const float *p, uint64_t i) { return p[i]; }
static __device__ __forceinline__ float load(const __nv_bfloat16 *p, uint64_t i) { return __bfloat162float(p[i]); }
static __device__ __forceinline__ float load(const __half *p, uint64_t i) { return __half2float(p[i]); }
static __device__ __forceinline__ void store(float *p, uint64_t i, float v) { p[i] = v; }
static __device__ __forceinline__ void store(__nv_bfloat16 *p, uint64_t i, float v) { p[i] = __float2bfloat16_rn(v); }
static __device__ __forceinline__ void store(__half *p, uint64_t i, float v) { p[i] = __float2half_rn(v); }

#define GRID_STRIDE(i, n) \
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (uint64_t)gridDim.x * blockDim.x)

template <class In, class Out>
__global__ void gelu_kernel(const In *in, Out *out, uint64_t n) {
  GRID_STRIDE(i, n) {
    float x = load(in, i);
    store(out, i, 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)));
  }
}

template <class In, class Out>
__global__ void cast_kernel(const In *in, Out *out, uint64_t n) {
  GRID_STRIDE(i, n) store(out, i, load(in, i));
}

/* AdamW at step 1: the bias corrections are 1 - beta1 and 1 - beta2. */
template <class Grad>
__global__ void adam_kernel(float *param, const Grad *grad, float *m, float *v, uint64_t n) {
  GRID_STRIDE(i, n) {
    float g = load(grad, i);
    float mi = AB_ADAM_BETA1 * m[i] + (1.0f - AB_ADAM_BETA1) * g;
    float vi = AB_ADAM_BETA2 * v[i] + (1.0f - AB_ADAM_BETA2) * g * g;
    float mhat = mi / (1.0f - AB_ADAM_BETA1), vhat = vi / (1.0f - AB_ADAM_BETA2);
    float p = param[i] * (1.0f - AB_ADAM_LR * AB_ADAM_WEIGHT_DECAY);
    param[i] = p - AB_ADAM_LR * mhat / (sqrtf(vhat) + AB_ADAM_EPS);
    m[i] = mi;
    v[i] = vi;
  }
}

template <class Grad>
__global__ void scale_check_kernel(Grad *grad, float *found_inf, uint64_t n) {
  GRID_STRIDE(i, n) {
    float g = load(grad, i);
    if (!isfinite(g)) *found_inf = 1.0f; /* every writer writes the same value */
    store(grad, i, g * AB_INV_LOSS_SCALE);
  }
}

/* The launch for one element type (or pair of types). */
template <class In, class Out>
static void launch_typed(const ab_kernel_t *k, const ab_dptr_t *buf, cudaStream_t s) {
  unsigned blocks = ab_kx_blocks(k->n);
  void *b0 = (void *)(uintptr_t)buf[0], *b1 = (void *)(uintptr_t)buf[1];
  switch ((ab_kernel_op_t)k->op) {
    case AB_K_GELU: gelu_kernel<In, Out><<<blocks, AB_KX_THREADS, 0, s>>>((const In *)b0, (Out *)b1, k->n); break;
    case AB_K_CAST: cast_kernel<In, Out><<<blocks, AB_KX_THREADS, 0, s>>>((const In *)b0, (Out *)b1, k->n); break;
    case AB_K_ADAM:
      adam_kernel<In><<<blocks, AB_KX_THREADS, 0, s>>>((float *)b0, (const In *)b1, (float *)(uintptr_t)buf[2],
                                                       (float *)(uintptr_t)buf[3], k->n);
      break;
    case AB_K_SCALE_CHECK: scale_check_kernel<In><<<blocks, AB_KX_THREADS, 0, s>>>((In *)b0, (float *)b1, k->n); break;
    default: break;
  }
}

/* Binds the output type. Ops with one element type instantiate only Out = In. */
template <class In>
static void launch_in(const ab_kernel_t *k, const ab_dptr_t *buf, cudaStream_t s) {
  if (k->op == AB_K_ADAM || k->op == AB_K_SCALE_CHECK) {
    launch_typed<In, In>(k, buf, s);
    return;
  }
  switch ((ab_dtype_t)k->dtype[1]) {
    case AB_F32: launch_typed<In, float>(k, buf, s); break;
    case AB_BF16: launch_typed<In, __nv_bfloat16>(k, buf, s); break;
    case AB_F16: launch_typed<In, __half>(k, buf, s); break;
    case AB_DTYPE_COUNT: break;
  }
}

ab_status ab_elementwise_launch(ab_kernels_t *kx, const ab_kernel_t *k, const ab_dptr_t *buf, cudaStream_t s) {
  if (k->dtype[0] >= AB_DTYPE_COUNT || k->dtype[1] >= AB_DTYPE_COUNT)
    return ab_diag_set(&kx->dev->diag, AB_ERR_INVALID, "%s kernel with unknown element types %u, %u",
                       ab_kernel_name((ab_kernel_op_t)k->op), k->dtype[0], k->dtype[1]);
  if (k->n == 0) return AB_OK; /* a grid of no blocks is an error, and there is no work */
  switch ((ab_dtype_t)k->dtype[0]) {
    case AB_F32: launch_in<float>(k, buf, s); break;
    case AB_BF16: launch_in<__nv_bfloat16>(k, buf, s); break;
    case AB_F16: launch_in<__half>(k, buf, s); break;
    case AB_DTYPE_COUNT: break;
  }
  AB_CUDA_TRY(&kx->dev->diag, cudaGetLastError());
  return AB_OK;
}
