/* caching_internal.h: what the two files of the caching strategy share: its structs and
 * PyTorch's constants, for caching.c (the decisions) and caching_inspect.c (looking inside:
 * the segment walk, the invariant checks, memory_stats, the OOM message). No other file
 * includes it; the rest of allocbench sees caching.h.
 *
 * The names are file-local in spirit (block_t, caching_t, ...): the two files are one module.
 * caching.c owns every field; caching_inspect.c only reads them, except the scratch list.
 * Not thread-safe, as the strategy.
 */
#ifndef AB_CACHING_INTERNAL_H
#define AB_CACHING_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/base/hashmap.h"
#include "kernels/base/tree.h"
#include "kernels/base/units.h"
#include "strategies/caching/caching.h"
#include "strategies/protocol/caching_conf.h"

#define MIN_BLOCK 512ULL                   /* kMinBlockSize */
#define SMALL_SIZE (1ULL << 20)            /* kSmallSize: largest small-pool request */
#define SMALL_BUFFER (2ULL << 20)          /* kSmallBuffer: small segment, small page */
#define MIN_LARGE_ALLOC (10ULL << 20)      /* kMinLargeAlloc */
#define ROUND_LARGE (2ULL << 20)           /* kRoundLarge */
#define ONE_EB (1ULL << 60)                /* requests this big fail before the allocator */
#define SLAB_BLOCKS 1024

/* The free lists: pools[2 n + SMALL] and pools[2 n + LARGE] belong to private pool n (n >= 1;
 * Note [Private pools] in strategy.h), pools[SMALL] and pools[LARGE] to the default pool. */
enum { SMALL, LARGE };
#define KIND(pool) ((pool) & 1)     /* SMALL or LARGE: the statistics' pool of a free list */
#define OWNER(pool) ((pool) >> 1)   /* the private pool of a free list; 0: the default pool */

/* A block struct's state. */
enum {
  B_SPARE,     /* unused, in the spare list */
  B_FREE,      /* cached and mapped, in its pool's free set */
  B_ALLOCATED, /* handed out */
  B_PENDING,   /* freed by the user, still in use by other streams (active) */
  B_UNMAPPED,  /* expandable address space without memory, in the unmapped set */
};

typedef struct xseg_s {
  ab_dptr_t base;   /* the reserved address range */
  uint64_t bytes;
  uint64_t page;    /* bytes of one mapped page */
  uint64_t *mapped; /* one bit per page */
  unsigned stream;
  int pool;
} xseg_t;

typedef struct block_s {
  ab_tnode_t node;             /* in its bin of the free set (B_FREE) or the unmapped set (B_UNMAPPED) */
  ab_dptr_t ptr;               /* ptr, size and stream beside the node: a search down a set reads */
  uint64_t size;               /* one cache line of each block it passes */
  uint16_t stream;
  uint16_t pool;               /* its free lists: an index of caching_t.pools */
  uint8_t state;
  uint8_t deferred;            /* B_PENDING: freed across streams during a capture (DEFER_*) */
  uint16_t bin;                /* B_FREE: the bin it was inserted in, bin_of(size) then */
  struct block_s *prev, *next; /* neighbours in the segment, by address; next: spare list */
  xseg_t *xs;                  /* the expandable segment, or NULL */
  uint64_t requested;          /* bytes asked for last; a cached block keeps its last request,
                                * as PyTorch's Block::requested_size (its snapshot shows it) */
  union {
    int64_t gc_base;           /* B_FREE: the pool's get_free_block count when inserted (GC age) */
    uint64_t freed_at;         /* B_PENDING: caching_t.free_requests when its free was asked */
  };
} block_t;

/* A pending block freed during a capture waits for the capture to end (Note [Captures]). */
enum { DEFER_NONE, DEFER_WAITING, DEFER_READY };

#define BLOCK(n) AB_CONTAINER_OF(n, block_t, node)

/* Note [Free bins]
 * A pool's free mapped blocks are ordered as PyTorch orders them (BlockComparatorSize: stream,
 * size, address; v2.11.0 c10/cuda/CUDACachingAllocator.cpp), and best fit is the first block
 * not before (stream, request size, address 0). Kept as one ordered tree, every search and
 * every insertion went down the whole pool. Here each stream has its own row of size bins
 * (FREE_SUB bins per power of two of the size in 512-byte units, one bin per size below
 * FREE_SUB units, as TLSF's two-level segregated lists), each bin an ordered tree by (size,
 * address), and a bitmap of the bins that hold a block. Bins partition the sizes in order, so
 * the first fitting block is the lower bound in the request's own bin or else the first block
 * of the next bin the bitmap names: the same block as the one tree gives, found in a tree of
 * the few blocks of one bin. Walking the bins in order, stream by stream, is the same order. */
#define FREE_SUB 16u                                /* bins per power of two */
#define FREE_SUB_LOG 4u
#define FREE_BINS (FREE_SUB + 51u * FREE_SUB)       /* sizes up to 2^64 B: 2^55 units */
#define FREE_WORDS ((FREE_BINS + 63u) / 64u)

