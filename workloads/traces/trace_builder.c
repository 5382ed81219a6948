/* trace_builder.c: PyTorch-style records to events (trace_builder.h). */
#include "trace_builder.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"

struct ab_trace_rec_in_s {
  uint64_t addr, size;
  size_t pos;      /* line or byte offset */
  uint8_t action;  /* ab_trace_action_t */
  uint8_t pending; /* held blocks: the free was requested, not completed */
  uint16_t stream; /* provisional index (order of first use) */
};

/* ---- the builder ----------------------------------------------------------------------- */

void ab_trace_builder_init(ab_trace_builder_t *b, ab_events_t *es, const char *path, bool byte_pos) {
  memset(b, 0, sizeof *b);
  b->es = es;
  b->path = path;
  b->byte_pos = byte_pos;
  b->info.device = -1;
  ab_map_init(&b->stream_of);
  b->max_stream = -1;
}

void ab_trace_builder_discard(ab_trace_builder_t *b) {
  ab_map_free(&b->stream_of);
  free(b->recs);
  free(b->held);
  b->recs = b->held = NULL;
  b->nrecs = b->nheld = 0;
}

/* "PATH:LINE" or "PATH: byte N", for messages. */
static const char *where(const ab_trace_builder_t *b, size_t pos, char *buf, size_t size) {
  snprintf(buf, size, b->byte_pos ? "%s: byte %zu" : "%s:%zu", b->path, pos);
  return buf;
}

void ab_trace_builder_count(ab_trace_builder_t *b, const char *name, size_t len) {
  ab_trace_info_t *in = &b->info;
  in->records++;
  for (unsigned i = 0; i < in->nactions; i++)
    if (strlen(in->actions[i].name) == len && memcmp(in->actions[i].name, name, len) == 0) {
      in->actions[i].count++;
      return;
    }
  if (in->nactions == AB_TRACE_MAX_ACTION_NAMES || len >= sizeof in->actions[0].name) {
    in->other_actions++;
    return;
  }
  memcpy(in->actions[in->nactions].name, name, len);
  in->actions[in->nactions].name[len] = '\0';
  in->actions[in->nactions++].count = 1;
}

/* The provisional index of a raw stream value (order of first use), by a hash map: a trace
 * of many streams costs no scan of them per record. */
static ab_status stream_index(ab_trace_builder_t *b, uint64_t raw, uint16_t *out, size_t pos, ab_diag_t *diag) {
  uint64_t idx = 0;
  if (raw == UINT64_MAX ? b->max_stream >= 0 : ab_map_get(&b->stream_of, raw + 1, &idx)) {
    *out = (uint16_t)(raw == UINT64_MAX ? (uint64_t)b->max_stream : idx - 1);
    return AB_OK;
  }
  if (b->nstreams == AB_TRACE_MAX_STREAMS) {
    char at[300];
    return ab_diag_set(diag, AB_ERR_INVALID, "%s: more than %d streams", where(b, pos, at, sizeof at),
                       AB_TRACE_MAX_STREAMS);
  }
  if (raw == UINT64_MAX)
    b->max_stream = (int)b->nstreams;
  else if (ab_map_put(&b->stream_of, raw + 1, (uint64_t)b->nstreams + 1) != AB_OK)
    b->failed = true;
  b->streams[b->nstreams] = raw;
  *out = (uint16_t)b->nstreams++;
  return AB_OK;
}

static void push_rec(ab_trace_builder_t *b, ab_trace_rec_in_t **items, size_t *n, size_t *cap,
                     const ab_trace_rec_in_t *r) {
  if (*n == *cap) {
    size_t want = *cap ? *cap * 2 : 4096;
    ab_trace_rec_in_t *grown = realloc(*items, want * sizeof *grown);
    if (grown == NULL) {
      b->failed = true;
      return;
    }
    *items = grown;
    *cap = want;
  }
  (*items)[(*n)++] = *r;
}

