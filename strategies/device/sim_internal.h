/* sim_internal.h: what the files of the simulated card share: the card itself (sim.c: the
 * address space, plain allocation, virtual memory, faults), its stream-ordered pool
 * (sim_pool.c) and its cost model (sim_cost.c). No other file includes it; the rest of
 * allocbench sees sim.h and device.h.
 *
 * The names are file-local in spirit (sim_t, pool_t): the three files are one module.
 * Not thread-safe, as every device.
 */
#ifndef AB_SIM_INTERNAL_H
#define AB_SIM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "hashmap.h"
#include "rng.h"
#include "sim.h"
#include "tree.h"

/* ---- the cost model (sim_cost.c) ----------------------------------------------------------- */

/* The device calls the model prices. */
typedef enum ab_sim_call_e {
  AB_SIM_CALL_MALLOC,        /* cudaMalloc */
  AB_SIM_CALL_FREE,          /* cudaFree */
  AB_SIM_CALL_CREATE,        /* cuMemCreate of a physical allocation */
  AB_SIM_CALL_MAP,           /* cuMemMap */
  AB_SIM_CALL_SET_ACCESS,    /* cuMemSetAccess */
  AB_SIM_CALL_UNMAP_RELEASE, /* cuMemUnmap and cuMemRelease of a physical allocation */
  AB_SIM_CALL_VA_RESERVE,    /* cuMemAddressReserve */
  AB_SIM_CALL_VA_RELEASE,    /* cuMemAddressFree */
  AB_SIM_CALL_MALLOC_ASYNC,  /* cudaMallocAsync served by the pool */
  AB_SIM_CALL_FREE_ASYNC,    /* cudaFreeAsync */
  AB_SIM_CALL_SYNC,          /* a synchronisation of an idle device */
} ab_sim_call_t;

/* The host time in ns of one call of `bytes` (ignored where the cost does not depend on it). */
double ab_sim_cost_ns(ab_sim_call_t call, uint64_t bytes);

/* ---- the stream-ordered pool (sim_pool.c says how it works) --------------------------------- */

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

/* Sets up an empty pool, and frees what it holds on the host. */
void ab_sim_pool_init(pool_t *p);
void ab_sim_pool_free(pool_t *p);

/* The pool's calls of the device vtable (device.h). */
ab_status ab_sim_pool_configure(ab_device_t *d, uint64_t release_threshold);
ab_status ab_sim_malloc_async(ab_device_t *d, uint64_t bytes, unsigned stream, ab_dptr_t *out);
ab_status ab_sim_free_async(ab_device_t *d, ab_dptr_t ptr, uint64_t bytes, unsigned stream);
ab_status ab_sim_pool_trim(ab_device_t *d, uint64_t keep_bytes);
ab_status ab_sim_pool_reset_peak(ab_device_t *d);
ab_status ab_sim_pool_reserved(ab_device_t *d, uint64_t *current, uint64_t *peak);

/* ---- the card (sim.c) ------------------------------------------------------------------------ */

typedef struct sim_s {
  ab_device_t dev; /* first: the device.h view */
  uint64_t usable_bytes; /* total less the context */
  ab_tree_t va_by_addr, va_by_size;
  struct va_range_s *spare_ranges; /* unused range nodes (sim_vaspace.c) */
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

static inline sim_t *sim_of(ab_device_t *d) { return (sim_t *)(void *)d; }

/* Adds the modelled time of a call. A macro, so that the cost (logarithms) is computed only
 * when the model is on: a budget search replays with it off. */
#define CHARGE(s, ns)                                              \
  do {                                                             \
    if ((s)->cost_model) (s)->dev.modeled_ns += (uint64_t)(ns);    \
  } while (0)

/* True when an injected fault fires for this allocation-type call. */
static inline bool ab_sim_fault_fires(sim_t *s) {
  s->fault_calls++;
  if (s->faults.fail_nth && s->fault_calls == s->faults.fail_nth) return true;
  if (s->faults.fail_rate > 0) {
    if (ab_rng_uniform(&s->rng) < s->faults.fail_rate) return true;
  }
  return false;
}

/* Physical room on the card (the budget is checked by device.c, or by the pool). */
static inline bool ab_sim_card_has_room(const sim_t *s, uint64_t bytes) {
  return bytes <= s->usable_bytes && s->dev.held_bytes <= s->usable_bytes - bytes;
}

/* ---- the address space (sim_vaspace.c) ---- */

/* Starts the address space as one free range [base, base + bytes). AB_ERR_INTERNAL: out of
 * host memory. */
ab_status ab_sim_va_init(sim_t *s, ab_dptr_t base, uint64_t bytes);
/* Releases every range, free or not, at close. */
void ab_sim_va_free_all(sim_t *s);
/* Carves `bytes` aligned to `align` (a power of two) from the smallest free range of the
 * address space that holds them, at its top. */
ab_status ab_sim_va_alloc(sim_t *s, uint64_t bytes, uint64_t align, ab_dptr_t *out);
/* Returns a range to the address space, merged with free neighbours. */
ab_status ab_sim_va_free(sim_t *s, ab_dptr_t base, uint64_t bytes);
/* Carves exactly [base, base + bytes) out of the free ranges; false if it is not all free
 * (or host memory ran out). */
bool ab_sim_va_take(sim_t *s, ab_dptr_t base, uint64_t bytes);

#endif
