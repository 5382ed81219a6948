/* trace_test.c: the trace importers and exporters: the pickle machine and writer, PyTorch
 * snapshots (the fixture, malformed ones, memory that existed before the trace), the CSV
 * trace, RMM logs, and the trace adaptor's round trip through both export formats. */
#include <stdarg.h>
#include <time.h>
#include <unistd.h>
#ifdef AB_HAVE_ZLIB
#include <zlib.h>
#endif

#include "adaptor_trace.h"
#include "check.h"
#include "device_open.h"
#include "engine.h"
#include "input.h"
#include "pickle.h"
#include "registry.h"
#include "rng.h"
#include "snapshot.h"
#include "trace.h"
#include "trace_csv.h"

#define FIXTURES AB_FIXTURES_DIR "/pytorch-2.11-h200/"

/* ---- helpers -------------------------------------------------------------------------------- */

static char tmpdir[64];

static const char *tmp_path(const char *name) {
  static char path[8][256];
  static int next;
  if (tmpdir[0] == '\0') {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ab_trace_test.XXXXXX");
    if (mkdtemp(tmpdir) == NULL) abort();
  }
  char *p = path[next++ % 8];
  snprintf(p, 256, "%s/%s", tmpdir, name);
  return p;
}

static const char *write_file(const char *name, const void *data, size_t len) {
  const char *path = tmp_path(name);
  FILE *f = fopen(path, "wb");
  if (f == NULL) abort();
  fwrite(data, 1, len, f);
  fclose(f);
  return path;
}

static bool have_fixture(const char *path) { return access(path, R_OK) == 0; }

/* Parses a pickle given as bytes. */
static ab_status parse(const char *bytes, size_t len, ab_pickle_t *pk, ab_diag_t *diag) {
  return ab_pickle_parse("T", bytes, len, pk, diag);
}

static const ab_pk_t *item(const ab_pk_t *v, size_t i) { return &v->v.seq->items[i]; }

/* ---- the pickle machine ---------------------------------------------------------------------- */

static void pickle_reads_scalars(void) {
  static const char p[] =
      "\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00" /* PROTO 4, FRAME */
      "](" /* EMPTY_LIST MARK */
      "K\x07" "M\x34\x12" "J\xfb\xff\xff\xff"        /* 7, 0x1234, -5 */
      "\x8a\x00" "\x8a\x01\xff" "\x8a\x02\x7f\xff"   /* LONG1: 0, -1, -129 */
      "\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00" /* 2^64 - 1 */
      "\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01" /* 2^64: too wide */
      "\x8b\x02\x00\x00\x00\x00\x01"                 /* LONG4: 256 */
      "G\x3f\xe0\x00\x00\x00\x00\x00\x00"            /* 0.5 */
      "N\x88\x89"                                    /* None True False */
      "\x8c\x02" "ab" "X\x03\x00\x00\x00" "xyz" "\x8d\x01\x00\x00\x00\x00\x00\x00\x00" "q"
      "C\x02" "\x00\x01" "B\x01\x00\x00\x00" "z" "\x8e\x00\x00\x00\x00\x00\x00\x00\x00"
      "\x96\x01\x00\x00\x00\x00\x00\x00\x00" "w"
      ")" "K\x01\x85" "K\x01K\x02\x86" "K\x01K\x02K\x03\x87" "(K\x01K\x02t" /* tuples */
      "(K\x01K\x02l"                                                      /* LIST */
      "e.";                                                               /* APPENDS STOP */
  ab_pickle_t pk;
  ab_diag_t d = {""};
  REQUIRE_MSG(parse(p, sizeof p - 1, &pk, &d) == AB_OK, "%s", d.msg);
  CHECK_EQ(pk.protocol, 4);
  const ab_pk_t *r = &pk.root;
  REQUIRE(r->type == AB_PK_LIST);
  REQUIRE(ab_pk_len(r) == 26);
  int64_t ints[] = {7, 0x1234, -5, 0, -1, -129};
  for (int i = 0; i < 6; i++) {
    CHECK(item(r, (size_t)i)->type == AB_PK_INT && item(r, (size_t)i)->width == AB_PK_INT64);
    CHECK_EQ(item(r, (size_t)i)->v.i, ints[i]);
  }
  CHECK(item(r, 6)->width == AB_PK_UINT64 && item(r, 6)->v.u == UINT64_MAX);
  CHECK(item(r, 7)->width == AB_PK_BIGINT && item(r, 7)->v.i == 1);
  CHECK_EQ(item(r, 8)->v.i, 256);
  CHECK(item(r, 9)->type == AB_PK_FLOAT && item(r, 9)->v.f == 0.5);
  CHECK(item(r, 10)->type == AB_PK_NONE);
  CHECK(item(r, 11)->type == AB_PK_BOOL && item(r, 11)->v.i == 1);
  CHECK(item(r, 12)->type == AB_PK_BOOL && item(r, 12)->v.i == 0);
  CHECK(ab_pk_str_is(item(r, 13), "ab") && ab_pk_str_is(item(r, 14), "xyz") && ab_pk_str_is(item(r, 15), "q"));
  CHECK(item(r, 16)->type == AB_PK_BYTES && item(r, 16)->len == 2 && item(r, 16)->v.s[1] == 1);
  CHECK(item(r, 17)->type == AB_PK_BYTES && item(r, 17)->len == 1);
  CHECK(item(r, 18)->type == AB_PK_BYTES && item(r, 18)->len == 0);
  CHECK(item(r, 19)->type == AB_PK_BYTES && item(r, 19)->len == 1);
  CHECK(item(r, 20)->type == AB_PK_TUPLE && ab_pk_len(item(r, 20)) == 0);
  for (size_t k = 1; k <= 3; k++) {
    const ab_pk_t *t = item(r, 20 + k);
    CHECK(t->type == AB_PK_TUPLE && ab_pk_len(t) == k && item(t, k - 1)->v.i == (int64_t)k);
  }
  CHECK(item(r, 24)->type == AB_PK_TUPLE && ab_pk_len(item(r, 24)) == 2);
  CHECK(item(r, 25)->type == AB_PK_LIST && ab_pk_len(item(r, 25)) == 2 && item(item(r, 25), 1)->v.i == 2);
  ab_pickle_free(&pk);
}

