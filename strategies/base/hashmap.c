#include "base/hashmap.h"

#include <stdlib.h>

/* Fibonacci hashing: device addresses are 256-byte aligned, so their low bits carry
 * nothing; the multiply moves the varying bits up, and the top bits index the table. */
static size_t slot_of(const ab_map_t *m, uint64_t key) {
  return (size_t)((key * 0x9E3779B97F4A7C15ULL) >> 32) & (m->cap - 1);
}

void ab_map_init(ab_map_t *m) {
  m->keys = m->vals = NULL;
  m->cap = m->n = 0;
}

void ab_map_free(ab_map_t *m) {
  free(m->keys);
  free(m->vals);
  ab_map_init(m);
}

static ab_status grow(ab_map_t *m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  uint64_t *keys = calloc(cap, sizeof *keys), *vals = malloc(cap * sizeof *vals);
  if (keys == NULL || vals == NULL) {
    free(keys);
    free(vals);
    return AB_ERR_INTERNAL;
  }
  ab_map_t bigger = {keys, vals, cap, 0};
  for (size_t i = 0; i < m->cap; i++)
    if (m->keys[i]) {
      size_t s = slot_of(&bigger, m->keys[i]);
      while (keys[s]) s = (s + 1) & (cap - 1);
      keys[s] = m->keys[i];
      vals[s] = m->vals[i];
      bigger.n++;
    }
  free(m->keys);
  free(m->vals);
  *m = bigger;
  return AB_OK;
}

ab_status ab_map_slot_or_add(ab_map_t *m, uint64_t key, size_t *slot, bool *added) {
  if (key == 0) return AB_ERR_INTERNAL;
  if ((m->n + 1) * 4 > m->cap * 3) AB_TRY(grow(m)); /* load factor at most 3/4 */
  size_t s = slot_of(m, key);
  while (m->keys[s] && m->keys[s] != key) s = (s + 1) & (m->cap - 1);
  *added = m->keys[s] == 0;
  if (*added) {
    m->n++;
    m->keys[s] = key;
    m->vals[s] = 0;
  }
  *slot = s;
  return AB_OK;
}

ab_status ab_map_put(ab_map_t *m, uint64_t key, uint64_t val) {
  size_t s;
  bool added;
  AB_TRY(ab_map_slot_or_add(m, key, &s, &added));
  m->vals[s] = val;
  return AB_OK;
}

bool ab_map_get(const ab_map_t *m, uint64_t key, uint64_t *val) {
  if (m->cap == 0 || key == 0) return false;
  for (size_t s = slot_of(m, key); m->keys[s]; s = (s + 1) & (m->cap - 1))
    if (m->keys[s] == key) {
      if (val) *val = m->vals[s];
      return true;
    }
  return false;
}

size_t ab_map_slot(const ab_map_t *m, uint64_t key) {
  if (m->cap == 0 || key == 0) return m->cap;
  for (size_t s = slot_of(m, key); m->keys[s]; s = (s + 1) & (m->cap - 1))
    if (m->keys[s] == key) return s;
  return m->cap;
}

void ab_map_remove_slot(ab_map_t *m, size_t s) {
  size_t mask = m->cap - 1;
  /* Backward shift: pull later entries of the probe run into the hole when their home slot
   * does not lie (cyclically) between the hole and their current slot. */
  size_t hole = s;
  for (size_t j = (s + 1) & mask; m->keys[j]; j = (j + 1) & mask) {
    size_t home = slot_of(m, m->keys[j]);
    bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (!stays) {
      m->keys[hole] = m->keys[j];
      m->vals[hole] = m->vals[j];
      hole = j;
    }
  }
  m->keys[hole] = 0;
  m->n--;
}

bool ab_map_take(ab_map_t *m, uint64_t key, uint64_t *val) {
  size_t s = ab_map_slot(m, key);
  if (s == m->cap) return false;
  if (val) *val = m->vals[s];
  ab_map_remove_slot(m, s);
  return true;
}
