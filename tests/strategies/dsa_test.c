/* dsa_test.c: the offline packer (dsa.h) places every lifetime where its first version did.
 * Greedy by size now reads the gaps from the free space kept as cells
 * (Note [Greedy by size over the free space], dsa.c) instead of gathering and sorting every placed lifetime that
 * overlaps the one to place, and ab_dsa_place stops it once best fit in time has beaten it;
 * the heuristics are the same, so the placements must be too. The first version is kept
 * below, as it was, as the reference: its offsets and peak are compared with the packer's on
 * the workloads, the recorded CNN run and random runs of one stream and of several, with
 * ties of size and start, lifetimes of 0 bytes, lifetimes never freed and SYNCs far after
 * the frees, where either heuristic wins. Nothing here is timed; tests/bench/oracle_bench.sh
 * measures. */
#include <string.h>

#include "kernels/base/rng.h"
#include "harness/run/lifetimes.h"
#include "strategies/common/free_ranges.h"
#include "strategies/planned/dsa.h"
#include "workloads/workload.h"

#include "tests/check.h"

#define CNN_TRACE AB_TEST_DATA_DIR "/pytorch-2.11-h200/cnn_dyn.default.trace.csv.gz"

/* The reference: dsa.c before the cells, unchanged but for its names (ref_place was
 * ab_dsa_place, ref_greedy_by_size and ref_best_fit_in_time were greedy_by_size and
 * best_fit_in_time). It gathered the placed lifetimes that overlap the one to place from an
 * interval tree over the starts (the long ones from a list beside it), sorted their ranges by
 * offset and scanned them for the smallest gap that holds it. */

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

