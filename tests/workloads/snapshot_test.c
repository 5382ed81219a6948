/* snapshot_test.c: PyTorch memory snapshots (workloads/traces/snapshot.h) read through the
 * trace loader: the recorded one equals its CSV trace, truncated or corrupt pickles are refused
 * with a message, never a crash, structure errors say where, and a trace that starts late
 * creates what existed before it (Note [Memory that existed before the trace]). */
#include <time.h>

#include "kernels/base/input.h"
#include "kernels/base/rng.h"
#include "tests/check.h"
#include "tests/pickle_bytes.h"
#include "workloads/traces/pickle.h"
#include "workloads/traces/snapshot.h"
#include "workloads/traces/trace.h"

#define RECORDED AB_TEST_DATA_DIR "/pytorch-2.11-h200/"

/* ---- snapshots: the recorded one --------------------------------------------------------- */

static void check_info_equal(const ab_trace_info_t *a, const ab_trace_info_t *b) {
  CHECK_EQ(a->records, b->records);
  CHECK_EQ(a->nactions, b->nactions);
  for (unsigned i = 0; i < a->nactions && i < b->nactions; i++) {
    CHECK_MSG(strcmp(a->actions[i].name, b->actions[i].name) == 0, "%s vs %s", a->actions[i].name, b->actions[i].name);
    CHECK_EQ(a->actions[i].count, b->actions[i].count);
  }
  CHECK_EQ(a->peak_requested, b->peak_requested);
  CHECK_EQ(a->reserved_peak, b->reserved_peak);
  CHECK_EQ(a->device_allocs, b->device_allocs);
}

static void snapshot_recorded_equals_its_csv(void) {
  ab_events_t pe, ce;
  ab_trace_info_t pi, ci;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_trace_load(RECORDED "cnn_dyn.default.pickle.gz", NULL, &pe, &pi, &d) == AB_OK, "%s", d.msg);
  REQUIRE_MSG(ab_trace_load(RECORDED "cnn_dyn.default.trace.csv.gz", NULL, &ce, &ci, &d) == AB_OK, "%s", d.msg);
  CHECK(strcmp(pi.format, "pytorch-snapshot") == 0 && strcmp(ci.format, "allocbench-csv") == 0);
  CHECK_EQ(pi.records, 56975);
  CHECK_EQ(pi.device, 0);
  CHECK_EQ(pe.n, ce.n);
  CHECK_EQ(pe.nids, ce.nids);
  CHECK_EQ(pe.nsegs, ce.nsegs);
  CHECK(ab_events_hash(&pe) == ab_events_hash(&ce));
  /* The same program, another process: the segment decisions match, the addresses differ. */
  for (size_t i = 0; i < pe.nsegs && i < ce.nsegs; i++)
    CHECK_MSG(pe.segs[i].action == ce.segs[i].action && pe.segs[i].bytes == ce.segs[i].bytes &&
                  pe.segs[i].at_event == ce.segs[i].at_event && pe.segs[i].stream == ce.segs[i].stream,
              "segment event %zu", i);
  check_info_equal(&pi, &ci);
  /* The snapshot's end state agrees with what the trace implies: nothing existed before. */
  CHECK_EQ(pi.preexisting, 0);
  CHECK_EQ(pi.reserved_start, 0);
  CHECK_EQ(pe.ignored, 0);
  uint64_t sum = 0;
  for (unsigned i = 0; i < pi.nactions; i++) sum += pi.actions[i].count;
  CHECK_EQ(sum, pi.records);
  /* The default run recorded its settings, all PyTorch's defaults. */
  CHECK_MSG(strcmp(pe.settings, "") == 0, "settings '%s'", pe.settings);
  ab_events_free(&pe);
  ab_events_free(&ce);
}

