/* engine_test.c: the event stream, the replay engine, the random workload, histograms and
 * the results tables. */
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/base/rng.h"
#include "kernels/base/units.h"
#include "kernels/device/device_open.h"
#include "harness/run/engine.h"
#include "harness/run/hist.h"
#include "harness/run/results.h"
#include "harness/run/table.h"
#include "strategies/registry.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

#include "tests/check.h"
#include "tests/world.h"

/* Opens a sim device with a budget and a strategy on it. */
static bool setup(const char *strategy, const char *conf, uint64_t budget, ab_device_t **dev, ab_strategy_t **s) {
  ab_device_config_t cfg = {.budget_bytes = budget};
  return ab_test_world_open(dev, s, "sim", &cfg, strategy, conf);
}

static void replay_counts_and_timeline(void) {
  ab_events_t es;
  ab_events_init(&es);
  ab_events_step(&es);
  uint32_t a = ab_events_alloc(&es, 1000, 0, AB_TAG_ACT);
  uint32_t b = ab_events_alloc(&es, 3 << 20, 1, AB_TAG_PARAM);
  ab_events_step(&es);
  ab_events_free_id(&es, a);
  ab_events_sync(&es, 0);
  uint32_t c = ab_events_alloc(&es, 5000, 0, AB_TAG_TEMP);
  ab_events_free_phase(&es, c, AB_FREE_REQUEST);
  ab_events_free_phase(&es, b, AB_FREE_REQUEST);
  ab_events_free_phase(&es, c, AB_FREE_COMPLETE);
  ab_events_empty_cache(&es);
  ab_diag_t diag = {""};
  REQUIRE_MSG(ab_events_finish(&es, &diag) == AB_OK, "%s", diag.msg);
  CHECK_EQ(es.nids, 3);
  CHECK_EQ(es.nsteps, 2);
  CHECK_EQ(es.nstreams, 2);
  CHECK_EQ(es.ev[4].bytes, 1000); /* a FREE carries its size and stream */
  CHECK_EQ(es.ev[8].stream, 1);

  ab_device_t *dev;
  ab_strategy_t *s;
  REQUIRE(setup("raw", NULL, 0, &dev, &s));
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  REQUIRE(ab_engine_replay(&es, s, NULL, &run) == AB_OK);
  CHECK(run.status == AB_RUN_OK);
  CHECK_EQ(run.events_done, es.n);
  CHECK_EQ(run.alloc_ns.count, 3);
  CHECK_EQ(run.free_ns.count, 4);
  CHECK_EQ(run.stats.requested_bytes.peak, 5000 + (3 << 20)); /* b and c live together */
  CHECK_EQ(run.stats.num_device_alloc, 3);
  CHECK_EQ(run.ntimeline, 3); /* two steps and the end */
  CHECK_EQ(run.timeline[1].event, 3);
  CHECK_EQ(run.timeline[1].requested, 1000 + (3 << 20));
  CHECK_EQ(run.timeline[2].requested, 3 << 20); /* b's free was requested, not completed */
  /* Each sample also has the peaks since the one before (Note [Step peaks]). */
  CHECK_EQ(run.timeline[0].peak_requested, 0);
  CHECK_EQ(run.timeline[1].peak_requested, 1000 + (3 << 20));
  CHECK_EQ(run.timeline[2].peak_requested, 5000 + (3 << 20));
  CHECK_EQ(run.timeline[2].peak_reserved, 5000 + (3 << 20));
  /* The engine drained b (requested, never completed) so the device ends clean. */
  CHECK_EQ(dev->held_bytes, 0);
  /* A prepared run replays again with the same results. */
  REQUIRE(ab_engine_replay(&es, s, NULL, &run) == AB_OK);
  CHECK_EQ(run.events_done, es.n);
  CHECK_EQ(run.alloc_ns.count, 3);
  ab_run_release(&run);
  ab_test_world_close(dev, s);
  ab_events_free(&es);
}

