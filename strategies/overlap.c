/* overlap.c: a strategy that is wrong on purpose: it sometimes hands out memory that a live
 * allocation still holds. It exists so that tests can prove --verify catches such an
 * allocator, on the simulated card and on a GPU; the registry hides it from lists and from
 * the benchmark matrix.
 *
 * Policy:
 *   1. Every request is one device allocation, as in raw,
 *   2. except every Nth one (every:N, default 4): when it fits in the most recent device
 *      allocation that is still live, at AB_OVERLAP_OFFSET_BYTES from its start, it is
 *      placed there, and the two live allocations share memory. The alias stays inside the
 *      device allocation, so writing it never leaves memory the strategy holds.
 *   3. An alias owns no device memory: freeing it only forgets it.
 * The segment walk shows every live allocation, aliases included, so the invariant check
 * (--check) catches the overlap too.
 */
#include "strategies/overlap.h"

#include <stdlib.h>

#include "kernels/base/hashmap.h"
#include "kernels/base/units.h"

/* Far enough in that the alias does not start where its host does. */
#define AB_OVERLAP_OFFSET_BYTES 512

typedef struct overlap_s {
  ab_strategy_t base;
  ab_map_t live;        /* address -> bytes << 1 | 1 for an alias */
  uint64_t every;       /* every Nth request may become an alias */
  uint64_t requests;    /* requests so far */
  ab_dptr_t host;       /* the most recent device allocation while it is live, else 0 */
  uint64_t host_bytes;
} overlap_t;

static ab_status overlap_create(ab_device_t *dev, const char *conf, ab_strategy_t **out, ab_diag_t *diag) {
  ab_kvlist_t opts;
  uint64_t every = 4;
  AB_TRY(ab_kv_parse("-c", conf, ':', &opts, diag));
  AB_TRY(ab_kv_get_u64(&opts, "every", 1, UINT32_MAX, &every, diag));
  AB_TRY(ab_kv_finish(&opts, "every", diag));
  overlap_t *o = calloc(1, sizeof *o);
  if (o == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  o->base.ops = &ab_overlap_ops;
  o->base.dev = dev;
  o->every = every;
  ab_map_init(&o->live);
  *out = &o->base;
  return AB_OK;
}

static ab_status overlap_alloc(ab_strategy_t *s, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  overlap_t *o = (overlap_t *)s;
  ab_dptr_t alias = o->host + AB_OVERLAP_OFFSET_BYTES;
  bool overlap = ++o->requests % o->every == 0 && o->host && o->host_bytes > AB_OVERLAP_OFFSET_BYTES &&
                 bytes <= o->host_bytes - AB_OVERLAP_OFFSET_BYTES && !ab_map_get(&o->live, alias, NULL);
  if (overlap) {
    AB_TRY(ab_map_put(&o->live, alias, bytes << 1 | 1));
    *out = alias;
  } else {
    ab_status st = ab_device_malloc(s->dev, bytes, out);
    if (st != AB_OK) return st;
    if (ab_map_put(&o->live, *out, bytes << 1) != AB_OK) {
      ab_device_free(s->dev, *out, bytes);
      return AB_ERR_INTERNAL;
    }
    o->host = *out;
    o->host_bytes = bytes;
    s->stats.num_device_alloc++;
    ab_gauge_add(&s->stats.reserved_bytes, (int64_t)bytes);
    ab_strategy_segment(s, AB_TR_SEGMENT_ALLOC, *out, bytes, stream);
  }
  ab_gauge_add(&s->stats.requested_bytes, (int64_t)bytes);
  ab_gauge_add(&s->stats.allocated_bytes, (int64_t)bytes);
  return AB_OK;
}

static ab_status overlap_free(ab_strategy_t *s, ab_dptr_t p, uint64_t bytes, unsigned stream) {
  overlap_t *o = (overlap_t *)s;
  uint64_t v;
  if (!ab_map_get(&o->live, p, &v) || v >> 1 != bytes)
    return ab_diag_set(&s->dev->diag, AB_ERR_INVALID, "overlap: free of 0x%llx (%llu bytes), which it did not hand out",
                       (unsigned long long)p, (unsigned long long)bytes);
  if (!(v & 1)) {
    AB_TRY(ab_device_free(s->dev, p, bytes));
    ab_strategy_segment(s, AB_TR_SEGMENT_FREE, p, bytes, stream);
    s->stats.num_device_free++;
    ab_gauge_sub(&s->stats.reserved_bytes, (int64_t)bytes);
    if (p == o->host) o->host = 0;
  }
  ab_map_take(&o->live, p, NULL);
  ab_gauge_sub(&s->stats.requested_bytes, (int64_t)bytes);
  ab_gauge_sub(&s->stats.allocated_bytes, (int64_t)bytes);
  return AB_OK;
}

static void decode(uint64_t val, uint64_t *bytes, unsigned *stream) {
  *bytes = val >> 1;
  *stream = 0;
}

static ab_status overlap_walk(ab_strategy_t *s, ab_segment_fn fn, void *ctx) {
  return ab_strategy_walk_map(&((overlap_t *)s)->live, "device", decode, fn, ctx);
}

static ab_status overlap_check(ab_strategy_t *s, ab_diag_t *diag) {
  ab_walk_sums_t sum;
  return ab_strategy_check_walk(s, &sum, diag);
}

static void overlap_destroy(ab_strategy_t *s) {
  overlap_t *o = (overlap_t *)s;
  for (size_t i = 0; i < o->live.cap; i++)
    if (o->live.slots[i].key && !(o->live.slots[i].val & 1)) ab_device_free(s->dev, o->live.slots[i].key, o->live.slots[i].val >> 1);
  ab_map_free(&o->live);
  free(o);
}

const ab_strategy_ops_t ab_overlap_ops = {
    .name = "overlap",
    .create = overlap_create,
    .destroy = overlap_destroy,
    .alloc = overlap_alloc,
    .free = overlap_free,
    .walk = overlap_walk,
    .check = overlap_check,
};
