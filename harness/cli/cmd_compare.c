/* cmd_compare.c: `allocbench compare`: strategies side by side on one workload, in memory
 * (peak reserved, fragmentation, smallest budget) and in time (per-call latency). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/units.h"
#include "harness/cli/cli.h"
#include "harness/cli/commands.h"
#include "harness/run/bisect.h"
#include "harness/run/oommap.h"
#include "harness/run/results.h"
#include "harness/tune/report.h"
#include "harness/run/stop.h"

static const ab_cli_command_t command = {
    "allocbench compare", AB_CMD_COMPARE, NULL,
    "Runs the workload through each strategy once with no budget (peak reserved, fragmentation,\n"
    "latency; a workload built for a budget, the fragmenter, runs under it, as with `run`), then\n"
    "searches the smallest budget each one survives (as `allocbench oom` does), and prints one\n"
    "table. Rows are appended to DIR/compare.csv; the runs also go to DIR/summary.csv and the\n"
    "searches to DIR/oom.csv, the segment map of each failing probe beside them.\n"};

static const char *const table_cols[] = {"strategy",     "conf",         "status", "peak_reserved_bytes", "frag_pct",
                                         "min_budget_bytes", "safe_cap_bytes", "overhead_pct", "oom_kind_at_fail",    "alloc_ns_p50",
                                         "alloc_ns_p99", "free_ns_p50",  "device_time_s", "note"};

/* A row's strategy as the answer names it: with its conf where it was given one. */
static void label(const ab_table_t *t, size_t r, char *out, size_t size) {
  const char *conf = ab_table_get(t, r, "conf");
  snprintf(out, size, "%s%s%s%s", ab_table_get(t, r, "strategy"), conf && *conf ? " (" : "", conf && *conf ? conf : "",
           conf && *conf ? ")" : "");
}

/* "Lowest peak reserved: expandable, 110.00 MiB, 20.00 MiB (15.4%) below caching." The best
 * row of a column (lowest; rows without a value left out) against the next best. A figure of
 * the run (ran_only) counts only where the run completed: the peak of a run that ran out of
 * memory is where it stopped, not what the workload needs, and is never named best. */
static void say_best(const ab_table_t *t, const char *column, const char *what, bool bytes, bool ran_only) {
  size_t best = SIZE_MAX, second = SIZE_MAX, failed = 0;
  double v[64];
  for (size_t r = 0; r < t->nrows && r < 64; r++) {
    const char *cell = ab_table_get(t, r, column);
    if (cell == NULL || *cell == '\0') continue;
    if (ran_only && strcmp(ab_table_get(t, r, "status"), "ok") != 0) {
      failed++;
      continue;
    }
    v[r] = strtod(cell, NULL);
    if (best == SIZE_MAX || v[r] < v[best]) {
      second = best;
      best = r;
    } else if (second == SIZE_MAX || v[r] < v[second]) {
      second = r;
    }
  }
  if (best == SIZE_MAX) {
    if (failed) printf("%s: none; no run completed.\n", what);
    return;
  }
  char a[32], b[32], l1[160], l2[160];
  label(t, best, l1, sizeof l1);
  if (bytes)
    ab_format_bytes((uint64_t)v[best], a, sizeof a);
  else
    snprintf(a, sizeof a, "%.0f ns", v[best]);
  printf("%s: %s, %s", what, l1, a);
  if (second != SIZE_MAX) {
    label(t, second, l2, sizeof l2);
    double d = v[second] - v[best];
    if (d == 0)
      printf(", as %s", l2);
    else if (bytes)
      printf(", %s (%.1f%%) below %s", ab_format_bytes((uint64_t)d, b, sizeof b), 100.0 * d / v[second], l2);
    else
      printf(", against %.0f ns for %s", v[second], l2);
  }
  if (failed) printf(" (of the %zu run%s that completed)", t->nrows - failed, t->nrows - failed == 1 ? "" : "s");
  printf(".\n");
}