static void oom_capacity(void) {
  ab_events_t es;
  ab_events_init(&es);
  ab_events_alloc(&es, 4 << 20, 0, AB_TAG_OTHER);
  ab_events_alloc(&es, 4 << 20, 0, AB_TAG_OTHER);
  ab_events_alloc(&es, 4 << 20, 0, AB_TAG_OTHER);
  ab_events_alloc(&es, 1 << 20, 0, AB_TAG_OTHER);
  REQUIRE(ab_events_finish(&es, NULL) == AB_OK);
  ab_device_t *dev;
  ab_strategy_t *s;
  REQUIRE(setup("raw", NULL, 10 << 20, &dev, &s));
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  REQUIRE(ab_engine_replay(&es, s, NULL, &run) == AB_OK);
  CHECK(run.status == AB_RUN_OOM);
  CHECK_EQ(run.oom.event, 2);
  CHECK_EQ(run.oom.id, 2);
  CHECK_EQ(run.oom.bytes, 4 << 20);
  CHECK_EQ(run.oom.live_requested, 8 << 20);
  CHECK_EQ(run.oom.reserved, 8 << 20);
  CHECK_EQ(run.oom.limit, 10 << 20);
  CHECK(run.oom.kind == AB_OOM_CAPACITY); /* 8 MiB live + 4 MiB > 10 MiB: no packing fits */
  CHECK_STR_CONTAINS(run.oom.message, "tried to allocate 4.00 MiB");
  CHECK_EQ(run.events_done, 2);
  CHECK_EQ(run.stats.num_ooms, 1);
  CHECK_EQ(dev->held_bytes, 0); /* drained after the OOM */
  ab_run_release(&run);
  ab_test_world_close(dev, s);
  ab_events_free(&es);
}

/* A stream without steps (a recorded trace) is sampled every n / 200 + 1 events: 1000
 * allocations and their frees, 2000 events, give samples at 0, 11, ..., 1991 and the end,
 * the step column counting them; the peaks are the run's whatever the sampling. */
static void timeline_of_a_trace(void) {
  ab_events_t es;
  ab_events_init(&es);
  uint32_t id[1000];
  for (int i = 0; i < 1000; i++) id[i] = ab_events_alloc(&es, 4096, 0, AB_TAG_OTHER);
  for (int i = 0; i < 1000; i++) ab_events_free_id(&es, id[i]);
  REQUIRE(ab_events_finish(&es, NULL) == AB_OK);
  REQUIRE(es.nsteps == 0 && es.n == 2000);
  ab_device_t *dev;
  ab_strategy_t *s;
  REQUIRE(setup("raw", NULL, 0, &dev, &s));
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  REQUIRE(ab_engine_replay(&es, s, NULL, &run) == AB_OK);
  CHECK_EQ(run.ntimeline, 2000 / 11 + 1 + 1);
  for (size_t k = 0; k + 1 < run.ntimeline; k++) {
    CHECK_EQ(run.timeline[k].event, 11 * k);
    CHECK_EQ(run.timeline[k].step, k);
  }
  CHECK_EQ(run.timeline[run.ntimeline - 1].event, 2000);
  CHECK_EQ(run.timeline[100].requested, 1000 * 4096 - (1100 - 1000) * 4096);
  CHECK_EQ(run.stats.requested_bytes.peak, 1000 * 4096);
  ab_run_release(&run);
  ab_test_world_close(dev, s);
  ab_events_free(&es);
}

/* at_reserved: one call, after the first event at which reserved reaches the figure. */
typedef struct reached_s {
  unsigned calls;
  int64_t reserved; /* the strategy's then */
} reached_t;

static void on_reached(void *ctx, ab_strategy_t *s, const ab_run_t *run) {
  reached_t *r = ctx;
  (void)run;
  r->calls++;
  r->reserved = s->stats.reserved_bytes.current;
}

static void state_at_reserved(void) {
  ab_events_t es;
  ab_events_init(&es);
  uint32_t id[100];
  for (int round = 0; round < 2; round++) { /* the peak is reached twice: the call is at the first */
    for (int i = 0; i < 100; i++) id[i] = ab_events_alloc(&es, 4096, 0, AB_TAG_OTHER);
    for (int i = 0; i < 100; i++) ab_events_free_id(&es, id[i]);
  }
  REQUIRE(ab_events_finish(&es, NULL) == AB_OK);
  ab_device_t *dev;
  ab_strategy_t *s;
  REQUIRE(setup("raw", NULL, 0, &dev, &s));
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  REQUIRE(ab_engine_replay(&es, s, NULL, &run) == AB_OK);
  int64_t peak = run.stats.reserved_bytes.peak, each = peak / 100;
  REQUIRE(peak > 0 && peak == 100 * each);
  const struct {
    int64_t target;
    unsigned calls;
    size_t event;
  } cases[] = {{peak, 1, 99}, {10 * each, 1, 9}, {10 * each - 1, 1, 9}, {peak + 1, 0, 0}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    reached_t r = {0, 0};
    size_t event = 0;
    ab_run_opts_t o = ab_run_defaults();
    o.at_reserved = on_reached;
    o.at_reserved_ctx = &r;
    o.at_reserved_bytes = cases[k].target;
    o.at_reserved_event = &event;
    REQUIRE(ab_engine_replay(&es, s, &o, &run) == AB_OK);
    CHECK_MSG(r.calls == cases[k].calls, "target %lld: %u calls", (long long)cases[k].target, r.calls);
    if (cases[k].calls == 0) continue;
    CHECK_MSG(event == cases[k].event, "target %lld: at event %zu", (long long)cases[k].target, event);
    CHECK(r.reserved >= cases[k].target && r.reserved - each < cases[k].target);
  }
  ab_run_release(&run);
  ab_test_world_close(dev, s);
  ab_events_free(&es);
}

