/* stitching.c: GMLake's allocator (Guo et al., "GMLake: Efficient and Transparent GPU Memory
 * Defragmentation for Large-scale DNN Training with Virtual Memory Stitching", ASPLOS'24;
 * its code: intelligent-machine-learning/glake, GMLake/src/CUDACachingAllocator.cpp), on the
 * device layer's VMM calls.
 *
 * Note [GMLake's rules]: each rule with where GMLake's code has it (names in brackets):
 *   1. Requests of at most 1 MiB are PyTorch's small pool, unchanged: 512-byte rounding,
 *      2 MiB cudaMalloc segments, split while 512 bytes remain [kSmallSize, kSmallBuffer;
 *      realloc_block's cudaMalloc branch for the small pool].
 *   2. Larger requests round up to the 2 MiB granule [kGranularity]. New memory is a
 *      primitive block (pBlock): an address range with one physical chunk mapped per
 *      granule [VmmSegment, PhyBlock; realloc_block]; requests under 10 MiB get a 20 MiB one
 *      [get_allocation_size, kLargeBuffer], larger ones their own size. A free block is
 *      split when 2 MiB or more would remain [should_split].
 *   3. Allocation order [malloc]: best fit among the free pBlocks of the stream; else the
 *      smallest free stitched block (sBlock) that holds the request, if it is at most
 *      reuse_limit times the request [get_free_block, reuseLimit = 10]; else stitch; else
 *      new memory; else stitch; else release the cached blocks and take new memory again;
 *      else stitch once more. Stitching is tried only for requests of at least frag_limit
 *      [get_fused_fragmented_blocks: fragLimit = 512 MiB; GMLake's tutorial sets 256 MiB for
 *      a small model, -c frag_limit:256MiB], and only at attempts from defrag_level on (0:
 *      all three; 1: from the one after new memory failed; 2: only the last) [defragLevel].
 *   4. Stitch [get_fused_fragmented_blocks]: free pBlocks of the stream, the largest first,
 *      until they hold the request (two free pBlocks at least); the last is split when 2 MiB
 *      or more of it are not needed; their physical chunks are mapped at one new address
 *      range, the sBlock, which serves the request.
 *   5. A freed sBlock's chunks are free again in the pBlocks they belong to, merged there
 *      with their free neighbours, and serve any request from the pBlock pool [update_block:
 *      each phy_block freed, its pBlock free_block'ed when all of its chunks are]; the sBlock
 *      stays as a second view of them and serves a later request whole while every one of
 *      its chunks is free [free_fused_blocks].
 *   6. Reusing an sBlock takes only the chunks the request needs, from its start; the rest
 *      stay free in their pBlocks [get_free_block: keep_blocks].
 *   7. Releasing cached memory (out of memory, or empty_cache) frees only pBlocks and small
 *      segments that are not split, whole and free [release_cached_blocks, release_blocks:
 *      !block->prev && !block->next]; the sBlocks that view a released pBlock go with it
 *      [release_block]. empty_cache also drops every sBlock not in use
 *      [emptyCache: garbage_collect_fused_blocks(2)].
 * What differs:
 *   - The device layer creates the physical memory a map maps (device.h), so a chunk is mapped
 *     at one place at a time: a stitch or an sBlock's reuse unmaps the chunks in their pBlocks
 *     (holes there) and maps as many at the sBlock; its free unmaps them there and maps them
 *     back home. GMLake maps the same handles twice and keeps both views. The bytes held are
 *     the same at every moment (the unmap comes first); the driver does one map more per
 *     chunk at each move.
 *   - GMLake's garbage collection of sBlocks when address space runs short [autoGC, 1000 GB]
 *     never triggers at these sizes and is left out; reAlloc (off by default) is too.
 *   - Stream events (GMLake's self_last_event ordering) are not modelled: a block is free
 *     for reuse once the program frees it, as in the other strategies.
 */
#include "strategies/stitching.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/base/tree.h"
#include "kernels/base/units.h"

#define SMALL_SIZE_BYTES (1ULL << 20)      /* kSmallSize */
#define SMALL_SEGMENT_BYTES (2ULL << 20)   /* kSmallBuffer */
#define MIN_BLOCK_BYTES 512ULL             /* kMinBlockSize */
#define LARGE_BUFFER_BYTES (20ULL << 20)   /* kLargeBuffer */
#define MIN_LARGE_ALLOC_BYTES (10ULL << 20) /* kMinLargeAlloc */

static uint64_t round_up(uint64_t bytes, uint64_t unit) { return (bytes + unit - 1) / unit * unit; }

typedef enum seg_kind_e { SEG_SMALL, SEG_PRIMITIVE, SEG_STITCHED } seg_kind_t;
typedef enum blk_state_e { B_ALLOCATED, B_FREE, B_UNMAPPED } blk_state_t;

typedef struct seg_s seg_t;
typedef struct blk_s {
  ab_tnode_t node; /* in its pool while free */
  seg_t *seg;
  struct blk_s *prev, *next; /* address neighbours in the segment */
  ab_dptr_t addr;
  uint64_t bytes;
  uint64_t requested; /* while allocated */
  blk_state_t state;
} blk_t;

/* A run of an sBlock's chunks: bytes from addr on in the pBlock home, in the sBlock's order. */
typedef struct run_s {
  seg_t *home;
  ab_dptr_t addr;
  uint64_t bytes;
} run_t;

