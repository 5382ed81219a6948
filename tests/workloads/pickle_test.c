/* pickle_test.c: the pickle machine and writer (workloads/traces/pickle.h): scalars and
 * containers, the memo, refusals that name the opcode and the byte, and the writer's output
 * read back. */
#include "kernels/base/input.h"
#include "tests/check.h"
#include "tests/pickle_bytes.h"
#include "workloads/traces/pickle.h"
#include "workloads/traces/pickle_ops.h"

/* Parses a pickle given as bytes. */
static ab_status parse(const char *bytes, size_t len, ab_pickle_t *pk, ab_diag_t *diag) {
  return ab_pickle_parse("T", bytes, len, pk, diag);
}

static const ab_pk_t *item(const ab_pk_t *v, size_t i) { return &v->v.seq->items[i]; }

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
  const char *path = ab_test_tmp_path("w.pickle");
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

/* ---- dicts: lookups that do not scan (pickle.h, Note [Dict lookups]) ------------------- */

/* The last value of a repeated key wins, in an indexed dict as in a scanned one. */
static void pickle_indexed_dict_keeps_the_last_value(void) {
  ab_pb_t b = {NULL, 0, 0};
  ab_pb_put(&b, "\x80\x04}(", 4);
  for (uint32_t i = 0; i < 3 * AB_PK_SCAN_ENTRIES; i++) {
    char key[16];
    snprintf(key, sizeof key, "k%u", i % AB_PK_SCAN_ENTRIES); /* each key three times */
    ab_pb_str(&b, key);
    ab_pb_op_u32(&b, 'J', i);
  }
  ab_pb_str(&b, "a key longer than the index holds, looked up by a scan, with room to spare: 0123456789");
  ab_pb_op_u32(&b, 'J', 77);
  ab_pb_put(&b, "u.", 2);
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

/* A little-endian argument of every length, read byte by byte for the reference. */
static void pickle_le_every_length(void) {
  const unsigned char q[9] = {0x81, 0x02, 0xf3, 0x44, 0x95, 0x06, 0xe7, 0x58, 0xff};
  for (size_t n = 0; n <= 8; n++) {
    uint64_t want = 0;
    for (size_t i = n; i-- > 0;) want = want << 8 | q[i];
    CHECK_EQ(ab_pickle_le(q, n), want);
  }
}

static const ab_test_t tests[] = {
    {"pickle_le_every_length", pickle_le_every_length},
    {"pickle_reads_scalars", pickle_reads_scalars},
    {"pickle_memo_shares_containers", pickle_memo_shares_containers},
    {"pickle_refuses_by_name_and_offset", pickle_refuses_by_name_and_offset},
    {"pickle_writer_round_trip", pickle_writer_round_trip},
    {"pickle_indexed_dict_keeps_the_last_value", pickle_indexed_dict_keeps_the_last_value},
};
AB_TEST_MAIN(tests)
