/* oracle.c: an offline placement: the whole run known before it starts, every allocation
 * placed once in one region. Not the optimum and not the limit: Note [Offline placement].
 *
 * Policy:
 *   1. Before the run, the engine hands it every allocation's size and lifetime (Note
 *      [Plans], strategy.h). It places them all offline in one address range (dsa.h: greedy
 *      by size with best fit in time x address, and best fit in time order, the smaller
 *      kept), each rounded up to 512 bytes as PyTorch rounds, and keeps the most bytes live
 *      at once (the live peak, the lower bound) beside it.
 *   2. At the first planned allocation it makes one device allocation of the planned peak
 *      and holds it for the run; the k-th alloc call gets its planned offset in it. An OOM
 *      of that device allocation is the run's OOM.
 *   3. A call the plan did not foresee (no plan, the stream went another way, or its range
 *      is not free) is served online as raw serves it, one device allocation each, so the
 *      strategy stays correct whatever it is asked.
 *
 * Note [Offline placement]: placing known lifetimes in the least address space (dynamic
 * storage allocation) is NP-hard (Garey and Johnson, "Computers and Intractability", SR2),
 * so the region is an upper bound on the best placement, not the best. The lower bound is
 * the live peak: the most bytes live at once (ab_dsa_live_peak here, live_peak_bytes in
 * summary.csv), which no allocator that never moves memory can hold less than. The optimum
 * lies between the two; a strategy below oracle's region (split-limited fits ZeRO stage 3
 * in a smaller budget) is beating these heuristics, not a bound. Its distance to the live
 * peak is peak_reserved_bytes / live_peak_bytes of its run, and plan.region_bytes over
 * plan.lower_bound_bytes in its memory_stats.
 */
#include "strategies/planned/oracle.h"

#include <stdio.h>
#include <stdlib.h>

#include "kernels/base/clock.h"
#include "kernels/base/hashmap.h"
#include "kernels/base/units.h"
#include "strategies/common/free_ranges.h"
#include "strategies/planned/dsa.h"

#define ORACLE_ALIGN_BYTES 512

typedef struct oracle_s {
  ab_strategy_t base;
  uint64_t *offset;       /* per planned call: its offset in the region */
  uint64_t *bytes;        /* per planned call: the bytes the plan expects */
  size_t nplan;
  uint64_t region_bytes;  /* the planned peak */
  uint64_t lower_bound;   /* the most bytes the plan has live at once (rounded) */
  uint64_t plan_ns;       /* host time of the last plan */
  ab_dptr_t region;       /* 0 until the first planned allocation */
  ab_free_ranges_t space;       /* the region's free space: every planned take is checked */
  size_t calls;           /* alloc calls since the plan */
  uint64_t misses;        /* calls served online */
  uint64_t in_region;     /* live allocations in the region */
  ab_map_t live;          /* address -> requested << 1 | in the region */
  char unplanned[AB_DIAG_BYTES]; /* why the run has no plan; "" when it has one */
} oracle_t;

static uint64_t round_up(uint64_t bytes) { return (bytes + ORACLE_ALIGN_BYTES - 1) & ~(uint64_t)(ORACLE_ALIGN_BYTES - 1); }

