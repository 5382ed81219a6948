/* snapshot.c: PyTorch's memory snapshot, both ways (snapshot.h). */
#include "workloads/traces/snapshot.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workloads/traces/pickle.h"
#include "workloads/traces/snapshot_walk.h"
#include "strategies/protocol/caching_conf.h"

/* ---- reading -------------------------------------------------------------------------------- */

/* Where a value sits in the snapshot, formatted only for a message: name[i]['sub'][j]. */
typedef struct loc_s {
  const char *name;
  long i;          /* -1: absent */
  const char *sub; /* NULL: absent */
  long j;          /* -1: absent */
} loc_t;

/* Note [Reading in linear time]
 * Memo references let a pickle name one list many times (every segment's `blocks` the same
 * list of a million blocks), so a reader that walks what it finds could do work, and build
 * records, out of all proportion to the file. Each item a reader visits costs it one unit
 * of a budget of the file's size: a snapshot without shared lists never runs out, since
 * every item it holds took at least one byte of the file; one that runs out is refused.
 * Dict lookups are logarithmic (pickle.h, Note [Dict lookups]), so the whole read is
 * O(n log n) in the file's size. */
typedef struct reader_s {
  const char *path;
  ab_diag_t *diag;
  uint64_t visits_left; /* Note [Reading in linear time] */
  uint64_t file_bytes;
  /* What was interned (Note [An entry's frames]), by the address of the value in the tree, so
   * that a string, frame or list the memo names many times is read once (linear time too). */
  ab_map_t text_of, frame_of, stack_of; /* address -> its number + 1 */
  uint32_t *ids;                        /* a list's frames, while it is read */
  size_t capids;
} reader_t;

static void reader_init(reader_t *r, const char *path, ab_diag_t *diag, uint64_t budget) {
  memset(r, 0, sizeof *r);
  r->path = path;
  r->diag = diag;
  r->visits_left = r->file_bytes = budget;
  ab_map_init(&r->text_of);
  ab_map_init(&r->frame_of);
  ab_map_init(&r->stack_of);
}

static void reader_free(reader_t *r) {
  ab_map_free(&r->text_of);
  ab_map_free(&r->frame_of);
  ab_map_free(&r->stack_of);
  free(r->ids);
}

static ab_status visit(reader_t *r, const ab_pk_t *v) {
  if (r->visits_left > 0) {
    r->visits_left--;
    return AB_OK;
  }
  return ab_diag_set(r->diag, AB_ERR_INVALID,
                     "%s: byte %llu: more items than %llu bytes can hold: the snapshot names shared lists over and "
                     "over (memo references), which PyTorch never writes",
                     r->path, (unsigned long long)v->pos, (unsigned long long)r->file_bytes);
}

static const char *loc_str(const loc_t *at, const char *key, char *buf, size_t size) {
  char i[32] = "", j[32] = "", sub[64] = "", k[64] = "";
  if (at->i >= 0) snprintf(i, sizeof i, "[%ld]", at->i);
  if (at->sub) snprintf(sub, sizeof sub, "['%s']", at->sub);
  if (at->j >= 0) snprintf(j, sizeof j, "[%ld]", at->j);
  if (key) snprintf(k, sizeof k, "['%s']", key);
  snprintf(buf, size, "%s%s%s%s%s", at->name, i, sub, j, k);
  return buf;
}

static ab_status wrong(const reader_t *r, const ab_pk_t *v, const loc_t *at, const char *key, const char *want) {
  char loc[200];
  const char *article = v->type == AB_PK_NONE ? "" : v->type == AB_PK_INT ? "an " : "a ";
  return ab_diag_set(r->diag, AB_ERR_INVALID, "%s: byte %llu: %s: expected %s, got %s%s", r->path,
                     (unsigned long long)v->pos, loc_str(at, key, loc, sizeof loc), want, article, ab_pk_type_name(v));
}

static ab_status missing(const reader_t *r, const ab_pk_t *dict, const loc_t *at, const char *key) {
  char loc[200];
  return ab_diag_set(r->diag, AB_ERR_INVALID, "%s: byte %llu: %s: no '%s' key in this dict", r->path,
                     (unsigned long long)dict->pos, loc_str(at, NULL, loc, sizeof loc), key);
}

static ab_status expect(const reader_t *r, const ab_pk_t *v, ab_pk_type_t type, const loc_t *at) {
  if (v->type == type) return AB_OK;
  ab_pk_t wanted = {.type = (uint8_t)type};
  char want[32];
  snprintf(want, sizeof want, "a %s", ab_pk_type_name(&wanted));
  return wrong(r, v, at, NULL, want);
}

/* An int field of dict d. signed_ok: negative values are kept as their 64-bit pattern
 * (stream handles); otherwise they are refused. Absent: *out keeps its value unless
 * required. */
static ab_status int_field(const reader_t *r, const ab_pk_t *d, const char *key, const loc_t *at, bool required,
                           bool signed_ok, uint64_t *out) {
  const ab_pk_t *v = ab_pk_get(d, key);
  if (v == NULL) return required ? missing(r, d, at, key) : AB_OK;
  if (v->type != AB_PK_INT || v->width == AB_PK_BIGINT || (!signed_ok && v->width == AB_PK_INT64 && v->v.i < 0))
    return wrong(r, v, at, key, signed_ok ? "an int of 64 bits" : "a non-negative int of 64 bits");
  *out = v->width == AB_PK_UINT64 ? v->v.u : (uint64_t)v->v.i;
  return AB_OK;
}

static ab_status bool_field(const reader_t *r, const ab_pk_t *d, const char *key, const loc_t *at, bool *out) {
  const ab_pk_t *v = ab_pk_get(d, key);
  if (v == NULL) return AB_OK;
  if (v->type != AB_PK_BOOL) return wrong(r, v, at, key, "a bool");
  *out = v->v.i != 0;
  return AB_OK;
}

/* A pool id, PyTorch's MempoolId_t: a tuple (or list) of two ints of 64 bits, into id;
 * refused with what was expected otherwise. */
