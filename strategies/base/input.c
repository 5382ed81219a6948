#include "input.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <pthread.h>

#ifdef AB_HAVE_ZLIB
#include <zlib.h>
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

bool ab_input_is_input(const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0) return false;
  pthread_mutex_lock(&inputs.lock);
  bool found = false;
  for (size_t i = 0; i < inputs.n && !found; i++) found = inputs.files[i].dev == sb.st_dev && inputs.files[i].ino == sb.st_ino;
  pthread_mutex_unlock(&inputs.lock);
  return found;
}

static ab_status read_raw(const char *path, ab_input_t *in, ab_diag_t *diag) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return ab_diag_set(diag, AB_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  bool stated = fstat(fileno(f), &sb) == 0;
  /* A directory opens, then fails every read: say what it is rather than "read error". */
  if (stated && S_ISDIR(sb.st_mode)) {
    fclose(f);
    return ab_diag_set(diag, AB_ERR_INVALID, "%s: is a directory (expected a file)", path);
  }
  if (stated && S_ISREG(sb.st_mode)) remember(&sb);
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) break;
    if (len == cap) {
      if (cap >= MAX_BYTES) break;
      char *grown = realloc(buf, cap * 2 + 1);
      if (grown == NULL) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = grown;
      cap *= 2;
    }
  }
  bool bad = ferror(f);
  fclose(f);
  if (buf == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "%s: out of host memory", path);
  if (bad) {
    free(buf);
    return ab_diag_set(diag, AB_ERR_IO, "%s: read error", path);
  }
  if (len >= MAX_BYTES) {
    free(buf);
    return ab_diag_set(diag, AB_ERR_INVALID, "%s: larger than 8 GiB", path);
  }
  buf[len] = '\0';
  in->data = buf;
  in->len = len;
  return AB_OK;
}

/* The most a gzip file of `compressed` bytes may inflate to (input.h). */
static uint64_t inflate_cap(uint64_t compressed, uint64_t max_inflated) {
  if (max_inflated) return max_inflated < MAX_BYTES ? max_inflated : MAX_BYTES;
  uint64_t cap = compressed > MAX_BYTES / AB_INPUT_INFLATE_RATIO ? MAX_BYTES : compressed * AB_INPUT_INFLATE_RATIO;
  return cap > AB_INPUT_INFLATE_FLOOR_BYTES ? cap : AB_INPUT_INFLATE_FLOOR_BYTES;
}

