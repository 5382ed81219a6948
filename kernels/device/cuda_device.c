/* cuda_device.c: the real GPU behind device.h.
 *
 * The runtime is linked statically, and the driver API functions of virtual memory are
 * fetched with cudaGetDriverEntryPointByVersion, so the binary starts (and falls back to the
 * simulated card) on machines that have no driver. Every call is checked.
 *
 * malloc and map are checked against the budget by device.c before the driver is called.
 * The stream-ordered pool grows inside the driver, so its reserve is read back after each
 * allocation and counted in held_bytes; with a budget, an allocation that made the reserve
 * cross it is undone and reported as OOM (the pool is also created with the budget as its
 * maxSize, which the driver honours only roughly).
 *
 * The footprint (device.h) is measured: cudaMemGetInfo before and after each cudaMalloc,
 * cudaFree, map and unmap, the fall in free bytes added (the driver packs and rounds
 * requests into 2 MiB pages: sim_cost.c, Note [Driver footprint]); and the pool's reserve as
 * it is read back. Memory taken between the calls (kernels' modules, cuBLAS, NCCL) is not
 * the strategy's and is left out. Each cudaMemGetInfo costs about 4 us on the H200, so the
 * calls it brackets (40 us and more) are timed a little slower. */
#include "kernels/device/cuda_device.h"

#include <cudaTypedefs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/hashmap.h"
#include "kernels/device/cuda_check.h"

typedef struct vmm_api_s {
  PFN_cuMemAddressReserve_v10020 reserve;
  PFN_cuMemAddressFree_v10020 address_free;
  PFN_cuMemCreate_v10020 create;
  PFN_cuMemMap_v10020 map;
  PFN_cuMemSetAccess_v10020 set_access;
  PFN_cuMemUnmap_v10020 unmap;
  PFN_cuMemRelease_v10020 release;
  PFN_cuGetErrorName_v6000 error_name;
  PFN_cuMemGetAllocationGranularity_v10020 granularity;
  PFN_cuDeviceGet_v2000 device_get;
  PFN_cuDeviceGetAttribute_v2000 device_attribute;
} vmm_api_t;

typedef struct mapping_s {
  CUmemGenericAllocationHandle handle;
  uint64_t bytes;
} mapping_t;

typedef struct cuda_dev_s {
  ab_device_t dev; /* first: the device.h view */
  int ordinal;
  cudaStream_t streams[AB_MAX_STREAMS]; /* [0] is the legacy default stream */
  cudaMemPool_t pool;                    /* NULL until first used */
  uint64_t release_threshold;
  vmm_api_t vmm;
  bool vmm_loaded;
  ab_map_t live;         /* malloc'd address -> bytes */
  ab_map_t mappings;     /* mapped address -> index in maps */
  mapping_t *maps;
  size_t nmaps, capmaps;
  size_t *spare_maps;    /* free indices of maps */
  size_t nspare;
  uint64_t reservations; /* live reservations */
  uint64_t live_async;   /* live pool allocations */
  uint64_t pool_held;    /* the pool's reserve as last read, counted in dev.held_bytes */
  cudaEvent_t timer[2];  /* start and stop of the timer; NULL until first used */
} cuda_dev_t;

static cuda_dev_t *cuda_of(ab_device_t *d) { return (cuda_dev_t *)(void *)d; }

/* Driver-API results, as AB_CUDA_TRY does for the runtime. */
static ab_status cu_status(cuda_dev_t *c, CUresult r, const char *call, int line) {
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return AB_ERR_OOM;
  const char *name = "unknown";
  if (c->vmm.error_name) c->vmm.error_name(r, &name);
  return ab_diag_set(&c->dev.diag, AB_ERR_CUDA, "%s failed at %s:%d: %s (%d)", call, __FILE__, line, name, (int)r);
}