typedef struct fbins_s {
  uint64_t summary;           /* bit w: words[w] is not 0 */
  uint64_t words[FREE_WORDS]; /* bit i: bins[i] holds a block */
  ab_tree_t bins[FREE_BINS];  /* free blocks of one stream by (size, address) */
} fbins_t;

/* The bin of a size: monotone in the size. With fl the power of two of u (at least
 * FREE_SUB_LOG), u >> (fl - FREE_SUB_LOG) is u's top FREE_SUB_LOG + 1 bits, from FREE_SUB to
 * 2 FREE_SUB - 1 (or u itself below FREE_SUB, where fl is FREE_SUB_LOG): FREE_SUB bins per
 * power of two, counted on from one power to the next, without a branch. */
static inline unsigned bin_of(uint64_t size) {
  uint64_t u = size >> 9;
  unsigned fl = ab_log2_floor(u | FREE_SUB);
  return ((fl - FREE_SUB_LOG) << FREE_SUB_LOG) + (unsigned)(u >> (fl - FREE_SUB_LOG));
}

typedef struct pool_s {
  fbins_t **free;     /* the free mapped blocks by stream (Note [Free bins]); NULL: none yet */
  unsigned nstreams;  /* entries of free */
  size_t nfree;       /* free mapped blocks, all streams */
  ab_tree_t unmapped; /* unmapped expandable blocks by (stream, address) */
  int64_t gc_calls;   /* get_free_block calls while GC is on */
} pool_t;

/* A private pool, PyTorch's PrivatePool. */
typedef struct ppool_s {
  bool exists;          /* created and not yet erased */
  bool freeable;        /* no user left: its whole free segments go at the next release */
  bool use_on_oom;      /* searched before the default pool releases (MemPool(use_on_oom=True)) */
  bool no_split;        /* never splits a block (MemPool(no_split=True)) */
  int64_t use_count;    /* users: MemPools, graphs, open contexts */
  int64_t malloc_count; /* its segments and mapped ranges not given back (cudaMalloc_count) */
} ppool_t;

/* An open context of beginAllocateToPool (captures_underway). */
typedef struct capture_s {
  unsigned pool;
  unsigned stream;
  bool all_streams;
} capture_t;

/* ---- statistics: torch.cuda.memory_stats(), PyTorch's DeviceStats ---------------------- */

/* Kept by caching.c (inc and dec at each decision), read by caching_inspect.c. */

#define STAT_ARRAYS(X)                                                                        \
  X(allocation) X(segment) X(active) X(inactive_split) X(allocated_bytes) X(reserved_bytes) \
  X(active_bytes) X(inactive_split_bytes) X(requested_bytes)
#define STAT_SINGLES(X) X(oversize_allocations) X(oversize_segments)
#define STAT_COUNTERS(X) X(num_alloc_retries) X(num_ooms) X(num_sync_all_streams) X(num_device_alloc) X(num_device_free)

typedef struct tstat_s {
  int64_t current, peak, freed; /* allocated (the sum of increases) is current + freed */
} tstat_t;

typedef struct tstats_s {
#define ARRAY_FIELD(name) tstat_t name[3]; /* all, small_pool, large_pool */
  STAT_ARRAYS(ARRAY_FIELD)
#undef ARRAY_FIELD
#define SINGLE_FIELD(name) tstat_t name;
  STAT_SINGLES(SINGLE_FIELD)
#undef SINGLE_FIELD
#define COUNTER_FIELD(name) uint64_t name;
  STAT_COUNTERS(COUNTER_FIELD)
#undef COUNTER_FIELD
  int64_t max_split_size; /* at creation; -1: unlimited */
} tstats_t;

typedef struct caching_s {
  ab_strategy_t base;
  ab_caching_conf_t conf;
  pool_t *pools;             /* free lists: 2 per pool, default first */
  size_t npools;             /* entries of pools: 2 (npriv + 1) */
  ppool_t *priv;             /* private pools by number; priv[0] unused */
  unsigned npriv;            /* highest pool number with an entry */
  capture_t *captures;       /* captures_underway, oldest first */
  size_t ncaptures, capcaptures;
  size_t nready;             /* DEFER_READY blocks: freed once no capture is open */
  ab_map_t live;             /* address -> block, for allocated and pending blocks */
  ab_map_t early;            /* Note [Early completion]: early_key(address, size) -> count */
  ab_map_t segs;             /* cudaMalloc'd segments: base -> bytes */
  xseg_t **xsegs;            /* expandable segments */
  size_t nxsegs, capxsegs;
  size_t npending;           /* blocks between free_request and free_complete */
  uint64_t free_requests;    /* free_request calls so far: the order pending blocks complete in */
  uint64_t total;            /* total_allocated_memory: segment and mapped bytes */
  uint64_t cap;              /* allowed_memory_maximum when has_cap */
  bool has_cap;
  bool settings_changed;     /* oversize statistics follow max_split_size at each event */
  tstats_t st;
  block_t *spare;            /* unused block structs, linked by next */
  size_t nspare;
  block_t **slabs;
  size_t nslabs, capslabs;
  block_t **scratch;         /* block lists of release_blocks, the walk and the checks */
  size_t capscratch;
} caching_t;

