/* cmd_oom.c: `allocbench oom`: the smallest budget under which a workload runs, per strategy. */
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
    "allocbench oom", AB_CMD_OOM, NULL,
    "Finds, for each strategy, the smallest budget under which the whole workload runs: \"would my\n"
    "job fit on a 40 GB card, and with which setting?\". Each probe replays the workload on a fresh\n"
    "device with that budget (a real run on cuda); bisection narrows the budget to the tolerance.\n"
    "One row per strategy is printed and appended to DIR/oom.csv: min_budget_bytes passed,\n"
    "max_fail_bytes failed, and the OOM of that failing run is reported on stderr, with its segment\n"
    "map in DIR/oommap_<run>.csv, <run> being <workload>[_conf-<hash>]_<strategy>\n"
    "(plots/oommap.gp draws it).\n"
    "With --search cap (or a job's --cap), PyTorch's memory cap is searched instead, and for the\n"
    "caching strategies not bisected but mapped: the status at every cap, since it is not\n"
    "monotonic in the cap. The answer gives the smallest cap that completes and the safe cap,\n"
    "from which every cap up completes; the map goes to DIR/capmap_<run>.csv\n"
    "(plots/capmap.gp draws it).\n"
    "For a trace whose program survived OOMs (it changed course under memory pressure) the\n"
    "budget found is an upper bound; the note column says so.\n"};

/* The columns of the comparison table printed for several strategies. */
static const char *const table_cols[] = {"strategy",         "conf",          "min_budget_bytes", "max_fail_bytes", "safe_cap_bytes",
                                         "peak_requested_bytes", "overhead_pct", "oom_kind_at_fail",
                                         "oom_event_at_fail", "probes",       "wall_s",           "note"};

/* One strategy's answer, for the closing sentence. */
typedef struct answer_s {
  const char *strategy, *conf; /* not owned */
  bool passed, upper_bound, cap;
  uint64_t min_budget;
  uint64_t safe_cap;    /* the cap map's: every cap from it up completes; 0: not mapped */
  unsigned fail_ranges; /* failing ranges above min_budget */
  int at_cap;           /* under the job's --cap: 1 completes, 0 runs out of memory; -1: none given */
  char fails[320];      /* the failing ranges above min_budget, in words ("7.70-7.74 GiB, ..."); "" */
} answer_t;

/* The failing ranges above the smallest cap, in words: where a bisection's answer would have
 * failed a deployer (Note [Cap map], bisect.c); of many, the first three and the last three,
 * the last the ones just below the safe cap. */
static void say_ranges(const ab_capmap_t *caps, uint64_t above, char *out, size_t size) {
  enum { EACH_END = 3 };
  out[0] = '\0';
  uint64_t(*r)[2] = malloc((caps->n + 1) * sizeof *r);
  if (r == NULL) return;
  size_t n = ab_capmap_fail_ranges(caps, above, r, caps->n + 1), used = 0;
  for (size_t i = 0; i < n && used < size; i++) {
    if (n > 2 * EACH_END && i == EACH_END) {
      used += (size_t)snprintf(out + used, size - used, ", %zu more", n - 2 * EACH_END);
      i = n - EACH_END - 1;
      continue;
    }
    char lo[32], hi[32];
    snprintf(lo, sizeof lo, "%.3f", (double)r[i][0] / (double)AB_GiB);
    snprintf(hi, sizeof hi, "%.3f", (double)r[i][1] / (double)AB_GiB);
    bool one = strcmp(lo, hi) == 0;
    used += (size_t)snprintf(out + used, size - used, "%s%s%s%s", i ? ", " : "", lo, one ? "" : "-", one ? "" : hi);
  }
  if (n && used < size) snprintf(out + used, size - used, " GiB");
  free(r);
}

/* What a deployer can set: the safe cap where the caps were mapped, else the smallest. */
static uint64_t deployable(const answer_t *a) { return a->safe_cap ? a->safe_cap : a->min_budget; }

/* Those that fit first, the smallest deployable budget or cap first. */
static int by_budget(const void *pa, const void *pb) {
  const answer_t *a = pa, *b = pb;
  if (a->passed != b->passed) return a->passed ? -1 : 1;
  return (deployable(a) > deployable(b)) - (deployable(a) < deployable(b));
}