struct seg_s {
  ab_tnode_t node;  /* in the segments by base */
  ab_tnode_t snode; /* an sBlock not in use: in the sBlocks by (stream, va_bytes, base) */
  ab_dptr_t base;
  uint64_t va_bytes; /* the reservation (or the cudaMalloc'd bytes of a small segment) */
  uint64_t mapped;   /* bytes with memory behind them */
  seg_kind_t kind;
  unsigned stream;
  blk_t *first;
  run_t *runs;   /* an sBlock's chunks, in order (rule 5) */
  size_t nruns;
  uint64_t lent; /* a pBlock's bytes mapped at an sBlock now (its UNMAPPED blocks) */
  bool idle;     /* an sBlock: not in use, in the sBlock set */
  bool doomed;   /* an sBlock in use one of whose pBlocks went: dropped when freed (rule 7) */
};

typedef struct stitching_s {
  ab_strategy_t base;
  ab_tree_t small, ppool;        /* free blocks by (stream, bytes, address) */
  ab_tree_t spool;               /* sBlocks not in use, by (stream, va_bytes, base) */
  ab_tree_t segs;                /* by base */
  ab_map_t live;                 /* address -> blk_t * */
  uint64_t frag_limit;
  double reuse_limit;
  uint64_t defrag_level;
  uint64_t stitches, stitched_bytes; /* counters for memory_stats */
  uint64_t reuses;                   /* requests served by an sBlock made before */
} stitching_t;

/* ---- ordering ---------------------------------------------------------------------- */

typedef struct pool_key_s {
  unsigned stream;
  uint64_t bytes;
  ab_dptr_t addr;
} pool_key_t;

static int cmp_key(const pool_key_t *a, const blk_t *b) {
  if (a->stream != b->seg->stream) return a->stream < b->seg->stream ? -1 : 1;
  if (a->bytes != b->bytes) return a->bytes < b->bytes ? -1 : 1;
  return (a->addr > b->addr) - (a->addr < b->addr);
}

static int cmp_blk(const ab_tnode_t *x, const ab_tnode_t *y) {
  const blk_t *a = AB_CONTAINER_OF(x, blk_t, node), *b = AB_CONTAINER_OF(y, blk_t, node);
  pool_key_t k = {a->seg->stream, a->bytes, a->addr};
  return cmp_key(&k, b);
}

static int key_blk(const void *key, const ab_tnode_t *n) { return cmp_key(key, AB_CONTAINER_OF(n, blk_t, node)); }

static int cmp_seg(const ab_tnode_t *x, const ab_tnode_t *y) {
  ab_dptr_t a = AB_CONTAINER_OF(x, seg_t, node)->base, b = AB_CONTAINER_OF(y, seg_t, node)->base;
  return (a > b) - (a < b);
}

/* An sBlock's blocks are never FREE (in use, or unmapped): only pBlocks and small segments
 * have free blocks. */
static ab_tree_t *pool_of(stitching_t *t, const seg_t *seg) { return seg->kind == SEG_SMALL ? &t->small : &t->ppool; }

static int cmp_sblock(const ab_tnode_t *x, const ab_tnode_t *y) {
  const seg_t *a = AB_CONTAINER_OF(x, seg_t, snode), *b = AB_CONTAINER_OF(y, seg_t, snode);
  if (a->stream != b->stream) return a->stream < b->stream ? -1 : 1;
  if (a->va_bytes != b->va_bytes) return a->va_bytes < b->va_bytes ? -1 : 1;
  return (a->base > b->base) - (a->base < b->base);
}

static int key_sblock(const void *key, const ab_tnode_t *n) {
  const pool_key_t *k = key;
  const seg_t *b = AB_CONTAINER_OF(n, seg_t, snode);
  if (k->stream != b->stream) return k->stream < b->stream ? -1 : 1;
  if (k->bytes != b->va_bytes) return k->bytes < b->va_bytes ? -1 : 1;
  return (k->addr > b->base) - (k->addr < b->base);
}

/* The smallest free block of the stream in pool holding bytes, or NULL. */
static blk_t *best_fit(ab_tree_t *pool, unsigned stream, uint64_t bytes) {
  pool_key_t k = {stream, bytes, 0};
  ab_tnode_t *n = ab_tree_lower_bound(pool, &k, key_blk);
  if (n == NULL) return NULL;
  blk_t *b = AB_CONTAINER_OF(n, blk_t, node);
  return b->seg->stream == stream ? b : NULL;
}

/* ---- blocks ------------------------------------------------------------------------ */

static blk_t *new_blk(seg_t *seg, ab_dptr_t addr, uint64_t bytes, blk_state_t state) {
  blk_t *b = calloc(1, sizeof *b);
  if (b) b->seg = seg, b->addr = addr, b->bytes = bytes, b->state = state;
  return b;
}

static void set_free(stitching_t *t, blk_t *b) {
  b->state = B_FREE;
  ab_tree_insert(pool_of(t, b->seg), &b->node);
}

static void unset_free(stitching_t *t, blk_t *b) { ab_tree_remove(pool_of(t, b->seg), &b->node); }

/* Merges b with its neighbours of the same state (FREE or UNMAPPED); b must be out of the
 * pool. Returns the merged block. */
