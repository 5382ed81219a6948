/* sim.c: the simulated card. See sim.h for what it models. */
#include "sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "rng.h"
#include "tree.h"
#include "units.h"

/* ---- profiles ---------------------------------------------------------------------------
 * h200 is what cudaMemGetInfo reported on the project's H200. The others are the totals
 * nvidia-smi shows for those cards (MiB); cudaMemGetInfo reports a little less (0.4% less
 * on the H200), so treat them as within half a percent. */
static const ab_sim_profile_t profiles[] = {
    {"h200", AB_H200_TOTAL_BYTES, "NVIDIA H200 141GB, cudaMemGetInfo total (measured)"},
    {"h100-80gb", 81559ULL << 20, "NVIDIA H100 80GB, nvidia-smi total 81559 MiB"},
    {"a100-80gb", 81920ULL << 20, "NVIDIA A100 80GB, nvidia-smi total 81920 MiB"},
    {"a100-40gb", 40960ULL << 20, "NVIDIA A100 40GB, nvidia-smi total 40960 MiB"},
    {"l4", 23034ULL << 20, "NVIDIA L4 24GB, nvidia-smi total 23034 MiB"},
};

const ab_sim_profile_t *ab_sim_profiles(unsigned *count) {
  *count = (unsigned)(sizeof profiles / sizeof profiles[0]);
  return profiles;
}

/* ---- cost model -------------------------------------------------------------------------
 * Host time per call on the H200, p50 (reference/gpu_measurements.md). Between two points
 * the time is interpolated on log(size); past the last point it grows in proportion to
 * size. va_release and synchronize were not measured: va_release is taken to cost what a
 * reservation costs, and a synchronisation of an idle device 2 us. */
typedef struct cost_point_s {
  uint64_t bytes;
  double ns;
} cost_point_t;

#define PTS(a) a, sizeof a / sizeof a[0]
static const cost_point_t cost_malloc[] = {{512, 43e3}, {20 << 20, 43e3}, {256 << 20, 83e3}, {1ULL << 30, 196e3}};
static const cost_point_t cost_free[] = {{512, 36e3}, {2 << 20, 36e3}, {20 << 20, 50e3}, {256 << 20, 174e3}, {1ULL << 30, 556e3}};
static const cost_point_t cost_create[] = {{2 << 20, 12e3}, {20 << 20, 14e3}, {256 << 20, 31e3}};
static const cost_point_t cost_unmap_release[] = {{2 << 20, 37e3}, {256 << 20, 158e3}};
#define COST_MAP_NS 1e3          /* cuMemMap, any size */
#define COST_SET_ACCESS_NS 54e3  /* cuMemSetAccess, 51-57 us */
#define COST_RESERVE_NS 15e3     /* cuMemAddressReserve */
#define COST_MALLOC_ASYNC_NS 520 /* pool hit, 0.50-0.54 us */
#define COST_FREE_ASYNC_NS 650   /* 0.62-0.69 us */
#define COST_SYNC_NS 2e3

static double cost_at(const cost_point_t *pts, size_t n, uint64_t bytes) {
  if (bytes <= pts[0].bytes) return pts[0].ns;
  for (size_t i = 1; i < n; i++)
    if (bytes <= pts[i].bytes) {
      double t = (log((double)bytes) - log((double)pts[i - 1].bytes)) /
                 (log((double)pts[i].bytes) - log((double)pts[i - 1].bytes));
      return pts[i - 1].ns + t * (pts[i].ns - pts[i - 1].ns);
    }
  return pts[n - 1].ns * (double)bytes / (double)pts[n - 1].bytes;
}

/* ---- the address space ------------------------------------------------------------------
 * Free ranges are kept twice: by address, to merge neighbours, and by (size, address), to
 * pick the smallest range that fits. A request is carved from the top of that range, so a
 * fresh address space is handed out top-down, as the driver mostly does, and a freed hole
 * is reused by a request of its size. */
/* The x86-64 user address space above 4 GiB, where a driver's addresses lie: an address plan
 * (device.h) of recorded cudaMalloc addresses fits in it. */
#define VA_BASE 0x100000000ULL   /* 4 GiB */
#define VA_END 0x800000000000ULL /* 128 TiB */

typedef struct va_range_s {
  ab_tnode_t by_addr, by_size;
  ab_dptr_t base;
  uint64_t bytes;
  struct va_range_s *next_spare; /* free list of unused nodes */
} va_range_t;

typedef struct size_key_s {
  uint64_t bytes;
  ab_dptr_t base;
} size_key_t;

