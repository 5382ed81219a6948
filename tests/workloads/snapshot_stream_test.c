/* snapshot_stream_test.c: the streaming snapshot reader (snapshot_stream.c) against the tree
 * reader it stands in for (ab_snapshot_read): the same events, info, settings and call stacks
 * for every fixture and for the exports of the bench workloads, with and without stack frames,
 * read without falling back; shapes it does not stream (shared entries, a pickle made with the
 * DICT and LIST opcodes) read whole, with the tree reader's result; errors those of the tree
 * reader, word for word, malformed frames among them; each allocation's stack as PyTorch
 * recorded it, its frames shared the ways PyTorch shares them; and a stream that holds far
 * less than the file in memory. */
#include <dirent.h>
#include <sys/resource.h>
#ifdef AB_HAVE_ZLIB
#include <zlib.h>
#endif

#include "kernels/base/input.h"
#include "tests/check.h"
#include "tests/pickle_bytes.h"
#include "tests/snapshot_frames.h"
#include "workloads/traces/snapshot.h"
#include "workloads/traces/trace.h"

#define RECORDED AB_TEST_DATA_DIR "/pytorch-2.11-h200/"
#define SEEDS AB_SOURCE_DIR "/tests/fuzz/corpus/snapshot/"

/* The trace as the tree reader reads it: the whole file, parsed into a tree. */
static ab_status read_tree(const char *path, const ab_input_t *in, ab_events_t *es, ab_trace_info_t *info,
                           ab_diag_t *d) {
  ab_events_init(es);
  ab_trace_builder_t b;
  ab_trace_builder_init(&b, es, path, true);
  ab_status st = ab_snapshot_read(path, in, -1, &b, d);
  if (st == AB_OK) st = ab_trace_builder_finish(&b, d);
  else ab_trace_builder_discard(&b);
  if (st == AB_OK && info) *info = b.info;
  if (st != AB_OK) ab_events_free(es);
  return st;
}

static void check_same(const char *path, const ab_events_t *a, const ab_trace_info_t *ai, const ab_events_t *b,
                       const ab_trace_info_t *bi) {
  CHECK_MSG(ab_events_hash(a) == ab_events_hash(b), "%s: the event hashes differ", path);
  CHECK_EQ(a->n, b->n);
  CHECK_EQ(a->nsegs, b->nsegs);
  CHECK_EQ(a->ignored, b->ignored);
  CHECK_EQ(a->trace_ooms, b->trace_ooms);
  CHECK_MSG(strcmp(a->settings, b->settings) == 0, "%s: settings '%s' vs '%s'", path, a->settings, b->settings);
  CHECK_EQ(ai->records, bi->records);
  CHECK_EQ(ai->device, bi->device);
  CHECK_EQ(ai->ndevices, bi->ndevices);
  CHECK_EQ(ai->nactions, bi->nactions);
  for (unsigned i = 0; i < ai->nactions && i < bi->nactions; i++) {
    CHECK(strcmp(ai->actions[i].name, bi->actions[i].name) == 0);
    CHECK_EQ(ai->actions[i].count, bi->actions[i].count);
  }
  CHECK_EQ(ai->nstreams, bi->nstreams);
  CHECK_EQ(ai->preexisting, bi->preexisting);
  CHECK_EQ(ai->peak_requested, bi->peak_requested);
  CHECK_EQ(ai->reserved_start, bi->reserved_start);
  CHECK_EQ(ai->reserved_end, bi->reserved_end);
  CHECK_EQ(ai->segments_end, bi->segments_end);
  CHECK_EQ(ai->end_state, bi->end_state);
  char why[256] = "";
  CHECK_MSG(ab_stacks_same(a->stacks, b->stacks, why, sizeof why), "%s: the stacks differ: %s", path, why);
}

/* Reads path both ways and compares; *reread says whether the stream fell back. */
static void both_ways(const char *path, bool *reread) {
  ab_diag_t d = {""};
  ab_input_t in;
  REQUIRE_MSG(ab_input_read(path, &in, &d) == AB_OK, "%s", d.msg);
  ab_events_t tree, stream;
  ab_trace_info_t ti, si;
  ab_status st = read_tree(path, &in, &tree, &ti, &d);
  ab_input_free(&in);
  REQUIRE_MSG(st == AB_OK, "%s", d.msg);
  REQUIRE_MSG(ab_trace_load(path, NULL, &stream, &si, &d) == AB_OK, "%s", d.msg);
  check_same(path, &tree, &ti, &stream, &si);
  *reread = si.reread;
  ab_events_free(&tree);
  ab_events_free(&stream);
}

