#include "kernels/base/input.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <pthread.h>

#ifdef AB_HAVE_ZLIB
#include <zlib.h>
#endif
#ifdef AB_HAVE_ISAL
#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>
#endif
#if defined(AB_HAVE_ZLIB) || defined(AB_HAVE_ISAL)
#define AB_HAVE_INFLATER 1
#endif

#define MAX_BYTES (8ULL << 30)

static ab_status too_inflated(const char *path, uint64_t compressed, uint64_t limit, uint64_t max_inflated,
                              ab_diag_t *diag) {
  if (max_inflated)
    return ab_diag_set(diag, AB_ERR_INVALID, "%s: inflates past the %llu bytes allowed (--max-inflated)", path,
                       (unsigned long long)limit);
  return ab_diag_set(diag, AB_ERR_INVALID,
                     "%s: its %llu gzip bytes inflate past %llu, the larger of %d times their size and %d MiB "
                     "(traces inflate some 10 times; --max-inflated SIZE allows more)",
                     path, (unsigned long long)compressed, (unsigned long long)limit, AB_INPUT_INFLATE_RATIO,
                     (int)(AB_INPUT_INFLATE_FLOOR_BYTES >> 20));
}

/* ---- the inputs read, so that no output overwrites one (output.h) ---------------------- */

#define MAX_REMEMBERED 256

static struct {
  pthread_mutex_t lock;
  struct { dev_t dev; ino_t ino; } files[MAX_REMEMBERED];
  size_t n;
} inputs = {PTHREAD_MUTEX_INITIALIZER, {{0, 0}}, 0};

static void remember(const struct stat *sb) {
  pthread_mutex_lock(&inputs.lock);
  bool known = false;
  for (size_t i = 0; i < inputs.n && !known; i++) known = inputs.files[i].dev == sb->st_dev && inputs.files[i].ino == sb->st_ino;
  /* Past the table's room an earlier one is forgotten: a process reads a few traces, not hundreds. */
  if (!known) {
    size_t slot = inputs.n < MAX_REMEMBERED ? inputs.n++ : (size_t)(sb->st_ino % MAX_REMEMBERED);
    inputs.files[slot].dev = sb->st_dev;
    inputs.files[slot].ino = sb->st_ino;
  }
  pthread_mutex_unlock(&inputs.lock);
}

/* The file path will name once the folders it names that do not exist yet are made (as
 * outputs make them, output.h): the longest prefix that exists, resolved (so free of links),
 * then the rest as written, whose ".." can then be read by name: "o/../trace" names the trace
 * before o is made, and after. False when the prefix does not resolve or the name is too long. */
static bool resolve_ahead(const char *path, char *out, size_t size) {
  char prefix[PATH_MAX], real[PATH_MAX];
  size_t len = strlen(path), cut = 0; /* path[0..cut) exists */
  if (len >= sizeof prefix) return false;
  for (size_t i = 1; i <= len; i++) {
    if (i < len && path[i] != '/') continue;
    struct stat sb;
    memcpy(prefix, path, i);
    prefix[i] = '\0';
    if (stat(prefix, &sb) != 0) break;
    cut = i;
  }
  if (cut == 0) snprintf(prefix, sizeof prefix, "%s", path[0] == '/' ? "/" : ".");
  else prefix[cut] = '\0';
  if (realpath(prefix, real) == NULL) return false;
  /* Each name of real and of the rest, in turn, onto out: "." is skipped, ".." takes one back. */
  size_t n = 0;
  out[0] = '\0';
  for (int part = 0; part < 2; part++)
    for (const char *p = part ? path + cut : real; *p;) {
      while (*p == '/') p++;
      size_t k = strcspn(p, "/");
      if (k == 2 && p[0] == '.' && p[1] == '.') {
        while (n > 0 && out[n] != '/') n--;
        out[n] = '\0';
      } else if (k > 0 && !(k == 1 && p[0] == '.')) {
        if (n + 1 + k >= size) return false;
        out[n++] = '/';
        memcpy(out + n, p, k);
        out[n += k] = '\0';
      }
      p += k;
    }
  if (n == 0) snprintf(out, size, "/");
  return true;
}

bool ab_input_is_input(const char *path) {
  struct stat sb;
  char ahead[PATH_MAX];
  if (stat(path, &sb) != 0 && (!resolve_ahead(path, ahead, sizeof ahead) || stat(ahead, &sb) != 0)) return false;
  pthread_mutex_lock(&inputs.lock);
  bool found = false;
  for (size_t i = 0; i < inputs.n && !found; i++) found = inputs.files[i].dev == sb.st_dev && inputs.files[i].ino == sb.st_ino;
  pthread_mutex_unlock(&inputs.lock);
  return found;
}

/* Whether path is a FIFO or a pipe (/dev/fd/N): opening one for reading waits for a writer. */
static bool is_fifo(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISFIFO(sb.st_mode);
}