static int cmp_addr(const ab_tnode_t *a, const ab_tnode_t *b) {
  ab_dptr_t x = AB_CONTAINER_OF(a, va_range_t, by_addr)->base, y = AB_CONTAINER_OF(b, va_range_t, by_addr)->base;
  return (x > y) - (x < y);
}

static int cmp_size(const ab_tnode_t *a, const ab_tnode_t *b) {
  const va_range_t *x = AB_CONTAINER_OF(a, va_range_t, by_size), *y = AB_CONTAINER_OF(b, va_range_t, by_size);
  if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
  return (x->base > y->base) - (x->base < y->base);
}

static int key_size(const void *key, const ab_tnode_t *n) {
  const size_key_t *k = key;
  const va_range_t *r = AB_CONTAINER_OF(n, va_range_t, by_size);
  if (k->bytes != r->bytes) return k->bytes < r->bytes ? -1 : 1;
  return (k->base > r->base) - (k->base < r->base);
}

static int key_addr(const void *key, const ab_tnode_t *n) {
  ab_dptr_t k = *(const ab_dptr_t *)key, b = AB_CONTAINER_OF(n, va_range_t, by_addr)->base;
  return (k > b) - (k < b);
}

/* A reservation of the virtual-memory calls, with one bit per granule: mapped or not. */
typedef struct resv_s {
  ab_tnode_t node; /* in sim_t.resvs, by base */
  ab_dptr_t base;
  uint64_t bytes;
  uint64_t mapped_bytes;
  uint64_t *mapped; /* bitmap, one bit per granule */
} resv_t;

static int cmp_resv(const ab_tnode_t *a, const ab_tnode_t *b) {
  ab_dptr_t x = AB_CONTAINER_OF(a, resv_t, node)->base, y = AB_CONTAINER_OF(b, resv_t, node)->base;
  return (x > y) - (x < y);
}

static int key_resv(const void *key, const ab_tnode_t *n) {
  ab_dptr_t k = *(const ab_dptr_t *)key, b = AB_CONTAINER_OF(n, resv_t, node)->base;
  return (k > b) - (k < b);
}

/* ---- the stream-ordered pool ------------------------------------------------------------
 * cudaMallocAsync's pool is backed by physical pages that the driver can remap (the CUDA
 * blog: it "defragments the pool by remapping unused memory"), so any free page serves any
 * request: the pool needs as many pages as its live allocations cover. Requests over
 * POOL_SMALL_MAX_BYTES take whole pages; smaller ones are packed, 512-byte aligned, into
 * the open page, and a page of small allocations returns to the pool once all of them are
 * freed. Reuse ignores streams: on the simulated card every free has completed at once,
 * which is when the driver's opportunistic reuse applies. */
#define POOL_PAGE_BYTES AB_GRANULE_BYTES
#define POOL_SMALL_MAX_BYTES (1ULL << 20)

typedef struct small_page_s {
  ab_dptr_t va;
  uint64_t bump; /* next free offset */
  uint64_t live; /* live allocations in the page */
} small_page_t;

typedef struct pool_s {
  uint64_t release_threshold; /* bytes kept across synchronisations (CUDA's default: 0) */
  uint64_t pages;             /* pages held */
  uint64_t pages_used;        /* pages backing live allocations, and the open small page */
  uint64_t peak_bytes;
  small_page_t *small;        /* pages that hold small allocations */
  size_t nsmall, capsmall;
  size_t open;                /* index of the open small page, or SIZE_MAX */
  size_t *spare_small;        /* indices of small pages with nothing live */
  size_t nspare;
  ab_map_t large;             /* address -> bytes */
  ab_map_t small_live;        /* address -> page index << 21 | bytes */
} pool_t;

typedef struct sim_s {
  ab_device_t dev; /* first: the device.h view */
  uint64_t usable_bytes; /* total less the context */
  ab_tree_t va_by_addr, va_by_size;
  va_range_t *spare_ranges;
  ab_map_t live;    /* malloc'd address -> bytes */
  ab_tree_t resvs;  /* reservations by base */
  ab_map_t extents; /* mapped address -> bytes of that map call (one physical allocation) */
  pool_t pool;
  ab_faults_t faults;
  ab_addr_hint_t *plan; /* the address plan (device.h), owned */
  size_t plan_len, plan_next;
  uint64_t fault_calls; /* allocation-type calls so far */
  ab_rng_t rng;         /* draws for fail_rate */
  bool cost_model;
} sim_t;

static sim_t *sim_of(ab_device_t *d) { return (sim_t *)(void *)d; }

/* Adds the modelled time of a call. A macro, so that the cost (logarithms) is computed only
 * when the model is on: a budget search replays with it off. */
#define CHARGE(s, ns)                                              \
  do {                                                             \
    if ((s)->cost_model) (s)->dev.modeled_ns += (uint64_t)(ns);    \
  } while (0)