/* Every replay leaves the run's tables of ids zeroed, as the next replay needs them (the
 * engine does not clear them again): after an OOM that leaves a live allocation and one
 * whose free was asked but never completed, and after a replay that completes. */
static void ids_clean_after_replay(void) {
  ab_events_t es;
  ab_events_init(&es);
  uint32_t a = ab_events_alloc(&es, 1 << 20, 0, AB_TAG_OTHER);
  uint32_t b = ab_events_alloc(&es, 1 << 20, 0, AB_TAG_OTHER);
  ab_events_free_phase(&es, b, AB_FREE_REQUEST);
  uint32_t c = ab_events_alloc(&es, 64 << 20, 0, AB_TAG_OTHER);
  ab_events_free_id(&es, c);
  ab_events_free_phase(&es, b, AB_FREE_COMPLETE);
  ab_events_free_id(&es, a);
  REQUIRE(ab_events_finish(&es, NULL) == AB_OK);
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  for (int pass = 0; pass < 2; pass++) {
    ab_device_t *dev;
    ab_strategy_t *s;
    REQUIRE(setup("raw", NULL, pass == 0 ? 8 << 20 : 0, &dev, &s));
    REQUIRE(ab_engine_replay(&es, s, NULL, &run) == AB_OK);
    CHECK(run.status == (pass == 0 ? AB_RUN_OOM : AB_RUN_OK));
    for (uint32_t id = 0; id < es.nids; id++)
      CHECK_MSG(!ab_run_live(&run, id) && !(run.requested[id / 64] >> (id % 64) & 1), "pass %d: id %u left set", pass, id);
    CHECK_EQ(dev->held_bytes, 0);
    ab_test_world_close(dev, s);
  }
  ab_run_release(&run);
  ab_events_free(&es);
}

/* pooled never splits: three size classes need three chunks even though the live bytes are
 * a few KiB, so the third fails within a budget that fits them many times over. */
static void oom_fragmentation(void) {
  ab_events_t es;
  ab_events_init(&es);
  ab_events_alloc(&es, 1024, 0, AB_TAG_OTHER);
  ab_events_alloc(&es, 2048, 0, AB_TAG_OTHER);
  ab_events_alloc(&es, 3072, 0, AB_TAG_OTHER);
  REQUIRE(ab_events_finish(&es, NULL) == AB_OK);
  ab_device_t *dev;
  ab_strategy_t *s;
  REQUIRE(setup("pooled", "chunk:8MiB", 16 << 20, &dev, &s));
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  REQUIRE(ab_engine_replay(&es, s, NULL, &run) == AB_OK);
  CHECK(run.status == AB_RUN_OOM);
  CHECK_EQ(run.oom.event, 2);
  CHECK_EQ(run.oom.live_requested, 3072);
  CHECK(run.oom.kind == AB_OOM_FRAGMENTATION);
  CHECK_EQ(run.stats.num_alloc_retries, 1);
  ab_run_release(&run);
  ab_test_world_close(dev, s);
  ab_events_free(&es);
}

/* expandable maps 20 MiB pages: 256 MiB requested take 260 MiB. Under a budget between the
 * two the request fits as asked but not as mapped: rounding, not fragmentation (nothing is
 * live); under one below 256 MiB, capacity. */
