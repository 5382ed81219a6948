/* free_ranges.c: the free space of one address range (free_ranges.h): one node per maximal
 * free range, in two trees, by offset (to take a given range, and to merge a range given back
 * with its neighbours) and by (size, offset) (best fit). */
#include "strategies/common/free_ranges.h"

#include <stdlib.h>
#include <string.h>

static int cmp_addr(const ab_tnode_t *x, const ab_tnode_t *y) {
  const ab_free_range_t *a = AB_CONTAINER_OF(x, ab_free_range_t, by_addr), *b = AB_CONTAINER_OF(y, ab_free_range_t, by_addr);
  return (a->off > b->off) - (a->off < b->off);
}

static int cmp_size(const ab_tnode_t *x, const ab_tnode_t *y) {
  const ab_free_range_t *a = AB_CONTAINER_OF(x, ab_free_range_t, by_size), *b = AB_CONTAINER_OF(y, ab_free_range_t, by_size);
  if (a->bytes != b->bytes) return (a->bytes > b->bytes) - (a->bytes < b->bytes);
  return (a->off > b->off) - (a->off < b->off);
}

static int key_addr(const void *key, const ab_tnode_t *n) {
  uint64_t k = *(const uint64_t *)key, off = AB_CONTAINER_OF(n, ab_free_range_t, by_addr)->off;
  return (k > off) - (k < off);
}

static int key_size(const void *key, const ab_tnode_t *n) {
  uint64_t k = *(const uint64_t *)key, bytes = AB_CONTAINER_OF(n, ab_free_range_t, by_size)->bytes;
  return k <= bytes ? -1 : 1; /* the first range not smaller than the key */
}

void ab_free_ranges_init(ab_free_ranges_t *a) {
  ab_tree_init(&a->by_addr, cmp_addr);
  ab_tree_init(&a->by_size, cmp_size);
  a->bytes = a->free_bytes = 0;
}

void ab_free_ranges_clear(ab_free_ranges_t *a) {
  ab_tnode_t *n;
  while ((n = ab_tree_first(&a->by_addr)) != NULL) {
    ab_free_range_t *f = AB_CONTAINER_OF(n, ab_free_range_t, by_addr);
    ab_tree_remove(&a->by_addr, &f->by_addr);
    ab_tree_remove(&a->by_size, &f->by_size);
    free(f);
  }
  ab_free_ranges_init(a);
}

static void unlink_range(ab_free_ranges_t *a, ab_free_range_t *f) {
  ab_tree_remove(&a->by_addr, &f->by_addr);
  ab_tree_remove(&a->by_size, &f->by_size);
}

static void link_range(ab_free_ranges_t *a, ab_free_range_t *f) {
  ab_tree_insert(&a->by_addr, &f->by_addr);
  ab_tree_insert(&a->by_size, &f->by_size);
}

ab_status ab_free_ranges_give(ab_free_ranges_t *a, uint64_t off, uint64_t bytes) {
  uint64_t end = off + bytes;
  ab_tnode_t *n = ab_tree_floor(&a->by_addr, &off, key_addr);
  ab_free_range_t *before = n ? AB_CONTAINER_OF(n, ab_free_range_t, by_addr) : NULL;
  ab_tnode_t *m = n ? ab_tree_next(n) : ab_tree_first(&a->by_addr);
  ab_free_range_t *after = m ? AB_CONTAINER_OF(m, ab_free_range_t, by_addr) : NULL;
  if (before && before->off + before->bytes != off) before = NULL;
  if (after && after->off != end) after = NULL;
  a->free_bytes += bytes;
  if (before && after) {
    unlink_range(a, before);
    unlink_range(a, after);
    before->bytes += bytes + after->bytes;
    free(after);
    link_range(a, before);
  } else if (before || after) {
    ab_free_range_t *f = before ? before : after;
    unlink_range(a, f);
    if (after) f->off = off;
    f->bytes += bytes;
    link_range(a, f);
  } else {
    ab_free_range_t *f = malloc(sizeof *f);
    if (f == NULL) {
      a->free_bytes -= bytes;
      return AB_ERR_INTERNAL;
    }
    f->off = off, f->bytes = bytes;
    link_range(a, f);
  }
  return AB_OK;
}

ab_status ab_free_ranges_grow(ab_free_ranges_t *a, uint64_t bytes) {
  AB_TRY(ab_free_ranges_give(a, a->bytes, bytes));
  a->bytes += bytes;
  return AB_OK;
}

/* Takes [off, off + bytes) out of the free range f that holds it: what is left on either
 * side stays free. */
static ab_status carve(ab_free_ranges_t *a, ab_free_range_t *f, uint64_t off, uint64_t bytes) {
  uint64_t end = off + bytes, f_end = f->off + f->bytes;
  if (off > f->off && end < f_end) {
    ab_free_range_t *tail = malloc(sizeof *tail);
    if (tail == NULL) return AB_ERR_INTERNAL;
    unlink_range(a, f);
    f->bytes = off - f->off;
    tail->off = end, tail->bytes = f_end - end;
    link_range(a, f);
    link_range(a, tail);
  } else {
    unlink_range(a, f);
    if (off > f->off || end < f_end) {
      if (off == f->off) f->off = end;
      f->bytes -= bytes;
      link_range(a, f);
    } else {
      free(f);
    }
  }
  a->free_bytes -= bytes;
  return AB_OK;
}

