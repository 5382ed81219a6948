#include "harness/run/table.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kernels/base/input.h"
#include "kernels/base/output.h"

void ab_table_init(ab_table_t *t, const ab_col_t *cols, size_t ncols) {
  memset(t, 0, sizeof *t);
  t->cols = cols;
  t->ncols = ncols;
}

void ab_table_free(ab_table_t *t) {
  for (size_t i = 0; i < t->nrows * t->ncols; i++) free(t->cells[i]);
  free(t->cells);
  t->cells = NULL;
  t->nrows = t->caprows = 0;
}

ab_status ab_table_add(ab_table_t *t, const char *const *cells) {
  if (t->nrows == t->caprows) {
    size_t cap = t->caprows ? t->caprows * 2 : 8;
    char **grown = realloc(t->cells, cap * t->ncols * sizeof *grown);
    if (grown == NULL) return AB_ERR_INTERNAL;
    t->cells = grown;
    t->caprows = cap;
  }
  char **row = &t->cells[t->nrows * t->ncols];
  for (size_t c = 0; c < t->ncols; c++) {
    row[c] = strdup(cells[c] ? cells[c] : "");
    if (row[c] == NULL) {
      while (c-- > 0) free(row[c]);
      return AB_ERR_INTERNAL;
    }
  }
  t->nrows++;
  return AB_OK;
}

const char *ab_table_get(const ab_table_t *t, size_t r, const char *name) {
  for (size_t c = 0; c < t->ncols; c++)
    if (strcmp(t->cols[c].name, name) == 0) return t->cells[r * t->ncols + c];
  return NULL;
}

static void csv_cell(FILE *f, const char *s) {
  if (strpbrk(s, ",\"\r\n") == NULL && s[0] != ' ' && (s[0] == '\0' || s[strlen(s) - 1] != ' ')) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static void csv_header(const ab_table_t *t, FILE *f) {
  for (size_t c = 0; c < t->ncols; c++) {
    if (c) fputc(',', f);
    csv_cell(f, t->cols[c].name); /* names may come from a trace (--info's actions) */
  }
  fputc('\n', f);
}

void ab_table_write_csv(const ab_table_t *t, FILE *f, bool header) {
  if (header) csv_header(t, f);
  for (size_t r = 0; r < t->nrows; r++) {
    for (size_t c = 0; c < t->ncols; c++) {
      if (c) fputc(',', f);
      csv_cell(f, t->cells[r * t->ncols + c]);
    }
    fputc('\n', f);
  }
}

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
  fputc('"', f);
}

void ab_table_write_json(const ab_table_t *t, FILE *f) {
  fputs("[", f);
  for (size_t r = 0; r < t->nrows; r++) {
    fputs(r ? ",\n {" : "\n {", f);
    for (size_t c = 0; c < t->ncols; c++) {
      const char *v = t->cells[r * t->ncols + c];
      if (c) fputs(", ", f);
      json_string(f, t->cols[c].name);
      fputs(": ", f);
      if (t->cols[c].numeric && v[0] != '\0')
        fputs(v, f);
      else if (t->cols[c].numeric)
        fputs("null", f);
      else
        json_string(f, v);
    }
    fputc('}', f);
  }
  fputs("\n]\n", f);
}

void ab_table_write_text(const ab_table_t *t, FILE *f, const char *const *names, size_t nnames) {
  size_t idx[64], n = 0;
  for (size_t c = 0; c < t->ncols && n < 64; c++) {
    bool want = names == NULL;
    for (size_t i = 0; i < nnames && !want; i++) want = strcmp(names[i], t->cols[c].name) == 0;
    if (want) idx[n++] = c;
  }
  size_t width[64];
  for (size_t i = 0; i < n; i++) {
    width[i] = strlen(t->cols[idx[i]].name);
    for (size_t r = 0; r < t->nrows; r++) {
      size_t w = strlen(t->cells[r * t->ncols + idx[i]]);
      if (w > width[i]) width[i] = w;
    }
  }
  for (size_t r = 0; r <= t->nrows; r++) {
    for (size_t i = 0; i < n; i++) {
      const ab_col_t *col = &t->cols[idx[i]];
      const char *v = r == 0 ? col->name : t->cells[(r - 1) * t->ncols + idx[i]];
      /* A text column at the end is not padded: no trailing blanks to widen the line. */
      int w = !col->numeric && i + 1 == n ? 0 : (int)width[i];
      fprintf(f, col->numeric ? "%s%*s" : "%s%-*s", i ? "  " : "", w, v);
    }
    fputc('\n', f);
  }
}