/* Containers are shared by reference: a memoised list appended to later is the same list
 * wherever the memo brings it back, as in Python. Dicts keep the last value of a key. */
static void pickle_memo_shares_containers(void) {
  static const char p[] =
      "\x80\x02}\x94(" /* EMPTY_DICT MEMOIZE(0) MARK */
      "\x8c\x01k\x94" "]\x94"  /* 'k' memo 1, [] memo 2 */
      "\x8c\x01j" "h\x02"      /* 'j' -> the same list */
      "\x8c\x01s" "q\x07" "r\x08\x00\x00\x00" "p9\n" /* 's', then BINPUT 7, LONG_BINPUT 8, PUT 9 */
      "K\x01" "u"              /* 's': 1, SETITEMS */
      "h\x02K\x05" "a"         /* the list again, APPEND 5 */
      "j\x02\x00\x00\x00K\x06" "a" /* LONG_BINGET 2, APPEND 6 */
      "g2\nK\x07" "a0"         /* GET 2, APPEND 7, POP (the dict) */
      "(K\x01K\x02" "1"        /* MARK 1 2 POP_MARK */
      "h\x00\x8c\x01kK\x09s"   /* the dict again, SETITEM k=9 */
      "0h\x00.";               /* POP, the dict, STOP */
  ab_pickle_t pk;
  ab_diag_t d = {""};
  REQUIRE_MSG(parse(p, sizeof p - 1, &pk, &d) == AB_OK, "%s", d.msg);
  const ab_pk_t *k = ab_pk_get(&pk.root, "k"), *j = ab_pk_get(&pk.root, "j");
  REQUIRE(k && j);
  CHECK(k->type == AB_PK_INT && k->v.i == 9); /* the later SETITEM wins */
  CHECK(j->type == AB_PK_LIST && ab_pk_len(j) == 3);
  CHECK(ab_pk_len(j) == 3 && item(j, 0)->v.i == 5 && item(j, 2)->v.i == 7);
  const ab_pk_t *sv = ab_pk_get(&pk.root, "s");
  CHECK(sv && sv->type == AB_PK_INT && sv->v.i == 1);
  CHECK(ab_pk_get(&pk.root, "missing") == NULL);
  ab_pickle_free(&pk);
}

