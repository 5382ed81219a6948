/* planned.c: STAlloc's approach (EuroSys'26, arXiv 2507.16274; its code: infinigence/STAlloc,
 * reference/peers.md §5.2): plan the allocations a profile has seen at fixed offsets of one
 * static region, serve the rest online.
 *
 * Policy:
 *   1. Profile (STAlloc's Trace mode, Allocator/trace.cpp): the allocations of the first profile_steps
 *      training steps, with what came before the first step; a stream without steps gives
 *      its first profile_share of the allocations. Lifetimes that outlast the profile are
 *      static to the planner: it sees no free after the profile (Note [Plans]).
 *   2. Plan (its Synthesizer): the profiled allocations are placed offline in one
 *      region by the spatio-temporal packer of dsa.h, 512-byte aligned.
 *   3. Serve (the static allocator, Allocator/StaticAllocator.hpp): a profiled call gets its
 *      planned offset; in a later step, the j-th call gets the offset of the j-th call of
 *      the last profiled step when its size matches (the plan of one steady iteration,
 *      replayed every iteration), and the step comes from the training loop at run time
 *      (STAlloc's iteration hook), the one thing it reads past the profile. A planned
 *      offset whose range is taken is refused (STALLOC_STATIC_FALLBACK's overlap check).
 *   4. Everything else (a size the plan did not foresee: dynamic shapes, routing) is
 *      served online, best fit in the region's free ranges (the online dynamic manager,
 *      OnlineDynamicManager.hpp); when none holds it, the region grows at its top by
 *      mapping granules, where STAlloc falls back to PyTorch's caching allocator.
 * The region is one reserved address range, mapped from its start: the plan's peak at the
 * first allocation, then what growth asks for; nothing is unmapped before the end.
 */
#include "planned.h"

#include <stdlib.h>

#include "arena.h"
#include "dsa.h"
#include "hashmap.h"
#include "units.h"

#define PLANNED_ALIGN_BYTES 512

typedef struct map_range_s {
  ab_dptr_t at;
  uint64_t bytes;
} map_range_t;

typedef struct planned_s {
  ab_strategy_t base;
  uint64_t profile_steps;
  double profile_share;
  /* the plan */
  uint64_t *offset;      /* per profiled call: its planned offset */
  uint64_t *bytes;       /* per profiled call: its size */
  size_t nprofile;       /* calls 0 .. nprofile-1 were profiled */
  size_t tmpl_first;     /* the last profiled step is calls tmpl_first .. nprofile-1 */
  uint32_t *step;        /* per call of the run: its step, as the training loop reports it */
  size_t ncalls;
  uint32_t last_step;    /* the last profiled step; UINT32_MAX: no steps, no template */
  uint64_t plan_bytes;   /* the planned peak */
  /* the region */
  ab_dptr_t region;      /* the reservation; 0 before the first allocation */
  uint64_t va_bytes;
  map_range_t *maps;     /* each map call, to unmap them one by one at the end */
  size_t nmaps, capmaps;
  ab_arena_t arena;      /* the mapped part's free space */
  /* serving */
  size_t calls;          /* alloc calls since the plan */
  uint32_t cur_step;
  size_t step_first;     /* the first call of cur_step */
  uint64_t hits, misses; /* calls served at a planned offset / online */
  ab_map_t live;         /* address -> requested << 1 | 1 */
} planned_t;

static uint64_t align_up(uint64_t bytes, uint64_t unit) { return (bytes + unit - 1) / unit * unit; }

