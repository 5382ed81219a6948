/* trace_builder.c: PyTorch-style records to events (trace_builder.h). */
#include "workloads/traces/trace_builder.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/hashmap.h"
#include "strategies/protocol/caching_conf.h"

/* A record's pool once inferred and it could not be told (Note [Pools of a trace]). */
#define POOL_UNKNOWN (-2)

/* A record, 24 bytes: the builder holds one for every record of the file until finish. */
struct ab_trace_rec_in_s {
  uint64_t addr, size;
  uint64_t pos : 40;     /* line or byte offset (REC_POS_MAX beyond: no file read whole is that long) */
  uint64_t action : 4;   /* ab_trace_action_t */
  uint64_t pending : 1;  /* held blocks: the free was requested, not completed */
  uint64_t stream : 11;  /* provisional index (order of first use) */
  int8_t pool;           /* index of info.pools, AB_TRACE_POOL_INFER, POOL_UNKNOWN or -3 - a pool */
};
#define REC_POS_MAX ((1ULL << 40) - 1)
_Static_assert(sizeof(struct ab_trace_rec_in_s) == 24, "a record in 24 bytes");
_Static_assert(AB_TR_OTHER < 16 && AB_TRACE_MAX_STREAMS <= 2048 && AB_TRACE_MAX_POOLS <= 125,
               "the record's fields hold every action, stream index and pool code");

static uint64_t rec_pos(size_t pos) { return pos < REC_POS_MAX ? pos : REC_POS_MAX; }

/* A segment of the end state. */
struct ab_trace_dumpseg_s {
  uint64_t addr, bytes;
  int pool;
};

/* ---- the builder ----------------------------------------------------------------------- */

void ab_trace_builder_init(ab_trace_builder_t *b, ab_events_t *es, const char *path, bool byte_pos) {
  memset(b, 0, sizeof *b);
  b->es = es;
  b->path = path;
  b->byte_pos = byte_pos;
  b->info.device = -1;
  b->info.npools = 1; /* the default pool, (0, 0) */
  ab_map_init(&b->stream_of);
  ab_map_init(&b->blocks);
  b->max_stream = -1;
}

void ab_trace_builder_discard(ab_trace_builder_t *b) {
  ab_map_free(&b->stream_of);
  ab_map_free(&b->blocks);
  free(b->pre);
  b->pre = NULL;
  b->npre = b->cappre = 0;
  free(b->recs);
  free(b->held);
  free(b->dump);
  b->recs = b->held = NULL;
  b->dump = NULL;
  b->nrecs = b->nheld = b->ndump = 0;
  if (b->stacks) ab_stacks_free(b->stacks); /* not handed to the events: finish failed, or never ran */
  free(b->stacks);
  free(b->rec_stack);
  b->stacks = NULL;
  b->rec_stack = NULL;
  b->caprec_stack = 0;
}

/* "PATH:LINE" or "PATH: byte N", for messages. */
static const char *where(const ab_trace_builder_t *b, size_t pos, char *buf, size_t size) {
  snprintf(buf, size, b->byte_pos ? "%s: byte %zu" : "%s:%zu", b->path, pos);
  return buf;
}

void ab_trace_builder_count(ab_trace_builder_t *b, const char *name, size_t len) {
  ab_trace_info_t *in = &b->info;
  in->records++;
  /* The name counted last first: a trace names few actions, often several in a row. */
  for (unsigned k = 0; k < in->nactions; k++) {
    unsigned i = k == 0 ? b->last_action : k - 1 < b->last_action ? k - 1 : k;
    if (b->action_len[i] == len && memcmp(in->actions[i].name, name, len) == 0) {
      in->actions[i].count++;
      b->last_action = i;
      return;
    }
  }
  if (in->nactions == AB_TRACE_MAX_ACTION_NAMES || len >= sizeof in->actions[0].name) {
    in->other_actions++;
    return;
  }
  memcpy(in->actions[in->nactions].name, name, len);
  in->actions[in->nactions].name[len] = '\0';
  b->action_len[in->nactions] = (uint8_t)len;
  b->last_action = in->nactions;
  in->actions[in->nactions++].count = 1;
}

void ab_trace_builder_count_known(ab_trace_builder_t *b, ab_trace_action_t act) {
  uint8_t slot = (size_t)act < AB_TR_OTHER ? b->known_slot[act] : 0;
  if (slot) {
    b->info.records++;
    b->info.actions[slot - 1].count++;
    return;
  }
  /* The first time: by name, which places it among the names in the order first seen. */
  const char *name = ab_trace_action_name(act);
  ab_trace_builder_count(b, name, strlen(name));
  if ((size_t)act < AB_TR_OTHER && strcmp(b->info.actions[b->last_action].name, name) == 0)
    b->known_slot[act] = (uint8_t)(b->last_action + 1);
}

static ab_status stream_lookup(ab_trace_builder_t *b, uint64_t raw, uint16_t *out, size_t pos, ab_diag_t *diag);

/* The provisional index of a raw stream value (order of first use), by a hash map: a trace
 * of many streams costs no scan of them per record. */
