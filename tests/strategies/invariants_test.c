/* invariants_test.c: the invariant checks of the strategies (the check operation of
 * strategy.h), run after every event of whole workloads, and shown to fire: on statistics
 * that are not the sums over the blocks, on a strategy that hands out live memory again,
 * and on every rule of the segment walk check. pooled_check_test.c breaks pooled's own
 * structures. */
#include "kernels/device/device.h"
#include "kernels/device/device_open.h"
#include "harness/run/engine.h"
#include "strategies/registry.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

#include "tests/check.h"

/* Replays spec through strategy on sim with the checks after every event; returns the run's
 * status, with its message in msg. */
static ab_run_status_t replay_checked(const char *strategy, const char *spec, const ab_device_config_t *cfg,
                                      bool go_on, char *msg, size_t size) {
  ab_events_t es;
  ab_diag_t diag = {""};
  ab_device_t *dev = NULL;
  ab_strategy_t *s = NULL;
  ab_run_t run;
  ab_run_status_t out = AB_RUN_ERROR;
  snprintf(msg, size, "setup failed");
  if (ab_workload_build(spec, 7, &es, &diag) != AB_OK) {
    snprintf(msg, size, "%s", diag.msg);
    return out;
  }
  if (ab_device_open("sim", cfg, &dev, &diag) == AB_OK &&
      ab_strategy_create(strategy, dev, ab_test_conf_for(strategy), &s, &diag) == AB_OK &&
      ab_run_prepare(&run, &es) == AB_OK) {
    ab_run_opts_t ro = ab_run_defaults();
    ro.check = true;
    ro.continue_on_oom = go_on;
    ab_engine_replay(&es, s, &ro, &run);
    out = run.status;
    snprintf(msg, size, "%s", run.message);
    CHECK_MSG(!go_on || run.ooms == run.stats.num_ooms, "%s on %s: %llu OOMs in the replay, the strategy counts %llu",
              strategy, spec, (unsigned long long)run.ooms, (unsigned long long)run.stats.num_ooms);
    ab_run_release(&run);
  } else {
    snprintf(msg, size, "%s", diag.msg);
  }
  ab_strategy_destroy(s);
  if (dev) CHECK_MSG(ab_device_close(dev, &diag) == AB_OK, "%s on %s: %s", strategy, spec, diag.msg);
  ab_events_free(&es);
  return out;
}

/* Every strategy users can pick, checked after every event: several streams, a budget it
 * runs out of (going on after each OOM), injected device failures. (The fuzz corpus replays
 * pieces of recorded traces the same way: tests/fuzz/fuzz.c.) */
static void checked_after_every_event(void) {
  static const struct {
    const char *spec;
    ab_device_config_t cfg;
    bool go_on;
  } cases[] = {
      {"random:ops=6000,streams=3,max_live=400", {.cost_model = true}, false},
      {"random:ops=6000,dist=lognormal,max_live=300", {.budget_bytes = 96ULL << 20}, true},
      {"random:ops=6000,max_live=200", {.faults = {.fail_rate = 0.05, .fail_seed = 3}}, true},
  };
  const char *names[64];
  size_t n = ab_test_strategies(names, 64);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    for (size_t i = 0; i < n; i++) {
      char msg[1024];
      ab_run_status_t st = replay_checked(names[i], cases[c].spec, &cases[c].cfg, cases[c].go_on, msg, sizeof msg);
      CHECK_MSG(st == AB_RUN_OK || (st == AB_RUN_OOM && !cases[c].go_on), "%s on %s: %s: %s", names[i], cases[c].spec,
                ab_run_status_name(st), msg);
    }
  }
}

/* A strategy that hands out live memory again (the hidden overlap strategy) fails the check. */
static void overlap_caught(void) {
  char msg[1024];
  ab_device_config_t cfg = {0};
  ab_run_status_t st = replay_checked("overlap", "random:ops=2000", &cfg, false, msg, sizeof msg);
  CHECK(st == AB_RUN_ERROR);
  CHECK_STR_CONTAINS(msg, "invariant broken: overlap: segment 0x");
  CHECK_STR_CONTAINS(msg, "out of order or overlapping");
}

