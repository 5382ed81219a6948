#include "harness/tune/tune.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/base/clock.h"
#include "harness/run/supervise.h"
#include "strategies/protocol/caching_conf.h"
#include "strategies/registry.h"

/* The run's figures. */
static void keep_run(ab_tune_result_t *r, const ab_run_t *run) {
  r->status = run->status;
  r->oom_kind = run->status == AB_RUN_OOM ? run->oom.kind : AB_OOM_NONE;
  r->stats = run->stats;
}

void ab_tune_probe_opts(const ab_tune_opts_t *o, const ab_tune_candidate_t *c, ab_bisect_opts_t *b) {
  memset(b, 0, sizeof *b);
  b->strategy = c->strategy;
  b->conf = c->conf;
  b->device = o->device;
  b->dev = o->dev;
  b->check = o->check;
  if (c->recorded) {
    b->dev.plan = o->plan;
    b->dev.plan_len = o->plan_len;
  }
  b->cap = c->family != AB_TUNE_REFERENCE; /* the caching strategy's cap; a card's size for the others */
  b->map_probes = o->map_probes;
  b->no_map = o->no_map;
  b->stop = o->stop;
}

/* Note [Allocator time]: what a setting costs in time, beside what it saves in memory: the
 * device calls of its run (cudaMalloc, cudaFree, the mappings of expandable segments), each
 * charged the host time the simulated card's cost model gives it (measured on an H200,
 * kernels/device/sim_cost.c), plus PyTorch's own host time per allocation and free,
 * AB_TUNE_HOST_NS_PER_OP, the same for every setting. So the model tells settings apart by
 * their device calls (a small max_split_size_mb frees and retries, a cap makes PyTorch free
 * cached segments and ask again, expandable segments map pages); what it leaves out is the
 * host time a setting adds inside PyTorch (garbage collection's scans; expandable segments'
 * bookkeeping, 13% more per call in torch_compare), and the first pass's own costs (page
 * faults, the driver's first calls: torch_compare's cold pass of the defaults took 1340 ns
 * per call where this model gives 404). */
static double alloc_time_s(const ab_events_t *es, const ab_run_t *run) {
  uint64_t ops = 0;
  for (size_t i = 0; i < es->n; i++) ops += es->ev[i].kind == AB_EV_ALLOC || (es->ev[i].kind == AB_EV_FREE && es->ev[i].aux != AB_FREE_COMPLETE);
  return (double)run->modeled_ns * 1e-9 + (double)ops * AB_TUNE_HOST_NS_PER_OP * 1e-9;
}

/* One configuration: its run, then its search, into r; run is the worker's, prepared. */
static void tune_one(const ab_events_t *es, const ab_tune_opts_t *o, ab_run_t *run, ab_tune_result_t *r) {
  double t0 = ab_clock_s();
  ab_bisect_opts_t b;
  ab_tune_probe_opts(o, &r->cand, &b);
  b.defer_band = true; /* Note [Bands where the answer rests], tune_job.h */
  ab_diag_t diag = {""};
  r->status = AB_RUN_INTERRUPTED; /* until a run says otherwise */
  /* The run, with the cost model on for its time (the search's probes run without it). */
  ab_run_opts_t timed;
  memset(&timed, 0, sizeof timed);
  timed.time_calls = true;
  timed.check = o->check;
  timed.stop = o->stop;
  /* A library's run goes to a process of its own, which takes no engine options (supervise.h):
   * its time is not modelled (alloc_time_s < 0). */
  bool apart = ab_supervise_apart(b.strategy);
  /* Kept at a few places as it goes, for the search's probes under other caps to go on from
   * (Note [A prefix shared], prefix.h): on the simulated card, the caching family's caps. */
  ab_prefix_t *prefix = ab_bisect_prefix_open(es, &b, 0);
  uint64_t held_peak = 0;
  ab_status st = apart ? ab_bisect_probe(es, &b, o->cap, NULL, run, &held_peak, NULL, &diag)
                       : ab_bisect_probe_kept(es, &b, o->cap, &timed, prefix, run, &held_peak, NULL, &diag);
  b.prefix = prefix;
  /* Without a cap, a run that completed is the search's unbudgeted probe: it is not made again. */
  if (st == AB_OK && o->cap == 0 && run->status == AB_RUN_OK) b.unbudgeted_peak = held_peak;
  if (st == AB_OK) {
    keep_run(r, run);
    r->alloc_time_s = apart ? -1.0 : alloc_time_s(es, run);
    r->band = ab_band_point(run);
    if (!apart && (run->status == AB_RUN_OK || run->status == AB_RUN_OOM))
      st = ab_band_measure(es, &b, o->cap, run, &r->band, &diag);
  }
  bool stopped = r->status == AB_RUN_INTERRUPTED || (o->stop && *o->stop);
  if (stopped) r->status = AB_RUN_INTERRUPTED;
  if (st == AB_OK && !stopped) st = ab_bisect_search(es, &b, run, &r->search, &diag);
  ab_prefix_close(prefix);
  if (st == AB_OK && r->search.interrupted) r->status = AB_RUN_INTERRUPTED;
  if (st != AB_OK) {
    r->status = AB_RUN_ERROR;
    snprintf(r->message, sizeof r->message, "%s", diag.msg);
  }
  r->wall_s = ab_clock_s() - t0;
}

