/* workloads_test.c: the generators: determinism, calibration against PyTorch's recorded
 * peaks, the ZeRO formula, every workload through every strategy, the fragmenter's OOM. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "kernels/base/clock.h"
#include "kernels/device/device.h"
#include "kernels/device/device_open.h"
#include "harness/run/engine.h"
#include "strategies/registry.h"
#include "strategies/strategy.h"
#include "tests/check.h"
#include "workloads/workload.h"

/* gpu_measurements.md: the transformer's peak allocated under PyTorch 2.11 on the H200. */
#define TRANSFORMER_PEAK_BYTES 32016000000.0
/* fixtures/pytorch-2.11-h200/cnn_dyn.json, default run: requested_bytes.all.peak (peak
 * allocated, 7 815 677 952, adds PyTorch's 512-byte rounding). */
#define CNN_PEAK_REQUESTED_BYTES 7810783516.0

static bool build(const char *spec, uint64_t seed, ab_events_t *es) {
  ab_diag_t diag = {""};
  ab_status st = ab_workload_build(spec, seed, es, &diag);
  CHECK_MSG(st == AB_OK, "%s: %s", spec, diag.msg);
  return st == AB_OK;
}

/* Highest sum of live requested bytes: what every strategy reports as peak requested. */
static uint64_t peak_requested(const ab_events_t *es) {
  uint64_t live = 0, peak = 0;
  for (size_t i = 0; i < es->n; i++) {
    const ab_event_t *e = &es->ev[i];
    if (e->kind == AB_EV_ALLOC) {
      live += e->bytes;
      if (live > peak) peak = live;
    } else if (e->kind == AB_EV_FREE && e->aux != AB_FREE_REQUEST) {
      live -= e->bytes;
    }
  }
  return peak;
}

/* Live bytes per tag just before event `at`. */
static void live_by_tag(const ab_events_t *es, size_t at, uint64_t bytes[AB_TAG_COUNT]) {
  memset(bytes, 0, sizeof(uint64_t) * AB_TAG_COUNT);
  uint8_t *tag = calloc(es->nids ? es->nids : 1, 1);
  if (tag == NULL) return;
  for (size_t i = 0; i < at && i < es->n; i++) {
    const ab_event_t *e = &es->ev[i];
    if (e->kind == AB_EV_ALLOC) {
      tag[e->id] = e->aux;
      bytes[e->aux] += e->bytes;
    } else if (e->kind == AB_EV_FREE && e->aux != AB_FREE_REQUEST) {
      bytes[tag[e->id]] -= e->bytes;
    }
  }
  free(tag);
}

/* ---- determinism --------------------------------------------------------------------------- */

static const char *const small_specs[] = {
    "dynamic-shapes:steps=4,layers=2",
    "dynamic-shapes:steps=4,layers=2,precision=fp16,seq=lognormal,optimizer=sgd",
    "dynamic-shapes:steps=3,layers=2,precision=fp32,flash=false,checkpoint=true,tokens_min=1024,tokens_max=4096,seq_max=512",
    "cnn-dynamic:steps=3",
    "mixed-precision:steps=3,layers=2",
    "mixed-precision:steps=3,layers=2,dtype=bf16,checkpoint=true",
    "zero:steps=3,layers=2,stage=1",
    "zero:steps=3,layers=2,stage=2,overlap_comm=true,reduce_bucket=1000000",
    "zero:steps=3,layers=2,stage=3,max_reuse=0,dtype=bf16",
    "random:ops=20000",
    "fragmenter",
    "serve:hidden=256,layers=2,heads=4,kv_heads=2,vocab=1000,ffn=512,max_batch=16,max_tokens=512,card=1GiB,requests=6,prompt_max=200,gen_max=20",
};

/* The workloads whose stream depends on the seed through drawn shapes or sizes. */
static bool drawn(const char *spec) {
  return strncmp(spec, "dynamic-shapes", 14) == 0 || strncmp(spec, "cnn-dynamic", 11) == 0 ||
         strncmp(spec, "random", 6) == 0 || strncmp(spec, "serve", 5) == 0;
}