static void oom_rounding(void) {
  ab_events_t es;
  ab_events_init(&es);
  ab_events_alloc(&es, 256 << 20, 0, AB_TAG_OTHER);
  REQUIRE(ab_events_finish(&es, NULL) == AB_OK);
  static const struct {
    uint64_t budget;
    ab_oom_kind_t kind;
  } cases[] = {{259 << 20, AB_OOM_ROUNDING}, {255 << 20, AB_OOM_CAPACITY}};
  for (size_t i = 0; i < 2; i++) {
    ab_device_t *dev;
    ab_strategy_t *s;
    REQUIRE(setup("expandable", NULL, cases[i].budget, &dev, &s));
    ab_run_t run;
    REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
    REQUIRE(ab_engine_replay(&es, s, NULL, &run) == AB_OK);
    CHECK(run.status == AB_RUN_OOM);
    CHECK_EQ(run.oom.device_bytes, 260 << 20);
    CHECK_MSG(run.oom.kind == cases[i].kind, "under %llu bytes: %s", (unsigned long long)cases[i].budget,
              ab_oom_kind_name(run.oom.kind));
    ab_run_release(&run);
    ab_test_world_close(dev, s);
  }
  ab_events_free(&es);
}

/* The kinds from their figures: each bound, one byte either side. */
static void oom_kinds_at_their_bounds(void) {
  ab_oom_info_t o = {.bytes = 100, .live_requested = 900, .allocated = 950, .device_bytes = 150, .limit = 1100};
  CHECK(ab_oom_classify(&o) == AB_OOM_FRAGMENTATION); /* 950 + 150 = 1100 */
  o.limit = 1099;
  CHECK(ab_oom_classify(&o) == AB_OOM_ROUNDING);
  o.limit = 1000;
  CHECK(ab_oom_classify(&o) == AB_OOM_ROUNDING); /* 900 + 100 = 1000 */
  o.limit = 999;
  CHECK(ab_oom_classify(&o) == AB_OOM_CAPACITY);
  o.limit = 800; /* less than what is live */
  CHECK(ab_oom_classify(&o) == AB_OOM_CAPACITY);
}

/* With continue_on_oom the replay goes on past a failed allocation: its id is dead, the
 * KERNEL and FREE events that use it are passed over, the OOMs are counted (the first one
 * described), and later allocations are served. */
static void continue_after_oom(void) {
  ab_events_t es;
  ab_events_init(&es);
  uint32_t a = ab_events_alloc(&es, 4 << 20, 0, AB_TAG_OTHER);
  uint32_t big = ab_events_alloc(&es, 8 << 20, 1, AB_TAG_OTHER);  /* 1: OOM, 4 of 10 MiB live */
  uint32_t big2 = ab_events_alloc(&es, 8 << 20, 0, AB_TAG_OTHER); /* 2: OOM again, in a row */
  ab_kernel_t k = {.op = AB_K_COPY, .nbuf = 2, .buf = {a, big}, .n = 1024};
  ab_events_kernel(&es, &k, 0);                  /* 3: passed over */
  ab_events_free_phase(&es, big, AB_FREE_REQUEST); /* 4: passed over */
  ab_events_free_id(&es, a);
  ab_events_free_phase(&es, big, AB_FREE_COMPLETE); /* 6: passed over */
  uint32_t c = ab_events_alloc(&es, 8 << 20, 0, AB_TAG_OTHER); /* 7: fits now that a is free */
  ab_events_free_id(&es, big2);                  /* 8: passed over */
  ab_events_free_id(&es, c);
  ab_diag_t diag = {""};
  REQUIRE_MSG(ab_events_finish(&es, &diag) == AB_OK, "%s", diag.msg);
  ab_device_t *dev;
  ab_strategy_t *s;
  REQUIRE(setup("raw", NULL, 10 << 20, &dev, &s));
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  ab_run_opts_t ro = ab_run_defaults();
  ro.continue_on_oom = true;
  ro.check = true;
  for (int round = 0; round < 2; round++) { /* the second replay reuses the run's scratch */
    REQUIRE_MSG(ab_engine_replay(&es, s, &ro, &run) == AB_OK, "%s", run.message);
    CHECK(run.status == AB_RUN_OK);
    CHECK_EQ(run.events_done, es.n);
    CHECK_EQ(run.ooms, 2);
    CHECK_EQ(run.oom_streak, 2);
    CHECK_EQ(run.last_oom_event, 2);
    CHECK_EQ(run.oom.event, 1);
    CHECK_EQ(run.oom.id, big);
    CHECK_EQ(run.passed_over, 4);
    CHECK_EQ(run.kernels_skipped, 1);
    CHECK_EQ(run.alloc_ns.count, 4);
    CHECK_EQ(run.free_ns.count, 2); /* a and c */
    CHECK_EQ(run.stats.num_device_alloc - (round ? 2 : 0), 2);
    CHECK_EQ(run.stats.num_ooms - (round ? 2 : 0), 2);
    CHECK_EQ(dev->held_bytes, 0);
  }
  /* Without it the replay ends at the first OOM. */
  REQUIRE(ab_engine_replay(&es, s, NULL, &run) == AB_OK);
  CHECK(run.status == AB_RUN_OOM);
  CHECK_EQ(run.ooms, 1);
  CHECK_EQ(run.oom.event, 1);
  CHECK_EQ(run.events_done, 1);
  CHECK_EQ(run.passed_over, 0);
  ab_run_release(&run);
  ab_test_world_close(dev, s);
  ab_events_free(&es);
}