/* Every recorded snapshot in tests/data: the same as the tree reader's, streamed. */
static void fixtures_read_the_same_streamed(void) {
  const char *dirs[] = {RECORDED, RECORDED "pools/", RECORDED "frames/"};
  size_t seen = 0;
  for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++) {
    DIR *dir = opendir(dirs[k]);
    for (struct dirent *e; dir && (e = readdir(dir)) != NULL;) {
      if (strstr(e->d_name, ".pickle") == NULL) continue;
      char path[1024];
      snprintf(path, sizeof path, "%s%s", dirs[k], e->d_name);
      bool reread = true;
      both_ways(path, &reread);
      CHECK_MSG(!reread, "%s: read again whole", path);
      seen++;
    }
    if (dir) closedir(dir);
  }
  CHECK_MSG(seen >= 2, "%zu snapshots at %s", seen, RECORDED);
}

/* The bench workloads' runs exported as snapshots (as `replay --export-snapshot` writes them),
 * bare and with stack frames shared the way PyTorch shares them. */
static void exports_read_the_same_streamed(void) {
  const char *specs[] = {"dynamic-shapes:steps=3", "mixed-precision:steps=2", "zero:steps=2", "random:ops=20000",
                         "fragmenter"};
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
    for (int frames = 0; frames < 2; frames++) {
      ab_diag_t d = {""};
      char name[64]; /* a file read is an input: never written over (output.h) */
      snprintf(name, sizeof name, "export_%zu_%d.pickle", i, frames);
      const char *path = ab_test_tmp_path(name);
      size_t records = 0;
      REQUIRE_MSG(ab_frames_export(specs[i], frames, path, &records, &d) == AB_OK, "%s: %s", specs[i], d.msg);
      CHECK(records > 0);
      bool reread = true;
      both_ways(path, &reread);
      CHECK_MSG(!reread, "%s%s: read again whole", specs[i], frames ? " with frames" : "");
      /* Every alloc the export wrote has its frames; none without them. */
      ab_events_t es;
      REQUIRE_MSG(ab_trace_load(path, NULL, &es, NULL, &d) == AB_OK, "%s", d.msg);
      CHECK_MSG((es.stacks != NULL) == (frames == 1), "%s: stacks %p", specs[i], (void *)es.stacks);
      for (uint32_t id = 0; es.stacks && id < es.nids; id++) {
        const uint32_t *fr = NULL;
        uint32_t n = ab_stacks_frames(es.stacks, ab_stacks_of(es.stacks, id), &fr);
        CHECK_MSG(n == 0 || (n >= 4 && n <= 12), "%s: allocation %u has %u frames", specs[i], id, n);
      }
      ab_events_free(&es);
    }
}

/* ---- shapes read whole -------------------------------------------------------------------- */

static void put_entry_items(ab_pb_t *b, const char *action, uint32_t addr) {
  ab_pb_str(b, "action");
  ab_pb_str(b, action);
  ab_pb_str(b, "addr");
  ab_pb_op_u32(b, 0x4a, addr); /* BININT */
  ab_pb_str(b, "size");
  ab_pb_op_u32(b, 0x4a, 512);
}

/* {'device_traces': [[e0, e1, ...]]} with the entries written by `entries`. */
static const char *snapshot_with(const char *name, void (*entries)(ab_pb_t *b)) {
  ab_pb_t b = {0};
  static const unsigned char head[] = {0x80, 4, 0x7d, 0x28}; /* PROTO 4, EMPTY_DICT, MARK */
  ab_pb_put(&b, head, sizeof head);
  ab_pb_str(&b, "device_traces");
  ab_pb_op(&b, 0x5d); /* EMPTY_LIST: device_traces */
  ab_pb_op(&b, 0x5d); /* EMPTY_LIST: device 0 */
  ab_pb_op(&b, 0x28);
  entries(&b);
  ab_pb_op(&b, 0x65); /* APPENDS */
  ab_pb_op(&b, 0x61); /* APPEND: device 0 to device_traces */
  ab_pb_op(&b, 0x75); /* SETITEMS */
  ab_pb_op(&b, 0x2e); /* STOP */
  const char *path = ab_test_write_file(name, b.p, b.n);
  free(b.p);
  return path;
}