ab_status ab_input_digest(const char *path, uint64_t *digest, uint64_t *bytes, ab_diag_t *diag) {
  if (is_fifo(path)) return ab_diag_set(diag, AB_ERR_INVALID, "%s: not a regular file", path);
  FILE *f = fopen(path, "rb");
  if (f == NULL) return ab_diag_set(diag, AB_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    fclose(f);
    return ab_diag_set(diag, AB_ERR_INVALID, "%s: not a regular file", path);
  }
  remember(&sb);
  /* Four lanes of FNV-1a over 8-byte words: some GB/s, against the readers' tens of MB/s. */
  uint64_t lane[4] = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL, 0x9e3779b97f4a7c15ULL, 0x1ULL}, n = 0;
  enum { CHUNK = 1 << 20 };
  unsigned char *buf = malloc(CHUNK + 32);
  if (buf == NULL) {
    fclose(f);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  size_t got;
  while ((got = fread(buf, 1, CHUNK, f)) > 0) {
    memset(buf + got, 0, 32); /* a short last chunk ends in zeros; the size tells it apart */
    for (size_t i = 0; i < got; i += 32)
      for (int k = 0; k < 4; k++) {
        uint64_t w;
        memcpy(&w, buf + i + 8 * k, sizeof w);
        lane[k] = (lane[k] ^ w) * 0x100000001b3ULL;
      }
    n += got;
  }
  bool failed = ferror(f) != 0;
  free(buf);
  fclose(f);
  if (failed) return ab_diag_set(diag, AB_ERR_IO, "%s: read error", path);
  uint64_t h = n;
  for (int k = 0; k < 4; k++) h = (h ^ lane[k] ^ (lane[k] >> 29)) * 0xbf58476d1ce4e5b9ULL;
  *digest = h;
  *bytes = n;
  return AB_OK;
}

static const volatile sig_atomic_t *stop_flag = NULL;

void ab_input_stop_on(const volatile sig_atomic_t *stop) { stop_flag = stop; }

/* A file or a stream read whole, into a buffer of cap bytes and one for the NUL, doubled when full. */

/* Doubles *buf; false at the 8 GiB limit, or with *buf freed and NULL when host memory ran
 * out. */
static bool grow_whole(char **buf, size_t *cap) {
  if (*cap >= MAX_BYTES) return false;
  char *grown = realloc(*buf, *cap * 2 + 1);
  if (grown == NULL) {
    free(*buf);
    *buf = NULL;
    return false;
  }
  *buf = grown;
  *cap *= 2;
  return true;
}

/* The end of a read whole of len bytes into buf (NULL: host memory ran out) that ended with
 * st: the contents in `in`, or the error, buf freed. */
static ab_status whole_end(const char *path, char *buf, size_t len, ab_status st, ab_input_t *in, ab_diag_t *diag) {
  if (buf == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "%s: out of host memory", path);
  if (st == AB_OK && len >= MAX_BYTES) st = ab_diag_set(diag, AB_ERR_INVALID, "%s: larger than 8 GiB", path);
  if (st != AB_OK) {
    free(buf);
    return st;
  }
  buf[len] = '\0';
  in->data = buf;
  in->len = len;
  return AB_OK;
}

/* A FIFO or a pipe, read whole (input.h, "Waiting for a writer"): opened without blocking,
 * and read as poll says bytes are there, in polls of 100 ms that look at the stop flag
 * between them. POLLHUP says the writers are gone: a FIFO opened before any writer shows none
 * until one has come and gone. */
static ab_status read_fifo(const char *path, ab_input_t *in, ab_diag_t *diag) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return ab_diag_set(diag, AB_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap + 1);
  ab_status st = AB_OK;
  while (buf) {
    if (len == cap && !grow_whole(&buf, &cap)) break;
    ssize_t got = read(fd, buf + len, cap - len);
    if (got > 0) {
      len += (size_t)got;
      continue;
    }
    if (got < 0 && errno != EAGAIN && errno != EINTR) {
      st = ab_diag_set(diag, AB_ERR_IO, "%s: read error: %s", path, strerror(errno));
      break;
    }
    /* Nothing to read now: no writer yet, a writer that has not written, or the end. */
    if (stop_flag && *stop_flag) {
      st = ab_diag_set(diag, AB_ERR_IO, "%s: stopped while waiting for the FIFO's writer", path);
      break;
    }
    struct pollfd pf = {fd, POLLIN, 0};
    /* An event without bytes (POLLHUP: written and closed) is the end. */
    if (poll(&pf, 1, 100) > 0 && !(pf.revents & POLLIN)) break;
  }
  close(fd);
  return whole_end(path, buf, len, st, in, diag);
}

static ab_status read_raw(const char *path, ab_input_t *in, ab_diag_t *diag) {
  if (is_fifo(path)) return read_fifo(path, in, diag);
  FILE *f = fopen(path, "rb");
  if (f == NULL) return ab_diag_set(diag, AB_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  bool stated = fstat(fileno(f), &sb) == 0;
  /* A directory opens, then fails every read: say what it is rather than "read error". */
  if (stated && S_ISDIR(sb.st_mode)) {
    fclose(f);
    return ab_diag_set(diag, AB_ERR_INVALID, "%s: is a directory (expected a file)", path);
  }
  /* A device (/dev/zero, a terminal) may never end, and holds no trace: it would be read up to
   * the 8 GiB limit before its first byte was looked at. */
  if (stated && !S_ISREG(sb.st_mode)) {
    fclose(f);
    return ab_diag_set(diag, AB_ERR_INVALID, "%s: is a device or a socket (expected a file, a FIFO or a pipe)", path);
  }
  if (stated && S_ISREG(sb.st_mode)) remember(&sb);
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    if (len == cap && !grow_whole(&buf, &cap)) break;
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) break;
  }
  bool bad = ferror(f);
  fclose(f);
  return whole_end(path, buf, len, bad ? ab_diag_set(diag, AB_ERR_IO, "%s: read error", path) : AB_OK, in, diag);
}

