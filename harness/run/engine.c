#include "harness/run/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/clock.h"
#include "kernels/base/hostmem.h"
#include "kernels/kernels.h"
#include "harness/run/lifetimes.h"
#include "harness/run/verify.h"

const char *ab_run_status_name(ab_run_status_t st) {
  switch (st) {
    case AB_RUN_OK: return "ok";
    case AB_RUN_OOM: return "oom";
    case AB_RUN_ERROR: return "error";
    case AB_RUN_STOPPED: return "stopped";
    case AB_RUN_INTERRUPTED: return "interrupted";
  }
  return "?";
}

const char *ab_oom_kind_name(ab_oom_kind_t kind) {
  switch (kind) {
    case AB_OOM_NONE: return "none";
    case AB_OOM_FRAGMENTATION: return "fragmentation";
    case AB_OOM_CAPACITY: return "capacity";
    case AB_OOM_ROUNDING: return "rounding";
  }
  return "?";
}

ab_run_opts_t ab_run_defaults(void) {
  ab_run_opts_t o;
  memset(&o, 0, sizeof o);
  o.time_calls = true;
  o.timeline = true;
  o.kernels = true;
  return o;
}

/* Note [Timeline of a trace]: a recorded trace has no STEP events, so its timeline is sampled
 * every `every` events instead, at most TRACE_SAMPLES times, and the step column counts the
 * samples. A stream with steps is sampled at each of them (every = 0). */
#define TRACE_SAMPLES 200
static size_t sample_every(const ab_events_t *es) { return es->nsteps ? 0 : es->n / TRACE_SAMPLES + 1; }

/* The per-id bits (Note [Pages a replay writes]): words of 64 ids. */
static size_t id_words(size_t ids) { return (ids + 63) / 64; }
static void id_set(uint64_t *bits, uint32_t id) { bits[id / 64] |= 1ULL << (id % 64); }
static void id_clear(uint64_t *bits, uint32_t id) { bits[id / 64] &= ~(1ULL << (id % 64)); }
static bool id_has(const uint64_t *bits, uint32_t id) { return bits[id / 64] >> (id % 64) & 1; }

ab_status ab_run_prepare(ab_run_t *run, const ab_events_t *es) {
  memset(run, 0, sizeof *run);
  run->nids = es->nids;
  /* Read and written by id at every allocation and free, all over: on huge pages a TLB entry
   * covers 2 MiB of them. foreign is written only for kernels on other streams: calloc's. */
  size_t ids = es->nids ? es->nids : 1;
  run->ptr = ab_host_memory_zeroed(ids * sizeof *run->ptr);
  run->live = ab_host_memory_zeroed(id_words(ids) * sizeof *run->live);
  run->requested = ab_host_memory_zeroed(id_words(ids) * sizeof *run->requested);
  run->stream_of = ab_host_memory_zeroed(ids * sizeof *run->stream_of);
  run->foreign = calloc(ids, sizeof *run->foreign);
  run->captimeline = (es->nsteps ? (size_t)es->nsteps : TRACE_SAMPLES) + 1;
  run->timeline = malloc(run->captimeline * sizeof *run->timeline);
  /* Twice the steps: the second half is scratch for the median. */
  run->capstep_ms = es->nsteps;
  run->step_ms = malloc(2 * (run->capstep_ms ? run->capstep_ms : 1) * sizeof *run->step_ms);
  if (run->ptr == NULL || run->live == NULL || run->requested == NULL || run->stream_of == NULL || run->foreign == NULL ||
      run->timeline == NULL || run->step_ms == NULL) {
    ab_run_release(run);
    return AB_ERR_INTERNAL;
  }
  return AB_OK;
}

void ab_run_release(ab_run_t *run) {
  free(run->ptr);
  free(run->live);
  free(run->requested);
  free(run->stream_of);
  free(run->foreign);
  free(run->ref_first);
  free(run->refs);
  free(run->pass_over);
  free(run->timeline);
  free(run->step_ms);
  memset(run, 0, sizeof *run);
}

void ab_run_forget_ahead(ab_run_t *run) {
  size_t ids = run->nids ? run->nids : 1, used = run->ids_used;
  ab_host_memory_forget(run->ptr, used * sizeof *run->ptr, ids * sizeof *run->ptr);
  ab_host_memory_forget(run->stream_of, used * sizeof *run->stream_of, ids * sizeof *run->stream_of);
  /* A word holds the bits of the ids on both sides of the line: only those wholly past it. */
  size_t words = id_words(ids), from = id_words(used);
  ab_host_memory_forget(run->live, from * sizeof *run->live, words * sizeof *run->live);
  ab_host_memory_forget(run->requested, from * sizeof *run->requested, words * sizeof *run->requested);
}

/* A timeline sample: the values now and the peaks since the last sample, which then start
 * again (Note [Step peaks]). */
static void sample(ab_run_t *run, ab_strategy_t *s, uint64_t event, uint32_t step) {
  if (run->ntimeline == run->captimeline) return;
  ab_stats_t st;
  ab_strategy_stats(s, &st);
  run->timeline[run->ntimeline++] =
      (ab_tl_sample_t){event, step, st.requested_bytes.current, st.allocated_bytes.current, st.reserved_bytes.current,
                       st.requested_bytes.peak, st.allocated_bytes.peak, st.reserved_bytes.peak};
#define KEEP_PEAK(name, doc) \
  if (st.name.peak > run->seen.name.peak) run->seen.name.peak = st.name.peak;
  AB_STAT_GAUGES(KEEP_PEAK)
#undef KEEP_PEAK
  ab_strategy_reset_peaks(s);
}

