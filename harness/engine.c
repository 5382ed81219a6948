#include "harness/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness/verify.h"
#include "kernels/kernels.h"

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
  }
  return "?";
}

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

ab_run_opts_t ab_run_defaults(void) {
  ab_run_opts_t o;
  memset(&o, 0, sizeof o);
  o.time_calls = true;
  o.timeline = true;
  o.kernels = true;
  return o;
}

ab_status ab_run_prepare(ab_run_t *run, const ab_events_t *es) {
  memset(run, 0, sizeof *run);
  run->nids = es->nids;
  run->ptr = calloc(es->nids ? es->nids : 1, sizeof *run->ptr);
  run->requested = calloc(es->nids ? es->nids : 1, 1);
  run->stream_of = calloc(es->nids ? es->nids : 1, sizeof *run->stream_of);
  run->foreign = calloc(es->nids ? es->nids : 1, sizeof *run->foreign);
  run->captimeline = (size_t)es->nsteps + 1;
  run->timeline = malloc(run->captimeline * sizeof *run->timeline);
  /* Twice the steps: the second half is scratch for the median. */
  run->capstep_ms = es->nsteps;
  run->step_ms = malloc(2 * (run->capstep_ms ? run->capstep_ms : 1) * sizeof *run->step_ms);
  if (run->ptr == NULL || run->requested == NULL || run->stream_of == NULL || run->foreign == NULL ||
      run->timeline == NULL || run->step_ms == NULL) {
    ab_run_release(run);
    return AB_ERR_INTERNAL;
  }
  return AB_OK;
}

