/* verify_test.c: --verify catches a strategy that hands out live memory twice, and passes
 * the real strategies. Run with --device=sim (the range set; plus the device-free tests) and
 * with --device=cuda (the pattern; the gpu label, skipped without a usable GPU). */
#include "kernels/base/rng.h"
#include "kernels/base/units.h"
#include "kernels/device/device_open.h"
#include "kernels/pattern.h"
#include "harness/run/engine.h"
#include "harness/run/verify.h"
#include "strategies/registry.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

#include "tests/check.h"

static bool on_cuda(void) { return strncmp(ab_test_device, "cuda", 4) == 0; }

#define NEED_DEVICE()                                                           \
  do {                                                                          \
    if (on_cuda() && !ab_device_cuda_usable()) SKIP("no usable GPU");           \
  } while (0)

/* Tests that use no device run once, in the --device=sim run. */
#define HOST_ONLY()                                                             \
  do {                                                                          \
    if (on_cuda()) SKIP("runs with --device=sim");                              \
  } while (0)

static void pattern_decodes_what_it_encodes(void) {
  HOST_ONLY();
  ab_rng_t r = ab_rng_seed(3);
  for (int i = 0; i < 10000; i++) {
    uint32_t id = (uint32_t)ab_rng_next(&r), got_id;
    uint64_t w = ab_rng_next(&r) % (1ULL << 32), got_off;
    ab_pattern_decode(ab_pattern_word(id, w), &got_id, &got_off);
    CHECK_EQ(got_id, id);
    CHECK_EQ(got_off, w * 8);
  }
  /* Bytes are the word's, little-endian; neighbouring ids and words differ. */
  uint64_t word = ab_pattern_word(5, 3);
  for (unsigned b = 0; b < 8; b++) CHECK_EQ(ab_pattern_byte(5, 24 + b), (word >> (8 * b)) & 0xFF);
  CHECK(ab_pattern_word(5, 3) != ab_pattern_word(6, 3));
  CHECK(ab_pattern_word(5, 3) != ab_pattern_word(5, 4));
  /* Cleared memory does not decode to a small id. */
  uint32_t id;
  uint64_t off;
  ab_pattern_decode(0, &id, &off);
  CHECK(id > 1000000);
  ab_pattern_decode(~0ULL, &id, &off);
  CHECK(id > 1000000);
}

/* The range set alone (no kernels): every way two ranges can meet. */
static void range_set_catches_every_overlap(void) {
  HOST_ONLY();
  ab_verify_t v;
  ab_diag_t diag = {""};
  REQUIRE(ab_verify_init(&v, 16, NULL, &diag) == AB_OK);
  CHECK(ab_verify_alloc(&v, 0, 0x10000, 0x100, 0, &diag) == AB_OK);
  CHECK(ab_verify_alloc(&v, 1, 0x10100, 0x100, 0, &diag) == AB_OK); /* touching above */
  CHECK(ab_verify_alloc(&v, 2, 0xFF00, 0x100, 0, &diag) == AB_OK);  /* touching below */
  struct {
    ab_dptr_t p;
    uint64_t bytes;
    uint32_t with;
  } bad[] = {
      {0x10000, 0x100, 0},  /* the same range */
      {0x10080, 0x10, 0},   /* inside */
      {0xFFF0, 0x20, 2},    /* straddling the start of id 0: caught by the one below it */
      {0x101F0, 0x20, 1},   /* straddling the end of id 1 */
      {0x10200 - 1, 2, 1},  /* the last byte of id 1 */
      {0xF000, 0x2000, 2},  /* covering id 2 and more */
  };
  for (uint32_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    diag.msg[0] = '\0';
    CHECK_MSG(ab_verify_alloc(&v, 3 + i, bad[i].p, bad[i].bytes, 0, &diag) == AB_ERR_INVALID, "case %u not caught", i);
    char want[64];
    snprintf(want, sizeof want, "overlaps id %u at [0x", bad[i].with);
    CHECK_STR_CONTAINS(diag.msg, want);
    snprintf(want, sizeof want, "id %u at [0x%llx, +%llu)", 3 + i, (unsigned long long)bad[i].p,
             (unsigned long long)bad[i].bytes);
    CHECK_STR_CONTAINS(diag.msg, want);
  }
  /* A freed range can be handed out again. */
  CHECK(ab_verify_free(&v, 0, &diag) == AB_OK);
  CHECK(ab_verify_alloc(&v, 12, 0x10000, 0x100, 0, &diag) == AB_OK);
  CHECK_EQ(v.live_set.size, 3);
  ab_verify_release(&v);
}

/* A: 64 KiB; B: 4 KiB, which overlap (every:2) places inside A; B is freed before A. */
static void build_alias(ab_events_t *es) {
  ab_events_init(es);
  uint32_t a = ab_events_alloc(es, 65536, 0, AB_TAG_ACT);
  uint32_t b = ab_events_alloc(es, 4096, 0, AB_TAG_TEMP);
  ab_events_step(es);
  ab_events_free_id(es, b);
  ab_events_free_id(es, a);
}

