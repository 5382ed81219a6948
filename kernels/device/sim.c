/* sim.c: the simulated card: capacity, the address space, plain allocation, virtual memory
 * and faults. Its stream-ordered pool is sim_pool.c, its cost model sim_cost.c, its address
 * space sim_vaspace.c, its placement sim_place.c, and the state they share sim_card.h. See sim.h for what it models. */
#include "kernels/device/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/units.h"
#include "kernels/device/sim_card.h"
#include "kernels/device/sim_cost.h"
#include "kernels/device/sim_place.h"
#include "kernels/device/sim_pool.h"
#include "kernels/device/sim_vaspace.h"

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

/* ---- the address space ------------------------------------------------------------------
 * Free ranges are kept twice: by address, to merge neighbours, and by (size, address), to
 * pick the smallest range that fits (sim_vaspace.c). Requests of 2 MiB and more are placed in
 * chunks cut from them as the driver cuts its own (sim_place.c); smaller ones, reservations
 * and the pool's range are carved from the top of the smallest range that holds them. */

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

/* Addresses from the card's space; running out of them is running out of memory. */
static ab_status va_alloc(sim_t *s, uint64_t bytes, uint64_t align, ab_dptr_t *out) {
  ab_status st = ab_sim_va_alloc(&s->va, bytes, align, out);
  if (st == AB_ERR_OOM) ab_diag_set(&s->dev.diag, AB_ERR_OOM, "sim device: virtual address space exhausted");
  return st;
}

/* cudaMalloc hands out 512-byte granules for small sizes and 2 MiB pages from 2 MiB up. */
static uint64_t va_align_for(uint64_t bytes) { return bytes >= AB_GRANULE_BYTES ? AB_GRANULE_BYTES : 512; }
static uint64_t va_size_for(uint64_t bytes) {
  uint64_t a = va_align_for(bytes);
  return (bytes + a - 1) & ~(a - 1);
}

/* From 2 MiB up, a malloc's addresses are placed as the driver places them (sim_place.c,
 * Note [Driver placement]); below, best fit at the top of a free range. `size` is
 * va_size_for's. */
static ab_status place_alloc(sim_t *s, uint64_t size, ab_dptr_t *out) {
  ab_status st = ab_sim_place_alloc(&s->place, &s->va, size, out);
  if (st == AB_ERR_OOM) ab_diag_set(&s->dev.diag, AB_ERR_OOM, "sim device: virtual address space exhausted");
  return st;
}

static bool va_take(sim_t *s, ab_dptr_t at, uint64_t size) {
  return size >= AB_GRANULE_BYTES ? ab_sim_place_take(&s->place, &s->va, at, size) : ab_sim_va_take(&s->va, at, size);
}

static ab_status va_give_back(sim_t *s, ab_dptr_t at, uint64_t size) {
  return size >= AB_GRANULE_BYTES ? ab_sim_place_free(&s->place, &s->va, at, size) : ab_sim_va_free(&s->va, at, size);
}

/* ---- plain allocation ------------------------------------------------------------------ */

/* The 2 MiB pages a live allocation at p touches, counted in or out of malloc_pages. One of
 * 2 MiB and more lies in whole pages that nothing else shares (a chunk is cut from the
 * address space in whole pages, and its allocations in whole pages of it, sim_place.c), so
 * its pages are counted without the map's searches; a smaller one's end pages may be shared
 * (Note [End pages] in sim_cost.c). */
static ab_status pages_add(sim_t *s, ab_dptr_t p, uint64_t bytes, int64_t *pages) {
  if (bytes < AB_GRANULE_BYTES) return ab_sim_touched_add(&s->malloc_pages, p, bytes, pages);
  *pages = (int64_t)(va_size_for(bytes) / AB_GRANULE_BYTES);
  s->malloc_pages.pages += (uint64_t)*pages;
  return AB_OK;
}

