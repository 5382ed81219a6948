#include "workloads/events/events.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/hostmem.h"

void ab_events_init(ab_events_t *es) { memset(es, 0, sizeof *es); }

void ab_events_free(ab_events_t *es) {
  free(es->ev);
  free(es->kernels);
  free(es->segs);
  if (es->stacks) ab_stacks_free(es->stacks);
  free(es->stacks);
  ab_events_init(es);
}

uint64_t ab_events_bytes(const ab_events_t *es) {
  return (uint64_t)es->cap * sizeof *es->ev + (uint64_t)es->capkernels * sizeof *es->kernels +
         (uint64_t)es->capsegs * sizeof *es->segs + (es->stacks ? ab_stacks_bytes(es->stacks) : 0);
}

static void halt(ab_events_t *es, ab_events_halt_t why) {
  es->failed = true;
  es->halted = (uint8_t)why;
}

/* Whether an array may grow by `more` bytes within max_bytes; halts the stream if not. */
static bool may_grow(ab_events_t *es, size_t more) {
  if (es->max_bytes == 0 || ab_events_bytes(es) + more <= es->max_bytes) return true;
  halt(es, AB_EVENTS_OVER_LIMIT);
  return false;
}

static ab_event_t *push(ab_events_t *es) {
  if (es->failed) return NULL;
  if (es->stop && (es->n & 4095) == 0 && *es->stop) {
    halt(es, AB_EVENTS_STOPPED);
    return NULL;
  }
  if (es->n == es->cap) {
    size_t cap = es->cap ? es->cap * 2 : 1024;
    if (!may_grow(es, (cap - es->cap) * sizeof *es->ev)) return NULL;
    ab_event_t *grown = realloc(es->ev, cap * sizeof *grown);
    if (grown == NULL) {
      es->failed = true;
      return NULL;
    }
    es->ev = grown;
    es->cap = cap;
    ab_host_memory_huge(grown);
  }
  ab_event_t *e = &es->ev[es->n++];
  memset(e, 0, sizeof *e);
  return e;
}

void ab_events_reserve(ab_events_t *es, size_t more) {
  if (es->failed || more <= es->cap - es->n || more > SIZE_MAX / sizeof *es->ev - es->n) return;
  size_t cap = es->n + more;
  if (es->max_bytes && ab_events_bytes(es) + (cap - es->cap) * sizeof *es->ev > es->max_bytes) return;
  ab_event_t *grown = realloc(es->ev, cap * sizeof *grown);
  if (grown == NULL) return; /* the events grow as they come instead */
  es->ev = grown;
  es->cap = cap;
  ab_host_memory_huge(grown);
}

static void note_stream(ab_events_t *es, unsigned stream) {
  if (stream >= es->nstreams) es->nstreams = (uint16_t)(stream + 1);
}

uint32_t ab_events_alloc(ab_events_t *es, uint64_t bytes, unsigned stream, ab_tag_t tag) {
  ab_event_t *e = push(es);
  uint32_t id = es->nids++;
  if (e) {
    e->kind = AB_EV_ALLOC;
    e->aux = (uint8_t)tag;
    e->stream = (uint16_t)stream;
    e->id = id;
    e->bytes = bytes;
    note_stream(es, stream);
  }
  return id;
}

void ab_events_free_phase(ab_events_t *es, uint32_t id, ab_free_phase_t phase) {
  ab_event_t *e = push(es);
  if (e) {
    e->kind = AB_EV_FREE;
    e->aux = (uint8_t)phase;
    e->id = id;
  }
}

void ab_events_free_id(ab_events_t *es, uint32_t id) { ab_events_free_phase(es, id, AB_FREE_NOW); }

void ab_events_kernel(ab_events_t *es, const ab_kernel_t *k, unsigned stream) {
  if (es->failed) return;
  if (es->nkernels == es->capkernels) {
    size_t cap = es->capkernels ? es->capkernels * 2 : 256;
    if (!may_grow(es, (cap - es->capkernels) * sizeof *es->kernels)) return;
    ab_kernel_t *grown = realloc(es->kernels, cap * sizeof *grown);
    if (grown == NULL) {
      es->failed = true;
      return;
    }
    es->kernels = grown;
    es->capkernels = cap;
  }
  ab_event_t *e = push(es);
  if (e) {
    e->kind = AB_EV_KERNEL;
    e->stream = (uint16_t)stream;
    e->id = (uint32_t)es->nkernels;
    note_stream(es, stream);
    /* Field by field, so that padding is zero and the stream's hash is deterministic. */
    ab_kernel_t *d = &es->kernels[es->nkernels++];
    memset(d, 0, sizeof *d);
    d->op = k->op;
    memcpy(d->dtype, k->dtype, sizeof d->dtype);
    d->nbuf = k->nbuf;
    memcpy(d->buf, k->buf, sizeof d->buf);
    d->m = k->m;
    d->n = k->n;
    d->k = k->k;
  }
}