/* Strategies whose checks also hold their device allocations against their count. */
static bool counts_device_calls(const char *name) {
  return strcmp(name, "raw") == 0 || strcmp(name, "pooled") == 0 || strcmp(name, "async") == 0 ||
         strncmp(name, "pluggable:", 10) == 0;
}

/* Each strategy's check compares its statistics with the sums over its blocks: moving a
 * gauge breaks it, and so does counting more device frees than allocations (for some, any
 * device call that was not made). */
static void wrong_stats_caught(void) {
  const char *names[64];
  size_t n = ab_test_strategies(names, 64);
  for (size_t i = 0; i < n; i++) {
    const char *name = names[i];
    ab_device_t *dev;
    ab_strategy_t *s;
    ab_diag_t d = {""};
    REQUIRE(ab_device_open("sim", NULL, &dev, &d) == AB_OK);
    REQUIRE_MSG(ab_strategy_create(name, dev, ab_test_conf_for(name), &s, &d) == AB_OK, "%s: %s", name, d.msg);
    static const uint64_t sizes[] = {512, 5000, 3 << 20, 40 << 20};
    ab_dptr_t p[4];
    for (int k = 0; k < 4; k++) CHECK(ab_strategy_alloc(s, sizes[k], (unsigned)k % 2, &p[k]) == AB_OK);
    CHECK(ab_strategy_free(s, p[1], sizes[1], 1) == AB_OK);
    CHECK_MSG(ab_strategy_check(s, &d) == AB_OK, "%s: %s", name, d.msg);
    ab_stats_t good = s->stats;
    ab_gauge_t *gauges[] = {&s->stats.requested_bytes, &s->stats.allocated_bytes, &s->stats.reserved_bytes};
    const char *gauge_names[] = {"requested", "allocated", "reserved"};
    for (int g = 0; g < 3; g++) {
      /* async's reserved bytes are the pool's, read from the device when asked for. */
      if (g == 2 && strcmp(name, "async") == 0) continue;
      gauges[g]->current += 512;
      gauges[g]->peak += 512;
      d.msg[0] = '\0';
      CHECK_MSG(ab_strategy_check(s, &d) == AB_ERR_INTERNAL, "%s: %s bytes 512 off, yet the check passed", name,
                gauge_names[g]);
      CHECK_MSG(strncmp(d.msg, s->ops->name, strlen(s->ops->name)) == 0 || strncmp(d.msg, "stats:", 6) == 0, "%s: %s",
                name, d.msg);
      s->stats = good;
    }
    s->stats.num_device_alloc++;
    if (counts_device_calls(name))
      CHECK_MSG(ab_strategy_check(s, &d) == AB_ERR_INTERNAL, "%s: a device allocation too many, yet the check passed",
                name);
    s->stats = good;
    s->stats.num_device_free = s->stats.num_device_alloc + 1;
    CHECK_MSG(ab_strategy_check(s, &d) == AB_ERR_INTERNAL, "%s: more device frees than allocations passed", name);
    CHECK_STR_CONTAINS(d.msg, "device frees after");
    s->stats = good;
    CHECK_MSG(ab_strategy_check(s, &d) == AB_OK, "%s after restoring: %s", name, d.msg);
    for (int k = 0; k < 4; k++)
      if (k != 1) CHECK(ab_strategy_free(s, p[k], sizes[k], (unsigned)k % 2) == AB_OK);
    ab_strategy_destroy(s);
    CHECK(ab_device_close(dev, &d) == AB_OK);
  }
}

/* ---- the segment walk check, on segments made up for it --------------------------------- */

typedef struct fake_seg_s {
  ab_dptr_t base;
  uint64_t bytes;
  ab_block_info_t blocks[3];
  size_t nblocks;
} fake_seg_t;

static const fake_seg_t *fake_segs;
static size_t fake_nsegs;

static ab_status fake_walk(ab_strategy_t *s, ab_segment_fn fn, void *ctx) {
  (void)s;
  for (size_t i = 0; i < fake_nsegs; i++) {
    const fake_seg_t *f = &fake_segs[i];
    ab_segment_info_t seg = {f->base, f->bytes, 0, "fake", false, f->blocks, f->nblocks, 0};
    if (fn(ctx, &seg)) break;
  }
  return AB_OK;
}

