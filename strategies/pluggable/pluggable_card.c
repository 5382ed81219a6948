/* pluggable_card.c: the CUDA calls of a pluggable library on the run's device
 * (pluggable_card.h; Note [The CUDA shim] in pluggable_shim.h).
 *
 * How each call lands:
 *   1. cudaMalloc / cudaFree are the device's malloc and free: one segment each, as raw's.
 *   2. cudaMallocAsync / cudaFreeAsync use the device's stream-ordered pool, CUDA's default
 *      pool (release threshold 0 until the library sets one); each allocation is a segment
 *      of its own, as async's, and the pool's reserve is read back after every call.
 *   3. Virtual memory: cuMemAddressReserve and cuMemAddressFree are the device's
 *      reservations. The device maps physical memory in one call (create, map, set access),
 *      so cuMemCreate only records a handle, checking that the memory would fit, and the
 *      memory is taken when the handle is mapped (whole, once); cuMemUnmap gives back whole
 *      mappings, and a handle's memory is freed at the later of its unmap and its release.
 *      A created handle that is not mapped counts against the room (cudaMemGetInfo, the next
 *      cuMemCreate) but not as reserved bytes, which the device does not hold.
 *   4. Streams are the stream indices of the run, handed to the library as cudaStream_t.
 * Every answer is CUDA's error code; the device's OOM (the card's capacity, the budget, an
 * injected fault) is cudaErrorMemoryAllocation.
 */
#include "strategies/pluggable/pluggable_card.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum range_kind_e { RANGE_MALLOC, RANGE_ASYNC, RANGE_MAPPED } range_kind_t;

typedef struct handle_s handle_t;

typedef struct range_s {
  ab_tnode_t node;
  ab_dptr_t base;
  uint64_t bytes;
  range_kind_t kind;
  unsigned stream;  /* the stream it was allocated or mapped on */
  handle_t *handle; /* MAPPED: the physical allocation behind it */
} range_t;

struct handle_s {
  uint64_t id;
  uint64_t bytes;
  range_t *mapping; /* where it is mapped; NULL when it is not */
  bool released;    /* cuMemRelease came while it was mapped: freed at its unmap */
};

typedef struct reservation_s {
  ab_tnode_t node;
  ab_dptr_t base;
  uint64_t bytes;
} reservation_t;

static int cmp_range(const ab_tnode_t *a, const ab_tnode_t *b) {
  ab_dptr_t x = AB_CONTAINER_OF(a, range_t, node)->base, y = AB_CONTAINER_OF(b, range_t, node)->base;
  return (x > y) - (x < y);
}

static int key_range(const void *k, const ab_tnode_t *n) {
  ab_dptr_t x = *(const ab_dptr_t *)k, y = AB_CONTAINER_OF(n, range_t, node)->base;
  return (x > y) - (x < y);
}

static int cmp_reservation(const ab_tnode_t *a, const ab_tnode_t *b) {
  ab_dptr_t x = AB_CONTAINER_OF(a, reservation_t, node)->base, y = AB_CONTAINER_OF(b, reservation_t, node)->base;
  return (x > y) - (x < y);
}

static int key_reservation(const void *k, const ab_tnode_t *n) {
  ab_dptr_t x = *(const ab_dptr_t *)k, y = AB_CONTAINER_OF(n, reservation_t, node)->base;
  return (x > y) - (x < y);
}

static range_t *range_of(ab_tnode_t *n) { return n ? AB_CONTAINER_OF(n, range_t, node) : NULL; }

/* The held range starting exactly at p, or NULL. */
static range_t *range_at(const ab_card_t *c, ab_dptr_t p) {
  range_t *r = range_of(ab_tree_lower_bound(&c->held, &p, key_range));
  return r && r->base == p ? r : NULL;
}

