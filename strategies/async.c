/* async.c: the CUDA stream-ordered allocator, the driver's own answer.
 *
 * Policy (as PyTorch's backend:cudaMallocAsync uses it):
 *   1. alloc is cudaMallocAsync on the stream, from one memory pool; free is cudaFreeAsync
 *      on the allocation's stream. The pool reuses freed memory and keeps what it holds
 *      across synchronisations up to its release threshold (release_threshold, default
 *      max: keep everything, PyTorch's choice; CUDA's own default is 0).
 *   2. A refusal is an out-of-memory error at once, as in PyTorch (Note [Refusals]).
 *   3. empty_cache synchronises and trims the pool to nothing.
 * Reserved bytes are the pool's reserve as the driver reports it (on the simulated card,
 * its emulation of the pool: sim.h); allocated bytes are the requested bytes, since the
 * pool's own rounding is not visible. On the simulated card the pool is emulated.
 *
 * Note [The pool's reserve as segments]: PyTorch's cudaMallocAsync backend keeps no segments:
 * its snapshot() and recordHistory() refuse (c10/cuda/CUDAMallocAsyncAllocator.cpp, read as
 * for Note [Refusals]), and the one figure it gives of the pool is memory_stats'
 * reserved_bytes, the driver's cudaMemPoolAttrReservedMemCurrent (getDeviceStats). So the
 * segments shown here (the walk, and the decisions a recording sees) are in those terms: each
 * live allocation is a segment of its own, the memory the pool handed out, and the rest of
 * the pool's reserve, held but unused, is one free segment, made again whenever the rest
 * changes. The segments add up to the pool's reserve after every call, so an exported
 * snapshot's segment timeline peaks where reserved_bytes did (summary.csv's
 * peak_reserved_bytes). The driver does not say where that rest lies; it is put above every
 * allocation made so far, where no block can be. Only a recording sees the rest's decisions,
 * so that a run nobody records asks the driver nothing more.
 *
 * Note [Refusals]: PyTorch's mallocAsync (c10/cuda/CUDAMallocAsyncAllocator.cpp, read at
 * pytorch/pytorch 0345947; the backend of backend:cudaMallocAsync) turns a
 * cudaErrorMemoryAllocation from cudaMallocAsync, or a request past the memory fraction's
 * limit, straight into an OutOfMemoryError: it clears CUDA's error state and asks
 * cudaMemGetInfo for the message, but neither synchronises nor trims the pool nor tries
 * again. Only emptyCache (cudaDeviceSynchronize, cudaMemPoolTrimTo 0) trims, and the caller
 * decides whether to call it. So a refused request ends the run here, with no retry; whatever
 * the driver does inside cudaMallocAsync (on the simulated card: remapping the pool's empty
 * chunks) has already been tried.
 */
#include "strategies/async.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/base/hashmap.h"
#include "kernels/base/units.h"

typedef struct async_s {
  ab_strategy_t base;
  ab_map_t live;       /* address -> (bytes, stream), so that destroy can return everything */
  uint64_t live_bytes; /* their bytes */
  ab_dptr_t top;       /* the highest end of an allocation so far: where the rest goes */
  ab_dptr_t rest_at;   /* the rest of the reserve as the recording last saw it; 0: none */
  uint64_t rest_bytes;
} async_t;

/* Live entries keep the stream in the top byte: bytes stay below 2^56. */
#define STREAM_SHIFT 56

