/* limit_test.c: the distance to the live peak. The offline packer (dsa.h) never puts two
 * lifetimes that meet in time at overlapping addresses and reaches the bound where it is
 * known; the engine hands a planning strategy the lifetimes of its stream (lifetimes.h);
 * `planned` sends a request its plan does not match to a caching allocator, as STAlloc does,
 * where `arena` places it in the region; and on the bench's dynamic workloads and the
 * recorded CNN run, `oracle` holds within 5% of the live peak and `arena` less than
 * `caching`. */
#include <string.h>
#include <time.h>

#include "kernels/base/clock.h"
#include "kernels/base/rng.h"
#include "kernels/device/device_open.h"
#include "harness/run/bisect.h"
#include "harness/run/engine.h"
#include "harness/run/lifetimes.h"
#include "strategies/planned/dsa.h"
#include "strategies/registry.h"
#include "workloads/workload.h"

#include "tests/check.h"

#define CNN_TRACE AB_TEST_DATA_DIR "/pytorch-2.11-h200/cnn_dyn.default.trace.csv.gz"

static uint64_t seen_end(const ab_lifetime_t *a, unsigned stream) { return a->stream == stream ? a->end : a->end_other; }

/* Every pair that meets in time is apart in address; returns the pairs checked. */
static size_t check_apart(const ab_lifetime_t *lt, size_t n, const uint64_t *off, uint64_t align) {
  size_t pairs = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++) {
      if (!(lt[i].start < seen_end(&lt[j], lt[i].stream) && lt[j].start < seen_end(&lt[i], lt[j].stream))) continue;
      pairs++;
      uint64_t si = (lt[i].bytes + align - 1) & ~(align - 1), sj = (lt[j].bytes + align - 1) & ~(align - 1);
      CHECK_MSG(off[i] + si <= off[j] || off[j] + sj <= off[i],
                "lifetimes %zu [%llu, %llu) and %zu [%llu, %llu) meet in time and overlap at %llu+%llu, %llu+%llu", i,
                (unsigned long long)lt[i].start, (unsigned long long)lt[i].end, j, (unsigned long long)lt[j].start,
                (unsigned long long)lt[j].end, (unsigned long long)off[i], (unsigned long long)si,
                (unsigned long long)off[j], (unsigned long long)sj);
    }
  return pairs;
}

static void packer_keeps_meeting_lifetimes_apart(void) {
  enum { N = 600 };
  static ab_lifetime_t lt[N];
  static uint64_t off[N];
  ab_rng_t rng = ab_rng_seed(11);
  for (size_t i = 0; i < N; i++) {
    uint64_t start = 2 * i, len = 1 + ab_rng_next(&rng) % 200;
    bool never = ab_rng_next(&rng) % 50 == 0;
    uint64_t end = never ? UINT64_MAX : start + 2 * len + 1;
    uint64_t other = never ? UINT64_MAX : end + ab_rng_next(&rng) % 100;
    lt[i] = (ab_lifetime_t){1 + ab_rng_next(&rng) % 100000, start, end, other, 0, (uint16_t)(ab_rng_next(&rng) % 3)};
  }
  uint64_t peak = 0;
  REQUIRE(ab_dsa_place(lt, N, 512, off, &peak) == AB_OK);
  CHECK(check_apart(lt, N, off, 512) > 1000);
  uint64_t bound = ab_dsa_live_peak(lt, N, 512);
  CHECK_MSG(peak >= bound && bound > 0, "peak %llu, bound %llu", (unsigned long long)peak, (unsigned long long)bound);
  for (size_t i = 0; i < N; i++) CHECK(off[i] % 512 == 0 && off[i] + lt[i].bytes <= peak);
}

/* Where first fit in time order fails, greedy by size reaches the bound: first fit puts B
 * above A, and C (as big as both) finds A's hole too small and goes above B (4096 bytes);
 * the bound is B and C together (3072). */
