/* rmm_log.h: RAPIDS RMM's logging_resource_adaptor CSV, read into the trace builder.
 *
 * The log (rapidsai/rmm, include/rmm/mr/device/logging_resource_adaptor.hpp) has the header `Thread,Time,Action,Pointer,Size,Stream`
 * and one row per call: the thread id, the wall clock (HH:MM:SS.ffffff), the action
 * (`allocate`, `allocate failure` or `free`), the pointer as %p prints it (0x7f..., or
 * (nil)), the bytes asked for, and the stream in hex. The rows become PyTorch's actions:
 * allocate is alloc, free is free_requested then free_completed (RMM frees are immediate),
 * allocate failure is an oom the program survived. The log is replayed in its order, all
 * threads as one sequence (RMM's own replay runs a thread per Thread value; the engine drives
 * one), so Thread and Time are checked for presence only.
 */
#ifndef AB_RMM_LOG_H
#define AB_RMM_LOG_H

#include "kernels/base/input.h"
#include "workloads/traces/trace_builder.h"

extern const char ab_rmm_log_header[];

/* Reads the log streamed by `in` from its first byte (its first line is the header) into the
 * builder, a line at a time. Errors name path and the line. */
ab_status ab_rmm_log_read(const char *path, ab_instream_t *in, ab_trace_builder_t *b, ab_diag_t *diag);

#endif