/* ---- the threads ------------------------------------------------------------------------ */

typedef struct each_s {
  const ab_events_t *es;
  size_t n;
  ab_tune_task_fn fn;
  void *ctx;
  pthread_mutex_t lock;
  size_t next;       /* under lock */
  size_t workers;    /* under lock: those that prepared their run */
  uint64_t replayed; /* under lock: by the workers done */
} each_t;

static void *each_worker(void *arg) {
  each_t *p = arg;
  ab_run_t run;
  if (ab_run_prepare(&run, p->es) != AB_OK) return NULL;
  pthread_mutex_lock(&p->lock);
  p->workers++;
  for (size_t i; (i = p->next) < p->n;) {
    p->next++;
    pthread_mutex_unlock(&p->lock);
    p->fn(p->ctx, i, &run);
    pthread_mutex_lock(&p->lock);
  }
  p->replayed += run.replayed;
  pthread_mutex_unlock(&p->lock);
  ab_run_release(&run);
  return NULL;
}

bool ab_tune_each(const ab_events_t *es, size_t n, const ab_tune_opts_t *o, ab_tune_task_fn fn, void *ctx) {
  if (n == 0) return true; /* no run to prepare */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  size_t threads = o->jobs ? o->jobs : cores > 0 ? (size_t)cores : 1;
  if (threads > n) threads = n;
  each_t p = {es, n, fn, ctx, PTHREAD_MUTEX_INITIALIZER, 0, 0, 0};
  pthread_t *started = calloc(threads, sizeof *started);
  size_t nstarted = 0;
  for (size_t i = 1; started && i < threads; i++)
    if (pthread_create(&started[nstarted], NULL, each_worker, &p) == 0) nstarted++;
  each_worker(&p); /* this thread works too, so that the tasks go on if no thread can be started */
  for (size_t i = 0; i < nstarted; i++) pthread_join(started[i], NULL);
  free(started);
  pthread_mutex_destroy(&p.lock);
  if (o->replayed) *o->replayed += p.replayed;
  return p.workers > 0;
}

/* Note [The threads' ends]: the threads take the configurations in turn, each the next one
 * when its last is done, so the stage ends when the last one taken ends, and the longest are
 * taken first (the rule of longest processing time first): a long one taken last leaves the
 * other thread idle for most of it. What a configuration costs is known by its kind before it
 * runs: under max_split_size_mb the run with no cap holds cached oversize blocks until the
 * card is full, so that it passes every cap near the live peak in its first few thousand
 * events and the search's probes share nothing (Note [A prefix shared], prefix.h): each is a
 * whole replay. A budget search of another strategy aware of addresses (pooled) comes next,
 * its probes going on from the run's places, then the rest of the caching family, each a cap
 * map of tens of short replays; a strategy blind to addresses (raw, async) takes neither a map
 * nor a band, only a handful of probes, and fills the end of one thread while the other
 * finishes. On a random snapshot of 15 M entries max_split_size_mb:20 took 16 s, pooled 12 s,
 * the other caching settings 10 to 13 s each and raw and async 2 s each: taken in the grid's
 * order, pooled and max_split_size_mb:20 came last, and one thread ended alone. */