static ab_status async_create(ab_device_t *dev, const char *conf, ab_strategy_t **out, ab_diag_t *diag) {
  ab_kvlist_t opts;
  AB_TRY(ab_kv_parse("-c", conf, ':', &opts, diag));
  uint64_t threshold = UINT64_MAX;
  ab_kv_t *kv = ab_kv_get(&opts, "release_threshold");
  if (kv && !(kv->val_len == 3 && memcmp(kv->val, "max", 3) == 0)) AB_TRY(ab_kv_get_size(&opts, "release_threshold", &threshold, diag));
  AB_TRY(ab_kv_finish(&opts, "release_threshold", diag));
  ab_status st = ab_device_pool_configure(dev, threshold);
  if (st != AB_OK) return ab_diag_set(diag, st, "async: %s", dev->diag.msg);
  async_t *a = calloc(1, sizeof *a);
  if (a == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  a->base.ops = &ab_async_ops;
  a->base.dev = dev;
  ab_map_init(&a->live);
  *out = &a->base;
  return AB_OK;
}

/* ---- the rest of the reserve (Note [The pool's reserve as segments]) ----------------------- */

/* Where the rest goes and how much it is now: the reserve beyond the live bytes. */
static void rest_now(async_t *a, ab_dptr_t *at, uint64_t *bytes) {
  uint64_t reserved = 0, peak = 0;
  *bytes = 0;
  if (ab_device_pool_reserved(a->base.dev, &reserved, &peak) == AB_OK && reserved > a->live_bytes)
    *bytes = reserved - a->live_bytes;
  *at = (a->top + AB_GRANULE_BYTES - 1) / AB_GRANULE_BYTES * AB_GRANULE_BYTES;
}

/* Gives the recorded rest back when it is no longer the rest; first in a call, so that the
 * segments never add up to more than the pool holds. */
static void rest_drop(async_t *a) {
  if (a->base.observe == NULL || a->rest_at == 0) return;
  ab_dptr_t at;
  uint64_t bytes;
  rest_now(a, &at, &bytes);
  if (at == a->rest_at && bytes == a->rest_bytes) return;
  ab_strategy_segment(&a->base, AB_TR_SEGMENT_FREE, a->rest_at, a->rest_bytes, 0);
  a->rest_at = 0;
  a->rest_bytes = 0;
}

/* Records the rest as it is now, when it is not recorded already; last in a call. */
static void rest_make(async_t *a) {
  if (a->base.observe == NULL) return;
  rest_drop(a);
  if (a->rest_at) return; /* unchanged */
  rest_now(a, &a->rest_at, &a->rest_bytes);
  if (a->rest_bytes == 0) {
    a->rest_at = 0;
    return;
  }
  ab_strategy_segment(&a->base, AB_TR_SEGMENT_ALLOC, a->rest_at, a->rest_bytes, 0);
}

static ab_status trim_all(ab_strategy_t *s) {
  AB_TRY(ab_device_synchronize(s->dev));
  ab_status st = ab_device_pool_trim(s->dev, 0);
  rest_make((async_t *)s);
  return st;
}

static ab_status async_alloc(ab_strategy_t *s, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  async_t *a = (async_t *)s;
  if (bytes >> STREAM_SHIFT) return AB_ERR_OOM;
  /* Policy 2: no retry after a refusal (Note [Refusals]). */
  ab_status st = ab_device_malloc_async(s->dev, bytes, stream, out);
  if (st != AB_OK) {
    rest_make(a); /* a refusal may have trimmed the pool */
    return st;
  }
  if (ab_map_put(&a->live, *out, (uint64_t)stream << STREAM_SHIFT | bytes) != AB_OK) {
    ab_device_free_async(s->dev, *out, bytes, stream);
    return AB_ERR_INTERNAL;
  }
  s->stats.num_device_alloc++;
  ab_gauge_add(&s->stats.requested_bytes, (int64_t)bytes);
  ab_gauge_add(&s->stats.allocated_bytes, (int64_t)bytes);
  a->live_bytes += bytes;
  if (*out + bytes > a->top) a->top = *out + bytes;
  rest_drop(a);
  ab_strategy_segment(s, AB_TR_SEGMENT_ALLOC, *out, bytes, stream);
  rest_make(a);
  return AB_OK;
}

static ab_status async_free(ab_strategy_t *s, ab_dptr_t p, uint64_t bytes, unsigned stream) {
  async_t *a = (async_t *)s;
  AB_TRY(ab_device_free_async(s->dev, p, bytes, stream));
  ab_strategy_segment(s, AB_TR_SEGMENT_FREE, p, bytes, stream);
  ab_map_take(&a->live, p, NULL);
  a->live_bytes -= bytes;
  rest_make(a);
  s->stats.num_device_free++;
  ab_gauge_sub(&s->stats.requested_bytes, (int64_t)bytes);
  ab_gauge_sub(&s->stats.allocated_bytes, (int64_t)bytes);
  return AB_OK;
}

static void async_refresh_stats(ab_strategy_t *s) {
  uint64_t current = 0, peak = 0;
  if (ab_device_pool_reserved(s->dev, &current, &peak) != AB_OK) return;
  s->stats.reserved_bytes.current = (int64_t)current;
  if ((int64_t)peak > s->stats.reserved_bytes.peak) s->stats.reserved_bytes.peak = (int64_t)peak;
}

static void decode(uint64_t val, uint64_t *bytes, unsigned *stream) {
  *bytes = val & ((1ULL << STREAM_SHIFT) - 1);
  *stream = (unsigned)(val >> STREAM_SHIFT);
}

typedef struct walk_s {
  ab_segment_fn fn;
  void *ctx;
  bool stopped;
} walk_t;

static int walk_one(void *ctx, const ab_segment_info_t *seg) {
  walk_t *w = ctx;
  return w->stopped = w->fn(w->ctx, seg) != 0;
}

/* Each live allocation as a segment of its own, then the rest of the pool's reserve as one
 * free segment above them (Note [The pool's reserve as segments]). */
static ab_status async_walk(ab_strategy_t *s, ab_segment_fn fn, void *ctx) {
  async_t *a = (async_t *)s;
  walk_t w = {fn, ctx, false};
  AB_TRY(ab_strategy_walk_map(&a->live, "async", decode, walk_one, &w));
  ab_dptr_t at;
  uint64_t bytes;
  rest_now(a, &at, &bytes);
  if (w.stopped || bytes == 0) return AB_OK;
  ab_block_info_t block = {at, bytes, 0, AB_BLOCK_FREE};
  ab_segment_info_t seg = {at, bytes, 0, "async", false, &block, 1, 0};
  fn(ctx, &seg);
  return AB_OK;
}

/* Every live allocation is one malloc_async; requested and allocated bytes are their bytes,
 * and the pool holds at least as much. */
static ab_status async_check(ab_strategy_t *s, ab_diag_t *diag) {
  async_t *a = (async_t *)s;
  ab_walk_sums_t sum;
  AB_TRY(ab_strategy_check_walk(s, &sum, diag));
  const ab_stats_t *st = &s->stats;
  if (sum.segments - (sum.free > 0) != a->live.n || st->num_device_alloc - st->num_device_free != a->live.n)
    return ab_diag_set(diag, AB_ERR_INTERNAL,
                       "async: %llu live allocations, %llu walked, %llu device allocations not freed",
                       (unsigned long long)a->live.n, (unsigned long long)sum.segments,
                       (unsigned long long)(st->num_device_alloc - st->num_device_free));
  if ((uint64_t)st->requested_bytes.current != sum.allocated || (uint64_t)st->allocated_bytes.current != sum.allocated)
    return ab_diag_set(diag, AB_ERR_INTERNAL,
                       "async: stats say %lld requested, %lld allocated; the live allocations sum to %llu",
                       (long long)st->requested_bytes.current, (long long)st->allocated_bytes.current,
                       (unsigned long long)sum.allocated);
  uint64_t reserved = 0, peak = 0;
  if (ab_device_pool_reserved(s->dev, &reserved, &peak) == AB_OK && reserved < sum.allocated)
    return ab_diag_set(diag, AB_ERR_INTERNAL, "async: the pool holds %llu bytes, less than the %llu bytes live",
                       (unsigned long long)reserved, (unsigned long long)sum.allocated);
  return AB_OK;
}

/* The pool's peak is the driver's high-water mark: it starts again with the strategy's. */
static void async_reset_peaks(ab_strategy_t *s) { ab_device_pool_reset_peak(s->dev); }

/* A synchronisation trims the pool to its release threshold. */
static ab_status async_synchronize(ab_strategy_t *s) {
  ab_status st = ab_device_synchronize(s->dev);
  rest_make((async_t *)s);
  return st;
}

static void async_destroy(ab_strategy_t *s) {
  async_t *a = (async_t *)s;
  for (size_t i = 0; i < a->live.cap; i++)
    if (a->live.slots[i].key) {
      uint64_t v = a->live.slots[i].val;
      ab_device_free_async(s->dev, a->live.slots[i].key, v & ((1ULL << STREAM_SHIFT) - 1), (unsigned)(v >> STREAM_SHIFT));
    }
  trim_all(s);
  ab_map_free(&a->live);
  free(a);
}

const ab_strategy_ops_t ab_async_ops = {
    .name = "async",
    .address_blind = true,
    .create = async_create,
    .destroy = async_destroy,
    .alloc = async_alloc,
    .free = async_free,
    .empty_cache = trim_all,
    .synchronize = async_synchronize,
    .walk = async_walk,
    .check = async_check,
    .refresh_stats = async_refresh_stats,
    .reset_peaks = async_reset_peaks,
};
