/* caching_fidelity_test.c: the caching strategy replays what PyTorch 2.11 recorded on an
 * H200 (tests/data/pytorch-2.11-h200, README there) and decides as PyTorch decided.
 *
 * The program (ResNet-50 with image sizes drawn per step) is the same under every CONFIG, so
 * the snapshot PyTorch wrote for the default run (cnn_dyn.default.pickle.gz, the file a user
 * hands over) is replayed under each CONFIG's PYTORCH_CUDA_ALLOC_CONF on sim:h200 and
 * compared with that CONFIG's statistics in cnn_dyn.json and its own decisions
 * (cnn_dyn.CONFIG.segments.csv.gz):
 * peak reserved, device allocations and frees exactly; the sequence of segment decisions
 * (segment_alloc / free / map / unmap and their sizes) exactly; peak allocated within 0.1%
 * (ties between equal free blocks go to the lowest address, and the simulated card's
 * addresses are not the driver's), and exactly when each cudaMalloc gets the address the
 * recorded run got. Under a memory cap, the bisection of cnn_dyn.json: completes at
 * min_pass_cap, out of memory at max_fail_cap, and the decisions of the capped runs.
 * The recorded files ship with the repository: one missing or broken fails the tests. */
#include <math.h>

#include "kernels/base/input.h"
#include "kernels/device/device_open.h"
#include "harness/run/engine.h"
#include "strategies/caching/caching.h"
#include "strategies/registry.h"
#include "workloads/traces/trace.h"

#include "tests/check.h"

#ifndef AB_TEST_DATA_DIR
#error "AB_TEST_DATA_DIR must name the folder of recorded runs (tests/data)"
#endif
#define RECORDED AB_TEST_DATA_DIR "/pytorch-2.11-h200/"

/* ---- the recorded runs -------------------------------------------------------------------- */

static ab_events_t program; /* the default run's snapshot: what the program asked for */
static bool program_loaded;
static ab_input_t json;

/* The decisions PyTorch made in the run `name` (CONFIG or CONFIG.capBYTES). */
static bool load_decisions(const char *name, ab_events_t *es) {
  char path[1024];
  snprintf(path, sizeof path, RECORDED "cnn_dyn.%s.segments.csv.gz", name);
  ab_diag_t d = {""};
  static const ab_trace_opts_t decisions = {.device = -1, .decisions_only = true}; /* no allocations in these files */
  if (ab_trace_load(path, &decisions, es, NULL, &d) != AB_OK) {
    CHECK_MSG(false, "recorded run: %s", d.msg);
    return false;
  }
  return true;
}

/* The program and cnn_dyn.json, loaded once. */
static bool load_program(void) {
  if (program_loaded) return true;
  ab_diag_t d = {""};
  if (ab_input_read(RECORDED "cnn_dyn.json", &json, &d) != AB_OK) {
    CHECK_MSG(false, "recorded run: %s", d.msg);
    return false;
  }
  if (ab_trace_load(RECORDED "cnn_dyn.default.pickle.gz", NULL, &program, NULL, &d) != AB_OK) {
    CHECK_MSG(false, "recorded run: %s", d.msg);
    return false;
  }
  return program_loaded = true;
}

/* A number of cnn_dyn.json: the first `key` after the object `section` and its `name`. */
static int64_t json_number(const char *section, const char *name, const char *key) {
  char pattern[128];
  snprintf(pattern, sizeof pattern, "\"%s\"", section);
  const char *p = strstr(json.data, pattern);
  snprintf(pattern, sizeof pattern, "\"%s\": {", name);
  p = p ? strstr(p, pattern) : NULL;
  snprintf(pattern, sizeof pattern, "\"%s\": ", key);
  p = p ? strstr(p, pattern) : NULL;
  if (p == NULL) {
    CHECK_MSG(false, "cnn_dyn.json has no %s.%s.%s", section, name, key);
    return -1;
  }
  return strtoll(p + strlen(pattern), NULL, 10);
}

