/* planned.c: STAlloc (Yang et al., EuroSys'26, arXiv 2507.16274; its code: infinigence/STAlloc,
 * Allocator/ and Synthesizer/): plan the allocations a profile has seen at fixed offsets of one
 * static region, and send every request the plan does not match to PyTorch's caching
 * allocator. With misses:arena, the strategy `arena` instead: the same plan, its misses served
 * best fit in the same region, which grows (not STAlloc; Note [STAlloc's rules]).
 *
 * Policy:
 *   1. Profile: the allocations of the first profile_steps training steps, with what came
 *      before the first step; a stream without steps gives its first profile_share of the
 *      allocations. Lifetimes that outlast the profile are static to the planner: it sees no
 *      free after the profile (Note [Plans]).
 *   2. Plan: the profiled allocations are placed offline in one region by the spatio-temporal
 *      packer of dsa.h, 512-byte aligned.
 *   3. Serve: a profiled call gets its planned offset; in a later step, the j-th call gets
 *      the offset of the j-th call of the last profiled step when its size matches (the plan
 *      of one steady iteration, replayed every iteration), the step coming from the training
 *      loop at run time. A planned offset whose range is taken is refused.
 *   4. Everything else (a size the plan did not foresee: dynamic shapes, routing) is a miss:
 *      served by a caching allocator of its own on the same device, set up as STAlloc's
 *      (misses:caching, Note [STAlloc's fallback]), or best fit in the region's free ranges,
 *      the region growing at its top when none holds it (misses:arena).
 * The region is one reserved address range mapped at the first allocation with the plan's
 * peak (and, for arena, what growth asks for); nothing is unmapped before empty_cache finds
 * it empty.
 *
 * Note [STAlloc's rules]: each rule with where STAlloc's code has it and what differs here:
 *   - Trace, then plan, then serve (Allocator/trace.cpp records the iterations' mallocs and
 *     frees; Synthesizer/plan_generator.py lays them out; Allocator/main.cpp serves): here the
 *     engine hands the profile over before the run (Note [Plans]) and the plan is made in C.
 *   - The plan lives in one fixed region of the plan's peak (Allocator/Allocator.hpp: one
 *     cudaMalloc of max_reserved at start): here one reservation mapped in one call.
 *   - Iteration 0 is planned as it ran and iteration 1 replayed in every later one, the
 *     iteration hook resetting the event counter (StaticAllocator.hpp, alloc_fn_ and
 *     update_iteraion): here the last profiled step is the one replayed.
 *   - A request whose size differs from the plan's, or past the plan, goes to the caching
 *     allocator (StaticAllocator.hpp, the MISMATCH branches: deviceCachingAllocator_malloc),
 *     and so does a planned range that is not free (main.cpp, my_malloc: when
 *     interval_manager->allocate fails): here to `caching`, PyTorch 2.11's allocator, set up
 *     as STAlloc sets up the modified copy of an older one it links
 *     (Note [STAlloc's fallback]).
 *   - Not modelled: requests of at most 512 bytes go to a separate table of 512-byte slots
 *     (VarAllocator.hpp, VAR_BLOCK_SIZE), here to the plan like any other; tensors made
 *     before the first iteration and freed inside one go to the caching allocator
 *     (trace_parser.py, unreleased_tensors), here to the plan; the dynamic mode for MoE
 *     layers (STALLOC_DYNAMIC, OnlineDynamicManager.hpp), off by default, is left out.
 *
 * Note [STAlloc's fallback]: the misses go to a copy of PyTorch's caching allocator that
 * STAlloc ships and changed (infinigence/STAlloc at 3a9f97f, Allocator/CUDACachingAllocator.h
 * and .cpp); two of its defaults are not PyTorch's, and both are taken here:
 *   - CachingAllocatorConfig::parseArgs sets m_max_split_size to 128 MiB before it reads
 *     PYTORCH_CUDA_ALLOC_CONF (PyTorch: unlimited), so blocks of 128 MiB or more are never
 *     split and are released before whole segments on a failed cudaMalloc: `caching` with
 *     max_split_size_mb:128;
 *   - kRoundLarge is 512 bytes (PyTorch's 2 MiB line is commented out beside it), so a
 *     segment for a request of 10 MiB or more is that request rounded to 512 bytes, not
 *     2 MiB, in get_allocation_size: ab_caching_create_rounded with 512.
 * Its other defaults are PyTorch's: 2 MiB small and 20 MiB large buffers, no power-of-two
 * divisions, no garbage collection; oversize blocks serve requests within kLargeBuffer (20
 * MiB) of their size, as PyTorch 2.11's max_non_split_rounding default does. Its
 * try_empty_cache (an empty_cache after a cudaMalloc once reserved is far above the allocated
 * peak) is on only when STALLOC_DYNAMIC_UTILIZATION is set: not modelled. The arena strategy
 * (misses:arena) keeps its own fallback, the region.
 */