static void pickle_refuses_by_name_and_offset(void) {
  static const struct {
    const char *bytes;
    size_t len;
    const char *want;
  } cases[] = {
#define C(lit, want) {lit, sizeof lit - 1, want}
      C("\x80\x02" "c__builtin__\nset\n.", "byte 2: unsupported pickle opcode GLOBAL (0x63)"),
      C("\x80\x04" "\x8c\x01" "a" "\x93", "byte 5: unsupported pickle opcode STACK_GLOBAL (0x93)"),
      C("\x80\x02" "N" "R", "byte 3: unsupported pickle opcode REDUCE (0x52)"),
      C("\x80\x02" "\x8f", "unsupported pickle opcode EMPTY_SET (0x8f)"),
      C("\x80\x02" "I1\n.", "unsupported pickle opcode INT (0x49)"),
      C("\x80\x02" "\xff", "byte 2: not a pickle opcode: 0xff"),
      C("\x80\x02" "J\x01\x02", "byte 2: truncated: BININT needs 4 bytes of argument, 2 remain"),
      C("\x80\x02" "\x8c\x05" "ab", "byte 2: truncated: SHORT_BINUNICODE needs 5 bytes"),
      C("\x80\x02" "}K\x01" "a", "byte 5: APPEND to a dict (expected a list)"),
      C("\x80\x02" "](K\x01K\x02u", "SETITEMS to a list (expected a dict)"),
      C("\x80\x02" "}(K\x01u", "SETITEMS with an odd number of values"),
      C("\x80\x02" ".", "byte 2: STOP needs 1 value on the stack, 0 are there"),
      C("\x80\x02" "h\x03", "BINGET of memo entry 3, which was never stored"),
      C("\x80\x06" "N.", "byte 0: unsupported pickle protocol 6"),
      C("\x80\x02" "N", "byte 3: the pickle ends without STOP"),
      C("\x80\x02" "1", "POP_MARK without a MARK"),
      C("\x80\x02" "(K\x01" "a", "APPEND needs 2 values on the stack, 1 is there"),
      C("\x80\x02" "\x8b\xff\xff\xff\xff", "LONG4 with a negative length"),
      C("\x80\x04" "\x95\xff\x00\x00\x00\x00\x00\x00\x00N.", "truncated: FRAME of 255 bytes"),
      C("\x80\x02" "p\n", "PUT: expected a memo index, got an empty line"),
      C("", "byte 0: the pickle ends without STOP"),
#undef C
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ab_pickle_t pk;
    ab_diag_t d = {""};
    CHECK_MSG(parse(cases[i].bytes, cases[i].len, &pk, &d) == AB_ERR_INVALID, "case %zu parsed", i);
    CHECK_STR_CONTAINS(d.msg, cases[i].want);
    CHECK_MSG(strncmp(d.msg, "T: byte ", 8) == 0, "case %zu: '%s' does not start with the file and byte", i, d.msg);
  }
}

