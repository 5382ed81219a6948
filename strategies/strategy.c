#include "strategies/strategy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/units.h"

void ab_strategy_observe(ab_strategy_t *s, ab_segment_observer_fn fn, void *ctx) {
  s->observe = fn;
  s->observe_ctx = ctx;
}

void ab_strategy_destroy(ab_strategy_t *s) {
  if (s) s->ops->destroy(s);
}

ab_status ab_strategy_alloc(ab_strategy_t *s, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  if (bytes == 0 || out == NULL || stream >= AB_MAX_STREAMS)
    return ab_diag_set(&s->dev->diag, AB_ERR_INVALID, "%s: alloc of %llu bytes on stream %u", s->ops->name,
                       (unsigned long long)bytes, stream);
  /* An OOM is counted here, once, whatever the strategy tried before giving up (RMM counts
   * likewise in device_memory_resource::allocate, around do_allocate). */
  ab_status st = s->ops->alloc(s, bytes, stream, out);
  if (st == AB_ERR_OOM) s->stats.num_ooms++;
  return st;
}

ab_status ab_strategy_free(ab_strategy_t *s, ab_dptr_t p, uint64_t bytes, unsigned stream) {
  if (p == 0 || bytes == 0 || stream >= AB_MAX_STREAMS)
    return ab_diag_set(&s->dev->diag, AB_ERR_INVALID, "%s: free of 0x%llx (%llu bytes) on stream %u", s->ops->name,
                       (unsigned long long)p, (unsigned long long)bytes, stream);
  return s->ops->free(s, p, bytes, stream);
}

/* Without the two halves, the memory stays with the user until the free completes. */
ab_status ab_strategy_free_request(ab_strategy_t *s, ab_dptr_t p, uint64_t bytes, unsigned stream) {
  if (s->ops->free_request == NULL) return AB_OK;
  return s->ops->free_request(s, p, bytes, stream);
}

ab_status ab_strategy_free_complete(ab_strategy_t *s, ab_dptr_t p, uint64_t bytes, unsigned stream) {
  if (s->ops->free_complete == NULL) return ab_strategy_free(s, p, bytes, stream);
  return s->ops->free_complete(s, p, bytes, stream);
}

ab_status ab_strategy_empty_cache(ab_strategy_t *s) {
  return s->ops->empty_cache ? s->ops->empty_cache(s) : AB_OK;
}

ab_status ab_strategy_synchronize(ab_strategy_t *s) {
  return s->ops->synchronize ? s->ops->synchronize(s) : ab_device_synchronize(s->dev);
}

ab_status ab_strategy_walk(ab_strategy_t *s, ab_segment_fn fn, void *ctx) {
  if (s->ops->walk == NULL)
    return ab_diag_set(&s->dev->diag, AB_ERR_INVALID, "%s has no segment walk", s->ops->name);
  return s->ops->walk(s, fn, ctx);
}

ab_status ab_strategy_check(ab_strategy_t *s, ab_diag_t *diag) {
  AB_TRY(ab_stats_check(&s->stats, diag));
  return s->ops->check ? s->ops->check(s, diag) : AB_OK;
}

bool ab_strategy_take_cap(ab_strategy_t *s, uint64_t cap) {
  if (s->ops->take_cap == NULL || cap == 0 || cap < s->cap_lo || cap > s->cap_hi) return false;
  s->ops->take_cap(s, cap);
  return true;
}

ab_status ab_strategy_plan(ab_strategy_t *s, const ab_lifetime_t *lt, size_t n, ab_diag_t *diag) {
  return s->ops->plan ? s->ops->plan(s, lt, n, diag) : AB_OK;
}

ab_status ab_strategy_pool(ab_strategy_t *s, ab_pool_op_t op, unsigned pool, unsigned stream, unsigned flags) {
  if (pool == 0 || (unsigned)op >= AB_POOL_OPS || (flags & ~AB_POOL_FLAGS))
    return ab_diag_set(&s->dev->diag, AB_ERR_INVALID, "pool call %u on pool %u with flags %u is not valid", (unsigned)op,
                       pool, flags);
  return s->ops->pool ? s->ops->pool(s, op, pool, stream, flags) : AB_OK;
}