/* Under the job's cap: whether it completes, and by how much it clears the safe cap (the
 * headroom), or that it lies in or below the failing ranges. Printed after the ranking. */
static void say_at_cap(const answer_t *a, uint64_t cap) {
  if (a->at_cap < 0) return;
  char c[AB_BYTES_TEXT], d[AB_BYTES_TEXT], name[600];
  snprintf(name, sizeof name, "%s%s%s%s", a->strategy, a->conf && *a->conf ? " -c '" : "", a->conf && *a->conf ? a->conf : "",
           a->conf && *a->conf ? "'" : "");
  ab_format_bytes(cap, c, sizeof c);
  if (!a->at_cap)
    printf(" Under the job's cap of %s, %s runs out of memory", c, name);
  else if (a->safe_cap && cap >= a->safe_cap)
    printf(" Under the job's cap of %s, %s completes, %s above its safe cap", c, name,
           ab_format_bytes(cap - a->safe_cap, d, sizeof d));
  else if (a->safe_cap)
    printf(" Under the job's cap of %s, %s completes, but %s below its safe cap: a cap a little lower or higher may fail",
           c, name, ab_format_bytes(a->safe_cap - cap, d, sizeof d));
  else
    printf(" Under the job's cap of %s, %s completes (its caps were not mapped: larger ones may fail)", c, name);
  if (!a->at_cap && a->safe_cap) printf(" (its safe cap is %s)", ab_format_bytes(a->safe_cap, d, sizeof d));
  printf(".");
}

/* The table's answer in words, the smallest budget first: "It fits 260.12 MiB with
 * expandable; needs 320.00 MiB with caching; no budget tried fits it with pooled." */
static void say_answer(answer_t *a, size_t n, uint64_t cap) {
  qsort(a, n, sizeof *a, by_budget);
  printf("\n");
  size_t fit = 0;
  while (fit < n && a[fit].passed) fit++;
  /* Budgets that differ read apart, however close (one byte, where the search was that fine). */
  uint64_t budgets[AB_CLI_MAX_STRATEGIES];
  char sizes[AB_CLI_MAX_STRATEGIES][AB_BYTES_TEXT];
  for (size_t i = 0; i < fit; i++) budgets[i] = a[i].min_budget;
  ab_format_bytes_apart(budgets, fit, sizes);
  for (size_t i = 0; i < fit; i++) {
    const char *size = sizes[i];
    printf("%s %s%s%s with %s", i == 0 ? "It fits" : "; needs", a[i].cap ? "a cap of " : "", size,
           a[i].upper_bound ? " at most" : "", a[i].strategy);
    if (a[i].conf && *a[i].conf) printf(" -c '%s'", a[i].conf);
    /* The smallest cap is not one to deploy where larger ones fail (Note [Cap map], bisect.c). */
    if (a[i].fail_ranges) {
      char safe[AB_BYTES_TEXT];
      printf(", but fails again at larger caps (%s): every cap from %s up completes", a[i].fails,
             ab_format_bytes(a[i].safe_cap, safe, sizeof safe));
    }
  }
  for (size_t i = fit; i < n; i++) {
    printf("%s%s", i > fit ? (i + 1 == n ? " or " : ", ") : fit ? "; no budget tried fits it with " : "No budget tried fits it with ",
           a[i].strategy);
    if (a[i].conf && *a[i].conf) printf(" -c '%s'", a[i].conf);
  }
  printf(".");
  for (size_t i = 0; i < n; i++) say_at_cap(&a[i], cap);
  printf("\n");
}

/* The status under the job's cap: read off the cap map, or where the caps were not mapped, a
 * run under it, made without the search's on_oom hook so that the segment map kept is still
 * that of the search's failing run. */
static ab_status status_at(const ab_events_t *es, const ab_bisect_opts_t *b, ab_run_t *run, const ab_bisect_result_t *res,
                           const ab_capmap_t *caps, uint64_t cap, int *at_cap, ab_diag_t *diag) {
  if (res->mapped) {
    for (size_t k = 0; k < caps->n; k++)
      if (caps->classes[k].lo <= cap && cap <= caps->classes[k].hi) *at_cap = caps->classes[k].ok;
    if (*at_cap >= 0) return AB_OK;
  }
  ab_bisect_opts_t once = *b;
  once.on_oom = NULL;
  AB_TRY(ab_bisect_probe(es, &once, cap, NULL, run, NULL, NULL, diag));
  if (run->status == AB_RUN_OK || run->status == AB_RUN_OOM) *at_cap = run->status == AB_RUN_OK;
  return AB_OK;
}