/* The first failure of the call in progress: "LIBRARY: WHAT". */
static void fail(ab_card_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(ab_card_t *c, const char *fmt, ...) {
  if (c->failed) return;
  char what[AB_DIAG_BYTES];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  c->failed = true;
  ab_diag_set(&c->error, AB_ERR_INVALID, "pluggable: %s: %s", c->who, what);
}

/* A device call's status as CUDA's code. Anything but OOM is the library's misuse (or the
 * GPU's failure), recorded with the device's reason. */
static int answer(ab_card_t *c, ab_status st, const char *call) {
  if (st == AB_OK) return AB_CU_SUCCESS;
  if (st == AB_ERR_OOM) {
    c->oom = true;
    return AB_CU_OUT_OF_MEMORY;
  }
  fail(c, "%s failed: %s", call, c->s->dev->diag.msg[0] ? c->s->dev->diag.msg : ab_strerror(st));
  return st == AB_ERR_INVALID ? AB_CU_INVALID_VALUE : AB_CU_UNKNOWN;
}

static int host_memory_gone(ab_card_t *c) {
  fail(c, "out of host memory");
  return AB_CU_UNKNOWN;
}

void ab_card_account(ab_card_t *c) {
  if (c->pool_used) {
    uint64_t current = 0, peak = 0;
    if (ab_device_pool_reserved(c->s->dev, &current, &peak) == AB_OK) c->pool_bytes = current;
  }
  ab_gauge_t *g = &c->s->stats.reserved_bytes;
  g->current = (int64_t)(c->own_bytes + c->pool_bytes);
  if (g->current > g->peak) g->peak = g->current;
}

static range_t *range_add(ab_card_t *c, ab_dptr_t base, uint64_t bytes, range_kind_t kind, unsigned stream) {
  range_t *r = calloc(1, sizeof *r);
  if (r == NULL) return NULL;
  r->base = base;
  r->bytes = bytes;
  r->kind = kind;
  r->stream = stream;
  ab_tree_insert(&c->held, &r->node);
  c->held_ranges++;
  c->s->stats.num_device_alloc++;
  return r;
}

static void range_drop(ab_card_t *c, range_t *r) {
  ab_tree_remove(&c->held, &r->node);
  c->held_ranges--;
  c->s->stats.num_device_free++;
  free(r);
}

/* ---- streams ------------------------------------------------------------------------------ */

/* On the simulated card a stream is the address of one of these bytes: never NULL (the
 * default stream), never cudaStreamLegacy or cudaStreamPerThread (1 and 2). */
static char sim_streams[AB_MAX_STREAMS];

void *ab_card_stream(ab_card_t *c, unsigned stream) {
  if (stream == 0 || stream >= AB_MAX_STREAMS) return NULL;
  if (c->streams[stream] == NULL)
    c->streams[stream] = c->s->dev->kind == AB_DEVICE_SIM ? &sim_streams[stream] : ab_device_stream_handle(c->s->dev, stream);
  return c->streams[stream];
}

/* The stream index of a cudaStream_t the library passes back: one it was given, or one of
 * the default streams. */
static bool stream_index(ab_card_t *c, void *handle, const char *call, unsigned *out) {
  uintptr_t h = (uintptr_t)handle;
  if (h == 0 || h == 1 || h == 2) {
    *out = 0;
    return true;
  }
  for (unsigned k = 1; k < AB_MAX_STREAMS; k++)
    if (c->streams[k] == handle) {
      *out = k;
      return true;
    }
  fail(c, "%s on stream %p, which allocbench did not give the library", call, handle);
  return false;
}

/* ---- plain and stream-ordered allocation ----------------------------------------------------- */

static int card_malloc(void *ctx, void **p, size_t bytes) {
  ab_card_t *c = ctx;
  *p = NULL;
  if (bytes == 0) return AB_CU_SUCCESS;
  ab_dptr_t a;
  ab_status st = ab_device_malloc(c->s->dev, bytes, &a);
  if (st != AB_OK) return answer(c, st, "cudaMalloc");
  if (range_add(c, a, bytes, RANGE_MALLOC, c->stream) == NULL) {
    ab_device_free(c->s->dev, a, bytes);
    return host_memory_gone(c);
  }
  c->own_bytes += bytes;
  ab_card_account(c);
  ab_strategy_segment(c->s, AB_TR_SEGMENT_ALLOC, a, bytes, c->stream);
  *p = (void *)(uintptr_t)a;
  return AB_CU_SUCCESS;
}

static int free_async_range(ab_card_t *c, range_t *r, unsigned stream) {
  ab_status st = ab_device_free_async(c->s->dev, r->base, r->bytes, stream);
  if (st != AB_OK) return answer(c, st, "cudaFreeAsync");
  ab_strategy_segment(c->s, AB_TR_SEGMENT_FREE, r->base, r->bytes, stream);
  c->async_bytes -= r->bytes;
  range_drop(c, r);
  ab_card_account(c);
  return AB_CU_SUCCESS;
}

static int card_free(void *ctx, void *p) {
  ab_card_t *c = ctx;
  range_t *r = range_at(c, (ab_dptr_t)(uintptr_t)p);
  if (r == NULL || r->kind == RANGE_MAPPED) {
    fail(c, "cudaFree(%p) of memory the library did not get from cudaMalloc", p);
    return AB_CU_INVALID_VALUE;
  }
  /* CUDA lets cudaFree end a pool allocation too, after synchronising. */
  if (r->kind == RANGE_ASYNC) {
    ab_status st = ab_device_synchronize(c->s->dev);
    return st == AB_OK ? free_async_range(c, r, r->stream) : answer(c, st, "cudaFree");
  }
  ab_status st = ab_device_free(c->s->dev, r->base, r->bytes);
  if (st != AB_OK) return answer(c, st, "cudaFree");
  ab_strategy_segment(c->s, AB_TR_SEGMENT_FREE, r->base, r->bytes, r->stream);
  c->own_bytes -= r->bytes;
  range_drop(c, r);
  ab_card_account(c);
  return AB_CU_SUCCESS;
}

static int card_malloc_async(void *ctx, void **p, size_t bytes, void *stream) {
  ab_card_t *c = ctx;
  *p = NULL;
  unsigned k;
  if (!stream_index(c, stream, "cudaMallocAsync", &k)) return AB_CU_INVALID_HANDLE;
  if (bytes == 0) return AB_CU_SUCCESS;
  c->pool_used = true;
  ab_dptr_t a;
  ab_status st = ab_device_malloc_async(c->s->dev, bytes, k, &a);
  if (st != AB_OK) {
    ab_card_account(c);
    return answer(c, st, "cudaMallocAsync");
  }
  if (range_add(c, a, bytes, RANGE_ASYNC, k) == NULL) {
    ab_device_free_async(c->s->dev, a, bytes, k);
    return host_memory_gone(c);
  }
  c->async_bytes += bytes;
  if (c->async_bytes > c->async_peak) c->async_peak = c->async_bytes;
  ab_card_account(c);
  ab_strategy_segment(c->s, AB_TR_SEGMENT_ALLOC, a, bytes, k);
  *p = (void *)(uintptr_t)a;
  return AB_CU_SUCCESS;
}

static int card_free_async(void *ctx, void *p, void *stream) {
  ab_card_t *c = ctx;
  unsigned k;
  if (!stream_index(c, stream, "cudaFreeAsync", &k)) return AB_CU_INVALID_HANDLE;
  range_t *r = range_at(c, (ab_dptr_t)(uintptr_t)p);
  if (r == NULL || r->kind != RANGE_ASYNC) {
    fail(c, "cudaFreeAsync(%p) of memory the library did not get from cudaMallocAsync", p);
    return AB_CU_INVALID_VALUE;
  }
  return free_async_range(c, r, k);
}

static int card_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
  ab_card_t *c = ctx;
  uint64_t f = 0, t = 0;
  ab_status st = ab_device_mem_info(c->s->dev, &f, &t);
  if (st != AB_OK) return answer(c, st, "cudaMemGetInfo");
  *free_bytes = f > c->unmapped_bytes ? f - c->unmapped_bytes : 0;
  *total_bytes = t;
  return AB_CU_SUCCESS;
}

