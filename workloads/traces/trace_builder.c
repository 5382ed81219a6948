/* trace_builder.c: PyTorch-style records to events (trace_builder.h). */
#include "workloads/traces/trace_builder.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/hashmap.h"
#include "kernels/base/hostmem.h"
#include "strategies/protocol/caching_conf.h"

/* Note [Records to events in one pass]
 * Each record becomes its events as it is added, written into the event stream itself: a trace
 * of N records is held once, as events (16 bytes each, two records in three becoming one), and
 * not first as records (24 bytes each) read again at finish. Importing a snapshot of 1.45 M
 * entries used to spend a quarter of its time faulting in the pages of the two copies. What a
 * record's events depend on that only comes later is left open as they are written, and
 * settled at finish:
 *   1. The blocks that existed before the trace (Note [Memory that existed before the trace])
 *      take the first ids, so the records' allocations are numbered from 0 and move up by their
 *      number at finish; a free of such a block names it by its number in the order found, with
 *      FREE_OF_PRE in the event's bytes.
 *   2. A record's pool may come from the end state, read last (Note [Pools of a trace]): the
 *      events are written with no POOL event, each allocation's recorded address and pool code
 *      kept beside them (alloc_addr, alloc_pool: 9 bytes an allocation where pools are
 *      inferred, none otherwise), and the records of other kinds whose pools the rules read
 *      are kept whole (an alloc of nothing, the record after a run of releases, the free that
 *      found a block existing before). A FREE whose free was requested ends the routing as the
 *      request did (FREE_ROUTED in its bytes, where no free_requested of its own says so).
 *   3. A run of segment releases may be the program's empty_cache, which the reserved bytes
 *      of the whole trace, the cap and the settings (read last) tell (Note [Releases inside a malloc]):
 *      each run is kept, where it began and the record after it, and its EMPTY_CACHE put in
 *      at finish. A free_completed whose request such a run came between is
 *      paired with it at finish (merge_late), where it is known whether an EMPTY_CACHE came
 *      between.
 *   4. An oom's request is written as caught (ALLOC, FREE) until an alloc follows; when none
 *      does, it was the program's last (Note [A trace that ends in an OOM]), and its FREE goes.
 * Where none of these applies (no block before the trace, no private pool, no empty_cache, no
 * final OOM: allocbench's snapshots and most of PyTorch's) the events are final as written.
 * Else they are written once more at finish (rebuild), in one pass, as they would have been
 * written in order: the blocks before the trace, then each event with the pool calls and
 * EMPTY_CACHE that come before it. The bytes of a FREE carry FREE_OF_PRE and FREE_ROUTED only
 * until then, or until ab_events_finish writes the block's size over them. */
#define FREE_OF_PRE 1u /* a FREE's id is the number of a block found existing before the trace */
#define FREE_ROUTED 2u /* a FREE NOW whose free was requested: the routing ended before it */

/* A record's pool once inferred and it could not be told (Note [Pools of a trace]). */
#define POOL_UNKNOWN (-2)

/* A record, 24 bytes: the blocks of the end state, and those found to exist before the trace. */
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

/* A record that became no event of its own but whose pool the rules read
 * (Note [Pools of a trace]; Note [Records to events in one pass], 2). */
typedef struct ab_trace_item_s {
  uint64_t addr;
  size_t segs;   /* segment records before it, itself included when it is one: the releases
                  * after it are es->segs[segs..] */
  size_t events; /* events written before it */
  uint16_t stream;
  int8_t pool;   /* as recorded (an index, AB_TRACE_POOL_INFER), then as inferred */
} item_t;

/* A run of segment releases and the record after it (Note [Releases inside a malloc]). */
#define NO_NEXT 0xff /* the trace ended with the run */
typedef struct ab_trace_run_s {
  size_t events;      /* events written before it: where its EMPTY_CACHE goes */
  size_t seg, nseg;   /* its releases: es->segs[seg, seg + nseg) */
  uint8_t next;       /* the action of the record after it, or NO_NEXT */
  bool asked_known;   /* a map came after it, and then an alloc */
  uint64_t next_size; /* the record after it: its size */
  uint64_t asked;     /* with asked_known: the size that alloc asked for */
  item_t at;          /* the record after it, for its pool (a segment_alloc or segment_map's) */
} run_t;

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
  ab_map_init(&b->segments);
  b->max_stream = -1;
}

/* What the builder holds of its own, the events aside. */
static void release(ab_trace_builder_t *b) {
  ab_map_free(&b->stream_of);
  ab_map_free(&b->blocks);
  ab_map_free(&b->segments);
  free(b->pre);
  b->pre = NULL;
  b->npre = b->cappre = 0;
  free(b->held);
  free(b->dump);
  b->held = NULL;
  b->dump = NULL;
  b->nheld = b->ndump = 0;
  free(b->alloc_addr);
  free(b->alloc_pool);
  free(b->stray);
  free(b->runs);
  b->alloc_addr = NULL;
  b->alloc_pool = NULL;
  b->stray = NULL;
  b->runs = NULL;
  b->capalloc = b->nstray = b->capstray = b->nruns = b->capruns = 0;
  if (b->stacks) ab_stacks_free(b->stacks); /* not handed to the events: finish failed, or never ran */
  free(b->stacks);
  b->stacks = NULL;
}

void ab_trace_builder_discard(ab_trace_builder_t *b) {
  release(b);
  /* The events written so far go; what the caller set on the stream stays. */
  ab_events_t *es = b->es, kept = *es;
  ab_events_free(es);
  es->stop = kept.stop;
  es->max_bytes = kept.max_bytes;
  es->suggested_budget = kept.suggested_budget;
  memcpy(es->source, kept.source, sizeof es->source);
  memcpy(es->settings, kept.settings, sizeof es->settings);
}

