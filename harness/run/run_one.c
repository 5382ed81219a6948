/* run_one.c: the run as a service (run_one.h). */
#include "harness/run/run_one.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/base/clock.h"
#include "kernels/base/units.h"
#include "harness/run/band.h"
#include "harness/run/oommap.h"
#include "harness/run/oomreport.h"
#include "harness/run/pipeline.h"
#include "harness/run/results.h"
#include "harness/run/supervise.h"
#include "strategies/strategy.h"
#include "strategies/protocol/caching_conf.h"
#include "workloads/workload.h"
#include "harness/run/stop.h"

void ab_run_spec_defaults(ab_run_spec_t *o, const char *cmd) {
  memset(o, 0, sizeof *o);
  o->cmd = cmd;
  o->device = "auto";
  o->out_dir = "results/latest";
  o->seed = 42;
  o->timeline = true;
  o->kernels = true;
  o->dev.cost_model = true;
  o->faults_rank = -1;
}

bool ab_run_device_said = false;

FILE *ab_run_notes = NULL;

static FILE *notes(void) { return ab_run_notes ? ab_run_notes : stderr; }

void ab_run_note_device(const ab_run_spec_t *o, const char *name, ab_device_kind_t kind) {
  if (strcmp(o->device, "auto") == 0 && !o->quiet && !ab_run_device_said) {
    fprintf(notes(), "%s: --device auto: using %s%s\n", o->cmd, name,
            kind == AB_DEVICE_SIM ? " (no usable GPU; the simulated card)" : "");
    ab_run_device_said = true;
  }
}

ab_status ab_run_card_total(const ab_run_spec_t *o, uint64_t *total, ab_diag_t *diag) {
  ab_pipeline_t p = {.device = o->device, .dev = o->dev, .strategy = "raw"};
  ab_world_t closed;
  AB_TRY(ab_pipeline_check(&p, &closed, diag));
  *total = closed.total_bytes;
  return AB_OK;
}

ab_status ab_run_resolve_cap(ab_run_spec_t *o, ab_diag_t *diag) {
  if (o->cap_fraction <= 0) return AB_OK;
  uint64_t total;
  AB_TRY(ab_run_card_total(o, &total, diag));
  o->cap_bytes = (uint64_t)(o->cap_fraction * (double)total);
  /* A cap_bytes of 0 is no cap: a fraction too small to make a byte is refused, not dropped. */
  if (o->cap_bytes == 0)
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "--cap: a fraction of %g is a cap of 0 bytes on a card of %llu bytes (expected a fraction of at least 1/%llu)",
                       o->cap_fraction, (unsigned long long)total, (unsigned long long)total);
  o->cap_fraction = 0;
  return AB_OK;
}

ab_status ab_run_trace_limits(const ab_run_spec_t *o, uint64_t *cap, uint64_t *card, ab_diag_t *diag) {
  AB_TRY(ab_run_card_total(o, card, diag));
  *cap = o->cap_bytes;
  ab_caching_conf_t conf;
  ab_caching_conf_defaults(&conf);
  if (*cap == 0 && o->conf && ab_caching_conf_apply(&conf, "-c", o->conf, NULL) == AB_OK && conf.memory_fraction < 1.0)
    *cap = (uint64_t)(conf.memory_fraction * (double)*card); /* as PyTorch (and caching.c) make it */
  return AB_OK;
}

ab_status ab_run_build(const ab_run_spec_t *o, const char *spec, ab_events_t *es, ab_trace_info_t *info, ab_diag_t *diag) {
  ab_build_opts_t b = {.stop = &ab_run_stop, .info = info};
  if (strncmp(spec, "replay:", 7) == 0) {
    ab_events_init(es); /* released on failure, as a build's */
    AB_TRY(ab_run_trace_limits(o, &b.cap, &b.card, diag));
  }
  ab_status st = ab_workload_build_with(spec, o->seed, &b, es, diag);
  if (st == AB_OK && o->out_dir && (st = ab_results_check_inputs(o->out_dir, diag)) != AB_OK) ab_events_free(es);
  /* Note [Pools of a trace] (trace_builder.h): the figures cannot be exact, and every row says so. */
  if (st == AB_OK && es->approximate[0]) fprintf(notes(), "%s: %s: approximate: %s\n", o->cmd, spec, es->approximate);
  return st;
}