static ab_status pool_ids(const reader_t *r, const ab_pk_t *v, const loc_t *at, const char *key, int64_t id[2]) {
  if ((v->type != AB_PK_TUPLE && v->type != AB_PK_LIST) || ab_pk_len(v) != 2)
    return wrong(r, v, at, key, "a pair of ints (a memory pool id)");
  for (int k = 0; k < 2; k++) {
    const ab_pk_t *x = &v->v.seq->items[k];
    if (x->type != AB_PK_INT || x->width != AB_PK_INT64) return wrong(r, x, at, key, "a pair of ints of 64 bits");
    id[k] = x->v.i;
  }
  return AB_OK;
}

/* A pool id under key in d, as the index of its pool in the builder
 * (Note [Pools of a trace]); *out is AB_TRACE_POOL_INFER when d has no `key`. */
static ab_status pool_field(const reader_t *r, const ab_pk_t *d, const char *key, const loc_t *at, ab_trace_builder_t *b,
                            int *out) {
  const ab_pk_t *v = ab_pk_get(d, key);
  *out = AB_TRACE_POOL_INFER;
  if (v == NULL) return AB_OK;
  int64_t id[2] = {0, 0};
  AB_TRY(pool_ids(r, v, at, key, id));
  return ab_trace_builder_pool(b, id[0], id[1], v->pos, out, r->diag);
}

/* ---- entries: one set of rules for both readers (Note [An entry's fields]) ----------------- */

/* Field f of e as an int of 64 bits; false where it is refused. signed_ok: negative values
 * are kept as their 64-bit pattern (stream handles). Absent: *out keeps its value unless
 * required. */
static bool entry_int(const ab_snap_entry_t *e, int f, bool required, bool signed_ok, uint64_t *out) {
  switch (e->kind[f]) {
    case AB_SNAP_ABSENT: return !required;
    case AB_SNAP_UINT64: *out = e->u[f]; return true;
    case AB_SNAP_INT64:
      if (!signed_ok && (int64_t)e->u[f] < 0) return false;
      *out = e->u[f];
      return true;
    default: return false;
  }
}

ab_status ab_snapshot_add_entry(const ab_snap_entry_t *e, uint64_t pos, uint64_t pool_pos, ab_trace_builder_t *b,
                                ab_snap_refuse_fn refuse, void *ctx, ab_diag_t *diag) {
  if (e->kind[AB_SNAP_ACTION] != AB_SNAP_STR) return refuse(ctx, AB_SNAP_ACTION);
  ab_trace_action_t act = e->act ? (ab_trace_action_t)(e->act - 1) : ab_trace_action_of(e->action, e->action_len);
  if (act != AB_TR_OTHER)
    ab_trace_builder_count_known(b, act); /* its name is act's own: no comparison per record */
  else
    ab_trace_builder_count(b, e->action, e->action_len);
  uint64_t addr = 0, size = 0, stream = 0;
  int pool = AB_TRACE_POOL_INFER; /* 2.11's entries name no pool: Note [Pools of a trace] */
  if (act == AB_TR_OOM) {
    if (!entry_int(e, AB_SNAP_DEVICE_FREE, false, false, &addr)) return refuse(ctx, AB_SNAP_DEVICE_FREE);
    if (!entry_int(e, AB_SNAP_SIZE, false, false, &size)) return refuse(ctx, AB_SNAP_SIZE);
    if (!entry_int(e, AB_SNAP_STREAM, false, true, &stream)) return refuse(ctx, AB_SNAP_STREAM);
  } else if (act != AB_TR_OTHER && act != AB_TR_SNAPSHOT) {
    if (!entry_int(e, AB_SNAP_ADDR, true, false, &addr)) return refuse(ctx, AB_SNAP_ADDR);
    if (!entry_int(e, AB_SNAP_SIZE, true, false, &size)) return refuse(ctx, AB_SNAP_SIZE);
    if (!entry_int(e, AB_SNAP_STREAM, false, true, &stream)) return refuse(ctx, AB_SNAP_STREAM);
    if (e->kind[AB_SNAP_POOL] == AB_SNAP_BAD) return refuse(ctx, AB_SNAP_POOL);
    if (e->kind[AB_SNAP_POOL] == AB_SNAP_PAIR)
      AB_TRY(ab_trace_builder_pool(b, e->pool[0], e->pool[1], pool_pos, &pool, diag));
  }
  AB_TRY(ab_trace_builder_add_pooled(b, act, addr, size, stream, pool, pos, diag));
  if (act == AB_TR_ALLOC) ab_trace_builder_stack(b, e->stack);
  return AB_OK;
}

bool ab_snapshot_entry_is_alloc(const ab_snap_entry_t *e) {
  if (e->kind[AB_SNAP_ACTION] != AB_SNAP_STR) return false;
  return (e->act ? (ab_trace_action_t)(e->act - 1) : ab_trace_action_of(e->action, e->action_len)) == AB_TR_ALLOC;
}

uint32_t ab_snapshot_frame_line(uint8_t width, uint64_t bits) {
  return width == AB_PK_INT64 && (int64_t)bits >= 1 && bits <= UINT32_MAX ? (uint32_t)bits : 0;
}

static const char *const entry_keys[AB_SNAP_FIELDS] = {
    [AB_SNAP_ADDR] = "addr", [AB_SNAP_SIZE] = "size",       [AB_SNAP_STREAM] = "stream",
    [AB_SNAP_DEVICE_FREE] = "device_free", [AB_SNAP_POOL] = "pool_id", [AB_SNAP_ACTION] = "action"};

/* An entry's dict, read by the tree reader, and where it is. */
typedef struct tree_entry_s {
  const reader_t *r;
  const ab_pk_t *e;
  const loc_t *at;
} tree_entry_t;

/* Why the entry's field is refused, naming the value refused. */
static ab_status tree_refuse(void *ctx, int f) {
  const tree_entry_t *t = ctx;
  const char *key = entry_keys[f];
  const ab_pk_t *v = ab_pk_get(t->e, key);
  if (v == NULL) return missing(t->r, t->e, t->at, key);
  if (f == AB_SNAP_ACTION) return wrong(t->r, v, t->at, key, "a str");
  if (f == AB_SNAP_POOL) {
    int64_t id[2] = {0, 0};
    AB_TRY(pool_ids(t->r, v, t->at, key, id));
    return ab_diag_set(t->r->diag, AB_ERR_INTERNAL, "%s: byte %llu: a pool id refused though it is one", t->r->path,
                       (unsigned long long)v->pos);
  }
  return wrong(t->r, v, t->at, key, f == AB_SNAP_STREAM ? "an int of 64 bits" : "a non-negative int of 64 bits");
}

