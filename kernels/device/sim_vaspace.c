/* sim_vaspace.c: the simulated card's address space (vaspace_t, sim_vaspace.h): free
 * ranges kept by address and by size, handed out top-down: best fit by size for the card's
 * small requests, its reservations and the stream-ordered pool's range, the highest range
 * that holds them for cudaMalloc's chunks (Note [Driver placement], sim_place.c).
 *
 * Note [Size bins]
 * ~~~~~~~~~~~~~~~~
 * Best fit takes the smallest free range that holds a request, the lowest of equal ones: the
 * first in (size, address) order. A raw run asks for it on half its calls, and every carve
 * and merge moves a range in that order, so the order is kept in two parts that cost less
 * to search and to change than one tree of every range: ranges below 2 MiB in bins of 512
 * bytes each (a bin holds one size where every size is a multiple of 512, as the card's are),
 * each bin a small tree by (size, address), with one bit per bin that is not empty; larger
 * ranges in one tree. A search finds the first bin not empty from the request's by its bits,
 * and walks on to the larger ranges only where no bin holds it. Bins then tree is the same
 * order as one tree, so the same range is found. */
#include <stdlib.h>
#include <string.h>

#include "kernels/device/sim_vaspace.h"

#define BIN_BYTES 512
#define BINNED_BELOW ((uint64_t)AB_SIM_VA_BINS * BIN_BYTES)
_Static_assert(AB_SIM_VA_BINS == 64 * 64, "one word of full_words covers the bins");

typedef struct va_range_s {
  ab_tnode_t by_addr, by_size;
  ab_dptr_t base;
  uint64_t bytes;
  struct va_range_s *next_spare; /* list of unused nodes */
} va_range_t;

static int cmp_addr(const ab_tnode_t *a, const ab_tnode_t *b) {
  ab_dptr_t x = AB_CONTAINER_OF(a, va_range_t, by_addr)->base, y = AB_CONTAINER_OF(b, va_range_t, by_addr)->base;
  return (x > y) - (x < y);
}

static int cmp_size(const ab_tnode_t *a, const ab_tnode_t *b) {
  const va_range_t *x = AB_CONTAINER_OF(a, va_range_t, by_size), *y = AB_CONTAINER_OF(b, va_range_t, by_size);
  if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
  return (x->base > y->base) - (x->base < y->base);
}

/* The searches below descend the trees themselves, with the orders above written out, where
 * the tree's own functions would call a comparison through a pointer at every node, and
 * take each turn with ab_tree_pick rather than a branch. Same order, same nodes found. */

/* Whether key (bytes, base) orders before key (bytes2, base2) by size: cmp_size's order. */
static inline bool key_before(uint64_t bytes, ab_dptr_t base, uint64_t bytes2, ab_dptr_t base2) {
  return (bytes < bytes2) | ((bytes == bytes2) & (base < base2)); /* no branch to mispredict */
}

static inline bool size_before(uint64_t bytes, ab_dptr_t base, const va_range_t *r) {
  return key_before(bytes, base, r->bytes, r->base);
}

static inline va_range_t *of_addr(ab_tnode_t *n) { return AB_CONTAINER_OF(n, va_range_t, by_addr); }
static inline va_range_t *of_size(ab_tnode_t *n) { return AB_CONTAINER_OF(n, va_range_t, by_size); }

/* The first range of t by size not ordered before (bytes, base), or NULL
 * (ab_tree_lower_bound). */
static ab_tnode_t *size_lower_bound(const ab_tree_t *t, uint64_t bytes, ab_dptr_t base) {
  ab_tnode_t *n = t->root, *best = NULL;
  while (n) {
    const va_range_t *r = of_size(n);
    bool before = key_before(r->bytes, r->base, bytes, base);
    best = ab_tree_pick(before, best, n);
    n = ab_tree_pick(before, n->right, n->left);
  }
  return best;
}