static blk_t *merge(stitching_t *t, blk_t *b) {
  blk_t *n;
  while ((n = b->prev) != NULL && n->state == b->state) {
    if (n->state == B_FREE) unset_free(t, n);
    n->bytes += b->bytes;
    n->next = b->next;
    if (b->next) b->next->prev = n;
    free(b);
    b = n;
  }
  while ((n = b->next) != NULL && n->state == b->state) {
    if (n->state == B_FREE) unset_free(t, n);
    b->bytes += n->bytes;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    free(n);
  }
  return b;
}

/* Splits the first bytes off b (out of the pool): the rest becomes a FREE block. */
static ab_status split(stitching_t *t, blk_t *b, uint64_t bytes) {
  blk_t *rest = new_blk(b->seg, b->addr + bytes, b->bytes - bytes, B_FREE);
  if (rest == NULL) return AB_ERR_INTERNAL;
  rest->prev = b, rest->next = b->next;
  if (b->next) b->next->prev = rest;
  b->next = rest;
  b->bytes = bytes;
  set_free(t, rest);
  return AB_OK;
}

static bool should_split(const blk_t *b, uint64_t size) {
  uint64_t remaining = b->bytes - size;
  return b->seg->kind == SEG_SMALL ? remaining >= MIN_BLOCK_BYTES : remaining >= AB_GRANULE_BYTES;
}

/* Hands out the free block b (in its pool) for a request of size rounded bytes. */
static ab_status hand_out(stitching_t *t, blk_t *b, uint64_t size, uint64_t bytes, ab_dptr_t *out) {
  ab_strategy_t *s = &t->base;
  unset_free(t, b);
  if (should_split(b, size) && split(t, b, size) != AB_OK) {
    set_free(t, b);
    return AB_ERR_INTERNAL;
  }
  if (ab_map_put(&t->live, b->addr, (uint64_t)(uintptr_t)b) != AB_OK) {
    set_free(t, merge(t, b));
    return AB_ERR_INTERNAL;
  }
  b->state = B_ALLOCATED;
  b->requested = bytes;
  *out = b->addr;
  ab_gauge_add(&s->stats.requested_bytes, (int64_t)bytes);
  ab_gauge_add(&s->stats.allocated_bytes, (int64_t)b->bytes);
  return AB_OK;
}

/* ---- memory ------------------------------------------------------------------------ */

/* Maps [at, at + bytes) one granule per call (policy 2); on failure unmaps what it mapped. */
static ab_status map_granules(stitching_t *t, ab_dptr_t at, uint64_t bytes, unsigned stream) {
  ab_strategy_t *s = &t->base;
  for (uint64_t done = 0; done < bytes; done += AB_GRANULE_BYTES) {
    ab_status st = ab_device_map(s->dev, at + done, AB_GRANULE_BYTES);
    if (st != AB_OK) {
      for (uint64_t u = 0; u < done; u += AB_GRANULE_BYTES) ab_device_unmap(s->dev, at + u, AB_GRANULE_BYTES);
      return st;
    }
  }
  s->stats.num_device_alloc += bytes / AB_GRANULE_BYTES;
  ab_gauge_add(&s->stats.reserved_bytes, (int64_t)bytes);
  ab_strategy_segment(s, AB_TR_SEGMENT_MAP, at, bytes, stream);
  return AB_OK;
}

static ab_status unmap_granules(stitching_t *t, ab_dptr_t at, uint64_t bytes, unsigned stream) {
  ab_strategy_t *s = &t->base;
  for (uint64_t done = 0; done < bytes; done += AB_GRANULE_BYTES) AB_TRY(ab_device_unmap(s->dev, at + done, AB_GRANULE_BYTES));
  s->stats.num_device_free += bytes / AB_GRANULE_BYTES;
  ab_gauge_sub(&s->stats.reserved_bytes, (int64_t)bytes);
  ab_strategy_segment(s, AB_TR_SEGMENT_UNMAP, at, bytes, stream);
  return AB_OK;
}

static void drop_segment(stitching_t *t, seg_t *seg) {
  ab_strategy_t *s = &t->base;
  for (blk_t *b = seg->first, *n; b; b = n) {
    n = b->next;
    if (b->state == B_FREE) unset_free(t, b);
    free(b);
  }
  if (seg->kind == SEG_SMALL) {
    ab_device_free(s->dev, seg->base, seg->va_bytes);
    s->stats.num_device_free++;
    ab_gauge_sub(&s->stats.reserved_bytes, (int64_t)seg->va_bytes);
    ab_strategy_segment(s, AB_TR_SEGMENT_FREE, seg->base, seg->va_bytes, seg->stream);
  } else {
    ab_device_va_release(s->dev, seg->base, seg->va_bytes);
  }
  if (seg->idle) ab_tree_remove(&t->spool, &seg->snode);
  ab_tree_remove(&t->segs, &seg->node);
  free(seg->runs);
  free(seg);
}

/* The block of seg holding [addr, addr + bytes) whole, cut so that it is exactly that range
 * (the cut-off parts keep its state); out of its pool when FREE. NULL when no block of seg
 * holds the range whole, or host memory ran out (nothing changed then). */
