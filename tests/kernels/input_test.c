/* input_test.c: gzip input through the stream of input.h, under each inflater the build has
 * (ab_input_use_inflater: ISA-L's igzip where found, and zlib): the same contents, and the
 * same refusals in the same words, at every edge: members concatenated, headers with every
 * optional field, a header or trailer cut between two reads of the file, trailing bytes, a
 * stream cut short, a bad CRC or length, corrupt data, the cap on inflating, rewinding, and
 * files that are not gzip. The gzip bytes are made here with zlib's deflate. */
#include "kernels/base/input.h"
#include "kernels/base/rng.h"

#include "tests/check.h"

#ifdef AB_HAVE_ZLIB
#include <zlib.h>

/* ---- making gzip bytes --------------------------------------------------------------------- */

typedef struct {
  unsigned char *p;
  size_t n, cap;
} buf_t;

/* Room for n more bytes at b->p + b->n. */
static void reserve(buf_t *b, size_t n) {
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + n) cap *= 2;
    unsigned char *grown = realloc(b->p, cap);
    if (grown == NULL) abort();
    b->p = grown;
    b->cap = cap;
  }
}

static void put(buf_t *b, const void *data, size_t n) {
  reserve(b, n);
  if (n) memcpy(b->p + b->n, data, n);
  b->n += n;
}

static void put_le(buf_t *b, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; i++) {
    unsigned char c = (unsigned char)(v >> (8 * i));
    put(b, &c, 1);
  }
}

/* n bytes like a trace's: words and numbers, which deflate to a third or so; every
 * `noise`-th line random bytes, which do not compress (0: none). */
static buf_t some_text(size_t n, uint64_t seed, int noise) {
  static const char *const words[] = {"alloc", "free_requested", "free_completed", "segment_alloc", "stream", "addr"};
  buf_t b = {0};
  reserve(&b, 1); /* never NULL, for memcmp */
  ab_rng_t r = ab_rng_seed(seed);
  for (int line = 1; b.n < n; line++) {
    char text[96];
    int len;
    if (noise && line % noise == 0) {
      len = 80;
      for (int i = 0; i < len; i++) text[i] = (char)(ab_rng_next(&r) & 0xff);
    } else {
      len = snprintf(text, sizeof text, "%s,%llu,%llu\n", words[ab_rng_next(&r) % 6],
                     (unsigned long long)(ab_rng_next(&r) % 100000), (unsigned long long)(ab_rng_next(&r) % 4096));
    }
    put(&b, text, (size_t)len < n - b.n ? (size_t)len : n - b.n);
  }
  return b;
}

typedef struct {
  const char *name, *comment; /* FNAME, FCOMMENT when set */
  size_t extra;               /* FEXTRA of this many bytes when not 0 */
  bool hcrc;                  /* FHCRC */
  int level;                  /* deflate's level */
} gz_opts_t;

/* Appends one gzip member of data to out (RFC 1952): the header opts asks for, the data
 * deflated raw, the CRC-32 and the length. */
static void member(buf_t *out, const void *data, size_t n, gz_opts_t o) {
  size_t start = out->n;
  unsigned char flg = (unsigned char)((o.hcrc ? 2 : 0) | (o.extra ? 4 : 0) | (o.name ? 8 : 0) | (o.comment ? 16 : 0));
  unsigned char fixed[10] = {0x1f, 0x8b, 8, flg, 1, 2, 3, 4, 0, 3};
  put(out, fixed, sizeof fixed);
  if (o.extra) {
    put_le(out, (uint32_t)o.extra, 2);
    for (size_t i = 0; i < o.extra; i++) put(out, "x", 1);
  }
  if (o.name) put(out, o.name, strlen(o.name) + 1);
  if (o.comment) put(out, o.comment, strlen(o.comment) + 1);
  if (o.hcrc) put_le(out, (uint32_t)crc32(0, out->p + start, (uInt)(out->n - start)) & 0xffff, 2);
  z_stream z = {0};
  if (deflateInit2(&z, o.level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) abort();
  size_t bound = deflateBound(&z, (uLong)n);
  reserve(out, bound);
  z.next_in = (Bytef *)(uintptr_t)data;
  z.avail_in = (uInt)n;
  z.next_out = out->p + out->n;
  z.avail_out = (uInt)bound;
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) abort();
  out->n += bound - z.avail_out;
  deflateEnd(&z);
  put_le(out, (uint32_t)crc32(0, data, (uInt)n), 4);
  put_le(out, (uint32_t)n, 4);
}

