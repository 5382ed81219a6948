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

#include "base/hashmap.h"
#include "base/units.h"

typedef struct async_s {
  ab_strategy_t base;
  ab_map_t live; /* address -> (bytes, stream), so that destroy can return everything */
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

static ab_status trim_all(ab_strategy_t *s) {
  AB_TRY(ab_device_synchronize(s->dev));
  return ab_device_pool_trim(s->dev, 0);
}

static ab_status async_alloc(ab_strategy_t *s, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  async_t *a = (async_t *)s;
  if (bytes >> STREAM_SHIFT) return AB_ERR_OOM;
  /* Policy 2: no retry after a refusal (Note [Refusals]). */
  ab_status st = ab_device_malloc_async(s->dev, bytes, stream, out);
  if (st != AB_OK) return st;
  if (ab_map_put(&a->live, *out, (uint64_t)stream << STREAM_SHIFT | bytes) != AB_OK) {
    ab_device_free_async(s->dev, *out, bytes, stream);
    return AB_ERR_INTERNAL;
  }
  s->stats.num_device_alloc++;
  ab_gauge_add(&s->stats.requested_bytes, (int64_t)bytes);
  ab_gauge_add(&s->stats.allocated_bytes, (int64_t)bytes);
  ab_strategy_segment(s, AB_TR_SEGMENT_ALLOC, *out, bytes, stream);
  return AB_OK;
}

static ab_status async_free(ab_strategy_t *s, ab_dptr_t p, uint64_t bytes, unsigned stream) {
  async_t *a = (async_t *)s;
  AB_TRY(ab_device_free_async(s->dev, p, bytes, stream));
  ab_strategy_segment(s, AB_TR_SEGMENT_FREE, p, bytes, stream);
  ab_map_take(&a->live, p, NULL);
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

/* Each live allocation as a segment of its own, as PyTorch's cudaMallocAsync backend shows
 * them in a snapshot; the pool's free memory is the driver's and is not walked. */
static ab_status async_walk(ab_strategy_t *s, ab_segment_fn fn, void *ctx) {
  return ab_strategy_walk_map(&((async_t *)s)->live, "async", decode, fn, ctx);
}

/* Every live allocation is one malloc_async; requested and allocated bytes are their bytes,
 * and the pool holds at least as much. */
static ab_status async_check(ab_strategy_t *s, ab_diag_t *diag) {
  async_t *a = (async_t *)s;
  ab_walk_sums_t sum;
  AB_TRY(ab_strategy_check_walk(s, &sum, diag));
  const ab_stats_t *st = &s->stats;
  if (sum.segments != a->live.n || st->num_device_alloc - st->num_device_free != a->live.n)
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

static ab_status async_synchronize(ab_strategy_t *s) { return ab_device_synchronize(s->dev); }

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