static void walk_rules(void) {
#define A AB_BLOCK_ALLOCATED
#define P AB_BLOCK_PENDING_FREE
#define F AB_BLOCK_FREE
#define U AB_BLOCK_UNMAPPED
  static const struct {
    const char *what;
    fake_seg_t segs[2];
    const char *broken; /* NULL: sound */
  } cases[] = {
      {"sound",
       {{0x10000, 0x3000, {{0x10000, 0x1000, 800, A}, {0x11000, 0x2000, 0, F}}, 2},
        {0x13000, 0x1000, {{0x13000, 0x1000, 0x1000, P}}, 1}},
       NULL},
      {"expandable, mapped in part",
       {{0x10000, 0x1000, {{0x10000, 0x1000, 1, A}, {0x11000, 0x3000, 0, U}}, 2},
        {0x14000, 0x1000, {{0x14000, 0x1000, 1, A}}, 1}},
       NULL},
      {"overlapping segments",
       {{0x10000, 0x3000, {{0x10000, 0x3000, 1, A}}, 1}, {0x12000, 0x1000, {{0x12000, 0x1000, 1, A}}, 1}},
       "starts before the segment before it ends"},
      {"segments out of order",
       {{0x10000, 0x1000, {{0x10000, 0x1000, 1, A}}, 1}, {0x8000, 0x1000, {{0x8000, 0x1000, 1, A}}, 1}},
       "out of order or overlapping"},
      {"a gap between blocks",
       {{0x10000, 0x3000, {{0x10000, 0x1000, 1, A}, {0x11200, 0x1e00, 0, F}}, 2}},
       "block 1 at 0x11200 (7680 bytes) does not start where the block before ended"},
      {"a first block away from the base",
       {{0x10000, 0x1000, {{0x10200, 0x1000, 1, A}}, 1}},
       "block 0 at 0x10200"},
      {"blocks short of the segment",
       {{0x10000, 0x3000, {{0x10000, 0x1000, 1, A}, {0x11000, 0x1000, 0, F}}, 2}},
       "of 12288 bytes holds 8192 bytes of mapped blocks"},
      {"an empty block",
       {{0x10000, 0x1000, {{0x10000, 0x1000, 1, A}, {0x11000, 0, 0, F}}, 2}},
       "is empty"},
      {"a request larger than its block",
       {{0x10000, 0x1000, {{0x10000, 0x1000, 0x1001, A}}, 1}},
       "holds a request larger than itself"},
  };
#undef A
#undef P
#undef F
#undef U
  static const ab_strategy_ops_t fake_ops = {.name = "fake", .walk = fake_walk};
  ab_strategy_t fake = {.ops = &fake_ops};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    fake_segs = cases[c].segs;
    fake_nsegs = cases[c].segs[1].nblocks ? 2 : 1;
    ab_walk_sums_t sums;
    ab_diag_t d = {""};
    ab_status st = ab_strategy_check_walk(&fake, &sums, &d);
    if (cases[c].broken == NULL) {
      CHECK_MSG(st == AB_OK, "%s: %s", cases[c].what, d.msg);
    } else {
      CHECK_MSG(st == AB_ERR_INTERNAL, "%s: passed", cases[c].what);
      CHECK_STR_CONTAINS(d.msg, cases[c].broken);
      CHECK_STR_CONTAINS(d.msg, "fake: segment 0x");
    }
  }
  /* The sums of the sound layout. */
  fake_segs = cases[0].segs;
  fake_nsegs = 2;
  ab_walk_sums_t sums;
  REQUIRE(ab_strategy_check_walk(&fake, &sums, NULL) == AB_OK);
  CHECK_EQ(sums.segments, 2);
  CHECK_EQ(sums.reserved, 0x4000);
  CHECK_EQ(sums.live_blocks, 2);
  CHECK_EQ(sums.allocated, 0x2000);
  CHECK_EQ(sums.requested, 800 + 0x1000);
  CHECK_EQ(sums.free, 0x2000);
}

static const ab_test_t tests[] = {
    {"checked_after_every_event", checked_after_every_event},
    {"overlap_caught", overlap_caught},
    {"wrong_stats_caught", wrong_stats_caught},
    {"walk_rules", walk_rules},
};
AB_TEST_MAIN(tests)