static const gz_opts_t PLAIN = {NULL, NULL, 0, false, 6};
static const gz_opts_t EVERY_FIELD = {"trace.pickle", "a comment", 37, true, 6};

/* ---- each inflater --------------------------------------------------------------------------- */

static const char *const INFLATERS[] = {"isal", "zlib"};

/* Runs body once under each inflater the build has; a failure says under which. */
static void each_inflater(void (*body)(void)) {
  const char *dflt = ab_input_inflater();
  int ran = 0;
  for (size_t i = 0; i < sizeof INFLATERS / sizeof *INFLATERS; i++) {
    ab_diag_t d = {""};
    if (ab_input_use_inflater(INFLATERS[i], &d) != AB_OK) continue;
    int before = ab_check_failures;
    body();
    ran++;
    if (ab_check_failures > before) fprintf(stderr, "  (the failures above: inflating with %s)\n", INFLATERS[i]);
  }
  ab_diag_t d = {""};
  CHECK(ab_input_use_inflater(dflt, &d) == AB_OK);
  CHECK(ran > 0);
}

/* The message reading `path` whole gives (with the cap max), or "" when it reads; the
 * contents in *got when given. */
static const char *read_error(const char *path, uint64_t max, buf_t *got) {
  static ab_diag_t d;
  d.msg[0] = '\0';
  ab_input_t in;
  if (ab_input_read_capped(path, max, &in, &d) != AB_OK) return d.msg;
  if (got) {
    got->n = 0;
    put(got, in.data, in.len);
  }
  ab_input_free(&in);
  return "";
}

/* Reads path whole, and through the window in odd sizes with a rewind halfway, and checks
 * both against want. */
static void check_reads_as(const char *path, const buf_t *want) {
  buf_t got = {0};
  const char *err = read_error(path, 8ULL << 30, &got);
  CHECK_MSG(err[0] == '\0', "%s", err);
  CHECK_EQ(got.n, want->n);
  CHECK(got.n == want->n && (want->n == 0 || memcmp(got.p, want->p, want->n) == 0));
  ab_diag_t d = {""};
  ab_instream_t *s;
  REQUIRE_MSG(ab_instream_open(path, 8ULL << 30, &s, &d) == AB_OK, "%s", d.msg);
  for (int pass = 0; pass < 2; pass++) {
    size_t at = 0, want_bytes = 1;
    bool same = true;
    for (;;) {
      const unsigned char *data;
      size_t avail = 0;
      REQUIRE_MSG(ab_instream_window(s, want_bytes, &data, &avail, &d) == AB_OK, "%s", d.msg);
      if (avail == 0) break;
      size_t take = avail < 7919 ? avail : 7919;
      same &= at + take <= want->n && memcmp(data, want->p + at, take) == 0;
      ab_instream_consume(s, take);
      at += take;
      want_bytes = want_bytes * 3 % 70001 + 1;
      /* The first pass stops halfway, the second reads to the end after the rewind. */
      if (pass == 0 && at >= want->n / 2) break;
    }
    CHECK_MSG(same, "pass %d: the window's bytes differ from the contents", pass);
    CHECK_EQ(ab_instream_offset(s), pass == 0 ? at : want->n);
    if (pass == 0) REQUIRE_MSG(ab_instream_rewind(s, &d) == AB_OK, "%s", d.msg);
  }
  ab_instream_close(s);
  free(got.p);
}

