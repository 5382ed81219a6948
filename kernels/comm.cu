/* comm.cu: collectives across GPUs (kernels.h, Note [Collectives]): loading NCCL, its
 * communicators, and the allgather and reduce_scatter launches on them.
 *
 * NCCL is looked for, unless a path is given, in this order: the toolkit allocbench was
 * built with (AB_CUDA_LIBRARY_DIR), the loader's search path (LD_LIBRARY_PATH, ldconfig),
 * then the wheel PyTorch depends on (nvidia-nccl-cu*, site-packages/nvidia/nccl/lib) under
 * the usual Python prefixes. It is never unloaded. */
#include <dlfcn.h>
#include <glob.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_internal.h"

/* The declarations of nccl_check.h are NCCL's ABI; where the header is at hand, hold them
 * to it. */
#if __has_include(<nccl.h>)
#include <nccl.h>
static_assert(sizeof(ncclUniqueId) == AB_NCCL_ID_BYTES && AB_NCCL_ID_BYTES == AB_COMM_ID_BYTES, "ncclUniqueId");
static_assert(sizeof(ncclResult_t) == sizeof(ab_nccl_result_t) && ncclSuccess == AB_NCCL_SUCCESS &&
                  ncclInvalidArgument == AB_NCCL_INVALID_ARGUMENT && ncclInvalidUsage == AB_NCCL_INVALID_USAGE,
              "ncclResult_t");
static_assert(sizeof(ncclDataType_t) == sizeof(int) && ncclUint8 == AB_NCCL_UINT8, "ncclDataType_t");
static_assert(sizeof(ncclRedOp_t) == sizeof(int) && ncclSum == AB_NCCL_SUM, "ncclRedOp_t");
#endif

#define SONAME "libnccl.so.2"
#define WHEEL "nvidia/nccl/lib/" SONAME

/* Where Python packages live: virtual environments under /opt (the H200 image's
 * /opt/torch/.venv), system and pip installs, conda. */
static const char *const wheel_globs[] = {
    "/opt/*/.venv/lib/python3*/site-packages/" WHEEL,
    "/opt/*/lib/python3*/site-packages/" WHEEL,
    "/usr/local/lib/python3*/dist-packages/" WHEEL,
    "/usr/local/lib/python3*/site-packages/" WHEEL,
    "/usr/lib/python3/dist-packages/" WHEEL,
    "/usr/lib/python3*/site-packages/" WHEEL,
};

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static ab_nccl_t api;
static bool loaded; /* api is complete; set once, under load_lock */

/* Loads the library at path into api; false, with the reason in why, when it is not one. */
static bool load_from(const char *path, char *why, size_t size) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    snprintf(why, size, "%s", dlerror());
    return false;
  }
  ab_nccl_t got;
  memset(&got, 0, sizeof got);