static inline caching_t *of(ab_strategy_t *s) { return (caching_t *)(void *)s; }

/* ---- what both files use, inline: the decisions call it on every request ------------------ */

/* Grows the scratch list to hold n blocks. AB_ERR_INTERNAL: out of host memory. */
static inline ab_status ab_caching_scratch_need(caching_t *c, size_t n) {
  if (n <= c->capscratch) return AB_OK;
  size_t cap = c->capscratch ? c->capscratch : 256;
  while (cap < n) cap *= 2;
  block_t **grown = realloc(c->scratch, cap * sizeof *grown);
  if (grown == NULL) return AB_ERR_INTERNAL;
  c->scratch = grown;
  c->capscratch = cap;
  return AB_OK;
}

/* ---- the free sets' walks (Note [Free bins]) ---------------------------------------------- */

/* The first bin at or after i that holds a block, or -1. */
static inline int bin_from(const fbins_t *fb, unsigned i) {
  if (i >= FREE_BINS) return -1;
  unsigned w = i / 64;
  uint64_t bits = fb->words[w] & (~0ULL << (i % 64));
  if (bits) return (int)(w * 64 + (unsigned)__builtin_ctzll(bits));
  uint64_t rest = fb->summary & (~0ULL << (w + 1)); /* w + 1 < 64 */
  if (rest == 0) return -1;
  w = (unsigned)__builtin_ctzll(rest);
  return (int)(w * 64 + (unsigned)__builtin_ctzll(fb->words[w]));
}

/* The last bin at or before i that holds a block, or -1. */
static inline int bin_upto(const fbins_t *fb, int i) {
  if (i < 0) return -1;
  unsigned w = (unsigned)i / 64;
  uint64_t bits = fb->words[w] & (~0ULL >> (63 - (unsigned)i % 64));
  if (bits) return (int)(w * 64 + 63 - (unsigned)__builtin_clzll(bits));
  uint64_t rest = fb->summary & ((1ULL << w) - 1);
  if (rest == 0) return -1;
  w = 63 - (unsigned)__builtin_clzll(rest);
  return (int)(w * 64 + 63 - (unsigned)__builtin_clzll(fb->words[w]));
}

static inline fbins_t *bins_of(const pool_t *pl, unsigned stream) {
  return stream < pl->nstreams ? pl->free[stream] : NULL;
}

/* The first free block of a stream at or after bin i, or NULL. */
static inline block_t *free_first_from(const fbins_t *fb, unsigned i) {
  int j = fb ? bin_from(fb, i) : -1;
  return j < 0 ? NULL : BLOCK(ab_tree_first(&fb->bins[j]));
}

/* The next free block of b's stream in the free set's order, or NULL. */
static inline block_t *free_next(const pool_t *pl, const block_t *b) {
  ab_tnode_t *n = ab_tree_next(&b->node);
  return n ? BLOCK(n) : free_first_from(pl->free[b->stream], b->bin + 1u);
}

/* The free block before b of b's stream, or NULL. */
static inline block_t *free_prev(const pool_t *pl, const block_t *b) {
  ab_tnode_t *n = ab_tree_prev(&b->node);
  if (n) return BLOCK(n);
  const fbins_t *fb = pl->free[b->stream];
  int j = bin_upto(fb, (int)b->bin - 1);
  return j < 0 ? NULL : BLOCK(ab_tree_last(&fb->bins[j]));
}

/* The pool's free blocks in the free set's order, every stream: the first from stream s on,
 * and the one after b. */
static inline block_t *free_first_all(const pool_t *pl, unsigned s) {
  for (; s < pl->nstreams; s++) {
    block_t *b = free_first_from(pl->free[s], 0);
    if (b) return b;
  }
  return NULL;
}

static inline block_t *free_next_all(const pool_t *pl, const block_t *b) {
  block_t *n = free_next(pl, b);
  return n ? n : free_first_all(pl, b->stream + 1u);
}

/* Sizes: a request rounded (round_size), and the segment it would get (allocation_size),
 * as caching_conf.h computes them for any reader of PyTorch's rules. */
static inline uint64_t round_size(const caching_t *c, uint64_t size) { return ab_caching_round_size(&c->conf, size); }
static inline uint64_t allocation_size(const caching_t *c, uint64_t size) {
  return ab_caching_allocation_size(&c->conf, size);
}

/* caching_inspect.c: the vtable's walk, check, memory_stats, describe_oom and device_bytes
 * (strategy.h). */
ab_status ab_caching_walk(ab_strategy_t *s, ab_segment_fn fn, void *ctx);
ab_status ab_caching_check(ab_strategy_t *s, ab_diag_t *diag);
void ab_caching_memory_stats(ab_strategy_t *s, ab_stat_fn fn, void *ctx);
void ab_caching_describe_oom(ab_strategy_t *s, uint64_t bytes, unsigned stream, char *buf, size_t size);
uint64_t ab_caching_device_bytes(ab_strategy_t *s, uint64_t bytes, unsigned stream);

#endif
