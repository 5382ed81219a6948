/* placement_test.c: the simulated card's placement variants (sim_place.c,
 * Note [Placement bands]) and the bands measured over them (harness/run/band.h). */
#include <stdlib.h>

#include "kernels/device/device_open.h"
#include "harness/run/band.h"
#include "harness/run/bisect.h"
#include "strategies/registry.h"
#include "workloads/workload.h"

#include "tests/check.h"

/* The addresses of a fixed sequence of cudaMallocs and frees under variant v: 2 MiB and
 * 20 MiB, then 40 chunks of 64 MiB of which two in three are freed (leaving free ranges of
 * 128 MiB between the others), then 40 requests of 30 MiB, each a chunk of 32 MiB that more
 * than one free range can take. */
static void sequence(unsigned v, ab_dptr_t out[82]) {
  ab_device_config_t cfg = {.placement = v};
  ab_device_t *d;
  ab_diag_t diag = {""};
  REQUIRE_MSG(ab_device_open("sim:h200", &cfg, &d, &diag) == AB_OK, "%s", diag.msg);
  REQUIRE(ab_device_malloc(d, 2 << 20, &out[0]) == AB_OK);
  REQUIRE(ab_device_malloc(d, 20 << 20, &out[1]) == AB_OK);
  for (int i = 0; i < 40; i++) REQUIRE(ab_device_malloc(d, 64ULL << 20, &out[2 + i]) == AB_OK);
  for (int i = 0; i < 40; i++)
    if (i % 3 != 2) REQUIRE(ab_device_free(d, out[2 + i], 64ULL << 20) == AB_OK);
  for (int i = 0; i < 40; i++) REQUIRE(ab_device_malloc(d, 30ULL << 20, &out[42 + i]) == AB_OK);
  for (int i = 0; i < 40; i++)
    if (i % 3 == 2) REQUIRE(ab_device_free(d, out[2 + i], 64ULL << 20) == AB_OK);
  for (int i = 0; i < 40; i++) REQUIRE(ab_device_free(d, out[42 + i], 30ULL << 20) == AB_OK);
  REQUIRE(ab_device_free(d, out[0], 2 << 20) == AB_OK);
  REQUIRE(ab_device_free(d, out[1], 20 << 20) == AB_OK);
  CHECK_MSG(ab_device_close(d, &diag) == AB_OK, "%s", diag.msg); /* the context's holes are no leak */
}

/* Each variant is one placement, the same on every run; each differs from the rules as
 * measured; the ones with the context's holes put the first two requests above the first
 * chunk of the program's own. */