/* The most a gzip file of `compressed` bytes may inflate to (input.h). */
static uint64_t inflate_cap(uint64_t compressed, uint64_t max_inflated) {
  if (max_inflated) return max_inflated < MAX_BYTES ? max_inflated : MAX_BYTES;
  uint64_t cap = compressed > MAX_BYTES / AB_INPUT_INFLATE_RATIO ? MAX_BYTES : compressed * AB_INPUT_INFLATE_RATIO;
  return cap > AB_INPUT_INFLATE_FLOOR_BYTES ? cap : AB_INPUT_INFLATE_FLOOR_BYTES;
}

/* ---- the stream ---------------------------------------------------------------------------
 * The raw bytes come from a regular file read in chunks, or from memory (bytes given, or a
 * pipe read whole); the contents are those bytes, or what they inflate to. */

struct ab_instream_s {
  char *path;
  FILE *f;                    /* a regular file; NULL when the bytes are in memory */
  const unsigned char *mem;   /* the raw bytes in memory */
  unsigned char *owned;       /* mem, when the stream read it (a pipe) */
  uint64_t compressed;        /* raw bytes in all */
  unsigned char *chunk;       /* the file's bytes being read */
  const unsigned char *raw;   /* raw bytes not yet taken: [raw, raw + nraw) */
  size_t nraw;
  uint64_t taken;             /* raw bytes taken so far (fed to the inflater, or returned) */
  bool gzip;
  bool plain;                 /* never gzip: contents given as they are */
  uint64_t isize;             /* gzip: the contents' size its trailer records (modulo 2^32) */
  uint64_t max_inflated, limit;
  uint64_t out;               /* contents bytes returned by ab_instream_read */
  uint64_t inflated;          /* bytes the inflater made (the cap applies to them) */
  bool inflated_all;          /* the inflater reached the end of the last member */
  unsigned char *win;         /* the window's buffer: [win + wstart, win + wend) not consumed */
  size_t wcap, wstart, wend;
  bool ended;                 /* the contents are over */
#ifdef AB_HAVE_INFLATER
  const struct gz_lib_s *lib; /* the library inflating (Note [Two inflaters]) */
  void *gz;                   /* its state; NULL when not started */
  struct inflater_s *thread;  /* inflating ahead on a thread of its own, or NULL */
#endif
};

/* The next raw bytes into [raw, raw + nraw); nraw stays 0 at the end of the file. */
static ab_status raw_fill(ab_instream_t *s, ab_diag_t *diag) {
  if (s->nraw > 0) return AB_OK;
  if (s->f == NULL) {
    uint64_t left = s->compressed - s->taken;
    s->raw = s->mem + s->taken;
    s->nraw = left > UINT32_MAX ? UINT32_MAX : (size_t)left;
    return AB_OK;
  }
  size_t got = fread(s->chunk, 1, AB_INSTREAM_CHUNK_BYTES, s->f);
  if (got == 0 && ferror(s->f)) return ab_diag_set(diag, AB_ERR_IO, "%s: read error", s->path);
  s->raw = s->chunk;
  s->nraw = got;
  if (s->taken + got > s->compressed) s->compressed = s->taken + got; /* a file that grew while read */
  return AB_OK;
}

static ab_status plain_read(ab_instream_t *s, unsigned char *buf, size_t cap, size_t *got, ab_diag_t *diag) {
  AB_TRY(raw_fill(s, diag));
  size_t n = s->nraw < cap ? s->nraw : cap;
  if (n) memcpy(buf, s->raw, n);
  s->raw += n;
  s->nraw -= n;
  s->taken += n;
  if (s->taken >= MAX_BYTES) return ab_diag_set(diag, AB_ERR_INVALID, "%s: larger than 8 GiB", s->path);
  *got = n;
  return AB_OK;
}

#ifdef AB_HAVE_INFLATER
/* Note [Two inflaters]
 * A gzip file is inflated by one of two libraries behind the same four calls (gz_lib_t):
 * ISA-L's igzip where the build found it, zlib otherwise. igzip's decoder has loops written
 * in assembly for x86 and Arm, and it takes the CRC-32 of the output with the processor's
 * carry-less multiply (ISA-L's README lists fast inflate and CRC among its functions;
 * crc/crc32_gzip_refl_by8.asm uses PCLMULQDQ), where zlib 1.2 decodes in portable C and
 * takes the CRC with tables: about twice zlib's speed on a frameless snapshot on the 2-core
 * build machine (0.04 s against 0.08 to 0.09 s in snapshot_bench's inflate column, zlib and
 * ISA-L builds taking turns). Inflating runs beside the parse
 * (Note [Inflating ahead]), so a faster parse is bound by it. gz_read is the one loop over either: it feeds
 * the raw bytes, counts what comes out against the cap, goes on to the next member of a
 * multi-member file, and words the errors, so both take and refuse the same files.
 * ab_input_use_inflater picks the other one, for tests and benchmarks that compare them. */
typedef enum { GZ_MORE, GZ_MEMBER_END, GZ_BAD } gz_step;

