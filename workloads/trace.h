/* trace.h: recorded traces turned into event streams.
 *
 * ab_trace_load recognises the format from the file's content (never its name), plain or
 * gzipped, and hands the records to the trace builder below:
 *   - allocbench's CSV trace: header `action,addr,size,stream,time_us` (the format of the
 *     fixtures' *.trace.csv.gz), actions as in PyTorch's device_traces.
 * Every error names the file and the line (or byte offset) and what was expected.
 *
 * The trace builder turns PyTorch-style actions into events, for every importer:
 *   alloc            ALLOC of a new id; the address maps to it until its free completes
 *                    (an address used again after free_completed is a new id)
 *   free_requested   FREE REQUEST of the id at that address
 *   free_completed   FREE COMPLETE; when it directly follows its free_requested (the
 *                    common case: no other stream used the block) the pair is one FREE NOW
 *   segment_alloc / segment_free / segment_map / segment_unmap
 *                    kept as recorded segment decisions (ab_events_t.segs), not replayed
 *   oom              counted in trace_ooms: the program caught an OOM and went on
 *   anything else    a no-op (snapshot, annotate, user_defined, ...)
 * Policy for traces that start after memory already existed (a wrapped ring buffer, or
 * recording switched on late): frees of addresses the trace never allocated are ignored and
 * counted in ab_events_t.ignored. Streams keep their identity and their numeric order (which
 * decides PyTorch's iteration order): the smallest recorded stream value becomes index 0.
 */
#ifndef AB_TRACE_H
#define AB_TRACE_H

#include <stdint.h>

#include "harness/events.h"
#include "strategies/hashmap.h"

/* Reads the trace at path into out (initialised here; released on failure). */
ab_status ab_trace_load(const char *path, ab_events_t *out, ab_diag_t *diag);

typedef enum ab_trace_action_e {
  AB_TR_ALLOC,
  AB_TR_FREE_REQUESTED,
  AB_TR_FREE_COMPLETED,
  AB_TR_SEGMENT_ALLOC,
  AB_TR_SEGMENT_FREE,
  AB_TR_SEGMENT_MAP,
  AB_TR_SEGMENT_UNMAP,
  AB_TR_OOM,
  AB_TR_OTHER,
} ab_trace_action_t;

/* PyTorch's action name to the enum; unknown names are AB_TR_OTHER. */
ab_trace_action_t ab_trace_action_of(const char *name, size_t len);

#define AB_TRACE_MAX_STREAMS 64

typedef struct ab_trace_builder_s {
  ab_events_t *es;
  ab_map_t live;                            /* address -> id + 1, until the free completes */
  uint64_t streams[AB_TRACE_MAX_STREAMS];   /* raw stream values, in order of first use */
  unsigned nstreams;
} ab_trace_builder_t;

void ab_trace_builder_init(ab_trace_builder_t *b, ab_events_t *es);
/* Applies one record; errors say "PATH:POS: ..." (POS: the line, or the importer's position). */
ab_status ab_trace_builder_add(ab_trace_builder_t *b, ab_trace_action_t action, uint64_t addr, uint64_t size,
                               uint64_t stream, const char *path, size_t pos, ab_diag_t *diag);
/* Renumbers streams by their recorded value, validates the stream, frees the builder. */
ab_status ab_trace_builder_finish(ab_trace_builder_t *b, const char *path, ab_diag_t *diag);

#endif
