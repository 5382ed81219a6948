/* sim_follow.c: the placement variants followed beside the card's own (sim_follow.h).
 *
 * Note [Variants followed]
 * ~~~~~~~~~~~~~~~~~~~~~~~~
 * A placement band replays the run under each placement variant (Note [Placement bands],
 * sim_place.c): six replays more for each figure. Yet a strategy such as PyTorch's caching
 * allocator reads a device address only by comparing it with another (its free blocks are
 * ordered by size, then address) or as the key of what is live there. Under a placement that
 * puts every range the run holds in the same order as the card's own, such a strategy makes
 * every decision as it made it, so the variant's replay gives the run's figures again. The
 * card therefore follows each variant as it goes: every range it hands out (a malloc, a
 * reservation) is placed by each variant too, from that variant's own address space and
 * placement, fed the same calls the variant's replay would make while the decisions are the
 * same (under an address plan, the plan's address where it is free in the variant's own
 * space, as the card takes it in its own, and the variant's placement elsewhere); a variant
 * is alike while each new range falls, among the live ones, between the same neighbours
 * under it as under the card. The first range it orders otherwise, or cannot place,
 * ends it: from there its replay could decide otherwise, and is made. Whether the strategy is
 * one that reads addresses only so is the strategy's to say (ab_strategy_t.order_only). On a
 * random snapshot of 1.45 M entries, uncapped, every variant ordered all 160 segments of the
 * defaults and both reservations of expandable segments as the card did: the six replays of
 * each band were not needed. A followed range costs six placements and a search of the live
 * ranges, at a device call: a caching allocator makes thousands where it makes millions of
 * requests.
 */
#include "kernels/device/sim_follow.h"

#include <stdlib.h>

typedef struct followed_s {
  ab_tnode_t node;
  ab_dptr_t at;                         /* the card's address */
  ab_dptr_t b[AB_PLACEMENT_VARIANTS];   /* each variant's, where it is alike */
} followed_t;

#define FOLLOWED(n) AB_CONTAINER_OF(n, followed_t, node)

static int cmp_followed(const ab_tnode_t *a, const ab_tnode_t *b) {
  ab_dptr_t x = FOLLOWED(a)->at, y = FOLLOWED(b)->at;
  return (x > y) - (x < y);
}

static int key_followed(const void *key, const ab_tnode_t *n) {
  ab_dptr_t k = *(const ab_dptr_t *)key, at = FOLLOWED(n)->at;
  return (k > at) - (k < at);
}

ab_status ab_sim_follow_init(follow_t *f, bool on, ab_dptr_t va_base, uint64_t va_bytes, unsigned *alike) {
  f->on = false;
  f->alike = alike;
  *alike = 0;
  ab_tree_init(&f->ranges, cmp_followed);
  if (!on) return AB_OK;
  for (unsigned v = 0; v < AB_PLACEMENT_VARIANTS; v++) {
    ab_sim_place_init(&f->place[v], v + 1);
    if (ab_sim_va_init(&f->va[v], va_base, va_bytes) != AB_OK) {
      for (unsigned u = 0; u <= v; u++) ab_sim_place_fini(&f->place[u]);
      for (unsigned u = 0; u < v; u++) ab_sim_va_free_all(&f->va[u]);
      return AB_ERR_INTERNAL;
    }
  }
  f->on = true;
  *f->alike = (1u << AB_PLACEMENT_VARIANTS) - 1;
  return AB_OK;
}

static void free_ranges(follow_t *f) {
  for (ab_tnode_t *n; (n = ab_tree_first(&f->ranges)) != NULL;) {
    ab_tree_remove(&f->ranges, n);
    free(FOLLOWED(n));
  }
}

void ab_sim_follow_fini(follow_t *f) {
  free_ranges(f);
  if (!f->on) return;
  for (unsigned v = 0; v < AB_PLACEMENT_VARIANTS; v++) {
    ab_sim_place_fini(&f->place[v]);
    ab_sim_va_free_all(&f->va[v]);
  }
  f->on = false;
  *f->alike = 0;
}

void ab_sim_follow_alloc(follow_t *f, ab_dptr_t at, uint64_t size, uint64_t align, bool placed, ab_dptr_t planned) {
  if (!*f->alike) return;
  followed_t *r = calloc(1, sizeof *r);
  if (r == NULL) {
    ab_sim_follow_fini(f);
    return;
  }
  r->at = at;
  for (unsigned v = 0; v < AB_PLACEMENT_VARIANTS; v++) {
    if (!(*f->alike & (1u << v))) continue;
    if (planned && (placed ? ab_sim_place_take(&f->place[v], &f->va[v], planned, size)
                           : ab_sim_va_take(&f->va[v], planned, size))) {
      r->b[v] = planned;
      continue;
    }
    ab_status st = placed ? ab_sim_place_alloc(&f->place[v], &f->va[v], size, &r->b[v])
                          : ab_sim_va_alloc(&f->va[v], size, align, &r->b[v]);
    if (st != AB_OK) *f->alike &= ~(1u << v);
  }
  ab_tree_insert(&f->ranges, &r->node);
  /* Alike while it lies between the same neighbours: the live ranges stay in one order. */
  const ab_tnode_t *prev = ab_tree_prev(&r->node), *next = ab_tree_next(&r->node);
  for (unsigned v = 0; v < AB_PLACEMENT_VARIANTS; v++)
    if ((prev && FOLLOWED(prev)->b[v] > r->b[v]) || (next && FOLLOWED(next)->b[v] < r->b[v])) *f->alike &= ~(1u << v);
  if (!*f->alike) ab_sim_follow_fini(f);
}

void ab_sim_follow_free(follow_t *f, ab_dptr_t at, uint64_t size, bool placed) {
  if (!*f->alike) return;
  ab_tnode_t *n = ab_tree_floor(&f->ranges, &at, key_followed);
  if (n == NULL || FOLLOWED(n)->at != at) {
    ab_sim_follow_fini(f); /* not a range it was told of */
    return;
  }
  followed_t *r = FOLLOWED(n);
  for (unsigned v = 0; v < AB_PLACEMENT_VARIANTS; v++) {
    if (!(*f->alike & (1u << v))) continue;
    ab_status st = placed ? ab_sim_place_free(&f->place[v], &f->va[v], r->b[v], size) : ab_sim_va_free(&f->va[v], r->b[v], size);
    if (st != AB_OK) *f->alike &= ~(1u << v);
  }
  ab_tree_remove(&f->ranges, n);
  free(r);
  if (!*f->alike) ab_sim_follow_fini(f);
}
