#include "kernels/base/hashmap.h"

#include <stdlib.h>

#include "kernels/base/hostmem.h"

void ab_map_init(ab_map_t *m) {
  m->slots = NULL;
  m->cap = m->n = 0;
}

void ab_map_free(ab_map_t *m) {
  free(m->slots);
  ab_map_init(m);
}

ab_status ab_map_grow(ab_map_t *m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  ab_map_slot_t *slots = ab_host_memory_zeroed(cap * sizeof *slots);
  if (slots == NULL) return AB_ERR_INTERNAL;
  ab_map_t bigger = {slots, cap, 0};
  for (size_t i = 0; i < m->cap; i++)
    if (m->slots[i].key) {
      size_t s = ab_map_home(&bigger, m->slots[i].key);
      while (slots[s].key) s = (s + 1) & (cap - 1);
      slots[s] = m->slots[i];
      bigger.n++;
    }
  free(m->slots);
  *m = bigger;
  return AB_OK;
}

void ab_map_remove_slot(ab_map_t *m, size_t s) {
  size_t mask = m->cap - 1;
  /* Backward shift: pull later entries of the probe run into the hole when their home slot
   * does not lie (cyclically) between the hole and their current slot. */
  size_t hole = s;
  for (size_t j = (s + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
    size_t home = ab_map_home(m, m->slots[j].key);
    bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (!stays) {
      m->slots[hole] = m->slots[j];
      hole = j;
    }
  }
  m->slots[hole].key = 0;
  m->n--;
}

bool ab_map_get(const ab_map_t *m, uint64_t key, uint64_t *val) {
  size_t s = ab_map_slot(m, key);
  if (s == m->cap) return false;
  if (val) *val = m->slots[s].val;
  return true;
}

bool ab_map_take(ab_map_t *m, uint64_t key, uint64_t *val) {
  size_t s = ab_map_slot(m, key);
  if (s == m->cap) return false;
  if (val) *val = m->slots[s].val;
  ab_map_remove_slot(m, s);
  return true;
}