static ab_status planned_create(ab_device_t *dev, const char *conf, ab_strategy_t **out, ab_diag_t *diag) {
  ab_kvlist_t opts;
  uint64_t steps = 2;
  double share = 0.25;
  AB_TRY(ab_kv_parse("-c", conf, ':', &opts, diag));
  AB_TRY(ab_kv_get_u64(&opts, "profile_steps", 1, UINT32_MAX - 1, &steps, diag));
  AB_TRY(ab_kv_get_double(&opts, "profile_share", 0.0, 1.0, &share, diag));
  AB_TRY(ab_kv_finish(&opts, "profile_steps, profile_share", diag));
  planned_t *p = calloc(1, sizeof *p);
  if (p == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  p->base.ops = &ab_planned_ops;
  p->base.dev = dev;
  p->profile_steps = steps;
  p->profile_share = share;
  p->last_step = UINT32_MAX;
  ab_arena_init(&p->arena);
  ab_map_init(&p->live);
  *out = &p->base;
  return AB_OK;
}

static void release_region(planned_t *p) {
  ab_strategy_t *s = &p->base;
  if (p->region == 0) return;
  for (size_t i = p->nmaps; i-- > 0;) {
    ab_device_unmap(s->dev, p->maps[i].at, p->maps[i].bytes);
    ab_strategy_segment(s, AB_TR_SEGMENT_UNMAP, p->maps[i].at, p->maps[i].bytes, 0);
    s->stats.num_device_free++;
    ab_gauge_sub(&s->stats.reserved_bytes, (int64_t)p->maps[i].bytes);
  }
  ab_device_va_release(s->dev, p->region, p->va_bytes);
  p->nmaps = 0;
  p->region = 0;
  ab_arena_clear(&p->arena);
}

static void drop_plan(planned_t *p) {
  free(p->offset), free(p->bytes), free(p->step);
  p->offset = p->bytes = NULL;
  p->step = NULL;
  p->nprofile = p->ncalls = p->tmpl_first = 0;
  p->last_step = UINT32_MAX;
  p->plan_bytes = 0;
  p->calls = p->step_first = 0;
  p->cur_step = 0;
}

static ab_status planned_plan(ab_strategy_t *s, const ab_lifetime_t *lt, size_t n, ab_diag_t *diag) {
  planned_t *p = (planned_t *)s;
  if (p->live.n) return ab_diag_set(diag, AB_ERR_INVALID, "planned: a new plan while allocations are live");
  release_region(p);
  drop_plan(p);
  if (n == 0) return AB_OK;
  /* Policy 1: the profile. */
  uint32_t steps = lt[n - 1].step;
  size_t np = 0;
  if (steps > 0) {
    p->last_step = (uint32_t)(p->profile_steps < steps ? p->profile_steps : steps);
    while (np < n && lt[np].step <= p->last_step) np++;
  } else {
    np = (size_t)((double)n * p->profile_share);
  }
  p->step = malloc(n * sizeof *p->step);
  ab_lifetime_t *prof = malloc((np ? np : 1) * sizeof *prof);
  p->offset = malloc((np ? np : 1) * sizeof *p->offset);
  p->bytes = malloc((np ? np : 1) * sizeof *p->bytes);
  if (p->step == NULL || prof == NULL || p->offset == NULL || p->bytes == NULL) {
    free(prof);
    drop_plan(p);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "planned: out of host memory");
  }
  for (size_t i = 0; i < n; i++) p->step[i] = lt[i].step;
  p->ncalls = n;
  /* What the profile saw end: frees after its last allocation are not seen. */
  uint64_t seen = np < n ? lt[np].start : UINT64_MAX;
  for (size_t i = 0; i < np; i++) {
    prof[i] = lt[i];
    if (prof[i].end >= seen) prof[i].end = UINT64_MAX;
    if (prof[i].end_other >= seen) prof[i].end_other = UINT64_MAX;
    p->bytes[i] = lt[i].bytes;
  }
  /* Policy 2: the plan. */
  ab_status st = ab_dsa_place(prof, np, PLANNED_ALIGN_BYTES, p->offset, &p->plan_bytes);
  free(prof);
  if (st != AB_OK) {
    drop_plan(p);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "planned: out of host memory planning %zu allocations", np);
  }
  p->nprofile = np;
  p->tmpl_first = np;
  if (p->last_step != UINT32_MAX)
    while (p->tmpl_first > 0 && lt[p->tmpl_first - 1].step == p->last_step) p->tmpl_first--;
  return AB_OK;
}

