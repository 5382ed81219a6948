/* footprint_test.c: the device's footprint (device.h, stats.h footprint_bytes).
 *
 * On sim: the driver model (sim_cost.c, Note [Driver footprint]) against what the H200
 * measured, h200-footprint/footprint.csv of the recorded runs (tests/data/README.md): each
 * row's random sequence replayed on the simulated card, raw for cudaMalloc and async with
 * release threshold 0 for the pool, its peak footprint over peak requested within 5% of the
 * measured ratio. The same sequence is checked first: the peak requested bytes must be the
 * measured run's to the byte.
 * On cuda (label gpu; skipped without a GPU): the footprint is measured, and on raw it must
 * cover what was requested and round it as the driver does (whole 2 MiB pages). */
#include <stdio.h>
#include <string.h>

#include "kernels/device/device_open.h"
#include "harness/run/engine.h"
#include "tests/world.h"
#include "workloads/workload.h"

#include "tests/check.h"

#define FOOTPRINT_CSV AB_TEST_DATA_DIR "/h200-footprint/footprint.csv"

/* Replays random with sizes [min, max] through strategy on device; the run's statistics. */
static bool replay(const char *device, const char *strategy, const char *conf, uint64_t min, uint64_t max, ab_stats_t *out) {
  char spec[128];
  snprintf(spec, sizeof spec, "random:min=%llu,max=%llu", (unsigned long long)min, (unsigned long long)max);
  ab_events_t es;
  ab_diag_t diag = {""};
  if (ab_workload_build(spec, 42, &es, &diag) != AB_OK) {
    CHECK_MSG(false, "%s: %s", spec, diag.msg);
    return false;
  }
  ab_device_t *dev;
  ab_strategy_t *s;
  bool ok = ab_test_world_open(&dev, &s, device, NULL, strategy, conf);
  ab_run_t run;
  memset(&run, 0, sizeof run);
  if (ok && ab_run_prepare(&run, &es) == AB_OK) {
    ab_run_opts_t opts = ab_run_defaults();
    opts.kernels = false;
    opts.time_calls = false;
    ok = ab_engine_replay(&es, s, &opts, &run) == AB_OK && run.status == AB_RUN_OK;
    CHECK_MSG(ok, "%s on %s, %s: %s", strategy, device, spec, run.message);
    *out = run.stats;
  }
  ab_run_release(&run);
  if (dev) ab_test_world_close(dev, s);
  ab_events_free(&es);
  return ok;
}

static void sim_matches_h200(void) {
  FILE *f = fopen(FOOTPRINT_CSV, "r");
  REQUIRE_MSG(f, "%s: cannot open", FOOTPRINT_CSV);
  char line[512];
  REQUIRE(fgets(line, sizeof line, f));
  int rows = 0;
  while (fgets(line, sizeof line, f)) {
    char api[16], range[32];
    unsigned long long min, max, requested, footprint;
    double ratio;
    REQUIRE_MSG(sscanf(line, "%15[^,],%31[^,],%llu,%llu,%llu,%llu,%lf", api, range, &min, &max, &requested, &footprint,
                       &ratio) == 7,
                "%s: bad row: %s", FOOTPRINT_CSV, line);
    bool pool = strcmp(api, "async") == 0;
    ab_stats_t st;
    if (!replay("sim:h200", pool ? "async" : "raw", pool ? "release_threshold:0" : NULL, min, max, &st)) continue;
    CHECK_MSG((unsigned long long)st.requested_bytes.peak == requested,
              "%s %s: peak requested %lld on sim, %llu measured: not the measured sequence", api, range,
              (long long)st.requested_bytes.peak, requested);
    double sim = (double)st.footprint_bytes.peak / (double)st.requested_bytes.peak, tol = 0.05;
    printf("  %-6s %-13s H200 %.3f  sim %.3f\n", api, range, ratio, sim);
    CHECK_MSG(sim >= ratio * (1 - tol) && sim <= ratio * (1 + tol), "%s %s: footprint %.4f x peak requested on sim, %.4f on the H200",
              api, range, sim, ratio);
    /* raw's own count stays the sum of its requests: the footprint is a figure beside it. */
    if (!pool) CHECK_EQ(st.reserved_bytes.peak, st.requested_bytes.peak);
    rows++;
  }
  fclose(f);
  CHECK_EQ(rows, 6);
}

