/* caching.c: PyTorch 2.11's CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp),
 * decision for decision, on one device, with its private pools (CUDA graphs, MemPools).
 *
 * Policy (PyTorch v2.11.0, c10/cuda/CUDACachingAllocator.cpp; its functions in brackets):
 *   1. A request is rounded up to 512 B, or to a power-of-two division [round_size,
 *      roundup_power2_next_division]; rounded sizes up to 1 MiB (kSmallSize) use the small
 *      pool, larger ones the large pool [get_pool].
 *   2. It takes the smallest free block of its pool and stream that fits, the lowest address
 *      among equals [get_free_block; BlockComparatorSize orders by stream, size, address].
 *      Oversize blocks (>= max_split_size) serve only requests that are oversize too and
 *      within max_non_split_rounding of the block's size.
 *   3. A bigger block is split, the front handed out (small pool or expandable: when 512 B or
 *      more is left; large pool: when the request is below max_split_size and more than 1 MiB
 *      is left) [should_split, alloc_found_block]. A free merges the block with free
 *      neighbours [free_block, try_merge_blocks].
 *   4. With no fitting block: garbage collection (only under a cap with a threshold)
 *      [garbage_collect_cached_blocks]; a new segment (2 MiB; 20 MiB for 1-10 MiB; the request
 *      rounded up to 2 MiB) [get_allocation_size, alloc_block] unless the cap forbids it; free
 *      oversize cached blocks and retry [release_available_cached_blocks]; free every whole
 *      cached segment and retry [release_cached_blocks]; out of memory (the message built in
 *      malloc).
 *   5. expandable_segments: one reserved address range per pool and stream that grows by
 *      mapping pages (2 MiB small, large_segment_size large), lowest address first; cached
 *      free pages are unmapped only by empty_cache and the last retry [ExpandableSegment,
 *      find_expandable_block, map_block, unmap_block].
 *   6. The two halves of a free: free_request is PyTorch's free() of a block recorded on other
 *      streams (it stays active, out of the cache); free_complete is free_block [free,
 *      insert_events, process_events].
 *   7. Private pools (Note [Private pools], protocol/pools.h) [PrivatePool, get_pool]: while a context is open, the
 *      allocations it takes go to its pool's own small and large free lists and segments, which
 *      nothing else searches; a pool released by its last user gives its whole free segments
 *      back at the next empty_cache or last retry. With no new segment for a default-pool
 *      request, pools made with use_on_oom are searched before anything is released; no_split
 *      pools never split. While any context is open the last retry (release everything) is
 *      skipped and empty_cache leaves the default pool alone.
 * Every pool statistic of torch.cuda.memory_stats() is kept [DeviceStats, getDeviceStats],
 * and ab_stats_t with it. This file is the decisions; caching_inspect.c looks inside (the
 * segment walk, the checks, memory_stats, the OOM message), through the structs of
 * caching_internal.h.
 *
 * Note [Cap and pages]: PyTorch checks total_allocated + alloc_size > cap before asking the
 * device, also in expandable mode, where what it then maps is the request less the free tail,
 * rounded up to whole pages: its reserved bytes can pass the cap by less than a page (the
 * expandable run of the fixtures at its passing cap went 3.8 MB over). The device budget here
 * is strict. The cap check stays PyTorch's; a page the device refuses fails that map call as
 * a cuMemCreate OOM fails it in PyTorch (the call's pages are released, the ladder goes on to
 * release and retry, or to OOM). So decisions are PyTorch's on a card whose memory ends at the
 * cap, and differ only where PyTorch itself went over it.
 *
 * Note [Captures]: PyTorch records no CUDA event while a context is open (captures_underway),
 * so a block freed across streams then is deferred: it becomes reusable only once no context
 * is open, at the next malloc (process_events) or synchronisation. Here the caller's
 * free_complete of such a block, when it comes while a context is open, marks it ready, and the
 * first malloc after the last context ends frees it. graph_capture_record_stream_reuse lets
 * PyTorch free such a block inside the capture once the graph proves it safe: then the caller's
 * free_complete frees it at once.
 *
 * Note [Early completion]: empty_cache and the last retry synchronise every stream, which
 * completes frees still waiting for other streams (free_block of each). The caller's
 * free_complete for such a block comes later; it is then recognised by address and size and
 * does nothing, even if the address went to a new allocation meanwhile. The completions are
 * counted per (address, size), since one address can complete early more than once.
 */
#include "strategies/caching/caching.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strategies/caching/caching_internal.h"

/* ---- statistics: the updates of PyTorch's DeviceStats ----------------------------------- */

static inline void inc(tstat_t *s, uint64_t v) {
  s->current += (int64_t)v;
  if (s->current > s->peak) s->peak = s->current;
}

static inline void dec(tstat_t *s, uint64_t v) {
  s->current -= (int64_t)v;
  s->freed += (int64_t)v;
}

/* pool is a free list's index: its KIND is the statistics' small or large pool, whoever owns it. */
static inline void inc_pool(tstat_t a[3], int pool, uint64_t v) {
  inc(&a[0], v);
  inc(&a[1 + KIND(pool)], v);
}

static inline void dec_pool(tstat_t a[3], int pool, uint64_t v) {
  dec(&a[0], v);
  dec(&a[1 + KIND(pool)], v);
}

/* One key for an (address, size) pair; two pairs meet with probability 2^-64. */
static uint64_t early_key(ab_dptr_t addr, uint64_t bytes) {
  uint64_t k = addr ^ (bytes * 0x9E3779B97F4A7C15ULL);
  return k ? k : 1;
}

/* ---- the free sets (Note [Free bins] in caching_internal.h) --------------------------------- */

/* The order within a bin, where the stream is one: (size, address). The hot paths compare
 * inline rather than through the tree's comparison function. */
static inline bool free_before(const block_t *x, const block_t *y) {
  /* Bitwise, so that a descent's turn stays free of branches (ab_tree_pick). */
  return (x->size < y->size) | ((x->size == y->size) & (x->ptr < y->ptr));
}

static int cmp_free(const ab_tnode_t *a, const ab_tnode_t *b) {
  const block_t *x = BLOCK(a), *y = BLOCK(b);
  return free_before(x, y) ? -1 : free_before(y, x);
}

/* Makes room for the free blocks of a pool on a stream. Every block's pool and stream are
 * those of an allocation, which calls this first, so that inserting into a set never fails. */
static ab_status bins_need(caching_t *c, int pool, unsigned stream) {
  pool_t *pl = &c->pools[pool];
  if (stream < pl->nstreams && pl->free[stream]) return AB_OK;
  if (stream >= pl->nstreams) {
    fbins_t **grown = realloc(pl->free, (stream + 1) * sizeof *grown);
    if (grown == NULL) return AB_ERR_INTERNAL;
    memset(&grown[pl->nstreams], 0, (stream + 1 - pl->nstreams) * sizeof *grown);
    pl->free = grown;
    pl->nstreams = stream + 1;
  }
  fbins_t *fb = calloc(1, sizeof *fb);
  if (fb == NULL) return AB_ERR_INTERNAL;
  for (unsigned i = 0; i < FREE_BINS; i++) ab_tree_init(&fb->bins[i], cmp_free);
  pl->free[stream] = fb;
  return AB_OK;
}

/* The first free block of a stream not before (size, address 0), or NULL: the lower bound in
 * the size's own bin, else the first block of the next bin that holds one. */
