/* cmd_tune.c: `allocbench tune`: the PYTORCH_CUDA_ALLOC_CONF that suits a job, from its
 * recorded snapshot (or a workload, or one trace per rank: Note [A job of several traces]).
 * The command line parsed into a request, the job run by tune_job.h (over the ranks of a
 * launch, spread.h, rank 0 writing), and its answer printed: the configurations ranked, the
 * line to paste, every configuration tried appended to DIR/tune.csv, the data of the figures
 * and the page. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/base/clock.h"
#include "kernels/base/output.h"
#include "kernels/base/units.h"
#include "harness/cli/cli.h"
#include "harness/cli/commands.h"
#include "harness/cli/trace_info.h"
#include "harness/cli/spread.h"
#include "harness/run/pipeline.h"
#include "harness/run/table.h"
#include "harness/tune/report.h"
#include "harness/tune/tune.h"
#include "harness/tune/tune_job.h"
#include "harness/run/stop.h"
#include "harness/run/results.h"

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
  ab_tune_request_t req;
  const char **specs; /* each -w as given, in order; owned array (req.workloads) */
  bool report;        /* --report: the figures and the page */
} tune_args_t;

static bool own_option(void *ctx, int opt, const char *arg, ab_status *st, ab_diag_t *diag) {
  tune_args_t *a = ctx;
  switch (opt) {
    case 'w': {
      const char **more = realloc(a->specs, (a->req.nworkloads + 1) * sizeof *more);
      if (more == NULL) {
        *st = ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
        return true;
      }
      a->specs = more;
      a->specs[a->req.nworkloads++] = arg;
      a->req.workloads = a->specs;
      return true;
    }
    case AB_OPT_OBJECTIVE:
      if (strcmp(arg, "reserved") == 0)
        a->req.objective = AB_TUNE_RESERVED;
      else if (strcmp(arg, "budget") == 0)
        a->req.objective = AB_TUNE_BUDGET;
      else if (strcmp(arg, "time") == 0)
        a->req.objective = AB_TUNE_TIME;
      else
        *st = ab_diag_set(diag, AB_ERR_INVALID, "--objective '%s': expected reserved, budget or time", arg);
      return true;
    case AB_OPT_JOBS: {
      /* One range in every refusal, whatever is wrong with the number. */
      uint64_t jobs = 0;
      *st = ab_parse_u64("--jobs", arg, 1024, &jobs, diag);
      if (*st != AB_OK || jobs == 0)
        *st = ab_diag_set(diag, AB_ERR_INVALID, "--jobs '%s': expected a whole number from 1 to 1024", arg);
      a->req.jobs = (unsigned)jobs;
      return true;
    }
    case AB_OPT_REPORT: a->report = true; return true;
    case AB_OPT_CAP_MAP: *st = ab_cli_parse_cap_map(arg, &a->req.map_probes, &a->req.no_map, diag); return true;
    default: return false;
  }
}

/* ---- the answer ----------------------------------------------------------------------------- */

/* "64 traces, 1 distinct" (Note [Traces alike]), or "3 traces" where none is alike another. */
static const char *traces_text(const ab_tune_job_t *job) {
  static char text[64];
  if (job->distinct < job->n) snprintf(text, sizeof text, "%zu traces, %zu distinct", job->n, job->distinct);
  else snprintf(text, sizeof text, "%zu traces", job->n);
  return text;
}

/* The ranking as people read it: sizes in binary units; with several traces, each
 * configuration's figures are its worst trace's, named. */
static const ab_col_t display_cols[] = {{"rank", true},          {"strategy", false},     {"conf", false},
                                        {"peak reserved", true}, {"smallest cap", true}, {"device allocs", true},
                                        {"time", true},          {"worst trace", false},  {"", false}};

