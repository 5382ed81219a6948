/* trace.c: a trace's format recognised from its content (trace.h). */
#include "workloads/traces/trace.h"

#include <stdio.h>
#include <string.h>

#include "workloads/traces/rmm_log.h"
#include "workloads/traces/snapshot.h"
#include "workloads/traces/trace_csv.h"

static bool starts_line(const unsigned char *data, size_t len, const char *header) {
  size_t n = strlen(header);
  return len >= n && memcmp(data, header, n) == 0 && (len == n || data[n] == '\n' || data[n] == '\r');
}

/* The format from the first bytes, then its reader over the stream from its first byte. */
static ab_status parse_stream(const char *path, ab_instream_t *in, const ab_trace_opts_t *opts, ab_events_t *out,
                              ab_trace_info_t *info, ab_diag_t *diag) {
  static const ab_trace_opts_t defaults = {.device = -1};
  if (opts == NULL) opts = &defaults;
  ab_events_init(out);
  size_t head = strlen(ab_trace_csv_header_pooled) > strlen(ab_rmm_log_header) ? strlen(ab_trace_csv_header_pooled)
                                                                                 : strlen(ab_rmm_log_header);
  const unsigned char *data = NULL;
  size_t len = 0;
  AB_TRY(ab_instream_window(in, head + 1, &data, &len, diag));
  ab_trace_builder_t b;
  bool pickle = len > 0 && data[0] == 0x80; /* PROTO: protocols 2 and up */
  ab_trace_builder_init(&b, out, path, pickle);
  b.cap = opts->cap;
  b.card = opts->card;
  ab_status st;
  if (len == 0)
    st = ab_diag_set(diag, AB_ERR_INVALID, "%s: empty file (expected a trace)", path);
  else if (pickle)
    st = ab_snapshot_read_stream(path, in, opts->device, &b, diag);
  else if (starts_line(data, len, ab_trace_csv_header) || starts_line(data, len, ab_trace_csv_header_pooled))
    st = ab_trace_csv_read(path, in, &b, diag);
  else if (starts_line(data, len, ab_rmm_log_header))
    st = ab_rmm_log_read(path, in, &b, diag);
  else
    st = ab_diag_set(diag, AB_ERR_INVALID,
                     "%s: not a recognised trace (expected a PyTorch memory snapshot pickle, a CSV trace starting "
                     "with the line '%s', or an RMM log starting with '%s')",
                     path, ab_trace_csv_header, ab_rmm_log_header);
  if (st == AB_OK)
    st = ab_trace_builder_finish(&b, diag);
  else
    ab_trace_builder_discard(&b);
  /* A run of no events would report "ok" about nothing. */
  if (st == AB_OK && out->n == 0 && !opts->decisions_only)
    st = ab_diag_set(diag, AB_ERR_INVALID,
                     "%s: nothing to replay: %llu record%s, none an allocation (expected alloc records, or an RMM "
                     "log's allocate)",
                     path, (unsigned long long)b.info.records, b.info.records == 1 ? "" : "s");
  if (st != AB_OK) {
    ab_events_free(out);
    return st;
  }
  if (info) *info = b.info;
  snprintf(out->source, sizeof out->source, "%s", path);
  return AB_OK;
}

ab_status ab_trace_parse(const char *path, const ab_input_t *in, const ab_trace_opts_t *opts, ab_events_t *out,
                         ab_trace_info_t *info, ab_diag_t *diag) {
  ab_events_init(out);
  ab_instream_t *s;
  AB_TRY(ab_instream_memory(path, in->data, in->len, false, &s, diag));
  ab_status st = parse_stream(path, s, opts, out, info, diag);
  ab_instream_close(s);
  return st;
}

ab_status ab_trace_load(const char *path, const ab_trace_opts_t *opts, ab_events_t *out, ab_trace_info_t *info,
                        ab_diag_t *diag) {
  ab_events_init(out);
  ab_instream_t *s;
  AB_TRY(ab_instream_open(path, opts ? opts->max_inflated : 0, &s, diag));
  ab_status st = parse_stream(path, s, opts, out, info, diag);
  ab_instream_close(s);
  return st;
}
