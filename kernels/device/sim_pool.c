/* sim_pool.c: the simulated card's stream-ordered pool, cudaMallocAsync's, behind the
 * pool calls of device.h. Its state is the card's (pool_t, sim_card.h); the card (sim.c)
 * lends it an address range, the faults and the device's accounting.
 *
 * As the H200's driver does (sim_cost.c, Note [Driver footprint]): the pool is one range of
 * addresses in which every request, whatever its size, is placed 512-byte aligned at the
 * start of the free range freed or cut last that holds it (else past everything handed out),
 * and memory backs it in chunks of POOL_CHUNK_BYTES. The pool holds as many chunks as the
 * live allocations touch at most: a chunk left empty stays held, to be remapped where the
 * next request needs one, until a synchronisation trims the pool to its release threshold.
 * Reuse ignores streams: on the simulated card every free has completed at once, which is
 * when the driver's opportunistic reuse applies. */
#include <stdlib.h>

#include "kernels/device/sim_pool.h"
#include "kernels/device/sim_card.h"
#include "kernels/device/sim_cost.h"
#include "kernels/device/sim_vaspace.h"

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

/* ---- placement: the last freed range first ---------------------------------------------- */

/* A free range below the pool's top, in the address tree and on the recency list. */
typedef struct pool_hole_s {
  ab_tnode_t node;
  struct pool_hole_s *newer, *older;
  ab_dptr_t base;
  uint64_t bytes;
} hole_t;

#define HOLE(n) AB_CONTAINER_OF(n, hole_t, node)

static int cmp_hole(const ab_tnode_t *a, const ab_tnode_t *b) {
  ab_dptr_t x = HOLE(a)->base, y = HOLE(b)->base;
  return (x > y) - (x < y);
}

static int key_hole(const void *key, const ab_tnode_t *n) {
  ab_dptr_t k = *(const ab_dptr_t *)key, b = HOLE(n)->base;
  return (k > b) - (k < b);
}

static void unlink_recent(pool_t *p, hole_t *h) {
  if (h->newer) h->newer->older = h->older;
  else p->newest = h->older;
  if (h->older) h->older->newer = h->newer;
  h->newer = h->older = NULL;
}

static void make_newest(pool_t *p, hole_t *h) {
  if (p->newest == h) return;
  if (h->newer || h->older) unlink_recent(p, h);
  h->older = p->newest;
  if (p->newest) p->newest->newer = h;
  p->newest = h;
}

static void hole_drop(pool_t *p, hole_t *h) {
  unlink_recent(p, h);
  ab_tree_remove(&p->holes, &h->node);
  free(h);
}

/* Where `bytes` (aligned) go: the start of the newest hole that holds them, its rest then the
 * newest; else the top. Matched the H200's pool footprints on the measured sequences, where
 * best fit packed 10-12% tighter than the driver (Note [Driver footprint]). */
static ab_status place(pool_t *p, uint64_t bytes, ab_dptr_t *at) {
  for (hole_t *h = p->newest; h; h = h->older) {
    if (h->bytes < bytes) continue;
    *at = h->base;
    h->base += bytes; /* its place by address stays: its neighbours are handed out */
    h->bytes -= bytes;
    if (h->bytes == 0)
      hole_drop(p, h);
    else
      make_newest(p, h);
    return AB_OK;
  }
  if (p->base + p->bytes - p->top < bytes) return AB_ERR_OOM; /* the pool's range is full */
  *at = p->top;
  p->top += bytes;
  return AB_OK;
}

/* Gives [at, at + bytes) back, merged with the free ranges beside it; at the top, the top
 * comes down. */
static ab_status unplace(pool_t *p, ab_dptr_t at, uint64_t bytes) {
  ab_tnode_t *pn = ab_tree_floor(&p->holes, &at, key_hole);
  hole_t *prev = pn ? HOLE(pn) : NULL;
  ab_tnode_t *nn = pn ? ab_tree_next(pn) : ab_tree_first(&p->holes);
  hole_t *next = nn ? HOLE(nn) : NULL;
  ab_dptr_t start = at, end = at + bytes;
  if (next && next->base == end) {
    end += next->bytes;
    hole_drop(p, next);
  }
  if (prev && prev->base + prev->bytes == at) start = prev->base;
  else prev = NULL;
  if (end == p->top) {
    if (prev) hole_drop(p, prev);
    p->top = start;
    return AB_OK;
  }
  if (prev == NULL) {
    if ((prev = calloc(1, sizeof *prev)) == NULL) return AB_ERR_INTERNAL;
    prev->base = start;
    ab_tree_insert(&p->holes, &prev->node);
  }
  prev->bytes = end - start;
  make_newest(p, prev);
  return AB_OK;
}

/* Takes the pool's address range from the card's on first use. */
static ab_status pool_open(sim_t *s) {
  pool_t *p = &s->pool;
  if (p->base) return AB_OK;
  ab_sim_follow_fini(&s->follow); /* a range of its own, which the variants do not place */
  uint64_t bytes = (s->usable_bytes * POOL_RANGE_CARDS + POOL_CHUNK_BYTES - 1) / POOL_CHUNK_BYTES * POOL_CHUNK_BYTES;
  ab_dptr_t base;
  ab_status st = ab_sim_va_alloc(&s->va, bytes, POOL_CHUNK_BYTES, &base);
  if (st == AB_ERR_OOM) return ab_diag_set(&s->dev.diag, AB_ERR_OOM, "sim device: virtual address space exhausted");
  if (st != AB_OK) return st;
  p->top = base;
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
  AB_TRY(place(p, placed_bytes(bytes), &va));
  int64_t added = 0;
  if (ab_map_put(&p->live, va, bytes) != AB_OK || ab_sim_touched_add(&p->chunks, va, bytes, &added) != AB_OK) {
    ab_map_take(&p->live, va, NULL);
    unplace(p, va, placed_bytes(bytes));
    return AB_ERR_INTERNAL;
  }
  if (p->chunks.pages > p->held) {
    uint64_t grow = (p->chunks.pages - p->held) * POOL_CHUNK_BYTES;
    if (!ab_device_budget_allows(d, grow) || !ab_sim_card_has_room(s, grow)) {
      ab_sim_touched_remove(&p->chunks, va, bytes, &added);
      ab_map_take(&p->live, va, NULL);
      if (unplace(p, va, placed_bytes(bytes)) != AB_OK) return AB_ERR_INTERNAL;
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
  return unplace(p, ptr, placed_bytes(bytes));
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
  ab_tree_init(&p->holes, cmp_hole);
  p->newest = NULL;
  ab_map_init(&p->live);
  ab_sim_touched_init(&p->chunks, POOL_CHUNK_BYTES);
}

void ab_sim_pool_free(pool_t *p) {
  while (p->newest) hole_drop(p, p->newest);
  ab_sim_touched_free(&p->chunks);
  ab_map_free(&p->live);
}