/* When c is taken (Note [The threads' ends]): 0 first, TURNS - 1 last. */
enum { WHOLE_PROBES, BUDGET_SEARCH, CAP_MAP, BLIND, TURNS };
static int turn_of(const ab_tune_candidate_t *c) {
  if (ab_strategy_address_blind(c->strategy)) return BLIND;
  if (strcmp(c->strategy, "caching") != 0) return BUDGET_SEARCH;
  ab_caching_conf_t conf;
  ab_diag_t ignored = {""};
  ab_caching_conf_defaults(&conf);
  bool split = ab_caching_conf_apply(&conf, "-c", c->conf, &ignored) == AB_OK && conf.max_split_size != UINT64_MAX;
  return split ? WHOLE_PROBES : CAP_MAP;
}

/* ab_tune_run's tasks: task k is configuration take[k]; on_done is called under done_lock. */
typedef struct runs_s {
  const ab_events_t *es;
  const ab_tune_opts_t *o;
  ab_tune_result_t *r;
  size_t n;
  size_t *take; /* the configurations in the order they are taken (Note [The threads' ends]) */
  pthread_mutex_t done_lock;
  size_t done; /* under done_lock */
} runs_t;

static void run_task(void *ctx, size_t k, ab_run_t *run) {
  runs_t *p = ctx;
  size_t i = p->take[k];
  if (p->o->stop && *p->o->stop) return; /* its result says interrupted */
  tune_one(p->es, p->o, run, &p->r[i]);
  pthread_mutex_lock(&p->done_lock);
  p->done++;
  if (p->o->on_done) p->o->on_done(p->o->on_done_ctx, &p->r[i], p->done, p->n);
  pthread_mutex_unlock(&p->done_lock);
}

