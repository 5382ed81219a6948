#include "harness/run/results.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/base/input.h"
#include "kernels/base/installed.h"
#include "kernels/base/output.h"
#include "kernels/base/units.h"
#include "workloads/workload.h"

#define SUMMARY_COL(name, numeric) {#name, numeric},
#define SUMMARY_PEAK_COL(gauge, doc) {"peak_" #gauge, 1},
#define SUMMARY_COUNTER_COL(counter, doc) {#counter, 1},
const ab_col_t ab_summary_cols[] = {AB_SUMMARY_COLUMNS(SUMMARY_COL, SUMMARY_PEAK_COL, SUMMARY_COUNTER_COL)};
#undef SUMMARY_COL
#undef SUMMARY_PEAK_COL
#undef SUMMARY_COUNTER_COL
const size_t ab_summary_ncols = sizeof ab_summary_cols / sizeof ab_summary_cols[0];

/* A cell of a results row: room for a workload spec or trace name whole (an events source is
 * 256 bytes) and a conf, so that no row is cut. */
#define AB_CELL_BYTES 512

/* One cell per column, formatted. */
typedef struct summary_cells_s {
#define SUMMARY_FIELD(name, numeric) char name[AB_CELL_BYTES];
#define SUMMARY_PEAK_FIELD(gauge, doc) char peak_##gauge[AB_CELL_BYTES];
#define SUMMARY_COUNTER_FIELD(counter, doc) char counter[AB_CELL_BYTES];
  AB_SUMMARY_COLUMNS(SUMMARY_FIELD, SUMMARY_PEAK_FIELD, SUMMARY_COUNTER_FIELD)
#undef SUMMARY_FIELD
#undef SUMMARY_PEAK_FIELD
#undef SUMMARY_COUNTER_FIELD
} summary_cells_t;

#define CELL(field, ...) snprintf(c.field, sizeof c.field, __VA_ARGS__)
#define WORKLOAD_CELL(c, d) ab_results_workload_name((d)->workload, (c).workload, sizeof (c).workload)

void ab_results_approximate(const ab_events_t *es, const ab_run_t *run, char *out, size_t size) {
  out[0] = '\0';
  /* Each reason of the stream in short, up to its parenthesis: the whole line went to stderr. */
  for (const char *p = es->approximate; *p;) {
    size_t len = strcspn(p, ";"), keep = len;
    const char *paren = strstr(p, " (");
    if (paren && paren < p + len) keep = (size_t)(paren - p);
    size_t used = strlen(out);
    snprintf(out + used, size - used, "%s%.*s", used ? "; " : "", (int)keep, p);
    p += len;
    while (*p == ';' || *p == ' ') p++;
  }
  if (run && run->caught_served) {
    size_t used = strlen(out);
    snprintf(out + used, size - used, "%sthe program caught %" PRIu64 " OOM%s that this run served", used ? "; " : "",
             run->caught_served, run->caught_served == 1 ? "" : "s");
  }
  if (out[0] == '\0') snprintf(out, size, "no");
}