static void packer_reaches_the_bound(void) {
  const ab_lifetime_t lt[] = {
      {1024, 0, 2, 2, 0, 0}, /* A */
      {1024, 1, 4, 4, 0, 0}, /* B */
      {2048, 3, 6, 6, 0, 0}, /* C */
  };
  uint64_t off[3], peak;
  REQUIRE(ab_dsa_place(lt, 3, 512, off, &peak) == AB_OK);
  CHECK_EQ(ab_dsa_live_peak(lt, 3, 512), 3072);
  CHECK_EQ(peak, 3072);
  check_apart(lt, 3, off, 512);
}

/* Sizes up to 2^64 - 1 (a trace may carry any): one of 2^63 is placed, its rounding and
 * the peak in range; sizes whose sum passes 2^64 - 1 are refused, not wrapped; the bound
 * stops at 2^64 - 1 instead of wrapping below zero (a sanitized build checks each sum). */
static void packer_takes_sizes_to_2_64(void) {
  const uint64_t half = 1ULL << 63;
  const ab_lifetime_t one[] = {{half, 0, 2, 2, 0, 0}, {1000, 1, 3, 3, 0, 0}};
  uint64_t off[3], peak = 0;
  REQUIRE(ab_dsa_place(one, 2, 512, off, &peak) == AB_OK);
  CHECK_EQ(peak, half + 1024);
  check_apart(one, 2, off, 512);
  CHECK_EQ(ab_dsa_live_peak(one, 2, 512), half + 1024);
  /* Apart in time, two of 2^63 fit one after the other in 2^63 bytes. */
  const ab_lifetime_t apart[] = {{half, 0, 1, 1, 0, 0}, {half, 2, 3, 3, 0, 0}};
  CHECK_EQ(ab_dsa_live_peak(apart, 2, 512), half);
  /* Together they pass 2^64 - 1: no range holds them. */
  const ab_lifetime_t together[] = {{half, 0, 3, 3, 0, 0}, {half, 1, 2, 2, 0, 0}, {UINT64_MAX, 2, UINT64_MAX, UINT64_MAX, 0, 0}};
  uint64_t total = 0;
  CHECK(!ab_dsa_fits(together, 2, 512, &total) && total == UINT64_MAX);
  CHECK(ab_dsa_place(together, 2, 512, off, &peak) == AB_ERR_OOM);
  CHECK(ab_dsa_place(together + 2, 1, 512, off, &peak) == AB_ERR_OOM); /* its rounding passes 2^64 - 1 */
  CHECK_EQ(ab_dsa_live_peak(together, 3, 512), UINT64_MAX);
  CHECK_EQ(ab_dsa_round(UINT64_MAX, 512), UINT64_MAX);
  ab_diag_t diag = {""};
  CHECK(ab_dsa_refuse(&diag, "oracle", together, 3) == AB_ERR_INVALID);
  CHECK_MSG(strstr(diag.msg, "oracle: the 3 allocations to plan ask more than 2^64 - 1 bytes together (the largest "
                             "18446744073709551615 bytes)") != NULL,
            "%s", diag.msg);
}

/* Lifetimes as the engine hands them: ids in order, a FREE NOW or COMPLETE ends one, a later
 * SYNC is when other streams may reuse it, STEP markers count. */
static void lifetimes_follow_the_stream(void) {
  ab_events_t es;
  ab_diag_t diag = {""};
  ab_events_init(&es);
  uint32_t a = ab_events_alloc(&es, 100, 0, AB_TAG_OTHER); /* 0 */
  ab_events_step(&es);                                      /* 1 */
  uint32_t b = ab_events_alloc(&es, 200, 1, AB_TAG_OTHER); /* 2 */
  ab_events_free_id(&es, a);                                /* 3 */
  ab_events_free_phase(&es, b, AB_FREE_REQUEST);            /* 4 */
  ab_events_free_phase(&es, b, AB_FREE_COMPLETE);           /* 5 */
  ab_events_sync(&es, 0);                                   /* 6 */
  uint32_t c = ab_events_alloc(&es, 300, 0, AB_TAG_OTHER); /* 7 */
  REQUIRE_MSG(ab_events_finish(&es, &diag) == AB_OK, "%s", diag.msg);
  ab_lifetime_t *lt;
  size_t n;
  REQUIRE(ab_lifetimes_build(&es, &lt, &n) == AB_OK);
  REQUIRE(n == 3);
  CHECK(lt[a].bytes == 100 && lt[a].start == 0 && lt[a].end == 3 && lt[a].end_other == 6 && lt[a].step == 0);
  CHECK(lt[b].bytes == 200 && lt[b].start == 2 && lt[b].end == 5 && lt[b].end_other == 6 && lt[b].step == 1);
  CHECK(lt[b].stream == 1);
  CHECK(lt[c].start == 7 && lt[c].end == UINT64_MAX && lt[c].end_other == UINT64_MAX);
  free(lt);
  ab_events_free(&es);
}