ab_status ab_tune_run(const ab_events_t *es, const ab_tune_candidate_t *cands, size_t n, size_t first_order,
                      const ab_tune_opts_t *o, ab_tune_result_t *r, ab_diag_t *diag) {
  for (size_t i = 0; i < n; i++) {
    memset(&r[i], 0, sizeof r[i]);
    r[i].cand = cands[i];
    r[i].order = r[i].alike = first_order + i;
    r[i].status = AB_RUN_INTERRUPTED; /* until it runs */
  }
  size_t *take = malloc((n ? n : 1) * sizeof *take), m = 0;
  if (take == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory for the runs");
  for (int turn = 0; turn < TURNS; turn++)
    for (size_t i = 0; i < n; i++)
      if (turn_of(&cands[i]) == turn) take[m++] = i;
  runs_t p = {es, o, r, n, take, PTHREAD_MUTEX_INITIALIZER, 0};
  bool ran = ab_tune_each(es, n, o, run_task, &p);
  pthread_mutex_destroy(&p.done_lock);
  free(take);
  return ran ? AB_OK : ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory for the runs");
}

/* ab_tune_walk_bands's tasks: walk k is result k / variants's, of variant k % variants + 1. */
typedef struct walks_s {
  const ab_events_t *es;
  const ab_tune_opts_t *o;
  ab_tune_result_t **r;
  ab_band_walk_t *w;
  ab_status *st;   /* per walk; AB_ERR_INTERNAL until walked */
  ab_diag_t *diag; /* per walk */
} walks_t;

static void walk_task(void *ctx, size_t k, ab_run_t *run) {
  walks_t *p = ctx;
  const ab_tune_result_t *r = p->r[k / AB_PLACEMENT_VARIANTS];
  ab_bisect_opts_t b;
  ab_tune_probe_opts(p->o, &r->cand, &b);
  p->st[k] = ab_bisect_band_walk(p->es, &b, &r->search, (unsigned)(k % AB_PLACEMENT_VARIANTS) + 1, run, &p->w[k],
                                 &p->diag[k]);
}

ab_status ab_tune_walk_bands(const ab_events_t *es, const ab_tune_opts_t *o, ab_tune_result_t **r, size_t n,
                             ab_diag_t *diag) {
  size_t walks = n * AB_PLACEMENT_VARIANTS;
  walks_t p = {es, o, r, calloc(walks ? walks : 1, sizeof *p.w), calloc(walks ? walks : 1, sizeof *p.st),
               calloc(walks ? walks : 1, sizeof *p.diag)};
  ab_status st = AB_OK;
  if (p.w == NULL || p.st == NULL || p.diag == NULL) st = ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  for (size_t k = 0; k < walks && st == AB_OK; k++) p.st[k] = AB_ERR_INTERNAL;
  if (st == AB_OK && !ab_tune_each(es, walks, o, walk_task, &p))
    st = ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory for the runs");
  /* A walk that failed (not an OOM, which is a result) makes its configuration's error. */
  for (size_t i = 0; i < n && st == AB_OK; i++) {
    size_t bad = walks;
    for (size_t k = i * AB_PLACEMENT_VARIANTS; k < (i + 1) * AB_PLACEMENT_VARIANTS && bad == walks; k++)
      if (p.st[k] != AB_OK) bad = k;
    if (bad < walks) {
      r[i]->status = AB_RUN_ERROR;
      snprintf(r[i]->message, sizeof r[i]->message, "%s", p.diag[bad].msg[0] ? p.diag[bad].msg : "out of host memory");
      continue;
    }
    ab_bisect_band_merge(&r[i]->search, &p.w[i * AB_PLACEMENT_VARIANTS], AB_PLACEMENT_VARIANTS);
    if (r[i]->search.interrupted) r[i]->status = AB_RUN_INTERRUPTED;
  }
  free(p.w);
  free(p.st);
  free(p.diag);
  return st;
}

bool ab_tune_band_pending(const ab_tune_result_t *r) { return r->search.mapped && r->search.band_checked == 0; }

static int cmp_u64(uint64_t a, uint64_t b) { return a < b ? -1 : a > b; }

uint64_t ab_tune_deployable(const ab_tune_result_t *r) {
  if (!r->search.passed) return UINT64_MAX;
  return r->search.mapped ? r->search.safe_cap : r->search.min_budget;
}

bool ab_tune_completes(const ab_tune_result_t *r) { return r->status == AB_RUN_OK && r->band.oom_variants == 0; }

int ab_tune_compare(const ab_tune_result_t *a, const ab_tune_result_t *b, ab_tune_objective_t objective) {
  int ok = cmp_u64(!ab_tune_completes(a), !ab_tune_completes(b));
  /* No budget found ranks after every budget. */
  int budget = cmp_u64(ab_tune_deployable(a), ab_tune_deployable(b));
  int reserved = cmp_u64(a->band.reserved_hi, b->band.reserved_hi); /* the worst end of the band */
  double ta = a->alloc_time_s < 0 ? HUGE_VAL : a->alloc_time_s, tb = b->alloc_time_s < 0 ? HUGE_VAL : b->alloc_time_s;
  int time = (ta > tb) - (ta < tb); /* not modelled: after every time that is */
  int keys[4] = {ok, reserved, budget, time};
  if (objective == AB_TUNE_BUDGET) keys[0] = budget, keys[1] = ok, keys[2] = reserved;
  if (objective == AB_TUNE_TIME) keys[1] = time, keys[3] = reserved;
  for (int i = 0; i < 4; i++)
    if (keys[i]) return keys[i];
  return cmp_u64(a->order, b->order);
}

static int by_rank(const void *a, const void *b, void *objective) {
  return ab_tune_compare(a, b, *(const ab_tune_objective_t *)objective);
}

void ab_tune_rank(ab_tune_result_t *r, size_t n, ab_tune_objective_t objective) {
  qsort_r(r, n, sizeof *r, by_rank, &objective);
  for (size_t i = 0; i < n; i++) r[i].rank = i + 1;
}

void ab_tune_best_of_families(const ab_tune_result_t *r, size_t n, ab_tune_objective_t objective,
                              size_t best[AB_TUNE_FAMILIES]) {
  for (int f = 0; f < AB_TUNE_FAMILIES; f++) best[f] = SIZE_MAX;
  for (size_t i = 0; i < n; i++) {
    size_t *b = &best[r[i].cand.family];
    if (r[i].status != AB_RUN_OK) continue;
    if (*b == SIZE_MAX || ab_tune_compare(&r[i], &r[*b], objective) < 0) *b = i;
  }
}

/* Note [Traces alike]. */
static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xbf58476d1ce4e5b9ULL;
}