typedef struct gz_lib_s {
  const char *name;
  /* Allocates s->gz, ready for a member's first byte; false when out of memory. */
  bool (*start)(ab_instream_t *s);
  /* Inflates from the raw bytes [s->raw, s->raw + s->nraw) into [*out, *out + *room)
   * (room at most UINT32_MAX), moving both on. GZ_MEMBER_END: a member ended, its trailer
   * checked; GZ_BAD: the bytes are not gzip, *why says how, and *held raw bytes were taken
   * but not yet decoded (so that the position given is the bad bytes'). */
  gz_step (*run)(ab_instream_t *s, unsigned char **out, size_t *room, const char **why, size_t *held);
  /* Ready for the next member's first byte. */
  void (*next)(ab_instream_t *s);
  void (*end)(ab_instream_t *s);
} gz_lib_t;

#ifdef AB_HAVE_ZLIB
static bool zlib_start(ab_instream_t *s) {
  z_stream *z = calloc(1, sizeof *z);
  /* 16 + MAX_WBITS: a gzip header and trailer around the deflate data (zlib.h, inflateInit2). */
  if (z == NULL || inflateInit2(z, 16 + MAX_WBITS) != Z_OK) {
    free(z);
    return false;
  }
  s->gz = z;
  return true;
}

static gz_step zlib_run(ab_instream_t *s, unsigned char **out, size_t *room, const char **why, size_t *held) {
  z_stream *z = s->gz;
  z->next_in = (Bytef *)(uintptr_t)s->raw;
  z->avail_in = (uInt)s->nraw;
  z->next_out = *out;
  z->avail_out = (uInt)*room;
  int r = inflate(z, Z_NO_FLUSH);
  s->raw = z->next_in;
  s->nraw = z->avail_in;
  *out = z->next_out;
  *room = z->avail_out;
  *held = 0;
  if (r == Z_STREAM_END) return GZ_MEMBER_END;
  if (r == Z_OK || r == Z_BUF_ERROR) return GZ_MORE; /* Z_BUF_ERROR: no progress for want of bytes */
  *why = z->msg ? z->msg : "inflate failed";
  return GZ_BAD;
}

/* inflateReset fails only on a stream never started. */
static void zlib_next(ab_instream_t *s) { (void)inflateReset(s->gz); }

static void zlib_end(ab_instream_t *s) {
  inflateEnd(s->gz);
  free(s->gz);
}

static const gz_lib_t zlib_lib = {"zlib", zlib_start, zlib_run, zlib_next, zlib_end};
#endif

#ifdef AB_HAVE_ISAL
/* ISA-L inflates the deflate data and checks the trailer (crc_flag ISAL_GZIP_NO_HDR_VER,
 * igzip_lib.h); the member's header is read here. ISA-L's own reader of it (ISAL_GZIP)
 * keeps what it has read of a header in a structure it makes afresh on every call (ISA-L
 * v2.30.0, Debian 12's, igzip/igzip_inflate.c: isal_inflate and isal_read_gzip_header), so
 * a header cut between two reads of the file loses its flags and the CRC of its first part
 * (tests/kernels/input_test.c, header_and_trailer_cut_between_reads, fails with it). This
 * reader takes a byte at a time and refuses what zlib refuses, in zlib's words, after the
 * same bytes: the magic after two, the method and the reserved flags after four, the
 * header's CRC-16 after its two bytes (RFC 1952, section 2.3). */
enum { H_FIXED, H_XLEN, H_EXTRA, H_NAME, H_COMMENT, H_HCRC, H_DONE };
enum { F_HCRC = 2, F_EXTRA = 4, F_NAME = 8, F_COMMENT = 16, F_RESERVED = 0xe0 };

typedef struct {
  int part;
  uint32_t n, want; /* bytes of the part read, and wanted (the extra field's length) */
  uint32_t crc;     /* CRC-32 of the header's bytes before its CRC-16 */
  unsigned char b[10];
} gz_header_t;

/* On to the part after `part` that the flags ask for. */
static void header_next(gz_header_t *h, int part) {
  unsigned flg = h->b[3];
  h->part = part < H_XLEN && (flg & F_EXTRA)       ? H_XLEN
            : part < H_NAME && (flg & F_NAME)       ? H_NAME
            : part < H_COMMENT && (flg & F_COMMENT) ? H_COMMENT
            : part < H_HCRC && (flg & F_HCRC)       ? H_HCRC
                                                    : H_DONE;
  h->n = 0;
}

/* Reads header bytes from [*in, *in + *nin), moving on; NULL, or what is wrong. */
static const char *header_read(gz_header_t *h, const unsigned char **in, size_t *nin) {
  const unsigned char *p = *in, *end = p + *nin, *crc_from = h->part < H_HCRC ? p : NULL;
  const char *bad = NULL;
  while (p < end && h->part != H_DONE && bad == NULL) {
    unsigned char c = *p++;
    switch (h->part) {
    case H_FIXED: /* ID1 ID2 CM FLG MTIME(4) XFL OS */
      h->b[h->n++] = c;
      if (h->n == 2 && (h->b[0] != 0x1f || h->b[1] != 0x8b)) bad = "incorrect header check";
      else if (h->n == 4 && h->b[2] != 8) bad = "unknown compression method";
      else if (h->n == 4 && (h->b[3] & F_RESERVED)) bad = "unknown header flags set";
      else if (h->n == 10) header_next(h, H_FIXED);
      break;
    case H_XLEN: /* the extra field's length, little-endian */
      h->want = h->n++ == 0 ? c : h->want | (uint32_t)c << 8;
      if (h->n == 2 && h->want) h->part = H_EXTRA, h->n = 0;
      else if (h->n == 2) header_next(h, H_EXTRA);
      break;
    case H_EXTRA:
      if (++h->n == h->want) header_next(h, H_EXTRA);
      break;
    case H_NAME:
    case H_COMMENT: /* zero-terminated */
      if (c == 0) header_next(h, h->part);
      break;
    case H_HCRC: /* the low 16 bits of the CRC-32 of the bytes before */
      h->want = h->n++ == 0 ? c : h->want | (uint32_t)c << 8;
      if (h->n == 2 && h->want != (h->crc & 0xffff)) bad = "header crc mismatch";
      else if (h->n == 2) h->part = H_DONE;
      break;
    }
    if (h->part == H_HCRC && crc_from) {
      h->crc = crc32_gzip_refl(h->crc, crc_from, (uint64_t)(p - crc_from));
      crc_from = NULL;
    }
  }
  if (crc_from && h->part < H_HCRC) h->crc = crc32_gzip_refl(h->crc, crc_from, (uint64_t)(p - crc_from));
  *nin -= (size_t)(p - *in);
  *in = p;
  return bad;
}

