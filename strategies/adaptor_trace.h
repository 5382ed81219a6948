/* adaptor_trace.h: a strategy that records what the strategy it wraps does, in PyTorch's
 * trace vocabulary (trace_actions.h), so that a run can be exported as a trace or a memory
 * snapshot. The callers' calls are recorded with the bytes requested (a plain free as
 * free_requested then free_completed); segment decisions as the wrapped strategy reports
 * them; an oom with the device's free bytes in addr (PyTorch's device_free).
 *
 * The adaptor forwards every call to the strategy it wraps (which it owns) and is its
 * segment observer (strategy.h), so the records interleave as PyTorch's do: the segment
 * decisions made inside an alloc precede it, those made inside a free follow it. Records go
 * to a log the caller owns, which outlives the adaptor.
 *
 * ab_adaptor_trace_capture takes the segment map into the log (the segments, with their
 * blocks, as the wrapped strategy's segment walk reports them) and stops recording, so that
 * what the replay engine frees at the end of a run is not part of the trace. A strategy
 * without a segment walk is described from what the adaptor saw: each live device
 * allocation or mapped range is a segment, tiled by the live blocks inside it and free gaps.
 *
 * A strategy has one observer at a time. Time stamps are the wall clock. When host
 * memory runs out the log is marked failed and recording stops. Not thread-safe.
 */
#ifndef AB_ADAPTOR_TRACE_H
#define AB_ADAPTOR_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strategy.h"

typedef struct ab_trace_rec_s {
  uint8_t action;   /* ab_trace_action_t */
  uint16_t stream;  /* stream index */
  uint32_t pool;    /* the private pool the call went to (Note [Private pools]); 0: the default */
  uint64_t addr;    /* the block or the segment range; oom: the device's free bytes */
  uint64_t bytes;   /* requested bytes (alloc, frees), segment bytes, or the failed request */
  uint64_t time_us; /* wall clock, Unix microseconds */
} ab_trace_rec_t;

/* A segment of the captured map; its blocks tile it in address order. */
typedef struct ab_trace_seg_s {
  ab_dptr_t base;
  uint64_t bytes;
  uint16_t stream;  /* stream index */
  bool small;       /* the strategy calls its pool "small" (PyTorch's segment_type) */
  bool expandable;  /* part of a segment that grows by mapping: one mapped run of it */
  unsigned pool;    /* its private pool (Note [Private pools]); 0: the default */
  size_t first;     /* its blocks are log->blocks[first .. first + nblocks) */
  size_t nblocks;
} ab_trace_seg_t;

typedef struct ab_trace_log_s {
  ab_trace_rec_t *recs; /* in the order they happened */
  size_t n, cap;
  ab_trace_seg_t *segs; /* the segment map at the capture, by address */
  size_t nsegs, capsegs;
  ab_block_info_t *blocks; /* requested bytes filled in for live blocks */
  size_t nblocks, capblocks;
  bool captured;        /* the map was taken; nothing more is recorded */
  bool failed;          /* host memory ran out: the log is incomplete */
} ab_trace_log_t;

void ab_trace_log_init(ab_trace_log_t *log);
void ab_trace_log_free(ab_trace_log_t *log);

/* Wraps upstream (which the adaptor then owns and destroys) and records into log.
 * AB_ERR_INVALID when another adaptor already listens to the device, AB_ERR_INTERNAL when
 * host memory runs out; upstream stays the caller's on failure. */
ab_status ab_adaptor_trace_create(ab_strategy_t *upstream, ab_trace_log_t *log, ab_strategy_t **out);
/* Takes the segment map into the log and stops recording. s must come from
 * ab_adaptor_trace_create; AB_ERR_INVALID otherwise. */
ab_status ab_adaptor_trace_capture(ab_strategy_t *s);
/* True if s is a trace adaptor. */
bool ab_adaptor_trace_is(const ab_strategy_t *s);

#endif