/* ---- one replay -------------------------------------------------------------------------- */

typedef struct decision_s {
  uint8_t action; /* a segment action (trace_actions.h) */
  uint64_t bytes;
} decision_t;

typedef struct replay_s {
  decision_t *d;
  size_t n, cap;
  ab_run_t run;
  ab_strategy_t *s;
  ab_device_t *dev;
} replay_t;

static void on_segment(void *ctx, ab_trace_action_t ev, ab_dptr_t addr, uint64_t bytes, unsigned stream) {
  replay_t *r = ctx;
  (void)addr;
  (void)stream;
  if (r->n == r->cap) {
    r->cap = r->cap ? 2 * r->cap : 1024;
    r->d = realloc(r->d, r->cap * sizeof *r->d);
  }
  if (r->d) r->d[r->n++] = (decision_t){(uint8_t)ev, bytes};
}

/* Replays the program under conf; with addresses_of, each cudaMalloc gets the address the
 * run recorded there got. The strategy stays open for its statistics. */
static bool replay(const char *conf, uint64_t budget, const ab_events_t *addresses_of, replay_t *r) {
  memset(r, 0, sizeof *r);
  ab_device_config_t cfg = {0};
  cfg.budget_bytes = budget;
  ab_addr_hint_t *plan = NULL;
  if (addresses_of && ab_events_address_plan(addresses_of, &plan, &cfg.plan_len) != AB_OK) return false;
  cfg.plan = plan;
  ab_diag_t d = {""};
  ab_status st = ab_device_open("sim:h200", &cfg, &r->dev, &d);
  free(plan);
  if (st != AB_OK || ab_strategy_create("caching", r->dev, conf, &r->s, &d) != AB_OK) {
    CHECK_MSG(false, "-c '%s': %s", conf, d.msg);
    return false;
  }
  ab_strategy_observe(r->s, on_segment, r);
  ab_run_opts_t opts = ab_run_defaults();
  opts.time_calls = false;
  opts.timeline = false;
  if (ab_run_prepare(&r->run, &program) != AB_OK) return false;
  st = ab_engine_replay(&program, r->s, &opts, &r->run);
  CHECK_MSG(st == AB_OK && r->d != NULL, "-c '%s': %s", conf, r->run.message);
  return st == AB_OK;
}

static void replay_close(replay_t *r) {
  if (r->s) ab_strategy_destroy(r->s);
  ab_diag_t d = {""};
  if (r->dev) CHECK_MSG(ab_device_close(r->dev, &d) == AB_OK, "%s", d.msg);
  ab_run_release(&r->run);
  free(r->d);
}

static int64_t mstat(replay_t *r, const char *name) {
  int64_t value = 0;
  bool found = ab_strategy_memory_stat(r->s, name, &value);
  CHECK_MSG(found, "no statistic %s", name);
  return value;
}

/* The first `limit` decisions equal the recorded ones (all of both when limit is SIZE_MAX). */
static void same_decisions(const replay_t *r, const ab_events_t *recorded, size_t limit, const char *what) {
  size_t n = limit == SIZE_MAX ? recorded->nsegs : limit;
  if (limit == SIZE_MAX) CHECK_MSG(r->n == recorded->nsegs, "%s: %zu decisions, PyTorch made %zu", what, r->n, recorded->nsegs);
  for (size_t i = 0; i < n && i < r->n && i < recorded->nsegs; i++)
    if (r->d[i].action != recorded->segs[i].action || r->d[i].bytes != recorded->segs[i].bytes) {
      CHECK_MSG(false, "%s: decision %zu is action %d of %llu bytes; PyTorch's was action %d of %llu bytes", what, i,
                r->d[i].action, (unsigned long long)r->d[i].bytes, recorded->segs[i].action,
                (unsigned long long)recorded->segs[i].bytes);
      return;
    }
  CHECK_MSG(r->n >= n, "%s: only %zu decisions, expected at least %zu", what, r->n, n);
}

