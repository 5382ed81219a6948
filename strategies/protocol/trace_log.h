/* trace_log.h: a run's trace as the recording adaptor writes it (adaptor_trace.h) and the
 * trace writers read it (trace_csv.h, snapshot.h): records in PyTorch's trace vocabulary
 * (trace_actions.h), and the segment map at the capture.
 * Layer: protocol (strategies/protocol/). */
#ifndef AB_TRACE_LOG_H
#define AB_TRACE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/device/device.h"
#include "strategies/protocol/blocks.h"
#include "strategies/protocol/trace_actions.h"

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

#endif