/* Every proper prefix of a pickle lacks its STOP: each must be refused, naming a byte. */
static void snapshot_truncated_anywhere_is_refused(void) {
  ab_input_t in;
  ab_diag_t d = {""};
  REQUIRE(ab_input_read(RECORDED "cnn_dyn.default.pickle.gz", &in, &d) == AB_OK);
  ab_rng_t rng = ab_rng_seed(3);
  for (int i = 0; i < 160; i++) {
    size_t len = i < 40 ? (size_t)i : i < 60 ? in.len - (size_t)(i - 39) : ab_rng_range(&rng, 0, in.len - 1);
    ab_pickle_t pk;
    d.msg[0] = '\0';
    ab_status st = ab_pickle_parse("F", in.data, len, &pk, &d);
    CHECK_MSG(st == AB_ERR_INVALID, "prefix of %zu bytes: %s", len, ab_strerror(st));
    CHECK_MSG(strncmp(d.msg, "F: byte ", 8) == 0, "prefix of %zu bytes: '%s'", len, d.msg);
  }
  ab_input_free(&in);
}

/* Corrupt bytes anywhere: refused with a message, or read; never a crash. */
static void snapshot_corrupt_bytes_never_crash(void) {
  ab_input_t in;
  ab_diag_t d = {""};
  REQUIRE(ab_input_read(RECORDED "cnn_dyn.default.pickle.gz", &in, &d) == AB_OK);
  ab_rng_t rng = ab_rng_seed(5);
  int refused = 0;
  for (int i = 0; i < 60; i++) {
    size_t at = ab_rng_range(&rng, 0, in.len - 1);
    char was = in.data[at];
    in.data[at] = (char)ab_rng_range(&rng, 0, 255);
    ab_events_t es;
    ab_events_init(&es);
    ab_trace_builder_t b;
    ab_trace_builder_init(&b, &es, "F", true);
    d.msg[0] = '\0';
    ab_status st = ab_snapshot_read("F", &in, -1, &b, &d);
    if (st == AB_OK)
      st = ab_trace_builder_finish(&b, &d);
    else
      ab_trace_builder_discard(&b);
    CHECK_MSG(st == AB_OK || (st == AB_ERR_INVALID && strncmp(d.msg, "F", 1) == 0 && d.msg[1] != '\0'),
              "byte %zu: %s '%s'", at, ab_strerror(st), d.msg);
    refused += st != AB_OK;
    ab_events_free(&es);
    in.data[at] = was;
  }
  CHECK(refused > 0);
  ab_input_free(&in);
}

/* ---- snapshots: structure ---------------------------------------------------------------- */

/* Writes a snapshot-shaped pickle: the caller's body between the outer dict's MARK and
 * SETITEMS. */
typedef void (*body_fn)(ab_pkw_t *w);

static const char *write_pickle(const char *name, body_fn body) {
  const char *path = ab_test_tmp_path(name);
  ab_pkw_t w;
  ab_diag_t d = {""};
  if (ab_pkw_open(&w, path, &d) != AB_OK) abort();
  body(&w);
  if (ab_pkw_close(&w, &d) != AB_OK) abort();
  return path;
}

static void key(ab_pkw_t *w, const char *k) { ab_pkw_str(w, k, strlen(k)); }

static void entry(ab_pkw_t *w, const char *action, uint64_t addr, uint64_t size, uint64_t stream) {
  ab_pkw_dict_begin(w);
  key(w, "action"), ab_pkw_str(w, action, strlen(action));
  key(w, strcmp(action, "oom") == 0 ? "device_free" : "addr"), ab_pkw_uint(w, addr);
  key(w, "size"), ab_pkw_uint(w, size);
  key(w, "stream"), ab_pkw_uint(w, stream);
  key(w, "time_us"), ab_pkw_uint(w, 1);
  ab_pkw_dict_end(w);
}

static void body_list_for_dict(ab_pkw_t *w) {
  ab_pkw_dict_begin(w);
  key(w, "device_traces");
  ab_pkw_list_begin(w);
  ab_pkw_list_begin(w);
  entry(w, "alloc", 4096, 100, 0);
  ab_pkw_list_begin(w); /* a list where an entry (a dict) belongs */
  ab_pkw_int(w, 1);
  ab_pkw_list_end(w);
  ab_pkw_list_end(w);
  ab_pkw_list_end(w);
  key(w, "segments");
  ab_pkw_list_begin(w);
  ab_pkw_list_end(w);
  ab_pkw_dict_end(w);
}

static void body_not_a_snapshot(ab_pkw_t *w) {
  ab_pkw_dict_begin(w);
  key(w, "a");
  ab_pkw_int(w, 1);
  ab_pkw_dict_end(w);
}

