/* sim_place.c: where the simulated card puts a cudaMalloc of 2 MiB or more: the driver's
 * placement, as measured on an H200 (Note [Driver placement]).
 *
 * Note [Driver placement]
 * ~~~~~~~~~~~~~~~~~~~~~~~
 * PyTorch's caching allocator breaks ties between free blocks of the same size by address
 * (the block sets of c10/cuda/CUDACachingAllocator.cpp, PyTorch v2.11.0, are ordered by
 * stream, size, then address: BlockComparatorSize), so where the driver puts each segment
 * decides which of two equal blocks is reused, and from there its figures. Measured on an
 * H200 (driver 580.159.04, CUDA 13.0) by a program that asks cudaMalloc for the sizes a
 * caching allocator asks for, frees some, asks again and reads every address back
 * (results/h200/placement/probe.cu, its output beside it), the driver places a cudaMalloc of
 * 2 MiB or more by these rules:
 *
 *  1. It works in chunks of address space: a request that no chunk has room for gets a new
 *     chunk of its size rounded up to 32 MiB, and is placed at the chunk's low end; the rest
 *     of the chunk (its tail) is room for later requests. (A 34 MiB request takes a 64 MiB
 *     chunk, 258 MiB one of 288; a 2 MiB request one of 32.)
 *  2. A request goes first into room in the chunks already there: the chunk made last that
 *     has room for it, at the lowest address of that room. (A 2 MiB request after a 114 MiB
 *     one lands right after it; thirty-MiB requests fill the 30 MiB tails of the 226 MiB
 *     chunks, the newest first.)
 *  3. A new chunk is cut from the top of the highest free range of addresses that is larger
 *     than it: first fit, walking down. Fresh addresses therefore go down: each new chunk
 *     sits just below the one before, and newer segments have lower addresses. Ranges freed
 *     above the lowest chunk are reused first, the highest of them first, before the space
 *     below is touched. (A caching allocator's program under garbage collection, run four
 *     times on the H200, placed its 1 648 segments at the same offsets each time; after four
 *     segments went back, a 160 MiB chunk went to the top of the highest free range, 608 MiB
 *     long, over a lower one of 288 MiB, and a 224 MiB chunk passed over a free range of
 *     exactly 224 MiB for the next one down, of 320 MiB, over a lower one of 288.)
 *  4. A chunk whose allocations are all freed goes back whole: its addresses become a free
 *     range again (merged with free neighbours), available to rule 3. A free range exactly
 *     the size of a chunk was never reused for it (a freed 64 MiB chunk stayed empty while
 *     58 MiB requests took the tops of 128 MiB ranges; a freed 256 MiB range beside another
 *     was passed over by a 226 MiB request), hence "larger" in rule 3.
 *
 * How far the driver itself varies: the same probe run three times, in three processes, gave
 * the same offsets from its first address every time, and so did the program above; the base
 * differs from process to process. The ranges the CUDA context and libraries hold before the
 * first request leave holes that a program's first segments may fill (in one recorded
 * mixture-of-experts training job, a 2 MiB and a 20 MiB segment 478 and 552 MiB above the
 * first). That job, run four times, also split its 20 MiB chunks between two free ranges in
 * an order that changed from run to run, while PyTorch's figures stayed the same each time:
 * where two ranges qualify, the driver's choice is not a function of the requests alone. In
 * that job the placement that decides a figure (one 64 MiB chunk, below or above an older
 * one) followed free space that something else in the process took and gave back between
 * two of PyTorch's calls, which no snapshot records; run four times more, the same job made
 * 365 device allocations once, as this model predicts, and 363 the other times
 * (results/h200/placement/repeat/eager.txt). Neither is modelled: the simulated card starts
 * with one free range, and takes a range by rule 3. Requests below 2 MiB (never a caching
 * allocator's: its smallest segment is 2 MiB) keep the card's older rule, best fit at the
 * top of a free range (sim_vaspace.c); address reservations (cuMemAddressReserve) too: on the
 * H200 they lay in a low region of their own, apart from cudaMalloc's chunks, which the
 * simulated card does not separate.
 *
 * Finding "the chunk made last that has room" is a search over every chunk ever made that
 * is still held; a tree of the largest room per range of creation order answers it in
 * logarithmic time, so the raw strategy, which makes a device call per request, stays fast.
 *
 * Note [Placement bands]
 * ~~~~~~~~~~~~~~~~~~~~~~
 * The rules above are what the driver did in runs that repeated themselves; the runs that did
 * not show three ways the driver's placement departs from them, none of which a trace
 * records. A figure that placement decides is therefore given as a band: its value under the
 * rules and under AB_PLACEMENT_VARIANTS variants, each the rules with some of these
 * departures, drawn from a generator seeded by the variant's number (so each variant is the
 * same placement on every run, and `--placement V` replays it):
 *
 *  - Holes the context leaves. Before a program's first request, the CUDA context and the
 *    libraries hold ranges with gaps between them; the mixture-of-experts job of
 *    results/h200/placement/repeat put its first 2 MiB and 20 MiB segments 478 and 552 MiB
 *    above the first segment of its own, in such gaps, and runs of the same program with
 *    other module loading (CUDA_MODULE_LOADING=EAGER) found gaps elsewhere. Modelled as two
 *    chunks held by the context above the first one, with rooms of 2 and 20 MiB (the first
 *    sizes a caching allocator asks for), which rule 2 fills first.
 *  - The driver's choice between ranges that fit. The same job, four times, split its
 *    20 MiB chunks between a range above its first segment and one below it, in an order
 *    that changed from run to run. Modelled as a new chunk passing over the highest range
 *    larger than it for the next one down, with a chance per chunk of 1/16 to 1/8.
 *  - Memory outside the trace. Between two of PyTorch's calls with no free of PyTorch's, the
 *    driver once placed a chunk where the program's own free space did not put it: something
 *    else in the process (a library's workspace, the context's own growth) held memory for a
 *    moment. Modelled as 32 MiB taken from the top of the highest range before a new chunk
 *    is cut, and given back after, with a chance per chunk of 1/8 to 1/2.
 *
 * The variants combine them: holes alone; the choice alone (1/8); outside memory alone
 * (1/4); all three (1/8, 1/8); the choice and outside memory (1/16, 1/8); holes and outside
 * memory (1/2). How they were bounded: every recorded run in tests/data replays inside its
 * band (tests/band_test.sh), the job above included, whose band of device allocations is
 * 363 to 365, the two counts the driver gave it in eight runs; a chance of 1/4 for the
 * choice took that job to 389 device allocations, which no run of it showed, so the chances
 * stay at or below 1/8. A band is a range over these placements, not a bound on every
 * placement a driver could make. Where no placement choice decides a figure (a strategy that
 * never breaks ties by address, a run whose equal free blocks never lie in two segments),
 * every variant replays to the same figure, and the band is a point.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/device/sim_place.h"

#define CHUNK_BYTES (32ULL << 20)

typedef struct slice_s {
  uint64_t off, bytes;
} slice_t;

typedef struct place_chunk_s {
  ab_tnode_t node; /* in place_t.chunks, by base */
  ab_dptr_t base;
  uint64_t bytes;
  size_t slot;  /* its place in creation order */
  size_t n, cap;
  slice_t *live; /* its allocations, by offset */
} place_chunk_t;