/* The strategy's statistics at the end of a run, with the peaks of the whole run. */
static void final_stats(ab_run_t *run, ab_strategy_t *s) {
  ab_strategy_stats(s, &run->stats);
  ab_strategy_plan_stats(s, &run->plan);
  run->cap_window = s->cap_window;
  run->cap_lo = s->cap_lo;
  run->cap_hi = s->cap_hi;
  run->variants_alike = s->order_only ? s->dev->variants_alike : 0;
#define RUN_PEAK(name, doc) \
  if (run->seen.name.peak > run->stats.name.peak) run->stats.name.peak = run->seen.name.peak;
  AB_STAT_GAUGES(RUN_PEAK)
#undef RUN_PEAK
}

static ab_status fail(ab_run_t *run, ab_strategy_t *s, ab_status st, size_t i, const char *what) {
  run->status = AB_RUN_ERROR;
  run->error = st;
  snprintf(run->message, sizeof run->message, "event %zu (%s): %s: %s", i, what, ab_strerror(st),
           s->dev->diag.msg[0] ? s->dev->diag.msg : "no detail");
  return st;
}

/* Frees what is still live, untimed, so that the strategy and the device end clean and
 * every live and requested bit is clear again: one pass over the ALLOC events before `upto`
 * (the replay went no further, so no later one was made) finds each live id's size and
 * stream. With v, each is verified first, until one fails. */
static ab_status drain(const ab_events_t *es, ab_strategy_t *s, ab_run_t *run, ab_verify_t *v, size_t upto) {
  if (run->last) return AB_OK; /* the process ends with the run */
  ab_status first = AB_OK;
  for (size_t i = 0; i < upto && i < es->n; i++) {
    const ab_event_t *e = &es->ev[i];
    if (e->kind != AB_EV_ALLOC || !id_has(run->live, e->id)) continue;
    if (v && ab_verify_free(v, e->id, &s->dev->diag) != AB_OK) {
      first = fail(run, s, AB_ERR_INVALID, es->n, "verifying what was left live");
      v = NULL;
    }
    ab_status st = id_has(run->requested, e->id) ? ab_strategy_free_complete(s, run->ptr[e->id], e->bytes, e->stream)
                                                 : ab_strategy_free(s, run->ptr[e->id], e->bytes, e->stream);
    if (st != AB_OK && first == AB_OK) first = st;
    id_clear(run->live, e->id);
    id_clear(run->requested, e->id);
  }
  if (first != AB_OK && run->status != AB_RUN_ERROR) fail(run, s, first, es->n, "freeing what was left live");
  return first;
}

/* ---- going on after an OOM (continue_on_oom) ------------------------------------------- */

/* The ids an event refers to after their ALLOC: a FREE's, a KERNEL's buffers (each once). */
static uint32_t referenced(const ab_events_t *es, const ab_event_t *e, uint32_t ids[AB_KERNEL_MAX_BUFS]) {
  uint32_t n = 0;
  if (e->kind == AB_EV_FREE) ids[n++] = e->id;
  if (e->kind == AB_EV_KERNEL) {
    const ab_kernel_t *k = &es->kernels[e->id];
    for (unsigned b = 0; b < k->nbuf; b++) {
      bool again = false;
      for (unsigned c = 0; c < b; c++) again |= k->buf[c] == k->buf[b];
      if (!again) ids[n++] = k->buf[b];
    }
  }
  return n;
}

/* Indexes every id's references in event order (refs[ref_first[id] .. ref_first[id + 1])),
 * and clears the events to pass over. */
static ab_status index_references(const ab_events_t *es, ab_run_t *run) {
  size_t nids = es->nids, total = 0;
  uint32_t ids[AB_KERNEL_MAX_BUFS];
  free(run->ref_first);
  free(run->refs);
  free(run->pass_over);
  run->ref_first = calloc(nids + 1, sizeof *run->ref_first);
  run->pass_over = calloc(es->n / 64 + 1, sizeof *run->pass_over);
  run->refs = NULL;
  size_t *next = malloc((nids ? nids : 1) * sizeof *next);
  if (run->ref_first && run->pass_over && next) {
    for (size_t i = 0; i < es->n; i++)
      for (uint32_t j = 0, n = referenced(es, &es->ev[i], ids); j < n; j++) run->ref_first[ids[j]]++;
    for (size_t id = 0; id < nids; id++) {
      size_t count = run->ref_first[id];
      run->ref_first[id] = next[id] = total;
      total += count;
    }
    run->ref_first[nids] = total;
    run->refs = malloc((total ? total : 1) * sizeof *run->refs);
  }
  if (run->refs)
    for (size_t i = 0; i < es->n; i++)
      for (uint32_t j = 0, n = referenced(es, &es->ev[i], ids); j < n; j++) run->refs[next[ids[j]]++] = i;
  free(next);
  return run->refs ? AB_OK : AB_ERR_INTERNAL;
}

/* Marks the events that refer to a dead id to be passed over; *until becomes the first of
 * them if that comes sooner. */
static void mark_dead(ab_run_t *run, uint32_t id, size_t *until) {
  for (size_t k = run->ref_first[id]; k < run->ref_first[id + 1]; k++) {
    size_t e = run->refs[k];
    run->pass_over[e / 64] |= 1ULL << (e % 64);
    if (e < *until) *until = e;
  }
}