static int card_synchronize(void *ctx, void *stream, int whole_device) {
  ab_card_t *c = ctx;
  unsigned k = 0;
  if (!whole_device && !stream_index(c, stream, "cudaStreamSynchronize", &k)) return AB_CU_INVALID_HANDLE;
  ab_status st = whole_device ? ab_device_synchronize(c->s->dev) : ab_device_stream_synchronize(c->s->dev, k);
  ab_card_account(c); /* the pool gives back what is above its threshold */
  return answer(c, st, whole_device ? "cudaDeviceSynchronize" : "cudaStreamSynchronize");
}

/* ---- the default pool (cudaMemPoolAttr numbers) ----------------------------------------------- */

enum {
  POOL_REUSE_FOLLOW_EVENTS = 1,
  POOL_REUSE_OPPORTUNISTIC = 2,
  POOL_REUSE_INTERNAL_DEPENDENCIES = 3,
  POOL_RELEASE_THRESHOLD = 4,
  POOL_RESERVED_CURRENT = 5,
  POOL_RESERVED_HIGH = 6,
  POOL_USED_CURRENT = 7,
  POOL_USED_HIGH = 8,
};

/* The reuse policies are accepted and change nothing: the simulated pool reuses memory on
 * its stream at once, and on a GPU the device's pool keeps CUDA's defaults. */