static inline block_t *free_lower_bound(const pool_t *pl, unsigned stream, uint64_t size) {
  const fbins_t *fb = bins_of(pl, stream);
  if (fb == NULL) return NULL;
  unsigned i = bin_of(size);
  ab_tnode_t *n = fb->bins[i].root, *best = NULL;
  while (n) {
    bool before = BLOCK(n)->size < size;
    best = ab_tree_pick(before, best, n);
    n = ab_tree_pick(before, n->right, n->left);
  }
  return best ? BLOCK(best) : free_first_from(fb, i + 1);
}

/* The unmapped set's order: (stream, address). */
static int cmp_unmapped(const ab_tnode_t *a, const ab_tnode_t *b) {
  const block_t *x = BLOCK(a), *y = BLOCK(b);
  if (x->stream != y->stream) return x->stream < y->stream ? -1 : 1;
  return (x->ptr > y->ptr) - (x->ptr < y->ptr);
}

static int key_unmapped(const void *key, const ab_tnode_t *n) {
  unsigned stream = *(const unsigned *)key;
  const block_t *b = BLOCK(n);
  if (stream != b->stream) return stream < b->stream ? -1 : 1;
  return b->ptr ? -1 : 0; /* address 0 orders first */
}

/* BlockPool::insert_into_blocks: the block's GC age starts now. */
static void insert_free(caching_t *c, block_t *b) {
  pool_t *pl = &c->pools[b->pool];
  fbins_t *fb = pl->free[b->stream];
  b->state = B_FREE;
  b->gc_base = pl->gc_calls;
  unsigned i = bin_of(b->size);
  b->bin = (uint16_t)i;
  ab_tnode_t *parent = NULL, *n = fb->bins[i].root;
  bool left = false;
  while (n) {
    parent = n;
    left = free_before(b, BLOCK(n));
    n = ab_tree_pick(left, n->left, n->right);
  }
  ab_tree_link(&fb->bins[i], parent, left, &b->node);
  fb->words[i / 64] |= 1ULL << (i % 64);
  fb->summary |= 1ULL << (i / 64);
  pl->nfree++;
}

/* Takes a free block out of its bin. */
static void remove_free(caching_t *c, block_t *b) {
  pool_t *pl = &c->pools[b->pool];
  fbins_t *fb = pl->free[b->stream];
  unsigned i = b->bin;
  ab_tree_remove(&fb->bins[i], &b->node);
  if (fb->bins[i].root == NULL) {
    fb->words[i / 64] &= ~(1ULL << (i % 64));
    if (fb->words[i / 64] == 0) fb->summary &= ~(1ULL << (i / 64));
  }
  pl->nfree--;
}

/* Gives a cached block a new range, and so a new key, restarting its GC age as insert_free
 * does: in place when the key keeps its bin and its place there, which spares taking the
 * block out and putting it back. */
static void rekey_free(caching_t *c, block_t *b, ab_dptr_t ptr, uint64_t size) {
  pool_t *pl = &c->pools[b->pool];
  block_t key;
  key.size = size;
  key.ptr = ptr;
  bool stays = bin_of(size) == b->bin;
  /* A key that grows can pass only the blocks after it; one that shrinks, those before. */
  if (stays && free_before(b, &key)) {
    ab_tnode_t *after = ab_tree_next(&b->node);
    stays = after == NULL || free_before(&key, BLOCK(after));
  } else if (stays) {
    ab_tnode_t *before = ab_tree_prev(&b->node);
    stays = before == NULL || free_before(BLOCK(before), &key);
  }
  if (stays) {
    b->ptr = ptr;
    b->size = size;
    b->gc_base = pl->gc_calls;
    return;
  }
  remove_free(c, b);
  b->ptr = ptr;
  b->size = size;
  insert_free(c, b);
}

static void insert_unmapped(caching_t *c, block_t *b) {
  b->state = B_UNMAPPED;
  ab_tree_insert(&c->pools[b->pool].unmapped, &b->node);
}

/* Takes a free or unmapped block out of its set. */
static void remove_cached(caching_t *c, block_t *b) {
  if (b->state == B_UNMAPPED)
    ab_tree_remove(&c->pools[b->pool].unmapped, &b->node);
  else
    remove_free(c, b);
}

/* ---- block structs, from slabs ---------------------------------------------------------- */

static ab_status grow_slabs(caching_t *c) {
  if (c->nslabs == c->capslabs) {
    size_t cap = c->capslabs ? 2 * c->capslabs : 16;
    block_t **grown = realloc(c->slabs, cap * sizeof *grown);
    if (grown == NULL) return AB_ERR_INTERNAL;
    c->slabs = grown;
    c->capslabs = cap;
  }
  block_t *slab = calloc(SLAB_BLOCKS, sizeof *slab);
  if (slab == NULL) return AB_ERR_INTERNAL;
  c->slabs[c->nslabs++] = slab;
  for (size_t i = SLAB_BLOCKS; i-- > 0;) {
    slab[i].next = c->spare;
    c->spare = &slab[i];
  }
  c->nspare += SLAB_BLOCKS;
  return AB_OK;
}

/* Makes sure n block structs are at hand, so that no step of an operation fails half-way. */
static ab_status reserve_blocks(caching_t *c, size_t n) {
  while (c->nspare < n) AB_TRY(grow_slabs(c));
  return AB_OK;
}

static block_t *block_new(caching_t *c, ab_dptr_t ptr, uint64_t size, unsigned stream, int pool, xseg_t *xs) {
  block_t *b = c->spare;
  c->spare = b->next;
  c->nspare--;
  /* Every field but the tree node, which is set when the block joins a set (and read only
   * while it is in one). */
  b->prev = b->next = NULL;
  b->xs = xs;
  b->ptr = ptr;
  b->size = size;
  b->requested = 0;
  b->gc_base = 0;
  b->stream = (uint16_t)stream;
  b->pool = (uint16_t)pool;
  b->state = B_SPARE;
  b->deferred = DEFER_NONE;
  return b;
}

static void block_drop(caching_t *c, block_t *b) {
  b->state = B_SPARE;
  b->next = c->spare;
  c->spare = b;
  c->nspare++;
}

/* ---- what a malloc is looking for (AllocParams) -------------------------------------------- */

typedef struct params_s {
  uint64_t size;       /* rounded */
  uint64_t alloc_size; /* a new segment's size */
  unsigned stream;
  int pool;
  bool expandable;     /* expandable segments active for this request */
  block_t *block;      /* found or created */
  bool cached;         /* block is still in the free set (found there) */
} params_t;

static bool gc_on(const caching_t *c) { return c->has_cap && c->conf.gc_threshold > 0.0; }

/* The usable size of an expandable block: its own, plus the unmapped range after it. */
static uint64_t expandable_size(const block_t *b) {
  return b->size + (b->next && b->next->state == B_UNMAPPED ? b->next->size : 0);
}

/* get_free_block [2.2] */
static bool get_free_block(caching_t *c, params_t *p) {
  pool_t *pl = &c->pools[p->pool];
  if (gc_on(c)) pl->gc_calls++;
  block_t *b = free_lower_bound(pl, p->stream, p->size);
  if (b == NULL) return false;
  if (b->xs) {
    if (p->expandable) {
      /* Best fit counts what a block can grow to: avoid the tail before the unmapped range
       * while a block that fits better exists. */
      for (block_t *nb = free_next(pl, b); b->xs && nb; nb = free_next(pl, b)) {
        if (expandable_size(nb) >= expandable_size(b)) break;
        b = nb;
      }
    } else {
      /* Expandable segments were turned off: only plain blocks serve. */
      do b = free_next(pl, b);
      while (b && b->xs);
      if (b == NULL) return false;
    }
  }
  uint64_t ms = c->conf.max_split_size;
  if (p->size < ms && b->size >= ms) return false;
  if (p->size >= ms && b->size >= p->size + c->conf.max_non_split_rounding) return false;
  p->block = b; /* alloc_found_block takes it out of the set, or re-keys its remainder */
  p->cached = true;
  return true;
}

