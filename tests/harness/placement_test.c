/* placement_test.c: the simulated card's placement variants (sim_place.c,
 * Note [Placement bands]) and the bands measured over them (harness/run/band.h). */
#include <stdlib.h>
#include <string.h>

#include "kernels/base/rng.h"
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
 * cap above (Note [A safe cap across the band], bisect.c), the map answering for the runs a
 * variant replays alike (Note [Walks the map answers]); a check cut short by its budget says
 * up to which cap it went. */
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
  CHECK(!r.band_raised);
  /* Each variant completes at the safe cap. */
  for (unsigned v = 1; v <= AB_PLACEMENT_VARIANTS; v++) {
    ab_bisect_opts_t ov = o;
    ov.dev.placement = v;
    REQUIRE(ab_bisect_probe(&es, &ov, r.safe_cap, NULL, &run, NULL, NULL, &diag) == AB_OK);
    CHECK_MSG(run.status == AB_RUN_OK, "variant %u fails at the safe cap", v);
  }
  /* Walks deferred and made apart, one variant at a time, give the search's own answer. */
  ab_bisect_result_t apart, replayed;
  o.defer_band = true;
  REQUIRE_MSG(ab_bisect_search(&es, &o, &run, &apart, &diag) == AB_OK, "%s", diag.msg);
  /* Left to the caller, but where the map answers every walk (then nothing is replayed). */
  CHECK(apart.mapped && apart.band_probes == 0);
  CHECK(apart.band_checked == 0 || (apart.band_checked == UINT64_MAX && r.band_probes == 0));
  apart.band_checked = 0;
  replayed = apart;
  replayed.nabove = 0; /* the map answers for nothing: every interval walked is replayed */
  ab_band_walk_t w[AB_PLACEMENT_VARIANTS];
  for (unsigned v = 0; v < AB_PLACEMENT_VARIANTS; v++)
    REQUIRE_MSG(ab_bisect_band_walk(&es, &o, &apart, v + 1, &run, &w[v], &diag) == AB_OK, "%s", diag.msg);
  ab_bisect_band_merge(&apart, w, AB_PLACEMENT_VARIANTS);
  CHECK_EQ(apart.safe_cap, r.safe_cap);
  CHECK_EQ(apart.band_checked, r.band_checked);
  CHECK_EQ(apart.band_probes, r.band_probes);
  CHECK_EQ(apart.probes, r.probes);
  /* Replayed, the walks find the same: each variant walked to an interval with no end. */
  for (unsigned v = 0; v < AB_PLACEMENT_VARIANTS; v++)
    REQUIRE_MSG(ab_bisect_band_walk(&es, &o, &replayed, v + 1, &run, &w[v], &diag) == AB_OK, "%s", diag.msg);
  ab_bisect_band_merge(&replayed, w, AB_PLACEMENT_VARIANTS);
  CHECK_EQ(replayed.safe_cap, r.safe_cap);
  CHECK_EQ(replayed.band_checked, r.band_checked);
  CHECK(replayed.band_probes >= AB_PLACEMENT_VARIANTS);
  CHECK_MSG(r.band_probes < replayed.band_probes, "the map answered for no walk: %u replays, %u without it", r.band_probes,
            replayed.band_probes);
  /* One replay per variant: each is checked at the safe cap, and the walks needing more stop
   * above it. */
  o.band_probes = 1;
  replayed.band_probes = replayed.probes = 0;
  replayed.band_checked = 0;
  for (unsigned v = 0; v < AB_PLACEMENT_VARIANTS; v++)
    REQUIRE_MSG(ab_bisect_band_walk(&es, &o, &replayed, v + 1, &run, &w[v], &diag) == AB_OK, "%s", diag.msg);
  ab_bisect_band_merge(&replayed, w, AB_PLACEMENT_VARIANTS);
  CHECK_EQ(replayed.band_probes, AB_PLACEMENT_VARIANTS);
  CHECK(replayed.band_checked > replayed.safe_cap && replayed.band_checked < UINT64_MAX);
  ab_run_release(&run);
  ab_events_free(&es);
}