static ab_status ref_greedy_by_size(const ab_lifetime_t *lt, size_t n, uint64_t align, uint64_t *offset, uint64_t *peak) {
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
static ab_status ref_best_fit_in_time(const ab_lifetime_t *lt, size_t n, uint64_t align, bool one_stream, uint64_t *offset,
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

static ab_status ref_place(const ab_lifetime_t *lt, size_t n, uint64_t align, uint64_t *offset, uint64_t *peak) {
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
  ab_status st = ref_greedy_by_size(lt, n, align, offset, peak);
  if (st == AB_OK) st = ref_best_fit_in_time(lt, n, align, one_stream, other, &other_peak);
  if (st == AB_OK && other_peak < *peak) {
    memcpy(offset, other, n * sizeof *offset);
    *peak = other_peak;
  }
  free(other);
  return st;
}

/* Places lt both ways, greedy by size alone and the packer's choice; every offset, the peak
 * and the status must be the reference's. */
static void same_as_the_reference(const char *what, const ab_lifetime_t *lt, size_t n, uint64_t align) {
  uint64_t *ref = malloc((n ? n : 1) * sizeof *ref), *got = malloc((n ? n : 1) * sizeof *got);
  REQUIRE(ref != NULL && got != NULL);
  for (int place = 0; place < 2; place++) {
    uint64_t ref_peak = 0, got_peak = 0;
    ab_status rs = place ? ref_place(lt, n, align, ref, &ref_peak) : ref_greedy_by_size(lt, n, align, ref, &ref_peak);
    ab_status gs =
        place ? ab_dsa_place(lt, n, align, got, &got_peak) : ab_dsa_greedy_by_size(lt, n, align, got, &got_peak);
    const char *how = place ? "ab_dsa_place" : "greedy by size";
    CHECK_MSG(rs == gs, "%s, %s: status %s, the reference %s", what, how, ab_status_name(gs), ab_status_name(rs));
    if (rs != AB_OK || gs != AB_OK) continue;
    CHECK_MSG(got_peak == ref_peak, "%s, %s: peak %llu, the reference %llu", what, how, (unsigned long long)got_peak,
              (unsigned long long)ref_peak);
    size_t differ = 0, first = 0;
    for (size_t i = 0; i < n; i++)
      if (got[i] != ref[i] && differ++ == 0) first = i;
    CHECK_MSG(differ == 0, "%s, %s: %zu of %zu offsets differ, the first lifetime %zu at %llu, the reference %llu",
              what, how, differ, n, first, (unsigned long long)got[first], (unsigned long long)ref[first]);
  }
  free(ref);
  free(got);
}

static void same_placements_on_the_workloads(void) {
  /* Several streams without a SYNC overlap to the end: 20 000 ops keep the reference quick. */
  static const char *workloads[] = {"dynamic-shapes", "cnn-dynamic", "mixed-precision", "zero:stage=3", "random",
                                    "random:streams=3,ops=20000", "fragmenter", "replay:" CNN_TRACE};
  for (size_t w = 0; w < sizeof workloads / sizeof workloads[0]; w++) {
    ab_events_t es;
    ab_diag_t diag = {""};
    if (ab_workload_build(workloads[w], 42, &es, &diag) != AB_OK) {
      printf("  %s: not here (%s)\n", workloads[w], diag.msg);
      continue;
    }
    ab_lifetime_t *lt;
    size_t n;
    REQUIRE(ab_lifetimes_build(&es, &lt, &n) == AB_OK);
    same_as_the_reference(workloads[w], lt, n, 512);
    free(lt);
    ab_events_free(&es);
  }
}

/* A run as the engine hands it (lifetimes by start, start < end <= end_other), drawn to
 * reach the corners: sizes from a few values (ties in the order) or spread over 2^24,
 * some of 0 bytes; starts one or a few events apart, or equal; lives from one event to the
 * whole run; a few never freed; another stream's end at the free or far after it. */
static size_t random_run(uint64_t seed, ab_lifetime_t *lt, size_t cap, uint64_t *align) {
  ab_rng_t r = ab_rng_seed(seed);
  size_t n = (size_t)ab_rng_range(&r, 1, cap);
  unsigned streams = ab_rng_range(&r, 0, 2) == 0 ? (unsigned)ab_rng_range(&r, 2, 4) : 1;
  bool few_sizes = ab_rng_range(&r, 0, 1), zeros = ab_rng_range(&r, 0, 3) == 0, ties = ab_rng_range(&r, 0, 3) == 0;
  uint64_t longest = ab_rng_range(&r, 0, 1) ? 2 * n : ab_rng_range(&r, 2, 64);
  static const uint64_t aligns[] = {512, 512, 1, 4096};
  *align = aligns[ab_rng_range(&r, 0, 3)];
  uint64_t t = 0;
  for (size_t i = 0; i < n; i++) {
    t += ties && ab_rng_range(&r, 0, 2) == 0 ? 0 : ab_rng_range(&r, 1, 3);
    uint64_t bytes = few_sizes ? 512 * ab_rng_range(&r, 1, 4) : ab_rng_range(&r, 1, 1ULL << ab_rng_range(&r, 1, 24));
    if (zeros && ab_rng_range(&r, 0, 9) == 0) bytes = 0;
    uint64_t end = t + ab_rng_range(&r, 1, longest);
    uint64_t other = end + (ab_rng_range(&r, 0, 1) ? 0 : ab_rng_range(&r, 1, 50));
    if (ab_rng_range(&r, 0, 40) == 0) other = UINT64_MAX;
    if (ab_rng_range(&r, 0, 30) == 0) end = other = UINT64_MAX;
    lt[i] = (ab_lifetime_t){bytes, t, end, other, 0, (uint16_t)ab_rng_range(&r, 0, streams - 1)};
  }
  return n;
}

static void same_placements_on_random_runs(void) {
  enum { RUNS = 400, CAP = 1500 };
  static ab_lifetime_t lt[CAP];
  for (uint64_t seed = 1; seed <= RUNS; seed++) {
    uint64_t align;
    size_t n = random_run(seed, lt, CAP, &align);
    char what[64];
    snprintf(what, sizeof what, "random run %llu (%zu lifetimes)", (unsigned long long)seed, n);
    same_as_the_reference(what, lt, n, align);
  }
}

/* Like the trace of the report that made the cells: many allocations, at most L live, each
 * op an allocation or the free of a random live one (RMM's random_allocations), sizes
 * log-normal; one stream, then two. */
static size_t hostile_run(uint64_t seed, size_t allocs, size_t most_live, unsigned streams, ab_lifetime_t *lt) {
  ab_rng_t r = ab_rng_seed(seed);
  size_t *live = malloc(most_live * sizeof *live), nlive = 0, n = 0;
  uint64_t t = 0;
  while (n < allocs || nlive > 0) {
    if (n < allocs && (nlive == 0 || (nlive < most_live && ab_rng_uniform(&r) < 0.9))) {
      uint64_t bytes = (uint64_t)(1048576.0 * exp(1.5 * ab_rng_normal(&r))) + 1;
      lt[n] = (ab_lifetime_t){bytes, t, UINT64_MAX, UINT64_MAX, 0, (uint16_t)ab_rng_range(&r, 0, streams - 1)};
      live[nlive++] = n++;
    } else {
      size_t k = (size_t)ab_rng_range(&r, 0, nlive - 1);
      lt[live[k]].end = t;
      lt[live[k]].end_other = t + (streams > 1 ? ab_rng_range(&r, 0, 20) : 0);
      live[k] = live[--nlive];
    }
    t++;
  }
  free(live);
  return n;
}

static void same_placements_on_hostile_runs(void) {
  enum { ALLOCS = 6000 };
  static ab_lifetime_t lt[ALLOCS];
  for (unsigned streams = 1; streams <= 2; streams++) {
    size_t n = hostile_run(7 + streams, ALLOCS, 600, streams, lt);
    char what[64];
    snprintf(what, sizeof what, "%u stream(s), %zu allocations, 600 live", streams, n);
    same_as_the_reference(what, lt, n, 512);
  }
}

static const ab_test_t tests[] = {
    {"same_placements_on_the_workloads", same_placements_on_the_workloads},
    {"same_placements_on_random_runs", same_placements_on_random_runs},
    {"same_placements_on_hostile_runs", same_placements_on_hostile_runs},
};
AB_TEST_MAIN(tests)