static void pickle_writer_round_trip(void) {
  const char *path = tmp_path("w.pickle");
  static const char NAME_A[] = "alpha", NAME_B[] = "beta";
  char longstr[300];
  memset(longstr, 'x', sizeof longstr);
  int64_t ints[] = {0, 255, 256, 65535, 65536, -1, -128, -129, INT32_MIN, INT32_MAX, (int64_t)INT32_MAX + 1,
                    INT64_MIN, INT64_MAX, 139689514237952LL};
  ab_pkw_t w;
  ab_diag_t d = {""};
  REQUIRE(ab_pkw_open(&w, path, &d) == AB_OK);
  ab_pkw_dict_begin(&w);
  ab_pkw_name(&w, NAME_A);
  ab_pkw_list_begin(&w);
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) ab_pkw_int(&w, ints[i]);
  ab_pkw_uint(&w, UINT64_MAX);
  ab_pkw_float(&w, -2.25);
  ab_pkw_bool(&w, true);
  ab_pkw_none(&w);
  ab_pkw_str(&w, longstr, sizeof longstr);
  ab_pkw_tuple_begin(&w);
  ab_pkw_name(&w, NAME_B);
  ab_pkw_name(&w, NAME_A);
  ab_pkw_tuple_end(&w);
  ab_pkw_list_end(&w);
  ab_pkw_name(&w, NAME_B);
  ab_pkw_dict_begin(&w);
  ab_pkw_dict_end(&w);
  ab_pkw_dict_end(&w);
  REQUIRE(ab_pkw_close(&w, &d) == AB_OK);

  ab_input_t in;
  REQUIRE(ab_input_read(path, &in, &d) == AB_OK);
  ab_pickle_t pk;
  REQUIRE_MSG(ab_pickle_parse(path, in.data, in.len, &pk, &d) == AB_OK, "%s", d.msg);
  const ab_pk_t *a = ab_pk_get(&pk.root, "alpha");
  REQUIRE(a && a->type == AB_PK_LIST);
  size_t n = sizeof ints / sizeof ints[0];
  REQUIRE(ab_pk_len(a) == n + 6);
  for (size_t i = 0; i < n; i++) CHECK_MSG(item(a, i)->width == AB_PK_INT64 && item(a, i)->v.i == ints[i], "int %zu", i);
  CHECK(item(a, n)->width == AB_PK_UINT64 && item(a, n)->v.u == UINT64_MAX);
  CHECK(item(a, n + 1)->v.f == -2.25);
  CHECK(item(a, n + 2)->type == AB_PK_BOOL && item(a, n + 3)->type == AB_PK_NONE);
  CHECK(item(a, n + 4)->type == AB_PK_STR && item(a, n + 4)->len == sizeof longstr);
  const ab_pk_t *t = item(a, n + 5);
  CHECK(t->type == AB_PK_TUPLE && ab_pk_str_is(item(t, 0), "beta") && ab_pk_str_is(item(t, 1), "alpha"));
  const ab_pk_t *b = ab_pk_get(&pk.root, "beta");
  CHECK(b && b->type == AB_PK_DICT && ab_pk_len(b) == 0);
  ab_pickle_free(&pk);
  ab_input_free(&in);
}

/* ---- snapshots: the fixture -------------------------------------------------------------- */

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

static void snapshot_fixture_equals_its_csv(void) {
  if (!have_fixture(FIXTURES "cnn_dyn.default.pickle.gz")) SKIP("no fixtures at %s", FIXTURES);
  ab_events_t pe, ce;
  ab_trace_info_t pi, ci;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_trace_load(FIXTURES "cnn_dyn.default.pickle.gz", NULL, &pe, &pi, &d) == AB_OK, "%s", d.msg);
  REQUIRE_MSG(ab_trace_load(FIXTURES "cnn_dyn.default.trace.csv.gz", NULL, &ce, &ci, &d) == AB_OK, "%s", d.msg);
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
  ab_events_free(&pe);
  ab_events_free(&ce);

  /* The expandable run records its settings; the others of the default run are defaults. */
  REQUIRE_MSG(ab_trace_load(FIXTURES "cnn_dyn.expandable.pickle.gz", NULL, &pe, &pi, &d) == AB_OK, "%s", d.msg);
  CHECK(strcmp(pe.settings, "expandable_segments:True") == 0);
  ab_events_free(&pe);
}