/* True when an injected fault fires for this allocation-type call. */
static bool fault_fires(sim_t *s) {
  s->fault_calls++;
  if (s->faults.fail_nth && s->fault_calls == s->faults.fail_nth) return true;
  if (s->faults.fail_rate > 0) {
    if (ab_rng_uniform(&s->rng) < s->faults.fail_rate) return true;
  }
  return false;
}

/* Physical room on the card (the budget is checked by device.c, or by the pool below). */
static bool card_has_room(const sim_t *s, uint64_t bytes) {
  return bytes <= s->usable_bytes && s->dev.held_bytes <= s->usable_bytes - bytes;
}

static va_range_t *range_new(sim_t *s, ab_dptr_t base, uint64_t bytes) {
  va_range_t *r = s->spare_ranges;
  if (r)
    s->spare_ranges = r->next_spare;
  else if ((r = malloc(sizeof *r)) == NULL)
    return NULL;
  r->base = base;
  r->bytes = bytes;
  return r;
}

static void range_insert(sim_t *s, va_range_t *r) {
  ab_tree_insert(&s->va_by_addr, &r->by_addr);
  ab_tree_insert(&s->va_by_size, &r->by_size);
}

static void range_remove(sim_t *s, va_range_t *r) {
  ab_tree_remove(&s->va_by_addr, &r->by_addr);
  ab_tree_remove(&s->va_by_size, &r->by_size);
}

static void range_drop(sim_t *s, va_range_t *r) {
  range_remove(s, r);
  r->next_spare = s->spare_ranges;
  s->spare_ranges = r;
}

/* Changes a range's size and, maybe, its base, where that keeps its order among the ranges
 * by address (a piece carved from its top, a neighbour merged into it): only its place by
 * size moves, which halves the tree work of every device call. */
static void range_resize(sim_t *s, va_range_t *r, ab_dptr_t base, uint64_t bytes) {
  ab_tree_remove(&s->va_by_size, &r->by_size);
  r->base = base;
  r->bytes = bytes;
  ab_tree_insert(&s->va_by_size, &r->by_size);
}

/* Carves `bytes` aligned to `align` (a power of two) from the smallest free range that
 * holds them, at its top. */
static ab_status va_alloc(sim_t *s, uint64_t bytes, uint64_t align, ab_dptr_t *out) {
  size_key_t key = {bytes, 0};
  for (ab_tnode_t *n = ab_tree_lower_bound(&s->va_by_size, &key, key_size); n; n = ab_tree_next(n)) {
    va_range_t *r = AB_CONTAINER_OF(n, va_range_t, by_size);
    ab_dptr_t top = r->base + r->bytes, start = (top - bytes) & ~(align - 1);
    if (start < r->base) continue;
    /* The piece above the aligned start, if any, becomes its own range. */
    if (start + bytes < top) {
      va_range_t *hi = range_new(s, start + bytes, top - start - bytes);
      if (hi == NULL) return AB_ERR_INTERNAL;
      range_insert(s, hi);
    }
    if (start > r->base)
      range_resize(s, r, r->base, start - r->base);
    else
      range_drop(s, r);
    *out = start;
    return AB_OK;
  }
  /* The driver answers CUDA_ERROR_OUT_OF_MEMORY here too: a run out of address space ran out
   * of memory (expandable segments reserve more than the card on every stream). */
  return ab_diag_set(&s->dev.diag, AB_ERR_OOM, "sim device: virtual address space exhausted");
}

/* Carves exactly [base, base + bytes) out of the free ranges; false if it is not all free. */
static bool va_take(sim_t *s, ab_dptr_t base, uint64_t bytes) {
  ab_tnode_t *n = ab_tree_floor(&s->va_by_addr, &base, key_addr);
  if (n == NULL) return false;
  va_range_t *r = AB_CONTAINER_OF(n, va_range_t, by_addr);
  ab_dptr_t top = r->base + r->bytes;
  if (base + bytes < base || base + bytes > top) return false;
  if (base + bytes < top) {
    va_range_t *hi = range_new(s, base + bytes, top - base - bytes);
    if (hi == NULL) return false;
    range_insert(s, hi);
  }
  range_remove(s, r);
  if (base > r->base) {
    r->bytes = base - r->base;
    range_insert(s, r);
  } else {
    r->next_spare = s->spare_ranges;
    s->spare_ranges = r;
  }
  return true;
}