typedef struct {
  struct inflate_state st;
  gz_header_t head;
} isal_gz_t;

static void isal_next(ab_instream_t *s) {
  isal_gz_t *g = s->gz;
  isal_inflate_reset(&g->st);
  g->st.crc_flag = ISAL_GZIP_NO_HDR_VER;
  memset(&g->head, 0, sizeof g->head);
}

static bool isal_start(ab_instream_t *s) {
  isal_gz_t *g = malloc(sizeof *g);
  if (g == NULL) return false;
  isal_inflate_init(&g->st);
  s->gz = g;
  isal_next(s);
  return true;
}

/* At most this many bytes to isal_inflate at once: in ISA-L v2.30.0 a count near 4 GiB
 * overflows a sum in fixed_size_read (fixed upstream in v2.32.1, "prevent internal buffer
 * overrun"). */
#define ISAL_FEED_BYTES (1u << 30)

static gz_step isal_run(ab_instream_t *s, unsigned char **out, size_t *room, const char **why, size_t *held) {
  isal_gz_t *g = s->gz;
  *held = 0;
  if (g->head.part != H_DONE) {
    if ((*why = header_read(&g->head, &s->raw, &s->nraw)) != NULL) return GZ_BAD;
    if (g->head.part != H_DONE) return GZ_MORE;
  }
  struct inflate_state *st = &g->st;
  uint32_t fed = s->nraw < ISAL_FEED_BYTES ? (uint32_t)s->nraw : ISAL_FEED_BYTES;
  st->next_in = (uint8_t *)(uintptr_t)s->raw;
  st->avail_in = fed;
  st->next_out = *out;
  st->avail_out = (uint32_t)*room;
  int r = isal_inflate(st);
  s->raw += fed - st->avail_in;
  s->nraw -= fed - st->avail_in;
  *room -= (size_t)(st->next_out - *out);
  *out = st->next_out;
  if (r < 0) {
    /* zlib's words for the same faults (zlib's inflate.c). */
    *why = r == ISAL_INVALID_BLOCK      ? "invalid block"
           : r == ISAL_INVALID_SYMBOL   ? "invalid code"
           : r == ISAL_INVALID_LOOKBACK ? "invalid distance too far back"
           : r == ISAL_INCORRECT_CHECKSUM ? "incorrect data or length check"
                                          : "inflate failed";
    *held = st->read_in_length > 0 ? (size_t)st->read_in_length / 8 : 0;
    return GZ_BAD;
  }
  /* The trailer checked, nothing read past it (check_gzip_checksum). */
  return st->block_state == ISAL_BLOCK_FINISH ? GZ_MEMBER_END : GZ_MORE;
}

static void isal_end(ab_instream_t *s) { free(s->gz); }

static const gz_lib_t isal_lib = {"isal", isal_start, isal_run, isal_next, isal_end};
#endif

/* The libraries built; the faster is the default. */
static const gz_lib_t *const gz_libs[] = {
#ifdef AB_HAVE_ISAL
    &isal_lib,
#endif
#ifdef AB_HAVE_ZLIB
    &zlib_lib,
#endif
};
static const gz_lib_t *gz_used =
#ifdef AB_HAVE_ISAL
    &isal_lib;
#else
    &zlib_lib;
#endif

static ab_status gz_start(ab_instream_t *s, ab_diag_t *diag) {
  s->lib = gz_used;
  if (!s->lib->start(s)) return ab_diag_set(diag, AB_ERR_INTERNAL, "%s: out of host memory", s->path);
  return AB_OK;
}

static void thread_stop(ab_instream_t *s);

static void gz_end(ab_instream_t *s) {
  thread_stop(s);
  if (s->gz) s->lib->end(s);
  s->gz = NULL;
}

