/* cmd_list.c: `allocbench list`: what can be run. */
#include <stdio.h>
#include <string.h>

#include "kernels/base/units.h"
#include "harness/cli/cli.h"
#include "harness/cli/commands.h"
#include "kernels/device/device_open.h"
#include "kernels/device/sim.h"
#include "strategies/registry.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

static const ab_cli_command_t command = {
    "allocbench list", AB_CMD_LIST, NULL, "Lists the strategies (-s), the workloads (-w) and the simulated cards (--device sim:NAME).\n"};

/* list's own options: --strategies and --workloads (ctx: the one given, or 0). */
static bool own_option(void *ctx, int opt, const char *arg, ab_status *st, ab_diag_t *diag) {
  (void)arg, (void)st, (void)diag;
  if (opt != AB_OPT_STRATEGIES && opt != AB_OPT_WORKLOADS) return false;
  *(int *)ctx = opt;
  return true;
}

/* Text of `allocbench list -v` under a name: each line indented further. */
static void print_under(const char *text) {
  for (const char *line = text; *line;) {
    size_t n = strcspn(line, "\n");
    printf("    %.*s\n", (int)n, line);
    line += n + (line[n] == '\n');
  }
}

/* The strategy before i with the same -c keys (a preset of it), or NULL. */
static const ab_strategy_entry_t *same_keys_as(const ab_strategy_entry_t *all, size_t i) {
  for (size_t j = 0; j < i; j++)
    if (!all[j].hidden && all[j].conf_help && strcmp(all[j].conf_help, all[i].conf_help) == 0) return &all[j];
  return NULL;
}

int ab_cmd_list(int argc, char **argv) {
  ab_run_spec_t o;
  ab_run_spec_defaults(&o, "allocbench list");
  int names_only = 0;
  int rc = ab_cli_parse(argc, argv, &command, &o, own_option, &names_only, 0, NULL, NULL);
  if (rc >= 0) return rc;
  bool verbose = o.verbose;
  size_t ns, nw;
  const ab_strategy_entry_t *strategies = ab_strategy_registry(&ns);
  const ab_workload_t *const *workloads = ab_workload_registry(&nw);
  if (names_only == AB_OPT_STRATEGIES) {
    for (size_t i = 0; i < ns; i++)
      if (!strategies[i].hidden) printf("%s\n", strategies[i].name);
    return AB_EXIT_OK;
  }
  if (names_only == AB_OPT_WORKLOADS) {
    for (size_t i = 0; i < nw; i++) printf("%s\n", workloads[i]->name);
    return AB_EXIT_OK;
  }
  printf("strategies (-s NAME, -c KEY:VALUE,...):\n");
  for (size_t i = 0; i < ns; i++) {
    if (strategies[i].hidden) continue;
    printf("  %-14s %s\n", strategies[i].name, strategies[i].summary);
    if (strategies[i].preset) printf("  %-14s   preset: %s\n", "", strategies[i].preset);
    if (!verbose || strategies[i].conf_help == NULL) continue;
    const ab_strategy_entry_t *same = same_keys_as(strategies, i);
    if (same)
      printf("      -c keys: those of %s\n", same->name);
    else
      print_under(strategies[i].conf_help);
  }
  size_t nf;
  const ab_strategy_family_t *families = ab_strategy_families(&nf);
  for (size_t i = 0; i < nf; i++) {
    printf("  %s:%s\n  %-14s %s\n", families[i].entry.name, families[i].argument, "", families[i].entry.summary);
    if (verbose && families[i].entry.conf_help) print_under(families[i].entry.conf_help);
  }
  printf("\nworkloads (-w NAME or NAME:KEY=VALUE,...):\n");
  for (size_t i = 0; i < nw; i++) {
    printf("  %-14s %s\n", workloads[i]->name, workloads[i]->summary);
    if (verbose && workloads[i]->params_help) print_under(workloads[i]->params_help);
    if (verbose && workloads[i]->bench_args)
      printf("      in the bench as -w %s%s%s\n", workloads[i]->name, *workloads[i]->bench_args ? ":" : "",
             workloads[i]->bench_args);
  }
  unsigned np;
  const ab_sim_profile_t *profiles = ab_sim_profiles(&np);
  printf("\nsimulated cards (--device sim:NAME, or sim:SIZE):\n");
  for (unsigned i = 0; i < np; i++) {
    /* A card named in GB (a100-40gb) says its capacity in GB too: 40 GiB is 42.95 GB. */
    char b[32], both[64];
    ab_format_bytes(profiles[i].total_bytes, b, sizeof b);
    if (strstr(profiles[i].name, "gb") || strstr(profiles[i].source, "GB"))
      snprintf(both, sizeof both, "%s = %.2f GB", b, (double)profiles[i].total_bytes / 1e9);
    else
      snprintf(both, sizeof both, "%s", b);
    printf("  %-14s %-24s %s\n", profiles[i].name, both, profiles[i].source);
  }
  return AB_EXIT_OK;
}
