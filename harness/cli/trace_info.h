/* trace_info.h: what a trace holds, as `allocbench replay --info` prints it and the page of
 * `allocbench tune --report` shows it: one row of named figures, read from the events and
 * from what the trace's reader found (trace_builder.h, ab_trace_info_t).
 *
 * For people (ab_cli_trace_info_write), each size is in a binary unit under its name without
 * the unit, with its exact bytes where they are held against PyTorch's memory_stats() (the
 * peaks), and settings that are all PyTorch's defaults say so; as a table row (cols, cells) for
 * --format csv and json, every figure raw. */
#ifndef AB_CLI_TRACE_INFO_H
#define AB_CLI_TRACE_INFO_H

#include <stddef.h>
#include <stdio.h>

#include "harness/run/table.h"
#include "workloads/events/events.h"
#include "workloads/traces/trace_builder.h"

#define AB_CLI_INFO_MAX_COLS 64

typedef struct ab_cli_trace_info_s {
  ab_col_t cols[AB_CLI_INFO_MAX_COLS];
  char cells[AB_CLI_INFO_MAX_COLS][256];
  size_t n;
} ab_cli_trace_info_t;

/* The row of the trace at path, read into es with what its reader found in `in`. */
void ab_cli_trace_info(const char *path, const ab_events_t *es, const ab_trace_info_t *in, ab_cli_trace_info_t *r);

/* The row for people, one "name  value" a line, to f. */
void ab_cli_trace_info_write(const ab_cli_trace_info_t *r, FILE *f);

#endif