/* ---- segments: cudaMalloc / cudaFree ------------------------------------------------------ */

static void reserved_up(caching_t *c, int pool, uint64_t bytes) {
  c->total += bytes;
  inc_pool(c->st.reserved_bytes, pool, bytes);
  ab_gauge_add(&c->base.stats.reserved_bytes, (int64_t)bytes);
}

static void reserved_down(caching_t *c, int pool, uint64_t bytes) {
  c->total -= bytes;
  dec_pool(c->st.reserved_bytes, pool, bytes);
  ab_gauge_sub(&c->base.stats.reserved_bytes, (int64_t)bytes);
}

static void device_alloc_counted(caching_t *c) {
  c->st.num_device_alloc++;
  c->base.stats.num_device_alloc++;
}

static void device_free_counted(caching_t *c) {
  c->st.num_device_free++;
  c->base.stats.num_device_free++;
}

/* release_block: cudaFree of a whole cached segment. */
static ab_status release_block(caching_t *c, block_t *b) {
  if (b->xs || b->prev || b->next || b->state != B_FREE)
    return ab_diag_set(&c->base.dev->diag, AB_ERR_INTERNAL, "caching: release of a block that is not a whole free segment");
  AB_TRY(ab_device_free(c->base.dev, b->ptr, b->size));
  device_free_counted(c);
  ab_strategy_segment(&c->base, AB_TR_SEGMENT_FREE, b->ptr, b->size, b->stream);
  ab_map_take(&c->segs, b->ptr, NULL);
  if (OWNER(b->pool)) c->priv[OWNER(b->pool)].malloc_count--;
  reserved_down(c, b->pool, b->size);
  dec_pool(c->st.segment, b->pool, 1);
  if (b->size >= c->conf.max_split_size) dec(&c->st.oversize_segments, 1);
  remove_cached(c, b);
  block_drop(c, b);
  return AB_OK;
}

/* ---- expandable segments [4] --------------------------------------------------------------- */

static bool page_mapped(const xseg_t *xs, uint64_t i) { return (xs->mapped[i / 64] >> (i % 64)) & 1; }

/* Unmaps pages [from, to) of xs, one device call per page, as they were mapped. */
static ab_status unmap_pages(caching_t *c, xseg_t *xs, uint64_t from, uint64_t to) {
  for (uint64_t i = from; i < to; i++) {
    AB_TRY(ab_device_unmap(c->base.dev, xs->base + i * xs->page, xs->page));
    xs->mapped[i / 64] &= ~(1ULL << (i % 64));
  }
  return AB_OK;
}

/* ExpandableSegment::map: the pages covering [ptr, ptr + size), each its own physical
 * allocation (cuMemCreate of one page). *mapped is 0 when the device had no room. */
static ab_status map_pages(caching_t *c, block_t *b, uint64_t size, uint64_t *mapped) {
  xseg_t *xs = b->xs;
  uint64_t off = b->ptr - xs->base, from = off / xs->page, to = (off + size + xs->page - 1) / xs->page;
  *mapped = 0;
  for (uint64_t i = from; i < to; i++) {
    ab_status st = ab_device_map(c->base.dev, xs->base + i * xs->page, xs->page);
    if (st != AB_OK) {
      ab_status undo = unmap_pages(c, xs, from, i);
      return st == AB_ERR_OOM ? undo : st;
    }
    xs->mapped[i / 64] |= 1ULL << (i % 64);
  }
  *mapped = (to - from) * xs->page;
  return AB_OK;
}

/* try_merge_blocks: dst absorbs src if src is cached in the same mapped state. Returns the
 * bytes absorbed. */
static uint64_t try_merge(caching_t *c, block_t *dst, block_t *src) {
  if (src == NULL || src->state == B_ALLOCATED || src->state == B_PENDING) return 0;
  if ((dst->state == B_UNMAPPED) != (src->state == B_UNMAPPED)) return 0;
  if (dst->prev == src) {
    dst->ptr = src->ptr;
    dst->prev = src->prev;
    if (dst->prev) dst->prev->next = dst;
  } else {
    dst->next = src->next;
    if (dst->next) dst->next->prev = dst;
  }
  dst->size += src->size;
  remove_cached(c, src);
  uint64_t size = src->size;
  block_drop(c, src);
  return size;
}

/* map_block: maps the front `size` bytes of an unmapped block; the rest stays unmapped. The
 * mapped block is merged with free neighbours and cached. AB_ERR_OOM when the device refused. */
static ab_status map_block(caching_t *c, block_t *b, uint64_t size) {
  ab_dptr_t start = b->ptr;
  uint64_t mapped;
  AB_TRY(map_pages(c, b, size, &mapped));
  if (mapped == 0) return AB_ERR_OOM;
  remove_cached(c, b);
  b->state = B_FREE;
  if (mapped < b->size) {
    block_t *rest = block_new(c, b->ptr + mapped, b->size - mapped, b->stream, b->pool, b->xs);
    rest->prev = b;
    rest->next = b->next;
    if (b->next) b->next->prev = rest;
    b->next = rest;
    insert_unmapped(c, rest);
    b->size = mapped;
  }
  try_merge(c, b, b->prev);
  try_merge(c, b, b->next);
  insert_free(c, b);
  reserved_up(c, b->pool, mapped);
  device_alloc_counted(c);
  ab_strategy_segment(&c->base, AB_TR_SEGMENT_MAP, start, mapped, b->stream);
  return AB_OK;
}

static bool allocatable(const block_t *b) { return b && (b->state == B_FREE || b->state == B_UNMAPPED); }

/* find_expandable_block: the lowest address of this pool and stream from which free and
 * unmapped blocks reach size, or a new segment. */
static ab_status find_expandable_block(caching_t *c, const params_t *p, block_t **out) {
  pool_t *pl = &c->pools[p->pool];
  for (ab_tnode_t *n = ab_tree_lower_bound(&pl->unmapped, &p->stream, key_unmapped); n && BLOCK(n)->stream == p->stream;
       n = ab_tree_next(n)) {
    block_t *b = BLOCK(n);
    if (allocatable(b->prev)) b = b->prev;
    uint64_t room = 0;
    for (const block_t *r = b; room < p->size && allocatable(r); r = r->next) room += r->size;
    if (room >= p->size) return *out = b, AB_OK;
  }
  /* ExpandableSegment: address space for 1 1/8 of the card, in whole pages. */
  ab_device_t *dev = c->base.dev;
  uint64_t page = KIND(p->pool) == SMALL ? SMALL_BUFFER : c->conf.large_segment_size;
  uint64_t pages = (dev->total_bytes + dev->total_bytes / 8 + page - 1) / page;
  if (c->nxsegs == c->capxsegs) {
    size_t cap = c->capxsegs ? 2 * c->capxsegs : 4;
    xseg_t **grown = realloc(c->xsegs, cap * sizeof *grown);
    if (grown == NULL) return AB_ERR_INTERNAL;
    c->xsegs = grown;
    c->capxsegs = cap;
  }
  xseg_t *xs = calloc(1, sizeof *xs);
  if (xs == NULL || (xs->mapped = calloc((pages + 63) / 64, sizeof *xs->mapped)) == NULL) {
    free(xs);
    return AB_ERR_INTERNAL;
  }
  xs->bytes = pages * page;
  xs->page = page;
  xs->stream = p->stream;
  xs->pool = p->pool;
  ab_status st = ab_device_va_reserve(dev, xs->bytes, &xs->base);
  if (st != AB_OK) {
    free(xs->mapped);
    free(xs);
    return st;
  }
  c->xsegs[c->nxsegs++] = xs;
  block_t *b = block_new(c, xs->base, xs->bytes, p->stream, p->pool, xs);
  insert_unmapped(c, b);
  *out = b;
  return AB_OK;
}

