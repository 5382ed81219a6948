#include "strategies/planned/dsa.h"

#include "strategies/arena.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct range_s {
  uint64_t off, end;
} range_t;

typedef struct placer_s {
  const ab_lifetime_t *lt;
  size_t n;
  uint64_t *maxend; /* per node (the middle of its range): the latest end placed below it; 0: none */
  bool *placed;
  range_t *found;   /* scratch: the ranges of the placed lifetimes that overlap the one placing */
  size_t nfound, capfound;
  range_t *sorted;  /* scratch of the sort */
  size_t capsorted;
  uint64_t long_span; /* lifetimes longer than this are kept in longs, not in the tree */
  size_t *longs;      /* the long ones placed so far */
  size_t nlongs;
  bool one_stream;    /* every lifetime on one stream: end_other never matters */
} placer_t;

static uint64_t end_seen_by(const ab_lifetime_t *a, unsigned stream) {
  return a->stream == stream ? a->end : a->end_other;
}

static bool overlap_in_time(const ab_lifetime_t *a, const ab_lifetime_t *b) {
  return a->start < end_seen_by(b, a->stream) && b->start < end_seen_by(a, b->stream);
}

/* The latest end another lifetime sees; in a run of one stream, its end. */
static uint64_t latest_end(const placer_t *p, const ab_lifetime_t *a) {
  return p->one_stream || a->end_other < a->end ? a->end : a->end_other;
}

/* A long lifetime under a node would make the search visit every node above every long one
 * (their ends pass every query's start), so the long ones are searched in a list of their
 * own: parameters and optimizer state, a few hundred, against tens of thousands of short. */
static bool is_long(const placer_t *p, const ab_lifetime_t *a) { return latest_end(p, a) - a->start > p->long_span; }

/* Node of the implicit tree for the range [lo, hi) is its middle; its subtree is the range. */
static void mark_placed(placer_t *p, size_t i) {
  size_t lo = 0, hi = p->n;
  uint64_t e = latest_end(p, &p->lt[i]);
  p->placed[i] = true;
  if (is_long(p, &p->lt[i])) {
    p->longs[p->nlongs++] = i;
    return;
  }
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (p->maxend[mid] < e) p->maxend[mid] = e;
    if (i == mid) break;
    if (i < mid) hi = mid;
    else lo = mid + 1;
  }
}

static ab_status found(placer_t *p, uint64_t off, uint64_t size) {
  if (p->nfound == p->capfound) {
    size_t cap = p->capfound ? 2 * p->capfound : 256;
    range_t *f = realloc(p->found, cap * sizeof *f);
    if (f == NULL) return AB_ERR_INTERNAL;
    p->found = f, p->capfound = cap;
  }
  p->found[p->nfound++] = (range_t){off, off + size};
  return AB_OK;
}

static ab_status collect(placer_t *p, size_t i, const uint64_t *offset, uint64_t align) {
  const ab_lifetime_t *x = &p->lt[i];
  uint64_t a = x->start, b = latest_end(p, x);
  size_t stack[2 * 64][2], top = 0;
  p->nfound = 0;
  for (size_t k = 0; k < p->nlongs; k++) {
    const ab_lifetime_t *y = &p->lt[p->longs[k]];
    if (overlap_in_time(x, y)) AB_TRY(found(p, offset[p->longs[k]], (y->bytes + align - 1) & ~(align - 1)));
  }
  stack[top][0] = 0, stack[top][1] = p->n, top++;
  while (top) {
    top--;
    size_t lo = stack[top][0], hi = stack[top][1];
    if (lo >= hi) continue;
    size_t mid = lo + (hi - lo) / 2;
    if (p->maxend[mid] <= a) continue; /* nothing placed below ends after x starts */
    const ab_lifetime_t *y = &p->lt[mid];
    if (p->placed[mid] && y->start < b && !is_long(p, y) && overlap_in_time(x, y))
      AB_TRY(found(p, offset[mid], (y->bytes + align - 1) & ~(align - 1)));
    stack[top][0] = lo, stack[top][1] = mid, top++;
    if (y->start < b) stack[top][0] = mid + 1, stack[top][1] = hi, top++;
  }
  return AB_OK;
}

/* Sorts f[0..n) by offset: insertion sort for a few, else a byte-wise radix sort over the
 * bytes the offsets use (qsort's calls were most of the planning time). */
