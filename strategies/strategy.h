/* strategy.h: the allocator strategies under test, behind one vtable.
 * Layer: strategies (strategies/), above the device; the registry is registry.h.
 *
 * A strategy serves allocations from a device (device.h). Every instance starts with an
 * ab_strategy_t (ops, device, statistics), which the implementation embeds as its first
 * member. Callers go through the ab_strategy_* wrappers, which check arguments before
 * dispatch, so implementations may assume bytes > 0 and valid pointers.
 *
 * Contract for implementations:
 * - Never print, exit or read the environment; return a status and say why in the diag of
 *   create or, for later calls, the device's diag.
 * - alloc returns AB_ERR_OOM when it cannot serve the request (after whatever releasing and
 *   retrying the strategy does) and leaves the strategy usable: frees may follow and later
 *   allocations may succeed. ab_strategy_alloc counts the OOM in stats.num_ooms, once; the
 *   implementation does not.
 * - free is sized and stream-ordered: the caller passes the size it asked for and the
 *   stream of the allocation; memory freed on a stream may be reused by later allocations
 *   on that stream at once.
 * - A free may also come in two halves (free_request, then free_complete), as PyTorch
 *   records a block used by another stream: the user let go, the memory is reusable later.
 *   A strategy without the halves gets a plain free at free_complete.
 * - stats is kept current on every call (stats.h); destroy returns everything to the
 *   device, live allocations included.
 * Optional operations are NULL; the wrappers document what NULL means.
 *
 * Thread-safety: an instance belongs to one thread.
 */
#ifndef AB_STRATEGY_H
#define AB_STRATEGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/hashmap.h"
#include "kernels/base/status.h"
#include "kernels/device/device.h"
#include "strategies/common/stats.h"
#include "strategies/protocol/blocks.h"
#include "strategies/protocol/pools.h"
#include "strategies/protocol/trace_actions.h"

typedef struct ab_strategy_s ab_strategy_t;
typedef struct ab_strategy_ops_s ab_strategy_ops_t;

/* Told of each segment decision as the strategy makes it: action is one of the segment
 * actions of trace_actions.h, addr and bytes the segment or the mapped range, stream the
 * stream the segment serves. PyTorch's attachAllocatorTraceTracker. */
typedef void (*ab_segment_observer_fn)(void *ctx, ab_trace_action_t action, ab_dptr_t addr, uint64_t bytes,
                                       unsigned stream);

struct ab_strategy_s {
  const ab_strategy_ops_t *ops;
  ab_device_t *dev; /* not owned */
  ab_stats_t stats; /* kept current by the implementation */
  ab_segment_observer_fn observe; /* NULL: nobody listens (ab_strategy_observe) */
  void *observe_ctx;
  uint64_t memory_cap; /* PyTorch's cap (set_per_process_memory_fraction) the strategy keeps; 0: none */
  bool cap_window;  /* the strategy keeps cap_lo and cap_hi (Note [Cap window]) */
  uint64_t cap_lo;  /* the caps under which every decision so far would have gone as it went; */
  uint64_t cap_hi;  /* without cap_window, where take_cap is set: the caps it could take now */
  bool order_only;  /* every decision so far read device addresses only by comparing them with
                       each other and as keys of what is live at them, so that a placement that
                       orders the live ranges alike replays alike (Note [Variants followed],
                       sim_follow.c); false unless the implementation says so */
};

/* Note [Cap window]: a strategy with a memory cap (PyTorch's set_per_process_memory_fraction)
 * consults it at a few decisions: may reserved grow by this segment, is reserved above the
 * garbage-collection threshold. Each such decision is "cap >= X" for some X, so the caps
 * under which a run makes every decision as it made them form one interval, [cap_lo,
 * cap_hi], narrowed at each decision; every cap of it replays to the same run, event for
 * event. The cap map (bisect.h) walks the caps one interval at a time, so that it knows the
 * status at every cap exactly with one replay per interval. A strategy that takes a cap and
 * keeps the window opens it at create with its cap (ab_strategy_cap_window_open); one that
 * does not leaves cap_window false, and its caps are bisected instead. */