/* An alloc entry memoised and appended again after its free: shared, so the tree decides. */
static void shared_entries(ab_pb_t *b) {
  ab_pb_op(b, 0x7d);
  ab_pb_op(b, 0x28);
  put_entry_items(b, "alloc", 4096);
  ab_pb_op(b, 0x75);
  ab_pb_op_u32(b, AB_PB_LONG_BINPUT, 100);
  ab_pb_op(b, 0x7d);
  ab_pb_op(b, 0x28);
  put_entry_items(b, "free_completed", 4096);
  ab_pb_op(b, 0x75);
  ab_pb_op_u32(b, AB_PB_LONG_BINGET, 100);
}

/* Entries made with MARK ... DICT, which no pickler of snapshots writes. */
static void dict_opcode_entries(ab_pb_t *b) {
  for (uint32_t i = 0; i < 3; i++) {
    ab_pb_op(b, 0x28);
    put_entry_items(b, "alloc", 4096 * (i + 1));
    ab_pb_op(b, 0x64); /* DICT */
  }
}

/* Python's single-item forms: entries with one SETITEM each and a trailing SETITEM. */
static void single_item_entries(ab_pb_t *b) {
  for (uint32_t i = 0; i < 3; i++) {
    ab_pb_op(b, 0x7d);
    ab_pb_op(b, 0x94); /* MEMOIZE */
    ab_pb_str(b, "action");
    ab_pb_str(b, "alloc");
    ab_pb_op(b, 0x73); /* SETITEM */
    ab_pb_op(b, 0x28);
    ab_pb_str(b, "addr");
    ab_pb_op_u32(b, 0x4a, 8192 * (i + 1));
    ab_pb_str(b, "size");
    ab_pb_op_u32(b, 0x4a, 100);
    ab_pb_op(b, 0x75);
  }
}

static void shapes(void) {
  struct {
    const char *name;
    void (*entries)(ab_pb_t *b);
    bool reread;
  } cases[] = {{"shared.pickle", shared_entries, true},
               {"dict_opcode.pickle", dict_opcode_entries, true},
               {"single_items.pickle", single_item_entries, false}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    bool reread = !cases[i].reread;
    both_ways(snapshot_with(cases[i].name, cases[i].entries), &reread);
    CHECK_MSG(reread == cases[i].reread, "%s: read again whole: %d", cases[i].name, reread);
  }
  /* Pickled by CPython (the fuzz seeds): single APPEND and SETITEM, batches of 1000 and one
   * more, two devices, settings with divisions, streamed; an entry shared, read whole. */
  struct {
    const char *path;
    bool reread;
  } seeds[] = {{SEEDS "stream_single_items.pickle", false},
               {SEEDS "stream_batches.pickle", false},
               {SEEDS "stream_shared_entry.pickle", true}};
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
    bool reread = !seeds[i].reread;
    both_ways(seeds[i].path, &reread);
    CHECK_MSG(reread == seeds[i].reread, "%s: read again whole: %d", seeds[i].path, reread);
  }
}

/* ---- errors ------------------------------------------------------------------------------------ */

/* A fixture cut short at several places, and bytes of it changed: the stream's message is
 * the tree reader's (or the tree accepts what the stream accepts). */
static void errors_are_the_tree_readers(void) {
  ab_diag_t d = {""};
  const char *path = ab_test_tmp_path("export.pickle");
  REQUIRE_MSG(ab_frames_export("random:ops=3000", true, path, NULL, &d) == AB_OK, "%s", d.msg);
  ab_input_t in;
  REQUIRE_MSG(ab_input_read(path, &in, &d) == AB_OK, "%s", d.msg);
  size_t tried = 0;
  for (size_t cut = 1; cut < in.len; cut = cut * 3 / 2 + 1) {
    for (int flip = 0; flip < 2; flip++) {
      ab_input_t part = {in.data, flip ? in.len : cut};
      char saved = in.data[cut];
      if (flip) in.data[cut] = (char)(in.data[cut] ^ 0x5a);
      ab_events_t a, b;
      ab_diag_t da = {""}, db = {""};
      ab_status sa = read_tree("cut", &part, &a, NULL, &da), sb = ab_trace_parse("cut", &part, NULL, &b, NULL, &db);
      in.data[cut] = saved;
      CHECK_MSG(sa == sb, "cut at %zu (flip %d): tree %d, stream %d (%s / %s)", cut, flip, sa, sb, da.msg, db.msg);
      if (sa != AB_OK && sb != AB_OK) CHECK_MSG(strcmp(da.msg, db.msg) == 0, "'%s' vs '%s'", da.msg, db.msg);
      if (sa == AB_OK && sb == AB_OK) {
        CHECK(ab_events_hash(&a) == ab_events_hash(&b));
        ab_events_free(&a);
        ab_events_free(&b);
      } else {
        if (sa == AB_OK) ab_events_free(&a);
        if (sb == AB_OK) ab_events_free(&b);
      }
      tried++;
    }
  }
  CHECK(tried > 20);
  ab_input_free(&in);
}