static blk_t *isolate(stitching_t *t, seg_t *seg, ab_dptr_t addr, uint64_t bytes) {
  blk_t *b = seg->first;
  while (b && b->addr + b->bytes <= addr) b = b->next;
  if (b == NULL || b->addr > addr || b->addr + b->bytes < addr + bytes) return NULL;
  blk_t *pre = addr > b->addr ? new_blk(seg, b->addr, addr - b->addr, b->state) : NULL;
  uint64_t after = b->addr + b->bytes - addr - bytes;
  blk_t *post = after ? new_blk(seg, addr + bytes, after, b->state) : NULL;
  if ((addr > b->addr && pre == NULL) || (after && post == NULL)) return free(pre), free(post), NULL;
  if (b->state == B_FREE) unset_free(t, b);
  if (pre) {
    pre->prev = b->prev, pre->next = b;
    if (b->prev) b->prev->next = pre;
    else seg->first = pre;
    b->prev = pre;
    if (pre->state == B_FREE) set_free(t, pre);
  }
  if (post) {
    post->next = b->next, post->prev = b;
    if (b->next) b->next->prev = post;
    b->next = post;
    if (post->state == B_FREE) set_free(t, post);
  }
  b->addr = addr, b->bytes = bytes;
  return b;
}

/* Lends [addr, addr + bytes) of the pBlock home, free there, to an sBlock: its chunks are
 * unmapped here (a hole) before they are mapped there. */
static ab_status lend(stitching_t *t, seg_t *home, ab_dptr_t addr, uint64_t bytes) {
  blk_t *b = isolate(t, home, addr, bytes);
  if (b == NULL || b->state != B_FREE) return AB_ERR_INTERNAL;
  ab_status st = unmap_granules(t, addr, bytes, home->stream);
  if (st != AB_OK) {
    set_free(t, merge(t, b));
    return st;
  }
  b->state = B_UNMAPPED;
  merge(t, b);
  home->mapped -= bytes;
  home->lent += bytes;
  return AB_OK;
}

/* Rule 5: [addr, addr + bytes) comes back to the pBlock home, free there. */
static ab_status give_back(stitching_t *t, seg_t *home, ab_dptr_t addr, uint64_t bytes) {
  blk_t *b = isolate(t, home, addr, bytes);
  if (b == NULL || b->state != B_UNMAPPED) return AB_ERR_INTERNAL;
  ab_status st = map_granules(t, addr, bytes, home->stream);
  if (st != AB_OK) {
    merge(t, b);
    return st;
  }
  b->state = B_FREE;
  set_free(t, merge(t, b));
  home->mapped += bytes;
  home->lent -= bytes;
  return AB_OK;
}

typedef ab_status (*move_fn)(stitching_t *t, seg_t *home, ab_dptr_t addr, uint64_t bytes);

/* Note [Unmap after the kernels]: a block the program freed may still be read or written by
 * kernels it queued before the free (frees are stream-ordered), and cuMemUnmap does not wait
 * for them in every case: on an H200 a kernel hit an illegal address when an sBlock's reuse
 * unmapped chunks freed just before. GMLake never unmaps a chunk to reuse it (it keeps both
 * views mapped); here, where a chunk is mapped at one place at a time, every unmap of memory
 * the program has used waits for the device first, as PyTorch's release of cached blocks does
 * (synchronize_and_free_events before cudaFree). */
static ab_status after_the_kernels(stitching_t *t) { return ab_device_synchronize(t->base.dev); }

/* Applies move (lend or give_back) to the chunks of sBlock sb's first `upto` bytes, run by
 * run; stops at the first failure. *done receives the bytes moved. */
static ab_status move_runs(stitching_t *t, const seg_t *sb, uint64_t upto, move_fn move, uint64_t *done) {
  *done = 0;
  for (size_t i = 0; i < sb->nruns && *done < upto; i++) {
    const run_t *r = &sb->runs[i];
    uint64_t take = r->bytes < upto - *done ? r->bytes : upto - *done;
    AB_TRY(move(t, r->home, r->addr, take));
    *done += take;
  }
  return AB_OK;
}

/* True when every chunk of the sBlock is free in its pBlock (rule 5: it may serve whole). */
static bool chunks_free(const seg_t *sb) {
  for (size_t i = 0; i < sb->nruns; i++) {
    const run_t *r = &sb->runs[i];
    const blk_t *b = r->home->first;
    while (b && b->addr + b->bytes <= r->addr) b = b->next;
    if (b == NULL || b->state != B_FREE || b->addr > r->addr || b->addr + b->bytes < r->addr + r->bytes) return false;
  }
  return true;
}

/* Maps the sBlock's first size bytes (its chunks lent from their pBlocks) and hands them out
 * as one block. On failure what was lent is given back. */
static ab_status serve_sblock(stitching_t *t, seg_t *sb, uint64_t size, uint64_t bytes, ab_dptr_t *out) {
  ab_strategy_t *s = &t->base;
  uint64_t done = 0, back;
  ab_status st = after_the_kernels(t);
  if (st == AB_OK) st = move_runs(t, sb, size, lend, &done);
  blk_t *b = sb->first, *rest = NULL;
  if (st == AB_OK && size < sb->va_bytes && (rest = new_blk(sb, sb->base + size, sb->va_bytes - size, B_UNMAPPED)) == NULL)
    st = AB_ERR_INTERNAL;
  if (st == AB_OK) st = map_granules(t, sb->base, size, sb->stream);
  if (st == AB_OK && ab_map_put(&t->live, sb->base, (uint64_t)(uintptr_t)b) != AB_OK) {
    unmap_granules(t, sb->base, size, sb->stream);
    st = AB_ERR_INTERNAL;
  }
  if (st != AB_OK) {
    free(rest);
    move_runs(t, sb, done, give_back, &back);
    return st;
  }
  if (sb->idle) ab_tree_remove(&t->spool, &sb->snode), sb->idle = false;
  if (rest) b->next = rest, rest->prev = b, b->bytes = size;
  b->state = B_ALLOCATED;
  b->requested = bytes;
  sb->mapped = size;
  *out = sb->base;
  ab_gauge_add(&s->stats.requested_bytes, (int64_t)bytes);
  ab_gauge_add(&s->stats.allocated_bytes, (int64_t)size);
  return AB_OK;
}