static inline void ab_strategy_cap_window_open(ab_strategy_t *s, uint64_t memory_cap) {
  s->memory_cap = memory_cap;
  s->cap_window = true;
  s->cap_lo = 0;
  s->cap_hi = UINT64_MAX;
}
/* Note [Taking a cap mid-run]: where the caps of [cap_lo, cap_hi] make every decision so far
 * as it went (Note [Cap window]; an uncapped run keeps the window too, when its strategy has
 * take_cap, with every decision holding), a run under any of them is this run's prefix, event
 * for event, and goes its own way only after it. So a copy of the run (a fork) can take
 * another cap of the window and go on, as if it had run under that cap from the start: the
 * strategy is then what one created with that cap would be after the same calls. A decision
 * the cap would have added (garbage collection runs only under a cap) leaves the window of an
 * uncapped run empty. take_cap returns false, changing nothing, for a cap outside the window. */
bool ab_strategy_take_cap(ab_strategy_t *s, uint64_t cap);

/* For implementations: a decision "cap >= at_least" was made, and came out `holds`. */
static inline void ab_strategy_cap_decided(ab_strategy_t *s, uint64_t at_least, bool holds) {
  if (holds && at_least > s->cap_lo) s->cap_lo = at_least;
  if (!holds && at_least - 1 < s->cap_hi) s->cap_hi = at_least - 1;
}

/* ---- the segment walk: what the strategy holds, for memory maps, exports and checks ---- */

typedef struct ab_segment_info_s {
  ab_dptr_t base;        /* first address */
  uint64_t bytes;        /* total size (mapped bytes for expandable segments) */
  unsigned stream;       /* the stream the segment serves */
  const char *pool;      /* "small", "large", a size class..., for display */
  bool expandable;       /* grows by mapping (PyTorch's is_expandable) */
  const ab_block_info_t *blocks; /* in address order, tiling the segment */
  size_t nblocks;
  unsigned private_pool; /* the private pool it belongs to (Note [Private pools]); 0: the default */
} ab_segment_info_t;

/* Called once per segment, in address order; a nonzero return stops the walk. */
typedef int (*ab_segment_fn)(void *ctx, const ab_segment_info_t *seg);
/* Called once per extra statistic, PyTorch's flattened names ("segment.all.peak"). */
typedef void (*ab_stat_fn)(void *ctx, const char *name, int64_t value);

/* Note [Plans]: a strategy that plans ahead (oracle.c, planned.c) needs the allocations of
 * the run before it serves them, but the event stream lies a layer above (events.h), so the
 * replay engine hands it this plain array at the start of each replay, through the optional
 * plan operation: lifetime i is the i-th alloc call the strategy will see. Times are indices
 * of the stream's events; a strategy that only profiles must read no lifetime past its
 * profile. The engine is the one caller, so every replay path (run, matrix, the budget
 * search, the tests' replays) plans the same way; calls that come without a plan (the
 * conformance suite's) are served online. */
typedef struct ab_lifetime_s {
  uint64_t bytes;     /* requested */
  uint64_t start;     /* the event that allocates it */
  uint64_t end;       /* the event after which its stream may reuse it; UINT64_MAX: never freed */
  uint64_t end_other; /* the same for other streams: the first SYNC after end (>= end) */
  uint32_t step;      /* STEP events before start (0: before the first step) */
  uint16_t stream;
} ab_lifetime_t;

/* Note [Plan statistics]: how a plan served is said in memory_stats under names every
 * planning strategy shares: plan.hits (allocation calls served where the plan put them),
 * plan.misses (the others, served some other way) and plan.region_bytes (the region the
 * plan laid out; 0 when it made none). The harness reads them through
 * ab_strategy_plan_stats into summary.csv's plan_hits, plan_misses and plan_bytes, left empty
 * for a strategy that does not report both counts. */
typedef struct ab_plan_stats_s {
  bool has; /* the strategy reports plan.hits and plan.misses */
  int64_t hits, misses, bytes;
} ab_plan_stats_t;

struct ab_strategy_ops_s {
  const char *name;
  /* No decision of the strategy looks at where the device put its allocations (which of two
   * addresses is lower): its figures do not depend on the driver's placement, and its runs
   * have no placement band to measure (band.h). Checked for each such strategy by
   * band_blind_test. */
  bool address_blind;
  /* Parses conf (NULL or "" for the defaults; PYTORCH_CUDA_ALLOC_CONF's key:value syntax)
   * and builds an instance on dev. Bad conf: AB_ERR_INVALID with the key and position. On
   * success diag may hold a note for the user (keys accepted without effect), else "". */
  ab_status (*create)(ab_device_t *dev, const char *conf, ab_strategy_t **out, ab_diag_t *diag);
  void (*destroy)(ab_strategy_t *s);
  ab_status (*alloc)(ab_strategy_t *s, uint64_t bytes, unsigned stream, ab_dptr_t *out);
  ab_status (*free)(ab_strategy_t *s, ab_dptr_t p, uint64_t bytes, unsigned stream);