/* try_allocate_expandable_block: maps what the request needs from the lowest address that
 * has room, and takes the resulting block out of the cache. */
static ab_status allocate_expandable(caching_t *c, params_t *p) {
  block_t *b = NULL;
  AB_TRY(find_expandable_block(c, p, &b));
  if (b->state == B_UNMAPPED) AB_TRY(map_block(c, b, b->size < p->size ? b->size : p->size));
  while (b->size < p->size) {
    block_t *next = b->next;
    if (next == NULL || next->state != B_UNMAPPED)
      return ab_diag_set(&c->base.dev->diag, AB_ERR_INTERNAL, "caching: expandable room vanished");
    uint64_t need = p->size - b->size;
    AB_TRY(map_block(c, next, need < next->size ? need : next->size));
    b = next; /* it absorbed b */
  }
  remove_cached(c, b);
  p->block = b;
  return AB_OK;
}

/* unmap_block: gives back the whole pages inside a free expandable block; the partial pages
 * before and after stay mapped as free blocks of their own. */
static ab_status unmap_block(caching_t *c, block_t *b) {
  xseg_t *xs = b->xs;
  uint64_t off = b->ptr - xs->base;
  uint64_t from = (off + xs->page - 1) / xs->page, to = (off + b->size) / xs->page;
  if (from >= to) return AB_OK;
  /* Unmapping does not wait for the GPU by itself: PyTorch synchronises the stream first. */
  AB_TRY(ab_device_stream_synchronize(c->base.dev, b->stream));
  AB_TRY(unmap_pages(c, xs, from, to));
  ab_dptr_t start = xs->base + from * xs->page;
  uint64_t bytes = (to - from) * xs->page;
  remove_cached(c, b);
  if (start > b->ptr) {
    block_t *before = block_new(c, b->ptr, start - b->ptr, b->stream, b->pool, xs);
    before->prev = b->prev;
    before->next = b;
    if (b->prev) b->prev->next = before;
    b->prev = before;
    insert_free(c, before);
  }
  uint64_t after = b->ptr + b->size - (start + bytes);
  if (after > 0) {
    block_t *tail = block_new(c, start + bytes, after, b->stream, b->pool, xs);
    tail->prev = b;
    tail->next = b->next;
    if (b->next) b->next->prev = tail;
    b->next = tail;
    insert_free(c, tail);
  }
  b->ptr = start;
  b->size = bytes;
  b->state = B_UNMAPPED;
  try_merge(c, b, b->prev);
  try_merge(c, b, b->next);
  insert_unmapped(c, b);
  reserved_down(c, b->pool, bytes);
  if (OWNER(b->pool)) c->priv[OWNER(b->pool)].malloc_count--;
  device_free_counted(c);
  ab_strategy_segment(&c->base, AB_TR_SEGMENT_UNMAP, start, bytes, b->stream);
  return AB_OK;
}

/* release_expandable_segment: a segment that is one unmapped block gives its range back. */
static ab_status release_expandable(caching_t *c, block_t *b) {
  xseg_t *xs = b->xs;
  AB_TRY(ab_device_va_release(c->base.dev, xs->base, xs->bytes));
  for (size_t i = 0; i < c->nxsegs; i++)
    if (c->xsegs[i] == xs) {
      c->xsegs[i] = c->xsegs[--c->nxsegs];
      break;
    }
  free(xs->mapped);
  free(xs);
  remove_cached(c, b);
  block_drop(c, b);
  return AB_OK;
}

/* ---- the allocation ladder [3] ---------------------------------------------------------- */

/* alloc_block: a new segment (or mapped pages), unless the cap forbids it. */
static ab_status alloc_block(caching_t *c, params_t *p, bool retry) {
  if (retry) {
    c->st.num_alloc_retries++;
    c->base.stats.num_alloc_retries++;
  }
  uint64_t need = p->alloc_size > UINT64_MAX - c->total ? UINT64_MAX : c->total + p->alloc_size;
  bool fits = !c->has_cap || c->cap >= need;
  ab_strategy_cap_decided(&c->base, need, fits); /* uncapped too (Note [Taking a cap mid-run]) */
  if (!fits) return AB_ERR_OOM;
  if (p->expandable) {
    AB_TRY(allocate_expandable(c, p));
    if (OWNER(p->pool)) c->priv[OWNER(p->pool)].malloc_count++;
    return AB_OK;
  }
  ab_dptr_t ptr;
  AB_TRY(ab_device_malloc(c->base.dev, p->alloc_size, &ptr));
  if (ab_map_put(&c->segs, ptr, p->alloc_size) != AB_OK) {
    ab_device_free(c->base.dev, ptr, p->alloc_size);
    return AB_ERR_INTERNAL;
  }
  reserved_up(c, p->pool, p->alloc_size);
  if (OWNER(p->pool)) c->priv[OWNER(p->pool)].malloc_count++;
  inc_pool(c->st.segment, p->pool, 1);
  if (p->alloc_size >= c->conf.max_split_size) inc(&c->st.oversize_segments, 1);
  device_alloc_counted(c);
  ab_strategy_segment(&c->base, AB_TR_SEGMENT_ALLOC, ptr, p->alloc_size, p->stream);
  p->block = block_new(c, ptr, p->alloc_size, p->stream, p->pool, NULL);
  return AB_OK;
}

/* The smallest cap whose garbage-collection threshold, (uint64_t)(fraction * cap) as PyTorch
 * computes it, is at least x: the decisions "threshold >= x" are "cap >= that"
 * (Note [Cap window], strategy.h). The product grows by at most one per byte of cap (fraction <= 1), so
 * the quotient is within a few bytes of it. */
static uint64_t gc_cap_for(double fraction, uint64_t x) {
  double quotient = (double)x / fraction;
  if (quotient >= 0x1p63) return UINT64_MAX; /* no cap a device has */
  uint64_t cap = (uint64_t)quotient;
  while (cap > 0 && (uint64_t)(fraction * (double)(cap - 1)) >= x) cap--;
  while ((uint64_t)(fraction * (double)cap) < x) cap++;
  return cap;
}

/* Whether the threshold of the cap is at least x, a decision of the cap (Note [Cap window]). */
static bool gc_threshold_reaches(caching_t *c, uint64_t threshold, uint64_t x) {
  bool holds = threshold >= x;
  ab_strategy_cap_decided(&c->base, gc_cap_for(c->conf.gc_threshold, x), holds);
  return holds;
}

/* garbage_collect_cached_blocks [3.3]: whole cached large segments older than the average,
 * pass after pass, until enough is reclaimed. */