/* ---- the tests ------------------------------------------------------------------------------ */

static void plain_bytes_body(void) {
  /* Not gzip by their first two bytes: read as they are. */
  static const char *const files[] = {"", "\x1f", "\x1f\x8a not gzip", "hello\n"};
  for (size_t i = 0; i < 4; i++) {
    buf_t want = {0};
    put(&want, files[i], strlen(files[i]));
    check_reads_as(ab_test_write_file("plain.txt", want.n ? (const void *)want.p : "", want.n), &want);
    free(want.p);
  }
  /* gzip bytes given as they are, not gunzipped. */
  buf_t gz = {0};
  member(&gz, "abc", 3, PLAIN);
  ab_diag_t d = {""};
  ab_instream_t *s;
  REQUIRE(ab_instream_memory("mem", gz.p, gz.n, false, &s, &d) == AB_OK);
  ab_input_t in;
  REQUIRE(ab_instream_read_all(s, &in, &d) == AB_OK);
  CHECK(in.len == gz.n && memcmp(in.data, gz.p, gz.n) == 0);
  ab_input_free(&in);
  ab_instream_close(s);
  free(gz.p);
}
static void plain_bytes_as_they_are(void) { each_inflater(plain_bytes_body); }

static void one_member_body(void) {
  /* Empty, tiny, inflated by the reader, and over 1 MiB gzipped: inflated ahead on a thread. */
  static const struct { size_t n; int noise, level; } cases[] = {{0, 0, 6}, {1, 0, 6}, {300 << 10, 0, 6}, {3 << 20, 2, 1}};
  for (size_t i = 0; i < 4; i++) {
    buf_t data = some_text(cases[i].n, 7 + i, cases[i].noise), gz = {0};
    member(&gz, data.p, data.n, (gz_opts_t){NULL, NULL, 0, false, cases[i].level});
    if (cases[i].n == (3 << 20)) CHECK(gz.n > (1 << 20));
    check_reads_as(ab_test_write_file("one.gz", gz.p, gz.n), &data);
    ab_input_t in;
    ab_diag_t d = {""};
    REQUIRE_MSG(ab_input_from_memory("mem", gz.p, gz.n, &in, &d) == AB_OK, "%s", d.msg);
    CHECK(in.len == data.n && memcmp(in.data, data.p, data.n) == 0);
    ab_input_free(&in);
    free(data.p);
    free(gz.p);
  }
}
static void one_member(void) { each_inflater(one_member_body); }

/* Members of every kind one after another, small and (noise) large enough for the thread. */
static void members_body(void) {
  for (int big = 0; big < 2; big++) {
    buf_t a = some_text(big ? 900 << 10 : 5000, 1, big ? 2 : 0), b = some_text(big ? 800 << 10 : 3000, 2, big ? 3 : 0),
          c = some_text(70000, 3, 0), want = {0}, gz = {0};
    member(&gz, a.p, a.n, PLAIN);
    member(&gz, "", 0, PLAIN);
    member(&gz, b.p, b.n, EVERY_FIELD);
    member(&gz, c.p, c.n, (gz_opts_t){"stored", NULL, 0, false, 0});
    member(&gz, "z", 1, (gz_opts_t){NULL, NULL, 65535, true, 9});
    put(&want, a.p, a.n);
    put(&want, b.p, b.n);
    put(&want, c.p, c.n);
    put(&want, "z", 1);
    if (big) CHECK(gz.n > (1 << 20));
    check_reads_as(ab_test_write_file("members.gz", gz.p, gz.n), &want);
    free(a.p), free(b.p), free(c.p), free(want.p), free(gz.p);
  }
}
static void members_concatenated(void) { each_inflater(members_body); }