#define AB_NCCL_LOAD(name, ret, params)                                      \
  if ((got.name = (ret(*) params)dlsym(lib, #name)) == NULL) {               \
    snprintf(why, size, "%s has no %s (NCCL 2.13 or later is needed)", path, #name); \
    dlclose(lib);                                                            \
    return false;                                                            \
  }
  AB_NCCL_FUNCS(AB_NCCL_LOAD)
#undef AB_NCCL_LOAD
  if (got.ncclGetVersion(&got.version) != AB_NCCL_SUCCESS) got.version = 0;
  Dl_info info;
  snprintf(got.path, sizeof got.path, "%s",
           dladdr((void *)got.ncclGetVersion, &info) && info.dli_fname ? info.dli_fname : path);
  api = got;
  return true;
}

static bool load_search(char *why, size_t size) {
  if (load_from(AB_CUDA_LIBRARY_DIR "/" SONAME, why, size) || load_from(SONAME, why, size)) return true;
  for (size_t i = 0; i < sizeof wheel_globs / sizeof wheel_globs[0]; i++) {
    glob_t g;
    if (glob(wheel_globs[i], 0, NULL, &g) != 0) continue;
    bool ok = false;
    for (size_t j = 0; j < g.gl_pathc && !ok; j++) ok = load_from(g.gl_pathv[j], why, size);
    globfree(&g);
    if (ok) return true;
  }
  snprintf(why, size,
           "not in %s, not on the loader's path, not in a Python package (" WHEEL ") under /opt, /usr/local/lib or "
           "/usr/lib",
           AB_CUDA_LIBRARY_DIR);
  return false;
}

ab_status ab_comm_load(const char *path, ab_diag_t *diag) {
  if (path && path[0] == '\0') path = NULL; /* an empty AB_NCCL_LIBRARY */
  pthread_mutex_lock(&load_lock);
  ab_status st = AB_OK;
  if (!loaded) {
    /* NCCL reads its environment when it first initialises, after this. */
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    char why[AB_DIAG_BYTES - 128];
    loaded = path ? load_from(path, why, sizeof why) : load_search(why, sizeof why);
    if (!loaded)
      st = ab_diag_set(diag, AB_ERR_CUDA, "cannot load NCCL (%s): %s; give its path with --nccl or AB_NCCL_LIBRARY",
                       path ? path : SONAME, why);
  }
  pthread_mutex_unlock(&load_lock);
  return st;
}

const ab_nccl_t *ab_nccl(ab_diag_t *diag) {
  pthread_mutex_lock(&load_lock);
  bool ok = loaded;
  pthread_mutex_unlock(&load_lock);
  if (!ok) ab_diag_set(diag, AB_ERR_CUDA, "NCCL is not loaded (ab_comm_load)");
  return ok ? &api : NULL;
}

const char *ab_comm_library(int *version) {
  const ab_nccl_t *a = ab_nccl(NULL);
  *version = a ? a->version : 0;
  return a ? a->path : NULL;
}

ab_status ab_comm_unique_id(ab_comm_id_t *id, ab_diag_t *diag) {
  const ab_nccl_t *a = ab_nccl(diag);
  if (a == NULL) return AB_ERR_CUDA;
  ab_nccl_id_t nid;
  AB_NCCL_TRY(a, (ab_nccl_comm_t)NULL, diag, ncclGetUniqueId, &nid);
  memcpy(id->bytes, nid.internal, AB_COMM_ID_BYTES);
  return AB_OK;
}

/* Free bytes of the current device. */
static ab_status free_bytes(size_t *out, ab_diag_t *diag) {
  size_t total = 0;
  AB_CUDA_TRY(diag, cudaMemGetInfo(out, &total));
  return AB_OK;
}

static ab_status wrap(const ab_nccl_t *a, ab_nccl_comm_t h, unsigned rank, unsigned size, int ordinal, uint64_t bytes,
                      ab_comm_t **out, ab_diag_t *diag) {
  ab_comm_t *c = (ab_comm_t *)calloc(1, sizeof *c);
  if (c == NULL) {
    (void)a->ncclCommDestroy(h); /* the error being reported is the host's memory */
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  c->nccl = a;
  c->handle = h;
  c->rank = rank;
  c->size = size;
  c->ordinal = ordinal;
  c->bytes = bytes;
  ab_map_init(&c->measured);
  *out = c;
  return AB_OK;
}

ab_status ab_comm_init_all(unsigned n, const int *ordinals, ab_comm_t **out, ab_diag_t *diag) {
  const ab_nccl_t *a = ab_nccl(diag);
  if (a == NULL) return AB_ERR_CUDA;
  int count = 0, saved = 0;
  AB_CUDA_TRY(diag, cudaGetDeviceCount(&count));
  for (unsigned i = 0; i < n; i++)
    if (ordinals[i] < 0 || ordinals[i] >= count)
      return ab_diag_set(diag, AB_ERR_INVALID, "GPU %d: only %d GPU(s) present", ordinals[i], count);
  AB_CUDA_TRY(diag, cudaGetDevice(&saved));
  size_t *before = (size_t *)calloc(2 * (size_t)n, sizeof *before), *after = before + n;
  ab_nccl_comm_t *h = (ab_nccl_comm_t *)calloc(n, sizeof *h);
  ab_status st = before && h ? AB_OK : ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  /* Each device's context exists before the first reading, so that only NCCL's memory is
   * measured. */
  for (unsigned i = 0; i < n && st == AB_OK; i++) {
    AB_CUDA_CHECKED(st, diag, cudaSetDevice(ordinals[i]));
    if (st == AB_OK) st = free_bytes(&before[i], diag);
  }
  ab_nccl_result_t r = AB_NCCL_SUCCESS;
  if (st == AB_OK && (r = a->ncclCommInitAll(h, (int)n, ordinals)) != AB_NCCL_SUCCESS)
    st = ab_nccl_status(a, r, NULL, "ncclCommInitAll", __FILE__, __LINE__, diag);
  bool made = st == AB_OK;
  for (unsigned i = 0; i < n && st == AB_OK; i++) {
    AB_CUDA_CHECKED(st, diag, cudaSetDevice(ordinals[i]));
    if (st == AB_OK) st = free_bytes(&after[i], diag);
  }
  unsigned wrapped = 0;
  for (; wrapped < n && st == AB_OK; wrapped++) {
    uint64_t took = before[wrapped] > after[wrapped] ? before[wrapped] - after[wrapped] : 0;
    st = wrap(a, h[wrapped], wrapped, n, ordinals[wrapped], took, &out[wrapped], diag);
  }
  if (st != AB_OK) {
    for (unsigned i = 0; i < wrapped; i++) ab_comm_destroy(out[i], NULL);
    for (unsigned i = wrapped; made && i < n; i++) (void)a->ncclCommDestroy(h[i]); /* the first error stands */
  }
  (void)cudaSetDevice(saved);
  free(before);
  free(h);
  return st;
}

ab_status ab_comm_init_rank(int ordinal, unsigned nranks, unsigned rank, const ab_comm_id_t *id, ab_comm_t **out,
                            ab_diag_t *diag) {
  const ab_nccl_t *a = ab_nccl(diag);
  if (a == NULL) return AB_ERR_CUDA;
  int count = 0;
  AB_CUDA_TRY(diag, cudaGetDeviceCount(&count));
  if (ordinal < 0 || ordinal >= count)
    return ab_diag_set(diag, AB_ERR_INVALID, "GPU %d: only %d GPU(s) present", ordinal, count);
  AB_CUDA_TRY(diag, cudaSetDevice(ordinal));
  size_t before = 0, after = 0;
  AB_TRY(free_bytes(&before, diag));
  ab_nccl_id_t nid;
  memcpy(nid.internal, id->bytes, AB_COMM_ID_BYTES);
  ab_nccl_comm_t h = NULL;
  AB_NCCL_TRY(a, (ab_nccl_comm_t)NULL, diag, ncclCommInitRank, &h, (int)nranks, nid, (int)rank);
  ab_status st = free_bytes(&after, diag);
  if (st != AB_OK) {
    (void)a->ncclCommDestroy(h); /* the first error stands */
    return st;
  }
  return wrap(a, h, rank, nranks, ordinal, before > after ? before - after : 0, out, diag);
}

unsigned ab_comm_rank(const ab_comm_t *c) { return c->rank; }
unsigned ab_comm_size(const ab_comm_t *c) { return c->size; }
uint64_t ab_comm_bytes(const ab_comm_t *c) { return c->bytes; }

ab_status ab_comm_abort(ab_comm_t *c, ab_diag_t *diag) {
  if (c->aborted) return AB_OK;
  c->aborted = true; /* NCCL frees the communicator even when the call fails */
  AB_NCCL_TRY(c->nccl, (ab_nccl_comm_t)NULL, diag, ncclCommAbort, c->handle);
  return AB_OK;
}

ab_status ab_comm_destroy(ab_comm_t *c, ab_diag_t *diag) {
  if (c == NULL) return AB_OK;
  ab_nccl_result_t r = c->aborted ? AB_NCCL_SUCCESS : c->nccl->ncclCommDestroy(c->handle);
  ab_status st =
      r == AB_NCCL_SUCCESS ? AB_OK : ab_nccl_status(c->nccl, r, NULL, "ncclCommDestroy", __FILE__, __LINE__, diag);
  if (c->last) {
    AB_CUDA_CHECKED(st, diag, cudaSetDevice(c->ordinal));
    AB_CUDA_CHECKED(st, diag, cudaEventDestroy(c->last));
  }
  ab_map_free(&c->measured);
  free(c);
  return st;
}

ab_status ab_collective_launch(ab_kernels_t *kx, const ab_kernel_t *k, const ab_dptr_t *buf, cudaStream_t s) {
  ab_comm_t *c = kx->comm;
  ab_diag_t *diag = &kx->dev->diag;
  if (k->n == 0) return AB_OK;
  char *b0 = (char *)(uintptr_t)buf[0], *b1 = (char *)(uintptr_t)buf[1];
  bool in_place = buf[0] == buf[1];
  size_t part = (size_t)c->rank * k->n; /* this rank's part of the full buffer */
  bool gather = k->op == AB_K_ALLGATHER;
  uint64_t key = k->n << 1 | (gather ? 0u : 1u);
  bool measure = !ab_map_get(&c->measured, key, NULL);
  size_t before = 0, after = 0;
  /* Collectives run on the device in the order they were launched, whatever their streams,
   * so that every rank's GPU meets them in the same order (as one NCCL stream per process
   * group does in PyTorch). */
  if (c->last == NULL) AB_CUDA_TRY(diag, cudaEventCreateWithFlags(&c->last, cudaEventDisableTiming));
  else if (c->last_stream != s) AB_CUDA_TRY(diag, cudaStreamWaitEvent(s, c->last, 0));
  if (measure) AB_TRY(free_bytes(&before, diag));
  if (gather) /* buf: shard, full */
    AB_NCCL_TRY(c->nccl, c->handle, diag, ncclAllGather, in_place ? b1 + part : b0, b1, k->n, AB_NCCL_UINT8, c->handle,
                s);
  else /* buf: full, shard */
    AB_NCCL_TRY(c->nccl, c->handle, diag, ncclReduceScatter, b0, in_place ? b0 + part : b1, k->n, AB_NCCL_UINT8,
                AB_NCCL_SUM, c->handle, s);
  AB_CUDA_TRY(diag, cudaEventRecord(c->last, s));
  c->last_stream = s;
  if (measure) {
    AB_TRY(free_bytes(&after, diag));
    if (before > after) c->bytes += before - after;
    if (ab_map_put(&c->measured, key, 1) != AB_OK) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  return AB_OK;
}