/* Returns a range to the free set, merged with free neighbours. */
static ab_status va_free(sim_t *s, ab_dptr_t base, uint64_t bytes) {
  ab_tnode_t *pn = ab_tree_floor(&s->va_by_addr, &base, key_addr);
  va_range_t *prev = pn ? AB_CONTAINER_OF(pn, va_range_t, by_addr) : NULL;
  ab_tnode_t *nn = pn ? ab_tree_next(pn) : ab_tree_first(&s->va_by_addr);
  va_range_t *next = nn ? AB_CONTAINER_OF(nn, va_range_t, by_addr) : NULL;
  if (prev && prev->base + prev->bytes == base) {
    uint64_t merged = prev->bytes + bytes;
    if (next && prev->base + merged == next->base) {
      merged += next->bytes;
      range_drop(s, next);
    }
    range_resize(s, prev, prev->base, merged);
    return AB_OK;
  }
  if (next && base + bytes == next->base) {
    range_resize(s, next, base, next->bytes + bytes);
    return AB_OK;
  }
  va_range_t *r = range_new(s, base, bytes);
  if (r == NULL) return AB_ERR_INTERNAL;
  range_insert(s, r);
  return AB_OK;
}

/* cudaMalloc hands out 512-byte granules for small sizes and 2 MiB pages from 2 MiB up. */
static uint64_t va_align_for(uint64_t bytes) { return bytes >= AB_GRANULE_BYTES ? AB_GRANULE_BYTES : 512; }
static uint64_t va_size_for(uint64_t bytes) {
  uint64_t a = va_align_for(bytes);
  return (bytes + a - 1) & ~(a - 1);
}

/* ---- plain allocation ------------------------------------------------------------------ */

static ab_status sim_malloc(ab_device_t *d, uint64_t bytes, ab_dptr_t *out) {
  sim_t *s = sim_of(d);
  CHARGE(s, cost_at(PTS(cost_malloc), bytes));
  if (bytes == 0) return ab_diag_set(&d->diag, AB_ERR_INVALID, "sim device: malloc of 0 bytes");
  if (fault_fires(s) || !card_has_room(s, bytes)) return AB_ERR_OOM;
  ab_dptr_t p;
  const ab_addr_hint_t *h = s->plan_next < s->plan_len ? &s->plan[s->plan_next++] : NULL;
  if (h && h->bytes == bytes && h->addr % va_align_for(bytes) == 0 && va_take(s, h->addr, va_size_for(bytes)))
    p = h->addr;
  else
    AB_TRY(va_alloc(s, va_size_for(bytes), va_align_for(bytes), &p));
  if (ab_map_put(&s->live, p, bytes) != AB_OK) return AB_ERR_INTERNAL;
  *out = p;
  return AB_OK;
}

static ab_status sim_free(ab_device_t *d, ab_dptr_t p, uint64_t bytes) {
  sim_t *s = sim_of(d);
  uint64_t had;
  if (!ab_map_get(&s->live, p, &had))
    return ab_diag_set(&d->diag, AB_ERR_INVALID,
                       "sim device: free of 0x%llx, which is not a live allocation (double free or foreign pointer)",
                       (unsigned long long)p);
  if (had != bytes)
    return ab_diag_set(&d->diag, AB_ERR_INVALID, "sim device: free of 0x%llx with size %llu; it was allocated with %llu",
                       (unsigned long long)p, (unsigned long long)bytes, (unsigned long long)had);
  CHARGE(s, cost_at(PTS(cost_free), bytes));
  ab_map_take(&s->live, p, NULL);
  return va_free(s, p, va_size_for(bytes));
}

/* ---- virtual memory -------------------------------------------------------------------- */

static ab_status sim_va_reserve(ab_device_t *d, uint64_t bytes, ab_dptr_t *out) {
  sim_t *s = sim_of(d);
  CHARGE(s, COST_RESERVE_NS);
  if (bytes == 0 || bytes % AB_GRANULE_BYTES)
    return ab_diag_set(&d->diag, AB_ERR_INVALID, "sim device: reserve of %llu bytes, not a positive multiple of the %llu-byte granule",
                       (unsigned long long)bytes, (unsigned long long)AB_GRANULE_BYTES);
  if (fault_fires(s)) return AB_ERR_OOM;
  resv_t *r = calloc(1, sizeof *r);
  uint64_t words = (bytes / AB_GRANULE_BYTES + 63) / 64;
  if (r == NULL || (r->mapped = calloc(words, sizeof *r->mapped)) == NULL) {
    free(r);
    return AB_ERR_INTERNAL;
  }
  ab_status st = va_alloc(s, bytes, AB_GRANULE_BYTES, &r->base);
  if (st != AB_OK) {
    free(r->mapped);
    free(r);
    return st;
  }
  r->bytes = bytes;
  ab_tree_insert(&s->resvs, &r->node);
  *out = r->base;
  return AB_OK;
}