/* The file is read in pieces of AB_INSTREAM_CHUNK_BYTES: a second member placed so that the
 * end of one piece falls at each byte from the first member's trailer to past the second's
 * header (of every optional field) and into its data. */
static void cut_between_reads_body(void) {
  buf_t first = some_text(200 << 10, 4, 1), second = some_text(2000, 5, 0), want = {0};
  put(&want, first.p, first.n);
  put(&want, second.p, second.n);
  buf_t probe = {0};
  member(&probe, first.p, first.n, (gz_opts_t){NULL, NULL, 0, false, 0});
  size_t plain_len = probe.n; /* the first member without its extra field */
  free(probe.p);
  for (int at = -10; at <= 60; at++) {
    /* The second member starts at CHUNK - at: an extra field in the first pads it there. */
    size_t extra = AB_INSTREAM_CHUNK_BYTES - (size_t)at - plain_len - 2;
    REQUIRE(extra > 0 && extra < 65536);
    buf_t gz = {0};
    member(&gz, first.p, first.n, (gz_opts_t){NULL, NULL, extra, false, 0});
    if (gz.n != (size_t)(AB_INSTREAM_CHUNK_BYTES - at)) {
      CHECK_EQ(gz.n, AB_INSTREAM_CHUNK_BYTES - at);
      free(gz.p);
      break;
    }
    member(&gz, second.p, second.n, EVERY_FIELD);
    buf_t got = {0};
    const char *err = read_error(ab_test_write_file("cut.gz", gz.p, gz.n), 0, &got);
    CHECK_MSG(err[0] == '\0' && got.n == want.n && memcmp(got.p, want.p, want.n) == 0,
              "piece ends %d bytes into the second member: %s", at, err[0] ? err : "other contents");
    free(got.p);
    free(gz.p);
  }
  free(first.p), free(second.p), free(want.p);
}
static void header_and_trailer_cut_between_reads(void) { each_inflater(cut_between_reads_body); }

/* Each inflater's message for the same bytes, to compare. */
typedef struct {
  char msg[2][512];
  int n;
} messages_t;

static void record_message(messages_t *m, const char *msg) {
  if (m->n < 2) snprintf(m->msg[m->n++], sizeof m->msg[0], "%s", msg);
}

static void check_same_messages(const messages_t *m) {
  if (m->n == 2) CHECK_MSG(strcmp(m->msg[0], m->msg[1]) == 0, "'%s' vs '%s'", m->msg[0], m->msg[1]);
}

/* Reads s window by window to its end or its error, which it returns; with want, *same
 * says whether every byte read was want's byte at that offset. */
static ab_status read_through(ab_instream_t *s, const buf_t *want, bool *same, ab_diag_t *d) {
  size_t at = 0;
  ab_status st;
  for (;;) {
    const unsigned char *p;
    size_t avail = 0;
    if ((st = ab_instream_window(s, 1 << 16, &p, &avail, d)) != AB_OK || avail == 0) return st;
    if (want) *same &= at + avail <= want->n && memcmp(p, want->p + at, avail) == 0;
    ab_instream_consume(s, avail);
    at += avail;
  }
}

static const char *refuse_file(const char *name, const buf_t *gz) {
  const char *path = ab_test_write_file(name, gz->p, gz->n);
  const char *err = read_error(path, 0, NULL);
  CHECK_MSG(err[0] != '\0', "%s was read", name);
  CHECK_STR_CONTAINS(err, path);
  return err;
}

