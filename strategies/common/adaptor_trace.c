/* adaptor_trace.c: the recording adaptor (adaptor_trace.h). */
#include "strategies/common/adaptor_trace.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/base/hashmap.h"

/* Grows an array to hold one more element; false when host memory ran out. */
static bool grow(void **items, size_t *cap, size_t n, size_t size) {
  if (n < *cap) return true;
  size_t want = *cap ? *cap * 2 : 1024;
  void *grown = realloc(*items, want * size);
  if (grown == NULL) return false;
  *items = grown;
  *cap = want;
  return true;
}

/* ---- the adaptor ----------------------------------------------------------------------- */

/* Live user blocks: requested bytes, with PENDING set between free_request and
 * free_complete. Device ranges: bytes, the stream that asked for them, MAPPED for a map. */
#define PENDING (1ULL << 63)
#define MAPPED (1ULL << 55)
#define STREAM_SHIFT 56
#define BYTES_MASK (MAPPED - 1)

/* An open "allocations on stream go to pool" context, as the pool calls open and close them. */
typedef struct route_s {
  unsigned pool, stream;
  bool all_streams;
} route_t;

typedef struct trace_adaptor_s {
  ab_strategy_t base;
  ab_strategy_t *up;   /* owned */
  ab_trace_log_t *log; /* not owned */
  ab_map_t live;       /* user address -> requested bytes | PENDING */
  ab_map_t held;       /* device address -> bytes | stream << STREAM_SHIFT | MAPPED */
  ab_map_t pools;      /* user address -> its private pool, for those not in the default */
  route_t *routes;     /* open contexts, oldest first (Note [Private pools]) */
  size_t nroutes, caproutes;
  unsigned calling;    /* the pool of the alloc in progress, for the segments it makes */
  bool out_of_memory;  /* the capture ran out of host memory */
} trace_adaptor_t;

static const ab_strategy_ops_t trace_ops;

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void record(trace_adaptor_t *t, ab_trace_action_t action, unsigned stream, unsigned pool, uint64_t addr,
                   uint64_t bytes) {
  ab_trace_log_t *log = t->log;
  if (log->captured || log->failed) return;
  if (!grow((void **)&log->recs, &log->cap, log->n, sizeof *log->recs)) {
    log->failed = true;
    return;
  }
  log->recs[log->n++] = (ab_trace_rec_t){(uint8_t)action, (uint16_t)stream, pool, addr, bytes, now_us()};
}

/* The pool an allocation on stream goes to: the latest open context that takes it. */
static unsigned routed(const trace_adaptor_t *t, unsigned stream) {
  for (size_t i = t->nroutes; i-- > 0;)
    if (t->routes[i].all_streams || t->routes[i].stream == stream) return t->routes[i].pool;
  return 0;
}

/* The pool of a live user block (and forgets it when it goes). */
static unsigned pool_of(trace_adaptor_t *t, ab_dptr_t p, bool gone) {
  uint64_t pool = 0;
  if (gone ? ab_map_take(&t->pools, p, &pool) : ab_map_get(&t->pools, p, &pool)) return (unsigned)pool;
  return 0;
}

static void remember(trace_adaptor_t *t, ab_map_t *m, uint64_t key, uint64_t val) {
  if (ab_map_put(m, key, val) != AB_OK) t->log->failed = true;
}

/* The wrapped strategy's segment decisions, recorded where they happen inside its calls. */
static void observe(void *ctx, ab_trace_action_t action, ab_dptr_t addr, uint64_t bytes, unsigned stream) {
  trace_adaptor_t *t = ctx;
  switch (action) {
    case AB_TR_SEGMENT_ALLOC:
    case AB_TR_SEGMENT_MAP:
      remember(t, &t->held, addr, (bytes & BYTES_MASK) | (uint64_t)stream << STREAM_SHIFT |
                                      (action == AB_TR_SEGMENT_MAP ? MAPPED : 0));
      break;
    case AB_TR_SEGMENT_FREE:
      ab_map_take(&t->held, addr, NULL);
      break;
    case AB_TR_SEGMENT_UNMAP:
      /* An unmap covers whole maps. Unmaps are rare, so a scan (started again after each
       * removal, which moves keys) is fine. */
      for (bool again = true; again;) {
        again = false;
        for (size_t i = 0; i < t->held.cap && !again; i++) {
          uint64_t k = t->held.slots[i].key;
          if (k >= addr && k - addr < bytes && (t->held.slots[i].val & MAPPED)) again = ab_map_take(&t->held, k, NULL);
        }
      }
      break;
    default:
      return;
  }
  record(t, action, stream, t->calling, addr, bytes);
}

