/* cmd_oom.c: `allocbench oom`: the smallest budget under which a workload runs, per strategy. */
#include <stdio.h>
#include <string.h>

#include "bisect.h"
#include "cli.h"
#include "commands.h"
#include "oommap.h"
#include "results.h"

static const ab_cli_command_t command = {
    "allocbench oom", AB_CMD_OOM, NULL,
    "Finds, for each strategy, the smallest budget under which the whole workload runs: \"would my\n"
    "job fit on a 40 GB card, and with which setting?\". Each probe replays the workload on a fresh\n"
    "device with that budget (a real run on cuda); bisection narrows the budget to the tolerance.\n"
    "One row per strategy is printed and appended to DIR/oom.csv: min_budget_bytes passed,\n"
    "max_fail_bytes failed, and the OOM of that failing run is reported on stderr, with its segment\n"
    "map in DIR/oommap_<workload>_<strategy>.csv (plots/oommap.gp draws it).\n"
    "For a trace whose program survived OOMs (it changed course under memory pressure) the\n"
    "budget found is an upper bound; the note column says so.\n"};

/* The columns of the comparison table printed for several strategies. */
static const char *const table_cols[] = {"strategy",         "conf",          "min_budget_bytes", "max_fail_bytes",
                                         "peak_requested_bytes", "overhead_pct", "oom_kind_at_fail",
                                         "oom_event_at_fail", "probes",       "wall_s",           "note"};

int ab_cmd_oom(int argc, char **argv) {
  ab_cli_opts_t o;
  ab_cli_defaults(&o, "allocbench oom");
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
  for (size_t i = 0; i < list.n; i++) {
    ab_bisect_opts_t b = ab_cli_search_opts(&o, &search, list.name[i], list.conf[i]);
    b.map = &map;
    ab_bisect_result_t res;
    ab_diag_t diag = {""};
    if (ab_bisect_search(&es, &b, &run, &res, &diag) != AB_OK) {
      char msg[AB_DIAG_BYTES + 80];
      snprintf(msg, sizeof msg, "%s: %s", list.name[i], diag.msg);
      rc = ab_cli_fail(&o, msg);
      continue;
    }
    ab_run_desc_t desc = {es.source, list.name[i], list.conf[i], res.device, 0, o.seed};
    if (ab_results_add_oom(&rows, &desc, &es, &res) != AB_OK) rc = ab_cli_fail(&o, "out of host memory");
    if (ab_cli_search_oom(&o, &es, list.name[i], &res, &map, &diag) != AB_OK) rc = ab_cli_fail(&o, diag.msg);
  }
  if (rows.nrows) {
    ab_diag_t io = {""};
    if (ab_cli_append(&o, &rows, "oom.csv", &io) != AB_OK) rc = ab_cli_fail(&o, io.msg);
    if (rows.nrows > 1)
      ab_cli_print(&o, &rows, table_cols, sizeof table_cols / sizeof table_cols[0]);
    else
      ab_cli_print(&o, &rows, NULL, 0);
  }
  ab_oommap_free(&map);
  ab_table_free(&rows);
  ab_run_release(&run);
  ab_events_free(&es);
  return rc;
}