void ab_events_step(ab_events_t *es) {
  ab_event_t *e = push(es);
  if (e) {
    e->kind = AB_EV_STEP;
    e->id = es->nsteps++;
  }
}

void ab_events_sync(ab_events_t *es, unsigned stream) {
  ab_event_t *e = push(es);
  if (e) {
    e->kind = AB_EV_SYNC;
    e->stream = (uint16_t)stream;
    note_stream(es, stream);
  }
}

void ab_events_empty_cache(ab_events_t *es) {
  ab_event_t *e = push(es);
  if (e) e->kind = AB_EV_EMPTY_CACHE;
}

void ab_events_approximate(ab_events_t *es, const char *fmt, ...) {
  size_t used = strlen(es->approximate);
  if (used && used + 2 < sizeof es->approximate) {
    memcpy(es->approximate + used, "; ", 3);
    used += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(es->approximate + used, sizeof es->approximate - used, fmt, ap);
  va_end(ap);
}

void ab_events_pool(ab_events_t *es, ab_pool_op_t op, uint32_t pool, unsigned stream, unsigned flags) {
  ab_event_t *e = push(es);
  if (e) {
    e->kind = AB_EV_POOL;
    e->aux = (uint8_t)op;
    e->id = pool;
    e->stream = (uint16_t)stream;
    e->bytes = flags;
    if (op == AB_POOL_BEGIN && !(flags & AB_POOL_ALL_STREAMS)) note_stream(es, stream);
    if (pool > es->npools) es->npools = pool;
  }
}

void ab_events_segment(ab_events_t *es, ab_trace_action_t action, unsigned stream, uint64_t addr, uint64_t bytes) {
  if (es->failed) return;
  if (es->nsegs == es->capsegs) {
    size_t cap = es->capsegs ? es->capsegs * 2 : 256;
    if (!may_grow(es, (cap - es->capsegs) * sizeof *es->segs)) return;
    ab_seg_event_t *grown = realloc(es->segs, cap * sizeof *grown);
    if (grown == NULL) {
      es->failed = true;
      return;
    }
    es->segs = grown;
    es->capsegs = cap;
  }
  ab_seg_event_t *g = &es->segs[es->nsegs++];
  memset(g, 0, sizeof *g);
  g->action = (uint8_t)action;
  g->stream = (uint16_t)stream;
  g->addr = addr;
  g->bytes = bytes;
  g->at_event = es->n;
  note_stream(es, stream);
}

ab_status ab_events_address_plan(const ab_events_t *es, ab_addr_hint_t **out, size_t *n) {
  *out = NULL;
  *n = 0;
  size_t count = 0;
  for (size_t i = 0; i < es->nsegs; i++) count += es->segs[i].action == AB_TR_SEGMENT_ALLOC;
  if (count == 0) return AB_OK;
  if ((*out = malloc(count * sizeof **out)) == NULL) return AB_ERR_INTERNAL;
  for (size_t i = 0; i < es->nsegs; i++)
    if (es->segs[i].action == AB_TR_SEGMENT_ALLOC) (*out)[(*n)++] = (ab_addr_hint_t){es->segs[i].bytes, es->segs[i].addr};
  return AB_OK;
}

/* Life of an id while validating. */
enum { ID_UNBORN, ID_LIVE, ID_REQUESTED, ID_DEAD };

ab_status ab_events_finish(ab_events_t *es, ab_diag_t *diag) {
  if (es->finished) return AB_OK;
  if (es->failed && es->halted == AB_EVENTS_STOPPED) return ab_diag_set(diag, AB_ERR_INTERNAL, "stopped while building the event stream");
  if (es->failed && es->halted == AB_EVENTS_OVER_LIMIT)
    return ab_diag_set(diag, AB_ERR_INVALID, "the event stream grew past the %.1f GiB of host memory it may take",
                       (double)es->max_bytes / (double)(1ULL << 30));
  if (es->failed) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory while building the event stream");
  uint8_t *state = calloc(es->nids ? es->nids : 1, 1);
  uint16_t *stream = calloc(es->nids ? es->nids : 1, sizeof *stream);
  uint64_t *bytes = calloc(es->nids ? es->nids : 1, sizeof *bytes);
  ab_status st = AB_OK;
  if (state == NULL || stream == NULL || bytes == NULL) {
    st = ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory while validating the event stream");
    goto done;
  }
  ab_host_memory_huge(bytes);
  for (size_t i = 0; i < es->n && st == AB_OK; i++) {
    ab_event_t *e = &es->ev[i];
    switch ((ab_event_kind_t)e->kind) {
      case AB_EV_ALLOC:
        if (e->id >= es->nids || state[e->id] != ID_UNBORN || e->bytes == 0 || e->aux >= AB_TAG_COUNT ||
            (e->aux == AB_TAG_CAUGHT && (i + 1 == es->n || es->ev[i + 1].kind != AB_EV_FREE || es->ev[i + 1].id != e->id ||
                                         es->ev[i + 1].aux != AB_FREE_NOW)))
          st = ab_diag_set(diag, AB_ERR_INVALID, "event %zu: ALLOC of id %u with %llu bytes is not valid", i, e->id,
                           (unsigned long long)e->bytes);
        else {
          state[e->id] = ID_LIVE;
          stream[e->id] = e->stream;
          bytes[e->id] = e->bytes;
        }
        break;
      case AB_EV_FREE: {
        uint8_t want = e->aux == AB_FREE_COMPLETE ? ID_REQUESTED : ID_LIVE;
        if (e->id >= es->nids || state[e->id] != want || e->aux > AB_FREE_COMPLETE) {
          st = ab_diag_set(diag, AB_ERR_INVALID, "event %zu: FREE of id %u, which is not %s", i, e->id,
                           want == ID_LIVE ? "live" : "awaiting its completion");
          break;
        }
        /* Frees are ordered on the allocation's stream and sized by it: filled in here so
         * that the engine reads them from the event. */
        e->stream = stream[e->id];
        e->bytes = bytes[e->id];
        state[e->id] = e->aux == AB_FREE_REQUEST ? ID_REQUESTED : ID_DEAD;
        break;
      }
      case AB_EV_KERNEL: {
        const ab_kernel_t *k = e->id < es->nkernels ? &es->kernels[e->id] : NULL;
        if (k == NULL || k->op >= AB_K_COUNT || k->nbuf > AB_KERNEL_MAX_BUFS || k->dtype[0] >= AB_DTYPE_COUNT ||
            k->dtype[1] >= AB_DTYPE_COUNT) {
          st = ab_diag_set(diag, AB_ERR_INVALID, "event %zu: malformed kernel", i);
          break;
        }
        uint64_t need[AB_KERNEL_MAX_BUFS];
        ab_kernel_needs(k, need);
        for (unsigned b = 0; b < k->nbuf && st == AB_OK; b++)
          if (k->buf[b] >= es->nids || state[k->buf[b]] != ID_LIVE || bytes[k->buf[b]] < need[b])
            st = ab_diag_set(diag, AB_ERR_INVALID,
                             "event %zu: %s kernel buffer %u (id %u) is not live or smaller than the %llu bytes it needs", i,
                             ab_kernel_name((ab_kernel_op_t)k->op), b, k->buf[b], (unsigned long long)need[b]);
        break;
      }
      case AB_EV_STEP:
      case AB_EV_SYNC:
      case AB_EV_EMPTY_CACHE:
        break;
      case AB_EV_POOL:
        if (e->id == 0 || e->aux >= AB_POOL_OPS || (e->bytes & ~(uint64_t)AB_POOL_FLAGS))
          st = ab_diag_set(diag, AB_ERR_INVALID, "event %zu: POOL call %u on pool %u with flags %llu is not valid", i,
                           e->aux, e->id, (unsigned long long)e->bytes);
        break;
      default:
        st = ab_diag_set(diag, AB_ERR_INVALID, "event %zu: unknown kind %u", i, e->kind);
    }
  }
done:
  es->finished = st == AB_OK;
  /* A finished stream is read, never grown: sized to its events, since every probe of a
   * budget search and every rank shares it (Note at the top of events.h). */
  if (es->finished && es->cap > es->n && es->n > 0) {
    ab_event_t *fit = realloc(es->ev, es->n * sizeof *fit);
    if (fit) {
      es->ev = fit;
      es->cap = es->n;
    }
  }
  free(state);
  free(stream);
  free(bytes);
  return st;
}

/* The stream's digest, which replay --info prints so that two readers' or two runs' events
 * can be compared: FNV-1a's step (xor, then multiply by its prime) on 64-bit words, in four
 * lanes that take turns, so that four multiplies are in flight at once and a million events
 * cost a few milliseconds. Each step is a bijection of the lane, so two inputs of the same
 * length that differ in one word never give the same lane; the lanes and the length are
 * mixed at the end (the finaliser of MurmurHash3's 64-bit variant). */
#define HASH_PRIME 0x100000001b3ULL

static uint64_t mix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 33);
}

static void hash_words(uint64_t lane[4], const unsigned char *p, size_t n) {
  size_t i = 0;
  uint64_t w[4];
  for (; n - i >= sizeof w; i += sizeof w) {
    memcpy(w, p + i, sizeof w);
    for (int k = 0; k < 4; k++) lane[k] = (lane[k] ^ w[k]) * HASH_PRIME;
  }
  for (; i < n; i++) lane[i % 4] = (lane[i % 4] ^ p[i]) * HASH_PRIME;
}

uint64_t ab_events_hash(const ab_events_t *es) {
  uint64_t lane[4] = {0xcbf29ce484222325ULL, 1, 2, 3};
  size_t ev = es->n * sizeof *es->ev, kern = es->nkernels * sizeof *es->kernels;
  hash_words(lane, (const unsigned char *)es->ev, ev);
  hash_words(lane, (const unsigned char *)es->kernels, kern);
  uint64_t h = mix64(ev) ^ mix64(kern + 1);
  for (int k = 0; k < 4; k++) h = mix64(h ^ lane[k]);
  return h;
}
