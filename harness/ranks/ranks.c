/* ranks.c: the zero workload as N ranks (ranks.h).
 *
 * 1. The arguments: the workload must be zero, without rank= and with no other world= than
 *    the ranks'; the strategy and -c are tried on a simulated card.
 * 2. Each rank of this process builds its stream; the streams are checked (full buffers,
 *    the same collectives everywhere) and their collectives digested.
 * 3. The communicators: on cuda, NCCL is loaded and one NCCL group makes one per thread;
 *    a launched rank meets the others first (link.h), then joins its own. Every wait
 *    is bounded (Note [Bounded waits], kernels/kernels.h).
 * 4. Each rank runs through ab_run_one, as a single run does, on its own device, with
 *    its communicator and the group's lockstep added to the replay, then leaves the group
 *    with its result.
 * 5. Where the results come together, one row per rank and the combined row. */
#include "harness/ranks/ranks.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/base/units.h"
#include "kernels/device/device_open.h"
#include "harness/run/pipeline.h"
#include "harness/run/results.h"
#include "harness/run/supervise.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

typedef struct rank_s {
  unsigned rank;            /* in the world */
  size_t *collectives;      /* the events of the stream's collectives, in order */
  unsigned ncollectives;
  unsigned at;              /* the collective it is at, 1-based */
  bool failed;              /* it gave up a wait (Note [Bounded waits]) */
  char fail_why[512];
  ab_waits_t waits;
  ab_run_spec_t o;          /* this rank's options: its device, its faults, quiet */
  char device[32];          /* its device spec */
  ab_events_t es;
  ab_run_t run;
  ab_comm_t *comm;          /* NULL on the simulated card */
  ab_group_t *group;
  const char *strategy;
  ab_run_hooks_t hooks;
  ab_rank_result_t result;
  pthread_t thread;
  bool started;             /* thread was created */
} rank_t;

/* ---- arguments ------------------------------------------------------------------------------ */

/* The spec of rank `rank` of `world` from -w zero[:ARGS] (into spec). */
static ab_status rank_spec(const char *workload, unsigned world, unsigned rank, char *spec, size_t size,
                           ab_diag_t *diag) {
  const char *colon = strchr(workload, ':');
  size_t name_len = colon ? (size_t)(colon - workload) : strlen(workload);
  if (name_len != 4 || strncmp(workload, "zero", 4) != 0)
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "--ranks: -w %.*s makes no collectives; only -w zero runs as several ranks (run others without "
                       "--ranks)",
                       (int)name_len, workload);
  const char *args = colon ? colon + 1 : "";
  ab_kvlist_t kv;
  AB_TRY(ab_kv_parse("-w zero", args, '=', &kv, diag));
  if (ab_kv_get(&kv, "rank"))
    return ab_kv_errorf(&kv, ab_kv_get(&kv, "rank"), diag, "rank= comes from --ranks (each rank runs its own)");
  uint64_t w = world;
  AB_TRY(ab_kv_get_u64(&kv, "world", 1, 1 << 16, &w, diag));
  if (w != world)
    return ab_kv_errorf(&kv, ab_kv_get(&kv, "world"), diag, "world=%llu, but there are %u ranks", (unsigned long long)w,
                        world);
  /* The arguments again, world= left out, then the rank's place. */
  size_t at = (size_t)snprintf(spec, size, "zero:");
  for (size_t i = 0; i < kv.n && at < size; i++) {
    const ab_kv_t *it = &kv.items[i];
    if (it->key_len == 5 && strncmp(it->key, "world", 5) == 0) continue;
    at += (size_t)snprintf(spec + at, size - at, "%.*s=%.*s,", (int)it->key_len, it->key, (int)it->val_len, it->val);
  }
  if (at < size) at += (size_t)snprintf(spec + at, size - at, "world=%u,rank=%u", world, rank);
  if (at >= size) return ab_diag_set(diag, AB_ERR_INVALID, "-w %s: too long", workload);
  return AB_OK;
}

/* Opens the first rank's device as it will run and makes the strategy on it, so that a bad
 * -c, --budget or --faults is one error before anything runs. Faults are left out on the
 * simulated card (they are for the run), kept on cuda (which refuses them). */
static ab_status try_strategy(const ab_run_spec_t *o, const char *device, ab_diag_t *diag) {
  ab_pipeline_t p = {.device = device, .dev = o->dev, .strategy = o->strategy, .conf = o->conf};
  if (strncmp(device, "cuda", 4) != 0) memset(&p.dev.faults, 0, sizeof p.dev.faults);
  return ab_pipeline_check(&p, NULL, diag);
}