/* ---- stacks ------------------------------------------------------------------------------------- */

/* Allocation id's frames as "file:line name" innermost first, joined by " | "; "" for none. */
static const char *stack_text(const ab_events_t *es, uint32_t id) {
  static char out[1024];
  out[0] = '\0';
  const uint32_t *fr = NULL;
  uint32_t n = ab_stacks_frames(es->stacks, ab_stacks_of(es->stacks, id), &fr);
  for (uint32_t k = 0; k < n; k++) {
    const ab_frame_t *f = &es->stacks->frame[fr[k]];
    size_t used = strlen(out);
    snprintf(out + used, sizeof out - used, "%s%s:%u %s", k ? " | " : "", ab_stacks_text(es->stacks, f->file), f->line,
             ab_stacks_text(es->stacks, f->name));
  }
  return out;
}

/* A snapshot pickled by CPython as PyTorch's frames are shared (tests/fuzz/corpus/snapshot,
 * stream_frames*.pickle): one dict per distinct frame, one list per traceback, named by a
 * segment, its block, a segment_alloc, an alloc and its frees; a frame with line 0, one with
 * line -1; an alloc with no frames, one with an empty list; frees whose frames are no list of
 * frames (not read). Each allocation's stack, both readers, streamed, in protocols 4 and 2. */
static void stacks_as_pytorch_shares_them(void) {
  const char *seeds[] = {SEEDS "stream_frames.pickle", SEEDS "stream_frames_p2.pickle"};
  static const char *const want[] = {
      "/m/model.py:10 forward | /m/train.py:42 step | /m/train.py:7 main",
      "/m/train.py:42 step | /m/train.py:7 main",
      "??:0 at::native::empty_cuda | /m/model.py:10 forward | /m/run.py:0 <module>",
      "",
      "",
      "/m/train.py:42 step | /m/train.py:7 main"};
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
    bool reread = true;
    both_ways(seeds[i], &reread);
    CHECK_MSG(!reread, "%s: read again whole", seeds[i]);
    ab_events_t es;
    ab_diag_t d = {""};
    REQUIRE_MSG(ab_trace_load(seeds[i], NULL, &es, NULL, &d) == AB_OK, "%s", d.msg);
    REQUIRE(es.stacks != NULL);
    CHECK_EQ(es.nids, 6u);
    for (uint32_t id = 0; id < es.nids && id < 6; id++)
      CHECK_MSG(strcmp(stack_text(&es, id), want[id]) == 0, "%s: allocation %u: '%s'", seeds[i], id, stack_text(&es, id));
    CHECK_EQ(es.stacks->nframes, 5u);
    CHECK_EQ(es.stacks->nstacks, 4u); /* the empty stack and three */
    CHECK_EQ(ab_stacks_of(es.stacks, 1), ab_stacks_of(es.stacks, 5)); /* one list, named twice */
    ab_events_free(&es);
  }
  /* The recorded snapshots name no frames: no stacks. */
  ab_events_t es;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_trace_load(RECORDED "cnn_dyn.default.pickle.gz", NULL, &es, NULL, &d) == AB_OK, "%s", d.msg);
  CHECK(es.stacks == NULL);
  ab_events_free(&es);
}

/* The snapshots PyTorch recorded with stacks (tests/data/pytorch-2.11-h200/frames): as many
 * allocations with a stack as the files hold allocs with frames, each ending in the program's
 * <module> (Python) or starting in the unwinder (all, C++ frames of line 0 first). */
