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

#include "base/hashmap.h"
#include "base/rng.h"
#include "base/tree.h"
#include "device/sim.h"

/* The x86-64 user address space above 4 GiB, where a driver's addresses lie: an address plan
 * (device.h) of recorded cudaMalloc addresses fits in it. Every address the card hands out
 * lies in it. */
#define AB_SIM_VA_BASE 0x100000000ULL   /* 4 GiB */
#define AB_SIM_VA_END 0x800000000000ULL /* 128 TiB */

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

/* ---- the address space (sim_vaspace.c) ---------------------------------------------------- */

/* A space of addresses: free ranges by address and by (size, address), the latter in bins
 * (Note [Size bins] in sim_vaspace.c). The card has one. */
#define AB_SIM_VA_BINS 4096 /* ranges below 2 MiB, one bin per 512 bytes */
typedef struct vaspace_s {
  ab_tree_t by_addr;
  ab_tree_t *bins;  /* AB_SIM_VA_BINS trees by (size, address) */
  ab_tree_t large;  /* the ranges past the bins, by (size, address) */
  uint64_t full[AB_SIM_VA_BINS / 64], full_words; /* bins not empty; words of full not 0 */
  struct va_range_s *spare; /* unused range nodes */
} vaspace_t;

/* Starts the space as one free range [base, base + bytes). AB_ERR_INTERNAL: out of host
 * memory. */
ab_status ab_sim_va_init(vaspace_t *v, ab_dptr_t base, uint64_t bytes);
/* Releases every range, free or not. */
void ab_sim_va_free_all(vaspace_t *v);
/* Carves `bytes` aligned to `align` (a power of two) from the smallest free range that holds
 * them, at its top. AB_ERR_OOM when none does (the driver's answer too), AB_ERR_INTERNAL when
 * host memory ran out. */
ab_status ab_sim_va_alloc(vaspace_t *v, uint64_t bytes, uint64_t align, ab_dptr_t *out);
/* Returns a range to the space, merged with free neighbours. */
ab_status ab_sim_va_free(vaspace_t *v, ab_dptr_t base, uint64_t bytes);
/* Carves exactly [base, base + bytes) out of the free ranges; false if it is not all free
 * (or host memory ran out). */
bool ab_sim_va_take(vaspace_t *v, ab_dptr_t base, uint64_t bytes);
/* Carves `bytes` aligned to `align` from the top of the highest free range larger than them
 * (Note [Driver placement]), or, passing over `skip` such ranges, of a lower one (the lowest
 * there is when there are fewer: Note [Placement bands]). */
ab_status ab_sim_va_alloc_larger(vaspace_t *v, uint64_t bytes, uint64_t align, unsigned skip, ab_dptr_t *out);

/* ---- the driver's placement of cudaMalloc (sim_place.c, Note [Driver placement]) ----------- */

/* The chunks of address space the card's allocations of 2 MiB and more are placed in. */
typedef struct place_s {
  ab_tree_t chunks;             /* held chunks by base */
  struct place_chunk_s **order; /* by creation; NULL where a chunk was given back */
  size_t n, cap, held;          /* slots used, slots, chunks held */
  uint64_t *room;               /* 2 * cap: the largest room, per range of the order */
  unsigned variant;             /* 0: the rules as measured; else Note [Placement bands]'s */
  bool started;                 /* a request was placed: the context's holes are made */
  ab_rng_t rng;                 /* the variant's draws */
} place_t;

/* Starts an empty placement under `variant` (0 .. AB_PLACEMENT_VARIANTS, device.h). */
void ab_sim_place_init(place_t *p, unsigned variant);
void ab_sim_place_fini(place_t *p);
/* Places `bytes` (a multiple of 2 MiB) as the driver does, taking new chunks from va.
 * AB_ERR_OOM when the address space has no room, AB_ERR_INTERNAL when host memory ran out. */
ab_status ab_sim_place_alloc(place_t *p, vaspace_t *va, uint64_t bytes, ab_dptr_t *out);
/* Takes exactly [at, at + bytes) as a chunk of its own (a recorded address); false if it is
 * not free. */
bool ab_sim_place_take(place_t *p, vaspace_t *va, ab_dptr_t at, uint64_t bytes);
/* Frees an allocation placed by the two above; a chunk left empty goes back to va. */
ab_status ab_sim_place_free(place_t *p, vaspace_t *va, ab_dptr_t at, uint64_t bytes);

/* ---- pages touched (sim_cost.c, Note [Driver footprint]) ---------------------------------- */

/* Live allocations per page of a fixed size: the pages any of them touches are the ones
 * the driver backs. */
typedef struct touched_s {
  unsigned shift;      /* log2 of the page's bytes, a power of two */
  uint32_t **leaves;   /* per end page of a live allocation, the allocations touching it
                        * (Note [End pages] in sim_cost.c); NULL until the first */
  uint64_t npages;     /* pages the table can count: the card's space, in whole leaves */
  uint64_t pages;      /* pages with at least one, the inner pages of each included */
} touched_t;

void ab_sim_touched_init(touched_t *t, uint64_t page_bytes);
void ab_sim_touched_free(touched_t *t);
/* Counts [at, at + bytes) in (add) or out; the change in pages touched goes to *delta_pages.
 * AB_ERR_INTERNAL: out of host memory (nothing changed). */
ab_status ab_sim_touched_add(touched_t *t, ab_dptr_t at, uint64_t bytes, int64_t *delta_pages);
void ab_sim_touched_remove(touched_t *t, ab_dptr_t at, uint64_t bytes, int64_t *delta_pages);

/* ---- the stream-ordered pool (sim_pool.c says how it works) --------------------------------- */

typedef struct pool_s {
  uint64_t release_threshold; /* bytes kept across synchronisations (CUDA's default: 0) */
  ab_dptr_t base;             /* its address range, taken from the card's at first use; 0: none */
  uint64_t bytes;
  ab_tree_t holes;            /* free ranges below top, by address (sim_pool.c) */
  struct pool_hole_s *newest; /* the same, the one freed or cut last first */
  ab_dptr_t top;              /* [top, base + bytes): never handed out, or back whole */
  touched_t chunks;           /* its chunks touched by live allocations */
  uint64_t held;              /* chunks held (backed by memory); at least chunks.pages */
  uint64_t peak_bytes;
  ab_map_t live;              /* address -> bytes */
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
  vaspace_t va;     /* the card's addresses */
  place_t place;    /* where its allocations of 2 MiB and more lie */
  ab_map_t live;    /* malloc'd address -> bytes */
  touched_t malloc_pages; /* the 2 MiB pages live malloc'd allocations touch */
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

#endif