static bool collective(const ab_kernel_t *k) { return k->op == AB_K_ALLGATHER || k->op == AB_K_REDUCE_SCATTER; }

/* The events of es's collectives, in order, for naming them in messages. */
static ab_status list_collectives(rank_t *x, ab_diag_t *diag) {
  const ab_events_t *es = &x->es;
  size_t n = 0;
  for (size_t i = 0; i < es->n; i++)
    if (es->ev[i].kind == AB_EV_KERNEL && collective(&es->kernels[es->ev[i].id])) n++;
  x->collectives = malloc((n ? n : 1) * sizeof *x->collectives);
  if (x->collectives == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  for (size_t i = 0, k = 0; i < es->n; i++)
    if (es->ev[i].kind == AB_EV_KERNEL && collective(&es->kernels[es->ev[i].id])) x->collectives[k++] = i;
  x->ncollectives = (unsigned)n;
  return AB_OK;
}

/* The digest is FNV-1a over the collectives' kinds and sizes, in order. */
ab_status ab_ranks_check_stream(const ab_events_t *es, unsigned world, uint64_t *digest, ab_diag_t *diag) {
  uint64_t *bytes = calloc(es->nids ? es->nids : 1, sizeof *bytes);
  if (bytes == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  uint64_t h = 1469598103934665603ULL;
  ab_status st = AB_OK;
  for (size_t i = 0; i < es->n && st == AB_OK; i++) {
    const ab_event_t *e = &es->ev[i];
    if (e->kind == AB_EV_ALLOC) bytes[e->id] = e->bytes;
    if (e->kind != AB_EV_KERNEL || !collective(&es->kernels[e->id])) continue;
    const ab_kernel_t *k = &es->kernels[e->id];
    uint32_t full = k->buf[k->op == AB_K_ALLGATHER ? 1 : 0];
    if (bytes[full] / world < k->n)
      st = ab_diag_set(diag, AB_ERR_INVALID,
                       "-w %s: event %zu: the %s's full buffer (id %u) holds %llu bytes, less than %u ranks x %llu bytes",
                       es->source, i, ab_kernel_name((ab_kernel_op_t)k->op), full, (unsigned long long)bytes[full], world,
                       (unsigned long long)k->n);
    uint64_t words[2] = {k->op, k->n};
    for (size_t w = 0; w < 2; w++)
      for (int b = 0; b < 64; b += 8) h = (h ^ ((words[w] >> b) & 0xff)) * 1099511628211ULL;
  }
  free(bytes);
  *digest = h;
  return st;
}

/* Resolves --device for rank i of this process: "cuda:ORDINAL" or the simulated card's spec;
 * *ordinal is -1 on the simulated card. */
static ab_status rank_device(const char *spec, const ab_ranks_opts_t *r, unsigned i, char *out, size_t size,
                             int *ordinal, ab_diag_t *diag) {
  if (strcmp(spec, "auto") == 0) spec = ab_device_cuda_usable() ? "cuda" : "sim";
  if (strncmp(spec, "cuda", 4) != 0 || (spec[4] != '\0' && spec[4] != ':')) {
    snprintf(out, size, "%s", spec);
    *ordinal = -1;
    return AB_OK;
  }
  uint64_t base = 0;
  if (spec[4] == ':') {
    if (r->link)
      return ab_diag_set(diag, AB_ERR_INVALID,
                         "--device %s: with --ranks env each rank drives the GPU of its rank on its host; give --device "
                         "cuda",
                         spec);
    AB_TRY(ab_parse_u64("--device cuda:N", spec + 5, 4095, &base, diag));
  }
  *ordinal = r->link ? (int)r->link->local_rank : (int)(base + i);
  snprintf(out, size, "cuda:%d", *ordinal);
  return AB_OK;
}

/* ---- a rank's run ------------------------------------------------------------------------------ */

/* "collective 12 of 40 (allgather of 8388608 bytes per rank, event 3456)". */
static void describe(const rank_t *rk, char *what, size_t size) {
  if (rk->at == 0 || rk->at > rk->ncollectives) {
    snprintf(what, size, "collective %u", rk->at);
    return;
  }
  size_t i = rk->collectives[rk->at - 1];
  const ab_kernel_t *k = &rk->es.kernels[rk->es.ev[i].id];
  snprintf(what, size, "collective %u of %u (%s of %llu bytes per rank, event %zu)", rk->at, rk->ncollectives,
           ab_kernel_name((ab_kernel_op_t)k->op), (unsigned long long)k->n, i);
}

static bool lockstep(void *ctx, ab_lockstep_t phase, char *why, size_t size) {
  rank_t *rk = ctx;
  if (phase == AB_LOCKSTEP_ENTER) rk->at++;
  char what[192];
  describe(rk, what, sizeof what);
  const ab_waits_t *w = &rk->waits;
  int sig = w->stop ? (int)*w->stop : 0;
  ab_verdict_t v;
  if (sig && phase == AB_LOCKSTEP_ENTER) { /* a signal: no more collectives */
    snprintf(why, size, "interrupted (%s) while rank %u was at %s", ab_signal_name(sig), rk->rank, what);
    v = AB_VERDICT_FAIL;
  } else {
    v = rk->group->ops->arrive(rk->group, rk->rank, phase, what, why, size);
  }
  if (v == AB_VERDICT_GO) return true;
  /* Some device may hold a collective no peer will match: abort ends it. */
  if (v != AB_VERDICT_STOP && rk->comm) {
    ab_diag_t d = {""};
    if (ab_comm_abort(rk->comm, why, &d) != AB_OK) {
      size_t n = strlen(why);
      snprintf(why + n, size - n, "; aborting the communicator: %s", d.msg);
    }
  }
  if (v == AB_VERDICT_FAIL) {
    rk->failed = true;
    snprintf(rk->fail_why, sizeof rk->fail_why, "%s", why);
  }
  return false;
}

static void add_to_replay(void *ctx, ab_run_opts_t *ro) {
  rank_t *rk = ctx;
  ro->comm = rk->comm;
  ro->lockstep = lockstep;
  ro->lockstep_ctx = rk;
}

static void *rank_main(void *arg) {
  rank_t *rk = arg;
  ab_rank_result_t *res = &rk->result;
  ab_table_t row;
  ab_table_init(&row, ab_summary_cols, ab_summary_ncols);
  ab_diag_t diag = {""};
  res->status = ab_run_one(&rk->o, &rk->es, rk->strategy, &rk->run, &row, NULL, &diag);
  if (rk->failed && res->status == AB_OK) { /* it gave up a wait: its run failed */
    res->status = AB_ERR_IO;
    snprintf(diag.msg, sizeof diag.msg, "%s", rk->fail_why);
    rk->run.status = AB_RUN_ERROR;
    rk->run.error = AB_ERR_IO;
    snprintf(rk->run.message, sizeof rk->run.message, "%s", rk->fail_why);
  }
  res->run = rk->run;
  res->run.ptr = NULL;
  res->run.live = NULL;
  res->run.requested = NULL;
  res->run.timeline = NULL;
  res->run.step_ms = NULL;
  if (res->status != AB_OK && rk->run.status == AB_RUN_OK) res->run.status = AB_RUN_ERROR; /* it never ran */
  res->events = rk->es.n;
  res->live_peak = ab_bisect_peak_requested(&rk->es);
  snprintf(res->workload, sizeof res->workload, "%s", rk->es.source);
  const char *device = row.nrows ? ab_table_get(&row, 0, "device") : NULL;
  snprintf(res->device, sizeof res->device, "%s", device ? device : rk->device);
  const char *budget = row.nrows ? ab_table_get(&row, 0, "budget_bytes") : NULL;
  res->budget_bytes = budget ? strtoull(budget, NULL, 10) : rk->o.dev.budget_bytes;
  snprintf(res->diag, sizeof res->diag, "%s", diag.msg);
  ab_table_free(&row);
  rk->group->ops->leave(rk->group, rk->rank, res);
  return NULL;
}

/* ---- the combined row --------------------------------------------------------------------------- */

static int severity(const ab_rank_result_t *r) {
  if (r->status != AB_OK || r->run.status == AB_RUN_ERROR) return 3;
  return r->run.status == AB_RUN_OOM ? 2 : r->run.status == AB_RUN_STOPPED ? 1 : 0;
}

ab_status ab_ranks_combine(ab_table_t *summary, const ab_run_spec_t *o, const ab_rank_result_t *results, unsigned n) {
  ab_run_t all;
  memset(&all, 0, sizeof all);
  ab_hist_reset(&all.alloc_ns);
  ab_hist_reset(&all.free_ns);
  uint64_t events = 0, live_peak = 0;
  int worst = -1;
  all.plan.has = n > 0; /* the plan's counts, summed when every rank has them */
  for (unsigned i = 0; i < n; i++) {
    const ab_run_t *r = &results[i].run;
    ab_stats_merge(&all.stats, &r->stats);
    all.plan.has = all.plan.has && r->plan.has;
    all.plan.hits += r->plan.hits;
    all.plan.misses += r->plan.misses;
    all.plan.bytes += r->plan.bytes;
    ab_hist_merge(&all.alloc_ns, &r->alloc_ns);
    ab_hist_merge(&all.free_ns, &r->free_ns);
    events += results[i].events;
    live_peak += results[i].live_peak; /* summed, as the peaks are */
    all.events_done += r->events_done;
    all.kernel_ms += r->kernel_ms;
    all.harness_ns += r->harness_ns;
    all.comm_bytes += r->comm_bytes;
    all.kernels_launched += r->kernels_launched;
    all.kernels_skipped += r->kernels_skipped;
    if (r->loop_s > all.loop_s) all.loop_s = r->loop_s;
    if (r->step_ms_p50 > all.step_ms_p50) all.step_ms_p50 = r->step_ms_p50;
    if (worst < 0 || severity(&results[i]) > severity(&results[worst])) worst = (int)i;
  }
  const ab_rank_result_t *w = &results[worst];
  all.status = severity(w) == 3 ? AB_RUN_ERROR : w->run.status;
  all.oom = w->run.oom;
  /* The workload without its rank: zero:ARGS,world=N,rank=all. */
  char workload[sizeof results[0].workload + 8], device[128];
  snprintf(workload, sizeof workload, "%s", results[0].workload);
  char *rank = strstr(workload, ",rank=");
  if (rank) snprintf(rank, sizeof workload - (size_t)(rank - workload), ",rank=all");
  const char *card = results[0].device;
  if (strncmp(card, "cuda:", 5) == 0 && strchr(card, ' ')) card = strchr(card, ' ') + 1;
  snprintf(device, sizeof device, "%u x %s", n, card);
  ab_run_desc_t desc = {workload, o->strategy, o->conf, device, results[0].budget_bytes, o->seed, live_peak, NULL};
  /* Only the stream's length is read from it. */
  ab_events_t shell;
  memset(&shell, 0, sizeof shell);
  shell.n = events;
  return ab_results_add_summary(summary, &desc, &shell, &all);
}

/* ---- the run --------------------------------------------------------------------------------------- */

static ab_status rows(ab_table_t *summary, const ab_run_spec_t *o, const ab_rank_result_t *results, unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    const ab_rank_result_t *res = &results[i];
    ab_run_desc_t desc = {res->workload, o->strategy, o->conf, res->device, res->budget_bytes, o->seed, res->live_peak, NULL};
    ab_events_t shell;
    memset(&shell, 0, sizeof shell);
    shell.n = res->events;
    AB_TRY(ab_results_add_summary(summary, &desc, &shell, &res->run));
  }
  return ab_ranks_combine(summary, o, results, n);
}

/* A signal stopped the job: diag says what this process was waiting for when it came. A
 * wait that gave up said so itself (a barrier, the meeting, NCCL's making); else the
 * watchdog that aborted a communicator did; else the rank was between waits. */
static ab_status interrupted(const rank_t *rk, unsigned local, ab_comm_t **comms, ab_status st, int sig,
                             ab_diag_t *diag) {
  /* The first wait given up: a rank's (a barrier), a communicator's, or the setup's. */
  for (unsigned i = 0; i < local; i++)
    if (rk[i].failed) return ab_diag_set(diag, AB_ERR_IO, "%s", rk[i].fail_why);
  for (unsigned i = 0; comms && i < local; i++) {
    char why[AB_DIAG_BYTES] = "";
    if (comms[i]) ab_comm_aborted(comms[i], why, sizeof why);
    if (why[0]) return ab_diag_set(diag, AB_ERR_IO, "%s", why);
  }
  if (st != AB_OK && strncmp(diag->msg, "interrupted", 11) == 0) return AB_ERR_IO;
  if (st != AB_OK) {
    char was[AB_DIAG_BYTES];
    snprintf(was, sizeof was, "%s", diag->msg);
    return ab_diag_set(diag, AB_ERR_IO, "interrupted (%s): %s", ab_signal_name(sig), was);
  }
  return ab_diag_set(diag, AB_ERR_IO, "interrupted (%s) while rank %u ran, between collectives", ab_signal_name(sig),
                     rk[0].rank);
}

/* 128 bytes for a clique on the simulated card, where nothing but the meeting reads them. */
static void sim_id(ab_comm_id_t *id) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 16);
  for (size_t i = 0; i < sizeof id->bytes; i++) {
    x += 0x9E3779B97F4A7C15ULL; /* splitmix64 */
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    id->bytes[i] = (unsigned char)(z ^ (z >> 31));
  }
}