static resv_t *resv_containing(sim_t *s, ab_dptr_t at, uint64_t bytes) {
  ab_tnode_t *n = ab_tree_floor(&s->resvs, &at, key_resv);
  if (n == NULL) return NULL;
  resv_t *r = AB_CONTAINER_OF(n, resv_t, node);
  if (at - r->base > r->bytes || bytes > r->bytes - (at - r->base)) return NULL;
  return r;
}

static ab_status sim_va_release(ab_device_t *d, ab_dptr_t base, uint64_t bytes) {
  sim_t *s = sim_of(d);
  CHARGE(s, COST_RESERVE_NS);
  resv_t *r = resv_containing(s, base, bytes);
  if (r == NULL || r->base != base || r->bytes != bytes)
    return ab_diag_set(&d->diag, AB_ERR_INVALID, "sim device: release of [0x%llx, +%llu), which is not a reservation",
                       (unsigned long long)base, (unsigned long long)bytes);
  if (r->mapped_bytes)
    return ab_diag_set(&d->diag, AB_ERR_INVALID, "sim device: release of reservation 0x%llx with %llu bytes still mapped",
                       (unsigned long long)base, (unsigned long long)r->mapped_bytes);
  ab_tree_remove(&s->resvs, &r->node);
  ab_status st = va_free(s, r->base, r->bytes);
  free(r->mapped);
  free(r);
  return st;
}

/* Checks a map/unmap range and returns its reservation, or sets an error. */
static ab_status vm_range(sim_t *s, const char *op, ab_dptr_t at, uint64_t bytes, resv_t **out) {
  if (bytes == 0 || at % AB_GRANULE_BYTES || bytes % AB_GRANULE_BYTES)
    return ab_diag_set(&s->dev.diag, AB_ERR_INVALID, "sim device: %s of [0x%llx, +%llu) is not granule-aligned", op,
                       (unsigned long long)at, (unsigned long long)bytes);
  if ((*out = resv_containing(s, at, bytes)) == NULL)
    return ab_diag_set(&s->dev.diag, AB_ERR_INVALID, "sim device: %s of [0x%llx, +%llu) outside any reservation", op,
                       (unsigned long long)at, (unsigned long long)bytes);
  return AB_OK;
}

static bool granule_mapped(const resv_t *r, uint64_t g) { return (r->mapped[g / 64] >> (g % 64)) & 1; }

static ab_status sim_map(ab_device_t *d, ab_dptr_t at, uint64_t bytes) {
  sim_t *s = sim_of(d);
  resv_t *r;
  AB_TRY(vm_range(s, "map", at, bytes, &r));
  /* PyTorch creates one physical handle per granule; map and set-access cover the range. */
  CHARGE(s, (double)(bytes / AB_GRANULE_BYTES) * cost_at(PTS(cost_create), AB_GRANULE_BYTES) + COST_MAP_NS +
                COST_SET_ACCESS_NS);
  uint64_t g0 = (at - r->base) / AB_GRANULE_BYTES, ng = bytes / AB_GRANULE_BYTES;
  for (uint64_t g = g0; g < g0 + ng; g++)
    if (granule_mapped(r, g))
      return ab_diag_set(&d->diag, AB_ERR_INVALID, "sim device: map of [0x%llx, +%llu) over a mapped granule at 0x%llx",
                         (unsigned long long)at, (unsigned long long)bytes,
                         (unsigned long long)(r->base + g * AB_GRANULE_BYTES));
  if (fault_fires(s) || !card_has_room(s, bytes)) return AB_ERR_OOM;
  if (ab_map_put(&s->extents, at, bytes) != AB_OK) return AB_ERR_INTERNAL;
  for (uint64_t g = g0; g < g0 + ng; g++) r->mapped[g / 64] |= 1ULL << (g % 64);
  r->mapped_bytes += bytes;
  return AB_OK;
}

static ab_status sim_unmap(ab_device_t *d, ab_dptr_t at, uint64_t bytes) {
  sim_t *s = sim_of(d);
  resv_t *r;
  AB_TRY(vm_range(s, "unmap", at, bytes, &r));
  CHARGE(s, (double)(bytes / AB_GRANULE_BYTES) * cost_at(PTS(cost_unmap_release), AB_GRANULE_BYTES));
  uint64_t g0 = (at - r->base) / AB_GRANULE_BYTES, ng = bytes / AB_GRANULE_BYTES;
  /* Each map call made one physical allocation, and physical memory cannot be split after
   * mapping: the range must be made of whole map calls, as on the real device. */
  for (ab_dptr_t at_ = at, end = at + bytes; at_ < end;) {
    uint64_t len;
    if (!ab_map_get(&s->extents, at_, &len) || len > end - at_)
      return ab_diag_set(&d->diag, AB_ERR_INVALID,
                         "sim device: unmap of [0x%llx, +%llu) does not cover whole mapped ranges (at 0x%llx)",
                         (unsigned long long)at, (unsigned long long)bytes, (unsigned long long)at_);
    at_ += len;
  }
  for (ab_dptr_t at_ = at, end = at + bytes; at_ < end;) {
    uint64_t len;
    ab_map_take(&s->extents, at_, &len);
    at_ += len;
  }
  for (uint64_t g = g0; g < g0 + ng; g++) r->mapped[g / 64] &= ~(1ULL << (g % 64));
  r->mapped_bytes -= bytes;
  return AB_OK;
}