static ab_status garbage_collect(caching_t *c) {
  uint64_t threshold = (uint64_t)(c->conf.gc_threshold * (double)c->cap);
  if (gc_threshold_reaches(c, threshold, c->total)) return AB_OK;
  /* reclaimed < target, target = total - threshold, is threshold < total - reclaimed. */
  uint64_t total = c->total, reclaimed = 0, total_age = 0;
  int64_t count = 0;
  pool_t *pl = &c->pools[LARGE];
  for (block_t *b = free_first_all(pl, 0); b; b = free_next_all(pl, b)) {
    if (!b->prev && !b->next) {
      total_age += (uint64_t)(int)(pl->gc_calls - b->gc_base);
      count++;
    }
  }
  bool freed = true;
  while (count > 0 && !gc_threshold_reaches(c, threshold, total - reclaimed) && freed) {
    double age_threshold = (double)total_age / (double)count;
    freed = false;
    for (block_t *b = free_first_all(pl, 0), *after; b; b = after) {
      after = free_next_all(pl, b);
      uint64_t age = (uint64_t)(int)(pl->gc_calls - b->gc_base);
      if (!b->prev && !b->next && !b->xs && (double)age >= age_threshold) {
        freed = true;
        reclaimed += b->size;
        total_age -= age;
        count--;
        AB_TRY(release_block(c, b));
      }
    }
  }
  return AB_OK;
}

/* release_available_cached_blocks [3.1]: free oversize cached blocks of this stream, the
 * smallest that is big enough, or else the largest ones, until the request would fit. */
static ab_status release_available(caching_t *c, const params_t *p, bool *released) {
  *released = false;
  uint64_t ms = c->conf.max_split_size;
  if (ms == UINT64_MAX) return AB_OK;
  pool_t *pl = &c->pools[p->pool];
  uint64_t want = p->size < ms ? ms : p->size;
  block_t *n = free_lower_bound(pl, p->stream, want);
  if (n && !n->xs) {
    AB_TRY(release_block(c, n));
    *released = true;
    return AB_OK;
  }
  /* Else the largest blocks, from the last of the stream down. */
  const fbins_t *fb = bins_of(pl, p->stream);
  int last = fb ? bin_upto(fb, (int)FREE_BINS - 1) : -1;
  n = n ? free_prev(pl, n) : last < 0 ? NULL : BLOCK(ab_tree_last(&fb->bins[last]));
  uint64_t total = 0;
  while (n && total < want && n->size >= ms) {
    block_t *b = n;
    n = free_prev(pl, n);
    if (!b->xs) {
      total += b->size;
      AB_TRY(release_block(c, b));
    }
  }
  *released = total >= want;
  return AB_OK;
}

static ab_status free_block(caching_t *c, block_t *b);

/* release_blocks: every whole cached segment of a pool, and the whole free pages of its
 * expandable blocks. */
static ab_status release_blocks(caching_t *c, int pool) {
  pool_t *pl = &c->pools[pool];
  AB_TRY(ab_caching_scratch_need(c, pl->nfree));
  AB_TRY(reserve_blocks(c, 2 * pl->nfree));
  size_t nx = 0;
  for (block_t *b = free_first_all(pl, 0), *after; b; b = after) {
    after = free_next_all(pl, b);
    if (b->xs)
      c->scratch[nx++] = b;
    else if (!b->prev && !b->next)
      AB_TRY(release_block(c, b));
  }
  for (size_t i = 0; i < nx; i++) {
    block_t *b = c->scratch[i];
    AB_TRY(unmap_block(c, b));
    if (b->state == B_UNMAPPED && !b->prev && !b->next) AB_TRY(release_expandable(c, b));
  }
  return AB_OK;
}

/* PyTorch completes a stream's pending frees in the order they were asked (its events are a
 * queue per stream): the order decides which request a merged block keeps (free_block). */
static int by_free_order(const void *a, const void *b) {
  uint64_t x = (*(block_t *const *)a)->freed_at, y = (*(block_t *const *)b)->freed_at;
  return (x > y) - (x < y);
}

/* synchronize_and_free_events: every stream is waited for, which completes the frees still
 * waiting (Note [Early completion]) of pool `owner`'s blocks, or of all when owner is -1. */
static ab_status sync_and_free(caching_t *c, int owner) {
  c->st.num_sync_all_streams++;
  if (c->npending == 0) return AB_OK;
  AB_TRY(ab_device_synchronize(c->base.dev));
  AB_TRY(ab_caching_scratch_need(c, c->npending));
  size_t n = 0;
  for (size_t i = 0; i < c->live.cap; i++) {
    block_t *b = (block_t *)(uintptr_t)c->live.slots[i].val;
    if (c->live.slots[i].key && b->state == B_PENDING && (owner < 0 || (int)OWNER(b->pool) == owner)) c->scratch[n++] = b;
  }
  qsort(c->scratch, n, sizeof *c->scratch, by_free_order);
  for (size_t i = 0; i < n; i++) {
    block_t *b = c->scratch[i];
    if (b->deferred == DEFER_READY) { /* its caller's free_complete came already */
      c->nready--;
    } else {
      uint64_t key = early_key(b->ptr, b->requested), count = 0;
      /* The key stays until the caller's free: should its segment go back meanwhile, a new
       * segment at the same address would meet it, where a variant's placement puts the new
       * one elsewhere. */
      c->base.order_only = false;
      ab_map_get(&c->early, key, &count);
      if (ab_map_put(&c->early, key, count + 1) != AB_OK) return AB_ERR_INTERNAL;
    }
    b->deferred = DEFER_NONE;
    ab_map_take(&c->live, b->ptr, NULL);
    c->npending--;
    AB_TRY(free_block(c, b));
  }
  return AB_OK;
}

/* release_cached_blocks (torch.cuda.empty_cache) [3.2]: for the default pool (pool 0), when no
 * capture is open, synchronise every stream and release the default pool; then release the
 * released private pools (only `pool` when it is one), erasing those left with no memory. */
static ab_status release_cached(caching_t *c, unsigned pool) {
  if (pool == 0 && c->ncaptures == 0) {
    AB_TRY(sync_and_free(c, -1));
    AB_TRY(release_blocks(c, LARGE));
    AB_TRY(release_blocks(c, SMALL));
  }
  for (unsigned n = 1; n <= c->npriv; n++) {
    ppool_t *pp = &c->priv[n];
    if (!pp->exists || !pp->freeable || (pool != 0 && n != pool)) continue;
    if (pool != 0) AB_TRY(sync_and_free(c, (int)n));
    AB_TRY(release_blocks(c, 2 * (int)n + SMALL));
    AB_TRY(release_blocks(c, 2 * (int)n + LARGE));
    if (pp->malloc_count == 0) pp->exists = pp->freeable = false;
  }
  return AB_OK;
}

/* ---- handing out and taking back [2.3-2.5] -------------------------------------------------- */

static bool should_split(const caching_t *c, const block_t *b, const params_t *p) {
  if (OWNER(b->pool) && c->priv[OWNER(b->pool)].no_split) return false;
  uint64_t remaining = b->size - p->size;
  if (KIND(b->pool) == SMALL || p->expandable) return remaining >= MIN_BLOCK;
  return p->size < c->conf.max_split_size && remaining > SMALL_SIZE;
}