static int card_pool_set(void *ctx, int attr, unsigned long long value) {
  ab_card_t *c = ctx;
  switch (attr) {
    case POOL_REUSE_FOLLOW_EVENTS:
    case POOL_REUSE_OPPORTUNISTIC:
    case POOL_REUSE_INTERNAL_DEPENDENCIES: return AB_CU_SUCCESS;
    case POOL_RELEASE_THRESHOLD: {
      ab_status st = ab_device_pool_configure(c->s->dev, value);
      if (st == AB_OK) c->pool_threshold = value;
      return answer(c, st, "cudaMemPoolSetAttribute(release threshold)");
    }
    case POOL_RESERVED_HIGH:
      if (value) break;
      return answer(c, ab_device_pool_reset_peak(c->s->dev), "cudaMemPoolSetAttribute(reserved high)");
    case POOL_USED_HIGH:
      if (value) break;
      c->async_peak = c->async_bytes;
      return AB_CU_SUCCESS;
    default: break;
  }
  return AB_CU_INVALID_VALUE;
}

static int card_pool_get(void *ctx, int attr, unsigned long long *value) {
  ab_card_t *c = ctx;
  uint64_t current = 0, peak = 0;
  switch (attr) {
    case POOL_REUSE_FOLLOW_EVENTS:
    case POOL_REUSE_OPPORTUNISTIC:
    case POOL_REUSE_INTERNAL_DEPENDENCIES: *value = 1; return AB_CU_SUCCESS;
    case POOL_RELEASE_THRESHOLD: *value = c->pool_threshold; return AB_CU_SUCCESS;
    case POOL_RESERVED_CURRENT:
    case POOL_RESERVED_HIGH: {
      ab_status st = ab_device_pool_reserved(c->s->dev, &current, &peak);
      *value = attr == POOL_RESERVED_CURRENT ? current : peak;
      return answer(c, st, "cudaMemPoolGetAttribute");
    }
    case POOL_USED_CURRENT: *value = c->async_bytes; return AB_CU_SUCCESS;
    case POOL_USED_HIGH: *value = c->async_peak; return AB_CU_SUCCESS;
    default: return AB_CU_INVALID_VALUE;
  }
}

static int card_pool_trim(void *ctx, size_t keep_bytes) {
  ab_card_t *c = ctx;
  ab_status st = ab_device_pool_trim(c->s->dev, keep_bytes);
  ab_card_account(c);
  return answer(c, st, "cudaMemPoolTrimTo");
}

/* ---- virtual memory ------------------------------------------------------------------------- */

static int card_va_reserve(void *ctx, unsigned long long *p, size_t bytes, size_t alignment) {
  ab_card_t *c = ctx;
  uint64_t g = c->table.granule;
  *p = 0;
  if (bytes == 0 || bytes % g || (alignment & (alignment - 1))) return AB_CU_INVALID_VALUE;
  if (alignment > g) return c->table.refuse(c, "cuMemAddressReserve (aligned beyond the granule)", AB_SHIM_UNKNOWN);
  reservation_t *r = calloc(1, sizeof *r);
  if (r == NULL) return host_memory_gone(c);
  ab_status st = ab_device_va_reserve(c->s->dev, bytes, &r->base);
  if (st != AB_OK) {
    free(r);
    return answer(c, st, "cuMemAddressReserve");
  }
  r->bytes = bytes;
  ab_tree_insert(&c->reservations, &r->node);
  *p = r->base;
  return AB_CU_SUCCESS;
}

