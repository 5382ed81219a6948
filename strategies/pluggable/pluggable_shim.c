/* pluggable_shim.c: the CUDA runtime and driver calls of a pluggable library, forwarded to
 * the card of the calling thread (Note [The CUDA shim] in pluggable_shim.h).
 *
 * A shared object of its own, built with hidden visibility: it exports CUDA's names and
 * ab_shim_use, nothing else, and depends on libc alone. Three kinds of call:
 *   served     the card does the work (allocation, virtual memory, the stream-ordered pool,
 *              memory info, synchronisation);
 *   answered   questions about the device, which the shim answers on the simulated card and
 *              the real library answers on a GPU (cuInit, cuDeviceGet, ...);
 *   passing    everything else a memory allocator commonly calls (streams, events, copies,
 *              ...): refused on the simulated card, sent to the real library on a GPU; those
 *              that allocate memory the device cannot count are refused on both.
 * A call the shim does not export at all reaches the library's own libcudart.so, or, for a
 * library that links none, is refused when it is loaded (pluggable_library.c).
 */
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "strategies/pluggable/pluggable_shim.h"

#define EXPORT __attribute__((visibility("default")))

enum { RUNTIME = 0, DRIVER = 1 };

static _Thread_local const ab_shim_card_t *card;
static _Thread_local int last_error; /* the runtime's sticky error, as cudaGetLastError sees it */

EXPORT const ab_shim_card_t *ab_shim_use(const ab_shim_card_t *c) {
  const ab_shim_card_t *old = card;
  card = c;
  return old;
}

/* A runtime call's result, remembered for cudaGetLastError. */
static int rt(int code) {
  if (code != AB_CU_SUCCESS) last_error = code;
  return code;
}

static int done(int lib, int code) { return lib == RUNTIME ? rt(code) : code; }

/* ---- the real libraries, on a GPU ------------------------------------------------------- */

static int find_cudart(struct dl_phdr_info *info, size_t size, void *out) {
  (void)size;
  const char *base = strrchr(info->dlpi_name, '/');
  base = base ? base + 1 : info->dlpi_name;
  if (strncmp(base, "libcudart.so", 12) != 0) return 0;
  *(const char **)out = info->dlpi_name;
  return 1;
}

/* The runtime the library linked (found among the loaded objects: the plugin brought it), or
 * the driver; NULL when there is none. Kept once found: dlopen counts a reference, so the
 * library stays loaded after the plugin that brought it is unloaded, and the next plugin
 * finds it again. */
static void *real_library(int lib) {
  static _Atomic(void *) found[2];
  void *h = atomic_load(&found[lib]);
  if (h) return h;
  if (lib == RUNTIME) {
    const char *name = NULL;
    dl_iterate_phdr(find_cudart, &name);
    h = name ? dlopen(name, RTLD_LAZY | RTLD_NOLOAD) : NULL;
  } else {
    h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  }
  if (h) atomic_store(&found[lib], h);
  return h;
}

/* dlsym in the real library itself, so the shim's own definition is never found again. */
static void *real(const char *name, int lib) {
  void *h = real_library(lib);
  return h ? dlsym(h, name) : NULL;
}

/* A call the card does not serve: the real function to go to, or NULL with the code the call
 * fails with (Note [The CUDA shim]). */
static void *unserved(const char *call, int lib, int allocates, int *code) {
  const ab_shim_card_t *c = card;
  if (c == NULL) {
    *code = AB_CU_NOT_INITIALIZED;
    return NULL;
  }
  int why = allocates ? AB_SHIM_UNCOUNTED : AB_SHIM_UNKNOWN;
  if (c->forwards && !allocates) {
    void *fn = real(call, lib);
    if (fn) return fn;
    why = AB_SHIM_NO_LIBRARY;
  }
  *code = c->refuse(c->ctx, call, why);
  return NULL;
}

/* ---- passing calls ------------------------------------------------------------------------ */