static ab_status sort_by_offset(range_t *f, size_t n, range_t **scratch, size_t *capscratch) {
  if (n < 48) {
    for (size_t i = 1; i < n; i++) {
      range_t x = f[i];
      size_t j = i;
      for (; j > 0 && f[j - 1].off > x.off; j--) f[j] = f[j - 1];
      f[j] = x;
    }
    return AB_OK;
  }
  if (*capscratch < n) {
    range_t *t = realloc(*scratch, n * sizeof *t);
    if (t == NULL) return AB_ERR_INTERNAL;
    *scratch = t, *capscratch = n;
  }
  uint64_t used = 0;
  for (size_t i = 0; i < n; i++) used |= f[i].off;
  range_t *src = f, *dst = *scratch;
  for (unsigned shift = 0; shift < 64 && (used >> shift); shift += 8) {
    size_t count[257] = {0};
    for (size_t i = 0; i < n; i++) count[((src[i].off >> shift) & 0xff) + 1]++;
    for (size_t d = 0; d < 256; d++) count[d + 1] += count[d];
    for (size_t i = 0; i < n; i++) dst[count[(src[i].off >> shift) & 0xff]++] = src[i];
    range_t *t = src;
    src = dst, dst = t;
  }
  if (src != f) memcpy(f, src, n * sizeof *f);
  return AB_OK;
}

typedef struct order_s {
  uint64_t bytes, start;
  size_t i;
} order_t;

static int by_size_desc(const void *a, const void *b) {
  const order_t *x = a, *y = b;
  if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
  return (x->start > y->start) - (x->start < y->start);
}

static ab_status greedy_by_size(const ab_lifetime_t *lt, size_t n, uint64_t align, uint64_t *offset, uint64_t *peak) {
  *peak = 0;
  placer_t p = {lt, n, calloc(n, sizeof(uint64_t)), calloc(n, sizeof(bool)), NULL, 0, 0, NULL, 0, 0, NULL, 0, true};
  p.longs = malloc(n * sizeof *p.longs);
  p.long_span = (lt[n - 1].start + 1) / 64 + 1;
  p.one_stream = true;
  for (size_t i = 1; i < n; i++) p.one_stream = p.one_stream && lt[i].stream == lt[0].stream;
  order_t *order = malloc(n * sizeof *order);
  ab_status st = p.maxend && p.placed && p.longs && order ? AB_OK : AB_ERR_INTERNAL;
  for (size_t i = 0; st == AB_OK && i < n; i++) order[i] = (order_t){lt[i].bytes, lt[i].start, i};
  if (st == AB_OK) qsort(order, n, sizeof *order, by_size_desc);
  /* Lifetimes never freed all meet one another (each is live when a later one starts), so
   * they are stacked at the bottom in the order they come, and the rest is packed above
   * them without searching them again and again. */
  uint64_t base = 0;
  for (size_t i = 0; st == AB_OK && i < n; i++)
    if (lt[i].end == UINT64_MAX && lt[i].end_other == UINT64_MAX) {
      offset[i] = base;
      base += (lt[i].bytes + align - 1) & ~(align - 1);
    }
  *peak = base;
  for (size_t k = 0; st == AB_OK && k < n; k++) {
    size_t i = order[k].i;
    if (lt[i].end == UINT64_MAX && lt[i].end_other == UINT64_MAX) continue;
    uint64_t size = (lt[i].bytes + align - 1) & ~(align - 1);
    st = collect(&p, i, offset, align);
    if (st != AB_OK) break;
    st = sort_by_offset(p.found, p.nfound, &p.sorted, &p.capsorted);
    if (st != AB_OK) break;
    /* Best fit: the smallest gap that holds it; none: above everything it overlaps. */
    uint64_t at = 0, best = UINT64_MAX, best_gap = UINT64_MAX;
    for (size_t f = 0; f < p.nfound; f++) {
      if (p.found[f].off > at) {
        uint64_t gap = p.found[f].off - at;
        if (gap >= size && gap < best_gap) best = at, best_gap = gap;
      }
      if (p.found[f].end > at) at = p.found[f].end;
    }
    offset[i] = best != UINT64_MAX ? best : at;
    mark_placed(&p, i);
  }
  /* The rest was packed from 0: above the stack. */
  for (size_t i = 0; st == AB_OK && i < n; i++)
    if (p.placed[i]) {
      uint64_t size = (lt[i].bytes + align - 1) & ~(align - 1);
      offset[i] += base;
      if (offset[i] + size > *peak) *peak = offset[i] + size;
    }
  free(p.maxend);
  free(p.placed);
  free(p.found);
  free(p.sorted);
  free(p.longs);
  free(order);
  return st;
}

/* Sizes are unsigned and may reach 2^64 - 1: a change is a size and whether it ends. */
typedef struct change_s {
  uint64_t at;
  uint64_t bytes;
  bool ends;
} change_t;

static int by_time(const void *a, const void *b) {
  const change_t *x = a, *y = b;
  if (x->at != y->at) return (x->at > y->at) - (x->at < y->at);
  return (int)y->ends - (int)x->ends; /* frees before allocations at a tie */
}