static int card_va_free(void *ctx, unsigned long long p, size_t bytes) {
  ab_card_t *c = ctx;
  ab_dptr_t base = p;
  ab_tnode_t *n = ab_tree_lower_bound(&c->reservations, &base, key_reservation);
  reservation_t *r = n ? AB_CONTAINER_OF(n, reservation_t, node) : NULL;
  if (r == NULL || r->base != p || r->bytes != bytes) {
    fail(c, "cuMemAddressFree(0x%llx, %zu) of a range the library did not reserve", p, bytes);
    return AB_CU_INVALID_VALUE;
  }
  ab_status st = ab_device_va_release(c->s->dev, r->base, r->bytes);
  if (st != AB_OK) return answer(c, st, "cuMemAddressFree");
  ab_tree_remove(&c->reservations, &r->node);
  free(r);
  return AB_CU_SUCCESS;
}

static handle_t *handle_of(ab_card_t *c, unsigned long long id, const char *call) {
  uint64_t h;
  if (id && ab_map_get(&c->handles, id, &h)) return (handle_t *)(uintptr_t)h;
  fail(c, "%s of handle %llu, which the library did not create or has released", call, id);
  return NULL;
}

static void handle_drop(ab_card_t *c, handle_t *h) {
  ab_map_take(&c->handles, h->id, NULL);
  free(h);
}

/* Location type 1 is a device; the memory must be on the run's. */
static int card_mem_create(void *ctx, unsigned long long *handle, size_t bytes, int location_type, int location_id) {
  ab_card_t *c = ctx;
  *handle = 0;
  if (location_type != 1) return c->table.refuse(c, "cuMemCreate (of memory that is not on a device)", AB_SHIM_UNKNOWN);
  if (location_id != c->table.ordinal) return AB_CU_INVALID_DEVICE;
  if (bytes == 0 || bytes % c->table.granule) return AB_CU_INVALID_VALUE;
  uint64_t room = 0, total = 0;
  ab_status st = ab_device_mem_info(c->s->dev, &room, &total);
  if (st != AB_OK) return answer(c, st, "cuMemCreate");
  if (c->unmapped_bytes + bytes > room) return answer(c, AB_ERR_OOM, "cuMemCreate");
  handle_t *h = calloc(1, sizeof *h);
  if (h == NULL) return host_memory_gone(c);
  h->id = ++c->next_handle;
  h->bytes = bytes;
  if (ab_map_put(&c->handles, h->id, (uint64_t)(uintptr_t)h) != AB_OK) {
    free(h);
    return host_memory_gone(c);
  }
  c->unmapped_bytes += bytes;
  *handle = h->id;
  return AB_CU_SUCCESS;
}

static int card_mem_release(void *ctx, unsigned long long handle) {
  ab_card_t *c = ctx;
  handle_t *h = handle_of(c, handle, "cuMemRelease");
  if (h == NULL || h->released) {
    if (h) fail(c, "cuMemRelease of handle %llu twice", handle);
    return AB_CU_INVALID_HANDLE;
  }
  if (h->mapping) {
    h->released = true;
    return AB_CU_SUCCESS;
  }
  c->unmapped_bytes -= h->bytes;
  handle_drop(c, h);
  return AB_CU_SUCCESS;
}