ab_status ab_trace_builder_add(ab_trace_builder_t *b, ab_trace_action_t action, uint64_t addr, uint64_t size,
                               uint64_t stream, size_t pos, ab_diag_t *diag) {
  ab_trace_rec_in_t r = {addr, size, pos, (uint8_t)action, 0, 0};
  if (action != AB_TR_OTHER && action != AB_TR_SNAPSHOT && action != AB_TR_OOM)
    AB_TRY(stream_index(b, stream, &r.stream, pos, diag));
  push_rec(b, &b->recs, &b->nrecs, &b->caprecs, &r);
  return AB_OK;
}

ab_status ab_trace_builder_held(ab_trace_builder_t *b, uint64_t addr, uint64_t requested, uint64_t stream,
                                bool pending, size_t pos, ab_diag_t *diag) {
  ab_trace_rec_in_t r = {addr, requested, pos, AB_TR_ALLOC, pending, 0};
  if (addr == 0 || requested == 0) return AB_OK; /* nothing a replay could allocate */
  AB_TRY(stream_index(b, stream, &r.stream, pos, diag));
  push_rec(b, &b->held, &b->nheld, &b->capheld, &r);
  return AB_OK;
}

void ab_trace_builder_end_state(ab_trace_builder_t *b, uint64_t reserved, uint64_t segments) {
  b->info.end_state = true;
  b->end_reserved = reserved;
  b->end_segments = segments;
}

/* What the first pass knows of an address. */
enum { ADDR_UNSEEN, ADDR_LIVE, ADDR_REQUESTED, ADDR_DEAD };

static int by_addr(const void *x, const void *y) {
  const ab_trace_rec_in_t *a = x, *b = y;
  return (a->addr > b->addr) - (a->addr < b->addr);
}

/* Pass 1 of Note [Memory that existed before the trace]: finds the blocks live at the start.
 * Their records go to *out (malloc'd) with action ALLOC; pending marks those whose free was
 * requested before the trace. */
static ab_status find_preexisting(ab_trace_builder_t *b, ab_trace_rec_in_t **out, size_t *nout) {
  ab_map_t seen;
  ab_map_init(&seen);
  size_t n = 0, cap = 0;
  *out = NULL;
  for (size_t i = 0; i < b->nrecs && !b->failed; i++) {
    const ab_trace_rec_in_t *r = &b->recs[i];
    uint64_t s = ADDR_UNSEEN;
    if (r->addr == 0) continue;
    ab_map_get(&seen, r->addr, &s);
    uint64_t next = s;
    bool before = false;
    switch ((ab_trace_action_t)r->action) {
      case AB_TR_ALLOC:
        if (r->size) next = ADDR_LIVE;
        break;
      case AB_TR_FREE_REQUESTED:
        if (s == ADDR_LIVE || s == ADDR_UNSEEN) next = ADDR_REQUESTED;
        before = s == ADDR_UNSEEN;
        break;
      case AB_TR_FREE_COMPLETED:
        if (s != ADDR_DEAD) next = ADDR_DEAD;
        before = s == ADDR_UNSEEN;
        break;
      default: break;
    }
    if (before && r->size) {
      ab_trace_rec_in_t pre = *r;
      pre.action = AB_TR_ALLOC;
      pre.pending = r->action == AB_TR_FREE_COMPLETED;
      push_rec(b, out, &n, &cap, &pre);
    }
    if (next != s && ab_map_put(&seen, r->addr, next) != AB_OK) b->failed = true;
  }
  for (size_t i = 0; i < b->nheld && !b->failed; i++)
    if (!ab_map_get(&seen, b->held[i].addr, NULL)) push_rec(b, out, &n, &cap, &b->held[i]);
  ab_map_free(&seen);
  if (n) qsort(*out, n, sizeof **out, by_addr);
  *nout = n;
  return b->failed ? AB_ERR_INTERNAL : AB_OK;
}

/* Live ids in pass 2: id + 1, with REQUESTED once its free was requested. */
#define REQUESTED (1ULL << 63)