#define PASSING(lib, allocates, name, params, args)   \
  EXPORT int name params {                            \
    int code;                                         \
    void *fn = unserved(#name, lib, allocates, &code); \
    if (fn == NULL) return done(lib, code);           \
    int(*real_fn) params;                             \
    memcpy(&real_fn, &fn, sizeof fn);                 \
    return done(lib, real_fn args);                   \
  }

/* Streams, events, copies, device properties, host memory, peers, IPC. */
PASSING(RUNTIME, 0, cudaStreamCreate, (void **s), (s))
PASSING(RUNTIME, 0, cudaStreamCreateWithFlags, (void **s, unsigned f), (s, f))
PASSING(RUNTIME, 0, cudaStreamCreateWithPriority, (void **s, unsigned f, int p), (s, f, p))
PASSING(RUNTIME, 0, cudaStreamDestroy, (void *s), (s))
PASSING(RUNTIME, 0, cudaStreamQuery, (void *s), (s))
PASSING(RUNTIME, 0, cudaStreamWaitEvent, (void *s, void *e, unsigned f), (s, e, f))
PASSING(RUNTIME, 0, cudaEventCreate, (void **e), (e))
PASSING(RUNTIME, 0, cudaEventCreateWithFlags, (void **e, unsigned f), (e, f))
PASSING(RUNTIME, 0, cudaEventDestroy, (void *e), (e))
PASSING(RUNTIME, 0, cudaEventRecord, (void *e, void *s), (e, s))
PASSING(RUNTIME, 0, cudaEventSynchronize, (void *e), (e))
PASSING(RUNTIME, 0, cudaEventQuery, (void *e), (e))
PASSING(RUNTIME, 0, cudaEventElapsedTime, (float *ms, void *a, void *b), (ms, a, b))
PASSING(RUNTIME, 0, cudaMemcpy, (void *d, const void *s, size_t n, int k), (d, s, n, k))
PASSING(RUNTIME, 0, cudaMemcpyAsync, (void *d, const void *s, size_t n, int k, void *st), (d, s, n, k, st))
PASSING(RUNTIME, 0, cudaMemset, (void *d, int v, size_t n), (d, v, n))
PASSING(RUNTIME, 0, cudaMemsetAsync, (void *d, int v, size_t n, void *st), (d, v, n, st))
PASSING(RUNTIME, 0, cudaGetDeviceProperties, (void *prop, int d), (prop, d))
PASSING(RUNTIME, 0, cudaGetDeviceProperties_v2, (void *prop, int d), (prop, d))
PASSING(RUNTIME, 0, cudaPointerGetAttributes, (void *attr, const void *p), (attr, p))
PASSING(RUNTIME, 0, cudaMallocHost, (void **p, size_t n), (p, n))
PASSING(RUNTIME, 0, cudaHostAlloc, (void **p, size_t n, unsigned f), (p, n, f))
PASSING(RUNTIME, 0, cudaFreeHost, (void *p), (p))
PASSING(RUNTIME, 0, cudaDeviceCanAccessPeer, (int *can, int d, int peer), (can, d, peer))
PASSING(RUNTIME, 0, cudaDeviceEnablePeerAccess, (int peer, unsigned f), (peer, f))
PASSING(RUNTIME, 0, cudaIpcGetMemHandle, (void *h, void *p), (h, p))
PASSING(RUNTIME, 0, cudaIpcOpenMemHandle, (void **p, const void *h, unsigned f), (p, h, f))
PASSING(RUNTIME, 0, cudaIpcCloseMemHandle, (void *p), (p))
/* Device memory the device layer would not see. */
PASSING(RUNTIME, 1, cudaMallocManaged, (void **p, size_t n, unsigned f), (p, n, f))
PASSING(RUNTIME, 1, cudaMallocPitch, (void **p, size_t *pitch, size_t w, size_t h), (p, pitch, w, h))
PASSING(RUNTIME, 1, cudaMemPoolCreate, (void **pool, const void *props), (pool, props))
PASSING(RUNTIME, 1, cudaMemPoolDestroy, (void *pool), (pool))
PASSING(RUNTIME, 1, cudaMallocFromPoolAsync, (void **p, size_t n, void *pool, void *s), (p, n, pool, s))
PASSING(RUNTIME, 1, cudaDeviceSetMemPool, (int d, void *pool), (d, pool))

PASSING(DRIVER, 0, cuStreamCreate, (void **s, unsigned f), (s, f))
PASSING(DRIVER, 0, cuStreamDestroy_v2, (void *s), (s))
PASSING(DRIVER, 0, cuStreamWaitEvent, (void *s, void *e, unsigned f), (s, e, f))
PASSING(DRIVER, 0, cuEventCreate, (void **e, unsigned f), (e, f))
PASSING(DRIVER, 0, cuEventDestroy_v2, (void *e), (e))
PASSING(DRIVER, 0, cuEventRecord, (void *e, void *s), (e, s))
PASSING(DRIVER, 0, cuEventSynchronize, (void *e), (e))
PASSING(DRIVER, 0, cuEventQuery, (void *e), (e))
PASSING(DRIVER, 0, cuMemsetD8_v2, (unsigned long long d, unsigned char v, size_t n), (d, v, n))
PASSING(DRIVER, 0, cuPointerGetAttribute, (void *data, int attr, unsigned long long p), (data, attr, p))
PASSING(DRIVER, 0, cuMemGetAddressRange_v2, (unsigned long long *base, size_t *n, unsigned long long p), (base, n, p))
PASSING(DRIVER, 1, cuMemAllocManaged, (unsigned long long *p, size_t n, unsigned f), (p, n, f))
PASSING(DRIVER, 1, cuMemAllocPitch_v2, (unsigned long long *p, size_t *pitch, size_t w, size_t h, unsigned e),
        (p, pitch, w, h, e))
PASSING(DRIVER, 1, cuMemPoolCreate, (void **pool, const void *props), (pool, props))
PASSING(DRIVER, 1, cuMemAllocFromPoolAsync, (unsigned long long *p, size_t n, void *pool, void *s), (p, n, pool, s))

/* ---- answered calls ----------------------------------------------------------------------- */

/* On a GPU the real library answers; ANSWER leaves the function with its answer. */
#define ANSWER(lib, name, params, args)                                   \
  do {                                                                    \
    if (card == NULL) return done(lib, AB_CU_NOT_INITIALIZED);            \
    if (card->forwards) {                                                 \
      void *fn_ = real(name, lib);                                        \
      if (fn_ == NULL) return done(lib, card->refuse(card->ctx, name, AB_SHIM_NO_LIBRARY)); \
      int(*real_fn_) params;                                              \
      memcpy(&real_fn_, &fn_, sizeof fn_);                                \
      return done(lib, real_fn_ args);                                    \
    }                                                                     \
  } while (0)

static char fake_context; /* the one context of the simulated card, as a CUcontext */

EXPORT int cuInit(unsigned flags) {
  ANSWER(DRIVER, "cuInit", (unsigned), (flags));
  return flags ? AB_CU_INVALID_VALUE : AB_CU_SUCCESS;
}

EXPORT int cuDriverGetVersion(int *v) {
  ANSWER(DRIVER, "cuDriverGetVersion", (int *), (v));
  if (v == NULL) return AB_CU_INVALID_VALUE;
  *v = 13000;
  return AB_CU_SUCCESS;
}

EXPORT int cudaDriverGetVersion(int *v) {
  ANSWER(RUNTIME, "cudaDriverGetVersion", (int *), (v));
  if (v == NULL) return rt(AB_CU_INVALID_VALUE);
  *v = 13000;
  return AB_CU_SUCCESS;
}

EXPORT int cudaRuntimeGetVersion(int *v) {
  ANSWER(RUNTIME, "cudaRuntimeGetVersion", (int *), (v));
  if (v == NULL) return rt(AB_CU_INVALID_VALUE);
  *v = 13000;
  return AB_CU_SUCCESS;
}

EXPORT int cuDeviceGet(int *dev, int ordinal) {
  ANSWER(DRIVER, "cuDeviceGet", (int *, int), (dev, ordinal));
  if (dev == NULL) return AB_CU_INVALID_VALUE;
  if (ordinal != card->ordinal) return AB_CU_INVALID_DEVICE;
  *dev = ordinal;
  return AB_CU_SUCCESS;
}

EXPORT int cuDeviceGetCount(int *n) {
  ANSWER(DRIVER, "cuDeviceGetCount", (int *), (n));
  if (n == NULL) return AB_CU_INVALID_VALUE;
  *n = card->ordinal + 1;
  return AB_CU_SUCCESS;
}

EXPORT int cuCtxGetCurrent(void **ctx) {
  ANSWER(DRIVER, "cuCtxGetCurrent", (void **), (ctx));
  if (ctx == NULL) return AB_CU_INVALID_VALUE;
  *ctx = &fake_context;
  return AB_CU_SUCCESS;
}

EXPORT int cuCtxSetCurrent(void *ctx) {
  ANSWER(DRIVER, "cuCtxSetCurrent", (void *), (ctx));
  return ctx == NULL || ctx == &fake_context ? AB_CU_SUCCESS : AB_CU_INVALID_VALUE;
}

EXPORT int cuCtxGetDevice(int *dev) {
  ANSWER(DRIVER, "cuCtxGetDevice", (int *), (dev));
  if (dev == NULL) return AB_CU_INVALID_VALUE;
  *dev = card->ordinal;
  return AB_CU_SUCCESS;
}

EXPORT int cuDevicePrimaryCtxRetain(void **ctx, int dev) {
  ANSWER(DRIVER, "cuDevicePrimaryCtxRetain", (void **, int), (ctx, dev));
  if (ctx == NULL) return AB_CU_INVALID_VALUE;
  if (dev != card->ordinal) return AB_CU_INVALID_DEVICE;
  *ctx = &fake_context;
  return AB_CU_SUCCESS;
}

EXPORT int cuDevicePrimaryCtxRelease_v2(int dev) {
  ANSWER(DRIVER, "cuDevicePrimaryCtxRelease_v2", (int), (dev));
  return dev == card->ordinal ? AB_CU_SUCCESS : AB_CU_INVALID_DEVICE;
}

/* The attributes an allocator asks before choosing a path: memory pools (115) and virtual
 * memory management (102) are there; any other is refused by name. */
static int attribute(int lib, int *value, int attr, int dev) {
  if (value == NULL) return done(lib, AB_CU_INVALID_VALUE);
  if (dev != card->ordinal) return done(lib, AB_CU_INVALID_DEVICE);
  if (attr == 115 || (lib == DRIVER && attr == 102)) {
    *value = 1;
    return AB_CU_SUCCESS;
  }
  static _Thread_local char call[64];
  snprintf(call, sizeof call, "%s(attribute %d)", lib == DRIVER ? "cuDeviceGetAttribute" : "cudaDeviceGetAttribute",
           attr);
  return done(lib, card->refuse(card->ctx, call, AB_SHIM_UNKNOWN));
}

EXPORT int cudaDeviceGetAttribute(int *value, int attr, int dev) {
  ANSWER(RUNTIME, "cudaDeviceGetAttribute", (int *, int, int), (value, attr, dev));
  return attribute(RUNTIME, value, attr, dev);
}

EXPORT int cuDeviceGetAttribute(int *value, int attr, int dev) {
  ANSWER(DRIVER, "cuDeviceGetAttribute", (int *, int, int), (value, attr, dev));
  return attribute(DRIVER, value, attr, dev);
}

/* ---- errors ------------------------------------------------------------------------------- */

static const struct {
  int code;
  const char *runtime_name, *driver_name, *text;
} errors[] = {
    {AB_CU_SUCCESS, "cudaSuccess", "CUDA_SUCCESS", "no error"},
    {AB_CU_INVALID_VALUE, "cudaErrorInvalidValue", "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {AB_CU_OUT_OF_MEMORY, "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {AB_CU_NOT_INITIALIZED, "cudaErrorInitializationError", "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {AB_CU_INVALID_DEVICE, "cudaErrorInvalidDevice", "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {AB_CU_INVALID_HANDLE, "cudaErrorInvalidResourceHandle", "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {AB_CU_NOT_FOUND, "cudaErrorSymbolNotFound", "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {AB_CU_NOT_SUPPORTED, "cudaErrorNotSupported", "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
};

/* The text of a code the shim returns; others are the real library's to name, if any. */
static const char *error_text(int lib, int code, int name, const char *real_fn) {
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (errors[i].code == code) return name ? (lib == DRIVER ? errors[i].driver_name : errors[i].runtime_name) : errors[i].text;
  void *fn = card && card->forwards ? real(real_fn, lib) : NULL;
  if (fn && lib == RUNTIME) {
    const char *(*text)(int);
    memcpy(&text, &fn, sizeof fn);
    return text(code);
  }
  if (fn) {
    int (*text)(int, const char **);
    const char *s = NULL;
    memcpy(&text, &fn, sizeof fn);
    if (text(code, &s) == AB_CU_SUCCESS && s) return s;
  }
  return name ? "cudaErrorUnknown" : "unrecognized error code";
}

EXPORT const char *cudaGetErrorString(int code) { return error_text(RUNTIME, code, 0, "cudaGetErrorString"); }
EXPORT const char *cudaGetErrorName(int code) { return error_text(RUNTIME, code, 1, "cudaGetErrorName"); }

EXPORT int cuGetErrorString(int code, const char **s) {
  if (s == NULL) return AB_CU_INVALID_VALUE;
  *s = error_text(DRIVER, code, 0, "cuGetErrorString");
  return AB_CU_SUCCESS;
}

EXPORT int cuGetErrorName(int code, const char **s) {
  if (s == NULL) return AB_CU_INVALID_VALUE;
  *s = error_text(DRIVER, code, 1, "cuGetErrorName");
  return AB_CU_SUCCESS;
}

EXPORT int cudaGetLastError(void) {
  int e = last_error;
  last_error = AB_CU_SUCCESS;
  return e;
}

EXPORT int cudaPeekAtLastError(void) { return last_error; }

/* ---- served calls: the runtime -------------------------------------------------------------- */

#define CARD_OR_FAIL(lib)                                        \
  do {                                                           \
    if (card == NULL) return done(lib, AB_CU_NOT_INITIALIZED);   \
  } while (0)

EXPORT int cudaMalloc(void **p, size_t bytes) {
  CARD_OR_FAIL(RUNTIME);
  if (p == NULL) return rt(AB_CU_INVALID_VALUE);
  return rt(card->malloc(card->ctx, p, bytes));
}

EXPORT int cudaFree(void *p) {
  CARD_OR_FAIL(RUNTIME);
  return p == NULL ? AB_CU_SUCCESS : rt(card->free(card->ctx, p));
}

EXPORT int cudaMallocAsync(void **p, size_t bytes, void *stream) {
  CARD_OR_FAIL(RUNTIME);
  if (p == NULL) return rt(AB_CU_INVALID_VALUE);
  return rt(card->malloc_async(card->ctx, p, bytes, stream));
}

EXPORT int cudaFreeAsync(void *p, void *stream) {
  CARD_OR_FAIL(RUNTIME);
  return p == NULL ? AB_CU_SUCCESS : rt(card->free_async(card->ctx, p, stream));
}

EXPORT int cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  CARD_OR_FAIL(RUNTIME);
  if (free_bytes == NULL || total_bytes == NULL) return rt(AB_CU_INVALID_VALUE);
  return rt(card->mem_info(card->ctx, free_bytes, total_bytes));
}

EXPORT int cudaGetDevice(int *dev) {
  CARD_OR_FAIL(RUNTIME);
  if (dev == NULL) return rt(AB_CU_INVALID_VALUE);
  *dev = card->ordinal;
  return AB_CU_SUCCESS;
}

/* The run has one device: choosing it is fine, choosing another is not. */
EXPORT int cudaSetDevice(int dev) {
  CARD_OR_FAIL(RUNTIME);
  return dev == card->ordinal ? AB_CU_SUCCESS : rt(AB_CU_INVALID_DEVICE);
}

EXPORT int cudaGetDeviceCount(int *n) {
  CARD_OR_FAIL(RUNTIME);
  if (n == NULL) return rt(AB_CU_INVALID_VALUE);
  *n = card->ordinal + 1;
  return AB_CU_SUCCESS;
}

EXPORT int cudaStreamSynchronize(void *stream) {
  CARD_OR_FAIL(RUNTIME);
  return rt(card->synchronize(card->ctx, stream, 0));
}

EXPORT int cudaDeviceSynchronize(void) {
  CARD_OR_FAIL(RUNTIME);
  return rt(card->synchronize(card->ctx, NULL, 1));
}

/* The default pool is the device's stream-ordered pool; no other pool exists. */
static char default_pool;

static int pool_of(int lib, void **pool, int dev) {
  CARD_OR_FAIL(lib);
  if (pool == NULL) return done(lib, AB_CU_INVALID_VALUE);
  if (dev != card->ordinal) return done(lib, AB_CU_INVALID_DEVICE);
  *pool = &default_pool;
  return AB_CU_SUCCESS;
}

/* cudaMemPoolAttr: the reuse flags (1 to 3) are ints, the byte counts (4 to 8) 64-bit. */
static int pool_set(int lib, void *pool, int attr, void *value) {
  CARD_OR_FAIL(lib);
  if (pool != &default_pool) return done(lib, AB_CU_INVALID_HANDLE);
  if (value == NULL || attr < 1 || attr > 8) return done(lib, AB_CU_INVALID_VALUE);
  unsigned long long v = attr <= 3 ? (unsigned long long)*(int *)value : *(unsigned long long *)value;
  return done(lib, card->pool_set(card->ctx, attr, v));
}

static int pool_get(int lib, void *pool, int attr, void *value) {
  CARD_OR_FAIL(lib);
  if (pool != &default_pool) return done(lib, AB_CU_INVALID_HANDLE);
  if (value == NULL || attr < 1 || attr > 8) return done(lib, AB_CU_INVALID_VALUE);
  unsigned long long v = 0;
  int code = card->pool_get(card->ctx, attr, &v);
  if (code != AB_CU_SUCCESS) return done(lib, code);
  if (attr <= 3) *(int *)value = (int)v;
  else *(unsigned long long *)value = v;
  return AB_CU_SUCCESS;
}

static int pool_trim(int lib, void *pool, size_t keep) {
  CARD_OR_FAIL(lib);
  if (pool != &default_pool) return done(lib, AB_CU_INVALID_HANDLE);
  return done(lib, card->pool_trim(card->ctx, keep));
}

EXPORT int cudaDeviceGetDefaultMemPool(void **pool, int dev) { return pool_of(RUNTIME, pool, dev); }
EXPORT int cudaDeviceGetMemPool(void **pool, int dev) { return pool_of(RUNTIME, pool, dev); }
EXPORT int cudaMemPoolSetAttribute(void *pool, int attr, void *value) { return pool_set(RUNTIME, pool, attr, value); }
EXPORT int cudaMemPoolGetAttribute(void *pool, int attr, void *value) { return pool_get(RUNTIME, pool, attr, value); }
EXPORT int cudaMemPoolTrimTo(void *pool, size_t keep) { return pool_trim(RUNTIME, pool, keep); }

/* ---- served calls: the driver ---------------------------------------------------------------- */

EXPORT int cuMemAlloc_v2(unsigned long long *p, size_t bytes) {
  CARD_OR_FAIL(DRIVER);
  if (p == NULL || bytes == 0) return AB_CU_INVALID_VALUE;
  void *q = NULL;
  int code = card->malloc(card->ctx, &q, bytes);
  *p = (unsigned long long)(uintptr_t)q;
  return code;
}

EXPORT int cuMemFree_v2(unsigned long long p) {
  CARD_OR_FAIL(DRIVER);
  return p == 0 ? AB_CU_SUCCESS : card->free(card->ctx, (void *)(uintptr_t)p);
}

EXPORT int cuMemAllocAsync(unsigned long long *p, size_t bytes, void *stream) {
  CARD_OR_FAIL(DRIVER);
  if (p == NULL || bytes == 0) return AB_CU_INVALID_VALUE;
  void *q = NULL;
  int code = card->malloc_async(card->ctx, &q, bytes, stream);
  *p = (unsigned long long)(uintptr_t)q;
  return code;
}

EXPORT int cuMemFreeAsync(unsigned long long p, void *stream) {
  CARD_OR_FAIL(DRIVER);
  return card->free_async(card->ctx, (void *)(uintptr_t)p, stream);
}

EXPORT int cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
  CARD_OR_FAIL(DRIVER);
  if (free_bytes == NULL || total_bytes == NULL) return AB_CU_INVALID_VALUE;
  return card->mem_info(card->ctx, free_bytes, total_bytes);
}

EXPORT int cuStreamSynchronize(void *stream) {
  CARD_OR_FAIL(DRIVER);
  return card->synchronize(card->ctx, stream, 0);
}

EXPORT int cuCtxSynchronize(void) {
  CARD_OR_FAIL(DRIVER);
  return card->synchronize(card->ctx, NULL, 1);
}

EXPORT int cuDeviceGetDefaultMemPool(void **pool, int dev) { return pool_of(DRIVER, pool, dev); }
EXPORT int cuDeviceGetMemPool(void **pool, int dev) { return pool_of(DRIVER, pool, dev); }
EXPORT int cuMemPoolSetAttribute(void *pool, int attr, void *value) { return pool_set(DRIVER, pool, attr, value); }
EXPORT int cuMemPoolGetAttribute(void *pool, int attr, void *value) { return pool_get(DRIVER, pool, attr, value); }
EXPORT int cuMemPoolTrimTo(void *pool, size_t keep) { return pool_trim(DRIVER, pool, keep); }

EXPORT int cuMemAddressReserve(unsigned long long *p, size_t bytes, size_t alignment, unsigned long long addr,
                               unsigned long long flags) {
  (void)addr; /* a hint the driver may ignore, and so does the card */
  (void)flags;
  CARD_OR_FAIL(DRIVER);
  if (p == NULL) return AB_CU_INVALID_VALUE;
  return card->va_reserve(card->ctx, p, bytes, alignment);
}

EXPORT int cuMemAddressFree(unsigned long long p, size_t bytes) {
  CARD_OR_FAIL(DRIVER);
  return card->va_free(card->ctx, p, bytes);
}

/* CUmemAllocationProp begins with four ints: the allocation type (1: pinned), the
 * shareable handle types, and the location's type (1: a device) and id. */
typedef struct prop_head_s {
  int type, handle_types, location_type, location_id;
} prop_head_t;

EXPORT int cuMemCreate(unsigned long long *handle, size_t bytes, const void *prop, unsigned long long flags) {
  CARD_OR_FAIL(DRIVER);
  if (handle == NULL || prop == NULL || flags != 0) return AB_CU_INVALID_VALUE;
  prop_head_t head;
  memcpy(&head, prop, sizeof head);
  if (head.type != 1) return card->refuse(card->ctx, "cuMemCreate (of memory that is not pinned device memory)", AB_SHIM_UNKNOWN);
  return card->mem_create(card->ctx, handle, bytes, head.location_type, head.location_id);
}

EXPORT int cuMemRelease(unsigned long long handle) {
  CARD_OR_FAIL(DRIVER);
  return card->mem_release(card->ctx, handle);
}

EXPORT int cuMemMap(unsigned long long at, size_t bytes, size_t offset, unsigned long long handle,
                    unsigned long long flags) {
  CARD_OR_FAIL(DRIVER);
  if (flags != 0) return AB_CU_INVALID_VALUE;
  return card->mem_map(card->ctx, at, bytes, offset, handle);
}

EXPORT int cuMemUnmap(unsigned long long at, size_t bytes) {
  CARD_OR_FAIL(DRIVER);
  return card->mem_unmap(card->ctx, at, bytes);
}

EXPORT int cuMemSetAccess(unsigned long long at, size_t bytes, const void *desc, size_t count) {
  CARD_OR_FAIL(DRIVER);
  if (desc == NULL || count == 0) return AB_CU_INVALID_VALUE;
  return card->set_access(card->ctx, at, bytes);
}

EXPORT int cuMemGetAllocationGranularity(size_t *granularity, const void *prop, int option) {
  (void)option; /* minimum and recommended are one granule on the cards allocbench knows */
  CARD_OR_FAIL(DRIVER);
  if (granularity == NULL || prop == NULL) return AB_CU_INVALID_VALUE;
  *granularity = card->granule;
  return AB_CU_SUCCESS;
}

/* ---- entry points: driver functions by name ---------------------------------------------------- */

/* The driver functions the shim serves or answers, for libraries that fetch them by name. */
#define DRIVER_EXPORTS(X)                                                                                  \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetAttribute) X(cuCtxGetCurrent) \
  X(cuCtxSetCurrent) X(cuCtxGetDevice) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2)          \
  X(cuGetErrorString) X(cuGetErrorName) X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemAllocAsync) X(cuMemFreeAsync) \
  X(cuMemGetInfo_v2) X(cuStreamSynchronize) X(cuCtxSynchronize) X(cuDeviceGetDefaultMemPool)                \
  X(cuDeviceGetMemPool) X(cuMemPoolSetAttribute) X(cuMemPoolGetAttribute) X(cuMemPoolTrimTo)                \
  X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap)       \
  X(cuMemSetAccess) X(cuMemGetAllocationGranularity) X(cuStreamCreate) X(cuStreamDestroy_v2)               \
  X(cuStreamWaitEvent) X(cuEventCreate) X(cuEventDestroy_v2) X(cuEventRecord) X(cuEventSynchronize)         \
  X(cuEventQuery) X(cuMemsetD8_v2) X(cuPointerGetAttribute) X(cuMemGetAddressRange_v2)                     \
  X(cuMemAllocManaged) X(cuMemAllocPitch_v2) X(cuMemPoolCreate) X(cuMemAllocFromPoolAsync)