/* The range with the highest base not above `base` (ab_tree_floor), and in *above (unless
 * NULL) the one after it, the lowest base above `base`; each NULL where there is none. One
 * descent finds both: the last node it turned right at is the floor, left at the next. */
static ab_tnode_t *addr_floor(const vaspace_t *v, ab_dptr_t base, ab_tnode_t **above) {
  ab_tnode_t *n = v->by_addr.root, *best = NULL, *next = NULL;
  while (n) {
    bool below = of_addr(n)->base <= base;
    best = ab_tree_pick(below, n, best);
    next = ab_tree_pick(below, next, n);
    n = ab_tree_pick(below, n->right, n->left);
  }
  if (above) *above = next;
  return best;
}

/* ---- the order by size (Note [Size bins]) ------------------------------------------------ */

static ab_tree_t *size_tree(vaspace_t *v, uint64_t bytes) {
  return bytes < BINNED_BELOW ? &v->bins[bytes / BIN_BYTES] : &v->large;
}

/* The first bin from `bin` on that is not empty, or AB_SIM_VA_BINS. */
static size_t full_bin_from(const vaspace_t *v, size_t bin) {
  if (bin >= AB_SIM_VA_BINS) return AB_SIM_VA_BINS;
  size_t w = bin / 64;
  uint64_t bits = v->full[w] & (~0ULL << (bin % 64));
  if (bits == 0) {
    uint64_t words = w + 1 < 64 ? v->full_words & (~0ULL << (w + 1)) : 0;
    if (words == 0) return AB_SIM_VA_BINS;
    w = (size_t)__builtin_ctzll(words);
    bits = v->full[w];
  }
  return w * 64 + (size_t)__builtin_ctzll(bits);
}

static void bin_filled(vaspace_t *v, size_t bin) {
  v->full[bin / 64] |= 1ULL << (bin % 64);
  v->full_words |= 1ULL << (bin / 64);
}

static void bin_emptied(vaspace_t *v, size_t bin) {
  v->full[bin / 64] &= ~(1ULL << (bin % 64));
  if (v->full[bin / 64] == 0) v->full_words &= ~(1ULL << (bin / 64));
}

/* ab_tree_insert by size: equal keys (none occur: bases differ) would go right, as there. */
static void size_insert(vaspace_t *v, va_range_t *r) {
  ab_tree_t *t = size_tree(v, r->bytes);
  ab_tnode_t *parent = NULL, *n = t->root;
  bool left = false;
  while (n) {
    parent = n;
    left = size_before(r->bytes, r->base, of_size(n));
    n = ab_tree_pick(left, n->left, n->right);
  }
  ab_tree_link(t, parent, left, &r->by_size);
  if (t->size == 1 && r->bytes < BINNED_BELOW) bin_filled(v, r->bytes / BIN_BYTES);
}

static void size_remove(vaspace_t *v, va_range_t *r) {
  ab_tree_t *t = size_tree(v, r->bytes);
  ab_tree_remove(t, &r->by_size);
  if (t->size == 0 && r->bytes < BINNED_BELOW) bin_emptied(v, r->bytes / BIN_BYTES);
}

static void addr_insert(vaspace_t *v, va_range_t *r) {
  ab_tnode_t *parent = NULL, *n = v->by_addr.root;
  bool left = false;
  while (n) {
    parent = n;
    left = r->base < of_addr(n)->base;
    n = ab_tree_pick(left, n->left, n->right);
  }
  ab_tree_link(&v->by_addr, parent, left, &r->by_addr);
}

static va_range_t *range_new(vaspace_t *v, ab_dptr_t base, uint64_t bytes) {
  va_range_t *r = v->spare;
  if (r)
    v->spare = r->next_spare;
  else if ((r = malloc(sizeof *r)) == NULL)
    return NULL;
  r->base = base;
  r->bytes = bytes;
  return r;
}

static void range_insert(vaspace_t *v, va_range_t *r) {
  addr_insert(v, r);
  size_insert(v, r);
}

