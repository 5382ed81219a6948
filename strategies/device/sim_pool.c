/* sim_pool.c: the simulated card's stream-ordered pool, cudaMallocAsync's, behind the
 * pool calls of device.h. Its structs are sim_internal.h's; the card (sim.c) lends it the
 * address space, the faults and the device's accounting.
 *
 * cudaMallocAsync's pool is backed by physical pages that the driver can remap (the CUDA
 * blog: it "defragments the pool by remapping unused memory"), so any free page serves any
 * request: the pool needs as many pages as its live allocations cover. Requests over
 * POOL_SMALL_MAX_BYTES take whole pages; smaller ones are packed, 512-byte aligned, into
 * the open page, and a page of small allocations returns to the pool once all of them are
 * freed. Reuse ignores streams: on the simulated card every free has completed at once,
 * which is when the driver's opportunistic reuse applies. */
#include <stdlib.h>

#include "sim_internal.h"

#define POOL_PAGE_BYTES AB_GRANULE_BYTES
#define POOL_SMALL_MAX_BYTES (1ULL << 20)

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
    if (!ab_device_budget_allows(&s->dev, grow) || !ab_sim_card_has_room(s, grow)) return AB_ERR_OOM;
    CHARGE(s, ab_sim_cost_ns(AB_SIM_CALL_CREATE, grow) + ab_sim_cost_ns(AB_SIM_CALL_MAP, grow) +
                  ab_sim_cost_ns(AB_SIM_CALL_SET_ACCESS, grow));
    pool_set_pages(s, p->pages + (n - free_pages));
  }
  p->pages_used += n;
  return AB_OK;
}

ab_status ab_sim_pool_configure(ab_device_t *d, uint64_t release_threshold) {
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
    AB_TRY(ab_sim_va_alloc(s, POOL_PAGE_BYTES, POOL_PAGE_BYTES, &p->small[i].va));
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

ab_status ab_sim_malloc_async(ab_device_t *d, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  sim_t *s = sim_of(d);
  pool_t *p = &s->pool;
  (void)stream;
  CHARGE(s, ab_sim_cost_ns(AB_SIM_CALL_MALLOC_ASYNC, bytes));
  if (bytes == 0) return ab_diag_set(&d->diag, AB_ERR_INVALID, "sim device: malloc_async of 0 bytes");
  if (ab_sim_fault_fires(s)) return AB_ERR_OOM;
  if (bytes > POOL_SMALL_MAX_BYTES) {
    uint64_t pages = (bytes + POOL_PAGE_BYTES - 1) / POOL_PAGE_BYTES;
    AB_TRY(pool_take(s, pages));
    ab_dptr_t va;
    ab_status st = ab_sim_va_alloc(s, pages * POOL_PAGE_BYTES, POOL_PAGE_BYTES, &va);
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

ab_status ab_sim_free_async(ab_device_t *d, ab_dptr_t ptr, uint64_t bytes, unsigned stream) {
  sim_t *s = sim_of(d);
  pool_t *p = &s->pool;
  (void)stream;
  uint64_t v;
  if (ab_map_get(&p->large, ptr, &v)) {
    if (v != bytes) goto wrong_size;
    CHARGE(s, ab_sim_cost_ns(AB_SIM_CALL_FREE_ASYNC, bytes));
    ab_map_take(&p->large, ptr, NULL);
    uint64_t pages = (bytes + POOL_PAGE_BYTES - 1) / POOL_PAGE_BYTES;
    p->pages_used -= pages;
    return ab_sim_va_free(s, ptr, pages * POOL_PAGE_BYTES);
  }
  if (ab_map_get(&p->small_live, ptr, &v)) {
    if ((v & ((1ULL << 21) - 1)) != bytes) {
      v &= (1ULL << 21) - 1;
      goto wrong_size;
    }
    CHARGE(s, ab_sim_cost_ns(AB_SIM_CALL_FREE_ASYNC, bytes));
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

ab_status ab_sim_pool_trim(ab_device_t *d, uint64_t keep_bytes) {
  sim_t *s = sim_of(d);
  pool_t *p = &s->pool;
  uint64_t keep = (keep_bytes + POOL_PAGE_BYTES - 1) / POOL_PAGE_BYTES;
  if (keep < p->pages_used) keep = p->pages_used;
  if (keep < p->pages) {
    CHARGE(s, ab_sim_cost_ns(AB_SIM_CALL_UNMAP_RELEASE, (p->pages - keep) * POOL_PAGE_BYTES));
    pool_set_pages(s, keep);
  }
  return AB_OK;
}

ab_status ab_sim_pool_reset_peak(ab_device_t *d) {
  sim_t *s = sim_of(d);
  s->pool.peak_bytes = s->pool.pages * POOL_PAGE_BYTES;
  return AB_OK;
}

ab_status ab_sim_pool_reserved(ab_device_t *d, uint64_t *current, uint64_t *peak) {
  sim_t *s = sim_of(d);
  *current = s->pool.pages * POOL_PAGE_BYTES;
  *peak = s->pool.peak_bytes;
  return AB_OK;
}

void ab_sim_pool_init(pool_t *p) {
  ab_map_init(&p->large);
  ab_map_init(&p->small_live);
  p->open = SIZE_MAX;
}

void ab_sim_pool_free(pool_t *p) {
  ab_map_free(&p->large);
  ab_map_free(&p->small_live);
  free(p->small);
  free(p->spare_small);
}