/* Every proper prefix of a pickle lacks its STOP: each must be refused, naming a byte. */
static void snapshot_truncated_anywhere_is_refused(void) {
  if (!have_fixture(FIXTURES "cnn_dyn.default.pickle.gz")) SKIP("no fixtures at %s", FIXTURES);
  ab_input_t in;
  ab_diag_t d = {""};
  REQUIRE(ab_input_read(FIXTURES "cnn_dyn.default.pickle.gz", &in, &d) == AB_OK);
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
  if (!have_fixture(FIXTURES "cnn_dyn.default.pickle.gz")) SKIP("no fixtures at %s", FIXTURES);
  ab_input_t in;
  ab_diag_t d = {""};
  REQUIRE(ab_input_read(FIXTURES "cnn_dyn.default.pickle.gz", &in, &d) == AB_OK);
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

/* ---- snapshots: work linear in the file (pickle.h, Note [Dict lookups]; snapshot.c, Note
 * [Reading in linear time]) --------------------------------------------------------------- */

typedef struct bytes_s {
  char *p;
  size_t n, cap;
} bytes_t;

static void put(bytes_t *b, const void *data, size_t len) {
  if (b->n + len > b->cap) {
    b->cap = (b->n + len) * 2;
    b->p = realloc(b->p, b->cap);
    if (b->p == NULL) abort();
  }
  memcpy(b->p + b->n, data, len);
  b->n += len;
}
static void op(bytes_t *b, unsigned char c) { put(b, &c, 1); }
static void op_u32(bytes_t *b, unsigned char c, uint32_t v) {
  unsigned char le[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
  op(b, c);
  put(b, le, 4);
}
static void str(bytes_t *b, const char *s) {
  op(b, 0x8c); /* SHORT_BINUNICODE */
  op(b, (unsigned char)strlen(s));
  put(b, s, strlen(s));
}
#define LONG_BINPUT 0x72
#define LONG_BINGET 0x6a

/* A snapshot whose `entries` trace entries are one memoised dict: free_completed of one
 * address, then `junk` more entries under one junk key, after the keys a reader looks up;
 * the lookups of the absent 'stream' pass them all. In the reader before indexes, each
 * lookup scanned the dict from its end. */
static bytes_t shared_dict_snapshot(uint32_t junk, uint32_t entries) {
  bytes_t b = {NULL, 0, 0};
  put(&b, "\x80\x04}(", 4); /* PROTO 4, EMPTY_DICT, MARK */
  str(&b, "device_traces");
  put(&b, "](](", 4); /* the list of devices, device 0's entries */
  put(&b, "}q\x00(", 4); /* EMPTY_DICT, BINPUT 0, MARK */
  str(&b, "action");
  str(&b, "free_completed");
  str(&b, "addr");
  op_u32(&b, 'J', 4096); /* BININT */
  str(&b, "size");
  op_u32(&b, 'J', 512);
  str(&b, "junk");
  put(&b, "q\x01N" "q\x02", 5); /* BINPUT 1, None, BINPUT 2 */
  for (uint32_t i = 1; i < junk; i++) put(&b, "h\x01h\x02", 4); /* BINGET 1, BINGET 2: 4 bytes an entry */
  op(&b, 'u'); /* SETITEMS: the dict */
  for (uint32_t i = 1; i < entries; i++) put(&b, "h\x00", 2);
  put(&b, "eeu.", 4); /* APPENDS, APPENDS, SETITEMS, STOP */
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
  bytes_t b = shared_dict_snapshot(200000, 100000);
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
  CHECK_MSG(secs < 1.0, "%.2f s: lookups still scale with the dict", secs);
  ab_events_free(&es);
  free(b.p);
}

/* The last value of a repeated key wins, in an indexed dict as in a scanned one. */
static void pickle_indexed_dict_keeps_the_last_value(void) {
  bytes_t b = {NULL, 0, 0};
  put(&b, "\x80\x04}(", 4);
  for (uint32_t i = 0; i < 3 * AB_PK_SCAN_ENTRIES; i++) {
    char key[16];
    snprintf(key, sizeof key, "k%u", i % AB_PK_SCAN_ENTRIES); /* each key three times */
    str(&b, key);
    op_u32(&b, 'J', i);
  }
  str(&b, "a key longer than the index holds, looked up by a scan, with room to spare: 0123456789");
  op_u32(&b, 'J', 77);
  put(&b, "u.", 2);
  ab_pickle_t pk;
  ab_diag_t d = {""};
  REQUIRE_MSG(parse(b.p, b.n, &pk, &d) == AB_OK, "%s", d.msg);
  CHECK(pk.root.v.seq->index != NULL);
  for (uint32_t k = 0; k < AB_PK_SCAN_ENTRIES; k++) {
    char key[16];
    snprintf(key, sizeof key, "k%u", k);
    const ab_pk_t *v = ab_pk_get(&pk.root, key);
    CHECK_MSG(v && v->v.i == (int64_t)(2 * AB_PK_SCAN_ENTRIES + k), "%s", key);
  }
  const ab_pk_t *long_key =
      ab_pk_get(&pk.root, "a key longer than the index holds, looked up by a scan, with room to spare: 0123456789");
  CHECK(long_key && long_key->v.i == 77);
  CHECK(ab_pk_get(&pk.root, "k") == NULL && ab_pk_get(&pk.root, "k16") == NULL && ab_pk_get(&pk.root, "") == NULL);
  ab_pickle_free(&pk);
  free(b.p);
}

/* Segments that all name one list of blocks: refused once the items visited pass the file's
 * bytes, before the records built from them fill the memory. */
static void snapshot_shared_blocks_are_refused(void) {
  bytes_t b = {NULL, 0, 0};
  put(&b, "\x80\x04}(", 4);
  str(&b, "segments");
  op(&b, ']');
  op(&b, '(');
  op(&b, '}');
  op_u32(&b, LONG_BINPUT, 0);
  op(&b, '(');
  str(&b, "address");
  op_u32(&b, 'J', 1 << 20);
  str(&b, "total_size");
  op_u32(&b, 'J', 1 << 30);
  str(&b, "blocks");
  op(&b, ']');
  op(&b, '(');
  op(&b, '}');
  op_u32(&b, LONG_BINPUT, 1);
  op(&b, '(');
  str(&b, "size");
  op_u32(&b, 'J', 4096);
  str(&b, "state");
  str(&b, "inactive");
  op(&b, 'u');
  for (int i = 1; i < 20000; i++) op_u32(&b, LONG_BINGET, 1);
  op(&b, 'e'); /* APPENDS: the blocks */
  op(&b, 'u'); /* SETITEMS: the segment */
  for (int i = 1; i < 20000; i++) op_u32(&b, LONG_BINGET, 0);
  put(&b, "eu.", 3);
  ab_input_t in = {b.p, b.n};
  ab_events_t es;
  ab_diag_t d = {""};
  double t0 = now_s();
  CHECK(ab_trace_parse("shared", &in, NULL, &es, NULL, &d) == AB_ERR_INVALID);
  CHECK_MSG(strstr(d.msg, "shared: byte ") == d.msg && strstr(d.msg, "more items than"), "%s", d.msg);
  CHECK_MSG(now_s() - t0 < 1.0, "%.2f s to refuse", now_s() - t0);
  free(b.p);
}

/* ---- snapshots: structure ---------------------------------------------------------------- */

/* Writes a snapshot-shaped pickle: the caller's body between the outer dict's MARK and
 * SETITEMS. */
typedef void (*body_fn)(ab_pkw_t *w);

static const char *write_pickle(const char *name, body_fn body) {
  const char *path = tmp_path(name);
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
  ab_trace_opts_t opts = {3, 0};
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

/* ---- CSV traces and RMM logs ---------------------------------------------------------------- */

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
  const char *path = write_file("streams.csv", csv, sizeof csv - 1);
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_trace_load(path, NULL, &es, &in, &d) == AB_OK, "%s", d.msg);
  CHECK_EQ(in.nstreams, 2);
  CHECK(in.stream_values[0] == 300 && in.stream_values[1] == 700);
  CHECK_EQ(in.records, 8);
  CHECK_EQ(in.preexisting, 1);
  /* 0: pre-existing 12288 (stream 700 = index 1, its free requested before the trace), 1:
   * alloc 4096, 2: alloc 8192 on stream 300 = index 0 while 1's free is pending, 3: 4096 again. */
  static const struct {
    uint8_t kind, aux;
    uint32_t id;
  } want[] = {{AB_EV_ALLOC, 0, 0}, {AB_EV_FREE, AB_FREE_REQUEST, 0}, {AB_EV_ALLOC, 0, 1},
              {AB_EV_FREE, AB_FREE_REQUEST, 1}, {AB_EV_ALLOC, 0, 2}, {AB_EV_FREE, AB_FREE_COMPLETE, 1},
              {AB_EV_ALLOC, 0, 3}, {AB_EV_FREE, AB_FREE_NOW, 2}, {AB_EV_FREE, AB_FREE_COMPLETE, 0}};
  REQUIRE(es.n == sizeof want / sizeof want[0]);
  for (size_t i = 0; i < es.n; i++)
    CHECK_MSG(es.ev[i].kind == want[i].kind && es.ev[i].id == want[i].id &&
                  (want[i].kind != AB_EV_FREE || es.ev[i].aux == want[i].aux),
              "event %zu", i);
  CHECK(es.ev[0].stream == 1 && es.ev[0].bytes == 10 && es.ev[2].stream == 1 && es.ev[4].stream == 0);
  CHECK_EQ(in.peak_requested, 160);
  ab_events_free(&es);
}

/* Sizes whose sums pass 64 bits: the figures are capped and say so, never wrapped
 * (trace_builder.c, Note [Figures past 64 bits]). */
static void csv_sums_past_64_bits_saturate(void) {
  static const char csv[] =
      "action,addr,size,stream,time_us\n"
      "alloc,4096,18446744073709551615,0,1\n"
      "alloc,8192,18446744073709551615,0,2\n"
      "segment_alloc,4096,18446744073709551615,0,3\n"
      "segment_alloc,1048576,9223372036854775808,0,4\n"
      "segment_free,1048576,9223372036854775808,0,5\n";
  const char *path = write_file("huge.csv", csv, sizeof csv - 1);
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_trace_load(path, NULL, &es, &in, &d) == AB_OK, "%s", d.msg);
  CHECK(in.saturated);
  CHECK_EQ(in.peak_requested, UINT64_MAX);
  CHECK_EQ(in.reserved_start, 0);
  CHECK_EQ(in.reserved_peak, UINT64_MAX);
  CHECK_EQ(in.reserved_end, UINT64_MAX);
  CHECK_EQ(in.segments_peak, 2);
  ab_events_free(&es);
  /* Below 2^64 the figures are exact, and not marked. */
  static const char fits[] =
      "action,addr,size,stream,time_us\n"
      "alloc,4096,9223372036854775807,0,1\n"
      "segment_alloc,4096,9223372036854775808,0,2\n"
      "segment_alloc,8192,9223372036854775807,0,3\n";
  path = write_file("fits.csv", fits, sizeof fits - 1);
  REQUIRE_MSG(ab_trace_load(path, NULL, &es, &in, &d) == AB_OK, "%s", d.msg);
  CHECK(!in.saturated);
  CHECK_EQ(in.peak_requested, INT64_MAX);
  CHECK_EQ(in.reserved_peak, UINT64_MAX);
  ab_events_free(&es);
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
  const char *path = write_file("bomb.csv.gz", gz, len);
  free(gz);
  ab_events_t es;
  ab_diag_t d = {""};
  CHECK(ab_trace_load(path, NULL, &es, NULL, &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "inflate past 67108864");
  CHECK_STR_CONTAINS(d.msg, "--max-inflated");
  ab_trace_opts_t roomy = {-1, 200u << 20};
  REQUIRE_MSG(ab_trace_load(path, &roomy, &es, NULL, &d) == AB_OK, "%s", d.msg);
  CHECK_EQ(es.nids, 1);
  ab_events_free(&es);
  ab_trace_opts_t tight = {-1, 1u << 20};
  CHECK(ab_trace_load(path, &tight, &es, NULL, &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "past the 1048576 bytes allowed");
#else
  SKIP("no zlib in this build");
#endif
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
  const char *path = write_file("streams.csv", csv, upto);
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
  path = write_file("too_many_streams.csv", csv, len);
  CHECK(ab_trace_load(path, NULL, &es, NULL, &d) == AB_ERR_INVALID);
  char want[64];
  snprintf(want, sizeof want, ":%d: more than %d streams", AB_MAX_STREAMS + 2, AB_MAX_STREAMS);
  CHECK_STR_CONTAINS(d.msg, want);
  free(csv);
}

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
    const char *path = write_file(cases[i].name, cases[i].text, strlen(cases[i].text));
    ab_events_t es;
    ab_diag_t d = {""};
    CHECK_MSG(ab_trace_load(path, NULL, &es, NULL, &d) == AB_ERR_INVALID, "%s loaded", cases[i].name);
    CHECK_STR_CONTAINS(d.msg, "nothing to replay");
    CHECK_STR_CONTAINS(d.msg, cases[i].name);
  }
}