static void variants_are_placements(void) {
  ab_dptr_t base[82], a[82], b[82];
  sequence(0, base);
  CHECK(base[3] < base[2]); /* by the rules, each new chunk below the one before */
  for (unsigned v = 1; v <= AB_PLACEMENT_VARIANTS; v++) {
    sequence(v, a);
    sequence(v, b);
    CHECK_MSG(memcmp(a, b, sizeof a) == 0, "variant %u placed two runs apart", v);
    CHECK_MSG(memcmp(a, base, sizeof a) != 0, "variant %u placed as the rules do", v);
  }
  sequence(1, a); /* holes alone */
  CHECK(a[0] > a[2] && a[1] > a[2]);
  ab_device_config_t cfg = {.placement = AB_PLACEMENT_VARIANTS + 1};
  ab_device_t *d;
  ab_diag_t diag = {""};
  CHECK(ab_device_open("sim:h200", &cfg, &d, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "placement variant");
}

/* A strategy that says it is blind to addresses replays to the same figures under every
 * variant, on a stream that frees and allocates again under a budget near its peak (where a
 * caching allocator's ties decide); and its band is measured as the point it is. */
static void blind_strategies_have_no_band(void) {
  ab_events_t es;
  ab_diag_t diag = {""};
  REQUIRE_MSG(ab_workload_build("random:ops=20000", 7, &es, &diag) == AB_OK, "%s", diag.msg);
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  size_t n, blind = 0;
  const ab_strategy_entry_t *e = ab_strategy_registry(&n);
  for (size_t i = 0; i < n; i++) {
    if (!e[i].ops->address_blind) continue;
    blind++;
    ab_bisect_opts_t o = {.strategy = e[i].name, .device = "sim:h200"};
    REQUIRE_MSG(ab_bisect_probe(&es, &o, 0, NULL, &run, NULL, NULL, &diag) == AB_OK, "%s: %s", e[i].name, diag.msg);
    uint64_t budget = (uint64_t)run.stats.reserved_bytes.peak * 95 / 100;
    for (int capped = 0; capped < 2; capped++) {
      uint64_t b = capped ? budget : 0;
      ab_run_t ref;
      REQUIRE(ab_run_prepare(&ref, &es) == AB_OK);
      REQUIRE(ab_bisect_probe(&es, &o, b, NULL, &ref, NULL, NULL, &diag) == AB_OK);
      for (unsigned v = 1; v <= AB_PLACEMENT_VARIANTS; v++) {
        ab_bisect_opts_t ov = o;
        ov.dev.placement = v;
        REQUIRE(ab_bisect_probe(&es, &ov, b, NULL, &run, NULL, NULL, &diag) == AB_OK);
        CHECK_MSG(run.status == ref.status && run.stats.reserved_bytes.peak == ref.stats.reserved_bytes.peak &&
                      run.stats.num_device_alloc == ref.stats.num_device_alloc,
                  "%s, budget %llu: variant %u differs", e[i].name, (unsigned long long)b, v);
      }
      ab_band_t band = ab_band_point(&ref);
      REQUIRE(ab_band_measure(&es, &o, b, &run, &band, &diag) == AB_OK);
      CHECK_MSG(band.variants == 0, "%s: replayed %u variants for a blind strategy", e[i].name, band.variants);
      ab_run_release(&ref);
    }
  }
  CHECK(blind >= 3); /* raw, async, oracle */
  ab_run_release(&run);
  ab_events_free(&es);
}

/* caching's band: every variant replayed, the point inside, the band the variants' extremes;
 * and a band measured on a GPU would be the run's own (not testable here: the device). */
static void caching_band_holds_the_point(void) {
  ab_events_t es;
  ab_diag_t diag = {""};
  REQUIRE_MSG(ab_workload_build("random:ops=20000", 7, &es, &diag) == AB_OK, "%s", diag.msg);
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  ab_bisect_opts_t o = {.strategy = "caching", .device = "sim:h200"};
  REQUIRE(ab_bisect_probe(&es, &o, 0, NULL, &run, NULL, NULL, &diag) == AB_OK);
  ab_band_t band = ab_band_point(&run);
  uint64_t point = band.reserved_lo;
  REQUIRE(ab_band_measure(&es, &o, 0, &run, &band, &diag) == AB_OK);
  CHECK_EQ(band.variants, AB_PLACEMENT_VARIANTS);
  CHECK(band.reserved_lo <= point && point <= band.reserved_hi);
  CHECK(band.allocs_lo <= band.allocs_hi);
  CHECK_EQ(band.ok_variants + band.oom_variants, AB_PLACEMENT_VARIANTS);
  ab_run_release(&run);
  ab_events_free(&es);
}

/* The safe cap is checked under every variant, each walked up to an interval that holds every
 * cap above (Note [A safe cap across the band], bisect.c), and a check cut short by its
 * budget says up to which cap it went. */
static void safe_cap_across_the_band(void) {
  ab_events_t es;
  ab_diag_t diag = {""};
  REQUIRE_MSG(ab_workload_build("replay:" AB_TEST_DATA_DIR "/pytorch-2.11-h200/cnn_dyn.default.pickle.gz", 42, &es, &diag) ==
                  AB_OK,
              "%s", diag.msg);
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  ab_bisect_opts_t o = {.strategy = "caching", .conf = "expandable_segments:True", .device = "sim:h200", .cap = true};
  ab_bisect_result_t r;
  REQUIRE_MSG(ab_bisect_search(&es, &o, &run, &r, &diag) == AB_OK, "%s", diag.msg);
  REQUIRE(r.mapped && r.passed);
  CHECK_EQ(r.band_checked, UINT64_MAX);
  CHECK(r.band_probes >= AB_PLACEMENT_VARIANTS); /* each variant walked to an interval with no end */
  CHECK(!r.band_raised);
  /* Each variant completes at the safe cap. */
  for (unsigned v = 1; v <= AB_PLACEMENT_VARIANTS; v++) {
    ab_bisect_opts_t ov = o;
    ov.dev.placement = v;
    REQUIRE(ab_bisect_probe(&es, &ov, r.safe_cap, NULL, &run, NULL, NULL, &diag) == AB_OK);
    CHECK_MSG(run.status == AB_RUN_OK, "variant %u fails at the safe cap", v);
  }
  /* Walks deferred and made apart, one variant at a time, give the search's own answer. */
  ab_bisect_result_t apart;
  o.defer_band = true;
  REQUIRE_MSG(ab_bisect_search(&es, &o, &run, &apart, &diag) == AB_OK, "%s", diag.msg);
  CHECK(apart.mapped && apart.band_checked == 0 && apart.band_probes == 0);
  ab_band_walk_t w[AB_PLACEMENT_VARIANTS];
  for (unsigned v = 0; v < AB_PLACEMENT_VARIANTS; v++)
    REQUIRE_MSG(ab_bisect_band_walk(&es, &o, &apart, v + 1, &run, &w[v], &diag) == AB_OK, "%s", diag.msg);
  ab_bisect_band_merge(&apart, w, AB_PLACEMENT_VARIANTS);
  CHECK_EQ(apart.safe_cap, r.safe_cap);
  CHECK_EQ(apart.band_checked, r.band_checked);
  CHECK_EQ(apart.band_probes, r.band_probes);
  CHECK_EQ(apart.probes, r.probes);
  /* One replay per variant: each is checked at the safe cap, and the walks needing more stop
   * above it. */
  o.defer_band = false;
  o.band_probes = 1;
  REQUIRE(ab_bisect_search(&es, &o, &run, &r, &diag) == AB_OK);
  CHECK(r.mapped && r.band_probes == AB_PLACEMENT_VARIANTS);
  CHECK(r.band_checked > r.safe_cap && r.band_checked < UINT64_MAX);
  ab_run_release(&run);
  ab_events_free(&es);
}

static void band_text(void) {
  char buf[96];
  CHECK_STR_CONTAINS(ab_band_format_bytes(3ULL << 30, 3ULL << 30, 3ULL << 30, buf, sizeof buf), "3.00 GiB");
  CHECK(strchr(buf, '(') == NULL);
  ab_band_format_bytes(7930000000ULL, 7920000000ULL, 7940000000ULL, buf, sizeof buf);
  CHECK_MSG(strcmp(buf, "7.385 GiB (7.376-7.395)") == 0, "%s", buf);
}

static const ab_test_t tests[] = {
    {"variants_are_placements", variants_are_placements},
    {"blind_strategies_have_no_band", blind_strategies_have_no_band},
    {"caching_band_holds_the_point", caching_band_holds_the_point},
    {"safe_cap_across_the_band", safe_cap_across_the_band},
    {"band_text", band_text},
};

AB_TEST_MAIN(tests)