/* Inflates into buf until something comes out or the contents end. */
static ab_status gz_read(ab_instream_t *s, unsigned char *buf, size_t cap, size_t *got, ab_diag_t *diag) {
  size_t room = cap > UINT32_MAX ? UINT32_MAX : cap, left = room;
  unsigned char *out = buf;
  while (left == room && !s->inflated_all) {
    AB_TRY(raw_fill(s, diag));
    size_t nraw = s->nraw, before = left, held = 0;
    const char *why = NULL;
    gz_step step = s->lib->run(s, &out, &left, &why, &held);
    s->taken += nraw - s->nraw;
    s->inflated += before - left;
    if (s->inflated > s->limit) return too_inflated(s->path, s->compressed, s->limit, s->max_inflated, diag);
    if (step == GZ_BAD)
      return ab_diag_set(diag, AB_ERR_INVALID, "%s: corrupt gzip stream at compressed byte %llu (%s)", s->path,
                         (unsigned long long)(s->taken - held), why);
    if (step == GZ_MEMBER_END) {
      /* Concatenated gzip members are legal; read the next one if bytes remain. */
      AB_TRY(raw_fill(s, diag));
      if (s->nraw == 0) {
        s->inflated_all = true;
        break;
      }
      s->lib->next(s);
      continue;
    }
    /* Nothing taken and nothing made: the inflater wants bytes the file does not have. */
    if (left == before && s->nraw == nraw) {
      if (nraw == 0)
        return ab_diag_set(diag, AB_ERR_INVALID, "%s: truncated gzip stream (ends after %llu compressed bytes)",
                           s->path, (unsigned long long)s->compressed);
      return ab_diag_set(diag, AB_ERR_INTERNAL, "%s: the inflater stopped at compressed byte %llu", s->path,
                         (unsigned long long)s->taken);
    }
  }
  *got = room - left;
  return AB_OK;
}

/* Note [Inflating ahead]
 * Inflating is about a third of reading a snapshot. For a gzip file of more than
 * THREAD_MIN_BYTES, a thread inflates ahead into a ring of RING blocks while the reader
 * parses, so that on a machine with a core to spare the two overlap. The thread owns the
 * inflater and the file (gz_read and what it touches); the reader owns the window and `out`;
 * the ring is shared under the lock. An error is kept with the block where it happened and
 * reported when the reader gets there, as without the thread. (libdeflate inflates faster but
 * only a whole buffer at a time, which would hold the whole file again.) */
#define RING 4
#define RING_BLOCK_BYTES (1u << 20)
#define THREAD_MIN_BYTES (1u << 20)

typedef struct inflater_s {
  pthread_t tid;
  pthread_mutex_t lock;
  pthread_cond_t filled, emptied;
  unsigned char *data[RING];
  size_t len[RING];
  size_t head, count, offset; /* the reader's block, full blocks, bytes of head already read */
  bool done, stop;            /* the inflater ended (with status and diag), or was told to */
  ab_status status;
  ab_diag_t diag;
} inflater_t;

static void *inflate_ahead(void *arg) {
  ab_instream_t *s = arg;
  inflater_t *t = s->thread;
  for (;;) {
    pthread_mutex_lock(&t->lock);
    while (t->count == RING && !t->stop) pthread_cond_wait(&t->emptied, &t->lock);
    size_t slot = (t->head + t->count) % RING;
    bool stop = t->stop;
    pthread_mutex_unlock(&t->lock);
    if (stop) return NULL;
    size_t got = 0;
    ab_diag_t diag = {""};
    ab_status st = gz_read(s, t->data[slot], RING_BLOCK_BYTES, &got, &diag);
    pthread_mutex_lock(&t->lock);
    t->len[slot] = got;
    if (st != AB_OK || got == 0) {
      t->done = true;
      t->status = st;
      t->diag = diag;
    } else {
      t->count++;
    }
    pthread_cond_signal(&t->filled);
    pthread_mutex_unlock(&t->lock);
    if (st != AB_OK || got == 0) return NULL;
  }
}

/* Frees the ring and its thread's state, the thread no longer running. */
static void thread_free(ab_instream_t *s) {
  inflater_t *t = s->thread;
  for (int i = 0; i < RING; i++) free(t->data[i]);
  pthread_mutex_destroy(&t->lock);
  pthread_cond_destroy(&t->filled);
  pthread_cond_destroy(&t->emptied);
  free(t);
  s->thread = NULL;
}

static void thread_stop(ab_instream_t *s) {
  inflater_t *t = s->thread;
  if (t == NULL) return;
  pthread_mutex_lock(&t->lock);
  t->stop = true;
  pthread_cond_signal(&t->emptied);
  pthread_mutex_unlock(&t->lock);
  pthread_join(t->tid, NULL);
  thread_free(s);
}

/* Starts the thread; without it (no memory, no thread) the reader inflates by itself. */
static void thread_start(ab_instream_t *s) {
  inflater_t *t = calloc(1, sizeof *t);
  if (t == NULL) return;
  bool ok = true;
  for (int i = 0; i < RING; i++) ok &= (t->data[i] = malloc(RING_BLOCK_BYTES)) != NULL;
  pthread_mutex_init(&t->lock, NULL);
  pthread_cond_init(&t->filled, NULL);
  pthread_cond_init(&t->emptied, NULL);
  s->thread = t;
  if (!ok || pthread_create(&t->tid, NULL, inflate_ahead, s) != 0) thread_free(s);
}

/* The reader's side: the next inflated bytes from the ring. */
static ab_status thread_read(ab_instream_t *s, unsigned char *buf, size_t cap, size_t *got, ab_diag_t *diag) {
  inflater_t *t = s->thread;
  pthread_mutex_lock(&t->lock);
  while (t->count == 0 && !t->done) pthread_cond_wait(&t->filled, &t->lock);
  bool empty = t->count == 0;
  pthread_mutex_unlock(&t->lock);
  if (empty) { /* done, and everything before read */
    *got = 0;
    if (t->status != AB_OK) return ab_diag_set(diag, t->status, "%s", t->diag.msg);
    return AB_OK;
  }
  /* The head block is the reader's until it lets go of it. */
  size_t n = t->len[t->head] - t->offset;
  if (n > cap) n = cap;
  memcpy(buf, t->data[t->head] + t->offset, n);
  t->offset += n;
  *got = n;
  if (t->offset == t->len[t->head]) {
    pthread_mutex_lock(&t->lock);
    t->head = (t->head + 1) % RING;
    t->count--;
    t->offset = 0;
    pthread_cond_signal(&t->emptied);
    pthread_mutex_unlock(&t->lock);
  }
  return AB_OK;
}
#endif