/* Whether the job's settings were recorded (a trace), or are only the defaults (a generator). */
static bool recorded_any(const ab_tune_job_t *job) { return strncmp(job->t[0].es.source, "replay:", 7) == 0; }

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
static ab_status add_display_row(ab_table_t *t, const ab_tune_job_t *job, const ab_tune_result_t *r,
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
  const ab_events_t *es = &job->t[r->trace].es;
  ab_tune_job_note(job, r->trace, r, true, note, sizeof note);
  /* The mark "reference" says the first (with what its limit is); "OOM" in the peak's column
   * and the title's "under the cap" the second. */
  if (r->cand.family == AB_TUNE_REFERENCE || (r->status == AB_RUN_OOM && r->search.passed && !r->search.upper_bound))
    note[0] = '\0';
  /* What failed is said in full once, as the command ends (say_failures); the row says that it did. */
  if (r->status == AB_RUN_ERROR) snprintf(note, sizeof note, "failed");
  /* The references (raw, pooled, async, -s) are no PYTORCH_CUDA_ALLOC_CONF: marked so. */
  bool reference = r->cand.family == AB_TUNE_REFERENCE;
  const char *recorded = recorded_any(job) ? "recorded" : "the defaults";
  /* A reference's smallest limit is a budget (the strategy has no cap): said here, so that its
   * column holds figures alone. */
  snprintf(mark, sizeof mark, "%s%s%s%s%s%s", r == job->winner ? "<- recommended" : "",
           reference ? (r->search.passed ? "reference (a budget)" : "reference") : "",
           r == job->winner && r->cand.recorded ? ", " : "", r->cand.recorded ? recorded : "",
           (r == job->winner || r->cand.recorded || reference) && note[0] ? "; " : "", note);
  char conf[CONF_LINES][CONF_WIDTH + 1];
  const char *whole = reference ? "-" : r->cand.conf[0] ? r->cand.conf : "(default)";
  size_t lines = wrap_conf(whole, conf, CONF_LINES);
  char time[32] = "-";
  if (r->status == AB_RUN_OK && r->alloc_time_s >= 0) snprintf(time, sizeof time, "%.1f ms", r->alloc_time_s * 1e3);
  const char *row[] = {rank, r->cand.strategy, conf[0], reserved, cap, allocs, time, ab_tune_job_short_name(es->source), mark};
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
static const char *on_worst(const ab_tune_job_t *job, const ab_tune_result_t *r, char *buf, size_t size) {
  if (job->n == 1) return "";
  if (job->distinct < job->n)
    snprintf(buf, size, " on the worst of its %zu traces (%zu distinct), %s", job->n, job->distinct,
             ab_tune_job_short_name(job->t[r->trace].es.source));
  else
    snprintf(buf, size, " on the worst of its %zu traces, %s", job->n, ab_tune_job_short_name(job->t[r->trace].es.source));
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
static void say_headroom(FILE *f, const ab_tune_job_t *job, const ab_tune_result_t *w) {
  int64_t h;
  char a[40], b[32];
  if (!ab_tune_job_headroom(job, w, &h)) return;
  fprintf(f, "# headroom under the cap: %s (the cap less the %s cap, %s)\n", headroom_text(h, a, sizeof a),
          w->search.mapped ? "safe" : "smallest", ab_format_bytes(ab_tune_deployable(w), b, sizeof b));
  if (job->tight == NULL || !ab_tune_job_headroom(job, job->tight, &h)) return;
  fprintf(f, "# preferred to %s (first by %s), whose headroom is %s,\n"
             "# less than %d%% of the cap: a cap a little different, or a run that needs a little more, fails\n",
          job->tight->cand.conf[0] ? job->tight->cand.conf : "the defaults",
          job->objective == AB_TUNE_BUDGET ? "the cap" : "peak reserved", headroom_text(h, a, sizeof a), AB_TUNE_HEADROOM_PCT);
}

/* What makes the figures approximate, in the answer itself (the progress says it too). */
static void say_approximate(FILE *f, const ab_tune_job_t *job) {
  for (size_t k = 0; k < job->n; k++) {
    const ab_events_t *es = &job->t[k].es;
    if (es->approximate[0])
      fprintf(f, "# approximate%s%s: %s\n", job->n > 1 ? ", " : "", job->n > 1 ? ab_tune_job_short_name(es->source) : "",
              es->approximate);
  }
}

/* The line to paste, and what the winner saves over the recorded configuration, as shell
 * comments so that the block can be pasted whole. With several traces each figure is of the
 * configuration's worst trace; where another trace needs a larger cap (or reserves more, when
 * ranked by the cap), that is said too, since the cap is set for every rank. */
static void print_winner(FILE *f, const ab_tune_job_t *job, bool cap_given) {
  const char *fraction_item = job->fraction;
  size_t ntried = job->list.n;
  const ab_tune_result_t *w = job->winner, *rec = job->recorded;
  if (w == NULL) {
    fprintf(f, "# no PYTORCH_CUDA_ALLOC_CONF of the %zu tried ran the whole %s%s\n", ntried, job->name,
            job->cap ? " under the cap" : "");
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
          on_worst(job, w, where, sizeof where));
  say_safe_cap(f, w);
  if (job->cap && cap_given) {
    char fraction[32] = "1";
    if (job->cap < job->total) ab_pipeline_cap_fraction(job->cap, job->total, fraction, sizeof fraction);
    fprintf(f, ", under the cap of %s (torch.cuda.set_per_process_memory_fraction(%s))", ab_format_bytes(job->cap, c, sizeof c),
            fraction);
  }
  fputc('\n', f);
  say_headroom(f, job, w);
  /* The other figure at its worst, where another trace has it. */
  size_t most = w->trace;
  for (size_t k = 0; k < job->n; k++) {
    const ab_tune_result_t *r = &job->t[k].r[w->order], *m = &job->t[most].r[w->order];
    if (job->objective == AB_TUNE_RESERVED ? r->search.passed && m->search.passed && r->search.min_budget > m->search.min_budget
                                         : r->stats.reserved_bytes.peak > m->stats.reserved_bytes.peak)
      most = k;
  }
  const ab_tune_result_t *m = &job->t[most].r[w->order];
  if (most != w->trace && job->objective == AB_TUNE_RESERVED)
    fprintf(f, "# every trace runs under a cap of %s (%s's smallest)\n", ab_format_bytes(m->search.min_budget, a, sizeof a),
            ab_tune_job_short_name(job->t[most].es.source));
  if (most != w->trace && job->objective == AB_TUNE_BUDGET)
    fprintf(f, "# the most any trace reserves at its peak: %s (%s)\n",
            ab_format_bytes((uint64_t)m->stats.reserved_bytes.peak, a, sizeof a), ab_tune_job_short_name(job->t[most].es.source));
  if (rec == NULL) return;
  /* A trace recorded its configuration; a generator has none but PyTorch's defaults. */
  char name[sizeof rec->cand.conf + 48];
  if (recorded_any(job))
    snprintf(name, sizeof name, "the recorded configuration (%s)", rec->cand.conf[0] ? rec->cand.conf : "the defaults");
  else
    snprintf(name, sizeof name, "the defaults");
  if (rec == w) {
    fprintf(f, "# %s %s already the best of the %zu tried\n", name, recorded_any(job) ? "is" : "are", ntried);
  } else if (rec->status != AB_RUN_OK) {
    fprintf(f, "# %s ran out of memory%s%s\n", name, job->cap ? " under the cap" : "", on_worst(job, rec, where, sizeof where));
  } else {
    uint64_t rp = (uint64_t)rec->stats.reserved_bytes.peak, wp = (uint64_t)w->stats.reserved_bytes.peak;
    /* Two lines, so that each fits a terminal of 132 columns. */
    fprintf(f, "# against %s: peak reserved %s, smallest cap %s%s\n# the recommended: %s", name, fig[R_PEAK],
            rec->search.passed ? fig[R_CAP] : "none found",
            on_worst(job, rec, where, sizeof where), saving(rp, wp, c, sizeof c));
    if (rp > wp) fprintf(f, " (%.1f%%)", 100.0 * (double)(rp - wp) / (double)rp);
    fprintf(f, " at the peak");
    if (rec->search.passed && w->search.passed)
      fprintf(f, ", %s in the smallest cap", saving(rec->search.min_budget, w->search.min_budget, d, sizeof d));
    if (job->n > 1) fprintf(f, ", worst trace against worst trace");
    fputc('\n', f);
    /* What it costs or saves in time (Note [Allocator time], tune.c). */
    double wt = w->alloc_time_s, rt = rec->alloc_time_s;
    fprintf(f, "# allocator time over the job: %.1f ms against %.1f ms (%s%.1f ms; device calls by the card's cost model)\n",
            wt * 1e3, rt * 1e3, wt > rt ? "+" : wt < rt ? "-" : "", fabs(wt - rt) * 1e3);
  }
  say_approximate(f, job);
}

/* The results ranked: appended to DIR/tune.csv, printed, with the line to paste. */
static int report(const ab_run_spec_t *o, const tune_args_t *a, const ab_tune_job_t *job) {
  size_t n = job->list.n;
  const ab_tune_result_t *r = job->ranked;
  ab_table_t rows, shown;
  ab_status st = ab_tune_job_rows(job, &rows);
  ab_table_init(&shown, display_cols, sizeof display_cols / sizeof display_cols[0]);
  /* Each row's peak reserved and smallest cap (figs[2i], figs[2i+1]), each column a set read
   * in one form (uniform_column); a figure that does not apply is shown as a word instead. */
  uint64_t *figures = malloc((2 * n + 1) * sizeof *figures);
  char(*figs)[AB_BYTES_TEXT] = malloc((2 * n + 1) * sizeof *figs);
  char(*col)[AB_BYTES_TEXT] = malloc((n + 1) * sizeof *col);
  if (!(figures && figs && col)) st = AB_ERR_INTERNAL;
  for (size_t i = 0; i < n && st == AB_OK; i++) {
    figures[i] = r[i].status == AB_RUN_OK ? (uint64_t)r[i].stats.reserved_bytes.peak : 0;
    figures[n + i] = r[i].search.passed ? r[i].search.min_budget : 0;
  }
  for (size_t c = 0; c < 2 && st == AB_OK; c++) {
    uniform_column(&figures[c * n], n, col);
    for (size_t i = 0; i < n; i++) memcpy(figs[2 * i + c], col[i], AB_BYTES_TEXT);
  }
  free(col);
  for (size_t i = 0; i < n && st == AB_OK; i++) st = add_display_row(&shown, job, &r[i], &figs[2 * i]);
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
      const char *by = job->objective == AB_TUNE_BUDGET ? "the smallest cap"
                       : job->objective == AB_TUNE_TIME ? "allocator time"
                                                        : "peak reserved";
      if (job->n == 1)
        printf("%s on %s, %zu configurations ranked by %s%s\n\n", job->name, job->device, n, by, job->cap ? ", under the cap" : "");
      else
        printf("%s (%s) on %s, %zu configurations ranked by %s on their worst trace%s\n\n", job->name, traces_text(job),
               job->device, n, by, job->cap ? ", each trace under the cap" : "");
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
    print_winner(o->format == AB_FORMAT_TABLE ? stdout : stderr, job, a->req.cap > 0);
    /* And to a file, for the page (report.h). */
    char path[4096];
    snprintf(path, sizeof path, "%s/tune_answer.txt", o->out_dir);
    ab_output_t answer;
    if (ab_output_open(&answer, path, &io) == AB_OK) {
      print_winner(answer.f, job, a->req.cap > 0);
      if (ab_output_commit(&answer, &io) != AB_OK) rc = ab_cli_fail(o, io.msg);
    } else {
      rc = ab_cli_fail(o, io.msg);
    }
    /* The threads that ran: never more than the configurations. */
    size_t threads = job->jobs ? job->jobs : (size_t)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads > n) threads = n;
    if (!o->quiet)
      fprintf(stderr, "allocbench tune: %zu configurations%s in %.1f s on %zu thread%s (%.1f M events replayed); all of them in %s/tune.csv\n",
              n, job->n > 1 ? " on every trace" : "", ab_clock_s() - job->t0, threads, threads == 1 ? "" : "s",
              (double)job->replayed / 1e6, o->out_dir);
  }
  ab_table_free(&shown);
  ab_table_free(&rows);
  return rc;
}