/* The footprint's own rules on sim: pages touched, given back when empty; mapped granules. */
static void sim_pages_touched(void) {
  ab_device_t *d = NULL;
  ab_diag_t diag = {""};
  ab_device_config_t cfg = {0};
  REQUIRE(ab_device_open("sim:h200", &cfg, &d, &diag) == AB_OK);
  ab_dptr_t a, b, c;
  REQUIRE(ab_device_malloc(d, 1000, &a) == AB_OK);
  CHECK_EQ(d->footprint_bytes, AB_GRANULE_BYTES); /* a small request takes a whole page */
  REQUIRE(ab_device_malloc(d, 1000, &b) == AB_OK);
  CHECK_EQ(d->footprint_bytes, AB_GRANULE_BYTES); /* and the next shares it */
  REQUIRE(ab_device_malloc(d, 3 * AB_GRANULE_BYTES + 1, &c) == AB_OK);
  CHECK_EQ(d->footprint_bytes, 5 * AB_GRANULE_BYTES);
  CHECK(ab_device_free(d, a, 1000) == AB_OK);
  CHECK_EQ(d->footprint_bytes, 5 * AB_GRANULE_BYTES); /* b still lives in the page */
  CHECK(ab_device_free(d, b, 1000) == AB_OK);
  CHECK(ab_device_free(d, c, 3 * AB_GRANULE_BYTES + 1) == AB_OK);
  CHECK_EQ(d->footprint_bytes, 0);
  CHECK_EQ(d->footprint_peak, 5 * AB_GRANULE_BYTES);
  /* The pool: chunks of 32 MiB, kept when emptied until a trim. */
  REQUIRE(ab_device_pool_configure(d, 0) == AB_OK);
  REQUIRE(ab_device_malloc_async(d, 1000, 0, &a) == AB_OK);
  CHECK_EQ(d->footprint_bytes, 32ULL << 20);
  CHECK(ab_device_free_async(d, a, 1000, 0) == AB_OK);
  CHECK_EQ(d->footprint_bytes, 32ULL << 20);
  CHECK(ab_device_synchronize(d) == AB_OK);
  CHECK_EQ(d->footprint_bytes, 0);
  CHECK(ab_device_close(d, NULL) == AB_OK);
}

static void cuda_measures(void) {
  if (!ab_device_cuda_usable()) SKIP("no usable GPU");
  const uint64_t min = 1 << 10, max = 4096 << 10;
  ab_stats_t st;
  REQUIRE(replay("cuda", "raw", NULL, min, max, &st));
  double ratio = (double)st.footprint_bytes.peak / (double)st.requested_bytes.peak;
  printf("  raw on cuda, 1KiB-4096KiB: peak footprint %lld, %.3f x peak requested\n", (long long)st.footprint_bytes.peak,
         ratio);
  CHECK_EQ(st.footprint_bytes.peak % AB_GRANULE_BYTES, 0);
  CHECK_MSG(st.footprint_bytes.peak >= st.requested_bytes.peak, "footprint %lld below %lld requested",
            (long long)st.footprint_bytes.peak, (long long)st.requested_bytes.peak);
  /* The H200 measured 1.278 on this sequence; another driver may pack otherwise, not 40% worse. */
  CHECK_MSG(ratio < 1.4, "footprint %.3f x peak requested", ratio);
  CHECK_EQ(st.reserved_bytes.peak, st.requested_bytes.peak);
}

static const ab_test_t tests[] = {
    {"sim_pages_touched", sim_pages_touched},
    {"sim_matches_h200", sim_matches_h200},
    {"cuda_measures", cuda_measures},
};
AB_TEST_MAIN(tests)