/* ---- frames (Note [An entry's frames]) ------------------------------------------------------ */

/* The number + 1 cached under a value's address; 0: not yet. */
static uint64_t cached(const ab_map_t *m, const void *at) {
  uint64_t v = 0;
  return ab_map_get(m, (uint64_t)(uintptr_t)at, &v) ? v : 0;
}

/* Caches n under at; a cache the host has no room for only costs reading the value again. */
static void cache(ab_map_t *m, const void *at, uint32_t n) {
  if (n != UINT32_MAX) (void)ab_map_put(m, (uint64_t)(uintptr_t)at, (uint64_t)n + 1);
}

/* A frame's string, interned once per string of the file. */
static uint32_t frame_string(reader_t *r, ab_stacks_t *st, const ab_pk_t *v) {
  uint64_t known = cached(&r->text_of, v->v.s);
  if (known) return (uint32_t)(known - 1);
  uint32_t off = ab_stacks_string(st, v->v.s, v->len);
  cache(&r->text_of, v->v.s, off);
  return off;
}

/* A frame's str field, refused when absent or of another type. */
static ab_status frame_str(const reader_t *r, const ab_pk_t *d, const loc_t *at, const char *key, const ab_pk_t **out) {
  *out = ab_pk_get(d, key);
  if (*out == NULL) return missing(r, d, at, key);
  return (*out)->type == AB_PK_STR ? AB_OK : wrong(r, *out, at, key, "a str");
}

/* The number of the frame of dict d (at `at`), read once per dict of the file. */
static ab_status read_frame(reader_t *r, ab_stacks_t *st, const ab_pk_t *d, const loc_t *at, uint32_t *out) {
  AB_TRY(expect(r, d, AB_PK_DICT, at));
  uint64_t known = cached(&r->frame_of, d->v.seq);
  if (known) {
    *out = (uint32_t)(known - 1);
    return AB_OK;
  }
  const ab_pk_t *file, *name, *line = ab_pk_get(d, "line");
  AB_TRY(frame_str(r, d, at, "filename", &file));
  AB_TRY(frame_str(r, d, at, "name", &name));
  if (line == NULL) return missing(r, d, at, "line");
  if (line->type != AB_PK_INT) return wrong(r, line, at, "line", "an int");
  /* One statement each: the file's string before the name's, as the streaming reader. */
  uint32_t f = frame_string(r, st, file);
  uint32_t n = frame_string(r, st, name);
  *out = ab_stacks_frame_at(st, f, n, ab_snapshot_frame_line(line->width, line->v.u));
  cache(&r->frame_of, d->v.seq, *out);
  return AB_OK;
}

/* The stack of entry e's frames (device_traces[dev][i]): 0 when it has none. Each list is
 * read once, however many entries name it. */
static ab_status read_frames(reader_t *r, const ab_pk_t *e, long dev, long i, ab_trace_builder_t *b, uint32_t *stack) {
  *stack = 0;
  const ab_pk_t *v = ab_pk_get(e, "frames");
  if (v == NULL) return AB_OK;
  loc_t at = {"device_traces", dev, NULL, i};
  if (v->type != AB_PK_LIST) return wrong(r, v, &at, "frames", "a list");
  const ab_pk_seq_t *seq = v->v.seq;
  uint64_t known = seq->n ? cached(&r->stack_of, seq) : 0;
  if (seq->n == 0 || known) {
    *stack = (uint32_t)(known ? known - 1 : 0);
    return AB_OK;
  }
  ab_stacks_t *st = ab_trace_builder_stacks(b);
  if (st == NULL) return AB_OK; /* the builder failed: finish says so */
  if (seq->n > r->capids) {
    uint32_t *grown = realloc(r->ids, seq->n * sizeof *grown);
    if (grown == NULL) return ab_diag_set(r->diag, AB_ERR_INTERNAL, "%s: out of host memory while reading the trace", r->path);
    r->ids = grown;
    r->capids = seq->n;
  }
  char name[48];
  snprintf(name, sizeof name, "device_traces[%ld]", dev);
  loc_t fat = {name, i, "frames", -1};
  for (uint32_t k = 0; k < seq->n; k++) {
    fat.j = k;
    AB_TRY(read_frame(r, st, &seq->items[k], &fat, &r->ids[k]));
  }
  *stack = ab_stacks_intern(st, r->ids, seq->n);
  if (*stack) cache(&r->stack_of, seq, *stack);
  return AB_OK;
}

/* One entry into the builder. */
static ab_status read_entry(reader_t *r, const ab_pk_t *e, long dev, long i, ab_trace_builder_t *b) {
  AB_TRY(visit(r, e));
  loc_t at = {"device_traces", dev, NULL, i};
  AB_TRY(expect(r, e, AB_PK_DICT, &at));
  ab_snap_entry_t f = {0};
  uint64_t pool_pos = e->pos;
  for (int k = 0; k < AB_SNAP_FIELDS; k++) {
    const ab_pk_t *v = ab_pk_get(e, entry_keys[k]);
    if (v == NULL) continue;
    f.kind[k] = AB_SNAP_BAD;
    if (k == AB_SNAP_ACTION) {
      if (v->type != AB_PK_STR) continue;
      f.kind[k] = AB_SNAP_STR;
      f.action = v->v.s;
      f.action_len = v->len;
    } else if (k == AB_SNAP_POOL) {
      pool_pos = v->pos;
      if ((v->type != AB_PK_TUPLE && v->type != AB_PK_LIST) || ab_pk_len(v) != 2) continue;
      const ab_pk_t *x = v->v.seq->items;
      if (x[0].type != AB_PK_INT || x[0].width != AB_PK_INT64 || x[1].type != AB_PK_INT || x[1].width != AB_PK_INT64)
        continue;
      f.kind[k] = AB_SNAP_PAIR;
      f.pool[0] = x[0].v.i;
      f.pool[1] = x[1].v.i;
    } else if (v->type == AB_PK_INT && v->width != AB_PK_BIGINT) {
      f.kind[k] = v->width == AB_PK_UINT64 ? AB_SNAP_UINT64 : AB_SNAP_INT64;
      f.u[k] = v->width == AB_PK_UINT64 ? v->v.u : (uint64_t)v->v.i;
    }
  }
  if (ab_snapshot_entry_is_alloc(&f)) AB_TRY(read_frames(r, e, dev, i, b, &f.stack));
  tree_entry_t t = {r, e, &at};
  return ab_snapshot_add_entry(&f, e->pos, pool_pos, b, tree_refuse, &t, r->diag);
}