ab_status ab_results_add_summary(ab_table_t *t, const ab_run_desc_t *d, const ab_events_t *es, const ab_run_t *run) {
  summary_cells_t c;
  memset(&c, 0, sizeof c);
  const ab_stats_t *st = &run->stats;
  WORKLOAD_CELL(c, d);
  CELL(strategy, "%s", d->strategy);
  CELL(conf, "%s", d->conf ? d->conf : "");
  CELL(device, "%s", d->device);
  CELL(budget_bytes, "%" PRIu64, d->budget_bytes);
  CELL(seed, "%" PRIu64, d->seed);
  CELL(events, "%zu", es->n);
  ab_results_approximate(es, run, c.approximate, sizeof c.approximate);
  CELL(status, "%s", ab_run_status_name(run->status));
  CELL(oom_kind, "%s", ab_oom_kind_name(run->status == AB_RUN_OOM ? run->oom.kind : AB_OOM_NONE));
  CELL(oom_event, "%lld", run->status == AB_RUN_OOM ? (long long)run->oom.event : -1LL);
#define PEAK_CELL(gauge, doc) CELL(peak_##gauge, "%" PRId64, st->gauge.peak);
  AB_STAT_GAUGES(PEAK_CELL)
#undef PEAK_CELL
  double frag = st->reserved_bytes.peak > 0
                    ? 100.0 * (1.0 - (double)st->allocated_bytes.peak / (double)st->reserved_bytes.peak)
                    : 0.0;
  CELL(frag_pct, "%.3f", frag);
#define COUNTER_CELL(counter, doc) CELL(counter, "%" PRIu64, st->counter);
  AB_STAT_COUNTERS(COUNTER_CELL)
#undef COUNTER_CELL
  CELL(alloc_ns_p50, "%" PRIu64, ab_hist_quantile(&run->alloc_ns, 0.50));
  CELL(alloc_ns_p99, "%" PRIu64, ab_hist_quantile(&run->alloc_ns, 0.99));
  CELL(free_ns_p50, "%" PRIu64, ab_hist_quantile(&run->free_ns, 0.50));
  CELL(wall_s, "%.6f", run->loop_s);
  CELL(events_per_s, "%.0f", run->loop_s > 0 ? (double)run->events_done / run->loop_s : 0.0);
  CELL(step_ms_p50, "%.4f", run->step_ms_p50);
  CELL(kernel_ms_total, "%.3f", run->kernel_ms);
  CELL(harness_ns_per_event, "%.1f", run->events_done ? (double)run->harness_ns / (double)run->events_done : 0.0);
  CELL(nccl_bytes, "%" PRIu64, run->comm_bytes);
  CELL(live_peak_bytes, "%" PRIu64, d->live_peak_bytes ? d->live_peak_bytes : es->ev ? ab_bisect_peak_requested(es) : 0);
  if (run->plan.has) {
    CELL(plan_hits, "%" PRId64, run->plan.hits);
    CELL(plan_misses, "%" PRId64, run->plan.misses);
    CELL(plan_bytes, "%" PRId64, run->plan.bytes);
  }
  ab_band_t band = d->band ? *d->band : ab_band_point(run);
  CELL(peak_reserved_low, "%" PRIu64, band.reserved_lo);
  CELL(peak_reserved_high, "%" PRIu64, band.reserved_hi);
  CELL(device_allocs_low, "%" PRIu64, band.allocs_lo);
  CELL(device_allocs_high, "%" PRIu64, band.allocs_hi);
#define SUMMARY_CELL(name, numeric) c.name,
#define SUMMARY_PEAK_CELL(gauge, doc) c.peak_##gauge,
#define SUMMARY_COUNTER_CELL(counter, doc) c.counter,
  const char *cells[] = {AB_SUMMARY_COLUMNS(SUMMARY_CELL, SUMMARY_PEAK_CELL, SUMMARY_COUNTER_CELL)};
#undef SUMMARY_CELL
#undef SUMMARY_PEAK_CELL
#undef SUMMARY_COUNTER_CELL
  return ab_table_add(t, cells);
}

void ab_results_file_part(const char *in, char *out, size_t size) {
  const char *slash = strrchr(in, '/');
  if (slash && slash[1]) in = slash + 1;
  size_t n = 0;
  bool gap = false;
  for (; *in && n + 1 < size; in++) {
    unsigned char ch = (unsigned char)*in;
    if (isalnum(ch) || ch == '-' || ch == '.' || ch == '_') {
      out[n++] = (char)ch;
      gap = false;
    } else if (!gap && n > 0) {
      out[n++] = '_';
      gap = true;
    }
  }
  while (n > 0 && out[n - 1] == '_') n--;
  out[n] = '\0';
}

/* The trace a workload spec names, or NULL for a generator's (or a stream of a test's). */
static const char *trace_of(const char *workload) {
  if (strncmp(workload, "replay:", 7) == 0) return workload + 7;
  char name[64];
  size_t len = strcspn(workload, ":");
  if (len < sizeof name) {
    memcpy(name, workload, len);
    name[len] = '\0';
    if (ab_workload_find(name)) return NULL;
  }
  /* `replay TRACE` runs under the path itself. */
  struct stat sb;
  return stat(workload, &sb) == 0 ? workload : NULL;
}