static void mirror_cap(trace_adaptor_t *t);

ab_status ab_adaptor_trace_create(ab_strategy_t *upstream, ab_trace_log_t *log, ab_strategy_t **out) {
  *out = NULL;
  ab_device_t *dev = upstream->dev;
  if (upstream->observe != NULL)
    return ab_diag_set(&dev->diag, AB_ERR_INVALID, "another recorder already listens to %s", upstream->ops->name);
  trace_adaptor_t *t = calloc(1, sizeof *t);
  if (t == NULL) return AB_ERR_INTERNAL;
  t->base.ops = &trace_ops;
  t->base.dev = dev;
  t->base.stats = upstream->stats;
  t->up = upstream;
  mirror_cap(t);
  t->log = log;
  ab_map_init(&t->live);
  ab_map_init(&t->held);
  ab_map_init(&t->pools);
  ab_strategy_observe(upstream, observe, t);
  *out = &t->base;
  return AB_OK;
}

bool ab_adaptor_trace_is(const ab_strategy_t *s) { return s != NULL && s->ops == &trace_ops; }

static void trace_destroy(ab_strategy_t *s) {
  trace_adaptor_t *t = (trace_adaptor_t *)s;
  ab_strategy_observe(t->up, NULL, NULL); /* what destroy frees is no part of the trace */
  ab_strategy_destroy(t->up);
  ab_map_free(&t->live);
  ab_map_free(&t->held);
  ab_map_free(&t->pools);
  free(t->routes);
  free(t);
}

static ab_status trace_alloc(ab_strategy_t *s, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  trace_adaptor_t *t = (trace_adaptor_t *)s;
  unsigned pool = t->calling = routed(t, stream);
  ab_status st = ab_strategy_alloc(t->up, bytes, stream, out);
  t->calling = 0;
  if (st == AB_OK) {
    remember(t, &t->live, *out, bytes);
    if (pool) remember(t, &t->pools, *out, pool);
    record(t, AB_TR_ALLOC, stream, pool, *out, bytes);
  } else if (st == AB_ERR_OOM) {
    uint64_t free_bytes = 0, total = 0;
    ab_device_mem_info(s->dev, &free_bytes, &total);
    record(t, AB_TR_OOM, stream, pool, free_bytes, bytes);
  }
  return st;
}

static ab_status trace_free(ab_strategy_t *s, ab_dptr_t p, uint64_t bytes, unsigned stream) {
  trace_adaptor_t *t = (trace_adaptor_t *)s;
  unsigned pool = pool_of(t, p, true);
  record(t, AB_TR_FREE_REQUESTED, stream, pool, p, bytes);
  record(t, AB_TR_FREE_COMPLETED, stream, pool, p, bytes);
  ab_map_take(&t->live, p, NULL);
  return ab_strategy_free(t->up, p, bytes, stream);
}

static ab_status trace_free_request(ab_strategy_t *s, ab_dptr_t p, uint64_t bytes, unsigned stream) {
  trace_adaptor_t *t = (trace_adaptor_t *)s;
  record(t, AB_TR_FREE_REQUESTED, stream, pool_of(t, p, false), p, bytes);
  remember(t, &t->live, p, bytes | PENDING);
  return ab_strategy_free_request(t->up, p, bytes, stream);
}

static ab_status trace_free_complete(ab_strategy_t *s, ab_dptr_t p, uint64_t bytes, unsigned stream) {
  trace_adaptor_t *t = (trace_adaptor_t *)s;
  record(t, AB_TR_FREE_COMPLETED, stream, pool_of(t, p, true), p, bytes);
  ab_map_take(&t->live, p, NULL);
  return ab_strategy_free_complete(t->up, p, bytes, stream);
}

/* PyTorch records no empty_cache, only the segments it frees; allocbench's CSV trace says it,
 * since a reader cannot tell those frees from an allocator's own (trace_builder.c). */
static ab_status trace_empty_cache(ab_strategy_t *s) {
  trace_adaptor_t *t = (trace_adaptor_t *)s;
  record(t, AB_TR_EMPTY_CACHE, 0, 0, 0, 0);
  return ab_strategy_empty_cache(t->up);
}