static void body_root_list(ab_pkw_t *w) {
  ab_pkw_list_begin(w);
  ab_pkw_int(w, 1);
  ab_pkw_list_end(w);
}

static void body_missing_addr(ab_pkw_t *w) {
  ab_pkw_dict_begin(w);
  key(w, "device_traces");
  ab_pkw_list_begin(w);
  ab_pkw_list_begin(w);
  ab_pkw_dict_begin(w);
  key(w, "action"), key(w, "alloc");
  key(w, "size"), ab_pkw_int(w, 8);
  ab_pkw_dict_end(w);
  ab_pkw_list_end(w);
  ab_pkw_list_end(w);
  ab_pkw_dict_end(w);
}

static void body_negative_size(ab_pkw_t *w) {
  ab_pkw_dict_begin(w);
  key(w, "device_traces");
  ab_pkw_list_begin(w);
  ab_pkw_list_begin(w);
  ab_pkw_dict_begin(w);
  key(w, "action"), key(w, "alloc");
  key(w, "addr"), ab_pkw_int(w, 4096);
  key(w, "size"), ab_pkw_int(w, -8);
  ab_pkw_dict_end(w);
  ab_pkw_list_end(w);
  ab_pkw_list_end(w);
  ab_pkw_dict_end(w);
}

static void body_segments_dict(ab_pkw_t *w) {
  ab_pkw_dict_begin(w);
  key(w, "device_traces");
  ab_pkw_list_begin(w);
  ab_pkw_list_end(w);
  key(w, "segments");
  ab_pkw_dict_begin(w);
  ab_pkw_dict_end(w);
  ab_pkw_dict_end(w);
}

static void body_empty(ab_pkw_t *w) {
  ab_pkw_dict_begin(w);
  key(w, "device_traces");
  ab_pkw_list_begin(w);
  ab_pkw_list_begin(w);
  ab_pkw_list_end(w);
  ab_pkw_list_end(w);
  key(w, "segments");
  ab_pkw_list_begin(w);
  ab_pkw_list_end(w);
  ab_pkw_dict_end(w);
}