/* After the last member: bytes that do not start another, one byte of another, zeros. */
static messages_t trailing[3];
static void trailing_body(void) {
  buf_t data = some_text(10000, 6, 0), gz = {0};
  member(&gz, data.p, data.n, PLAIN);
  size_t len = gz.n;
  char want[96];
  put(&gz, "garbage!", 8);
  const char *err = refuse_file("garbage.gz", &gz);
  snprintf(want, sizeof want, "corrupt gzip stream at compressed byte %zu (incorrect header check)", len + 2);
  CHECK_STR_CONTAINS(err, want);
  record_message(&trailing[0], err);
  gz.n = len;
  put(&gz, "\x1f", 1);
  err = refuse_file("onebyte.gz", &gz);
  snprintf(want, sizeof want, "truncated gzip stream (ends after %zu compressed bytes)", len + 1);
  CHECK_STR_CONTAINS(err, want);
  record_message(&trailing[1], err);
  gz.n = len;
  put(&gz, "\0\0\0\0", 4);
  err = refuse_file("zeros.gz", &gz);
  CHECK_STR_CONTAINS(err, "incorrect header check");
  record_message(&trailing[2], err);
  free(data.p), free(gz.p);
}
static void trailing_bytes_refused(void) {
  each_inflater(trailing_body);
  for (int i = 0; i < 3; i++) check_same_messages(&trailing[i]);
}

/* Cut after any byte past the first (one byte is not gzip), a member is truncated. */
static void cut_short_body(void) {
  buf_t data = some_text(3000, 8, 0), gz = {0};
  member(&gz, data.p, data.n, EVERY_FIELD);
  int wrong = 0;
  for (size_t cut = 2; cut < gz.n; cut++) {
    ab_input_t in;
    ab_diag_t d = {""};
    char want[96];
    snprintf(want, sizeof want, "cut: truncated gzip stream (ends after %zu compressed bytes)", cut);
    if (ab_input_from_memory("cut", gz.p, cut, &in, &d) == AB_OK) ab_input_free(&in), snprintf(d.msg, sizeof d.msg, "read");
    if (strcmp(d.msg, want) != 0 && wrong++ < 3) CHECK_MSG(false, "cut after %zu bytes: %s", cut, d.msg);
  }
  CHECK_EQ(wrong, 0);
  gz.n /= 2;
  CHECK_STR_CONTAINS(refuse_file("half.gz", &gz), "truncated gzip stream");
  free(data.p), free(gz.p);
}
static void cut_short_is_truncated(void) { each_inflater(cut_short_body); }

/* A header zlib refuses is refused after the same bytes in the same words. */
static messages_t header_msgs[3];
static void bad_header_body(void) {
  static const struct { size_t at; unsigned char value; const char *want; } cases[] = {
      {2, 7, "corrupt gzip stream at compressed byte 4 (unknown compression method)"},
      {3, 0x28, "corrupt gzip stream at compressed byte 4 (unknown header flags set)"},
      {10, 0, ""}, /* the header's CRC-16, which follows the fields: set below */
  };
  for (size_t i = 0; i < 3; i++) {
    buf_t gz = {0};
    member(&gz, "data", 4, EVERY_FIELD);
    char want[96];
    const char *w = cases[i].want;
    if (i == 2) {
      size_t hcrc = 10 + 2 + EVERY_FIELD.extra + strlen(EVERY_FIELD.name) + 1 + strlen(EVERY_FIELD.comment) + 1;
      gz.p[hcrc] ^= 1;
      snprintf(want, sizeof want, "corrupt gzip stream at compressed byte %zu (header crc mismatch)", hcrc + 2);
      w = want;
    } else {
      gz.p[cases[i].at] = cases[i].value;
    }
    const char *err = refuse_file("header.gz", &gz);
    CHECK_STR_CONTAINS(err, w);
    record_message(&header_msgs[i], err);
    free(gz.p);
  }
}
static void bad_header_refused(void) {
  each_inflater(bad_header_body);
  for (int i = 0; i < 3; i++) check_same_messages(&header_msgs[i]);
}

/* A wrong CRC-32 or length in the trailer, small and at the end of a file the thread
 * inflates: refused, after the contents before it. */