static ab_status read_entries(reader_t *r, const ab_pk_t *trace, long dev, ab_trace_builder_t *b) {
  const ab_pk_seq_t *seq = trace->v.seq;
  for (uint32_t i = 0; i < seq->n; i++) AB_TRY(read_entry(r, &seq->items[i], dev, (long)i, b));
  return AB_OK;
}

/* The segments of the device read: the state at the end. */
static ab_status read_segments(reader_t *r, const ab_pk_t *segments, long dev, ab_trace_builder_t *b) {
  uint64_t reserved = 0, nsegs = 0;
  const ab_pk_seq_t *seq = segments->v.seq;
  for (uint32_t i = 0; i < seq->n; i++) {
    const ab_pk_t *s = &seq->items[i];
    AB_TRY(visit(r, s));
    loc_t at = {"segments", (long)i, NULL, -1};
    AB_TRY(expect(r, s, AB_PK_DICT, &at));
    uint64_t device = 0, address = 0, total = 0, stream = 0;
    bool expandable = false;
    AB_TRY(int_field(r, s, "device", &at, false, false, &device));
    if (device != (uint64_t)dev) continue;
    AB_TRY(int_field(r, s, "address", &at, true, false, &address));
    AB_TRY(int_field(r, s, "total_size", &at, true, false, &total));
    AB_TRY(int_field(r, s, "stream", &at, false, true, &stream));
    AB_TRY(bool_field(r, s, "is_expandable", &at, &expandable));
    int pool;
    AB_TRY(pool_field(r, s, "segment_pool_id", &at, b, &pool));
    ab_trace_builder_dump_segment(b, address, total, pool == AB_TRACE_POOL_INFER ? 0 : pool);
    reserved += total;
    nsegs += !expandable;
    const ab_pk_t *blocks = ab_pk_get(s, "blocks");
    if (blocks == NULL) continue;
    if (blocks->type != AB_PK_LIST) return wrong(r, blocks, &at, "blocks", "a list");
    uint64_t addr = address; /* old snapshots give no block addresses: blocks tile the segment */
    for (uint32_t j = 0; j < blocks->v.seq->n; j++) {
      const ab_pk_t *blk = &blocks->v.seq->items[j];
      AB_TRY(visit(r, blk));
      loc_t bat = {"segments", (long)i, "blocks", (long)j};
      AB_TRY(expect(r, blk, AB_PK_DICT, &bat));
      uint64_t size = 0, requested = 0;
      AB_TRY(int_field(r, blk, "size", &bat, true, false, &size));
      AB_TRY(int_field(r, blk, "address", &bat, false, false, &addr));
      requested = size;
      AB_TRY(int_field(r, blk, "requested_size", &bat, false, false, &requested));
      const ab_pk_t *state = ab_pk_get(blk, "state");
      if (state == NULL) return missing(r, blk, &bat, "state");
      if (state->type != AB_PK_STR) return wrong(r, state, &bat, "state", "a str");
      bool pending = ab_pk_str_is(state, "active_pending_free") || ab_pk_str_is(state, "active_awaiting_free");
      if (pending || ab_pk_str_is(state, "active_allocated"))
        AB_TRY(ab_trace_builder_held(b, addr, requested ? requested : size, stream, pending, blk->pos, r->diag));
      addr += size;
    }
  }
  ab_trace_builder_end_state(b, reserved, nsegs);
  return AB_OK;
}

