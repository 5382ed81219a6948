/* gemm.cu: AB_K_GEMM through cuBLAS.
 *
 * The event describes a row-major C[m,n] = A[m,k] B[k,n]. cuBLAS is column-major, and a
 * row-major matrix is its transpose in column-major, so the call computes
 * C^T[n,m] = B^T[n,k] A^T[k,m]: B and A swap places and no transposition is needed.
 * Scaling is alpha = 1, beta = 0 with fp32 compute (CUBLAS_COMPUTE_32F, no TF32, as PyTorch
 * runs fp32 matmuls by default); the 64-bit API takes shapes of any size.
 */
#include "kernels/kernels_internal.h"

static bool cuda_type(ab_dtype_t t, cudaDataType_t *out) {
  switch (t) {
    case AB_F32: *out = CUDA_R_32F; return true;
    case AB_BF16: *out = CUDA_R_16BF; return true;
    case AB_F16: *out = CUDA_R_16F; return true;
    case AB_DTYPE_COUNT: break;
  }
  return false;
}

/* The input/output pairs cuBLAS runs with fp32 compute: 32F/32F and, for 16-bit inputs, an
 * output of the same type or 32F. */
static bool supported(ab_dtype_t in, ab_dtype_t out) { return out == in || (in != AB_F32 && out == AB_F32); }

ab_status ab_gemm_launch(ab_kernels_t *kx, const ab_kernel_t *k, const ab_dptr_t *buf, cudaStream_t s) {
  ab_diag_t *diag = &kx->dev->diag;
  ab_dtype_t in = (ab_dtype_t)k->dtype[0], out = (ab_dtype_t)k->dtype[1];
  cudaDataType_t tin, tout;
  if (!cuda_type(in, &tin) || !cuda_type(out, &tout) || !supported(in, out))
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "gemm with %s inputs and %s output: cuBLAS with fp32 compute takes f32/f32, bf16/bf16, bf16/f32, f16/f16 or f16/f32",
                       in == AB_F32 ? "f32" : in == AB_BF16 ? "bf16" : "f16",
                       out == AB_F32 ? "f32" : out == AB_BF16 ? "bf16" : "f16");
  if (k->m == 0 || k->n == 0) return AB_OK;
  if (k->m > INT64_MAX || k->n > INT64_MAX || k->k > INT64_MAX)
    return ab_diag_set(diag, AB_ERR_INVALID, "gemm shape %llux%llux%llu is too large", (unsigned long long)k->m,
                       (unsigned long long)k->n, (unsigned long long)k->k);
  int64_t m = (int64_t)k->m, n = (int64_t)k->n, kk = (int64_t)k->k;
  const float alpha = 1.0f, beta = 0.0f;
  const void *a = (const void *)(uintptr_t)buf[0], *b = (const void *)(uintptr_t)buf[1];
  void *c = (void *)(uintptr_t)buf[2];
  AB_CUBLAS_TRY(kx->cublas, diag, cublasSetStream_v2, kx->blas, s);
  AB_CUBLAS_TRY(kx->cublas, diag, cublasGemmEx_64, kx->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, kk, &alpha, b, tin, n, a,
                tin, kk > 0 ? kk : 1, &beta, c, tout, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return AB_OK;
}