void ab_strategy_reset_peaks(ab_strategy_t *s) {
  ab_stats_reset_peaks(&s->stats);
  ab_device_footprint_reset_peak(s->dev);
  if (s->ops->reset_peaks) s->ops->reset_peaks(s);
}

void ab_strategy_stats(ab_strategy_t *s, ab_stats_t *out) {
  if (s->ops->refresh_stats) s->ops->refresh_stats(s);
  /* After refresh_stats, so that a wrapper copying its inner strategy's stats still reports
   * the device's figure. */
  s->stats.footprint_bytes = (ab_gauge_t){(int64_t)s->dev->footprint_bytes, (int64_t)s->dev->footprint_peak};
  *out = s->stats;
}

typedef struct stat_lookup_s {
  const char *name;
  int64_t value;
  bool found;
} stat_lookup_t;

static void find_stat(void *ctx, const char *name, int64_t value) {
  stat_lookup_t *l = ctx;
  if (!l->found && strcmp(name, l->name) == 0) l->value = value, l->found = true;
}

bool ab_strategy_memory_stat(ab_strategy_t *s, const char *name, int64_t *value) {
  stat_lookup_t l = {name, 0, false};
  if (s->ops->memory_stats) s->ops->memory_stats(s, find_stat, &l);
  if (l.found) *value = l.value;
  return l.found;
}

void ab_strategy_plan_stats(ab_strategy_t *s, ab_plan_stats_t *out) {
  *out = (ab_plan_stats_t){0};
  out->has = ab_strategy_memory_stat(s, "plan.hits", &out->hits) && ab_strategy_memory_stat(s, "plan.misses", &out->misses);
  if (!out->has) out->hits = out->misses = 0;
  else if (!ab_strategy_memory_stat(s, "plan.region_bytes", &out->bytes)) out->bytes = 0;
}

uint64_t ab_strategy_device_bytes(ab_strategy_t *s, uint64_t bytes, unsigned stream) {
  return s->ops->device_bytes ? s->ops->device_bytes(s, bytes, stream) : bytes;
}

void ab_strategy_describe_oom(ab_strategy_t *s, uint64_t bytes, unsigned stream, char *buf, size_t size) {
  if (s->ops->describe_oom) {
    s->ops->describe_oom(s, bytes, stream, buf, size);
    return;
  }
  char req[32], cap[32], alloc[32], unalloc[32];
  ab_stats_t st;
  ab_strategy_stats(s, &st);
  uint64_t limit = s->dev->budget_bytes ? s->dev->budget_bytes : s->dev->total_bytes;
  int64_t gap = st.reserved_bytes.current - st.allocated_bytes.current;
  snprintf(buf, size,
           "out of memory: tried to allocate %s on %s with %s %s; %s is allocated by %s and %s is reserved but unallocated",
           ab_format_bytes(bytes, req, sizeof req), s->dev->name, ab_format_bytes(limit, cap, sizeof cap),
           s->dev->budget_bytes ? "allowed" : "in total", ab_format_bytes((uint64_t)st.allocated_bytes.current, alloc, sizeof alloc),
           s->ops->name, ab_format_bytes(gap > 0 ? (uint64_t)gap : 0, unalloc, sizeof unalloc));
}

/* ---- for implementations -------------------------------------------------------------- */