static void test_determinism(void) {
  for (size_t i = 0; i < sizeof small_specs / sizeof small_specs[0]; i++) {
    ab_events_t a, b, c;
    if (!build(small_specs[i], 42, &a)) continue;
    if (build(small_specs[i], 42, &b)) {
      CHECK_MSG(ab_events_hash(&a) == ab_events_hash(&b), "%s: same seed, different stream", small_specs[i]);
      ab_events_free(&b);
    }
    if (build(small_specs[i], 7, &c)) {
      if (drawn(small_specs[i]))
        CHECK_MSG(ab_events_hash(&a) != ab_events_hash(&c), "%s: another seed, the same stream", small_specs[i]);
      ab_events_free(&c);
    }
    ab_events_free(&a);
  }
}

/* Every generator marks steps and describes kernels (validated by ab_events_finish). */
static void test_steps_and_kernels(void) {
  for (size_t i = 0; i < sizeof small_specs / sizeof small_specs[0]; i++) {
    if (strncmp(small_specs[i], "random", 6) == 0) continue; /* RMM's sequence: no compute */
    ab_events_t es;
    if (!build(small_specs[i], 42, &es)) continue;
    CHECK_MSG(es.nsteps > 0 && es.nkernels > 0, "%s: %u steps, %zu kernels", small_specs[i], es.nsteps, es.nkernels);
    ab_events_free(&es);
  }
}

static void test_bad_arguments(void) {
  static const char *const bad[] = {"dynamic-shapes:layers=2,bogus=1", "cnn-dynamic:side_min=100",
                                    "zero:rank=8", "mixed-precision:heads=5", "fragmenter:pairs=0",
                                    "dynamic-shapes:seq_min=900,seq_max=100",
                                    /* products that would wrap past 2^64 (Note [Sizes that fit in 64 bits]) */
                                    "mixed-precision:batch=1048576,seq=1048576,vocab=4194304",
                                    "zero:batch=1048576,seq=1048576,flash=false", "dynamic-shapes:workspace=16EiB",
                                    "cnn-dynamic:workspace=18446744073709551615",
                                    "random:max_live=16777216,min=1TiB,max=1TiB"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ab_events_t es;
    ab_diag_t diag = {""};
    CHECK_MSG(ab_workload_build(bad[i], 42, &es, &diag) == AB_ERR_INVALID, "%s accepted", bad[i]);
    CHECK_STR_CONTAINS(diag.msg, "position");
  }
}

/* A repeated key is refused by position, in every workload that takes key=value arguments. */
static void test_repeated_keys_refused(void) {
  static const char *const twice[] = {"dynamic-shapes:layers=12,layers=13", "random:ops=10,max=1MiB,ops=20",
                                      "fragmenter:pairs=2,pairs=2"};
  for (size_t i = 0; i < sizeof twice / sizeof twice[0]; i++) {
    ab_events_t es;
    ab_diag_t diag = {""};
    CHECK_MSG(ab_workload_build(twice[i], 42, &es, &diag) == AB_ERR_INVALID, "%s accepted", twice[i]);
    CHECK_STR_CONTAINS(diag.msg, "given again (first at position 1)");
  }
  /* Arguments refused while the size is estimated are named where the user wrote them. */
  ab_events_t es;
  ab_diag_t diag = {""};
  CHECK(ab_workload_build("dynamic-shapes:steps=1000,bogus=1", 42, &es, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "'steps=1000,bogus=1': at position 12: unknown key 'bogus'");
}

/* The estimate made before generating (Note [A workload's size before it is generated]) is
 * within a quarter of what the generator makes, at sizes far from the probes'. */
static void test_estimate_is_close(void) {
  static const char *const specs[] = {
      "dynamic-shapes:steps=12,layers=9,d_model=256,heads=4,vocab=1000",
      "dynamic-shapes:steps=7,layers=5,precision=fp16,checkpoint=true,d_model=128,heads=2,vocab=500",
      "mixed-precision:steps=9,layers=6,d_model=256,heads=4,vocab=1000,batch=2,seq=64",
      "zero:steps=5,layers=7,stage=3,d_model=256,heads=4,vocab=1000,batch=2,seq=64",
      "zero:steps=4,layers=6,stage=2,d_model=256,heads=4,vocab=1000,batch=2,seq=64",
      "cnn-dynamic:steps=9,batch=2,side_max=256",
      "random:ops=50000",
      "fragmenter:steps=40,pairs=9",
  };
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    ab_workload_size_t est;
    ab_diag_t diag = {""};
    REQUIRE_MSG(ab_workload_estimate(specs[i], 42, &est, &diag) == AB_OK, "%s: %s", specs[i], diag.msg);
    ab_events_t es;
    if (!build(specs[i], 42, &es)) continue;
    double events = (double)es.n, kernels = (double)es.nkernels, ids = (double)es.nids;
    CHECK_MSG(fabs(est.events - events) <= 0.25 * events, "%s: estimated %.0f events, made %.0f", specs[i], est.events, events);
    CHECK_MSG(fabs(est.kernels - kernels) <= 0.25 * kernels + 1, "%s: estimated %.0f kernels, made %.0f", specs[i], est.kernels,
              kernels);
    CHECK_MSG(fabs(est.ids - ids) <= 0.25 * ids, "%s: estimated %.0f allocations, made %.0f", specs[i], est.ids, ids);
    ab_events_free(&es);
  }
}