/* Rule 5: the freed sBlock's chunks go home; it waits, whole and unmapped, for a request. */
static ab_status free_sblock(stitching_t *t, seg_t *sb) {
  blk_t *b = sb->first;
  uint64_t size = b->bytes;
  AB_TRY(after_the_kernels(t));
  AB_TRY(unmap_granules(t, sb->base, size, sb->stream));
  sb->mapped = 0;
  b->state = B_UNMAPPED;
  merge(t, b);
  uint64_t done;
  ab_status st = move_runs(t, sb, size, give_back, &done);
  if (sb->doomed) {
    drop_segment(t, sb);
  } else {
    sb->idle = true;
    ab_tree_insert(&t->spool, &sb->snode);
  }
  return st;
}

/* Rule 7: the sBlocks viewing the pBlock home go with it; one in use goes when freed. */
static void drop_views_of(stitching_t *t, const seg_t *home) {
  for (ab_tnode_t *n = ab_tree_first(&t->segs), *next; n; n = next) {
    next = ab_tree_next(n);
    seg_t *sb = AB_CONTAINER_OF(n, seg_t, node);
    if (sb->kind != SEG_STITCHED) continue;
    for (size_t i = 0; i < sb->nruns; i++)
      if (sb->runs[i].home == home) {
        if (sb->idle) drop_segment(t, sb);
        else sb->doomed = true;
        break;
      }
  }
}

/* A new segment of va bytes holding one block of state; small ones are a cudaMalloc, the
 * others a reservation mapped granule by granule when the block is FREE or ALLOCATED. */
static ab_status new_segment(stitching_t *t, seg_kind_t kind, uint64_t va, unsigned stream, seg_t **out) {
  ab_strategy_t *s = &t->base;
  seg_t *seg = calloc(1, sizeof *seg);
  if (seg == NULL) return AB_ERR_INTERNAL;
  seg->kind = kind, seg->stream = stream, seg->va_bytes = va;
  ab_status st;
  if (kind == SEG_SMALL) {
    st = ab_device_malloc(s->dev, va, &seg->base);
    if (st == AB_OK) {
      s->stats.num_device_alloc++;
      ab_gauge_add(&s->stats.reserved_bytes, (int64_t)va);
      ab_strategy_segment(s, AB_TR_SEGMENT_ALLOC, seg->base, va, stream);
    }
  } else {
    st = ab_device_va_reserve(s->dev, va, &seg->base);
    if (st == AB_OK && kind == SEG_PRIMITIVE) {
      st = map_granules(t, seg->base, va, stream);
      if (st != AB_OK) ab_device_va_release(s->dev, seg->base, va);
    }
  }
  if (st != AB_OK) {
    free(seg);
    return st;
  }
  seg->mapped = kind == SEG_STITCHED ? 0 : va;
  seg->first = new_blk(seg, seg->base, va, kind == SEG_STITCHED ? B_UNMAPPED : B_FREE);
  if (seg->first == NULL) {
    if (kind == SEG_SMALL) ab_device_free(s->dev, seg->base, va);
    else {
      if (kind == SEG_PRIMITIVE) unmap_granules(t, seg->base, va, stream);
      ab_device_va_release(s->dev, seg->base, va);
    }
    free(seg);
    return AB_ERR_INTERNAL;
  }
  ab_tree_insert(&t->segs, &seg->node);
  if (seg->first->state == B_FREE) set_free(t, seg->first);
  *out = seg;
  return AB_OK;
}

/* Rule 7: frees the pBlocks and small segments that are whole and free, and the sBlocks
 * viewing those pBlocks; with all_views (empty_cache) every sBlock not in use too. */
static ab_status release_cached(stitching_t *t, bool all_views) {
  ab_tnode_t *n, *next;
  AB_TRY(after_the_kernels(t));
  for (n = ab_tree_first(&t->ppool); n != NULL; n = next) {
    next = ab_tree_next(n);
    blk_t *b = AB_CONTAINER_OF(n, blk_t, node);
    if (b->prev || b->next) continue;
    seg_t *seg = b->seg;
    drop_views_of(t, seg);
    next = ab_tree_next(n); /* dropping views leaves the pBlock pool as it was */
    AB_TRY(unmap_granules(t, seg->base, seg->va_bytes, seg->stream));
    seg->mapped = 0;
    drop_segment(t, seg);
  }
  for (n = ab_tree_first(&t->small); n != NULL;) {
    blk_t *b = AB_CONTAINER_OF(n, blk_t, node);
    n = ab_tree_next(n);
    if (b->prev == NULL && b->next == NULL) {
      while (n && AB_CONTAINER_OF(n, blk_t, node)->seg == b->seg) n = ab_tree_next(n);
      drop_segment(t, b->seg);
    }
  }
  while (all_views && (n = ab_tree_first(&t->spool)) != NULL) drop_segment(t, AB_CONTAINER_OF(n, seg_t, snode));
  return AB_OK;
}