int ab_cmd_oom(int argc, char **argv) {
  ab_run_spec_t o;
  ab_run_spec_defaults(&o, "allocbench oom");
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
  ab_table_t rows;
  ab_table_init(&rows, ab_oom_cols, ab_oom_ncols);
  ab_oommap_t map;
  ab_oommap_init(&map);
  ab_capmap_t caps = {0};
  answer_t answers[AB_CLI_MAX_STRATEGIES];
  size_t nanswers = 0;
  for (size_t i = 0; i < list.n && !ab_run_stop; i++) {
    ab_bisect_opts_t b = ab_run_search_opts(&o, &search, list.name[i], list.conf[i]);
    b.on_oom = ab_oommap_capture;
    b.on_oom_ctx = &map;
    b.map = &caps;
    ab_bisect_result_t res;
    ab_diag_t diag = {""};
    ab_status searched = ab_bisect_search(&es, &b, &run, &res, &diag);
    int at_cap = -1;
    if (searched == AB_OK && o.cap_bytes && !ab_run_stop) searched = status_at(&es, &b, &run, &res, &caps, o.cap_bytes, &at_cap, &diag);
    if (ab_run_stop) break; /* a search cut short has no answer */
    if (searched != AB_OK) {
      rc = ab_cli_fail_of(&o, list.name[i], diag.msg);
      continue;
    }
    ab_run_desc_t desc = {es.source, list.name[i], list.conf[i], res.device, 0, o.seed, 0, NULL};
    if (ab_results_add_oom(&rows, &desc, &es, &res) != AB_OK) rc = ab_cli_fail(&o, "out of host memory");
    char drawn[4096];
    if (res.mapped && ab_results_write_capmap(o.out_dir, &desc, &caps, drawn, sizeof drawn, &diag) != AB_OK)
      rc = ab_cli_fail(&o, diag.msg);
    else if (res.mapped && !o.quiet)
      fprintf(stderr, "%s: %s's cap map: %s (gnuplot -e \"map='%s'\" %s/capmap.gp draws it)\n", o.cmd, list.name[i], drawn,
              drawn, ab_results_plots_dir());
    answers[nanswers++] = (answer_t){list.name[i],    list.conf[i], res.passed,      res.upper_bound,
                                     res.cap,         res.min_budget, res.mapped ? res.safe_cap : 0,
                                     res.fail_ranges, at_cap, ""};
    if (res.mapped) say_ranges(&caps, res.min_budget, answers[nanswers - 1].fails, sizeof answers[nanswers - 1].fails);
    if (ab_cli_search_oom(&o, &desc, &res, &map, true, &diag) != AB_OK) rc = ab_cli_fail(&o, diag.msg);
  }
  if (ab_run_stop) {
    rc = ab_cli_stopped(&o, ": the search in progress was stopped; nothing was written");
  } else if (rows.nrows) {
    ab_diag_t io = {""};
    if (ab_cli_append(&o, &rows, "oom.csv", &io) != AB_OK) rc = ab_cli_fail(&o, io.msg);
    if (rows.nrows > 1)
      ab_cli_print(&o, &rows, table_cols, sizeof table_cols / sizeof table_cols[0]);
    else
      ab_cli_print(&o, &rows, NULL, 0);
    if (o.format == AB_FORMAT_TABLE) say_answer(answers, nanswers, o.cap_bytes);
  }
  ab_capmap_free(&caps);
  ab_oommap_free(&map);
  ab_table_free(&rows);
  ab_run_release(&run);
  ab_events_free(&es);
  /* The command line, for the page of the folder (report.h). */
  ab_diag_t logged = {""};
  if (rc == AB_EXIT_OK && ab_report_log_command(o.out_dir, argc, argv, &logged) != AB_OK) rc = ab_cli_fail(&o, logged.msg);
  return rc;
}