static int cmp_chunk(const ab_tnode_t *a, const ab_tnode_t *b) {
  ab_dptr_t x = AB_CONTAINER_OF(a, place_chunk_t, node)->base, y = AB_CONTAINER_OF(b, place_chunk_t, node)->base;
  return (x > y) - (x < y);
}

/* The chunk with the highest base not above at, or NULL: ab_tree_floor by base, its order
 * written out rather than called through a pointer at every node, its turns taken with
 * ab_tree_pick. */
static place_chunk_t *chunk_floor(const place_t *p, ab_dptr_t at) {
  ab_tnode_t *n = p->chunks.root, *best = NULL;
  while (n) {
    bool below = AB_CONTAINER_OF(n, place_chunk_t, node)->base <= at;
    best = ab_tree_pick(below, n, best);
    n = ab_tree_pick(below, n->right, n->left);
  }
  return best ? AB_CONTAINER_OF(best, place_chunk_t, node) : NULL;
}

void ab_sim_place_init(place_t *p, unsigned variant) {
  memset(p, 0, sizeof *p);
  ab_tree_init(&p->chunks, cmp_chunk);
  p->variant = variant <= AB_PLACEMENT_VARIANTS ? variant : 0;
  p->rng = ab_rng_seed(p->variant);
}

static void chunk_drop(place_chunk_t *c) {
  free(c->live);
  free(c);
}

