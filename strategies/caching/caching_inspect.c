/* caching_inspect.c: looking inside the caching strategy (caching.c), which it never
 * changes: the segment walk as PyTorch's snapshot lists segments, the invariant checks that
 * recount every statistic from the blocks, torch.cuda.memory_stats() with PyTorch's names,
 * and PyTorch's OOM message [8]. The structs are caching_internal.h's.
 */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/base/units.h"
#include "strategies/caching/caching_internal.h"

static int by_address(const void *a, const void *b) {
  ab_dptr_t x = (*(block_t *const *)a)->ptr, y = (*(block_t *const *)b)->ptr;
  return (x > y) - (x < y);
}

/* Every block in use (mapped ones only when `mapped_only`), by address, into scratch. */
static ab_status gather(caching_t *c, bool mapped_only, size_t *n) {
  AB_TRY(ab_caching_scratch_need(c, c->nslabs * SLAB_BLOCKS));
  *n = 0;
  for (size_t i = 0; i < c->nslabs; i++)
    for (size_t j = 0; j < SLAB_BLOCKS; j++) {
      block_t *b = &c->slabs[i][j];
      if (b->state != B_SPARE && !(mapped_only && b->state == B_UNMAPPED)) c->scratch[(*n)++] = b;
    }
  qsort(c->scratch, *n, sizeof *c->scratch, by_address);
  return AB_OK;
}

static ab_block_state_t block_state(const block_t *b) {
  switch (b->state) {
    case B_ALLOCATED: return AB_BLOCK_ALLOCATED;
    case B_PENDING: return AB_BLOCK_PENDING_FREE;
    case B_UNMAPPED: return AB_BLOCK_UNMAPPED;
    default: return AB_BLOCK_FREE;
  }
}

/* One segment per cudaMalloc, and per contiguous mapped run of an expandable segment, as
 * PyTorch's snapshot lists them. */
ab_status ab_caching_walk(ab_strategy_t *s, ab_segment_fn fn, void *ctx) {
  caching_t *c = of(s);
  size_t n;
  AB_TRY(gather(c, true, &n));
  ab_block_info_t *info = malloc((n ? n : 1) * sizeof *info);
  if (info == NULL) return AB_ERR_INTERNAL;
  for (size_t i = 0; i < n;) {
    block_t *head = c->scratch[i];
    size_t j = i;
    uint64_t bytes = 0;
    do {
      block_t *b = c->scratch[j];
      info[j] = (ab_block_info_t){b->ptr, b->size, b->requested, block_state(b)};
      bytes += b->size;
      j++;
    } while (j < n && c->scratch[j - 1]->next == c->scratch[j]);
    ab_segment_info_t seg = {head->ptr,     bytes,    head->stream, KIND(head->pool) == SMALL ? "small" : "large",
                             head->xs != NULL, &info[i], j - i,        OWNER(head->pool)};
    if (fn(ctx, &seg)) break;
    i = j;
  }
  free(info);
  return AB_OK;
}

#define FAIL(...) return ab_diag_set(diag, AB_ERR_INTERNAL, "caching: " __VA_ARGS__)

/* The free blocks of one pool and stream (Note [Free bins]): each bin a sound tree of blocks
 * of its sizes, named in the bitmap exactly when it holds one; *count: its blocks. */
static ab_status check_bins(const fbins_t *fb, int p, unsigned stream, size_t *count, ab_diag_t *diag) {
  *count = 0;
  for (unsigned w = 0; w < FREE_WORDS; w++)
    if (((fb->summary >> w) & 1) != (fb->words[w] != 0)) FAIL("pool %d stream %u: the bins' summary is wrong", p, stream);
  for (unsigned i = 0; i < FREE_BINS; i++) {
    const ab_tree_t *t = &fb->bins[i];
    if (ab_tree_check(t)) FAIL("pool %d stream %u: bin %u is out of order", p, stream, i);
    if (((fb->words[i / 64] >> (i % 64)) & 1) != (t->root != NULL))
      FAIL("pool %d stream %u: the bitmap is wrong about bin %u", p, stream, i);
    for (ab_tnode_t *n = ab_tree_first(t); n; n = ab_tree_next(n)) {
      const block_t *b = BLOCK(n);
      if (b->state != B_FREE || b->pool != p || b->stream != stream) FAIL("pool %d: a free-set block is not free there", p);
      if (bin_of(b->size) != i || b->bin != i)
        FAIL("pool %d stream %u: a block of %llu bytes in bin %u, marked for bin %u", p, stream,
             (unsigned long long)b->size, i, (unsigned)b->bin);
    }
    *count += t->size;
  }
  return AB_OK;
}

