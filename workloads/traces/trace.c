/* trace.c: a trace's format recognised from its content (trace.h). */
#include "trace.h"

#include <stdio.h>
#include <string.h>

#include "rmm_log.h"
#include "snapshot.h"
#include "trace_csv.h"

static bool starts_line(const ab_input_t *in, const char *header) {
  size_t n = strlen(header);
  return in->len >= n && memcmp(in->data, header, n) == 0 &&
         (in->len == n || in->data[n] == '\n' || in->data[n] == '\r');
}

ab_status ab_trace_parse(const char *path, const ab_input_t *in, const ab_trace_opts_t *opts, ab_events_t *out,
                         ab_trace_info_t *info, ab_diag_t *diag) {
  static const ab_trace_opts_t defaults = {-1, 0, false};
  if (opts == NULL) opts = &defaults;
  ab_events_init(out);
  ab_trace_builder_t b;
  bool pickle = in->len > 0 && (unsigned char)in->data[0] == 0x80; /* PROTO: protocols 2 and up */
  ab_trace_builder_init(&b, out, path, pickle);
  ab_status st;
  if (in->len == 0)
    st = ab_diag_set(diag, AB_ERR_INVALID, "%s: empty file (expected a trace)", path);
  else if (pickle)
    st = ab_snapshot_read(path, in, opts->device, &b, diag);
  else if (starts_line(in, ab_trace_csv_header) || starts_line(in, ab_trace_csv_header_pooled))
    st = ab_trace_csv_read(path, in, &b, diag);
  else if (starts_line(in, ab_rmm_log_header))
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

ab_status ab_trace_load(const char *path, const ab_trace_opts_t *opts, ab_events_t *out, ab_trace_info_t *info,
                        ab_diag_t *diag) {
  ab_events_init(out);
  ab_input_t in;
  AB_TRY(ab_input_read_capped(path, opts ? opts->max_inflated : 0, &in, diag));
  ab_status st = ab_trace_parse(path, &in, opts, out, info, diag);
  ab_input_free(&in);
  return st;
}