void ab_sim_place_fini(place_t *p) {
  for (size_t i = 0; i < p->n; i++)
    if (p->order[i]) chunk_drop(p->order[i]);
  free(p->order);
  free(p->room);
  ab_sim_place_init(p, p->variant);
}

/* ---- the largest room per chunk, over creation order --------------------------------------
 * room[cap + i] is chunk i's largest free stretch (0 once it is gone); room[k] for k < cap
 * the larger of its two children. cap is a power of two. */

static uint64_t largest_room(const place_chunk_t *c) {
  uint64_t best = 0, at = 0;
  for (size_t i = 0; i < c->n; i++) {
    if (c->live[i].off - at > best) best = c->live[i].off - at;
    at = c->live[i].off + c->live[i].bytes;
  }
  return c->bytes - at > best ? c->bytes - at : best;
}

static void room_set(place_t *p, size_t slot, uint64_t room) {
  size_t k = p->cap + slot;
  p->room[k] = room;
  /* Up to the root, rather than stopping at the first node the change leaves as it was:
   * a climb of fixed length, whose end the processor predicts, costs less than the stop. */
  for (k /= 2; k >= 1; k /= 2) {
    uint64_t l = p->room[2 * k], r = p->room[2 * k + 1];
    p->room[k] = l > r ? l : r;
  }
}

/* The chunk made last with a stretch of at least `bytes` free, or NULL. */
static place_chunk_t *newest_with_room(const place_t *p, uint64_t bytes) {
  if (p->cap == 0 || p->room[1] < bytes) return NULL;
  size_t k = 1;
  while (k < p->cap) k = p->room[2 * k + 1] >= bytes ? 2 * k + 1 : 2 * k;
  return p->order[k - p->cap];
}

/* Rebuilds the order without the chunks given back, in a tree of `cap` leaves. */
static ab_status reorder(place_t *p, size_t cap) {
  place_chunk_t **order = calloc(cap, sizeof *order);
  uint64_t *room = calloc(2 * cap, sizeof *room);
  if (order == NULL || room == NULL) {
    free(order);
    free(room);
    return AB_ERR_INTERNAL;
  }
  size_t n = 0;
  for (size_t i = 0; i < p->n; i++)
    if (p->order[i]) {
      order[n] = p->order[i];
      order[n]->slot = n;
      room[cap + n] = largest_room(order[n]);
      n++;
    }
  for (size_t k = cap - 1; k >= 1; k--) room[k] = room[2 * k] > room[2 * k + 1] ? room[2 * k] : room[2 * k + 1];
  free(p->order);
  free(p->room);
  p->order = order;
  p->room = room;
  p->n = n;
  p->cap = cap;
  return AB_OK;
}

/* A slot at the end of the order for a new chunk: the order is compacted when most of it is
 * chunks given back, and doubled when it is full of held ones. */
static ab_status slot_for_new(place_t *p) {
  if (p->n < p->cap) return AB_OK;
  size_t cap = p->cap ? p->cap : 64;
  while (p->held >= cap / 2) cap *= 2;
  return reorder(p, cap);
}

/* ---- chunks -------------------------------------------------------------------------------- */