int ab_cmd_compare(int argc, char **argv) {
  ab_run_spec_t o;
  ab_run_spec_defaults(&o, "allocbench compare");
  ab_bisect_opts_t search;
  ab_cli_strategies_t list;
  ab_events_t es;
  int rc = ab_cli_search_setup(argc, argv, &command, &o, &search, &list, &es);
  if (rc >= 0) return rc;
  rc = AB_EXIT_OK;

  ab_run_t run;
  if (ab_run_prepare(&run, &es) != AB_OK) {
    ab_events_free(&es);
    return ab_cli_fail(&o, "out of host memory");
  }
  ab_table_t summary, searches, rows;
  ab_table_init(&summary, ab_summary_cols, ab_summary_ncols);
  ab_table_init(&searches, ab_oom_cols, ab_oom_ncols);
  ab_table_init(&rows, ab_compare_cols, ab_compare_ncols);
  ab_oommap_t map;
  ab_oommap_init(&map);
  for (size_t i = 0; i < list.n && !ab_run_stop; i++) {
    ab_run_spec_t one = o;
    one.conf = list.conf[i];
    ab_diag_t diag = {""};
    ab_band_t band;
    ab_status ran = ab_run_one(&one, &es, list.name[i], &run, &summary, &band, &diag);
    if (ab_run_stop) break;
    if (ran != AB_OK) {
      rc = ab_cli_fail_of(&o, list.name[i], diag.msg);
      /* A run that failed (a library that crashed) is a row of the comparison too, its status
       * error and why in its note, as it is in summary.csv: no strategy leaves it unseen. */
      if (run.status == AB_RUN_ERROR) {
        ab_bisect_result_t none;
        memset(&none, 0, sizeof none);
        ab_run_desc_t desc = {es.source, list.name[i], list.conf[i], "", 0, o.seed, 0, NULL};
        if (ab_results_add_compare(&rows, &desc, &es, &run, &none) != AB_OK) rc = ab_cli_fail(&o, "out of host memory");
      }
      continue;
    }
    /* The search replays into the same run: keep the figures of the unbudgeted one (its
     * scratch pointers are not used). */
    ab_run_t unbudgeted = run;
    ab_bisect_opts_t b = ab_run_search_opts(&o, &search, list.name[i], list.conf[i]);
    b.on_oom = ab_oommap_capture;
    b.on_oom_ctx = &map;
    ab_bisect_result_t res;
    ab_status searched = ab_bisect_search(&es, &b, &run, &res, &diag);
    if (ab_run_stop) break; /* a search cut short has no answer */
    if (searched != AB_OK) {
      rc = ab_cli_fail_of(&o, list.name[i], diag.msg);
      continue;
    }
    ab_run_desc_t desc = {es.source, list.name[i], list.conf[i], res.device, 0, o.seed, 0, &band};
    if (ab_results_add_oom(&searches, &desc, &es, &res) != AB_OK ||
        ab_results_add_compare(&rows, &desc, &es, &unbudgeted, &res) != AB_OK)
      rc = ab_cli_fail(&o, "out of host memory");
    if (ab_cli_search_oom(&o, &desc, &res, &map, o.verbose, &diag) != AB_OK) rc = ab_cli_fail(&o, diag.msg);
  }
  ab_diag_t io = {""};
  /* Stopped: what finished is recorded as matrix records it (each run's row and timeline, each
   * search's rows), and no answer is drawn from part of the strategies. */
  if (ab_run_stop) {
    char what[600];
    snprintf(what, sizeof what, ": %zu of %zu strategies compared, in %s/compare.csv (each finished run in "
             "summary.csv); what was in progress was stopped and not recorded", rows.nrows, list.n, o.out_dir);
    rc = ab_cli_stopped(&o, what);
  }
  if ((summary.nrows && ab_cli_append(&o, &summary, "summary.csv", &io) != AB_OK) ||
      (searches.nrows && ab_cli_append(&o, &searches, "oom.csv", &io) != AB_OK) ||
      (rows.nrows && ab_cli_append(&o, &rows, "compare.csv", &io) != AB_OK))
    rc = ab_cli_fail(&o, io.msg);
  if (rows.nrows) ab_cli_print(&o, &rows, table_cols, sizeof table_cols / sizeof table_cols[0]);
  /* The answer, per objective: which strategy is best, and by how much over the next. */
  if (rows.nrows > 1 && o.format == AB_FORMAT_TABLE && !ab_run_stop) {
    putchar('\n');
    /* Ranked by the worst end of each band, which is the figure where no placement decides. */
    bool banded = false;
    for (size_t r = 0; r < rows.nrows; r++)
      banded |= strcmp(ab_table_get(&rows, r, "peak_reserved_low"), ab_table_get(&rows, r, "peak_reserved_high")) != 0;
    say_best(&rows, "peak_reserved_high", banded ? "Lowest peak reserved, at the worst placement" : "Lowest peak reserved",
             true, true);
    /* A cap to deploy is a safe one (Note [Cap map], bisect.c): the caps were mapped. */
    bool mapped = false;
    for (size_t r = 0; r < rows.nrows; r++) mapped |= *ab_table_get(&rows, r, "safe_cap_bytes") != '\0';
    if (mapped)
      say_best(&rows, "safe_cap_bytes", "Smallest safe cap", true, false);
    else
      say_best(&rows, "min_budget_bytes", o.cap ? "Smallest cap" : "Smallest budget", true, false);
    say_best(&rows, "alloc_ns_p99", "Fastest allocation (p99)", false, true);
  }
  ab_oommap_free(&map);
  ab_table_free(&rows);
  ab_table_free(&searches);
  ab_table_free(&summary);
  ab_run_release(&run);
  ab_events_free(&es);
  /* The command line, for the page of the folder (report.h). */
  ab_diag_t logged = {""};
  if (rc == AB_EXIT_OK && ab_report_log_command(o.out_dir, argc, argv, &logged) != AB_OK) rc = ab_cli_fail(&o, logged.msg);
  return rc;
}
