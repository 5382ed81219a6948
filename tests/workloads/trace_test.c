/* trace_test.c: the trace loader (workloads/traces/trace.h): what it does not recognise is
 * refused, and the trace adaptor's records exported in both formats (the CSV trace and the
 * snapshot) read back through it to the events that made them. The formats' own readers
 * have their tests: snapshot_test.c, trace_csv_test.c, rmm_log_test.c. */
#ifdef AB_HAVE_ZLIB
#include <zlib.h>
#endif

#include "kernels/device/device_open.h"
#include "harness/run/engine.h"
#include "strategies/common/adaptor_trace.h"
#include "strategies/registry.h"
#include "tests/check.h"
#include "workloads/traces/snapshot.h"
#include "workloads/traces/trace.h"
#include "workloads/traces/trace_csv.h"

#define RECORDED AB_TEST_DATA_DIR "/pytorch-2.11-h200/"

/* ---- recognising a format ---------------------------------------------------------------- */

/* The format is recognised from the content; what is none of them is refused by name. */
static void trace_refuses_what_it_does_not_recognise(void) {
  static const struct {
    const char *text, *want;
  } cases[] = {
      {"action,addr,size\nalloc,1,2\n", "not a recognised trace"},
      {"", "empty file"},
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

/* ---- the trace adaptor and the exports -------------------------------------------------- */

static void capture(void *ctx, ab_strategy_t *s, const ab_run_t *run) {
  (void)ctx;
  (void)run;
  CHECK(ab_adaptor_trace_capture(s) == AB_OK);
}

/* Replays es through strategy (wrapped in a trace adaptor), exports both formats, and checks
 * that each reads back to the same events. */
static void round_trip(const ab_events_t *es, const ab_trace_info_t *in, const char *strategy) {
  ab_device_t *dev;
  ab_strategy_t *s, *t;
  ab_diag_t d = {""};
  REQUIRE(ab_device_open("sim", NULL, &dev, &d) == AB_OK);
  REQUIRE_MSG(ab_strategy_create(strategy, dev, "", &s, &d) == AB_OK, "%s", d.msg);
  ab_trace_log_t log;
  ab_trace_log_init(&log);
  REQUIRE(ab_adaptor_trace_create(s, &log, &t) == AB_OK);
  ab_strategy_t *second;
  CHECK(ab_adaptor_trace_create(s, &log, &second) == AB_ERR_INVALID); /* one listener per device */
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, es) == AB_OK);
  ab_run_opts_t ro = ab_run_defaults();
  ro.at_end = capture;
  CHECK(ab_engine_replay(es, t, &ro, &run) == AB_OK);
  CHECK_MSG(run.status == AB_RUN_OK, "%s: %s", strategy, run.message);
  size_t recorded = log.n;
  ab_strategy_destroy(t);
  CHECK_MSG(ab_device_close(dev, &d) == AB_OK, "%s", d.msg);
  CHECK(log.captured && !log.failed);
  CHECK_EQ(log.n, recorded); /* what the engine freed at the end is not recorded */

  /* The segment map tiles each segment with its blocks. */
  for (size_t i = 0; i < log.nsegs; i++) {
    const ab_trace_seg_t *g = &log.segs[i];
    uint64_t at = g->base;
    for (size_t k = 0; k < g->nblocks; k++) {
      CHECK_MSG(log.blocks[g->first + k].addr == at, "%s: segment %zu block %zu", strategy, i, k);
      at += log.blocks[g->first + k].bytes;
    }
    CHECK_MSG(at == g->base + g->bytes, "%s: segment %zu is not tiled", strategy, i);
  }

  /* Named per round trip: a file read back is an input of this process, never written again
   * (output.h). */
  static int trip;
  char csv_name[64], pickle_name[64];
  snprintf(csv_name, sizeof csv_name, "rt%d_%s.csv", trip, strategy);
  snprintf(pickle_name, sizeof pickle_name, "rt%d_%s.pickle", trip++, strategy);
  const char *csv = ab_test_tmp_path(csv_name), *pickle = ab_test_tmp_path(pickle_name);
  CHECK(ab_trace_write_csv(csv, &log, in->stream_values, in->nstreams, &d) == AB_OK);
  CHECK(ab_snapshot_write(pickle, &log, in->stream_values, in->nstreams, "", ab_strategy_is_pytorch(strategy), &d) == AB_OK);
  const char *paths[] = {csv, pickle};
  for (int i = 0; i < 2; i++) {
    ab_events_t back;
    ab_trace_info_t bi;
    REQUIRE_MSG(ab_trace_load(paths[i], NULL, &back, &bi, &d) == AB_OK, "%s: %s", strategy, d.msg);
    CHECK_MSG(ab_events_hash(&back) == ab_events_hash(es), "%s: %s reads back to other events", strategy, paths[i]);
    CHECK_EQ(back.ignored, 0);
    CHECK_EQ(bi.preexisting, 0);
    CHECK_EQ(bi.nstreams, in->nstreams);
    CHECK_EQ(bi.stream_values[bi.nstreams - 1], in->stream_values[in->nstreams - 1]);
    CHECK_EQ(bi.records, log.n);
    ab_events_free(&back);
  }
  ab_trace_log_free(&log);
  ab_run_release(&run);
}

