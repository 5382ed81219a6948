/* pluggable.c: a library made for PyTorch's CUDAPluggableAllocator, run unchanged as a
 * strategy (pluggable.h). Source: torch/csrc/cuda/CUDAPluggableAllocator.cpp.
 *
 * Policy: the library's own. allocbench carries the calls as PyTorch does and watches what
 * the library does with the device:
 *   1. alloc is the library's alloc(size, device, stream), free its free(ptr, size, device,
 *      stream). The library's CUDA calls land on the run's device through the shim (Note
 *      [The CUDA shim], pluggable_shim.h), and each device allocation, free, map and unmap is
 *      this strategy's segment decision (pluggable_card.c): reserved bytes, device calls, the
 *      OOM report and the segment map are the library's.
 *   2. Requested and allocated bytes are the sizes asked for: the library's rounding is hidden
 *      from PyTorch too. A request during which a CUDA call ran out of memory and that still
 *      succeeded counts as a retry.
 *   3. A NULL from alloc is an OOM when the library ran out of memory one way or another: a
 *      CUDA call ran out during it, the device has no room for the request, the library
 *      holds memory it is not handing out (its own pool is spent), or it was given a cap
 *      (memory_fraction below 1). A NULL otherwise, a pointer outside the memory the library
 *      holds, or a CUDA call it got wrong or that the card does not provide fails the run
 *      with one line naming the library.
 *   4. Hooks named with -c: init(device_count) once loaded; memory_fraction(F, device) when a
 *      cap is given (per_process_memory_fraction:F, PyTorch's setMemoryFraction); reset() is
 *      empty_cache (PyTorch's emptyCache); record_stream(ptr, stream), see 5.
 *   5. A free in two halves (a block still used by another stream): with record_stream the
 *      library is told and gets the free at the request, as PyTorch frees at once and leaves
 *      the waiting to the library; the stream told is the allocation's, since events do not
 *      say which other stream used the block. Without it the free waits for the completion,
 *      when the memory is no longer in use.
 * Each run loads the library afresh (pluggable_library.h) and destroy unloads it, after
 * freeing what is live through it, its reset, and giving back whatever it still holds.
 */
#include "strategies/pluggable/pluggable.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/hashmap.h"
#include "kernels/base/units.h"
#include "strategies/pluggable/pluggable_card.h"
#include "strategies/pluggable/pluggable_library.h"

#define NAME_BYTES 128
/* Live entries keep the stream in the top byte: bytes stay below 2^56. */
#define STREAM_SHIFT 56
#define BYTES_MASK ((1ULL << STREAM_SHIFT) - 1)

typedef struct pluggable_s {
  ab_strategy_t base;
  ab_card_t card;
  ab_plugin_t lib;
  ab_shim_use_fn use;
  char *path;                 /* the library as given */
  char alloc_name[NAME_BYTES];
  ab_map_t live;              /* address -> bytes | stream << STREAM_SHIFT */
  ab_map_t freed_early;       /* address -> frees given at a request whose completion is to come */
  bool capped;                /* told a memory fraction below 1: a NULL may be its cap */
} pluggable_t;

/* ---- calls into the library --------------------------------------------------------------- */

/* call: which of the library's functions runs (ab_plugin_calling), for the supervisor to
 * name if the library takes its process down. */
static const ab_shim_card_t *enter(pluggable_t *p, unsigned stream, ab_plugin_call_t call) {
  ab_card_begin(&p->card, stream);
  ab_plugin_calling(call);
  return p->use(&p->card.table);
}

/* Ends a call into the library; a call it got wrong is the operation's error, in the
 * device's diag (strategy.h). */
static ab_status leave(pluggable_t *p, const ab_shim_card_t *prev) {
  p->use(prev);
  ab_plugin_calling(AB_PLUGIN_BETWEEN);
  if (!p->card.failed) return AB_OK;
  p->base.dev->diag = p->card.error;
  return AB_ERR_INVALID;
}