static ab_status stream_index(ab_trace_builder_t *b, uint64_t raw, uint16_t *out, size_t pos, ab_diag_t *diag) {
  /* Most records name the stream the one before named. */
  if (b->nstreams && raw == b->last_stream_raw) {
    *out = b->last_stream;
    return AB_OK;
  }
  AB_TRY(stream_lookup(b, raw, out, pos, diag));
  b->last_stream_raw = raw;
  b->last_stream = *out;
  return AB_OK;
}

static ab_status stream_lookup(ab_trace_builder_t *b, uint64_t raw, uint16_t *out, size_t pos, ab_diag_t *diag) {
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

/* ---- blocks (Note [Memory that existed before the trace]) ------------------------------------
 * Each free's block is found as the records come: resolve() follows each address through a
 * map of every address an alloc or a free touched, and the blocks that existed before the
 * trace come out of it. At finish, emit() writes the events in order, those blocks first,
 * with no lookup by address. */

/* A block that existed before the trace: its record (an ALLOC; pending when its free was
 * requested before the trace), its number in the order it was found, and the free record it
 * was found by (NO_REC: a held block), whose pool is inferred at finish. */
typedef struct ab_trace_pre_s {
  ab_trace_rec_in_t r;
  size_t found, rec;
} pre_t;
#define NO_REC SIZE_MAX

static int pre_by_addr(const void *x, const void *y) {
  const pre_t *a = x, *b = y;
  return (a->r.addr > b->r.addr) - (a->r.addr < b->r.addr);
}

/* What resolve() leaves in a free record's size, which nothing reads after: RES_IGNORED for a
 * free of nothing; else the block it frees, the index of its alloc record or RES_PRE | the
 * number of a block found existing before, with RES_REQUESTED when a free_completed ends a
 * requested free. emit() writes each alloc's id over its address, so that its frees find the
 * id there. */
#define RES_IGNORED UINT64_MAX
#define RES_REQUESTED (1ULL << 63)
#define RES_PRE (1ULL << 62)
#define RES_INDEX ((1ULL << 61) - 1)

/* The map's value for an address: 0 when no block is live there (freed, or a lone free of
 * nothing), else BLOCK_LIVE | the block (as RES_* names it), BLOCK_REQUESTED once its free
 * was requested. */
#define BLOCK_LIVE (RES_INDEX + 1)
#define BLOCK_REQUESTED RES_REQUESTED

static void push_pre(ab_trace_builder_t *b, const ab_trace_rec_in_t *r, size_t rec, bool pending) {
  if (b->npre == b->cappre) {
    size_t want = b->cappre ? b->cappre * 2 : 64;
    pre_t *grown = realloc(b->pre, want * sizeof *grown);
    if (grown == NULL) {
      b->failed = true;
      return;
    }
    b->pre = grown;
    b->cappre = want;
  }
  pre_t *p = &b->pre[b->npre];
  *p = (pre_t){*r, b->npre, rec};
  p->r.action = AB_TR_ALLOC;
  p->r.pending = pending;
  b->npre++;
}

/* Record i, as it comes: the block of an alloc or a free (rule 1 of the Note: the first touch
 * of an address by a free is a block that existed before). An alloc at an address still live
 * is kept to be reported at finish, where the trace's other errors come first. */
static void resolve(ab_trace_builder_t *b, ab_trace_rec_in_t *r, size_t i) {
  uint8_t a = r->action;
  bool alloc = a == AB_TR_ALLOC, freed = a == AB_TR_FREE_REQUESTED || a == AB_TR_FREE_COMPLETED;
  if (!alloc && !freed) return;
  if (r->addr == 0 || (alloc && r->size == 0)) { /* nothing a replay could allocate or free */
    if (freed) r->size = RES_IGNORED;
    return;
  }
  size_t slot;
  bool added = false;
  if (i == b->hint_rec && i && b->blocks.slots[b->hint_slot].key == r->addr) {
    slot = b->hint_slot;
  } else if (ab_map_slot_or_add(&b->blocks, r->addr, &slot, &added) != AB_OK) {
    b->failed = true;
    return;
  }
  uint64_t *v = &b->blocks.slots[slot].val;
  if (alloc) {
    if (*v & BLOCK_LIVE) {
      if (!b->twice) {
        b->twice = true;
        b->twice_pos = r->pos;
        b->twice_addr = r->addr;
      }
      return;
    }
    *v = BLOCK_LIVE | i;
    return;
  }
  if (added && r->size) { /* the first touch is a free: the block existed before */
    bool requested = a == AB_TR_FREE_COMPLETED;
    *v = BLOCK_LIVE | RES_PRE | b->npre | (requested ? BLOCK_REQUESTED : 0);
    push_pre(b, r, i, requested);
  }
  if (!(*v & BLOCK_LIVE) || (a == AB_TR_FREE_REQUESTED && (*v & BLOCK_REQUESTED))) {
    r->size = RES_IGNORED;
  } else if (a == AB_TR_FREE_REQUESTED) {
    r->size = *v & (RES_PRE | RES_INDEX);
    *v |= BLOCK_REQUESTED;
    b->hint_rec = i + 1; /* most frees complete at once, in the next record: no second search */
    b->hint_slot = slot;
  } else {
    r->size = *v & (RES_REQUESTED | RES_PRE | RES_INDEX);
    *v = 0;
  }
}

/* At finish, the pools inferred: a block found by a free takes that free's pool; the held
 * blocks at addresses the records never touched join them; all go in address order (rule 2). */
static void held_and_sorted(ab_trace_builder_t *b) {
  for (size_t i = 0; i < b->npre; i++)
    if (b->pre[i].rec != NO_REC) b->pre[i].r.pool = b->recs[b->pre[i].rec].pool;
  for (size_t i = 0; i < b->nheld && !b->failed; i++)
    if (!ab_map_get(&b->blocks, b->held[i].addr, NULL)) push_pre(b, &b->held[i], NO_REC, b->held[i].pending);
  if (b->npre) qsort(b->pre, b->npre, sizeof *b->pre, pre_by_addr);
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

ab_status ab_trace_builder_add_pooled(ab_trace_builder_t *b, ab_trace_action_t action, uint64_t addr, uint64_t size,
                                      uint64_t stream, int pool, size_t pos, ab_diag_t *diag) {
  uint16_t index = 0;
  if (action != AB_TR_OTHER && action != AB_TR_SNAPSHOT && action != AB_TR_EMPTY_CACHE) AB_TRY(stream_index(b, stream, &index, pos, diag));
  ab_trace_rec_in_t r = {addr, size, rec_pos(pos) & REC_POS_MAX, action, 0, index & 0x7ffu, (int8_t)pool};
  b->infer |= pool == AB_TRACE_POOL_INFER;
  resolve(b, &r, b->nrecs);
  push_rec(b, &b->recs, &b->nrecs, &b->caprecs, &r);
  return AB_OK;
}

ab_status ab_trace_builder_add(ab_trace_builder_t *b, ab_trace_action_t action, uint64_t addr, uint64_t size,
                               uint64_t stream, size_t pos, ab_diag_t *diag) {
  return ab_trace_builder_add_pooled(b, action, addr, size, stream, 0, pos, diag);
}

/* ---- stacks (Note [Stacks of the records]) ------------------------------------------------- */

ab_stacks_t *ab_trace_builder_stacks(ab_trace_builder_t *b) {
  if (b->stacks == NULL) {
    b->stacks = malloc(sizeof *b->stacks);
    if (b->stacks == NULL) {
      b->failed = true;
      return NULL;
    }
    ab_stacks_init(b->stacks);
  }
  return b->stacks;
}

void ab_trace_builder_stack(ab_trace_builder_t *b, uint32_t stack) {
  if (b->nrecs) ab_trace_builder_stack_at(b, b->nrecs - 1, stack);
}

void ab_trace_builder_stack_at(ab_trace_builder_t *b, size_t i, uint32_t stack) {
  if (stack == 0 || i >= b->nrecs) return;
  if (i >= b->caprec_stack) { /* the records before had none: zeros */
    size_t cap = b->caprec_stack ? b->caprec_stack : 4096;
    while (cap <= i) cap *= 2;
    uint32_t *grown = realloc(b->rec_stack, cap * sizeof *grown);
    if (grown == NULL) {
      b->failed = true;
      return;
    }
    memset(grown + b->caprec_stack, 0, (cap - b->caprec_stack) * sizeof *grown);
    b->rec_stack = grown;
    b->caprec_stack = cap;
  }
  b->rec_stack[i] = stack;
}

static uint32_t stack_of_rec(const ab_trace_builder_t *b, size_t i) {
  return i < b->caprec_stack ? b->rec_stack[i] : 0;
}

ab_status ab_trace_builder_pool(ab_trace_builder_t *b, int64_t id0, int64_t id1, size_t pos, int *out, ab_diag_t *diag) {
  ab_trace_info_t *in = &b->info;
  for (unsigned i = 0; i < in->npools; i++)
    if (in->pools[i].id[0] == id0 && in->pools[i].id[1] == id1) return *out = (int)i, AB_OK;
  if (in->npools == AB_TRACE_MAX_POOLS) {
    char at[300];
    return ab_diag_set(diag, AB_ERR_INVALID, "%s: more than %d memory pools", where(b, pos, at, sizeof at),
                       AB_TRACE_MAX_POOLS - 1);
  }
  in->pools[in->npools].id[0] = id0;
  in->pools[in->npools].id[1] = id1;
  *out = (int)in->npools++;
  return AB_OK;
}

void ab_trace_builder_dump_segment(ab_trace_builder_t *b, uint64_t addr, uint64_t bytes, int pool) {
  if (b->ndump == b->capdump) {
    size_t cap = b->capdump ? 2 * b->capdump : 64;
    struct ab_trace_dumpseg_s *grown = realloc(b->dump, cap * sizeof *grown);
    if (grown == NULL) {
      b->failed = true;
      return;
    }
    b->dump = grown;
    b->capdump = cap;
  }
  b->dump[b->ndump++] = (struct ab_trace_dumpseg_s){addr, bytes, pool};
  if (pool >= 0 && (unsigned)pool < b->info.npools) b->info.pools[pool].segments++;
}

ab_status ab_trace_builder_held(ab_trace_builder_t *b, uint64_t addr, uint64_t requested, uint64_t stream,
                                bool pending, size_t pos, ab_diag_t *diag) {
  if (addr == 0 || requested == 0) return AB_OK; /* nothing a replay could allocate */
  uint16_t index = 0;
  AB_TRY(stream_index(b, stream, &index, pos, diag));
  ab_trace_rec_in_t r = {addr, requested, rec_pos(pos) & REC_POS_MAX, AB_TR_ALLOC, pending, index & 0x7ffu, AB_TRACE_POOL_INFER};
  push_rec(b, &b->held, &b->nheld, &b->capheld, &r);
  return AB_OK;
}

void ab_trace_builder_end_state(ab_trace_builder_t *b, uint64_t reserved, uint64_t segments) {
  b->info.end_state = true;
  b->end_reserved = reserved;
  b->end_segments = segments;
}

/* ---- pools (Note [Pools of a trace]) ------------------------------------------------------ */

/* Address ranges freed after the record at hand: sorted, disjoint, merged. */
typedef struct ranges_s {
  uint64_t (*r)[2];
  size_t n, cap;
} ranges_t;

/* The first range ending after addr. */
static size_t ranges_at(const ranges_t *g, uint64_t addr) {
  size_t lo = 0, hi = g->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (g->r[mid][1] <= addr) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static bool ranges_hold(const ranges_t *g, uint64_t addr) {
  size_t i = ranges_at(g, addr);
  return i < g->n && g->r[i][0] <= addr;
}

static bool ranges_add(ranges_t *g, uint64_t from, uint64_t to) {
  if (to <= from) return true;
  size_t i = ranges_at(g, from), j = i;
  while (j < g->n && g->r[j][0] <= to) { /* absorb the ranges it touches */
    if (g->r[j][0] < from) from = g->r[j][0];
    if (g->r[j][1] > to) to = g->r[j][1];
    j++;
  }
  if (i == j) {
    if (g->n == g->cap) {
      size_t cap = g->cap ? 2 * g->cap : 64;
      uint64_t(*grown)[2] = realloc(g->r, cap * sizeof *grown);
      if (grown == NULL) return false;
      g->r = grown;
      g->cap = cap;
    }
    memmove(&g->r[i + 1], &g->r[i], (g->n - i) * sizeof *g->r);
    g->n++;
  } else if (j > i + 1) {
    memmove(&g->r[i + 1], &g->r[j], (g->n - j) * sizeof *g->r);
    g->n -= j - i - 1;
  }
  g->r[i][0] = from;
  g->r[i][1] = to;
  return true;
}

static int seg_by_addr(const void *x, const void *y) {
  const struct ab_trace_dumpseg_s *a = x, *b = y;
  return (a->addr > b->addr) - (a->addr < b->addr);
}

/* The pool of the dump's segment holding addr, or POOL_UNKNOWN. */
static int dump_pool(const ab_trace_builder_t *b, uint64_t addr) {
  size_t lo = 0, hi = b->ndump;
  while (lo < hi) { /* the last segment starting at or below addr */
    size_t mid = (lo + hi) / 2;
    if (b->dump[mid].addr <= addr) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return POOL_UNKNOWN;
  const struct ab_trace_dumpseg_s *d = &b->dump[lo - 1];
  return addr - d->addr < d->bytes && d->pool >= 0 ? d->pool : POOL_UNKNOWN;
}

/* Rule 1 of Note [Pools of a trace], from the end backwards. */
static void infer_pools(ab_trace_builder_t *b) {
  if (!b->infer && b->nheld == 0) return;
  if (b->ndump) qsort(b->dump, b->ndump, sizeof *b->dump, seg_by_addr); /* qsort takes no NULL, even of nothing */
  for (size_t i = 0; i < b->nheld; i++)
    if (b->held[i].pool == AB_TRACE_POOL_INFER) b->held[i].pool = (int8_t)dump_pool(b, b->held[i].addr);
  if (b->info.npools == 1) {
    /* No private pool named anywhere: what the rules below give every record is the default
     * pool, found by the segment or, unknown, by the stream no private pool allocates on. */
    for (size_t i = 0; i < b->nrecs; i++)
      if (b->recs[i].pool == AB_TRACE_POOL_INFER) b->recs[i].pool = 0;
    return;
  }
  ranges_t gone = {NULL, 0, 0};
  for (size_t i = b->nrecs; i-- > 0 && !b->failed;) {
    ab_trace_rec_in_t *r = &b->recs[i];
    if ((r->action == AB_TR_SEGMENT_FREE || r->action == AB_TR_SEGMENT_UNMAP) && !ranges_add(&gone, r->addr, r->addr + r->size))
      b->failed = true;
    if (r->pool == AB_TRACE_POOL_INFER)
      r->pool = (int8_t)(ranges_hold(&gone, r->addr) ? POOL_UNKNOWN : dump_pool(b, r->addr));
  }
  free(gone.r);
  /* A private pool's segments serve the streams it allocates on: memory of another stream
   * was the default pool's, whatever became of it. */
  uint8_t priv[AB_TRACE_MAX_STREAMS] = {0};
  for (size_t i = 0; i < b->nrecs; i++)
    if (b->recs[i].action == AB_TR_ALLOC && b->recs[i].pool > 0) priv[b->recs[i].stream] = 1;
  for (size_t i = 0; i < b->nheld; i++)
    if (b->held[i].pool > 0) priv[b->held[i].stream] = 1;
  for (size_t i = 0; i < b->nrecs; i++)
    if (b->recs[i].pool == POOL_UNKNOWN && !priv[b->recs[i].stream]) b->recs[i].pool = 0;
  /* Contexts are runs: an allocation between two of pool P on its stream, with no other
   * allocation of that stream between, was made in P's context. */
  int16_t *before = malloc((b->nrecs ? b->nrecs : 1) * sizeof *before);
  int16_t last[AB_TRACE_MAX_STREAMS];
  if (before == NULL) {
    b->failed = true;
    return;
  }
  for (unsigned k = 0; k < AB_TRACE_MAX_STREAMS; k++) last[k] = POOL_UNKNOWN;
  for (size_t i = 0; i < b->nrecs; i++)
    if (b->recs[i].action == AB_TR_ALLOC) {
      before[i] = last[b->recs[i].stream];
      if (b->recs[i].pool != POOL_UNKNOWN) last[b->recs[i].stream] = b->recs[i].pool;
    }
  for (unsigned k = 0; k < AB_TRACE_MAX_STREAMS; k++) last[k] = POOL_UNKNOWN;
  for (size_t i = b->nrecs; i-- > 0;) {
    ab_trace_rec_in_t *r = &b->recs[i];
    if (r->action != AB_TR_ALLOC) continue;
    int16_t after = last[r->stream];
    if (r->pool != POOL_UNKNOWN) last[r->stream] = r->pool;
    else if (after > 0 && before[i] == after) r->pool = (int8_t)(-3 - after); /* by context, resolved below */
  }
  for (size_t i = 0; i < b->nrecs; i++)
    if (b->recs[i].pool <= -3) b->recs[i].pool = (int8_t)(-3 - b->recs[i].pool);
  free(before);
}

/* The pool an allocation is replayed in, counted in the info. */
static int pool_of(ab_trace_builder_t *b, const ab_trace_rec_in_t *r) {
  ab_trace_info_t *in = &b->info;
  int pool = r->pool;
  if (pool == POOL_UNKNOWN) in->pool_unknown++;
  else if (b->infer) in->pool_inferred++;
  if (pool < 0 || (unsigned)pool >= in->npools) pool = 0;
  in->pools[pool].allocs++;
  return pool;
}

/* What the events say of pools as they are built: the pool allocations go to now (0: the
 * default), and the pools made. */
typedef struct routing_s {
  int cur;
  bool made[AB_TRACE_MAX_POOLS];
} routing_t;

static void route_end(ab_events_t *es, routing_t *rt) {
  if (rt->cur == 0) return;
  ab_events_pool(es, AB_POOL_END, (uint32_t)rt->cur, 0, 0);
  ab_events_pool(es, AB_POOL_RELEASE, (uint32_t)rt->cur, 0, 0);
  rt->cur = 0;
}

static void route_to(ab_events_t *es, routing_t *rt, int pool) {
  if (pool == rt->cur) return;
  route_end(es, rt);
  if (pool == 0) return;
  if (!rt->made[pool]) ab_events_pool(es, AB_POOL_CREATE, (uint32_t)pool, 0, 0);
  rt->made[pool] = true;
  ab_events_pool(es, AB_POOL_BEGIN, (uint32_t)pool, 0, AB_POOL_ALL_STREAMS);
  rt->cur = pool;
}

/* The rules of PyTorch's allocator read into its records hold for its snapshots; a CSV trace
 * may come from any allocator (allocbench's exports of raw free a segment at every free). */
static bool pytorch(const ab_trace_builder_t *b) { return b->pytorch; }

/* Whether an `oom` record stands for the request that failed
 * (Note [A trace that ends in an OOM]): in PyTorch's snapshots and in what allocbench writes in their vocabulary, a
 * snapshot or a CSV trace; an RMM log's failures say nothing of how its program went on. */
static bool oom_is_a_request(const ab_trace_builder_t *b) {
  return pytorch(b) || b->info.format == NULL || strcmp(b->info.format, "rmm-log") != 0;
}

/* Note [Releases inside a malloc]
 * PyTorch's malloc frees cached segments itself in three places (v2.11.0
 * c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator::malloc): garbage collection
 * (garbage_collect_cached_blocks, run only under a memory cap with a threshold, when reserved
 * is above threshold x cap), and after alloc_block was refused a segment (the cap: reserved +
 * the segment > cap; or the card), release_available_cached_blocks and release_cached_blocks
 * before the retry. Its records then show a run of segment_free (or segment_unmap) followed by
 * the segment_alloc (segment_map, or oom) of the same malloc, exactly as the program's own
 * torch.cuda.empty_cache() followed by a malloc that needs a new segment would. The run is
 * PyTorch's when its condition held at that moment under the cap the program ran under, the
 * reserved bytes read off the records (the start implied by the end state, as summarise()
 * does):
 *   - garbage collection: a threshold is set and reserved > threshold x cap; it frees only
 *     whole large segments, never a 2 MiB small one and never unmaps;
 *   - refusal: reserved + the segment the malloc asked for > cap (the segment_alloc's size;
 *     for a map, the allocation size of the request that follows; an oom's request is always
 *     one);
 *   - the program's empty_cache otherwise.
 * The cap is the run's (the builder's `cap`), else the recorded per_process_memory_fraction of
 * the card (`card`). Without one the trace cannot always tell: a cap holds at least the peak
 * reserved (less a page with expandable segments), so a run where reserved + the segment stays
 * within that peak, and reserved within the threshold of it, is surely the program's; any other
 * run is counted in info.releases_untold, read as it was before caps were known (PyTorch's when
 * the trace shows an OOM or a fraction whose card is unknown, else the program's), and the
 * stream is approximate, saying why. */

__extension__ typedef __int128 i128_t;

/* The reserved bytes before the first record: what the records free beyond what they
 * allocated, or what the end state implies (summarise() reads the events the same way). */
static i128_t reserved_at_start(const ab_trace_builder_t *b, i128_t *peak) {
  i128_t res = 0, lo = 0, hi = 0;
  for (size_t i = 0; i < b->nrecs; i++) {
    const ab_trace_rec_in_t *r = &b->recs[i];
    if (r->action == AB_TR_SEGMENT_ALLOC || r->action == AB_TR_SEGMENT_MAP) res += r->size;
    else if (r->action == AB_TR_SEGMENT_FREE || r->action == AB_TR_SEGMENT_UNMAP) res -= r->size;
    if (res < lo) lo = res;
    if (res > hi) hi = res;
  }
  i128_t start = -lo;
  if (b->info.end_state && (i128_t)b->end_reserved - res > start) start = (i128_t)b->end_reserved - res;
  *peak = start + hi;
  return start;
}

/* The segment the malloc that ends the run at j asked for (PyTorch's alloc_size). */
static uint64_t asked_for(const ab_trace_builder_t *b, const ab_caching_conf_t *conf, size_t j) {
  const ab_trace_rec_in_t *next = &b->recs[j];
  if (next->action == AB_TR_SEGMENT_ALLOC) return next->size;
  if (next->action == AB_TR_OOM) return ab_caching_allocation_size(conf, next->size); /* recorded rounded */
  for (size_t k = j; k < b->nrecs; k++) /* a map: the request it was mapped for follows */
    if (b->recs[k].action == AB_TR_ALLOC) return ab_caching_allocation_size(conf, ab_caching_round_size(conf, b->recs[k].size));
  return next->size;
}

static bool is_release(uint8_t a) { return a == AB_TR_SEGMENT_FREE || a == AB_TR_SEGMENT_UNMAP; }

/* Marks the first record of each run of segment releases that was the program's empty_cache
 * (rule 3 of Note [Pools of a trace]; Note [Releases inside a malloc]). */
static uint8_t *find_empty_caches(ab_trace_builder_t *b) {
  uint8_t *mark = calloc(b->nrecs ? b->nrecs : 1, 1);
  if (mark == NULL || !pytorch(b)) return mark; /* other allocators free segments as they please */
  ab_caching_conf_t conf;
  ab_caching_conf_defaults(&conf);
  bool conf_ok = ab_caching_conf_apply(&conf, "settings", b->es->settings, NULL) == AB_OK;
  if (!conf_ok) ab_caching_conf_defaults(&conf);
  bool malloc_frees = conf.gc_threshold > 0 || conf.max_split_size != UINT64_MAX; /* a private pool's malloc */
  uint64_t cap = b->cap;
  if (cap == 0 && conf.memory_fraction < 1.0 && b->card) cap = (uint64_t)(conf.memory_fraction * (double)b->card);
  bool pressed = conf.memory_fraction < 1.0; /* a fraction whose card is unknown */
  for (size_t i = 0; i < b->nrecs && !pressed; i++) pressed = b->recs[i].action == AB_TR_OOM;
  i128_t peak = 0, res = reserved_at_start(b, &peak);
  /* Without a cap: the least a cap (or the card) held, the run having reached its peak. */
  i128_t least = peak - (i128_t)(conf.expandable ? conf.large_segment_size : 0);
  for (size_t i = 0; i < b->nrecs;) {
    uint8_t a = b->recs[i].action;
    if (!is_release(a)) {
      if (a == AB_TR_SEGMENT_ALLOC || a == AB_TR_SEGMENT_MAP) res += b->recs[i].size;
      i++;
      continue;
    }
    i128_t before = res;
    bool gc_can = true; /* garbage collection frees whole large segments only */
    size_t j = i;
    for (; j < b->nrecs && is_release(b->recs[j].action); j++) {
      res -= b->recs[j].size;
      gc_can &= b->recs[j].action == AB_TR_SEGMENT_FREE && b->recs[j].size > (2ULL << 20);
    }
    const ab_trace_rec_in_t *next = j < b->nrecs ? &b->recs[j] : NULL;
    bool in_malloc = next && (next->action == AB_TR_SEGMENT_ALLOC || next->action == AB_TR_SEGMENT_MAP || next->action == AB_TR_OOM);
    bool own = in_malloc && (next->action == AB_TR_OOM || !(next->pool > 0 && !malloc_frees));
    if (own && next->action != AB_TR_OOM) { /* an oom's releases are always the last retry's */
      i128_t asked = (i128_t)asked_for(b, &conf, j), limit = cap ? (i128_t)cap : least;
      bool refused = before + asked > limit;
      bool collected = gc_can && conf.gc_threshold > 0 && before > (i128_t)(uint64_t)(conf.gc_threshold * (double)limit);
      if (cap == 0 && (refused || collected)) {
        b->info.releases_untold++;
        own = pressed;
      } else {
        own = refused || collected;
      }
    }
    mark[i] = !own;
    b->info.empty_caches += !own;
    b->info.releases_pytorch += own;
    i = j;
  }
  if (b->info.releases_untold)
    ab_events_approximate(b->es,
                          "%" PRIu64 " runs of segment releases inside a malloc may be PyTorch's own (garbage collection, "
                          "or a retry after a refused segment) or the program's empty_cache; without the cap the program "
                          "ran under they cannot be told apart (read as %s; give the cap: --cap, or "
                          "per_process_memory_fraction in -c)",
                          b->info.releases_untold, pressed ? "PyTorch's" : "the program's");
  return mark;
}

/* The id of the block a free record frees (resolve()). */
static uint32_t freed_id(const ab_trace_builder_t *b, const uint32_t *pre_id, uint64_t res) {
  uint64_t k = res & RES_INDEX;
  return res & RES_PRE ? pre_id[k] : (uint32_t)b->recs[k].addr;
}

/* Pass 2: a record's events; an ALLOC takes the record's stack. */
static void emit(ab_trace_builder_t *b, routing_t *rt, const uint32_t *pre_id, ab_trace_rec_in_t *r, uint32_t stack) {
  ab_events_t *es = b->es;
  switch ((ab_trace_action_t)r->action) {
    case AB_TR_ALLOC:
      if (r->size == 0 || r->addr == 0) break;
      route_to(es, rt, pool_of(b, r));
      r->addr = ab_events_alloc(es, r->size, r->stream, AB_TAG_OTHER);
      if (stack) ab_stacks_set(b->stacks, (uint32_t)r->addr, stack);
      return;
    case AB_TR_FREE_REQUESTED:
      if (r->size == RES_IGNORED) break;
      route_end(es, rt); /* a capture would defer it (Note [Captures], caching.c); the trace says when it ended */
      ab_events_free_phase(es, freed_id(b, pre_id, r->size), AB_FREE_REQUEST);
      return;
    case AB_TR_FREE_COMPLETED: {
      if (r->size == RES_IGNORED) break;
      uint32_t id = freed_id(b, pre_id, r->size);
      ab_event_t *last = es->n ? &es->ev[es->n - 1] : NULL;
      if (!(r->size & RES_REQUESTED))
        ab_events_free_phase(es, id, AB_FREE_NOW);
      else if (last && last->kind == AB_EV_FREE && last->id == id && last->aux == AB_FREE_REQUEST)
        last->aux = AB_FREE_NOW; /* nothing happened in between: one plain free */
      else {
        route_end(es, rt);
        ab_events_free_phase(es, id, AB_FREE_COMPLETE);
      }
      return;
    }
    case AB_TR_SEGMENT_ALLOC:
    case AB_TR_SEGMENT_FREE:
    case AB_TR_SEGMENT_MAP:
    case AB_TR_SEGMENT_UNMAP: ab_events_segment(es, (ab_trace_action_t)r->action, r->stream, r->addr, r->size); return;
    case AB_TR_OOM:
      es->trace_ooms++; /* every OOM the program met, the last one too */
      if (r->pending && r->size) { /* Note [A trace that ends in an OOM] */
        b->info.final_oom = true;
        ab_events_alloc(es, r->size, r->stream, AB_TAG_OTHER);
      } else if (r->size && oom_is_a_request(b)) { /* one it caught: requested again, and let go */
        b->info.caught_ooms++;
        ab_events_free_id(es, ab_events_alloc(es, r->size, r->stream, AB_TAG_CAUGHT));
      }
      return;
    case AB_TR_EMPTY_CACHE:
      route_end(es, rt);
      ab_events_empty_cache(es);
      b->info.empty_caches++;
      return;
    case AB_TR_SNAPSHOT:
    case AB_TR_OTHER: return;
  }
  es->ignored++;
}

/* The pools, the blocks that existed before, the records' events, the program's empty_caches. */
static ab_status build(ab_trace_builder_t *b, ab_diag_t *diag) {
  ab_events_t *es = b->es;
  if (b->twice) {
    char at[300];
    return ab_diag_set(diag, AB_ERR_INVALID, "%s: alloc at 0x%llx, which is already allocated",
                       where(b, b->twice_pos, at, sizeof at), (unsigned long long)b->twice_addr);
  }
  infer_pools(b);
  held_and_sorted(b);
  const pre_t *pre = b->pre;
  size_t npre = b->npre;
  uint32_t *pre_id = malloc((npre ? npre : 1) * sizeof *pre_id);
  ab_status st = pre_id == NULL || b->failed ? AB_ERR_INTERNAL : AB_OK;
  routing_t rt;
  memset(&rt, 0, sizeof rt);
  for (size_t i = 0; i < npre && st == AB_OK; i++) {
    route_to(es, &rt, pool_of(b, &pre[i].r));
    uint32_t id = ab_events_alloc(es, pre[i].r.size, pre[i].r.stream, AB_TAG_OTHER);
    pre_id[pre[i].found] = id;
    if (pre[i].r.pending) {
      route_end(es, &rt);
      ab_events_free_phase(es, id, AB_FREE_REQUEST);
    }
  }
  b->info.preexisting = npre;
  uint8_t *empty = st == AB_OK ? find_empty_caches(b) : NULL;
  if (st == AB_OK && empty == NULL) st = AB_ERR_INTERNAL;
  /* The last oom, when no alloc follows it (Note [A trace that ends in an OOM]). */
  for (size_t i = b->nrecs; i-- > 0 && st == AB_OK && oom_is_a_request(b);) {
    if (b->recs[i].action == AB_TR_ALLOC) break;
    if (b->recs[i].action == AB_TR_OOM) {
      b->recs[i].pending = 1;
      break;
    }
  }
  for (size_t i = 0; i < b->nrecs && st == AB_OK; i++) {
    if (empty[i]) {
      route_end(es, &rt);
      ab_events_empty_cache(es);
    }
    emit(b, &rt, pre_id, &b->recs[i], stack_of_rec(b, i));
  }
  route_end(es, &rt);
  free(empty);
  free(pre_id);
  if (st == AB_OK && b->info.pool_unknown && b->info.npools > 1) {
    es->unknown_pools = b->info.pool_unknown;
    ab_events_approximate(es,
                          "the pools of %" PRIu64 " allocations cannot be told (their segments were freed before the "
                          "snapshot; they were replayed in the default pool)",
                          b->info.pool_unknown);
  }
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
    if (e->kind == AB_EV_ALLOC && in->final_oom && e->id == es->nids - 1) continue; /* the request PyTorch refused */
    if (e->kind == AB_EV_ALLOC && e->aux == AB_TAG_CAUGHT) { /* refused too, with its FREE after it */
      i++;
      continue;
    }
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
  bool failed = b->failed || (b->stacks && b->stacks->failed);
  ab_status st = failed ? ab_diag_set(diag, AB_ERR_INTERNAL, "%s: out of host memory while reading the trace", b->path)
                        : build(b, diag);
  /* The stacks go to the events, complete (ab_stacks_set can fail in build), or nowhere. */
  if (st == AB_OK && b->stacks && b->stacks->failed)
    st = ab_diag_set(diag, AB_ERR_INTERNAL, "%s: out of host memory while reading the trace", b->path);
  if (st == AB_OK && b->stacks) {
    ab_stacks_finish(b->stacks);
    es->stacks = b->stacks;
    b->stacks = NULL;
  }
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
  bool ranked = true; /* streams first used in their order, as most traces do: nothing to change */
  for (unsigned i = 0; i < b->nstreams; i++) ranked &= rank[i] == i;
  for (size_t i = 0; i < es->n && !ranked; i++)
    if (es->ev[i].kind == AB_EV_ALLOC) es->ev[i].stream = rank[es->ev[i].stream];
  for (size_t i = 0; i < es->nsegs && !ranked; i++) es->segs[i].stream = rank[es->segs[i].stream];
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

void ab_trace_lines_init(ab_trace_lines_t *l, ab_instream_t *in) {
  memset(l, 0, sizeof *l);
  l->in = in;
}

ab_status ab_trace_lines_next(ab_trace_lines_t *l, const char **s, size_t *len, bool *more, ab_diag_t *diag) {
  size_t want = 64u << 10;
  for (;;) {
    size_t avail = (size_t)(l->end - l->p);
    const unsigned char *nl = avail ? memchr(l->p, '\n', avail) : NULL;
    if (nl || l->eof) {
      *more = nl || avail;
      *s = (const char *)l->p;
      *len = nl ? (size_t)(nl - l->p) : avail;
      l->p = nl ? nl + 1 : l->end;
      return AB_OK;
    }
    /* No newline in sight: a longer window (a line longer than it grows it). */
    if (want <= avail) want = avail * 2;
    ab_instream_consume(l->in, (size_t)(l->p - l->win));
    l->win = l->p = l->end = NULL;
    const unsigned char *data = NULL;
    size_t got = 0;
    AB_TRY(ab_instream_window(l->in, want, &data, &got, diag));
    l->win = l->p = data;
    l->end = data + got;
    l->eof = got < want;
  }
}
