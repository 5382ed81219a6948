/* rmm_log_test.c: RMM's logging_resource_adaptor CSV (workloads/traces/rmm_log.h) read
 * through the trace loader: its actions, a failed allocation counted as a traced OOM, a free
 * of memory allocated before the log, and errors that name the line and the column. */
#include "tests/check.h"
#include "workloads/traces/trace.h"

static void rmm_log_reads_and_refuses(void) {
  static const char log[] =
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "140201,10:03:45.123456,allocate,0x7f8e2c000000,1024,0x0\n"
      "140201,10:03:45.123460,allocate,0x7f8e2c000400,512,0x2\n"
      "140202,10:03:45.123470,allocate failure,(nil),999999999999,0x0\n"
      "140201,10:03:45.123480,free,0x7f8e2c000000,1024,0x0\n"
      "140201,10:03:45.123490,free,0x7f8e2c000800,64,0x0\n"; /* allocated before the log */
  const char *path = ab_test_write_file("rmm.csv", log, sizeof log - 1);
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_trace_load(path, NULL, &es, &in, &d) == AB_OK, "%s", d.msg);
  CHECK(strcmp(in.format, "rmm-log") == 0);
  CHECK_EQ(in.records, 5);
  REQUIRE(in.nactions == 3);
  CHECK(strcmp(in.actions[0].name, "allocate") == 0 && in.actions[0].count == 2);
  CHECK(strcmp(in.actions[1].name, "allocate failure") == 0 && in.actions[1].count == 1);
  CHECK(strcmp(in.actions[2].name, "free") == 0 && in.actions[2].count == 2);
  CHECK_EQ(es.trace_ooms, 1);
  CHECK_EQ(in.preexisting, 1);
  CHECK_EQ(in.nstreams, 2);
  /* pre-existing alloc, two allocs, two plain frees */
  REQUIRE(es.n == 5);
  CHECK(es.ev[2].kind == AB_EV_ALLOC && es.ev[2].stream == 1 && es.ev[2].bytes == 512);
  CHECK(es.ev[3].kind == AB_EV_FREE && es.ev[3].aux == AB_FREE_NOW && es.ev[3].id == 1);
  CHECK(es.ev[4].kind == AB_EV_FREE && es.ev[4].aux == AB_FREE_NOW && es.ev[4].id == 0);
  ab_events_free(&es);

  static const struct {
    const char *row, *want;
  } bad[] = {
      {"1,t,allocate,7f8e,10,0x0\n", ":2: column 'Pointer': expected a pointer"},
      {"1,t,allocate,0xzz,10,0x0\n", ":2: column 'Pointer'"},
      {"1,t,allocate,0x10,ten,0x0\n", ":2: column 'Size': expected a whole number"},
      {"1,t,allocate,0x10,10,stream\n", ":2: column 'Stream'"},
      {"1,t,reallocate,0x10,10,0x0\n", ":2: column 'Action': expected allocate, allocate failure or free"},
      {"1,t,allocate,0x10,10\n", ":2: expected 6 columns"},
      {",t,allocate,0x10,10,0x0\n", ":2: column 'Thread' is empty"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[256];
    snprintf(text, sizeof text, "Thread,Time,Action,Pointer,Size,Stream\n%s", bad[i].row);
    const char *p = ab_test_write_file("bad_rmm.csv", text, strlen(text));
    d.msg[0] = '\0';
    CHECK_MSG(ab_trace_load(p, NULL, &es, NULL, &d) == AB_ERR_INVALID, "case %zu loaded", i);
    CHECK_STR_CONTAINS(d.msg, bad[i].want);
    CHECK_STR_CONTAINS(d.msg, p);
  }
}

/* RMM 0.15 and 0.16 wrote a null pointer as "0" and streams in decimal
 * (Note [RMM's log formats], rmm_log.c); later releases (nil) and 0x-prefixed hex. Both read, each stream in
 * its own base: "10" and "0xa" are one stream. */
static void rmm_015_format(void) {
  static const char log[] =
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "7,1601296374.123,allocate,0x7f8e2c000000,1024,10\n"
      "7,1601296374.124,allocate failure,0,99999999999,10\n"
      "7,1601296374.125,free,0x7f8e2c000000,1024,0xa\n";
  const char *path = ab_test_write_file("rmm015.csv", log, sizeof log - 1);
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_trace_load(path, NULL, &es, &in, &d) == AB_OK, "%s", d.msg);
  CHECK_EQ(es.trace_ooms, 1);
  CHECK_EQ(in.nstreams, 1);
  CHECK_EQ(in.stream_values[0], 10u);
  CHECK_EQ(in.preexisting, 0);
  ab_events_free(&es);
}

static const ab_test_t tests[] = {
    {"rmm_log_reads_and_refuses", rmm_log_reads_and_refuses},
    {"rmm_015_format", rmm_015_format},
};
AB_TEST_MAIN(tests)