static void pages_remove(sim_t *s, ab_dptr_t p, uint64_t bytes, int64_t *pages) {
  if (bytes < AB_GRANULE_BYTES) {
    ab_sim_touched_remove(&s->malloc_pages, p, bytes, pages);
    return;
  }
  uint64_t whole = va_size_for(bytes) / AB_GRANULE_BYTES;
  *pages = -(int64_t)whole;
  s->malloc_pages.pages -= whole;
}

static ab_status sim_malloc(ab_device_t *d, uint64_t bytes, ab_dptr_t *out) {
  sim_t *s = sim_of(d);
  CHARGE(s, ab_sim_cost_ns(AB_SIM_CALL_MALLOC, bytes));
  if (bytes == 0) return ab_diag_set(&d->diag, AB_ERR_INVALID, "sim device: malloc of 0 bytes");
  if (ab_sim_fault_fires(s) || !ab_sim_card_has_room(s, bytes)) return AB_ERR_OOM;
  ab_dptr_t p;
  const ab_addr_hint_t *h = s->plan_next < s->plan_len ? &s->plan[s->plan_next++] : NULL;
  ab_dptr_t planned = h && h->bytes == bytes && h->addr % va_align_for(bytes) == 0 ? h->addr : 0;
  uint64_t size = va_size_for(bytes);
  if (planned && va_take(s, planned, size)) {
    p = planned;
  } else {
    ab_status st = size >= AB_GRANULE_BYTES ? place_alloc(s, size, &p) : va_alloc(s, size, va_align_for(bytes), &p);
    if (st != AB_OK) {
      ab_sim_follow_fini(&s->follow); /* its address space decided */
      return st;
    }
  }
  int64_t pages = 0;
  if (ab_map_put(&s->live, p, bytes) != AB_OK || pages_add(s, p, bytes, &pages) != AB_OK) {
    ab_map_take(&s->live, p, NULL);
    va_give_back(s, p, va_size_for(bytes));
    return AB_ERR_INTERNAL;
  }
  ab_device_footprint_add(d, pages * (int64_t)AB_GRANULE_BYTES);
  ab_sim_follow_alloc(&s->follow, p, size, va_align_for(bytes), size >= AB_GRANULE_BYTES, planned);
  *out = p;
  return AB_OK;
}

static ab_status sim_free(ab_device_t *d, ab_dptr_t p, uint64_t bytes) {
  sim_t *s = sim_of(d);
  size_t slot = ab_map_slot(&s->live, p);
  if (slot == s->live.cap)
    return ab_diag_set(&d->diag, AB_ERR_INVALID,
                       "sim device: free of 0x%llx, which is not a live allocation (double free or foreign pointer)",
                       (unsigned long long)p);
  if (s->live.slots[slot].val != bytes)
    return ab_diag_set(&d->diag, AB_ERR_INVALID, "sim device: free of 0x%llx with size %llu; it was allocated with %llu",
                       (unsigned long long)p, (unsigned long long)bytes, (unsigned long long)s->live.slots[slot].val);
  CHARGE(s, ab_sim_cost_ns(AB_SIM_CALL_FREE, bytes));
  ab_map_remove_slot(&s->live, slot);
  int64_t pages = 0;
  pages_remove(s, p, bytes, &pages);
  ab_device_footprint_add(d, pages * (int64_t)AB_GRANULE_BYTES);
  ab_sim_follow_free(&s->follow, p, va_size_for(bytes), va_size_for(bytes) >= AB_GRANULE_BYTES);
  return va_give_back(s, p, va_size_for(bytes));
}

/* ---- virtual memory -------------------------------------------------------------------- */