static void recorded_stacks(void) {
  struct {
    const char *file;
    uint32_t stacked, first_line;
    const char *first, *last; /* the innermost frame's name; the outermost's, NULL: any */
  } cases[] = {{RECORDED "frames/python.pickle.gz", 3314, UINT32_MAX, NULL, "/tmp/g.py <module>"},
               {RECORDED "frames/all.pickle.gz", 852, 0, "torch::unwind::unwind()", NULL}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ab_events_t es;
    ab_diag_t d = {""};
    REQUIRE_MSG(ab_trace_load(cases[i].file, NULL, &es, NULL, &d) == AB_OK, "%s", d.msg);
    REQUIRE(es.stacks != NULL);
    uint32_t stacked = 0;
    for (uint32_t id = 0; id < es.nids; id++) {
      const uint32_t *fr = NULL;
      uint32_t n = ab_stacks_frames(es.stacks, ab_stacks_of(es.stacks, id), &fr);
      if (n == 0) continue;
      stacked++;
      const ab_frame_t *in = &es.stacks->frame[fr[0]], *out = &es.stacks->frame[fr[n - 1]];
      char last[512];
      snprintf(last, sizeof last, "%s %s", ab_stacks_text(es.stacks, out->file), ab_stacks_text(es.stacks, out->name));
      if (cases[i].last) CHECK_MSG(strcmp(last, cases[i].last) == 0, "%s: allocation %u ends in %s", cases[i].file, id, last);
      if (cases[i].first) CHECK(strcmp(ab_stacks_text(es.stacks, in->name), cases[i].first) == 0);
      if (cases[i].first_line != UINT32_MAX) CHECK_EQ(in->line, cases[i].first_line);
    }
    CHECK_MSG(stacked == cases[i].stacked, "%s: %u allocations with a stack", cases[i].file, stacked);
    ab_events_free(&es);
  }
}

/* A trace with stacks, replayed and exported as `replay --export-snapshot` writes it, keeps
 * them: read back, the same events, each allocation the same stack under the same numbers. */
static void stacks_written_back(void) {
  ab_diag_t d = {""};
  const char *framed = ab_test_tmp_path("to_write_back.pickle");
  REQUIRE_MSG(ab_frames_export("random:ops=20000", true, framed, NULL, &d) == AB_OK, "%s", d.msg);
  const char *inputs[] = {SEEDS "stream_frames.pickle", framed};
  for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
    ab_events_t es, back;
    REQUIRE_MSG(ab_trace_load(inputs[i], NULL, &es, NULL, &d) == AB_OK, "%s", d.msg);
    const char *path = ab_test_tmp_path(i ? "written_back_1.pickle" : "written_back_0.pickle");
    REQUIRE_MSG(ab_frames_write_back(&es, path, &d) == AB_OK, "%s", d.msg);
    REQUIRE_MSG(ab_trace_load(path, NULL, &back, NULL, &d) == AB_OK, "%s", d.msg);
    CHECK_MSG(ab_events_hash(&es) == ab_events_hash(&back), "%s: the events differ", inputs[i]);
    char why[256] = "";
    CHECK_MSG(ab_stacks_same(es.stacks, back.stacks, why, sizeof why), "%s: %s", inputs[i], why);
    CHECK(back.stacks != NULL);
    bool reread = true;
    both_ways(path, &reread);
    CHECK(!reread);
    ab_events_free(&es);
    ab_events_free(&back);
  }
}

/* What a malformed frame in the test snapshot below is. */
enum { BAD_NONE, BAD_NOT_LIST, BAD_NOT_DICT, BAD_NO_LINE, BAD_LINE_STR, BAD_FILE_NONE, BAD_COUNT };

/* Two allocs and the free of the first, the second's frames malformed as `bad` says (the free's
 * instead when on_free), into *out (NULL when it could not be written). */