static void bad_check_body(void) {
  for (int big = 0; big < 2; big++) {
    buf_t data = some_text(big ? 3 << 20 : 20000, 9, big ? 2 : 0);
    for (int field = 0; field < 2; field++) {
      buf_t gz = {0};
      member(&gz, data.p, data.n, (gz_opts_t){NULL, NULL, 0, false, 1});
      gz.p[gz.n - 8 + 4 * field] ^= 0x10; /* the CRC-32, or the length */
      const char *err = refuse_file("check.gz", &gz);
      CHECK_STR_CONTAINS(err, "corrupt gzip stream at compressed byte");
      CHECK_STR_CONTAINS(err, "check)");
      /* Read through the window, every byte comes before the refusal. */
      ab_diag_t d = {""};
      ab_instream_t *s;
      REQUIRE(ab_instream_open(ab_test_tmp_path("check.gz"), 0, &s, &d) == AB_OK);
      bool same = true;
      CHECK(read_through(s, &data, &same, &d) != AB_OK && same);
      ab_instream_close(s);
      free(gz.p);
    }
    free(data.p);
  }
}
static void bad_check_refused(void) { each_inflater(bad_check_body); }

/* A bit of the deflated data or the trailer changed, anywhere but the last byte of the data
 * (whose high bits may be padding): refused, never read as something else. */
static void corrupt_body(void) {
  buf_t data = some_text(40000, 10, 0), gz = {0};
  member(&gz, data.p, data.n, PLAIN);
  ab_rng_t r = ab_rng_seed(11);
  for (int i = 0; i < 500; i++) {
    size_t at = 10 + ab_rng_next(&r) % (gz.n - 10);
    if (at == gz.n - 9) continue;
    unsigned char old = gz.p[at];
    gz.p[at] ^= (unsigned char)(1u << (ab_rng_next(&r) % 8));
    ab_input_t in;
    ab_diag_t d = {""};
    ab_status st = ab_input_from_memory("corrupt", gz.p, gz.n, &in, &d);
    CHECK_MSG(st != AB_OK, "byte %zu changed, and the file was read", at);
    if (st == AB_OK) ab_input_free(&in);
    /* Corrupt, or truncated when the change made the last block not the last. */
    else CHECK_MSG(strncmp(d.msg, "corrupt: corrupt gzip stream at compressed byte", 47) == 0 ||
                   strncmp(d.msg, "corrupt: truncated gzip stream", 30) == 0, "%s", d.msg);
    gz.p[at] = old;
  }
  free(data.p), free(gz.p);
}
static void corrupt_data_refused(void) { each_inflater(corrupt_body); }

/* The cap on inflating, given (--max-inflated) and the default, the same for both. */
static void cap_body(void) {
  buf_t data = some_text(2 << 20, 12, 0), gz = {0};
  member(&gz, data.p, data.n, PLAIN);
  const char *path = ab_test_write_file("cap.gz", gz.p, gz.n);
  CHECK_STR_CONTAINS(read_error(path, 1 << 20, NULL), "inflates past the 1048576 bytes allowed (--max-inflated)");
  CHECK_STR_CONTAINS(read_error(path, 2 << 20, NULL), "");
  buf_t got = {0};
  CHECK(read_error(path, 2 << 20, &got)[0] == '\0' && got.n == data.n);
  free(got.p);
  /* 80 MiB of zeros gzipped: past the default's 64 MiB floor at a ratio of some 1000. */
  gz.n = 0;
  unsigned char *zeros = calloc(80 << 20, 1);
  REQUIRE(zeros != NULL);
  member(&gz, zeros, 80 << 20, (gz_opts_t){NULL, NULL, 0, false, 9});
  free(zeros);
  path = ab_test_write_file("bomb.gz", gz.p, gz.n);
  ab_diag_t d = {""};
  ab_instream_t *s;
  REQUIRE(ab_instream_open(path, 0, &s, &d) == AB_OK);
  CHECK(read_through(s, NULL, NULL, &d) == AB_ERR_INVALID);
  char want[160];
  snprintf(want, sizeof want, "%s: its %zu gzip bytes inflate past 67108864", path, gz.n);
  CHECK_STR_CONTAINS(d.msg, want);
  CHECK(ab_instream_offset(s) <= (64u << 20));
  ab_instream_close(s);
  free(data.p), free(gz.p);
}
static void inflate_cap_applies(void) { each_inflater(cap_body); }