/* A stop request ends the replay at the next look (every 1024 events), with what was live
 * freed; without one the same run goes to the end. */
static void stop_on_request(void) {
  ab_events_t es;
  ab_diag_t diag = {""};
  REQUIRE_MSG(ab_workload_build("random:ops=200000", 42, &es, &diag) == AB_OK, "%s", diag.msg);
  ab_device_t *dev;
  ab_strategy_t *s;
  REQUIRE(setup("pooled", NULL, 0, &dev, &s));
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  volatile sig_atomic_t stop = SIGINT;
  ab_run_opts_t ro = ab_run_defaults();
  ro.stop = &stop;
  REQUIRE(ab_engine_replay(&es, s, &ro, &run) == AB_OK);
  CHECK(run.status == AB_RUN_INTERRUPTED);
  CHECK_EQ(run.events_done, 1024);
  ab_stats_t after;
  ab_strategy_stats(s, &after);
  CHECK_EQ(after.allocated_bytes.current, 0); /* what was live is freed */
  CHECK(strcmp(ab_run_status_name(run.status), "interrupted") == 0);
  stop = 0;
  REQUIRE(ab_engine_replay(&es, s, &ro, &run) == AB_OK);
  CHECK(run.status == AB_RUN_OK);
  CHECK_EQ(run.events_done, es.n);
  ab_run_release(&run);
  ab_test_world_close(dev, s);
  ab_events_free(&es);
}

/* --check's schedule (Note [What --check costs], engine.c): after every event while little
 * is held, after every k-th where more than 1 024 segments and live blocks are, and after the
 * last event; a broken invariant is found either way. */
static void checks_when_due(void) {
  enum { LIVE = 3000 };
  ab_events_t es;
  ab_events_init(&es);
  uint32_t ids[LIVE];
  for (int i = 0; i < LIVE; i++) ids[i] = ab_events_alloc(&es, i == LIVE - 1 ? 1024 : 4096, 0, AB_TAG_OTHER);
  ab_diag_t diag = {""};
  REQUIRE_MSG(ab_events_finish(&es, &diag) == AB_OK, "%s", diag.msg);
  ab_events_t freed;
  ab_events_init(&freed);
  for (int i = 0; i < LIVE; i++) ids[i] = ab_events_alloc(&freed, 4096, 0, AB_TAG_OTHER);
  for (int i = 0; i < LIVE; i++) ab_events_free_id(&freed, ids[i]);
  REQUIRE_MSG(ab_events_finish(&freed, &diag) == AB_OK, "%s", diag.msg);
  ab_run_opts_t ro = ab_run_defaults();
  ro.check = true;
  ab_run_t run;
  /* raw holds a segment per live block, 2 per allocation: checked after every event up to
   * the 1 024th allocation and from the 1 024th last free, between them every 2nd event to
   * every 5th (3 332 checks). */
  ab_device_t *dev;
  ab_strategy_t *s;
  REQUIRE(setup("raw", NULL, 0, &dev, &s));
  REQUIRE(ab_run_prepare(&run, &freed) == AB_OK);
  REQUIRE_MSG(ab_engine_replay(&freed, s, &ro, &run) == AB_OK, "%s", run.message);
  CHECK(run.status == AB_RUN_OK);
  CHECK_MSG(run.checks > 2048 && run.checks < freed.n - 2000, "%llu checks of %zu events",
            (unsigned long long)run.checks, freed.n);
  ab_run_release(&run);
  /* Nothing held: after every event. */
  ab_events_t few;
  ab_events_init(&few);
  for (int i = 0; i < 100; i++) ab_events_free_id(&few, ab_events_alloc(&few, 4096, 0, AB_TAG_OTHER));
  REQUIRE_MSG(ab_events_finish(&few, &diag) == AB_OK, "%s", diag.msg);
  REQUIRE(ab_run_prepare(&run, &few) == AB_OK);
  REQUIRE_MSG(ab_engine_replay(&few, s, &ro, &run) == AB_OK, "%s", run.message);
  CHECK_EQ(run.checks, few.n);
  ab_run_release(&run);
  ab_test_world_close(dev, s);
  /* overlap hands out live memory at the last allocation, with 6 000 held: the check after
   * the last event finds it. */
  REQUIRE(setup("overlap", "every:3000", 0, &dev, &s));
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  ab_engine_replay(&es, s, &ro, &run);
  CHECK_MSG(run.status == AB_RUN_ERROR && strstr(run.message, "invariant broken: overlap") != NULL, "%s: %s",
            ab_run_status_name(run.status), run.message);
  ab_run_release(&run);
  ab_test_world_close(dev, s);
  ab_events_free(&es);
  ab_events_free(&freed);
  ab_events_free(&few);
}

