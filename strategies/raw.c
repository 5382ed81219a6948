/* raw.c: one device allocation per request, the baseline every user knows.
 *
 * Policy:
 *   1. alloc asks the device for exactly the bytes requested (a cudaMalloc) and hands the
 *      pointer out; free gives them back (a cudaFree).
 *   2. Nothing is cached, rounded or split: allocated = reserved = requested bytes (the
 *      driver's own rounding inside cudaMalloc is invisible to the caller).
 *   3. An OOM from the device is final: there is nothing to release and retry.
 * Each live allocation is its own segment in the segment walk.
 */
#include "strategies/raw.h"

#include <stdlib.h>

#include "kernels/base/hashmap.h"
#include "kernels/base/units.h"

typedef struct raw_s {
  ab_strategy_t base;
  ab_map_t live; /* address -> bytes, for the segment walk */
} raw_t;

static ab_status raw_create(ab_device_t *dev, const char *conf, ab_strategy_t **out, ab_diag_t *diag) {
  ab_kvlist_t opts;
  AB_TRY(ab_kv_parse("-c", conf, ':', &opts, diag));
  AB_TRY(ab_kv_finish(&opts, "none", diag));
  raw_t *r = calloc(1, sizeof *r);
  if (r == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  r->base.ops = &ab_raw_ops;
  r->base.dev = dev;
  ab_map_init(&r->live);
  *out = &r->base;
  return AB_OK;
}

static ab_status raw_alloc(ab_strategy_t *s, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  raw_t *r = (raw_t *)s;
  ab_status st = ab_device_malloc(s->dev, bytes, out);
  if (st != AB_OK) return st;
  if (ab_map_put(&r->live, *out, bytes) != AB_OK) {
    ab_device_free(s->dev, *out, bytes);
    return AB_ERR_INTERNAL;
  }
  s->stats.num_device_alloc++;
  ab_gauge_add(&s->stats.requested_bytes, (int64_t)bytes);
  ab_gauge_add(&s->stats.allocated_bytes, (int64_t)bytes);
  ab_gauge_add(&s->stats.reserved_bytes, (int64_t)bytes);
  ab_strategy_segment(s, AB_TR_SEGMENT_ALLOC, *out, bytes, stream);
  return AB_OK;
}

static ab_status raw_free(ab_strategy_t *s, ab_dptr_t p, uint64_t bytes, unsigned stream) {
  raw_t *r = (raw_t *)s;
  AB_TRY(ab_device_free(s->dev, p, bytes));
  ab_strategy_segment(s, AB_TR_SEGMENT_FREE, p, bytes, stream);
  ab_map_take(&r->live, p, NULL);
  s->stats.num_device_free++;
  ab_gauge_sub(&s->stats.requested_bytes, (int64_t)bytes);
  ab_gauge_sub(&s->stats.allocated_bytes, (int64_t)bytes);
  ab_gauge_sub(&s->stats.reserved_bytes, (int64_t)bytes);
  return AB_OK;
}

static void decode(uint64_t val, uint64_t *bytes, unsigned *stream) {
  *bytes = val;
  *stream = 0;
}

static ab_status raw_walk(ab_strategy_t *s, ab_segment_fn fn, void *ctx) {
  return ab_strategy_walk_map(&((raw_t *)s)->live, "device", decode, fn, ctx);
}

/* Every live allocation is one device allocation, and the three gauges are its bytes. */
static ab_status raw_check(ab_strategy_t *s, ab_diag_t *diag) {
  raw_t *r = (raw_t *)s;
  ab_walk_sums_t sum;
  AB_TRY(ab_strategy_check_walk(s, &sum, diag));
  const ab_stats_t *st = &s->stats;
  if (sum.segments != r->live.n || st->num_device_alloc - st->num_device_free != r->live.n)
    return ab_diag_set(diag, AB_ERR_INTERNAL,
                       "raw: %llu live allocations, %llu walked, %llu device allocations not freed",
                       (unsigned long long)r->live.n, (unsigned long long)sum.segments,
                       (unsigned long long)(st->num_device_alloc - st->num_device_free));
  if ((uint64_t)st->requested_bytes.current != sum.allocated ||
      (uint64_t)st->allocated_bytes.current != sum.allocated || (uint64_t)st->reserved_bytes.current != sum.reserved)
    return ab_diag_set(diag, AB_ERR_INTERNAL,
                       "raw: stats say %lld requested, %lld allocated, %lld reserved; the live allocations sum to %llu",
                       (long long)st->requested_bytes.current, (long long)st->allocated_bytes.current,
                       (long long)st->reserved_bytes.current, (unsigned long long)sum.allocated);
  return AB_OK;
}

static void raw_destroy(ab_strategy_t *s) {
  raw_t *r = (raw_t *)s;
  for (size_t i = 0; i < r->live.cap; i++)
    if (r->live.slots[i].key) ab_device_free(s->dev, r->live.slots[i].key, r->live.slots[i].val);
  ab_map_free(&r->live);
  free(r);
}

const ab_strategy_ops_t ab_raw_ops = {
    .name = "raw",
    .address_blind = true,
    .create = raw_create,
    .destroy = raw_destroy,
    .alloc = raw_alloc,
    .free = raw_free,
    .walk = raw_walk,
    .check = raw_check,
};