/* Progress on a terminal, at most ten updates a second. */
typedef struct progress_s {
  const char *label;
  double last; /* ab_clock_s() */
  bool shown;
} progress_t;

static void show_progress(void *ctx, size_t done, size_t total) {
  progress_t *p = ctx;
  double now = ab_clock_s();
  if (p->shown && now - p->last < 0.1) return;
  p->last = now;
  p->shown = true;
  fprintf(notes(), "\r%s: %3.0f%% (%zu/%zu events)", p->label, 100.0 * (double)done / (double)total, done, total);
  fflush(notes());
}

/* At an OOM: the segment map, then the command's own hook. */
typedef struct oom_ctx_s {
  ab_oommap_t *map;
  const ab_run_hooks_t *hooks; /* may be NULL */
} oom_ctx_t;

/* The run's record taken, at its end or OOM, before what is left live is freed. */
static void take_record(void *ctx, ab_strategy_t *s, const ab_run_t *run) {
  (void)ctx;
  (void)run;
  ab_adaptor_trace_capture(s);
}

static void at_oom(void *ctx, ab_strategy_t *s, const ab_run_t *run) {
  oom_ctx_t *c = ctx;
  ab_oommap_capture(c->map, s, run);
  if (c->hooks && c->hooks->record) take_record(NULL, s, run);
}

/* The strategy wrapped in a trace adaptor that records into the log ctx. */
static ab_status wrap_record(void *ctx, ab_strategy_t **s, ab_diag_t *diag) {
  ab_strategy_t *wrapped;
  ab_status st = ab_adaptor_trace_create(*s, ctx, &wrapped);
  if (st != AB_OK)
    return ab_diag_set(diag, st, "cannot record the run: %s", (*s)->dev->diag.msg[0] ? (*s)->dev->diag.msg : ab_strerror(st));
  *s = wrapped;
  return AB_OK;
}

/* --cap: within the card, and for a strategy that has PyTorch's cap (its conf takes
 * per_process_memory_fraction). */
static ab_status check_cap(const ab_pipeline_t *p, ab_diag_t *diag) {
  ab_pipeline_t plain = *p;
  plain.memory_cap = 0;
  ab_world_t closed;
  AB_TRY(ab_pipeline_check(&plain, &closed, diag));
  char a[32], b[32];
  if (p->memory_cap > closed.total_bytes)
    return ab_diag_set(diag, AB_ERR_INVALID, "--cap %s is more than the device's total of %s",
                       ab_format_bytes(p->memory_cap, a, sizeof a), ab_format_bytes(closed.total_bytes, b, sizeof b));
  if (ab_pipeline_check(p, NULL, diag) != AB_OK)
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "--cap: %s has no memory cap (PyTorch's per_process_memory_fraction); give it --budget instead",
                       p->strategy);
  return AB_OK;
}

/* A planning strategy's plan (planned, arena): its hits and misses, or, where it made none,
 * why (its plan.* statistics, strategies/planned.c). */