/* ---- the stream-ordered pool ------------------------------------------------------------ */

static void pool_set_pages(sim_t *s, uint64_t pages) {
  pool_t *p = &s->pool;
  ab_device_hold(&s->dev, ((int64_t)pages - (int64_t)p->pages) * (int64_t)POOL_PAGE_BYTES);
  p->pages = pages;
  if (pages * POOL_PAGE_BYTES > p->peak_bytes) p->peak_bytes = pages * POOL_PAGE_BYTES;
}

/* Takes `n` pages for live use, growing the pool when it has too few free ones. */
static ab_status pool_take(sim_t *s, uint64_t n) {
  pool_t *p = &s->pool;
  uint64_t free_pages = p->pages - p->pages_used;
  if (free_pages < n) {
    uint64_t grow = (n - free_pages) * POOL_PAGE_BYTES;
    if (!ab_device_budget_allows(&s->dev, grow) || !card_has_room(s, grow)) return AB_ERR_OOM;
    CHARGE(s, cost_at(PTS(cost_create), grow) + COST_MAP_NS + COST_SET_ACCESS_NS);
    pool_set_pages(s, p->pages + (n - free_pages));
  }
  p->pages_used += n;
  return AB_OK;
}

static ab_status sim_pool_configure(ab_device_t *d, uint64_t release_threshold) {
  sim_of(d)->pool.release_threshold = release_threshold;
  return AB_OK;
}

static ab_status small_page_open(sim_t *s) {
  pool_t *p = &s->pool;
  size_t i;
  if (p->nspare) {
    i = p->spare_small[--p->nspare];
  } else {
    if (p->nsmall == p->capsmall) {
      size_t cap = p->capsmall ? p->capsmall * 2 : 16;
      small_page_t *grown = realloc(p->small, cap * sizeof *grown);
      size_t *spare = realloc(p->spare_small, cap * sizeof *spare);
      if (grown) p->small = grown;
      if (spare) p->spare_small = spare;
      if (grown == NULL || spare == NULL) return AB_ERR_INTERNAL;
      p->capsmall = cap;
    }
    i = p->nsmall;
    AB_TRY(va_alloc(s, POOL_PAGE_BYTES, POOL_PAGE_BYTES, &p->small[i].va));
    p->nsmall++;
  }
  ab_status st = pool_take(s, 1);
  if (st != AB_OK) {
    p->spare_small[p->nspare++] = i;
    return st;
  }
  p->small[i].bump = 0;
  p->small[i].live = 0;
  p->open = i;
  return AB_OK;
}

static ab_status sim_malloc_async(ab_device_t *d, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  sim_t *s = sim_of(d);
  pool_t *p = &s->pool;
  (void)stream;
  CHARGE(s, COST_MALLOC_ASYNC_NS);
  if (bytes == 0) return ab_diag_set(&d->diag, AB_ERR_INVALID, "sim device: malloc_async of 0 bytes");
  if (fault_fires(s)) return AB_ERR_OOM;
  if (bytes > POOL_SMALL_MAX_BYTES) {
    uint64_t pages = (bytes + POOL_PAGE_BYTES - 1) / POOL_PAGE_BYTES;
    AB_TRY(pool_take(s, pages));
    ab_dptr_t va;
    ab_status st = va_alloc(s, pages * POOL_PAGE_BYTES, POOL_PAGE_BYTES, &va);
    if (st == AB_OK) st = ab_map_put(&p->large, va, bytes);
    if (st != AB_OK) {
      p->pages_used -= pages;
      return st;
    }
    *out = va;
    return AB_OK;
  }
  uint64_t need = (bytes + 511) & ~511ULL;
  if (p->open == SIZE_MAX || p->small[p->open].bump + need > POOL_PAGE_BYTES) {
    /* The page left behind returns to the pool once its last allocation is freed. */
    AB_TRY(small_page_open(s));
  }
  small_page_t *pg = &p->small[p->open];
  ab_dptr_t va = pg->va + pg->bump;
  if (ab_map_put(&p->small_live, va, (uint64_t)p->open << 21 | bytes) != AB_OK) return AB_ERR_INTERNAL;
  pg->bump += need;
  pg->live++;
  *out = va;
  return AB_OK;
}

