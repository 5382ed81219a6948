/* caching_gpu_test.c: caching, split-limited and expandable on the real GPU (label gpu;
 * skipped without one) decide as on the simulated card.
 *
 * Each runs the random workload and the replay of the recorded default snapshot (tests/data) on --device
 * cuda, recording its segment decisions and the addresses the driver gave. The same run on
 * sim:h200, handed those addresses (the address plan), must make the same decisions (action
 * and size, in order) and reach the same peak reserved and allocated bytes: the strategy is one
 * piece of code whatever the device. The recorded replay on the GPU must also make the
 * decisions PyTorch recorded under the preset's configuration. */
#include "kernels/device/device_open.h"
#include "harness/run/engine.h"
#include "strategies/caching/caching.h"
#include "strategies/registry.h"
#include "workloads/traces/trace.h"
#include "workloads/workload.h"

#include "tests/check.h"

#ifndef AB_TEST_DATA_DIR
#error "AB_TEST_DATA_DIR must name the folder of recorded runs (tests/data)"
#endif
#define RECORDED AB_TEST_DATA_DIR "/pytorch-2.11-h200/"

typedef struct decision_s {
  uint8_t action; /* a segment action (trace_actions.h) */
  ab_dptr_t addr;
  uint64_t bytes;
} decision_t;

typedef struct outcome_s {
  decision_t *d;
  size_t n, cap;
  ab_run_status_t status;
  int64_t peak_reserved, peak_allocated;
  char device[96];
} outcome_t;

static void on_segment(void *ctx, ab_trace_action_t ev, ab_dptr_t addr, uint64_t bytes, unsigned stream) {
  outcome_t *o = ctx;
  (void)stream;
  if (o->n == o->cap) {
    o->cap = o->cap ? 2 * o->cap : 1024;
    o->d = realloc(o->d, o->cap * sizeof *o->d);
  }
  if (o->d) o->d[o->n++] = (decision_t){(uint8_t)ev, addr, bytes};
}

/* Runs es through strategy on device (with an address plan on sim). */
static bool run(const char *device, const char *strategy, const ab_events_t *es, const outcome_t *addresses_of,
                outcome_t *o) {
  memset(o, 0, sizeof *o);
  ab_device_config_t cfg = {0};
  ab_addr_hint_t *plan = NULL;
  if (addresses_of) {
    plan = malloc((addresses_of->n + 1) * sizeof *plan);
    if (plan == NULL) return false;
    for (size_t i = 0; i < addresses_of->n; i++)
      if (addresses_of->d[i].action == AB_TR_SEGMENT_ALLOC)
        plan[cfg.plan_len++] = (ab_addr_hint_t){addresses_of->d[i].bytes, addresses_of->d[i].addr};
    cfg.plan = plan;
  }
  ab_device_t *dev = NULL;
  ab_strategy_t *s = NULL;
  ab_diag_t d = {""};
  ab_status st = ab_device_open(device, &cfg, &dev, &d);
  free(plan);
  if (st != AB_OK || ab_strategy_create(strategy, dev, NULL, &s, &d) != AB_OK) {
    CHECK_MSG(false, "%s on %s: %s", strategy, device, d.msg);
    ab_device_close(dev, NULL);
    return false;
  }
  snprintf(o->device, sizeof o->device, "%s", dev->name);
  ab_strategy_observe(s, on_segment, o);
  ab_run_t r;
  ab_run_opts_t opts = ab_run_defaults();
  opts.time_calls = false;
  opts.timeline = false;
  bool ok = ab_run_prepare(&r, es) == AB_OK;
  if (ok) {
    st = ab_engine_replay(es, s, &opts, &r);
    CHECK_MSG(st == AB_OK, "%s on %s: %s", strategy, device, r.message);
    o->status = r.status;
    o->peak_reserved = r.stats.reserved_bytes.peak;
    o->peak_allocated = r.stats.allocated_bytes.peak;
    ab_run_release(&r);
    ok = st == AB_OK;
  }
  ab_strategy_destroy(s);
  CHECK_MSG(ab_device_close(dev, &d) == AB_OK, "%s on %s: %s", strategy, device, d.msg);
  return ok;
}

