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

#include "strategies/strategy.h"
#include "strategies/protocol/trace_log.h"

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