static int card_mem_map(void *ctx, unsigned long long at, size_t bytes, size_t offset, unsigned long long handle) {
  ab_card_t *c = ctx;
  handle_t *h = handle_of(c, handle, "cuMemMap");
  if (h == NULL || h->released) {
    if (h) fail(c, "cuMemMap of handle %llu after its cuMemRelease", handle);
    return AB_CU_INVALID_HANDLE;
  }
  if (h->mapping) return c->table.refuse(c, "cuMemMap (of a handle mapped already)", AB_SHIM_UNKNOWN);
  if (offset != 0 || bytes != h->bytes) return c->table.refuse(c, "cuMemMap (of part of a handle)", AB_SHIM_UNKNOWN);
  ab_status st = ab_device_map(c->s->dev, at, bytes);
  if (st != AB_OK) return answer(c, st, "cuMemMap");
  range_t *r = range_add(c, at, bytes, RANGE_MAPPED, c->stream);
  if (r == NULL) {
    ab_device_unmap(c->s->dev, at, bytes);
    return host_memory_gone(c);
  }
  r->handle = h;
  h->mapping = r;
  c->unmapped_bytes -= bytes;
  c->own_bytes += bytes;
  ab_card_account(c);
  ab_strategy_segment(c->s, AB_TR_SEGMENT_MAP, at, bytes, c->stream);
  return AB_CU_SUCCESS;
}

/* The mapped ranges that tile [at, at + bytes) exactly, one after another; false if any
 * piece of it is not mapped or a mapping sticks out. */
static bool whole_mappings(const ab_card_t *c, ab_dptr_t at, uint64_t bytes) {
  range_t *r = range_at(c, at);
  ab_dptr_t end = at + bytes;
  while (r && r->kind == RANGE_MAPPED && r->base == at && r->bytes <= end - at) {
    at += r->bytes;
    if (at == end) return true;
    r = range_of(ab_tree_next(&r->node));
  }
  return false;
}

static int card_mem_unmap(void *ctx, unsigned long long at, size_t bytes) {
  ab_card_t *c = ctx;
  if (bytes == 0 || !whole_mappings(c, at, bytes)) {
    fail(c, "cuMemUnmap(0x%llx, %zu) of a range that is not whole mappings of the library", at, bytes);
    return AB_CU_INVALID_VALUE;
  }
  ab_status st = ab_device_unmap(c->s->dev, at, bytes);
  if (st != AB_OK) return answer(c, st, "cuMemUnmap");
  for (ab_dptr_t p = at, end = at + bytes; p < end;) {
    range_t *r = range_at(c, p);
    handle_t *h = r->handle;
    p += r->bytes;
    c->own_bytes -= r->bytes;
    h->mapping = NULL;
    if (h->released) handle_drop(c, h);
    else c->unmapped_bytes += h->bytes;
    range_drop(c, r);
  }
  ab_card_account(c);
  ab_strategy_segment(c->s, AB_TR_SEGMENT_UNMAP, at, bytes, c->stream);
  return AB_CU_SUCCESS;
}

/* Mapped memory is accessible on the device as the device maps it; the range must be mapped. */
static int card_set_access(void *ctx, unsigned long long at, size_t bytes) {
  ab_card_t *c = ctx;
  if (bytes && ab_card_holds(c, at, bytes)) return AB_CU_SUCCESS;
  fail(c, "cuMemSetAccess(0x%llx, %zu) of a range the library has not mapped", at, bytes);
  return AB_CU_INVALID_VALUE;
}

static int card_refuse(void *ctx, const char *call, int why) {
  ab_card_t *c = ctx;
  switch (why) {
    case AB_SHIM_UNCOUNTED: fail(c, "it called %s, which allocates device memory allocbench cannot count", call); break;
    case AB_SHIM_NO_LIBRARY:
      fail(c, "it called %s, which on a GPU goes to the CUDA library it links, and it links none (link it against "
              "libcudart.so)", call);
      break;
    default:
      fail(c, "it called %s, which %s does not provide", call,
           c->s->dev->kind == AB_DEVICE_SIM ? "the simulated card" : "allocbench");
      break;
  }
  return AB_CU_NOT_SUPPORTED;
}

/* ---- the card ------------------------------------------------------------------------------ */

