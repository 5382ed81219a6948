/* trace_csv_test.c: allocbench's CSV trace (workloads/traces/trace_csv.h) read through the
 * trace loader: streams keep their order and the free phases their meaning, blank lines and
 * CRLF endings are taken, and every error names the line. */
#include "kernels/device/device_open.h"
#include "harness/run/engine.h"
#include "strategies/registry.h"
#include "tests/check.h"
#include "tests/two_streams.h"
#include "workloads/traces/trace.h"

static void csv_streams_keep_order_and_phases(void) {
  static const char csv[] =
      "action,addr,size,stream,time_us\n"
      "alloc,4096,100,700,1\n"
      "free_requested,4096,100,700,2\n"
      "alloc,8192,50,300,3\n"        /* another stream: the first free is pending */
      "free_completed,4096,100,700,4\n"
      "alloc,4096,10,700,5\n"        /* the address again: a new id */
      "free_requested,8192,50,300,6\n"
      "free_completed,8192,50,300,7\n"
      "\n"
      "free_completed,12288,10,700,8\r\n"; /* allocated before the trace */
  const char *path = ab_test_write_file("streams.csv", csv, sizeof csv - 1);
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_trace_load(path, NULL, &es, &in, &d) == AB_OK, "%s", d.msg);
  ab_test_check_two_streams(&es, &in);
  ab_events_free(&es);
}

static void csv_errors_name_the_line(void) {
  static const struct {
    const char *text, *want;
  } cases[] = {
      {"action,addr,size,stream,time_us\nalloc,1,2,0,0\nalloc,1,2,0\n", ":3: expected 5 columns"},
      {"action,addr,size,stream,time_us\nalloc,1,x2,0,0\n", ":2: column 'size': expected a whole number, got 'x2'"},
      {"action,addr,size,stream,time_us\nalloc,1,2,0,0\nalloc,1,2,0,0\n", ":3: alloc at 0x1, which is already allocated"},
      {"action,addr,size,stream,time_us\n,1,2,0,0\n", ":2: column 'action': empty"},
      /* The field is quoted with its control bytes made harmless: no escape sequence reaches
       * the terminal, and the message stays one line. */
      {"action,addr,size,stream,time_us\nalloc,1,2\x1b[2J\f\x1e\x33,0,0\n", ":2: column 'size': expected a whole number, got '2?[2J??3'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *path = ab_test_write_file("bad.csv", cases[i].text, strlen(cases[i].text));
    ab_events_t es;
    ab_diag_t d = {""};
    CHECK_MSG(ab_trace_load(path, NULL, &es, NULL, &d) == AB_ERR_INVALID, "case %zu loaded", i);
    CHECK_STR_CONTAINS(d.msg, cases[i].want);
    CHECK_STR_CONTAINS(d.msg, path);
  }
}

/* Sizes whose sums pass 64 bits: the figures are capped and say so, never wrapped
 * (trace_builder.c, Note [Figures past 64 bits]). */
static void csv_sums_past_64_bits_saturate(void) {
  static const char csv[] =
      "action,addr,size,stream,time_us\n"
      "alloc,4096,18446744073709551615,0,1\n"
      "alloc,8192,18446744073709551615,0,2\n"
      "segment_alloc,4096,18446744073709543424,0,3\n" /* up to 8 KiB below the top */
      "segment_alloc,1048576,9223372036854775808,0,4\n"
      "segment_free,1048576,9223372036854775808,0,5\n";
  const char *path = ab_test_write_file("huge.csv", csv, sizeof csv - 1);
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_trace_load(path, NULL, &es, &in, &d) == AB_OK, "%s", d.msg);
  CHECK(in.saturated);
  CHECK_EQ(in.peak_requested, UINT64_MAX);
  CHECK_EQ(in.reserved_start, 0);
  CHECK_EQ(in.reserved_peak, UINT64_MAX);
  CHECK_EQ(in.reserved_end, 18446744073709543424ULL);
  CHECK_EQ(in.segments_peak, 2);
  ab_events_free(&es);
  /* Below 2^64 the figures are exact, and not marked. */
  static const char fits[] =
      "action,addr,size,stream,time_us\n"
      "alloc,4096,9223372036854775807,0,1\n"
      "segment_alloc,4096,9223372036854775808,0,2\n"
      "segment_alloc,8192,9223372036854775807,0,3\n";
  path = ab_test_write_file("fits.csv", fits, sizeof fits - 1);
  REQUIRE_MSG(ab_trace_load(path, NULL, &es, &in, &d) == AB_OK, "%s", d.msg);
  CHECK(!in.saturated);
  CHECK_EQ(in.peak_requested, INT64_MAX);
  CHECK_EQ(in.reserved_peak, UINT64_MAX);
  ab_events_free(&es);
}