static void bad_frames_snapshot(int bad, bool on_free, const char **out) {
  char name[64];
  snprintf(name, sizeof name, "bad_frames_%d_%d.pickle", bad, on_free);
  const char *path = ab_test_tmp_path(name);
  *out = NULL;
  ab_pkw_t w;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_pkw_open(&w, path, &d) == AB_OK, "%s", d.msg);
  ab_pkw_dict_begin(&w);
  ab_pkw_name(&w, "device_traces");
  ab_pkw_list_begin(&w);
  ab_pkw_list_begin(&w);
  for (int i = 0; i < 3; i++) {
    bool malformed = on_free ? i == 2 : i == 1;
    ab_pkw_dict_begin(&w);
    ab_pkw_name(&w, "action");
    ab_pkw_name(&w, i == 2 ? "free_completed" : "alloc");
    ab_pkw_name(&w, "addr");
    ab_pkw_uint(&w, i == 1 ? 8192 : 4096);
    ab_pkw_name(&w, "size");
    ab_pkw_uint(&w, 512);
    ab_pkw_name(&w, "frames");
    if (malformed && bad == BAD_NOT_LIST) {
      ab_pkw_str(&w, "x", 1);
    } else {
      ab_pkw_list_begin(&w);
      if (malformed && bad == BAD_NOT_DICT) {
        ab_pkw_int(&w, 3);
      } else {
        ab_pkw_dict_begin(&w);
        ab_pkw_name(&w, "filename");
        if (malformed && bad == BAD_FILE_NONE) ab_pkw_none(&w);
        else ab_pkw_str(&w, "a.py", 4);
        ab_pkw_name(&w, "name");
        ab_pkw_str(&w, "f", 1);
        if (!(malformed && bad == BAD_NO_LINE)) {
          ab_pkw_name(&w, "line");
          if (malformed && bad == BAD_LINE_STR) ab_pkw_str(&w, "12", 2);
          else ab_pkw_int(&w, 12);
        }
        ab_pkw_dict_end(&w);
      }
      ab_pkw_list_end(&w);
    }
    ab_pkw_dict_end(&w);
  }
  ab_pkw_list_end(&w);
  ab_pkw_list_end(&w);
  ab_pkw_dict_end(&w);
  REQUIRE_MSG(ab_pkw_close(&w, &d) == AB_OK, "%s", d.msg);
  *out = path;
}

/* An alloc's malformed frames are refused, naming the value, by both readers alike; a free's
 * are not read. */
static void malformed_frames_refused(void) {
  static const char *const want[BAD_COUNT] = {
      [BAD_NOT_LIST] = "device_traces[0][1]['frames']: expected a list, got a str",
      [BAD_NOT_DICT] = "device_traces[0][1]['frames'][0]: expected a dict, got an int",
      [BAD_NO_LINE] = "device_traces[0][1]['frames'][0]: no 'line' key in this dict",
      [BAD_LINE_STR] = "device_traces[0][1]['frames'][0]['line']: expected an int, got a str",
      [BAD_FILE_NONE] = "device_traces[0][1]['frames'][0]['filename']: expected a str, got None"};
  for (int bad = BAD_NONE; bad < BAD_COUNT; bad++)
    for (int on_free = 0; on_free < 2; on_free++) {
      const char *path;
      bad_frames_snapshot(bad, on_free, &path);
      REQUIRE(path != NULL);
      ab_diag_t d = {""};
      ab_input_t in;
      REQUIRE_MSG(ab_input_read(path, &in, &d) == AB_OK, "%s", d.msg);
      ab_events_t a, b;
      ab_diag_t da = {""}, db = {""};
      ab_status sa = read_tree(path, &in, &a, NULL, &da), sb = ab_trace_parse(path, &in, NULL, &b, NULL, &db);
      ab_input_free(&in);
      bool refused = bad != BAD_NONE && !on_free;
      CHECK_MSG((sa != AB_OK) == refused && (sb != AB_OK) == refused, "bad %d on_free %d: tree %d, stream %d (%s / %s)",
                bad, on_free, sa, sb, da.msg, db.msg);
      if (refused) {
        CHECK_STR_CONTAINS(da.msg, want[bad]);
        CHECK_MSG(strcmp(da.msg, db.msg) == 0, "'%s' vs '%s'", da.msg, db.msg);
      }
      if (sa == AB_OK && sb == AB_OK) {
        bool reread = true;
        both_ways(path, &reread);
        CHECK_MSG(!reread, "bad %d on a free: read again whole", bad);
        CHECK(strcmp(stack_text(&b, 0), "a.py:12 f") == 0);
        CHECK(strcmp(stack_text(&b, 1), "a.py:12 f") == 0);
      }
      if (sa == AB_OK) ab_events_free(&a);
      if (sb == AB_OK) ab_events_free(&b);
    }
}

/* ---- memory -------------------------------------------------------------------------------------- */

static uint64_t peak_rss(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (uint64_t)ru.ru_maxrss << 10;
}