/* The oracle plans a stream of a million events; the time is printed for the record. */
static void plans_a_million_events(void) {
  ab_events_t es;
  ab_diag_t diag = {""};
  REQUIRE_MSG(ab_workload_build("random:ops=1000000", 42, &es, &diag) == AB_OK, "%s", diag.msg);
  ab_lifetime_t *lt;
  size_t n;
  REQUIRE(ab_lifetimes_build(&es, &lt, &n) == AB_OK);
  uint64_t *off = malloc(n * sizeof *off), peak = 0;
  REQUIRE(off != NULL);
  double t0 = ab_clock_s();
  clock_t c0 = clock();
  REQUIRE(ab_dsa_place(lt, n, 512, off, &peak) == AB_OK);
  double dt = ab_clock_s() - t0, cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
  uint64_t bound = ab_dsa_live_peak(lt, n, 512);
  printf("  planned %zu allocations of %zu events in %.2f s (%.2f s of CPU): peak %.4f x the most live\n", n, es.n,
         dt, cpu, (double)peak / (double)bound);
  CHECK(peak >= bound);
  free(off);
  free(lt);
  ab_events_free(&es);
}

typedef struct peaks_s {
  int64_t requested, reserved;
  bool ok;
  int64_t hits, misses; /* plan.hits and plan.misses; -1 where the strategy keeps none */
} peaks_t;

static peaks_t replay_conf(const ab_events_t *es, const char *strategy, const char *conf) {
  peaks_t p = {0, 0, false, -1, -1};
  ab_device_config_t cfg = {0};
  ab_diag_t diag = {""};
  ab_device_t *dev = NULL;
  ab_strategy_t *s = NULL;
  ab_run_t run;
  if (ab_device_open("sim", &cfg, &dev, &diag) == AB_OK && ab_strategy_create(strategy, dev, conf, &s, &diag) == AB_OK &&
      ab_run_prepare(&run, es) == AB_OK) {
    ab_run_opts_t ro = ab_run_defaults();
    ro.verify = true;
    ab_status st = ab_engine_replay(es, s, &ro, &run);
    CHECK_MSG(st == AB_OK && run.status == AB_RUN_OK, "%s: %s", strategy, run.message);
    p = (peaks_t){run.stats.requested_bytes.peak, run.stats.reserved_bytes.peak, run.status == AB_RUN_OK, -1, -1};
    ab_strategy_memory_stat(s, "plan.hits", &p.hits);
    ab_strategy_memory_stat(s, "plan.misses", &p.misses);
    CHECK_MSG(ab_strategy_check(s, &diag) == AB_OK, "%s: %s", strategy, diag.msg);
    ab_run_release(&run);
  } else {
    CHECK_MSG(false, "%s: %s", strategy, diag.msg);
  }
  ab_strategy_destroy(s);
  if (dev) CHECK_MSG(ab_device_close(dev, &diag) == AB_OK, "%s: %s", strategy, diag.msg);
  return p;
}

static peaks_t replay(const ab_events_t *es, const char *strategy) { return replay_conf(es, strategy, NULL); }

/* Two profiled steps of one 4 MiB tensor; the third step asks for it again (a hit: the
 * plan's region, 4 MiB) and then for 6 MiB, which the plan never saw. STAlloc sends that
 * miss to the caching allocator (its StaticAllocator's MISMATCH branch): a 20 MiB segment
 * beside the region, 24 MiB at the peak; `arena` grows the region by 6 MiB instead. */
