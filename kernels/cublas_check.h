/* cublas_check.h: cuBLAS as the kernels reach it, and the checking macro every cuBLAS call
 * goes through (cuda_check.h does the same for the CUDA runtime).
 *
 * cuBLAS is loaded with dlopen when the first kernels context opens (ab_cublas), not linked:
 * linking would map its 200 MB into every process, simulated runs and `allocbench list`
 * included, and tie the binary to machines that have it. The functions used are listed
 * once (AB_CUBLAS_FUNCS) and called through the table under their own names.
 *
 * A failed call becomes AB_ERR_INVALID when cuBLAS refused the arguments (NOT_SUPPORTED,
 * INVALID_VALUE: a type pair or shape it cannot run) and AB_ERR_CUDA otherwise, ALLOC_FAILED
 * included (cuBLAS's own memory, not the strategy's), with "CALL failed at FILE:LINE: NAME
 * (TEXT)" in the diag. Include only from CUDA translation units.
 */
#ifndef AB_CUBLAS_CHECK_H
#define AB_CUBLAS_CHECK_H

#include <cublas_v2.h>

#include "kernels/base/status.h"

#define AB_CUBLAS_FUNCS(X)                                                     \
  X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2) X(cublasGemmEx_64) \
  X(cublasGetStatusName) X(cublasGetStatusString)

typedef struct ab_cublas_s {
#define AB_CUBLAS_FIELD(name) decltype(&::name) name;
  AB_CUBLAS_FUNCS(AB_CUBLAS_FIELD)
#undef AB_CUBLAS_FIELD
} ab_cublas_t;

/* The loaded library (once per process, thread-safe); NULL, with the reason in diag, when it
 * cannot be loaded. */
const ab_cublas_t *ab_cublas(ab_diag_t *diag);

static inline ab_status ab_cublas_status(const ab_cublas_t *api, cublasStatus_t s, const char *call, const char *file,
                                         int line, ab_diag_t *diag) {
  ab_status st = s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE ? AB_ERR_INVALID : AB_ERR_CUDA;
  return ab_diag_set(diag, st, "%s failed at %s:%d: %s (%s)", call, file, line, api->cublasGetStatusName(s),
                     api->cublasGetStatusString(s));
}

/* Runs api->FN(ARGS...); on failure returns its status from the enclosing function. */
#define AB_CUBLAS_TRY(api, diag, fn, ...)                                         \
  do {                                                                            \
    cublasStatus_t ab_cublas_s_ = (api)->fn(__VA_ARGS__);                         \
    if (ab_cublas_s_ != CUBLAS_STATUS_SUCCESS)                                    \
      return ab_cublas_status((api), ab_cublas_s_, #fn, __FILE__, __LINE__, (diag)); \
  } while (0)

#endif
