/* sim_pool.c: the simulated card's stream-ordered pool, cudaMallocAsync's, behind the
 * pool calls of device.h. Its structs are sim_internal.h's; the card (sim.c) lends it an
 * address range, the faults and the device's accounting.
 *
 * As the H200's driver does (sim_cost.c, Note [Driver footprint]): the pool is one range of
 * addresses in which every request, whatever its size, is placed 512-byte aligned, best fit,
 * and memory backs it in chunks of POOL_CHUNK_BYTES. The pool holds as many chunks as the
 * live allocations touch at most: a chunk left empty stays held, to be remapped where the
 * next request needs one, until a synchronisation trims the pool to its release threshold.
 * Reuse ignores streams: on the simulated card every free has completed at once, which is
 * when the driver's opportunistic reuse applies. */
#include <stdlib.h>

#include "sim_internal.h"

#define POOL_CHUNK_BYTES (32ULL << 20)
#define POOL_ALIGN_BYTES 512ULL
/* The pool's address range: room for four times the card, so that scattered live
 * allocations run out of memory before they run out of addresses. */
#define POOL_RANGE_CARDS 4

static void pool_set_held(sim_t *s, uint64_t chunks) {
  pool_t *p = &s->pool;
  int64_t delta = ((int64_t)chunks - (int64_t)p->held) * (int64_t)POOL_CHUNK_BYTES;
  ab_device_hold(&s->dev, delta);
  ab_device_footprint_add(&s->dev, delta);
  p->held = chunks;
  if (chunks * POOL_CHUNK_BYTES > p->peak_bytes) p->peak_bytes = chunks * POOL_CHUNK_BYTES;
}

ab_status ab_sim_pool_configure(ab_device_t *d, uint64_t release_threshold) {
  sim_of(d)->pool.release_threshold = release_threshold;
  return AB_OK;
}

/* Takes the pool's address range from the card's on first use. */
static ab_status pool_open(sim_t *s) {
  pool_t *p = &s->pool;
  if (p->base) return AB_OK;
  uint64_t bytes = (s->usable_bytes * POOL_RANGE_CARDS + POOL_CHUNK_BYTES - 1) / POOL_CHUNK_BYTES * POOL_CHUNK_BYTES;
  ab_dptr_t base;
  ab_status st = ab_sim_va_alloc(&s->va, bytes, POOL_CHUNK_BYTES, &base);
  if (st == AB_ERR_OOM) return ab_diag_set(&s->dev.diag, AB_ERR_OOM, "sim device: virtual address space exhausted");
  if (st != AB_OK) return st;
  if (ab_sim_va_init(&p->va, base, bytes) != AB_OK) {
    ab_sim_va_free(&s->va, base, bytes);
    return AB_ERR_INTERNAL;
  }
  p->base = base;
  p->bytes = bytes;
  return AB_OK;
}

static uint64_t placed_bytes(uint64_t bytes) { return (bytes + POOL_ALIGN_BYTES - 1) & ~(POOL_ALIGN_BYTES - 1); }