typedef struct replay_s {
  ab_status st;
  ab_run_t run;
} replay_t;

/* Replays es through strategy (with conf) on a fresh device of the test's kind. */
static bool replay(const ab_events_t *es, const char *strategy, const char *conf, bool verify, replay_t *r) {
  ab_device_t *dev = NULL;
  ab_strategy_t *s = NULL;
  ab_diag_t diag = {""};
  if (ab_run_prepare(&r->run, es) != AB_OK) return ab_check_report(__FILE__, __LINE__, "ab_run_prepare", NULL);
  if (ab_device_open(ab_test_device, NULL, &dev, &diag) != AB_OK ||
      ab_strategy_create(strategy, dev, conf, &s, &diag) != AB_OK) {
    ab_device_close(dev, NULL);
    ab_run_release(&r->run);
    return ab_check_report(__FILE__, __LINE__, "replay", "%s: %s", strategy, diag.msg);
  }
  ab_run_opts_t o = ab_run_defaults();
  o.verify = verify;
  r->st = ab_engine_replay(es, s, &o, &r->run);
  ab_strategy_destroy(s);
  CHECK_MSG(ab_device_close(dev, &diag) == AB_OK, "%s: %s", strategy, diag.msg);
  return true;
}

static void verify_names_both_allocations(void) {
  NEED_DEVICE();
  ab_events_t es;
  build_alias(&es);
  ab_diag_t diag = {""};
  REQUIRE(ab_events_finish(&es, &diag) == AB_OK);
  replay_t r;
  if (!replay(&es, "overlap", "every:2", true, &r)) return;
  CHECK(r.st == AB_ERR_INVALID);
  CHECK(r.run.status == AB_RUN_ERROR);
  const char *msg = r.run.message;
  CHECK_STR_CONTAINS(msg, "verify: ");
  CHECK_STR_CONTAINS(msg, "id 0 at [0x");
  CHECK_STR_CONTAINS(msg, ", +65536)");
  CHECK_STR_CONTAINS(msg, "id 1 at [0x");
  CHECK_STR_CONTAINS(msg, ", +4096)");
  if (on_cuda()) {
    /* B's fill overwrote A from byte 512 on; A's check finds it when A is freed. */
    CHECK_STR_CONTAINS(msg, "event 4 ");
    CHECK_STR_CONTAINS(msg, "its byte 512 ");
    CHECK_STR_CONTAINS(msg, "holds byte 0 of the pattern of id 1");
    CHECK_STR_CONTAINS(msg, "since freed");
  } else {
    /* The range set refuses B when it is handed out. */
    CHECK_STR_CONTAINS(msg, "event 1 ");
    CHECK_STR_CONTAINS(msg, "overlaps id 0");
  }
  ab_run_release(&r.run);
  /* The same strategy without --verify runs to the end: verify is what catches it. */
  if (replay(&es, "overlap", "every:2", false, &r)) {
    CHECK(r.st == AB_OK && r.run.status == AB_RUN_OK);
    ab_run_release(&r.run);
  }
  ab_events_free(&es);
}

static void verify_catches_overlap_on_random(void) {
  NEED_DEVICE();
  ab_events_t es;
  ab_diag_t diag = {""};
  REQUIRE_MSG(ab_workload_build("random:ops=4000,max_live=200,max=256KiB", 7, &es, &diag) == AB_OK, "%s", diag.msg);
  replay_t r;
  if (replay(&es, "overlap", NULL, true, &r)) {
    CHECK_MSG(r.st == AB_ERR_INVALID && r.run.status == AB_RUN_ERROR, "overlap not caught: %s", r.run.message);
    CHECK_STR_CONTAINS(r.run.message, "verify: id ");
    ab_run_release(&r.run);
  }
  /* Every strategy users can pick passes. */
  size_t n;
  const ab_strategy_entry_t *all = ab_strategy_registry(&n);
  for (size_t i = 0; i < n; i++) {
    if (all[i].hidden) continue;
    if (!replay(&es, all[i].name, NULL, true, &r)) continue;
    CHECK_MSG(r.st == AB_OK && r.run.status == AB_RUN_OK, "%s --verify: %s", all[i].name, r.run.message);
    ab_run_release(&r.run);
  }
  ab_events_free(&es);
}

static void overlap_is_hidden(void) {
  HOST_ONLY();
  const ab_strategy_entry_t *e = ab_strategy_find("overlap");
  REQUIRE(e != NULL);
  CHECK(e->hidden);
}

static const ab_test_t tests[] = {
    {"pattern_decodes_what_it_encodes", pattern_decodes_what_it_encodes},
    {"range_set_catches_every_overlap", range_set_catches_every_overlap},
    {"verify_names_both_allocations", verify_names_both_allocations},
    {"verify_catches_overlap_on_random", verify_catches_overlap_on_random},
    {"overlap_is_hidden", overlap_is_hidden},
};
AB_TEST_MAIN(tests)