static ab_status sim_free_async(ab_device_t *d, ab_dptr_t ptr, uint64_t bytes, unsigned stream) {
  sim_t *s = sim_of(d);
  pool_t *p = &s->pool;
  (void)stream;
  uint64_t v;
  if (ab_map_get(&p->large, ptr, &v)) {
    if (v != bytes) goto wrong_size;
    CHARGE(s, COST_FREE_ASYNC_NS);
    ab_map_take(&p->large, ptr, NULL);
    uint64_t pages = (bytes + POOL_PAGE_BYTES - 1) / POOL_PAGE_BYTES;
    p->pages_used -= pages;
    return va_free(s, ptr, pages * POOL_PAGE_BYTES);
  }
  if (ab_map_get(&p->small_live, ptr, &v)) {
    if ((v & ((1ULL << 21) - 1)) != bytes) {
      v &= (1ULL << 21) - 1;
      goto wrong_size;
    }
    CHARGE(s, COST_FREE_ASYNC_NS);
    ab_map_take(&p->small_live, ptr, NULL);
    size_t i = (size_t)(v >> 21);
    if (--p->small[i].live == 0) { /* an empty page goes back to the pool */
      if (i == p->open) p->open = SIZE_MAX;
      p->pages_used--;
      p->spare_small[p->nspare++] = i;
    }
    return AB_OK;
  }
  return ab_diag_set(&d->diag, AB_ERR_INVALID,
                     "sim device: free_async of 0x%llx, which is not a live pool allocation (double free or foreign pointer)",
                     (unsigned long long)ptr);
wrong_size:
  return ab_diag_set(&d->diag, AB_ERR_INVALID, "sim device: free_async of 0x%llx with size %llu; it was allocated with %llu",
                     (unsigned long long)ptr, (unsigned long long)bytes, (unsigned long long)v);
}

static ab_status sim_pool_trim(ab_device_t *d, uint64_t keep_bytes) {
  sim_t *s = sim_of(d);
  pool_t *p = &s->pool;
  uint64_t keep = (keep_bytes + POOL_PAGE_BYTES - 1) / POOL_PAGE_BYTES;
  if (keep < p->pages_used) keep = p->pages_used;
  if (keep < p->pages) {
    CHARGE(s, cost_at(PTS(cost_unmap_release), (p->pages - keep) * POOL_PAGE_BYTES));
    pool_set_pages(s, keep);
  }
  return AB_OK;
}

static ab_status sim_pool_reset_peak(ab_device_t *d) {
  sim_t *s = sim_of(d);
  s->pool.peak_bytes = s->pool.pages * POOL_PAGE_BYTES;
  return AB_OK;
}

static ab_status sim_pool_reserved(ab_device_t *d, uint64_t *current, uint64_t *peak) {
  sim_t *s = sim_of(d);
  *current = s->pool.pages * POOL_PAGE_BYTES;
  *peak = s->pool.peak_bytes;
  return AB_OK;
}

/* ---- the rest -------------------------------------------------------------------------- */

static ab_status sim_mem_info(ab_device_t *d, uint64_t *free_bytes, uint64_t *total_bytes) {
  sim_t *s = sim_of(d);
  *total_bytes = d->total_bytes;
  *free_bytes = s->usable_bytes - d->held_bytes;
  return AB_OK;
}

/* A synchronisation is where the pool gives memory back above its release threshold. */
static ab_status sim_synchronize(ab_device_t *d) {
  sim_t *s = sim_of(d);
  CHARGE(s, COST_SYNC_NS);
  if (s->pool.release_threshold != UINT64_MAX) return sim_pool_trim(d, s->pool.release_threshold);
  return AB_OK;
}

static ab_status sim_stream_synchronize(ab_device_t *d, unsigned stream) {
  (void)stream;
  return sim_synchronize(d);
}

static void *sim_stream_handle(ab_device_t *d, unsigned stream) {
  (void)d;
  (void)stream;
  return NULL;
}

uint64_t ab_sim_live_count(const ab_device_t *d) {
  const sim_t *s = (const sim_t *)(const void *)d;
  return s->live.n + s->pool.large.n + s->pool.small_live.n;
}

