/* cmd_run.c: `allocbench run`: one workload through one strategy, recorded. */
#include <stdio.h>
#include <string.h>

#include "harness/cli.h"
#include "harness/commands.h"
#include "harness/results.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

static const char help_head[] =
    "usage: allocbench run -w WORKLOAD[:ARGS] -s STRATEGY [-c CONF] [--device auto|sim[:PROFILE]|cuda]\n"
    "                      [--budget SIZE] [--seed N] [--out DIR] [--format table|csv|json]\n\n"
    "Replays the workload's events through the strategy, prints the result and appends it to\n"
    "DIR/summary.csv (and the memory over time to DIR/timeline_<workload>_<strategy>.csv).\n"
    "An OOM is a result: the row says where and why, the report on stderr explains it, the\n"
    "segment map at that moment goes to DIR/oommap_<workload>_<strategy>.csv (plots/oommap.gp\n"
    "draws it), and the command exits 0.\n\n"
    "  -w, --workload W      a workload of `allocbench list`, with KEY=VALUE arguments after ':'\n"
    "  -s, --strategy S      a strategy of `allocbench list`\n"
    "  -c, --conf CONF       the strategy's options, KEY:VALUE,... (PYTORCH_CUDA_ALLOC_CONF syntax)\n";

int ab_cmd_run(int argc, char **argv) {
  static const struct option longopts[] = {AB_CLI_COMMON_LONGOPTS, {0, 0, 0, 0}};
  ab_cli_opts_t o;
  ab_cli_defaults(&o, "run");
  ab_diag_t diag = {""};
  int opt;
  optind = 1;
  opterr = 0;
  while ((opt = getopt_long(argc, argv, AB_CLI_COMMON_SHORTOPTS, longopts, NULL)) != -1) {
    ab_status st;
    if (opt == 'h') {
      fputs(help_head, stdout);
      fputs(ab_cli_common_help, stdout);
      return AB_EXIT_OK;
    }
    if (opt == '?' || opt == ':') {
      snprintf(diag.msg, sizeof diag.msg, "bad option '%s' (see allocbench run --help)", argv[optind - 1]);
      return ab_cli_usage_error(&o, diag.msg);
    }
    if (!ab_cli_common_option(opt, optarg, &o, &st, &diag) || st != AB_OK)
      return ab_cli_usage_error(&o, diag.msg[0] ? diag.msg : "bad option");
  }
  if (optind < argc) {
    snprintf(diag.msg, sizeof diag.msg, "unexpected argument '%s'", argv[optind]);
    return ab_cli_usage_error(&o, diag.msg);
  }
  if (o.workload == NULL || o.strategy == NULL) return ab_cli_usage_error(&o, "-w WORKLOAD and -s STRATEGY are required");
  ab_cli_catch_stop();
  const ab_strategy_entry_t *entry;
  if (ab_strategy_lookup(o.strategy, &entry, &diag) != AB_OK) return ab_cli_usage_error(&o, diag.msg);
  ab_events_t es;
  if (ab_workload_build(o.workload, o.seed, &es, &diag) != AB_OK) return ab_cli_usage_error(&o, diag.msg);

  ab_run_t run;
  if (ab_run_prepare(&run, &es) != AB_OK) {
    ab_events_free(&es);
    return ab_cli_fail(&o, "out of host memory");
  }
  ab_table_t summary;
  ab_table_init(&summary, ab_summary_cols, ab_summary_ncols);
  ab_status st = ab_cli_run_one(&o, &es, o.strategy, &run, &summary, &diag);
  int rc = AB_EXIT_OK;
  if (run.status == AB_RUN_INTERRUPTED) {
    rc = ab_cli_interrupted(&o, 0, 1);
  } else if (st != AB_OK && summary.nrows == 0) {
    /* Nothing ran: a bad conf, or no device. */
    rc = st == AB_ERR_INVALID ? ab_cli_usage_error(&o, diag.msg) : ab_cli_fail(&o, diag.msg);
  } else {
    ab_diag_t io = {""};
    if (ab_cli_append(&o, &summary, "summary.csv", &io) != AB_OK) rc = ab_cli_fail(&o, io.msg);
    ab_cli_print(&o, &summary, NULL, 0);
    if (run.kernels_skipped && o.format == AB_FORMAT_TABLE)
      printf("\n%llu kernels not run (%s)\n", (unsigned long long)run.kernels_skipped,
             o.kernels ? "the simulated device runs none; step times leave out compute" : "--no-kernels");
    if (st != AB_OK) rc = ab_cli_fail(&o, diag.msg);
  }
  ab_table_free(&summary);
  ab_run_release(&run);
  ab_events_free(&es);
  return rc;
}