/* alloc_found_block: splits off the front if worth it and hands the block out. */
static ab_status alloc_found_block(caching_t *c, params_t *p, uint64_t requested, ab_dptr_t *out) {
  block_t *b = p->block;
  int pool = p->pool;
  bool already_split = b->prev || b->next;
  if (should_split(c, b, p)) {
    block_t *rest = b;
    b = block_new(c, rest->ptr, p->size, p->stream, pool, rest->xs);
    b->prev = rest->prev;
    if (b->prev) b->prev->next = b;
    b->next = rest;
    rest->prev = b;
    if (p->cached) {
      rekey_free(c, rest, rest->ptr + p->size, rest->size - p->size);
    } else {
      rest->ptr += p->size;
      rest->size -= p->size;
      insert_free(c, rest);
    }
    if (!b->xs) {
      if (already_split) {
        dec_pool(c->st.inactive_split_bytes, pool, b->size);
      } else {
        inc_pool(c->st.inactive_split_bytes, pool, rest->size);
        inc_pool(c->st.inactive_split, pool, 1);
      }
    }
  } else {
    if (p->cached) remove_free(c, b);
    if (already_split && !b->xs) {
      dec_pool(c->st.inactive_split_bytes, pool, b->size);
      dec_pool(c->st.inactive_split, pool, 1);
    }
  }
  b->state = B_ALLOCATED;
  b->requested = requested;
  if (ab_map_put(&c->live, b->ptr, (uint64_t)(uintptr_t)b) != AB_OK) return AB_ERR_INTERNAL;
  inc_pool(c->st.allocation, pool, 1);
  inc_pool(c->st.allocated_bytes, pool, b->size);
  inc_pool(c->st.active, pool, 1);
  inc_pool(c->st.active_bytes, pool, b->size);
  inc_pool(c->st.requested_bytes, pool, requested);
  if (b->size >= c->conf.max_split_size) inc(&c->st.oversize_allocations, 1);
  ab_gauge_add(&c->base.stats.allocated_bytes, (int64_t)b->size);
  ab_gauge_add(&c->base.stats.requested_bytes, (int64_t)requested);
  *out = b->ptr;
  return AB_OK;
}

/* The user's half of a free (PyTorch's free()): no longer allocated, still active. */
static void user_free(caching_t *c, block_t *b) {
  dec_pool(c->st.allocation, b->pool, 1);
  dec_pool(c->st.allocated_bytes, b->pool, b->size);
  if (b->size >= c->conf.max_split_size) dec(&c->st.oversize_allocations, 1);
  ab_gauge_sub(&c->base.stats.allocated_bytes, (int64_t)b->size);
}

/* free_block: back into the cache, merged with its free neighbours. PyTorch's block absorbs
 * them; here a cached neighbour carries the merged range instead (the larger, when both
 * are free), re-keyed in place where it can be: the same blocks, fewer set operations. */
static ab_status free_block(caching_t *c, block_t *b) {
  uint64_t size = b->size, requested = b->requested;
  int pool = b->pool;
  block_t *pv = b->prev && b->prev->state == B_FREE ? b->prev : NULL;
  block_t *nx = b->next && b->next->state == B_FREE ? b->next : NULL;
  int64_t net_blocks = -(int64_t)((pv != NULL) + (nx != NULL));
  int64_t net_bytes = -(int64_t)((pv ? pv->size : 0) + (nx ? nx->size : 0));
  block_t *keep = b;
  if (pv || nx) {
    keep = nx == NULL || (pv && pv->size > nx->size) ? pv : nx;
    block_t *other = keep == pv ? nx : pv;
    block_t *first = pv ? pv : b, *last = nx ? nx : b;
    ab_dptr_t start = first->ptr;
    uint64_t merged = last->ptr + last->size - start;
    keep->prev = first->prev;
    keep->next = last->next;
    if (keep->prev) keep->prev->next = keep;
    if (keep->next) keep->next->prev = keep;
    if (other) {
      remove_free(c, other);
      block_drop(c, other);
    }
    block_drop(c, b);
    rekey_free(c, keep, start, merged);
    keep->requested = requested; /* PyTorch's merged block is the freed one, its request kept */
  } else {
    insert_free(c, b);
  }
  if (keep->prev || keep->next) {
    net_blocks++;
    net_bytes += (int64_t)keep->size;
  }
  if (!keep->xs) {
    if (net_blocks > 0) inc_pool(c->st.inactive_split, pool, (uint64_t)net_blocks);
    if (net_blocks < 0) dec_pool(c->st.inactive_split, pool, (uint64_t)-net_blocks);
    if (net_bytes > 0) inc_pool(c->st.inactive_split_bytes, pool, (uint64_t)net_bytes);
    if (net_bytes < 0) dec_pool(c->st.inactive_split_bytes, pool, (uint64_t)-net_bytes);
  }
  dec_pool(c->st.active, pool, 1);
  dec_pool(c->st.active_bytes, pool, size);
  dec_pool(c->st.requested_bytes, pool, requested);
  ab_gauge_sub(&c->base.stats.requested_bytes, (int64_t)requested);
  return AB_OK;
}

/* ---- the vtable ----------------------------------------------------------------------------- */

/* get_pool: the free lists a request goes to: those of the latest open context that takes its
 * stream (captures_underway, searched newest first), else the default pool's. */
static int pool_for(const caching_t *c, uint64_t size, unsigned stream) {
  int kind = size <= SMALL_SIZE ? SMALL : LARGE;
  for (size_t i = c->ncaptures; i-- > 0;)
    if (c->captures[i].all_streams || c->captures[i].stream == stream) return 2 * (int)c->captures[i].pool + kind;
  return kind;
}

/* try_mempool_fallback: a request of the default pool that got no new segment may take a free
 * block of a pool made with use_on_oom, before anything is released; never a new segment
 * there, never expandable growth. */
static bool mempool_fallback(caching_t *c, params_t *p) {
  if (OWNER(p->pool)) return false;
  for (unsigned n = 1; n <= c->npriv; n++) {
    const ppool_t *pp = &c->priv[n];
    if (!pp->exists || !pp->use_on_oom || pp->use_count <= 0) continue;
    params_t q = *p;
    q.pool = 2 * (int)n + KIND(p->pool);
    q.expandable = false;
    if (get_free_block(c, &q)) {
      *p = q;
      return true;
    }
  }
  return false;
}

/* process_events' part in a replay: the frees deferred by a capture that has ended. */
static ab_status free_ready(caching_t *c) {
  AB_TRY(ab_caching_scratch_need(c, c->nready));
  size_t n = 0;
  for (size_t i = 0; i < c->live.cap && n < c->nready; i++) {
    block_t *b = (block_t *)(uintptr_t)c->live.slots[i].val;
    if (c->live.slots[i].key && b->state == B_PENDING && b->deferred == DEFER_READY) c->scratch[n++] = b;
  }
  qsort(c->scratch, n, sizeof *c->scratch, by_free_order);
  c->nready = 0;
  for (size_t i = 0; i < n; i++) {
    block_t *b = c->scratch[i];
    b->deferred = DEFER_NONE;
    ab_map_take(&c->live, b->ptr, NULL);
    c->npending--;
    AB_TRY(free_block(c, b));
  }
  return AB_OK;
}

static ab_status caching_alloc(ab_strategy_t *s, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  caching_t *c = of(s);
  if (bytes >= ONE_EB) return AB_ERR_OOM; /* not in PyTorch's num_ooms: it fails before the allocator */
  AB_TRY(reserve_blocks(c, 64));
  if (c->nready && c->ncaptures == 0) AB_TRY(free_ready(c));
  params_t p;
  p.size = round_size(c, bytes);
  p.pool = pool_for(c, p.size, stream);
  AB_TRY(bins_need(c, p.pool, stream));
  p.alloc_size = allocation_size(c, p.size);
  p.stream = stream;
  p.expandable = c->conf.expandable;
  p.block = NULL;
  p.cached = false;
  if (!get_free_block(c, &p)) {
    if (gc_on(c)) AB_TRY(garbage_collect(c));
    ab_status st = alloc_block(c, &p, false);
    if (st == AB_ERR_OOM && mempool_fallback(c, &p)) st = AB_OK;
    if (st == AB_ERR_OOM) {
      bool released;
      AB_TRY(release_available(c, &p, &released));
      if (released) st = alloc_block(c, &p, false);
    }
    /* The last retry releases everything, which no open capture allows. */
    if (st == AB_ERR_OOM && c->ncaptures == 0) {
      AB_TRY(release_cached(c, 0));
      st = alloc_block(c, &p, true);
    }
    if (st == AB_ERR_OOM) c->st.num_ooms++; /* PyTorch's own count; the wrapper keeps stats.num_ooms */
    if (st != AB_OK) return st;
  }
  return alloc_found_block(c, &p, bytes, out);
}