typedef void (*any_fn)(void);

static any_fn own_driver_function(const char *symbol) {
#define DRIVER_ENTRY(name) {#name, (any_fn)name},
  static const struct {
    const char *name;
    any_fn fn;
  } table[] = {DRIVER_EXPORTS(DRIVER_ENTRY)};
#undef DRIVER_ENTRY
  /* The names asked for are the unversioned ones ("cuMemAlloc"); the ABI's are often _v2. */
  char v2[96];
  snprintf(v2, sizeof v2, "%s_v2", symbol);
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strcmp(table[i].name, symbol) == 0 || strcmp(table[i].name, v2) == 0) return table[i].fn;
  return NULL;
}

/* The shim's own function, or on a GPU the real driver's; *status 0 found, 1 not found. */
static int entry_point(int lib, const char *symbol, void **fn, int *status, int (*ask_real)(const char *, void **, void *),
                       void *real_ctx) {
  CARD_OR_FAIL(lib);
  if (symbol == NULL || fn == NULL) return done(lib, AB_CU_INVALID_VALUE);
  any_fn own = own_driver_function(symbol);
  if (own) {
    memcpy(fn, &own, sizeof own);
    if (status) *status = 0;
    return AB_CU_SUCCESS;
  }
  if (card->forwards) return done(lib, ask_real(symbol, fn, real_ctx));
  *fn = NULL;
  if (status) *status = 1;
  return lib == DRIVER ? AB_CU_NOT_FOUND : AB_CU_SUCCESS;
}

