/* sim_place.h: where the simulated card places cudaMalloc's allocations of 2 MiB and more,
 * as the driver does (sim_place.c, Note [Driver placement]). Used by the files of the card
 * only. */
#ifndef AB_SIM_PLACE_H
#define AB_SIM_PLACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/rng.h"
#include "kernels/base/tree.h"
#include "kernels/device/sim_vaspace.h"

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

#endif