/* Rule 4. AB_ERR_OOM when the free pBlocks cannot make the request (nothing changed), or
 * when a map failed (what was lent is given back then). */
static ab_status stitch(stitching_t *t, uint64_t size, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  /* The largest free pBlocks of the stream first, until they hold size. */
  pool_key_t end = {stream + 1, 0, 0};
  ab_tnode_t *n = ab_tree_lower_bound(&t->ppool, &end, key_blk);
  n = n ? ab_tree_prev(n) : ab_tree_last(&t->ppool);
  size_t count = 0;
  uint64_t sum = 0;
  for (ab_tnode_t *m = n; m && sum < size; m = ab_tree_prev(m)) {
    blk_t *b = AB_CONTAINER_OF(m, blk_t, node);
    if (b->seg->stream != stream) break;
    sum += b->bytes;
    count++;
  }
  if (sum < size || count < 2) return AB_ERR_OOM;
  seg_t *sb;
  AB_TRY(new_segment(t, SEG_STITCHED, size, stream, &sb));
  sb->runs = malloc(count * sizeof *sb->runs);
  if (sb->runs == NULL) return drop_segment(t, sb), AB_ERR_INTERNAL;
  /* The chosen blocks' ranges, the last cut to what is needed (lent, their neighbours in
   * the pool change, so the ranges are taken first). */
  uint64_t need = size;
  for (ab_tnode_t *m = n; need; m = ab_tree_prev(m)) {
    blk_t *b = AB_CONTAINER_OF(m, blk_t, node);
    uint64_t take = b->bytes < need ? b->bytes : need;
    sb->runs[sb->nruns++] = (run_t){b->seg, b->addr, take};
    need -= take;
  }
  ab_status st = serve_sblock(t, sb, size, bytes, out);
  if (st != AB_OK) {
    drop_segment(t, sb);
    return st;
  }
  t->stitches++;
  t->stitched_bytes += size;
  return AB_OK;
}

/* Rule 3's second step: the smallest idle sBlock of the stream holding size whose chunks are
 * all free; NULL when there is none or it passes reuse_limit times size. */
static seg_t *reusable_sblock(stitching_t *t, uint64_t size, unsigned stream) {
  pool_key_t k = {stream, size, 0};
  for (ab_tnode_t *n = ab_tree_lower_bound(&t->spool, &k, key_sblock); n; n = ab_tree_next(n)) {
    seg_t *sb = AB_CONTAINER_OF(n, seg_t, snode);
    if (sb->stream != stream) return NULL;
    if (!chunks_free(sb)) continue;
    return (double)sb->va_bytes > (double)size * t->reuse_limit ? NULL : sb;
  }
  return NULL;
}

/* ---- the strategy -------------------------------------------------------------------- */