static int ordinal(const pluggable_t *p) { return p->card.table.ordinal; }

/* ---- creation -------------------------------------------------------------------------------- */

static bool identifier(const char *s) {
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_')) return false;
  return true;
}

/* "PATH" or "PATH:ALLOC_FN:FREE_FN" into path (malloc'd) and the two names. */
static ab_status parse_argument(const char *argument, char **path, char *alloc, char *free_name, ab_diag_t *diag) {
  const char *c1 = strchr(argument, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
  size_t path_len = c1 ? (size_t)(c1 - argument) : strlen(argument);
  bool ok = path_len > 0 && (c1 == NULL || (c2 && strchr(c2 + 1, ':') == NULL));
  snprintf(alloc, NAME_BYTES, "my_malloc");
  snprintf(free_name, NAME_BYTES, "my_free");
  if (ok && c1) {
    size_t n = (size_t)(c2 - c1 - 1);
    ok = n < NAME_BYTES && strlen(c2 + 1) < NAME_BYTES;
    if (ok) {
      memcpy(alloc, c1 + 1, n);
      alloc[n] = '\0';
      snprintf(free_name, NAME_BYTES, "%s", c2 + 1);
      ok = identifier(alloc) && identifier(free_name);
    }
  }
  if (!ok)
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "-s 'pluggable:%s': expected pluggable:PATH or pluggable:PATH:ALLOC_FN:FREE_FN (a path without "
                       "colons, function names)",
                       argument);
  *path = strndup(argument, path_len);
  return *path ? AB_OK : ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
}

typedef struct hooks_s {
  char init[NAME_BYTES], reset[NAME_BYTES], memory_fraction[NAME_BYTES], record_stream[NAME_BYTES];
  double fraction; /* per_process_memory_fraction; 0: none given */
} hooks_t;

static ab_status hook_name(ab_kvlist_t *opts, const char *key, char *out, ab_diag_t *diag) {
  ab_kv_t *kv = ab_kv_get(opts, key);
  if (kv == NULL) return AB_OK;
  AB_TRY(ab_kv_value(opts, kv, out, NAME_BYTES, diag));
  if (!identifier(out)) return ab_kv_errorf(opts, kv, diag, "%s: expected the name of a function of the library", key);
  return AB_OK;
}

static ab_status parse_conf(const char *conf, hooks_t *h, ab_diag_t *diag) {
  memset(h, 0, sizeof *h);
  ab_kvlist_t opts;
  AB_TRY(ab_kv_parse("-c", conf, ':', &opts, diag));
  AB_TRY(hook_name(&opts, "init", h->init, diag));
  AB_TRY(hook_name(&opts, "reset", h->reset, diag));
  AB_TRY(hook_name(&opts, "memory_fraction", h->memory_fraction, diag));
  AB_TRY(hook_name(&opts, "record_stream", h->record_stream, diag));
  ab_kv_t *cap = ab_kv_get(&opts, "per_process_memory_fraction");
  AB_TRY(ab_kv_get_double(&opts, "per_process_memory_fraction", 0, 1, &h->fraction, diag));
  if (cap && h->fraction <= 0) return ab_kv_errorf(&opts, cap, diag, "per_process_memory_fraction: must be more than 0");
  if (cap && !h->memory_fraction[0])
    return ab_kv_errorf(&opts, cap, diag,
                        "per_process_memory_fraction: the library takes a cap only through its memory_fraction hook "
                        "(-c memory_fraction:FN)");
  return ab_kv_finish(&opts, "init, reset, memory_fraction, record_stream, per_process_memory_fraction", diag);
}

static void pluggable_destroy(ab_strategy_t *s);