/* A range for followed_variants_are_the_alike_ones: where it lies on the card and on each
 * variant's card, how big, and how it was taken. */
typedef struct followed_range_s {
  ab_dptr_t a, b[AB_PLACEMENT_VARIANTS];
  uint64_t bytes;
  bool reserved, live;
} followed_range_t;

static ab_status take(ab_device_t *d, followed_range_t *r, ab_dptr_t *at) {
  return r->reserved ? ab_device_va_reserve(d, r->bytes, at) : ab_device_malloc(d, r->bytes, at);
}

static ab_status give(ab_device_t *d, const followed_range_t *r, ab_dptr_t at) {
  return r->reserved ? ab_device_va_release(d, at, r->bytes) : ab_device_free(d, at, r->bytes);
}

/* One seed of followed_variants_are_the_alike_ones: the card (with plan, where nplan > 0, as
 * each variant's own card) against each variant's card fed the same calls. Variant 3's
 * malloc addresses, in order, go to record (room for CALLS), the plan of a second pass.
 * Adds the variants alike at the end to *kept, the others to *lost. */
enum { FOLLOW_RANGES = 48, FOLLOW_CALLS = 300 };
static void follow_one(uint64_t seed, const ab_addr_hint_t *plan, size_t nplan, ab_addr_hint_t *record, size_t *nrecord,
                       unsigned *kept, unsigned *lost) {
  static const uint64_t sizes[] = {512 << 10, 1 << 20, 2 << 20, 20 << 20, 30ULL << 20, 64ULL << 20, 96ULL << 20};
  ab_diag_t diag = {""};
  ab_device_config_t cfg = {.follow_variants = true, .plan = plan, .plan_len = nplan};
  ab_device_t *d, *dv[AB_PLACEMENT_VARIANTS];
  REQUIRE_MSG(ab_device_open("sim:h200", &cfg, &d, &diag) == AB_OK, "%s", diag.msg);
  for (unsigned v = 0; v < AB_PLACEMENT_VARIANTS; v++) {
    ab_device_config_t cv = {.placement = v + 1, .plan = plan, .plan_len = nplan};
    REQUIRE(ab_device_open("sim:h200", &cv, &dv[v], &diag) == AB_OK);
  }
  CHECK_EQ(d->variants_alike, (1u << AB_PLACEMENT_VARIANTS) - 1);
  followed_range_t r[FOLLOW_RANGES] = {{0}};
  unsigned alike = (1u << AB_PLACEMENT_VARIANTS) - 1;
  ab_rng_t rng = ab_rng_seed(seed);
  *nrecord = 0;
  for (int call = 0; call < FOLLOW_CALLS; call++) {
    followed_range_t *x = &r[ab_rng_range(&rng, 0, FOLLOW_RANGES - 1)];
    bool grow = seed % 2;
    if (grow && x->live) continue;
    if (x->live) {
      REQUIRE(give(d, x, x->a) == AB_OK);
      for (unsigned v = 0; v < AB_PLACEMENT_VARIANTS; v++) REQUIRE(give(dv[v], x, x->b[v]) == AB_OK);
      x->live = false;
    } else {
      x->reserved = ab_rng_range(&rng, 0, 7) == 0;
      x->bytes = x->reserved ? (64ULL << 20) : sizes[ab_rng_range(&rng, 0, sizeof sizes / sizeof *sizes - 1)];
      if (grow) x->reserved = false, x->bytes = ab_rng_range(&rng, 0, 3) ? 2 << 20 : 20 << 20;
      REQUIRE(take(d, x, &x->a) == AB_OK);
      for (unsigned v = 0; v < AB_PLACEMENT_VARIANTS; v++) REQUIRE(take(dv[v], x, &x->b[v]) == AB_OK);
      if (!x->reserved) record[(*nrecord)++] = (ab_addr_hint_t){x->bytes, x->b[2]};
      x->live = true;
    }
    for (unsigned v = 0; v < AB_PLACEMENT_VARIANTS; v++)
      for (int i = 0; i < FOLLOW_RANGES && (alike & (1u << v)); i++)
        for (int j = 0; j < FOLLOW_RANGES && r[i].live; j++)
          if (r[j].live && (r[i].a < r[j].a) != (r[i].b[v] < r[j].b[v])) alike &= ~(1u << v);
    CHECK_MSG(d->variants_alike == alike, "seed %llu%s, call %d: followed %#x, alike %#x", (unsigned long long)seed,
              nplan ? " with a plan" : "", call, d->variants_alike, alike);
  }
  *kept += (unsigned)__builtin_popcount(alike);
  *lost += AB_PLACEMENT_VARIANTS - (unsigned)__builtin_popcount(alike);
  for (int i = 0; i < FOLLOW_RANGES; i++) {
    if (!r[i].live) continue;
    CHECK(give(d, &r[i], r[i].a) == AB_OK);
    for (unsigned v = 0; v < AB_PLACEMENT_VARIANTS; v++) CHECK(give(dv[v], &r[i], r[i].b[v]) == AB_OK);
  }
  CHECK_MSG(ab_device_close(d, &diag) == AB_OK, "%s", diag.msg);
  for (unsigned v = 0; v < AB_PLACEMENT_VARIANTS; v++) CHECK_MSG(ab_device_close(dv[v], &diag) == AB_OK, "%s", diag.msg);
}