/* ---- replays without a cap ---------------------------------------------------------------- */

static const char *const exact_stats[] = {
    "reserved_bytes.all.peak",    "reserved_bytes.all.current",       "reserved_bytes.large_pool.peak",
    "reserved_bytes.small_pool.peak", "requested_bytes.all.peak",    "segment.all.peak",
    "segment.all.current",        "num_device_alloc",                 "num_device_free",
    "num_alloc_retries",          "num_ooms",                         "num_sync_all_streams",
    "oversize_allocations.peak",  "oversize_segments.peak",
};
static const char *const close_stats[] = {
    "allocated_bytes.all.peak", "allocated_bytes.large_pool.peak", "allocated_bytes.small_pool.peak",
    "active_bytes.all.peak",
};

static void against_recorded(const char *config, bool recorded_addresses) {
  REQUIRE(load_program());
  ab_events_t recorded;
  REQUIRE(load_decisions(config, &recorded));
  /* The CONFIG's PYTORCH_CUDA_ALLOC_CONF, from cnn_dyn.json. */
  char conf[256], pattern[128];
  snprintf(pattern, sizeof pattern, "\"%s\": {", config);
  const char *p = strstr(json.data, "\"runs\"");
  p = p ? strstr(p, pattern) : NULL;
  REQUIRE(p != NULL && (p = strstr(p, "\"PYTORCH_CUDA_ALLOC_CONF\": \"")) != NULL);
  p += strlen("\"PYTORCH_CUDA_ALLOC_CONF\": \"");
  snprintf(conf, sizeof conf, "%.*s", (int)(strchr(p, '"') - p), p);
  replay_t r;
  if (replay(conf, 0, recorded_addresses ? &recorded : NULL, &r)) {
    CHECK_MSG(r.run.status == AB_RUN_OK, "%s: %s", config, ab_run_status_name(r.run.status));
    same_decisions(&r, &recorded, SIZE_MAX, config);
    for (size_t i = 0; i < sizeof exact_stats / sizeof exact_stats[0]; i++) {
      int64_t want = json_number("runs", config, exact_stats[i]), got = mstat(&r, exact_stats[i]);
      CHECK_MSG(got == want, "%s: %s is %lld, PyTorch's %lld", config, exact_stats[i], (long long)got, (long long)want);
    }
    for (size_t i = 0; i < sizeof close_stats / sizeof close_stats[0]; i++) {
      int64_t want = json_number("runs", config, close_stats[i]), got = mstat(&r, close_stats[i]);
      double off = fabs((double)(got - want)) / (double)want;
      CHECK_MSG(got == want, "%s (%s addresses): %s is %lld, PyTorch's %lld (%.4f%% off)", config,
                recorded_addresses ? "recorded" : "the card's", close_stats[i], (long long)got, (long long)want, 100 * off);
    }
    /* The strategy's own statistics say the same. */
    CHECK_EQ(r.run.stats.reserved_bytes.peak, json_number("runs", config, "reserved_bytes.all.peak"));
    CHECK_EQ(r.run.stats.requested_bytes.peak, json_number("runs", config, "requested_bytes.all.peak"));
    CHECK_EQ(r.run.stats.num_device_alloc, json_number("runs", config, "num_device_alloc"));
  }
  replay_close(&r);
  ab_events_free(&recorded);
}

static void fidelity_default(void) { against_recorded("default", false); }
static void fidelity_split128(void) { against_recorded("split128", false); }
static void fidelity_split512(void) { against_recorded("split512", false); }
static void fidelity_expandable(void) { against_recorded("expandable", false); }
static void fidelity_pow2div4(void) { against_recorded("pow2div4", false); }
static void fidelity_gc06split256(void) { against_recorded("gc06split256", false); }
static void recorded_addresses_default(void) { against_recorded("default", true); }
static void recorded_addresses_split128(void) { against_recorded("split128", true); }
static void recorded_addresses_split512(void) { against_recorded("split512", true); }
static void recorded_addresses_expandable(void) { against_recorded("expandable", true); }
static void recorded_addresses_pow2div4(void) { against_recorded("pow2div4", true); }
static void recorded_addresses_gc06split256(void) { against_recorded("gc06split256", true); }