ab_status ab_sim_malloc_async(ab_device_t *d, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  sim_t *s = sim_of(d);
  pool_t *p = &s->pool;
  (void)stream;
  CHARGE(s, ab_sim_cost_ns(AB_SIM_CALL_MALLOC_ASYNC, bytes));
  if (bytes == 0) return ab_diag_set(&d->diag, AB_ERR_INVALID, "sim device: malloc_async of 0 bytes");
  if (ab_sim_fault_fires(s)) return AB_ERR_OOM;
  AB_TRY(pool_open(s));
  ab_dptr_t va;
  ab_status st = ab_sim_va_alloc(&p->va, placed_bytes(bytes), POOL_ALIGN_BYTES, &va);
  if (st != AB_OK) return st; /* OOM: the pool's range is full */
  int64_t added = 0;
  if (ab_map_put(&p->live, va, bytes) != AB_OK || ab_sim_touched_add(&p->chunks, va, bytes, &added) != AB_OK) {
    ab_map_take(&p->live, va, NULL);
    ab_sim_va_free(&p->va, va, placed_bytes(bytes));
    return AB_ERR_INTERNAL;
  }
  if (p->chunks.pages > p->held) {
    uint64_t grow = (p->chunks.pages - p->held) * POOL_CHUNK_BYTES;
    if (!ab_device_budget_allows(d, grow) || !ab_sim_card_has_room(s, grow)) {
      ab_sim_touched_remove(&p->chunks, va, bytes, &added);
      ab_map_take(&p->live, va, NULL);
      ab_sim_va_free(&p->va, va, placed_bytes(bytes));
      return AB_ERR_OOM;
    }
    CHARGE(s, ab_sim_cost_ns(AB_SIM_CALL_CREATE, grow) + ab_sim_cost_ns(AB_SIM_CALL_MAP, grow) +
                  ab_sim_cost_ns(AB_SIM_CALL_SET_ACCESS, grow));
    pool_set_held(s, p->chunks.pages);
  }
  *out = va;
  return AB_OK;
}

ab_status ab_sim_free_async(ab_device_t *d, ab_dptr_t ptr, uint64_t bytes, unsigned stream) {
  sim_t *s = sim_of(d);
  pool_t *p = &s->pool;
  (void)stream;
  uint64_t had;
  if (!ab_map_get(&p->live, ptr, &had))
    return ab_diag_set(&d->diag, AB_ERR_INVALID,
                       "sim device: free_async of 0x%llx, which is not a live pool allocation (double free or foreign pointer)",
                       (unsigned long long)ptr);
  if (had != bytes)
    return ab_diag_set(&d->diag, AB_ERR_INVALID, "sim device: free_async of 0x%llx with size %llu; it was allocated with %llu",
                       (unsigned long long)ptr, (unsigned long long)bytes, (unsigned long long)had);
  CHARGE(s, ab_sim_cost_ns(AB_SIM_CALL_FREE_ASYNC, bytes));
  ab_map_take(&p->live, ptr, NULL);
  int64_t removed = 0;
  ab_sim_touched_remove(&p->chunks, ptr, bytes, &removed); /* an emptied chunk stays held */
  return ab_sim_va_free(&p->va, ptr, placed_bytes(bytes));
}

ab_status ab_sim_pool_trim(ab_device_t *d, uint64_t keep_bytes) {
  sim_t *s = sim_of(d);
  pool_t *p = &s->pool;
  uint64_t keep = (keep_bytes + POOL_CHUNK_BYTES - 1) / POOL_CHUNK_BYTES;
  if (keep < p->chunks.pages) keep = p->chunks.pages;
  if (keep < p->held) {
    CHARGE(s, ab_sim_cost_ns(AB_SIM_CALL_UNMAP_RELEASE, (p->held - keep) * POOL_CHUNK_BYTES));
    pool_set_held(s, keep);
  }
  return AB_OK;
}

ab_status ab_sim_pool_reset_peak(ab_device_t *d) {
  sim_t *s = sim_of(d);
  s->pool.peak_bytes = s->pool.held * POOL_CHUNK_BYTES;
  return AB_OK;
}

ab_status ab_sim_pool_reserved(ab_device_t *d, uint64_t *current, uint64_t *peak) {
  sim_t *s = sim_of(d);
  *current = s->pool.held * POOL_CHUNK_BYTES;
  *peak = s->pool.peak_bytes;
  return AB_OK;
}

void ab_sim_pool_init(pool_t *p) {
  ab_map_init(&p->live);
  ab_sim_touched_init(&p->chunks, POOL_CHUNK_BYTES);
}

void ab_sim_pool_free(pool_t *p) {
  if (p->base) ab_sim_va_free_all(&p->va);
  ab_sim_touched_free(&p->chunks);
  ab_map_free(&p->live);
}