static void say_plan(const ab_run_spec_t *o, const ab_events_t *es, const char *strategy, ab_strategy_t *s) {
  int64_t hits, misses, placed, profiled, unplaceable;
  if (!ab_strategy_memory_stat(s, "plan.hits", &hits) || !ab_strategy_memory_stat(s, "plan.misses", &misses)) return;
  if (!ab_strategy_memory_stat(s, "plan.allocations", &placed) || !ab_strategy_memory_stat(s, "plan.profiled", &profiled) ||
      !ab_strategy_memory_stat(s, "plan.unplaceable", &unplaceable) || placed > 0 || es->nids == 0) {
    fprintf(notes(), "%s: %s: %lld allocations at their planned offsets, %lld missed the plan\n", o->cmd, strategy,
            (long long)hits, (long long)misses);
    return;
  }
  const char *missed = hits + misses ? "; every allocation missed it" : "";
  if (unplaceable)
    fprintf(notes(), "%s: %s: no plan: the %lld profiled allocations' sizes add up past what one address range holds (2^64 bytes)%s\n",
            o->cmd, strategy, (long long)profiled, missed);
  else if (es->nsteps)
    fprintf(notes(), "%s: %s: no plan: its profile, the first profile_steps steps, held no allocation%s\n", o->cmd, strategy,
            missed);
  else
    fprintf(notes(), "%s: %s: no plan: its profile, profile_share of the %u allocations (the stream has no steps), held none%s\n",
            o->cmd, strategy, es->nids, missed);
}

/* The run's placement band (band.h): its figures under each placement variant of the
 * simulated card, each replayed as the run was (its budget or cap, its address plan). A run
 * of the ranks (replay_opts) shares its lockstep with the other ranks and a run under a
 * variant the user chose (--placement) is the one placement: their band is their figures. */
static ab_status measure_band(const ab_run_spec_t *o, const ab_events_t *es, const ab_pipeline_t *p, const ab_run_t *run,
                              ab_band_t *band, ab_diag_t *diag) {
  *band = ab_band_point(run);
  if (o->dev.placement || (o->hooks && o->hooks->replay_opts)) return AB_OK;
  if (run->status != AB_RUN_OK && run->status != AB_RUN_OOM) return AB_OK;
  ab_bisect_opts_t b;
  memset(&b, 0, sizeof b);
  b.strategy = p->strategy;
  b.conf = p->conf;
  b.device = p->device;
  b.dev = p->dev;
  b.cap = p->memory_cap != 0;
  b.stop = &ab_run_stop;
  ab_run_t variant;
  if (ab_run_prepare(&variant, es) != AB_OK) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  ab_status st = ab_band_measure(es, &b, b.cap ? p->memory_cap : p->dev.budget_bytes, &variant, band, diag);
  ab_run_release(&variant);
  return st;
}

/* What a run in a process of its own carries besides ab_supervise_job_t, each way: the spec,
 * and the reply that follows the run, with the summary rows it added (ncols strings each)
 * and, when recorded, the log's arrays after them. */
typedef struct run_args_s {
  uint64_t seed;
  int32_t faults_rank, format;
  bool timeline, check, kernels, verify, quiet, verbose, recorded_addresses, device_said;
  bool record; /* replay's exports: the child records, and the log comes back */
} run_args_t;
typedef struct run_reply_s {
  bool device_said;
  uint64_t nrows, ncols;
  ab_trace_log_t log; /* its counts and flags; the arrays follow the rows */
} run_reply_t;

static void put_log(ab_supervise_writer_t *w, const ab_trace_log_t *log) {
  ab_supervise_put_array(w, log->recs, log->n * sizeof *log->recs);
  ab_supervise_put_array(w, log->segs, log->nsegs * sizeof *log->segs);
  ab_supervise_put_array(w, log->blocks, log->nblocks * sizeof *log->blocks);
}

