/* cuda_check.h: the checking macros every CUDA runtime, driver and cuBLAS call goes through.
 *
 * Each failure is turned into an ab_status: out-of-memory errors become AB_ERR_OOM (an
 * expected outcome), anything else AB_ERR_CUDA with "CALL failed at FILE:LINE: NAME (TEXT)"
 * in the given diag. The runtime's sticky last error is cleared so that the next call does
 * not report this one. Include only from translation units built with CUDA.
 */
#ifndef AB_CUDA_CHECK_H
#define AB_CUDA_CHECK_H

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "kernels/base/status.h"

static inline ab_status ab_cuda_status(cudaError_t e, const char *call, const char *file, int line,
                                       ab_diag_t *diag) {
  (void)cudaGetLastError();
  if (e == cudaErrorMemoryAllocation) return AB_ERR_OOM;
  return ab_diag_set(diag, AB_ERR_CUDA, "%s failed at %s:%d: %s (%s)", call, file, line, cudaGetErrorName(e),
                     cudaGetErrorString(e));
}

/* Runs a runtime call; on failure returns its status from the enclosing function. */
#define AB_CUDA_TRY(diag, call)                                                   \
  do {                                                                            \
    cudaError_t ab_cuda_e_ = (call);                                              \
    if (ab_cuda_e_ != cudaSuccess)                                                \
      return ab_cuda_status(ab_cuda_e_, #call, __FILE__, __LINE__, (diag));       \
  } while (0)

/* The same, for a call whose failure must be recorded without leaving (cleanup paths). */
#define AB_CUDA_CHECKED(st, diag, call)                                           \
  do {                                                                            \
    cudaError_t ab_cuda_e_ = (call);                                              \
    if (ab_cuda_e_ != cudaSuccess && (st) == AB_OK)                               \
      (st) = ab_cuda_status(ab_cuda_e_, #call, __FILE__, __LINE__, (diag));       \
  } while (0)

#endif