/* The card's followed variants (Note [Variants followed], sim_follow.c) against each variant's
 * own card fed the same calls: at every call, a variant is alike exactly while its card has
 * kept every live range in the card's order. Odd seeds only grow, in the segment sizes of a
 * caching allocator that never frees (under which the variants keep the order); even seeds
 * take and give back ranges of every kind. Each seed runs twice: on the card's own rules, then
 * under the plan of variant 3's addresses, as a recorded run's, which every card takes where
 * the address is free in its own space. */
static void followed_variants_are_the_alike_ones(void) {
  unsigned kept = 0, lost = 0, kept_planned = 0, lost_planned = 0;
  for (uint64_t seed = 1; seed <= 24; seed++) {
    ab_addr_hint_t plan[FOLLOW_CALLS], unused[FOLLOW_CALLS];
    size_t nplan = 0, nunused = 0;
    follow_one(seed, NULL, 0, plan, &nplan, &kept, &lost);
    if (nplan) follow_one(seed, plan, nplan, unused, &nunused, &kept_planned, &lost_planned);
  }
  CHECK_MSG(kept > 0 && lost > 0, "%u variants stayed alike, %u did not", kept, lost); /* both ways were seen */
  CHECK_MSG(kept_planned > 0 && lost_planned > 0, "under plans, %u variants stayed alike, %u did not", kept_planned,
            lost_planned);
  /* Under a variant of its own, the card follows none. */
  ab_device_config_t cfg = {.follow_variants = true, .placement = 1};
  ab_device_t *d;
  ab_diag_t diag = {""};
  REQUIRE(ab_device_open("sim:h200", &cfg, &d, &diag) == AB_OK);
  CHECK_EQ(d->variants_alike, 0u);
  CHECK(ab_device_close(d, &diag) == AB_OK);
}

/* A band whose variants the run followed alike is the band their replays give: the same
 * figures, the same counts, on recorded runs and a random stream, with no limit and under one
 * (caching's cap, pooled's budget). */
