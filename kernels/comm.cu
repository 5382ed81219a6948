/* comm.cu: collectives across GPUs (kernels.h, Note [Collectives]): loading NCCL, its
 * communicators, and the allgather and reduce_scatter launches on them.
 *
 * NCCL is looked for, unless a path is given, in this order: the toolkit allocbench was
 * built with (AB_CUDA_LIBRARY_DIR), the loader's search path (LD_LIBRARY_PATH, ldconfig),
 * then the wheel PyTorch depends on (nvidia-nccl-cu*, site-packages/nvidia/nccl/lib) under
 * the usual Python prefixes. It is never unloaded. */
#include <dlfcn.h>
#include <glob.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

#include "kernels/base/clock.h"
#include "kernels/kernels_internal.h"

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
static_assert(ncclInProgress == AB_NCCL_IN_PROGRESS, "ncclInProgress");
static_assert(offsetof(ncclConfig_t, size) == offsetof(ab_nccl_config_t, size) &&
                  offsetof(ncclConfig_t, magic) == offsetof(ab_nccl_config_t, magic) &&
                  offsetof(ncclConfig_t, version) == offsetof(ab_nccl_config_t, version) &&
                  offsetof(ncclConfig_t, blocking) == offsetof(ab_nccl_config_t, blocking),
              "ncclConfig_t");
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
    snprintf(why, size, "%s has no %s (NCCL 2.14 or later is needed)", path, #name); \
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

/* ---- waits (Note [Bounded waits]) ------------------------------------------------------------ */

#define WATCH_MS 50 /* the watchdog's period */

static void nap_ms(double ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(fmod(ms, 1000.0) * 1e6)};
  nanosleep(&ts, NULL);
}

static int stop_signal(const ab_waits_t *w) { return w->stop ? (int)*w->stop : 0; }

/* Polls h until its last call has completed (ncclCommGetAsyncError): AB_OK, NCCL's error, or
 * AB_ERR_IO once *w->stop is set or limit_s (named limit_name) has passed; `what` says what
 * was waited for ("rank 1 of 2 waited for ..."). The caller aborts h when this fails. */
static ab_status wait_ready(const ab_nccl_t *a, ab_nccl_comm_t h, const char *call, const ab_waits_t *w, double limit_s,
                            const char *limit_name, const char *what, ab_diag_t *diag) {
  double deadline = ab_clock_s() + limit_s;
  for (unsigned polls = 0;; polls++) {
    ab_nccl_result_t async = AB_NCCL_SUCCESS;
    ab_nccl_result_t r = a->ncclCommGetAsyncError(h, &async);
    if (r != AB_NCCL_SUCCESS) return ab_nccl_status(a, r, h, "ncclCommGetAsyncError", __FILE__, __LINE__, diag);
    if (async == AB_NCCL_SUCCESS) return AB_OK;
    if (async != AB_NCCL_IN_PROGRESS) return ab_nccl_status(a, async, h, call, __FILE__, __LINE__, diag);
    int sig = stop_signal(w);
    if (sig) return ab_diag_set(diag, AB_ERR_IO, "interrupted (%s) while %s", ab_signal_name(sig), what);
    if (ab_clock_s() >= deadline)
      return ab_diag_set(diag, AB_ERR_IO, "%s: %g s passed (%s)", what, limit_s, limit_name);
    /* Most calls finish within microseconds; a communicator's making takes seconds. */
    nap_ms(polls < 100 ? 0.05 : 5);
  }
}

/* Aborts c once, keeping why; under c->lock. NCCL frees the communicator even when the call
 * fails, so it is aborted either way. */
static ab_nccl_result_t abort_locked(ab_comm_t *c, const char *why) {
  if (c->aborted) return AB_NCCL_SUCCESS;
  c->aborted = true;
  c->pending = false;
  snprintf(c->why, sizeof c->why, "%s", why);
  ab_nccl_result_t r = c->nccl->ncclCommAbort(c->handle);
  return r == AB_NCCL_IN_PROGRESS ? AB_NCCL_SUCCESS : r; /* NCCL finishes it in the background */
}

/* The teardown cannot be interrupted: at a signal or past its deadline only the process's
 * end ends it (waits.give_up). */
