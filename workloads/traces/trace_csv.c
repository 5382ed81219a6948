#include "workloads/traces/trace_csv.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kernels/base/output.h"

const char ab_trace_csv_header[] = "action,addr,size,stream,time_us";
const char ab_trace_csv_header_pooled[] = "action,addr,size,stream,time_us,pool";

ab_status ab_trace_csv_read(const char *path, ab_instream_t *in, ab_trace_builder_t *b, ab_diag_t *diag) {
  static const char *const names[] = {"action", "addr", "size", "stream", "time_us", "pool"};
  b->info.format = "allocbench-csv";
  ab_trace_lines_t lines;
  ab_trace_lines_init(&lines, in);
  /* A line of some 32 bytes or more ("alloc,140737454800896,266240,0,2" is 32): the events
   * sized from the file at once (trace_builder.c, Note [Records to events in one pass]). */
  ab_trace_builder_reserve(b, ab_instream_size_hint(in) / 32);
  size_t hn = strlen(ab_trace_csv_header_pooled), want = 5;
  size_t line = 0;
  ab_status st = AB_OK;
  for (;;) {
    const char *p;
    size_t len;
    bool more;
    AB_TRY(ab_trace_lines_next(&lines, &p, &len, &more, diag));
    if (!more) break;
    const char *eol = p + len;
    const char *stop = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
    line++;
    if (line == 1) {
      /* The pool column is optional (Note [Pools of a trace]): without it, the default pool. */
      want = len >= hn && memcmp(p, ab_trace_csv_header_pooled, hn) == 0 ? 6 : 5;
      continue;
    }
    if (stop == p) continue; /* a blank line */
    const char *f[7];
    size_t nf = 0;
    f[nf++] = p;
    for (const char *q = p; q < stop && nf < 7; q++)
      if (*q == ',') f[nf++] = q + 1;
    if (nf != want) {
      st = ab_diag_set(diag, AB_ERR_INVALID, "%s:%zu: expected %zu columns (%s), got %zu", path, line, want,
                       want == 6 ? ab_trace_csv_header_pooled : ab_trace_csv_header, nf > want ? want + 1 : nf);
      break;
    }
    uint64_t num[5];
    for (size_t i = 1; i < want && st == AB_OK; i++) {
      const char *fend = i < want - 1 ? f[i + 1] - 1 : stop;
      if (!ab_trace_parse_dec(f[i], fend, &num[i - 1]))
        st = ab_diag_set(diag, AB_ERR_INVALID, "%s:%zu: column '%s': expected a whole number, got '%.*s'", path, line,
                         names[i], (int)(fend - f[i] > 40 ? 40 : fend - f[i]), f[i]);
    }
    if (st != AB_OK) break;
    size_t alen = (size_t)(f[1] - 1 - f[0]);
    if (alen == 0) {
      st = ab_diag_set(diag, AB_ERR_INVALID, "%s:%zu: column 'action': empty", path, line);
      break;
    }
    ab_trace_builder_count(b, f[0], alen);
    int pool = 0;
    if (want == 6 && num[4] > INT64_MAX) {
      st = ab_diag_set(diag, AB_ERR_INVALID, "%s:%zu: column 'pool': expected a pool number below 2^63", path, line);
      break;
    }
    if (want == 6 && num[4]) st = ab_trace_builder_pool(b, 0, (int64_t)num[4], line, &pool, diag);
    if (st == AB_OK)
      st = ab_trace_builder_add_pooled(b, ab_trace_action_of(f[0], alen), num[0], num[1], num[2], pool, line, diag);
    if (st != AB_OK) break;
  }
  return st;
}

ab_status ab_trace_write_csv(const char *path, const ab_trace_log_t *log, const uint64_t *stream_values,
                             unsigned nstreams, ab_diag_t *diag) {
  ab_output_t out;
  AB_TRY(ab_output_open(&out, path, diag));
  FILE *f = out.f;
  setvbuf(f, NULL, _IOFBF, 1 << 20);
  /* The pool column only when a private pool was used: other traces read as before. */
  bool pooled = false;
  for (size_t i = 0; i < log->n && !pooled; i++) pooled = log->recs[i].pool != 0;
  fprintf(f, "%s\n", pooled ? ab_trace_csv_header_pooled : ab_trace_csv_header);
  for (size_t i = 0; i < log->n && !ferror(f); i++) {
    const ab_trace_rec_t *r = &log->recs[i];
    uint64_t stream = r->stream < nstreams ? stream_values[r->stream] : r->stream;
    fprintf(f, "%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64, ab_trace_action_name((ab_trace_action_t)r->action),
            r->action == AB_TR_OOM ? 0 : r->addr, r->bytes, stream, r->time_us);
    if (pooled) fprintf(f, ",%" PRIu32, r->pool);
    fputc('\n', f);
  }
  return ab_output_commit(&out, diag);
}