/* Reads the first raw bytes to tell gzip from plain, and starts the inflater. */
static ab_status start(ab_instream_t *s, ab_diag_t *diag) {
  s->taken = 0;
  s->nraw = 0;
  s->out = s->inflated = 0;
  s->ended = s->inflated_all = false;
  AB_TRY(raw_fill(s, diag));
  s->gzip = !s->plain && s->nraw >= 2 && s->raw[0] == 0x1f && s->raw[1] == 0x8b;
  s->limit = s->gzip ? inflate_cap(s->compressed, s->max_inflated) : MAX_BYTES;
  if (!s->gzip) return AB_OK;
  /* ISIZE, the last four bytes (RFC 1952): read beside the stream, which it does not move. */
  unsigned char t[4] = {0, 0, 0, 0};
  if (s->compressed >= 18 && (s->f ? pread(fileno(s->f), t, 4, (off_t)(s->compressed - 4)) == 4
                                   : (memcpy(t, s->mem + s->compressed - 4, 4), true)))
    s->isize = (uint64_t)t[0] | (uint64_t)t[1] << 8 | (uint64_t)t[2] << 16 | (uint64_t)t[3] << 24;
#ifdef AB_HAVE_INFLATER
  AB_TRY(gz_start(s, diag));
  if (s->compressed >= THREAD_MIN_BYTES) thread_start(s); /* Note [Inflating ahead] */
  return AB_OK;
#else
  return ab_diag_set(diag, AB_ERR_INVALID, "%s: gzip input, but this build has no zlib (install zlib1g-dev and rebuild)",
                     s->path);
#endif
}

/* A stream with nothing read yet, or NULL when the host has no memory for it. */
static ab_instream_t *stream_new(const char *path, uint64_t max_inflated) {
  ab_instream_t *s = calloc(1, sizeof *s);
  if (s) s->path = strdup(path);
  if (s == NULL || s->path == NULL) {
    free(s);
    return NULL;
  }
  s->max_inflated = max_inflated;
  return s;
}

ab_status ab_instream_memory(const char *name, const void *data, size_t len, bool gunzip, ab_instream_t **out,
                             ab_diag_t *diag) {
  *out = NULL;
  if (len >= MAX_BYTES) return ab_diag_set(diag, AB_ERR_INVALID, "%s: larger than 8 GiB", name);
  ab_instream_t *s = stream_new(name, 0);
  if (s == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "%s: out of host memory", name);
  s->mem = data;
  s->compressed = len;
  s->plain = !gunzip;
  ab_status st = start(s, diag);
  if (st != AB_OK) {
    ab_instream_close(s);
    return st;
  }
  *out = s;
  return AB_OK;
}

ab_status ab_instream_open(const char *path, uint64_t max_inflated, ab_instream_t **out, ab_diag_t *diag) {
  *out = NULL;
  /* A FIFO is not opened here: that waits for its writer, which read_raw does in polls. */
  bool fifo = is_fifo(path);
  FILE *f = fifo ? NULL : fopen(path, "rb");
  if (f == NULL && !fifo) return ab_diag_set(diag, AB_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  bool regular = f && fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode);
  ab_instream_t *s = stream_new(path, max_inflated);
  if (s == NULL) {
    if (f) fclose(f);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "%s: out of host memory", path);
  }
  ab_status st = AB_OK;
  if (regular) {
    remember(&sb);
    s->f = f;
    s->compressed = (uint64_t)sb.st_size;
    s->chunk = malloc(AB_INSTREAM_CHUNK_BYTES);
    if (s->chunk == NULL) st = ab_diag_set(diag, AB_ERR_INTERNAL, "%s: out of host memory", path);
    else if (s->compressed >= MAX_BYTES) st = ab_diag_set(diag, AB_ERR_INVALID, "%s: larger than 8 GiB", path);
  } else {
    if (f) fclose(f);
    ab_input_t raw = {NULL, 0};
    st = read_raw(path, &raw, diag);
    s->owned = (unsigned char *)raw.data;
    s->mem = s->owned;
    s->compressed = raw.len;
  }
  if (st == AB_OK) st = start(s, diag);
  if (st != AB_OK) {
    ab_instream_close(s);
    return st;
  }
  *out = s;
  return AB_OK;
}

ab_status ab_instream_read(ab_instream_t *s, void *buf, size_t cap, size_t *got, ab_diag_t *diag) {
  *got = 0;
  if (cap == 0 || s->ended) return AB_OK;
  ab_status st;
#ifdef AB_HAVE_INFLATER
  if (s->gzip) st = s->thread ? thread_read(s, buf, cap, got, diag) : gz_read(s, buf, cap, got, diag);
  else
#endif
    st = plain_read(s, buf, cap, got, diag);
  if (st == AB_OK && *got == 0) s->ended = true;
  s->out += *got;
  return st;
}