/* Appends ",key:value" (or "key:value" first) to out. */
static void conf_add(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void conf_add(char *out, size_t size, const char *fmt, ...) {
  size_t used = strlen(out);
  if (used && used + 1 < size) {
    out[used++] = ',';
    out[used] = '\0';
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out + used, size - used, fmt, ap);
  va_end(ap);
}

/* The settings PyTorch's structured allocator_settings leave out (max_non_split_rounding_mb,
 * large_segment_size_mb, per_process_memory_fraction), from the conf string it last read,
 * which the snapshot keeps beside them; a string the caching strategy does not take adds
 * nothing. */
/* A recorded setting PyTorch would have refused at start-up: the snapshot did not come from
 * it as it stands, and its figures would be another configuration's. */
static ab_status refused_setting(const reader_t *r, const ab_pk_t *v, const char *key, const char *why) {
  return ab_diag_set(r->diag, AB_ERR_INVALID, "%s: byte %llu: allocator_settings['%s']: %s (PyTorch refuses it)",
                     r->path, (unsigned long long)v->pos, key, why);
}

/* The recorded PYTORCH_CUDA_ALLOC_CONF string into text, which must read as PyTorch reads it;
 * *c is what it sets. */
static ab_status conf_string(const reader_t *r, const ab_pk_t *raw, char *text, size_t size, ab_caching_conf_t *c) {
  text[0] = '\0';
  ab_caching_conf_defaults(c);
  if (raw == NULL || raw->type != AB_PK_STR) return AB_OK;
  snprintf(text, size, "%.*s", (int)raw->len, raw->v.s);
  ab_diag_t why = {""};
  if (ab_caching_conf_apply(c, "the string", text, &why) != AB_OK)
    return refused_setting(r, raw, "PYTORCH_CUDA_ALLOC_CONF", why.msg);
  return AB_OK;
}

/* What the string sets that the structured settings do not hold. */
static void conf_string_extras(const ab_caching_conf_t *c, char *out, size_t size) {
  if (c->large_segment_size != (20ULL << 20))
    conf_add(out, size, "large_segment_size_mb:%llu", (unsigned long long)(c->large_segment_size >> 20));
  if (c->max_non_split_rounding != c->large_segment_size)
    conf_add(out, size, "max_non_split_rounding_mb:%llu", (unsigned long long)(c->max_non_split_rounding >> 20));
  if (c->memory_fraction < 1.0) conf_add(out, size, "per_process_memory_fraction:%.17g", c->memory_fraction);
}

/* The recorded settings as a PYTORCH_CUDA_ALLOC_CONF string of what differs from the
 * defaults; the recorded string itself when the snapshot has no structured settings. */
static ab_status settings_string(const reader_t *r, const ab_pk_t *s, ab_trace_builder_t *b, char *out, size_t size) {
  loc_t at = {"allocator_settings", -1, NULL, -1};
  AB_TRY(expect(r, s, AB_PK_DICT, &at));
  out[0] = '\0';
  const ab_pk_t *raw = ab_pk_get(s, "PYTORCH_CUDA_ALLOC_CONF");
  char text[1024];
  ab_caching_conf_t c;
  AB_TRY(conf_string(r, raw, text, sizeof text, &c));
  if (ab_pk_get(s, "max_split_size") == NULL && ab_pk_get(s, "expandable_segments") == NULL) {
    snprintf(out, size, "%s", text);
    return AB_OK;
  }
  conf_string_extras(&c, out, size);
  b->pytorch = true; /* structured settings: PyTorch wrote it, not an export of another allocator */
  uint64_t max_split = 0;
  AB_TRY(int_field(r, s, "max_split_size", &at, false, true, &max_split));
  /* Unset, it is SIZE_MAX (-1 as a signed 64-bit value); set, at least the large segment's
   * size (max_split_size_mb's own floor, caching_conf.c). */
  if ((int64_t)max_split > 0 && max_split < c.large_segment_size) {
    char why[96];
    snprintf(why, sizeof why, "%llu bytes, under its floor, a large segment's %llu", (unsigned long long)max_split,
             (unsigned long long)c.large_segment_size);
    return refused_setting(r, ab_pk_get(s, "max_split_size"), "max_split_size", why);
  }
  if ((int64_t)max_split > 0) conf_add(out, size, "max_split_size_mb:%llu", (unsigned long long)(max_split >> 20));
  const ab_pk_t *gc = ab_pk_get(s, "garbage_collection_threshold");
  if (gc && gc->type != AB_PK_FLOAT && gc->type != AB_PK_INT)
    return wrong(r, gc, &at, "garbage_collection_threshold", "a float");
  double threshold = gc == NULL ? 0 : gc->type == AB_PK_FLOAT ? gc->v.f : (double)gc->v.i;
  /* 0 when unset; set, strictly between 0 and 1 (garbage_collection_threshold's rule, caching_conf.c). */
  if (!(threshold >= 0 && threshold < 1))
    return refused_setting(r, gc, "garbage_collection_threshold", "not a fraction from 0 up to 1");
  if (threshold > 0) conf_add(out, size, "garbage_collection_threshold:%g", threshold);
  static const char *const flags[] = {"expandable_segments", "release_lock_on_cudamalloc",
                                      "graph_capture_record_stream_reuse"};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    bool on = false;
    AB_TRY(bool_field(r, s, flags[i], &at, &on));
    if (on) conf_add(out, size, "%s:True", flags[i]);
  }
  const ab_pk_t *div = ab_pk_get(s, "roundup_power2_divisions");
  if (div == NULL) return AB_OK;
  if (div->type != AB_PK_DICT) return wrong(r, div, &at, "roundup_power2_divisions", "a dict");
  /* Keys "1", "2", ..., "32768": the MiB size each of the 16 intervals starts at. */
  uint64_t v[16];
  bool any = false, same = true;
  for (int i = 0; i < 16; i++) {
    char key[8];
    snprintf(key, sizeof key, "%d", 1 << i);
    v[i] = 0;
    loc_t dat = {"allocator_settings", -1, "roundup_power2_divisions", -1};
    AB_TRY(int_field(r, div, key, &dat, false, false, &v[i]));
    any |= v[i] != 0;
    same &= v[i] == v[0];
  }
  if (!any) return AB_OK;
  if (same) {
    conf_add(out, size, "roundup_power2_divisions:%llu", (unsigned long long)v[0]);
    return AB_OK;
  }
  char list[256] = "";
  for (int i = 0; i < 16; i++) {
    size_t used = strlen(list);
    snprintf(list + used, sizeof list - used, "%s%d:%llu", i ? "," : "", 1 << i, (unsigned long long)v[i]);
  }
  conf_add(out, size, "roundup_power2_divisions:[%s]", list);
  return AB_OK;
}

/* settings_string's, which must read as PyTorch reads its settings: a combination it would
 * have refused (a fraction of the card out of range, keys that contradict) is refused here,
 * naming the snapshot, rather than at each command that applies it. */
static ab_status read_settings(const reader_t *r, const ab_pk_t *s, ab_trace_builder_t *b, char *out, size_t size) {
  AB_TRY(settings_string(r, s, b, out, size));
  ab_caching_conf_t c;
  ab_caching_conf_defaults(&c);
  ab_diag_t why = {""};
  if (ab_caching_conf_apply(&c, "the settings", out, &why) != AB_OK)
    return ab_diag_set(r->diag, AB_ERR_INVALID, "%s: byte %llu: allocator_settings, read as '%s': %s (PyTorch refuses it)",
                       r->path, (unsigned long long)s->pos, out, why.msg);
  return AB_OK;
}

