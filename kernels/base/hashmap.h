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

#include "kernels/base/status.h"

/* A key beside its value: a search that finds the key has the value in the same line. */
typedef struct ab_map_slot_s {
  uint64_t key; /* 0 marks an empty slot */
  uint64_t val;
} ab_map_slot_t;

typedef struct ab_map_s {
  ab_map_slot_t *slots;
  size_t cap; /* a power of two, or 0 before the first put */
  size_t n;   /* keys present */
} ab_map_t;

void ab_map_init(ab_map_t *m);
void ab_map_free(ab_map_t *m);
/* Doubles the table (the first: 64 slots). Fails only on host memory. */
ab_status ab_map_grow(ab_map_t *m);

/* The searches below are inline: a replay makes several per event, each a few loads, and
 * a call around each cost as much as the search. ab_map_get and ab_map_take, whose *val is
 * written only when the key is found, stay out of line. */

/* Fibonacci hashing: device addresses are 256-byte aligned, so their low bits carry
 * nothing; the multiply moves the varying bits up, and the top bits index the table. */
static inline size_t ab_map_home(const ab_map_t *m, uint64_t key) {
  return (size_t)((key * 0x9E3779B97F4A7C15ULL) >> 32) & (m->cap - 1);
}

/* The slot of key, added with value 0 when absent (*added says which): one search for a
 * lookup that may be followed by an insertion. Fails only on host memory. */
static inline ab_status ab_map_slot_or_add(ab_map_t *m, uint64_t key, size_t *slot, bool *added) {
  if (key == 0) return AB_ERR_INTERNAL;
  if ((m->n + 1) * 4 > m->cap * 3) AB_TRY(ab_map_grow(m)); /* load factor at most 3/4 */
  size_t s = ab_map_home(m, key);
  while (m->slots[s].key && m->slots[s].key != key) s = (s + 1) & (m->cap - 1);
  *added = m->slots[s].key == 0;
  if (*added) {
    m->n++;
    m->slots[s] = (ab_map_slot_t){key, 0};
  }
  *slot = s;
  return AB_OK;
}

/* Inserts or replaces. */
static inline ab_status ab_map_put(ab_map_t *m, uint64_t key, uint64_t val) {
  size_t s;
  bool added;
  AB_TRY(ab_map_slot_or_add(m, key, &s, &added));
  m->slots[s].val = val;
  return AB_OK;
}

/* The slot of key (its value is m->slots[slot].val), or m->cap when absent: one search for a
 * lookup that may be followed by a removal. */
static inline size_t ab_map_slot(const ab_map_t *m, uint64_t key) {
  if (m->cap == 0 || key == 0) return m->cap;
  for (size_t s = ab_map_home(m, key); m->slots[s].key; s = (s + 1) & (m->cap - 1))
    if (m->slots[s].key == key) return s;
  return m->cap;
}

/* Removes the key at slot, a slot ab_map_slot gave with no change to m since. */
void ab_map_remove_slot(ab_map_t *m, size_t slot);

/* Looks up key; writes the value to *val (may be NULL) if found. */
bool ab_map_get(const ab_map_t *m, uint64_t key, uint64_t *val);
/* Removes key; writes its value to *val (may be NULL). False if absent. */
bool ab_map_take(ab_map_t *m, uint64_t key, uint64_t *val);

#endif
