/* cmd_list.c: `allocbench list`: what can be run. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "device_open.h"
#include "registry.h"
#include "sim.h"
#include "strategy.h"
#include "units.h"
#include "workload.h"

static const char help[] =
    "usage: allocbench list [-v]\n\n"
    "Lists the strategies (-s), the workloads (-w) and the simulated cards (--device sim:NAME).\n\n"
    "  -v, --verbose   also list each strategy's -c keys and each workload's parameters\n"
    "      --strategies, --workloads  only the names, one per line (for scripts)\n"
    "  -h, --help      this help\n";

int ab_cmd_list(int argc, char **argv) {
  static const struct option longopts[] = {{"verbose", no_argument, 0, 'v'},
                                           {"strategies", no_argument, 0, 'S'},
                                           {"workloads", no_argument, 0, 'W'},
                                           {"help", no_argument, 0, 'h'},
                                           {0, 0, 0, 0}};
  bool verbose = false;
  int names_only = 0;
  int opt;
  optind = 1;
  opterr = 0;
  while ((opt = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
    if (opt == 'v') {
      verbose = true;
    } else if (opt == 'S' || opt == 'W') {
      names_only = opt;
    } else if (opt == 'h') {
      fputs(help, stdout);
      return AB_EXIT_OK;
    } else {
      fprintf(stderr, "allocbench list: unknown option '%s' (see allocbench list --help)\n", argv[optind - 1]);
      return AB_EXIT_USAGE;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "allocbench list: unexpected argument '%s'\n", argv[optind]);
    return AB_EXIT_USAGE;
  }
  size_t ns, nw;
  const ab_strategy_entry_t *strategies = ab_strategy_registry(&ns);
  const ab_workload_t *const *workloads = ab_workload_registry(&nw);
  if (names_only == 'S') {
    for (size_t i = 0; i < ns; i++)
      if (!strategies[i].hidden) printf("%s\n", strategies[i].name);
    return AB_EXIT_OK;
  }
  if (names_only == 'W') {
    for (size_t i = 0; i < nw; i++) printf("%s\n", workloads[i]->name);
    return AB_EXIT_OK;
  }
  printf("strategies (-s NAME, -c KEY:VALUE,...):\n");
  for (size_t i = 0; i < ns; i++) {
    if (strategies[i].hidden) continue;
    printf("  %-14s %s\n", strategies[i].name, strategies[i].summary);
    if (strategies[i].preset) printf("  %-14s   preset: %s\n", "", strategies[i].preset);
    if (verbose && strategies[i].conf_help) printf("%s", strategies[i].conf_help);
  }
  size_t nf;
  const ab_strategy_family_t *families = ab_strategy_families(&nf);
  for (size_t i = 0; i < nf; i++) {
    printf("  %s:%s\n  %-14s %s\n", families[i].entry.name, families[i].argument, "", families[i].entry.summary);
    if (verbose) printf("%s", families[i].entry.conf_help);
  }
  printf("\nworkloads (-w NAME or NAME:KEY=VALUE,...):\n");
  for (size_t i = 0; i < nw; i++) {
    printf("  %-14s %s\n", workloads[i]->name, workloads[i]->summary);
    if (verbose && workloads[i]->params_help) printf("%s", workloads[i]->params_help);
  }
  unsigned np;
  const ab_sim_profile_t *profiles = ab_sim_profiles(&np);
  printf("\nsimulated cards (--device sim:NAME, or sim:SIZE):\n");
  for (unsigned i = 0; i < np; i++) {
    char b[32];
    printf("  %-14s %-12s %s\n", profiles[i].name, ab_format_bytes(profiles[i].total_bytes, b, sizeof b),
           profiles[i].source);
  }
  return AB_EXIT_OK;
}