uint64_t ab_dsa_live_peak(const ab_lifetime_t *lt, size_t n, uint64_t align) {
  change_t *c = malloc((2 * n + 1) * sizeof *c);
  if (c == NULL) return 0;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t sz = ab_dsa_round(lt[i].bytes, align);
    c[m++] = (change_t){lt[i].start, sz, false};
    if (lt[i].end != UINT64_MAX) c[m++] = (change_t){lt[i].end, sz, true};
  }
  qsort(c, m, sizeof *c, by_time);
  /* A live sum past 2^64 - 1 stays there: no range could hold it anyway. Ends are only
   * subtracted from what their starts added, so an unsaturated sum never goes below 0. */
  uint64_t live = 0, peak = 0;
  bool saturated = false;
  for (size_t i = 0; i < m && !saturated; i++) {
    if (c[i].ends) {
      live -= c[i].bytes;
    } else if (__builtin_add_overflow(live, c[i].bytes, &live)) {
      saturated = true;
    }
    if (live > peak) peak = live;
  }
  free(c);
  return saturated ? UINT64_MAX : peak;
}

typedef struct release_s {
  uint64_t at;
  size_t i;
} release_t;

static int release_by_time(const void *a, const void *b) {
  const release_t *x = a, *y = b;
  return (x->at > y->at) - (x->at < y->at);
}

/* Best fit in time order, as an online allocator with one growing region would place them:
 * each lifetime at its start takes the smallest free range that holds it, the region grows
 * at its top when none does, and its range is free again at its end (the latest end, when
 * several streams share the region). */
static ab_status best_fit_in_time(const ab_lifetime_t *lt, size_t n, uint64_t align, bool one_stream, uint64_t *offset,
                                  uint64_t *peak) {
  release_t *rel = malloc(n * sizeof *rel);
  if (rel == NULL) return AB_ERR_INTERNAL;
  size_t nrel = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t end = one_stream || lt[i].end_other < lt[i].end ? lt[i].end : lt[i].end_other;
    if (end != UINT64_MAX) rel[nrel++] = (release_t){end, i};
  }
  qsort(rel, nrel, sizeof *rel, release_by_time);
  ab_arena_t a;
  ab_arena_init(&a);
  ab_status st = AB_OK;
  size_t r = 0;
  for (size_t i = 0; st == AB_OK && i < n; i++) {
    for (; st == AB_OK && r < nrel && rel[r].at <= lt[i].start; r++)
      st = ab_arena_give(&a, offset[rel[r].i], (lt[rel[r].i].bytes + align - 1) & ~(align - 1));
    uint64_t size = (lt[i].bytes + align - 1) & ~(align - 1);
    if (st != AB_OK || size == 0) {
      offset[i] = 0;
      continue;
    }
    st = ab_arena_take_best(&a, size, &offset[i]);
    if (st == AB_ERR_OOM) {
      st = ab_arena_grow(&a, size - ab_arena_top_free(&a));
      if (st == AB_OK) st = ab_arena_take_best(&a, size, &offset[i]);
    }
  }
  *peak = a.bytes;
  ab_arena_clear(&a);
  free(rel);
  return st;
}

ab_status ab_dsa_refuse(ab_diag_t *diag, const char *who, const ab_lifetime_t *lt, size_t n) {
  uint64_t largest = 0;
  for (size_t i = 0; i < n; i++)
    if (lt[i].bytes > largest) largest = lt[i].bytes;
  return ab_diag_set(diag, AB_ERR_INVALID,
                     "%s: the %zu allocations to plan ask more than 2^64 - 1 bytes together (the largest %" PRIu64
                     " bytes): no address range holds them, so no plan can be made",
                     who, n, largest);
}

uint64_t ab_dsa_round(uint64_t bytes, uint64_t align) {
  return bytes > UINT64_MAX - (align - 1) ? UINT64_MAX : (bytes + align - 1) & ~(align - 1);
}

bool ab_dsa_fits(const ab_lifetime_t *lt, size_t n, uint64_t align, uint64_t *total) {
  uint64_t sum = 0;
  for (size_t i = 0; i < n; i++)
    if (lt[i].bytes > UINT64_MAX - (align - 1) ||
        __builtin_add_overflow(sum, (lt[i].bytes + align - 1) & ~(align - 1), &sum)) {
      *total = UINT64_MAX;
      return false;
    }
  *total = sum;
  return true;
}

ab_status ab_dsa_place(const ab_lifetime_t *lt, size_t n, uint64_t align, uint64_t *offset, uint64_t *peak) {
  *peak = 0;
  if (n == 0) return AB_OK;
  /* Every offset and end below is at most the sum of the rounded sizes (a lifetime goes no
   * higher than the top of those already placed), so a sum that fits keeps all of it in
   * range. */
  uint64_t total;
  if (!ab_dsa_fits(lt, n, align, &total)) return AB_ERR_OOM;
  uint64_t *other = malloc(n * sizeof *other), other_peak = 0;
  if (other == NULL) return AB_ERR_INTERNAL;
  bool one_stream = true;
  for (size_t i = 1; i < n; i++) one_stream = one_stream && lt[i].stream == lt[0].stream;
  ab_status st = greedy_by_size(lt, n, align, offset, peak);
  if (st == AB_OK) st = best_fit_in_time(lt, n, align, one_stream, other, &other_peak);
  if (st == AB_OK && other_peak < *peak) {
    memcpy(offset, other, n * sizeof *offset);
    *peak = other_peak;
  }
  free(other);
  return st;
}
