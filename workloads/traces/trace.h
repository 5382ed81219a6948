/* trace.h: a recorded trace turned into an event stream, whatever its format.
 * Layer: traces (workloads/traces/), above events; the generators and the harness use it.
 *
 * ab_trace_load recognises the format from the file's content (never its name), plain or
 * gzipped (input.h), and hands the records to the trace builder (trace_builder.h):
 *   - PyTorch's memory snapshot, the pickle torch.cuda.memory._dump_snapshot() writes
 *     (snapshot.h): device_traces of one device, with segments and allocator_settings;
 *   - allocbench's CSV trace: header `action,addr,size,stream,time_us` (the format of the
 *     fixtures' *.trace.csv.gz and of --export-trace), actions as in PyTorch's device_traces;
 *   - RMM's logging_resource_adaptor CSV (rmm_log.h): header
 *     `Thread,Time,Action,Pointer,Size,Stream`.
 * Every error names the file and the line (or byte offset) and what was expected.
 */
#ifndef AB_TRACE_H
#define AB_TRACE_H

#include "kernels/base/input.h"
#include "workloads/events/events.h"
#include "workloads/traces/trace_builder.h"

typedef struct ab_trace_opts_s {
  int device;            /* snapshots: the device whose trace to read; -1: the first with entries */
  uint64_t max_inflated; /* gzip: the most it may inflate to, bytes; 0: input.h's default */
  /* true: a trace without allocations is read, to be described or compared (replay --info,
   * the allocator's decisions alone in tests/data); false: it is refused, having nothing to
   * replay. */
  bool decisions_only;
  /* What the run is made under, in bytes (0: not known): the memory cap the program ran under
   * (PyTorch's set_per_process_memory_fraction) and the card's total, which tell PyTorch's
   * own segment releases from the program's empty_cache (trace_builder.c,
   * Note [Releases inside a malloc]). */
  uint64_t cap, card;
} ab_trace_opts_t;

/* Reads the trace at path into out (initialised here; released on failure) and, when info
 * is not NULL, what it holds. opts may be NULL (the defaults). */
ab_status ab_trace_load(const char *path, const ab_trace_opts_t *opts, ab_events_t *out, ab_trace_info_t *info,
                        ab_diag_t *diag);
/* The same for a trace already read (input.h), named path in errors. */
ab_status ab_trace_parse(const char *path, const ab_input_t *in, const ab_trace_opts_t *opts, ab_events_t *out,
                         ab_trace_info_t *info, ab_diag_t *diag);

#endif