/* The data of the figures beside tune.csv (tune_figures.h). */
static int write_figures(const ab_run_spec_t *o, const ab_tune_job_t *job) {
  bool interrupted = false;
  ab_diag_t diag = {""};
  if (ab_tune_job_figures(job, o->out_dir, &interrupted, &diag) != AB_OK) return ab_cli_fail(o, diag.msg);
  if (interrupted) {
    fprintf(stderr, "allocbench tune: interrupted while the figures' data was written: tune.csv is complete, the figures' files are not\n");
    return 128 + ab_run_stop;
  }
  return AB_EXIT_OK;
}

/* What trace t holds into the file at path (trace_info.h). */
static ab_status write_trace_info(const char *path, const ab_tune_job_trace_t *t, ab_diag_t *diag) {
  ab_cli_trace_info_t r;
  ab_cli_trace_info(t->spec + 7, &t->es, &t->info, &r);
  ab_output_t out;
  AB_TRY(ab_output_open(&out, path, diag));
  ab_cli_trace_info_write(&r, out.f);
  return ab_output_commit(&out, diag);
}

/* What the page needs beyond the results (report.h): the command line, what the trace holds;
 * then, with --report, the figures and the page. */
static int write_page(const ab_run_spec_t *o, const tune_args_t *a, const ab_tune_job_t *job, int argc, char **argv) {
  ab_diag_t diag = {""};
  if (ab_report_log_command(o->out_dir, argc, argv, &diag) != AB_OK) return ab_cli_fail(o, diag.msg);
  char path[4096];
  snprintf(path, sizeof path, "%s/tune_trace.txt", o->out_dir);
  /* Of several traces, the one the recommended configuration holds the most on, as
   * `allocbench replay TRACE --info` prints it. */
  const ab_tune_job_trace_t *t = &job->t[job->winner ? job->winner->trace : 0];
  const char *spec = t->spec;
  if (strncmp(spec, "replay:", 7) == 0) {
    if (write_trace_info(path, t, &diag) != AB_OK && !o->quiet)
      fprintf(stderr, "allocbench tune: warning: what the trace holds is not in the page: %s\n", diag.msg);
  } else {
    remove(path); /* an earlier trace's */
  }
  if (!a->report) return AB_EXIT_OK;
  /* Which code, on the page too, where the trace names it: blame under the recorded setting
   * (Note [Blame], harness/run/blame.h), its rows into blame.csv and its table into blame.txt. */
  const ab_events_t *es = &job->t[job->winner ? job->winner->trace : 0].es;
  if (strncmp(spec, "replay:", 7) == 0 && es->stacks && es->stacks->nstacks > 1) {
    snprintf(path, sizeof path, "%s/blame.txt", o->out_dir);
    char *blame[] = {"allocbench", "blame",  (char *)spec + 7, "-s",           "caching", "-c", (char *)es->settings,
                     "--out",      (char *)o->out_dir, "-q", "--device", (char *)(o->device ? o->device : "sim"), NULL};
    if (!o->quiet) fprintf(stderr, "allocbench tune: which code holds the memory: allocbench blame %s\n", spec + 7);
    if (ab_report_run_self(blame, path, &diag) != AB_OK && !o->quiet)
      fprintf(stderr, "allocbench tune: warning: the page has no blame: %s\n", diag.msg);
  }
  char written[4096];
  if (ab_report_write(o->out_dir, NULL, true, written, sizeof written, &diag) != AB_OK)
    return ab_run_stop ? ab_cli_stopped(o, " while the page was made: tune.csv and the answer are written, the page is not "
                                           "(allocbench report DIR makes it)")
                       : ab_cli_fail(o, diag.msg);
  fprintf(stderr, "allocbench tune: the page to share: %s\n", written);
  return AB_EXIT_OK;
}

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

