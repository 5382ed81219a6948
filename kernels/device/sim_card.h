/* sim_card.h: the simulated card's state, which its files share: the card itself (sim.c: the
 * address space, plain allocation, virtual memory, faults) holding its stream-ordered pool
 * (sim_pool.c), its placement (sim_place.c) and its pages touched (sim_cost.c), and the
 * helpers each call uses (the cost charged, the faults, the room left). Data and inline
 * helpers only: the behaviour lives in the files named, each with its own header.
 * No file outside the card includes it; the rest of allocbench sees sim.h and device.h.
 *
 * The names are file-local in spirit (sim_t, pool_t). Not thread-safe, as every device. */
#ifndef AB_SIM_CARD_H
#define AB_SIM_CARD_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/base/hashmap.h"
#include "kernels/base/rng.h"
#include "kernels/base/tree.h"
#include "kernels/device/device.h"
#include "kernels/device/sim_cost.h"
#include "kernels/device/sim_follow.h"
#include "kernels/device/sim_place.h"
#include "kernels/device/sim_vaspace.h"

/* The stream-ordered pool's state (its calls: sim_pool.h). */
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

typedef struct sim_s {
  ab_device_t dev; /* first: the device.h view */
  uint64_t usable_bytes; /* total less the context */
  vaspace_t va;     /* the card's addresses */
  place_t place;    /* where its allocations of 2 MiB and more lie */
  follow_t follow;  /* the placement variants beside it (Note [Variants followed]) */
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
