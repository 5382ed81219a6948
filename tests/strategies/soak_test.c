/* soak_test.c: every strategy users can pick, on the simulated card with 1% of the device's
 * allocation calls failing (as --faults rate=0.01,seed=S), through long workloads (random,
 * and dynamic-shapes where this build has it), going on after every OOM (the engine's
 * continue_on_oom). For each pair:
 *   - no error: every injected failure was retried or surfaced as an OOM, never as anything
 *     else, and the stream ran to its end;
 *   - the OOMs the engine saw are the ones the strategy counted, no more than the failures;
 *   - the strategy recovers: a later allocation succeeds after every OOM (no more than
 *     MAX_STREAK in a row fail: at 1% per call, nine in a row would be a 1e-18 event);
 *   - its invariants hold: checked after every event in the short soak, every 64k events in
 *     the long one;
 *   - nothing leaks: once the strategy is destroyed, the card holds no live allocation.
 * Usage: soak_test [--events=N] [--seeds=K] [TEST]. By default each stream has about 10 000
 * events and one fault seed (the CI run); `make soak` runs 1 000 000 events and three seeds,
 * and prints the figures of each pair. */
#include <stdlib.h>

#include "kernels/base/clock.h"
#include "kernels/device/device.h"
#include "kernels/device/device_open.h"
#include "kernels/device/sim.h"
#include "harness/run/engine.h"
#include "strategies/registry.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

#include "tests/check.h"

#define MAX_STREAK 8
#define EVERY_EVENT_UP_TO 50000 /* longer soaks check every 64k events */

static uint64_t events_wanted = 10000;
static unsigned seeds = 1;

/* The stream of `name` scaled by its `knob` to at least events_wanted events: the events
 * grow linearly with the knob, measured at two small values. */
static bool build(const char *name, const char *knob, ab_events_t *es) {
  ab_diag_t d = {""};
  char spec[128];
  size_t n[2];
  for (int i = 0; i < 2; i++) {
    snprintf(spec, sizeof spec, "%s:%s=%d", name, knob, 4 << i);
    if (ab_workload_build(spec, 42, es, &d) != AB_OK) {
      CHECK_MSG(false, "%s: %s", spec, d.msg);
      return false;
    }
    n[i] = es->n;
    ab_events_free(es);
  }
  size_t per = (n[1] - n[0]) / 4, base = n[0] - 4 * per;
  uint64_t k = events_wanted > base ? (events_wanted - base + per - 1) / per : 1;
  snprintf(spec, sizeof spec, "%s:%s=%llu", name, knob, (unsigned long long)k);
  if (ab_workload_build(spec, 42, es, &d) != AB_OK) {
    CHECK_MSG(false, "%s: %s", spec, d.msg);
    return false;
  }
  CHECK_MSG(es->n >= events_wanted, "%s: %zu events, fewer than %llu", spec, es->n, (unsigned long long)events_wanted);
  return true;
}

typedef struct periodic_s {
  ab_strategy_t *s;
  char broken[AB_DIAG_BYTES]; /* the first invariant that broke, or "" */
} periodic_t;

static void check_now(void *ctx, size_t done, size_t total) {
  periodic_t *p = ctx;
  (void)total;
  ab_diag_t d = {""};
  if (p->broken[0] == '\0' && ab_strategy_check(p->s, &d) != AB_OK)
    snprintf(p->broken, sizeof p->broken, "after %zu events: %s", done, d.msg);
}

/* Whether an ALLOC comes after event i. */
static bool alloc_after(const ab_events_t *es, size_t i) {
  for (size_t k = i + 1; k < es->n; k++)
    if (es->ev[k].kind == AB_EV_ALLOC) return true;
  return false;
}

