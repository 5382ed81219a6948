#include "workloads/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workloads/input.h"

static const struct {
  const char *name;
  ab_trace_action_t action;
} action_names[] = {
    {"alloc", AB_TR_ALLOC},
    {"free_requested", AB_TR_FREE_REQUESTED},
    {"free_completed", AB_TR_FREE_COMPLETED},
    {"segment_alloc", AB_TR_SEGMENT_ALLOC},
    {"segment_free", AB_TR_SEGMENT_FREE},
    {"segment_map", AB_TR_SEGMENT_MAP},
    {"segment_unmap", AB_TR_SEGMENT_UNMAP},
    {"oom", AB_TR_OOM},
};

ab_trace_action_t ab_trace_action_of(const char *name, size_t len) {
  for (size_t i = 0; i < sizeof action_names / sizeof action_names[0]; i++)
    if (strlen(action_names[i].name) == len && memcmp(action_names[i].name, name, len) == 0)
      return action_names[i].action;
  return AB_TR_OTHER;
}

/* ---- the builder ----------------------------------------------------------------------- */

void ab_trace_builder_init(ab_trace_builder_t *b, ab_events_t *es) {
  memset(b, 0, sizeof *b);
  b->es = es;
  ab_map_init(&b->live);
}

/* The provisional index of a raw stream value (order of first use). */
static ab_status stream_index(ab_trace_builder_t *b, uint64_t raw, unsigned *out, const char *path, size_t pos,
                              ab_diag_t *diag) {
  for (unsigned i = 0; i < b->nstreams; i++)
    if (b->streams[i] == raw) return *out = i, AB_OK;
  if (b->nstreams == AB_TRACE_MAX_STREAMS)
    return ab_diag_set(diag, AB_ERR_INVALID, "%s:%zu: more than %d streams", path, pos, AB_TRACE_MAX_STREAMS);
  b->streams[b->nstreams] = raw;
  *out = b->nstreams++;
  return AB_OK;
}

ab_status ab_trace_builder_add(ab_trace_builder_t *b, ab_trace_action_t action, uint64_t addr, uint64_t size,
                               uint64_t stream, const char *path, size_t pos, ab_diag_t *diag) {
  ab_events_t *es = b->es;
  unsigned s = 0;
  uint64_t v;
  switch (action) {
    case AB_TR_ALLOC:
      if (size == 0 || addr == 0) {
        es->ignored++;
        return AB_OK;
      }
      if (ab_map_get(&b->live, addr, NULL))
        return ab_diag_set(diag, AB_ERR_INVALID, "%s:%zu: alloc at 0x%llx, which is already allocated", path, pos,
                           (unsigned long long)addr);
      AB_TRY(stream_index(b, stream, &s, path, pos, diag));
      uint32_t id = ab_events_alloc(es, size, s, AB_TAG_OTHER);
      if (ab_map_put(&b->live, addr, (uint64_t)id + 1) != AB_OK) es->failed = true;
      return AB_OK;
    case AB_TR_FREE_REQUESTED:
      if (!ab_map_get(&b->live, addr, &v)) {
        es->ignored++; /* allocated before the trace began */
        return AB_OK;
      }
      ab_events_free_phase(es, (uint32_t)(v - 1), AB_FREE_REQUEST);
      return AB_OK;
    case AB_TR_FREE_COMPLETED: {
      if (!ab_map_take(&b->live, addr, &v)) {
        es->ignored++;
        return AB_OK;
      }
      uint32_t fid = (uint32_t)(v - 1);
      ab_event_t *last = es->n ? &es->ev[es->n - 1] : NULL;
      if (last && last->kind == AB_EV_FREE && last->id == fid && last->aux == AB_FREE_REQUEST)
        last->aux = AB_FREE_NOW; /* nothing happened in between: one plain free */
      else
        ab_events_free_phase(es, fid, AB_FREE_COMPLETE);
      return AB_OK;
    }
    case AB_TR_SEGMENT_ALLOC:
    case AB_TR_SEGMENT_FREE:
    case AB_TR_SEGMENT_MAP:
    case AB_TR_SEGMENT_UNMAP: {
      static const ab_seg_action_t seg[] = {AB_SEG_ALLOC, AB_SEG_FREE, AB_SEG_MAP, AB_SEG_UNMAP};
      AB_TRY(stream_index(b, stream, &s, path, pos, diag));
      ab_events_segment(es, seg[action - AB_TR_SEGMENT_ALLOC], s, addr, size);
      return AB_OK;
    }
    case AB_TR_OOM:
      es->trace_ooms++;
      return AB_OK;
    case AB_TR_OTHER:
      return AB_OK;
  }
  return AB_OK;
}