static ab_status chunk_add(place_chunk_t *c, uint64_t off, uint64_t bytes, size_t at) {
  if (c->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 4;
    slice_t *live = realloc(c->live, cap * sizeof *live);
    if (live == NULL) return AB_ERR_INTERNAL;
    c->live = live;
    c->cap = cap;
  }
  memmove(&c->live[at + 1], &c->live[at], (c->n - at) * sizeof *c->live);
  c->live[at] = (slice_t){off, bytes};
  c->n++;
  return AB_OK;
}

/* The index of c's first allocation at or past offset `off`: a binary search whose steps
 * are selects, not branches (each halving is as likely to go one way as the other). */
static size_t slice_at(const place_chunk_t *c, uint64_t off) {
  if (c->n == 0) return 0;
  const slice_t *from = c->live;
  for (size_t n = c->n; n > 1; n -= n / 2) from = from[n / 2].off < off ? from + n / 2 : from;
  return (size_t)(from - c->live) + (from->off < off);
}

/* Places `bytes` at the lowest free stretch of c that holds them (rule 2). */
static ab_status chunk_place(place_t *p, place_chunk_t *c, uint64_t bytes, ab_dptr_t *out) {
  uint64_t at = 0;
  size_t i = 0;
  for (; i < c->n && c->live[i].off - at < bytes; i++) at = c->live[i].off + c->live[i].bytes;
  uint64_t stretch = (i < c->n ? c->live[i].off : c->bytes) - at;
  AB_TRY(chunk_add(c, at, bytes, i));
  /* The chunk's largest room (its leaf, room[cap + slot]) changes only where the stretch
   * cut was that room; a new chunk's leaf is 0 until now. */
  if (stretch >= p->room[p->cap + c->slot]) room_set(p, c->slot, largest_room(c));
  *out = c->base + at;
  return AB_OK;
}

/* A new chunk for `bytes` (rules 1 and 3, passing over `skip` ranges that fit: Note
 * [Placement bands]), or exactly [at, at + bytes) when at is not 0. */
static ab_status chunk_new(place_t *p, vaspace_t *va, uint64_t bytes, ab_dptr_t at, unsigned skip, place_chunk_t **out) {
  AB_TRY(slot_for_new(p));
  place_chunk_t *c = calloc(1, sizeof *c);
  if (c == NULL) return AB_ERR_INTERNAL;
  c->bytes = at ? bytes : (bytes + CHUNK_BYTES - 1) / CHUNK_BYTES * CHUNK_BYTES;
  ab_status st = at ? (ab_sim_va_take(va, at, bytes) ? AB_OK : AB_ERR_OOM)
                    : ab_sim_va_alloc_larger(va, c->bytes, CHUNK_BYTES, skip, &c->base);
  if (st != AB_OK) {
    free(c);
    return st;
  }
  if (at) c->base = at;
  c->slot = p->n++;
  p->order[c->slot] = c;
  p->held++;
  ab_tree_insert(&p->chunks, &c->node);
  *out = c;
  return AB_OK;
}

static void chunk_give_back(place_t *p, vaspace_t *va, place_chunk_t *c) {
  room_set(p, c->slot, 0);
  p->order[c->slot] = NULL;
  p->held--;
  ab_tree_remove(&p->chunks, &c->node);
  ab_sim_va_free(va, c->base, c->bytes);
  chunk_drop(c);
}

/* ---- the variants of Note [Placement bands] ------------------------------------------------ */

typedef struct variant_s {
  bool holes;     /* the context leaves holes of 2 and 20 MiB above the first chunk */
  double skip;    /* the chance that a new chunk passes over the highest range that fits */
  double outside; /* the chance that something outside the program holds 32 MiB while a new
                     chunk is placed */
} variant_t;

static const variant_t variants[AB_PLACEMENT_VARIANTS] = {
    {true, 0.0, 0.0},     {false, 0.125, 0.0},  {false, 0.0, 0.25},
    {true, 0.125, 0.125}, {false, 0.0625, 0.125}, {true, 0.0, 0.5},
};

static const variant_t *variant_of(const place_t *p) { return p->variant ? &variants[p->variant - 1] : NULL; }