/* ---- the bisection of the smallest cap ---------------------------------------------------- */

/* PyTorch's highest reserved bytes in a recorded run: its segment decisions summed. */
static uint64_t recorded_peak_reserved(const ab_events_t *es) {
  int64_t now = 0, peak = 0;
  for (size_t i = 0; i < es->nsegs; i++) {
    bool up = es->segs[i].action == AB_TR_SEGMENT_ALLOC || es->segs[i].action == AB_TR_SEGMENT_MAP;
    now += up ? (int64_t)es->segs[i].bytes : -(int64_t)es->segs[i].bytes;
    if (now > peak) peak = now;
  }
  return (uint64_t)peak;
}

/* The trace of the run capped at `cap` bytes. */
static bool load_capped(const char *config, int64_t cap, ab_events_t *es) {
  char name[96];
  snprintf(name, sizeof name, "%s.cap%lld", config, (long long)cap);
  return load_decisions(name, es);
}

/* split128 under --budget: completes at min_pass_cap, OOM at max_fail_cap; with the recorded
 * addresses, every decision of both capped runs (frees, retries) is PyTorch's. */
static void bisection_split128(void) {
  REQUIRE(load_program());
  int64_t pass = json_number("min_cap_bisect", "split128", "min_pass_cap");
  int64_t fail = json_number("min_cap_bisect", "split128", "max_fail_cap");
  for (int addresses = 0; addresses < 2; addresses++) {
    ab_events_t at_pass, at_fail;
    REQUIRE(load_capped("split128", pass, &at_pass));
    REQUIRE(load_capped("split128", fail, &at_fail));
    replay_t r;
    if (replay("max_split_size_mb:128", (uint64_t)pass, addresses ? &at_pass : NULL, &r)) {
      CHECK_MSG(r.run.status == AB_RUN_OK, "split128 at %lld: %s %s", (long long)pass, ab_run_status_name(r.run.status),
                r.run.oom.message);
      if (addresses) same_decisions(&r, &at_pass, SIZE_MAX, "split128 at min_pass_cap");
    }
    replay_close(&r);
    if (replay("max_split_size_mb:128", (uint64_t)fail, addresses ? &at_fail : NULL, &r)) {
      CHECK_MSG(r.run.status == AB_RUN_OOM, "split128 at %lld: %s", (long long)fail, ab_run_status_name(r.run.status));
      CHECK_STR_CONTAINS(r.run.oom.message, "CUDA out of memory. Tried to allocate");
      if (addresses) same_decisions(&r, &at_fail, SIZE_MAX, "split128 at max_fail_cap");
    }
    replay_close(&r);
    ab_events_free(&at_pass);
    ab_events_free(&at_fail);
  }
}

/* expandable with PyTorch's own cap (per_process_memory_fraction, as
 * set_per_process_memory_fraction sets it): the bracket holds and every decision of both
 * capped runs is PyTorch's, including the maps that took reserved memory past the cap. */
static void bisection_expandable_fraction(void) {
  REQUIRE(load_program());
  int64_t caps[2] = {json_number("min_cap_bisect", "expandable", "min_pass_cap"),
                     json_number("min_cap_bisect", "expandable", "max_fail_cap")};
  for (int i = 0; i < 2; i++) {
    ab_events_t recorded;
    REQUIRE(load_capped("expandable", caps[i], &recorded));
    char conf[128];
    snprintf(conf, sizeof conf, "expandable_segments:True,per_process_memory_fraction:%.17g",
             (double)caps[i] / (double)AB_H200_TOTAL_BYTES);
    replay_t r;
    if (replay(conf, 0, NULL, &r)) {
      CHECK_MSG(r.run.status == (i == 0 ? AB_RUN_OK : AB_RUN_OOM), "%s: %s", conf, ab_run_status_name(r.run.status));
      same_decisions(&r, &recorded, SIZE_MAX, conf);
      CHECK_EQ(r.run.stats.reserved_bytes.peak, recorded_peak_reserved(&recorded));
    }
    replay_close(&r);
    ab_events_free(&recorded);
  }
}