void ab_results_workload_name(const char *workload, char *out, size_t size) {
  const char *trace = trace_of(workload);
  if (trace == NULL) {
    snprintf(out, size, "%s", workload);
    return;
  }
  const char *file = strrchr(trace, '/');
  snprintf(out, size, "replay:%s", file && file[1] ? file + 1 : trace);
}

/* 8 hex digits of FNV-1a over s: what keeps two shortened names apart. */
static unsigned name_hash(const char *s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char *c = s; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3ULL;
  return (unsigned)(h >> 32);
}

/* Note [Names of a run's files]
 * A run's own files are DIR/KIND_<workload>[_conf-<hash>]_<strategy>.csv (KIND timeline,
 * oommap, capmap), named after what makes the run, so that two runs that differ in any of it
 * never share a file, and short enough to read in a listing:
 *   - a generator's spec as it reads (":", "=" and "," turned into "_": random_ops_2000) where
 *     that is short (at most READABLE_CHARS) and cannot be another spec's (it holds no "_" of
 *     its own, nothing but letters, digits, ".", "-" and the separators); else the workload's
 *     name and a hash of the whole spec (serve-5c0ffee1);
 *   - a trace's file name, at most READABLE_CHARS of it, and a hash of its full path, so that
 *     traces of one name in different folders keep files of their own
 *     (cnn_dyn.default.pickle.gz-86985338);
 *   - the conf, where the run was given one (-c, or the recorded settings of a replay), as a
 *     hash of it: replays of one trace under two settings keep a timeline each;
 *   - the strategy's name as it reads where it is a plain one (caching), else its family and a
 *     hash of it (pluggable-1f2e3d4c: a library's path).
 * It is the last part, after the last "_", because the figures take a file's strategy from
 * there (plots/timeline.gp). A hash is 8 hex digits of FNV-1a. What a hash stands for is in
 * the file itself: every row names its workload, conf and strategy whole, as summary.csv
 * does. */
#define READABLE_CHARS 32

/* Whether a spec reads as itself in a name without being another's (see the Note). */
static bool readable(const char *spec, const char *extra) {
  if (strlen(spec) > READABLE_CHARS) return false;
  for (const char *c = spec; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '.' && *c != '-' && !strchr(extra, *c)) return false;
  return true;
}

/* The part of a name before the first ':' (a workload's or a family's name), as a name. */
static void head_part(const char *spec, char *out, size_t size) {
  char head[64];
  snprintf(head, sizeof head, "%.*s", (int)strcspn(spec, ":"), spec);
  ab_results_file_part(head, out, size);
}

static void workload_part(const char *workload, char *out, size_t size) {
  const char *trace = trace_of(workload);
  char name[READABLE_CHARS + 1];
  if (trace == NULL) {
    if (readable(workload, ":=,")) {
      ab_results_file_part(workload, out, size);
      return;
    }
    head_part(workload, name, sizeof name);
    snprintf(out, size, "%s-%08x", name, name_hash(workload));
    return;
  }
  char full[PATH_MAX];
  if (realpath(trace, full) == NULL) snprintf(full, sizeof full, "%s", trace);
  ab_results_file_part(trace, name, sizeof name);
  snprintf(out, size, "%s-%08x", name, name_hash(full));
}

void ab_results_run_file(const char *dir, const char *kind, const ab_run_desc_t *d, char *path, size_t size) {
  char w[READABLE_CHARS + 16], s[READABLE_CHARS + 16], c[24] = "";
  workload_part(d->workload, w, sizeof w);
  if (readable(d->strategy, "")) {
    snprintf(s, sizeof s, "%s", d->strategy);
  } else {
    char family[READABLE_CHARS + 1];
    head_part(d->strategy, family, sizeof family);
    snprintf(s, sizeof s, "%s-%08x", family, name_hash(d->strategy));
  }
  if (d->conf && d->conf[0]) snprintf(c, sizeof c, "_conf-%08x", name_hash(d->conf));
  snprintf(path, size, "%s/%s_%s%s_%s.csv", dir, kind, w, c, s);
}

/* The columns every row of a run's own file ends with: the run, whole
 * (Note [Names of a run's files]). The conf, which may be empty, is not last: gnuplot misreads an empty last field. */
#define RUN_COLS {"workload", false}, {"conf", false}, {"strategy", false}
#define RUN_NCOLS 3