/* ---- the command -------------------------------------------------------------------------- */

/* The ranks of a launch, as the job takes them (tune_job.h): spread.h's. */
static ab_status ranks_join(void *ctx, unsigned *rank, unsigned *world, unsigned *local, ab_diag_t *diag) {
  ab_spread_t *sp = ctx;
  AB_TRY(ab_spread_open(sp, diag));
  *rank = sp->rank;
  *world = sp->world;
  *local = sp->local;
  return AB_OK;
}

static ab_status ranks_meet(void *ctx, uint64_t digest, bool quiet, ab_diag_t *diag) {
  return ab_spread_meet(ctx, digest, "allocbench tune", quiet, diag);
}

static ab_status ranks_share(void *ctx, void *items, size_t n, size_t size, bool to_all, const char *what,
                             ab_diag_t *diag) {
  return ab_spread_share(ctx, items, n, size, to_all, what, diag);
}

/* Everything after the parse: the job run (tune_job.h), then, at rank 0, its answer. */
static int tune(const ab_run_spec_t *o, const tune_args_t *a, ab_tune_job_t *job, ab_spread_t *sp, int argc, char **argv) {
  ab_diag_t diag = {""};
  if (ab_results_check_out(o->out_dir, &diag) != AB_OK) return ab_cli_usage_error(o, diag.msg);
  /* -s: more strategies for reference, each checked on the device by the job. */
  ab_cli_strategies_t extra = {.n = 0};
  const char *names[AB_CLI_MAX_STRATEGIES];
  ab_status st = o->strategy ? ab_cli_strategies(o->strategy, NULL, 0, &extra, &diag) : AB_OK;
  if (st != AB_OK) return st == AB_ERR_INVALID ? ab_cli_usage_error(o, diag.msg) : ab_cli_fail(o, diag.msg);
  for (size_t i = 0; i < extra.n; i++) names[i] = extra.name[i];
  ab_tune_request_t req = a->req;
  req.references = names;
  req.nreferences = extra.n;
  ab_tune_ranks_t ranks = {sp, ranks_join, ranks_meet, ranks_share};
  st = ab_tune_job_run(job, o, &req, &ranks, &diag);
  if (job->step == AB_TUNE_STEP_BUILD && st != AB_OK) return ab_cli_build_failed(o, st, &diag);
  if (job->step >= AB_TUNE_STEP_RUNS && ab_run_stop) {
    fprintf(stderr, "allocbench tune: interrupted (%s)%s%s: the configurations tried were not ranked, and nothing was written\n",
            ab_signal_name(ab_run_stop), st != AB_OK ? " " : "", st != AB_OK ? diag.msg : "");
    return 128 + ab_run_stop;
  }
  if (st != AB_OK) return st == AB_ERR_INVALID ? ab_cli_usage_error(o, diag.msg) : ab_cli_fail(o, diag.msg);
  if (job->rank != 0) {
    if (!o->quiet)
      fprintf(stderr, "allocbench tune: rank %u of %u: its share of the runs done; rank 0 writes the results\n", job->rank,
              job->world);
    return AB_EXIT_OK;
  }
  int rc = report(o, a, job);
  if (rc == AB_EXIT_OK) rc = write_figures(o, job);
  if (rc == AB_EXIT_OK) rc = write_page(o, a, job, argc, argv);
  if (rc == AB_EXIT_OK) rc = say_failures(o, job->ranked, job->list.n);
  return rc;
}