static ab_status apply(ab_trace_builder_t *b, ab_map_t *live, const ab_trace_rec_in_t *r, ab_diag_t *diag) {
  ab_events_t *es = b->es;
  uint64_t v;
  switch ((ab_trace_action_t)r->action) {
    case AB_TR_ALLOC: {
      if (r->size == 0 || r->addr == 0) {
        es->ignored++;
        return AB_OK;
      }
      if (ab_map_get(live, r->addr, NULL)) {
        char at[300];
        return ab_diag_set(diag, AB_ERR_INVALID, "%s: alloc at 0x%llx, which is already allocated",
                           where(b, r->pos, at, sizeof at), (unsigned long long)r->addr);
      }
      uint32_t id = ab_events_alloc(es, r->size, r->stream, AB_TAG_OTHER);
      if (ab_map_put(live, r->addr, (uint64_t)id + 1) != AB_OK) es->failed = true;
      return AB_OK;
    }
    case AB_TR_FREE_REQUESTED:
      if (!ab_map_get(live, r->addr, &v) || (v & REQUESTED)) {
        es->ignored++;
        return AB_OK;
      }
      ab_events_free_phase(es, (uint32_t)(v - 1), AB_FREE_REQUEST);
      if (ab_map_put(live, r->addr, v | REQUESTED) != AB_OK) es->failed = true;
      return AB_OK;
    case AB_TR_FREE_COMPLETED: {
      if (!ab_map_take(live, r->addr, &v)) {
        es->ignored++;
        return AB_OK;
      }
      uint32_t id = (uint32_t)((v & ~REQUESTED) - 1);
      ab_event_t *last = es->n ? &es->ev[es->n - 1] : NULL;
      if (!(v & REQUESTED))
        ab_events_free_phase(es, id, AB_FREE_NOW);
      else if (last && last->kind == AB_EV_FREE && last->id == id && last->aux == AB_FREE_REQUEST)
        last->aux = AB_FREE_NOW; /* nothing happened in between: one plain free */
      else
        ab_events_free_phase(es, id, AB_FREE_COMPLETE);
      return AB_OK;
    }
    case AB_TR_SEGMENT_ALLOC:
    case AB_TR_SEGMENT_FREE:
    case AB_TR_SEGMENT_MAP:
    case AB_TR_SEGMENT_UNMAP: {
      ab_events_segment(es, (ab_trace_action_t)r->action, r->stream, r->addr, r->size);
      return AB_OK;
    }
    case AB_TR_OOM:
      es->trace_ooms++;
      return AB_OK;
    case AB_TR_SNAPSHOT:
    case AB_TR_OTHER:
      return AB_OK;
  }
  return AB_OK;
}

/* Pass 2: the pre-existing blocks, then the records. */
static ab_status build(ab_trace_builder_t *b, ab_diag_t *diag) {
  ab_events_t *es = b->es;
  ab_trace_rec_in_t *pre = NULL;
  size_t npre = 0;
  ab_status st = find_preexisting(b, &pre, &npre);
  ab_map_t live;
  ab_map_init(&live);
  for (size_t i = 0; i < npre && st == AB_OK; i++) {
    uint32_t id = ab_events_alloc(es, pre[i].size, pre[i].stream, AB_TAG_OTHER);
    uint64_t v = (uint64_t)id + 1;
    if (pre[i].pending) {
      ab_events_free_phase(es, id, AB_FREE_REQUEST);
      v |= REQUESTED;
    }
    if (ab_map_put(&live, pre[i].addr, v) != AB_OK) es->failed = true;
  }
  b->info.preexisting = npre;
  free(pre);
  for (size_t i = 0; i < b->nrecs && st == AB_OK; i++) st = apply(b, &live, &b->recs[i], diag);
  ab_map_free(&live);
  if (st == AB_ERR_INTERNAL) ab_diag_set(diag, st, "%s: out of host memory while reading the trace", b->path);
  return st;
}

/* Note [Figures past 64 bits]
 * A trace's sizes are 64-bit numbers as recorded, so a crafted one can make sums that pass
 * 2^64 (peak requested bytes over many huge allocations) or 2^63 (reserved bytes as a
 * signed running sum). The sums are kept in 128 bits, where no trace of 2^32 records can
 * overflow them, and a figure that does not fit in 64 bits is reported as UINT64_MAX, with
 * info.saturated set so that whoever shows it can say so. */
__extension__ typedef unsigned __int128 u128;
__extension__ typedef __int128 i128;

