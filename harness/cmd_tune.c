/* cmd_tune.c: `allocbench tune`: the PYTORCH_CUDA_ALLOC_CONF that suits a job, from its
 * recorded snapshot (or a workload): the grid of tune_grid.h run and ranked by tune.h, printed
 * with the line to paste, and every configuration tried appended to DIR/tune.csv. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "caching_conf.h"
#include "cli.h"
#include "commands.h"
#include "output.h"
#include "pipeline.h"
#include "results.h"
#include "table.h"
#include "tune.h"
#include "tune_grid.h"
#include "units.h"
#include "workload.h"

static const ab_cli_command_t command = {
    "allocbench tune", AB_CMD_TUNE, NULL,
    "Finds the PYTORCH_CUDA_ALLOC_CONF that suits a job: replays its recorded snapshot (from\n"
    "`allocbench record`) or a workload through PyTorch's caching allocator under each setting that\n"
    "changes device memory (expandable_segments; max_split_size_mb over a grid, alone and with\n"
    "max_non_split_rounding_mb; roundup_power2_divisions in both forms; garbage_collection_threshold\n"
    "under a memory cap), then the best of each together, and the other strategies (with -s, more of\n"
    "them: a pluggable:PATH library, say) for reference.\n"
    "For each: one run (peak reserved bytes, device allocations) and the smallest memory cap it runs\n"
    "under (torch.cuda.set_per_process_memory_fraction, bisected; a budget for the other strategies).\n"
    "Prints them ranked, then the winner as the line to paste, with its predicted peak reserved, its\n"
    "smallest cap and what it saves over the recorded configuration. Every configuration tried is\n"
    "appended to DIR/tune.csv; progress goes to stderr. The runs are spread over the cores.\n"
    "A trace whose program caught OOMs and went on gives bounds, not predictions: it says so.\n"};

typedef struct tune_args_s {
  ab_tune_objective_t objective;
  uint64_t cap;
  uint64_t jobs;
} tune_args_t;

static bool own_option(void *ctx, int opt, const char *arg, ab_status *st, ab_diag_t *diag) {
  tune_args_t *a = ctx;
  switch (opt) {
    case AB_OPT_OBJECTIVE:
      if (strcmp(arg, "reserved") == 0)
        a->objective = AB_TUNE_RESERVED;
      else if (strcmp(arg, "budget") == 0)
        a->objective = AB_TUNE_BUDGET;
      else
        *st = ab_diag_set(diag, AB_ERR_INVALID, "--objective '%s': expected reserved or budget", arg);
      return true;
    case AB_OPT_CAP:
      *st = ab_parse_size("--cap", arg, &a->cap, diag);
      if (*st == AB_OK && a->cap == 0) *st = ab_diag_set(diag, AB_ERR_INVALID, "--cap '%s': must be more than 0 bytes", arg);
      return true;
    case AB_OPT_JOBS:
      *st = ab_parse_u64("--jobs", arg, 1024, &a->jobs, diag);
      if (*st == AB_OK && a->jobs == 0) *st = ab_diag_set(diag, AB_ERR_INVALID, "--jobs '%s': expected 1 to 1024", arg);
      return true;
    default: return false;
  }
}

/* ---- results ---------------------------------------------------------------------------- */

/* tune.csv, one row per configuration tried, in rank order (README.md, "Tuning a job"). */
#define TUNE_COLUMNS(X)                                                                                \
  X(workload, 0) X(device, 0) X(objective, 0) X(cap_bytes, 1) X(rank, 1) X(strategy, 0) X(conf, 0)    \
  X(recommended, 1) X(recorded, 1) X(status, 0) X(oom_kind, 0) X(peak_requested_bytes, 1)              \
  X(peak_allocated_bytes, 1) X(peak_reserved_bytes, 1) X(num_device_alloc, 1) X(num_device_free, 1)   \
  X(num_alloc_retries, 1) X(min_budget_bytes, 1) X(max_fail_bytes, 1) X(limit, 0) X(probes, 1)        \
  X(wall_s, 1) X(note, 0) X(trace_ooms, 1)

#define TUNE_COL(name, numeric) {#name, numeric},
static const ab_col_t tune_cols[] = {TUNE_COLUMNS(TUNE_COL)};
#undef TUNE_COL
#define TUNE_INDEX(name, numeric) C_##name,
enum { TUNE_COLUMNS(TUNE_INDEX) NCOLS };
#undef TUNE_INDEX