/* Maps bytes more at the region's top (reserving the region first). */
static ab_status grow(planned_t *p, uint64_t bytes) {
  ab_strategy_t *s = &p->base;
  if (p->region == 0) {
    p->va_bytes = align_up(s->dev->total_bytes, AB_GRANULE_BYTES);
    AB_TRY(ab_device_va_reserve(s->dev, p->va_bytes, &p->region));
  }
  bytes = align_up(bytes, AB_GRANULE_BYTES);
  if (p->arena.bytes + bytes > p->va_bytes) return AB_ERR_OOM;
  if (p->nmaps == p->capmaps) {
    size_t cap = p->capmaps ? 2 * p->capmaps : 16;
    map_range_t *m = realloc(p->maps, cap * sizeof *m);
    if (m == NULL) return AB_ERR_INTERNAL;
    p->maps = m, p->capmaps = cap;
  }
  ab_dptr_t at = p->region + p->arena.bytes;
  AB_TRY(ab_device_map(s->dev, at, bytes));
  if (ab_arena_grow(&p->arena, bytes) != AB_OK) {
    ab_device_unmap(s->dev, at, bytes);
    return AB_ERR_INTERNAL;
  }
  p->maps[p->nmaps++] = (map_range_t){at, bytes};
  s->stats.num_device_alloc++;
  ab_gauge_add(&s->stats.reserved_bytes, (int64_t)bytes);
  ab_strategy_segment(s, AB_TR_SEGMENT_MAP, at, bytes, 0);
  return AB_OK;
}

/* The planned offset of call k, or UINT64_MAX (policy 3). */
static uint64_t planned_offset(planned_t *p, size_t k, uint64_t bytes) {
  if (k < p->nprofile) return p->bytes[k] == bytes ? p->offset[k] : UINT64_MAX;
  if (k >= p->ncalls || p->last_step == UINT32_MAX) return UINT64_MAX;
  if (p->step[k] != p->cur_step) p->cur_step = p->step[k], p->step_first = k;
  size_t j = p->tmpl_first + (k - p->step_first);
  return j < p->nprofile && p->bytes[j] == bytes ? p->offset[j] : UINT64_MAX;
}

static ab_status planned_alloc(ab_strategy_t *s, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  planned_t *p = (planned_t *)s;
  (void)stream;
  size_t k = p->calls++;
  /* No device holds 2^56 bytes; larger sizes would wrap in the rounding below. */
  if (bytes >> 56) return s->stats.num_ooms++, AB_ERR_OOM;
  uint64_t size = align_up(bytes, PLANNED_ALIGN_BYTES);
  ab_status st = AB_OK;
  if (p->arena.bytes == 0 && p->plan_bytes) st = grow(p, p->plan_bytes);
  uint64_t off = st == AB_OK ? planned_offset(p, k, bytes) : UINT64_MAX;
  if (off != UINT64_MAX && off + size <= p->arena.bytes && ab_arena_take_at(&p->arena, off, size) == AB_OK) {
    p->hits++;
  } else if (st == AB_OK) {
    /* Policy 4: online, best fit, growing the top when nothing holds it. */
    p->misses++;
    st = ab_arena_take_best(&p->arena, size, &off);
    if (st == AB_ERR_OOM) {
      st = grow(p, size - ab_arena_top_free(&p->arena));
      if (st == AB_OK) st = ab_arena_take_best(&p->arena, size, &off);
    }
  }
  if (st == AB_ERR_OOM) s->stats.num_ooms++;
  if (st != AB_OK) return st;
  *out = p->region + off;
  if (ab_map_put(&p->live, *out, bytes << 1 | 1) != AB_OK) {
    ab_arena_give(&p->arena, off, size);
    return AB_ERR_INTERNAL;
  }
  ab_gauge_add(&s->stats.requested_bytes, (int64_t)bytes);
  ab_gauge_add(&s->stats.allocated_bytes, (int64_t)size);
  return AB_OK;
}

