#include "strategies/protocol/trace_log.h"

#include <stdlib.h>
#include <string.h>

void ab_trace_log_init(ab_trace_log_t *log) { memset(log, 0, sizeof *log); }

void ab_trace_log_free(ab_trace_log_t *log) {
  free(log->recs);
  free(log->segs);
  free(log->blocks);
  ab_trace_log_init(log);
}