static void watch_teardown(ab_comm_t *c) {
  int sig = stop_signal(&c->waits);
  double waited = ab_clock_s() - c->teardown_since;
  if (c->waits.give_up == NULL || (!sig && waited < c->waits.collective_s)) return;
  char why[AB_DIAG_BYTES];
  if (sig)
    snprintf(why, sizeof why,
             "interrupted (%s) while rank %u of %u waited for the other ranks to let go of NCCL's communicator "
             "(ncclCommDestroy on cuda:%d)",
             ab_signal_name(sig), c->rank, c->size, c->ordinal);
  else
    snprintf(why, sizeof why,
             "rank %u of %u waited %g s for the other ranks to let go of NCCL's communicator (ncclCommDestroy on "
             "cuda:%d; AB_COLLECTIVE_TIMEOUT)",
             c->rank, c->size, c->waits.collective_s, c->ordinal);
  pthread_mutex_unlock(&c->lock);
  c->waits.give_up(sig ? 128 + sig : 1, why);
  pthread_mutex_lock(&c->lock);
}

/* One look of the watchdog, under c->lock: NCCL's errors, a signal, and the oldest unfinished
 * collective against its deadline; any of them aborts the communicator. */
static void watch_once(ab_comm_t *c) {
  if (c->tearing_down) {
    watch_teardown(c);
    return;
  }
  if (c->aborted) return;
  char why[AB_DIAG_BYTES];
  int sig = stop_signal(&c->waits);
  if (sig) {
    if (c->pending)
      snprintf(why, sizeof why, "interrupted (%s) while rank %u of %u waited for %s to complete on cuda:%d",
               ab_signal_name(sig), c->rank, c->size, c->pending_what, c->ordinal);
    else
      snprintf(why, sizeof why, "interrupted (%s) while rank %u of %u ran on cuda:%d", ab_signal_name(sig), c->rank,
               c->size, c->ordinal);
    abort_locked(c, why);
    return;
  }
  ab_nccl_result_t async = AB_NCCL_SUCCESS;
  ab_nccl_result_t r = c->nccl->ncclCommGetAsyncError(c->handle, &async);
  if (r != AB_NCCL_SUCCESS || (async != AB_NCCL_SUCCESS && async != AB_NCCL_IN_PROGRESS)) {
    snprintf(why, sizeof why, "NCCL reported an error on rank %u of %u (cuda:%d): %s", c->rank, c->size, c->ordinal,
             c->nccl->ncclGetErrorString(r != AB_NCCL_SUCCESS ? r : async));
    abort_locked(c, why);
    return;
  }
  if (!c->pending) return;
  cudaError_t q = cudaEventQuery(c->last);
  (void)cudaGetLastError(); /* not ready is no error of anyone else's */
  if (q == cudaSuccess) {
    c->pending = false;
  } else if (q != cudaErrorNotReady) {
    snprintf(why, sizeof why, "rank %u of %u: cudaEventQuery after %s on cuda:%d failed: %s", c->rank, c->size,
             c->pending_what, c->ordinal, cudaGetErrorString(q));
    abort_locked(c, why);
  } else if (ab_clock_s() - c->pending_since > c->waits.collective_s) {
    snprintf(why, sizeof why,
             "rank %u of %u waited %g s for %s to complete on cuda:%d (AB_COLLECTIVE_TIMEOUT): another rank stopped "
             "taking part",
             c->rank, c->size, c->waits.collective_s, c->pending_what, c->ordinal);
    abort_locked(c, why);
  }
}