static ab_status sim_close(ab_device_t *d, ab_diag_t *diag) {
  sim_t *s = sim_of(d);
  ab_status st = AB_OK;
  uint64_t resv_count = s->resvs.size, mapped = 0;
  for (ab_tnode_t *n = ab_tree_first(&s->resvs); n; n = ab_tree_next(n))
    mapped += AB_CONTAINER_OF(n, resv_t, node)->mapped_bytes;
  uint64_t live = ab_sim_live_count(d);
  if (live || resv_count || mapped) {
    char held[32];
    st = ab_diag_set(diag, AB_ERR_INVALID,
                     "sim device %s: leak at teardown: %llu live allocations, %llu reservations, %llu bytes mapped (%s held)",
                     d->name, (unsigned long long)live, (unsigned long long)resv_count, (unsigned long long)mapped,
                     ab_format_bytes(d->held_bytes, held, sizeof held));
  }
  /* Free everything whatever was left. */
  for (ab_tnode_t *n = ab_tree_first(&s->resvs); n;) {
    ab_tnode_t *next = ab_tree_next(n);
    resv_t *r = AB_CONTAINER_OF(n, resv_t, node);
    free(r->mapped);
    free(r);
    n = next;
  }
  ab_tnode_t *n;
  while ((n = ab_tree_first(&s->va_by_addr)) != NULL) range_drop(s, AB_CONTAINER_OF(n, va_range_t, by_addr));
  while (s->spare_ranges) {
    va_range_t *r = s->spare_ranges;
    s->spare_ranges = r->next_spare;
    free(r);
  }
  ab_map_free(&s->live);
  ab_map_free(&s->extents);
  ab_map_free(&s->pool.large);
  ab_map_free(&s->pool.small_live);
  free(s->plan);
  free(s->pool.small);
  free(s->pool.spare_small);
  free(s);
  return st;
}

static const ab_device_ops_t sim_ops = {
    .malloc = sim_malloc,
    .free = sim_free,
    .va_reserve = sim_va_reserve,
    .va_release = sim_va_release,
    .map = sim_map,
    .unmap = sim_unmap,
    .pool_configure = sim_pool_configure,
    .malloc_async = sim_malloc_async,
    .free_async = sim_free_async,
    .pool_trim = sim_pool_trim,
    .pool_reserved = sim_pool_reserved,
    .pool_reset_peak = sim_pool_reset_peak,
    .mem_info = sim_mem_info,
    .synchronize = sim_synchronize,
    .stream_synchronize = sim_stream_synchronize,
    .stream_handle = sim_stream_handle,
    .close = sim_close,
};

ab_status ab_sim_open(const char *name, uint64_t total_bytes, const ab_device_config_t *cfg,
                      ab_device_t **out, ab_diag_t *diag) {
  if (total_bytes <= AB_SIM_CONTEXT_BYTES || total_bytes > VA_END - VA_BASE)
    return ab_diag_set(diag, AB_ERR_INVALID, "--device sim:%s: capacity must be from %llu bytes to 100 TiB", name,
                       (unsigned long long)AB_SIM_CONTEXT_BYTES + 1);
  if (cfg->faults.fail_rate < 0 || cfg->faults.fail_rate > 1)
    return ab_diag_set(diag, AB_ERR_INVALID, "fault rate must be from 0 to 1");
  sim_t *s = calloc(1, sizeof *s);
  if (s == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  s->dev.ops = &sim_ops;
  s->dev.kind = AB_DEVICE_SIM;
  snprintf(s->dev.name, sizeof s->dev.name, "sim:%s", name);
  s->dev.total_bytes = total_bytes;
  s->dev.granule_bytes = AB_GRANULE_BYTES;
  s->usable_bytes = total_bytes - AB_SIM_CONTEXT_BYTES;
  ab_tree_init(&s->va_by_addr, cmp_addr);
  ab_tree_init(&s->va_by_size, cmp_size);
  ab_tree_init(&s->resvs, cmp_resv);
  ab_map_init(&s->live);
  ab_map_init(&s->extents);
  ab_map_init(&s->pool.large);
  ab_map_init(&s->pool.small_live);
  s->pool.open = SIZE_MAX;
  s->faults = cfg->faults;
  if (cfg->plan_len) {
    s->plan = malloc(cfg->plan_len * sizeof *s->plan);
    if (s->plan == NULL) {
      free(s);
      return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
    }
    memcpy(s->plan, cfg->plan, cfg->plan_len * sizeof *s->plan);
    s->plan_len = cfg->plan_len;
  }
  s->rng = ab_rng_seed(cfg->faults.fail_seed);
  s->cost_model = cfg->cost_model;
  va_range_t *all = range_new(s, VA_BASE, VA_END - VA_BASE);
  if (all == NULL) {
    free(s->plan);
    free(s);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  range_insert(s, all);
  *out = &s->dev;
  return AB_OK;
}