/* The first event at or after `from` to pass over, or n. */
static size_t next_pass_over(const ab_run_t *run, size_t from, size_t n) {
  for (size_t w = from / 64; w * 64 < n; w++) {
    uint64_t bits = run->pass_over[w] & (w == from / 64 ? ~0ULL << (from % 64) : ~0ULL);
    if (bits) {
      size_t e = w * 64 + (size_t)__builtin_ctzll(bits);
      return e < n ? e : n;
    }
  }
  return n;
}

/* Note [Buffers on other streams]: a workload may compute on a buffer on a stream other
 * than the one it was allocated on (ZeRO reduces gradients on a side stream). Allocation and
 * free are ordered on the buffer's own stream, so on a real device that stream and the other
 * must be ordered too, as PyTorch's programs do with wait_stream and record_stream: the
 * kernel's stream waits for the buffer's stream before it runs (the memory is the buffer's
 * from that point on that stream), and the buffer's stream waits for every other stream that
 * used it before the buffer is freed. Without the second, a stream-ordered pool may hand the
 * memory out again, or remap it, while a kernel still reads it. The joins are device-side
 * (no host wait) and happen only for buffers that crossed streams. */

/* Makes the kernel's stream wait for the streams its buffers were allocated on. */
static ab_status join_producers(ab_kernels_t *kx, ab_run_t *run, const ab_kernel_t *k, unsigned stream) {
  uint64_t joined = 0;
  for (unsigned b = 0; b < k->nbuf; b++) {
    unsigned home = run->stream_of[k->buf[b]];
    if (home == stream) continue;
    run->foreign[k->buf[b]] |= 1ULL << stream;
    run->foreign_set = true;
    if (joined & (1ULL << home)) continue;
    AB_TRY(ab_kernels_join(kx, home, stream));
    joined |= 1ULL << home;
  }
  return AB_OK;
}

/* Makes a buffer's stream wait for the other streams that used it, before it is freed. */
static ab_status join_users(ab_kernels_t *kx, ab_run_t *run, uint32_t id) {
  for (uint64_t users = run->foreign[id]; users; users &= users - 1)
    AB_TRY(ab_kernels_join(kx, (unsigned)__builtin_ctzll(users), run->stream_of[id]));
  run->foreign[id] = 0;
  return AB_OK;
}

/* The time accounting of one replay loop. */
typedef struct loop_clock_s {
  uint64_t t0;          /* host time the loop began */
  uint64_t modeled0;    /* the device's modelled time then */
  uint64_t outside_ns;  /* host time in strategy calls, kernel launches and verify checks */
  uint64_t last_mark_ns; /* host plus modelled time of the last step mark (no kernels context) */
  bool marked;
} loop_clock_t;

/* Note [Timing one call in N]
 * Two reads of the clock around every allocation and free cost about as much as a caching
 * strategy's own work (some 30 ns a read where the clock is a virtual machine's), so timing
 * every call would have measured mostly the clock and halved the replay's speed. The first
 * EXACT_CALLS calls of each kind are all timed; after them, one call in a random gap of 1 to
 * 2 SAMPLE_EVERY - 1 calls (SAMPLE_EVERY on average; random, so that no period of the
 * workload lines up with the timed calls, and the same gaps in every run) is timed, and its
 * time counts in the histogram once for each call of its gap. The histogram's count stays the
 * number of calls; its percentiles are those of a uniform sample of them (tens of thousands of
 * calls in a large run); the host time spent in calls, which harness_ns leaves out, is
 * estimated from the sample the same way. */
#define EXACT_CALLS 4096
#define SAMPLE_EVERY 16

typedef struct sampler_s {
  uint64_t calls; /* calls counted in the histogram so far */
  uint32_t left;  /* untimed calls before the next timed one */
  uint32_t gap;   /* the calls the next timed one stands for */
  uint64_t rng;   /* xorshift64 state */
  uint64_t last;  /* the last timed call's value: host plus modelled time */
  uint64_t last_host; /* ... and its host time alone */
} sampler_t;

static void sampler_init(sampler_t *sp) { *sp = (sampler_t){0, 0, 1, 0x9E3779B97F4A7C15ULL, 0, 0}; }

/* Whether this call is timed; *weight: the calls it then stands for. */
static inline bool call_timed(sampler_t *sp, uint32_t *weight) {
  if (sp->left) {
    sp->left--;
    return false;
  }
  *weight = sp->gap;
  sp->calls += sp->gap;
  uint32_t gap = 1;
  if (sp->calls >= EXACT_CALLS) {
    sp->rng ^= sp->rng << 13;
    sp->rng ^= sp->rng >> 7;
    sp->rng ^= sp->rng << 17;
    gap = 1 + (uint32_t)(sp->rng % (2 * SAMPLE_EVERY - 1));
  }
  sp->gap = gap;
  sp->left = gap - 1;
  return true;
}

/* A timed call took host_ns of host time and modeled_ns of the device's modelled time. */
static inline void timed_call_done(loop_clock_t *c, sampler_t *sp, ab_hist_t *h, uint32_t weight, uint64_t host_ns,
                                   uint64_t modeled_ns) {
  c->outside_ns += host_ns * weight;
  sp->last_host = host_ns;
  sp->last = host_ns + modeled_ns;
  ab_hist_add_n(h, sp->last, weight);
}