/* expandable under --budget, a card that has only that many bytes (Note [Cap and pages] in
 * caching.c): at max_fail_cap, OOM with PyTorch's decisions; at min_pass_cap, PyTorch's
 * decisions up to the map that took PyTorch's reserved bytes past the cap, which this card
 * cannot hold; with the bytes PyTorch's passing run held at its highest, it completes. */
static void bisection_expandable_budget(void) {
  REQUIRE(load_program());
  int64_t pass = json_number("min_cap_bisect", "expandable", "min_pass_cap");
  int64_t fail = json_number("min_cap_bisect", "expandable", "max_fail_cap");
  ab_events_t at_pass, at_fail;
  REQUIRE(load_capped("expandable", pass, &at_pass));
  REQUIRE(load_capped("expandable", fail, &at_fail));
  replay_t r;
  if (replay("expandable_segments:True", (uint64_t)fail, NULL, &r)) {
    CHECK_MSG(r.run.status == AB_RUN_OOM, "expandable at %lld: %s", (long long)fail, ab_run_status_name(r.run.status));
    same_decisions(&r, &at_fail, SIZE_MAX, "expandable at max_fail_cap");
  }
  replay_close(&r);
  /* Where PyTorch's reserved bytes first passed the cap. */
  size_t over = 0;
  int64_t now = 0;
  for (; over < at_pass.nsegs; over++) {
    now += at_pass.segs[over].action == AB_TR_SEGMENT_MAP ? (int64_t)at_pass.segs[over].bytes : -(int64_t)at_pass.segs[over].bytes;
    if (now > pass) break;
  }
  CHECK_MSG(over < at_pass.nsegs, "PyTorch's run at min_pass_cap stayed under it");
  if (replay("expandable_segments:True", (uint64_t)pass, NULL, &r)) {
    CHECK_MSG(r.run.status == AB_RUN_OOM, "expandable at %lld on a card of that size: %s", (long long)pass,
              ab_run_status_name(r.run.status));
    same_decisions(&r, &at_pass, over, "expandable at min_pass_cap, before PyTorch passed the cap");
  }
  replay_close(&r);
  uint64_t held = recorded_peak_reserved(&at_pass);
  if (replay("expandable_segments:True", held, NULL, &r)) {
    CHECK_MSG(r.run.status == AB_RUN_OK, "expandable on a card of %llu bytes: %s", (unsigned long long)held,
              ab_run_status_name(r.run.status));
    CHECK_EQ(r.run.stats.reserved_bytes.peak, held);
  }
  replay_close(&r);
  ab_events_free(&at_pass);
  ab_events_free(&at_fail);
}

static const ab_test_t tests[] = {
    {"fidelity_default", fidelity_default},
    {"fidelity_split128", fidelity_split128},
    {"fidelity_split512", fidelity_split512},
    {"fidelity_expandable", fidelity_expandable},
    {"fidelity_pow2div4", fidelity_pow2div4},
    {"fidelity_gc06split256", fidelity_gc06split256},
    {"recorded_addresses_default", recorded_addresses_default},
    {"recorded_addresses_split128", recorded_addresses_split128},
    {"recorded_addresses_split512", recorded_addresses_split512},
    {"recorded_addresses_expandable", recorded_addresses_expandable},
    {"recorded_addresses_pow2div4", recorded_addresses_pow2div4},
    {"recorded_addresses_gc06split256", recorded_addresses_gc06split256},
    {"bisection_split128", bisection_split128},
    {"bisection_expandable_fraction", bisection_expandable_fraction},
    {"bisection_expandable_budget", bisection_expandable_budget},
};

AB_TEST_MAIN(tests)
