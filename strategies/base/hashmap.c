#include "base/hashmap.h"

#include <stdlib.h>

void ab_map_init(ab_map_t *m) {
  m->keys = m->vals = NULL;
  m->cap = m->n = 0;
}

void ab_map_free(ab_map_t *m) {
  free(m->keys);
  free(m->vals);
  ab_map_init(m);
}

ab_status ab_map_grow(ab_map_t *m) {
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
      size_t s = ab_map_home(&bigger, m->keys[i]);
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

void ab_map_remove_slot(ab_map_t *m, size_t s) {
  size_t mask = m->cap - 1;
  /* Backward shift: pull later entries of the probe run into the hole when their home slot
   * does not lie (cyclically) between the hole and their current slot. */
  size_t hole = s;
  for (size_t j = (s + 1) & mask; m->keys[j]; j = (j + 1) & mask) {
    size_t home = ab_map_home(m, m->keys[j]);
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

bool ab_map_get(const ab_map_t *m, uint64_t key, uint64_t *val) {
  size_t s = ab_map_slot(m, key);
  if (s == m->cap) return false;
  if (val) *val = m->vals[s];
  return true;
}

bool ab_map_take(ab_map_t *m, uint64_t key, uint64_t *val) {
  size_t s = ab_map_slot(m, key);
  if (s == m->cap) return false;
  if (val) *val = m->vals[s];
  ab_map_remove_slot(m, s);
  return true;
}
