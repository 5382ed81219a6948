/* free_ranges.h: the free space of one address range, for strategies that place blocks in a
 * region they hold (oracle.c, planned.c). Layer: strategies (strategies/).
 *
 * Offsets from the range's start; the free space is a set of maximal free ranges kept by
 * address (to take a given range and to merge on give) and by size (best fit). The range
 * starts empty and grows at its top. Host memory: one node per free range; a take or give
 * that needs a node and cannot get one is AB_ERR_INTERNAL, with nothing changed.
 * Not thread-safe.
 */
#ifndef AB_FREE_RANGES_H
#define AB_FREE_RANGES_H

#include <stdint.h>

#include <stdbool.h>

#include "kernels/base/hashmap.h"
#include "kernels/base/status.h"
#include "kernels/base/tree.h"
#include "strategies/strategy.h"

typedef struct ab_free_ranges_s {
  ab_tree_t by_addr;   /* free ranges by offset */
  ab_tree_t by_size;   /* the same by (size, offset) */
  uint64_t bytes;      /* the range's size */
  uint64_t free_bytes; /* the sum of the free ranges */
} ab_free_ranges_t;

typedef struct ab_free_range_s {
  ab_tnode_t by_addr, by_size;
  uint64_t off, bytes;
} ab_free_range_t;

void ab_free_ranges_init(ab_free_ranges_t *a);
/* Forgets every range; the range is empty again. */
void ab_free_ranges_clear(ab_free_ranges_t *a);
/* Adds bytes of free space at the top. */
ab_status ab_free_ranges_grow(ab_free_ranges_t *a, uint64_t bytes);
/* Takes [off, off + bytes): AB_ERR_OOM when any of it is not free. */
ab_status ab_free_ranges_take_at(ab_free_ranges_t *a, uint64_t off, uint64_t bytes);
/* Takes the smallest free range that holds bytes, at its start: AB_ERR_OOM when none does. */
ab_status ab_free_ranges_take_best(ab_free_ranges_t *a, uint64_t bytes, uint64_t *off);
/* Gives [off, off + bytes) back, merged with its free neighbours. */
ab_status ab_free_ranges_give(ab_free_ranges_t *a, uint64_t off, uint64_t bytes);
/* The free bytes that end at the top (what a request can use of the top before growing). */
uint64_t ab_free_ranges_top_free(const ab_free_ranges_t *a);
/* The free ranges in address order: first, then next (NULL at the end). */
const ab_free_range_t *ab_free_ranges_first(const ab_free_ranges_t *a);
const ab_free_range_t *ab_free_ranges_next(const ab_free_range_t *f);

/* The segment walk (strategy.h) of a strategy that holds one region [base, base + a->bytes)
 * (none when base is 0) and places blocks in it, and holds other allocations of its own,
 * each a segment: live maps each live address to its requested bytes << 1, | 1 for those in
 * the region, whose blocks are the requested bytes rounded up to align. AB_ERR_INTERNAL when
 * host memory runs out. */
ab_status ab_free_ranges_walk(const ab_free_ranges_t *a, ab_dptr_t base, const ab_map_t *live, uint64_t align,
                             const char *pool, bool expandable, ab_segment_fn fn, void *ctx);

#endif