/* The calls after the last timed one count as it did, so that the count is every call's. */
static void sampler_flush(loop_clock_t *c, sampler_t *sp, ab_hist_t *h) {
  uint32_t untimed = sp->gap - 1 - sp->left;
  if (untimed == 0) return;
  c->outside_ns += sp->last_host * untimed;
  ab_hist_add_n(h, sp->last, untimed);
  sp->left = sp->gap - 1;
}

/* A step boundary: a CUDA event with kx, else host plus modelled time now. */
static ab_status mark_step(ab_run_t *run, ab_kernels_t *kx, loop_clock_t *c, const ab_device_t *dev) {
  if (kx) return ab_kernels_mark(kx);
  uint64_t t = ab_clock_ns() + (dev->modeled_ns - c->modeled0);
  if (c->marked && run->nstep_ms < run->capstep_ms) run->step_ms[run->nstep_ms++] = (double)(t - c->last_mark_ns) * 1e-6;
  c->last_mark_ns = t;
  c->marked = true;
  return AB_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Ends the loop after `done` events: its times, the last step, the device times, and the
 * median step. */
static ab_status end_loop(ab_run_t *run, const ab_run_opts_t *opts, ab_kernels_t *kx, loop_clock_t *c,
                          const ab_device_t *dev, size_t done) {
  uint64_t t = ab_clock_ns();
  run->loop_s = (double)(t - c->t0) * 1e-9;
  run->modeled_ns = dev->modeled_ns - c->modeled0;
  run->events_done = done;
  /* The time in calls is estimated (Note [Timing one call in N]): a timed call the host
   * preempted, counted for its whole gap, can make it pass the loop's. */
  if (opts->time_calls) run->harness_ns = t - c->t0 > c->outside_ns ? t - c->t0 - c->outside_ns : 0;
  AB_TRY(mark_step(run, kx, c, dev));
  if (kx) AB_TRY(ab_kernels_timing(kx, run->step_ms, run->capstep_ms, &run->nstep_ms, &run->kernel_ms));
  size_t n = run->nstep_ms;
  if (n == 0) return AB_OK;
  double *sorted = run->step_ms + run->capstep_ms;
  memcpy(sorted, run->step_ms, n * sizeof *sorted);
  qsort(sorted, n, sizeof *sorted, cmp_double);
  run->step_ms_p50 = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  return AB_OK;
}

ab_oom_kind_t ab_oom_classify(const ab_oom_info_t *o) {
  uint64_t allocated = o->allocated > 0 ? (uint64_t)o->allocated : 0;
  if (o->live_requested > o->limit || o->limit - o->live_requested < o->bytes) return AB_OOM_CAPACITY;
  if (allocated > o->limit || o->limit - allocated < o->device_bytes) return AB_OOM_ROUNDING;
  return AB_OOM_FRAGMENTATION;
}

/* Describes the OOM of the ALLOC at event i in run->oom (Note [OOM kinds] in engine.h). */
static void describe_oom(const ab_events_t *es, ab_strategy_t *s, ab_run_t *run, size_t i, uint64_t live_requested,
                         uint64_t limit) {
  ab_stats_t st;
  ab_strategy_stats(s, &st);
  ab_oom_info_t *o = &run->oom;
  const ab_event_t *e = &es->ev[i];
  o->event = i;
  o->id = e->id;
  o->bytes = e->bytes;
  o->allocated = st.allocated_bytes.current;
  o->reserved = st.reserved_bytes.current;
  o->live_requested = live_requested;
  /* Under PyTorch's cap the memory the run could have is the cap, not the card. */
  o->capped = s->memory_cap && s->memory_cap < limit;
  o->limit = o->capped ? s->memory_cap : limit;
  o->device_bytes = ab_strategy_device_bytes(s, e->bytes, e->stream);
  o->kind = ab_oom_classify(o);
  ab_strategy_describe_oom(s, e->bytes, e->stream, o->message, sizeof o->message);
}

/* Counts the OOM of the ALLOC at event i, and the allocations in a row that ended so. */
static void count_oom(const ab_events_t *es, ab_run_t *run, size_t i, uint64_t *streak) {
  bool alloc_between = run->ooms == 0;
  for (size_t k = run->last_oom_event + 1; k < i && !alloc_between; k++) alloc_between = es->ev[k].kind == AB_EV_ALLOC;
  *streak = alloc_between ? 1 : *streak + 1;
  if (*streak > run->oom_streak) run->oom_streak = *streak;
  run->ooms++;
  run->last_oom_event = i;
}

/* ---- the replay loop ------------------------------------------------------------------- */

/* One replay: what the event handlers read and update. */
typedef struct replay_s {
  const ab_events_t *es;
  ab_strategy_t *s;
  ab_device_t *dev;          /* s->dev */
  const ab_run_opts_t *opts;
  ab_run_t *run;
  ab_kernels_t *kx;          /* the kernels context; NULL without one */
  ab_verify_t *v;            /* the verifier with opts.verify, else NULL */
  bool launch;               /* KERNEL events are launched */
  uint64_t limit;            /* the memory the run could have (Note [OOM kinds]) */
  uint64_t live_requested;   /* bytes requested by the live allocations */
  uint64_t live;             /* live allocations */
  uint64_t unchecked;        /* events since the last invariant check (Note [What --check costs]) */
  uint64_t streak;           /* allocations in a row that ended in OOM so far */
  size_t until;              /* the next event to pass over (continue_on_oom), or the end */
  bool watch;                /* opts.at_reserved is yet to be called */
  loop_clock_t c;
  sampler_t alloc_sampler, free_sampler; /* Note [Timing one call in N] */
  ab_status st;              /* the error when a handler returns FAILED */
  char stop_why[512];        /* why another rank stopped the run */
} replay_t;

/* The memory the run could have: what the device has free, and what it holds already. */
static ab_status read_limit(replay_t *r) {
  uint64_t free_bytes = 0, total = 0;
  AB_TRY(ab_device_mem_info(r->dev, &free_bytes, &total));
  r->limit = free_bytes + r->dev->held_bytes;
  return AB_OK;
}

/* What an event handler tells the loop. */
typedef enum next_e {
  NEXT,          /* go on to the next event */
  CAUGHT,        /* a caught request failed: go on after its FREE (Note [Caught OOMs]) */
  OOM,           /* the allocation failed: the replay ends at this event */
  STOPPED,       /* another rank failed: the replay stops before this event */
  STOPPED_AFTER, /* ... after this event, a collective that ran */
  INTERRUPTED,   /* opts.stop was set: the replay stops after this event */
  FAILED,        /* r->st is the error */
} next_t;

static next_t failed(replay_t *r, ab_status st) {
  r->st = st;
  return FAILED;
}

/* The handlers, one per event kind. Each is called from the loop alone, so the compiler
 * inlines it there: the loop pays no call per event. */

/* Note [Caught OOMs]
 * A request tagged AB_TAG_CAUGHT is one the recorded program saw fail and went on from
 * (trace_builder.h, Note [A trace that ends in an OOM]). Where it fails here too, the strategy
 * counts the OOM (num_ooms, as PyTorch did), and the replay goes on after its FREE, which
 * follows it directly (ab_events_finish checks that): nothing was handed out to free. Where it
 * is served, it is freed at once by that FREE, and counted in caught_served: the program would
 * have gone another way, which whoever reports the run says. */

/* ALLOC at event i, timed. An OOM ends the replay, or with continue_on_oom is counted and
 * its id's later events are passed over; a caught request's is counted and passed. */
static next_t replay_alloc(replay_t *r, size_t i, const ab_event_t *e) {
  ab_device_t *dev = r->dev;
  ab_run_t *run = r->run;
  uint32_t weight = 0;
  bool timed = r->opts->time_calls && call_timed(&r->alloc_sampler, &weight);
  uint64_t m0 = dev->modeled_ns, t0 = timed ? ab_clock_ns() : 0;
  ab_dptr_t p = 0;
  ab_status st = ab_strategy_alloc(r->s, e->bytes, e->stream, &p);
  if (timed)
    timed_call_done(&r->c, &r->alloc_sampler, &run->alloc_ns, weight, ab_clock_ns() - t0, dev->modeled_ns - m0);
  if (st == AB_ERR_OOM && e->aux == AB_TAG_CAUGHT) {
    run->caught_ooms++;
    return CAUGHT;
  }
  if (st == AB_ERR_OOM) {
    if (!r->opts->continue_on_oom) return OOM;
    if (run->ooms == 0) {
      describe_oom(r->es, r->s, run, i, r->live_requested, r->limit);
      if (index_references(r->es, run) != AB_OK) {
        snprintf(dev->diag.msg, sizeof dev->diag.msg, "out of host memory going on after an OOM");
        return failed(r, AB_ERR_INTERNAL);
      }
    }
    count_oom(r->es, run, i, &r->streak);
    mark_dead(run, e->id, &r->until);
    return NEXT;
  }
  if (st != AB_OK) return failed(r, st);
  run->caught_served += e->aux == AB_TAG_CAUGHT;
  run->ptr[e->id] = p;
  id_set(run->live, e->id);
  if (e->id >= run->ids_used) run->ids_used = e->id + 1;
  if (r->opts->addr_of) r->opts->addr_of[e->id] = p;
  if (r->launch) run->stream_of[e->id] = e->stream; /* read by the joins only */
  r->live_requested += e->bytes;
  r->live++;
  if (r->v) {
    uint64_t t1 = ab_clock_ns();
    st = ab_verify_alloc(r->v, e->id, p, e->bytes, e->stream, &dev->diag);
    r->c.outside_ns += ab_clock_ns() - t1;
    if (st != AB_OK) return failed(r, st);
  }
  /* Only an allocation takes reserved bytes to a new height. */
  if (r->watch && r->s->stats.reserved_bytes.current >= r->opts->at_reserved_bytes) {
    r->watch = false;
    if (r->opts->at_reserved_event) *r->opts->at_reserved_event = i;
    r->opts->at_reserved(r->opts->at_reserved_ctx, r->s, run);
  }
  return NEXT;
}

/* FREE, in its phase, timed; the buffer is verified and its stream joined with the others
 * that used it (Note [Buffers on other streams]) before its memory goes back. */
static next_t replay_free(replay_t *r, const ab_event_t *e) {
  ab_device_t *dev = r->dev;
  ab_run_t *run = r->run;
  ab_status st;
  if (r->v && e->aux != AB_FREE_REQUEST) {
    uint64_t t1 = ab_clock_ns();
    st = ab_verify_free(r->v, e->id, &dev->diag);
    r->c.outside_ns += ab_clock_ns() - t1;
    if (st != AB_OK) return failed(r, st);
  }
  if (r->launch && e->aux != AB_FREE_REQUEST && run->foreign[e->id]) {
    st = join_users(r->kx, run, e->id);
    if (st != AB_OK) return failed(r, st);
  }
  uint32_t weight = 0;
  bool timed = r->opts->time_calls && call_timed(&r->free_sampler, &weight);
  uint64_t m0 = dev->modeled_ns, t0 = timed ? ab_clock_ns() : 0;
  ab_dptr_t p = run->ptr[e->id];
  st = AB_OK;
  switch ((ab_free_phase_t)e->aux) {
    case AB_FREE_NOW:
      st = ab_strategy_free(r->s, p, e->bytes, e->stream);
      id_clear(run->live, e->id);
      r->live_requested -= e->bytes;
      r->live--;
      break;
    case AB_FREE_REQUEST:
      st = ab_strategy_free_request(r->s, p, e->bytes, e->stream);
      id_set(run->requested, e->id);
      break;
    case AB_FREE_COMPLETE: /* the memory was in use until now */
      st = ab_strategy_free_complete(r->s, p, e->bytes, e->stream);
      id_clear(run->live, e->id);
      id_clear(run->requested, e->id);
      r->live_requested -= e->bytes;
      r->live--;
      break;
  }
  if (timed) timed_call_done(&r->c, &r->free_sampler, &run->free_ns, weight, ab_clock_ns() - t0, dev->modeled_ns - m0);
  return st == AB_OK ? NEXT : failed(r, st);
}

/* KERNEL: launched on its live buffers where kernels run, else counted as skipped; a
 * collective of several ranks goes in lockstep with the others (Note [Ranks in lockstep]). */
static next_t replay_kernel(replay_t *r, const ab_event_t *e) {
  const ab_run_opts_t *opts = r->opts;
  ab_run_t *run = r->run;
  const ab_kernel_t *k = &r->es->kernels[e->id];
  bool lockstep = opts->lockstep && (k->op == AB_K_ALLGATHER || k->op == AB_K_REDUCE_SCATTER);
  uint64_t t0 = ab_clock_ns();
  ab_status st = AB_OK;
  if (lockstep && !opts->lockstep(opts->lockstep_ctx, AB_LOCKSTEP_ENTER, r->stop_why, sizeof r->stop_why))
    return STOPPED;
  if (r->launch) {
    ab_dptr_t buf[AB_KERNEL_MAX_BUFS] = {0};
    for (unsigned b = 0; b < k->nbuf; b++) buf[b] = run->ptr[k->buf[b]];
    st = join_producers(r->kx, run, k, e->stream);
    if (st == AB_OK) st = ab_kernels_launch(r->kx, k, buf, e->stream);
    if (st == AB_OK && r->v) st = ab_verify_wrote(r->v, k, e->stream);
  }
  /* The other ranks hear of a failed launch before this one stops. */
  bool go = !lockstep || opts->lockstep(opts->lockstep_ctx, st == AB_OK ? AB_LOCKSTEP_LAUNCHED : AB_LOCKSTEP_FAILED,
                                        r->stop_why, sizeof r->stop_why);
  r->c.outside_ns += ab_clock_ns() - t0;
  if (st != AB_OK) return failed(r, st);
  if (r->launch) run->kernels_launched++;
  else run->kernels_skipped++;
  return go ? NEXT : STOPPED_AFTER;
}

/* STEP at event i: a timeline sample and a step mark. */
static next_t replay_step(replay_t *r, size_t i, const ab_event_t *e) {
  if (r->opts->timeline) sample(r->run, r->s, i, e->id);
  uint64_t t0 = ab_clock_ns();
  ab_status st = mark_step(r->run, r->kx, &r->c, r->dev);
  if (r->kx) r->c.outside_ns += ab_clock_ns() - t0;
  return st == AB_OK ? NEXT : failed(r, st);
}

static next_t replay_sync(replay_t *r) {
  uint64_t t0 = ab_clock_ns();
  ab_status st = ab_strategy_synchronize(r->s);
  r->c.outside_ns += ab_clock_ns() - t0;
  return st == AB_OK ? NEXT : failed(r, st);
}

static next_t replay_empty_cache(replay_t *r) {
  uint64_t t0 = ab_clock_ns();
  ab_status st = ab_strategy_empty_cache(r->s);
  r->c.outside_ns += ab_clock_ns() - t0;
  return st == AB_OK ? NEXT : failed(r, st);
}

static next_t replay_pool(replay_t *r, const ab_event_t *e) {
  uint64_t t0 = ab_clock_ns();
  ab_status st = ab_strategy_pool(r->s, (ab_pool_op_t)e->aux, e->id, e->stream, (unsigned)e->bytes);
  r->c.outside_ns += ab_clock_ns() - t0;
  return st == AB_OK ? NEXT : failed(r, st);
}

/* Note [What --check costs]: a strategy's checks walk all it holds, every segment and block
 * and its free structures, and compare them with its statistics: O(held) a check. After every
 * event, a trace that keeps 20 000 blocks live (30 000 allocations, 60 000 events; drawn and
 * timed by tests/bench/oracle_bench.sh) took 93 s through raw instead of 0.04 s: 1.5 ms an event.
 * So the checks run after every event while the segments and live allocations held number
 * at most CHECK_WALK, beyond that after every k-th event, k = held / CHECK_WALK, which keeps
 * the walk at about CHECK_WALK an event on average whatever the trace (60 to 130 us an event
 * there: 4 s through raw, 8 s through caching), and after the last event, so that an
 * invariant the run ends on broken is found. The tests' workloads, a few hundred blocks live,
 * are still checked after every event. */
#define CHECK_WALK 1024

static next_t check_invariants(replay_t *r) {
  ab_diag_t why = {""};
  r->unchecked = 0;
  r->run->checks++;
  if (ab_strategy_check(r->s, &why) == AB_OK) return NEXT;
  snprintf(r->dev->diag.msg, sizeof r->dev->diag.msg, "invariant broken: %s", why.msg);
  return failed(r, AB_ERR_INTERNAL);
}

/* With opts.check, after an event: the checks when due (Note [What --check costs]). */
static next_t check_when_due(replay_t *r) {
  const ab_stats_t *st = &r->s->stats;
  uint64_t segments = st->num_device_alloc > st->num_device_free ? st->num_device_alloc - st->num_device_free : 0;
  uint64_t held = r->live + segments;
  if (++r->unchecked < held / CHECK_WALK) return NEXT;
  return check_invariants(r);
}

/* Resets the results of run, keeping its scratch. */
static void reset_results(ab_run_t *run) {
  /* The live and requested bits are clear already: prepare clears them, and each replay's
   * drain leaves them so; clearing them here would cost a pass over every id (15 M of them in
   * a big trace) per replay. ptr and stream_of are read only for live ids. foreign is kept by
   * the kernels only. */
  if (run->foreign_set) memset(run->foreign, 0, (run->nids ? run->nids : 1) * sizeof *run->foreign);
  run->foreign_set = false;
  run->ntimeline = 0;
  run->status = AB_RUN_OK;
  run->error = AB_OK;
  run->message[0] = '\0';
  run->events_done = 0;
  memset(&run->oom, 0, sizeof run->oom);
  memset(&run->seen, 0, sizeof run->seen);
  ab_hist_reset(&run->alloc_ns);
  ab_hist_reset(&run->free_ns);
  run->kernels_skipped = run->kernels_launched = 0;
  run->kernel_ms = run->step_ms_p50 = 0;
  run->nstep_ms = 0;
  run->harness_ns = 0;
  run->comm_bytes = 0;
  run->checks = 0;
  run->ooms = run->oom_streak = run->passed_over = 0;
  run->caught_ooms = run->caught_served = 0;
  run->last_oom_event = 0;
  run->cap_window = false;
  run->ids_used = 0;
}

/* Opens what the replay needs: the kernels (and cuBLAS's workspace) first, so that the
 * memory limit counts them, then the verifier. On failure nothing is left open and run says
 * why. */
static ab_status open_replay(replay_t *r, ab_verify_t *verify) {
  const ab_run_opts_t *opts = r->opts;
  ab_device_t *dev = r->dev;
  ab_status st = AB_OK;
  if ((opts->kernels && r->es->nkernels > 0) || opts->verify) st = ab_kernels_open(dev, &r->kx, &dev->diag);
  if (st != AB_OK) return fail(r->run, r->s, st, 0, "opening the kernels");
  if (r->kx && opts->comm) ab_kernels_set_comm(r->kx, opts->comm);
  if (opts->verify) {
    st = ab_verify_init(verify, r->es->nids, r->kx, &dev->diag);
    if (st != AB_OK) {
      ab_kernels_close(r->kx, NULL);
      return fail(r->run, r->s, st, 0, "verify");
    }
    r->v = verify;
  }
  r->launch = r->kx && opts->kernels;
  return AB_OK;
}

/* Closes what open_replay opened; a failure to close the kernels is the replay's error when
 * it had none. */
static ab_status close_replay(replay_t *r, ab_status st) {
  if (r->opts->comm) r->run->comm_bytes = ab_comm_bytes(r->opts->comm);
  if (r->v) ab_verify_release(r->v);
  ab_diag_t why = {""};
  ab_status cst = ab_kernels_close(r->kx, &why);
  if (cst != AB_OK && st == AB_OK) {
    snprintf(r->dev->diag.msg, sizeof r->dev->diag.msg, "%s", why.msg);
    st = fail(r->run, r->s, cst, r->es->n, "closing the kernels");
  }
  return st;
}

/* Ends a replay that stopped at event i as `next` says: the loop's times, the run's status
 * and statistics, and what is left live freed. */
static ab_status end_replay(replay_t *r, next_t next, size_t i) {
  const ab_events_t *es = r->es;
  ab_strategy_t *s = r->s;
  ab_run_t *run = r->run;
  sampler_flush(&r->c, &r->alloc_sampler, &run->alloc_ns);
  sampler_flush(&r->c, &r->free_sampler, &run->free_ns);
  ab_status st = next == FAILED ? r->st : end_loop(run, r->opts, r->kx, &r->c, r->dev, next == INTERRUPTED ? i + 1 : i);
  if (st != AB_OK) {
    run->loop_s = (double)(ab_clock_ns() - r->c.t0) * 1e-9;
    run->events_done = i;
    fail(run, s, st, i, "replay");
    /* No verify here: the failing event may have left the check half-way. */
    drain(es, s, run, NULL, i + 1);
    return st;
  }
  switch (next) {
    case NEXT: /* the end of the stream */
      if (r->opts->timeline) sample(run, s, es->n, sample_every(es) ? (uint32_t)run->ntimeline : es->nsteps);
      final_stats(run, s);
      if (r->opts->at_end) r->opts->at_end(r->opts->at_end_ctx, s, run);
      break;
    case OOM:
      run->status = AB_RUN_OOM;
      final_stats(run, s);
      describe_oom(es, s, run, i, r->live_requested, r->limit);
      count_oom(es, run, i, &r->streak);
      if (r->opts->on_oom) r->opts->on_oom(r->opts->on_oom_ctx, s, run);
      break;
    case STOPPED:
      run->status = AB_RUN_STOPPED;
      snprintf(run->message, sizeof run->message, "stopped before event %zu: %s", i, r->stop_why);
      final_stats(run, s);
      break;
    case INTERRUPTED:
      run->status = AB_RUN_INTERRUPTED;
      final_stats(run, s);
      break;
    case STOPPED_AFTER: /* made STOPPED by the loop */
    case CAUGHT: /* made NEXT by the loop */
    case FAILED: break; /* handled above */
  }
  return drain(es, s, run, r->v, i + 1);
}

ab_status ab_engine_replay(const ab_events_t *es, ab_strategy_t *s, const ab_run_opts_t *opts, ab_run_t *run) {
  ab_run_opts_t defaults = ab_run_defaults();
  if (opts == NULL) opts = &defaults;
  reset_results(run);
  if (run->nids < es->nids || run->captimeline < (size_t)es->nsteps + 1 || run->capstep_ms < es->nsteps)
    return fail(run, s, AB_ERR_INTERNAL, 0, "run not prepared for this stream");
  if (opts->continue_on_oom && opts->lockstep) {
    snprintf(s->dev->diag.msg, sizeof s->dev->diag.msg, "a passed-over collective would leave the other ranks waiting");
    return fail(run, s, AB_ERR_INVALID, 0, "continue_on_oom with ranks");
  }
  /* A planning strategy sees the run ahead (Note [Plans], strategy.h). */
  ab_status planned = ab_lifetimes_plan(es, s);
  if (planned != AB_OK) return fail(run, s, planned, 0, "plan");

  replay_t r = {.es = es, .s = s, .dev = s->dev, .opts = opts, .run = run, .until = es->n, .watch = opts->at_reserved != NULL};
  ab_verify_t verify;
  ab_status st = open_replay(&r, &verify);
  if (st != AB_OK) return st;
  st = read_limit(&r);
  if (st != AB_OK) return close_replay(&r, fail(run, s, st, 0, "mem_info"));

  const ab_event_t *ev = es->ev;
  r.c = (loop_clock_t){ab_clock_ns(), r.dev->modeled_ns, 0, 0, false};
  sampler_init(&r.alloc_sampler);
  sampler_init(&r.free_sampler);
  next_t next = NEXT;
  size_t i = 0;
  /* Note [Timeline of a trace] */
  size_t every = opts->timeline ? sample_every(es) : 0, next_sample = 0;
  size_t next_checkpoint = opts->checkpoint ? opts->checkpoint_every : SIZE_MAX;
events:
  for (; i < r.until; i++) {
    const ab_event_t *e = &ev[i];
    if (every && i >= next_sample) {
      sample(run, s, i, (uint32_t)run->ntimeline);
      next_sample = i + every;
    }
    switch ((ab_event_kind_t)e->kind) {
      case AB_EV_ALLOC: next = replay_alloc(&r, i, e); break;
      case AB_EV_FREE: next = replay_free(&r, e); break;
      case AB_EV_KERNEL: next = replay_kernel(&r, e); break;
      case AB_EV_STEP: next = replay_step(&r, i, e); break;
      case AB_EV_SYNC: next = replay_sync(&r); break;
      case AB_EV_EMPTY_CACHE: next = replay_empty_cache(&r); break;
      case AB_EV_POOL: next = replay_pool(&r, e); break;
    }
    if (next == CAUGHT) { /* its FREE, next, has nothing to free */
      i++;
      next = NEXT;
    }
    if (next != NEXT) break;
    if (opts->check && (next = check_when_due(&r)) != NEXT) break;
    /* A stop is looked for every 1024 events (one volatile read), so that a run whose events
     * are slow (--check, kernels on a GPU) still ends within moments of a signal. */
    if ((i & 0x3FF) == 0x3FF) {
      if ((i & 0xFFFF) == 0xFFFF && opts->progress) opts->progress(opts->progress_ctx, i + 1, es->n);
      if (i + 1 >= next_checkpoint && i + 1 < r.until) {
        opts->checkpoint(opts->checkpoint_ctx, i + 1, s, run);
        next_checkpoint = i + 1 + opts->checkpoint_every;
        /* A copy made there may have taken another budget (Note [Budget window], device.h). */
        if ((st = read_limit(&r)) != AB_OK) {
          next = failed(&r, st);
          break;
        }
      }
      if (opts->stop && *opts->stop) {
        next = INTERRUPTED;
        break;
      }
    }
  }
  if (next == NEXT && i < es->n) { /* event i refers to an id whose allocation failed */
    run->passed_over++;
    if (ev[i].kind == AB_EV_KERNEL) run->kernels_skipped++;
    r.until = next_pass_over(run, ++i, es->n);
    goto events;
  }
  if (next == STOPPED_AFTER) { /* the collective ran; the replay stops after it */
    next = STOPPED;
    i++;
  }
  /* The run went to its end: what it ends with is checked, if the last event was not. */
  if (next == NEXT && opts->check && r.unchecked) next = check_invariants(&r);
  run->replayed += i;
  return close_replay(&r, end_replay(&r, next, i));
}