static void snapshot_structure_errors_say_where(void) {
  static const struct {
    const char *name;
    body_fn body;
    const char *want;
  } cases[] = {
      {"list.pickle", body_list_for_dict, "device_traces[0][1]: expected a dict, got a list"},
      {"notsnap.pickle", body_not_a_snapshot, "not a PyTorch memory snapshot: the dict has neither"},
      {"rootlist.pickle", body_root_list, "not a PyTorch memory snapshot: expected a dict"},
      {"noaddr.pickle", body_missing_addr, "device_traces[0][0]: no 'addr' key in this dict"},
      {"negative.pickle", body_negative_size, "device_traces[0][0]['size']: expected a non-negative int"},
      {"segdict.pickle", body_segments_dict, "segments: expected a list, got a dict"},
      {"empty.pickle", body_empty, "holds nothing to replay on device 0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *path = write_pickle(cases[i].name, cases[i].body);
    ab_events_t es;
    ab_diag_t d = {""};
    CHECK_MSG(ab_trace_load(path, NULL, &es, NULL, &d) == AB_ERR_INVALID, "%s loaded", cases[i].name);
    CHECK_STR_CONTAINS(d.msg, cases[i].want);
    CHECK_STR_CONTAINS(d.msg, path);
    if (i < 6) CHECK_STR_CONTAINS(d.msg, ": byte ");
  }
  /* A device that is not in the snapshot. */
  ab_events_t es;
  ab_diag_t d = {""};
  ab_trace_opts_t opts = {.device = 3};
  const char *path = write_pickle("dev.pickle", body_list_for_dict);
  CHECK(ab_trace_load(path, &opts, &es, NULL, &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "no device 3: the snapshot traces 1 device (0 to 0)");
}

/* Note [Memory that existed before the trace], on a snapshot whose trace starts late. */
static void body_late_start(ab_pkw_t *w) {
  ab_pkw_dict_begin(w);
  key(w, "device_traces");
  ab_pkw_list_begin(w);
  ab_pkw_list_begin(w); /* device 0: empty */
  ab_pkw_list_end(w);
  ab_pkw_list_begin(w); /* device 1 */
  entry(w, "free_requested", 0x9000, 300, 7); /* live before: freed in the trace */
  entry(w, "alloc", 0x1000, 50, 7);
  entry(w, "free_completed", 0x9000, 300, 7);
  entry(w, "free_completed", 0x5000, 200, 7); /* its free was requested before the trace */
  entry(w, "free_completed", 0x9000, 300, 7); /* already freed: ignored */
  entry(w, "snapshot", 0, 0, 0);
  entry(w, "oom", 123, 4096, 7);
  entry(w, "segment_free", 0x100000, 1 << 20, 7);
  ab_pkw_list_end(w);
  ab_pkw_list_end(w);
  key(w, "segments");
  ab_pkw_list_begin(w);
  const struct {
    uint64_t addr, size, requested;
    const char *state;
  } blocks[] = {{0x1000, 512, 50, "active_allocated"},   /* allocated in the trace */
                {0x1200, 512, 40, "active_allocated"},   /* never in the trace: live before */
                {0x1400, 1024, 64, "active_pending_free"}, /* the same, awaiting its free */
                {0x1800, 0x800, 0, "inactive"}};
  ab_pkw_dict_begin(w);
  key(w, "device"), ab_pkw_int(w, 1);
  key(w, "address"), ab_pkw_int(w, 0x1000);
  key(w, "total_size"), ab_pkw_int(w, 0x1000);
  key(w, "stream"), ab_pkw_int(w, 7);
  key(w, "is_expandable"), ab_pkw_bool(w, false);
  key(w, "blocks");
  ab_pkw_list_begin(w);
  for (size_t i = 0; i < 4; i++) {
    ab_pkw_dict_begin(w);
    key(w, "size"), ab_pkw_uint(w, blocks[i].size);
    key(w, "requested_size"), ab_pkw_uint(w, blocks[i].requested);
    key(w, "state"), key(w, blocks[i].state);
    ab_pkw_dict_end(w);
  }
  ab_pkw_list_end(w);
  ab_pkw_dict_end(w);
  ab_pkw_list_end(w);
  key(w, "allocator_settings");
  ab_pkw_dict_begin(w);
  key(w, "PYTORCH_CUDA_ALLOC_CONF"), key(w, "max_split_size_mb:128,garbage_collection_threshold:0.6");
  key(w, "max_split_size"), ab_pkw_int(w, 128 << 20);
  key(w, "garbage_collection_threshold"), ab_pkw_float(w, 0.6);
  key(w, "expandable_segments"), ab_pkw_bool(w, false);
  key(w, "roundup_power2_divisions");
  ab_pkw_dict_begin(w);
  for (int i = 0; i < 16; i++) {
    char k[8];
    snprintf(k, sizeof k, "%d", 1 << i);
    key(w, k), ab_pkw_int(w, i < 8 ? 4 : 8);
  }
  ab_pkw_dict_end(w);
  ab_pkw_dict_end(w);
  ab_pkw_dict_end(w);
}

static void snapshot_late_start_creates_what_existed(void) {
  const char *path = write_pickle("late.pickle", body_late_start);
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_trace_load(path, NULL, &es, &in, &d) == AB_OK, "%s", d.msg);
  CHECK_EQ(in.device, 1);
  CHECK_EQ(in.ndevices, 2);
  CHECK_EQ(in.records, 8);
  CHECK_EQ(in.preexisting, 4);
  CHECK_EQ(es.ignored, 1);
  CHECK_EQ(es.trace_ooms, 1);
  CHECK(strcmp(es.settings,
               "max_split_size_mb:128,garbage_collection_threshold:0.6,roundup_power2_divisions:[1:4,2:4,4:4,8:4,16:4,"
               "32:4,64:4,128:4,256:8,512:8,1024:8,2048:8,4096:8,8192:8,16384:8,32768:8]") == 0);
  /* Created at the start in address order: 0x1200 (40), 0x1400 (64, pending), 0x5000 (200,
   * pending), 0x9000 (300); then the trace. */
  static const struct {
    uint8_t kind, aux;
    uint32_t id;
    uint64_t bytes;
  } want[] = {
      {AB_EV_ALLOC, 0, 0, 40},  {AB_EV_ALLOC, 0, 1, 64},           {AB_EV_FREE, AB_FREE_REQUEST, 1, 64},
      {AB_EV_ALLOC, 0, 2, 200}, {AB_EV_FREE, AB_FREE_REQUEST, 2, 200}, {AB_EV_ALLOC, 0, 3, 300},
      {AB_EV_FREE, AB_FREE_REQUEST, 3, 300}, {AB_EV_ALLOC, 0, 4, 50}, {AB_EV_FREE, AB_FREE_COMPLETE, 3, 300},
      {AB_EV_FREE, AB_FREE_COMPLETE, 2, 200},
      /* No alloc after the oom: the program ended on that request, which is replayed
       * (Note [A trace that ends in an OOM]); no new segment after the segment_free: the program's
       * empty_cache (Note [Pools of a trace], rule 3). */
      {AB_EV_ALLOC, 0, 5, 4096}, {AB_EV_EMPTY_CACHE, 0, 0, 0},
  };
  REQUIRE(es.n == sizeof want / sizeof want[0]);
  for (size_t i = 0; i < es.n; i++) {
    CHECK_MSG(es.ev[i].kind == want[i].kind && es.ev[i].id == want[i].id && es.ev[i].bytes == want[i].bytes &&
                  (want[i].kind != AB_EV_FREE || es.ev[i].aux == want[i].aux),
              "event %zu: kind %u id %u bytes %llu aux %u", i, es.ev[i].kind, es.ev[i].id,
              (unsigned long long)es.ev[i].bytes, es.ev[i].aux);
  }
  /* The segment freed in the trace existed before it: the end state (4 KiB) plus the freed MiB. */
  CHECK_EQ(in.reserved_start, 0x1000 + (1 << 20));
  CHECK_EQ(in.reserved_peak, 0x1000 + (1 << 20));
  CHECK_EQ(in.reserved_end, 0x1000);
  CHECK_EQ(in.segments_start, 2);
  CHECK_EQ(in.segments_end, 1);
  CHECK_EQ(in.nstreams, 1);
  CHECK_EQ(in.stream_values[0], 7);
  ab_events_free(&es);
}

/* ---- snapshots: work linear in the file (pickle.h, Note [Dict lookups]; snapshot.c, Note
 * [Reading in linear time]) --------------------------------------------------------------- */

/* A snapshot whose `entries` trace entries are one memoised dict: free_completed of one
 * address, then `junk` more entries under one junk key, after the keys a reader looks up;
 * the lookups of the absent 'stream' pass them all. In the reader before indexes, each
 * lookup scanned the dict from its end. */
static ab_pb_t shared_dict_snapshot(uint32_t junk, uint32_t entries) {
  ab_pb_t b = {NULL, 0, 0};
  ab_pb_put(&b, "\x80\x04}(", 4); /* PROTO 4, EMPTY_DICT, MARK */
  ab_pb_str(&b, "device_traces");
  ab_pb_put(&b, "](](", 4); /* the list of devices, device 0's entries */
  ab_pb_put(&b, "}q\x00(", 4); /* EMPTY_DICT, BINPUT 0, MARK */
  ab_pb_str(&b, "action");
  ab_pb_str(&b, "free_completed");
  ab_pb_str(&b, "addr");
  ab_pb_op_u32(&b, 'J', 4096); /* BININT */
  ab_pb_str(&b, "size");
  ab_pb_op_u32(&b, 'J', 512);
  ab_pb_str(&b, "junk");
  ab_pb_put(&b, "q\x01N" "q\x02", 5); /* BINPUT 1, None, BINPUT 2 */
  for (uint32_t i = 1; i < junk; i++) ab_pb_put(&b, "h\x01h\x02", 4); /* BINGET 1, BINGET 2: 4 bytes an entry */
  ab_pb_op(&b, 'u'); /* SETITEMS: the dict */
  for (uint32_t i = 1; i < entries; i++) ab_pb_put(&b, "h\x00", 2);
  ab_pb_put(&b, "eeu.", 4); /* APPENDS, APPENDS, SETITEMS, STOP */
  return b;
}

/* CPU time, so that a busy machine does not fail the test. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void snapshot_shared_dict_reads_in_linear_time(void) {
  /* About 1 MB: 200 000 junk entries (4 bytes each), 100 000 references to the dict. */
  ab_pb_t b = shared_dict_snapshot(200000, 100000);
  ab_input_t in = {b.p, b.n};
  ab_events_t es;
  ab_trace_info_t info;
  ab_diag_t d = {""};
  double t0 = now_s();
  ab_status st = ab_trace_parse("crafted", &in, NULL, &es, &info, &d);
  double secs = now_s() - t0;
  REQUIRE_MSG(st == AB_OK, "%s", d.msg);
  printf("  a %.2f MB snapshot, one dict of 200 000 entries shared by 100 000 trace entries: read in %.3f s of CPU\n",
         (double)b.n / 1e6, secs);
  CHECK_EQ(info.records, 100000);
  CHECK_EQ(info.preexisting, 1); /* the address freed first existed before the trace */
  CHECK_EQ(es.ignored, 99999);   /* and every later free of it matches nothing */
  /* A lookup that scaled with the dict would make 2 * 10^10 steps here: minutes, not the
   * second or two a linear read takes even under the sanitizers. */
  CHECK_MSG(secs < 5.0, "%.2f s: lookups still scale with the dict", secs);
  ab_events_free(&es);
  free(b.p);
}

