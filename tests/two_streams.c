/* two_streams.c: the example of two_streams.h, checked. */
#include "tests/two_streams.h"

#include "tests/check.h"

void ab_test_check_two_streams(const ab_events_t *es, const ab_trace_info_t *in) {
  CHECK_EQ(in->nstreams, 2);
  CHECK(in->stream_values[0] == 300 && in->stream_values[1] == 700);
  CHECK_EQ(in->records, 8);
  CHECK_EQ(in->preexisting, 1);
  /* 0: pre-existing 12288 (stream 700 = index 1, its free requested before the trace), 1:
   * alloc 4096, 2: alloc 8192 on stream 300 = index 0 while 1's free is pending, 3: 4096 again. */
  static const struct {
    uint8_t kind, aux;
    uint32_t id;
  } want[] = {{AB_EV_ALLOC, 0, 0}, {AB_EV_FREE, AB_FREE_REQUEST, 0}, {AB_EV_ALLOC, 0, 1},
              {AB_EV_FREE, AB_FREE_REQUEST, 1}, {AB_EV_ALLOC, 0, 2}, {AB_EV_FREE, AB_FREE_COMPLETE, 1},
              {AB_EV_ALLOC, 0, 3}, {AB_EV_FREE, AB_FREE_NOW, 2}, {AB_EV_FREE, AB_FREE_COMPLETE, 0}};
  REQUIRE(es->n == sizeof want / sizeof want[0]);
  for (size_t i = 0; i < es->n; i++)
    CHECK_MSG(es->ev[i].kind == want[i].kind && es->ev[i].id == want[i].id &&
                  (want[i].kind != AB_EV_FREE || es->ev[i].aux == want[i].aux),
              "event %zu", i);
  CHECK(es->ev[0].stream == 1 && es->ev[0].bytes == 10 && es->ev[2].stream == 1 && es->ev[4].stream == 0);
  CHECK_EQ(in->peak_requested, 160);
}
