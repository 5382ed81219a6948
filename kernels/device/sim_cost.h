/* sim_cost.h: the simulated card's cost model, the host time of each device call, and the
 * pages live allocations touch (sim_cost.c, Note [Driver footprint]). Used by the files of
 * the card only; the rest of allocbench sees sim.h and device.h. */
#ifndef AB_SIM_COST_H
#define AB_SIM_COST_H

#include <stdint.h>

#include "kernels/base/status.h"
#include "kernels/device/device.h"

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

#endif