void ab_results_run_cells(const ab_run_desc_t *d, char (*cells)[AB_RESULTS_RUN_CELL], const char **row) {
  ab_results_workload_name(d->workload, cells[0], AB_RESULTS_RUN_CELL);
  snprintf(cells[1], AB_RESULTS_RUN_CELL, "%s", d->conf ? d->conf : "");
  snprintf(cells[2], AB_RESULTS_RUN_CELL, "%s", d->strategy);
  for (int i = 0; i < RUN_NCOLS; i++) row[i] = cells[i];
}

static const ab_col_t timeline_cols[] = {
    {"event", true},          {"step", true},           {"requested", true},     {"allocated", true},
    {"reserved", true},       {"peak_requested", true}, {"peak_allocated", true}, {"peak_reserved", true},
    RUN_COLS,
};

ab_status ab_results_write_timeline(const char *dir, const ab_run_desc_t *d, const ab_run_t *run, ab_diag_t *diag) {
  char path[4096];
  ab_results_run_file(dir, "timeline", d, path, sizeof path);
  ab_table_t t;
  ab_table_init(&t, timeline_cols, sizeof timeline_cols / sizeof timeline_cols[0]);
  ab_status st = AB_OK;
  char who[RUN_NCOLS][AB_RESULTS_RUN_CELL];
  const char *run_row[RUN_NCOLS];
  ab_results_run_cells(d, who, run_row);
  for (size_t i = 0; i < run->ntimeline && st == AB_OK; i++) {
    const ab_tl_sample_t *x = &run->timeline[i];
    char cells[8][32];
    snprintf(cells[0], 32, "%" PRIu64, x->event);
    snprintf(cells[1], 32, "%" PRIu32, x->step);
    snprintf(cells[2], 32, "%" PRId64, x->requested);
    snprintf(cells[3], 32, "%" PRId64, x->allocated);
    snprintf(cells[4], 32, "%" PRId64, x->reserved);
    snprintf(cells[5], 32, "%" PRId64, x->peak_requested);
    snprintf(cells[6], 32, "%" PRId64, x->peak_allocated);
    snprintf(cells[7], 32, "%" PRId64, x->peak_reserved);
    const char *row[] = {cells[0], cells[1], cells[2], cells[3], cells[4],
                         cells[5], cells[6], cells[7], run_row[0], run_row[1], run_row[2]};
    st = ab_table_add(&t, row);
  }
  if (st == AB_OK) st = ab_table_write_file(&t, path, diag);
  ab_table_free(&t);
  return st;
}

ab_status ab_results_write_capmap(const char *dir, const ab_run_desc_t *d, const ab_capmap_t *map, char *path,
                                  size_t path_size, ab_diag_t *diag) {
  static const ab_col_t cols[] = {{"cap_lo_bytes", true}, {"cap_hi_bytes", true}, {"status", false}, {"oom_event", true},
                                  RUN_COLS};
  char file[4096];
  ab_results_run_file(dir, "capmap", d, file, sizeof file);
  ab_table_t t;
  ab_table_init(&t, cols, sizeof cols / sizeof cols[0]);
  ab_status st = AB_OK;
  char who[RUN_NCOLS][AB_RESULTS_RUN_CELL];
  const char *run_row[RUN_NCOLS];
  ab_results_run_cells(d, who, run_row);
  for (size_t i = 0; i < map->n && st == AB_OK; i++) {
    const ab_cap_class_t *c = &map->classes[i];
    char cells[4][32];
    snprintf(cells[0], 32, "%" PRIu64, c->lo);
    if (c->hi == UINT64_MAX)
      cells[1][0] = '\0';
    else
      snprintf(cells[1], 32, "%" PRIu64, c->hi);
    snprintf(cells[2], 32, "%s", c->ok ? "ok" : "oom");
    snprintf(cells[3], 32, "%lld", c->ok ? -1LL : (long long)c->oom_event);
    const char *row[] = {cells[0], cells[1], cells[2], cells[3], run_row[0], run_row[1], run_row[2]};
    st = ab_table_add(&t, row);
  }
  if (st == AB_OK) st = ab_table_write_file(&t, file, diag);
  ab_table_free(&t);
  if (st == AB_OK && path) snprintf(path, path_size, "%s", file);
  return st;
}

