/* hashmap.h: a map from nonzero 64-bit keys to 64-bit values (open addressing, linear
 * probing, deletion by backward shift, so no tombstones build up under churn).
 *
 * Used where a device address must be looked up in O(1): the simulated device's live set,
 * the pooled strategy's block owners. Key 0 is reserved (no device address is 0).
 * ab_map_put grows the table and can fail only on host memory (AB_ERR_INTERNAL).
 * Not thread-safe.
 */
#ifndef AB_HASHMAP_H
#define AB_HASHMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct ab_map_s {
  uint64_t *keys; /* 0 marks an empty slot */
  uint64_t *vals;
  size_t cap;     /* a power of two, or 0 before the first put */
  size_t n;       /* keys present */
} ab_map_t;

void ab_map_init(ab_map_t *m);
void ab_map_free(ab_map_t *m);
/* Inserts or replaces. */
ab_status ab_map_put(ab_map_t *m, uint64_t key, uint64_t val);
/* Looks up key; writes the value to *val (may be NULL) if found. */
bool ab_map_get(const ab_map_t *m, uint64_t key, uint64_t *val);
/* Removes key; writes its value to *val (may be NULL). False if absent. */
bool ab_map_take(ab_map_t *m, uint64_t key, uint64_t *val);
/* The slot of key (its value is m->vals[slot]), or m->cap when absent: one search for a
 * lookup that may be followed by a removal. */
size_t ab_map_slot(const ab_map_t *m, uint64_t key);
/* The slot of key, added with value 0 when absent (*added says which): one search for a
 * lookup that may be followed by an insertion. Fails only on host memory. */
ab_status ab_map_slot_or_add(ab_map_t *m, uint64_t key, size_t *slot, bool *added);
/* Removes the key at slot, a slot ab_map_slot gave with no change to m since. */
void ab_map_remove_slot(ab_map_t *m, size_t slot);

#endif
