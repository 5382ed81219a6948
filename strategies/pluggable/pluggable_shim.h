/* pluggable_shim.h: what the CUDA shim (pluggable_shim.c) and the pluggable strategy
 * (pluggable_card.c) agree on. Layer: strategies, but the shim is a shared object of its own
 * that includes nothing of allocbench but this header, and this header includes only libc.
 *
 * Note [The CUDA shim]
 * A library made for PyTorch's CUDAPluggableAllocator calls the CUDA runtime and driver
 * itself: cudaMalloc, cuMemCreate, ... Whether it left those symbols undefined or linked
 * libcudart.so, its calls must land on the run's device (device.h), so that the budget, the
 * faults, the cost model, the OOM report and the segment map see them. The shim is a shared
 * object exporting those names. It is loaded RTLD_GLOBAL before the library (pluggable_library.c),
 * and the dynamic linker looks a symbol up in the global scope before the library's own
 * dependencies, so the library's cudaMalloc is the shim's even when it links libcudart.so.
 * The binary itself exports no CUDA names (its runtime is static), so nothing else binds to
 * the shim by accident.
 *
 * Each exported call forwards to the card the calling thread has in use: a table of
 * functions (ab_shim_card_t) that the strategy puts in place around each call into the
 * library (ab_shim_use), so ranks running as threads each reach their own device. The
 * table speaks CUDA's types as plain C ones and answers with CUDA's numeric error codes
 * (below), which the runtime and the driver share for everything the card says; no CUDA
 * header is needed on either side.
 *
 * Calls the card does not serve: on the simulated card they fail with
 * AB_CU_NOT_SUPPORTED and the card records which call it was (refuse), so the run fails
 * with one line naming it. On a GPU (forwards set) they go to the real library the
 * plugin loaded (libcudart.so, libcuda.so.1), except those that allocate device memory the
 * device layer cannot count (cudaMallocManaged, memory pools of the library's own, ...),
 * which are refused there too.
 */
#ifndef AB_PLUGGABLE_SHIM_H
#define AB_PLUGGABLE_SHIM_H

#include <stddef.h>

/* CUDA's error codes, the same number in cudaError_t and CUresult. */
#define AB_CU_SUCCESS 0
#define AB_CU_INVALID_VALUE 1
#define AB_CU_OUT_OF_MEMORY 2     /* cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY */
#define AB_CU_NOT_INITIALIZED 3   /* cudaErrorInitializationError: no card in use */
#define AB_CU_INVALID_DEVICE 101
#define AB_CU_INVALID_HANDLE 400  /* cudaErrorInvalidResourceHandle: an unknown stream or handle */
#define AB_CU_NOT_FOUND 500       /* cuGetProcAddress of a symbol nobody provides */
#define AB_CU_NOT_SUPPORTED 801
#define AB_CU_UNKNOWN 999         /* any other failure of the device */

/* Why the card refused a call (refuse's why). */
#define AB_SHIM_UNKNOWN 0     /* the card has no such call */
#define AB_SHIM_UNCOUNTED 1   /* it would allocate device memory the device layer cannot count */
#define AB_SHIM_NO_LIBRARY 2  /* it goes to the real library, and the plugin loaded none */

/* The card. Every call returns one of the codes above; pointers are device addresses as
 * the library sees them, streams are cudaStream_t values, handles CUmemGenericAllocationHandle. */
typedef struct ab_shim_card_s {
  void *ctx;          /* passed back to every call */
  int ordinal;        /* the device the library runs on (cudaGetDevice) */
  int forwards;       /* nonzero: calls the card does not serve go to the real libraries */
  size_t granule;     /* cuMemGetAllocationGranularity */
  int (*malloc)(void *ctx, void **p, size_t bytes);
  int (*free)(void *ctx, void *p);
  int (*malloc_async)(void *ctx, void **p, size_t bytes, void *stream);
  int (*free_async)(void *ctx, void *p, void *stream);
  int (*mem_info)(void *ctx, size_t *free_bytes, size_t *total_bytes);
  int (*synchronize)(void *ctx, void *stream, int whole_device);
  /* The device's stream-ordered pool, CUDA's default pool: attr is a cudaMemPoolAttr. */
  int (*pool_set)(void *ctx, int attr, unsigned long long value);
  int (*pool_get)(void *ctx, int attr, unsigned long long *value);
  int (*pool_trim)(void *ctx, size_t keep_bytes);
  /* Virtual memory: reservations, physical allocations (handles), mappings. */
  int (*va_reserve)(void *ctx, unsigned long long *p, size_t bytes, size_t alignment);
  int (*va_free)(void *ctx, unsigned long long p, size_t bytes);
  int (*mem_create)(void *ctx, unsigned long long *handle, size_t bytes, int location_type, int location_id);
  int (*mem_release)(void *ctx, unsigned long long handle);
  int (*mem_map)(void *ctx, unsigned long long at, size_t bytes, size_t offset, unsigned long long handle);
  int (*mem_unmap)(void *ctx, unsigned long long at, size_t bytes);
  int (*set_access)(void *ctx, unsigned long long at, size_t bytes);
  /* Records that call was refused and why (AB_SHIM_*); returns the code the call fails with. */
  int (*refuse)(void *ctx, const char *call, int why);
} ab_shim_card_t;

/* The shim's one entry point of its own: makes card the calling thread's (NULL: none) and
 * returns the one it replaces. Calls made with no card fail with AB_CU_NOT_INITIALIZED. */
typedef const ab_shim_card_t *(*ab_shim_use_fn)(const ab_shim_card_t *card);
#define AB_SHIM_USE_SYMBOL "ab_shim_use"

#endif
