/* trace_builder_test.c: the trace builder (workloads/traces/trace_builder.h), fed records
 * directly as every format's reader feeds it: streams ranked by their recorded value, the
 * free phases paired or kept apart, an address used again as a new id, a free of memory
 * allocated before the trace (Note [Memory that existed before the trace]), and records
 * that contradict each other refused at their position. */
#include "check.h"
#include "trace_builder.h"
#include "two_streams.h"

typedef struct rec_s {
  ab_trace_action_t action;
  uint64_t addr, size, stream;
} rec_t;

/* Builds es from recs, counted and positioned as lines 2, 3, ... of a file "T". */
static ab_status build(const rec_t *recs, size_t n, ab_events_t *es, ab_trace_info_t *info, ab_diag_t *d) {
  ab_events_init(es);
  ab_trace_builder_t b;
  ab_trace_builder_init(&b, es, "T", false);
  for (size_t i = 0; i < n; i++) {
    const char *name = ab_trace_action_name(recs[i].action);
    ab_trace_builder_count(&b, name, strlen(name));
    ab_status st = ab_trace_builder_add(&b, recs[i].action, recs[i].addr, recs[i].size, recs[i].stream, i + 2, d);
    if (st != AB_OK) {
      ab_trace_builder_discard(&b);
      ab_events_free(es);
      return st;
    }
  }
  ab_status st = ab_trace_builder_finish(&b, d);
  *info = b.info;
  if (st != AB_OK) ab_events_free(es);
  return st;
}

static void builder_keeps_stream_order_and_phases(void) {
  static const rec_t recs[] = {
      {AB_TR_ALLOC, 4096, 100, 700},
      {AB_TR_FREE_REQUESTED, 4096, 100, 700},
      {AB_TR_ALLOC, 8192, 50, 300}, /* another stream: the first free is pending */
      {AB_TR_FREE_COMPLETED, 4096, 100, 700},
      {AB_TR_ALLOC, 4096, 10, 700}, /* the address again: a new id */
      {AB_TR_FREE_REQUESTED, 8192, 50, 300},
      {AB_TR_FREE_COMPLETED, 8192, 50, 300},
      {AB_TR_FREE_COMPLETED, 12288, 10, 700}, /* allocated before the trace */
  };
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(build(recs, sizeof recs / sizeof recs[0], &es, &in, &d) == AB_OK, "%s", d.msg);
  ab_test_check_two_streams(&es, &in);
  ab_events_free(&es);
}

/* An alloc at an address that is still live: the trace contradicts itself. */
static void builder_refuses_an_alloc_over_a_live_block(void) {
  static const rec_t recs[] = {{AB_TR_ALLOC, 1, 2, 0}, {AB_TR_ALLOC, 1, 2, 0}};
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  CHECK(build(recs, 2, &es, &in, &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "T:3: alloc at 0x1, which is already allocated");
}

static const ab_test_t tests[] = {
    {"builder_keeps_stream_order_and_phases", builder_keeps_stream_order_and_phases},
    {"builder_refuses_an_alloc_over_a_live_block", builder_refuses_an_alloc_over_a_live_block},
};
AB_TEST_MAIN(tests)