ab_status ab_free_ranges_take_at(ab_free_ranges_t *a, uint64_t off, uint64_t bytes) {
  ab_tnode_t *n = ab_tree_floor(&a->by_addr, &off, key_addr);
  if (n == NULL) return AB_ERR_OOM;
  ab_free_range_t *f = AB_CONTAINER_OF(n, ab_free_range_t, by_addr);
  if (off + bytes > f->off + f->bytes) return AB_ERR_OOM;
  return carve(a, f, off, bytes);
}

ab_status ab_free_ranges_take_best(ab_free_ranges_t *a, uint64_t bytes, uint64_t *off) {
  ab_tnode_t *n = ab_tree_lower_bound(&a->by_size, &bytes, key_size);
  if (n == NULL) return AB_ERR_OOM;
  ab_free_range_t *f = AB_CONTAINER_OF(n, ab_free_range_t, by_size);
  *off = f->off;
  return carve(a, f, f->off, bytes);
}

uint64_t ab_free_ranges_top_free(const ab_free_ranges_t *a) {
  ab_tnode_t *n = ab_tree_last(&a->by_addr);
  if (n == NULL) return 0;
  const ab_free_range_t *f = AB_CONTAINER_OF(n, ab_free_range_t, by_addr);
  return f->off + f->bytes == a->bytes ? f->bytes : 0;
}

const ab_free_range_t *ab_free_ranges_first(const ab_free_ranges_t *a) {
  ab_tnode_t *n = ab_tree_first(&a->by_addr);
  return n ? AB_CONTAINER_OF(n, ab_free_range_t, by_addr) : NULL;
}

const ab_free_range_t *ab_free_ranges_next(const ab_free_range_t *f) {
  ab_tnode_t *n = ab_tree_next(&f->by_addr);
  return n ? AB_CONTAINER_OF(n, ab_free_range_t, by_addr) : NULL;
}

typedef struct entry_s {
  ab_dptr_t addr;
  uint64_t val;
} entry_t;

static int entry_by_addr(const void *x, const void *y) {
  const entry_t *a = x, *b = y;
  if (a->addr != b->addr) return (a->addr > b->addr) - (a->addr < b->addr);
  return (a->val > b->val) - (a->val < b->val); /* the region before its first block */
}

ab_status ab_free_ranges_walk(const ab_free_ranges_t *a, ab_dptr_t base, const ab_map_t *live, uint64_t align,
                             const char *pool, bool expandable, ab_segment_fn fn, void *ctx) {
  /* The region is one more entry, sorted among the others by its base. */
  entry_t *e = malloc((live->n + 1) * sizeof *e);
  ab_block_info_t *blocks = malloc((2 * live->n + 2) * sizeof *blocks);
  if (e == NULL || blocks == NULL) {
    free(e), free(blocks);
    return AB_ERR_INTERNAL;
  }
  size_t n = 0;
  for (size_t i = 0; i < live->cap; i++)
    if (live->slots[i].key) e[n++] = (entry_t){live->slots[i].key, live->slots[i].val};
  if (base) e[n++] = (entry_t){base, 0};
  qsort(e, n, sizeof *e, entry_by_addr);
  for (size_t i = 0; i < n; i++) {
    if (e[i].addr == base && e[i].val == 0) {
      /* The region's blocks: its live blocks (next in address order) and its free ranges
       * tile it. */
      size_t nb = 0;
      const ab_free_range_t *f = ab_free_ranges_first(a);
      uint64_t at = 0;
      size_t j = i + 1;
      while (at < a->bytes) {
        if (f && f->off == at) {
          blocks[nb++] = (ab_block_info_t){base + at, f->bytes, 0, AB_BLOCK_FREE};
          at += f->bytes;
          f = ab_free_ranges_next(f);
        } else if (j < n && (e[j].val & 1) && e[j].addr == base + at) {
          uint64_t req = e[j].val >> 1, sz = (req + align - 1) & ~(align - 1);
          blocks[nb++] = (ab_block_info_t){base + at, sz, req, AB_BLOCK_ALLOCATED};
          at += sz;
          j++;
        } else {
          break; /* the check of the walk reports what does not tile */
        }
      }
      ab_segment_info_t seg = {base, a->bytes, 0, pool, expandable, blocks, nb, 0};
      int stop = fn(ctx, &seg);
      i = j - 1;
      if (stop) break;
      continue;
    }
    uint64_t req = e[i].val >> 1;
    ab_block_info_t b = {e[i].addr, req, req, AB_BLOCK_ALLOCATED};
    ab_segment_info_t seg = {e[i].addr, req, 0, "device", false, &b, 1, 0};
    if (fn(ctx, &seg)) break;
  }
  free(e);
  free(blocks);
  return AB_OK;
}