/* The block of a live address, checked against what the caller says about it; *slot: its
 * slot in the live map, for a free that then takes it out without a second search. */
static ab_status lookup(caching_t *c, const char *op, ab_dptr_t ptr, uint64_t bytes, unsigned stream, int state,
                        block_t **out, size_t *slot) {
  size_t at = ab_map_slot(&c->live, ptr);
  block_t *b = at < c->live.cap ? (block_t *)(uintptr_t)c->live.slots[at].val : NULL;
  if (b == NULL || b->state != state)
    return ab_diag_set(&c->base.dev->diag, AB_ERR_INVALID, "caching: %s of 0x%llx, which is not %s", op,
                       (unsigned long long)ptr, state == B_ALLOCATED ? "allocated" : "waiting for its free to complete");
  if (b->requested != bytes || b->stream != stream)
    return ab_diag_set(&c->base.dev->diag, AB_ERR_INVALID,
                       "caching: %s of 0x%llx as %llu bytes on stream %u; it was allocated as %llu bytes on stream %u", op,
                       (unsigned long long)ptr, (unsigned long long)bytes, stream, (unsigned long long)b->requested,
                       b->stream);
  *out = b;
  if (slot) *slot = at;
  return AB_OK;
}

static ab_status caching_free(ab_strategy_t *s, ab_dptr_t ptr, uint64_t bytes, unsigned stream) {
  caching_t *c = of(s);
  block_t *b = NULL;
  size_t slot = 0;
  AB_TRY(lookup(c, "free", ptr, bytes, stream, B_ALLOCATED, &b, &slot));
  ab_map_remove_slot(&c->live, slot);
  user_free(c, b);
  return free_block(c, b);
}

static ab_status caching_free_request(ab_strategy_t *s, ab_dptr_t ptr, uint64_t bytes, unsigned stream) {
  caching_t *c = of(s);
  block_t *b = NULL;
  AB_TRY(lookup(c, "free_request", ptr, bytes, stream, B_ALLOCATED, &b, NULL));
  user_free(c, b);
  b->state = B_PENDING;
  b->freed_at = c->free_requests++;
  /* No event can be recorded while a capture is open (Note [Captures]). */
  b->deferred = c->ncaptures && !c->conf.capture_reuse ? DEFER_WAITING : DEFER_NONE;
  c->npending++;
  return AB_OK;
}

static ab_status caching_free_complete(ab_strategy_t *s, ab_dptr_t ptr, uint64_t bytes, unsigned stream) {
  caching_t *c = of(s);
  uint64_t key = early_key(ptr, bytes), count;
  if (c->early.n && ab_map_get(&c->early, key, &count)) {
    if (count == 1)
      ab_map_take(&c->early, key, NULL);
    else if (ab_map_put(&c->early, key, count - 1) != AB_OK)
      return AB_ERR_INTERNAL;
    return AB_OK;
  }
  block_t *b = NULL;
  size_t slot = 0;
  AB_TRY(lookup(c, "free_complete", ptr, bytes, stream, B_PENDING, &b, &slot));
  if (b->deferred == DEFER_WAITING && c->ncaptures) { /* Note [Captures] */
    b->deferred = DEFER_READY;
    c->nready++;
    return AB_OK;
  }
  b->deferred = DEFER_NONE;
  ab_map_remove_slot(&c->live, slot);
  c->npending--;
  return free_block(c, b);
}

static ab_status caching_empty_cache(ab_strategy_t *s) {
  caching_t *c = of(s);
  AB_TRY(reserve_blocks(c, 64));
  return release_cached(c, 0);
}

/* Room for private pool n: its entry and its two free lists. */
static ab_status pool_room(caching_t *c, unsigned n) {
  if (c->pools && n <= c->npriv) return AB_OK;
  size_t had = c->pools ? c->npriv + 1 : 0;
  if (n >= (1u << 15)) return ab_diag_set(&c->base.dev->diag, AB_ERR_INVALID, "caching: pool %u: at most 32767 pools", n);
  ppool_t *priv = realloc(c->priv, (n + 1) * sizeof *priv);
  if (priv == NULL) return AB_ERR_INTERNAL;
  c->priv = priv;
  memset(&priv[had], 0, (n + 1 - had) * sizeof *priv);
  pool_t *pools = realloc(c->pools, 2 * (n + 1) * sizeof *pools);
  if (pools == NULL) return AB_ERR_INTERNAL;
  c->pools = pools; /* the sets' nodes point at each other, never at their set: moving is safe */
  for (size_t i = c->npools; i < 2 * (size_t)(n + 1); i++) {
    memset(&pools[i], 0, sizeof pools[i]);
    ab_tree_init(&pools[i].unmapped, cmp_unmapped);
  }
  c->npools = 2 * (size_t)(n + 1);
  c->npriv = n;
  return AB_OK;
}

/* create_or_incref_pool */
static ab_status pool_incref(caching_t *c, unsigned n) {
  AB_TRY(pool_room(c, n));
  ppool_t *pp = &c->priv[n];
  if (!pp->exists) {
    memset(pp, 0, sizeof *pp);
    pp->exists = true;
    pp->use_count = 1;
    return AB_OK;
  }
  if (pp->use_count <= 0)
    return ab_diag_set(&c->base.dev->diag, AB_ERR_INVALID, "caching: pool %u was released: it takes no new user", n);
  pp->use_count++;
  return AB_OK;
}

/* Note [Private pools] (pools.h), as DeviceCachingAllocator's createOrIncrefPool,
 * beginAllocateToPool, endAllocateToPool, releasePool and emptyCache(pool). */
static ab_status caching_pool(ab_strategy_t *s, ab_pool_op_t op, unsigned n, unsigned stream, unsigned flags) {
  caching_t *c = of(s);
  ab_diag_t *diag = &s->dev->diag;
  AB_TRY(reserve_blocks(c, 64));
  bool known = n <= c->npriv && c->priv[n].exists;
  switch (op) {
    case AB_POOL_CREATE:
      AB_TRY(pool_incref(c, n));
      if (flags & AB_POOL_USE_ON_OOM) c->priv[n].use_on_oom = true;
      if (flags & AB_POOL_NO_SPLIT) c->priv[n].no_split = true;
      return AB_OK;
    case AB_POOL_BEGIN:
      for (size_t i = 0; i < c->ncaptures; i++)
        if (c->captures[i].pool == n) return ab_diag_set(diag, AB_ERR_INVALID, "caching: pool %u: already allocating to it", n);
      AB_TRY(pool_incref(c, n));
      if (c->ncaptures == c->capcaptures) {
        size_t cap = c->capcaptures ? 2 * c->capcaptures : 4;
        capture_t *grown = realloc(c->captures, cap * sizeof *grown);
        if (grown == NULL) return AB_ERR_INTERNAL;
        c->captures = grown;
        c->capcaptures = cap;
      }
      c->captures[c->ncaptures++] = (capture_t){n, stream, (flags & AB_POOL_ALL_STREAMS) != 0};
      return AB_OK;
    case AB_POOL_END:
      for (size_t i = 0; i < c->ncaptures; i++)
        if (c->captures[i].pool == n) {
          memmove(&c->captures[i], &c->captures[i + 1], (c->ncaptures - i - 1) * sizeof *c->captures);
          c->ncaptures--;
          return AB_OK;
        }
      return ab_diag_set(diag, AB_ERR_INVALID, "caching: pool %u: end of allocating to it, which had not begun", n);
    case AB_POOL_RELEASE:
      if (!known || c->priv[n].use_count <= 0)
        return ab_diag_set(diag, AB_ERR_INVALID, "caching: release of pool %u, which has no user", n);
      if (--c->priv[n].use_count == 0) c->priv[n].freeable = true;
      return AB_OK;
    case AB_POOL_EMPTY:
      return known ? release_cached(c, n) : AB_OK;
    case AB_POOL_OPS: break;
  }
  return ab_diag_set(diag, AB_ERR_INVALID, "caching: unknown pool call %u", (unsigned)op);
}