static size_t first_difference(const outcome_t *a, const outcome_t *b) {
  size_t n = a->n < b->n ? a->n : b->n;
  for (size_t i = 0; i < n; i++)
    if (a->d[i].action != b->d[i].action || a->d[i].bytes != b->d[i].bytes) return i;
  return a->n == b->n ? SIZE_MAX : n;
}

/* The GPU run, then the simulated card with the GPU's addresses, and without them (reported). */
static void gpu_equals_sim(const char *strategy, const ab_events_t *es, const ab_events_t *recorded) {
  outcome_t gpu, sim, plain;
  if (!run("cuda", strategy, es, NULL, &gpu)) return;
  if (run("sim:h200", strategy, es, &gpu, &sim)) {
    size_t at = first_difference(&gpu, &sim);
    CHECK_MSG(at == SIZE_MAX, "%s on %s: %zu decisions, on sim %zu; first difference at %zu", strategy, gpu.device,
              gpu.n, sim.n, at);
    CHECK_EQ(gpu.status, sim.status);
    CHECK_EQ(gpu.peak_reserved, sim.peak_reserved);
    CHECK_EQ(gpu.peak_allocated, sim.peak_allocated);
  }
  if (run("sim:h200", strategy, es, NULL, &plain)) {
    size_t at = first_difference(&gpu, &plain);
    printf("  %s on %s: %zu decisions, peak reserved %lld, peak allocated %lld; sim with its own addresses: %s, peak "
           "reserved %lld, peak allocated %lld\n",
           strategy, es->source, gpu.n, (long long)gpu.peak_reserved, (long long)gpu.peak_allocated,
           at == SIZE_MAX ? "same decisions" : "different decisions", (long long)plain.peak_reserved,
           (long long)plain.peak_allocated);
  }
  if (recorded) {
    bool same = gpu.n == recorded->nsegs;
    for (size_t i = 0; same && i < gpu.n; i++)
      same = gpu.d[i].action == recorded->segs[i].action && gpu.d[i].bytes == recorded->segs[i].bytes;
    CHECK_MSG(same, "%s on %s: its %zu decisions are not the %zu PyTorch recorded", strategy, gpu.device, gpu.n,
              recorded->nsegs);
  }
  free(gpu.d);
  free(sim.d);
  free(plain.d);
}

static const char *const strategies[] = {"caching", "split-limited", "expandable"};
static const char *const recorded_configs[] = {"default", "split128", "expandable"};

static void random_workload(void) {
  if (!ab_device_cuda_usable()) SKIP("no usable GPU");
  ab_events_t es;
  ab_diag_t d = {""};
  REQUIRE(ab_workload_build("random", 42, &es, &d) == AB_OK);
  for (size_t i = 0; i < 3; i++) gpu_equals_sim(strategies[i], &es, NULL);
  ab_events_free(&es);
}

static void recorded_replay(void) {
  if (!ab_device_cuda_usable()) SKIP("no usable GPU");
  ab_events_t es;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_trace_load(RECORDED "cnn_dyn.default.pickle.gz", NULL, &es, NULL, &d) == AB_OK, "%s", d.msg);
  for (size_t i = 0; i < 3; i++) {
    char path[1024];
    snprintf(path, sizeof path, RECORDED "cnn_dyn.%s.segments.csv.gz", recorded_configs[i]);
    ab_events_t recorded;
    static const ab_trace_opts_t decisions = {.device = -1, .decisions_only = true}; /* no allocations in these files */
    REQUIRE_MSG(ab_trace_load(path, &decisions, &recorded, NULL, &d) == AB_OK, "%s", d.msg);
    gpu_equals_sim(strategies[i], &es, &recorded);
    ab_events_free(&recorded);
  }
  ab_events_free(&es);
}

static const ab_test_t tests[] = {
    {"random_workload", random_workload},
    {"recorded_replay", recorded_replay},
};

AB_TEST_MAIN(tests)