static void soak_one(const ab_events_t *es, const char *strategy, uint64_t seed, ab_run_t *run) {
  ab_device_config_t cfg = {.faults = {.fail_rate = 0.01, .fail_seed = seed}};
  ab_diag_t d = {""};
  ab_device_t *dev = NULL;
  ab_strategy_t *s = NULL;
  REQUIRE_MSG(ab_device_open("sim", &cfg, &dev, &d) == AB_OK, "%s", d.msg);
  if (ab_strategy_create(strategy, dev, ab_test_conf_for(strategy), &s, &d) != AB_OK) {
    CHECK_MSG(false, "%s: %s", strategy, d.msg);
    ab_device_close(dev, NULL);
    return;
  }
  periodic_t periodic = {s, ""};
  ab_run_opts_t ro = ab_run_defaults();
  ro.time_calls = ro.timeline = false;
  ro.continue_on_oom = true;
  ro.check = es->n <= EVERY_EVENT_UP_TO;
  if (!ro.check) {
    ro.progress = check_now;
    ro.progress_ctx = &periodic;
  }
  double t0 = ab_clock_s();
  ab_status st = ab_engine_replay(es, s, &ro, run);
  double secs = ab_clock_s() - t0;
  const char *what = es->source;
  CHECK_MSG(st == AB_OK && run->status == AB_RUN_OK, "%s on %s, seed %llu: %s: %s", strategy, what,
            (unsigned long long)seed, ab_run_status_name(run->status), run->message);
  CHECK_MSG(periodic.broken[0] == '\0', "%s on %s: invariant broken %s", strategy, what, periodic.broken);
  if (!ro.check) check_now(&periodic, es->n, es->n);
  CHECK_EQ(run->events_done, es->n);
  CHECK_MSG(run->ooms == run->stats.num_ooms, "%s on %s: the replay saw %llu OOMs, the strategy counted %llu", strategy,
            what, (unsigned long long)run->ooms, (unsigned long long)run->stats.num_ooms);
  CHECK_MSG(run->ooms <= dev->calls.failed, "%s on %s: %llu OOMs from %llu failed device calls", strategy, what,
            (unsigned long long)run->ooms, (unsigned long long)dev->calls.failed);
  CHECK_MSG(run->oom_streak <= MAX_STREAK, "%s on %s: %llu allocations in a row failed", strategy, what,
            (unsigned long long)run->oom_streak);
  CHECK_MSG(run->ooms == 0 || alloc_after(es, run->last_oom_event), "%s on %s: no allocation after the last OOM",
            strategy, what);
  uint64_t calls = dev->calls.malloc + dev->calls.va_reserve + dev->calls.map + dev->calls.malloc_async;
  uint64_t failed = dev->calls.failed;
  ab_strategy_destroy(s);
  uint64_t live = ab_sim_live_count(dev);
  CHECK_MSG(live == 0 && dev->held_bytes == 0, "%s on %s: %llu allocations, %llu bytes live on the card at teardown",
            strategy, what, (unsigned long long)live, (unsigned long long)dev->held_bytes);
  CHECK_MSG(ab_device_close(dev, &d) == AB_OK, "%s on %s: %s", strategy, what, d.msg);
  printf("  %-15s %-34.34s %5llu %9zu %9llu %7llu %7llu %6llu %8llu %5llu %7.2f\n", strategy, what,
         (unsigned long long)seed, es->n, (unsigned long long)calls, (unsigned long long)failed,
         (unsigned long long)run->ooms, (unsigned long long)run->oom_streak, (unsigned long long)run->passed_over,
         (unsigned long long)live, secs);
}

static void soak(const char *workload, const char *knob) {
  if (ab_workload_find(workload) == NULL) SKIP("this build has no %s workload", workload);
  ab_events_t es;
  if (!build(workload, knob, &es)) return;
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  printf("  %-15s %-34s %5s %9s %9s %7s %7s %6s %8s %5s %7s\n", "strategy", "workload", "seed", "events", "dev calls",
         "failed", "ooms", "streak", "passed", "live", "seconds");
  const char *names[64];
  size_t n = ab_test_strategies(names, 64);
  for (unsigned seed = 1; seed <= seeds; seed++)
    for (size_t i = 0; i < n; i++) soak_one(&es, names[i], seed, &run);
  ab_run_release(&run);
  ab_events_free(&es);
}

static void soak_random(void) { soak("random", "ops"); }
static void soak_dynamic_shapes(void) { soak("dynamic-shapes", "steps"); }

static const ab_test_t tests[] = {
    {"soak_random", soak_random},
    {"soak_dynamic_shapes", soak_dynamic_shapes},
};

int ab_check_failures = 0;
bool ab_check_skipped = false;
const char *ab_test_device = "sim";

int main(int argc, char **argv) {
  int kept = 1;
  for (int i = 1; i < argc; i++) {
    char *end;
    if (strncmp(argv[i], "--events=", 9) == 0) {
      events_wanted = strtoull(argv[i] + 9, &end, 10);
      if (*end || events_wanted == 0) return fprintf(stderr, "soak_test: --events=N, N > 0\n"), 2;
    } else if (strncmp(argv[i], "--seeds=", 8) == 0) {
      seeds = (unsigned)strtoul(argv[i] + 8, &end, 10);
      if (*end || seeds == 0) return fprintf(stderr, "soak_test: --seeds=K, K > 0\n"), 2;
    } else {
      argv[kept++] = argv[i];
    }
  }
  return ab_test_main(kept, argv, tests, sizeof tests / sizeof tests[0]);
}