  /* Optional. */
  ab_status (*free_request)(ab_strategy_t *s, ab_dptr_t p, uint64_t bytes, unsigned stream);
  ab_status (*free_complete)(ab_strategy_t *s, ab_dptr_t p, uint64_t bytes, unsigned stream);
  ab_status (*empty_cache)(ab_strategy_t *s);  /* release what is cached; NULL: nothing is */
  ab_status (*synchronize)(ab_strategy_t *s);  /* the program synchronised the device */
  ab_status (*walk)(ab_strategy_t *s, ab_segment_fn fn, void *ctx);
  /* Checks the invariants of the strategy's structures and that its stats are the sums
   * over its blocks; AB_ERR_INTERNAL naming the first broken one. Slow: for tests, the
   * engine's check option and --check. */
  ab_status (*check)(ab_strategy_t *s, ab_diag_t *diag);
  void (*refresh_stats)(ab_strategy_t *s); /* stats that must be read from the device */
  void (*reset_peaks)(ab_strategy_t *s);   /* peaks kept on the device start again */
  void (*memory_stats)(ab_strategy_t *s, ab_stat_fn fn, void *ctx);
  /* The OOM message for a request of `bytes` that just failed, in the strategy's terms. */
  void (*describe_oom)(ab_strategy_t *s, uint64_t bytes, unsigned stream, char *buf, size_t size);
  /* The device memory a request of `bytes` takes when nothing the strategy holds can serve
   * it: its block rounded up to what the strategy allocates or maps at once (a segment,
   * pages, a chunk). It tells an OOM of rounding from one of fragmentation. NULL: bytes. */
  uint64_t (*device_bytes)(ab_strategy_t *s, uint64_t bytes, unsigned stream);
  /* The run ahead, before any alloc of it (Note [Plans]); lt is the caller's and lives only
   * for the call. NULL: the strategy serves every call online. */
  ab_status (*plan)(ab_strategy_t *s, const ab_lifetime_t *lt, size_t n, ab_diag_t *diag);
  /* One pool call (Note [Private pools]); pool >= 1, flags as the op says. NULL: the
   * strategy has no private pools and every allocation is served as usual. */
  ab_status (*pool)(ab_strategy_t *s, ab_pool_op_t op, unsigned pool, unsigned stream, unsigned flags);
  /* Takes `cap`, of [cap_lo, cap_hi], as its memory cap from now on
   * (Note [Taking a cap mid-run]). NULL: no cap is taken mid-run. */
  void (*take_cap)(ab_strategy_t *s, uint64_t cap);
};

/* Calls fn on every segment decision of s from now on; NULL stops it. One observer at a time. */
void ab_strategy_observe(ab_strategy_t *s, ab_segment_observer_fn fn, void *ctx);
/* For implementations: reports a segment decision to the observer, if any. */
static inline void ab_strategy_segment(ab_strategy_t *s, ab_trace_action_t action, ab_dptr_t addr, uint64_t bytes,
                                       unsigned stream) {
  if (s->observe) s->observe(s->observe_ctx, action, addr, bytes, stream);
}

/* Destroys s (NULL is a no-op). */
void ab_strategy_destroy(ab_strategy_t *s);

/* ---- calls -------------------------------------------------------------------------- */