static void range_remove(vaspace_t *v, va_range_t *r) {
  ab_tree_remove(&v->by_addr, &r->by_addr);
  size_remove(v, r);
}

static void range_drop(vaspace_t *v, va_range_t *r) {
  range_remove(v, r);
  r->next_spare = v->spare;
  v->spare = r;
}

/* Changes a range's size and, maybe, its base, where that keeps its order among the ranges
 * by address (a piece carved from its top, a neighbour merged into it): only its place by
 * size moves, which halves the tree work of every device call. */
static void range_resize(vaspace_t *v, va_range_t *r, ab_dptr_t base, uint64_t bytes) {
  /* In place when the new key keeps its tree and its place there, which spares taking the
   * range out and putting it back: a key that grows can pass only the ranges after it, one
   * that shrinks those before. */
  ab_tnode_t *n = &r->by_size;
  bool stays = size_tree(v, bytes) == size_tree(v, r->bytes);
  if (stays) {
    bool grows = key_before(r->bytes, r->base, bytes, base);
    ab_tnode_t *beside = grows ? ab_tree_next(n) : ab_tree_prev(n);
    const va_range_t *b = beside ? of_size(beside) : NULL;
    stays = b == NULL || (grows ? key_before(bytes, base, b->bytes, b->base) : key_before(b->bytes, b->base, bytes, base));
  }
  if (!stays) size_remove(v, r);
  r->base = base;
  r->bytes = bytes;
  if (!stays) size_insert(v, r);
}

/* Cuts [start, start + bytes) out of free range r, which holds it. */
static ab_status carve(vaspace_t *v, va_range_t *r, ab_dptr_t start, uint64_t bytes) {
  ab_dptr_t top = r->base + r->bytes;
  /* The piece above the start, if any, becomes its own range. */
  if (start + bytes < top) {
    va_range_t *hi = range_new(v, start + bytes, top - start - bytes);
    if (hi == NULL) return AB_ERR_INTERNAL;
    range_insert(v, hi);
  }
  if (start > r->base)
    range_resize(v, r, r->base, start - r->base);
  else
    range_drop(v, r);
  return AB_OK;
}

/* Whether `bytes` aligned to `align` fit at the top of r; their start in *start. */
static bool fits_at_top(const va_range_t *r, uint64_t bytes, uint64_t align, ab_dptr_t *start) {
  if (r->bytes < bytes) return false;
  *start = (r->base + r->bytes - bytes) & ~(align - 1);
  return *start >= r->base;
}

/* The first range of t from lower_bound(bytes, 0) on where `bytes` aligned to `align` fit
 * at the top, carved; AB_ERR_OOM when none is. */
static ab_status carve_first_fit(vaspace_t *v, const ab_tree_t *t, uint64_t bytes, uint64_t align, ab_dptr_t *out) {
  for (ab_tnode_t *n = size_lower_bound(t, bytes, 0); n; n = ab_tree_next(n)) {
    va_range_t *r = of_size(n);
    if (fits_at_top(r, bytes, align, out)) return carve(v, r, *out, bytes);
  }
  return AB_ERR_OOM;
}

/* Carves `bytes` aligned to `align` (a power of two) from the smallest free range that
 * holds them, at its top: the bins from the request's size on, then the larger ranges. */
ab_status ab_sim_va_alloc(vaspace_t *v, uint64_t bytes, uint64_t align, ab_dptr_t *out) {
  if (bytes < BINNED_BELOW)
    for (size_t k = full_bin_from(v, bytes / BIN_BYTES); k < AB_SIM_VA_BINS; k = full_bin_from(v, k + 1)) {
      ab_status st = carve_first_fit(v, &v->bins[k], bytes, align, out);
      if (st != AB_ERR_OOM) return st;
    }
  /* The driver answers CUDA_ERROR_OUT_OF_MEMORY here too: a run out of address space ran out
   * of memory (expandable segments reserve more than the card on every stream). */
  return carve_first_fit(v, &v->large, bytes, align, out);
}