static void adaptor_round_trip_through_both_formats(void) {
  /* Two streams, a free that completes later, the same address used twice. */
  static const char csv[] =
      "action,addr,size,stream,time_us\n"
      "alloc,4096,100,94000,1\n"
      "alloc,8192,3000000,0,1\n"
      "free_requested,4096,100,94000,2\n"
      "alloc,16384,50,0,3\n"
      "free_completed,4096,100,94000,4\n"
      "free_requested,8192,3000000,0,5\n"
      "free_completed,8192,3000000,0,6\n"
      "alloc,4096,10,94000,7\n"
      "free_requested,16384,50,0,8\n";
  const char *path = ab_test_write_file("rt_in.csv", csv, sizeof csv - 1);
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_trace_load(path, NULL, &es, &in, &d) == AB_OK, "%s", d.msg);
  size_t n;
  const ab_strategy_entry_t *all = ab_strategy_registry(&n);
  for (size_t i = 0; i < n; i++)
    if (!all[i].hidden) round_trip(&es, &in, all[i].name);
  ab_events_free(&es);
  REQUIRE_MSG(ab_trace_load(RECORDED "cnn_dyn.default.pickle.gz", NULL, &es, &in, &d) == AB_OK, "%s", d.msg);
  for (size_t i = 0; i < n; i++)
    if (!all[i].hidden) round_trip(&es, &in, all[i].name);
  ab_events_free(&es);
}

/* The records interleave as PyTorch's do, and an OOM is recorded with the free bytes. */
static void adaptor_records_in_pytorch_order(void) {
  ab_events_t es;
  ab_events_init(&es);
  uint32_t a = ab_events_alloc(&es, 1000, 0, AB_TAG_OTHER);
  ab_events_free_id(&es, a);
  ab_events_alloc(&es, 3ULL << 30, 0, AB_TAG_OTHER); /* over the budget */
  ab_diag_t d = {""};
  REQUIRE(ab_events_finish(&es, &d) == AB_OK);
  ab_device_t *dev;
  ab_strategy_t *s, *t;
  ab_device_config_t cfg = {.budget_bytes = 1ULL << 30};
  REQUIRE(ab_device_open("sim", &cfg, &dev, &d) == AB_OK);
  REQUIRE(ab_strategy_create("raw", dev, "", &s, &d) == AB_OK);
  ab_trace_log_t log;
  ab_trace_log_init(&log);
  REQUIRE(ab_adaptor_trace_create(s, &log, &t) == AB_OK);
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  ab_run_opts_t ro = ab_run_defaults();
  ro.on_oom = capture;
  CHECK(ab_engine_replay(&es, t, &ro, &run) == AB_OK);
  CHECK(run.status == AB_RUN_OOM);
  static const ab_trace_action_t want[] = {AB_TR_SEGMENT_ALLOC, AB_TR_ALLOC, AB_TR_FREE_REQUESTED,
                                           AB_TR_FREE_COMPLETED, AB_TR_SEGMENT_FREE, AB_TR_OOM};
  REQUIRE(log.n == sizeof want / sizeof want[0]);
  for (size_t i = 0; i < log.n; i++) CHECK_MSG(log.recs[i].action == want[i], "record %zu: %s", i, ab_trace_action_name((ab_trace_action_t)log.recs[i].action));
  CHECK(log.recs[0].addr == log.recs[1].addr && log.recs[0].bytes == 1000);
  CHECK(log.recs[5].bytes == 3ULL << 30 && log.recs[5].addr == 1ULL << 30); /* device_free: the whole budget */
  CHECK_EQ(log.nsegs, 0);
  CHECK(ab_adaptor_trace_capture(s) == AB_ERR_INVALID); /* not an adaptor */
  ab_strategy_destroy(t);
  CHECK(ab_device_close(dev, &d) == AB_OK);
  ab_trace_log_free(&log);
  ab_run_release(&run);
  ab_events_free(&es);
}