#include "strategies/planned/planned.h"

#include <stdlib.h>

#include "kernels/base/hashmap.h"
#include "kernels/base/units.h"
#include "strategies/common/free_ranges.h"
#include "strategies/caching/caching.h"
#include "strategies/planned/dsa.h"

#define PLANNED_ALIGN_BYTES 512
#define STALLOC_ROUND_LARGE 512 /* STAlloc's kRoundLarge (Note [STAlloc's fallback]) */

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
  /* Why there is no plan, said by the run (plan.profiled, plan.unplaceable): its profile held
   * no allocation, or the profiled sizes add up past what one address range holds. */
  size_t profiled;       /* the allocations the last profile held, planned or not */
  bool unplaceable;
  /* the region */
  ab_dptr_t region;      /* the reservation; 0 before the first allocation */
  uint64_t va_bytes;
  map_range_t *maps;     /* each map call, to unmap them one by one at the end */
  size_t nmaps, capmaps;
  ab_free_ranges_t space;      /* the mapped part's free space */
  /* serving */
  size_t calls;          /* alloc calls since the plan */
  uint32_t cur_step;
  size_t step_first;     /* the first call of cur_step */
  uint64_t hits, misses; /* calls served at a planned offset / not */
  ab_map_t live;         /* address in the region -> requested << 1 | 1 */
  ab_strategy_t *misses_to; /* misses:caching: the caching allocator the misses go to; NULL: arena */
} planned_t;

static uint64_t align_up(uint64_t bytes, uint64_t unit) { return (bytes + unit - 1) / unit * unit; }

/* The caching allocator's segment decisions are this strategy's. */
static void forward_segment(void *ctx, ab_trace_action_t action, ab_dptr_t addr, uint64_t bytes, unsigned stream) {
  planned_t *p = ctx;
  ab_strategy_segment(&p->base, action, addr, bytes, stream);
}

/* Adds what a call of the caching allocator changed in its statistics (before: its
 * statistics before the call) to this strategy's, so that they count both. */
static void absorb(planned_t *p, const ab_stats_t *before) {
  ab_stats_t *st = &p->base.stats;
  const ab_stats_t *now = &p->misses_to->stats;
#define GAUGE(name, doc) ab_gauge_add(&st->name, now->name.current - before->name.current);
  AB_STAT_STRATEGY_GAUGES(GAUGE)
#undef GAUGE
#define COUNTER(name, doc) st->name += now->name - before->name;
  AB_STAT_COUNTERS(COUNTER)
#undef COUNTER
  /* An OOM of the caching allocator is this strategy's, which ab_strategy_alloc counts. */
  st->num_ooms -= now->num_ooms - before->num_ooms;
}

