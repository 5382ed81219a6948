/* trace_csv.h: allocbench's CSV trace, header `action,addr,size,stream,time_us` (the format
 * of the fixtures' *.trace.csv.gz and of --export-trace), one record per line with the
 * actions of PyTorch's device_traces (trace_builder.h); with a sixth column `pool`, each
 * record's pool: 0 the default pool, N the private pool N (Note [Pools of a trace]). */
#ifndef AB_TRACE_CSV_H
#define AB_TRACE_CSV_H

#include <stdint.h>

#include "kernels/base/input.h"
#include "workloads/traces/trace_builder.h"
#include "strategies/protocol/trace_log.h"

/* The header line that starts the format. */
extern const char ab_trace_csv_header[];
extern const char ab_trace_csv_header_pooled[]; /* the same with the pool column */

/* Reads a CSV trace from its first byte (its first line is the header, checked by the
 * caller) into b, a line at a time. Errors name the line. */
ab_status ab_trace_csv_read(const char *path, ab_instream_t *in, ab_trace_builder_t *b, ab_diag_t *diag);

/* Writes a run's log (trace_log.h) as allocbench's CSV trace, streams under their
 * recorded values (stream_values[index]; the index itself beyond nstreams). An oom row has
 * 0 in the addr column, as PyTorch's flattened traces do. AB_ERR_IO naming the path. */
ab_status ab_trace_write_csv(const char *path, const ab_trace_log_t *log, const uint64_t *stream_values,
                             unsigned nstreams, ab_diag_t *diag);

#endif
