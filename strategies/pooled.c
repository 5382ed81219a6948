/* pooled.c: pooled buffers, the "keep your own tensor pool" advice.
 *
 * Policy:
 *   1. Size classes are geometric: between 2^e and 2^(e+1) there are classes_per_doubling
 *      evenly spaced classes (default 4, so a request wastes at most a quarter of its
 *      class), never closer than 512 bytes; the smallest class is min_class (512 B).
 *   2. A request takes a block of its class from that class's free list (last freed,
 *      first reused). Blocks are never split or merged, and never change class.
 *   3. An empty free list is refilled with one chunk from the device: max(chunk, class)
 *      bytes rounded down to a whole number of blocks (default chunk 2 MiB), all of it cut
 *      into blocks of the class. Chunks are carved first from the initial pool, if one was
 *      asked for (initial_pool, allocated once at creation), then from the device.
 *   4. Freed blocks go back to their class list; memory returns to the device only when a
 *      chunk is entirely free and the cache is emptied (empty_cache, or once before OOM:
 *      release every free device chunk, then retry).
 * Reserved bytes are the device chunks plus the initial pool; allocated bytes are the
 * class sizes of the live blocks, so reserved - allocated shows both the rounding to
 * classes and the blocks idle in other classes.
 */
#include "strategies/pooled.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/base/hashmap.h"
#include "kernels/base/tree.h"
#include "kernels/base/units.h"

#define MAX_CLASSES 512
/* Every block of a chunk has a free-list entry and a bitmap bit on the host, and a record of
 * its own in a walk (the OOM map, snapshots), so a chunk may hold at most this many blocks of
 * the smallest class: 4 Mi blocks, 128 MiB of 32-byte records at most in a walk. */
#define MAX_CHUNK_BLOCKS (1ULL << 22)

typedef struct chunk_s {
  ab_tnode_t node;   /* in pooled_t.chunks, by base */
  ab_dptr_t base;
  uint64_t bytes;
  uint64_t block;    /* block (class) size */
  uint64_t nblocks;
  uint64_t live;     /* blocks handed out */
  bool initial;      /* carved from the initial pool: never released on its own */
  unsigned stream;   /* the stream of the request that made it, for the segment observer */
  uint64_t *in_use;  /* bitmap of blocks handed out */
} chunk_t;

/* A block on a free list, with its chunk: taking it needs no search. */
typedef struct free_s {
  ab_dptr_t addr;
  chunk_t *chunk;
} free_t;

typedef struct class_s {
  free_t *free;      /* stack of free blocks */
  size_t nfree, cap;
} class_t;

typedef struct pooled_s {
  ab_strategy_t base;
  uint64_t per_doubling, min_class, chunk_bytes, initial_bytes;
  uint64_t sizes[MAX_CLASSES]; /* class sizes, increasing */
  size_t nclasses;
  class_t classes[MAX_CLASSES];
  ab_tree_t chunks;
  /* Each block handed out, its address to its chunk: a free finds the chunk in one probe of a
   * table of the live blocks. A search of the chunks by address held the replay of a random
   * snapshot of 1.45 M entries to 12.3 M events a second; with the table, 21.4 M. */
  ab_map_t live;
  ab_dptr_t initial_base;      /* the initial pool, or 0 */
  uint64_t initial_used;       /* bytes of it carved into chunks */
} pooled_t;

static int cmp_chunk(const ab_tnode_t *a, const ab_tnode_t *b) {
  ab_dptr_t x = AB_CONTAINER_OF(a, chunk_t, node)->base, y = AB_CONTAINER_OF(b, chunk_t, node)->base;
  return (x > y) - (x < y);
}

static int key_chunk(const void *key, const ab_tnode_t *n) {
  ab_dptr_t k = *(const ab_dptr_t *)key, b = AB_CONTAINER_OF(n, chunk_t, node)->base;
  return (k > b) - (k < b);
}

/* The class grid: min_class, then classes_per_doubling steps per power of two. */
static void build_classes(pooled_t *p) {
  uint64_t c = p->min_class;
  p->nclasses = 0;
  while (p->nclasses < MAX_CLASSES && c < (1ULL << 50)) {
    p->sizes[p->nclasses++] = c;
    uint64_t pow = 1;
    while (pow * 2 <= c) pow *= 2;
    uint64_t step = pow / p->per_doubling;
    if (step < 512) step = 512;
    c = (c / step + 1) * step;
  }
}