typedef struct tune_view_s {
  const ab_events_t *es;
  const char *device;
  ab_tune_objective_t objective;
  uint64_t cap;
  uint64_t total;                            /* the card's */
  const ab_tune_result_t *winner, *recorded; /* may be NULL */
} tune_view_t;

/* Appends one clause to a note. */
static void clause(char *out, size_t size, const char *text) {
  size_t used = strlen(out);
  snprintf(out + used, size - used, "%s%s", used ? "; " : "", text);
}

/* What qualifies a result, in words; "" when nothing does. */
static void note_of(const tune_view_t *v, const ab_tune_result_t *r, char *out, size_t size) {
  out[0] = '\0';
  if (r->status == AB_RUN_ERROR) {
    snprintf(out, size, "error: %s", r->message);
    return;
  }
  if (r->cand.family == AB_TUNE_REFERENCE) clause(out, size, "reference: not a PyTorch setting; its limit is a budget");
  if (r->status == AB_RUN_OOM) clause(out, size, v->cap ? "out of memory under the cap" : "out of memory on the card");
  if (!r->search.passed) clause(out, size, "no cap up to the card's total sufficed");
  if (r->search.upper_bound) {
    char bound[96];
    snprintf(bound, sizeof bound, "upper bound: the traced program survived %" PRIu64 " OOMs", v->es->trace_ooms);
    clause(out, size, bound);
  }
}

static ab_status add_row(ab_table_t *t, const tune_view_t *v, const ab_tune_result_t *r) {
  char cells[NCOLS][AB_DIAG_BYTES + 64];
  const char *row[NCOLS];
  for (int i = 0; i < NCOLS; i++) row[i] = cells[i], cells[i][0] = '\0';
#define SET(col, ...) snprintf(cells[C_##col], sizeof cells[0], __VA_ARGS__)
  SET(workload, "%s", v->es->source);
  SET(device, "%s", v->device);
  SET(objective, "%s", v->objective == AB_TUNE_BUDGET ? "budget" : "reserved");
  SET(cap_bytes, "%" PRIu64, v->cap);
  SET(rank, "%zu", r->rank);
  SET(strategy, "%s", r->cand.strategy);
  SET(conf, "%s", r->cand.conf);
  SET(recommended, "%d", r == v->winner);
  SET(recorded, "%d", r->cand.recorded);
  SET(status, "%s", ab_run_status_name(r->status));
  SET(oom_kind, "%s", ab_oom_kind_name(r->oom_kind));
  SET(peak_requested_bytes, "%" PRIu64, r->search.peak_requested);
  SET(peak_allocated_bytes, "%" PRId64, r->stats.allocated_bytes.peak);
  SET(peak_reserved_bytes, "%" PRId64, r->stats.reserved_bytes.peak);
  SET(num_device_alloc, "%" PRIu64, r->stats.num_device_alloc);
  SET(num_device_free, "%" PRIu64, r->stats.num_device_free);
  SET(num_alloc_retries, "%" PRIu64, r->stats.num_alloc_retries);
  if (r->search.passed) SET(min_budget_bytes, "%" PRIu64, r->search.min_budget);
  if (r->search.failed) SET(max_fail_bytes, "%" PRIu64, r->search.max_fail);
  SET(limit, "%s", r->cand.family == AB_TUNE_REFERENCE ? "budget" : "cap");
  SET(probes, "%u", r->search.probes);
  SET(wall_s, "%.6f", r->wall_s);
  note_of(v, r, cells[C_note], sizeof cells[0]);
  SET(trace_ooms, "%" PRIu64, v->es->trace_ooms);
#undef SET
  return ab_table_add(t, row);
}

/* The ranking as people read it: sizes in binary units. */
static const ab_col_t display_cols[] = {{"rank", true},          {"strategy", false},     {"conf", false},
                                        {"peak reserved", true}, {"smallest cap", true}, {"device allocs", true},
                                        {"", false}};