typedef struct real_entry_s {
  const char *name;          /* the real function that looks symbols up */
  int lib;
  unsigned long long flags;
  unsigned version;
  int *status;
} real_entry_t;

static int ask_runtime(const char *symbol, void **fn, void *ctx) {
  real_entry_t *e = ctx;
  void *f = real(e->name, e->lib);
  if (f == NULL) return card->refuse(card->ctx, e->name, AB_SHIM_NO_LIBRARY);
  if (e->version == 0) {
    int (*get)(const char *, void **, unsigned long long, int *);
    memcpy(&get, &f, sizeof f);
    return get(symbol, fn, e->flags, e->status);
  }
  int (*get)(const char *, void **, unsigned, unsigned long long, int *);
  memcpy(&get, &f, sizeof f);
  return get(symbol, fn, e->version, e->flags, e->status);
}

EXPORT int cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags, int *status) {
  real_entry_t e = {"cudaGetDriverEntryPoint", RUNTIME, flags, 0, status};
  return entry_point(RUNTIME, symbol, fn, status, ask_runtime, &e);
}

EXPORT int cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned version, unsigned long long flags,
                                            int *status) {
  real_entry_t e = {"cudaGetDriverEntryPointByVersion", RUNTIME, flags, version ? version : 1, status};
  return entry_point(RUNTIME, symbol, fn, status, ask_runtime, &e);
}

static int ask_driver(const char *symbol, void **fn, void *ctx) {
  real_entry_t *e = ctx;
  void *f = real(e->name, DRIVER);
  if (f == NULL) return card->refuse(card->ctx, e->name, AB_SHIM_NO_LIBRARY);
  int (*get)(const char *, void **, int, unsigned long long, int *);
  memcpy(&get, &f, sizeof f);
  return get(symbol, fn, (int)e->version, e->flags, e->status);
}

EXPORT int cuGetProcAddress_v2(const char *symbol, void **fn, int version, unsigned long long flags, int *status) {
  real_entry_t e = {"cuGetProcAddress_v2", DRIVER, flags, (unsigned)version, status};
  return entry_point(DRIVER, symbol, fn, status, ask_driver, &e);
}
