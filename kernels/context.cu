/* context.cu: the kernels context (kernels.h): the cuBLAS handle, launches and their
 * timing with CUDA events, step marks, the communicator collectives run on, and host
 * copies. */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_internal.h"

ab_status ab_kernels_open(ab_device_t *dev, ab_kernels_t **out, ab_diag_t *diag) {
  *out = NULL;
  if (dev->kind != AB_DEVICE_CUDA) return AB_OK;
  ab_kernels_t *kx = (ab_kernels_t *)calloc(1, sizeof *kx);
  if (kx == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  kx->dev = dev;
  kx->cublas = ab_cublas(diag);
  cublasStatus_t s = kx->cublas ? kx->cublas->cublasCreate_v2(&kx->blas) : CUBLAS_STATUS_NOT_INITIALIZED;
  if (s != CUBLAS_STATUS_SUCCESS) {
    ab_status st = kx->cublas ? ab_cublas_status(kx->cublas, s, "cublasCreate_v2", __FILE__, __LINE__, diag) : AB_ERR_CUDA;
    free(kx);
    return st;
  }
  *out = kx;
  return AB_OK;
}

ab_status ab_kernels_close(ab_kernels_t *kx, ab_diag_t *diag) {
  if (kx == NULL) return AB_OK;
  ab_status st = AB_OK;
  AB_CUDA_CHECKED(st, diag, cudaDeviceSynchronize());
  for (size_t i = 0; i < kx->pairs_created; i++) {
    AB_CUDA_CHECKED(st, diag, cudaEventDestroy(kx->pair[i][0]));
    AB_CUDA_CHECKED(st, diag, cudaEventDestroy(kx->pair[i][1]));
  }
  for (size_t i = 0; i < kx->marks_created; i++) AB_CUDA_CHECKED(st, diag, cudaEventDestroy(kx->mark[i]));
  if (kx->join) AB_CUDA_CHECKED(st, diag, cudaEventDestroy(kx->join));
  cublasStatus_t s = kx->cublas->cublasDestroy_v2(kx->blas);
  if (s != CUBLAS_STATUS_SUCCESS && st == AB_OK)
    st = ab_cublas_status(kx->cublas, s, "cublasDestroy_v2", __FILE__, __LINE__, diag);
  free(kx->mark_ms);
  free(kx);
  return st;
}

/* The cudaStream_t of a stream index; the device creates it on first use. */
static ab_status stream_of(ab_kernels_t *kx, unsigned stream, cudaStream_t *out) {
  *out = (cudaStream_t)ab_device_stream_handle(kx->dev, stream);
  if (*out == NULL && stream != 0) return AB_ERR_CUDA; /* the device said why in its diag */
  return AB_OK;
}

/* Reads the pair of launch number i into kernel_ms, waiting for it to end. */
static ab_status read_pair(ab_kernels_t *kx, uint64_t i) {
  cudaEvent_t *p = kx->pair[i % AB_KX_PAIRS];
  float ms = 0;
  AB_CUDA_TRY(&kx->dev->diag, cudaEventSynchronize(p[1]));
  AB_CUDA_TRY(&kx->dev->diag, cudaEventElapsedTime(&ms, p[0], p[1]));
  kx->kernel_ms += ms;
  return AB_OK;
}

/* Reads the interval from mark i to mark i + 1 into mark_ms, waiting for the latter. */
static ab_status read_interval(ab_kernels_t *kx, uint64_t i) {
  if (kx->nmark_ms == kx->capmark_ms) {
    size_t cap = kx->capmark_ms ? kx->capmark_ms * 2 : 256;
    double *grown = (double *)realloc(kx->mark_ms, cap * sizeof *grown);
    if (grown == NULL) return ab_diag_set(&kx->dev->diag, AB_ERR_INTERNAL, "out of host memory");
    kx->mark_ms = grown;
    kx->capmark_ms = cap;
  }
  cudaEvent_t a = kx->mark[i % AB_KX_MARKS], b = kx->mark[(i + 1) % AB_KX_MARKS];
  float ms = 0;
  AB_CUDA_TRY(&kx->dev->diag, cudaEventSynchronize(b));
  AB_CUDA_TRY(&kx->dev->diag, cudaEventElapsedTime(&ms, a, b));
  kx->mark_ms[kx->nmark_ms++] = ms;
  return AB_OK;
}

static ab_status copy_launch(ab_kernels_t *kx, const ab_kernel_t *k, const ab_dptr_t *buf, cudaStream_t s) {
  /* copy: src -> dst; allgather: shard -> full; reduce_scatter: full -> shard. */
  if (k->n == 0 || buf[0] == buf[1]) return AB_OK;
  AB_CUDA_TRY(&kx->dev->diag, cudaMemcpyAsync((void *)(uintptr_t)buf[1], (const void *)(uintptr_t)buf[0], k->n,
                                              cudaMemcpyDeviceToDevice, s));
  return AB_OK;
}

ab_status ab_kernels_launch(ab_kernels_t *kx, const ab_kernel_t *k, const ab_dptr_t buf[AB_KERNEL_MAX_BUFS],
                            unsigned stream) {
  ab_diag_t *diag = &kx->dev->diag;
  cudaStream_t s;
  AB_TRY(stream_of(kx, stream, &s));
  uint64_t i = kx->pairs_recorded;
  size_t slot = (size_t)(i % AB_KX_PAIRS);
  if (i >= AB_KX_PAIRS) {
    AB_TRY(read_pair(kx, i - AB_KX_PAIRS));
  } else if (slot == kx->pairs_created) {
    AB_CUDA_TRY(diag, cudaEventCreate(&kx->pair[slot][0]));
    cudaError_t e = cudaEventCreate(&kx->pair[slot][1]);
    if (e != cudaSuccess) {
      (void)cudaEventDestroy(kx->pair[slot][0]);
      return ab_cuda_status(e, "cudaEventCreate", __FILE__, __LINE__, diag);
    }
    kx->pairs_created++;
  }
  AB_CUDA_TRY(diag, cudaEventRecord(kx->pair[slot][0], s));
  switch ((ab_kernel_op_t)k->op) {
    case AB_K_GEMM: AB_TRY(ab_gemm_launch(kx, k, buf, s)); break;
    case AB_K_GELU:
    case AB_K_CAST:
    case AB_K_ADAM:
    case AB_K_SCALE_CHECK: AB_TRY(ab_elementwise_launch(kx, k, buf, s)); break;
    case AB_K_COPY: AB_TRY(copy_launch(kx, k, buf, s)); break;
    case AB_K_ALLGATHER:
    case AB_K_REDUCE_SCATTER: AB_TRY(kx->comm ? ab_collective_launch(kx, k, buf, s) : copy_launch(kx, k, buf, s)); break;
    case AB_K_COUNT: return ab_diag_set(diag, AB_ERR_INVALID, "kernel op %u is not known", k->op);
  }
  AB_CUDA_TRY(diag, cudaEventRecord(kx->pair[slot][1], s));
  kx->pairs_recorded++;
  return AB_OK;
}

void ab_kernels_set_comm(ab_kernels_t *kx, ab_comm_t *c) { kx->comm = c; }

/* One event serves every join: a wait takes the event as last recorded, so recording it
 * again for the next join does not disturb the waits already queued. */
ab_status ab_kernels_join(ab_kernels_t *kx, unsigned from, unsigned to) {
  ab_diag_t *diag = &kx->dev->diag;
  cudaStream_t a = (cudaStream_t)ab_device_stream_handle(kx->dev, from);
  cudaStream_t b = (cudaStream_t)ab_device_stream_handle(kx->dev, to);
  if ((a == NULL && from != 0) || (b == NULL && to != 0)) return AB_ERR_CUDA; /* the device said why */
  if (kx->join == NULL) AB_CUDA_TRY(diag, cudaEventCreateWithFlags(&kx->join, cudaEventDisableTiming));
  AB_CUDA_TRY(diag, cudaEventRecord(kx->join, a));
  AB_CUDA_TRY(diag, cudaStreamWaitEvent(b, kx->join, 0));
  return AB_OK;
}

ab_status ab_kernels_mark(ab_kernels_t *kx) {
  uint64_t i = kx->marks_recorded;
  size_t slot = (size_t)(i % AB_KX_MARKS);
  if (i >= AB_KX_MARKS) {
    AB_TRY(read_interval(kx, i - AB_KX_MARKS));
  } else if (slot == kx->marks_created) {
    AB_CUDA_TRY(&kx->dev->diag, cudaEventCreate(&kx->mark[slot]));
    kx->marks_created++;
  }
  AB_CUDA_TRY(&kx->dev->diag, cudaEventRecord(kx->mark[slot], 0));
  kx->marks_recorded++;
  return AB_OK;
}

ab_status ab_kernels_timing(ab_kernels_t *kx, double *mark_ms, size_t cap, size_t *n, double *kernel_ms) {
  AB_CUDA_TRY(&kx->dev->diag, cudaDeviceSynchronize());
  uint64_t p = kx->pairs_recorded, m = kx->marks_recorded;
  for (uint64_t i = p > AB_KX_PAIRS ? p - AB_KX_PAIRS : 0; i < p; i++) AB_TRY(read_pair(kx, i));
  for (uint64_t i = m > AB_KX_MARKS ? m - AB_KX_MARKS : 0; i + 1 < m; i++) AB_TRY(read_interval(kx, i));
  *n = kx->nmark_ms < cap ? kx->nmark_ms : cap;
  if (*n) memcpy(mark_ms, kx->mark_ms, *n * sizeof *mark_ms);
  *kernel_ms = kx->kernel_ms;
  kx->pairs_recorded = kx->marks_recorded = 0;
  kx->nmark_ms = 0;
  kx->kernel_ms = 0;
  return AB_OK;
}

ab_status ab_kernels_upload(ab_kernels_t *kx, ab_dptr_t dst, const void *src, uint64_t bytes) {
  AB_CUDA_TRY(&kx->dev->diag, cudaDeviceSynchronize());
  AB_CUDA_TRY(&kx->dev->diag, cudaMemcpy((void *)(uintptr_t)dst, src, bytes, cudaMemcpyHostToDevice));
  return AB_OK;
}

ab_status ab_kernels_download(ab_kernels_t *kx, void *dst, ab_dptr_t src, uint64_t bytes) {
  AB_CUDA_TRY(&kx->dev->diag, cudaDeviceSynchronize());
  AB_CUDA_TRY(&kx->dev->diag, cudaMemcpy(dst, (const void *)(uintptr_t)src, bytes, cudaMemcpyDeviceToHost));
  return AB_OK;
}