static void stream_validation(void) {
  ab_diag_t diag = {""};
  ab_events_t es;
  ab_events_init(&es);
  uint32_t a = ab_events_alloc(&es, 100, 0, AB_TAG_OTHER);
  ab_events_free_id(&es, a);
  ab_events_free_id(&es, a);
  CHECK(ab_events_finish(&es, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "event 2: FREE of id 0");
  ab_events_free(&es);

  ab_events_init(&es);
  a = ab_events_alloc(&es, 100, 0, AB_TAG_OTHER);
  ab_events_free_phase(&es, a, AB_FREE_COMPLETE); /* a completion with no request */
  CHECK(ab_events_finish(&es, &diag) == AB_ERR_INVALID);
  ab_events_free(&es);

  ab_events_init(&es);
  uint32_t x = ab_events_alloc(&es, 64 * 64 * 2, 0, AB_TAG_ACT);
  uint32_t w = ab_events_alloc(&es, 64 * 64 * 2, 0, AB_TAG_PARAM);
  uint32_t y = ab_events_alloc(&es, 64 * 32 * 2, 0, AB_TAG_ACT); /* too small for 64x64 bf16 */
  ab_kernel_t k = {.op = AB_K_GEMM, .dtype = {AB_BF16, AB_BF16}, .nbuf = 3, .buf = {x, w, y}, .m = 64, .n = 64, .k = 64};
  ab_events_kernel(&es, &k, 0);
  CHECK(ab_events_finish(&es, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "gemm kernel buffer 2");
  ab_events_free(&es);
}

/* The default random workload is the sequence workloads/random.c's header defines, written
 * out here independently of its code. */
static void random_is_the_reference_sequence(void) {
  ab_events_t es;
  ab_diag_t diag = {""};
  REQUIRE_MSG(ab_workload_build("random", 42, &es, &diag) == AB_OK, "%s", diag.msg);
  uint64_t state = 42, live = 0, allocs = 0, frees = 0;
  int failures_before = ab_check_failures;
  size_t e = 0, checked = 0;
  for (int op = 0; op < 200000; op++) {
    uint64_t z;
#define NEXT()                                                   \
  (state += 0x9E3779B97F4A7C15ULL, z = state,                    \
   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL,                  \
   z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL, z ^ (z >> 31))
    uint64_t r = NEXT();
    bool alloc = live == 0 || (live < 1000 && r % 2 == 0);
    uint64_t next = NEXT();
    while (e < es.n && es.ev[e].kind == AB_EV_STEP) e++;
    REQUIRE(e < es.n);
    if (alloc) {
      CHECK_EQ(es.ev[e].kind, AB_EV_ALLOC);
      CHECK_EQ(es.ev[e].bytes, ((next % 4096) + 1) * 1024);
      live++;
      allocs++;
    } else {
      CHECK_EQ(es.ev[e].kind, AB_EV_FREE);
      live--;
      frees++;
    }
    e++;
    checked++;
    if (ab_check_failures != failures_before) break;
#undef NEXT
  }
  CHECK_EQ(checked, 200000);
  CHECK_EQ(allocs + frees, 200000);
  CHECK_EQ(es.nsteps, 200);
  uint64_t h = ab_events_hash(&es);
  /* The digest tells one word changed anywhere, even one bit of it. */
  for (size_t at = 0; at < es.n; at += es.n / 7) {
    ab_event_t kept = es.ev[at];
    es.ev[at].bytes ^= 1ULL << (at % 64);
    CHECK(ab_events_hash(&es) != h);
    es.ev[at] = kept;
    es.ev[at].id ^= 1u << 31;
    CHECK(ab_events_hash(&es) != h);
    es.ev[at] = kept;
  }
  CHECK(ab_events_hash(&es) == h);
  ab_events_t again, other;
  REQUIRE(ab_workload_build("random", 42, &again, &diag) == AB_OK);
  REQUIRE(ab_workload_build("random", 43, &other, &diag) == AB_OK);
  CHECK(ab_events_hash(&again) == h);
  CHECK(ab_events_hash(&other) != h);
  ab_events_free(&es);
  ab_events_free(&again);
  ab_events_free(&other);
}

static void workload_arguments(void) {
  ab_events_t es;
  ab_diag_t diag = {""};
  REQUIRE(ab_workload_build("random:ops=5000,dist=lognormal,streams=3", 1, &es, &diag) == AB_OK);
  CHECK_EQ(es.nstreams, 3);
  ab_events_free(&es);
  CHECK(ab_workload_build("random:ops=abc", 1, &es, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "ops");
  CHECK(ab_workload_build("random:colour=red", 1, &es, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "unknown key 'colour'");
  CHECK(ab_workload_build("nothing", 1, &es, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "unknown workload 'nothing'");
  CHECK(ab_workload_build("replay", 1, &es, &diag) == AB_ERR_INVALID);
  CHECK(ab_workload_build("replay:/nonexistent/trace.csv", 1, &es, &diag) == AB_ERR_IO);
  CHECK_STR_CONTAINS(diag.msg, "/nonexistent/trace.csv");
}

static void histogram_quantiles(void) {
  ab_hist_t h;
  ab_hist_reset(&h);
  CHECK_EQ(ab_hist_quantile(&h, 0.5), 0);
  for (uint64_t v = 1; v <= 100000; v++) ab_hist_add(&h, v);
  uint64_t p50 = ab_hist_quantile(&h, 0.5), p99 = ab_hist_quantile(&h, 0.99);
  CHECK_MSG(p50 > 48500 && p50 < 51500, "p50 %llu", (unsigned long long)p50);
  CHECK_MSG(p99 > 96030 && p99 < 101970, "p99 %llu", (unsigned long long)p99); /* within 3% */
  CHECK_EQ(ab_hist_quantile(&h, 1.0), 100000);
  CHECK_EQ(ab_hist_quantile(&h, 0.0), 1);
  for (uint64_t v = 0; v < 32; v++) CHECK_EQ(ab_hist_index(v), v); /* small values are exact */
  ab_hist_add(&h, UINT64_MAX);
  CHECK_EQ(h.max, UINT64_MAX);
}

static const ab_col_t cols[] = {{"name", false}, {"value", true}};

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  static char buf[8192];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* Column names that come from a trace (replay --info's action names) are quoted like cells. */
static void csv_header_names_quoted(void) {
  static const ab_col_t named[] = {{"free,requested", true}, {"say \"hi\"", true}, {"plain", true}};
  ab_table_t t;
  ab_table_init(&t, named, 3);
  const char *row[] = {"1", "2", "3"};
  REQUIRE(ab_table_add(&t, row) == AB_OK);
  char *buf = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&buf, &len);
  REQUIRE(mem != NULL);
  ab_table_write_csv(&t, mem, true);
  fclose(mem);
  CHECK_MSG(strcmp(buf, "\"free,requested\",\"say \"\"hi\"\"\",plain\n1,2,3\n") == 0, "%s", buf);
  free(buf);
  ab_table_free(&t);
}

static void results_append_safely(void) {
  char dir[] = "/tmp/ab_engine_test_XXXXXX";
  REQUIRE(mkdtemp(dir) != NULL);
  char path[256], moved[300];
  snprintf(path, sizeof path, "%s/sub/summary.csv", dir);
  ab_table_t t;
  ab_table_init(&t, cols, 2);
  const char *r1[] = {"a,b \"quoted\"", "1"};
  REQUIRE(ab_table_add(&t, r1) == AB_OK);
  ab_diag_t diag = {""};
  REQUIRE_MSG(ab_table_append_csv(&t, path, moved, sizeof moved, &diag) == AB_OK, "%s", diag.msg);
  REQUIRE_MSG(ab_table_append_csv(&t, path, moved, sizeof moved, &diag) == AB_OK, "%s", diag.msg);
  CHECK(strcmp(slurp(path), "name,value\n\"a,b \"\"quoted\"\"\",1\n\"a,b \"\"quoted\"\"\",1\n") == 0);
  /* A half row left by a dying writer (fewer fields than the header, or a quote left open)
   * is cut off before appending. */
  static const char *const cut[] = {"x", "\"x,1"};
  for (size_t i = 0; i < 2; i++) {
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fprintf(f, "name,value\nkept,1\n%s", cut[i]);
    fclose(f);
    REQUIRE(ab_table_append_csv(&t, path, moved, sizeof moved, &diag) == AB_OK);
    CHECK_MSG(strcmp(slurp(path), "name,value\nkept,1\n\"a,b \"\"quoted\"\"\",1\n") == 0, "after '%s': %s", cut[i],
              slurp(path));
    CHECK_EQ(moved[0], '\0');
  }
  /* A whole row saved without its newline (as an editor leaves it) is kept, and ended; so is
   * the header alone. */
  FILE *f = fopen(path, "w");
  REQUIRE(f);
  fputs("name,value\n\"x,y\",12", f);
  fclose(f);
  REQUIRE(ab_table_append_csv(&t, path, moved, sizeof moved, &diag) == AB_OK);
  CHECK_MSG(strcmp(slurp(path), "name,value\n\"x,y\",12\n\"a,b \"\"quoted\"\"\",1\n") == 0, "%s", slurp(path));
  f = fopen(path, "w");
  REQUIRE(f);
  fputs("name,value", f);
  fclose(f);
  REQUIRE(ab_table_append_csv(&t, path, moved, sizeof moved, &diag) == AB_OK);
  CHECK_MSG(strcmp(slurp(path), "name,value\n\"a,b \"\"quoted\"\"\",1\n") == 0, "%s", slurp(path));
  CHECK_EQ(moved[0], '\0');
  /* A file with other columns is moved aside whole (its last line too), not mixed with; two
   * in one second, and a file of the user's under the first backup's name, each keep theirs. */
  char first[300] = "";
  for (int i = 0; i < 2; i++) {
    f = fopen(path, "w");
    REQUIRE(f);
    fprintf(f, "old,columns\n%d,2", i);
    fclose(f);
    REQUIRE(ab_table_append_csv(&t, path, moved, sizeof moved, &diag) == AB_OK);
    CHECK(strcmp(slurp(path), "name,value\n\"a,b \"\"quoted\"\"\",1\n") == 0);
    CHECK_STR_CONTAINS(moved, "summary.csv.");
    CHECK_MSG(strcmp(slurp(moved), i == 0 ? "old,columns\n0,2" : "old,columns\n1,2") == 0, "%s", slurp(moved));
    if (i == 0) snprintf(first, sizeof first, "%s", moved);
    else CHECK_MSG(strcmp(first, moved) != 0 || strcmp(slurp(first), "old,columns\n0,2") == 0, "%s", moved);
  }
  CHECK_MSG(strcmp(slurp(first), "old,columns\n0,2") == 0, "the first backup %s was replaced", first);
  unlink(moved);
  unlink(first);
  /* Whole files are replaced atomically. */
  snprintf(path, sizeof path, "%s/whole.csv", dir);
  REQUIRE(ab_table_write_file(&t, path, &diag) == AB_OK);
  CHECK(strcmp(slurp(path), "name,value\n\"a,b \"\"quoted\"\"\",1\n") == 0);
  unlink(path);
  snprintf(path, sizeof path, "%s/sub/summary.csv", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/sub", dir);
  rmdir(path);
  rmdir(dir);
  ab_table_free(&t);
  char part[64];
  ab_results_file_part("replay:../x/cnn_dyn.default.pickle.gz", part, sizeof part);
  CHECK(strcmp(part, "cnn_dyn.default.pickle.gz") == 0);
  ab_results_file_part("random:ops=5,dist=fixed", part, sizeof part);
  CHECK(strcmp(part, "random_ops_5_dist_fixed") == 0);
}

static const ab_test_t tests[] = {
    {"csv_header_names_quoted", csv_header_names_quoted},
    {"replay_counts_and_timeline", replay_counts_and_timeline},
    {"timeline_of_a_trace", timeline_of_a_trace},
    {"state_at_reserved", state_at_reserved},
    {"ids_clean_after_replay", ids_clean_after_replay},
    {"oom_capacity", oom_capacity},
    {"oom_fragmentation", oom_fragmentation},
    {"oom_rounding", oom_rounding},
    {"oom_kinds_at_their_bounds", oom_kinds_at_their_bounds},
    {"continue_after_oom", continue_after_oom},
    {"stop_on_request", stop_on_request},
    {"checks_when_due", checks_when_due},
    {"stream_validation", stream_validation},
    {"random_is_the_reference_sequence", random_is_the_reference_sequence},
    {"workload_arguments", workload_arguments},
    {"histogram_quantiles", histogram_quantiles},
    {"results_append_safely", results_append_safely},
};
AB_TEST_MAIN(tests)
