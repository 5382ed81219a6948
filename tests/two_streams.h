/* two_streams.h: the example both trace readers' tests feed in their own format (the trace
 * builder's records in trace_builder_test.c, a CSV trace in trace_csv_test.c): on streams
 * 300 and 700, an alloc whose free is pending while another stream allocates, an address
 * used again, a block allocated before the trace. Whichever reader built it, the event
 * stream must be the same; this checks it.
 */
#ifndef AB_TEST_TWO_STREAMS_H
#define AB_TEST_TWO_STREAMS_H

#include "workloads/events/events.h"
#include "workloads/traces/trace_builder.h"

/* Checks es and in against what the example must give, as test failures (check.h). */
void ab_test_check_two_streams(const ab_events_t *es, const ab_trace_info_t *in);

#endif