/* Allocates bytes (> 0) on stream. AB_ERR_OOM when the strategy cannot serve it. */
ab_status ab_strategy_alloc(ab_strategy_t *s, uint64_t bytes, unsigned stream, ab_dptr_t *out);
ab_status ab_strategy_free(ab_strategy_t *s, ab_dptr_t p, uint64_t bytes, unsigned stream);
/* The two halves of a stream-ordered free (see the contract above). */
ab_status ab_strategy_free_request(ab_strategy_t *s, ab_dptr_t p, uint64_t bytes, unsigned stream);
ab_status ab_strategy_free_complete(ab_strategy_t *s, ab_dptr_t p, uint64_t bytes, unsigned stream);
ab_status ab_strategy_empty_cache(ab_strategy_t *s);
ab_status ab_strategy_synchronize(ab_strategy_t *s);
/* Walks the segments; AB_ERR_INVALID when the strategy has no segment walk. */
ab_status ab_strategy_walk(ab_strategy_t *s, ab_segment_fn fn, void *ctx);
/* Runs the invariant checks: the rules every strategy's statistics follow (ab_stats_check),
 * then the strategy's own (its check operation, when it has one). */
ab_status ab_strategy_check(ab_strategy_t *s, ab_diag_t *diag);
/* Copies the statistics, refreshed from the device where needed; footprint_bytes is always
 * the device's (stats.h). */
void ab_strategy_stats(ab_strategy_t *s, ab_stats_t *out);
/* Sets each peak to its current value (torch.cuda.reset_peak_memory_stats), the device's
 * footprint peak included, so that the next peaks are those of what follows. */
void ab_strategy_reset_peaks(ab_strategy_t *s);
/* One statistic of the strategy's memory_stats by its flattened name ("segment.all.peak");
 * false when the strategy keeps no such statistic. */
bool ab_strategy_memory_stat(ab_strategy_t *s, const char *name, int64_t *value);
/* The plan's statistics (Note [Plan statistics]); out->has false when it reports none. */
void ab_strategy_plan_stats(ab_strategy_t *s, ab_plan_stats_t *out);
/* A pool call (Note [Private pools]); AB_OK at once when the strategy has no pools.
 * AB_ERR_INVALID for pool 0, an unknown op or flags, or a call the pool's state refuses. */
ab_status ab_strategy_pool(ab_strategy_t *s, ab_pool_op_t op, unsigned pool, unsigned stream, unsigned flags);
/* Hands the strategy the run ahead (Note [Plans]); AB_OK at once when it does not plan. */
ab_status ab_strategy_plan(ab_strategy_t *s, const ab_lifetime_t *lt, size_t n, ab_diag_t *diag);
/* True when the strategy has a plan operation (the caller may skip building lifetimes). */
static inline bool ab_strategy_plans(const ab_strategy_t *s) { return s->ops->plan != NULL; }
/* Writes the OOM message for a failed request; a generic one when the strategy has none. */
void ab_strategy_describe_oom(ab_strategy_t *s, uint64_t bytes, unsigned stream, char *buf, size_t size);
/* The device bytes a request takes when nothing held serves it; NULL device_bytes: bytes. */
uint64_t ab_strategy_device_bytes(ab_strategy_t *s, uint64_t bytes, unsigned stream);

/* ---- for implementations -------------------------------------------------------------- */

/* A segment walk for strategies that keep each live allocation in a map (address -> val):
 * every allocation is a segment of one allocated block, in address order, in pool `pool`;
 * decode gives its bytes and stream from val. AB_ERR_INTERNAL when host memory runs out. */
ab_status ab_strategy_walk_map(const ab_map_t *live, const char *pool,
                               void (*decode)(uint64_t val, uint64_t *bytes, unsigned *stream), ab_segment_fn fn,
                               void *ctx);

/* What a segment walk adds up to (ab_strategy_check_walk). */
typedef struct ab_walk_sums_s {
  uint64_t segments;    /* segments walked */
  uint64_t reserved;    /* their bytes */
  uint64_t live_blocks; /* ALLOCATED and PENDING_FREE blocks */
  uint64_t allocated;   /* their bytes */
  uint64_t requested;   /* their requested bytes (0 where the strategy keeps none) */
  uint64_t free;        /* bytes of FREE blocks */
} ab_walk_sums_t;

/* The invariants any segment walk shows, for check operations: segments in address order,
 * none overlapping the next; the blocks of a segment in address order, each starting where
 * the one before ended, from the segment's base; none empty; the mapped ones (all but
 * UNMAPPED) adding up to the segment's bytes; a live block's requested bytes within its
 * size. Fills sums. AB_ERR_INTERNAL naming the first broken rule and where; AB_ERR_INVALID
 * when the strategy has no walk. */
ab_status ab_strategy_check_walk(ab_strategy_t *s, ab_walk_sums_t *sums, ab_diag_t *diag);

#endif