ab_status ab_ranks_run(const ab_run_spec_t *o, const ab_ranks_opts_t *r, ab_table_t *summary, ab_rank_result_t *results,
                       unsigned *nresults, ab_diag_t *diag) {
  if (nresults) *nresults = 0;
  unsigned world = r->link ? r->link->world : r->n, local = r->link ? 1 : r->n;
  unsigned first = r->link ? r->link->rank : 0;
  if (world == 0 || world > (r->link ? 1u << 16 : AB_RANKS_MAX))
    return ab_diag_set(diag, AB_ERR_INVALID, "--ranks %u: expected 1 to %u ranks", world, AB_RANKS_MAX);
  if (o->faults_rank >= (int)world)
    return ab_diag_set(diag, AB_ERR_INVALID, "--faults rank=%d: there are ranks 0 to %u", o->faults_rank, world - 1);
  /* A library's every run is made in a process of its own (supervise.h), but the ranks share
   * this one: their lockstep, their NCCL communicators (made together, in one group, from this
   * process's CUDA context) and, as threads, one copy of the library's globals. */
  if (ab_supervise_library(o->strategy))
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "--ranks: -s %s: a library runs in a process of its own, and the ranks share this one (their "
                       "lockstep and NCCL communicators); run it without --ranks",
                       o->strategy);
  char spec[512];
  AB_TRY(rank_spec(o->workload, world, 0, spec, sizeof spec, diag));

  rank_t *rk = calloc(local, sizeof *rk);
  int *ordinals = calloc(local, sizeof *ordinals);
  ab_comm_t **comms = calloc(local, sizeof *comms);
  ab_rank_result_t *all = calloc(world, sizeof *all);
  ab_group_t *group = NULL;
  ab_status st = rk && ordinals && comms && all ? AB_OK : ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  uint64_t digest = 0;
  bool cuda = false;
  for (unsigned i = 0; i < local && st == AB_OK; i++) {
    rk[i].rank = first + i;
    ab_events_init(&rk[i].es);
    st = rank_device(o->device, r, i, rk[i].device, sizeof rk[i].device, &ordinals[i], diag);
    cuda = ordinals[i] >= 0;
  }
  if (st == AB_OK) st = try_strategy(o, rk[0].device, diag);
  for (unsigned i = 0; i < local && st == AB_OK; i++) {
    rank_t *x = &rk[i];
    x->strategy = o->strategy;
    st = rank_spec(o->workload, world, x->rank, spec, sizeof spec, diag);
    if (st == AB_OK) st = ab_run_build(o, spec, &x->es, NULL, diag);
    uint64_t d = 0;
    if (st == AB_OK) st = ab_ranks_check_stream(&x->es, world, &d, diag);
    if (st == AB_OK && i > 0 && d != digest)
      st = ab_diag_set(diag, AB_ERR_INVALID, "--ranks: rank %u makes other collectives than rank 0 (-w %s)", x->rank, spec);
    digest = d;
    if (st == AB_OK && ab_run_prepare(&x->run, &x->es) != AB_OK)
      st = ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
    if (st == AB_OK) st = list_collectives(x, diag);
    x->waits = r->waits;
    x->o = *o;
    x->o.device = x->device;
    x->o.quiet = true; /* no progress lines from several threads */
    x->o.faults_rank = -1;
    if (o->faults_rank >= 0 && (unsigned)o->faults_rank != x->rank) memset(&x->o.dev.faults, 0, sizeof x->o.dev.faults);
    x->hooks.ctx = x;
    x->hooks.replay_opts = add_to_replay;
    x->o.hooks = &x->hooks;
  }

  /* Communicators and the group. */
  if (st == AB_OK && cuda) st = ab_comm_load(r->nccl, diag);
  if (st == AB_OK && r->link) {
    ab_comm_id_t id;
    memset(&id, 0, sizeof id);
    if (r->link->rank == 0) {
      if (cuda)
        st = ab_comm_unique_id(&id, diag);
      else
        sim_id(&id);
    }
    if (st == AB_OK)
      st = ab_link_meet(r->link, digest,
                        "stream makes other collectives than rank 0's: give every rank the same -w arguments and seed",
                        &id, r->say, "allocbench run", diag);
    if (st == AB_OK) st = ab_group_link(r->link, &group, diag);
    if (st == AB_OK && cuda) st = ab_comm_init_rank(ordinals[0], world, first, &id, &r->waits, &comms[0], diag);
  } else if (st == AB_OK) {
    st = ab_group_threads(world, &r->waits, &group, diag);
    if (st == AB_OK && cuda) st = ab_comm_init_all(local, ordinals, &r->waits, comms, diag);
    if (st != AB_OK && cuda) ab_diag_prefix(diag, "--ranks %u on cuda: ", world);
  }
  /* Met, but no communicator: the other ranks hear of it now rather than at their deadline. */
  for (unsigned i = 0; st != AB_OK && group && i < local; i++) {
    rk[i].result.status = st;
    snprintf(rk[i].result.diag, sizeof rk[i].result.diag, "%s", diag->msg);
    group->ops->leave(group, rk[i].rank, &rk[i].result);
  }

  /* The ranks. */
  if (st == AB_OK) {
    for (unsigned i = 0; i < local; i++) {
      rk[i].comm = comms[i];
      rk[i].group = group;
    }
    if (r->link) {
      rank_main(&rk[0]);
    } else {
      for (unsigned i = 0; i < local && st == AB_OK; i++) {
        if (pthread_create(&rk[i].thread, NULL, rank_main, &rk[i]) != 0)
          st = ab_diag_set(diag, AB_ERR_INTERNAL, "cannot start the thread of rank %u", i);
        else
          rk[i].started = true;
      }
      /* A rank that never started leaves at once, so that the others stop. */
      for (unsigned i = 0; i < local; i++)
        if (!rk[i].started) {
          rk[i].result.status = AB_ERR_INTERNAL;
          snprintf(rk[i].result.diag, sizeof rk[i].result.diag, "its thread could not start");
          group->ops->leave(group, rk[i].rank, &rk[i].result);
        }
      for (unsigned i = 0; i < local; i++)
        if (rk[i].started) pthread_join(rk[i].thread, NULL);
    }
  }
  bool have = false;
  if (st == AB_OK) {
    /* A launched rank whose own run failed says that, rather than what followed from it. */
    ab_diag_t got = {""};
    ab_status heard = group->ops->results(group, all, &have, &got);
    bool failed = !have && local == 1 && (rk[0].result.status != AB_OK || rk[0].result.run.status == AB_RUN_ERROR);
    if (heard != AB_OK && !failed) st = ab_diag_set(diag, heard, "%s", got.msg);
  }
  /* A rank lost before it reported is named by its spec all the same. */
  for (unsigned i = 0; st == AB_OK && have && i < world; i++)
    if (all[i].workload[0] == '\0') st = rank_spec(o->workload, world, i, all[i].workload, sizeof all[i].workload, diag);
  if (st == AB_OK && have) {
    st = rows(summary, o, all, world);
    if (results) memcpy(results, all, world * sizeof *all);
    if (nresults) *nresults = world;
  }
  /* The status: the first rank that failed, of those this process knows. */
  const ab_rank_result_t *known = have ? all : local && rk ? &rk[0].result : NULL;
  unsigned nknown = have ? world : (st == AB_OK ? local : 0);
  for (unsigned i = 0; i < nknown && st == AB_OK; i++)
    if (known[i].status != AB_OK || known[i].run.status == AB_RUN_ERROR)
      st = ab_diag_set(diag, known[i].status != AB_OK ? known[i].status : known[i].run.error, "rank %u: %s",
                       have ? i : first + i, known[i].status != AB_OK ? known[i].diag : known[i].run.message);
  int sig = r->waits.stop ? (int)*r->waits.stop : 0;
  if (sig && rk) st = interrupted(rk, local, comms, st, sig, diag);

  for (unsigned i = 0; comms && i < local; i++) {
    ab_diag_t d = {""};
    if (ab_comm_destroy(comms[i], &d) != AB_OK && st == AB_OK) st = ab_diag_set(diag, AB_ERR_CUDA, "%s", d.msg);
  }
  if (group) group->ops->destroy(group);
  for (unsigned i = 0; rk && i < local; i++) {
    ab_run_release(&rk[i].run);
    ab_events_free(&rk[i].es);
    free(rk[i].collectives);
  }
  free(rk);
  free(ordinals);
  free(comms);
  free(all);
  return st;
}