/* Closed halfway, with the thread inflating ahead; rewound after the end and after an error. */
static void close_rewind_body(void) {
  buf_t data = some_text(3 << 20, 13, 2), gz = {0};
  member(&gz, data.p, data.n, PLAIN);
  const char *path = ab_test_write_file("big.gz", gz.p, gz.n);
  ab_diag_t d = {""};
  ab_instream_t *s;
  const unsigned char *p;
  size_t avail;
  REQUIRE(ab_instream_open(path, 0, &s, &d) == AB_OK);
  REQUIRE(ab_instream_window(s, 1000, &p, &avail, &d) == AB_OK && avail >= 1000);
  CHECK(memcmp(p, data.p, 1000) == 0);
  ab_instream_close(s);
  /* To the end, then again from the start. */
  REQUIRE(ab_instream_open(path, 0, &s, &d) == AB_OK);
  ab_input_t in;
  REQUIRE(ab_instream_read_all(s, &in, &d) == AB_OK);
  CHECK(in.len == data.n);
  ab_input_free(&in);
  REQUIRE(ab_instream_rewind(s, &d) == AB_OK);
  REQUIRE(ab_instream_read_all(s, &in, &d) == AB_OK);
  CHECK(in.len == data.n && memcmp(in.data, data.p, data.n) == 0);
  ab_input_free(&in);
  ab_instream_close(s);
  /* Cut short: refused, and refused again after a rewind. */
  gz.n -= 100;
  path = ab_test_write_file("big_cut.gz", gz.p, gz.n);
  REQUIRE(ab_instream_open(path, 0, &s, &d) == AB_OK);
  CHECK(ab_instream_read_all(s, &in, &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "truncated gzip stream");
  REQUIRE(ab_instream_rewind(s, &d) == AB_OK);
  d.msg[0] = '\0';
  CHECK(ab_instream_read_all(s, &in, &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "truncated gzip stream");
  ab_instream_close(s);
  free(data.p), free(gz.p);
}
static void closed_halfway_and_rewound(void) { each_inflater(close_rewind_body); }

static void inflaters_named(void) {
  ab_diag_t d = {""};
  CHECK(ab_input_use_inflater("gzip9000", &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "inflater 'gzip9000': not in this build");
  CHECK(ab_input_use_inflater("zlib", &d) == AB_OK);
  CHECK(strcmp(ab_input_inflater(), "zlib") == 0);
#ifdef AB_TEST_WANT_ISAL
  CHECK_MSG(ab_input_use_inflater("isal", &d) == AB_OK, "the build found ISA-L, but: %s", d.msg);
#endif
}

static const ab_test_t tests[] = {
    {"plain_bytes_as_they_are", plain_bytes_as_they_are},
    {"one_member", one_member},
    {"members_concatenated", members_concatenated},
    {"header_and_trailer_cut_between_reads", header_and_trailer_cut_between_reads},
    {"trailing_bytes_refused", trailing_bytes_refused},
    {"cut_short_is_truncated", cut_short_is_truncated},
    {"bad_header_refused", bad_header_refused},
    {"bad_check_refused", bad_check_refused},
    {"corrupt_data_refused", corrupt_data_refused},
    {"inflate_cap_applies", inflate_cap_applies},
    {"closed_halfway_and_rewound", closed_halfway_and_rewound},
    {"inflaters_named", inflaters_named},
};
#else
static void needs_zlib(void) { SKIP("the gzip bytes are made with zlib, which this build lacks"); }
static const ab_test_t tests[] = {{"needs_zlib", needs_zlib}};
#endif

AB_TEST_MAIN(tests)
