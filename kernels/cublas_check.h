/* cublas_check.h: the checking macro every cuBLAS call goes through (cuda_check.h does the
 * same for the CUDA runtime).
 *
 * A failure becomes AB_ERR_INVALID when cuBLAS refused the arguments (NOT_SUPPORTED,
 * INVALID_VALUE: a type pair or shape it cannot run) and AB_ERR_CUDA otherwise, ALLOC_FAILED
 * included (cuBLAS's own memory, not the strategy's), with "CALL failed at FILE:LINE: NAME
 * (TEXT)" in the diag. Include only from CUDA translation units.
 */
#ifndef AB_CUBLAS_CHECK_H
#define AB_CUBLAS_CHECK_H

#include <cublas_v2.h>

#include "strategies/status.h"

static inline ab_status ab_cublas_status(cublasStatus_t s, const char *call, const char *file, int line, ab_diag_t *diag) {
  ab_status st = s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE ? AB_ERR_INVALID : AB_ERR_CUDA;
  return ab_diag_set(diag, st, "%s failed at %s:%d: %s (%s)", call, file, line, cublasGetStatusName(s),
                     cublasGetStatusString(s));
}

/* Runs a cuBLAS call; on failure returns its status from the enclosing function. */
#define AB_CUBLAS_TRY(diag, call)                                                 \
  do {                                                                            \
    cublasStatus_t ab_cublas_s_ = (call);                                         \
    if (ab_cublas_s_ != CUBLAS_STATUS_SUCCESS)                                    \
      return ab_cublas_status(ab_cublas_s_, #call, __FILE__, __LINE__, (diag));   \
  } while (0)

#endif