static ab_status trace_synchronize(ab_strategy_t *s) { return ab_strategy_synchronize(((trace_adaptor_t *)s)->up); }

static ab_status trace_walk(ab_strategy_t *s, ab_segment_fn fn, void *ctx) {
  return ab_strategy_walk(((trace_adaptor_t *)s)->up, fn, ctx);
}

static ab_status trace_check(ab_strategy_t *s, ab_diag_t *diag) {
  return ab_strategy_check(((trace_adaptor_t *)s)->up, diag);
}

/* The wrapped strategy's cap and its window, which the engine reads off the strategy it runs
 * (an OOM is explained against the cap; a run's window of caps): the adaptor's are copies,
 * kept current with its statistics. */
static void mirror_cap(trace_adaptor_t *t) {
  t->base.memory_cap = t->up->memory_cap;
  t->base.cap_window = t->up->cap_window;
  t->base.cap_lo = t->up->cap_lo;
  t->base.cap_hi = t->up->cap_hi;
  t->base.order_only = t->up->order_only;
}

static void trace_refresh_stats(ab_strategy_t *s) {
  ab_strategy_stats(((trace_adaptor_t *)s)->up, &s->stats);
  mirror_cap((trace_adaptor_t *)s);
}

static void trace_memory_stats(ab_strategy_t *s, ab_stat_fn fn, void *ctx) {
  ab_strategy_t *up = ((trace_adaptor_t *)s)->up;
  if (up->ops->memory_stats) up->ops->memory_stats(up, fn, ctx);
}

static void trace_describe_oom(ab_strategy_t *s, uint64_t bytes, unsigned stream, char *buf, size_t size) {
  ab_strategy_describe_oom(((trace_adaptor_t *)s)->up, bytes, stream, buf, size);
}

/* The pool calls pass through; the adaptor follows the contexts they open and close, as the
 * caching strategy does, to say which pool each allocation went to. */
static ab_status trace_pool(ab_strategy_t *s, ab_pool_op_t op, unsigned pool, unsigned stream, unsigned flags) {
  trace_adaptor_t *t = (trace_adaptor_t *)s;
  AB_TRY(ab_strategy_pool(t->up, op, pool, stream, flags));
  if (op == AB_POOL_BEGIN) {
    if (!grow((void **)&t->routes, &t->caproutes, t->nroutes, sizeof *t->routes)) return AB_ERR_INTERNAL;
    t->routes[t->nroutes++] = (route_t){pool, stream, (flags & AB_POOL_ALL_STREAMS) != 0};
  } else if (op == AB_POOL_END) {
    for (size_t i = 0; i < t->nroutes; i++)
      if (t->routes[i].pool == pool) {
        memmove(&t->routes[i], &t->routes[i + 1], (t->nroutes - i - 1) * sizeof *t->routes);
        t->nroutes--;
        break;
      }
  }
  return AB_OK;
}

static ab_status trace_plan(ab_strategy_t *s, const ab_lifetime_t *lt, size_t n, ab_diag_t *diag) {
  return ab_strategy_plan(((trace_adaptor_t *)s)->up, lt, n, diag);
}

static const ab_strategy_ops_t trace_ops = {
    .name = "trace",
    .destroy = trace_destroy,
    .alloc = trace_alloc,
    .free = trace_free,
    .free_request = trace_free_request,
    .free_complete = trace_free_complete,
    .empty_cache = trace_empty_cache,
    .synchronize = trace_synchronize,
    .walk = trace_walk,
    .check = trace_check,
    .refresh_stats = trace_refresh_stats,
    .memory_stats = trace_memory_stats,
    .describe_oom = trace_describe_oom,
    .plan = trace_plan,
    .pool = trace_pool,
};

/* ---- the capture ------------------------------------------------------------------------ */

static bool add_segment(ab_trace_log_t *log, ab_dptr_t base, uint64_t bytes, unsigned stream, bool small,
                        bool expandable, unsigned pool) {
  if (!grow((void **)&log->segs, &log->capsegs, log->nsegs, sizeof *log->segs)) return false;
  log->segs[log->nsegs++] = (ab_trace_seg_t){base, bytes, (uint16_t)stream, small, expandable, pool, log->nblocks, 0};
  return true;
}