static ab_status check_sets(caching_t *c, size_t *nfree, size_t *nunmapped, ab_diag_t *diag) {
  *nfree = *nunmapped = 0;
  for (int p = 0; p < (int)c->npools; p++) {
    pool_t *pl = &c->pools[p];
    size_t in_pool = 0;
    for (unsigned k = 0; k < pl->nstreams; k++) {
      size_t count = 0;
      if (pl->free[k]) AB_TRY(check_bins(pl->free[k], p, k, &count, diag));
      in_pool += count;
    }
    if (in_pool != pl->nfree) FAIL("pool %d: %zu free blocks in its bins, %zu counted", p, in_pool, pl->nfree);
    if (ab_tree_check(&pl->unmapped)) FAIL("pool %d: the unmapped set is out of order", p);
    for (ab_tnode_t *n = ab_tree_first(&pl->unmapped); n; n = ab_tree_next(n))
      if (BLOCK(n)->state != B_UNMAPPED || BLOCK(n)->pool != p) FAIL("pool %d: an unmapped-set block is mapped", p);
    *nfree += pl->nfree;
    *nunmapped += pl->unmapped.size;
  }
  return AB_OK;
}

ab_status ab_caching_check(ab_strategy_t *s, ab_diag_t *diag) {
  caching_t *c = of(s);
  size_t nfree, nunmapped, n;
  AB_TRY(check_sets(c, &nfree, &nunmapped, diag));
  AB_TRY(gather(c, false, &n));
  enum {
#define ARRAY_INDEX(name) I_##name,
    STAT_ARRAYS(ARRAY_INDEX)
#undef ARRAY_INDEX
        NARRAYS
  };
  int64_t sums[NARRAYS][2] = {{0}}; /* per pool */
  int64_t oversize_alloc = 0, oversize_seg = 0;
  size_t counts[5] = {0};
  uint64_t ms = c->conf.max_split_size;
  for (size_t i = 0; i < n; i++) {
    block_t *b = c->scratch[i];
    counts[b->state]++;
    if (b->prev && (b->prev->next != b || b->prev->ptr + b->prev->size != b->ptr || b->prev->xs != b->xs ||
                    b->prev->stream != b->stream || b->prev->pool != b->pool))
      FAIL("block 0x%llx does not continue its segment", (unsigned long long)b->ptr);
    if (b->next && b->next->prev != b) FAIL("block 0x%llx: broken links", (unsigned long long)b->ptr);
    if (b->state == B_FREE && b->next && b->next->state == B_FREE)
      FAIL("free blocks 0x%llx and 0x%llx were not merged", (unsigned long long)b->ptr, (unsigned long long)b->next->ptr);
    int p = KIND(b->pool);
    if (OWNER(b->pool) && (OWNER(b->pool) > c->npriv || !c->priv[OWNER(b->pool)].exists))
      FAIL("block 0x%llx belongs to pool %u, which does not exist", (unsigned long long)b->ptr, OWNER(b->pool));
    bool active = b->state == B_ALLOCATED || b->state == B_PENDING;
    if (b->state == B_ALLOCATED) {
      sums[I_allocation][p]++;
      sums[I_allocated_bytes][p] += (int64_t)b->size;
      if (b->size >= ms) oversize_alloc++;
    }
    if (active) {
      sums[I_active][p]++;
      sums[I_active_bytes][p] += (int64_t)b->size;
      sums[I_requested_bytes][p] += (int64_t)b->requested;
      uint64_t v;
      if (!ab_map_get(&c->live, b->ptr, &v) || (block_t *)(uintptr_t)v != b)
        FAIL("active block 0x%llx is not in the live map", (unsigned long long)b->ptr);
    }
    if (b->state != B_UNMAPPED) sums[I_reserved_bytes][p] += (int64_t)b->size;
    if (b->state == B_FREE && !b->xs && (b->prev || b->next)) {
      sums[I_inactive_split][p]++;
      sums[I_inactive_split_bytes][p] += (int64_t)b->size;
    }
    if (!b->xs && !b->prev) {
      uint64_t seg = 0, recorded;
      for (const block_t *r = b; r; r = r->next) seg += r->size;
      if (!ab_map_get(&c->segs, b->ptr, &recorded) || recorded != seg)
        FAIL("segment 0x%llx: its blocks do not tile it", (unsigned long long)b->ptr);
      sums[I_segment][p]++;
      if (seg >= ms) oversize_seg++;
    }
  }
  if (counts[B_FREE] != nfree || counts[B_UNMAPPED] != nunmapped) FAIL("a cached block is missing from its set");
  if (counts[B_ALLOCATED] + counts[B_PENDING] != c->live.n || counts[B_PENDING] != c->npending)
    FAIL("the live map disagrees with the blocks");
  if ((size_t)(sums[I_segment][0] + sums[I_segment][1]) != c->segs.n) FAIL("a segment has no blocks");
  for (size_t k = 0; k < c->nxsegs; k++) {
    const xseg_t *xs = c->xsegs[k];
    uint64_t pages = 0, mapped = 0;
    for (uint64_t w = 0; w < (xs->bytes / xs->page + 63) / 64; w++) pages += (uint64_t)__builtin_popcountll(xs->mapped[w]);
    for (size_t i = 0; i < n; i++)
      if (c->scratch[i]->xs == xs && c->scratch[i]->state != B_UNMAPPED) mapped += c->scratch[i]->size;
    if (mapped != pages * xs->page) FAIL("expandable segment 0x%llx: blocks and pages disagree", (unsigned long long)xs->base);
  }
#define ARRAY_OF(name) c->st.name,
  const tstat_t *arrays[NARRAYS] = {STAT_ARRAYS(ARRAY_OF)};
#undef ARRAY_OF
#define NAME_OF(name) #name,
  static const char *const names[NARRAYS] = {STAT_ARRAYS(NAME_OF)};
#undef NAME_OF
  for (int k = 0; k < NARRAYS; k++) {
    for (int p = 0; p < 2; p++)
      if (arrays[k][1 + p].current != sums[k][p])
        FAIL("%s.%s.current is %lld, the blocks say %lld", names[k], p == SMALL ? "small_pool" : "large_pool",
             (long long)arrays[k][1 + p].current, (long long)sums[k][p]);
    if (arrays[k][0].current != arrays[k][1].current + arrays[k][2].current) FAIL("%s.all is not the sum of its pools", names[k]);
  }
  if (!c->settings_changed &&
      (c->st.oversize_allocations.current != oversize_alloc || c->st.oversize_segments.current != oversize_seg))
    FAIL("oversize statistics disagree with the blocks");
  if ((int64_t)c->total != c->st.reserved_bytes[0].current) FAIL("total_allocated_memory is not reserved_bytes.all");
  if (s->stats.requested_bytes.current != c->st.requested_bytes[0].current ||
      s->stats.allocated_bytes.current != c->st.allocated_bytes[0].current ||
      s->stats.reserved_bytes.current != c->st.reserved_bytes[0].current)
    FAIL("ab_stats_t disagrees with the pool statistics");
  return AB_OK;
}