ab_status ab_card_init(ab_card_t *c, ab_strategy_t *s, const char *who) {
  memset(c, 0, sizeof *c);
  c->s = s;
  c->who = who;
  ab_tree_init(&c->held, cmp_range);
  ab_tree_init(&c->reservations, cmp_reservation);
  ab_map_init(&c->handles);
  int ordinal = 0;
  if (s->dev->kind == AB_DEVICE_CUDA && sscanf(s->dev->name, "cuda:%d", &ordinal) != 1) ordinal = 0;
  c->table = (ab_shim_card_t){
      .ctx = c,
      .ordinal = ordinal,
      .forwards = s->dev->kind == AB_DEVICE_CUDA,
      .granule = s->dev->granule_bytes,
      .malloc = card_malloc,
      .free = card_free,
      .malloc_async = card_malloc_async,
      .free_async = card_free_async,
      .mem_info = card_mem_info,
      .synchronize = card_synchronize,
      .pool_set = card_pool_set,
      .pool_get = card_pool_get,
      .pool_trim = card_pool_trim,
      .va_reserve = card_va_reserve,
      .va_free = card_va_free,
      .mem_create = card_mem_create,
      .mem_release = card_mem_release,
      .mem_map = card_mem_map,
      .mem_unmap = card_mem_unmap,
      .set_access = card_set_access,
      .refuse = card_refuse,
  };
  /* CUDA's default pool keeps nothing across synchronisations until told otherwise. */
  ab_status st = ab_device_pool_configure(s->dev, 0);
  if (st != AB_OK) ab_diag_set(&c->error, st, "pluggable: %s", s->dev->diag.msg);
  return st;
}

void ab_card_begin(ab_card_t *c, unsigned stream) {
  c->stream = stream;
  c->oom = false;
  c->failed = false;
  c->error.msg[0] = '\0';
}

void ab_card_destroy(ab_card_t *c) {
  ab_device_t *dev = c->s->dev;
  for (ab_tnode_t *n = ab_tree_first(&c->held); n;) {
    range_t *r = range_of(n);
    n = ab_tree_next(n);
    if (r->kind == RANGE_MALLOC) ab_device_free(dev, r->base, r->bytes);
    else if (r->kind == RANGE_ASYNC) ab_device_free_async(dev, r->base, r->bytes, r->stream);
    else ab_device_unmap(dev, r->base, r->bytes);
    ab_tree_remove(&c->held, &r->node);
    free(r);
  }
  for (size_t i = 0; i < c->handles.cap; i++)
    if (c->handles.slots[i].key) free((handle_t *)(uintptr_t)c->handles.slots[i].val);
  ab_map_free(&c->handles);
  for (ab_tnode_t *n = ab_tree_first(&c->reservations); n;) {
    reservation_t *r = AB_CONTAINER_OF(n, reservation_t, node);
    n = ab_tree_next(n);
    ab_device_va_release(dev, r->base, r->bytes);
    ab_tree_remove(&c->reservations, &r->node);
    free(r);
  }
  if (c->pool_used && ab_device_synchronize(dev) == AB_OK) ab_device_pool_trim(dev, 0);
}

bool ab_card_holds(const ab_card_t *c, ab_dptr_t p, uint64_t bytes) {
  range_t *r = range_of(ab_tree_floor(&c->held, &p, key_range));
  if (r == NULL || p - r->base >= r->bytes) return false;
  ab_dptr_t end = p + bytes, covered = r->base + r->bytes;
  if (end < p) return false;
  /* A block may span mappings that follow each other (an expandable segment), nothing else. */
  while (covered < end) {
    range_t *next = range_of(ab_tree_next(&r->node));
    if (r->kind != RANGE_MAPPED || next == NULL || next->kind != RANGE_MAPPED || next->base != covered) return false;
    r = next;
    covered += r->bytes;
  }
  return true;
}

/* ---- the segment walk ------------------------------------------------------------------------ */

typedef struct walk_s {
  const ab_card_block_t *blocks; /* the library's live blocks, by address */
  size_t nblocks, next;          /* the first not yet placed */
  ab_block_info_t *out;          /* the blocks of the segment being built */
  size_t n, cap;
} walk_t;

static bool put(walk_t *w, ab_dptr_t addr, uint64_t bytes, ab_block_state_t state) {
  if (bytes == 0) return true;
  if (w->n == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 64;
    ab_block_info_t *out = realloc(w->out, cap * sizeof *out);
    if (out == NULL) return false;
    w->out = out;
    w->cap = cap;
  }
  bool live = state == AB_BLOCK_ALLOCATED;
  w->out[w->n++] = (ab_block_info_t){addr, bytes, live ? bytes : 0, state};
  return true;
}