/* A copy of the log whose counts and flags are in h, its arrays next in r, into log. */
static bool get_log(ab_supervise_reader_t *r, const ab_trace_log_t *h, ab_trace_log_t *log) {
  const void *recs = ab_supervise_get_array(r, h->n * sizeof *log->recs);
  const void *segs = ab_supervise_get_array(r, h->nsegs * sizeof *log->segs);
  const void *blocks = ab_supervise_get_array(r, h->nblocks * sizeof *log->blocks);
  if (r->bad) return false;
  ab_trace_log_free(log);
  log->recs = malloc(h->n * sizeof *log->recs + 1);
  log->segs = malloc(h->nsegs * sizeof *log->segs + 1);
  log->blocks = malloc(h->nblocks * sizeof *log->blocks + 1);
  if (log->recs == NULL || log->segs == NULL || log->blocks == NULL) {
    ab_trace_log_free(log);
    return false;
  }
  if (h->n) memcpy(log->recs, recs, h->n * sizeof *log->recs);
  if (h->nsegs) memcpy(log->segs, segs, h->nsegs * sizeof *log->segs);
  if (h->nblocks) memcpy(log->blocks, blocks, h->nblocks * sizeof *log->blocks);
  log->n = log->cap = h->n;
  log->nsegs = log->capsegs = h->nsegs;
  log->nblocks = log->capblocks = h->nblocks;
  log->captured = h->captured, log->failed = h->failed;
  return true;
}

/* The band a child measured, from the row it wrote (summary's last, when it has more than
 * `before` rows); a point where it wrote none. */
static void band_of_row(const ab_table_t *summary, size_t before, const ab_run_t *run, ab_band_t *band) {
  *band = ab_band_point(run);
  if (summary->nrows <= before) return;
  const char *cells[4];
  static const char *const cols[4] = {"peak_reserved_low", "peak_reserved_high", "device_allocs_low", "device_allocs_high"};
  for (int i = 0; i < 4; i++) {
    cells[i] = ab_table_get(summary, summary->nrows - 1, cols[i]);
    if (cells[i] == NULL || *cells[i] == '\0') return;
  }
  band->reserved_lo = strtoull(cells[0], NULL, 10), band->reserved_hi = strtoull(cells[1], NULL, 10);
  band->allocs_lo = strtoull(cells[2], NULL, 10), band->allocs_hi = strtoull(cells[3], NULL, 10);
}

/* ab_run_one in a child (supervise.h); o->hooks is NULL, or records only. A child that failed
 * adds an error row. */
static ab_status run_one_apart(const ab_run_spec_t *o, const ab_events_t *es, const char *strategy, ab_run_t *run,
                               ab_table_t *summary, ab_diag_t *diag) {
  run_args_t a = {o->seed, o->faults_rank, (int32_t)o->format, o->timeline, o->check, o->kernels, o->verify, o->quiet,
                  o->verbose, o->recorded_addresses, ab_run_device_said, o->hooks && o->hooks->record};
  ab_supervise_job_t j = {.unit = AB_UNIT_RUN_ONE, .cmd = o->cmd, .strategy = strategy, .conf = o->conf,
                          .device = o->device, .workload = o->workload, .out_dir = o->out_dir, .dev = o->dev,
                          .es = es, .args = &a, .args_bytes = sizeof a};
  /* The child's progress, drawn here as a run in this process draws it (show_progress). */
  char label[160], name[256];
  ab_results_workload_name(es->source, name, sizeof name);
  snprintf(label, sizeof label, "%s on %s", strategy, name);
  if (!o->quiet && isatty(STDERR_FILENO) && es->n > (1u << 16)) j.progress = label;
  ab_supervise_reply_t r;
  bool stopped;
  ab_status st = ab_supervise_run(&j, &r, &stopped, diag);
  if (st != AB_OK) {
    if (stopped) {
      ab_supervise_failed_run(run, AB_RUN_INTERRUPTED, AB_OK, diag->msg);
      diag->msg[0] = '\0';
      return AB_OK;
    }
    /* The run failed: its row says so, as for any run that fails. */
    ab_supervise_failed_run(run, AB_RUN_ERROR, st, diag->msg);
    ab_run_desc_t desc = {es->source, strategy, o->conf, o->device, o->dev.budget_bytes, o->seed, 0, NULL};
    if (ab_results_add_summary(summary, &desc, es, run) != AB_OK) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
    return st;
  }
  ab_supervise_get_run(&r.in, run);
  run_reply_t p;
  ab_supervise_get(&r.in, &p, sizeof p);
  if (p.device_said) ab_run_device_said = true;
  st = r.status;
  if (st != AB_OK) ab_diag_set(diag, st, "%s", r.msg);
  const char **row = calloc(p.ncols ? p.ncols : 1, sizeof *row);
  bool bad = row == NULL;
  for (uint64_t i = 0; i < p.nrows && !bad && !r.in.bad; i++) {
    for (uint64_t c = 0; c < p.ncols; c++) row[c] = ab_supervise_get_str(&r.in);
    if (!r.in.bad && p.ncols == summary->ncols && ab_table_add(summary, row) != AB_OK) bad = true;
  }
  free(row);
  if (!bad && !r.in.bad && a.record && !get_log(&r.in, &p.log, o->hooks->record)) bad = true;
  if (bad || r.in.bad)
    st = ab_diag_set(diag, AB_ERR_INTERNAL, "%s: the results of its process do not read back", strategy);
  ab_supervise_release(&r);
  return st;
}