#undef FAIL

static void emit_stat(ab_stat_fn fn, void *ctx, const char *prefix, const tstat_t *t) {
  char name[96];
  snprintf(name, sizeof name, "%s.current", prefix);
  fn(ctx, name, t->current);
  snprintf(name, sizeof name, "%s.peak", prefix);
  fn(ctx, name, t->peak);
  snprintf(name, sizeof name, "%s.allocated", prefix);
  fn(ctx, name, t->current + t->freed);
  snprintf(name, sizeof name, "%s.freed", prefix);
  fn(ctx, name, t->freed);
}

/* torch.cuda.memory_stats(), flattened with PyTorch's names. */
void ab_caching_memory_stats(ab_strategy_t *s, ab_stat_fn fn, void *ctx) {
  caching_t *c = of(s);
  static const char *const pools[3] = {"all", "small_pool", "large_pool"};
  char prefix[64];
#define EMIT_ARRAY(name)                                           \
  for (int p = 0; p < 3; p++) {                                    \
    snprintf(prefix, sizeof prefix, "%s.%s", #name, pools[p]);     \
    emit_stat(fn, ctx, prefix, &c->st.name[p]);                    \
  }
  STAT_ARRAYS(EMIT_ARRAY)
#undef EMIT_ARRAY
#define EMIT_SINGLE(name) emit_stat(fn, ctx, #name, &c->st.name);
  STAT_SINGLES(EMIT_SINGLE)
#undef EMIT_SINGLE
#define EMIT_COUNTER(name) fn(ctx, #name, (int64_t)c->st.name);
  STAT_COUNTERS(EMIT_COUNTER)
#undef EMIT_COUNTER
  fn(ctx, "max_split_size", c->st.max_split_size);
}

/* A new segment, or with expandable segments the pages mapped for the block. */
uint64_t ab_caching_device_bytes(ab_strategy_t *s, uint64_t bytes, unsigned stream) {
  caching_t *c = of(s);
  (void)stream;
  if (bytes >= ONE_EB) return bytes;
  uint64_t size = round_size(c, bytes);
  if (!c->conf.expandable) return allocation_size(c, size);
  uint64_t page = size <= SMALL_SIZE ? SMALL_BUFFER : c->conf.large_segment_size;
  return (size + page - 1) / page * page;
}

/* The OOM message of PyTorch's malloc [8]. */
void ab_caching_describe_oom(ab_strategy_t *s, uint64_t bytes, unsigned stream, char *buf, size_t size) {
  caching_t *c = of(s);
  (void)stream;
  if (bytes >= ONE_EB) {
    snprintf(buf, size, "CUDA out of memory. Tried to allocate more than 1EB memory.");
    return;
  }
  uint64_t free_bytes = 0, total = s->dev->total_bytes;
  ab_device_mem_info(s->dev, &free_bytes, &total);
  char want[32], cap_s[32], total_s[32], free_s[32], alloc_s[32], unalloc_s[32], allowed[64] = "";
  ab_format_bytes_torch(allocation_size(c, round_size(c, bytes)), want, sizeof want);
  if (c->has_cap) snprintf(allowed, sizeof allowed, "%s allowed; ", ab_format_bytes_torch(c->cap, cap_s, sizeof cap_s));
  /* PyTorch counts the free cached blocks of every private pool as allocated (sic). */
  uint64_t priv = 0;
  for (size_t p = 2; p < c->npools; p++)
    for (const block_t *b = free_first_all(&c->pools[p], 0); b; b = free_next_all(&c->pools[p], b)) priv += b->size;
  char priv_s[32], priv_msg[96] = "";
  if (priv)
    snprintf(priv_msg, sizeof priv_msg, "with %s allocated in private pools (e.g., CUDA Graphs), ",
             ab_format_bytes_torch(priv, priv_s, sizeof priv_s));
  int64_t allocated = c->st.allocated_bytes[0].current + (int64_t)priv, reserved = c->st.reserved_bytes[0].current;
  int gpu = 0;
  sscanf(s->dev->name, "cuda:%d", &gpu);
  snprintf(buf, size,
           "CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity of %s of which %s is free. %sOf the "
           "allocated memory %s is allocated by PyTorch, %sand %s is reserved by PyTorch but unallocated. If reserved but "
           "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
           "fragmentation.  See documentation for Memory Management  "
           "(https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)",
           want, gpu, ab_format_bytes_torch(total, total_s, sizeof total_s),
           ab_format_bytes_torch(free_bytes, free_s, sizeof free_s), allowed,
           ab_format_bytes_torch((uint64_t)allocated, alloc_s, sizeof alloc_s), priv_msg,
           ab_format_bytes_torch((uint64_t)(reserved - allocated), unalloc_s, sizeof unalloc_s));
}
