/* cmd_tune.c: `allocbench tune`: the PYTORCH_CUDA_ALLOC_CONF that suits a job, from its
 * recorded snapshot (or a workload): the grid of tune_grid.h run and ranked by tune.h, printed
 * with the line to paste, and every configuration tried appended to DIR/tune.csv.
 *
 * Note [A job of several traces]
 * A torchrun job records one snapshot per rank, and PYTORCH_CUDA_ALLOC_CONF is one setting
 * for all of them. Given several traces (-w repeated, or a glob in replay:PATTERN), every
 * configuration is run on each of them, under the same cap (a cap is per process, so per
 * rank), and it is judged by its worst trace: the one whose result ranks last by the
 * objective (ab_tune_compare: an OOM first, then the highest peak reserved, or the largest
 * smallest cap). The configurations are ranked by those worst results, the second stage of
 * the grid combines the best of each family by them, and the winner is the setting whose worst
 * rank is best: the rank that runs out of memory first decides whether the job does.
 * tune.csv keeps every trace's row; the table shows each configuration's worst. Traces alike
 * are replayed once (tune.h, Note [Traces alike]), and files of the same bytes read once.
 *
 * Under a launcher (mpirun, srun, torchrun: spread.h) every rank reads the job and lists the
 * same configurations; the runs, each configuration on each distinct trace, are dealt out
 * between the ranks; each stage's results come together at rank 0 (the first stage's go back
 * to every rank, whose second stage they decide), and rank 0 ranks them and writes what one
 * process would write. */
#include <glob.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/base/clock.h"
#include "kernels/base/input.h"
#include "kernels/base/output.h"
#include "kernels/base/units.h"
#include "harness/cli/cli.h"
#include "harness/cli/commands.h"
#include "harness/cli/spread.h"
#include "harness/run/pipeline.h"
#include "harness/run/results.h"
#include "harness/run/table.h"
#include "harness/tune/report.h"
#include "harness/tune/tune.h"
#include "harness/tune/tune_figures.h"
#include "harness/tune/tune_grid.h"
#include "strategies/protocol/caching_conf.h"
#include "workloads/workload.h"

static const ab_cli_command_t command = {
    "allocbench tune", AB_CMD_TUNE, "[TRACE]",
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
    "appended to DIR/tune.csv; progress goes to stderr. The runs are spread over the cores, and\n"
    "over the ranks of a launch (mpirun, srun, torchrun), rank 0 writing the results.\n"
    "A trace whose program caught OOMs and went on gives bounds, not predictions: it says so.\n"
    "Several traces (-w repeated, or -w 'replay:job.rank*.pickle', the glob expanded here) are one\n"
    "job, its ranks: each configuration runs on every trace and is ranked by its worst one; traces\n"
    "that make the same requests are replayed once.\n"};

typedef struct tune_args_s {
  ab_tune_objective_t objective;
  uint64_t cap;
  uint64_t jobs;
  const char **specs; /* each -w as given, in order; owned array */
  size_t nspecs;
  bool report; /* --report: the figures and the page */
  unsigned map_probes; /* --cap-map N (0: all) */
  bool no_map;         /* --cap-map off */
} tune_args_t;

static bool own_option(void *ctx, int opt, const char *arg, ab_status *st, ab_diag_t *diag) {
  tune_args_t *a = ctx;
  switch (opt) {
    case 'w': {
      const char **more = realloc(a->specs, (a->nspecs + 1) * sizeof *more);
      if (more == NULL) {
        *st = ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
        return true;
      }
      a->specs = more;
      a->specs[a->nspecs++] = arg;
      return true;
    }
    case AB_OPT_OBJECTIVE:
      if (strcmp(arg, "reserved") == 0)
        a->objective = AB_TUNE_RESERVED;
      else if (strcmp(arg, "budget") == 0)
        a->objective = AB_TUNE_BUDGET;
      else if (strcmp(arg, "time") == 0)
        a->objective = AB_TUNE_TIME;
      else
        *st = ab_diag_set(diag, AB_ERR_INVALID, "--objective '%s': expected reserved, budget or time", arg);
      return true;
    case AB_OPT_JOBS:
      /* One range in every refusal, whatever is wrong with the number. */
      *st = ab_parse_u64("--jobs", arg, 1024, &a->jobs, diag);
      if (*st != AB_OK || a->jobs == 0)
        *st = ab_diag_set(diag, AB_ERR_INVALID, "--jobs '%s': expected a whole number from 1 to 1024", arg);
      return true;
    case AB_OPT_REPORT: a->report = true; return true;
    case AB_OPT_CAP_MAP: *st = ab_cli_parse_cap_map(arg, &a->map_probes, &a->no_map, diag); return true;
    default: return false;
  }
}

/* ---- the job: its traces ------------------------------------------------------------------ */

typedef struct trace_s {
  char *spec;           /* the -w it runs, a glob expanded; owned */
  ab_events_t es;       /* its source the name people read */
  bool built;
  bool borrowed;        /* es's arrays are an earlier trace's, read from a file of the same bytes */
  ab_tune_result_t *r;  /* each configuration's result on this trace, by its place in the grid */
  ab_addr_hint_t *plan; /* the recorded run's addresses, for the recorded configuration; may be NULL */
  size_t plan_len;
} trace_t;

typedef struct job_s {
  trace_t *t;
  size_t n;
  char name[512];      /* the workload column and the headings: the trace's name, or the -w as given */
  ab_tune_trace_t *tt; /* each trace as tune.h takes it: its digest, the first alike (Note [Traces alike]) */
  size_t distinct;     /* traces not alike an earlier one */
  ab_spread_t sp;      /* the ranks the runs are dealt out between */
} job_t;

static void job_free(job_t *job) {
  for (size_t k = 0; k < job->n; k++) {
    free(job->t[k].spec);
    if (job->t[k].built && !job->t[k].borrowed) ab_events_free(&job->t[k].es);
    free(job->t[k].r);
    free(job->t[k].plan);
  }
  free(job->t);
  free(job->tt);
}