/* Segment records PyTorch cannot write are refused, naming the line: a segment past the top of
 * the address space, one allocated where one is live, one freed by another size than its own.
 * A free of a segment the trace never allocated (made before its history) is not. */
static void impossible_segments_refused(void) {
  static const struct {
    const char *name, *csv, *says;
  } cases[] = {
      {"wraps.csv", "segment_alloc,4096,18446744073709551615,0,1\n",
       "wraps.csv:2: segment_alloc of 18446744073709551615 bytes at 0x1000 runs past the top"},
      {"twice.csv", "segment_alloc,4096,2097152,0,1\nsegment_alloc,4096,2097152,0,2\n",
       "twice.csv:3: segment_alloc at 0x1000, where a segment of 2097152 bytes is allocated"},
      {"resized.csv", "segment_free,8192,4194304,0,1\nsegment_alloc,4096,2097152,0,2\nsegment_free,4096,999,0,3\n",
       "resized.csv:4: segment_free of 999 bytes at 0x1000, a segment of 2097152 bytes"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char csv[512];
    int len = snprintf(csv, sizeof csv, "action,addr,size,stream,time_us\n%s", cases[i].csv);
    const char *path = ab_test_write_file(cases[i].name, csv, (size_t)len);
    ab_events_t es;
    ab_diag_t d = {""};
    CHECK(ab_trace_load(path, NULL, &es, NULL, &d) == AB_ERR_INVALID);
    CHECK_STR_CONTAINS(d.msg, cases[i].says);
  }
}

/* Programs with hundreds of side streams replay; past the device's AB_MAX_STREAMS the trace
 * is refused, naming the line. */
static void many_streams(void) {
  char *csv = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&csv, &len);
  REQUIRE(f != NULL);
  fputs("action,addr,size,stream,time_us\n", f);
  for (int i = 0; i <= AB_MAX_STREAMS; i++) fprintf(f, "alloc,%d,100,%d,%d\n", 4096 * (i + 1), 5000 - i, i);
  fclose(f);
  /* All but the last line: AB_MAX_STREAMS streams, ranked by value. */
  size_t upto = (size_t)(strrchr(csv, 'a') - csv);
  const char *path = ab_test_write_file("streams.csv", csv, upto);
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_trace_load(path, NULL, &es, &in, &d) == AB_OK, "%s", d.msg);
  CHECK_EQ(in.nstreams, AB_MAX_STREAMS);
  CHECK_EQ(in.stream_values[0], 5000 - (AB_MAX_STREAMS - 1));
  CHECK_EQ(in.stream_values[AB_MAX_STREAMS - 1], 5000);
  CHECK_EQ(es.ev[0].stream, AB_MAX_STREAMS - 1); /* the first line's stream has the largest value */
  ab_device_t *dev;
  ab_strategy_t *s;
  REQUIRE(ab_device_open("sim", NULL, &dev, &d) == AB_OK);
  REQUIRE(ab_strategy_create("caching", dev, "", &s, &d) == AB_OK);
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  ab_run_opts_t ro = ab_run_defaults();
  CHECK(ab_engine_replay(&es, s, &ro, &run) == AB_OK);
  CHECK_MSG(run.status == AB_RUN_OK, "%s", run.message);
  ab_run_release(&run);
  ab_strategy_destroy(s);
  CHECK(ab_device_close(dev, &d) == AB_OK);
  ab_events_free(&es);
  path = ab_test_write_file("too_many_streams.csv", csv, len);
  CHECK(ab_trace_load(path, NULL, &es, NULL, &d) == AB_ERR_INVALID);
  char want[64];
  snprintf(want, sizeof want, ":%d: more than %d streams", AB_MAX_STREAMS + 2, AB_MAX_STREAMS);
  CHECK_STR_CONTAINS(d.msg, want);
  free(csv);
}

static const ab_test_t tests[] = {
    {"csv_streams_keep_order_and_phases", csv_streams_keep_order_and_phases},
    {"csv_errors_name_the_line", csv_errors_name_the_line},
    {"csv_sums_past_64_bits_saturate", csv_sums_past_64_bits_saturate},
    {"impossible_segments_refused", impossible_segments_refused},
    {"many_streams", many_streams},
};
AB_TEST_MAIN(tests)
