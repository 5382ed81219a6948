/* cmd_report.c: `allocbench report DIR`: one self-contained page for a results folder of
 * tune, compare, matrix or oom (report.h). */
#include <stdio.h>
#include <string.h>

#include "harness/cli/cli.h"
#include "harness/cli/commands.h"
#include "harness/tune/report.h"
#include "harness/run/stop.h"

static const ab_cli_command_t command = {
    "allocbench report", AB_CMD_REPORT, "DIR",
    "Writes one page to share for a results folder of tune, compare, matrix, oom or blame (DIR/report.html):\n"
    "what the results answer, in words, first (for tune the line to paste and what it saves), then the\n"
    "table, the figures inline (drawn first by plots/draw.sh, which needs gnuplot), what the trace\n"
    "holds, the commands that made the folder and the version of allocbench. The page loads nothing\n"
    "from anywhere: it opens from a file and prints.\n"};

static bool own_option(void *ctx, int opt, const char *arg, ab_status *st, ab_diag_t *diag) {
  (void)st, (void)diag;
  if (opt != 'o') return false;
  *(const char **)ctx = arg;
  return true;
}

int ab_cmd_report(int argc, char **argv) {
  ab_run_spec_t o;
  ab_run_spec_defaults(&o, "allocbench report");
  const char *out = NULL;
  char **args = NULL;
  size_t nargs = 0;
  int rc = ab_cli_parse(argc, argv, &command, &o, own_option, &out, 1, &args, &nargs);
  if (rc >= 0) return rc;
  if (nargs != 1) return ab_cli_usage_error(&o, "the results folder is required: allocbench report DIR");
  char written[4096];
  ab_diag_t diag = {""};
  ab_run_catch_stop(); /* drawing takes seconds: a stop ends draw.sh too */
  ab_status st = ab_report_write(args[0], out, true, written, sizeof written, &diag);
  if (st != AB_OK && ab_run_stop) return ab_cli_stopped(&o, " while drawing the figures: the page was not written");
  if (st == AB_ERR_INVALID) return ab_cli_usage_error(&o, diag.msg);
  if (st != AB_OK) return ab_cli_fail(&o, diag.msg);
  printf("allocbench report: %s\n", written);
  return AB_EXIT_OK;
}