/* Adds a trace to the job; one given twice is refused (its rows would count twice). */
static ab_status add_trace(job_t *job, const char *spec, const char *given, ab_diag_t *diag) {
  for (size_t k = 0; k < job->n; k++)
    if (strcmp(job->t[k].spec, spec) == 0)
      return ab_diag_set(diag, AB_ERR_INVALID, "-w '%s': %s is in the job already; give each trace once", given, spec);
  trace_t *more = realloc(job->t, (job->n + 1) * sizeof *more);
  if (more == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  job->t = more;
  memset(&job->t[job->n], 0, sizeof job->t[0]);
  if ((job->t[job->n].spec = strdup(spec)) == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  job->n++;
  return AB_OK;
}

/* The traces of the -w options, in order. A replay:PATTERN whose PATTERN names no file and has
 * a wildcard is expanded here with glob(3), its matches in glob's (sorted) order, so that the
 * quoted 'replay:job.rank*.pickle' means every rank's file; a pattern matching nothing is an
 * error, never a job of fewer ranks. */
static ab_status expand(const tune_args_t *a, job_t *job, ab_diag_t *diag) {
  for (size_t i = 0; i < a->nspecs; i++) {
    const char *spec = a->specs[i];
    const char *path = strncmp(spec, "replay:", 7) == 0 ? spec + 7 : NULL;
    if (path == NULL || strpbrk(path, "*?[") == NULL || access(path, F_OK) == 0) {
      AB_TRY(add_trace(job, spec, spec, diag));
      continue;
    }
    glob_t g;
    int rc = glob(path, 0, NULL, &g);
    ab_status st = AB_OK;
    if (rc == GLOB_NOMATCH)
      st = ab_diag_set(diag, AB_ERR_INVALID, "-w '%s': no file matches '%s'", spec, path);
    else if (rc != 0)
      st = ab_diag_set(diag, rc == GLOB_NOSPACE ? AB_ERR_INTERNAL : AB_ERR_INVALID, "-w '%s': cannot read the folders of '%s'",
                       spec, path);
    for (size_t m = 0; st == AB_OK && m < g.gl_pathc; m++) {
      char one[sizeof job->t[0].es.source + 8];
      if ((size_t)snprintf(one, sizeof one, "replay:%s", g.gl_pathv[m]) >= sizeof one)
        st = ab_diag_set(diag, AB_ERR_INVALID, "-w '%s': the path %s is too long", spec, g.gl_pathv[m]);
      else
        st = add_trace(job, one, spec, diag);
    }
    if (rc == 0 || rc == GLOB_NOMATCH) globfree(&g);
    AB_TRY(st);
  }
  return AB_OK;
}

/* Builds every trace; each is then called by the name people read (a trace by its file name),
 * or by its whole spec where two file names are the same. tune writes no file named after its
 * workload, so the stream can carry that name into tune.csv and every line. */
static ab_status build_job(const ab_run_spec_t *o, const tune_args_t *a, job_t *job, ab_diag_t *diag) {
  uint64_t *digest = calloc(job->n + 1, sizeof *digest), *bytes = calloc(job->n + 1, sizeof *bytes);
  if (digest == NULL || bytes == NULL) {
    free(digest);
    free(bytes);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  ab_status st = AB_OK;
  for (size_t k = 0; k < job->n && st == AB_OK; k++) {
    trace_t *t = &job->t[k];
    /* A trace file whose bytes an earlier one has is not read again: its events are that one's. */
    const char *path = strncmp(t->spec, "replay:", 7) == 0 ? t->spec + 7 : NULL;
    ab_diag_t ignored = {""};
    bool hashed = path && ab_input_digest(path, &digest[k], &bytes[k], &ignored) == AB_OK;
    for (size_t j = 0; j < k && hashed && !t->built; j++)
      if (bytes[j] == bytes[k] && digest[j] == digest[k] && job->t[j].built && !job->t[j].borrowed) {
        t->es = job->t[j].es;
        snprintf(t->es.source, sizeof t->es.source, "%s", t->spec);
        t->built = t->borrowed = true;
      }
    if (!hashed) bytes[k] = UINT64_MAX; /* never alike */
    if (!t->built && (st = ab_run_build(o, t->spec, &t->es, diag)) == AB_OK) t->built = true;
  }
  free(digest);
  free(bytes);
  AB_TRY(st);
  for (size_t k = 0; k < job->n; k++) {
    trace_t *t = &job->t[k];
    char name[sizeof t->es.source];
    ab_results_workload_name(t->es.source, name, sizeof name);
    snprintf(t->es.source, sizeof t->es.source, "%s", name);
  }
  for (size_t k = 0; k < job->n; k++)
    for (size_t j = k + 1; j < job->n; j++)
      if (strcmp(job->t[k].es.source, job->t[j].es.source) == 0) {
        for (size_t i = 0; i < job->n; i++) snprintf(job->t[i].es.source, sizeof job->t[i].es.source, "%s", job->t[i].spec);
        k = j = job->n;
      }
  if (job->n == 1) {
    snprintf(job->name, sizeof job->name, "%s", job->t[0].es.source);
    return AB_OK;
  }
  for (size_t i = 0; i < a->nspecs; i++) {
    char name[sizeof job->t[0].es.source];
    ab_results_workload_name(a->specs[i], name, sizeof name);
    size_t used = strlen(job->name);
    snprintf(job->name + used, sizeof job->name - used, "%s%s", used ? " " : "", name);
  }
  return AB_OK;
}

/* "64 traces, 1 distinct" (Note [Traces alike]), or "3 traces" where none is alike another. */
static const char *traces_text(const job_t *job) {
  static char text[64];
  if (job->distinct < job->n) snprintf(text, sizeof text, "%zu traces, %zu distinct", job->n, job->distinct);
  else snprintf(text, sizeof text, "%zu traces", job->n);
  return text;
}

/* A trace's name in the table: without the replay: that every trace has. */
static const char *short_name(const char *name) { return strncmp(name, "replay:", 7) == 0 ? name + 7 : name; }

/* ---- results ---------------------------------------------------------------------------- */

/* tune.csv, one row per configuration tried and trace, in rank order (harness/README.md,
 * "Recording a job, and tuning its settings"). */
#define TUNE_COLUMNS(X)                                                                                \
  X(workload, 0) X(trace, 0) X(worst, 1) X(device, 0) X(objective, 0) X(cap_bytes, 1) X(rank, 1)      \
  X(strategy, 0) X(conf, 0) X(recommended, 1) X(recorded, 1) X(status, 0) X(oom_kind, 0)               \
  X(peak_requested_bytes, 1) X(peak_allocated_bytes, 1) X(peak_reserved_bytes, 1) X(num_device_alloc, 1) \
  X(num_device_free, 1) X(num_alloc_retries, 1) X(min_budget_bytes, 1) X(max_fail_bytes, 1)            \
  X(safe_cap_bytes, 1) X(fail_ranges, 1) X(headroom_bytes, 1) X(limit, 0)                             \
  X(probes, 1) X(wall_s, 1) X(note, 0) X(trace_ooms, 1) X(alloc_time_s, 1) X(peak_reserved_low, 1)       \
  X(peak_reserved_high, 1) X(device_allocs_low, 1) X(device_allocs_high, 1)

#define TUNE_COL(name, numeric) {#name, numeric},
static const ab_col_t tune_cols[] = {TUNE_COLUMNS(TUNE_COL)};
#undef TUNE_COL
#define TUNE_INDEX(name, numeric) C_##name,
enum { TUNE_COLUMNS(TUNE_INDEX) NCOLS };
#undef TUNE_INDEX

typedef struct tune_view_s {
  const job_t *job;
  const char *device;
  ab_tune_objective_t objective;
  uint64_t cap;
  uint64_t total;                            /* the card's */
  const ab_tune_result_t *winner, *recorded; /* ranked results (each its worst trace's); may be NULL */
  const ab_tune_result_t *tight;             /* ranked first but passed over for its headroom; may be NULL */
} tune_view_t;

/* Note [Headroom]: under the job's cap, a setting whose safe cap (Note [Cap map], bisect.c)
 * is the cap itself, or above it, completes only by a hair: caps a little different fail,
 * and a job's memory moves from run to run (the driver's placement, a library's workspace).
 * The headroom is the cap less the safe cap (less the smallest cap, where the caps were not
 * mapped). The recommendation is the best by the objective among the settings with at least
 * AB_TUNE_HEADROOM_PCT of the cap as headroom, where any has it, and says whom it passed over
 * and why. */
#define AB_TUNE_HEADROOM_PCT 2

/* The cap less r's deployable cap (ab_tune_deployable), signed; false when there is no cap or
 * no cap completed. */
static bool headroom_of(const tune_view_t *v, const ab_tune_result_t *r, int64_t *headroom) {
  if (v->cap == 0 || !r->search.passed) return false;
  *headroom = (int64_t)v->cap - (int64_t)ab_tune_deployable(r);
  return true;
}

static bool comfortable(const tune_view_t *v, const ab_tune_result_t *r) {
  int64_t h;
  return !headroom_of(v, r, &h) || h * 100 >= (int64_t)v->cap * AB_TUNE_HEADROOM_PCT;
}

/* Appends one clause to a note. */
static void clause(char *out, size_t size, const char *text) {
  size_t used = strlen(out);
  snprintf(out + used, size - used, "%s%s", used ? "; " : "", text);
}

/* What qualifies a result of the trace es, in words; "" when nothing does. */
static void note_of(const tune_view_t *v, const ab_events_t *es, const ab_tune_result_t *r, char *out, size_t size) {
  out[0] = '\0';
  if (r->status == AB_RUN_ERROR) {
    snprintf(out, size, "error: %s", r->message);
    return;
  }
  if (r->cand.family == AB_TUNE_REFERENCE) clause(out, size, "reference: not a PyTorch setting; its limit is a budget");
  if (r->status == AB_RUN_OOM) clause(out, size, v->cap ? "out of memory under the cap" : "out of memory on the card");
  if (!r->search.passed) clause(out, size, "no cap up to the card's total sufficed");
  /* Note [Cap map] (bisect.c); short, as the table's last column. */
  if (r->search.mapped && r->search.fail_ranges) {
    char safe[48], b[32];
    snprintf(safe, sizeof safe, "fails above it; safe from %s", ab_format_bytes(r->search.safe_cap, b, sizeof b));
    clause(out, size, safe);
  }
  if (r->search.mapped && r->search.band_raised && !r->search.fail_ranges) {
    char safe[80], b[32];
    snprintf(safe, sizeof safe, "a placement fails above it; safe from %s", ab_format_bytes(r->search.safe_cap, b, sizeof b));
    clause(out, size, safe);
  }
  if (r->status == AB_RUN_OK && r->band.oom_variants) clause(out, size, "out of memory under some placements");
  if (r->search.mapped && r->search.band_checked != UINT64_MAX) {
    char upto[80], b[32];
    snprintf(upto, sizeof upto, "placements checked up to %s", ab_format_bytes(r->search.band_checked, b, sizeof b));
    clause(out, size, upto);
  }
  if (r->search.map_cut)
    clause(out, size, r->search.passed && r->search.max_fail + 1 == r->search.min_budget ? "mapped up to the smallest"
                                                                                          : "caps bisected, not mapped");
  if (r->search.upper_bound) {
    char bound[96];
    snprintf(bound, sizeof bound, "upper bound: the traced program survived %" PRIu64 " OOMs", es->trace_ooms);
    clause(out, size, bound);
  }
}

static const char *objective_name(ab_tune_objective_t o) {
  return o == AB_TUNE_BUDGET ? "budget" : o == AB_TUNE_TIME ? "time" : "reserved";
}

/* The row of trace k under the configuration cfg (ranked: its worst trace's result). */
static ab_status add_row(ab_table_t *t, const tune_view_t *v, size_t k, const ab_tune_result_t *cfg) {
  const trace_t *tr = &v->job->t[k];
  const ab_tune_result_t *r = &tr->r[cfg->order];
  char cells[NCOLS][AB_DIAG_BYTES + 64];
  const char *row[NCOLS];
  for (int i = 0; i < NCOLS; i++) row[i] = cells[i], cells[i][0] = '\0';
#define SET(col, ...) snprintf(cells[C_##col], sizeof cells[0], __VA_ARGS__)
  SET(workload, "%s", v->job->name);
  SET(trace, "%s", tr->es.source);
  SET(worst, "%d", cfg->trace == k);
  SET(device, "%s", v->device);
  SET(objective, "%s", objective_name(v->objective));
  SET(cap_bytes, "%" PRIu64, v->cap);
  SET(rank, "%zu", cfg->rank);
  SET(strategy, "%s", r->cand.strategy);
  SET(conf, "%s", r->cand.conf);
  SET(recommended, "%d", cfg == v->winner);
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
  if (r->search.mapped && r->search.passed) SET(safe_cap_bytes, "%" PRIu64, r->search.safe_cap);
  if (r->search.mapped) SET(fail_ranges, "%u", r->search.fail_ranges);
  int64_t headroom;
  if (r->cand.family != AB_TUNE_REFERENCE && headroom_of(v, r, &headroom)) SET(headroom_bytes, "%" PRId64, headroom);
  SET(limit, "%s", r->cand.family == AB_TUNE_REFERENCE ? "budget" : "cap");
  SET(probes, "%u", r->search.probes);
  SET(wall_s, "%.6f", r->wall_s);
  note_of(v, &tr->es, r, cells[C_note], sizeof cells[0]);
  SET(trace_ooms, "%" PRIu64, tr->es.trace_ooms);
  if (r->status == AB_RUN_OK && r->alloc_time_s >= 0) SET(alloc_time_s, "%.6f", r->alloc_time_s);
  SET(peak_reserved_low, "%" PRIu64, r->band.reserved_lo);
  SET(peak_reserved_high, "%" PRIu64, r->band.reserved_hi);
  SET(device_allocs_low, "%" PRIu64, r->band.allocs_lo);
  SET(device_allocs_high, "%" PRIu64, r->band.allocs_hi);
#undef SET
  return ab_table_add(t, row);
}

/* The ranking as people read it: sizes in binary units; with several traces, each
 * configuration's figures are its worst trace's, named. */
static const ab_col_t display_cols[] = {{"rank", true},          {"strategy", false},     {"conf", false},
                                        {"peak reserved", true}, {"smallest cap", true}, {"device allocs", true},
                                        {"time", true},          {"worst trace", false},  {"", false}};

/* Whether the job's settings were recorded (a trace), or are only the defaults (a generator). */
static bool recorded_any(const tune_view_t *v) { return strncmp(v->job->t[0].es.source, "replay:", 7) == 0; }

/* A conf for the table: wrapped to lines of at most CONF_WIDTH characters, so that the table
 * fits 132 columns; never cut, since two confs cut alike would read as one
 * ("max_split_size_mb:256,max_n..." stood for two). A line ends, by preference, after a ','
 * between two keys, after a key's ':', after a ',' inside a list, else at the width. Returns
 * the lines written (at most max). */
enum { CONF_WIDTH = 30, CONF_LINES = 16 };

static size_t wrap_conf(const char *whole, char (*lines)[CONF_WIDTH + 1], size_t max) {
  size_t n = 0;
  int depth = 0; /* inside [...] at the start of the line */
  for (const char *p = whole; *p && n < max; n++) {
    size_t len = strlen(p), take = len;
    if (len > CONF_WIDTH) {
      size_t best[3] = {0, 0, 0}; /* the last break of each preference, as a length */
      int d = depth;
      for (size_t i = 0; i < CONF_WIDTH; i++) {
        if (p[i] == '[') d++;
        if (p[i] == ']' && d > 0) d--;
        if (p[i] == ',') best[d == 0 ? 0 : 2] = i + 1;
        if (p[i] == ':' && d == 0) best[1] = i + 1;
      }
      take = best[0] ? best[0] : best[1] ? best[1] : best[2] ? best[2] : CONF_WIDTH;
    }
    for (size_t i = 0; i < take; i++) depth += p[i] == '[' ? 1 : p[i] == ']' && depth > 0 ? -1 : 0;
    snprintf(lines[n], CONF_WIDTH + 1, "%.*s", (int)take, p);
    p += take;
  }
  return n;
}

/* fig: the row's peak reserved and its smallest cap, formatted with the rest of the table's
 * (ab_format_bytes_apart), so that two configurations ranked apart never read the same. */
static ab_status add_display_row(ab_table_t *t, const tune_view_t *v, const ab_tune_result_t *r,
                                 char (*fig)[AB_BYTES_TEXT]) {
  char rank[16], reserved[3 * AB_BYTES_TEXT], cap[AB_BYTES_TEXT + 8], allocs[64], note[AB_DIAG_BYTES + 64],
      mark[AB_DIAG_BYTES + 128];
  snprintf(rank, sizeof rank, "%zu", r->rank);
  const ab_band_t *band = &r->band;
  if (r->status != AB_RUN_OK)
    snprintf(reserved, sizeof reserved, "%s", r->status == AB_RUN_OOM ? "OOM" : ab_run_status_name(r->status));
  else if (band->reserved_lo == band->reserved_hi)
    snprintf(reserved, sizeof reserved, "%s", fig[0]);
  else
    ab_band_format_bytes((uint64_t)r->stats.reserved_bytes.peak, band->reserved_lo, band->reserved_hi, reserved,
                         sizeof reserved);
  if (r->search.passed)
    snprintf(cap, sizeof cap, "%s", fig[1]);
  else
    snprintf(cap, sizeof cap, "-");
  if (band->allocs_lo != band->allocs_hi)
    snprintf(allocs, sizeof allocs, "%" PRIu64 " (%" PRIu64 "-%" PRIu64 ")", r->stats.num_device_alloc, band->allocs_lo,
             band->allocs_hi);
  else
    snprintf(allocs, sizeof allocs, "%" PRIu64, r->stats.num_device_alloc);
  const ab_events_t *es = &v->job->t[r->trace].es;
  note_of(v, es, r, note, sizeof note);
  /* The mark "reference" says the first (with what its limit is); "OOM" in the peak's column
   * and the title's "under the cap" the second. */
  if (r->cand.family == AB_TUNE_REFERENCE || (r->status == AB_RUN_OOM && r->search.passed && !r->search.upper_bound))
    note[0] = '\0';
  /* What failed is said in full once, as the command ends (say_failures); the row says that it did. */
  if (r->status == AB_RUN_ERROR) snprintf(note, sizeof note, "failed");
  /* The references (raw, pooled, async, -s) are no PYTORCH_CUDA_ALLOC_CONF: marked so. */
  bool reference = r->cand.family == AB_TUNE_REFERENCE;
  const char *recorded = recorded_any(v) ? "recorded" : "the defaults";
  /* A reference's smallest limit is a budget (the strategy has no cap): said here, so that its
   * column holds figures alone. */
  snprintf(mark, sizeof mark, "%s%s%s%s%s%s", r == v->winner ? "<- recommended" : "",
           reference ? (r->search.passed ? "reference (a budget)" : "reference") : "",
           r == v->winner && r->cand.recorded ? ", " : "", r->cand.recorded ? recorded : "",
           (r == v->winner || r->cand.recorded || reference) && note[0] ? "; " : "", note);
  char conf[CONF_LINES][CONF_WIDTH + 1];
  const char *whole = reference ? "-" : r->cand.conf[0] ? r->cand.conf : "(default)";
  size_t lines = wrap_conf(whole, conf, CONF_LINES);
  char time[32] = "-";
  if (r->status == AB_RUN_OK && r->alloc_time_s >= 0) snprintf(time, sizeof time, "%.1f ms", r->alloc_time_s * 1e3);
  const char *row[] = {rank, r->cand.strategy, conf[0], reserved, cap, allocs, time, short_name(es->source), mark};
  ab_status st = ab_table_add(t, row);
  /* The rest of a long conf on lines of its own, under it. */
  for (size_t i = 1; i < lines && st == AB_OK; i++) {
    const char *more[] = {"", "", conf[i], "", "", "", "", "", ""};
    st = ab_table_add(t, more);
  }
  return st;
}

/* The n sizes of one column, read in one form (each in a binary unit with the same decimals, as
 * ab_format_bytes_apart picks them so that two sizes that differ never read alike; where that
 * takes exact bytes for some, every size of the column shows its bytes), never "7.27 GiB"
 * above "6.98 GiB (7491026944 B)". Zeros (no figure) are left out of the set. */
static void uniform_column(const uint64_t *v, size_t n, char (*out)[AB_BYTES_TEXT]) {
  ab_format_bytes_apart(v, n, out);
  bool exact = false;
  for (size_t i = 0; i < n; i++) exact |= v[i] && strchr(out[i], '(') != NULL;
  for (size_t i = 0; exact && i < n; i++) {
    char unit[32];
    if (v[i]) snprintf(out[i], AB_BYTES_TEXT, "%s (%" PRIu64 " B)", ab_format_bytes(v[i], unit, sizeof unit), v[i]);
  }
}

/* "X less" or "X more" (of bytes), for what the winner saves. */
static const char *saving(uint64_t recorded, uint64_t winner, char *buf, size_t size) {
  char b[32];
  if (recorded == winner) return snprintf(buf, size, "the same"), buf;
  ab_format_bytes(recorded > winner ? recorded - winner : winner - recorded, b, sizeof b);
  snprintf(buf, size, "%s %s", b, recorded > winner ? "less" : "more");
  return buf;
}

/* " on the worst of its N traces, NAME" where the job has several; "" otherwise. */
static const char *on_worst(const tune_view_t *v, const ab_tune_result_t *r, char *buf, size_t size) {
  if (v->job->n == 1) return "";
  const job_t *job = v->job;
  if (job->distinct < job->n)
    snprintf(buf, size, " on the worst of its %zu traces (%zu distinct), %s", job->n, job->distinct,
             short_name(job->t[r->trace].es.source));
  else
    snprintf(buf, size, " on the worst of its %zu traces, %s", job->n, short_name(job->t[r->trace].es.source));
  return buf;
}

/* Whether the smallest cap is one to deploy (Note [Cap map], bisect.c): where larger caps
 * fail again, the cap from which every one completes; where the map was cut, that larger caps
 * were not all replayed. */
static void say_safe_cap(FILE *f, const ab_tune_result_t *w) {
  char a[32];
  if (!w->search.passed || w->cand.family == AB_TUNE_REFERENCE) return;
  if (w->search.mapped && (w->search.fail_ranges || w->search.band_raised))
    fprintf(f, "; it fails again at larger caps (%u range%s%s): every cap from %s up completes", w->search.fail_ranges,
            w->search.fail_ranges == 1 ? "" : "s", w->search.band_raised ? ", more under some placements" : "",
            ab_format_bytes(w->search.safe_cap, a, sizeof a));
  else if (!w->search.mapped)
    fprintf(f, "; larger caps not all replayed, and may fail (allocbench oom --search cap maps them)");
}

/* A headroom in binary units, with its sign: "-141.61 MiB". */
static const char *headroom_text(int64_t h, char *buf, size_t size) {
  char b[32];
  snprintf(buf, size, "%s%s", h < 0 ? "-" : "", ab_format_bytes(h < 0 ? -(uint64_t)h : (uint64_t)h, b, sizeof b));
  return buf;
}

/* Under the job's cap: the winner's headroom, and whom it was preferred to (Note [Headroom]). */
static void say_headroom(FILE *f, const tune_view_t *v, const ab_tune_result_t *w) {
  int64_t h;
  char a[40], b[32];
  if (!headroom_of(v, w, &h)) return;
  fprintf(f, "# headroom under the cap: %s (the cap less the %s cap, %s)\n", headroom_text(h, a, sizeof a),
          w->search.mapped ? "safe" : "smallest", ab_format_bytes(ab_tune_deployable(w), b, sizeof b));
  if (v->tight == NULL || !headroom_of(v, v->tight, &h)) return;
  fprintf(f, "# preferred to %s (first by %s), whose headroom is %s,\n"
             "# less than %d%% of the cap: a cap a little different, or a run that needs a little more, fails\n",
          v->tight->cand.conf[0] ? v->tight->cand.conf : "the defaults",
          v->objective == AB_TUNE_BUDGET ? "the cap" : "peak reserved", headroom_text(h, a, sizeof a), AB_TUNE_HEADROOM_PCT);
}

/* What makes the figures approximate, in the answer itself (the progress says it too). */
static void say_approximate(FILE *f, const tune_view_t *v) {
  for (size_t k = 0; k < v->job->n; k++) {
    const ab_events_t *es = &v->job->t[k].es;
    if (es->approximate[0])
      fprintf(f, "# approximate%s%s: %s\n", v->job->n > 1 ? ", " : "", v->job->n > 1 ? short_name(es->source) : "",
              es->approximate);
  }
}

/* The line to paste, and what the winner saves over the recorded configuration, as shell
 * comments so that the block can be pasted whole. With several traces each figure is of the
 * configuration's worst trace; where another trace needs a larger cap (or reserves more, when
 * ranked by the cap), that is said too, since the cap is set for every rank. */
static void print_winner(FILE *f, const tune_view_t *v, const char *fraction_item, bool cap_given, size_t ntried) {
  const ab_tune_result_t *w = v->winner, *rec = v->recorded;
  if (w == NULL) {
    fprintf(f, "# no PYTORCH_CUDA_ALLOC_CONF of the %zu tried ran the whole %s%s\n", ntried, v->job->name,
            v->cap ? " under the cap" : "");
    return;
  }
  fprintf(f, "export PYTORCH_CUDA_ALLOC_CONF='%s%s%s'\n", w->cand.conf, w->cand.conf[0] && fraction_item[0] ? "," : "",
          fraction_item);
  char a[32], c[48], d[48], where[300];
  /* The winner's figures and the recorded configuration's, read apart where they differ. */
  enum { W_PEAK, W_CAP, R_PEAK, R_CAP, NFIG };
  const uint64_t figures[NFIG] = {(uint64_t)w->stats.reserved_bytes.peak, w->search.min_budget,
                                  rec ? (uint64_t)rec->stats.reserved_bytes.peak : 0, rec ? rec->search.min_budget : 0};
  char fig[NFIG][AB_BYTES_TEXT];
  ab_format_bytes_apart(figures, NFIG, fig);
  char band[2 * AB_BYTES_TEXT + 48] = ""; /* the placement band, where it is not a point */
  if (w->band.reserved_lo != w->band.reserved_hi) {
    const uint64_t ends[2] = {w->band.reserved_lo, w->band.reserved_hi};
    char end[2][AB_BYTES_TEXT];
    ab_format_bytes_apart(ends, 2, end);
    snprintf(band, sizeof band, " (%s to %s over the driver's placements)", end[0], end[1]);
  }
  fprintf(f, "# predicted peak reserved %s%s, smallest cap %s%s", fig[W_PEAK], band, w->search.passed ? fig[W_CAP] : "none found",
          on_worst(v, w, where, sizeof where));
  say_safe_cap(f, w);
  if (v->cap && cap_given) {
    char fraction[32] = "1";
    if (v->cap < v->total) ab_pipeline_cap_fraction(v->cap, v->total, fraction, sizeof fraction);
    fprintf(f, ", under the cap of %s (torch.cuda.set_per_process_memory_fraction(%s))", ab_format_bytes(v->cap, c, sizeof c),
            fraction);
  }
  fputc('\n', f);
  say_headroom(f, v, w);
  /* The other figure at its worst, where another trace has it. */
  size_t most = w->trace;
  for (size_t k = 0; k < v->job->n; k++) {
    const ab_tune_result_t *r = &v->job->t[k].r[w->order], *m = &v->job->t[most].r[w->order];
    if (v->objective == AB_TUNE_RESERVED ? r->search.passed && m->search.passed && r->search.min_budget > m->search.min_budget
                                         : r->stats.reserved_bytes.peak > m->stats.reserved_bytes.peak)
      most = k;
  }
  const ab_tune_result_t *m = &v->job->t[most].r[w->order];
  if (most != w->trace && v->objective == AB_TUNE_RESERVED)
    fprintf(f, "# every trace runs under a cap of %s (%s's smallest)\n", ab_format_bytes(m->search.min_budget, a, sizeof a),
            short_name(v->job->t[most].es.source));
  if (most != w->trace && v->objective == AB_TUNE_BUDGET)
    fprintf(f, "# the most any trace reserves at its peak: %s (%s)\n",
            ab_format_bytes((uint64_t)m->stats.reserved_bytes.peak, a, sizeof a), short_name(v->job->t[most].es.source));
  if (rec == NULL) return;
  /* A trace recorded its configuration; a generator has none but PyTorch's defaults. */
  char name[sizeof rec->cand.conf + 48];
  if (recorded_any(v))
    snprintf(name, sizeof name, "the recorded configuration (%s)", rec->cand.conf[0] ? rec->cand.conf : "the defaults");
  else
    snprintf(name, sizeof name, "the defaults");
  if (rec == w) {
    fprintf(f, "# %s %s already the best of the %zu tried\n", name, recorded_any(v) ? "is" : "are", ntried);
  } else if (rec->status != AB_RUN_OK) {
    fprintf(f, "# %s ran out of memory%s%s\n", name, v->cap ? " under the cap" : "", on_worst(v, rec, where, sizeof where));
  } else {
    uint64_t rp = (uint64_t)rec->stats.reserved_bytes.peak, wp = (uint64_t)w->stats.reserved_bytes.peak;
    /* Two lines, so that each fits a terminal of 132 columns. */
    fprintf(f, "# against %s: peak reserved %s, smallest cap %s%s\n# the recommended: %s", name, fig[R_PEAK],
            rec->search.passed ? fig[R_CAP] : "none found",
            on_worst(v, rec, where, sizeof where), saving(rp, wp, c, sizeof c));
    if (rp > wp) fprintf(f, " (%.1f%%)", 100.0 * (double)(rp - wp) / (double)rp);
    fprintf(f, " at the peak");
    if (rec->search.passed && w->search.passed)
      fprintf(f, ", %s in the smallest cap", saving(rec->search.min_budget, w->search.min_budget, d, sizeof d));
    if (v->job->n > 1) fprintf(f, ", worst trace against worst trace");
    fputc('\n', f);
    /* What it costs or saves in time (Note [Allocator time], tune.c). */
    double wt = w->alloc_time_s, rt = rec->alloc_time_s;
    fprintf(f, "# allocator time over the job: %.1f ms against %.1f ms (%s%.1f ms; device calls by the card's cost model)\n",
            wt * 1e3, rt * 1e3, wt > rt ? "+" : wt < rt ? "-" : "", fabs(wt - rt) * 1e3);
  }
  say_approximate(f, v);
}

/* ---- progress ----------------------------------------------------------------------------- */

typedef struct progress_s {
  const ab_run_spec_t *o;
  const char *trace;    /* the trace the runs are on, where the job has several; else NULL */
  size_t offset, total; /* runs before this trace's part of the stage, and in all so far */
} progress_t;

static void on_done(void *ctx, const ab_tune_result_t *r, size_t done, size_t total) {
  progress_t *p = ctx;
  (void)total;
  if (p->o->quiet || r->status == AB_RUN_INTERRUPTED) return;
  char a[32], b[32];
  if (r->status == AB_RUN_ERROR) { /* a library's failure names the library already */
    bool named = strncmp(r->message, r->cand.strategy, strlen(r->cand.strategy)) == 0;
    fprintf(stderr, "allocbench tune: [%zu/%zu] %s%s%s%s%s%sfailed: %s (%.1f s)\n", p->offset + done, p->total,
            p->trace ? short_name(p->trace) : "", p->trace ? ": " : "", named ? "" : r->cand.strategy,
            named || r->cand.family == AB_TUNE_REFERENCE ? "" : " ",
            named || r->cand.family == AB_TUNE_REFERENCE ? "" : r->cand.conf[0] ? r->cand.conf : "(default)",
            named ? "" : ": ", r->message, r->wall_s);
    return;
  }
  fprintf(stderr, "allocbench tune: [%zu/%zu] %s%s%s%s%s: peak reserved %s, smallest %s %s (%.1f s)\n", p->offset + done,
          p->total, p->trace ? short_name(p->trace) : "", p->trace ? ": " : "", r->cand.strategy,
          r->cand.family == AB_TUNE_REFERENCE ? "" : " ",
          r->cand.family == AB_TUNE_REFERENCE ? "" : r->cand.conf[0] ? r->cand.conf : "(default)",
          r->status == AB_RUN_OK ? ab_format_bytes((uint64_t)r->stats.reserved_bytes.peak, a, sizeof a)
                                 : ab_run_status_name(r->status),
          r->cand.family == AB_TUNE_REFERENCE ? "budget" : "cap",
          r->search.passed ? ab_format_bytes(r->search.min_budget, b, sizeof b) : "none", r->wall_s);
}

/* ---- the command -------------------------------------------------------------------------- */

/* A configuration that failed (a library that crashed, a run that could not start) is a row
 * of tune.csv and no answer: the others are ranked and written, and the command then fails
 * with one line naming the first failure, as matrix does. */
static int say_failures(const ab_run_spec_t *o, const ab_tune_result_t *r, size_t n) {
  size_t failed = 0, first = n;
  for (size_t i = 0; i < n; i++)
    if (r[i].status == AB_RUN_ERROR && failed++ == 0) first = i;
  if (failed == 0) return AB_EXIT_OK;
  char line[AB_DIAG_BYTES + 256];
  snprintf(line, sizeof line, "%zu of %zu configurations failed (status error in %s/tune.csv): %s%s", failed, n,
           o->out_dir, r[first].message, failed > 1 ? "; and others" : "");
  return ab_cli_fail(o, line);
}

typedef struct setup_s {
  char recorded[AB_TUNE_CONF_BYTES]; /* the recorded conf without its memory fraction */
  char fraction[64];                 /* the recorded per_process_memory_fraction item, as written */
  uint64_t cap;
  uint64_t total; /* the card's */
  unsigned jobs;
  char device[96];
  bool addresses; /* the recorded configuration's row takes the recorded addresses */
  ab_cli_strategies_t extra; /* -s: more strategies for reference */
} setup_t;

/* The recorded configuration (the first trace's), the device and the cap: bad input refused
 * as one line. */
static int setup(const ab_run_spec_t *o, const tune_args_t *a, const ab_events_t *es, setup_t *s) {
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
  ab_run_note_device(o, closed.device, closed.kind);
  snprintf(s->device, sizeof s->device, "%s", closed.device);
  s->total = closed.total_bytes;
  char x[32], y[32];
  if (a->cap > closed.total_bytes) {
    snprintf(diag.msg, sizeof diag.msg, "--cap %s is more than the device's total of %s", ab_format_bytes(a->cap, x, sizeof x),
             ab_format_bytes(closed.total_bytes, y, sizeof y));
    return ab_cli_usage_error(o, diag.msg);
  }
  s->cap = a->cap;
  /* The recorded configuration under the job's cap is the recorded run, unless --cap replaces
   * the fraction it ran under; only the simulated card takes addresses. */
  s->addresses = closed.kind == AB_DEVICE_SIM && !(a->cap && s->fraction[0]);
  if (a->cap && s->fraction[0]) {
    if (!o->quiet) fprintf(stderr, "allocbench tune: --cap replaces the recorded %s\n", s->fraction);
    s->fraction[0] = '\0';
  } else if (recorded.memory_fraction < 1.0) {
    /* As PyTorch turns the fraction into its cap (caching.c does the same); the line to paste
     * says it in the fewest digits that make the same cap. */
    s->cap = (uint64_t)(recorded.memory_fraction * (double)closed.total_bytes);
    char fraction[32];
    ab_pipeline_cap_fraction(s->cap, closed.total_bytes, fraction, sizeof fraction);
    snprintf(s->fraction, sizeof s->fraction, "per_process_memory_fraction:%s", fraction);
  }
  s->jobs = (unsigned)a->jobs;
  if (closed.kind != AB_DEVICE_SIM) {
    if (a->jobs > 1 && !o->quiet) fprintf(stderr, "allocbench tune: --jobs 1 on %s: the runs would share its memory\n", closed.device);
    s->jobs = 1;
  }
  return -1;
}

/* What is said of each trace before the runs, and the recorded addresses each takes. */
static ab_status prepare_traces(const ab_run_spec_t *o, bool addresses, job_t *job, ab_diag_t *diag) {
  const ab_events_t *first = &job->t[0].es;
  for (size_t k = 0; k < job->n; k++) {
    trace_t *t = &job->t[k];
    bool same = strcmp(t->es.settings, first->settings) == 0;
    if (!same && !o->quiet)
      fprintf(stderr,
              "allocbench tune: warning: %s was recorded under '%s', %s under '%s': the recorded configuration and "
              "its cap are %s's\n",
              t->es.source, t->es.settings[0] ? t->es.settings : "the defaults", first->source,
              first->settings[0] ? first->settings : "the defaults", first->source);
    if (t->es.trace_ooms && !o->quiet)
      fprintf(stderr,
              "allocbench tune: warning: %s%sthe traced program caught %" PRIu64 " OOMs and went on (it changed course "
              "under memory pressure): the figures are bounds, not predictions\n",
              job->n > 1 ? t->es.source : "", job->n > 1 ? ": " : "", t->es.trace_ooms);
    /* The recorded configuration under the job's cap (--cap, or the recorded fraction) is the
     * recorded run: its device allocations go where the trace says they went (Note [Recorded
     * addresses], cmd_replay.c). */
    if (addresses && same && ab_events_address_plan(&t->es, &t->plan, &t->plan_len) != AB_OK)
      return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  return AB_OK;
}

static uint64_t largest_request(const job_t *job) {
  uint64_t m = 0;
  for (size_t k = 0; k < job->n; k++) {
    const ab_events_t *es = &job->t[k].es;
    for (size_t i = 0; i < es->n; i++)
      if (es->ev[i].kind == AB_EV_ALLOC && es->ev[i].bytes > m) m = es->ev[i].bytes;
  }
  return m;
}

/* Runs list.c[first, list.n) on every distinct trace (Note [Traces alike]), into each trace's
 * results from first; stops between traces at a signal. With several ranks (spread.h) run j,
 * configuration i on the d-th distinct trace (j = d n + i), is rank j mod world's; the results
 * come together at rank 0, and back to every rank when to_all. */
static ab_status run_stage(job_t *job, const ab_tune_list_t *list, size_t first, const ab_tune_opts_t *opts,
                           progress_t *prog, bool to_all, ab_diag_t *diag) {
  size_t n = list->n - first, runs = job->distinct * n;
  ab_tune_candidate_t *mine = malloc((n ? n : 1) * sizeof *mine);
  ab_tune_result_t *got = malloc((n ? n : 1) * sizeof *got), *all = calloc(runs ? runs : 1, sizeof *all);
  size_t *which = malloc((n ? n : 1) * sizeof *which);
  ab_status st = mine && got && all && which ? AB_OK : ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  prog->offset = 0;
  prog->total = 0;
  for (size_t j = 0; j < runs; j++) prog->total += ab_spread_mine(&job->sp, j);
  for (size_t k = 0, d = 0; k < job->n && st == AB_OK && !ab_run_stop; k++) {
    trace_t *t = &job->t[k];
    if (job->tt[k].same != k) continue;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
      if (ab_spread_mine(&job->sp, d * n + i)) mine[m] = list->c[first + i], which[m++] = i;
    ab_tune_opts_t one = *opts;
    one.plan = t->plan;
    one.plan_len = t->plan_len;
    prog->trace = job->distinct > 1 ? t->es.source : NULL;
    if (m) st = ab_tune_run(&t->es, mine, m, 0, &one, got, diag);
    for (size_t q = 0; q < m && st == AB_OK; q++) {
      got[q].order = first + which[q];
      all[d * n + which[q]] = got[q];
    }
    prog->offset += m;
    d++;
  }
  if (st == AB_OK && !ab_run_stop) st = ab_spread_share(&job->sp, all, runs, sizeof *all, to_all, "tune's runs", diag);
  /* Every trace takes the results of the first trace alike it. */
  for (size_t k = 0, d = 0; st == AB_OK && k < job->n; k++) {
    if (job->tt[k].same != k) continue;
    memcpy(job->t[k].r + first, all + d * n, n * sizeof *all);
    d++;
  }
  for (size_t k = 0; st == AB_OK && k < job->n; k++)
    if (job->tt[k].same != k) memcpy(job->t[k].r + first, job->t[job->tt[k].same].r + first, n * sizeof *all);
  free(mine);
  free(got);
  free(all);
  free(which);
  return st;
}

/* Each trace as tune.h takes it, the traces alike found (Note [Traces alike]). */
static ab_status find_alike(job_t *job, ab_diag_t *diag) {
  job->tt = calloc(job->n, sizeof *job->tt);
  if (job->tt == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  for (size_t k = 0; k < job->n; k++)
    job->tt[k] = (ab_tune_trace_t){&job->t[k].es, job->t[k].es.source, job->t[k].plan, job->t[k].plan_len, 0, k};
  ab_tune_alike(job->tt, job->n);
  job->distinct = 0;
  for (size_t k = 0; k < job->n; k++) job->distinct += job->tt[k].same == k;
  return AB_OK;
}

/* What every rank must agree on before the runs are dealt out: the traces as they replay, the
 * configurations, and what each run is asked. */
static uint64_t job_digest(const job_t *job, const ab_tune_list_t *list, const ab_tune_opts_t *o) {
  uint64_t h = 1469598103934665603ULL;
#define FOLD(p, bytes)                                                                        \
  do {                                                                                        \
    const unsigned char *b_ = (const unsigned char *)(p);                                     \
    for (size_t i_ = 0; i_ < (bytes); i_++) h = (h ^ b_[i_]) * 1099511628211ULL;              \
  } while (0)
  FOLD(&job->n, sizeof job->n);
  for (size_t k = 0; k < job->n; k++) {
    FOLD(&job->tt[k].digest, sizeof job->tt[k].digest);
    FOLD(&job->tt[k].same, sizeof job->tt[k].same);
  }
  for (size_t i = 0; i < list->n; i++) {
    FOLD(list->c[i].strategy, strlen(list->c[i].strategy));
    FOLD(list->c[i].conf, strlen(list->c[i].conf) + 1);
    FOLD(&list->c[i].family, sizeof list->c[i].family);
    FOLD(&list->c[i].recorded, sizeof list->c[i].recorded);
  }
  if (o->device) FOLD(o->device, strlen(o->device));
  FOLD(&o->cap, sizeof o->cap);
  FOLD(&o->map_probes, sizeof o->map_probes);
  FOLD(&o->no_map, sizeof o->no_map);
  FOLD(&o->check, sizeof o->check);
#undef FOLD
  return h;
}

/* Each configuration of [from, to) as its worst trace's result (Note [A job of several
 * traces]); of equal ones, the first trace's. */
static void take_worst(const job_t *job, size_t from, size_t to, ab_tune_objective_t objective, ab_tune_result_t *worst) {
  for (size_t i = from; i < to; i++) {
    worst[i] = job->t[0].r[i];
    worst[i].trace = 0;
    for (size_t k = 1; k < job->n; k++)
      if (ab_tune_compare(&job->t[k].r[i], &worst[i], objective) > 0) {
        worst[i] = job->t[k].r[i];
        worst[i].trace = k;
      }
  }
}

/* The results ranked: appended to DIR/tune.csv, printed, with the line to paste. */
static int report(const ab_run_spec_t *o, const tune_args_t *a, const setup_t *s, const job_t *job, ab_tune_result_t *r,
                  size_t n, double t0, tune_view_t *view) {
  ab_tune_rank(r, n, a->objective);
  tune_view_t v = {job, s->device, a->objective, s->cap, s->total, NULL, NULL, NULL};
  const ab_tune_result_t *first = NULL, *roomy = NULL; /* Note [Headroom] */
  for (size_t i = 0; i < n; i++) {
    bool eligible = r[i].cand.family != AB_TUNE_REFERENCE && ab_tune_completes(&r[i]) &&
                    (a->objective != AB_TUNE_BUDGET || r[i].search.passed);
    if (first == NULL && eligible) first = &r[i];
    if (roomy == NULL && eligible && comfortable(&v, &r[i])) roomy = &r[i];
    if (v.recorded == NULL && r[i].cand.recorded) v.recorded = &r[i];
  }
  v.winner = roomy ? roomy : first;
  if (v.winner != first) v.tight = first;
  ab_table_t rows, shown;
  ab_table_init(&rows, tune_cols, NCOLS);
  ab_table_init(&shown, display_cols, sizeof display_cols / sizeof display_cols[0]);
  /* Each row's peak reserved and smallest cap (figs[2i], figs[2i+1]), each column a set read
   * in one form (uniform_column); a figure that does not apply is shown as a word instead. */
  uint64_t *figures = malloc((2 * n + 1) * sizeof *figures);
  char(*figs)[AB_BYTES_TEXT] = malloc((2 * n + 1) * sizeof *figs);
  char(*col)[AB_BYTES_TEXT] = malloc((n + 1) * sizeof *col);
  ab_status st = figures && figs && col ? AB_OK : AB_ERR_INTERNAL;
  for (size_t i = 0; i < n && st == AB_OK; i++) {
    figures[i] = r[i].status == AB_RUN_OK ? (uint64_t)r[i].stats.reserved_bytes.peak : 0;
    figures[n + i] = r[i].search.passed ? r[i].search.min_budget : 0;
  }
  for (size_t c = 0; c < 2 && st == AB_OK; c++) {
    uniform_column(&figures[c * n], n, col);
    for (size_t i = 0; i < n; i++) memcpy(figs[2 * i + c], col[i], AB_BYTES_TEXT);
  }
  free(col);
  for (size_t i = 0; i < n && st == AB_OK; i++) {
    for (size_t k = 0; k < job->n && st == AB_OK; k++) st = add_row(&rows, &v, k, &r[i]);
    if (st == AB_OK) st = add_display_row(&shown, &v, &r[i], &figs[2 * i]);
  }
  free(figures);
  free(figs);
  ab_diag_t io = {""};
  int rc = AB_EXIT_OK;
  if (st != AB_OK)
    rc = ab_cli_fail(o, "out of host memory");
  else if (ab_cli_append(o, &rows, "tune.csv", &io) != AB_OK)
    rc = ab_cli_fail(o, io.msg);
  if (rc == AB_EXIT_OK) {
    if (o->format == AB_FORMAT_TABLE) {
      const char *by = a->objective == AB_TUNE_BUDGET ? "the smallest cap"
                       : a->objective == AB_TUNE_TIME ? "allocator time"
                                                      : "peak reserved";
      if (job->n == 1)
        printf("%s on %s, %zu configurations ranked by %s%s\n\n", job->name, s->device, n, by, s->cap ? ", under the cap" : "");
      else
        printf("%s (%s) on %s, %zu configurations ranked by %s on their worst trace%s\n\n", job->name, traces_text(job),
               s->device, n, by, s->cap ? ", each trace under the cap" : "");
      static const char *const one[] = {"rank",          "strategy",   "conf", "peak reserved", "smallest cap",
                                        "device allocs", "time", ""};
      static const char *const several[] = {"rank",          "strategy",   "conf",        "peak reserved", "smallest cap",
                                            "device allocs", "time",       "worst trace", ""};
      if (job->n == 1)
        ab_cli_print(o, &shown, one, sizeof one / sizeof one[0]);
      else
        ab_cli_print(o, &shown, several, sizeof several / sizeof several[0]);
      putchar('\n');
    } else {
      ab_cli_print(o, &rows, NULL, 0);
    }
    /* csv and json keep stdout to the rows; the line to paste then goes with the progress. */
    print_winner(o->format == AB_FORMAT_TABLE ? stdout : stderr, &v, s->fraction, a->cap > 0, n);
    /* And to a file, for the page (report.h). */
    char path[4096];
    snprintf(path, sizeof path, "%s/tune_answer.txt", o->out_dir);
    ab_output_t answer;
    if (ab_output_open(&answer, path, &io) == AB_OK) {
      print_winner(answer.f, &v, s->fraction, a->cap > 0, n);
      if (ab_output_commit(&answer, &io) != AB_OK) rc = ab_cli_fail(o, io.msg);
    } else {
      rc = ab_cli_fail(o, io.msg);
    }
    /* The threads that ran: never more than the configurations. */
    size_t threads = s->jobs ? s->jobs : (size_t)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads > n) threads = n;
    if (!o->quiet)
      fprintf(stderr, "allocbench tune: %zu configurations%s in %.1f s on %zu thread%s; all of them in %s/tune.csv\n", n,
              job->n > 1 ? " on every trace" : "", ab_clock_s() - t0, threads, threads == 1 ? "" : "s", o->out_dir);
  }
  ab_table_free(&shown);
  ab_table_free(&rows);
  *view = v;
  return rc;
}

/* The data of the figures beside tune.csv (tune_figures.h): the recorded configuration
 * against the recommended one over the job, on every trace. */
static int write_figures(const ab_run_spec_t *o, const job_t *job, const ab_tune_opts_t *opts, const tune_view_t *v) {
  if (v->recorded == NULL) return AB_EXIT_OK;
  ab_tune_opts_t quiet = *opts;
  quiet.on_done = NULL;
  bool interrupted = false;
  ab_diag_t diag = {""};
  ab_status st = ab_tune_figures_write(job->tt, job->n, &quiet, &v->recorded->cand, v->winner ? &v->winner->cand : NULL,
                                       o->out_dir, &interrupted, &diag);
  if (st != AB_OK) return ab_cli_fail(o, diag.msg);
  if (interrupted) {
    fprintf(stderr, "allocbench tune: interrupted while the figures' data was written: tune.csv is complete, the figures' files are not\n");
    return 128 + ab_run_stop;
  }
  return AB_EXIT_OK;
}

/* What the page needs beyond the results (report.h): the command line, what the trace holds;
 * then, with --report, the figures and the page. */
static int write_page(const ab_run_spec_t *o, const tune_args_t *a, const job_t *job, const tune_view_t *v, int argc,
                      char **argv) {
  ab_diag_t diag = {""};
  if (ab_report_log_command(o->out_dir, argc, argv, &diag) != AB_OK) return ab_cli_fail(o, diag.msg);
  char path[4096];
  snprintf(path, sizeof path, "%s/tune_trace.txt", o->out_dir);
  /* Of several traces, the one the recommended configuration holds the most on. */
  const char *spec = job->t[v->winner ? v->winner->trace : 0].spec;
  if (strncmp(spec, "replay:", 7) == 0) {
    char *info[] = {"allocbench", "replay", (char *)spec + 7, "--info", NULL};
    if (ab_report_run_self(info, path, &diag) != AB_OK && !o->quiet)
      fprintf(stderr, "allocbench tune: warning: what the trace holds is not in the page: %s\n", diag.msg);
  } else {
    remove(path); /* an earlier trace's */
  }
  if (!a->report) return AB_EXIT_OK;
  /* Which code, on the page too, where the trace names it: blame under the recorded setting
   * (Note [Blame], harness/run/blame.h), its rows into blame.csv and its table into blame.txt. */
  const ab_events_t *es = &job->t[v->winner ? v->winner->trace : 0].es;
  if (strncmp(spec, "replay:", 7) == 0 && es->stacks && es->stacks->nstacks > 1) {
    snprintf(path, sizeof path, "%s/blame.txt", o->out_dir);
    char *blame[] = {"allocbench", "blame",  (char *)spec + 7, "-s",           "caching", "-c", (char *)es->settings,
                     "--out",      (char *)o->out_dir, "-q", "--device", (char *)(o->device ? o->device : "sim"), NULL};
    if (!o->quiet) fprintf(stderr, "allocbench tune: which code holds the memory: allocbench blame %s\n", spec + 7);
    if (ab_report_run_self(blame, path, &diag) != AB_OK && !o->quiet)
      fprintf(stderr, "allocbench tune: warning: the page has no blame: %s\n", diag.msg);
  }
  char written[4096];
  if (ab_report_write(o->out_dir, NULL, true, written, sizeof written, &diag) != AB_OK) return ab_cli_fail(o, diag.msg);
  fprintf(stderr, "allocbench tune: the page to share: %s\n", written);
  return AB_EXIT_OK;
}

/* Everything after the parse: the job built and checked, the grid run on it, the report. */
static int tune_job(const ab_run_spec_t *given, const tune_args_t *a, job_t *job, int argc, char **argv) {
  ab_diag_t diag = {""};
  if (ab_output_check_dir("--out", given->out_dir, &diag) != AB_OK) return ab_cli_usage_error(given, diag.msg);
  ab_status listed = expand(a, job, &diag);
  if (listed != AB_OK) return listed == AB_ERR_INVALID ? ab_cli_usage_error(given, diag.msg) : ab_cli_fail(given, diag.msg);
  ab_run_catch_stop(); /* a signal while the workload is generated stops that too */
  /* Under a launcher, the ranks deal out the runs (spread.h); rank 0 alone says what it does. */
  ab_status joined = ab_spread_open(&job->sp, &diag);
  if (joined != AB_OK) return joined == AB_ERR_INVALID ? ab_cli_usage_error(given, diag.msg) : ab_cli_fail(given, diag.msg);
  ab_run_catch_stop(); /* again: MPI's start may have set its own handlers */
  ab_run_spec_t mine = *given;
  mine.quiet = mine.quiet || job->sp.rank != 0;
  const ab_run_spec_t *o = &mine;
  ab_status built = build_job(o, a, job, &diag);
  if (built != AB_OK) return ab_cli_build_failed(o, built, &diag);
  setup_t s;
  int rc = setup(o, a, &job->t[0].es, &s);
  if (rc >= 0) return rc;
  if (s.jobs == 0 && job->sp.world > 1) { /* the cores of this host, shared by its ranks */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    s.jobs = cores > (long)job->sp.local ? (unsigned)(cores / (long)job->sp.local) : 1;
  }
  ab_status st = prepare_traces(o, s.addresses, job, &diag);
  if (st == AB_OK) st = find_alike(job, &diag);

  ab_tune_list_t list;
  ab_tune_list_init(&list);
  ab_tune_result_t *worst = NULL;
  progress_t prog = {o, NULL, 0, 0};
  ab_tune_opts_t opts = {.device = o->device, .dev = o->dev, .cap = s.cap, .map_probes = a->map_probes,
                         .no_map = a->no_map, .check = o->check, .jobs = s.jobs, .stop = &ab_run_stop,
                         .on_done = on_done, .on_done_ctx = &prog};
  double t0 = ab_clock_s();
  size_t best[AB_TUNE_FAMILIES];
  if (st == AB_OK) st = ab_tune_grid_first(&list, s.recorded, largest_request(job), s.cap > 0, &diag);
  for (size_t i = 0; st == AB_OK && i < s.extra.n; i++) st = ab_tune_list_add_reference(&list, s.extra.name[i], &diag);
  /* Stage 2 adds a few combinations at most: room for the whole grid once more. */
  size_t first = list.n;
  if (st == AB_OK && (worst = calloc(2 * first, sizeof *worst)) == NULL) st = ab_diag_set(&diag, AB_ERR_INTERNAL, "out of host memory");
  for (size_t k = 0; st == AB_OK && k < job->n; k++)
    if ((job->t[k].r = calloc(2 * first, sizeof *job->t[k].r)) == NULL) st = ab_diag_set(&diag, AB_ERR_INTERNAL, "out of host memory");
  if (st == AB_OK) st = ab_spread_meet(&job->sp, job_digest(job, &list, &opts), "allocbench tune", o->quiet, &diag);
  if (st == AB_OK && job->sp.world > 1 && !o->quiet)
    fprintf(stderr, "allocbench tune: %zu runs dealt out between %u ranks; rank 0 writes the results\n",
            job->distinct * list.n, job->sp.world);
  /* The first stage's results decide the second stage: every rank needs them. */
  if (st == AB_OK) st = run_stage(job, &list, 0, &opts, &prog, true, &diag);
  if (st == AB_OK && !ab_run_stop) {
    take_worst(job, 0, first, a->objective, worst);
    ab_tune_best_of_families(worst, first, a->objective, best);
    st = ab_tune_grid_combine(&list, best, s.cap > 0, &diag);
    if (st == AB_OK && list.n > 2 * first) st = ab_diag_set(&diag, AB_ERR_INTERNAL, "the grid's second stage outgrew its room");
    if (st == AB_OK && list.n > first && !o->quiet)
      fprintf(stderr, "allocbench tune: then %zu combination%s of the settings that did best\n", list.n - first,
              list.n - first == 1 ? "" : "s");
    if (st == AB_OK) st = run_stage(job, &list, first, &opts, &prog, false, &diag);
    if (st == AB_OK) take_worst(job, first, list.n, a->objective, worst);
  }
  if (ab_run_stop) {
    fprintf(stderr, "allocbench tune: interrupted (%s)%s%s: the configurations tried were not ranked, and nothing was written\n",
            ab_run_stop == SIGTERM ? "SIGTERM" : "SIGINT", st != AB_OK ? " " : "", st != AB_OK ? diag.msg : "");
    rc = 128 + ab_run_stop;
  } else if (st != AB_OK) {
    rc = st == AB_ERR_INVALID ? ab_cli_usage_error(o, diag.msg) : ab_cli_fail(o, diag.msg);
  } else if (job->sp.rank != 0) {
    if (!given->quiet)
      fprintf(stderr, "allocbench tune: rank %u of %u: its share of the runs done; rank 0 writes the results\n",
              job->sp.rank, job->sp.world);
    rc = AB_EXIT_OK;
  } else {
    tune_view_t v;
    rc = report(o, a, &s, job, worst, list.n, t0, &v);
    if (rc == AB_EXIT_OK) rc = write_figures(o, job, &opts, &v);
    if (rc == AB_EXIT_OK) rc = write_page(o, a, job, &v, argc, argv);
    if (rc == AB_EXIT_OK) rc = say_failures(o, worst, list.n);
  }
  free(worst);
  ab_tune_list_free(&list);
  return rc;
}

int ab_cmd_tune(int argc, char **argv) {
  ab_run_spec_t o;
  ab_run_spec_defaults(&o, "allocbench tune");
  o.device = "sim"; /* predictions, and many runs at once: the simulated card */
  tune_args_t a = {AB_TUNE_RESERVED, 0, 0, NULL, 0, false, AB_TUNE_MAP_PROBES, false};
  char **args, replay_spec[4096 + 8];
  size_t nargs = 0;
  int rc = ab_cli_parse(argc, argv, &command, &o, own_option, &a, 1, &args, &nargs);
  /* `tune TRACE` is `tune -w replay:TRACE`, as `replay TRACE` takes its trace. */
  if (rc < 0 && nargs && a.nspecs) rc = ab_cli_usage_error(&o, "-w and a trace as the argument: give one of them");
  if (rc < 0 && nargs) {
    snprintf(replay_spec, sizeof replay_spec, "replay:%s", args[0]);
    ab_status st = AB_OK;
    ab_diag_t diag = {""};
    own_option(&a, 'w', replay_spec, &st, &diag);
    if (st != AB_OK) rc = ab_cli_usage_error(&o, diag.msg);
  }
  if (rc < 0 && a.nspecs == 0) rc = ab_cli_usage_error(&o, "-w replay:TRACE (or TRACE alone, or -w WORKLOAD) is required");
  job_t job;
  memset(&job, 0, sizeof job);
  a.cap = o.cap_bytes; /* --cap, as every command reads it; each trace is read knowing it (trace.h) */
  if (rc < 0) rc = tune_job(&o, &a, &job, argc, argv);
  ab_spread_close(&job.sp, !ab_run_stop);
  job_free(&job);
  free(a.specs);
  return rc;
}
