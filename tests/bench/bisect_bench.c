/* bisect_bench.c: how fast the budget search probes. Prints, per strategy, the time of 30
 * probes that each replay the whole stream (the worst case: a failing probe stops early) and
 * of a full search with the default range and tolerance; and what a probe costs before its
 * replay (a fresh device and strategy, opened and closed).
 *
 *   bisect_bench [WORKLOAD] [STRATEGY,...] [DEVICE]
 * defaults: random:ops=130000 (130 130 events), raw,pooled, sim.
 */
#include <stdio.h>
#include <string.h>

#include "kernels/base/clock.h"
#include "harness/cli/cli.h"
#include "kernels/device/device_open.h"
#include "harness/run/bisect.h"
#include "strategies/registry.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

#define PROBES 30

int main(int argc, char **argv) {
  const char *workload = argc > 1 ? argv[1] : "random:ops=130000";
  const char *strategies = argc > 2 ? argv[2] : "raw,pooled";
  const char *device = argc > 3 ? argv[3] : "sim";
  ab_diag_t diag = {""};
  ab_cli_strategies_t list;
  ab_events_t es;
  if (ab_cli_strategies(strategies, NULL, 0, &list, &diag) != AB_OK ||
      ab_workload_build(workload, 42, &es, &diag) != AB_OK) {
    fprintf(stderr, "bisect_bench: %s\n", diag.msg);
    return 2;
  }
  ab_run_t run;
  if (ab_run_prepare(&run, &es) != AB_OK) return 1;
  printf("workload %s: %zu events, device %s\n", workload, es.n, device);
  printf("%-14s %14s %12s %10s %14s %11s %12s\n", "strategy", "30 probes (s)", "probes/s", "Mevents/s", "search probes",
         "search (s)", "min budget");
  int rc = 0;
  for (size_t i = 0; i < list.n; i++) {
    ab_bisect_opts_t o = {.strategy = list.name[i], .device = device};
    uint64_t held = 0;
    /* The budget every probe below passes at: what an unbudgeted run held. */
    if (ab_bisect_probe(&es, &o, 0, NULL, &run, &held, NULL, &diag) != AB_OK || run.status != AB_RUN_OK) {
      fprintf(stderr, "bisect_bench: %s: %s\n", list.name[i], diag.msg[0] ? diag.msg : "the unbudgeted run failed");
      rc = 1;
      continue;
    }
    double t0 = ab_clock_s();
    size_t events = 0;
    for (int p = 0; p < PROBES; p++) {
      if (ab_bisect_probe(&es, &o, held, NULL, &run, NULL, NULL, &diag) != AB_OK) {
        fprintf(stderr, "bisect_bench: %s: %s\n", list.name[i], diag.msg);
        return 1;
      }
      events += run.events_done;
    }
    double dt = ab_clock_s() - t0;
    ab_bisect_result_t res;
    if (ab_bisect_search(&es, &o, &run, &res, &diag) != AB_OK) {
      fprintf(stderr, "bisect_bench: %s: %s\n", list.name[i], diag.msg);
      return 1;
    }
    printf("%-14s %14.3f %12.1f %10.2f %14u %11.3f %12llu\n", list.name[i], dt, PROBES / dt, (double)events / dt * 1e-6,
           res.probes, res.wall_s, (unsigned long long)res.min_budget);
  }
  /* The fixed cost of a probe: open a device, create the strategy, destroy, close. */
  enum { OPENS = 10000 };
  double t0 = ab_clock_s();
  for (int i = 0; i < OPENS; i++) {
    ab_device_config_t cfg = {.budget_bytes = 1ULL << 30};
    ab_device_t *dev;
    ab_strategy_t *s;
    if (ab_device_open(device, &cfg, &dev, &diag) != AB_OK ||
        ab_strategy_create(list.name[0], dev, NULL, &s, &diag) != AB_OK) {
      fprintf(stderr, "bisect_bench: %s\n", diag.msg);
      return 1;
    }
    ab_strategy_destroy(s);
    ab_device_close(dev, NULL);
  }
  printf("a fresh device and %s strategy per probe: %.2f us\n", list.name[0], (ab_clock_s() - t0) / OPENS * 1e6);
  ab_run_release(&run);
  ab_events_free(&es);
  return rc;
}
