/* sim_follow.h: the placement variants followed beside the simulated card's own placement,
 * to tell which of them would order every range the card handed out as it did
 * (sim_follow.c, Note [Variants followed]). Used by the files of the card only. */
#ifndef AB_SIM_FOLLOW_H
#define AB_SIM_FOLLOW_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/base/tree.h"
#include "kernels/device/device.h"
#include "kernels/device/sim_place.h"
#include "kernels/device/sim_vaspace.h"

typedef struct follow_s {
  unsigned *alike;                            /* bit v - 1: variant v ordered every range alike;
                                                 the device's variants_alike */
  bool on;                                    /* the variants are followed (*alike may still be 0) */
  vaspace_t va[AB_PLACEMENT_VARIANTS];        /* each variant's address space ... */
  place_t place[AB_PLACEMENT_VARIANTS];       /* ... and its placement */
  ab_tree_t ranges;                           /* the live ranges, by the card's address */
} follow_t;

/* Starts following every variant (on), or none (a card under a variant of its own), keeping
 * which are alike in *alike.
 * AB_ERR_INTERNAL: out of host memory. */
ab_status ab_sim_follow_init(follow_t *f, bool on, ab_dptr_t va_base, uint64_t va_bytes, unsigned *alike);
/* Stops following: at close, or where the card did what the variants cannot follow (the
 * stream-ordered pool's range, an address space exhausted); none is alike from here on. */
void ab_sim_follow_fini(follow_t *f);

/* The card handed out [at, at + size): placed by its placement (placed: a malloc of 2 MiB and
 * more), else cut from its address space at `align`; planned, where not 0, the address its
 * plan named (device.h), which each variant takes where it is free there, as the card does. */
void ab_sim_follow_alloc(follow_t *f, ab_dptr_t at, uint64_t size, uint64_t align, bool placed, ab_dptr_t planned);
/* The card took back the range at `at` that ab_sim_follow_alloc was told of. */
void ab_sim_follow_free(follow_t *f, ab_dptr_t at, uint64_t size, bool placed);

#endif