static void plan_miss_goes_to_caching(void) {
  ab_events_t es;
  ab_diag_t diag = {""};
  ab_events_init(&es);
  for (int step = 0; step < 2; step++) {
    ab_events_step(&es);
    ab_events_free_id(&es, ab_events_alloc(&es, 4 << 20, 0, AB_TAG_OTHER));
  }
  ab_events_step(&es);
  uint32_t hit = ab_events_alloc(&es, 4 << 20, 0, AB_TAG_OTHER);
  uint32_t miss = ab_events_alloc(&es, 6 << 20, 0, AB_TAG_OTHER);
  ab_events_free_id(&es, hit);
  ab_events_free_id(&es, miss);
  REQUIRE_MSG(ab_events_finish(&es, &diag) == AB_OK, "%s", diag.msg);
  peaks_t stalloc = replay(&es, "planned"), arena = replay(&es, "arena");
  CHECK_EQ(stalloc.hits, 3);
  CHECK_EQ(stalloc.misses, 1);
  CHECK_EQ(stalloc.reserved, (4 + 20) << 20);
  CHECK_EQ(arena.hits, 3);
  CHECK_EQ(arena.misses, 1);
  CHECK_EQ(arena.reserved, (4 + 6) << 20);
  /* misses:arena on planned is arena. */
  peaks_t conf = replay_conf(&es, "planned", "misses:arena");
  CHECK_EQ(conf.reserved, arena.reserved);
  ab_events_free(&es);
}

static void distance_to_the_live_peak(void) {
  static const char *workloads[] = {"dynamic-shapes", "cnn-dynamic", "replay:" CNN_TRACE};
  for (size_t w = 0; w < sizeof workloads / sizeof workloads[0]; w++) {
    ab_events_t es;
    ab_diag_t diag = {""};
    if (ab_workload_build(workloads[w], 42, &es, &diag) != AB_OK) {
      printf("  %s: not here (%s)\n", workloads[w], diag.msg);
      continue;
    }
    peaks_t caching = replay(&es, "caching"), oracle = replay(&es, "oracle"), planned = replay(&es, "planned"),
            arena = replay(&es, "arena"), stitching = replay(&es, "stitching");
    double live = (double)ab_bisect_peak_requested(&es);
    printf("  %s: peak reserved / live peak: oracle %.4f, planned %.4f (%lld hits, %lld misses), arena %.4f, "
           "stitching %.4f, caching %.4f\n",
           workloads[w], (double)oracle.reserved / live, (double)planned.reserved / live, (long long)planned.hits,
           (long long)planned.misses, (double)arena.reserved / live, (double)stitching.reserved / live,
           (double)caching.reserved / live);
    CHECK_MSG(oracle.ok && (double)oracle.reserved <= 1.05 * live && (double)oracle.reserved >= live,
              "%s: oracle holds %lld for a live peak of %.0f", workloads[w], (long long)oracle.reserved, live);
    CHECK_MSG(arena.ok && arena.reserved < caching.reserved, "%s: arena %lld, caching %lld", workloads[w],
              (long long)arena.reserved, (long long)caching.reserved);
    CHECK_MSG(planned.ok && stitching.ok && planned.misses > 0, "%s: planned and stitching ran", workloads[w]);
    ab_events_free(&es);
  }
}

static const ab_test_t tests[] = {
    {"packer_keeps_meeting_lifetimes_apart", packer_keeps_meeting_lifetimes_apart},
    {"packer_reaches_the_bound", packer_reaches_the_bound},
    {"packer_takes_sizes_to_2_64", packer_takes_sizes_to_2_64},
    {"lifetimes_follow_the_stream", lifetimes_follow_the_stream},
    {"plans_a_million_events", plans_a_million_events},
    {"plan_miss_goes_to_caching", plan_miss_goes_to_caching},
    {"distance_to_the_live_peak", distance_to_the_live_peak},
};
AB_TEST_MAIN(tests)