#ifdef AB_HAVE_ZLIB
static ab_status gunzip(const char *path, const ab_input_t *gz, uint64_t max_inflated, ab_input_t *out, ab_diag_t *diag) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return ab_diag_set(diag, AB_ERR_INTERNAL, "%s: zlib failed to start", path);
  /* Room for one byte past the limit, so that passing it is seen. */
  uint64_t limit = inflate_cap(gz->len, max_inflated);
  size_t cap = gz->len * 4 + 4096 < limit + 1 ? gz->len * 4 + 4096 : (size_t)limit + 1, len = 0;
  char *buf = malloc(cap + 1);
  ab_status st = AB_OK;
  z.next_in = (Bytef *)gz->data;
  z.avail_in = (uInt)(gz->len > UINT32_MAX ? UINT32_MAX : gz->len);
  size_t fed = z.avail_in;
  for (;;) {
    if (buf == NULL) {
      st = ab_diag_set(diag, AB_ERR_INTERNAL, "%s: out of host memory", path);
      break;
    }
    if (len > limit) {
      st = too_inflated(path, gz->len, limit, max_inflated, diag);
      break;
    }
    if (len == cap) {
      size_t want = cap * 2 < limit + 1 ? cap * 2 : (size_t)limit + 1;
      char *grown = realloc(buf, want + 1);
      if (grown == NULL) {
        free(buf);
        buf = NULL;
        continue;
      }
      buf = grown;
      cap = want;
    }
    if (z.avail_in == 0 && fed < gz->len) {
      size_t more = gz->len - fed > UINT32_MAX ? UINT32_MAX : gz->len - fed;
      z.avail_in = (uInt)more;
      fed += more;
    }
    size_t room = cap - len > UINT32_MAX ? UINT32_MAX : cap - len;
    z.next_out = (Bytef *)buf + len;
    z.avail_out = (uInt)room;
    int r = inflate(&z, Z_NO_FLUSH);
    len += room - z.avail_out;
    if (len > limit) continue; /* refused above */
    if (r == Z_STREAM_END) {
      /* Concatenated gzip members are legal; read the next one if bytes remain. */
      if (z.avail_in == 0 && fed == gz->len) break;
      if (inflateReset(&z) != Z_OK) {
        st = ab_diag_set(diag, AB_ERR_INVALID, "%s: corrupt gzip stream", path);
        break;
      }
      continue;
    }
    if (r == Z_BUF_ERROR && z.avail_out > 0 && z.avail_in == 0 && fed == gz->len) {
      st = ab_diag_set(diag, AB_ERR_INVALID, "%s: truncated gzip stream (ends after %zu compressed bytes)", path, gz->len);
      break;
    }
    if (r != Z_OK && r != Z_BUF_ERROR) {
      st = ab_diag_set(diag, AB_ERR_INVALID, "%s: corrupt gzip stream at compressed byte %zu (%s)", path,
                       (size_t)(z.next_in - (Bytef *)gz->data), z.msg ? z.msg : "inflate failed");
      break;
    }
  }
  inflateEnd(&z);
  if (st != AB_OK) {
    free(buf);
    return st;
  }
  buf[len] = '\0';
  out->data = buf;
  out->len = len;
  return AB_OK;
}
#else
static ab_status gunzip(const char *path, const ab_input_t *gz, uint64_t max_inflated, ab_input_t *out, ab_diag_t *diag) {
  (void)gz;
  (void)max_inflated;
  (void)out;
  return ab_diag_set(diag, AB_ERR_INVALID,
                     "%s: gzip input, but this build has no zlib (install zlib1g-dev and rebuild)", path);
}
#endif

static bool is_gzip(const ab_input_t *raw) {
  return raw->len >= 2 && (unsigned char)raw->data[0] == 0x1f && (unsigned char)raw->data[1] == 0x8b;
}

ab_status ab_input_read_capped(const char *path, uint64_t max_inflated, ab_input_t *in, ab_diag_t *diag) {
  in->data = NULL;
  in->len = 0;
  ab_input_t raw = {NULL, 0};
  AB_TRY(read_raw(path, &raw, diag));
  if (!is_gzip(&raw)) {
    *in = raw;
    return AB_OK;
  }
  ab_status st = gunzip(path, &raw, max_inflated, in, diag);
  free(raw.data);
  return st;
}

ab_status ab_input_read(const char *path, ab_input_t *in, ab_diag_t *diag) { return ab_input_read_capped(path, 0, in, diag); }

ab_status ab_input_from_memory(const char *name, const void *data, size_t len, ab_input_t *in, ab_diag_t *diag) {
  in->data = NULL;
  in->len = 0;
  if (len >= MAX_BYTES) return ab_diag_set(diag, AB_ERR_INVALID, "%s: larger than 8 GiB", name);
  const ab_input_t raw = {(char *)(uintptr_t)data, len}; /* read only */
  if (is_gzip(&raw)) return gunzip(name, &raw, 0, in, diag);
  char *copy = malloc(len + 1);
  if (copy == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "%s: out of host memory", name);
  if (len) memcpy(copy, data, len);
  copy[len] = '\0';
  in->data = copy;
  in->len = len;
  return AB_OK;
}

void ab_input_free(ab_input_t *in) {
  free(in->data);
  in->data = NULL;
  in->len = 0;
}