ab_status ab_trace_builder_finish(ab_trace_builder_t *b, const char *path, ab_diag_t *diag) {
  ab_events_t *es = b->es;
  ab_map_free(&b->live);
  /* Rank the streams by recorded value: PyTorch orders its pools by the stream's value. */
  uint16_t rank[AB_TRACE_MAX_STREAMS];
  for (unsigned i = 0; i < b->nstreams; i++) {
    rank[i] = 0;
    for (unsigned j = 0; j < b->nstreams; j++) rank[i] = (uint16_t)(rank[i] + (b->streams[j] < b->streams[i]));
  }
  for (size_t i = 0; i < es->n; i++)
    if (es->ev[i].kind == AB_EV_ALLOC) es->ev[i].stream = rank[es->ev[i].stream];
  for (size_t i = 0; i < es->nsegs; i++) es->segs[i].stream = rank[es->segs[i].stream];
  ab_status st = ab_events_finish(es, diag);
  if (st != AB_OK) ab_diag_prefix(diag, "%s: ", path);
  return st;
}

/* ---- allocbench's CSV trace --------------------------------------------------------------- */

static const char csv_header[] = "action,addr,size,stream,time_us";

/* Parses a whole decimal number field [p, end). */
static bool parse_field(const char *p, const char *end, uint64_t *out) {
  if (p == end) return false;
  uint64_t v = 0;
  for (; p < end; p++) {
    if (*p < '0' || *p > '9') return false;
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

static ab_status read_csv(const char *path, const ab_input_t *in, ab_events_t *es, ab_diag_t *diag) {
  static const char *const names[] = {"action", "addr", "size", "stream", "time_us"};
  ab_trace_builder_t b;
  ab_trace_builder_init(&b, es);
  const char *p = in->data, *end = in->data + in->len;
  size_t line = 0;
  ab_status st = AB_OK;
  while (p < end && st == AB_OK) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (eol == NULL) eol = end;
    const char *stop = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
    line++;
    if (line == 1) { /* the header, checked by the caller */
      p = eol + 1;
      continue;
    }
    if (stop == p) { /* blank lines are harmless */
      p = eol + 1;
      continue;
    }
    const char *f[6];
    size_t nf = 0;
    f[nf++] = p;
    for (const char *q = p; q < stop && nf < 6; q++)
      if (*q == ',') f[nf++] = q + 1;
    if (nf != 5) {
      st = ab_diag_set(diag, AB_ERR_INVALID, "%s:%zu: expected 5 columns (%s), got %zu", path, line, csv_header,
                       nf > 5 ? (size_t)6 : nf);
      break;
    }
    uint64_t num[4];
    for (size_t i = 1; i < 5 && st == AB_OK; i++) {
      const char *fend = i < 4 ? f[i + 1] - 1 : stop;
      if (!parse_field(f[i], fend, &num[i - 1]))
        st = ab_diag_set(diag, AB_ERR_INVALID, "%s:%zu: column '%s': expected a whole number, got '%.*s'", path, line,
                         names[i], (int)(fend - f[i] > 40 ? 40 : fend - f[i]), f[i]);
    }
    if (st != AB_OK) break;
    st = ab_trace_builder_add(&b, ab_trace_action_of(f[0], (size_t)(f[1] - 1 - f[0])), num[0], num[1], num[2], path,
                              line, diag);
    p = eol + 1;
  }
  if (st != AB_OK) {
    ab_map_free(&b.live);
    return st;
  }
  return ab_trace_builder_finish(&b, path, diag);
}

/* ---- format recognition --------------------------------------------------------------- */

static bool starts_line(const ab_input_t *in, const char *header) {
  size_t n = strlen(header);
  return in->len >= n && memcmp(in->data, header, n) == 0 &&
         (in->len == n || in->data[n] == '\n' || in->data[n] == '\r');
}

ab_status ab_trace_load(const char *path, ab_events_t *out, ab_diag_t *diag) {
  ab_events_init(out);
  ab_input_t in;
  AB_TRY(ab_input_read(path, &in, diag));
  ab_status st;
  if (in.len == 0)
    st = ab_diag_set(diag, AB_ERR_INVALID, "%s: empty file (expected a trace)", path);
  else if (starts_line(&in, csv_header))
    st = read_csv(path, &in, out, diag);
  else
    st = ab_diag_set(diag, AB_ERR_INVALID,
                     "%s: not a recognised trace (expected a CSV trace starting with the line '%s')", path, csv_header);
  ab_input_free(&in);
  if (st != AB_OK) {
    ab_events_free(out);
    return st;
  }
  snprintf(out->source, sizeof out->source, "%s", path);
  return AB_OK;
}
