/* sim_vaspace.h: the simulated card's address space (sim_vaspace.c). Used by the files of
 * the card only. */
#ifndef AB_SIM_VASPACE_H
#define AB_SIM_VASPACE_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/base/status.h"
#include "kernels/base/tree.h"
#include "kernels/device/device.h"

/* The x86-64 user address space above 4 GiB, where a driver's addresses lie: an address plan
 * (device.h) of recorded cudaMalloc addresses fits in it. Every address the card hands out
 * lies in it. */
#define AB_SIM_VA_BASE 0x100000000ULL   /* 4 GiB */
#define AB_SIM_VA_END 0x800000000000ULL /* 128 TiB */

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

#endif