/* Segments that all name one list of blocks: refused once the items visited pass the file's
 * bytes, before the records built from them fill the memory. */
static void snapshot_shared_blocks_are_refused(void) {
  ab_pb_t b = {NULL, 0, 0};
  ab_pb_put(&b, "\x80\x04}(", 4);
  ab_pb_str(&b, "segments");
  ab_pb_op(&b, ']');
  ab_pb_op(&b, '(');
  ab_pb_op(&b, '}');
  ab_pb_op_u32(&b, AB_PB_LONG_BINPUT, 0);
  ab_pb_op(&b, '(');
  ab_pb_str(&b, "address");
  ab_pb_op_u32(&b, 'J', 1 << 20);
  ab_pb_str(&b, "total_size");
  ab_pb_op_u32(&b, 'J', 1 << 30);
  ab_pb_str(&b, "blocks");
  ab_pb_op(&b, ']');
  ab_pb_op(&b, '(');
  ab_pb_op(&b, '}');
  ab_pb_op_u32(&b, AB_PB_LONG_BINPUT, 1);
  ab_pb_op(&b, '(');
  ab_pb_str(&b, "size");
  ab_pb_op_u32(&b, 'J', 4096);
  ab_pb_str(&b, "state");
  ab_pb_str(&b, "inactive");
  ab_pb_op(&b, 'u');
  for (int i = 1; i < 20000; i++) ab_pb_op_u32(&b, AB_PB_LONG_BINGET, 1);
  ab_pb_op(&b, 'e'); /* APPENDS: the blocks */
  ab_pb_op(&b, 'u'); /* SETITEMS: the segment */
  for (int i = 1; i < 20000; i++) ab_pb_op_u32(&b, AB_PB_LONG_BINGET, 0);
  ab_pb_put(&b, "eu.", 3);
  ab_input_t in = {b.p, b.n};
  ab_events_t es;
  ab_diag_t d = {""};
  double t0 = now_s();
  CHECK(ab_trace_parse("shared", &in, NULL, &es, NULL, &d) == AB_ERR_INVALID);
  CHECK_MSG(strstr(d.msg, "shared: byte ") == d.msg && strstr(d.msg, "more items than"), "%s", d.msg);
  CHECK_MSG(now_s() - t0 < 1.0, "%.2f s to refuse", now_s() - t0);
  free(b.p);
}

static const ab_test_t tests[] = {
    {"snapshot_recorded_equals_its_csv", snapshot_recorded_equals_its_csv},
    {"snapshot_truncated_anywhere_is_refused", snapshot_truncated_anywhere_is_refused},
    {"snapshot_corrupt_bytes_never_crash", snapshot_corrupt_bytes_never_crash},
    {"snapshot_structure_errors_say_where", snapshot_structure_errors_say_where},
    {"snapshot_late_start_creates_what_existed", snapshot_late_start_creates_what_existed},
    {"snapshot_shared_dict_reads_in_linear_time", snapshot_shared_dict_reads_in_linear_time},
    {"snapshot_shared_blocks_are_refused", snapshot_shared_blocks_are_refused},
};
AB_TEST_MAIN(tests)