/* A walk down from the highest range: the ranges it passes are the ones too small, which the
 * chunks of a caching allocator leave few of; a raw run's churn measured no slower. */
ab_status ab_sim_va_alloc_larger(vaspace_t *v, uint64_t bytes, uint64_t align, unsigned skip, ab_dptr_t *out) {
  if (bytes == UINT64_MAX) return AB_ERR_OOM;
  va_range_t *found = NULL;
  ab_dptr_t at = 0;
  for (ab_tnode_t *m = ab_tree_last(&v->by_addr); m; m = ab_tree_prev(m)) {
    va_range_t *r = AB_CONTAINER_OF(m, va_range_t, by_addr);
    if (r->bytes > bytes && fits_at_top(r, bytes, align, out)) {
      found = r;
      at = *out;
      if (skip-- == 0) break;
    }
  }
  if (found == NULL) return AB_ERR_OOM;
  *out = at;
  return carve(v, found, at, bytes);
}

/* Carves exactly [base, base + bytes) out of the free ranges; false if it is not all free. */
bool ab_sim_va_take(vaspace_t *v, ab_dptr_t base, uint64_t bytes) {
  ab_tnode_t *n = addr_floor(v, base, NULL);
  if (n == NULL) return false;
  va_range_t *r = AB_CONTAINER_OF(n, va_range_t, by_addr);
  ab_dptr_t top = r->base + r->bytes;
  if (base + bytes < base || base + bytes > top) return false;
  if (base + bytes < top) {
    va_range_t *hi = range_new(v, base + bytes, top - base - bytes);
    if (hi == NULL) return false;
    range_insert(v, hi);
  }
  range_remove(v, r);
  if (base > r->base) {
    r->bytes = base - r->base;
    range_insert(v, r);
  } else {
    r->next_spare = v->spare;
    v->spare = r;
  }
  return true;
}

/* Returns a range to the free set, merged with free neighbours. */
ab_status ab_sim_va_free(vaspace_t *v, ab_dptr_t base, uint64_t bytes) {
  ab_tnode_t *nn, *pn = addr_floor(v, base, &nn);
  va_range_t *prev = pn ? of_addr(pn) : NULL, *next = nn ? of_addr(nn) : NULL;
  if (prev && prev->base + prev->bytes == base) {
    uint64_t merged = prev->bytes + bytes;
    if (next && prev->base + merged == next->base) {
      merged += next->bytes;
      range_drop(v, next);
    }
    range_resize(v, prev, prev->base, merged);
    return AB_OK;
  }
  if (next && base + bytes == next->base) {
    range_resize(v, next, base, next->bytes + bytes);
    return AB_OK;
  }
  va_range_t *r = range_new(v, base, bytes);
  if (r == NULL) return AB_ERR_INTERNAL;
  range_insert(v, r);
  return AB_OK;
}

ab_status ab_sim_va_init(vaspace_t *v, ab_dptr_t base, uint64_t bytes) {
  memset(v, 0, sizeof *v);
  ab_tree_init(&v->by_addr, cmp_addr);
  ab_tree_init(&v->large, cmp_size);
  if ((v->bins = malloc(AB_SIM_VA_BINS * sizeof *v->bins)) == NULL) return AB_ERR_INTERNAL;
  for (size_t k = 0; k < AB_SIM_VA_BINS; k++) ab_tree_init(&v->bins[k], cmp_size);
  va_range_t *all = range_new(v, base, bytes);
  if (all == NULL) {
    free(v->bins);
    return AB_ERR_INTERNAL;
  }
  range_insert(v, all);
  return AB_OK;
}

void ab_sim_va_free_all(vaspace_t *v) {
  ab_tnode_t *n;
  while ((n = ab_tree_first(&v->by_addr)) != NULL) range_drop(v, AB_CONTAINER_OF(n, va_range_t, by_addr));
  while (v->spare) {
    va_range_t *r = v->spare;
    v->spare = r->next_spare;
    free(r);
  }
  free(v->bins);
  v->bins = NULL;
}