void ab_table_write_pairs(const ab_table_t *t, size_t r, FILE *f) {
  size_t w = 0;
  for (size_t c = 0; c < t->ncols; c++)
    if (strlen(t->cols[c].name) > w) w = strlen(t->cols[c].name);
  for (size_t c = 0; c < t->ncols; c++) fprintf(f, "%-*s  %s\n", (int)w, t->cols[c].name, t->cells[r * t->ncols + c]);
}

static ab_status parent_dir(const char *path, ab_diag_t *diag) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash == NULL || slash == dir) return AB_OK;
  *slash = '\0';
  return ab_output_mkdirs(dir, diag);
}

static ab_status write_all(int fd, const char *buf, size_t len, const char *path, ab_diag_t *diag) {
  while (len) {
    ssize_t w = write(fd, buf, len);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return ab_diag_set(diag, AB_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    buf += w;
    len -= (size_t)w;
  }
  return AB_OK;
}

/* Appends buf to a file of `size` bytes; a write cut short (a full disk, a file size limit)
 * is cut back to `size`, so that a failed append leaves the file as it was. */
static ab_status append_or_restore(int fd, off_t size, const char *buf, size_t len, const char *path, ab_diag_t *diag) {
  ab_status st = write_all(fd, buf, len, path, diag);
  if (st == AB_OK) return AB_OK;
  if (ftruncate(fd, size) != 0)
    return ab_diag_set(diag, AB_ERR_IO, "%s: write failed, and the partial row could not be removed: %s", path,
                       strerror(errno));
  return st;
}

/* A device, a FIFO or /dev/stdout: the header and the rows written straight to it
 * (Note [Writing where the user points], output.h); nothing to inspect, move or cut. */
static ab_status append_special(const char *path, const char *header, size_t hlen, const char *body, size_t blen,
                                ab_diag_t *diag) {
  ab_output_t out;
  AB_TRY(ab_output_open(&out, path, diag));
  fwrite(header, 1, hlen, out.f);
  fwrite(body, 1, blen, out.f);
  return ab_output_commit(&out, diag);
}

/* Renders the table (with or without its header) into a malloc'd buffer. */
static char *render(const ab_table_t *t, bool header, size_t *len) {
  char *buf = NULL;
  FILE *mem = open_memstream(&buf, len);
  if (mem == NULL) return NULL;
  ab_table_write_csv(t, mem, header);
  if (fclose(mem) != 0) {
    free(buf);
    return NULL;
  }
  return buf;
}

/* The fields of one CSV line (no newline in it) as ab_table_write_csv quotes them; -1 when a
 * quoted field is still open at its end (a line cut inside quotes). */
static long count_fields(const char *line, size_t len) {
  long n = 1;
  bool quoted = false;
  for (size_t i = 0; i < len; i++) {
    if (line[i] == '"') quoted = !quoted; /* a doubled quote toggles twice */
    else if (line[i] == ',' && !quoted) n++;
  }
  return quoted ? -1 : n;
}

/* The last line of a file of `size` bytes that does not end in a newline: where it starts
 * (after the last newline, or 0) into *from, its bytes into *line (malloc'd). */
static ab_status last_line(int fd, off_t size, off_t *from, char **line, const char *path, ab_diag_t *diag) {
  off_t start = size;
  char buf[4096];
  while (start > 0) {
    off_t at = start > (off_t)sizeof buf ? start - (off_t)sizeof buf : 0;
    ssize_t n = pread(fd, buf, (size_t)(start - at), at);
    if (n <= 0) return ab_diag_set(diag, AB_ERR_IO, "%s: cannot read: %s", path, n < 0 ? strerror(errno) : "cut short");
    ssize_t i = n;
    while (i > 0 && buf[i - 1] != '\n') i--;
    if (i > 0) {
      start = at + i;
      break;
    }
    start = at;
  }
  *from = start;
  *line = malloc((size_t)(size - start) + 1);
  if (*line == NULL) return AB_ERR_INTERNAL;
  if (pread(fd, *line, (size_t)(size - start), start) != size - start) {
    free(*line);
    return ab_diag_set(diag, AB_ERR_IO, "%s: cannot read its last line: %s", path, strerror(errno));
  }
  return AB_OK;
}

/* Note [The last line of a results file]: rows go out in one write, which a kill can cut
 * only where it crosses a page of the file (Linux looks for a fatal signal between pages),
 * and a full disk anywhere; an editor, though, saves a file without its final newline. So a
 * last line without its newline is taken for a cut row only when it has fewer fields than
 * the header (or a quote left open), and cut back to the newline before it, saying so with
 * what it held; one with every field is a whole row, and gets its newline. A file with another header is left as it is:
 * it is moved aside whole. */
static ab_status finish_last_line(int fd, off_t size, size_t header_fields, const char *path, ab_diag_t *diag) {
  char last;
  if (pread(fd, &last, 1, size - 1) != 1) return ab_diag_set(diag, AB_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
  if (last == '\n') return AB_OK;
  off_t from = 0;
  char *line = NULL;
  AB_TRY(last_line(fd, size, &from, &line, path, diag));
  size_t len = (size_t)(size - from);
  long fields = count_fields(line, len);
  if (fields == (long)header_fields) {
    free(line);
    if (pwrite(fd, "\n", 1, size) != 1)
      return ab_diag_set(diag, AB_ERR_IO, "%s: cannot end its last row: %s", path, strerror(errno));
    return AB_OK;
  }
  /* Said with what it held: a line a person added by hand is not lost without a word. */
  fprintf(stderr, "allocbench: %s: its last line (%zu bytes, %ld of %zu fields, no newline) is a row cut short; "
          "removed: \"%.*s%s\"\n", path, len, fields, header_fields, (int)(len < 300 ? len : 300), line,
          len < 300 ? "" : "...");
  free(line);
  if (ftruncate(fd, from) != 0) return ab_diag_set(diag, AB_ERR_IO, "%s: cannot trim a partial row: %s", path, strerror(errno));
  return AB_OK;
}

/* Inspects an existing file under lock: says whether its first line is our header, and if
 * so finishes its last line (Note [The last line of a results file]). */
static ab_status inspect(int fd, const char *header, bool *same, const char *path, ab_diag_t *diag) {
  struct stat sb;
  if (fstat(fd, &sb) != 0) return ab_diag_set(diag, AB_ERR_IO, "%s: %s", path, strerror(errno));
  if (sb.st_size == 0) return *same = true, AB_OK;
  size_t hlen = strlen(header); /* with its newline */
  char *first = malloc(hlen + 1);
  if (first == NULL) return AB_ERR_INTERNAL;
  ssize_t got = pread(fd, first, hlen, 0);
  /* The header alone, saved without its newline, is the header. */
  *same = (got == (ssize_t)hlen && memcmp(first, header, hlen) == 0) ||
          (got == (ssize_t)hlen - 1 && sb.st_size == got && memcmp(first, header, hlen - 1) == 0);
  free(first);
  if (!*same) return AB_OK;
  return finish_last_line(fd, sb.st_size, (size_t)count_fields(header, hlen - 1), path, diag);
}

/* Moves a file with other columns aside to PATH.YYYYMMDD-HHMMSS, or PATH.YYYYMMDD-HHMMSS.N
 * when that name is taken: never onto a file that exists (a backup of the same second, or
 * the user's own), so no rename replaces anything. */
static ab_status move_aside(const char *path, char *aside, size_t size, ab_diag_t *diag) {
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  for (unsigned seq = 0; seq < 1000; seq++) {
    if (seq == 0) snprintf(aside, size, "%s.%s", path, stamp);
    else snprintf(aside, size, "%s.%s.%u", path, stamp, seq);
    /* link(2) fails on a name that exists, where rename(2) would replace it. */
    if (link(path, aside) == 0) {
      if (unlink(path) == 0) return AB_OK;
      int e = errno;
      unlink(aside);
      return ab_diag_set(diag, AB_ERR_IO, "%s: has other columns and cannot be moved aside: %s", path, strerror(e));
    }
    if (errno != EEXIST)
      return ab_diag_set(diag, AB_ERR_IO, "%s: has other columns and cannot be moved aside to %s: %s", path, aside,
                         strerror(errno));
  }
  return ab_diag_set(diag, AB_ERR_IO, "%s: has other columns, and 1000 names beside it for its backup are taken", path);
}

ab_status ab_table_append_csv(const ab_table_t *t, const char *path, char *moved_to, size_t moved_size,
                              ab_diag_t *diag) {
  if (moved_to && moved_size) moved_to[0] = '\0';
  if (ab_input_is_input(path))
    return ab_diag_set(diag, AB_ERR_INVALID, "%s: is an input of this run; refusing to write over it", path);
  AB_TRY(parent_dir(path, diag));
  size_t hlen, blen;
  char *header = NULL, *body = NULL;
  ab_table_t head_only = *t;
  head_only.nrows = 0;
  header = render(&head_only, true, &hlen);
  body = render(t, false, &blen);
  ab_status st = AB_OK;
  int fd = -1;
  if (header == NULL || body == NULL) {
    st = AB_ERR_INTERNAL;
    goto done;
  }
  if (ab_output_is_special(path)) {
    st = append_special(path, header, hlen, body, blen, diag);
    goto done;
  }
  for (int attempt = 0;; attempt++) {
    if (attempt == 4) {
      st = ab_diag_set(diag, AB_ERR_IO, "%s: keeps being replaced while appending", path);
      goto done;
    }
    /* Made here, a file that a failed first write leaves empty is taken away again. */
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    bool created = fd >= 0;
    if (fd < 0 && errno == EEXIST) fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      st = ab_diag_set(diag, AB_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
      goto done;
    }
    if (flock(fd, LOCK_EX) != 0) {
      st = ab_diag_set(diag, AB_ERR_IO, "%s: cannot lock: %s", path, strerror(errno));
      goto done;
    }
    /* Another process may have moved the file aside while we waited for the lock. */
    struct stat locked, named;
    if (fstat(fd, &locked) != 0 || stat(path, &named) != 0 || locked.st_ino != named.st_ino ||
        locked.st_dev != named.st_dev) {
      close(fd);
      fd = -1;
      continue;
    }
    int rfd = open(path, O_RDWR | O_CLOEXEC);
    bool same = true;
    if (rfd < 0) {
      st = ab_diag_set(diag, AB_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
      goto done;
    }
    st = inspect(rfd, header, &same, path, diag);
    close(rfd);
    if (st != AB_OK) goto done;
    if (!same) {
      /* Another version's columns: keep that file under a dated name, start afresh. */
      char aside[4200];
      st = move_aside(path, aside, sizeof aside, diag);
      if (st != AB_OK) goto done;
      if (moved_to) snprintf(moved_to, moved_size, "%s", aside);
      close(fd);
      fd = -1;
      continue;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
      st = ab_diag_set(diag, AB_ERR_IO, "%s: %s", path, strerror(errno));
      goto done;
    }
    /* Header and rows in one write, so that a reader sees all of it or none. */
    if (sb.st_size == 0) {
      char *both = malloc(hlen + blen);
      if (both == NULL) {
        st = AB_ERR_INTERNAL;
        goto done;
      }
      memcpy(both, header, hlen);
      memcpy(both + hlen, body, blen);
      st = append_or_restore(fd, 0, both, hlen + blen, path, diag);
      free(both);
      if (st != AB_OK && created) (void)unlink(path); /* under the lock, still this file (checked above) */
    } else {
      st = append_or_restore(fd, sb.st_size, body, blen, path, diag);
    }
    break;
  }
done:
  if (fd >= 0) close(fd);
  free(header);
  free(body);
  return st;
}

ab_status ab_table_write_file(const ab_table_t *t, const char *path, ab_diag_t *diag) {
  AB_TRY(parent_dir(path, diag));
  ab_output_t out;
  AB_TRY(ab_output_open(&out, path, diag));
  ab_table_write_csv(t, out.f, true);
  return ab_output_commit(&out, diag);
}