static void *watch(void *arg) {
  ab_comm_t *c = (ab_comm_t *)arg;
  /* The event queries need the communicator's device current in this thread. */
  cudaError_t e = cudaSetDevice(c->ordinal);
  pthread_mutex_lock(&c->lock);
  if (e != cudaSuccess) {
    char why[AB_DIAG_BYTES];
    snprintf(why, sizeof why, "rank %u's watchdog: cudaSetDevice(%d) failed: %s", c->rank, c->ordinal,
             cudaGetErrorString(e));
    abort_locked(c, why);
  }
  while (!c->dog_quit) {
    watch_once(c);
    pthread_mutex_unlock(&c->lock);
    nap_ms(WATCH_MS);
    pthread_mutex_lock(&c->lock);
  }
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

/* ---- making and freeing --------------------------------------------------------------------- */

static ab_nccl_config_t non_blocking(void) {
  ab_nccl_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.size = sizeof cfg;
  cfg.magic = AB_NCCL_CONFIG_MAGIC;
  cfg.version = AB_NCCL_CONFIG_VERSION;
  cfg.blocking = 0;
  return cfg;
}

/* Wraps a made communicator and starts its watchdog; on failure h is aborted. */
static ab_status wrap(const ab_nccl_t *a, ab_nccl_comm_t h, unsigned rank, unsigned size, int ordinal, uint64_t bytes,
                      const ab_waits_t *w, ab_comm_t **out, ab_diag_t *diag) {
  ab_comm_t *c = (ab_comm_t *)calloc(1, sizeof *c);
  if (c == NULL) {
    (void)a->ncclCommAbort(h); /* the error being reported is the host's memory */
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  c->nccl = a;
  c->handle = h;
  c->rank = rank;
  c->size = size;
  c->ordinal = ordinal;
  c->bytes = bytes;
  c->waits = *w;
  ab_map_init(&c->measured);
  pthread_mutex_init(&c->lock, NULL);
  if (pthread_create(&c->dog, NULL, watch, c) != 0) {
    (void)a->ncclCommAbort(h);
    pthread_mutex_destroy(&c->lock);
    free(c);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "cannot start the watchdog thread of rank %u", rank);
  }
  c->dog_started = true;
  *out = c;
  return AB_OK;
}

ab_status ab_comm_init_all(unsigned n, const int *ordinals, const ab_waits_t *w, ab_comm_t **out, ab_diag_t *diag) {
  const ab_nccl_t *a = ab_nccl(diag);
  if (a == NULL) return AB_ERR_CUDA;
  int count = 0, saved = 0;
  AB_CUDA_TRY(diag, cudaGetDeviceCount(&count));
  for (unsigned i = 0; i < n; i++)
    if (ordinals[i] < 0 || ordinals[i] >= count)
      return ab_diag_set(diag, AB_ERR_INVALID, "GPU %d: only %d GPU(s) present", ordinals[i], count);
  AB_CUDA_TRY(diag, cudaGetDevice(&saved));
  ab_nccl_id_t id;
  AB_NCCL_TRY(a, (ab_nccl_comm_t)NULL, diag, ncclGetUniqueId, &id);
  size_t *before = (size_t *)calloc(2 * (size_t)n, sizeof *before), *after = before + n;
  ab_nccl_comm_t *h = (ab_nccl_comm_t *)calloc(n, sizeof *h);
  ab_status st = before && h ? AB_OK : ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  /* Each device's context exists before the first reading, so that only NCCL's memory is
   * measured. */
  for (unsigned i = 0; i < n && st == AB_OK; i++) {
    AB_CUDA_CHECKED(st, diag, cudaSetDevice(ordinals[i]));
    if (st == AB_OK) st = free_bytes(&before[i], diag);
  }
  /* One group makes them all (a rank's making waits for the others'); the group must end
   * whatever happened inside it. */
  ab_nccl_result_t r = st == AB_OK ? a->ncclGroupStart() : AB_NCCL_SUCCESS;
  if (r != AB_NCCL_SUCCESS) st = ab_nccl_status(a, r, NULL, "ncclGroupStart", __FILE__, __LINE__, diag);
  bool grouped = st == AB_OK;
  for (unsigned i = 0; i < n && st == AB_OK; i++) {
    ab_nccl_config_t cfg = non_blocking();
    AB_CUDA_CHECKED(st, diag, cudaSetDevice(ordinals[i]));
    if (st == AB_OK) r = a->ncclCommInitRankConfig(&h[i], (int)n, id, (int)i, &cfg);
    if (st == AB_OK && r != AB_NCCL_SUCCESS && r != AB_NCCL_IN_PROGRESS)
      st = ab_nccl_status(a, r, NULL, "ncclCommInitRankConfig", __FILE__, __LINE__, diag);
  }
  if (grouped && (r = a->ncclGroupEnd()) != AB_NCCL_SUCCESS && r != AB_NCCL_IN_PROGRESS && st == AB_OK)
    st = ab_nccl_status(a, r, NULL, "ncclGroupEnd", __FILE__, __LINE__, diag);
  for (unsigned i = 0; i < n && st == AB_OK; i++) {
    char what[160];
    snprintf(what, sizeof what, "rank %u of %u waited for NCCL's communicator on cuda:%d", i, n, ordinals[i]);
    st = wait_ready(a, h[i], "ncclCommInitRankConfig", w, w->meet_s, "AB_RENDEZVOUS_TIMEOUT", what, diag);
  }
  for (unsigned i = 0; i < n && st == AB_OK; i++) {
    AB_CUDA_CHECKED(st, diag, cudaSetDevice(ordinals[i]));
    if (st == AB_OK) st = free_bytes(&after[i], diag);
  }
  unsigned wrapped = 0;
  while (st == AB_OK && wrapped < n) {
    uint64_t took = before[wrapped] > after[wrapped] ? before[wrapped] - after[wrapped] : 0;
    st = wrap(a, h[wrapped], wrapped, n, ordinals[wrapped], took, w, &out[wrapped], diag);
    h[wrapped] = NULL; /* wrapped, or aborted by wrap */
    if (st == AB_OK) wrapped++;
  }
  if (st != AB_OK) { /* the first error stands; what was made is aborted */
    for (unsigned i = 0; i < wrapped; i++) {
      ab_comm_abort(out[i], diag->msg, NULL);
      ab_comm_destroy(out[i], NULL);
    }
    for (unsigned i = 0; h && i < n; i++)
      if (h[i]) (void)a->ncclCommAbort(h[i]);
  }
  (void)cudaSetDevice(saved);
  free(before);
  free(h);
  return st;
}

ab_status ab_comm_init_rank(int ordinal, unsigned nranks, unsigned rank, const ab_comm_id_t *id, const ab_waits_t *w,
                            ab_comm_t **out, ab_diag_t *diag) {
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
  ab_nccl_config_t cfg = non_blocking();
  ab_nccl_result_t r = a->ncclCommInitRankConfig(&h, (int)nranks, nid, (int)rank, &cfg);
  ab_status st = AB_OK;
  if (r != AB_NCCL_SUCCESS && r != AB_NCCL_IN_PROGRESS)
    st = ab_nccl_status(a, r, NULL, "ncclCommInitRankConfig", __FILE__, __LINE__, diag);
  if (st == AB_OK) {
    char what[192];
    snprintf(what, sizeof what, "rank %u of %u waited for the other ranks to join NCCL's communicator on cuda:%d", rank,
             nranks, ordinal);
    st = wait_ready(a, h, "ncclCommInitRankConfig", w, w->meet_s, "AB_RENDEZVOUS_TIMEOUT", what, diag);
  }
  if (st == AB_OK) st = free_bytes(&after, diag);
  if (st != AB_OK) {
    if (h) (void)a->ncclCommAbort(h); /* the first error stands */
    return st;
  }
  return wrap(a, h, rank, nranks, ordinal, before > after ? before - after : 0, w, out, diag);
}

unsigned ab_comm_rank(const ab_comm_t *c) { return c->rank; }
unsigned ab_comm_size(const ab_comm_t *c) { return c->size; }
uint64_t ab_comm_bytes(const ab_comm_t *c) { return c->bytes; }

ab_status ab_comm_abort(ab_comm_t *c, const char *why, ab_diag_t *diag) {
  pthread_mutex_lock(&c->lock);
  ab_nccl_result_t r = abort_locked(c, why && why[0] ? why : "aborted");
  pthread_mutex_unlock(&c->lock);
  if (r != AB_NCCL_SUCCESS) return ab_nccl_status(c->nccl, r, NULL, "ncclCommAbort", __FILE__, __LINE__, diag);
  return AB_OK;
}

void ab_comm_aborted(ab_comm_t *c, char *why, size_t size) {
  pthread_mutex_lock(&c->lock);
  snprintf(why, size, "%s", c->aborted ? c->why : "");
  pthread_mutex_unlock(&c->lock);
}

ab_status ab_comm_destroy(ab_comm_t *c, ab_diag_t *diag) {
  if (c == NULL) return AB_OK;
  /* The watchdog stays, to end the process if the teardown outlasts a signal or its
   * deadline; it makes no NCCL call meanwhile, so the lock is not held across the call. */
  pthread_mutex_lock(&c->lock);
  c->tearing_down = true;
  c->teardown_since = ab_clock_s();
  bool aborted = c->aborted;
  pthread_mutex_unlock(&c->lock);
  ab_nccl_result_t r = aborted ? AB_NCCL_SUCCESS : c->nccl->ncclCommDestroy(c->handle);
  if (r == AB_NCCL_IN_PROGRESS) r = AB_NCCL_SUCCESS; /* NCCL finishes it in the background */
  if (c->dog_started) {
    pthread_mutex_lock(&c->lock);
    c->dog_quit = true;
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->dog, NULL);
  }
  ab_status st =
      r == AB_NCCL_SUCCESS ? AB_OK : ab_nccl_status(c->nccl, r, NULL, "ncclCommDestroy", __FILE__, __LINE__, diag);
  if (c->last) {
    AB_CUDA_CHECKED(st, diag, cudaSetDevice(c->ordinal));
    AB_CUDA_CHECKED(st, diag, cudaEventDestroy(c->last));
  }
  pthread_mutex_destroy(&c->lock);
  ab_map_free(&c->measured);
  free(c);
  return st;
}