/* Index of the smallest class that holds bytes, or nclasses if none does. */
static size_t class_of(const pooled_t *p, uint64_t bytes) {
  size_t lo = 0, hi = p->nclasses;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (p->sizes[mid] < bytes)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static chunk_t *chunk_of(pooled_t *p, ab_dptr_t addr) {
  ab_tnode_t *n = ab_tree_floor(&p->chunks, &addr, key_chunk);
  if (n == NULL) return NULL;
  chunk_t *c = AB_CONTAINER_OF(n, chunk_t, node);
  return addr - c->base < c->bytes ? c : NULL;
}

static ab_status push_free(class_t *cl, ab_dptr_t addr, chunk_t *c) {
  if (cl->nfree == cl->cap) {
    size_t cap = cl->cap ? cl->cap * 2 : 64;
    free_t *grown = realloc(cl->free, cap * sizeof *grown);
    if (grown == NULL) return AB_ERR_INTERNAL;
    cl->free = grown;
    cl->cap = cap;
  }
  cl->free[cl->nfree++] = (free_t){addr, c};
  return AB_OK;
}

/* A chunk of blocks of this size: the chunk size rounded down to whole blocks, or one block. */
static uint64_t chunk_bytes_for(const pooled_t *p, uint64_t block) {
  return p->chunk_bytes > block ? p->chunk_bytes / block * block : block;
}

/* Adds one chunk of class ci for a request on stream, from the initial pool if it has room,
 * else the device. */
static ab_status add_chunk(pooled_t *p, size_t ci, unsigned stream) {
  uint64_t block = p->sizes[ci];
  uint64_t bytes = chunk_bytes_for(p, block);
  chunk_t *c = calloc(1, sizeof *c);
  if (c == NULL) return AB_ERR_INTERNAL;
  c->nblocks = bytes / block;
  c->in_use = calloc((c->nblocks + 63) / 64, sizeof *c->in_use);
  if (c->in_use == NULL) {
    free(c);
    return AB_ERR_INTERNAL;
  }
  ab_status st = AB_OK;
  /* Chunks carved from the initial pool keep blocks 512-byte aligned. */
  uint64_t offset = (p->initial_used + 511) & ~511ULL;
  if (p->initial_base && offset + bytes <= p->initial_bytes) {
    c->base = p->initial_base + offset;
    c->initial = true;
    p->initial_used = offset + bytes;
  } else {
    st = ab_device_malloc(p->base.dev, bytes, &c->base);
    if (st == AB_OK) {
      p->base.stats.num_device_alloc++;
      ab_gauge_add(&p->base.stats.reserved_bytes, (int64_t)bytes);
      ab_strategy_segment(&p->base, AB_TR_SEGMENT_ALLOC, c->base, bytes, stream);
    }
  }
  if (st != AB_OK) {
    free(c->in_use);
    free(c);
    return st;
  }
  c->bytes = bytes;
  c->block = block;
  c->stream = stream;
  ab_tree_insert(&p->chunks, &c->node);
  /* Pushed from the top so that the lowest block is handed out first. */
  for (uint64_t i = c->nblocks; i-- > 0;) AB_TRY(push_free(&p->classes[ci], c->base + i * block, c));
  return AB_OK;
}

static void drop_chunk(pooled_t *p, chunk_t *c) {
  ab_tree_remove(&p->chunks, &c->node);
  if (!c->initial) {
    ab_device_free(p->base.dev, c->base, c->bytes);
    ab_strategy_segment(&p->base, AB_TR_SEGMENT_FREE, c->base, c->bytes, c->stream);
    p->base.stats.num_device_free++;
    ab_gauge_sub(&p->base.stats.reserved_bytes, (int64_t)c->bytes);
  }
  free(c->in_use);
  free(c);
}

/* Releases every device chunk with no live block, and drops its blocks from the lists. */
static ab_status pooled_empty_cache(ab_strategy_t *s) {
  pooled_t *p = (pooled_t *)s;
  bool any = false;
  for (ab_tnode_t *n = ab_tree_first(&p->chunks); n && !any; n = ab_tree_next(n)) {
    chunk_t *c = AB_CONTAINER_OF(n, chunk_t, node);
    any = c->live == 0 && !c->initial;
  }
  if (!any) return AB_OK;
  for (size_t ci = 0; ci < p->nclasses; ci++) {
    class_t *cl = &p->classes[ci];
    size_t kept = 0;
    for (size_t i = 0; i < cl->nfree; i++) {
      const chunk_t *c = cl->free[i].chunk;
      if (c->live || c->initial) cl->free[kept++] = cl->free[i];
    }
    cl->nfree = kept;
  }
  for (ab_tnode_t *n = ab_tree_first(&p->chunks); n;) {
    ab_tnode_t *next = ab_tree_next(n);
    chunk_t *c = AB_CONTAINER_OF(n, chunk_t, node);
    if (c->live == 0 && !c->initial) drop_chunk(p, c);
    n = next;
  }
  return AB_OK;
}

static ab_status pooled_alloc(ab_strategy_t *s, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  pooled_t *p = (pooled_t *)s;
  size_t ci = class_of(p, bytes);
  if (ci == p->nclasses) return AB_ERR_OOM;
  class_t *cl = &p->classes[ci];
  if (cl->nfree == 0) {
    ab_status st = add_chunk(p, ci, stream);
    if (st == AB_ERR_OOM) {
      s->stats.num_alloc_retries++;
      AB_TRY(pooled_empty_cache(s));
      st = add_chunk(p, ci, stream);
    }
    if (st != AB_OK) return st;
  }
  ab_dptr_t addr = cl->free[cl->nfree - 1].addr;
  chunk_t *c = cl->free[cl->nfree - 1].chunk;
  if (ab_map_put(&p->live, addr, (uint64_t)(uintptr_t)c) != AB_OK) return AB_ERR_INTERNAL;
  cl->nfree--;
  uint64_t i = (addr - c->base) / c->block;
  c->in_use[i / 64] |= 1ULL << (i % 64);
  c->live++;
  ab_gauge_add(&s->stats.requested_bytes, (int64_t)bytes);
  ab_gauge_add(&s->stats.allocated_bytes, (int64_t)c->block);
  *out = addr;
  return AB_OK;
}

static ab_status pooled_free(ab_strategy_t *s, ab_dptr_t addr, uint64_t bytes, unsigned stream) {
  pooled_t *p = (pooled_t *)s;
  (void)stream;
  uint64_t owner = 0;
  chunk_t *c = ab_map_get(&p->live, addr, &owner) ? (chunk_t *)(uintptr_t)owner : NULL;
  size_t ci = class_of(p, bytes);
  uint64_t i = c ? (addr - c->base) / c->block : 0;
  if (c == NULL || ci == p->nclasses || c->block != p->sizes[ci] || (addr - c->base) % c->block ||
      !((c->in_use[i / 64] >> (i % 64)) & 1))
    return ab_diag_set(&s->dev->diag, AB_ERR_INVALID, "pooled: free of 0x%llx (%llu bytes), which is not a live block",
                       (unsigned long long)addr, (unsigned long long)bytes);
  AB_TRY(push_free(&p->classes[ci], addr, c));
  ab_map_take(&p->live, addr, NULL);
  c->in_use[i / 64] &= ~(1ULL << (i % 64));
  c->live--;
  ab_gauge_sub(&s->stats.requested_bytes, (int64_t)bytes);
  ab_gauge_sub(&s->stats.allocated_bytes, (int64_t)c->block);
  return AB_OK;
}

static ab_status pooled_walk(ab_strategy_t *s, ab_segment_fn fn, void *ctx) {
  pooled_t *p = (pooled_t *)s;
  ab_block_info_t *blocks = NULL;
  size_t cap = 0;
  ab_status st = AB_OK;
  for (ab_tnode_t *n = ab_tree_first(&p->chunks); n; n = ab_tree_next(n)) {
    chunk_t *c = AB_CONTAINER_OF(n, chunk_t, node);
    if (c->nblocks > cap) {
      ab_block_info_t *grown = realloc(blocks, c->nblocks * sizeof *grown);
      if (grown == NULL) {
        st = AB_ERR_INTERNAL;
        break;
      }
      blocks = grown;
      cap = c->nblocks;
    }
    for (uint64_t i = 0; i < c->nblocks; i++) {
      bool used = (c->in_use[i / 64] >> (i % 64)) & 1;
      blocks[i] = (ab_block_info_t){c->base + i * c->block, c->block, 0, used ? AB_BLOCK_ALLOCATED : AB_BLOCK_FREE};
    }
    ab_segment_info_t seg = {c->base, c->bytes, 0, c->initial ? "initial" : "chunk", false, blocks, c->nblocks, 0};
    if (fn(ctx, &seg)) break;
  }
  free(blocks);
  return st;
}

/* Whether addr comes before position (ci, i) of the free lists. */
static bool listed_before(const pooled_t *p, size_t ci, size_t i, ab_dptr_t addr) {
  for (size_t c = 0; c <= ci; c++)
    for (size_t k = 0; k < (c == ci ? i : p->classes[c].nfree); k++)
      if (p->classes[c].free[k].addr == addr) return true;
  return false;
}

static void flip(chunk_t *c, ab_dptr_t addr) {
  uint64_t k = (addr - c->base) / c->block;
  c->in_use[k / 64] ^= 1ULL << (k % 64);
}

/* Checks the free lists: each entry a block of a chunk of its class that is not handed out,
 * listed once, and every block not handed out listed. For the time of the check each entry
 * marks its block in its chunk's bitmap (a block marked already is handed out or listed
 * before), so that afterwards every bitmap must be full; then the marks are taken off. */
static ab_status check_free_lists(pooled_t *p, ab_diag_t *diag) {
  const char *broken = NULL;
  size_t ci = 0, i = 0;
  chunk_t *c = NULL;
  for (; ci < p->nclasses && !broken; ci++) {
    for (i = 0; i < p->classes[ci].nfree; i++) {
      ab_dptr_t addr = p->classes[ci].free[i].addr;
      if (c == NULL || addr - c->base >= c->bytes) c = chunk_of(p, addr); /* lists run through a chunk */
      uint64_t k = c ? (addr - c->base) / c->block : 0;
      broken = c == NULL                              ? "lies in no chunk"
               : c != p->classes[ci].free[i].chunk     ? "is listed with another chunk"
               : c->block != p->sizes[ci]              ? "lies in a chunk of another class"
               : (addr - c->base) % c->block           ? "is not at the start of a block"
               : !((c->in_use[k / 64] >> (k % 64)) & 1) ? NULL
               : listed_before(p, ci, i, addr)         ? "is listed twice"
                                                       : "is handed out";
      if (broken) break;
      flip(c, addr);
    }
  }
  ab_status st = AB_OK;
  if (broken) {
    ci--; /* the loop above stepped past the class */
    st = ab_diag_set(diag, AB_ERR_INTERNAL, "pooled: free block 0x%llx of class %llu %s",
                     (unsigned long long)p->classes[ci].free[i].addr, (unsigned long long)p->sizes[ci], broken);
  } else {
    ci = p->nclasses;
    i = 0;
    for (ab_tnode_t *n = ab_tree_first(&p->chunks); n && st == AB_OK; n = ab_tree_next(n)) {
      chunk_t *ch = AB_CONTAINER_OF(n, chunk_t, node);
      uint64_t marked = 0;
      for (uint64_t w = 0; w < (ch->nblocks + 63) / 64; w++) marked += (uint64_t)__builtin_popcountll(ch->in_use[w]);
      if (marked != ch->nblocks)
        st = ab_diag_set(diag, AB_ERR_INTERNAL,
                         "pooled: chunk 0x%llx: %llu of its blocks are neither handed out nor on the free lists",
                         (unsigned long long)ch->base, (unsigned long long)(ch->nblocks - marked));
    }
  }
  /* Off with the marks, up to where the walk stopped. */
  c = NULL;
  for (size_t cj = 0; cj <= ci && cj < p->nclasses; cj++)
    for (size_t k = 0; k < (cj == ci ? i : p->classes[cj].nfree); k++) {
      ab_dptr_t addr = p->classes[cj].free[k].addr;
      if (c == NULL || addr - c->base >= c->bytes) c = chunk_of(p, addr);
      flip(c, addr);
    }
  return st;
}

/* The chunk tree sound, its chunks apart and tiled by their blocks (the walk); each chunk a
 * whole number of blocks of one class, its live count that of its bitmap; the table of live
 * blocks those of the bitmaps, each with its chunk; the free lists
 * (check_free_lists); allocated bytes the class sizes of the live blocks (no fewer than
 * requested), reserved bytes the device chunks plus the initial pool, and each of those one
 * device allocation. */
static ab_status pooled_check(ab_strategy_t *s, ab_diag_t *diag) {
  pooled_t *p = (pooled_t *)s;
  if (ab_tree_check(&p->chunks)) return ab_diag_set(diag, AB_ERR_INTERNAL, "pooled: chunk tree is unsound");
  uint64_t reserved = p->initial_base ? p->initial_bytes : 0, device_chunks = 0, live_blocks = 0;
  for (ab_tnode_t *n = ab_tree_first(&p->chunks); n; n = ab_tree_next(n)) {
    chunk_t *c = AB_CONTAINER_OF(n, chunk_t, node);
    unsigned long long base = c->base;
    size_t ci = class_of(p, c->block);
    if (ci == p->nclasses || p->sizes[ci] != c->block || c->bytes != c->nblocks * c->block)
      return ab_diag_set(diag, AB_ERR_INTERNAL,
                         "pooled: chunk 0x%llx of %llu bytes is no whole number of blocks of a class", base,
                         (unsigned long long)c->bytes);
    if (c->initial && (c->base < p->initial_base || c->base + c->bytes > p->initial_base + p->initial_bytes))
      return ab_diag_set(diag, AB_ERR_INTERNAL,
                         "pooled: chunk 0x%llx is marked initial but lies outside the initial pool", base);
    uint64_t live = 0;
    for (uint64_t w = 0; w < (c->nblocks + 63) / 64; w++) live += (uint64_t)__builtin_popcountll(c->in_use[w]);
    if (live != c->live)
      return ab_diag_set(diag, AB_ERR_INTERNAL, "pooled: chunk 0x%llx counts %llu live blocks, has %llu", base,
                         (unsigned long long)c->live, (unsigned long long)live);
    if (!c->initial) reserved += c->bytes, device_chunks++;
    live_blocks += c->live;
  }
  /* The table of live blocks: each of them, at its chunk, and nothing else. */
  if (p->live.n != live_blocks)
    return ab_diag_set(diag, AB_ERR_INTERNAL, "pooled: %llu blocks handed out, %llu in the table of live blocks",
                       (unsigned long long)live_blocks, (unsigned long long)p->live.n);
  for (size_t k = 0; k < p->live.cap; k++) {
    ab_dptr_t addr = p->live.slots[k].key;
    chunk_t *c = addr ? chunk_of(p, addr) : NULL;
    uint64_t i = c ? (addr - c->base) / c->block : 0;
    if (addr && (c == NULL || (uint64_t)(uintptr_t)c != p->live.slots[k].val || !((c->in_use[i / 64] >> (i % 64)) & 1)))
      return ab_diag_set(diag, AB_ERR_INTERNAL, "pooled: 0x%llx, in the table of live blocks, is no live block of its chunk",
                         (unsigned long long)addr);
  }
  ab_walk_sums_t sum;
  AB_TRY(ab_strategy_check_walk(s, &sum, diag));
  if (s->stats.num_device_alloc - s->stats.num_device_free != device_chunks + (p->initial_base != 0))
    return ab_diag_set(diag, AB_ERR_INTERNAL, "pooled: %llu device allocations not freed, %llu held",
                       (unsigned long long)(s->stats.num_device_alloc - s->stats.num_device_free),
                       (unsigned long long)(device_chunks + (p->initial_base != 0)));
  AB_TRY(check_free_lists(p, diag));
  if (s->stats.requested_bytes.current > s->stats.allocated_bytes.current)
    return ab_diag_set(diag, AB_ERR_INTERNAL, "pooled: %lld bytes requested but only %lld allocated",
                       (long long)s->stats.requested_bytes.current, (long long)s->stats.allocated_bytes.current);
  if ((uint64_t)s->stats.allocated_bytes.current != sum.allocated ||
      (uint64_t)s->stats.reserved_bytes.current != reserved)
    return ab_diag_set(diag, AB_ERR_INTERNAL,
                       "pooled: stats say %lld allocated / %lld reserved, blocks sum to %llu / %llu",
                       (long long)s->stats.allocated_bytes.current, (long long)s->stats.reserved_bytes.current,
                       (unsigned long long)sum.allocated, (unsigned long long)reserved);
  return AB_OK;
}

static void pooled_destroy(ab_strategy_t *s) {
  pooled_t *p = (pooled_t *)s;
  ab_tnode_t *n;
  while ((n = ab_tree_first(&p->chunks)) != NULL) drop_chunk(p, AB_CONTAINER_OF(n, chunk_t, node));
  if (p->initial_base) ab_device_free(s->dev, p->initial_base, p->initial_bytes);
  for (size_t i = 0; i < p->nclasses; i++) free(p->classes[i].free);
  ab_map_free(&p->live);
  free(p);
}

static ab_status pooled_create(ab_device_t *dev, const char *conf, ab_strategy_t **out, ab_diag_t *diag) {
  ab_kvlist_t opts;
  AB_TRY(ab_kv_parse("-c", conf, ':', &opts, diag));
  uint64_t per_doubling = 4, min_class = 512, chunk = 2 * AB_MiB, initial = 0;
  AB_TRY(ab_kv_get_u64(&opts, "classes_per_doubling", 1, 64, &per_doubling, diag));
  AB_TRY(ab_kv_get_size(&opts, "min_class", &min_class, diag));
  AB_TRY(ab_kv_get_size(&opts, "chunk", &chunk, diag));
  AB_TRY(ab_kv_get_size(&opts, "initial_pool", &initial, diag));
  AB_TRY(ab_kv_finish(&opts, "classes_per_doubling, min_class, chunk, initial_pool", diag));
  if (!ab_is_pow2(per_doubling))
    return ab_kv_errorf(&opts, ab_kv_get(&opts, "classes_per_doubling"), diag,
                        "classes_per_doubling must be a power of two, got %llu", (unsigned long long)per_doubling);
  if (min_class < 512 || min_class % 512)
    return ab_kv_errorf(&opts, ab_kv_get(&opts, "min_class"), diag, "min_class must be a multiple of 512 bytes");
  if (chunk == 0)
    return ab_kv_errorf(&opts, ab_kv_get(&opts, "chunk"), diag, "chunk must be at least 1 byte");
  if (chunk / min_class > MAX_CHUNK_BLOCKS) {
    char c[32], m[32], most[32];
    return ab_kv_errorf(&opts, ab_kv_get(&opts, "chunk"), diag,
                        "chunk of %s holds more than %llu blocks of min_class %s: at most %s, or a larger min_class",
                        ab_format_bytes(chunk, c, sizeof c), (unsigned long long)MAX_CHUNK_BLOCKS,
                        ab_format_bytes(min_class, m, sizeof m),
                        ab_format_bytes(MAX_CHUNK_BLOCKS * min_class, most, sizeof most));
  }
  pooled_t *p = calloc(1, sizeof *p);
  if (p == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  p->base.ops = &ab_pooled_ops;
  p->base.dev = dev;
  p->per_doubling = per_doubling;
  p->min_class = min_class;
  p->chunk_bytes = chunk;
  p->initial_bytes = initial;
  build_classes(p);
  ab_tree_init(&p->chunks, cmp_chunk);
  ab_map_init(&p->live);
  /* Blocks are handed out in the order they were freed, and chunks found and released by
   * address order: nothing else of an address counts (Note [Variants followed], sim_follow.c). */
  p->base.order_only = true;
  if (initial) {
    ab_status st = ab_device_malloc(dev, initial, &p->initial_base);
    if (st != AB_OK) {
      free(p);
      if (st == AB_ERR_OOM) {
        char b[32];
        return ab_diag_set(diag, AB_ERR_OOM, "pooled: the initial pool of %s does not fit on %s",
                           ab_format_bytes(initial, b, sizeof b), dev->name);
      }
      return ab_diag_set(diag, st, "pooled: %s", dev->diag.msg);
    }
    p->base.stats.num_device_alloc++;
    ab_gauge_add(&p->base.stats.reserved_bytes, (int64_t)initial);
  }
  *out = &p->base;
  return AB_OK;
}

/* A new chunk of the request's class. */
static uint64_t pooled_device_bytes(ab_strategy_t *s, uint64_t bytes, unsigned stream) {
  const pooled_t *p = (const pooled_t *)s;
  (void)stream;
  size_t ci = class_of(p, bytes);
  return ci == p->nclasses ? bytes : chunk_bytes_for(p, p->sizes[ci]);
}

const ab_strategy_ops_t ab_pooled_ops = {
    .name = "pooled",
    .create = pooled_create,
    .destroy = pooled_destroy,
    .alloc = pooled_alloc,
    .free = pooled_free,
    .empty_cache = pooled_empty_cache,
    .walk = pooled_walk,
    .check = pooled_check,
    .device_bytes = pooled_device_bytes,
};
