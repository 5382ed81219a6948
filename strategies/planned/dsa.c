#include "strategies/planned/dsa.h"

#include "strategies/common/free_ranges.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Note [Greedy by size over the free space]: greedy by size places each lifetime at the
 * smallest gap of the address range that is free for the whole of its life. The first
 * version gathered every placed lifetime that overlaps the new one in time, from an interval
 * tree over the starts and, for those longer than a 64th of the run, from a list beside it
 * scanned whole at every placement; sorted their ranges by offset; and scanned them for the
 * gaps. On a trace of 150 000 allocations with 5 000 live at once (tests/bench/oracle_bench.sh
 * makes it) that is 4 900 ranges gathered and sorted per placement and n^2 / 2 looks at the
 * list: 93 s, growing as n^1.5 and more. The heuristic and its placements are the same now
 * (tests/strategies/dsa_test.c keeps the first version and compares them); this replaced the
 * gathering, the list and the sort:
 *
 * - Slots. Lifetime i (sorted by start) starts at slot i; its window is [i, upto), upto the
 *   first lifetime that starts at or after its end. Two lifetimes overlap in time exactly
 *   when their windows share a slot (the later start lies in both).
 * - Cells instead of the placed lifetimes. The free space is kept as cells: addresses
 *   [lo, hi) all free during the same slots [from, to), and taken at from - 1 and at to (or
 *   the run's edge). Each free (slot, address) is in one cell, so the addresses free for the
 *   whole window [a, b) of the lifetime to place are the cells with from <= a and to >= b:
 *   the gaps the scan found are those cells, joined where one ends at the address the next
 *   starts. Placing the lifetime cuts the cells of its gap that it covers: above its end each
 *   keeps its slots; below, it becomes a cell before the window and one after it.
 * - An interval tree of the cells instead of the scans: a node per slot, each cell at the
 *   highest node whose slot it spans, each node's cells by from ascending and by to
 *   descending. The cells that span [a, b) are prefixes of those orders at the O(log n)
 *   nodes from the root to the first node inside [a, b).
 * - A hash of the cells' starts instead of the sort: a gap is a run of cells each found from
 *   the one below by the address it ends at.
 * - A segment tree of the placed lifetimes' tops: above the top of what overlaps a window
 *   all is free, one gap, which the edges of lifetimes placed at other times cut into
 *   hundreds of cells; only those below that top plus the size are read, found by binary
 *   search since the chunks a node's orders are cut into are sorted by address inside.
 *
 * A placement costs O(log^2 n) for the walk down the tree and the tops, plus a copy, an
 * entry in the hash and a probe for each cell it reads: the gaps of its window and the
 * pieces that lifetimes placed before and after the window cut them into. The plan is
 * O(n log n) for the orders and the trees plus the cells all placements read, and that sum
 * is not bounded by n log n: best fit must judge every gap of the window (the smallest that
 * holds the lifetime is known only once all are), and the gaps of a window, up to one above
 * each lifetime live during it, are its own, so that no order over gaps kept ahead serves the
 * next window. On the trace of 150 000 allocations a placement reads 1 500 cells
 * for 650 gaps (against 4 900 ranges for the first version), fewer for the large lifetimes,
 * which come first, and more for the small ones, which find the leftovers of the large:
 * 150 cells a placement in the first tenth of the order, 3 100 in the last. The leftovers
 * and the cuts grow with the run (1 000 cells a placement at 37 500 allocations), so the time
 * grows as about n^1.3 on that trace. Whether a cell has a successor is a coin toss, so the
 * probe decides it without a branch (join_cells), and so does the judging of the gaps of one
 * cell; sorting the cells by address instead of the hash, or merging the runs the nodes
 * report in address order (a node's cells share no address), costs as much or more.
 *
 * tests/bench/oracle_bench.sh measured, on the 2-core build machine at a load of 2 to 3.3, the whole
 * run of the 150 000 in 4.0 to 4.4 s and a million events of that trace in 19 to 21 s, against
 * 5.2 s and 24.7 s for this file as of 79edf9c measured beside them (93 s for the 150 000
 * with the first version); where lives are short next to the run the cells are few
 * (random:ops=1000000, a million events: 3.2 s for the whole run, against 6.2 s).
 *
 * Best fit in time runs first (ab_dsa_place): greedy by size's peak only grows as it places,
 * so once what it has placed reaches past that plan's peak it cannot win and stops, and the
 * plan kept is the one of both run to the end. On random:ops=1000000, where best fit in time
 * wins (1.05 of the live peak against 1.16), that spares the last third of greedy by size's
 * placements.
 *
 * Two cases keep the first way, over the same interval tree (the placed lifetimes by their
 * windows as the stream that sees them longest does; those that overlap found in O(log n)
 * plus their number, then sorted): runs of several streams, where another stream sees an
 * end that differs from the lifetime's own, so that one window per lifetime does not say
 * which lifetimes overlap; and lifetimes of 0 bytes, which come last (the order is by size)
 * and split a gap at their offset without taking any of it. There the overlaps are still the
 * cost, as before: a run of several streams and no SYNC overlaps every other stream's
 * lifetimes to its end (random:streams=3, 100 000 allocations, takes minutes). */

/* Slots are 32-bit: 2^31 lifetimes would take 80 GiB to describe. */
#define MAX_LIFETIMES (1u << 31)
#define NONE UINT32_MAX
/* The hi of the cell that reaches the top of the address range. */
#define TOP UINT64_MAX

/* The addresses [lo, hi) of a placed lifetime (the first way). */
typedef struct range_s {
  uint64_t lo, hi;
} range_t;

/* A window [from, to) of slots and the addresses [lo, hi) it holds, as the interval tree
 * keeps it: a cell, which no other cell with the same lo and slots can be, or a placed
 * lifetime, which from names (the slot of its start). */
typedef struct window_s {
  uint64_t lo, hi;
  uint32_t from, to;
} window_t;

/* Windows as a search reports them, whole, so that a chunk's windows come by one copy. */
typedef struct found_s {
  window_t *w;
  size_t n, cap;
} found_t;

/* Room for k more windows. */
static ab_status found_reserve(found_t *f, size_t k) {
  if (f->n + k <= f->cap) return AB_OK;
  size_t cap = f->cap ? f->cap : 1024;
  while (cap < f->n + k) cap *= 2;
  window_t *w = realloc(f->w, cap * sizeof *w);
  if (w == NULL) return AB_ERR_INTERNAL;
  f->w = w, f->cap = cap;
  return AB_OK;
}

/* Windows in one order (the key), cut into chunks of at most CHUNK consecutive keys, each
 * chunk sorted by address inside: a window enters or leaves by moving at most a chunk and
 * the chunks' pointers (the nodes near the root hold thousands: every cell that spans the
 * middle of the run), and the windows of a chunk below an address are a prefix of it, so
 * that the cells high above what a placement overlaps are passed over by a binary search
 * (Note [Greedy by size over the free space]). */
#define CHUNK 128

/* A chunk grows by doubling up to CHUNK: most nodes hold a few windows. */
typedef struct chunk_s {
  uint32_t n, cap;
  window_t w[];
} chunk_t;

/* A chunk as its list holds it: the least and the greatest key, and the first and the last
 * address, beside the pointer, so that a search reads a list's chunks where it needs them
 * and not to pass them over. */
typedef struct cref_s {
  chunk_t *p;
  uint32_t first, last;
  uint64_t lo_first, lo_last;
} cref_t;

static chunk_t *chunk_new(uint32_t cap) {
  chunk_t *c = malloc(sizeof *c + cap * sizeof c->w[0]);
  if (c != NULL) c->n = 0, c->cap = cap;
  return c;
}

/* by_end: by to descending, else by from ascending; both as an ascending key. */
typedef struct wlist_s {
  cref_t *c;
  uint32_t nc, cap;
  bool by_end;
} wlist_t;

static uint32_t key_of(const wlist_t *l, const window_t *w) { return l->by_end ? ~w->to : w->from; }

/* Sets what r says of its chunk (not empty) from the chunk. */
static void cref_sync(const wlist_t *l, cref_t *r) {
  const chunk_t *c = r->p;
  r->first = UINT32_MAX, r->last = 0;
  for (uint32_t e = 0; e < c->n; e++) {
    uint32_t k = key_of(l, &c->w[e]);
    r->first = k < r->first ? k : r->first;
    r->last = k > r->last ? k : r->last;
  }
  r->lo_first = c->w[0].lo, r->lo_last = c->w[c->n - 1].lo;
}

/* The first chunk whose last key is at least key (or_equal) or above it; nc when none. */
static uint32_t chunk_past(const wlist_t *l, uint32_t key, bool or_equal) {
  uint32_t lo = 0, hi = l->nc;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    uint32_t last = l->c[mid].last;
    if (last < key || (last == key && !or_equal)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* The first window of c at or above address lo. */
static uint32_t first_at(const chunk_t *c, uint64_t lo) {
  uint32_t a = 0, b = c->n;
  while (a < b) {
    uint32_t mid = a + (b - a) / 2;
    if (c->w[mid].lo < lo) a = mid + 1;
    else b = mid;
  }
  return a;
}

/* Room for one more chunk. */
static ab_status wlist_room(wlist_t *l) {
  if (l->nc < l->cap) return AB_OK;
  uint32_t cap = l->cap ? 2 * l->cap : 4;
  cref_t *c = realloc(l->c, cap * sizeof *c);
  if (c == NULL) return AB_ERR_INTERNAL;
  l->c = c, l->cap = cap;
  return AB_OK;
}

/* The k-th least (from 0) of keys[0..n), which it reorders: quickselect. */
static uint32_t kth_least(uint32_t *keys, uint32_t n, uint32_t k) {
  uint32_t lo = 0, hi = n;
  while (hi - lo > 1) {
    /* Three parts around the pivot: below [lo, lt), equal [lt, gt), above [gt, hi). */
    uint32_t pivot = keys[lo + (hi - lo) / 2], lt = lo, gt = hi;
    for (uint32_t i = lo; i < gt;) {
      uint32_t x = keys[i];
      if (x < pivot) keys[i++] = keys[lt], keys[lt++] = x;
      else if (x > pivot) keys[i] = keys[--gt], keys[gt] = x;
      else i++;
    }
    if (k < lt) hi = lt;
    else if (k >= gt) lo = gt;
    else return pivot;
  }
  return keys[lo];
}

/* Splits the full chunk ci in two by key: the lower half stays, the upper half follows it.
 * The windows are taken in address order, those of the lower keys (of the middle key, the
 * first ones) into one and the rest into the other, so both stay in address order. */
static ab_status chunk_split(wlist_t *l, uint32_t ci) {
  chunk_t *c = l->c[ci].p, *h = chunk_new(CHUNK);
  if (h == NULL) return AB_ERR_INTERNAL;
  uint32_t keys[CHUNK], below = 0;
  for (uint32_t e = 0; e < c->n; e++) keys[e] = key_of(l, &c->w[e]);
  uint32_t middle = kth_least(keys, c->n, CHUNK / 2 - 1);
  for (uint32_t e = 0; e < c->n; e++) below += key_of(l, &c->w[e]) < middle;
  uint32_t ties = CHUNK / 2 - below, n = c->n;
  c->n = h->n = 0;
  for (uint32_t e = 0; e < n; e++) {
    window_t x = c->w[e];
    uint32_t key = key_of(l, &x);
    bool lower = key < middle || (key == middle && ties > 0);
    ties -= key == middle && lower;
    if (lower) c->w[c->n++] = x;
    else h->w[h->n++] = x;
  }
  memmove(l->c + ci + 2, l->c + ci + 1, (l->nc - ci - 1) * sizeof *l->c);
  l->c[ci + 1].p = h;
  l->nc++;
  cref_sync(l, &l->c[ci]);
  cref_sync(l, &l->c[ci + 1]);
  return AB_OK;
}

static ab_status wlist_insert(wlist_t *l, window_t w) {
  uint32_t key = key_of(l, &w);
  AB_TRY(wlist_room(l));
  if (l->nc == 0) {
    chunk_t *c = chunk_new(4);
    if (c == NULL) return AB_ERR_INTERNAL;
    c->n = 1, c->w[0] = w;
    l->c[l->nc++] = (cref_t){c, key, key, w.lo, w.lo};
    return AB_OK;
  }
  uint32_t ci = chunk_past(l, key, true);
  if (ci == l->nc) ci--;
  if (l->c[ci].p->n == CHUNK) {
    AB_TRY(chunk_split(l, ci));
    if (key > l->c[ci].last) ci++;
  } else if (l->c[ci].p->n == l->c[ci].p->cap) {
    chunk_t *c = realloc(l->c[ci].p, sizeof *c + 2 * l->c[ci].p->cap * sizeof c->w[0]);
    if (c == NULL) return AB_ERR_INTERNAL;
    c->cap *= 2;
    l->c[ci].p = c;
  }
  cref_t *r = &l->c[ci];
  chunk_t *c = r->p;
  uint32_t at = first_at(c, w.lo);
  memmove(c->w + at + 1, c->w + at, (c->n - at) * sizeof *c->w);
  c->w[at] = w;
  c->n++;
  r->first = key < r->first ? key : r->first;
  r->last = key > r->last ? key : r->last;
  r->lo_first = c->w[0].lo, r->lo_last = c->w[c->n - 1].lo;
  return AB_OK;
}

/* The chunk and the place of window w (in the list). */
static void wlist_find(const wlist_t *l, const window_t *w, uint32_t *chunk, uint32_t *place) {
  uint32_t key = key_of(l, w), ci = chunk_past(l, key, true), at;
  /* Equal keys may lie in several chunks: each is searched by address. */
  for (;; ci++) {
    const chunk_t *c = l->c[ci].p;
    for (at = first_at(c, w->lo); at < c->n && c->w[at].lo == w->lo; at++)
      if (c->w[at].from == w->from && c->w[at].to == w->to) break;
    if (at < c->n && c->w[at].lo == w->lo) break;
  }
  *chunk = ci, *place = at;
}

/* Removes window w (in the list). */
static void wlist_remove(wlist_t *l, const window_t *w) {
  uint32_t key = key_of(l, w), ci, at;
  wlist_find(l, w, &ci, &at);
  cref_t *r = &l->c[ci];
  chunk_t *c = r->p;
  memmove(c->w + at, c->w + at + 1, (c->n - at - 1) * sizeof *c->w);
  if (--c->n == 0) {
    free(c);
    memmove(l->c + ci, l->c + ci + 1, (l->nc - ci - 1) * sizeof *l->c);
    l->nc--;
  } else if (key == r->first || key == r->last) {
    cref_sync(l, r);
  } else {
    r->lo_first = c->w[0].lo, r->lo_last = c->w[c->n - 1].lo;
  }
}

/* Window w (in the list) starts at lo instead, below its hi and above no other window's lo:
 * it keeps its place. */
static void wlist_raise(wlist_t *l, const window_t *w, uint64_t lo) {
  uint32_t ci, at;
  wlist_find(l, w, &ci, &at);
  cref_t *r = &l->c[ci];
  r->p->w[at].lo = lo;
  r->lo_first = r->p->w[0].lo, r->lo_last = r->p->w[r->p->n - 1].lo;
}

static void wlist_free(wlist_t *l) {
  for (uint32_t i = 0; i < l->nc; i++) free(l->c[i].p);
  free(l->c);
}

/* A node of the interval tree: the windows whose span includes its slot and no slot of a
 * node above it, twice: by from ascending and by to descending. */
typedef struct bucket_s {
  wlist_t by_from, by_to;
} bucket_t;

typedef struct ivtree_s {
  bucket_t *node; /* per slot, the node whose middle it is */
  uint32_t n;
} ivtree_t;

static ab_status ivtree_init(ivtree_t *t, uint32_t n) {
  t->n = n;
  t->node = calloc(n ? n : 1, sizeof *t->node);
  if (t->node == NULL) return AB_ERR_INTERNAL;
  for (uint32_t i = 0; i < n; i++) t->node[i].by_to.by_end = true;
  return AB_OK;
}

static void ivtree_free(ivtree_t *t) {
  for (uint32_t i = 0; t->node && i < t->n; i++) wlist_free(&t->node[i].by_from), wlist_free(&t->node[i].by_to);
  free(t->node);
  t->node = NULL;
}

/* The node of window [from, to) (from < to <= n): the first on the way down from the root
 * whose slot it spans. Node [lo, hi) is its middle slot; its subtrees are the two halves. */
static uint32_t node_of(uint32_t n, uint32_t from, uint32_t to) {
  uint32_t lo = 0, hi = n;
  for (;;) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (to - 1 < mid) hi = mid;
    else if (from > mid) lo = mid + 1;
    else return mid;
  }
}

static ab_status ivtree_insert(ivtree_t *t, window_t w) {
  bucket_t *b = &t->node[node_of(t->n, w.from, w.to)];
  AB_TRY(wlist_insert(&b->by_from, w));
  return wlist_insert(&b->by_to, w);
}

/* Removes window w, which the tree holds. */
static void ivtree_remove(ivtree_t *t, const window_t *w) {
  bucket_t *b = &t->node[node_of(t->n, w->from, w->to)];
  wlist_remove(&b->by_from, w);
  wlist_remove(&b->by_to, w);
}

/* Cell w (in the tree) starts at lo instead, below its hi: the cells of a node all hold its
 * slot, so no two share an address, and w keeps its place in both orders. */
static void ivtree_raise(ivtree_t *t, const window_t *w, uint64_t lo) {
  bucket_t *b = &t->node[node_of(t->n, w->from, w->to)];
  wlist_raise(&b->by_from, w, lo);
  wlist_raise(&b->by_to, w, lo);
}

/* Appends to out l's windows up to key (a prefix of l) that start below limit, and where
 * filter those that span [from, to): in a chunk whose keys are all in the prefix, those
 * below limit are its first ones. */
static ab_status report(const wlist_t *l, uint32_t key, bool filter, uint32_t from, uint32_t to, uint64_t limit,
                        found_t *out) {
  for (uint32_t ci = 0; ci < l->nc && l->c[ci].first <= key; ci++) {
    const cref_t *r = &l->c[ci];
    if (r->lo_first >= limit) continue;
    const chunk_t *c = r->p;
    uint32_t n = r->lo_last < limit ? c->n : first_at(c, limit);
    AB_TRY(found_reserve(out, n));
    window_t *restrict o = out->w + out->n;
    size_t k = 0;
    /* Each window is written and kept or not, without a branch to mispredict. */
    if (r->last <= key && !filter)
      memcpy(o, c->w, n * sizeof *o), k = n;
    else if (filter)
      for (uint32_t e = 0; e < n; e++) o[k] = c->w[e], k += (c->w[e].from <= from) & (c->w[e].to >= to);
    else if (l->by_end)
      for (uint32_t e = 0; e < n; e++) o[k] = c->w[e], k += ~c->w[e].to <= key;
    else
      for (uint32_t e = 0; e < n; e++) o[k] = c->w[e], k += c->w[e].from <= key;
    out->n += k;
  }
  return AB_OK;
}

/* Appends to out the windows that span [from, to) (from' <= from and to' >=
 * to) and start below limit. Above the first node inside [from, to) each window of a node
 * lies on one side of it, so one condition holds for them all and the other picks a prefix
 * of one list; at that node the shorter of the two prefixes (by the chunks it takes) is
 * filtered; below it no window spans both ends. */
static ab_status ivtree_spanning(const ivtree_t *t, uint32_t from, uint32_t to, uint64_t limit, found_t *out) {
  uint32_t lo = 0, hi = t->n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    const bucket_t *b = &t->node[mid];
    if (mid < from) {
      AB_TRY(report(&b->by_to, ~to, false, from, to, limit, out));
      lo = mid + 1;
    } else if (mid >= to) {
      AB_TRY(report(&b->by_from, from, false, from, to, limit, out));
      hi = mid;
    } else {
      if (chunk_past(&b->by_from, from, false) <= chunk_past(&b->by_to, ~to, false))
        return report(&b->by_from, from, true, from, to, limit, out);
      return report(&b->by_to, ~to, true, from, to, limit, out);
    }
  }
  return AB_OK;
}

/* The highest address taken by a placed lifetime whose window meets a window [from, to): a
 * segment tree over the slots, each lifetime's top kept at the nodes that make up its window
 * (own) and, as the most of their subtree, at those and their ancestors (below). The nodes
 * that make up a query's window and the ancestors of those hold every lifetime it meets. */
typedef struct tops_s {
  uint64_t *own, *below;
  size_t leaves; /* a power of 2, at least the slots */
} tops_t;

static ab_status tops_init(tops_t *t, uint32_t n) {
  t->leaves = 1;
  while (t->leaves < n) t->leaves *= 2;
  t->own = calloc(2 * t->leaves, sizeof *t->own);
  t->below = calloc(2 * t->leaves, sizeof *t->below);
  return t->own && t->below ? AB_OK : AB_ERR_INTERNAL;
}

static uint64_t most(uint64_t a, uint64_t b) { return a > b ? a : b; }

static void tops_add(tops_t *t, uint32_t from, uint32_t to, uint64_t top) {
  size_t l = from + t->leaves, r = to + t->leaves;
  for (size_t a = l, b = r; a < b; a >>= 1, b >>= 1) {
    if (a & 1) {
      t->own[a] = most(t->own[a], top), t->below[a] = most(t->below[a], top);
      a++;
    }
    if (b & 1) {
      b--;
      t->own[b] = most(t->own[b], top), t->below[b] = most(t->below[b], top);
    }
  }
  /* The parents of those nodes lie on the ways up from the window's two ends. */
  for (size_t a = l >> 1; a; a >>= 1) t->below[a] = most(t->below[a], most(t->below[2 * a], t->below[2 * a + 1]));
  for (size_t b = (r - 1) >> 1; b; b >>= 1) t->below[b] = most(t->below[b], most(t->below[2 * b], t->below[2 * b + 1]));
}

static uint64_t tops_of(const tops_t *t, uint32_t from, uint32_t to) {
  size_t l = from + t->leaves, r = to + t->leaves;
  uint64_t top = 0;
  for (size_t a = l, b = r; a < b; a >>= 1, b >>= 1) {
    if (a & 1) top = most(top, t->below[a++]);
    if (b & 1) top = most(top, t->below[--b]);
  }
  for (size_t a = l >> 1; a; a >>= 1) top = most(top, t->own[a]);
  for (size_t b = (r - 1) >> 1; b; b >>= 1) top = most(top, t->own[b]);
  return top;
}


/* The hash of join_cells: a cell's place in found (its lo is the key), and the generation
 * that wrote it. */
typedef struct hslot_s {
  uint32_t at, gen;
} hslot_t;

/* The gaps of one placement's window (join_cells). */
typedef struct join_s {
  uint32_t *next, *heads;
  uint8_t *joined; /* per cell: another ends where it starts */
  size_t cap, nheads;
  hslot_t *slot;
  size_t hcap;
  unsigned shift; /* 64 - log2(hcap) */
  uint32_t gen;
} join_t;

typedef struct placer_s {
  const ab_lifetime_t *lt;
  uint32_t n;
  uint64_t align;
  uint64_t *offset;
  uint32_t *upto;  /* per lifetime: the slot its window ends at, as its own stream sees it */
  bool one_stream; /* every lifetime on one stream: end_other never matters */
  ivtree_t cells; /* the cells of free space */
  tops_t tops;
  /* The windows of one placement: the cells that span its window, or the placed lifetimes
   * that overlap it (then sorted by lo). */
  found_t found;
  join_t join;
  /* The first way: the placed lifetimes by their latest windows. */
  bool by_overlaps;
  uint32_t *upto_latest; /* per lifetime: its window as the stream that sees it longest does */
  ivtree_t placed;
  uint64_t *starts_placed; /* bit per slot: the lifetime starting there is placed */
  range_t *over;           /* the placed lifetimes that overlap the one to place */
  size_t nover, capover;
  range_t *sorted;         /* scratch of the sort */
  size_t capsorted;
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

static uint64_t rounded(const placer_t *p, size_t i) { return (p->lt[i].bytes + p->align - 1) & ~(p->align - 1); }

/* The first slot whose lifetime starts at or after end, at least i + 1 (a window holds its
 * own start). */
static uint32_t slot_of_end(const placer_t *p, uint32_t i, uint64_t end) {
  uint32_t lo = i + 1, hi = p->n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (p->lt[mid].start < end) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* A cell of free space: addresses [lo, hi) (hi TOP: up to the top), free during slots
 * [from, to) and taken (or the run's edge) at from - 1 and at to. */
static ab_status new_cell(placer_t *p, uint64_t lo, uint64_t hi, uint32_t from, uint32_t to) {
  return ivtree_insert(&p->cells, (window_t){lo, hi, from, to});
}

/* Fibonacci hashing: the top bits of the product. */
static size_t hash_of(uint64_t key, unsigned shift) { return (size_t)((key * 0x9E3779B97F4A7C15ULL) >> shift); }

/* Joins the cells in found (those that span a window: free at its first slot, so no two
 * share an address) into gaps: next[k] is the cell that starts where cell k ends (NONE: the
 * gap ends there), found through a hash of their los; heads lists the cells no other ends
 * at, where the gaps start. A radix sort by address did the same at two thirds of the
 * speed. The hash is at most a quarter full, so that a probe seldom goes past its first slot,
 * and holds places, not keys, so that it stays small. */
static ab_status join_cells(placer_t *p) {
  join_t *j = &p->join;
  size_t m = p->found.n;
  if (m > j->cap) {
    uint32_t *next = realloc(j->next, m * sizeof *next);
    if (next == NULL) return AB_ERR_INTERNAL;
    j->next = next;
    uint32_t *heads = realloc(j->heads, m * sizeof *heads);
    if (heads == NULL) return AB_ERR_INTERNAL;
    j->heads = heads;
    uint8_t *joined = realloc(j->joined, (m + 1) * sizeof *joined);
    if (joined == NULL) return AB_ERR_INTERNAL;
    j->joined = joined, j->cap = m;
  }
  if (4 * m > j->hcap) {
    size_t hcap = 1024;
    unsigned shift = 64 - 10;
    while (hcap < 4 * m) hcap *= 2, shift--;
    free(j->slot);
    j->slot = calloc(hcap, sizeof *j->slot);
    if (j->slot == NULL) return AB_ERR_INTERNAL;
    j->hcap = hcap, j->shift = shift, j->gen = 0;
  }
  /* A new generation empties the hash without touching it. */
  if (++j->gen == 0) {
    memset(j->slot, 0, j->hcap * sizeof *j->slot);
    j->gen = 1;
  }
  size_t mask = j->hcap - 1;
  const window_t *restrict fw = p->found.w;
  hslot_t *restrict slot = j->slot;
  uint8_t *restrict joined = j->joined;
  uint32_t *restrict next = j->next, gen = j->gen;
  unsigned shift = j->shift;
  for (size_t k = 0; k < m; k++) {
    size_t h = hash_of(fw[k].lo, shift);
    while (slot[h].gen == gen) h = (h + 1) & mask;
    slot[h] = (hslot_t){(uint32_t)k, gen};
    joined[k] = 0;
  }
  /* Whether a cell has a successor is a coin toss, so it is not a branch: the first slot is
   * read whatever it holds (one of an earlier generation names a place within found's room)
   * and nearly always decides; the cells whose first slot holds another window are probed
   * further after. */
  uint32_t *restrict later = j->heads, nlater = 0;
  for (size_t k = 0; k < m; k++) {
    uint64_t hk = fw[k].hi;
    hslot_t s = slot[hash_of(hk, shift)];
    uint32_t used = s.gen == gen, match = fw[s.at].lo == hk;
    next[k] = s.at | ((used & match) - 1u); /* NONE is all ones */
    later[nlater] = (uint32_t)k, nlater += used & (match ^ 1u);
  }
  for (size_t q = 0; q < nlater; q++) {
    uint32_t k = later[q];
    uint64_t hk = fw[k].hi;
    size_t h = (hash_of(hk, shift) + 1) & mask;
    while (slot[h].gen == gen && fw[slot[h].at].lo != hk) h = (h + 1) & mask;
    next[k] = slot[h].gen == gen ? slot[h].at : NONE;
  }
  /* joined[m] takes the marks of the cells that have no successor. */
  joined[m] = 0;
  for (size_t k = 0; k < m; k++) joined[next[k] == NONE ? m : next[k]] = 1;
  j->nheads = 0;
  for (size_t k = 0; k < m; k++) {
    j->heads[j->nheads] = (uint32_t)k;
    j->nheads += !j->joined[k];
  }
  return AB_OK;
}

/* Places lifetime i (not 0 bytes, one stream) at the smallest gap of its window that holds
 * it, the lowest of equal ones, else at the top of what overlaps it; then cuts the cells it
 * takes. */
static ab_status place_in_cells(placer_t *p, uint32_t i) {
  uint32_t from = i, to = p->upto[i];
  uint64_t size = rounded(p, i), top = tops_of(&p->tops, from, to);
  /* Above the top of what overlaps, all is free: one gap, of which only what the lifetime
   * would take is read (cells placed at other times cut it into hundreds there). */
  p->found.n = 0;
  AB_TRY(ivtree_spanning(&p->cells, from, to, top + size, &p->found));
  AB_TRY(join_cells(p));
  const window_t *fw = p->found.w;
  join_t *j = &p->join;
  uint64_t best = UINT64_MAX, best_gap = UINT64_MAX;
  uint32_t best_first = NONE, top_first = NONE;
  /* Gaps of one cell, most of them, are judged first, without a branch that goes either
   * way; the others are walked after. The smallest gap that holds it wins, the lowest of
   * equal ones, whatever the order they are judged in. */
  uint32_t *longer = j->heads, nlonger = 0;
  for (size_t h = 0; h < j->nheads; h++) {
    uint32_t k = j->heads[h];
    uint64_t lo = fw[k].lo, gap = fw[k].hi - lo;
    bool at_top = lo == top, alone = j->next[k] == NONE;
    top_first = at_top ? k : top_first;
    longer[nlonger] = k, nlonger += !alone & !at_top;
    if (__builtin_expect(alone & !at_top & (gap >= size) & (gap <= best_gap), 0) && (gap < best_gap || lo < best))
      best = lo, best_gap = gap, best_first = k;
  }
  for (size_t h = 0; h < nlonger; h++) {
    uint32_t k = longer[h], last = k;
    uint64_t lo = fw[k].lo;
    /* A gap already longer than the best so far cannot win: its walk stops there. */
    while (j->next[last] != NONE && fw[last].hi - lo <= best_gap) last = j->next[last];
    uint64_t gap = fw[last].hi - lo;
    if (j->next[last] == NONE && gap >= size && (gap < best_gap || (gap == best_gap && lo < best)))
      best = lo, best_gap = gap, best_first = k;
  }
  /* The cell at the top spans the window: below it, what overlaps ends there. */
  if (top_first == NONE) return AB_ERR_INTERNAL;
  if (best_first == NONE) best = top, best_first = top_first;
  uint64_t end = best + size;
  p->offset[i] = best;
  tops_add(&p->tops, from, to, end);
  /* The cells of the gap below end: their addresses above end stay as they were; below it,
   * they are free before the window and after it, cells of their own joined where they
   * meet with the same slots. */
  uint64_t early_lo = 0, early_hi = 0, late_lo = 0, late_hi = 0;
  uint32_t early_from = 0, late_to = 0;
  bool early = false, late = false;
  for (uint32_t k = best_first; k != NONE && fw[k].lo < end; k = j->next[k]) {
    window_t c = fw[k];
    /* Above end it keeps its slots: the same cell, raised. */
    if (c.hi > end) ivtree_raise(&p->cells, &c, end);
    else ivtree_remove(&p->cells, &c);
    uint64_t hi = c.hi < end ? c.hi : end;
    if (early && c.from != early_from) {
      AB_TRY(new_cell(p, early_lo, early_hi, early_from, from));
      early = false;
    }
    if (c.from < from) {
      if (!early) early = true, early_lo = c.lo, early_from = c.from;
      early_hi = hi;
    }
    if (late && c.to != late_to) {
      AB_TRY(new_cell(p, late_lo, late_hi, to, late_to));
      late = false;
    }
    if (c.to > to) {
      if (!late) late = true, late_lo = c.lo, late_to = c.to;
      late_hi = hi;
    }
  }
  if (early) AB_TRY(new_cell(p, early_lo, early_hi, early_from, from));
  if (late) AB_TRY(new_cell(p, late_lo, late_hi, to, late_to));
  return AB_OK;
}

/* Sorts f[0..n) by lo: insertion sort for a few, else a byte-wise radix sort over the bytes
 * the offsets use (qsort's calls were most of the planning time). */
static ab_status sort_by_lo(range_t *f, size_t n, range_t **scratch, size_t *capscratch) {
  if (n < 48) {
    for (size_t i = 1; i < n; i++) {
      range_t x = f[i];
      size_t j = i;
      for (; j > 0 && f[j - 1].lo > x.lo; j--) f[j] = f[j - 1];
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
  for (size_t i = 0; i < n; i++) used |= f[i].lo;
  range_t *src = f, *dst = *scratch;
  for (unsigned shift = 0; shift < 64 && (used >> shift); shift += 8) {
    size_t count[257] = {0};
    for (size_t i = 0; i < n; i++) count[((src[i].lo >> shift) & 0xff) + 1]++;
    for (size_t d = 0; d < 256; d++) count[d + 1] += count[d];
    for (size_t i = 0; i < n; i++) dst[count[(src[i].lo >> shift) & 0xff]++] = src[i];
    range_t *t = src;
    src = dst, dst = t;
  }
  if (src != f) memcpy(f, src, n * sizeof *f);
  return AB_OK;
}

/* The first way (Note [Greedy by size over the free space]): the ranges of the placed lifetimes
 * that overlap lifetime i, those whose latest windows hold slot i and those placed that
 * start inside i's latest window, each checked as its stream sees i. */
static ab_status collect(placer_t *p, uint32_t i) {
  const ab_lifetime_t *x = &p->lt[i];
  p->found.n = p->nover = 0;
  AB_TRY(ivtree_spanning(&p->placed, i, i + 1, UINT64_MAX, &p->found));
  if (p->capover < p->found.n + 1024) {
    size_t cap = p->found.n + 1024;
    range_t *o = realloc(p->over, cap * sizeof *o);
    if (o == NULL) return AB_ERR_INTERNAL;
    p->over = o, p->capover = cap;
  }
  /* A placed lifetime's window starts at its own slot. */
  for (size_t k = 0; k < p->found.n; k++)
    if (overlap_in_time(x, &p->lt[p->found.w[k].from]))
      p->over[p->nover++] = (range_t){p->found.w[k].lo, p->found.w[k].hi};
  uint32_t to = p->upto_latest[i];
  for (uint32_t w = (i + 1) / 64; (uint64_t)w * 64 < to; w++) {
    uint64_t bits = p->starts_placed[w];
    if (w == (i + 1) / 64) bits &= ~0ULL << ((i + 1) % 64);
    for (; bits; bits &= bits - 1) {
      uint32_t j = w * 64 + (uint32_t)__builtin_ctzll(bits);
      if (j >= to) break;
      if (!overlap_in_time(x, &p->lt[j])) continue;
      if (p->nover == p->capover) {
        range_t *o = realloc(p->over, 2 * p->capover * sizeof *o);
        if (o == NULL) return AB_ERR_INTERNAL;
        p->over = o, p->capover *= 2;
      }
      p->over[p->nover++] = (range_t){p->offset[j], p->offset[j] + rounded(p, j)};
    }
  }
  return AB_OK;
}

static ab_status place_by_overlaps(placer_t *p, uint32_t i) {
  uint64_t size = rounded(p, i);
  AB_TRY(collect(p, i));
  AB_TRY(sort_by_lo(p->over, p->nover, &p->sorted, &p->capsorted));
  /* Best fit: the smallest gap that holds it; none: above everything it overlaps. */
  const range_t *f = p->over;
  uint64_t at = 0, best = UINT64_MAX, best_gap = UINT64_MAX;
  for (size_t k = 0; k < p->nover; k++) {
    if (f[k].lo > at) {
      uint64_t gap = f[k].lo - at;
      if (gap >= size && gap < best_gap) best = at, best_gap = gap;
    }
    if (f[k].hi > at) at = f[k].hi;
  }
  p->offset[i] = best != UINT64_MAX ? best : at;
  return ivtree_insert(&p->placed, (window_t){p->offset[i], p->offset[i] + size, i, p->upto_latest[i]});
}

/* Switches to the first way: every lifetime placed so far goes into its tree. */
static ab_status start_by_overlaps(placer_t *p, const bool *placed) {
  p->by_overlaps = true;
  AB_TRY(ivtree_init(&p->placed, p->n));
  p->upto_latest = malloc(p->n * sizeof *p->upto_latest);
  if (p->upto_latest == NULL) return AB_ERR_INTERNAL;
  for (uint32_t i = 0; i < p->n; i++) {
    p->upto_latest[i] = slot_of_end(p, i, latest_end(p, &p->lt[i]));
    if (!placed[i]) continue;
    AB_TRY(ivtree_insert(&p->placed, (window_t){p->offset[i], p->offset[i] + rounded(p, i), i, p->upto_latest[i]}));
  }
  return AB_OK;
}

static void placer_free(placer_t *p) {
  free(p->upto);
  ivtree_free(&p->cells);
  free(p->tops.own), free(p->tops.below);
  free(p->found.w);
  free(p->over);
  free(p->join.next), free(p->join.heads), free(p->join.joined), free(p->join.slot);
  free(p->upto_latest);
  ivtree_free(&p->placed);
  free(p->starts_placed);
  free(p->sorted);
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

/* Lifetimes never freed all meet one another (each is live when a later one starts), so
 * they are stacked at the bottom in the order they come, and the rest is packed above them
 * without searching them again and again. */
static bool never_freed(const ab_lifetime_t *a) { return a->end == UINT64_MAX && a->end_other == UINT64_MAX; }

/* Greedy by size; once what it has placed reaches past bound it stops and sets *beaten (its
 * peak can only grow, so it would lose to the plan that bound is the peak of). */
static ab_status greedy_by_size(const ab_lifetime_t *lt, size_t n, uint64_t align, uint64_t bound, uint64_t *offset,
                                uint64_t *peak, bool *beaten) {
  *peak = 0;
  *beaten = false;
  if (n >= MAX_LIFETIMES) return AB_ERR_INTERNAL;
  placer_t p = {.lt = lt, .n = (uint32_t)n, .align = align, .offset = offset, .one_stream = true};
  for (size_t i = 1; i < n; i++) p.one_stream = p.one_stream && lt[i].stream == lt[0].stream;
  order_t *order = malloc(n * sizeof *order);
  bool *placed = calloc(n, sizeof *placed);
  p.upto = malloc(n * sizeof *p.upto);
  p.starts_placed = calloc(n / 64 + 1, sizeof *p.starts_placed);
  ab_status st = order && placed && p.upto && p.starts_placed ? ivtree_init(&p.cells, p.n) : AB_ERR_INTERNAL;
  if (st == AB_OK) st = tops_init(&p.tops, p.n);
  for (size_t i = 0; st == AB_OK && i < n; i++) {
    order[i] = (order_t){lt[i].bytes, lt[i].start, i};
    p.upto[i] = slot_of_end(&p, (uint32_t)i, lt[i].end);
  }
  if (st == AB_OK) qsort(order, n, sizeof *order, by_size_desc);
  uint64_t base = 0;
  for (size_t i = 0; st == AB_OK && i < n; i++)
    if (never_freed(&lt[i])) {
      offset[i] = base;
      base += (lt[i].bytes + align - 1) & ~(align - 1);
    }
  *peak = base;
  /* At the start all of it is free: one cell. */
  if (st == AB_OK) st = new_cell(&p, 0, TOP, 0, p.n);
  if (st == AB_OK && !p.one_stream) st = start_by_overlaps(&p, placed);
  uint64_t reached = base;
  for (size_t k = 0; st == AB_OK && !*beaten && k < n; k++) {
    uint32_t i = (uint32_t)order[k].i;
    if (never_freed(&lt[i])) continue;
    /* 0 bytes come last: the cells are done with. */
    if (!p.by_overlaps && rounded(&p, i) == 0) st = start_by_overlaps(&p, placed);
    if (st == AB_OK) st = p.by_overlaps ? place_by_overlaps(&p, i) : place_in_cells(&p, i);
    placed[i] = true;
    p.starts_placed[i / 64] |= 1ULL << (i % 64);
    /* The sizes add up to at most 2^64 - 1 (ab_dsa_fits): no end passes it. */
    if (base + offset[i] + rounded(&p, i) > reached) reached = base + offset[i] + rounded(&p, i);
    *beaten = reached > bound;
  }
  /* The rest was packed from 0: above the stack. */
  for (size_t i = 0; st == AB_OK && i < n; i++)
    if (placed[i]) {
      uint64_t size = (lt[i].bytes + align - 1) & ~(align - 1);
      offset[i] += base;
      if (offset[i] + size > *peak) *peak = offset[i] + size;
    }
  placer_free(&p);
  free(placed);
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
  ab_free_ranges_t a;
  ab_free_ranges_init(&a);
  ab_status st = AB_OK;
  size_t r = 0;
  for (size_t i = 0; st == AB_OK && i < n; i++) {
    for (; st == AB_OK && r < nrel && rel[r].at <= lt[i].start; r++)
      st = ab_free_ranges_give(&a, offset[rel[r].i], (lt[rel[r].i].bytes + align - 1) & ~(align - 1));
    uint64_t size = (lt[i].bytes + align - 1) & ~(align - 1);
    if (st != AB_OK || size == 0) {
      offset[i] = 0;
      continue;
    }
    st = ab_free_ranges_take_best(&a, size, &offset[i]);
    if (st == AB_ERR_OOM) {
      st = ab_free_ranges_grow(&a, size - ab_free_ranges_top_free(&a));
      if (st == AB_OK) st = ab_free_ranges_take_best(&a, size, &offset[i]);
    }
  }
  *peak = a.bytes;
  ab_free_ranges_clear(&a);
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

ab_status ab_dsa_greedy_by_size(const ab_lifetime_t *lt, size_t n, uint64_t align, uint64_t *offset, uint64_t *peak) {
  uint64_t total;
  *peak = 0;
  if (n == 0) return AB_OK;
  if (!ab_dsa_fits(lt, n, align, &total)) return AB_ERR_OOM;
  bool beaten;
  return greedy_by_size(lt, n, align, UINT64_MAX, offset, peak, &beaten);
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
  /* Best fit in time first: greedy by size, the slower, stops once it is sure to lose to it,
   * and the smaller of the two is kept as before (greedy by size where they tie). */
  ab_status st = best_fit_in_time(lt, n, align, one_stream, other, &other_peak);
  bool beaten = false;
  if (st == AB_OK) st = greedy_by_size(lt, n, align, other_peak, offset, peak, &beaten);
  if (st == AB_OK && (beaten || other_peak < *peak)) {
    memcpy(offset, other, n * sizeof *offset);
    *peak = other_peak;
  }
  free(other);
  return st;
}