/* ---- collectives ---------------------------------------------------------------------------- */

/* Launches k on c (under c->lock; see ab_collective_launch). A launch that fails part way
 * aborts c: some rank's device may already hold its half of the collective. */
static ab_status launch_locked(ab_comm_t *c, const ab_kernel_t *k, char *b0, char *b1, cudaStream_t s, ab_diag_t *diag) {
  if (c->aborted)
    return ab_diag_set(diag, AB_ERR_IO, "NCCL's communicator on cuda:%d was aborted: %s", c->ordinal, c->why);
  bool in_place = b0 == b1;
  size_t part = (size_t)c->rank * k->n; /* this rank's part of the full buffer */
  bool gather = k->op == AB_K_ALLGATHER;
  uint64_t key = k->n << 1 | (gather ? 0u : 1u);
  bool measure = !ab_map_get(&c->measured, key, NULL);
  size_t before = 0, after = 0;
  char what[128];
  snprintf(what, sizeof what, "collective %llu (%s of %llu bytes per rank)", (unsigned long long)c->launched + 1,
           ab_kernel_name((ab_kernel_op_t)k->op), (unsigned long long)k->n);
  /* Collectives run on the device in the order they were launched, whatever their streams,
   * so that every rank's GPU meets them in the same order (as one NCCL stream per process
   * group does in PyTorch). */
  if (c->last == NULL) AB_CUDA_TRY(diag, cudaEventCreateWithFlags(&c->last, cudaEventDisableTiming));
  else if (c->last_stream != s) AB_CUDA_TRY(diag, cudaStreamWaitEvent(s, c->last, 0));
  if (measure) AB_TRY(free_bytes(&before, diag));
  ab_nccl_result_t r;
  if (gather) /* buf: shard, full */
    r = c->nccl->ncclAllGather(in_place ? b1 + part : b0, b1, k->n, AB_NCCL_UINT8, c->handle, s);
  else /* buf: full, shard */
    r = c->nccl->ncclReduceScatter(b0, in_place ? b0 + part : b1, k->n, AB_NCCL_UINT8, AB_NCCL_SUM, c->handle, s);
  const char *call = gather ? "ncclAllGather" : "ncclReduceScatter";
  ab_status st = AB_OK;
  if (r != AB_NCCL_SUCCESS && r != AB_NCCL_IN_PROGRESS) st = ab_nccl_status(c->nccl, r, c->handle, call, __FILE__, __LINE__, diag);
  /* In progress: NCCL is still connecting the ranks (at their first collectives), which needs
   * every rank's launch. */
  if (st == AB_OK && r == AB_NCCL_IN_PROGRESS) {
    char waiting[256];
    snprintf(waiting, sizeof waiting, "rank %u of %u launched %s on cuda:%d (NCCL connects the ranks)", c->rank,
             c->size, what, c->ordinal);
    st = wait_ready(c->nccl, c->handle, call, &c->waits, c->waits.collective_s, "AB_COLLECTIVE_TIMEOUT", waiting, diag);
  }
  if (st != AB_OK) {
    abort_locked(c, diag->msg);
    return st;
  }
  AB_CUDA_TRY(diag, cudaEventRecord(c->last, s));
  c->last_stream = s;
  c->launched++;
  if (!c->pending) {
    c->pending = true;
    c->pending_since = ab_clock_s();
    snprintf(c->pending_what, sizeof c->pending_what, "%s", what);
  }
  if (measure) {
    AB_TRY(free_bytes(&after, diag));
    if (before > after) c->bytes += before - after;
    if (ab_map_put(&c->measured, key, 1) != AB_OK) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  return AB_OK;
}

ab_status ab_collective_launch(ab_kernels_t *kx, const ab_kernel_t *k, const ab_dptr_t *buf, cudaStream_t s) {
  ab_comm_t *c = kx->comm;
  if (k->n == 0) return AB_OK;
  pthread_mutex_lock(&c->lock);
  ab_status st =
      launch_locked(c, k, (char *)(uintptr_t)buf[0], (char *)(uintptr_t)buf[1], s, &kx->dev->diag);
  pthread_mutex_unlock(&c->lock);
  return st;
}