static ab_status sim_va_reserve(ab_device_t *d, uint64_t bytes, ab_dptr_t *out) {
  sim_t *s = sim_of(d);
  CHARGE(s, ab_sim_cost_ns(AB_SIM_CALL_VA_RESERVE, bytes));
  if (bytes == 0 || bytes % AB_GRANULE_BYTES)
    return ab_diag_set(&d->diag, AB_ERR_INVALID, "sim device: reserve of %llu bytes, not a positive multiple of the %llu-byte granule",
                       (unsigned long long)bytes, (unsigned long long)AB_GRANULE_BYTES);
  if (ab_sim_fault_fires(s)) return AB_ERR_OOM;
  /* The range first: one past the address space is refused before its map of granules
   * takes host memory in proportion to it. */
  ab_dptr_t base;
  ab_status st = va_alloc(s, bytes, AB_GRANULE_BYTES, &base);
  if (st != AB_OK) {
    ab_sim_follow_fini(&s->follow);
    return st;
  }
  resv_t *r = calloc(1, sizeof *r);
  uint64_t words = (bytes / AB_GRANULE_BYTES + 63) / 64;
  if (r == NULL || (r->mapped = calloc(words, sizeof *r->mapped)) == NULL) {
    free(r);
    ab_sim_va_free(&s->va, base, bytes);
    return ab_diag_set(&d->diag, AB_ERR_INTERNAL, "sim device: out of host memory");
  }
  r->base = base;
  r->bytes = bytes;
  ab_tree_insert(&s->resvs, &r->node);
  ab_sim_follow_alloc(&s->follow, base, bytes, AB_GRANULE_BYTES, false, 0);
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
  CHARGE(s, ab_sim_cost_ns(AB_SIM_CALL_VA_RELEASE, bytes));
  resv_t *r = resv_containing(s, base, bytes);
  if (r == NULL || r->base != base || r->bytes != bytes)
    return ab_diag_set(&d->diag, AB_ERR_INVALID, "sim device: release of [0x%llx, +%llu), which is not a reservation",
                       (unsigned long long)base, (unsigned long long)bytes);
  if (r->mapped_bytes)
    return ab_diag_set(&d->diag, AB_ERR_INVALID, "sim device: release of reservation 0x%llx with %llu bytes still mapped",
                       (unsigned long long)base, (unsigned long long)r->mapped_bytes);
  ab_tree_remove(&s->resvs, &r->node);
  ab_sim_follow_free(&s->follow, r->base, r->bytes, false);
  ab_status st = ab_sim_va_free(&s->va, r->base, r->bytes);
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
  CHARGE(s, (double)(bytes / AB_GRANULE_BYTES) * ab_sim_cost_ns(AB_SIM_CALL_CREATE, AB_GRANULE_BYTES) +
                ab_sim_cost_ns(AB_SIM_CALL_MAP, bytes) + ab_sim_cost_ns(AB_SIM_CALL_SET_ACCESS, bytes));
  uint64_t g0 = (at - r->base) / AB_GRANULE_BYTES, ng = bytes / AB_GRANULE_BYTES;
  for (uint64_t g = g0; g < g0 + ng; g++)
    if (granule_mapped(r, g))
      return ab_diag_set(&d->diag, AB_ERR_INVALID, "sim device: map of [0x%llx, +%llu) over a mapped granule at 0x%llx",
                         (unsigned long long)at, (unsigned long long)bytes,
                         (unsigned long long)(r->base + g * AB_GRANULE_BYTES));
  if (ab_sim_fault_fires(s) || !ab_sim_card_has_room(s, bytes)) return AB_ERR_OOM;
  if (ab_map_put(&s->extents, at, bytes) != AB_OK) return AB_ERR_INTERNAL;
  for (uint64_t g = g0; g < g0 + ng; g++) r->mapped[g / 64] |= 1ULL << (g % 64);
  r->mapped_bytes += bytes;
  ab_device_footprint_add(d, (int64_t)bytes); /* physical memory is created in whole granules */
  return AB_OK;
}