void ab_run_release(ab_run_t *run) {
  free(run->ptr);
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

/* Frees what is still live, untimed, so that the strategy and the device end clean: one
 * pass over the ALLOC events finds each live id's size and stream. With v, each is verified
 * first, until one fails. */
static ab_status drain(const ab_events_t *es, ab_strategy_t *s, ab_run_t *run, ab_verify_t *v) {
  ab_status first = AB_OK;
  for (size_t i = 0; i < es->n; i++) {
    const ab_event_t *e = &es->ev[i];
    if (e->kind != AB_EV_ALLOC || run->ptr[e->id] == 0) continue;
    if (v && ab_verify_free(v, e->id, &s->dev->diag) != AB_OK) {
      first = fail(run, s, AB_ERR_INVALID, es->n, "verifying what was left live");
      v = NULL;
    }
    ab_status st = run->requested[e->id] ? ab_strategy_free_complete(s, run->ptr[e->id], e->bytes, e->stream)
                                         : ab_strategy_free(s, run->ptr[e->id], e->bytes, e->stream);
    if (st != AB_OK && first == AB_OK) first = st;
    run->ptr[e->id] = 0;
    run->requested[e->id] = 0;
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

/* A step boundary: a CUDA event with kx, else host plus modelled time now. */
static ab_status mark_step(ab_run_t *run, ab_kernels_t *kx, loop_clock_t *c, const ab_device_t *dev) {
  if (kx) return ab_kernels_mark(kx);
  uint64_t t = now_ns() + (dev->modeled_ns - c->modeled0);
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
  uint64_t t = now_ns();
  run->loop_s = (double)(t - c->t0) * 1e-9;
  run->modeled_ns = dev->modeled_ns - c->modeled0;
  run->events_done = done;
  if (opts->time_calls) run->harness_ns = t - c->t0 - c->outside_ns;
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
  o->limit = limit;
  o->kind = limit >= live_requested && limit - live_requested >= e->bytes ? AB_OOM_FRAGMENTATION : AB_OOM_CAPACITY;
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

ab_status ab_engine_replay(const ab_events_t *es, ab_strategy_t *s, const ab_run_opts_t *opts, ab_run_t *run) {
  ab_run_opts_t defaults = ab_run_defaults();
  if (opts == NULL) opts = &defaults;
  /* Reset results; keep the scratch. */
  memset(run->ptr, 0, (run->nids ? run->nids : 1) * sizeof *run->ptr);
  memset(run->requested, 0, run->nids ? run->nids : 1);
  memset(run->foreign, 0, (run->nids ? run->nids : 1) * sizeof *run->foreign);
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
  run->ooms = run->oom_streak = run->passed_over = 0;
  run->last_oom_event = 0;
  if (run->nids < es->nids || run->captimeline < (size_t)es->nsteps + 1 || run->capstep_ms < es->nsteps)
    return fail(run, s, AB_ERR_INTERNAL, 0, "run not prepared for this stream");
  if (opts->continue_on_oom && opts->lockstep) {
    snprintf(s->dev->diag.msg, sizeof s->dev->diag.msg, "a passed-over collective would leave the other ranks waiting");
    return fail(run, s, AB_ERR_INVALID, 0, "continue_on_oom with ranks");
  }

  ab_device_t *dev = s->dev;
  /* Kernels (and cuBLAS's workspace) first, so that the memory limit below counts them. */
  ab_kernels_t *kx = NULL;
  ab_status st = AB_OK;
  if ((opts->kernels && es->nkernels > 0) || opts->verify) st = ab_kernels_open(dev, &kx, &dev->diag);
  if (st != AB_OK) return fail(run, s, st, 0, "opening the kernels");
  if (kx && opts->comm) ab_kernels_set_comm(kx, opts->comm);
  ab_verify_t verify, *v = NULL;
  if (opts->verify) {
    st = ab_verify_init(&verify, es->nids, kx, &dev->diag);
    if (st != AB_OK) {
      ab_kernels_close(kx, NULL);
      return fail(run, s, st, 0, "verify");
    }
    v = &verify;
  }
  bool launch = kx && opts->kernels;
  uint64_t free_at_start = 0, total = 0;
  st = ab_device_mem_info(dev, &free_at_start, &total);
  if (st != AB_OK) {
    fail(run, s, st, 0, "mem_info");
    goto release;
  }
  uint64_t limit = free_at_start + dev->held_bytes;
  uint64_t live_requested = 0;
  const ab_event_t *ev = es->ev;

  loop_clock_t c = {now_ns(), dev->modeled_ns, 0, 0, false};
  char stop_why[512] = "";
  uint64_t streak = 0;
  size_t i = 0, until = es->n; /* the next event to pass over (continue_on_oom), or the end */
events:
  for (; i < until; i++) {
    const ab_event_t *e = &ev[i];
    switch ((ab_event_kind_t)e->kind) {
      case AB_EV_ALLOC: {
        uint64_t m0 = dev->modeled_ns, t0 = opts->time_calls ? now_ns() : 0;
        ab_dptr_t p = 0;
        st = ab_strategy_alloc(s, e->bytes, e->stream, &p);
        if (opts->time_calls) {
          uint64_t dt = now_ns() - t0;
          c.outside_ns += dt;
          ab_hist_add(&run->alloc_ns, dt + (dev->modeled_ns - m0));
        }
        if (st == AB_ERR_OOM) {
          if (!opts->continue_on_oom) goto oom;
          if (run->ooms == 0) {
            describe_oom(es, s, run, i, live_requested, limit);
            if (index_references(es, run) != AB_OK) {
              snprintf(dev->diag.msg, sizeof dev->diag.msg, "out of host memory going on after an OOM");
              st = AB_ERR_INTERNAL;
              goto error;
            }
          }
          count_oom(es, run, i, &streak);
          mark_dead(run, e->id, &until);
          st = AB_OK;
          break;
        }
        if (st != AB_OK) goto error;
        run->ptr[e->id] = p;
        run->stream_of[e->id] = e->stream;
        live_requested += e->bytes;
        if (v) {
          uint64_t t1 = now_ns();
          st = ab_verify_alloc(v, e->id, p, e->bytes, e->stream, &dev->diag);
          c.outside_ns += now_ns() - t1;
          if (st != AB_OK) goto error;
        }
        break;
      }
      case AB_EV_FREE: {
        if (v && e->aux != AB_FREE_REQUEST) {
          uint64_t t1 = now_ns();
          st = ab_verify_free(v, e->id, &dev->diag);
          c.outside_ns += now_ns() - t1;
          if (st != AB_OK) goto error;
        }
        if (launch && e->aux != AB_FREE_REQUEST && run->foreign[e->id]) {
          st = join_users(kx, run, e->id);
          if (st != AB_OK) goto error;
        }
        uint64_t m0 = dev->modeled_ns, t0 = opts->time_calls ? now_ns() : 0;
        ab_dptr_t p = run->ptr[e->id];
        switch ((ab_free_phase_t)e->aux) {
          case AB_FREE_NOW:
            st = ab_strategy_free(s, p, e->bytes, e->stream);
            run->ptr[e->id] = 0;
            live_requested -= e->bytes;
            break;
          case AB_FREE_REQUEST:
            st = ab_strategy_free_request(s, p, e->bytes, e->stream);
            run->requested[e->id] = 1;
            break;
          case AB_FREE_COMPLETE: /* the memory was in use until now */
            st = ab_strategy_free_complete(s, p, e->bytes, e->stream);
            run->ptr[e->id] = 0;
            run->requested[e->id] = 0;
            live_requested -= e->bytes;
            break;
        }
        if (opts->time_calls) {
          uint64_t dt = now_ns() - t0;
          c.outside_ns += dt;
          ab_hist_add(&run->free_ns, dt + (dev->modeled_ns - m0));
        }
        if (st != AB_OK) goto error;
        break;
      }
      case AB_EV_KERNEL: {
        const ab_kernel_t *k = &es->kernels[e->id];
        bool lockstep = opts->lockstep && (k->op == AB_K_ALLGATHER || k->op == AB_K_REDUCE_SCATTER);
        uint64_t t0 = now_ns();
        st = AB_OK;
        if (lockstep && !opts->lockstep(opts->lockstep_ctx, AB_LOCKSTEP_ENTER, stop_why, sizeof stop_why)) goto stopped;
        if (launch) {
          ab_dptr_t buf[AB_KERNEL_MAX_BUFS] = {0};
          for (unsigned b = 0; b < k->nbuf; b++) buf[b] = run->ptr[k->buf[b]];
          st = join_producers(kx, run, k, e->stream);
          if (st == AB_OK) st = ab_kernels_launch(kx, k, buf, e->stream);
          if (st == AB_OK && v) st = ab_verify_wrote(v, k, e->stream);
        }
        /* The other ranks hear of a failed launch before this one stops. */
        bool go = !lockstep || opts->lockstep(opts->lockstep_ctx, st == AB_OK ? AB_LOCKSTEP_LAUNCHED : AB_LOCKSTEP_FAILED,
                                              stop_why, sizeof stop_why);
        c.outside_ns += now_ns() - t0;
        if (st != AB_OK) goto error;
        if (launch) run->kernels_launched++;
        else run->kernels_skipped++;
        if (!go) {
          i++; /* this collective ran; the replay stops after it */
          goto stopped;
        }
        break;
      }
      case AB_EV_STEP: {
        if (opts->timeline) sample(run, s, i, e->id);
        uint64_t t0 = now_ns();
        st = mark_step(run, kx, &c, dev);
        if (kx) c.outside_ns += now_ns() - t0;
        if (st != AB_OK) goto error;
        break;
      }
      case AB_EV_SYNC: {
        uint64_t t0 = now_ns();
        st = ab_strategy_synchronize(s);
        c.outside_ns += now_ns() - t0;
        if (st != AB_OK) goto error;
        break;
      }
      case AB_EV_EMPTY_CACHE: {
        uint64_t t0 = now_ns();
        st = ab_strategy_empty_cache(s);
        c.outside_ns += now_ns() - t0;
        if (st != AB_OK) goto error;
        break;
      }
    }
    if (opts->check) {
      ab_diag_t why = {""};
      if (ab_strategy_check(s, &why) != AB_OK) {
        snprintf(dev->diag.msg, sizeof dev->diag.msg, "invariant broken: %s", why.msg);
        st = AB_ERR_INTERNAL;
        goto error;
      }
    }
    /* A stop is looked for every 1024 events (one volatile read), so that a run whose events
     * are slow (--check, kernels on a GPU) still ends within moments of a signal. */
    if ((i & 0x3FF) == 0x3FF) {
      if ((i & 0xFFFF) == 0xFFFF && opts->progress) opts->progress(opts->progress_ctx, i + 1, es->n);
      if (opts->stop && *opts->stop) goto interrupted;
    }
  }
  if (i < es->n) { /* event i refers to an id whose allocation failed */
    run->passed_over++;
    if (ev[i].kind == AB_EV_KERNEL) run->kernels_skipped++;
    until = next_pass_over(run, ++i, es->n);
    goto events;
  }
  st = end_loop(run, opts, kx, &c, dev, i);
  if (st != AB_OK) goto error;
  if (opts->timeline) sample(run, s, es->n, es->nsteps);
  final_stats(run, s);
  if (opts->at_end) opts->at_end(opts->at_end_ctx, s, run);
  st = drain(es, s, run, v);
  goto release;

oom:
  st = end_loop(run, opts, kx, &c, dev, i);
  if (st != AB_OK) goto error;
  run->status = AB_RUN_OOM;
  final_stats(run, s);
  describe_oom(es, s, run, i, live_requested, limit);
  count_oom(es, run, i, &streak);
  if (opts->on_oom) opts->on_oom(opts->on_oom_ctx, s, run);
  st = drain(es, s, run, v);
  goto release;

stopped:
  st = end_loop(run, opts, kx, &c, dev, i);
  if (st != AB_OK) goto error;
  run->status = AB_RUN_STOPPED;
  snprintf(run->message, sizeof run->message, "stopped before event %zu: %s", i, stop_why);
  final_stats(run, s);
  st = drain(es, s, run, v);
  goto release;

interrupted:
  st = end_loop(run, opts, kx, &c, dev, i + 1);
  if (st != AB_OK) goto error;
  run->status = AB_RUN_INTERRUPTED;
  final_stats(run, s);
  st = drain(es, s, run, v);
  goto release;

error:
  run->loop_s = (double)(now_ns() - c.t0) * 1e-9;
  run->events_done = i;
  fail(run, s, st, i, "replay");
  /* No verify here: the failing event may have left the check half-way. */
  drain(es, s, run, NULL);
release:
  if (opts->comm) run->comm_bytes = ab_comm_bytes(opts->comm);
  if (v) ab_verify_release(v);
  {
    ab_diag_t why = {""};
    ab_status cst = ab_kernels_close(kx, &why);
    if (cst != AB_OK && st == AB_OK) {
      snprintf(dev->diag.msg, sizeof dev->diag.msg, "%s", why.msg);
      st = fail(run, s, cst, es->n, "closing the kernels");
    }
  }
  return st;
}