const ab_col_t ab_oom_cols[] = {
#define AB_OOM_COL(name, numeric) {#name, numeric},
    AB_OOM_COLUMNS(AB_OOM_COL)
#undef AB_OOM_COL
};
const size_t ab_oom_ncols = sizeof ab_oom_cols / sizeof ab_oom_cols[0];

const ab_col_t ab_compare_cols[] = {
#define AB_COMPARE_COL(name, numeric) {#name, numeric},
    AB_COMPARE_COLUMNS(AB_COMPARE_COL)
#undef AB_COMPARE_COL
};
const size_t ab_compare_ncols = sizeof ab_compare_cols / sizeof ab_compare_cols[0];

/* Appends one clause to a note, after "; " if it has one already. */
static void note_add(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note_add(char *buf, size_t size, const char *fmt, ...) {
  size_t n = strlen(buf);
  if (n && n + 2 < size) {
    memcpy(buf + n, "; ", 3);
    n += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + n, size - n, fmt, ap);
  va_end(ap);
}

/* What qualifies a search's answer, in words ("" when nothing does). */
static void search_note(const ab_events_t *es, const ab_bisect_result_t *r, char *buf, size_t size) {
  char b[32];
  buf[0] = '\0';
  if (!r->passed && r->hi == 0)
    note_add(buf, size, "does not fit on the device: the unbudgeted run ran out of memory");
  else if (!r->passed)
    note_add(buf, size, "no budget up to hi (%s) passed", ab_format_bytes(r->hi, b, sizeof b));
  if (r->below_lo && !r->mapped)
    note_add(buf, size, "lo - 1 passed: the smallest budget is below lo (%s)", ab_format_bytes(r->lo, b, sizeof b));
  if (r->mapped && r->fail_ranges) {
    note_add(buf, size, "fails again above the smallest cap, in %u range%s: every cap from %s (%" PRIu64 " B) up completes",
             r->fail_ranges, r->fail_ranges == 1 ? "" : "s", ab_format_bytes(r->safe_cap, b, sizeof b), r->safe_cap);
  }
  if (r->mapped && r->band_raised)
    note_add(buf, size, "a placement the driver may make fails above the smallest cap: every cap from %s (%" PRIu64
             " B) up completes under each", ab_format_bytes(r->safe_cap, b, sizeof b), r->safe_cap);
  if (r->mapped && r->band_checked == 0)
    note_add(buf, size, "the safe cap was not checked under the placement variants");
  else if (r->mapped && r->band_checked != UINT64_MAX)
    note_add(buf, size, "under the placement variants, caps checked up to %s only (more intervals than allowed)",
             ab_format_bytes(r->band_checked, b, sizeof b));
  if (r->map_cut && r->passed && r->failed && r->max_fail + 1 == r->min_budget)
    note_add(buf, size, "caps mapped up to the smallest only (more intervals than allowed): larger caps may fail");
  else if (r->map_cut)
    note_add(buf, size, "caps not mapped (more intervals than allowed): bisected, as if the status were monotonic in the cap");
  if (r->upper_bound)
    note_add(buf, size,
             "upper bound: the traced program survived %llu OOMs and changed course; under a smaller budget it may "
             "need less",
             (unsigned long long)es->trace_ooms);
}

/* The note is longer than the other cells: it replaces its cell in the row. */
static void use_note(const char **cells, size_t n, const char *cell, const char *note) {
  for (size_t i = 0; i < n; i++)
    if (cells[i] == cell) cells[i] = note;
}

/* One cell per column, formatted. */
typedef struct oom_cells_s {
#define AB_OOM_FIELD(name, numeric) char name[AB_CELL_BYTES];
  AB_OOM_COLUMNS(AB_OOM_FIELD)
#undef AB_OOM_FIELD
} oom_cells_t;

static void overhead(const ab_bisect_result_t *r, char *buf, size_t size) {
  if (r->passed && r->peak_requested > 0)
    snprintf(buf, size, "%.3f", 100.0 * ((double)r->min_budget / (double)r->peak_requested - 1.0));
  else
    buf[0] = '\0';
}

ab_status ab_results_add_oom(ab_table_t *t, const ab_run_desc_t *d, const ab_events_t *es, const ab_bisect_result_t *r) {
  oom_cells_t c;
  char note[512];
  memset(&c, 0, sizeof c);
  WORKLOAD_CELL(c, d);
  CELL(strategy, "%s", d->strategy);
  CELL(conf, "%s", d->conf ? d->conf : "");
  CELL(device, "%s", d->device);
  if (r->passed) CELL(min_budget_bytes, "%" PRIu64, r->min_budget);
  if (r->failed) CELL(max_fail_bytes, "%" PRIu64, r->max_fail);
  if (r->mapped && r->passed) CELL(safe_cap_bytes, "%" PRIu64, r->safe_cap);
  if (r->mapped) CELL(fail_ranges, "%u", r->fail_ranges);
  CELL(peak_requested_bytes, "%" PRIu64, r->peak_requested);
  overhead(r, c.overhead_pct, sizeof c.overhead_pct);
  CELL(oom_kind_at_fail, "%s", ab_oom_kind_name(r->failed ? r->oom.kind : AB_OOM_NONE));
  CELL(oom_event_at_fail, "%lld", r->failed ? (long long)r->oom.event : -1LL);
  CELL(probes, "%u", r->probes);
  CELL(wall_s, "%.6f", r->wall_s);
  CELL(limit, "%s", r->cap ? "cap" : "budget");
  CELL(trace_ooms, "%" PRIu64, es->trace_ooms);
  search_note(es, r, note, sizeof note);
  const char *cells[] = {
#define AB_OOM_PTR(name, numeric) c.name,
      AB_OOM_COLUMNS(AB_OOM_PTR)
#undef AB_OOM_PTR
  };
  use_note(cells, ab_oom_ncols, c.note, note);
  return ab_table_add(t, cells);
}

typedef struct compare_cells_s {
#define AB_COMPARE_FIELD(name, numeric) char name[AB_CELL_BYTES];
  AB_COMPARE_COLUMNS(AB_COMPARE_FIELD)
#undef AB_COMPARE_FIELD
} compare_cells_t;

ab_status ab_results_add_compare(ab_table_t *t, const ab_run_desc_t *d, const ab_events_t *es, const ab_run_t *run,
                                 const ab_bisect_result_t *r) {
  compare_cells_t c;
  char note[512];
  memset(&c, 0, sizeof c);
  const ab_stats_t *st = &run->stats;
  WORKLOAD_CELL(c, d);
  CELL(strategy, "%s", d->strategy);
  CELL(conf, "%s", d->conf ? d->conf : "");
  CELL(device, "%s", d->device);
  CELL(status, "%s", ab_run_status_name(run->status));
  CELL(peak_requested_bytes, "%" PRIu64, r->peak_requested);
  CELL(peak_reserved_bytes, "%" PRId64, st->reserved_bytes.peak);
  CELL(frag_pct, "%.3f",
       st->reserved_bytes.peak > 0 ? 100.0 * (1.0 - (double)st->allocated_bytes.peak / (double)st->reserved_bytes.peak)
                                   : 0.0);
  if (r->passed) CELL(min_budget_bytes, "%" PRIu64, r->min_budget);
  if (r->mapped && r->passed) CELL(safe_cap_bytes, "%" PRIu64, r->safe_cap);
  overhead(r, c.overhead_pct, sizeof c.overhead_pct);
  CELL(oom_kind_at_fail, "%s", ab_oom_kind_name(r->failed ? r->oom.kind : AB_OOM_NONE));
  CELL(alloc_ns_p50, "%" PRIu64, ab_hist_quantile(&run->alloc_ns, 0.50));
  CELL(alloc_ns_p99, "%" PRIu64, ab_hist_quantile(&run->alloc_ns, 0.99));
  CELL(free_ns_p50, "%" PRIu64, ab_hist_quantile(&run->free_ns, 0.50));
  CELL(wall_s, "%.6f", run->loop_s);
  CELL(device_time_s, "%.6f", (double)run->modeled_ns * 1e-9);
  ab_band_t band = d->band ? *d->band : ab_band_point(run);
  CELL(peak_reserved_low, "%" PRIu64, band.reserved_lo);
  CELL(peak_reserved_high, "%" PRIu64, band.reserved_hi);
  search_note(es, r, note, sizeof note);
  if (run->status == AB_RUN_ERROR) snprintf(note, sizeof note, "%s", run->message); /* why it failed: no search ran */
  const char *cells[] = {
#define AB_COMPARE_PTR(name, numeric) c.name,
      AB_COMPARE_COLUMNS(AB_COMPARE_PTR)
#undef AB_COMPARE_PTR
  };
  use_note(cells, ab_compare_ncols, c.note, note);
  return ab_table_add(t, cells);
}

bool ab_results_writes_name(const char *name) {
  static const char *const fixed[] = {"summary.csv",     "oom.csv",        "compare.csv",  "tune.csv",
                                      "tune_answer.txt", "tune_trace.txt", "commands.txt", "report.html",
                                      "blame.csv",       "blame.txt"};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    if (strcmp(name, fixed[i]) == 0) return true;
  static const char *const per_run[] = {"timeline_", "oommap_", "capmap_"};
  size_t n = strlen(name);
  bool csv = n > 4 && strcmp(name + n - 4, ".csv") == 0, txt = n > 4 && strcmp(name + n - 4, ".txt") == 0;
  for (size_t i = 0; i < sizeof per_run / sizeof per_run[0]; i++)
    if (csv && strncmp(name, per_run[i], strlen(per_run[i])) == 0) return true;
  /* tune's figures: tune_timeline.csv, tune_segments.txt, tune_segments_CONFIG.csv. */
  if ((csv || txt) && strncmp(name, "tune_", 5) == 0) return true;
  /* plots/draw.sh draws every figure as NAME.png and NAME.svg beside the CSVs. */
  return (n > 4 && strcmp(name + n - 4, ".png") == 0) || (n > 4 && strcmp(name + n - 4, ".svg") == 0);
}

ab_status ab_results_check_out(const char *dir, ab_diag_t *diag) {
  AB_TRY(ab_output_check_dir("--out", dir, diag));
  DIR *d = opendir(dir);
  if (d == NULL) return AB_OK; /* made by its first results file */
  ab_status st = AB_OK;
  for (struct dirent *e; st == AB_OK && (e = readdir(d)) != NULL;) {
    if (!ab_results_writes_name(e->d_name)) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(path, &sb) != 0) continue;
    if (S_ISDIR(sb.st_mode)) {
      st = ab_diag_set(diag, AB_ERR_INVALID, "--out %s: %s is a directory, where the results go; move it or choose "
                       "another --out", dir, path);
    } else if (S_ISREG(sb.st_mode)) {
      /* Appended to, or replaced through a rename in the folder: a file that cannot be
       * written (immutable, on a read-only mount) is found now, not after the runs. */
      int fd = open(path, O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0)
        st = ab_diag_set(diag, AB_ERR_INVALID, "--out %s: %s cannot be written: %s", dir, path, strerror(errno));
      else
        close(fd);
    }
  }
  closedir(d);
  return st;
}

ab_status ab_results_check_inputs(const char *dir, ab_diag_t *diag) {
  DIR *d = opendir(dir);
  if (d == NULL) return AB_OK; /* not made yet: it holds no input */
  ab_status st = AB_OK;
  for (struct dirent *e; st == AB_OK && (e = readdir(d)) != NULL;) {
    if (!ab_results_writes_name(e->d_name)) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (ab_input_is_input(path))
      st = ab_diag_set(diag, AB_ERR_INVALID,
                       "%s: is an input of this run and a file it writes in --out %s; move the input or choose another --out",
                       path, dir);
  }
  closedir(d);
  return st;
}

#define INSTALLED_PLOTS_DIR "../lib/allocbench/plots" /* from PREFIX/bin, where make install puts them */

const char *ab_results_plots_dir(void) {
  const char *env = getenv("AB_PLOTS_DIR");
  if (env && *env) return env;
  static char installed[PATH_MAX];
  if (ab_installed_find(INSTALLED_PLOTS_DIR "/draw.sh", installed, sizeof installed)) {
    *strrchr(installed, '/') = '\0';
    return installed;
  }
  return AB_SOURCE_PLOTS_DIR;
}