static ab_status sim_unmap(ab_device_t *d, ab_dptr_t at, uint64_t bytes) {
  sim_t *s = sim_of(d);
  resv_t *r;
  AB_TRY(vm_range(s, "unmap", at, bytes, &r));
  CHARGE(s, (double)(bytes / AB_GRANULE_BYTES) * ab_sim_cost_ns(AB_SIM_CALL_UNMAP_RELEASE, AB_GRANULE_BYTES));
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
  ab_device_footprint_add(d, -(int64_t)bytes);
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
  CHARGE(s, ab_sim_cost_ns(AB_SIM_CALL_SYNC, 0));
  if (s->pool.release_threshold != UINT64_MAX) return ab_sim_pool_trim(d, s->pool.release_threshold);
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
  return s->live.n + s->pool.live.n;
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
  for (ab_tnode_t *n; (n = ab_tree_first(&s->resvs)) != NULL;) { /* out of the tree first: a walk reads its parents */
    ab_tree_remove(&s->resvs, n);
    resv_t *r = AB_CONTAINER_OF(n, resv_t, node);
    free(r->mapped);
    free(r);
  }
  ab_sim_pool_free(&s->pool);
  ab_sim_place_fini(&s->place);
  ab_sim_follow_fini(&s->follow);
  ab_sim_va_free_all(&s->va);
  ab_sim_touched_free(&s->malloc_pages);
  ab_map_free(&s->live);
  ab_map_free(&s->extents);
  free(s->plan);
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
    .pool_configure = ab_sim_pool_configure,
    .malloc_async = ab_sim_malloc_async,
    .free_async = ab_sim_free_async,
    .pool_trim = ab_sim_pool_trim,
    .pool_reserved = ab_sim_pool_reserved,
    .pool_reset_peak = ab_sim_pool_reset_peak,
    .mem_info = sim_mem_info,
    .synchronize = sim_synchronize,
    .stream_synchronize = sim_stream_synchronize,
    .stream_handle = sim_stream_handle,
    .close = sim_close,
};

ab_status ab_sim_open(const char *name, uint64_t total_bytes, const ab_device_config_t *cfg,
                      ab_device_t **out, ab_diag_t *diag) {
  if (total_bytes <= AB_SIM_CONTEXT_BYTES || total_bytes > AB_SIM_VA_END - AB_SIM_VA_BASE)
  {
    char lo[32], hi[32];
    return ab_diag_set(diag, AB_ERR_INVALID, "--device sim:%s: capacity must be more than %s, and at most %s (%llu bytes)",
                       name, ab_format_bytes(AB_SIM_CONTEXT_BYTES, lo, sizeof lo),
                       ab_format_bytes(AB_SIM_VA_END - AB_SIM_VA_BASE, hi, sizeof hi),
                       (unsigned long long)(AB_SIM_VA_END - AB_SIM_VA_BASE));
  }
  if (cfg->placement > AB_PLACEMENT_VARIANTS)
    return ab_diag_set(diag, AB_ERR_INVALID, "placement variant %u: the simulated card has 0 to %d", cfg->placement,
                       AB_PLACEMENT_VARIANTS);
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
  ab_tree_init(&s->resvs, cmp_resv);
  ab_sim_place_init(&s->place, cfg->placement);
  ab_map_init(&s->live);
  ab_sim_touched_init(&s->malloc_pages, AB_GRANULE_BYTES);
  ab_map_init(&s->extents);
  ab_sim_pool_init(&s->pool);
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
  bool follow = cfg->follow_variants && cfg->placement == 0;
  if (ab_sim_va_init(&s->va, AB_SIM_VA_BASE, AB_SIM_VA_END - AB_SIM_VA_BASE) != AB_OK ||
      ab_sim_follow_init(&s->follow, follow, AB_SIM_VA_BASE, AB_SIM_VA_END - AB_SIM_VA_BASE, &s->dev.variants_alike) != AB_OK) {
    ab_sim_va_free_all(&s->va);
    ab_sim_touched_free(&s->malloc_pages);
    free(s->plan);
    free(s);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  *out = &s->dev;
  return AB_OK;
}