int ab_cmd_tune(int argc, char **argv) {
  ab_run_spec_t o;
  ab_run_spec_defaults(&o, "allocbench tune");
  o.device = "sim"; /* predictions, and many runs at once: the simulated card */
  tune_args_t a = {.req = {.objective = AB_TUNE_RESERVED, .map_probes = AB_TUNE_MAP_PROBES}};
  char **args, replay_spec[4096 + 8];
  size_t nargs = 0;
  int rc = ab_cli_parse(argc, argv, &command, &o, own_option, &a, 1, &args, &nargs);
  /* `tune TRACE` is `tune -w replay:TRACE`, as `replay TRACE` takes its trace. */
  if (rc < 0 && nargs && a.req.nworkloads) rc = ab_cli_usage_error(&o, "-w and a trace as the argument: give one of them");
  if (rc < 0 && nargs) {
    snprintf(replay_spec, sizeof replay_spec, "replay:%s", args[0]);
    ab_status st = AB_OK;
    ab_diag_t diag = {""};
    own_option(&a, 'w', replay_spec, &st, &diag);
    if (st != AB_OK) rc = ab_cli_usage_error(&o, diag.msg);
  }
  if (rc < 0 && a.req.nworkloads == 0) rc = ab_cli_usage_error(&o, "-w replay:TRACE (or TRACE alone, or -w WORKLOAD) is required");
  a.req.cap = o.cap_bytes; /* --cap, as every command reads it; each trace is read knowing it (trace.h) */
  ab_tune_job_t job;
  memset(&job, 0, sizeof job);
  ab_spread_t sp;
  memset(&sp, 0, sizeof sp);
  sp.say_as = o.quiet ? NULL : o.cmd;
  if (rc < 0) rc = tune(&o, &a, &job, &sp, argc, argv);
  ab_spread_close(&sp, !ab_run_stop);
  ab_tune_job_free(&job);
  free(a.specs);
  return rc;
}
