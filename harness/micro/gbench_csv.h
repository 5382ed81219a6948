/* gbench_csv.h: Google Benchmark's JSON output turned into the micro-benchmarks' CSV.
 *
 * The JSON (--benchmark_out_format=json) is the raw result and is kept as written; the CSV
 * is what plots read, one row per reported run, with times in nanoseconds whatever unit the
 * benchmark displayed. Benchmark names read WORKLOAD/STRATEGY/ARGS, which gives the first
 * columns; decorations Google Benchmark appends (manual_time, real_time, threads:N, ...)
 * are left out of args. Fields the converter does not know are ignored, as the library's
 * guide asks of its consumers.
 *
 * Columns:
 *   name              the benchmark's full name, as reported
 *   workload, strategy, args   its parts
 *   device            what it ran on (the "device" key of the JSON context)
 *   run_type          iteration, or aggregate (with repetitions)
 *   aggregate         mean, median, stddev, ... for aggregates; empty otherwise
 *   error             the message of a run that failed; empty otherwise
 *   real_ns, cpu_ns   time per iteration (real_ns is the manual time where one was set)
 *   items_per_second  items (alloc/free pairs, events) per second of real_ns
 *   device_allocs     device allocation calls per iteration (the counter of that name)
 *   iterations
 *
 * Statuses: AB_ERR_IO when a file cannot be read or written; AB_ERR_INVALID when the input
 * is not Google Benchmark's JSON, with the file and byte offset in diag.
 */
#ifndef AB_GBENCH_CSV_H
#define AB_GBENCH_CSV_H

#include <stddef.h>

#include "kernels/base/status.h"
#include "harness/run/table.h"

extern const ab_col_t ab_gbench_csv_cols[];
extern const size_t ab_gbench_csv_ncols;

/* Parses the JSON text (len bytes; path names it in errors) into rows of t, whose columns
 * are ab_gbench_csv_cols. */
ab_status ab_gbench_csv_parse(const char *text, size_t len, const char *path, ab_table_t *t, ab_diag_t *diag);

/* What the JSON's context says of the run besides its rows. */
typedef struct ab_gbench_context_s {
  char library_build_type[16]; /* "release" or "debug" (the library's own build); "" if absent */
} ab_gbench_context_t;

/* Reads json_path and writes csv_path (atomically) from it; the context goes to *context
 * (may be NULL). */
ab_status ab_gbench_csv_convert(const char *json_path, const char *csv_path, ab_gbench_context_t *context,
                                ab_diag_t *diag);

#endif
