/* nccl_check.h: NCCL as the kernels reach it, and the checking macro every NCCL call goes
 * through (cublas_check.h does the same for cuBLAS).
 *
 * NCCL is loaded with dlopen by ab_comm_load (comm.cu), not linked: allocbench must start on
 * machines without it, and where it exists it often lives only inside a Python package
 * (site-packages/nvidia/nccl/lib). The few calls used are declared here, with the types of
 * NCCL 2's stable C ABI (nccl.h: ncclComm_t is an opaque pointer, ncclUniqueId 128 bytes,
 * ncclResult_t, ncclDataType_t and ncclRedOp_t int-sized enums with fixed values), so the
 * build needs no NCCL header either; comm.cu checks them against nccl.h where one is found.
 *
 * A failed call becomes AB_ERR_INVALID when NCCL refused the arguments (ncclInvalidArgument,
 * ncclInvalidUsage) and AB_ERR_CUDA otherwise, with "CALL failed at FILE:LINE: TEXT (LAST)"
 * in the diag, TEXT from ncclGetErrorString and LAST from ncclGetLastError. Include only
 * from CUDA translation units.
 */
#ifndef AB_NCCL_CHECK_H
#define AB_NCCL_CHECK_H

#include <cuda_runtime.h>

#include "kernels/base/status.h"

typedef struct ab_nccl_comm_s *ab_nccl_comm_t; /* ncclComm_t */
#define AB_NCCL_ID_BYTES 128
typedef struct ab_nccl_id_s {
  char internal[AB_NCCL_ID_BYTES];
} ab_nccl_id_t;                                /* ncclUniqueId */
typedef int ab_nccl_result_t;                  /* ncclResult_t */

#define AB_NCCL_SUCCESS 0
#define AB_NCCL_INVALID_ARGUMENT 4
#define AB_NCCL_INVALID_USAGE 5
#define AB_NCCL_IN_PROGRESS 7 /* ncclInProgress: a non-blocking call still running */
#define AB_NCCL_UINT8 1 /* ncclUint8: collectives move bytes */
#define AB_NCCL_SUM 0   /* ncclSum */

/* ncclConfig_t as NCCL 2.14 defined it: NCCL reads the fields a config's version names and
 * takes its defaults for the rest, so this prefix serves every later NCCL. */
typedef struct ab_nccl_config_s {
  size_t size;          /* sizeof this struct */
  unsigned int magic;   /* AB_NCCL_CONFIG_MAGIC */
  unsigned int version; /* AB_NCCL_CONFIG_VERSION */
  int blocking;         /* 0: calls return ncclInProgress and complete in the background */
} ab_nccl_config_t;
#define AB_NCCL_CONFIG_MAGIC 0xcafebeefu
#define AB_NCCL_CONFIG_VERSION 21400u /* NCCL_VERSION(2, 14, 0) */

/* name, return type, parameters: every call allocbench makes. */
#define AB_NCCL_FUNCS(X)                                                                            \
  X(ncclGetVersion, ab_nccl_result_t, (int *version))                                                \
  X(ncclGetErrorString, const char *, (ab_nccl_result_t result))                                     \
  X(ncclGetLastError, const char *, (ab_nccl_comm_t comm))                                           \
  X(ncclGetUniqueId, ab_nccl_result_t, (ab_nccl_id_t * id))                                          \
  X(ncclCommInitRankConfig, ab_nccl_result_t,                                                        \
    (ab_nccl_comm_t * comm, int nranks, ab_nccl_id_t id, int rank, ab_nccl_config_t *config))       \
  X(ncclCommGetAsyncError, ab_nccl_result_t, (ab_nccl_comm_t comm, ab_nccl_result_t * async_error)) \
  X(ncclGroupStart, ab_nccl_result_t, (void))                                                       \
  X(ncclGroupEnd, ab_nccl_result_t, (void))                                                         \
  X(ncclCommDestroy, ab_nccl_result_t, (ab_nccl_comm_t comm))                                        \
  X(ncclCommAbort, ab_nccl_result_t, (ab_nccl_comm_t comm))                                          \
  X(ncclAllGather, ab_nccl_result_t,                                                                 \
    (const void *sendbuff, void *recvbuff, size_t sendcount, int datatype, ab_nccl_comm_t comm,     \
     cudaStream_t stream))                                                                          \
  X(ncclReduceScatter, ab_nccl_result_t,                                                             \
    (const void *sendbuff, void *recvbuff, size_t recvcount, int datatype, int op, ab_nccl_comm_t comm, \
     cudaStream_t stream))

typedef struct ab_nccl_s {
#define AB_NCCL_FIELD(name, ret, params) ret(*name) params;
  AB_NCCL_FUNCS(AB_NCCL_FIELD)
#undef AB_NCCL_FIELD
  char path[512]; /* where it was loaded from */
  int version;    /* NCCL_VERSION_CODE, e.g. 22809 */
} ab_nccl_t;

/* The loaded library; NULL, with the reason in diag, before ab_comm_load succeeded. */
const ab_nccl_t *ab_nccl(ab_diag_t *diag);

static inline ab_status ab_nccl_status(const ab_nccl_t *api, ab_nccl_result_t r, ab_nccl_comm_t comm, const char *call,
                                       const char *file, int line, ab_diag_t *diag) {
  ab_status st = r == AB_NCCL_INVALID_ARGUMENT || r == AB_NCCL_INVALID_USAGE ? AB_ERR_INVALID : AB_ERR_CUDA;
  const char *last = api->ncclGetLastError(comm);
  return ab_diag_set(diag, st, "%s failed at %s:%d: %s%s%s%s", call, file, line, api->ncclGetErrorString(r),
                     last && last[0] ? " (" : "", last ? last : "", last && last[0] ? ")" : "");
}

/* Runs api->FN(ARGS...) for comm (NULL when there is none yet); on failure returns its
 * status from the enclosing function. */
#define AB_NCCL_TRY(api, comm, diag, fn, ...)                                             \
  do {                                                                                    \
    ab_nccl_result_t ab_nccl_r_ = (api)->fn(__VA_ARGS__);                                 \
    if (ab_nccl_r_ != AB_NCCL_SUCCESS)                                                    \
      return ab_nccl_status((api), ab_nccl_r_, (comm), #fn, __FILE__, __LINE__, (diag));  \
  } while (0)

#endif