static bool add_block(trace_adaptor_t *t, ab_block_info_t b) {
  ab_trace_log_t *log = t->log;
  if (!grow((void **)&log->blocks, &log->capblocks, log->nblocks, sizeof *log->blocks)) return false;
  uint64_t v;
  if (b.requested == 0 && (b.state == AB_BLOCK_ALLOCATED || b.state == AB_BLOCK_PENDING_FREE) &&
      ab_map_get(&t->live, b.addr, &v))
    b.requested = v & ~PENDING;
  log->blocks[log->nblocks++] = b;
  log->segs[log->nsegs - 1].nblocks++;
  return true;
}

/* One walked segment: each run of mapped blocks becomes a segment of the map, as PyTorch's
 * snapshot shows an expandable segment's mapped ranges. */
static int take_segment(void *ctx, const ab_segment_info_t *seg) {
  trace_adaptor_t *t = ctx;
  bool small = seg->pool != NULL && strcmp(seg->pool, "small") == 0;
  bool open = false;
  for (size_t i = 0; i < seg->nblocks; i++) {
    const ab_block_info_t *b = &seg->blocks[i];
    if (b->state == AB_BLOCK_UNMAPPED) {
      open = false;
      continue;
    }
    if ((!open && !add_segment(t->log, b->addr, 0, seg->stream, small, seg->expandable, seg->private_pool)) ||
        !add_block(t, *b)) {
      t->out_of_memory = true;
      return 1;
    }
    open = true;
    t->log->segs[t->log->nsegs - 1].bytes += b->bytes;
  }
  return 0;
}

static int by_address(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* The sorted keys of a map, malloc'd; NULL when host memory ran out. */
static uint64_t *sorted_keys(const ab_map_t *m) {
  uint64_t *keys = malloc((m->n + 1) * sizeof *keys);
  if (keys == NULL) return NULL;
  size_t n = 0;
  for (size_t i = 0; i < m->cap; i++)
    if (m->slots[i].key) keys[n++] = m->slots[i].key;
  qsort(keys, n, sizeof *keys, by_address);
  return keys;
}

/* Without a segment walk: the device ranges the adaptor saw, tiled by the live blocks. */
static bool capture_seen(trace_adaptor_t *t) {
  uint64_t *ranges = sorted_keys(&t->held), *blocks = sorted_keys(&t->live);
  bool ok = ranges != NULL && blocks != NULL;
  size_t j = 0;
  for (size_t i = 0; ok && i < t->held.n; i++) {
    uint64_t v = 0, base = ranges[i];
    ab_map_get(&t->held, base, &v);
    uint64_t bytes = v & BYTES_MASK, end = base + bytes, at = base;
    ok = add_segment(t->log, base, bytes, (unsigned)(v >> STREAM_SHIFT), false, (v & MAPPED) != 0, 0);
    while (j < t->live.n && blocks[j] < base) j++;
    for (; ok && j < t->live.n && blocks[j] < end; j++) {
      uint64_t u = 0;
      ab_map_get(&t->live, blocks[j], &u);
      uint64_t size = u & ~PENDING;
      if (blocks[j] < at || size > end - blocks[j]) continue; /* not inside this range */
      if (blocks[j] > at) ok = add_block(t, (ab_block_info_t){at, blocks[j] - at, 0, AB_BLOCK_FREE});
      if (ok) ok = add_block(t, (ab_block_info_t){blocks[j], size, size,
                                                  (u & PENDING) ? AB_BLOCK_PENDING_FREE : AB_BLOCK_ALLOCATED});
      at = blocks[j] + size;
    }
    if (ok && at < end) ok = add_block(t, (ab_block_info_t){at, end - at, 0, AB_BLOCK_FREE});
  }
  free(ranges);
  free(blocks);
  return ok;
}

ab_status ab_adaptor_trace_capture(ab_strategy_t *s) {
  if (!ab_adaptor_trace_is(s)) return AB_ERR_INVALID;
  trace_adaptor_t *t = (trace_adaptor_t *)s;
  ab_trace_log_t *log = t->log;
  if (log->captured) return AB_OK;
  log->captured = true;
  log->nsegs = log->nblocks = 0;
  bool ok;
  if (t->up->ops->walk) {
    ok = t->up->ops->walk(t->up, take_segment, t) == AB_OK && !t->out_of_memory;
  } else {
    ok = capture_seen(t);
  }
  if (!ok) log->failed = true;
  return ok ? AB_OK : AB_ERR_INTERNAL;
}