/* Tiles [from, to), memory the library holds, with its live blocks and the free gaps. */
static bool tile_held(walk_t *w, ab_dptr_t from, ab_dptr_t to) {
  while (w->next < w->nblocks && w->blocks[w->next].addr < from) w->next++; /* outside every segment */
  ab_dptr_t at = from;
  for (; w->next < w->nblocks; w->next++) {
    const ab_card_block_t *b = &w->blocks[w->next];
    if (b->addr < at || b->addr >= to || b->bytes > to - b->addr) break;
    if (!put(w, at, b->addr - at, AB_BLOCK_FREE) || !put(w, b->addr, b->bytes, AB_BLOCK_ALLOCATED)) return false;
    at = b->addr + b->bytes;
  }
  return put(w, at, to - at, AB_BLOCK_FREE);
}

static int emit(walk_t *w, ab_dptr_t base, uint64_t bytes, unsigned stream, const char *pool, bool expandable,
                ab_segment_fn fn, void *ctx) {
  ab_segment_info_t seg = {base, bytes, stream, pool, expandable, w->out, w->n, 0};
  return fn(ctx, &seg);
}

/* A reservation: its mapped runs tiled with blocks, the rest unmapped; its bytes are the mapped ones. */
static bool tile_reservation(const ab_card_t *c, walk_t *w, const reservation_t *v, uint64_t *mapped, unsigned *stream) {
  ab_dptr_t at = v->base, end = v->base + v->bytes;
  *mapped = 0;
  *stream = 0;
  range_t *r = range_of(ab_tree_lower_bound(&c->held, &at, key_range));
  while (r && r->base < end) {
    if (!put(w, at, r->base - at, AB_BLOCK_UNMAPPED)) return false;
    ab_dptr_t run_end = r->base + r->bytes;
    *stream = r->stream;
    range_t *next = range_of(ab_tree_next(&r->node));
    while (next && next->base == run_end && run_end < end) {
      run_end += next->bytes;
      next = range_of(ab_tree_next(&next->node));
    }
    if (!tile_held(w, r->base, run_end)) return false;
    *mapped += run_end - r->base;
    at = run_end;
    r = next;
  }
  return put(w, at, end - at, AB_BLOCK_UNMAPPED);
}

ab_status ab_card_walk(const ab_card_t *c, const ab_card_block_t *blocks, size_t nblocks, ab_segment_fn fn, void *ctx) {
  walk_t w = {blocks, nblocks, 0, NULL, 0, 0};
  bool ok = true;
  int stop = 0;
  /* Two sorted sets of segments, merged by address: allocations (mapped ranges lie inside
   * reservations and are walked with them) and reservations. */
  ab_tnode_t *a = ab_tree_first(&c->held), *v = ab_tree_first(&c->reservations);
  while (ok && !stop) {
    while (a && range_of(a)->kind == RANGE_MAPPED) a = ab_tree_next(a);
    const range_t *r = range_of(a);
    const reservation_t *res = v ? AB_CONTAINER_OF(v, reservation_t, node) : NULL;
    if (r == NULL && res == NULL) break;
    w.n = 0;
    if (res == NULL || (r && r->base < res->base)) {
      ok = tile_held(&w, r->base, r->base + r->bytes);
      if (ok) stop = emit(&w, r->base, r->bytes, r->stream, r->kind == RANGE_MALLOC ? "cudaMalloc" : "cudaMallocAsync", false,
                          fn, ctx);
      a = ab_tree_next(a);
    } else {
      uint64_t mapped;
      unsigned stream;
      ok = tile_reservation(c, &w, res, &mapped, &stream);
      if (ok) stop = emit(&w, res->base, mapped, stream, "cuMemMap", true, fn, ctx);
      v = ab_tree_next(v);
    }
  }
  free(w.out);
  return ok ? AB_OK : AB_ERR_INTERNAL;
}