void ab_trace_builder_reserve(ab_trace_builder_t *b, uint64_t records) {
  /* Room the host has not is not asked for: it would only be given back. */
  uint64_t room = ab_host_memory_available() / 2 / sizeof(ab_event_t);
  b->expect = records < room ? records : room;
  ab_events_reserve(b->es, b->expect < SIZE_MAX ? (size_t)b->expect : SIZE_MAX);
}

/* Grows *p, of *cap items of `size` bytes each, to hold at least need; false when the host has
 * no room (the builder fails). */
static bool grow(ab_trace_builder_t *b, void **p, size_t *cap, size_t need, size_t size, size_t first) {
  if (need <= *cap) return true;
  size_t want = *cap ? *cap : first;
  while (want < need) want *= 2;
  void *grown = realloc(*p, want * size);
  if (grown == NULL) {
    b->failed = true;
    return false;
  }
  *p = grown;
  *cap = want;
  return true;
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

/* The rules of PyTorch's allocator read into its records hold for its snapshots; a CSV trace
 * may come from any allocator (allocbench's exports of raw free a segment at every free). */
static bool pytorch(const ab_trace_builder_t *b) { return b->pytorch; }

/* Whether an `oom` record stands for the request that failed
 * (Note [A trace that ends in an OOM]): in PyTorch's snapshots and in what allocbench writes in their vocabulary, a
 * snapshot or a CSV trace; an RMM log's failures say nothing of how its program went on. */
static bool oom_is_a_request(const ab_trace_builder_t *b) {
  return pytorch(b) || b->info.format == NULL || strcmp(b->info.format, "rmm-log") != 0;
}

/* ---- records to events (Note [Records to events in one pass]) ---------------------------------
 * Each free's block is found as the records come: a map of every address an alloc or a free
 * touched holds the block live there, and the blocks that existed before the trace come out of
 * it (Note [Memory that existed before the trace]). */

/* A block that existed before the trace: its record (an ALLOC; pending when its free was
 * requested before the trace), its number in the order it was found, and where the free
 * record it was found by came (NO_SEGS: a held block), whose pool is inferred at finish. */
typedef struct ab_trace_pre_s {
  ab_trace_rec_in_t r;
  size_t found, segs;
} pre_t;
#define NO_SEGS SIZE_MAX

static int pre_by_addr(const void *x, const void *y) {
  const pre_t *a = x, *b = y;
  return (a->r.addr > b->r.addr) - (a->r.addr < b->r.addr);
}

/* The map's value for an address: 0 when no block is live there (freed, or a lone free of
 * nothing), else BLOCK_LIVE | the block (its allocation's number, or BLOCK_PRE | the number
 * of a block found existing before), BLOCK_REQUESTED once its free was requested. */
#define BLOCK_REQUESTED (1ULL << 63)
#define BLOCK_PRE (1ULL << 62)
#define BLOCK_LIVE (1ULL << 61)
#define BLOCK_INDEX (BLOCK_LIVE - 1)

static void push_pre(ab_trace_builder_t *b, const ab_trace_rec_in_t *r, size_t segs, bool pending) {
  if (!grow(b, (void **)&b->pre, &b->cappre, b->npre + 1, sizeof *b->pre, 64)) return;
  pre_t *p = &b->pre[b->npre];
  *p = (pre_t){*r, b->npre, segs};
  p->r.action = AB_TR_ALLOC;
  p->r.pending = pending;
  b->npre++;
}

/* The room the per-allocation arrays start with: half the records expected, or 4096. */
static size_t alloc_first(const ab_trace_builder_t *b) { return b->expect / 2 > 4096 ? (size_t)(b->expect / 2) : 4096; }

/* Room in the per-allocation arrays (those made) for allocation id. */
static bool alloc_room(ab_trace_builder_t *b, uint32_t id) {
  if (id < b->capalloc) return true;
  size_t cap = b->capalloc ? b->capalloc : alloc_first(b);
  while (cap <= id) cap *= 2;
  if (b->alloc_addr) {
    uint64_t *grown = realloc(b->alloc_addr, cap * sizeof *grown);
    if (grown == NULL) return b->failed = true, false;
    b->alloc_addr = grown;
    ab_host_memory_huge(grown);
  }
  if (b->alloc_pool) {
    int8_t *grown = realloc(b->alloc_pool, cap * sizeof *grown);
    if (grown == NULL) return b->failed = true, false;
    b->alloc_pool = grown;
  }
  b->capalloc = cap;
  return true;
}

/* alloc_pool made, every allocation before the nids-th in pool_first. */
static bool make_pools(ab_trace_builder_t *b, uint32_t nids) {
  if (b->alloc_pool) return true;
  if (nids && !alloc_room(b, nids - 1)) return false;
  b->alloc_pool = malloc(b->capalloc ? b->capalloc : 1);
  if (b->alloc_pool == NULL) return b->failed = true, false;
  memset(b->alloc_pool, (unsigned char)b->pool_first, nids);
  return true;
}

/* What the rules may read at finish of allocation id (Note [Records to events in one pass], 2):
 * made by an alloc record at addr in pool code `pool`, or by an oom's request (request: none
 * of it is read). The arrays are made when first needed: the pools when two differ, the
 * addresses at the first pool to infer. */
static void note_alloc(ab_trace_builder_t *b, uint32_t id, uint64_t addr, int8_t pool, bool request) {
  if (!request && b->nvalid == 0 && b->alloc_pool == NULL) b->pool_first = pool;
  bool pools = !request && b->alloc_pool == NULL && pool != b->pool_first;
  bool addrs = !request && b->alloc_addr == NULL && pool == AB_TRACE_POOL_INFER;
  if (!(b->alloc_addr || b->alloc_pool || pools || addrs) || !alloc_room(b, id)) return;
  if (pools && !make_pools(b, id)) return;
  if (addrs) {
    b->alloc_addr = calloc(b->capalloc, sizeof *b->alloc_addr); /* the allocations before: none read */
    if (b->alloc_addr == NULL) {
      b->failed = true;
      return;
    }
    ab_host_memory_huge(b->alloc_addr);
  }
  if (b->alloc_addr) b->alloc_addr[id] = request ? 0 : addr;
  if (b->alloc_pool) b->alloc_pool[id] = request ? b->pool_first : pool;
}

/* The slot of addr in the map of blocks, added when absent; SIZE_MAX when the host has no room. */
static size_t block_slot(ab_trace_builder_t *b, uint64_t addr, size_t i, bool *added) {
  *added = false;
  if (i == b->hint_rec && i && b->blocks.slots[b->hint_slot].key == addr) return b->hint_slot;
  size_t slot;
  if (ab_map_slot_or_add(&b->blocks, addr, &slot, added) != AB_OK) {
    b->failed = true;
    return SIZE_MAX;
  }
  return slot;
}

/* An alloc record, the i-th. An alloc at an address still live is kept to be reported at
 * finish, where the trace's other errors come first. */
static void add_alloc(ab_trace_builder_t *b, const ab_trace_rec_in_t *r, size_t i) {
  ab_events_t *es = b->es;
  b->last_oom = 0; /* the program went on from every oom before */
  for (size_t k = b->asking; k < b->nruns; k++) /* the request a map was made for */
    if (b->runs[k].next == AB_TR_SEGMENT_MAP) {
      b->runs[k].asked = r->size;
      b->runs[k].asked_known = true;
    }
  b->asking = b->nruns;
  if (r->addr == 0 || r->size == 0) { /* nothing a replay could allocate; its pool still counts */
    es->ignored++;
    if (!grow(b, (void **)&b->stray, &b->capstray, b->nstray + 1, sizeof *b->stray, 16)) return;
    b->stray[b->nstray++] = (item_t){r->addr, es->nsegs, es->n, (uint16_t)r->stream, r->pool};
    return;
  }
  bool added;
  size_t slot = block_slot(b, r->addr, i, &added);
  if (slot == SIZE_MAX) return;
  uint64_t *v = &b->blocks.slots[slot].val;
  if (*v & BLOCK_LIVE) {
    if (!b->twice) {
      b->twice = true;
      b->twice_pos = r->pos;
      b->twice_addr = r->addr;
    }
    return;
  }
  uint32_t id = es->nids;
  *v = BLOCK_LIVE | id;
  ab_events_alloc(es, r->size, r->stream, AB_TAG_OTHER);
  note_alloc(b, id, r->addr, r->pool, false);
  b->nvalid++;
  b->last_alloc = id + 1;
}

/* A FREE of block `block` (its number, or that of a block found existing before the trace). */
static void free_event(ab_events_t *es, uint32_t block, bool of_pre, ab_free_phase_t phase) {
  ab_events_free_phase(es, block, phase);
  if (of_pre && !es->failed) es->ev[es->n - 1].bytes = FREE_OF_PRE;
}

/* A free_requested or free_completed record, the i-th: the block it frees found (rule 1 of
 * Note [Memory that existed before the trace]: the first touch of an address by a free is a
 * block that existed before), and its FREE written. */
static void add_free(ab_trace_builder_t *b, const ab_trace_rec_in_t *r, size_t i) {
  ab_events_t *es = b->es;
  bool requesting = r->action == AB_TR_FREE_REQUESTED;
  if (r->addr == 0) { /* nothing a replay could free */
    es->ignored++;
    return;
  }
  bool added;
  size_t slot = block_slot(b, r->addr, i, &added);
  if (slot == SIZE_MAX) return;
  uint64_t *v = &b->blocks.slots[slot].val;
  if (added && r->size) { /* the first touch is a free: the block existed before */
    *v = BLOCK_LIVE | BLOCK_PRE | b->npre | (requesting ? 0 : BLOCK_REQUESTED);
    push_pre(b, r, es->nsegs, !requesting);
  }
  if (!(*v & BLOCK_LIVE) || (requesting && (*v & BLOCK_REQUESTED))) {
    es->ignored++;
    return;
  }
  uint64_t block = *v;
  uint32_t id = (uint32_t)(block & BLOCK_INDEX);
  bool of_pre = block & BLOCK_PRE;
  if (requesting) {
    *v |= BLOCK_REQUESTED;
    b->hint_rec = i + 1; /* most frees complete at once, in the next record: no second search */
    b->hint_slot = slot;
    free_event(es, id, of_pre, AB_FREE_REQUEST);
    return;
  }
  *v = 0;
  if (!(block & BLOCK_REQUESTED)) {
    free_event(es, id, of_pre, AB_FREE_NOW);
    return;
  }
  ab_event_t *last = es->n ? &es->ev[es->n - 1] : NULL;
  if (last && last->kind == AB_EV_FREE && last->id == id && last->aux == AB_FREE_REQUEST &&
      (last->bytes & FREE_OF_PRE) == (of_pre ? FREE_OF_PRE : 0)) {
    if (b->nruns == 0 || b->runs[b->nruns - 1].events != es->n) {
      last->aux = AB_FREE_NOW; /* nothing happened in between: one plain free */
      last->bytes |= FREE_ROUTED;
      return;
    }
    b->merge_late = true; /* a run of releases between, which may be an empty_cache: told at finish */
  }
  free_event(es, id, of_pre, AB_FREE_COMPLETE);
}

/* An oom record: every one counts among the OOMs the program met, and its request is written
 * as one the program caught (Note [A trace that ends in an OOM]) until an alloc follows. */
static void add_oom(ab_trace_builder_t *b, const ab_trace_rec_in_t *r) {
  ab_events_t *es = b->es;
  es->trace_ooms++;
  b->last_oom = 0;
  if (r->size == 0 || !oom_is_a_request(b)) return;
  b->info.caught_ooms++;
  size_t at = es->n;
  uint32_t id = ab_events_alloc(es, r->size, r->stream, AB_TAG_CAUGHT);
  note_alloc(b, id, 0, 0, true);
  ab_events_free_id(es, id); /* let go at once */
  b->last_oom = at + 1;
}

static bool is_release(uint8_t a) { return a == AB_TR_SEGMENT_FREE || a == AB_TR_SEGMENT_UNMAP; }

/* The run of releases open ends at record r (NULL: the trace ended). */
static void end_run(ab_trace_builder_t *b, const ab_trace_rec_in_t *r) {
  const ab_events_t *es = b->es;
  run_t *run = &b->runs[b->nruns - 1];
  b->run_open = false;
  run->nseg = es->nsegs - run->seg;
  run->next = r ? (uint8_t)r->action : NO_NEXT;
  if (r == NULL) return;
  run->next_size = r->size;
  run->at = (item_t){r->addr, es->nsegs + 1, es->n, (uint16_t)r->stream, r->pool}; /* a segment's: itself before */
}

/* A segment_alloc or segment_free against the segments the trace made: a segment allocated
 * where one is live, or one that wraps past the top of the address space, or a free of a live
 * segment by another size, cannot come from PyTorch (its records of a segment's allocation and
 * release both give the segment's whole size: CUDACachingAllocator.cpp, alloc_block and
 * release_block). A free of a segment the trace never allocated is one made before its first
 * record (a history cut by max_entries). The first such record is reported at finish. */
static void check_segment(ab_trace_builder_t *b, const ab_trace_rec_in_t *r) {
  if (b->bad_segment.set || r->addr == 0) return;
  size_t slot = ab_map_slot(&b->segments, r->addr);
  bool live = slot < b->segments.cap;
  uint64_t had = live ? b->segments.slots[slot].val : 0;
  bool bad = r->action == AB_TR_SEGMENT_ALLOC ? live || r->addr + r->size < r->addr : live && had != r->size;
  if (bad) {
    b->bad_segment.set = true;
    b->bad_segment.pos = r->pos;
    b->bad_segment.addr = r->addr;
    b->bad_segment.size = r->size;
    b->bad_segment.had = had;
    b->bad_segment.action = r->action;
  } else if (r->action == AB_TR_SEGMENT_ALLOC && ab_map_put(&b->segments, r->addr, r->size) != AB_OK) {
    b->failed = true;
  } else if (live) {
    ab_map_remove_slot(&b->segments, slot);
  }
}

/* The events of record r, the i-th. */
static void process(ab_trace_builder_t *b, const ab_trace_rec_in_t *r, size_t i) {
  bool release = is_release(r->action);
  if (b->run_open && !release) end_run(b, r);
  ab_events_t *es = b->es;
  switch ((ab_trace_action_t)r->action) {
    case AB_TR_ALLOC: add_alloc(b, r, i); break;
    case AB_TR_FREE_REQUESTED:
    case AB_TR_FREE_COMPLETED: add_free(b, r, i); break;
    case AB_TR_SEGMENT_FREE:
    case AB_TR_SEGMENT_UNMAP:
      if (r->action == AB_TR_SEGMENT_FREE) check_segment(b, r);
      if (!b->run_open && grow(b, (void **)&b->runs, &b->capruns, b->nruns + 1, sizeof *b->runs, 16)) {
        b->runs[b->nruns++] = (run_t){.events = es->n, .seg = es->nsegs};
        b->run_open = true;
      }
      /* fall through */
    case AB_TR_SEGMENT_ALLOC:
    case AB_TR_SEGMENT_MAP:
      if (r->action == AB_TR_SEGMENT_ALLOC) check_segment(b, r);
      ab_events_segment(es, (ab_trace_action_t)r->action, r->stream, r->addr, r->size); break;
    case AB_TR_OOM: add_oom(b, r); break;
    case AB_TR_EMPTY_CACHE: /* the program's, as the trace says */
      ab_events_empty_cache(es);
      b->info.empty_caches++;
      break;
    case AB_TR_SNAPSHOT:
    case AB_TR_OTHER: break;
  }
}

ab_status ab_trace_builder_add_pooled(ab_trace_builder_t *b, ab_trace_action_t action, uint64_t addr, uint64_t size,
                                      uint64_t stream, int pool, size_t pos, ab_diag_t *diag) {
  uint16_t index = 0;
  if (action != AB_TR_OTHER && action != AB_TR_SNAPSHOT && action != AB_TR_EMPTY_CACHE) AB_TRY(stream_index(b, stream, &index, pos, diag));
  ab_trace_rec_in_t r = {addr, size, rec_pos(pos) & REC_POS_MAX, action, 0, index & 0x7ffu, (int8_t)pool};
  b->infer |= pool == AB_TRACE_POOL_INFER;
  b->last_alloc = 0;
  process(b, &r, b->nrecs++);
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

size_t ab_trace_builder_last_alloc(const ab_trace_builder_t *b) { return b->last_alloc; }

void ab_trace_builder_stack(ab_trace_builder_t *b, uint32_t stack) { ab_trace_builder_stack_at(b, b->last_alloc, stack); }

/* Under the allocation's number as written: numbers move up at finish with the stacks
 * (ab_stacks_shift_ids) when blocks existed before the trace. */
void ab_trace_builder_stack_at(ab_trace_builder_t *b, size_t alloc, uint32_t stack) {
  if (stack && alloc && b->stacks) ab_stacks_set(b->stacks, (uint32_t)(alloc - 1), stack);
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
  if (grow(b, (void **)&b->held, &b->capheld, b->nheld + 1, sizeof *b->held, 64)) b->held[b->nheld++] = r;
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


/* Whether e is an alloc record's ALLOC (not an oom's request, which has no pool). */
static bool alloc_event(const ab_event_t *e) { return e->kind == AB_EV_ALLOC && e->aux != AB_TAG_CAUGHT; }

/* The pool code of allocation id: its own, or pool_first's where all agree; one to infer where
 * no private pool was named is the default (infer_pools). */
static int alloc_code(const ab_trace_builder_t *b, uint32_t id) {
  int c = b->alloc_pool ? b->alloc_pool[id] : b->pool_first;
  return c == AB_TRACE_POOL_INFER ? 0 : c;
}

/* The ranges freed by the releases among es->segs[segs..], added to g from *from down. */
static bool gone_from(ab_trace_builder_t *b, ranges_t *g, size_t *from, size_t segs) {
  while (*from > segs) {
    const ab_seg_event_t *s = &b->es->segs[--*from];
    if (is_release(s->action) && !ranges_add(g, s->addr, s->addr + s->bytes)) return b->failed = true, false;
  }
  return true;
}

/* The pool of a record at addr that the segment releases in gone come after. */
static int8_t pool_at(const ab_trace_builder_t *b, const ranges_t *gone, uint64_t addr) {
  return (int8_t)(ranges_hold(gone, addr) ? POOL_UNKNOWN : dump_pool(b, addr));
}

/* A record other than an allocation whose pool is inferred: where it came, and its pool. */
typedef struct query_s {
  size_t segs;
  uint64_t addr;
  int8_t *pool;
} query_t;

static int later_first(const void *x, const void *y) {
  const query_t *a = x, *b = y;
  return (a->segs < b->segs) - (a->segs > b->segs);
}

/* Rule 1 of Note [Pools of a trace], from the end backwards: each record whose pool is
 * inferred takes that of the dump's segment its address falls in, unless a segment free or
 * unmap after it covers the address. */
static void pools_from_dump(ab_trace_builder_t *b) {
  ab_events_t *es = b->es;
  ranges_t gone = {NULL, 0, 0};
  size_t from = es->nsegs;
  /* The allocations, by their events: the segment records before event j are those written
   * before it. */
  for (size_t j = es->n; j-- > 0 && !b->failed;) {
    const ab_event_t *e = &es->ev[j];
    if (!alloc_event(e) || b->alloc_pool[e->id] != AB_TRACE_POOL_INFER) continue;
    size_t segs = from;
    while (segs > 0 && es->segs[segs - 1].at_event > j) segs--;
    if (gone_from(b, &gone, &from, segs)) b->alloc_pool[e->id] = pool_at(b, &gone, b->alloc_addr[e->id]);
  }
  /* The records the rules read besides, latest first. */
  query_t *q = malloc((b->nstray + b->npre + b->nruns + 1) * sizeof *q);
  size_t n = 0;
  if (q == NULL) b->failed = true;
  for (size_t i = 0; i < b->nstray && q; i++) {
    item_t *s = &b->stray[i];
    if (s->pool == AB_TRACE_POOL_INFER) q[n++] = (query_t){s->segs, s->addr, &s->pool};
  }
  for (size_t i = 0; i < b->npre && q; i++) { /* before held_and_sorted: those found by a free */
    pre_t *p = &b->pre[i];
    if (p->r.pool == AB_TRACE_POOL_INFER) q[n++] = (query_t){p->segs, p->r.addr, &p->r.pool};
  }
  for (size_t i = 0; i < b->nruns && q; i++) {
    run_t *run = &b->runs[i];
    if ((run->next == AB_TR_SEGMENT_ALLOC || run->next == AB_TR_SEGMENT_MAP) && run->at.pool == AB_TRACE_POOL_INFER)
      q[n++] = (query_t){run->at.segs, run->at.addr, &run->at.pool};
  }
  if (n) qsort(q, n, sizeof *q, later_first);
  gone.n = 0;
  from = es->nsegs;
  for (size_t i = 0; i < n && !b->failed; i++)
    if (gone_from(b, &gone, &from, q[i].segs)) *q[i].pool = pool_at(b, &gone, q[i].addr);
  free(q);
  free(gone.r);
}

/* Rule 1's "contexts are runs" for one allocation, seen from the end backwards: one whose
 * pool could not be told, between two of pool P on its stream (`before`, and *last after it)
 * with no other allocation between, was made in P's context (resolved at the end, so that
 * what it gets is not read as told). */
static void context(int8_t *pool, int16_t before, int16_t *last) {
  int16_t after = *last;
  if (*pool != POOL_UNKNOWN) *last = *pool;
  else if (after > 0 && before == after) *pool = (int8_t)(-3 - after);
}

/* Rule 1 of Note [Pools of a trace] for every record whose pool is read: the allocations, the
 * allocs of nothing, the frees that found blocks existing before, and the records after runs
 * of releases. */
static void infer_pools(ab_trace_builder_t *b) {
  if (!b->infer && b->nheld == 0) return;
  ab_events_t *es = b->es;
  if (b->ndump) qsort(b->dump, b->ndump, sizeof *b->dump, seg_by_addr); /* qsort takes no NULL, even of nothing */
  for (size_t i = 0; i < b->nheld; i++)
    if (b->held[i].pool == AB_TRACE_POOL_INFER) b->held[i].pool = (int8_t)dump_pool(b, b->held[i].addr);
  if (b->info.npools == 1) {
    /* No private pool named anywhere: what the rules below give every record is the default
     * pool, found by the segment or, unknown, by the stream no private pool allocates on
     * (the allocations' own, alloc_code says). */
    for (size_t i = 0; i < b->nstray; i++)
      if (b->stray[i].pool == AB_TRACE_POOL_INFER) b->stray[i].pool = 0;
    for (size_t i = 0; i < b->npre; i++)
      if (b->pre[i].r.pool == AB_TRACE_POOL_INFER) b->pre[i].r.pool = 0;
    for (size_t i = 0; i < b->nruns; i++)
      if (b->runs[i].at.pool == AB_TRACE_POOL_INFER) b->runs[i].at.pool = 0;
    return;
  }
  if (!make_pools(b, es->nids)) return;
  pools_from_dump(b);
  if (b->failed) return;
  /* A private pool's segments serve the streams it allocates on: memory of another stream
   * was the default pool's, whatever became of it. */
  uint8_t priv[AB_TRACE_MAX_STREAMS] = {0};
  for (size_t j = 0; j < es->n; j++)
    if (alloc_event(&es->ev[j]) && b->alloc_pool[es->ev[j].id] > 0) priv[es->ev[j].stream] = 1;
  for (size_t i = 0; i < b->nstray; i++)
    if (b->stray[i].pool > 0) priv[b->stray[i].stream] = 1;
  for (size_t i = 0; i < b->nheld; i++)
    if (b->held[i].pool > 0) priv[b->held[i].stream] = 1;
  for (size_t j = 0; j < es->n; j++) {
    int8_t *p = &b->alloc_pool[es->ev[j].id];
    if (alloc_event(&es->ev[j]) && *p == POOL_UNKNOWN && !priv[es->ev[j].stream]) *p = 0;
  }
  for (size_t i = 0; i < b->nstray; i++)
    if (b->stray[i].pool == POOL_UNKNOWN && !priv[b->stray[i].stream]) b->stray[i].pool = 0;
  for (size_t i = 0; i < b->npre; i++)
    if (b->pre[i].r.pool == POOL_UNKNOWN && !priv[b->pre[i].r.stream]) b->pre[i].r.pool = 0;
  for (size_t i = 0; i < b->nruns; i++)
    if (b->runs[i].at.pool == POOL_UNKNOWN && !priv[b->runs[i].at.stream]) b->runs[i].at.pool = 0;
  /* Contexts are runs: the allocations (and allocs of nothing) in the order of the records,
   * each stream's last pool told before each, then after each. */
  int16_t *before = malloc((es->nids + 1) * sizeof *before), *stray_before = malloc((b->nstray + 1) * sizeof *before);
  int16_t last[AB_TRACE_MAX_STREAMS];
  if (before == NULL || stray_before == NULL) {
    free(before);
    free(stray_before);
    b->failed = true;
    return;
  }
  for (unsigned k = 0; k < AB_TRACE_MAX_STREAMS; k++) last[k] = POOL_UNKNOWN;
  for (size_t j = 0, k = 0;; j++) {
    for (; k < b->nstray && b->stray[k].events <= j; k++) { /* the allocs of nothing before event j */
      const item_t *s = &b->stray[k];
      stray_before[k] = last[s->stream];
      if (s->pool != POOL_UNKNOWN) last[s->stream] = s->pool;
    }
    if (j == es->n) break;
    const ab_event_t *e = &es->ev[j];
    if (!alloc_event(e)) continue;
    before[e->id] = last[e->stream];
    if (b->alloc_pool[e->id] != POOL_UNKNOWN) last[e->stream] = b->alloc_pool[e->id];
  }
  for (unsigned k = 0; k < AB_TRACE_MAX_STREAMS; k++) last[k] = POOL_UNKNOWN;
  for (size_t j = es->n, k = b->nstray;; j--) {
    for (; k > 0 && b->stray[k - 1].events >= j; k--) /* the allocs of nothing after event j - 1 */
      context(&b->stray[k - 1].pool, stray_before[k - 1], &last[b->stray[k - 1].stream]);
    if (j == 0) break;
    const ab_event_t *e = &es->ev[j - 1];
    if (alloc_event(e)) context(&b->alloc_pool[e->id], before[e->id], &last[e->stream]);
  }
  for (size_t j = 0; j < es->n; j++) {
    int8_t *p = &b->alloc_pool[es->ev[j].id];
    if (alloc_event(&es->ev[j]) && *p <= -3) *p = (int8_t)(-3 - *p);
  }
  for (size_t i = 0; i < b->nstray; i++)
    if (b->stray[i].pool <= -3) b->stray[i].pool = (int8_t)(-3 - b->stray[i].pool);
  free(before);
  free(stray_before);
}

/* The pool an allocation (of pool code `pool`, inferred) is replayed in, counted in the info. */
static int pool_of(ab_trace_builder_t *b, int pool) {
  ab_trace_info_t *in = &b->info;
  if (pool == POOL_UNKNOWN) in->pool_unknown++;
  else if (b->infer) in->pool_inferred++;
  if (pool < 0 || (unsigned)pool >= in->npools) pool = 0;
  in->pools[pool].allocs++;
  return pool;
}

/* At finish, the held blocks at addresses the records never touched join those found by frees;
 * all go in address order (rule 2 of Note [Memory that existed before the trace]). */
static void held_and_sorted(ab_trace_builder_t *b) {
  for (size_t i = 0; i < b->nheld && !b->failed; i++)
    if (!ab_map_get(&b->blocks, b->held[i].addr, NULL)) push_pre(b, &b->held[i], NO_SEGS, b->held[i].pending);
  if (b->npre) qsort(b->pre, b->npre, sizeof *b->pre, pre_by_addr);
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
  const ab_events_t *es = b->es;
  i128_t res = 0, lo = 0, hi = 0;
  for (size_t i = 0; i < es->nsegs; i++) {
    const ab_seg_event_t *g = &es->segs[i];
    if (g->action == AB_TR_SEGMENT_ALLOC || g->action == AB_TR_SEGMENT_MAP) res += g->bytes;
    else res -= g->bytes;
    if (res < lo) lo = res;
    if (res > hi) hi = res;
  }
  i128_t start = -lo;
  if (b->info.end_state && (i128_t)b->end_reserved - res > start) start = (i128_t)b->end_reserved - res;
  *peak = start + hi;
  return start;
}

/* The segment the malloc that ends the run asked for (PyTorch's alloc_size). */
static uint64_t asked_for(const ab_caching_conf_t *conf, const run_t *run) {
  if (run->next == AB_TR_SEGMENT_ALLOC) return run->next_size;
  if (run->next == AB_TR_OOM) return ab_caching_allocation_size(conf, run->next_size); /* recorded rounded */
  if (run->asked_known) /* a map: the request it was mapped for follows */
    return ab_caching_allocation_size(conf, ab_caching_round_size(conf, run->asked));
  return run->next_size;
}

/* Marks each run of segment releases that was the program's empty_cache (rule 3 of Note
 * [Pools of a trace]; Note [Releases inside a malloc]); one byte a run, NULL when the host
 * has no room. */
static uint8_t *find_empty_caches(ab_trace_builder_t *b) {
  uint8_t *mark = calloc(b->nruns ? b->nruns : 1, 1);
  if (mark == NULL || !pytorch(b) || b->nruns == 0) return mark; /* other allocators free segments as they please */
  const ab_events_t *es = b->es;
  ab_caching_conf_t conf;
  ab_caching_conf_defaults(&conf);
  bool conf_ok = ab_caching_conf_apply(&conf, "settings", es->settings, NULL) == AB_OK;
  if (!conf_ok) ab_caching_conf_defaults(&conf);
  bool malloc_frees = conf.gc_threshold > 0 || conf.max_split_size != UINT64_MAX; /* a private pool's malloc */
  uint64_t cap = b->cap;
  if (cap == 0 && conf.memory_fraction < 1.0 && b->card) cap = (uint64_t)(conf.memory_fraction * (double)b->card);
  bool pressed = conf.memory_fraction < 1.0 || es->trace_ooms > 0; /* a fraction whose card is unknown, or an oom */
  i128_t peak = 0, res = reserved_at_start(b, &peak);
  /* Without a cap: the least a cap (or the card) held, the run having reached its peak. */
  i128_t least = peak - (i128_t)(conf.expandable ? conf.large_segment_size : 0);
  size_t s = 0;
  for (size_t k = 0; k < b->nruns; k++) {
    const run_t *run = &b->runs[k];
    for (; s < run->seg; s++) res += es->segs[s].bytes; /* the segments made before it (releases are all in runs) */
    i128_t before = res;
    bool gc_can = true; /* garbage collection frees whole large segments only */
    for (; s < run->seg + run->nseg; s++) {
      res -= es->segs[s].bytes;
      gc_can &= es->segs[s].action == AB_TR_SEGMENT_FREE && es->segs[s].bytes > (2ULL << 20);
    }
    uint8_t next = run->next;
    bool in_malloc = next == AB_TR_SEGMENT_ALLOC || next == AB_TR_SEGMENT_MAP || next == AB_TR_OOM;
    bool own = in_malloc && (next == AB_TR_OOM || !(run->at.pool > 0 && !malloc_frees));
    if (own && next != AB_TR_OOM) { /* an oom's releases are always the last retry's */
      i128_t asked = (i128_t)asked_for(&conf, run), limit = cap ? (i128_t)cap : least;
      bool refused = before + asked > limit;
      bool collected = gc_can && conf.gc_threshold > 0 && before > (i128_t)(uint64_t)(conf.gc_threshold * (double)limit);
      if (cap == 0 && (refused || collected)) {
        b->info.releases_untold++;
        own = pressed;
      } else {
        own = refused || collected;
      }
    }
    mark[k] = !own;
    b->info.empty_caches += !own;
    b->info.releases_pytorch += own;
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

/* ---- finish ------------------------------------------------------------------------------- */

/* The events written once more (Note [Records to events in one pass]): the blocks that existed
 * before the trace first, in address order, then each event written as the records came, ids
 * moved up past those blocks, with what only finish could tell put before it: the pool calls
 * (Note [Pools of a trace]), the EMPTY_CACHE of each run of releases marked, a free_completed
 * paired with its request where nothing came between, and the final oom's request left
 * standing (final: its event + 1; 0 for none). */
static ab_status rebuild(ab_trace_builder_t *b, const uint8_t *mark, size_t final) {
  ab_events_t *es = b->es;
  ab_event_t *old = es->ev;
  size_t n = es->n, marks = 0;
  uint32_t nids = es->nids, npre = (uint32_t)b->npre;
  uint32_t *pre_id = malloc((npre ? npre : 1) * sizeof *pre_id);
  if (pre_id == NULL || b->npre > UINT32_MAX) {
    free(pre_id);
    return AB_ERR_INTERNAL;
  }
  for (size_t k = 0; k < b->nruns; k++) marks += mark[k];
  es->ev = NULL;
  es->n = es->cap = 0;
  es->nids = 0;
  ab_events_reserve(es, n + 2 * (size_t)npre + 3 * marks + 1); /* pool calls, if any, grow it */
  routing_t rt;
  memset(&rt, 0, sizeof rt);
  for (size_t i = 0; i < npre; i++) {
    const pre_t *p = &b->pre[i];
    route_to(es, &rt, pool_of(b, p->r.pool));
    uint32_t id = ab_events_alloc(es, p->r.size, p->r.stream, AB_TAG_OTHER);
    pre_id[p->found] = id;
    if (p->r.pending) {
      route_end(es, &rt);
      ab_events_free_phase(es, id, AB_FREE_REQUEST);
    }
  }
  size_t s = 0, k = 0;
  for (size_t j = 0;; j++) {
    /* The segment records before event j, each run's EMPTY_CACHE before its first release. */
    for (; s < es->nsegs && es->segs[s].at_event <= j; s++) {
      for (; k < b->nruns && b->runs[k].seg <= s; k++)
        if (mark[k]) {
          route_end(es, &rt);
          ab_events_empty_cache(es);
        }
      es->segs[s].at_event = es->n;
    }
    if (j == n) break;
    const ab_event_t *e = &old[j];
    switch ((ab_event_kind_t)e->kind) {
      case AB_EV_ALLOC:
        if (e->aux != AB_TAG_CAUGHT) {
          route_to(es, &rt, pool_of(b, alloc_code(b, e->id)));
          ab_events_alloc(es, e->bytes, e->stream, AB_TAG_OTHER);
        } else if (j + 1 == final) { /* the program's last request: no FREE, it did not go on */
          ab_events_alloc(es, e->bytes, e->stream, AB_TAG_OTHER);
          j++;
        } else {
          ab_events_alloc(es, e->bytes, e->stream, AB_TAG_CAUGHT);
        }
        break;
      case AB_EV_FREE: {
        uint32_t id = e->bytes & FREE_OF_PRE ? pre_id[e->id] : e->id + npre;
        ab_event_t *last = es->n ? &es->ev[es->n - 1] : NULL;
        if (e->aux == AB_FREE_COMPLETE && last && last->kind == AB_EV_FREE && last->id == id &&
            last->aux == AB_FREE_REQUEST) {
          last->aux = AB_FREE_NOW; /* nothing happened in between: one plain free */
          break;
        }
        /* A capture would defer a free (Note [Captures], caching.c); the trace says when it ended. */
        if (e->aux != AB_FREE_NOW || (e->bytes & FREE_ROUTED)) route_end(es, &rt);
        ab_events_free_phase(es, id, (ab_free_phase_t)e->aux);
        break;
      }
      case AB_EV_EMPTY_CACHE:
        route_end(es, &rt);
        ab_events_empty_cache(es);
        break;
      case AB_EV_KERNEL:
      case AB_EV_STEP:
      case AB_EV_SYNC:
      case AB_EV_POOL: break; /* none written */
    }
  }
  route_end(es, &rt);
  free(old);
  free(pre_id);
  if (b->stacks) ab_stacks_shift_ids(b->stacks, npre);
  return es->nids == nids + npre ? AB_OK : AB_ERR_INTERNAL;
}

/* The pools, the blocks that existed before, the program's empty_caches, the final oom, and
 * the events written again where they leave any of these open. */
static ab_status build(ab_trace_builder_t *b, ab_diag_t *diag) {
  ab_events_t *es = b->es;
  if (b->twice) {
    char at[300];
    return ab_diag_set(diag, AB_ERR_INVALID, "%s: alloc at 0x%llx, which is already allocated",
                       where(b, b->twice_pos, at, sizeof at), (unsigned long long)b->twice_addr);
  }
  if (b->bad_segment.set) {
    char at[300];
    const struct ab_trace_bad_segment_s *g = &b->bad_segment;
    where(b, g->pos, at, sizeof at);
    if (g->action == AB_TR_SEGMENT_FREE)
      return ab_diag_set(diag, AB_ERR_INVALID, "%s: segment_free of %llu bytes at 0x%llx, a segment of %llu bytes "
                         "(expected the size it was allocated with)", at, (unsigned long long)g->size,
                         (unsigned long long)g->addr, (unsigned long long)g->had);
    if (g->addr + g->size < g->addr)
      return ab_diag_set(diag, AB_ERR_INVALID, "%s: segment_alloc of %llu bytes at 0x%llx runs past the top of the "
                         "address space", at, (unsigned long long)g->size, (unsigned long long)g->addr);
    return ab_diag_set(diag, AB_ERR_INVALID, "%s: segment_alloc at 0x%llx, where a segment of %llu bytes is "
                       "allocated and not freed", at, (unsigned long long)g->addr, (unsigned long long)g->had);
  }
  if (b->run_open) end_run(b, NULL);
  if (es->failed) return AB_OK; /* ab_events_finish says why */
  infer_pools(b);
  held_and_sorted(b);
  b->info.preexisting = b->npre;
  uint8_t *mark = b->failed ? NULL : find_empty_caches(b);
  ab_status st = mark == NULL ? AB_ERR_INTERNAL : AB_OK;
  /* The last oom, when no alloc follows it (Note [A trace that ends in an OOM]). */
  bool final = b->last_oom && oom_is_a_request(b);
  if (final) {
    b->info.final_oom = true;
    b->info.caught_ooms--;
  }
  bool marked = false;
  for (size_t k = 0; k < b->nruns && mark; k++) marked |= mark[k];
  if (st == AB_OK && (b->npre || marked || b->info.npools > 1 || final || b->merge_late)) {
    st = rebuild(b, mark, final ? b->last_oom : 0);
  } else if (st == AB_OK) { /* every allocation in the default pool, as written */
    b->info.pools[0].allocs += b->nvalid;
    if (b->infer) b->info.pool_inferred += b->nvalid;
  }
  free(mark);
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
  /* The stacks go to the events, complete (ab_stacks_shift_ids can fail in build), or nowhere. */
  if (st == AB_OK && b->stacks && b->stacks->failed)
    st = ab_diag_set(diag, AB_ERR_INTERNAL, "%s: out of host memory while reading the trace", b->path);
  if (st == AB_OK && b->stacks) {
    ab_stacks_finish(b->stacks);
    es->stacks = b->stacks;
    b->stacks = NULL;
  }
  release(b);
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