static ab_status stitching_create(ab_device_t *dev, const char *conf, ab_strategy_t **out, ab_diag_t *diag) {
  ab_kvlist_t opts;
  uint64_t frag_limit = 512ULL << 20, level = 0;
  double reuse = 10.0;
  AB_TRY(ab_kv_parse("-c", conf, ':', &opts, diag));
  AB_TRY(ab_kv_get_size(&opts, "frag_limit", &frag_limit, diag));
  AB_TRY(ab_kv_get_double(&opts, "reuse_limit", 1.0, 1e9, &reuse, diag));
  AB_TRY(ab_kv_get_u64(&opts, "defrag_level", 0, 2, &level, diag));
  AB_TRY(ab_kv_finish(&opts, "frag_limit, reuse_limit, defrag_level", diag));
  stitching_t *t = calloc(1, sizeof *t);
  if (t == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  t->base.ops = &ab_stitching_ops;
  t->base.dev = dev;
  ab_tree_init(&t->small, cmp_blk);
  ab_tree_init(&t->ppool, cmp_blk);
  ab_tree_init(&t->spool, cmp_sblock);
  ab_tree_init(&t->segs, cmp_seg);
  ab_map_init(&t->live);
  t->frag_limit = frag_limit;
  t->reuse_limit = reuse;
  t->defrag_level = level;
  *out = &t->base;
  return AB_OK;
}

static ab_status alloc_small(stitching_t *t, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  uint64_t size = bytes < MIN_BLOCK_BYTES ? MIN_BLOCK_BYTES : round_up(bytes, MIN_BLOCK_BYTES);
  blk_t *b = best_fit(&t->small, stream, size);
  if (b == NULL) {
    seg_t *seg;
    ab_status st = new_segment(t, SEG_SMALL, SMALL_SEGMENT_BYTES, stream, &seg);
    if (st == AB_ERR_OOM) {
      t->base.stats.num_alloc_retries++;
      AB_TRY(release_cached(t, false));
      st = new_segment(t, SEG_SMALL, SMALL_SEGMENT_BYTES, stream, &seg);
    }
    if (st != AB_OK) return st;
    b = seg->first;
  }
  return hand_out(t, b, size, bytes, out);
}

/* A stitch at attempt `at` of rule 3 (0: before new memory, 1: after it failed, 2: after the
 * release failed too), when the request and defrag_level allow it; AB_ERR_OOM otherwise. */
static ab_status stitch_at(stitching_t *t, uint64_t at, uint64_t size, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  if (size < t->frag_limit || at < t->defrag_level) return AB_ERR_OOM;
  return stitch(t, size, bytes, stream, out);
}

/* New memory for the request: a pBlock (rule 2), its first block handed out. */
static ab_status new_pblock(stitching_t *t, uint64_t size, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  seg_t *seg;
  AB_TRY(new_segment(t, SEG_PRIMITIVE, size < MIN_LARGE_ALLOC_BYTES ? LARGE_BUFFER_BYTES : size, stream, &seg));
  return hand_out(t, seg->first, size, bytes, out);
}

/* Rule 3, in GMLake's order. */
static ab_status alloc_large(stitching_t *t, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  uint64_t size = round_up(bytes, AB_GRANULE_BYTES);
  blk_t *b = best_fit(&t->ppool, stream, size);
  if (b) return hand_out(t, b, size, bytes, out);
  seg_t *sb = reusable_sblock(t, size, stream);
  if (sb) {
    ab_status st = serve_sblock(t, sb, size, bytes, out);
    if (st == AB_OK) t->reuses++;
    return st;
  }
  ab_status st = stitch_at(t, 0, size, bytes, stream, out);
  if (st == AB_ERR_OOM) st = new_pblock(t, size, bytes, stream, out);
  if (st == AB_ERR_OOM) st = stitch_at(t, 1, size, bytes, stream, out);
  if (st == AB_ERR_OOM) {
    t->base.stats.num_alloc_retries++;
    AB_TRY(release_cached(t, false));
    st = new_pblock(t, size, bytes, stream, out);
  }
  if (st == AB_ERR_OOM) st = stitch_at(t, 2, size, bytes, stream, out);
  return st;
}

static ab_status stitching_alloc(ab_strategy_t *s, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  stitching_t *t = (stitching_t *)s;
  if (bytes >> 56) return AB_ERR_OOM; /* would wrap in the rounding */
  return bytes <= SMALL_SIZE_BYTES ? alloc_small(t, bytes, stream, out) : alloc_large(t, bytes, stream, out);
}

static ab_status stitching_free(ab_strategy_t *s, ab_dptr_t p, uint64_t bytes, unsigned stream) {
  stitching_t *t = (stitching_t *)s;
  uint64_t v;
  blk_t *b = ab_map_get(&t->live, p, &v) ? (blk_t *)(uintptr_t)v : NULL;
  if (b == NULL || b->requested != bytes || b->seg->stream != stream)
    return ab_diag_set(&s->dev->diag, AB_ERR_INVALID, "stitching: free of 0x%llx (%llu bytes) on stream %u, which it did not hand out",
                       (unsigned long long)p, (unsigned long long)bytes, stream);
  ab_map_take(&t->live, p, NULL);
  ab_gauge_sub(&s->stats.requested_bytes, (int64_t)bytes);
  ab_gauge_sub(&s->stats.allocated_bytes, (int64_t)b->bytes);
  if (b->seg->kind == SEG_STITCHED) return free_sblock(t, b->seg);
  b->state = B_FREE;
  set_free(t, merge(t, b));
  return AB_OK;
}

static ab_status stitching_empty_cache(ab_strategy_t *s) { return release_cached((stitching_t *)s, true); }

static const char *pool_name(const seg_t *seg) {
  return seg->kind == SEG_SMALL ? "small" : seg->kind == SEG_PRIMITIVE ? "pblock" : "sblock";
}

static ab_status stitching_walk(ab_strategy_t *s, ab_segment_fn fn, void *ctx) {
  stitching_t *t = (stitching_t *)s;
  ab_block_info_t *blocks = NULL;
  size_t cap = 0;
  for (ab_tnode_t *n = ab_tree_first(&t->segs); n; n = ab_tree_next(n)) {
    seg_t *seg = AB_CONTAINER_OF(n, seg_t, node);
    if (seg->mapped == 0) continue; /* an idle sBlock, or a pBlock all lent: no memory of its own */
    size_t nb = 0;
    for (blk_t *b = seg->first; b; b = b->next) {
      if (nb == cap) {
        cap = cap ? 2 * cap : 64;
        ab_block_info_t *nbk = realloc(blocks, cap * sizeof *nbk);
        if (nbk == NULL) return free(blocks), AB_ERR_INTERNAL;
        blocks = nbk;
      }
      ab_block_state_t state = b->state == B_ALLOCATED ? AB_BLOCK_ALLOCATED : b->state == B_FREE ? AB_BLOCK_FREE : AB_BLOCK_UNMAPPED;
      blocks[nb++] = (ab_block_info_t){b->addr, b->bytes, b->state == B_ALLOCATED ? b->requested : 0, state};
    }
    ab_segment_info_t info = {seg->base, seg->kind == SEG_SMALL ? seg->va_bytes : seg->mapped, seg->stream,
                              pool_name(seg), seg->kind != SEG_SMALL, blocks, nb, 0};
    if (fn(ctx, &info)) break;
  }
  free(blocks);
  return AB_OK;
}

/* The walk adds up to the statistics; every free block is in its pool; no two FREE or
 * UNMAPPED neighbours are left unmerged. */
static ab_status stitching_check(ab_strategy_t *s, ab_diag_t *diag) {
  stitching_t *t = (stitching_t *)s;
  ab_walk_sums_t sum;
  AB_TRY(ab_strategy_check_walk(s, &sum, diag));
  const ab_stats_t *st = &s->stats;
  if (sum.live_blocks != t->live.n || (uint64_t)st->allocated_bytes.current != sum.allocated ||
      (uint64_t)st->requested_bytes.current != sum.requested || (uint64_t)st->reserved_bytes.current != sum.reserved)
    return ab_diag_set(diag, AB_ERR_INTERNAL,
                       "stitching: stats say %lld requested, %lld allocated, %lld reserved; the walk finds %llu live "
                       "blocks of %llu, %llu requested, %llu allocated, %llu reserved",
                       (long long)st->requested_bytes.current, (long long)st->allocated_bytes.current,
                       (long long)st->reserved_bytes.current, (unsigned long long)sum.live_blocks,
                       (unsigned long long)t->live.n, (unsigned long long)sum.requested,
                       (unsigned long long)sum.allocated, (unsigned long long)sum.reserved);
  size_t free_blocks = 0;
  for (ab_tnode_t *n = ab_tree_first(&t->segs); n; n = ab_tree_next(n)) {
    seg_t *seg = AB_CONTAINER_OF(n, seg_t, node);
    for (blk_t *b = seg->first; b; b = b->next) {
      if (b->state == B_FREE) free_blocks++;
      if (b->next && b->state != B_ALLOCATED && b->next->state == b->state)
        return ab_diag_set(diag, AB_ERR_INTERNAL, "stitching: neighbours at 0x%llx and 0x%llx are not merged",
                           (unsigned long long)b->addr, (unsigned long long)b->next->addr);
      if (seg->kind != SEG_SMALL && (b->bytes % AB_GRANULE_BYTES || (b->addr - seg->base) % AB_GRANULE_BYTES))
        return ab_diag_set(diag, AB_ERR_INTERNAL, "stitching: block 0x%llx of %llu bytes is off the granules",
                           (unsigned long long)b->addr, (unsigned long long)b->bytes);
    }
  }
  if (free_blocks != t->small.size + t->ppool.size)
    return ab_diag_set(diag, AB_ERR_INTERNAL, "stitching: %zu free blocks, %zu in the pools", free_blocks,
                       t->small.size + t->ppool.size);
  /* What the pBlocks lent is what the sBlocks in use have mapped; an idle sBlock has none. */
  uint64_t lent = 0, borrowed = 0;
  size_t idle = 0;
  for (ab_tnode_t *n = ab_tree_first(&t->segs); n; n = ab_tree_next(n)) {
    seg_t *seg = AB_CONTAINER_OF(n, seg_t, node);
    if (seg->kind == SEG_PRIMITIVE) lent += seg->lent;
    if (seg->kind == SEG_STITCHED) borrowed += seg->mapped, idle += seg->idle;
    if (seg->idle && (seg->mapped || seg->first->next || seg->first->state != B_UNMAPPED))
      return ab_diag_set(diag, AB_ERR_INTERNAL, "stitching: idle sBlock 0x%llx holds memory", (unsigned long long)seg->base);
  }
  if (lent != borrowed || idle != t->spool.size)
    return ab_diag_set(diag, AB_ERR_INTERNAL, "stitching: pBlocks lent %llu bytes, sBlocks hold %llu; %zu idle sBlocks, %zu in their set",
                       (unsigned long long)lent, (unsigned long long)borrowed, idle, t->spool.size);
  if (ab_tree_check(&t->small) || ab_tree_check(&t->ppool) || ab_tree_check(&t->spool) || ab_tree_check(&t->segs))
    return ab_diag_set(diag, AB_ERR_INTERNAL, "stitching: a pool's tree is broken");
  return AB_OK;
}

static void stitching_memory_stats(ab_strategy_t *s, ab_stat_fn fn, void *ctx) {
  stitching_t *t = (stitching_t *)s;
  fn(ctx, "stitch.count", (int64_t)t->stitches);
  fn(ctx, "stitch.bytes", (int64_t)t->stitched_bytes);
  fn(ctx, "stitch.reuses", (int64_t)t->reuses);
}

static void stitching_destroy(ab_strategy_t *s) {
  stitching_t *t = (stitching_t *)s;
  ab_tnode_t *n;
  while ((n = ab_tree_first(&t->segs)) != NULL) {
    seg_t *seg = AB_CONTAINER_OF(n, seg_t, node);
    if (seg->kind != SEG_SMALL)
      for (blk_t *b = seg->first; b; b = b->next)
        if (b->state != B_UNMAPPED)
          for (uint64_t u = 0; u < b->bytes; u += AB_GRANULE_BYTES) ab_device_unmap(s->dev, b->addr + u, AB_GRANULE_BYTES);
    drop_segment(t, seg);
  }
  ab_map_free(&t->live);
  free(t);
}

const ab_strategy_ops_t ab_stitching_ops = {
    .name = "stitching",
    .create = stitching_create,
    .destroy = stitching_destroy,
    .alloc = stitching_alloc,
    .free = stitching_free,
    .empty_cache = stitching_empty_cache,
    .walk = stitching_walk,
    .check = stitching_check,
    .memory_stats = stitching_memory_stats,
};