ab_status ab_pluggable_create(const char *argument, ab_device_t *dev, const char *conf, ab_strategy_t **out,
                              ab_diag_t *diag) {
  *out = NULL;
  char *path, alloc[NAME_BYTES], free_name[NAME_BYTES];
  hooks_t h;
  AB_TRY(parse_argument(argument, &path, alloc, free_name, diag));
  ab_status st = parse_conf(conf, &h, diag);
  pluggable_t *p = st == AB_OK ? calloc(1, sizeof *p) : NULL;
  if (p == NULL) {
    free(path);
    return st != AB_OK ? st : ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  p->base.ops = &ab_pluggable_ops;
  p->base.dev = dev;
  p->path = path;
  snprintf(p->alloc_name, sizeof p->alloc_name, "%s", alloc);
  ab_map_init(&p->live);
  ab_map_init(&p->freed_early);
  p->capped = h.fraction > 0 && h.fraction < 1;
  st = ab_card_init(&p->card, &p->base, p->path);
  if (st != AB_OK) *diag = p->card.error;
  if (st == AB_OK) st = ab_plugin_shim(&p->use, diag);
  if (st == AB_OK) {
    /* The library's constructors and hooks may call CUDA: the card is in use for them. */
    const ab_shim_card_t *prev = enter(p, 0, AB_PLUGIN_LOADING);
    ab_plugin_names_t names = {alloc, free_name, h.init[0] ? h.init : NULL, h.reset[0] ? h.reset : NULL,
                               h.memory_fraction[0] ? h.memory_fraction : NULL, h.record_stream[0] ? h.record_stream : NULL};
    st = ab_plugin_open(&p->lib, path, &names, dev->kind == AB_DEVICE_SIM, diag);
    ab_plugin_calling(AB_PLUGIN_INIT);
    if (st == AB_OK && p->lib.init) p->lib.init(ordinal(p) + 1);
    ab_plugin_calling(AB_PLUGIN_MEMORY_FRACTION);
    if (st == AB_OK && h.fraction > 0) p->lib.memory_fraction(h.fraction, ordinal(p));
    p->use(prev);
    ab_plugin_calling(AB_PLUGIN_BETWEEN);
    if (st == AB_OK && p->card.failed) st = ab_diag_set(diag, AB_ERR_INVALID, "%s", p->card.error.msg);
  }
  if (st != AB_OK) {
    pluggable_destroy(&p->base);
    return st;
  }
  *out = &p->base;
  return AB_OK;
}

/* ---- allocation -------------------------------------------------------------------------------- */

/* Policy 3: whether a NULL for a request of bytes is the library running out of memory. */
static bool ran_out(pluggable_t *p, uint64_t bytes) {
  const ab_stats_t *st = &p->base.stats;
  uint64_t room = 0, total = 0;
  return p->card.oom || p->capped || st->reserved_bytes.current > st->allocated_bytes.current ||
         (ab_device_mem_info(p->base.dev, &room, &total) == AB_OK && bytes > room);
}

static ab_status pluggable_alloc(ab_strategy_t *s, uint64_t bytes, unsigned stream, ab_dptr_t *out) {
  pluggable_t *p = (pluggable_t *)s;
  if (bytes > BYTES_MASK) return AB_ERR_OOM; /* no card has 64 PiB */
  void *handle = ab_card_stream(&p->card, stream);
  const ab_shim_card_t *prev = enter(p, stream, AB_PLUGIN_ALLOC);
  void *ptr = p->lib.alloc((ssize_t)bytes, ordinal(p), handle);
  AB_TRY(leave(p, prev));
  unsigned long long n = bytes;
  if (ptr == NULL) {
    if (ran_out(p, bytes)) return AB_ERR_OOM;
    return ab_diag_set(&s->dev->diag, AB_ERR_INVALID,
                       "pluggable: %s: %s(%llu) returned NULL without running out of memory (none of its CUDA calls "
                       "did, the device had room, it held none spare)",
                       p->path, p->alloc_name, n);
  }
  ab_dptr_t a = (ab_dptr_t)(uintptr_t)ptr;
  if (!ab_card_holds(&p->card, a, bytes))
    return ab_diag_set(&s->dev->diag, AB_ERR_INVALID,
                       "pluggable: %s: %s(%llu) returned 0x%llx, which is not inside device memory the library holds",
                       p->path, p->alloc_name, n, (unsigned long long)a);
  if (ab_map_get(&p->live, a, NULL))
    return ab_diag_set(&s->dev->diag, AB_ERR_INVALID, "pluggable: %s: %s(%llu) returned 0x%llx, which is live already",
                       p->path, p->alloc_name, n, (unsigned long long)a);
  if (ab_map_put(&p->live, a, (uint64_t)stream << STREAM_SHIFT | bytes) != AB_OK)
    return ab_diag_set(&s->dev->diag, AB_ERR_INTERNAL, "out of host memory");
  if (p->card.oom) s->stats.num_alloc_retries++;
  ab_gauge_add(&s->stats.requested_bytes, (int64_t)bytes);
  ab_gauge_add(&s->stats.allocated_bytes, (int64_t)bytes);
  *out = a;
  return AB_OK;
}

/* The library's free of a live block. */
static ab_status give_back(pluggable_t *p, ab_dptr_t a, uint64_t bytes, unsigned stream) {
  uint64_t v;
  if (!ab_map_get(&p->live, a, &v) || (v & BYTES_MASK) != bytes)
    return ab_diag_set(&p->base.dev->diag, AB_ERR_INVALID, "pluggable: free of 0x%llx (%llu bytes), not a live allocation of that size",
                       (unsigned long long)a, (unsigned long long)bytes);
  void *handle = ab_card_stream(&p->card, stream);
  const ab_shim_card_t *prev = enter(p, stream, AB_PLUGIN_FREE);
  p->lib.free((void *)(uintptr_t)a, (ssize_t)bytes, ordinal(p), handle);
  AB_TRY(leave(p, prev));
  ab_map_take(&p->live, a, NULL);
  ab_gauge_sub(&p->base.stats.requested_bytes, (int64_t)bytes);
  ab_gauge_sub(&p->base.stats.allocated_bytes, (int64_t)bytes);
  return AB_OK;
}

static ab_status pluggable_free(ab_strategy_t *s, ab_dptr_t a, uint64_t bytes, unsigned stream) {
  return give_back((pluggable_t *)s, a, bytes, stream);
}

/* Policy 5: with record_stream the free happens here, else at the completion. */
static ab_status pluggable_free_request(ab_strategy_t *s, ab_dptr_t a, uint64_t bytes, unsigned stream) {
  pluggable_t *p = (pluggable_t *)s;
  if (p->lib.record_stream == NULL) return AB_OK;
  if (!ab_map_get(&p->live, a, NULL)) return give_back(p, a, bytes, stream); /* says what is wrong */
  void *handle = ab_card_stream(&p->card, stream);
  const ab_shim_card_t *prev = enter(p, stream, AB_PLUGIN_RECORD_STREAM);
  p->lib.record_stream((void *)(uintptr_t)a, handle);
  AB_TRY(leave(p, prev));
  AB_TRY(give_back(p, a, bytes, stream));
  uint64_t early = 0;
  ab_map_get(&p->freed_early, a, &early);
  if (ab_map_put(&p->freed_early, a, early + 1) != AB_OK)
    return ab_diag_set(&s->dev->diag, AB_ERR_INTERNAL, "out of host memory");
  return AB_OK;
}

/* The library may have handed the address out again since its early free: the completion
 * is of that free, not of the new block. */
static ab_status pluggable_free_complete(ab_strategy_t *s, ab_dptr_t a, uint64_t bytes, unsigned stream) {
  pluggable_t *p = (pluggable_t *)s;
  uint64_t early = 0;
  if (!ab_map_get(&p->freed_early, a, &early)) return give_back(p, a, bytes, stream);
  if (early > 1) ab_map_put(&p->freed_early, a, early - 1);
  else ab_map_take(&p->freed_early, a, NULL);
  return AB_OK;
}

static ab_status pluggable_empty_cache(ab_strategy_t *s) {
  pluggable_t *p = (pluggable_t *)s;
  if (p->lib.reset == NULL) return AB_OK;
  const ab_shim_card_t *prev = enter(p, 0, AB_PLUGIN_RESET);
  p->lib.reset();
  ab_status st = leave(p, prev);
  ab_card_account(&p->card);
  return st;
}

static ab_status pluggable_synchronize(ab_strategy_t *s) {
  ab_status st = ab_device_synchronize(s->dev);
  ab_card_account(&((pluggable_t *)s)->card);
  return st;
}

static void pluggable_refresh_stats(ab_strategy_t *s) { ab_card_account(&((pluggable_t *)s)->card); }

/* ---- the segment walk and the checks ------------------------------------------------------------ */

static int by_address(const void *a, const void *b) {
  ab_dptr_t x = ((const ab_card_block_t *)a)->addr, y = ((const ab_card_block_t *)b)->addr;
  return (x > y) - (x < y);
}

/* The live blocks in address order (free the array); NULL when host memory runs out. */
static ab_card_block_t *live_blocks(const pluggable_t *p, uint64_t *sum) {
  ab_card_block_t *b = malloc((p->live.n + 1) * sizeof *b);
  if (b == NULL) return NULL;
  size_t n = 0;
  *sum = 0;
  for (size_t i = 0; i < p->live.cap; i++)
    if (p->live.slots[i].key) {
      b[n] = (ab_card_block_t){p->live.slots[i].key, p->live.slots[i].val & BYTES_MASK};
      *sum += b[n++].bytes;
    }
  qsort(b, n, sizeof *b, by_address);
  return b;
}

static ab_status pluggable_walk(ab_strategy_t *s, ab_segment_fn fn, void *ctx) {
  pluggable_t *p = (pluggable_t *)s;
  uint64_t sum;
  ab_card_block_t *blocks = live_blocks(p, &sum);
  if (blocks == NULL) return AB_ERR_INTERNAL;
  ab_status st = ab_card_walk(&p->card, blocks, p->live.n, fn, ctx);
  free(blocks);
  return st;
}

/* The library's blocks lie in memory it holds and do not overlap; the statistics are the
 * sums over them and over what the card holds. */
static ab_status check_blocks(pluggable_t *p, const ab_card_block_t *b, size_t n, uint64_t sum, ab_diag_t *diag) {
  for (size_t i = 0; i < n; i++) {
    if (!ab_card_holds(&p->card, b[i].addr, b[i].bytes))
      return ab_diag_set(diag, AB_ERR_INTERNAL, "pluggable: block 0x%llx (%llu bytes) lies outside the memory the library holds",
                         (unsigned long long)b[i].addr, (unsigned long long)b[i].bytes);
    if (i && b[i - 1].addr + b[i - 1].bytes > b[i].addr)
      return ab_diag_set(diag, AB_ERR_INTERNAL, "pluggable: blocks 0x%llx (%llu bytes) and 0x%llx overlap",
                         (unsigned long long)b[i - 1].addr, (unsigned long long)b[i - 1].bytes,
                         (unsigned long long)b[i].addr);
  }
  const ab_stats_t *st = &p->base.stats;
  if ((uint64_t)st->requested_bytes.current != sum || (uint64_t)st->allocated_bytes.current != sum)
    return ab_diag_set(diag, AB_ERR_INTERNAL, "pluggable: stats say %lld requested, %lld allocated; the live blocks sum to %llu",
                       (long long)st->requested_bytes.current, (long long)st->allocated_bytes.current,
                       (unsigned long long)sum);
  return AB_OK;
}

static ab_status pluggable_check(ab_strategy_t *s, ab_diag_t *diag) {
  pluggable_t *p = (pluggable_t *)s;
  uint64_t sum;
  ab_card_block_t *blocks = live_blocks(p, &sum);
  if (blocks == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  ab_status st = check_blocks(p, blocks, p->live.n, sum, diag);
  free(blocks);
  AB_TRY(st);
  ab_walk_sums_t walked;
  AB_TRY(ab_strategy_check_walk(s, &walked, diag));
  const ab_card_t *c = &p->card;
  uint64_t pool = c->pool_bytes, peak;
  if (c->pool_used) ab_device_pool_reserved(s->dev, &pool, &peak);
  const ab_stats_t *stats = &s->stats;
  if (walked.allocated != sum || walked.reserved != c->own_bytes + c->async_bytes)
    return ab_diag_set(diag, AB_ERR_INTERNAL, "pluggable: the walk holds %llu bytes of blocks in %llu bytes; the library has %llu "
                       "live in %llu", (unsigned long long)walked.allocated, (unsigned long long)walked.reserved,
                       (unsigned long long)sum, (unsigned long long)(c->own_bytes + c->async_bytes));
  if ((uint64_t)stats->reserved_bytes.current != c->own_bytes + pool || pool < c->async_bytes)
    return ab_diag_set(diag, AB_ERR_INTERNAL,
                       "pluggable: stats say %lld reserved; the library holds %llu bytes and the pool %llu (%llu of them live)",
                       (long long)stats->reserved_bytes.current, (unsigned long long)c->own_bytes,
                       (unsigned long long)pool, (unsigned long long)c->async_bytes);
  if (stats->num_device_alloc - stats->num_device_free != c->held_ranges)
    return ab_diag_set(diag, AB_ERR_INTERNAL, "pluggable: %llu device allocations not freed, %llu held",
                       (unsigned long long)(stats->num_device_alloc - stats->num_device_free),
                       (unsigned long long)c->held_ranges);
  return AB_OK;
}

/* ---- the end ------------------------------------------------------------------------------------ */

static void pluggable_destroy(ab_strategy_t *s) {
  pluggable_t *p = (pluggable_t *)s;
  if (p->use) {
    const ab_shim_card_t *prev = enter(p, 0, AB_PLUGIN_FREE);
    if (p->lib.handle) {
      for (size_t i = 0; i < p->live.cap; i++)
        if (p->live.slots[i].key) {
          uint64_t v = p->live.slots[i].val;
          unsigned stream = (unsigned)(v >> STREAM_SHIFT);
          p->card.stream = stream;
          ab_plugin_calling(AB_PLUGIN_FREE); /* each free a call of its own, for the watch's deadline */
          p->lib.free((void *)(uintptr_t)p->live.slots[i].key, (ssize_t)(v & BYTES_MASK), ordinal(p), ab_card_stream(&p->card, stream));
        }
      ab_plugin_calling(AB_PLUGIN_RESET);
      if (p->lib.reset) p->lib.reset();
    }
    ab_plugin_close(&p->lib); /* its destructors may call CUDA too */
    p->use(prev);
    ab_plugin_calling(AB_PLUGIN_BETWEEN); /* the library's threads may outlive it */
  }
  ab_card_destroy(&p->card);
  ab_map_free(&p->live);
  ab_map_free(&p->freed_early);
  free(p->path);
  free(p);
}

const ab_strategy_ops_t ab_pluggable_ops = {
    .name = "pluggable",
    .destroy = pluggable_destroy,
    .alloc = pluggable_alloc,
    .free = pluggable_free,
    .free_request = pluggable_free_request,
    .free_complete = pluggable_free_complete,
    .empty_cache = pluggable_empty_cache,
    .synchronize = pluggable_synchronize,
    .walk = pluggable_walk,
    .check = pluggable_check,
    .refresh_stats = pluggable_refresh_stats,
};