static void csv_errors_name_the_line(void) {
  static const struct {
    const char *text, *want;
  } cases[] = {
      {"action,addr,size,stream,time_us\nalloc,1,2,0,0\nalloc,1,2,0\n", ":3: expected 5 columns"},
      {"action,addr,size,stream,time_us\nalloc,1,x2,0,0\n", ":2: column 'size': expected a whole number, got 'x2'"},
      {"action,addr,size,stream,time_us\nalloc,1,2,0,0\nalloc,1,2,0,0\n", ":3: alloc at 0x1, which is already allocated"},
      {"action,addr,size,stream,time_us\n,1,2,0,0\n", ":2: column 'action': empty"},
      {"action,addr,size\nalloc,1,2\n", "not a recognised trace"},
      {"", "empty file"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *path = write_file("bad.csv", cases[i].text, strlen(cases[i].text));
    ab_events_t es;
    ab_diag_t d = {""};
    CHECK_MSG(ab_trace_load(path, NULL, &es, NULL, &d) == AB_ERR_INVALID, "case %zu loaded", i);
    CHECK_STR_CONTAINS(d.msg, cases[i].want);
    CHECK_STR_CONTAINS(d.msg, path);
  }
}

static void rmm_log_reads_and_refuses(void) {
  static const char log[] =
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "140201,10:03:45.123456,allocate,0x7f8e2c000000,1024,0x0\n"
      "140201,10:03:45.123460,allocate,0x7f8e2c000400,512,0x2\n"
      "140202,10:03:45.123470,allocate failure,(nil),999999999999,0x0\n"
      "140201,10:03:45.123480,free,0x7f8e2c000000,1024,0x0\n"
      "140201,10:03:45.123490,free,0x7f8e2c000800,64,0x0\n"; /* allocated before the log */
  const char *path = write_file("rmm.csv", log, sizeof log - 1);
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
    const char *p = write_file("bad_rmm.csv", text, strlen(text));
    d.msg[0] = '\0';
    CHECK_MSG(ab_trace_load(p, NULL, &es, NULL, &d) == AB_ERR_INVALID, "case %zu loaded", i);
    CHECK_STR_CONTAINS(d.msg, bad[i].want);
    CHECK_STR_CONTAINS(d.msg, p);
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
  const char *csv = tmp_path(csv_name), *pickle = tmp_path(pickle_name);
  CHECK(ab_trace_write_csv(csv, &log, in->stream_values, in->nstreams, &d) == AB_OK);
  CHECK(ab_snapshot_write(pickle, &log, in->stream_values, in->nstreams, "", &d) == AB_OK);
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
  const char *path = write_file("rt_in.csv", csv, sizeof csv - 1);
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_trace_load(path, NULL, &es, &in, &d) == AB_OK, "%s", d.msg);
  size_t n;
  const ab_strategy_entry_t *all = ab_strategy_registry(&n);
  for (size_t i = 0; i < n; i++)
    if (!all[i].hidden) round_trip(&es, &in, all[i].name);
  ab_events_free(&es);
  if (!have_fixture(FIXTURES "cnn_dyn.default.pickle.gz")) SKIP("no fixtures at %s", FIXTURES);
  REQUIRE_MSG(ab_trace_load(FIXTURES "cnn_dyn.default.pickle.gz", NULL, &es, &in, &d) == AB_OK, "%s", d.msg);
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

static void cleanup(void) {
  if (tmpdir[0]) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    CHECK(system(cmd) == 0);
  }
}