/* A workload that will not fit in the host memory it may take is refused before it is
 * generated, naming its scaling keys; within it, it is built. */
static void test_too_big_refused_before_generating(void) {
  ab_build_opts_t small = {.host_bytes = 64ULL << 20};
  ab_events_t es;
  ab_diag_t diag = {""};
  double t0 = ab_clock_s();
  CHECK(ab_workload_build_with("dynamic-shapes:steps=1000000,layers=1024", 42, &small, &es, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "lower steps or layers");
  CHECK(ab_workload_build_with("cnn-dynamic:steps=100000", 42, &small, &es, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "lower steps");
  CHECK(ab_workload_build_with("random:ops=4294967296", 42, &small, &es, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "lower ops");
  CHECK_MSG(ab_clock_s() - t0 < 2.0, "refusing took %.1f s: the workloads were generated", ab_clock_s() - t0);
  REQUIRE_MSG(ab_workload_build_with("cnn-dynamic:steps=3,batch=2", 42, &small, &es, &diag) == AB_OK, "%s", diag.msg);
  CHECK(ab_events_bytes(&es) <= small.host_bytes);
  ab_events_free(&es);
}

/* The stop flag ends generation early, and a stream that outgrows its limit stops there: the
 * generators end at their next step instead of running on. */
static void test_generation_stops(void) {
  static volatile sig_atomic_t stop = 1;
  ab_build_opts_t stopped = {.stop = &stop};
  ab_events_t es;
  ab_diag_t diag = {""};
  double t0 = ab_clock_s();
  CHECK(ab_workload_build_with("random:ops=100000000", 42, &stopped, &es, &diag) == AB_ERR_INTERNAL);
  CHECK_STR_CONTAINS(diag.msg, "stopped");
  CHECK(ab_workload_build_with("dynamic-shapes:steps=100000", 42, &stopped, &es, &diag) == AB_ERR_INTERNAL);
  CHECK_MSG(ab_clock_s() - t0 < 2.0, "stopping took %.1f s", ab_clock_s() - t0);
  /* Past the estimate's check (one step fits), the limit still holds while generating. */
  ab_events_init(&es);
  es.max_bytes = 1 << 20;
  const ab_workload_t *w = ab_workload_find("random");
  t0 = ab_clock_s();
  CHECK(w->generate("ops=100000000", 42, &es, &diag) == AB_OK);
  CHECK(es.failed && es.halted == AB_EVENTS_OVER_LIMIT && ab_events_bytes(&es) <= es.max_bytes);
  CHECK_MSG(ab_clock_s() - t0 < 2.0, "the generator ran on for %.1f s after its stream failed", ab_clock_s() - t0);
  CHECK(ab_events_finish(&es, &diag) == AB_ERR_INVALID);
  ab_events_free(&es);
}

/* ---- calibration ---------------------------------------------------------------------------- */

static void test_calibration_transformer(void) {
  ab_events_t es;
  double t0 = ab_clock_s();
  if (!build("dynamic-shapes", 42, &es)) return;
  double dt = ab_clock_s() - t0;
  double peak = (double)peak_requested(&es), off = peak / TRANSFORMER_PEAK_BYTES - 1;
  printf("  dynamic-shapes (defaults, seed 42): %u steps, %zu events in %.3f s; peak requested %.3f GB, "
         "PyTorch peak allocated %.3f GB: %+.1f%%\n",
         es.nsteps, es.n, dt, peak / 1e9, TRANSFORMER_PEAK_BYTES / 1e9, 100 * off);
  CHECK_MSG(fabs(off) <= 0.15, "peak requested %.3f GB is %+.1f%% off PyTorch's", peak / 1e9, 100 * off);
  ab_events_free(&es);
}

static void test_calibration_cnn(void) {
  ab_events_t es;
  if (!build("cnn-dynamic", 42, &es)) return;
  double peak = (double)peak_requested(&es), off = peak / CNN_PEAK_REQUESTED_BYTES - 1;
  printf("  cnn-dynamic (defaults, seed 42): peak requested %.4f GB, PyTorch's %.4f GB: %+.3f%%\n", peak / 1e9,
         CNN_PEAK_REQUESTED_BYTES / 1e9, 100 * off);
  CHECK_MSG(fabs(off) <= 0.15, "peak requested %.3f GB is %+.1f%% off PyTorch's", peak / 1e9, 100 * off);
  ab_events_free(&es);
}

/* ---- ZeRO ------------------------------------------------------------------------------------ */

/* Model state (parameters, gradients, optimizer state) live at the last optimizer update. */
static uint64_t model_state_at_step(const ab_events_t *es) {
  size_t at = es->n;
  for (size_t i = es->n; i-- > 0;)
    if (es->ev[i].kind == AB_EV_KERNEL && es->kernels[es->ev[i].id].op == AB_K_ADAM) {
      at = i;
      break;
    }
  CHECK_MSG(at < es->n, "%s: no optimizer step", es->source);
  uint64_t bytes[AB_TAG_COUNT];
  live_by_tag(es, at, bytes);
  return bytes[AB_TAG_PARAM] + bytes[AB_TAG_GRAD] + bytes[AB_TAG_OPTIM];
}

static void test_zero_formula(void) {
  /* Every parameter's size divides by N = 8, so partitions are exact: Psi = 1024 d + L (12 d^2
   * + 13 d) + 2 d. */
  const uint64_t N = 8, d = 256, L = 2, V = 1024, K = 12;
  const uint64_t psi = V * d + L * (12 * d * d + 13 * d) + 2 * d;
  for (unsigned stage = 0; stage <= 3; stage++) {
    char spec[256];
    snprintf(spec, sizeof spec,
             "zero:stage=%u,world=%llu,rank=3,layers=%llu,d_model=%llu,heads=4,vocab=%llu,batch=2,seq=128,steps=3,"
             "persistence_threshold=0,reduce_bucket=100000,dtype=bf16",
             stage, (unsigned long long)N, (unsigned long long)L, (unsigned long long)d, (unsigned long long)V);
    ab_events_t es;
    if (!build(spec, 42, &es)) continue;
    uint64_t got = model_state_at_step(&es);
    uint64_t want = stage == 0   ? (2 + 2 + K) * psi
                    : stage == 1 ? 2 * psi + 2 * psi + K * psi / N
                    : stage == 2 ? 2 * psi + (2 + K) * psi / N
                                 : (2 + 2 + K) * psi / N;
    printf("  zero stage %u, N=%llu, Psi=%llu: model state %llu bytes, formula %llu\n", stage, (unsigned long long)N,
           (unsigned long long)psi, (unsigned long long)got, (unsigned long long)want);
    CHECK_EQ(got, want);
    ab_events_free(&es);
  }
  /* The persistence threshold (1e5 elements) keeps small parameters whole on every rank, in
   * the half dtype, on top: here the LayerNorms and biases (13 d per block, 2 d for the final
   * LayerNorm) and the attention projections (d^2 = 65536 elements). */
  char spec[256];
  snprintf(spec, sizeof spec,
           "zero:stage=3,world=8,layers=2,d_model=256,heads=4,vocab=1024,batch=2,seq=128,steps=3,reduce_bucket=100000,"
           "dtype=bf16");
  ab_events_t es;
  if (build(spec, 42, &es)) {
    CHECK_EQ(model_state_at_step(&es), (2 + 2 + K) * psi / N + 2 * (L * (13 * d + d * d) + 2 * d));
    ab_events_free(&es);
  }
}

/* ---- every workload through every strategy ----------------------------------------------------- */

/* A small trace in allocbench's CSV format, for the replay workload. */
static bool write_trace(char *path, size_t size) {
  snprintf(path, size, "/tmp/ab_workloads_test_XXXXXX");
  int fd = mkstemp(path);
  if (fd < 0) return false;
  FILE *f = fdopen(fd, "w");
  if (f == NULL) return false;
  fprintf(f, "action,addr,size,stream,time_us\n");
  for (int i = 0; i < 100; i++) fprintf(f, "alloc,%d,%d,0,%d\n", 4096 + i * 65536, 1000 + i * 700, i);
  for (int i = 0; i < 100; i += 2) fprintf(f, "free_requested,%d,%d,0,%d\nfree_completed,%d,%d,0,%d\n", 4096 + i * 65536,
                                          1000 + i * 700, 200 + i, 4096 + i * 65536, 1000 + i * 700, 200 + i);
  return fclose(f) == 0;
}

static void test_every_workload_every_strategy(void) {
  char trace[64];
  REQUIRE(write_trace(trace, sizeof trace));
  size_t nw, ns;
  const ab_workload_t *const *workloads = ab_workload_registry(&nw);
  const ab_strategy_entry_t *strategies = ab_strategy_registry(&ns);
  for (size_t w = 0; w < nw; w++) {
    char spec[128];
    snprintf(spec, sizeof spec, "%s%s%s", workloads[w]->name, strcmp(workloads[w]->name, "replay") == 0 ? ":" : "",
             strcmp(workloads[w]->name, "replay") == 0 ? trace : "");
    ab_events_t es;
    if (!build(spec, 42, &es)) continue;
    ab_run_t run;
    REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
    for (size_t s = 0; s < ns; s++) {
      if (strategies[s].hidden) continue; /* test doubles, such as one that overlaps on purpose */
      ab_device_config_t cfg = {.cost_model = true};
      ab_device_t *dev = NULL;
      ab_strategy_t *strat = NULL;
      ab_diag_t diag = {""};
      ab_status st = ab_device_open("sim", &cfg, &dev, &diag);
      if (st == AB_OK) st = ab_strategy_create(strategies[s].name, dev, NULL, &strat, &diag);
      CHECK_MSG(st == AB_OK, "%s: %s", strategies[s].name, diag.msg);
      if (st == AB_OK) {
        st = ab_engine_replay(&es, strat, NULL, &run);
        CHECK_MSG(st == AB_OK && run.status != AB_RUN_ERROR, "%s on %s: %s", spec, strategies[s].name, run.message);
      }
      ab_strategy_destroy(strat);
      ab_diag_t leak = {""};
      if (dev != NULL) {
        st = ab_device_close(dev, &leak);
        CHECK_MSG(st == AB_OK, "%s on %s: %s", spec, strategies[s].name, leak.msg);
      }
    }
    ab_run_release(&run);
    ab_events_free(&es);
  }
  unlink(trace);
}

/* The kernels each generator describes run on a GPU: every KERNEL event launches. */
static void test_kernels_on_device(void) {
  if (strncmp(ab_test_device, "cuda", 4) != 0) SKIP("kernels run on a GPU only (--device=cuda)");
  if (!ab_device_cuda_usable()) SKIP("no usable GPU");
  for (size_t i = 0; i < sizeof small_specs / sizeof small_specs[0]; i++) {
    ab_events_t es;
    if (!build(small_specs[i], 42, &es)) continue;
    ab_run_t run;
    REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
    ab_device_config_t cfg = {.cost_model = true};
    ab_device_t *dev = NULL;
    ab_strategy_t *strat = NULL;
    ab_diag_t diag = {""};
    ab_status st = ab_device_open(ab_test_device, &cfg, &dev, &diag);
    if (st == AB_OK) st = ab_strategy_create("raw", dev, NULL, &strat, &diag);
    if (st == AB_OK) st = ab_engine_replay(&es, strat, NULL, &run);
    CHECK_MSG(st == AB_OK && run.status == AB_RUN_OK, "%s: %s %s", small_specs[i], diag.msg, run.message);
    CHECK_MSG(run.kernels_launched == es.nkernels, "%s: %llu of %zu kernels launched", small_specs[i],
              (unsigned long long)run.kernels_launched, es.nkernels);
    printf("  %s on %s: %llu kernels, %.1f ms\n", small_specs[i], ab_test_device,
           (unsigned long long)run.kernels_launched, run.kernel_ms);
    ab_strategy_destroy(strat);
    ab_device_close(dev, NULL);
    ab_run_release(&run);
    ab_events_free(&es);
  }
}

/* ---- the fragmenter --------------------------------------------------------------------------- */

static ab_status run_with_budget(const ab_events_t *es, const char *strategy, uint64_t budget, ab_run_t *run) {
  ab_device_config_t cfg = {.budget_bytes = budget, .cost_model = true};
  ab_device_t *dev = NULL;
  ab_strategy_t *s = NULL;
  ab_diag_t diag = {""};
  ab_status st = ab_device_open("sim", &cfg, &dev, &diag);
  if (st == AB_OK) st = ab_strategy_create(strategy, dev, NULL, &s, &diag);
  if (st == AB_OK) st = ab_engine_replay(es, s, NULL, run);
  ab_strategy_destroy(s);
  ab_device_close(dev, NULL);
  return st;
}

/* The pattern itself, whatever the strategies: it suggests its budget, a strategy that
 * never caches (raw) fits in it, and at the large request there was room for it. */
static void test_fragmenter_pattern(void) {
  ab_events_t es;
  if (!build("fragmenter", 42, &es)) return;
  CHECK_EQ(es.suggested_budget, 288ULL << 20);
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  CHECK(run_with_budget(&es, "raw", es.suggested_budget, &run) == AB_OK);
  CHECK_EQ(run.status, AB_RUN_OK);
  CHECK(peak_requested(&es) <= es.suggested_budget);
  ab_run_release(&run);
  ab_events_free(&es);
}

static void test_fragmenter_outcome(void) {
  static const char *const needed[] = {"caching", "expandable"};
  for (size_t i = 0; i < 2; i++)
    if (ab_strategy_find(needed[i]) == NULL) SKIP("strategy '%s' is not registered yet", needed[i]);
  ab_events_t es;
  if (!build("fragmenter", 42, &es)) return;
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  CHECK(run_with_budget(&es, "caching", es.suggested_budget, &run) == AB_OK);
  printf("  fragmenter under caching: %s, oom_kind %s\n", ab_run_status_name(run.status),
         ab_oom_kind_name(run.oom.kind));
  CHECK_EQ(run.status, AB_RUN_OOM);
  CHECK_EQ(run.oom.kind, AB_OOM_FRAGMENTATION);
  CHECK(run_with_budget(&es, "expandable", es.suggested_budget, &run) == AB_OK);
  printf("  fragmenter under expandable: %s\n", ab_run_status_name(run.status));
  CHECK_EQ(run.status, AB_RUN_OK);
  ab_run_release(&run);
  ab_events_free(&es);
}

static const ab_test_t tests[] = {
    {"repeated_keys_refused", test_repeated_keys_refused},
    {"estimate_is_close", test_estimate_is_close},
    {"too_big_refused_before_generating", test_too_big_refused_before_generating},
    {"generation_stops", test_generation_stops},
    {"determinism", test_determinism},
    {"steps_and_kernels", test_steps_and_kernels},
    {"bad_arguments", test_bad_arguments},
    {"calibration_transformer", test_calibration_transformer},
    {"calibration_cnn", test_calibration_cnn},
    {"zero_formula", test_zero_formula},
    {"every_workload_every_strategy", test_every_workload_every_strategy},
    {"kernels_on_device", test_kernels_on_device},
    {"fragmenter_pattern", test_fragmenter_pattern},
    {"fragmenter_outcome", test_fragmenter_outcome},
};
AB_TEST_MAIN(tests)