#define CU_TRY(c, call)                                                   \
  do {                                                                    \
    CUresult ab_cu_r_ = (call);                                           \
    if (ab_cu_r_ != CUDA_SUCCESS) return cu_status((c), ab_cu_r_, #call, __LINE__); \
  } while (0)

static ab_status load_vmm(cuda_dev_t *c) {
  if (c->vmm_loaded) return AB_OK;
  struct {
    const char *symbol;
    void **fn;
  } syms[] = {
      {"cuMemAddressReserve", (void **)&c->vmm.reserve}, {"cuMemAddressFree", (void **)&c->vmm.address_free},
      {"cuMemCreate", (void **)&c->vmm.create},          {"cuMemMap", (void **)&c->vmm.map},
      {"cuMemSetAccess", (void **)&c->vmm.set_access},   {"cuMemUnmap", (void **)&c->vmm.unmap},
      {"cuMemRelease", (void **)&c->vmm.release},        {"cuGetErrorName", (void **)&c->vmm.error_name},
      {"cuMemGetAllocationGranularity", (void **)&c->vmm.granularity},
      {"cuDeviceGet", (void **)&c->vmm.device_get},      {"cuDeviceGetAttribute", (void **)&c->vmm.device_attribute},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    enum cudaDriverEntryPointQueryResult q;
    AB_CUDA_TRY(&c->dev.diag, cudaGetDriverEntryPointByVersion(syms[i].symbol, syms[i].fn, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || *syms[i].fn == NULL)
      return ab_diag_set(&c->dev.diag, AB_ERR_CUDA, "the driver does not provide %s", syms[i].symbol);
  }
  CUdevice cu_dev;
  int supported = 0;
  CU_TRY(c, c->vmm.device_get(&cu_dev, c->ordinal));
  CU_TRY(c, c->vmm.device_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, cu_dev));
  if (!supported)
    return ab_diag_set(&c->dev.diag, AB_ERR_CUDA, "GPU %d does not support virtual memory management", c->ordinal);
  /* Strategies plan in AB_GRANULE_BYTES; a card with another granule is refused, not
   * silently mis-mapped. */
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = c->ordinal;
  size_t granule = 0;
  CU_TRY(c, c->vmm.granularity(&granule, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  if (granule != c->dev.granule_bytes)
    return ab_diag_set(&c->dev.diag, AB_ERR_CUDA, "GPU %d maps in %zu-byte granules; allocbench expects %llu", c->ordinal,
                       granule, (unsigned long long)c->dev.granule_bytes);
  c->vmm_loaded = true;
  return AB_OK;
}

static cudaStream_t stream_of(cuda_dev_t *c, unsigned stream, ab_status *st) {
  *st = AB_OK;
  if (stream == 0) return 0;
  if (stream >= AB_MAX_STREAMS) {
    *st = ab_diag_set(&c->dev.diag, AB_ERR_INVALID, "stream %u out of range (at most %d streams)", stream, AB_MAX_STREAMS);
    return 0;
  }
  if (c->streams[stream] == NULL) {
    cudaError_t e = cudaStreamCreateWithFlags(&c->streams[stream], cudaStreamNonBlocking);
    if (e != cudaSuccess) *st = ab_cuda_status(e, "cudaStreamCreateWithFlags", __FILE__, __LINE__, &c->dev.diag);
  }
  return c->streams[stream];
}

/* ---- the footprint ---------------------------------------------------------------------- */

static ab_status free_bytes_now(ab_device_t *d, uint64_t *out) {
  size_t f = 0, t = 0;
  AB_CUDA_TRY(&d->diag, cudaMemGetInfo(&f, &t));
  *out = f;
  return AB_OK;
}

/* Adds what the card lost since `before` (free bytes then) to the footprint. */
static ab_status footprint_since(ab_device_t *d, uint64_t before) {
  uint64_t after = 0;
  AB_TRY(free_bytes_now(d, &after));
  ab_device_footprint_add(d, (int64_t)before - (int64_t)after);
  return AB_OK;
}

/* ---- plain allocation ------------------------------------------------------------------ */

static ab_status cuda_malloc(ab_device_t *d, uint64_t bytes, ab_dptr_t *out) {
  cuda_dev_t *c = cuda_of(d);
  void *p = NULL;
  uint64_t before = 0;
  AB_TRY(free_bytes_now(d, &before));
  AB_CUDA_TRY(&d->diag, cudaMalloc(&p, bytes));
  ab_status st = footprint_since(d, before);
  if (st == AB_OK) st = ab_map_put(&c->live, (uint64_t)(uintptr_t)p, bytes);
  if (st != AB_OK) {
    (void)cudaFree(p);
    return st;
  }
  *out = (ab_dptr_t)(uintptr_t)p;
  return AB_OK;
}

static ab_status cuda_free(ab_device_t *d, ab_dptr_t p, uint64_t bytes) {
  cuda_dev_t *c = cuda_of(d);
  uint64_t had;
  if (!ab_map_get(&c->live, p, &had) || had != bytes)
    return ab_diag_set(&d->diag, AB_ERR_INVALID, "cuda device: free of 0x%llx (%llu bytes), which is not a live allocation of that size",
                       (unsigned long long)p, (unsigned long long)bytes);
  uint64_t before = 0;
  AB_TRY(free_bytes_now(d, &before));
  AB_CUDA_TRY(&d->diag, cudaFree((void *)(uintptr_t)p));
  ab_map_take(&c->live, p, NULL);
  return footprint_since(d, before);
}

/* ---- virtual memory -------------------------------------------------------------------- */

static ab_status cuda_va_reserve(ab_device_t *d, uint64_t bytes, ab_dptr_t *out) {
  cuda_dev_t *c = cuda_of(d);
  AB_TRY(load_vmm(c));
  CUdeviceptr p = 0;
  CU_TRY(c, c->vmm.reserve(&p, bytes, d->granule_bytes, 0, 0));
  c->reservations++;
  *out = (ab_dptr_t)p;
  return AB_OK;
}

static ab_status cuda_va_release(ab_device_t *d, ab_dptr_t base, uint64_t bytes) {
  cuda_dev_t *c = cuda_of(d);
  AB_TRY(load_vmm(c));
  CU_TRY(c, c->vmm.address_free((CUdeviceptr)base, bytes));
  c->reservations--;
  return AB_OK;
}

static ab_status cuda_map(ab_device_t *d, ab_dptr_t at, uint64_t bytes) {
  cuda_dev_t *c = cuda_of(d);
  AB_TRY(load_vmm(c));
  if (c->nspare == 0 && c->nmaps == c->capmaps) {
    size_t cap = c->capmaps ? c->capmaps * 2 : 64;
    mapping_t *maps = realloc(c->maps, cap * sizeof *maps);
    size_t *spare = realloc(c->spare_maps, cap * sizeof *spare);
    if (maps) c->maps = maps;
    if (spare) c->spare_maps = spare;
    if (maps == NULL || spare == NULL) return AB_ERR_INTERNAL;
    c->capmaps = cap;
  }
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = c->ordinal;
  CUmemGenericAllocationHandle h;
  uint64_t before = 0;
  AB_TRY(free_bytes_now(d, &before));
  CU_TRY(c, c->vmm.create(&h, bytes, &prop, 0));
  CUresult r = c->vmm.map((CUdeviceptr)at, bytes, 0, h, 0);
  if (r == CUDA_SUCCESS) {
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, c->ordinal}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    r = c->vmm.set_access((CUdeviceptr)at, bytes, &access, 1);
    if (r != CUDA_SUCCESS) c->vmm.unmap((CUdeviceptr)at, bytes);
  }
  if (r != CUDA_SUCCESS) {
    c->vmm.release(h);
    return cu_status(c, r, "cuMemMap/cuMemSetAccess", __LINE__);
  }
  size_t i = c->nspare ? c->spare_maps[--c->nspare] : c->nmaps++;
  c->maps[i].handle = h;
  c->maps[i].bytes = bytes;
  AB_TRY(ab_map_put(&c->mappings, at, i));
  return footprint_since(d, before);
}

static ab_status cuda_unmap(ab_device_t *d, ab_dptr_t at, uint64_t bytes) {
  cuda_dev_t *c = cuda_of(d);
  AB_TRY(load_vmm(c));
  /* The range must consist of whole map calls: check first, then unmap. */
  for (ab_dptr_t p = at, end = at + bytes; p < end;) {
    uint64_t i;
    if (!ab_map_get(&c->mappings, p, &i) || c->maps[i].bytes > end - p)
      return ab_diag_set(&d->diag, AB_ERR_INVALID, "cuda device: unmap of [0x%llx, +%llu) does not cover whole mapped ranges",
                         (unsigned long long)at, (unsigned long long)bytes);
    p += c->maps[i].bytes;
  }
  uint64_t before = 0;
  AB_TRY(free_bytes_now(d, &before));
  for (ab_dptr_t p = at, end = at + bytes; p < end;) {
    uint64_t i;
    ab_map_take(&c->mappings, p, &i);
    CU_TRY(c, c->vmm.unmap((CUdeviceptr)p, c->maps[i].bytes));
    CU_TRY(c, c->vmm.release(c->maps[i].handle));
    p += c->maps[i].bytes;
    c->spare_maps[c->nspare++] = (size_t)i;
  }
  return footprint_since(d, before);
}

/* ---- the stream-ordered pool ------------------------------------------------------------ */

static ab_status pool_get(cuda_dev_t *c) {
  if (c->pool) return AB_OK;
  struct cudaMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = c->ordinal;
  props.maxSize = c->dev.budget_bytes; /* 0: the driver's default, the whole card */
  AB_CUDA_TRY(&c->dev.diag, cudaMemPoolCreate(&c->pool, &props));
  cuuint64_t threshold = c->release_threshold;
  AB_CUDA_TRY(&c->dev.diag, cudaMemPoolSetAttribute(c->pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  return AB_OK;
}

/* Reads the pool's reserve into held_bytes. */
static ab_status pool_account(cuda_dev_t *c) {
  cuuint64_t reserved = 0;
  AB_CUDA_TRY(&c->dev.diag, cudaMemPoolGetAttribute(c->pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  ab_device_hold(&c->dev, (int64_t)reserved - (int64_t)c->pool_held);
  ab_device_footprint_add(&c->dev, (int64_t)reserved - (int64_t)c->pool_held);
  c->pool_held = reserved;
  return AB_OK;
}

static ab_status cuda_pool_configure(ab_device_t *d, uint64_t release_threshold) {
  cuda_dev_t *c = cuda_of(d);
  c->release_threshold = release_threshold;
  if (c->pool == NULL) return AB_OK;
  cuuint64_t threshold = release_threshold;
  AB_CUDA_TRY(&d->diag, cudaMemPoolSetAttribute(c->pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  return AB_OK;
}

static ab_status cuda_malloc_async(ab_device_t *d, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  cuda_dev_t *c = cuda_of(d);
  ab_status st;
  cudaStream_t s = stream_of(c, stream, &st);
  if (st != AB_OK) return st;
  AB_TRY(pool_get(c));
  void *p = NULL;
  AB_CUDA_TRY(&d->diag, cudaMallocFromPoolAsync(&p, bytes, c->pool, s));
  AB_TRY(pool_account(c));
  if (d->budget_bytes && d->held_bytes > d->budget_bytes) {
    /* The pool's maxSize is not exact (seen on the H200: two 64 MiB blocks in a 100 MiB
     * pool), so the budget is kept here: give the block back, trim, and report OOM. */
    AB_CUDA_TRY(&d->diag, cudaFreeAsync(p, s));
    AB_CUDA_TRY(&d->diag, cudaStreamSynchronize(s));
    AB_CUDA_TRY(&d->diag, cudaMemPoolTrimTo(c->pool, d->budget_bytes - (d->held_bytes - c->pool_held)));
    AB_TRY(pool_account(c));
    return AB_ERR_OOM;
  }
  c->live_async++;
  *out = (ab_dptr_t)(uintptr_t)p;
  return AB_OK;
}

static ab_status cuda_free_async(ab_device_t *d, ab_dptr_t p, uint64_t bytes, unsigned stream) {
  cuda_dev_t *c = cuda_of(d);
  (void)bytes;
  ab_status st;
  cudaStream_t s = stream_of(c, stream, &st);
  if (st != AB_OK) return st;
  AB_CUDA_TRY(&d->diag, cudaFreeAsync((void *)(uintptr_t)p, s));
  c->live_async--;
  return AB_OK;
}

static ab_status cuda_pool_trim(ab_device_t *d, uint64_t keep_bytes) {
  cuda_dev_t *c = cuda_of(d);
  if (c->pool == NULL) return AB_OK;
  AB_CUDA_TRY(&d->diag, cudaDeviceSynchronize()); /* frees in flight return to the pool first */
  AB_CUDA_TRY(&d->diag, cudaMemPoolTrimTo(c->pool, keep_bytes));
  return pool_account(c);
}

/* Setting the high-water mark to 0 resets it to the current reserve (CUDA's documented way). */
static ab_status cuda_pool_reset_peak(ab_device_t *d) {
  cuda_dev_t *c = cuda_of(d);
  if (c->pool == NULL) return AB_OK;
  cuuint64_t zero = 0;
  AB_CUDA_TRY(&d->diag, cudaMemPoolSetAttribute(c->pool, cudaMemPoolAttrReservedMemHigh, &zero));
  return AB_OK;
}

static ab_status cuda_pool_reserved(ab_device_t *d, uint64_t *current, uint64_t *peak) {
  cuda_dev_t *c = cuda_of(d);
  *current = *peak = 0;
  if (c->pool == NULL) return AB_OK;
  cuuint64_t cur = 0, high = 0;
  AB_CUDA_TRY(&d->diag, cudaMemPoolGetAttribute(c->pool, cudaMemPoolAttrReservedMemCurrent, &cur));
  AB_CUDA_TRY(&d->diag, cudaMemPoolGetAttribute(c->pool, cudaMemPoolAttrReservedMemHigh, &high));
  *current = cur;
  *peak = high;
  return AB_OK;
}

/* ---- the rest -------------------------------------------------------------------------- */

static ab_status cuda_mem_info(ab_device_t *d, uint64_t *free_bytes, uint64_t *total_bytes) {
  size_t f = 0, t = 0;
  AB_CUDA_TRY(&d->diag, cudaMemGetInfo(&f, &t));
  *free_bytes = f;
  *total_bytes = t;
  return AB_OK;
}

/* A synchronisation is where the pool releases memory above its threshold. */
static ab_status cuda_synchronize(ab_device_t *d) {
  cuda_dev_t *c = cuda_of(d);
  AB_CUDA_TRY(&d->diag, cudaDeviceSynchronize());
  return c->pool ? pool_account(c) : AB_OK;
}

static ab_status cuda_stream_synchronize(ab_device_t *d, unsigned stream) {
  ab_status st;
  cudaStream_t s = stream_of(cuda_of(d), stream, &st);
  if (st != AB_OK) return st;
  AB_CUDA_TRY(&d->diag, cudaStreamSynchronize(s));
  return cuda_of(d)->pool ? pool_account(cuda_of(d)) : AB_OK;
}

static void *cuda_stream_handle(ab_device_t *d, unsigned stream) {
  ab_status st;
  cudaStream_t s = stream_of(cuda_of(d), stream, &st);
  return st == AB_OK ? (void *)s : NULL;
}

static ab_status cuda_timer_start(ab_device_t *d, unsigned stream) {
  cuda_dev_t *c = cuda_of(d);
  ab_status st;
  cudaStream_t s = stream_of(c, stream, &st);
  if (st != AB_OK) return st;
  for (int i = 0; i < 2; i++)
    if (c->timer[i] == NULL) AB_CUDA_TRY(&d->diag, cudaEventCreate(&c->timer[i]));
  AB_CUDA_TRY(&d->diag, cudaEventRecord(c->timer[0], s));
  return AB_OK;
}

static ab_status cuda_timer_stop(ab_device_t *d, unsigned stream, double *seconds) {
  cuda_dev_t *c = cuda_of(d);
  ab_status st;
  cudaStream_t s = stream_of(c, stream, &st);
  if (st != AB_OK) return st;
  if (c->timer[0] == NULL) return ab_diag_set(&d->diag, AB_ERR_INVALID, "timer stopped before it was started");
  float ms = 0;
  AB_CUDA_TRY(&d->diag, cudaEventRecord(c->timer[1], s));
  AB_CUDA_TRY(&d->diag, cudaEventSynchronize(c->timer[1]));
  AB_CUDA_TRY(&d->diag, cudaEventElapsedTime(&ms, c->timer[0], c->timer[1]));
  *seconds = (double)ms * 1e-3;
  return AB_OK;
}

static ab_status cuda_close(ab_device_t *d, ab_diag_t *diag) {
  cuda_dev_t *c = cuda_of(d);
  ab_status st = AB_OK;
  uint64_t live = c->live.n + c->live_async, mapped = c->mappings.n;
  if (live || mapped || c->reservations)
    st = ab_diag_set(diag, AB_ERR_INVALID, "cuda device %s: leak at teardown: %llu live allocations, %llu mappings, %llu reservations",
                     d->name, (unsigned long long)live, (unsigned long long)mapped, (unsigned long long)c->reservations);
  AB_CUDA_CHECKED(st, diag, cudaDeviceSynchronize());
  if (c->pool) AB_CUDA_CHECKED(st, diag, cudaMemPoolDestroy(c->pool));
  for (int i = 0; i < 2; i++)
    if (c->timer[i]) AB_CUDA_CHECKED(st, diag, cudaEventDestroy(c->timer[i]));
  for (int i = 1; i < AB_MAX_STREAMS; i++)
    if (c->streams[i]) AB_CUDA_CHECKED(st, diag, cudaStreamDestroy(c->streams[i]));
  ab_map_free(&c->live);
  ab_map_free(&c->mappings);
  free(c->maps);
  free(c->spare_maps);
  free(c);
  return st;
}

static const ab_device_ops_t cuda_ops = {
    .malloc = cuda_malloc,
    .free = cuda_free,
    .va_reserve = cuda_va_reserve,
    .va_release = cuda_va_release,
    .map = cuda_map,
    .unmap = cuda_unmap,
    .pool_configure = cuda_pool_configure,
    .malloc_async = cuda_malloc_async,
    .free_async = cuda_free_async,
    .pool_trim = cuda_pool_trim,
    .pool_reserved = cuda_pool_reserved,
    .pool_reset_peak = cuda_pool_reset_peak,
    .mem_info = cuda_mem_info,
    .synchronize = cuda_synchronize,
    .stream_synchronize = cuda_stream_synchronize,
    .stream_handle = cuda_stream_handle,
    .timer_start = cuda_timer_start,
    .timer_stop = cuda_timer_stop,
    .close = cuda_close,
};

bool ab_device_cuda_usable(void) {
  static int usable = -1;
  if (usable < 0) {
    int n = 0;
    usable = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    (void)cudaGetLastError();
  }
  return usable == 1;
}

ab_status ab_cuda_open(int ordinal, const ab_device_config_t *cfg, ab_device_t **out, ab_diag_t *diag) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    (void)cudaGetLastError();
    /* Without a driver the runtime calls it "insufficient", which reads as "update it". */
    int driver = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
    const char *why = driver == 0 ? "no NVIDIA driver is loaded" : e != cudaSuccess ? cudaGetErrorString(e) : "no device found";
    return ab_diag_set(diag, AB_ERR_CUDA, "--device cuda: no GPU here (%s); use --device sim", why);
  }
  if (ordinal >= n)
    return ab_diag_set(diag, AB_ERR_INVALID, "--device cuda:%d: only %d GPU(s) present", ordinal, n);
  AB_CUDA_TRY(diag, cudaSetDevice(ordinal));
  cuda_dev_t *c = calloc(1, sizeof *c);
  if (c == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  struct cudaDeviceProp prop;
  ab_status st = AB_OK;
  AB_CUDA_CHECKED(st, diag, cudaGetDeviceProperties(&prop, ordinal));
  size_t free_b = 0, total_b = 0;
  AB_CUDA_CHECKED(st, diag, cudaMemGetInfo(&free_b, &total_b));
  if (st != AB_OK) {
    free(c);
    return st;
  }
  c->dev.ops = &cuda_ops;
  c->dev.kind = AB_DEVICE_CUDA;
  snprintf(c->dev.name, sizeof c->dev.name, "cuda:%d %s", ordinal, prop.name);
  c->dev.total_bytes = total_b;
  c->dev.granule_bytes = AB_GRANULE_BYTES;
  c->dev.budget_bytes = cfg->budget_bytes; /* set before the pool is created with it */
  c->ordinal = ordinal;
  ab_map_init(&c->live);
  ab_map_init(&c->mappings);
  *out = &c->dev;
  return AB_OK;
}