static ab_status read_tree(reader_t *r, const ab_pk_t *root, int device, bool entries_read, ab_trace_builder_t *b) {
  if (root->type != AB_PK_DICT)
    return ab_diag_set(r->diag, AB_ERR_INVALID,
                       "%s: byte %llu: not a PyTorch memory snapshot: expected a dict with device_traces and "
                       "segments (torch.cuda.memory._snapshot()), got a pickled %s",
                       r->path, (unsigned long long)root->pos, ab_pk_type_name(root));
  const ab_pk_t *traces = ab_pk_get(root, "device_traces"), *segments = ab_pk_get(root, "segments");
  if (traces == NULL && segments == NULL)
    return ab_diag_set(r->diag, AB_ERR_INVALID,
                       "%s: byte %llu: not a PyTorch memory snapshot: the dict has neither 'device_traces' nor "
                       "'segments'",
                       r->path, (unsigned long long)root->pos);
  loc_t tat = {"device_traces", -1, NULL, -1}, sat = {"segments", -1, NULL, -1};
  if (traces) AB_TRY(expect(r, traces, AB_PK_LIST, &tat));
  if (segments) AB_TRY(expect(r, segments, AB_PK_LIST, &sat));
  size_t ndev = ab_pk_len(traces);
  for (size_t d = 0; d < ndev; d++) {
    loc_t at = {"device_traces", (long)d, NULL, -1};
    AB_TRY(expect(r, &traces->v.seq->items[d], AB_PK_LIST, &at));
  }
  long dev = device;
  if (dev >= 0 && (size_t)dev >= ndev && ndev > 0)
    return ab_diag_set(r->diag, AB_ERR_INVALID, "%s: no device %ld: the snapshot traces %zu device%s (0 to %zu)", r->path,
                       dev, ndev, ndev == 1 ? "" : "s", ndev - 1);
  for (size_t d = 0; dev < 0 && d < ndev; d++)
    if (ab_pk_len(&traces->v.seq->items[d]) > 0) dev = (long)d;
  if (dev < 0) { /* no trace entries anywhere: the state alone, of the first segment's device */
    uint64_t first = 0;
    if (ab_pk_len(segments) > 0) {
      loc_t at = {"segments", 0, NULL, -1};
      AB_TRY(expect(r, &segments->v.seq->items[0], AB_PK_DICT, &at));
      AB_TRY(int_field(r, &segments->v.seq->items[0], "device", &at, false, false, &first));
    }
    dev = first > 1024 ? 0 : (long)first;
  }
  b->info.format = "pytorch-snapshot";
  b->info.device = (int)dev;
  b->info.ndevices = (unsigned)ndev;
  if ((size_t)dev < ndev && !entries_read) AB_TRY(read_entries(r, &traces->v.seq->items[dev], dev, b));
  if (segments) AB_TRY(read_segments(r, segments, dev, b));
  const ab_pk_t *settings = ab_pk_get(root, "allocator_settings");
  if (settings) AB_TRY(read_settings(r, settings, b, b->es->settings, sizeof b->es->settings));
  if (b->info.records == 0 && b->nheld == 0)
    return ab_diag_set(r->diag, AB_ERR_INVALID,
                       "%s: the snapshot holds nothing to replay on device %ld: no trace entries and no allocated "
                       "blocks (record with torch.cuda.memory._record_memory_history() before taking it)",
                       r->path, dev);
  return AB_OK;
}

ab_status ab_snapshot_read(const char *path, const ab_input_t *in, int device, ab_trace_builder_t *b, ab_diag_t *diag) {
  ab_pickle_t pk;
  AB_TRY(ab_pickle_parse(path, in->data, in->len, &pk, diag));
  reader_t r;
  reader_init(&r, path, diag, in->len);
  ab_status st = read_tree(&r, &pk.root, device, false, b);
  reader_free(&r);
  ab_pickle_free(&pk);
  return st;
}

ab_status ab_snapshot_read_outline(const char *path, const ab_pk_t *root, int device, ab_trace_builder_t *b,
                                   ab_diag_t *diag) {
  reader_t r;
  reader_init(&r, path, diag, UINT64_MAX);
  ab_status st = read_tree(&r, root, device, true, b);
  reader_free(&r);
  return st;
}

/* ---- writing -------------------------------------------------------------------------------- */

/* Names written again and again are memoised by address (pickle.h), so each is one object. */
static const char K_SEGMENTS[] = "segments", K_DEVICE_TRACES[] = "device_traces",
                  K_SETTINGS[] = "allocator_settings", K_ANNOTATIONS[] = "external_annotations",
                  K_CONF[] = "PYTORCH_CUDA_ALLOC_CONF", K_DEVICE[] = "device", K_ADDRESS[] = "address",
                  K_TOTAL[] = "total_size", K_ALLOCATED[] = "allocated_size", K_ACTIVE[] = "active_size",
                  K_REQUESTED[] = "requested_size", K_STREAM[] = "stream", K_TYPE[] = "segment_type",
                  K_POOL[] = "segment_pool_id", K_POOL_ID[] = "pool_id", K_EXPANDABLE[] = "is_expandable", K_FRAMES[] = "frames",
                  K_BLOCKS[] = "blocks", K_SIZE[] = "size", K_STATE[] = "state", K_ACTION[] = "action",
                  K_ADDR[] = "addr", K_DEVICE_FREE[] = "device_free", K_TIME[] = "time_us",
                  K_COMPILE[] = "compile_context", K_METADATA[] = "user_metadata", V_NA[] = "N/A", V_EMPTY[] = "",
                  V_LARGE[] = "large", V_SMALL[] = "small", V_ALLOCATED[] = "active_allocated",
                  V_PENDING[] = "active_pending_free", V_INACTIVE[] = "inactive";

static void put_uint(ab_pkw_t *w, const char *key, uint64_t v) {
  ab_pkw_name(w, key);
  ab_pkw_uint(w, v);
}

static void put_name(ab_pkw_t *w, const char *key, const char *v) {
  ab_pkw_name(w, key);
  ab_pkw_name(w, v);
}

static void put_empty_list(ab_pkw_t *w, const char *key) {
  ab_pkw_name(w, key);
  ab_pkw_list_begin(w);
  ab_pkw_list_end(w);
}

static uint64_t raw_stream(unsigned index, const uint64_t *values, unsigned n) {
  return index < n ? values[index] : index;
}

/* A pool id as PyTorch writes one, MempoolId_t: (0, 0) for the default pool, (0, N) for
 * private pool N (the reader numbers pools by their ids, whatever the pair). */
static void put_pool(ab_pkw_t *w, const char *key, unsigned pool) {
  ab_pkw_name(w, key);
  ab_pkw_tuple_begin(w);
  ab_pkw_int(w, 0);
  ab_pkw_int(w, pool);
  ab_pkw_tuple_end(w);
}