static ab_status planned_create(ab_device_t *dev, const char *conf, ab_strategy_t **out, ab_diag_t *diag) {
  ab_kvlist_t opts;
  uint64_t steps = 2;
  double share = 0.25;
  static const char *const where[] = {"caching", "arena", NULL};
  int misses = 0;
  AB_TRY(ab_kv_parse("-c", conf, ':', &opts, diag));
  AB_TRY(ab_kv_get_u64(&opts, "profile_steps", 1, UINT32_MAX - 1, &steps, diag));
  AB_TRY(ab_kv_get_double(&opts, "profile_share", 0.0, 1.0, &share, diag));
  AB_TRY(ab_kv_get_choice(&opts, "misses", where, &misses, diag));
  AB_TRY(ab_kv_finish(&opts, "profile_steps, profile_share, misses", diag));
  planned_t *p = calloc(1, sizeof *p);
  if (p == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  if (misses == 0) {
    /* Note [STAlloc's fallback]. */
    ab_status st = ab_caching_create_rounded(dev, "max_split_size_mb:128", STALLOC_ROUND_LARGE, &p->misses_to, diag);
    if (st != AB_OK) return free(p), st;
    ab_strategy_observe(p->misses_to, forward_segment, p);
  }
  p->base.ops = &ab_planned_ops;
  p->base.dev = dev;
  p->profile_steps = steps;
  p->profile_share = share;
  p->last_step = UINT32_MAX;
  ab_free_ranges_init(&p->space);
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
  ab_free_ranges_clear(&p->space);
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
  p->profiled = 0, p->unplaceable = false;
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
  p->profiled = np;
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
  if (st == AB_ERR_OOM) {
    /* Sizes no address range holds together: no plan; everything is served online (policy
     * 4), where those sizes run out of memory. */
    free(prof);
    drop_plan(p);
    p->unplaceable = true;
    return AB_OK;
  }
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
  if (p->space.bytes + bytes > p->va_bytes) return AB_ERR_OOM;
  if (p->nmaps == p->capmaps) {
    size_t cap = p->capmaps ? 2 * p->capmaps : 16;
    map_range_t *m = realloc(p->maps, cap * sizeof *m);
    if (m == NULL) return AB_ERR_INTERNAL;
    p->maps = m, p->capmaps = cap;
  }
  ab_dptr_t at = p->region + p->space.bytes;
  AB_TRY(ab_device_map(s->dev, at, bytes));
  if (ab_free_ranges_grow(&p->space, bytes) != AB_OK) {
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

/* Policy 4 under misses:caching: the caching allocator serves it. */
static ab_status miss_to_caching(planned_t *p, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  ab_stats_t before = p->misses_to->stats;
  ab_status st = ab_strategy_alloc(p->misses_to, bytes, stream, out);
  absorb(p, &before);
  return st;
}

static ab_status planned_alloc(ab_strategy_t *s, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  planned_t *p = (planned_t *)s;
  size_t k = p->calls++;
  /* No device holds 2^56 bytes; larger sizes would wrap in the rounding below. */
  if (bytes >> 56) return AB_ERR_OOM;
  uint64_t size = align_up(bytes, PLANNED_ALIGN_BYTES);
  ab_status st = AB_OK;
  if (p->space.bytes == 0 && p->plan_bytes) st = grow(p, p->plan_bytes);
  uint64_t off = st == AB_OK ? planned_offset(p, k, bytes) : UINT64_MAX;
  if (off != UINT64_MAX && off + size <= p->space.bytes && ab_free_ranges_take_at(&p->space, off, size) == AB_OK) {
    p->hits++;
  } else if (st == AB_OK && p->misses_to) {
    p->misses++;
    return miss_to_caching(p, bytes, stream, out);
  } else if (st == AB_OK) {
    /* Policy 4 under misses:arena: best fit, growing the top when nothing holds it. */
    p->misses++;
    st = ab_free_ranges_take_best(&p->space, size, &off);
    if (st == AB_ERR_OOM) {
      st = grow(p, size - ab_free_ranges_top_free(&p->space));
      if (st == AB_OK) st = ab_free_ranges_take_best(&p->space, size, &off);
    }
  }
  if (st != AB_OK) return st;
  *out = p->region + off;
  if (ab_map_put(&p->live, *out, bytes << 1 | 1) != AB_OK) {
    ab_free_ranges_give(&p->space, off, size);
    return AB_ERR_INTERNAL;
  }
  ab_gauge_add(&s->stats.requested_bytes, (int64_t)bytes);
  ab_gauge_add(&s->stats.allocated_bytes, (int64_t)size);
  return AB_OK;
}

static ab_status planned_free(ab_strategy_t *s, ab_dptr_t ptr, uint64_t bytes, unsigned stream) {
  planned_t *p = (planned_t *)s;
  uint64_t v;
  if (!ab_map_get(&p->live, ptr, &v) && p->misses_to) {
    ab_stats_t before = p->misses_to->stats;
    ab_status st = ab_strategy_free(p->misses_to, ptr, bytes, stream);
    absorb(p, &before);
    return st;
  }
  if (!ab_map_get(&p->live, ptr, &v) || v >> 1 != bytes)
    return ab_diag_set(&s->dev->diag, AB_ERR_INVALID, "planned: free of 0x%llx (%llu bytes), which it did not hand out",
                       (unsigned long long)ptr, (unsigned long long)bytes);
  uint64_t size = align_up(bytes, PLANNED_ALIGN_BYTES);
  AB_TRY(ab_free_ranges_give(&p->space, ptr - p->region, size));
  ab_map_take(&p->live, ptr, NULL);
  ab_gauge_sub(&s->stats.requested_bytes, (int64_t)bytes);
  ab_gauge_sub(&s->stats.allocated_bytes, (int64_t)size);
  return AB_OK;
}

/* The region goes back when nothing lives in it (the next allocation maps it again), and
 * the caching allocator empties its cache. */
static ab_status planned_empty_cache(ab_strategy_t *s) {
  planned_t *p = (planned_t *)s;
  if (p->live.n == 0) release_region(p);
  if (p->misses_to == NULL) return AB_OK;
  ab_stats_t before = p->misses_to->stats;
  ab_status st = ab_strategy_empty_cache(p->misses_to);
  absorb(p, &before);
  return st;
}

/* The walk in address order: the caching allocator's segments with the region among them. */
typedef struct walk_ctx_s {
  planned_t *p;
  ab_segment_fn fn;
  void *ctx;
  bool region_done;
  ab_status st;
} walk_ctx_t;

static ab_status walk_region(walk_ctx_t *w) {
  planned_t *p = w->p;
  w->region_done = true;
  return ab_free_ranges_walk(&p->space, p->space.bytes ? p->region : 0, &p->live, PLANNED_ALIGN_BYTES, "plan", true,
                             w->fn, w->ctx);
}

static int walk_caching(void *ctx, const ab_segment_info_t *seg) {
  walk_ctx_t *w = ctx;
  if (!w->region_done && w->p->space.bytes && seg->base > w->p->region && (w->st = walk_region(w)) != AB_OK) return 1;
  return w->fn(w->ctx, seg);
}

static ab_status planned_walk(ab_strategy_t *s, ab_segment_fn fn, void *ctx) {
  planned_t *p = (planned_t *)s;
  walk_ctx_t w = {p, fn, ctx, false, AB_OK};
  if (p->misses_to) AB_TRY(ab_strategy_walk(p->misses_to, walk_caching, &w));
  AB_TRY(w.st);
  return w.region_done ? AB_OK : walk_region(&w);
}

static ab_status planned_check(ab_strategy_t *s, ab_diag_t *diag) {
  planned_t *p = (planned_t *)s;
  ab_walk_sums_t sum, theirs = {0};
  AB_TRY(ab_strategy_check_walk(s, &sum, diag));
  if (p->misses_to) {
    AB_TRY(ab_strategy_check(p->misses_to, diag));
    AB_TRY(ab_strategy_check_walk(p->misses_to, &theirs, diag));
  }
  const ab_stats_t *st = &s->stats;
  if (sum.live_blocks != p->live.n + theirs.live_blocks || (uint64_t)st->allocated_bytes.current != sum.allocated ||
      (uint64_t)st->requested_bytes.current != sum.requested || (uint64_t)st->reserved_bytes.current != sum.reserved ||
      sum.free != p->space.free_bytes + theirs.free)
    return ab_diag_set(diag, AB_ERR_INTERNAL,
                       "planned: stats say %lld requested, %lld allocated, %lld reserved, %llu free; the walk finds "
                       "%llu live blocks of %llu, %llu requested, %llu allocated, %llu reserved, %llu free",
                       (long long)st->requested_bytes.current, (long long)st->allocated_bytes.current,
                       (long long)st->reserved_bytes.current, (unsigned long long)p->space.free_bytes,
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
  fn(ctx, "plan.profiled", (int64_t)p->profiled);
  fn(ctx, "plan.unplaceable", p->unplaceable);
}

static void planned_destroy(ab_strategy_t *s) {
  planned_t *p = (planned_t *)s;
  release_region(p);
  drop_plan(p);
  ab_map_free(&p->live);
  free(p->maps);
  ab_strategy_destroy(p->misses_to);
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