static bool alike(const ab_tune_trace_t *a, const ab_tune_trace_t *b) {
  const ab_events_t *x = a->es, *y = b->es;
  if (a->digest != b->digest || x->n != y->n || x->nkernels != y->nkernels || x->trace_ooms != y->trace_ooms ||
      a->plan_len != b->plan_len)
    return false;
  if (x->ev != y->ev && memcmp(x->ev, y->ev, x->n * sizeof *x->ev) != 0) return false;
  if (x->kernels != y->kernels && x->nkernels && memcmp(x->kernels, y->kernels, x->nkernels * sizeof *x->kernels) != 0)
    return false;
  return a->plan_len == 0 || a->plan == b->plan || memcmp(a->plan, b->plan, a->plan_len * sizeof *a->plan) == 0;
}

void ab_tune_alike(ab_tune_trace_t *traces, size_t n) {
  /* The events' own hash first; traces read from one file's bytes share their events, hashed
   * once. */
  for (size_t k = 0; k < n; k++) {
    ab_tune_trace_t *t = &traces[k];
    size_t shared = k;
    for (size_t j = 0; j < k && shared == k; j++)
      if (traces[j].es->ev == t->es->ev && traces[j].es->n == t->es->n) shared = j;
    t->digest = shared < k ? traces[shared].digest : ab_events_hash(t->es);
    t->same = k;
  }
  for (size_t k = 0; k < n; k++) {
    ab_tune_trace_t *t = &traces[k];
    uint64_t h = mix(t->digest, t->es->trace_ooms);
    for (size_t i = 0; i < t->plan_len; i++) h = mix(mix(h, t->plan[i].addr), t->plan[i].bytes);
    t->digest = h;
    for (size_t j = 0; j < k; j++)
      if (traces[j].same == j && alike(&traces[j], t)) {
        t->same = j;
        break;
      }
  }
}

/* Whether a and b, read as caching reads them, round every allocation
 * of es alike. */
static bool round_alike(const ab_events_t *es, const ab_caching_conf_t *a, const ab_caching_conf_t *b) {
  if (!ab_caching_conf_alike_but_rounding(a, b)) return false;
  if (memcmp(a->divisions, b->divisions, sizeof a->divisions) == 0) return true;
  for (size_t i = 0; i < es->n; i++)
    if (es->ev[i].kind == AB_EV_ALLOC && ab_caching_round_size(a, es->ev[i].bytes) != ab_caching_round_size(b, es->ev[i].bytes))
      return false;
  return true;
}

void ab_tune_settings_alike(const ab_events_t *es, const ab_tune_candidate_t *c, size_t n, bool plan, size_t *same) {
  ab_caching_conf_t *conf = calloc(n ? n : 1, sizeof *conf);
  bool *read = calloc(n ? n : 1, sizeof *read); /* conf[i] is configuration i's, as caching reads it */
  for (size_t i = 0; i < n; i++) {
    same[i] = i;
    if (conf == NULL || read == NULL || strcmp(c[i].strategy, "caching") != 0) continue; /* each runs, then */
    ab_diag_t ignored = {""};
    ab_caching_conf_defaults(&conf[i]);
    read[i] = ab_caching_conf_apply(&conf[i], "-c", c[i].conf, &ignored) == AB_OK;
    for (size_t j = 0; j < i && read[i] && same[i] == i; j++)
      if (same[j] == j && read[j] && (!plan || c[j].recorded == c[i].recorded) && round_alike(es, &conf[j], &conf[i]))
        same[i] = j;
  }
  free(conf);
  free(read);
}