static void write_segment(ab_pkw_t *w, const ab_trace_log_t *log, const ab_trace_seg_t *g, uint64_t stream) {
  uint64_t allocated = 0, active = 0, requested = 0;
  for (size_t k = 0; k < g->nblocks; k++) {
    const ab_block_info_t *blk = &log->blocks[g->first + k];
    if (blk->state == AB_BLOCK_ALLOCATED) allocated += blk->bytes;
    if (blk->state == AB_BLOCK_ALLOCATED || blk->state == AB_BLOCK_PENDING_FREE) {
      active += blk->bytes;
      requested += blk->requested;
    }
  }
  ab_pkw_dict_begin(w);
  put_uint(w, K_DEVICE, 0);
  put_uint(w, K_ADDRESS, g->base);
  put_uint(w, K_TOTAL, g->bytes);
  put_uint(w, K_ALLOCATED, allocated);
  put_uint(w, K_ACTIVE, active);
  put_uint(w, K_REQUESTED, requested);
  put_uint(w, K_STREAM, stream);
  put_name(w, K_TYPE, g->small ? V_SMALL : V_LARGE);
  put_pool(w, K_POOL, g->pool);
  ab_pkw_name(w, K_EXPANDABLE);
  ab_pkw_bool(w, g->expandable);
  put_empty_list(w, K_FRAMES);
  ab_pkw_name(w, K_BLOCKS);
  ab_pkw_list_begin(w);
  for (size_t k = 0; k < g->nblocks; k++) {
    const ab_block_info_t *blk = &log->blocks[g->first + k];
    ab_pkw_dict_begin(w);
    put_uint(w, K_ADDRESS, blk->addr);
    put_uint(w, K_SIZE, blk->bytes);
    put_uint(w, K_REQUESTED, blk->requested); /* an inactive block's last request, as PyTorch's */
    put_name(w, K_STATE,
             blk->state == AB_BLOCK_ALLOCATED ? V_ALLOCATED : blk->state == AB_BLOCK_PENDING_FREE ? V_PENDING : V_INACTIVE);
    put_empty_list(w, K_FRAMES);
    ab_pkw_dict_end(w);
  }
  ab_pkw_list_end(w);
  ab_pkw_dict_end(w);
}

/* ---- stacks written back (Note [Stacks written back]) ---------------------------------------- */

static const char K_NAME[] = "name", K_FILENAME[] = "filename", K_LINE[] = "line";

void ab_snapshot_stacks_init(ab_snapshot_stacks_t *x, const ab_events_t *es) {
  memset(x, 0, sizeof *x);
  x->es = es;
  ab_map_init(&x->text_of);
  ab_map_init(&x->list_of);
  const ab_stacks_t *st = es->stacks;
  if (st == NULL) return;
  x->frame_memo = calloc(st->nframes ? st->nframes : 1, sizeof *x->frame_memo);
  x->stack_memo = calloc(st->nstacks ? st->nstacks : 1, sizeof *x->stack_memo);
  x->failed = x->frame_memo == NULL || x->stack_memo == NULL;
}

void ab_snapshot_stacks_free(ab_snapshot_stacks_t *x) {
  ab_map_free(&x->text_of);
  ab_map_free(&x->list_of);
  free(x->frame_memo);
  free(x->stack_memo);
  memset(x, 0, sizeof *x);
}

/* Memoises what was just written, remembering its index + 1 in *slot (when there is one). */
static void remember(ab_pkw_t *w, uint32_t *slot) {
  uint32_t idx = ab_pkw_memoize(w);
  if (slot && idx != UINT32_MAX) *slot = idx + 1;
}

/* A string of the stacks, written once. */
static void put_text(ab_snapshot_stacks_t *x, ab_pkw_t *w, uint32_t off) {
  uint64_t idx = 0;
  if (ab_map_get(&x->text_of, (uint64_t)off + 1, &idx)) {
    ab_pkw_get(w, (uint32_t)(idx - 1));
    return;
  }
  const char *s = ab_stacks_text(x->es->stacks, off);
  ab_pkw_str(w, s, strlen(s));
  uint32_t at = 0;
  remember(w, &at);
  /* A string the table has no room for is written again next time: larger, still valid. */
  if (at && ab_map_put(&x->text_of, (uint64_t)off + 1, at) != AB_OK) x->failed = true;
}

/* Stack k's list, written once: a dict per frame, innermost first, each written once. */
static void put_stack(ab_snapshot_stacks_t *x, ab_pkw_t *w, uint32_t k) {
  const ab_stacks_t *st = x->es->stacks;
  if (x->stack_memo && x->stack_memo[k]) {
    ab_pkw_get(w, x->stack_memo[k] - 1);
    return;
  }
  const uint32_t *frames = NULL;
  uint32_t n = ab_stacks_frames(st, k, &frames);
  ab_pkw_list_begin(w);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t f = frames[i];
    if (x->frame_memo && x->frame_memo[f]) {
      ab_pkw_get(w, x->frame_memo[f] - 1);
      continue;
    }
    /* The keys in PyTorch's order (py_symbolize). */
    ab_pkw_dict_begin(w);
    ab_pkw_name(w, K_NAME);
    put_text(x, w, st->frame[f].name);
    ab_pkw_name(w, K_FILENAME);
    put_text(x, w, st->frame[f].file);
    ab_pkw_name(w, K_LINE);
    ab_pkw_uint(w, st->frame[f].line);
    ab_pkw_dict_end(w);
    remember(w, x->frame_memo ? &x->frame_memo[f] : NULL);
  }
  ab_pkw_list_end(w);
  remember(w, x->stack_memo ? &x->stack_memo[k] : NULL);
}

/* The ALLOC event record r was made by (an alloc or an oom record), its stack; 0 once lost. */
static uint32_t stack_of_record(ab_snapshot_stacks_t *x, const ab_trace_rec_t *r) {
  const ab_events_t *es = x->es;
  while (!x->lost && x->next < es->n && es->ev[x->next].kind != AB_EV_ALLOC) x->next++;
  if (x->lost || x->next == es->n || es->ev[x->next].bytes != r->bytes) {
    x->lost = true;
    return 0;
  }
  return ab_stacks_of(es->stacks, es->ev[x->next++].id);
}

void ab_snapshot_write_stacks(void *ctx, ab_pkw_t *w, const ab_trace_rec_t *r) {
  ab_snapshot_stacks_t *x = ctx;
  uint32_t stack = 0;
  uint64_t list = 0;
  bool freeing = r->action == AB_TR_FREE_REQUESTED || r->action == AB_TR_FREE_COMPLETED;
  if (r->action == AB_TR_ALLOC || r->action == AB_TR_OOM) stack = stack_of_record(x, r);
  if (freeing && r->addr && ab_map_get(&x->list_of, r->addr, &list)) { /* the block's alloc's list */
    ab_pkw_get(w, (uint32_t)(list - 1));
    if (r->action == AB_TR_FREE_COMPLETED) ab_map_take(&x->list_of, r->addr, NULL);
    return;
  }
  if (stack == 0) { /* no stack: an empty list, as PyTorch writes an entry without one */
    ab_pkw_list_begin(w);
    ab_pkw_list_end(w);
    return;
  }
  put_stack(x, w, stack);
  if (r->action == AB_TR_ALLOC && r->addr && x->stack_memo && x->stack_memo[stack] &&
      ab_map_put(&x->list_of, r->addr, x->stack_memo[stack]) != AB_OK)
    x->failed = true;
}

