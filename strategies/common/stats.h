/* stats.h: the statistics every strategy keeps, declared once.
 *
 * Names are PyTorch's (torch.cuda.memory_stats(), "all" pool), so a figure from allocbench
 * and one from a user's job mean the same thing:
 *   requested_bytes  bytes asked for by the live allocations, unrounded;
 *   allocated_bytes  bytes handed out for them, as the strategy rounds and splits;
 *   reserved_bytes   bytes the strategy holds from the device (cudaMalloc'd, mapped, or
 *                    kept in a stream-ordered pool);
 *   num_device_alloc / num_device_free  successful calls into the device's allocation API
 *                    (cudaMalloc, cudaMallocAsync, a map of expandable memory / their frees);
 *   num_alloc_retries  allocations that released cached memory and tried again;
 *   num_ooms         allocations that ended in out-of-memory.
 * and one the device keeps, not the strategy:
 *   footprint_bytes  device memory the strategy's device calls really took: what cudaMalloc's
 *                    rounding and packing and the stream-ordered pool hold (device.h; on
 *                    cuda measured with cudaMemGetInfo, on sim modelled). reserved_bytes is
 *                    the strategy's own count; this is what the card lost.
 * Gauges keep current and peak; counters only grow. The struct, the peaks' reset, merge,
 * the checks and summary.csv's columns (results.h) all come from the lists below, so
 * adding a statistic is one line.
 *
 * The strategy owns its ab_stats_t (in ab_strategy_t) and updates it on every call;
 * readers copy it. Strategies with richer statistics export them by name through the
 * memory_stats operation of strategy.h.
 */
#ifndef AB_STATS_H
#define AB_STATS_H

#include <stdint.h>

#include "kernels/base/status.h"

#define AB_STAT_STRATEGY_GAUGES(X)                                                 \
  X(requested_bytes, "bytes requested by live allocations")                      \
  X(allocated_bytes, "bytes handed out, after rounding and splitting")           \
  X(reserved_bytes, "bytes held from the device")

/* Read from the device by ab_strategy_stats; strategies leave them alone. */
#define AB_STAT_DEVICE_GAUGES(X)                                                   \
  X(footprint_bytes, "device memory the device calls took, as the device measures it")

#define AB_STAT_GAUGES(X) AB_STAT_STRATEGY_GAUGES(X) AB_STAT_DEVICE_GAUGES(X)

#define AB_STAT_COUNTERS(X)                                                        \
  X(num_device_alloc, "successful device allocation calls")                      \
  X(num_device_free, "device free calls")                                        \
  X(num_alloc_retries, "allocations that released cache and retried")           \
  X(num_ooms, "allocations that ended in out-of-memory")

typedef struct ab_gauge_s {
  int64_t current; /* value now */
  int64_t peak;    /* highest current since creation or the last ab_stats_reset_peaks */
} ab_gauge_t;

typedef struct ab_stats_s {
#define AB_STAT_GAUGE_FIELD(name, doc) ab_gauge_t name;
  AB_STAT_GAUGES(AB_STAT_GAUGE_FIELD)
#undef AB_STAT_GAUGE_FIELD
#define AB_STAT_COUNTER_FIELD(name, doc) uint64_t name;
  AB_STAT_COUNTERS(AB_STAT_COUNTER_FIELD)
#undef AB_STAT_COUNTER_FIELD
} ab_stats_t;

static inline void ab_gauge_add(ab_gauge_t *g, int64_t delta) {
  g->current += delta;
  if (g->current > g->peak) g->peak = g->current;
}

static inline void ab_gauge_sub(ab_gauge_t *g, int64_t delta) { g->current -= delta; }

/* Sets each peak to its current value (torch.cuda.reset_peak_memory_stats). */
void ab_stats_reset_peaks(ab_stats_t *s);
/* Adds src into dst: currents, peaks and counters are summed (the combined figure of
 * several ranks; the sum of peaks bounds the peak of the sum). */
void ab_stats_merge(ab_stats_t *dst, const ab_stats_t *src);
/* Checks what holds for the statistics of any strategy: no gauge below zero or above its
 * peak, no more device frees than device allocations. (Requested bytes may exceed allocated
 * ones: PyTorch counts a block whose free awaits other streams as requested, not allocated.)
 * AB_ERR_INTERNAL with the first broken rule in diag; ab_strategy_check runs it before each
 * strategy's own checks. */
ab_status ab_stats_check(const ab_stats_t *s, ab_diag_t *diag);

#endif