bool ab_run_one_child(ab_supervise_child_t *c) {
  const run_args_t *a = c->job.args;
  if (c->job.args_bytes != sizeof *a || c->job.es == NULL) return false;
  ab_run_spec_t o;
  ab_run_spec_defaults(&o, c->job.cmd ? c->job.cmd : "allocbench");
  o.workload = c->job.workload, o.strategy = c->job.strategy, o.conf = c->job.conf, o.device = c->job.device;
  o.out_dir = c->job.out_dir ? c->job.out_dir : o.out_dir;
  o.seed = a->seed, o.dev = c->job.dev, o.faults_rank = a->faults_rank, o.format = (ab_format_t)a->format;
  o.timeline = a->timeline, o.check = a->check, o.kernels = a->kernels, o.verify = a->verify;
  o.quiet = a->quiet, o.verbose = a->verbose, o.recorded_addresses = a->recorded_addresses;
  ab_run_device_said = a->device_said;
  /* Recorded here, where the library runs; the log goes back with the results. */
  ab_trace_log_t log;
  ab_trace_log_init(&log);
  ab_run_hooks_t hooks = {.record = a->record ? &log : NULL, .progress = ab_supervise_progress};
  o.hooks = &hooks;
  ab_run_t run;
  if (ab_run_prepare(&run, c->job.es) != AB_OK) return false;
  ab_table_t summary;
  ab_table_init(&summary, ab_summary_cols, ab_summary_ncols);
  ab_diag_t diag = {""};
  ab_status st = ab_run_one(&o, c->job.es, c->job.strategy, &run, &summary, NULL, &diag);
  run_reply_t p;
  memset(&p, 0, sizeof p);
  p.device_said = ab_run_device_said;
  p.nrows = summary.nrows, p.ncols = summary.ncols;
  p.log = log;
  p.log.recs = NULL, p.log.segs = NULL, p.log.blocks = NULL;
  ab_supervise_reply(c, st, diag.msg);
  ab_supervise_put_run(&c->out, &run);
  ab_supervise_put(&c->out, &p, sizeof p);
  for (size_t i = 0; i < summary.nrows * summary.ncols; i++) ab_supervise_put_str(&c->out, summary.cells[i]);
  if (a->record) put_log(&c->out, &log);
  bool whole = ab_supervise_reply_end(c);
  ab_trace_log_free(&log);
  ab_table_free(&summary);
  ab_run_release(&run);
  return whole;
}