static ab_status add_display_row(ab_table_t *t, const tune_view_t *v, const ab_tune_result_t *r) {
  char rank[16], reserved[48], cap[48], allocs[24], note[AB_DIAG_BYTES + 64], mark[AB_DIAG_BYTES + 128];
  snprintf(rank, sizeof rank, "%zu", r->rank);
  if (r->status == AB_RUN_OK)
    ab_format_bytes((uint64_t)r->stats.reserved_bytes.peak, reserved, sizeof reserved);
  else
    snprintf(reserved, sizeof reserved, "%s", r->status == AB_RUN_OOM ? "OOM" : ab_run_status_name(r->status));
  if (r->search.passed)
    ab_format_bytes(r->search.min_budget, cap, sizeof cap);
  else
    snprintf(cap, sizeof cap, "-");
  if (r->search.passed && r->cand.family == AB_TUNE_REFERENCE) strncat(cap, " budget", sizeof cap - strlen(cap) - 1);
  snprintf(allocs, sizeof allocs, "%" PRIu64, r->stats.num_device_alloc);
  note_of(v, r, note, sizeof note);
  if (r->cand.family == AB_TUNE_REFERENCE) note[0] = '\0'; /* the "budget" beside its figure says it */
  snprintf(mark, sizeof mark, "%s%s%s%s%s", r == v->winner ? "<- recommended" : "",
           r == v->winner && r->cand.recorded ? ", " : "", r->cand.recorded ? "recorded" : "",
           (r == v->winner || r->cand.recorded) && note[0] ? "; " : "", note);
  const char *row[] = {rank, r->cand.strategy,
                       r->cand.family == AB_TUNE_REFERENCE ? "-" : r->cand.conf[0] ? r->cand.conf : "(default)",
                       reserved, cap, allocs, mark};
  return ab_table_add(t, row);
}

/* "X less" or "X more" (of bytes), for what the winner saves. */
static const char *saving(uint64_t recorded, uint64_t winner, char *buf, size_t size) {
  char b[32];
  if (recorded == winner) return snprintf(buf, size, "the same"), buf;
  ab_format_bytes(recorded > winner ? recorded - winner : winner - recorded, b, sizeof b);
  snprintf(buf, size, "%s %s", b, recorded > winner ? "less" : "more");
  return buf;
}

/* The line to paste, and what the winner saves over the recorded configuration, as shell
 * comments so that the block can be pasted whole. */
static void print_winner(FILE *f, const tune_view_t *v, const char *fraction_item, bool cap_given, size_t ntried) {
  const ab_tune_result_t *w = v->winner, *rec = v->recorded;
  if (w == NULL) {
    fprintf(f, "# no PYTORCH_CUDA_ALLOC_CONF of the %zu tried ran the whole %s%s\n", ntried, v->es->source,
            v->cap ? " under the cap" : "");
    return;
  }
  fprintf(f, "export PYTORCH_CUDA_ALLOC_CONF='%s%s%s'\n", w->cand.conf, w->cand.conf[0] && fraction_item[0] ? "," : "",
          fraction_item);
  char a[32], b[32], c[48], d[48];
  fprintf(f, "# predicted peak reserved %s, smallest cap %s",
          ab_format_bytes((uint64_t)w->stats.reserved_bytes.peak, a, sizeof a),
          w->search.passed ? ab_format_bytes(w->search.min_budget, b, sizeof b) : "none found");
  if (v->cap && cap_given)
    fprintf(f, ", under the cap of %s (torch.cuda.set_per_process_memory_fraction(%.6g))", ab_format_bytes(v->cap, c, sizeof c),
            (double)v->cap / (double)v->total);
  fputc('\n', f);
  if (rec == NULL) return;
  const char *name = rec->cand.conf[0] ? rec->cand.conf : "the defaults";
  if (rec == w) {
    fprintf(f, "# the recorded configuration (%s) is already the best of the %zu tried\n", name, ntried);
  } else if (rec->status != AB_RUN_OK) {
    fprintf(f, "# the recorded configuration (%s) ran out of memory%s\n", name, v->cap ? " under the cap" : "");
  } else {
    uint64_t rp = (uint64_t)rec->stats.reserved_bytes.peak, wp = (uint64_t)w->stats.reserved_bytes.peak;
    fprintf(f, "# against the recorded configuration (%s: peak reserved %s, smallest cap %s): %s", name,
            ab_format_bytes(rp, a, sizeof a), rec->search.passed ? ab_format_bytes(rec->search.min_budget, b, sizeof b) : "none found",
            saving(rp, wp, c, sizeof c));
    if (rp > wp) fprintf(f, " (%.1f%%)", 100.0 * (double)(rp - wp) / (double)rp);
    fprintf(f, " at the peak");
    if (rec->search.passed && w->search.passed)
      fprintf(f, ", %s in the smallest cap", saving(rec->search.min_budget, w->search.min_budget, d, sizeof d));
    fputc('\n', f);
  }
}

