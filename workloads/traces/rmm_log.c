/* rmm_log.c: RMM's logging_resource_adaptor CSV (rmm_log.h). */
#include "workloads/traces/rmm_log.h"

#include <string.h>

const char ab_rmm_log_header[] = "Thread,Time,Action,Pointer,Size,Stream";

static const char *const columns[] = {"Thread", "Time", "Action", "Pointer", "Size", "Stream"};
#define NCOLS 6

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Hex digits [p, end), with an optional 0x; false if anything else or too many. */
static bool parse_hex(const char *p, const char *end, uint64_t *out) {
  if (end - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) p += 2;
  if (p == end || end - p > 16) return false;
  uint64_t v = 0;
  for (; p < end; p++) {
    int d = hex_digit(*p);
    if (d < 0) return false;
    v = v << 4 | (uint64_t)d;
  }
  *out = v;
  return true;
}

static bool field_is(const char *p, const char *end, const char *s) {
  size_t n = strlen(s);
  return (size_t)(end - p) == n && memcmp(p, s, n) == 0;
}

ab_status ab_rmm_log_read(const char *path, ab_instream_t *in, ab_trace_builder_t *b, ab_diag_t *diag) {
  b->info.format = "rmm-log";
  ab_trace_lines_t lines;
  ab_trace_lines_init(&lines, in);
  ab_trace_builder_reserve(b, ab_instream_size_hint(in) / 32); /* lines of 60 bytes and more, a free two records */
  size_t line = 0;
  for (;;) {
    const char *row;
    size_t len;
    bool more;
    AB_TRY(ab_trace_lines_next(&lines, &row, &len, &more, diag));
    if (!more) break;
    const char *eol = row + len;
    const char *stop = eol > row && eol[-1] == '\r' ? eol - 1 : eol;
    line++;
    if (line == 1 || stop == row) continue; /* the header (checked by the caller), or a blank line */
    const char *f[NCOLS + 1];
    size_t nf = 0;
    f[nf++] = row;
    for (const char *q = row; q < stop && nf <= NCOLS; q++)
      if (*q == ',') f[nf++] = q + 1;
    if (nf != NCOLS)
      return ab_diag_set(diag, AB_ERR_INVALID, "%s:%zu: expected 6 columns (%s), got %s%zu", path, line,
                         ab_rmm_log_header, nf > NCOLS ? "more than " : "", nf > NCOLS ? (size_t)NCOLS : nf);
    const char *fend[NCOLS];
    for (size_t i = 0; i < NCOLS; i++) fend[i] = i + 1 < NCOLS ? f[i + 1] - 1 : stop;
    for (size_t i = 0; i < 2; i++)
      if (f[i] == fend[i]) return ab_diag_set(diag, AB_ERR_INVALID, "%s:%zu: column '%s' is empty", path, line, columns[i]);
    /* Note [RMM's log formats]: RMM's logging_resource_adaptor has written a null pointer as
     * "(nil)" (glibc's %p) and, in its 0.15 and 0.16 releases, as "0"; every other pointer as
     * 0x and hex digits. It wrote streams in decimal in those releases ("0", the handle's
     * value) and as 0x and hex digits since: a stream is read in the base its text says. */
    uint64_t ptr = 0, size = 0, stream = 0;
    bool null = field_is(f[3], fend[3], "(nil)") || field_is(f[3], fend[3], "0");
    if (!null && !(fend[3] - f[3] > 2 && f[3][0] == '0' && f[3][1] == 'x' && parse_hex(f[3], fend[3], &ptr)))
      return ab_diag_set(diag, AB_ERR_INVALID,
                         "%s:%zu: column 'Pointer': expected a pointer (0x7f0a12345600, (nil) or 0), got '%.*s'", path, line,
                         (int)(fend[3] - f[3] > 40 ? 40 : fend[3] - f[3]), f[3]);
    if (!ab_trace_parse_dec(f[4], fend[4], &size))
      return ab_diag_set(diag, AB_ERR_INVALID, "%s:%zu: column 'Size': expected a whole number, got '%.*s'", path, line,
                         (int)(fend[4] - f[4] > 40 ? 40 : fend[4] - f[4]), f[4]);
    bool hex = fend[5] - f[5] > 2 && f[5][0] == '0' && (f[5][1] == 'x' || f[5][1] == 'X');
    if (!(hex ? parse_hex(f[5], fend[5], &stream) : ab_trace_parse_dec(f[5], fend[5], &stream)))
      return ab_diag_set(diag, AB_ERR_INVALID,
                         "%s:%zu: column 'Stream': expected a stream in hex (0x0) or, as RMM 0.15 wrote it, in decimal, "
                         "got '%.*s'",
                         path, line, (int)(fend[5] - f[5] > 40 ? 40 : fend[5] - f[5]), f[5]);
    size_t alen = (size_t)(fend[2] - f[2]);
    if (field_is(f[2], fend[2], "allocate")) {
      ab_trace_builder_count(b, f[2], alen);
      AB_TRY(ab_trace_builder_add(b, AB_TR_ALLOC, ptr, size, stream, line, diag));
    } else if (field_is(f[2], fend[2], "free")) {
      ab_trace_builder_count(b, f[2], alen);
      AB_TRY(ab_trace_builder_add(b, AB_TR_FREE_REQUESTED, ptr, size, stream, line, diag));
      AB_TRY(ab_trace_builder_add(b, AB_TR_FREE_COMPLETED, ptr, size, stream, line, diag));
    } else if (field_is(f[2], fend[2], "allocate failure")) {
      ab_trace_builder_count(b, f[2], alen);
      AB_TRY(ab_trace_builder_add(b, AB_TR_OOM, 0, size, stream, line, diag));
    } else {
      return ab_diag_set(diag, AB_ERR_INVALID,
                         "%s:%zu: column 'Action': expected allocate, allocate failure or free, got '%.*s'", path, line,
                         (int)(alen > 40 ? 40 : alen), f[2]);
    }
  }
  return AB_OK;
}