static ab_status oracle_create(ab_device_t *dev, const char *conf, ab_strategy_t **out, ab_diag_t *diag) {
  ab_kvlist_t opts;
  AB_TRY(ab_kv_parse("-c", conf, ':', &opts, diag));
  AB_TRY(ab_kv_finish(&opts, "none", diag));
  oracle_t *o = calloc(1, sizeof *o);
  if (o == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  o->base.ops = &ab_oracle_ops;
  o->base.dev = dev;
  ab_free_ranges_init(&o->space);
  ab_map_init(&o->live);
  *out = &o->base;
  return AB_OK;
}

static void release_region(oracle_t *o) {
  ab_strategy_t *s = &o->base;
  if (o->region == 0) return;
  ab_device_free(s->dev, o->region, o->region_bytes);
  ab_strategy_segment(s, AB_TR_SEGMENT_FREE, o->region, o->region_bytes, 0);
  s->stats.num_device_free++;
  ab_gauge_sub(&s->stats.reserved_bytes, (int64_t)o->region_bytes);
  ab_free_ranges_clear(&o->space);
  o->region = 0;
}

static ab_status oracle_plan(ab_strategy_t *s, const ab_lifetime_t *lt, size_t n, ab_diag_t *diag) {
  oracle_t *o = (oracle_t *)s;
  if (o->in_region) return ab_diag_set(diag, AB_ERR_INVALID, "oracle: a new plan while planned allocations are live");
  release_region(o);
  free(o->offset), free(o->bytes);
  o->offset = o->bytes = NULL;
  o->nplan = o->calls = 0;
  o->region_bytes = o->lower_bound = 0;
  o->unplanned[0] = '\0';
  if (n == 0) return AB_OK;
  uint64_t t0 = ab_clock_ns();
  o->offset = malloc(n * sizeof *o->offset);
  o->bytes = malloc(n * sizeof *o->bytes);
  if (o->offset == NULL || o->bytes == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "oracle: out of host memory planning %zu allocations", n);
  ab_status st = ab_dsa_place(lt, n, ORACLE_ALIGN_BYTES, o->offset, &o->region_bytes);
  if (st == AB_ERR_OOM) {
    /* Sizes no address range holds together: no plan; every call is served online (policy
     * 3), where those sizes run out of memory, and the OOM says why there was no plan. */
    ab_diag_t why = {""};
    ab_dsa_refuse(&why, "oracle", lt, n);
    snprintf(o->unplanned, sizeof o->unplanned, "%s", why.msg);
    free(o->offset), free(o->bytes);
    o->offset = o->bytes = NULL;
    o->region_bytes = 0;
    return AB_OK;
  }
  if (st != AB_OK) return ab_diag_set(diag, AB_ERR_INTERNAL, "oracle: out of host memory planning %zu allocations", n);
  for (size_t i = 0; i < n; i++) o->bytes[i] = lt[i].bytes;
  o->nplan = n;
  o->lower_bound = ab_dsa_live_peak(lt, n, ORACLE_ALIGN_BYTES);
  o->plan_ns = ab_clock_ns() - t0;
  return AB_OK;
}

static ab_status take_region(oracle_t *o) {
  ab_strategy_t *s = &o->base;
  ab_status st = ab_device_malloc(s->dev, o->region_bytes, &o->region);
  if (st != AB_OK) {
    o->region = 0;
    return st;
  }
  if (ab_free_ranges_grow(&o->space, o->region_bytes) != AB_OK) {
    ab_device_free(s->dev, o->region, o->region_bytes);
    o->region = 0;
    return AB_ERR_INTERNAL;
  }
  s->stats.num_device_alloc++;
  ab_gauge_add(&s->stats.reserved_bytes, (int64_t)o->region_bytes);
  ab_strategy_segment(s, AB_TR_SEGMENT_ALLOC, o->region, o->region_bytes, 0);
  return AB_OK;
}

static ab_status oracle_alloc(ab_strategy_t *s, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  oracle_t *o = (oracle_t *)s;
  size_t k = o->calls++;
  /* No device holds 2^56 bytes; larger sizes would wrap in the rounding below. */
  if (bytes >> 56) return AB_ERR_OOM;
  if (k < o->nplan && o->bytes[k] == bytes) {
    if (o->region == 0) {
      ab_status st = take_region(o);
      if (st != AB_OK) return st;
    }
    uint64_t size = round_up(bytes);
    ab_status st = ab_free_ranges_take_at(&o->space, o->offset[k], size);
    if (st == AB_OK) {
      *out = o->region + o->offset[k];
      if (ab_map_put(&o->live, *out, bytes << 1 | 1) != AB_OK) {
        ab_free_ranges_give(&o->space, o->offset[k], size);
        return AB_ERR_INTERNAL;
      }
      o->in_region++;
      ab_gauge_add(&s->stats.requested_bytes, (int64_t)bytes);
      ab_gauge_add(&s->stats.allocated_bytes, (int64_t)size);
      return AB_OK;
    }
    if (st != AB_ERR_OOM) return st;
  }
  /* Policy 3: what the plan did not foresee, one device allocation each. */
  o->misses++;
  ab_status st = ab_device_malloc(s->dev, bytes, out);
  if (st != AB_OK) return st;
  if (ab_map_put(&o->live, *out, bytes << 1) != AB_OK) {
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

static ab_status oracle_free(ab_strategy_t *s, ab_dptr_t p, uint64_t bytes, unsigned stream) {
  oracle_t *o = (oracle_t *)s;
  uint64_t v;
  if (!ab_map_get(&o->live, p, &v) || v >> 1 != bytes)
    return ab_diag_set(&s->dev->diag, AB_ERR_INVALID, "oracle: free of 0x%llx (%llu bytes), which it did not hand out",
                       (unsigned long long)p, (unsigned long long)bytes);
  if (v & 1) {
    AB_TRY(ab_free_ranges_give(&o->space, p - o->region, round_up(bytes)));
    o->in_region--;
    ab_gauge_sub(&s->stats.allocated_bytes, (int64_t)round_up(bytes));
  } else {
    AB_TRY(ab_device_free(s->dev, p, bytes));
    ab_strategy_segment(s, AB_TR_SEGMENT_FREE, p, bytes, stream);
    s->stats.num_device_free++;
    ab_gauge_sub(&s->stats.allocated_bytes, (int64_t)bytes);
    ab_gauge_sub(&s->stats.reserved_bytes, (int64_t)bytes);
  }
  ab_map_take(&o->live, p, NULL);
  ab_gauge_sub(&s->stats.requested_bytes, (int64_t)bytes);
  return AB_OK;
}

/* The region goes back when nothing lives in it; the next planned call takes it again. */
static ab_status oracle_empty_cache(ab_strategy_t *s) {
  oracle_t *o = (oracle_t *)s;
  if (o->in_region == 0) release_region(o);
  return AB_OK;
}

static ab_status oracle_walk(ab_strategy_t *s, ab_segment_fn fn, void *ctx) {
  oracle_t *o = (oracle_t *)s;
  return ab_free_ranges_walk(&o->space, o->region, &o->live, ORACLE_ALIGN_BYTES, "plan", false, fn, ctx);
}

/* The walk adds up to the statistics, and the region's free space to what its blocks leave. */
static ab_status oracle_check(ab_strategy_t *s, ab_diag_t *diag) {
  oracle_t *o = (oracle_t *)s;
  ab_walk_sums_t sum;
  AB_TRY(ab_strategy_check_walk(s, &sum, diag));
  const ab_stats_t *st = &s->stats;
  if (sum.live_blocks != o->live.n || (uint64_t)st->allocated_bytes.current != sum.allocated ||
      (uint64_t)st->requested_bytes.current != sum.requested || (uint64_t)st->reserved_bytes.current != sum.reserved)
    return ab_diag_set(diag, AB_ERR_INTERNAL,
                       "oracle: stats say %lld requested, %lld allocated, %lld reserved; the walk finds %llu live "
                       "blocks of %llu live, %llu requested, %llu allocated, %llu reserved",
                       (long long)st->requested_bytes.current, (long long)st->allocated_bytes.current,
                       (long long)st->reserved_bytes.current, (unsigned long long)sum.live_blocks,
                       (unsigned long long)o->live.n, (unsigned long long)sum.requested,
                       (unsigned long long)sum.allocated, (unsigned long long)sum.reserved);
  if (sum.free != o->space.free_bytes)
    return ab_diag_set(diag, AB_ERR_INTERNAL, "oracle: the walk finds %llu free bytes in the region, the free ranges %llu",
                       (unsigned long long)sum.free, (unsigned long long)o->space.free_bytes);
  return AB_OK;
}

static void oracle_memory_stats(ab_strategy_t *s, ab_stat_fn fn, void *ctx) {
  oracle_t *o = (oracle_t *)s;
  fn(ctx, "plan.allocations", (int64_t)o->nplan);
  fn(ctx, "plan.region_bytes", (int64_t)o->region_bytes);
  fn(ctx, "plan.lower_bound_bytes", (int64_t)o->lower_bound);
  fn(ctx, "plan.hits", (int64_t)(o->calls - o->misses));
  fn(ctx, "plan.misses", (int64_t)o->misses);
  fn(ctx, "plan.ns", (int64_t)o->plan_ns);
}

/* The OOM in PyTorch's words, and why there was no plan when there was none. */
static void oracle_describe_oom(ab_strategy_t *s, uint64_t bytes, unsigned stream, char *buf, size_t size) {
  oracle_t *o = (oracle_t *)s;
  (void)stream;
  char req[32], cap[32], alloc[32];
  uint64_t limit = s->dev->budget_bytes ? s->dev->budget_bytes : s->dev->total_bytes;
  int n = snprintf(buf, size, "out of memory: tried to allocate %s on %s with %s %s; %s is allocated by oracle",
                   ab_format_bytes(bytes, req, sizeof req), s->dev->name, ab_format_bytes(limit, cap, sizeof cap),
                   s->dev->budget_bytes ? "allowed" : "in total",
                   ab_format_bytes((uint64_t)s->stats.allocated_bytes.current, alloc, sizeof alloc));
  if (o->unplanned[0] && n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, "; no plan: %s", o->unplanned);
}

static void oracle_destroy(ab_strategy_t *s) {
  oracle_t *o = (oracle_t *)s;
  for (size_t i = 0; i < o->live.cap; i++)
    if (o->live.slots[i].key && !(o->live.slots[i].val & 1)) ab_device_free(s->dev, o->live.slots[i].key, o->live.slots[i].val >> 1);
  if (o->region) ab_device_free(s->dev, o->region, o->region_bytes);
  ab_free_ranges_clear(&o->space);
  ab_map_free(&o->live);
  free(o->offset);
  free(o->bytes);
  free(o);
}

const ab_strategy_ops_t ab_oracle_ops = {
    .name = "oracle",
    .address_blind = true,
    .create = oracle_create,
    .destroy = oracle_destroy,
    .alloc = oracle_alloc,
    .free = oracle_free,
    .empty_cache = oracle_empty_cache,
    .walk = oracle_walk,
    .check = oracle_check,
    .memory_stats = oracle_memory_stats,
    .plan = oracle_plan,
    .describe_oom = oracle_describe_oom,
};