/* ---- what every format shares ------------------------------------------------------------ */

/* A CSV trace or RMM log with nothing to replay is refused, as an empty snapshot is: a run
 * of no events would report "ok". */
static void traces_with_nothing_to_replay_refused(void) {
  static const struct {
    const char *name, *text;
  } cases[] = {
      {"header.csv", "action,addr,size,stream,time_us\n"},
      {"segments.csv", "action,addr,size,stream,time_us\nsegment_alloc,4096,100,0,1\nsnapshot,0,0,0,2\n"},
      {"header.log", "Thread,Time,Action,Pointer,Size,Stream\n"},
      {"failures.log", "Thread,Time,Action,Pointer,Size,Stream\n1,0.1,allocate failure,(nil),100,0x0\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *path = ab_test_write_file(cases[i].name, cases[i].text, strlen(cases[i].text));
    ab_events_t es;
    ab_diag_t d = {""};
    CHECK_MSG(ab_trace_load(path, NULL, &es, NULL, &d) == AB_ERR_INVALID, "%s loaded", cases[i].name);
    CHECK_STR_CONTAINS(d.msg, "nothing to replay");
    CHECK_STR_CONTAINS(d.msg, cases[i].name);
  }
}

/* A gzip file that inflates far past what traces do is refused before it fills the memory;
 * a cap raised for it lets it through (input.h). */
static void gzip_bomb_refused_unless_allowed(void) {
#ifdef AB_HAVE_ZLIB
  /* A valid CSV trace: one allocation, then 100 MB of blank lines, which inflate 1000 times. */
  size_t plain_len = 100u << 20;
  char *plain = malloc(plain_len);
  REQUIRE(plain != NULL);
  memset(plain, '\n', plain_len);
  static const char head[] = "action,addr,size,stream,time_us\nalloc,4096,100,0,0\n";
  memcpy(plain, head, sizeof head - 1);
  uLongf gz_len = compressBound((uLong)plain_len) + 64;
  unsigned char *gz = malloc(gz_len);
  REQUIRE(gz != NULL);
  z_stream z;
  memset(&z, 0, sizeof z);
  REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  z.next_in = (Bytef *)plain;
  z.avail_in = (uInt)plain_len;
  z.next_out = gz;
  z.avail_out = (uInt)gz_len;
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  size_t len = z.total_out;
  deflateEnd(&z);
  free(plain);
  const char *path = ab_test_write_file("bomb.csv.gz", gz, len);
  free(gz);
  ab_events_t es;
  ab_diag_t d = {""};
  CHECK(ab_trace_load(path, NULL, &es, NULL, &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "inflate past 67108864");
  CHECK_STR_CONTAINS(d.msg, "--max-inflated");
  ab_trace_opts_t roomy = {.device = -1, .max_inflated = 200u << 20};
  REQUIRE_MSG(ab_trace_load(path, &roomy, &es, NULL, &d) == AB_OK, "%s", d.msg);
  CHECK_EQ(es.nids, 1);
  ab_events_free(&es);
  ab_trace_opts_t tight = {.device = -1, .max_inflated = 1u << 20};
  CHECK(ab_trace_load(path, &tight, &es, NULL, &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "past the 1048576 bytes allowed");
#else
  SKIP("no zlib in this build");
#endif
}

static const ab_test_t tests[] = {
    {"trace_refuses_what_it_does_not_recognise", trace_refuses_what_it_does_not_recognise},
    {"adaptor_records_in_pytorch_order", adaptor_records_in_pytorch_order},
    {"adaptor_round_trip_through_both_formats", adaptor_round_trip_through_both_formats},
    {"traces_with_nothing_to_replay_refused", traces_with_nothing_to_replay_refused},
    {"gzip_bomb_refused_unless_allowed", gzip_bomb_refused_unless_allowed},
};
AB_TEST_MAIN(tests)