static uint64_t capped(i128 v, bool *saturated) {
  if (v < 0) v = 0; /* a start the trace's end state does not explain: nothing reserved */
  if (v <= (i128)UINT64_MAX) return (uint64_t)v;
  *saturated = true;
  return UINT64_MAX;
}

/* The info's figures that come from the finished stream. */
static void summarise(ab_trace_builder_t *b) {
  const ab_events_t *es = b->es;
  ab_trace_info_t *in = &b->info;
  u128 cur = 0, peak = 0;
  for (size_t i = 0; i < es->n; i++) {
    const ab_event_t *e = &es->ev[i];
    if (e->kind == AB_EV_ALLOC) {
      cur += e->bytes;
      if (cur > peak) peak = cur;
    } else if (e->kind == AB_EV_FREE && e->aux != AB_FREE_REQUEST) {
      cur -= e->bytes;
    }
  }
  in->peak_requested = capped((i128)peak, &in->saturated);
  /* Reserved bytes and segments relative to the start, then the start itself. */
  i128 res = 0, res_min = 0, res_max = 0;
  int64_t segs = 0, segs_min = 0, segs_max = 0;
  for (size_t i = 0; i < es->nsegs; i++) {
    const ab_seg_event_t *g = &es->segs[i];
    bool up = g->action == AB_TR_SEGMENT_ALLOC || g->action == AB_TR_SEGMENT_MAP;
    res += up ? (i128)g->bytes : -(i128)g->bytes;
    if (g->action == AB_TR_SEGMENT_ALLOC) segs++;
    if (g->action == AB_TR_SEGMENT_FREE) segs--;
    if (up) in->device_allocs++;
    else in->device_frees++;
    if (res < res_min) res_min = res;
    if (res > res_max) res_max = res;
    if (segs < segs_min) segs_min = segs;
    if (segs > segs_max) segs_max = segs;
  }
  i128 res0 = -res_min;
  int64_t segs0 = -segs_min;
  if (in->end_state) {
    if ((i128)b->end_reserved - res > res0) res0 = (i128)b->end_reserved - res;
    if ((int64_t)b->end_segments - segs > segs0) segs0 = (int64_t)b->end_segments - segs;
  }
  in->reserved_start = capped(res0, &in->saturated);
  in->reserved_peak = capped(res0 + res_max, &in->saturated);
  in->reserved_end = capped(res0 + res, &in->saturated);
  in->segments_start = (uint64_t)segs0;
  in->segments_peak = (uint64_t)(segs0 + segs_max);
  in->segments_end = (uint64_t)(segs0 + segs);
}

ab_status ab_trace_builder_finish(ab_trace_builder_t *b, ab_diag_t *diag) {
  ab_events_t *es = b->es;
  ab_status st = b->failed ? ab_diag_set(diag, AB_ERR_INTERNAL, "%s: out of host memory while reading the trace", b->path)
                           : build(b, diag);
  ab_trace_builder_discard(b);
  if (st != AB_OK) return st;
  /* Rank the streams by recorded value: PyTorch orders its pools by the stream's value. */
  uint16_t rank[AB_TRACE_MAX_STREAMS];
  for (unsigned i = 0; i < b->nstreams; i++) {
    rank[i] = 0;
    for (unsigned j = 0; j < b->nstreams; j++) rank[i] = (uint16_t)(rank[i] + (b->streams[j] < b->streams[i]));
    b->info.stream_values[rank[i]] = b->streams[i];
  }
  b->info.nstreams = b->nstreams;
  for (size_t i = 0; i < es->n; i++)
    if (es->ev[i].kind == AB_EV_ALLOC) es->ev[i].stream = rank[es->ev[i].stream];
  for (size_t i = 0; i < es->nsegs; i++) es->segs[i].stream = rank[es->segs[i].stream];
  st = ab_events_finish(es, diag);
  if (st != AB_OK) {
    ab_diag_prefix(diag, "%s: ", b->path);
    return st;
  }
  summarise(b);
  return AB_OK;
}

bool ab_trace_parse_dec(const char *p, const char *end, uint64_t *out) {
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