static void followed_bands_are_replayed_bands(void) {
  static const struct {
    const char *workload, *strategy, *conf;
    bool recorded; /* at the recorded addresses (an address plan), as tune runs the recorded setting */
  } cases[] = {
      {"replay:" AB_TEST_DATA_DIR "/pytorch-2.11-h200/cnn_dyn.default.pickle.gz", "caching", "", false},
      {"replay:" AB_TEST_DATA_DIR "/pytorch-2.11-h200/cnn_dyn.default.pickle.gz", "caching", "", true},
      {"replay:" AB_TEST_DATA_DIR "/pytorch-2.11-h200/cnn_dyn.default.pickle.gz", "caching", "expandable_segments:True", false},
      {"replay:" AB_TEST_DATA_DIR "/pytorch-2.11-h200/cnn_dyn.default.pickle.gz", "caching", "max_split_size_mb:128", false},
      {"replay:" AB_TEST_DATA_DIR "/pytorch-2.11-h200/cnn_dyn.default.pickle.gz", "caching", "max_split_size_mb:128", true},
      {"random:ops=20000", "caching", "", false},
      {"replay:" AB_TEST_DATA_DIR "/pytorch-2.11-h200/cnn_dyn.default.pickle.gz", "pooled", "", false},
      {"random:ops=20000", "pooled", "", false},
  };
  unsigned followed = 0, followed_planned = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    ab_events_t es;
    ab_diag_t diag = {""};
    REQUIRE_MSG(ab_workload_build(cases[i].workload, 7, &es, &diag) == AB_OK, "%s", diag.msg);
    ab_run_t run;
    REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
    ab_bisect_opts_t o = {.strategy = cases[i].strategy, .conf = cases[i].conf, .device = "sim:h200",
                          .cap = strcmp(cases[i].strategy, "caching") == 0};
    ab_addr_hint_t *plan = NULL;
    if (cases[i].recorded) {
      REQUIRE(ab_events_address_plan(&es, &plan, &o.dev.plan_len) == AB_OK);
      REQUIRE(o.dev.plan_len > 0);
      o.dev.plan = plan;
    }
    REQUIRE(ab_bisect_probe(&es, &o, 0, NULL, &run, NULL, NULL, &diag) == AB_OK);
    uint64_t caps[2] = {0, (uint64_t)run.stats.reserved_bytes.peak * 97 / 100};
    for (int k = 0; k < 2; k++) {
      ab_band_t band[2];
      for (int replayed = 0; replayed < 2; replayed++) {
        REQUIRE(ab_bisect_probe(&es, &o, caps[k], NULL, &run, NULL, NULL, &diag) == AB_OK);
        if (!replayed) followed += (unsigned)__builtin_popcount(run.variants_alike);
        if (!replayed && cases[i].recorded) followed_planned += (unsigned)__builtin_popcount(run.variants_alike);
        if (replayed) run.variants_alike = 0;
        band[replayed] = ab_band_point(&run);
        REQUIRE_MSG(ab_band_measure(&es, &o, caps[k], &run, &band[replayed], &diag) == AB_OK, "%s", diag.msg);
      }
      CHECK_MSG(memcmp(&band[0], &band[1], sizeof band[0]) == 0,
                "%s, %s '%s'%s, limit %llu: followed %llu-%llu bytes, %llu-%llu allocations; replayed %llu-%llu, %llu-%llu",
                cases[i].workload, cases[i].strategy, cases[i].conf, cases[i].recorded ? " at the recorded addresses" : "",
                (unsigned long long)caps[k],
                (unsigned long long)band[0].reserved_lo,
                (unsigned long long)band[0].reserved_hi, (unsigned long long)band[0].allocs_lo,
                (unsigned long long)band[0].allocs_hi, (unsigned long long)band[1].reserved_lo,
                (unsigned long long)band[1].reserved_hi, (unsigned long long)band[1].allocs_lo,
                (unsigned long long)band[1].allocs_hi);
    }
    free(plan);
    ab_run_release(&run);
    ab_events_free(&es);
  }
  CHECK(followed > 0);         /* some variant was not replayed */
  CHECK(followed_planned > 0); /* ... also at the recorded addresses */
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
    {"followed_variants_are_the_alike_ones", followed_variants_are_the_alike_ones},
    {"followed_bands_are_replayed_bands", followed_bands_are_replayed_bands},
    {"band_text", band_text},
};

AB_TEST_MAIN(tests)