ab_status ab_instream_rewind(ab_instream_t *s, ab_diag_t *diag) {
#ifdef AB_HAVE_INFLATER
  gz_end(s);
#endif
  s->wstart = s->wend = 0;
  if (s->f && fseek(s->f, 0, SEEK_SET) != 0) return ab_diag_set(diag, AB_ERR_IO, "%s: cannot read it again: %s", s->path, strerror(errno));
  return start(s, diag);
}

ab_status ab_instream_read_all(ab_instream_t *s, ab_input_t *in, ab_diag_t *diag) {
  in->data = NULL;
  in->len = 0;
  /* A first guess at the size: traces inflate some 4 to 10 times. */
  uint64_t guess = s->gzip ? s->compressed * 4 + 4096 : s->compressed - s->taken + 1;
  if (guess > s->limit + 1) guess = s->limit + 1;
  size_t cap = (size_t)guess, len = 0;
  char *buf = malloc(cap + 1);
  ab_status st = AB_OK;
  while (buf) {
    if (len == cap && !grow_whole(&buf, &cap)) break; /* the stream's own limit comes first */
    size_t got = 0;
    st = ab_instream_read(s, buf + len, cap - len, &got, diag);
    if (st != AB_OK || got == 0) break;
    len += got;
  }
  return whole_end(s->path, buf, len, st, in, diag);
}

#define WINDOW_BYTES (1u << 20)
#define WINDOW_MIN_BYTES (4u << 10)

/* The window's first size: a plain input smaller than the usual window needs no more than
 * itself. */
static size_t window_first_bytes(const ab_instream_t *s) {
  if (s->gzip || s->compressed >= WINDOW_BYTES) return WINDOW_BYTES;
  return s->compressed > WINDOW_MIN_BYTES ? (size_t)s->compressed : WINDOW_MIN_BYTES;
}

ab_status ab_instream_window(ab_instream_t *s, size_t want, const unsigned char **data, size_t *avail, ab_diag_t *diag) {
  size_t have = s->wend - s->wstart;
  while (have < want && !s->ended) {
    if (s->wcap - s->wstart < want || s->wend == s->wcap) {
      /* Move what is left to the front, growing the buffer for a long want. */
      size_t cap = s->wcap ? s->wcap : window_first_bytes(s);
      while (cap < want) cap *= 2;
      if (cap != s->wcap) {
        unsigned char *grown = malloc(cap);
        if (grown == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "%s: out of host memory", s->path);
        if (have) memcpy(grown, s->win + s->wstart, have);
        free(s->win);
        s->win = grown;
        s->wcap = cap;
      } else if (have) {
        memmove(s->win, s->win + s->wstart, have);
      }
      s->wstart = 0;
      s->wend = have;
    }
    size_t got = 0;
    AB_TRY(ab_instream_read(s, s->win + s->wend, s->wcap - s->wend, &got, diag));
    s->wend += got;
    have += got;
  }
  *data = s->win + s->wstart;
  *avail = have;
  return AB_OK;
}

void ab_instream_consume(ab_instream_t *s, size_t n) { s->wstart += n; }

uint64_t ab_instream_size_hint(const ab_instream_t *s) {
  uint64_t n = s->gzip ? s->isize : s->compressed;
  return n < s->limit ? n : s->limit;
}

uint64_t ab_instream_offset(const ab_instream_t *s) { return s->out - (s->wend - s->wstart); }

void ab_instream_close(ab_instream_t *s) {
  if (s == NULL) return;
#ifdef AB_HAVE_INFLATER
  gz_end(s);
#endif
  if (s->f) fclose(s->f);
  free(s->owned);
  free(s->chunk);
  free(s->win);
  free(s->path);
  free(s);
}

/* ---- whole files: the stream read to its end ------------------------------------------------ */

ab_status ab_input_read_capped(const char *path, uint64_t max_inflated, ab_input_t *in, ab_diag_t *diag) {
  in->data = NULL;
  in->len = 0;
  ab_instream_t *s;
  AB_TRY(ab_instream_open(path, max_inflated, &s, diag));
  ab_status st = ab_instream_read_all(s, in, diag);
  ab_instream_close(s);
  return st;
}

ab_status ab_input_read(const char *path, ab_input_t *in, ab_diag_t *diag) { return ab_input_read_capped(path, 0, in, diag); }

ab_status ab_input_from_memory(const char *name, const void *data, size_t len, ab_input_t *in, ab_diag_t *diag) {
  in->data = NULL;
  in->len = 0;
  ab_instream_t *s;
  AB_TRY(ab_instream_memory(name, data, len, true, &s, diag));
  ab_status st = ab_instream_read_all(s, in, diag);
  ab_instream_close(s);
  return st;
}

void ab_input_free(ab_input_t *in) {
  free(in->data);
  in->data = NULL;
  in->len = 0;
}

/* ---- the inflater used (Note [Two inflaters]) ------------------------------------------------ */

ab_status ab_input_use_inflater(const char *name, ab_diag_t *diag) {
#ifdef AB_HAVE_INFLATER
  for (size_t i = 0; i < sizeof gz_libs / sizeof *gz_libs; i++)
    if (strcmp(gz_libs[i]->name, name) == 0) {
      gz_used = gz_libs[i];
      return AB_OK;
    }
#endif
  return ab_diag_set(diag, AB_ERR_INVALID, "inflater '%s': not in this build (it inflates with %s)", name,
                     ab_input_inflater());
}

const char *ab_input_inflater(void) {
#ifdef AB_HAVE_INFLATER
  return gz_used->name;
#else
  return "nothing";
#endif
}