static const ab_test_t tests[] = {
    {"pickle_reads_scalars", pickle_reads_scalars},
    {"pickle_memo_shares_containers", pickle_memo_shares_containers},
    {"pickle_refuses_by_name_and_offset", pickle_refuses_by_name_and_offset},
    {"pickle_writer_round_trip", pickle_writer_round_trip},
    {"snapshot_fixture_equals_its_csv", snapshot_fixture_equals_its_csv},
    {"snapshot_truncated_anywhere_is_refused", snapshot_truncated_anywhere_is_refused},
    {"snapshot_corrupt_bytes_never_crash", snapshot_corrupt_bytes_never_crash},
    {"snapshot_structure_errors_say_where", snapshot_structure_errors_say_where},
    {"snapshot_shared_dict_reads_in_linear_time", snapshot_shared_dict_reads_in_linear_time},
    {"pickle_indexed_dict_keeps_the_last_value", pickle_indexed_dict_keeps_the_last_value},
    {"snapshot_shared_blocks_are_refused", snapshot_shared_blocks_are_refused},
    {"snapshot_late_start_creates_what_existed", snapshot_late_start_creates_what_existed},
    {"csv_streams_keep_order_and_phases", csv_streams_keep_order_and_phases},
    {"csv_errors_name_the_line", csv_errors_name_the_line},
    {"csv_sums_past_64_bits_saturate", csv_sums_past_64_bits_saturate},
    {"traces_with_nothing_to_replay_refused", traces_with_nothing_to_replay_refused},
    {"many_streams", many_streams},
    {"gzip_bomb_refused_unless_allowed", gzip_bomb_refused_unless_allowed},
    {"rmm_log_reads_and_refuses", rmm_log_reads_and_refuses},
    {"adaptor_records_in_pytorch_order", adaptor_records_in_pytorch_order},
    {"adaptor_round_trip_through_both_formats", adaptor_round_trip_through_both_formats},
    {"cleanup", cleanup},
};
AB_TEST_MAIN(tests)