/* The holes the CUDA context leaves: chunks of its own, each holding all of its 32 MiB but the
 * hole at its low end, made before the program's first chunk and so above it. The 2 MiB hole
 * is made last, so that rule 2 (the newest chunk with room) puts a 2 MiB request there and
 * leaves the 20 MiB hole to a 20 MiB one: the two sizes a caching allocator asks for first
 * (a small segment, and a large one for a request under 10 MiB). */
static ab_status make_holes(place_t *p, vaspace_t *va) {
  static const uint64_t holes[] = {20ULL << 20, 2ULL << 20};
  for (size_t i = 0; i < sizeof holes / sizeof *holes; i++) {
    place_chunk_t *c;
    AB_TRY(chunk_new(p, va, CHUNK_BYTES, 0, 0, &c));
    AB_TRY(chunk_add(c, holes[i], CHUNK_BYTES - holes[i], 0));
    room_set(p, c->slot, holes[i]);
  }
  return AB_OK;
}

/* A new chunk for `bytes` as the variant places it: past the highest range that fits now and
 * then, and below 32 MiB held outside the program while it is placed, given back after. */
static ab_status chunk_new_placed(place_t *p, vaspace_t *va, uint64_t bytes, place_chunk_t **out) {
  const variant_t *v = variant_of(p);
  if (v == NULL) return chunk_new(p, va, bytes, 0, 0, out);
  unsigned skip = ab_rng_uniform(&p->rng) < v->skip;
  ab_dptr_t outside = 0;
  if (ab_rng_uniform(&p->rng) < v->outside && ab_sim_va_alloc_larger(va, CHUNK_BYTES, CHUNK_BYTES, 0, &outside) != AB_OK)
    outside = 0;
  ab_status st = chunk_new(p, va, bytes, 0, skip, out);
  if (outside) ab_sim_va_free(va, outside, CHUNK_BYTES);
  return st;
}

ab_status ab_sim_place_alloc(place_t *p, vaspace_t *va, uint64_t bytes, ab_dptr_t *out) {
  if (!p->started) {
    p->started = true;
    if (variant_of(p) && variant_of(p)->holes) AB_TRY(make_holes(p, va));
  }
  place_chunk_t *c = newest_with_room(p, bytes);
  if (c == NULL) AB_TRY(chunk_new_placed(p, va, bytes, &c));
  ab_status st = chunk_place(p, c, bytes, out);
  if (st != AB_OK && c->n == 0) chunk_give_back(p, va, c);
  return st;
}

bool ab_sim_place_take(place_t *p, vaspace_t *va, ab_dptr_t at, uint64_t bytes) {
  place_chunk_t *c;
  if (chunk_new(p, va, bytes, at, 0, &c) != AB_OK) return false;
  if (chunk_add(c, 0, bytes, 0) != AB_OK) {
    chunk_give_back(p, va, c);
    return false;
  }
  room_set(p, c->slot, 0);
  return true;
}

ab_status ab_sim_place_free(place_t *p, vaspace_t *va, ab_dptr_t at, uint64_t bytes) {
  place_chunk_t *c = chunk_floor(p, at);
  if (c == NULL || at - c->base >= c->bytes) return AB_ERR_INTERNAL;
  uint64_t off = at - c->base;
  size_t lo = slice_at(c, off);
  if (lo == c->n || c->live[lo].off != off || c->live[lo].bytes != bytes) return AB_ERR_INTERNAL;
  memmove(&c->live[lo], &c->live[lo + 1], (c->n - lo - 1) * sizeof *c->live);
  if (--c->n == 0) {
    chunk_give_back(p, va, c);
    return AB_OK;
  }
  /* The stretches beside the freed allocation join it; the others stay as they were, so the
   * largest room is the larger of the one before and the joined stretch. */
  uint64_t from = lo > 0 ? c->live[lo - 1].off + c->live[lo - 1].bytes : 0;
  uint64_t joined = (lo < c->n ? c->live[lo].off : c->bytes) - from;
  if (joined > p->room[p->cap + c->slot]) room_set(p, c->slot, joined);
  return AB_OK;
}