/* Note [The settings a snapshot holds]
 * PyTorch v2.11.0 writes allocator_settings from the allocator's config_metadata
 * (torch/csrc/cuda/Module.cpp, THCPModule_memorySnapshot; c10/cuda/CUDACachingAllocator.cpp,
 * snapshot(), fills it from CUDAAllocatorConfig), keys in this order: PYTORCH_CUDA_ALLOC_CONF
 * (the string last parsed), max_split_size (bytes, an int; SIZE_MAX written as -1),
 * garbage_collection_threshold (a float), expandable_segments, pinned_num_register_threads (an
 * int), release_lock_on_cudamalloc, pinned_use_cuda_host_register,
 * graph_capture_record_stream_reuse (bools), and roundup_power2_divisions, a dict from "1",
 * "2", ..., "32768" (the MiB each of its 16 intervals starts at) to that interval's divisions.
 * The recordings in tests/data/pytorch-2.11-h200 hold it so, and the viewer shows these keys. An
 * export of the caching strategies writes them from its conf; another strategy is not
 * PyTorch's allocator and has none of its settings, so its export holds the conf string alone,
 * which is also how the reader tells the two apart (read_settings). */
static void write_settings(ab_pkw_t *w, const char *conf, bool caching) {
  ab_caching_conf_t c;
  ab_caching_conf_defaults(&c);
  if (caching && ab_caching_conf_apply(&c, "conf", conf, NULL) != AB_OK) caching = false;
  ab_pkw_name(w, K_SETTINGS);
  ab_pkw_dict_begin(w);
  ab_pkw_name(w, K_CONF);
  ab_pkw_str(w, conf ? conf : "", conf ? strlen(conf) : 0);
  if (caching) {
    ab_pkw_name(w, "max_split_size");
    ab_pkw_int(w, c.max_split_size == UINT64_MAX ? -1 : (int64_t)c.max_split_size);
    ab_pkw_name(w, "garbage_collection_threshold");
    ab_pkw_float(w, c.gc_threshold);
    ab_pkw_name(w, "expandable_segments");
    ab_pkw_bool(w, c.expandable);
    ab_pkw_name(w, "pinned_num_register_threads");
    ab_pkw_uint(w, c.register_threads);
    ab_pkw_name(w, "release_lock_on_cudamalloc");
    ab_pkw_bool(w, c.release_lock);
    ab_pkw_name(w, "pinned_use_cuda_host_register");
    ab_pkw_bool(w, c.host_register);
    ab_pkw_name(w, "graph_capture_record_stream_reuse");
    ab_pkw_bool(w, c.capture_reuse);
    ab_pkw_name(w, "roundup_power2_divisions");
    ab_pkw_dict_begin(w);
    for (int i = 0; i < AB_CACHING_DIVISION_INTERVALS; i++) {
      char key[8];
      int len = snprintf(key, sizeof key, "%d", 1 << i);
      ab_pkw_str(w, key, (size_t)len);
      ab_pkw_uint(w, c.divisions[i]);
    }
    ab_pkw_dict_end(w);
  }
  ab_pkw_dict_end(w);
}

ab_status ab_snapshot_write(const char *path, const ab_trace_log_t *log, const uint64_t *stream_values,
                            unsigned nstreams, const char *conf, bool caching, ab_diag_t *diag) {
  return ab_snapshot_write_frames(path, log, stream_values, nstreams, conf, caching, NULL, NULL, diag);
}

ab_status ab_snapshot_write_frames(const char *path, const ab_trace_log_t *log, const uint64_t *stream_values,
                                   unsigned nstreams, const char *conf, bool caching, ab_snapshot_frames_fn frames,
                                   void *ctx, ab_diag_t *diag) {
  if (log->failed) return ab_diag_set(diag, AB_ERR_INTERNAL, "%s: the run's record is incomplete (out of host memory)", path);
  ab_pkw_t w;
  AB_TRY(ab_pkw_open(&w, path, diag));
  ab_pkw_dict_begin(&w);
  ab_pkw_name(&w, K_SEGMENTS);
  ab_pkw_list_begin(&w);
  for (size_t i = 0; i < log->nsegs; i++)
    write_segment(&w, log, &log->segs[i], raw_stream(log->segs[i].stream, stream_values, nstreams));
  ab_pkw_list_end(&w);
  ab_pkw_name(&w, K_DEVICE_TRACES);
  ab_pkw_list_begin(&w);
  ab_pkw_list_begin(&w);
  /* 2.11 names no pool per entry (a reader infers it from the segments alive at the end);
   * newer snapshots do, and a run that used private pools says each entry's. */
  bool pooled = false;
  for (size_t i = 0; i < log->n && !pooled; i++) pooled = log->recs[i].pool != 0;
  for (size_t i = 0; i < log->n; i++) {
    const ab_trace_rec_t *r = &log->recs[i];
    ab_pkw_dict_begin(&w);
    put_name(&w, K_ACTION, ab_trace_action_name((ab_trace_action_t)r->action));
    put_uint(&w, r->action == AB_TR_OOM ? K_DEVICE_FREE : K_ADDR, r->addr);
    put_uint(&w, K_SIZE, r->bytes);
    put_uint(&w, K_STREAM, raw_stream(r->stream, stream_values, nstreams));
    put_uint(&w, K_TIME, r->time_us);
    put_name(&w, K_COMPILE, V_NA);
    put_name(&w, K_METADATA, V_EMPTY);
    if (pooled && r->action != AB_TR_OOM) put_pool(&w, K_POOL_ID, r->pool);
    if (frames) {
      ab_pkw_name(&w, K_FRAMES);
      frames(ctx, &w, r);
    }
    ab_pkw_dict_end(&w);
  }
  ab_pkw_list_end(&w);
  ab_pkw_list_end(&w);
  write_settings(&w, conf, caching);
  put_empty_list(&w, K_ANNOTATIONS);
  ab_pkw_dict_end(&w);
  return ab_pkw_close(&w, diag);
}