/* A snapshot with frames streamed holds less than half its pickle's bytes at its peak (the
 * tree reader holds several times them). The first test in the binary, so that the peak is
 * its own. */
static void a_stream_holds_less_than_the_file(void) {
  ab_diag_t d = {""};
  const char *path = ab_test_tmp_path("big.pickle");
  size_t records = 0;
  REQUIRE_MSG(ab_frames_export("random:ops=400000", true, path, &records, &d) == AB_OK, "%s", d.msg);
  FILE *f = fopen(path, "rb");
  REQUIRE(f != NULL);
  fseek(f, 0, SEEK_END);
  uint64_t bytes = (uint64_t)ftell(f);
  fclose(f);
  uint64_t before = peak_rss();
  ab_events_t es;
  ab_trace_info_t info;
  REQUIRE_MSG(ab_trace_load(path, NULL, &es, &info, &d) == AB_OK, "%s", d.msg);
  uint64_t grew = peak_rss() - before;
  CHECK_EQ(info.records, records);
  CHECK(!info.reread);
  /* AddressSanitizer's own bookkeeping (redzones, its quarantine of freed memory) would be
   * measured too. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AB_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(AB_ASAN)
  (void)grew;
  (void)bytes;
#else
  CHECK_MSG(grew < bytes / 2, "reading %llu bytes raised the peak by %llu", (unsigned long long)bytes,
            (unsigned long long)grew);
#endif
#ifdef AB_HAVE_ZLIB
  /* Gzipped, it is inflated ahead on a thread (input.c, Note [Inflating ahead]): the same
   * events; cut short, the inflater's own message. */
  ab_input_t plain;
  REQUIRE_MSG(ab_input_read(path, &plain, &d) == AB_OK, "%s", d.msg);
  const char *gz = ab_test_tmp_path("big.pickle.gz");
  gzFile out = gzopen(gz, "wb1");
  REQUIRE(out != NULL && gzwrite(out, plain.data, (unsigned)plain.len) == (int)plain.len && gzclose(out) == Z_OK);
  ab_input_free(&plain);
  ab_events_t zes;
  REQUIRE_MSG(ab_trace_load(gz, NULL, &zes, NULL, &d) == AB_OK, "%s", d.msg);
  CHECK(ab_events_hash(&zes) == ab_events_hash(&es));
  ab_events_free(&zes);
  ab_input_t raw;
  FILE *g = fopen(gz, "rb");
  REQUIRE(g != NULL);
  fseek(g, 0, SEEK_END);
  raw.len = (size_t)ftell(g) * 2 / 3;
  raw.data = malloc(raw.len);
  fseek(g, 0, SEEK_SET);
  REQUIRE(raw.data && fread(raw.data, 1, raw.len, g) == raw.len);
  fclose(g);
  const char *cut = ab_test_write_file("cut.pickle.gz", raw.data, raw.len);
  free(raw.data);
  CHECK(ab_trace_load(cut, NULL, &zes, NULL, &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "truncated gzip stream");
#endif
  ab_events_free(&es);
  remove(path);
}

/* Entries whose keys come from the memo (the entry's body read at once, snapshot_stream.c)
 * beside ones written otherwise (a LONG1 address, an int past 2^63, a key set twice, a body
 * with a fresh string), and settings of every length PyTorch writes: the same as the tree's,
 * streamed. */
static void memo_keys_and_settings(void) {
  ab_pb_t b = {0};
  static const unsigned char head[] = {0x80, 4, 0x7d, 0x28}; /* PROTO 4, EMPTY_DICT, MARK */
  ab_pb_put(&b, head, sizeof head);
  ab_pb_str(&b, "device_traces");
  ab_pb_op(&b, 0x5d);
  ab_pb_op(&b, 0x5d);
  ab_pb_op(&b, 0x28);
  static const char *const names[] = {"action", "addr", "size", "stream", "alloc", "free_completed", "time_us"};
  enum { ACTION, ADDR, SIZE, STREAM, ALLOC, FREE, TIME };
  for (unsigned i = 0; i < 7; i++) { /* memoised at 0..6 in a first dict, dropped */
    if (i == 0) {
      ab_pb_op(&b, 0x7d);
      ab_pb_op(&b, 0x28);
    }
    ab_pb_str(&b, names[i]);
    const unsigned char put[] = {0x71, (unsigned char)i}; /* BINPUT */
    ab_pb_put(&b, put, sizeof put);
    ab_pb_op(&b, 0x4e); /* NONE */
  }
  ab_pb_op(&b, 0x75);
  ab_pb_op(&b, 0x30); /* POP: that dict was no entry */
  for (uint32_t i = 0; i < 40; i++) {
    const unsigned char get_action[] = {0x68, ACTION, 0x68, (unsigned char)(i % 2 ? FREE : ALLOC)};
    const unsigned char get_addr[] = {0x68, ADDR}, get_size[] = {0x68, SIZE}, get_stream[] = {0x68, STREAM};
    ab_pb_op(&b, 0x7d);
    if (i % 3 == 0) ab_pb_op(&b, 0x94); /* MEMOIZE (at 7, 8, ...), as Python's pickler writes it */
    ab_pb_op(&b, 0x28);
    ab_pb_put(&b, get_action, sizeof get_action);
    ab_pb_put(&b, get_addr, sizeof get_addr);
    if (i % 5 == 1) { /* LONG1 of 6 bytes */
      const unsigned char long1[] = {0x8a, 6, 0, 0x10, (unsigned char)(i / 2), 0, 0x80, 0x7f};
      ab_pb_put(&b, long1, sizeof long1);
    } else {
      ab_pb_op_u32(&b, 0x4a, 4096 * (i / 2 + 1));
    }
    ab_pb_put(&b, get_size, sizeof get_size);
    ab_pb_op_u32(&b, 0x4a, 512 + i / 2);
    ab_pb_put(&b, get_stream, sizeof get_stream);
    if (i % 7 == 3) { /* a stream handle past 2^63: LONG1 of 9 bytes */
      const unsigned char big[] = {0x8a, 9, 1, 0, 0, 0, 0, 0, 0, 0x80, 0};
      ab_pb_put(&b, big, sizeof big);
    } else {
      const unsigned char zero[] = {0x4b, 0}; /* BININT1 0 */
      ab_pb_put(&b, zero, sizeof zero);
    }
    if (i % 4 == 2) ab_pb_str(&b, "user_metadata"), ab_pb_str(&b, ""); /* fresh strings */
    const unsigned char get_time[] = {0x68, TIME, 0x4e};
    ab_pb_put(&b, get_time, sizeof get_time);
    ab_pb_op(&b, 0x75);
  }
  ab_pb_op(&b, 0x65);
  ab_pb_op(&b, 0x61);
  ab_pb_str(&b, "allocator_settings");
  ab_pb_op(&b, 0x7d);
  ab_pb_op(&b, 0x28);
  ab_pb_str(&b, "expandable_segments");
  ab_pb_op(&b, 0x89); /* NEWFALSE */
  ab_pb_str(&b, "graph_capture_record_stream_reuse");
  ab_pb_op(&b, 0x88); /* NEWTRUE */
  ab_pb_op(&b, 0x75);
  ab_pb_op(&b, 0x75);
  ab_pb_op(&b, 0x2e);
  const char *path = ab_test_write_file("memo_keys.pickle", b.p, b.n);
  free(b.p);
  bool reread = true;
  both_ways(path, &reread);
  CHECK_MSG(!reread, "%s: read again whole", path);
  ab_events_t es;
  ab_trace_info_t info;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_trace_load(path, NULL, &es, &info, &d) == AB_OK, "%s", d.msg);
  CHECK_EQ(info.records, 40);
  CHECK_EQ(info.nstreams, 2);
  CHECK_STR_CONTAINS(es.settings, "graph_capture_record_stream_reuse:True");
  ab_events_free(&es);
}

static const ab_test_t tests[] = {
    {"memo_keys_and_settings", memo_keys_and_settings},
    {"a_stream_holds_less_than_the_file", a_stream_holds_less_than_the_file},
    {"fixtures_read_the_same_streamed", fixtures_read_the_same_streamed},
    {"exports_read_the_same_streamed", exports_read_the_same_streamed},
    {"shapes", shapes},
    {"errors_are_the_tree_readers", errors_are_the_tree_readers},
    {"stacks_as_pytorch_shares_them", stacks_as_pytorch_shares_them},
    {"malformed_frames_refused", malformed_frames_refused},
    {"stacks_written_back", stacks_written_back},
    {"recorded_stacks", recorded_stacks},
};
AB_TEST_MAIN(tests)