static ab_status planned_free(ab_strategy_t *s, ab_dptr_t ptr, uint64_t bytes, unsigned stream) {
  planned_t *p = (planned_t *)s;
  (void)stream;
  uint64_t v;
  if (!ab_map_get(&p->live, ptr, &v) || v >> 1 != bytes)
    return ab_diag_set(&s->dev->diag, AB_ERR_INVALID, "planned: free of 0x%llx (%llu bytes), which it did not hand out",
                       (unsigned long long)ptr, (unsigned long long)bytes);
  uint64_t size = align_up(bytes, PLANNED_ALIGN_BYTES);
  AB_TRY(ab_arena_give(&p->arena, ptr - p->region, size));
  ab_map_take(&p->live, ptr, NULL);
  ab_gauge_sub(&s->stats.requested_bytes, (int64_t)bytes);
  ab_gauge_sub(&s->stats.allocated_bytes, (int64_t)size);
  return AB_OK;
}

/* The region goes back when nothing lives in it; the next allocation maps it again. */
static ab_status planned_empty_cache(ab_strategy_t *s) {
  planned_t *p = (planned_t *)s;
  if (p->live.n == 0) release_region(p);
  return AB_OK;
}

static ab_status planned_walk(ab_strategy_t *s, ab_segment_fn fn, void *ctx) {
  planned_t *p = (planned_t *)s;
  return ab_arena_walk(&p->arena, p->arena.bytes ? p->region : 0, &p->live, PLANNED_ALIGN_BYTES, "plan", true, fn, ctx);
}

static ab_status planned_check(ab_strategy_t *s, ab_diag_t *diag) {
  planned_t *p = (planned_t *)s;
  ab_walk_sums_t sum;
  AB_TRY(ab_strategy_check_walk(s, &sum, diag));
  const ab_stats_t *st = &s->stats;
  if (sum.live_blocks != p->live.n || (uint64_t)st->allocated_bytes.current != sum.allocated ||
      (uint64_t)st->requested_bytes.current != sum.requested || (uint64_t)st->reserved_bytes.current != sum.reserved ||
      sum.free != p->arena.free_bytes)
    return ab_diag_set(diag, AB_ERR_INTERNAL,
                       "planned: stats say %lld requested, %lld allocated, %lld reserved, %llu free; the walk finds "
                       "%llu live blocks of %llu, %llu requested, %llu allocated, %llu reserved, %llu free",
                       (long long)st->requested_bytes.current, (long long)st->allocated_bytes.current,
                       (long long)st->reserved_bytes.current, (unsigned long long)p->arena.free_bytes,
                       (unsigned long long)sum.live_blocks, (unsigned long long)p->live.n,
                       (unsigned long long)sum.requested, (unsigned long long)sum.allocated,
                       (unsigned long long)sum.reserved, (unsigned long long)sum.free);
  return AB_OK;
}

static void planned_memory_stats(ab_strategy_t *s, ab_stat_fn fn, void *ctx) {
  planned_t *p = (planned_t *)s;
  fn(ctx, "plan.allocations", (int64_t)p->nprofile);
  fn(ctx, "plan.region_bytes", (int64_t)p->plan_bytes);
  fn(ctx, "plan.hits", (int64_t)p->hits);
  fn(ctx, "plan.misses", (int64_t)p->misses);
}

static void planned_destroy(ab_strategy_t *s) {
  planned_t *p = (planned_t *)s;
  release_region(p);
  drop_plan(p);
  ab_map_free(&p->live);
  free(p->maps);
  free(p);
}

const ab_strategy_ops_t ab_planned_ops = {
    .name = "planned",
    .create = planned_create,
    .destroy = planned_destroy,
    .alloc = planned_alloc,
    .free = planned_free,
    .empty_cache = planned_empty_cache,
    .walk = planned_walk,
    .check = planned_check,
    .memory_stats = planned_memory_stats,
    .plan = planned_plan,
};