ab_status ab_run_one(const ab_run_spec_t *o, const ab_events_t *es, const char *strategy, ab_run_t *run,
                     ab_table_t *summary, ab_band_t *band_out, ab_diag_t *diag) {
  if (band_out) memset(band_out, 0, sizeof *band_out);
  if (o->faults_rank >= 0)
    return ab_diag_set(diag, AB_ERR_INVALID, "--faults rank=%d: only a run of several ranks (run --ranks) has ranks",
                       o->faults_rank);
  /* A workload built for a budget (the fragmenter) runs under it unless --budget was given. */
  ab_run_spec_t suggested;
  if (o->dev.budget_bytes == 0 && es->suggested_budget > 0) {
    char b[32], c[32], name[256];
    ab_results_workload_name(es->source, name, sizeof name);
    /* The card a workload models may be larger than the one it runs on (serve's 80 GiB on an
     * H100, whose total is 79.18 GiB): said with the way out, before the device refuses it. */
    uint64_t total;
    AB_TRY(ab_run_card_total(o, &total, diag));
    if (es->suggested_budget > total)
      return ab_diag_set(diag, AB_ERR_INVALID,
                         "%s suggests a budget of %s, more than the device's total of %s: give a smaller --budget, or "
                         "the workload a smaller card (serve: card=SIZE)",
                         name, ab_format_bytes(es->suggested_budget, b, sizeof b), ab_format_bytes(total, c, sizeof c));
    suggested = *o;
    suggested.dev.budget_bytes = es->suggested_budget;
    o = &suggested;
    if (!o->quiet)
      fprintf(notes(), "%s: no --budget: %s runs under its suggested %s\n", o->cmd, name,
              ab_format_bytes(es->suggested_budget, b, sizeof b));
  }
  ab_pipeline_t p = {.device = o->device, .dev = o->dev, .strategy = strategy, .conf = o->conf, .memory_cap = o->cap_bytes};
  if (o->cap_bytes) AB_TRY(check_cap(&p, diag));
  /* A library's run goes to a process of its own (supervise.h), which is given no --cap; the
   * ranks (replay_opts) share this process and never take a library (ranks.h). */
  bool apart = (o->hooks == NULL || o->hooks->replay_opts == NULL) && ab_supervise_apart(strategy);
  if (apart && o->cap_bytes)
    return ab_diag_set(diag, AB_ERR_INVALID, "--cap: %s runs in a process of its own; give its cap in -c instead", strategy);
  if (apart) {
    size_t before = summary->nrows;
    ab_status st = run_one_apart(o, es, strategy, run, summary, diag);
    if (band_out) band_of_row(summary, before, run, band_out);
    return st;
  }
  if (o->hooks && o->hooks->record) {
    p.wrap = wrap_record;
    p.wrap_ctx = o->hooks->record;
  }
  ab_addr_hint_t *plan = NULL;
  if (o->recorded_addresses && ab_events_address_plan(es, &plan, &p.dev.plan_len) != AB_OK)
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  p.dev.plan = plan;
  /* The simulated card follows the placement variants, so that the band replays only those
   * it ordered otherwise (Note [Variants followed], sim_follow.c). */
  p.dev.follow_variants = !o->dev.placement && !(o->hooks && o->hooks->replay_opts);
  ab_world_t w;
  ab_status st = ab_pipeline_open(&p, &w, diag);
  if (st == AB_OK && (st = ab_pipeline_runnable(&p, &w, diag)) != AB_OK) ab_pipeline_close(&w, NULL, NULL);
  if (st != AB_OK) {
    free(plan);
    return st;
  }
  ab_run_note_device(o, w.dev->name, w.dev->kind);
  if (diag->msg[0] && !o->quiet) fprintf(notes(), "%s: note: %s\n", o->cmd, diag->msg);
  /* A GPU's driver places its own allocations: only the simulated card takes the plan. */
  if (p.dev.plan_len && w.dev->kind == AB_DEVICE_SIM && !o->quiet)
    fprintf(notes(), "%s: each cudaMalloc at the address the recorded run got\n", o->cmd);
  diag->msg[0] = '\0';
  char label[160], name[256];
  ab_results_workload_name(es->source, name, sizeof name);
  snprintf(label, sizeof label, "%s on %s", strategy, name);
  progress_t prog = {label, 0, false};
  ab_run_opts_t ro = ab_run_defaults();
  ro.timeline = o->timeline;
  ro.check = o->check;
  ro.kernels = o->kernels;
  ro.verify = o->verify;
  ro.stop = &ab_run_stop;
  ab_oommap_t map;
  ab_oommap_init(&map);
  oom_ctx_t at_oom_ctx = {&map, o->hooks};
  ro.on_oom = at_oom;
  ro.on_oom_ctx = &at_oom_ctx;
  if (o->hooks && o->hooks->record) ro.at_end = take_record;
  if (o->hooks && o->hooks->replay_opts) o->hooks->replay_opts(o->hooks->ctx, &ro);
  if (o->hooks && o->hooks->progress) {
    ro.progress = o->hooks->progress;
    ro.progress_ctx = o->hooks->ctx;
  } else if (!o->quiet && isatty(fileno(notes())) && es->n > (1u << 16)) {
    ro.progress = show_progress;
    ro.progress_ctx = &prog;
  }
  ab_status rst = ab_engine_replay(es, w.s, &ro, run);
  if (prog.shown) fprintf(notes(), "\r%*s\r", (int)strlen(label) + 32, "");
  if (!o->quiet) say_plan(o, es, strategy, w.s);
  ab_status cst = ab_pipeline_close(&w, run, NULL);
  if (rst == AB_OK) rst = cst;
  const char *device_name = w.device;
  if (run->caught_served && !o->quiet)
    fprintf(notes(),
            "%s: approximate: the program caught %" PRIu64 " OOM%s that %s served under these settings: its path "
            "would have differed from the recorded one\n",
            o->cmd, run->caught_served, run->caught_served == 1 ? "" : "s", strategy);
  ab_band_t band = ab_band_point(run);
  if (rst == AB_OK && w.kind == AB_DEVICE_SIM && run->status != AB_RUN_INTERRUPTED) {
    p.wrap = NULL; /* the variants are not recorded */
    rst = measure_band(o, es, &p, run, &band, diag);
    if (rst != AB_OK) snprintf(run->message, sizeof run->message, "placement variant: %s", diag->msg);
  }
  if (band_out) *band_out = band;
  free(plan);
  if (run->status == AB_RUN_INTERRUPTED || ab_run_stop) {
    /* Stopped in the placement variants, after the run itself ended: it is not recorded
     * either, and says so to the caller, which reads a run with no row by its status. */
    run->status = AB_RUN_INTERRUPTED;
    ab_oommap_free(&map);
    return AB_OK;
  }
  /* The conf the strategy got: with --cap, PyTorch's fraction of the card. */
  char conf[1200];
  if (ab_pipeline_conf(&p, w.total_bytes, conf, sizeof conf, diag) != AB_OK) snprintf(conf, sizeof conf, "%s", o->conf ? o->conf : "");
  ab_run_desc_t desc = {es->source, strategy, o->cap_bytes || o->conf ? conf : NULL, device_name, o->dev.budget_bytes, o->seed, 0,
                        &band};
  st = ab_results_add_summary(summary, &desc, es, run);
  if (st == AB_OK && o->timeline && run->status != AB_RUN_ERROR) {
    st = ab_results_write_timeline(o->out_dir, &desc, run, diag);
  }
  if (st == AB_OK && run->status == AB_RUN_OOM) {
    char path[4096];
    st = ab_oomreport_write(&map, o->out_dir, &desc, path, sizeof path, diag);
    if (!o->quiet) ab_oomreport_print(notes(), &run->oom, strategy, device_name, o->dev.budget_bytes, &map, path);
  }
  ab_oommap_free(&map);
  if (rst != AB_OK) {
    ab_diag_set(diag, rst, "%s", run->message);
    return rst;
  }
  return st;
}

ab_bisect_opts_t ab_run_search_opts(const ab_run_spec_t *o, const ab_bisect_opts_t *search, const char *strategy,
                                    const char *conf) {
  ab_bisect_opts_t b = *search;
  b.strategy = strategy;
  b.conf = conf;
  b.device = o->device;
  b.dev = o->dev;
  b.check = o->check;
  b.stop = &ab_run_stop;
  return b;
}