/* Checks the expandable-page rule the device imposes. */
static ab_status check_pages(const ab_caching_conf_t *conf, const ab_device_t *dev, const char *what, ab_diag_t *diag) {
  if (conf->expandable && conf->large_segment_size % dev->granule_bytes)
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "%s: expandable_segments with large_segment_size_mb:%llu: pages must be whole %llu MiB granules of %s",
                       what, (unsigned long long)(conf->large_segment_size >> 20),
                       (unsigned long long)(dev->granule_bytes >> 20), dev->name);
  return AB_OK;
}

static void caching_destroy(ab_strategy_t *s);

/* An instance with the settings cf (already checked). */
static ab_status create_with(ab_device_t *dev, const ab_caching_conf_t *conf, ab_strategy_t **out, ab_diag_t *diag) {
  ab_caching_conf_t cf = *conf;
  caching_t *c = calloc(1, sizeof *c);
  if (c == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  c->base.ops = &ab_caching_ops;
  c->base.dev = dev;
  c->conf = cf;
  ab_map_init(&c->live);
  ab_map_init(&c->early);
  ab_map_init(&c->segs);
  /* The cap: set_per_process_memory_fraction (the budget) wins over the conf's fraction. */
  if (dev->budget_bytes && dev->budget_bytes < dev->total_bytes) {
    c->has_cap = true;
    c->cap = dev->budget_bytes;
  } else if (!dev->budget_bytes && cf.memory_fraction < 1.0) {
    c->has_cap = true;
    c->cap = (uint64_t)(cf.memory_fraction * (double)dev->total_bytes);
  }
  if (c->has_cap) ab_strategy_cap_window_open(&c->base, c->cap);
  /* PyTorch's allocator orders its free blocks by (stream, size, address) and finds its blocks
   * by address; nothing else of an address counts, but for the keys of
   * Note [Early completion], which can outlive their segment (sync_and_free clears
   * order_only there). */
  c->base.order_only = true;
  /* Uncapped, the caps it could take mid-run: none where a cap would collect garbage, which
   * an uncapped run never did (Note [Taking a cap mid-run]). */
  if (!c->has_cap) c->base.cap_lo = 0, c->base.cap_hi = cf.gc_threshold > 0.0 ? 0 : UINT64_MAX;
  c->st.max_split_size = cf.max_split_size == UINT64_MAX ? -1 : (int64_t)cf.max_split_size;
  if (reserve_blocks(c, 64) != AB_OK || pool_room(c, 0) != AB_OK) {
    caching_destroy(&c->base);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  if (cf.ignored[0]) ab_diag_set(diag, AB_OK, "caching: accepted without effect on device memory: %s", cf.ignored);
  *out = &c->base;
  return AB_OK;
}

static ab_status caching_create(ab_device_t *dev, const char *conf, ab_strategy_t **out, ab_diag_t *diag) {
  ab_caching_conf_t cf;
  ab_caching_conf_defaults(&cf);
  AB_TRY(ab_caching_conf_apply(&cf, "-c", conf, diag));
  AB_TRY(check_pages(&cf, dev, "-c", diag));
  return create_with(dev, &cf, out, diag);
}

ab_status ab_caching_create_rounded(ab_device_t *dev, const char *conf, uint64_t round_large, ab_strategy_t **out,
                                    ab_diag_t *diag) {
  ab_caching_conf_t cf;
  ab_caching_conf_defaults(&cf);
  if (round_large == 0 || round_large % 512)
    return ab_diag_set(diag, AB_ERR_INVALID, "caching: round_large of %llu bytes is not a whole number of 512-byte blocks",
                       (unsigned long long)round_large);
  cf.round_large = round_large;
  AB_TRY(ab_caching_conf_apply(&cf, "-c", conf, diag));
  AB_TRY(check_pages(&cf, dev, "-c", diag));
  return create_with(dev, &cf, out, diag);
}

static void caching_destroy(ab_strategy_t *s) {
  caching_t *c = of(s);
  ab_device_t *dev = s->dev;
  for (size_t i = 0; i < c->segs.cap; i++)
    if (c->segs.slots[i].key) ab_device_free(dev, c->segs.slots[i].key, c->segs.slots[i].val);
  for (size_t k = 0; k < c->nxsegs; k++) {
    xseg_t *xs = c->xsegs[k];
    for (uint64_t i = 0; i < xs->bytes / xs->page; i++)
      if (page_mapped(xs, i)) ab_device_unmap(dev, xs->base + i * xs->page, xs->page);
    ab_device_va_release(dev, xs->base, xs->bytes);
    free(xs->mapped);
    free(xs);
  }
  for (size_t i = 0; i < c->nslabs; i++) free(c->slabs[i]);
  free(c->slabs);
  free(c->xsegs);
  free(c->scratch);
  for (size_t i = 0; i < c->npools; i++) {
    for (unsigned k = 0; k < c->pools[i].nstreams; k++) free(c->pools[i].free[k]);
    free(c->pools[i].free);
  }
  free(c->pools);
  free(c->priv);
  free(c->captures);
  ab_map_free(&c->live);
  ab_map_free(&c->early);
  ab_map_free(&c->segs);
  free(c);
}

/* Note [Taking a cap mid-run] (strategy.h): the cap as a cap made at create would be, the
 * window as the decisions so far narrowed it (ab_strategy_take_cap checked the cap is in it). */
static void caching_take_cap(ab_strategy_t *s, uint64_t cap) {
  caching_t *c = of(s);
  c->has_cap = true;
  c->cap = cap;
  s->memory_cap = cap;
  s->cap_window = true;
}

const ab_strategy_ops_t ab_caching_ops = {
    .name = "caching",
    .create = caching_create,
    .destroy = caching_destroy,
    .alloc = caching_alloc,
    .free = caching_free,
    .free_request = caching_free_request,
    .free_complete = caching_free_complete,
    .empty_cache = caching_empty_cache,
    .walk = ab_caching_walk,
    .check = ab_caching_check,
    .memory_stats = ab_caching_memory_stats,
    .describe_oom = ab_caching_describe_oom,
    .pool = caching_pool,
    .device_bytes = ab_caching_device_bytes,
    .take_cap = caching_take_cap,
};

/* ---- beyond the vtable ------------------------------------------------------------------- */


ab_status ab_caching_set_settings(ab_strategy_t *s, const char *conf, ab_diag_t *diag) {
  if (s->ops != &ab_caching_ops)
    return ab_diag_set(diag, AB_ERR_INVALID, "%s is not the caching strategy", s->ops->name);
  caching_t *c = of(s);
  ab_caching_conf_t cf = c->conf;
  cf.ignored[0] = '\0';
  AB_TRY(ab_caching_conf_apply(&cf, "settings", conf, diag));
  AB_TRY(check_pages(&cf, s->dev, "settings", diag));
  if (cf.max_split_size != c->conf.max_split_size) c->settings_changed = true;
  c->conf = cf;
  return AB_OK;
}