static int by_address(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

ab_status ab_strategy_walk_map(const ab_map_t *live, const char *pool,
                               void (*decode)(uint64_t val, uint64_t *bytes, unsigned *stream), ab_segment_fn fn,
                               void *ctx) {
  uint64_t *addrs = malloc((live->n + 1) * sizeof *addrs);
  if (addrs == NULL) return AB_ERR_INTERNAL;
  size_t n = 0;
  for (size_t i = 0; i < live->cap; i++)
    if (live->slots[i].key) addrs[n++] = live->slots[i].key;
  qsort(addrs, n, sizeof *addrs, by_address);
  for (size_t i = 0; i < n; i++) {
    uint64_t val = 0, bytes = 0;
    unsigned stream = 0;
    ab_map_get(live, addrs[i], &val);
    decode(val, &bytes, &stream);
    ab_block_info_t block = {addrs[i], bytes, bytes, AB_BLOCK_ALLOCATED};
    ab_segment_info_t seg = {addrs[i], bytes, stream, pool, false, &block, 1, 0};
    if (fn(ctx, &seg)) break;
  }
  free(addrs);
  return AB_OK;
}

typedef struct walk_check_s {
  const char *name;    /* the strategy's */
  ab_walk_sums_t *sums;
  ab_dptr_t end;       /* where the previous segment ended */
  ab_status st;
  ab_diag_t *diag;
} walk_check_t;

static int check_segment(void *ctx, const ab_segment_info_t *seg) {
  walk_check_t *w = ctx;
  unsigned long long base = seg->base;
  if (w->sums->segments && seg->base < w->end) {
    w->st = ab_diag_set(w->diag, AB_ERR_INTERNAL,
                        "%s: segment 0x%llx starts before the segment before it ends (at 0x%llx): out of order or "
                        "overlapping",
                        w->name, base, (unsigned long long)w->end);
    return 1;
  }
  ab_dptr_t at = seg->base;
  uint64_t mapped = 0;
  for (size_t i = 0; i < seg->nblocks; i++) {
    const ab_block_info_t *b = &seg->blocks[i];
    bool live = b->state == AB_BLOCK_ALLOCATED || b->state == AB_BLOCK_PENDING_FREE;
    const char *broken = b->addr != at                   ? "does not start where the block before ended"
                         : b->bytes == 0                  ? "is empty"
                         : b->addr + b->bytes < b->addr   ? "wraps around the address space"
                         : live && b->requested > b->bytes ? "holds a request larger than itself"
                                                           : NULL;
    if (broken) {
      w->st = ab_diag_set(w->diag, AB_ERR_INTERNAL, "%s: segment 0x%llx: block %zu at 0x%llx (%llu bytes) %s", w->name,
                          base, i, (unsigned long long)b->addr, (unsigned long long)b->bytes, broken);
      return 1;
    }
    at = b->addr + b->bytes;
    if (b->state != AB_BLOCK_UNMAPPED) mapped += b->bytes;
    switch (b->state) {
      case AB_BLOCK_ALLOCATED:
      case AB_BLOCK_PENDING_FREE:
        w->sums->live_blocks++;
        w->sums->allocated += b->bytes;
        w->sums->requested += b->requested;
        break;
      case AB_BLOCK_FREE: w->sums->free += b->bytes; break;
      case AB_BLOCK_UNMAPPED: break;
    }
  }
  if (seg->nblocks && mapped != seg->bytes) {
    w->st = ab_diag_set(w->diag, AB_ERR_INTERNAL, "%s: segment 0x%llx of %llu bytes holds %llu bytes of mapped blocks",
                        w->name, base, (unsigned long long)seg->bytes, (unsigned long long)mapped);
    return 1;
  }
  w->end = seg->nblocks ? at : seg->base + seg->bytes;
  w->sums->segments++;
  w->sums->reserved += seg->bytes;
  return 0;
}

ab_status ab_strategy_check_walk(ab_strategy_t *s, ab_walk_sums_t *sums, ab_diag_t *diag) {
  memset(sums, 0, sizeof *sums);
  if (s->ops->walk == NULL) return ab_diag_set(diag, AB_ERR_INVALID, "%s has no segment walk", s->ops->name);
  walk_check_t w = {s->ops->name, sums, 0, AB_OK, diag};
  ab_status st = s->ops->walk(s, check_segment, &w);
  if (st != AB_OK) return ab_diag_set(diag, st, "%s: the segment walk failed", s->ops->name);
  return w.st;
}