/* ---- progress ----------------------------------------------------------------------------- */

typedef struct progress_s {
  const ab_cli_opts_t *o;
  size_t offset, total; /* configurations before this stage, and in all so far */
} progress_t;

static void on_done(void *ctx, const ab_tune_result_t *r, size_t done, size_t total) {
  progress_t *p = ctx;
  (void)total;
  if (p->o->quiet || r->status == AB_RUN_INTERRUPTED) return;
  char a[32], b[32];
  fprintf(stderr, "allocbench tune: [%zu/%zu] %s%s%s: peak reserved %s, smallest %s %s (%.1f s)\n", p->offset + done,
          p->total, r->cand.strategy, r->cand.family == AB_TUNE_REFERENCE ? "" : " ",
          r->cand.family == AB_TUNE_REFERENCE ? "" : r->cand.conf[0] ? r->cand.conf : "(default)",
          r->status == AB_RUN_OK ? ab_format_bytes((uint64_t)r->stats.reserved_bytes.peak, a, sizeof a)
                                 : ab_run_status_name(r->status),
          r->cand.family == AB_TUNE_REFERENCE ? "budget" : "cap",
          r->search.passed ? ab_format_bytes(r->search.min_budget, b, sizeof b) : "none", r->wall_s);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the command -------------------------------------------------------------------------- */

typedef struct setup_s {
  char recorded[AB_TUNE_CONF_BYTES]; /* the recorded conf without its memory fraction */
  char fraction[64];                 /* the recorded per_process_memory_fraction item, as written */
  uint64_t cap;
  uint64_t total; /* the card's */
  unsigned jobs;
  char device[96];
  ab_cli_strategies_t extra; /* -s: more strategies for reference */
} setup_t;

/* The recorded configuration, the device and the cap: bad input refused as one line. */
static int setup(const ab_cli_opts_t *o, const tune_args_t *a, const ab_events_t *es, setup_t *s) {
  ab_diag_t diag = {""};
  memset(s, 0, sizeof *s);
  ab_tune_split_fraction(es->settings, s->recorded, sizeof s->recorded, s->fraction, sizeof s->fraction);
  ab_caching_conf_t recorded;
  ab_caching_conf_defaults(&recorded);
  if (ab_caching_conf_apply(&recorded, "the recorded settings", es->settings, &diag) != AB_OK) {
    if (!o->quiet) fprintf(stderr, "allocbench tune: warning: %s; the savings are over the defaults instead\n", diag.msg);
    s->recorded[0] = s->fraction[0] = '\0';
    recorded.memory_fraction = 1.0;
  }
  ab_pipeline_t p = {.device = o->device, .dev = o->dev, .strategy = "raw"};
  ab_world_t closed;
  ab_status st = ab_pipeline_check(&p, &closed, &diag);
  /* The strategies of -s, checked before anything runs: each can be made on the device. */
  if (st == AB_OK && o->strategy) st = ab_cli_strategies(o->strategy, NULL, 0, &s->extra, &diag);
  for (size_t i = 0; st == AB_OK && i < s->extra.n; i++) {
    ab_pipeline_t q = p;
    q.strategy = s->extra.name[i];
    st = ab_pipeline_check(&q, NULL, &diag);
  }
  if (st != AB_OK) return st == AB_ERR_INVALID ? ab_cli_usage_error(o, diag.msg) : ab_cli_fail(o, diag.msg);
  ab_cli_note_device(o, closed.device, closed.kind);
  snprintf(s->device, sizeof s->device, "%s", closed.device);
  s->total = closed.total_bytes;
  char x[32], y[32];
  if (a->cap > closed.total_bytes) {
    snprintf(diag.msg, sizeof diag.msg, "--cap %s is more than the device's total of %s", ab_format_bytes(a->cap, x, sizeof x),
             ab_format_bytes(closed.total_bytes, y, sizeof y));
    return ab_cli_usage_error(o, diag.msg);
  }
  s->cap = a->cap;
  if (a->cap && s->fraction[0]) {
    if (!o->quiet) fprintf(stderr, "allocbench tune: --cap replaces the recorded %s\n", s->fraction);
    s->fraction[0] = '\0';
  } else if (recorded.memory_fraction < 1.0) {
    /* As PyTorch turns the fraction into its cap (caching.c does the same). */
    s->cap = (uint64_t)(recorded.memory_fraction * (double)closed.total_bytes);
  }
  s->jobs = (unsigned)a->jobs;
  if (closed.kind != AB_DEVICE_SIM) {
    if (a->jobs > 1 && !o->quiet) fprintf(stderr, "allocbench tune: --jobs 1 on %s: the runs would share its memory\n", closed.device);
    s->jobs = 1;
  }
  return -1;
}

static uint64_t largest_request(const ab_events_t *es) {
  uint64_t m = 0;
  for (size_t i = 0; i < es->n; i++)
    if (es->ev[i].kind == AB_EV_ALLOC && es->ev[i].bytes > m) m = es->ev[i].bytes;
  return m;
}

/* Runs list.c[first, list.n) into r + first. */
static ab_status run_stage(const ab_events_t *es, const ab_tune_list_t *list, size_t first, ab_tune_opts_t *opts,
                           progress_t *prog, ab_tune_result_t *r, ab_diag_t *diag) {
  prog->offset = first;
  prog->total = list->n;
  return ab_tune_run(es, list->c + first, list->n - first, first, opts, r + first, diag);
}

/* The results ranked: appended to DIR/tune.csv, printed, with the line to paste. */
static int report(const ab_cli_opts_t *o, const tune_args_t *a, const setup_t *s, const ab_events_t *es,
                  ab_tune_result_t *r, size_t n, double t0) {
  ab_tune_rank(r, n, a->objective);
  tune_view_t v = {es, s->device, a->objective, s->cap, s->total, NULL, NULL};
  for (size_t i = 0; i < n; i++) {
    bool eligible = r[i].cand.family != AB_TUNE_REFERENCE && r[i].status == AB_RUN_OK &&
                    (a->objective != AB_TUNE_BUDGET || r[i].search.passed);
    if (v.winner == NULL && eligible) v.winner = &r[i];
    if (v.recorded == NULL && r[i].cand.recorded) v.recorded = &r[i];
  }
  ab_table_t rows, shown;
  ab_table_init(&rows, tune_cols, NCOLS);
  ab_table_init(&shown, display_cols, sizeof display_cols / sizeof display_cols[0]);
  ab_status st = AB_OK;
  for (size_t i = 0; i < n && st == AB_OK; i++) {
    st = add_row(&rows, &v, &r[i]);
    if (st == AB_OK) st = add_display_row(&shown, &v, &r[i]);
  }
  ab_diag_t io = {""};
  int rc = AB_EXIT_OK;
  if (st != AB_OK)
    rc = ab_cli_fail(o, "out of host memory");
  else if (ab_cli_append(o, &rows, "tune.csv", &io) != AB_OK)
    rc = ab_cli_fail(o, io.msg);
  if (rc == AB_EXIT_OK) {
    if (o->format == AB_FORMAT_TABLE) {
      printf("%s on %s, %zu configurations ranked by %s%s\n\n", es->source, s->device, n,
             a->objective == AB_TUNE_BUDGET ? "the smallest cap" : "peak reserved", s->cap ? ", under the cap" : "");
      static const char *const all[] = {"rank", "strategy", "conf", "peak reserved", "smallest cap", "device allocs", ""};
      ab_cli_print(o, &shown, all, sizeof all / sizeof all[0]);
      putchar('\n');
    } else {
      ab_cli_print(o, &rows, NULL, 0);
    }
    /* csv and json keep stdout to the rows; the line to paste then goes with the progress. */
    print_winner(o->format == AB_FORMAT_TABLE ? stdout : stderr, &v, s->fraction, a->cap > 0, n);
    if (!o->quiet)
      fprintf(stderr, "allocbench tune: %zu configurations in %.1f s on %u thread%s; all of them in %s/tune.csv\n", n,
              now_s() - t0, s->jobs ? s->jobs : (unsigned)sysconf(_SC_NPROCESSORS_ONLN), s->jobs == 1 ? "" : "s",
              o->out_dir);
  }
  ab_table_free(&shown);
  ab_table_free(&rows);
  return rc;
}

int ab_cmd_tune(int argc, char **argv) {
  ab_cli_opts_t o;
  ab_cli_defaults(&o, "allocbench tune");
  o.device = "sim"; /* predictions, and many runs at once: the simulated card */
  tune_args_t a = {AB_TUNE_RESERVED, 0, 0};
  int rc = ab_cli_parse(argc, argv, &command, &o, own_option, &a, 0, NULL, NULL);
  if (rc >= 0) return rc;
  if (o.workload == NULL) return ab_cli_usage_error(&o, "-w replay:TRACE (or -w WORKLOAD) is required");
  ab_diag_t diag = {""};
  if (ab_output_check_dir("--out", o.out_dir, &diag) != AB_OK) return ab_cli_usage_error(&o, diag.msg);
  ab_cli_catch_stop(); /* a signal while the workload is generated stops that too */
  ab_events_t es;
  ab_status built = ab_cli_build(&o, o.workload, &es, &diag);
  if (built != AB_OK) return ab_cli_build_failed(&o, built, &diag);
  /* tune writes no file named after its workload: the stream can carry the name a person
   * reads (a trace by its file name) into tune.csv and every line. */
  char name[sizeof es.source];
  ab_results_workload_name(es.source, name, sizeof name);
  snprintf(es.source, sizeof es.source, "%s", name);
  setup_t s;
  if ((rc = setup(&o, &a, &es, &s)) >= 0) {
    ab_events_free(&es);
    return rc;
  }
  if (es.trace_ooms && !o.quiet)
    fprintf(stderr,
            "allocbench tune: warning: the traced program caught %" PRIu64 " OOMs and went on (it changed course "
            "under memory pressure): the figures are bounds, not predictions\n",
            es.trace_ooms);

  ab_tune_list_t list;
  ab_tune_list_init(&list);
  ab_tune_result_t *r = NULL;
  progress_t prog = {&o, 0, 0};
  ab_tune_opts_t opts = {.device = o.device, .dev = o.dev, .cap = s.cap, .check = o.check, .jobs = s.jobs,
                         .stop = &ab_cli_stop, .on_done = on_done, .on_done_ctx = &prog};
  /* The recorded configuration under the recorded cap is the recorded run: its device
   * allocations go where the trace says they went (Note [Recorded addresses], cmd_replay.c). */
  ab_addr_hint_t *plan = NULL;
  ab_status st = a.cap == 0 ? ab_events_address_plan(&es, &plan, &opts.plan_len) : AB_OK;
  opts.plan = plan;
  double t0 = now_s();
  size_t best[AB_TUNE_FAMILIES];
  if (st != AB_OK) st = ab_diag_set(&diag, AB_ERR_INTERNAL, "out of host memory");
  if (st == AB_OK) st = ab_tune_grid_first(&list, s.recorded, largest_request(&es), s.cap > 0, &diag);
  for (size_t i = 0; st == AB_OK && i < s.extra.n; i++) st = ab_tune_list_add_reference(&list, s.extra.name[i], &diag);
  /* Stage 2 adds a few combinations at most: room for the whole grid once more. */
  size_t first = list.n;
  if (st == AB_OK && (r = calloc(2 * first, sizeof *r)) == NULL) st = ab_diag_set(&diag, AB_ERR_INTERNAL, "out of host memory");
  if (st == AB_OK) st = run_stage(&es, &list, 0, &opts, &prog, r, &diag);
  if (st == AB_OK && !ab_cli_stop) {
    ab_tune_best_of_families(r, first, a.objective, best);
    st = ab_tune_grid_combine(&list, best, s.cap > 0, &diag);
    if (st == AB_OK && list.n > 2 * first) st = ab_diag_set(&diag, AB_ERR_INTERNAL, "the grid's second stage outgrew its room");
    if (st == AB_OK) st = run_stage(&es, &list, first, &opts, &prog, r, &diag);
  }
  if (st != AB_OK) {
    rc = st == AB_ERR_INVALID ? ab_cli_usage_error(&o, diag.msg) : ab_cli_fail(&o, diag.msg);
  } else if (ab_cli_stop) {
    fprintf(stderr, "allocbench tune: interrupted (%s): the configurations tried were not ranked, and nothing was written\n",
            ab_cli_stop == SIGTERM ? "SIGTERM" : "SIGINT");
    rc = 128 + ab_cli_stop;
  } else {
    rc = report(&o, &a, &s, &es, r, list.n, t0);
  }
  free(r);
  free(plan);
  ab_tune_list_free(&list);
  ab_events_free(&es);
  return rc;
}
