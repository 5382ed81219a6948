/* serve_test.c: the serve workload's stream (workloads/serve.c), recomputed from its events:
 * the graph captures' pool calls, the weights from the model's shapes, the KV cache from the
 * profiled peak, determinism, and refusals. The vLLM start-up case is serve_test.sh's. */
#include "tests/check.h"
#include "workloads/workload.h"

/* A small dense model; sizes below are derived from these. */
#define D 256
#define LAYERS 3
#define HEADS 4
#define KV_HEADS 2
#define VOCAB 1000
#define FFN 512
#define CARD_BYTES (1ULL << 30)
#define UTIL 0.5
#define SPEC                                                                                             \
  "serve:hidden=256,layers=3,heads=4,kv_heads=2,vocab=1000,ffn=512,max_batch=24,max_tokens=512,card=1GiB," \
  "util=0.5,requests=12,prompt_max=300,gen_max=40"

static bool build(const char *spec, uint64_t seed, ab_events_t *es) {
  ab_diag_t diag = {""};
  ab_status st = ab_workload_build(spec, seed, es, &diag);
  CHECK_MSG(st == AB_OK, "%s: %s", spec, diag.msg);
  return st == AB_OK;
}

/* Captures open and close in turn on the one shared pool; what a capture allocates is freed
 * inside it except the graph's output; after the last capture nothing reaches the pool. */
static void test_pool_events_balanced(void) {
  ab_events_t es;
  if (!build(SPEC, 1, &es)) return;
  bool open = false;
  size_t begins = 0, ends = 0, last_end = 0;
  uint32_t *freed_at = calloc(es.nids, sizeof *freed_at); /* event index + 1 of its FREE */
  size_t *alloc_at = calloc(es.nids, sizeof *alloc_at);
  REQUIRE(freed_at && alloc_at);
  for (size_t i = 0; i < es.n; i++) {
    const ab_event_t *e = &es.ev[i];
    if (e->kind == AB_EV_ALLOC) alloc_at[e->id] = i;
    if (e->kind == AB_EV_FREE && e->aux != AB_FREE_REQUEST) freed_at[e->id] = (uint32_t)i + 1;
    if (e->kind != AB_EV_POOL) continue;
    CHECK(e->id == 1);
    if (e->aux == AB_POOL_BEGIN) {
      CHECK(!open);
      open = true;
      begins++;
    } else {
      CHECK(e->aux == AB_POOL_END);
      CHECK(open);
      open = false;
      ends++;
      last_end = i;
    }
  }
  CHECK(!open);
  CHECK(begins > 1 && begins == ends);
  CHECK(es.npools == 1);
  /* Per capture: every allocation is on the capture's stream and all but one die inside. */
  size_t begin = 0;
  for (size_t i = 0; i < es.n; i++) {
    const ab_event_t *e = &es.ev[i];
    if (e->kind == AB_EV_POOL && e->aux == AB_POOL_BEGIN) begin = i;
    if (e->kind != AB_EV_POOL || e->aux != AB_POOL_END) continue;
    size_t outlive = 0, allocs = 0;
    for (size_t j = begin; j < i; j++) {
      const ab_event_t *a = &es.ev[j];
      if (a->kind != AB_EV_ALLOC) continue;
      allocs++;
      CHECK(a->stream == es.ev[begin].stream);
      if (freed_at[a->id] == 0 || freed_at[a->id] - 1 > i) outlive++;
    }
    CHECK(allocs > 1);
    CHECK_MSG(outlive == 1, "capture ending at event %zu: %zu allocations outlive it", i, outlive);
  }
  /* Replays: nothing after the last capture allocates on the capture stream. */
  size_t decode_allocs = 0;
  for (size_t i = last_end + 1; i < es.n; i++)
    if (es.ev[i].kind == AB_EV_ALLOC && es.ev[i].stream == es.ev[last_end].stream) decode_allocs++;
  CHECK(decode_allocs == 0);
  CHECK(es.nsteps > begins + LAYERS); /* requests were served after the captures */
  free(freed_at);
  free(alloc_at);
  ab_events_free(&es);
}

/* The weights are the model's shapes in bf16: everything tagged PARAM. */
/* vLLM's capture sizes: 1, 2, 4, every 8 below 256, every 16 from 256, up to
 * min(2 x max_batch, 512, max_tokens), the largest captured first: counted from the pool's
 * BEGIN calls, the largest from the first graph's kept output (size x hidden x dtype). */
static void test_capture_sizes_as_vllm(void) {
  static const struct {
    const char *spec;
    size_t captures;
    uint64_t largest;
  } cases[] = {
      {SPEC, 9, 48},                                               /* 1 2 4 8 .. 48 */
      {"serve:hidden=256,layers=3,heads=4,kv_heads=2,vocab=1000,ffn=512,max_batch=24,max_tokens=40,card=1GiB,"
       "util=0.5,requests=4,prompt_max=30,gen_min=4,gen_max=8",
       8, 40},                                                      /* capped by max_tokens */
      {"serve:hidden=256,layers=1,heads=4,kv_heads=2,vocab=1000,ffn=512,max_batch=300,max_tokens=8192,card=4GiB,"
       "util=0.5,requests=4,prompt_max=30,gen_min=4,gen_max=8",
       3 + 31 + 17, 512},                                           /* up to 512 */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ab_events_t es;
    if (!build(cases[c].spec, 1, &es)) continue;
    size_t begins = 0;
    uint64_t first_output = 0;
    bool in_first = false;
    for (size_t i = 0; i < es.n; i++) {
      const ab_event_t *e = &es.ev[i];
      if (e->kind == AB_EV_POOL) {
        in_first = e->aux == AB_POOL_BEGIN && begins++ == 0;
        continue;
      }
      /* The first capture's last allocation is its output, the one it keeps. */
      if (in_first && e->kind == AB_EV_ALLOC) first_output = e->bytes;
    }
    CHECK_MSG(begins == cases[c].captures, "%s: %zu captures, expected %zu", cases[c].spec, begins, cases[c].captures);
    CHECK_MSG(first_output == cases[c].largest * D * 2, "%s: the largest graph's output is %llu bytes", cases[c].spec,
              (unsigned long long)first_output);
    ab_events_free(&es);
  }
}

static void test_weights_from_shapes(void) {
  ab_events_t es;
  if (!build(SPEC, 1, &es)) return;
  uint64_t params = 0;
  for (size_t i = 0; i < es.n; i++)
    if (es.ev[i].kind == AB_EV_ALLOC && es.ev[i].aux == AB_TAG_PARAM) params += es.ev[i].bytes;
  uint64_t kv = KV_HEADS * (D / HEADS);
  uint64_t numel = 2ULL * VOCAB * D + D + LAYERS * (D * (D + 2 * kv) + D * D + 2 * D + 3ULL * D * FFN);
  CHECK_MSG(params == 2 * numel, "%llu bytes of weights, want %llu", (unsigned long long)params,
            (unsigned long long)(2 * numel));
  ab_events_free(&es);
}

/* The KV cache (the OTHER-tagged tensors, one per layer) is util x card less the peak
 * allocated before it, counted as PyTorch does (512-byte rounding), in whole blocks. */
static void test_kv_cache_from_profiled_peak(void) {
  ab_events_t es;
  if (!build(SPEC, 1, &es)) return;
  uint64_t *bytes = calloc(es.nids, sizeof *bytes);
  REQUIRE(bytes);
  uint64_t live = 0, peak = 0, kv = 0, tensors = 0;
  bool in_kv = false;
  for (size_t i = 0; i < es.n; i++) {
    const ab_event_t *e = &es.ev[i];
    if (e->kind == AB_EV_ALLOC && e->aux == AB_TAG_OTHER) {
      in_kv = true;
      kv += e->bytes;
      tensors++;
      CHECK(e->bytes == es.ev[i - tensors + 1].bytes); /* every layer's the same */
    }
    if (in_kv) continue;
    if (e->kind == AB_EV_ALLOC) {
      bytes[e->id] = (e->bytes + 511) / 512 * 512;
      live += bytes[e->id];
      peak = live > peak ? live : peak;
    } else if (e->kind == AB_EV_FREE && e->aux != AB_FREE_REQUEST) {
      live -= bytes[e->id];
    }
  }
  CHECK(tensors == LAYERS);
  double want = UTIL * (double)CARD_BYTES - (double)peak;
  uint64_t block_all_layers = 16ULL * 2 * KV_HEADS * (D / HEADS) * 2 * LAYERS;
  CHECK_MSG((double)kv <= want && (double)kv > want - (double)block_all_layers, "KV %llu bytes, util x card - peak %.0f",
            (unsigned long long)kv, want);
  CHECK(es.suggested_budget == CARD_BYTES);
  free(bytes);
  ab_events_free(&es);
}

static void test_deterministic_per_seed(void) {
  ab_events_t a, b, c;
  if (!build(SPEC, 7, &a)) return;
  if (!build(SPEC, 7, &b)) return;
  if (!build(SPEC, 8, &c)) return;
  CHECK(ab_events_hash(&a) == ab_events_hash(&b));
  CHECK(ab_events_hash(&a) != ab_events_hash(&c)); /* the requests are drawn */
  ab_events_free(&a);
  ab_events_free(&b);
  ab_events_free(&c);
}

/* Bad arguments: AB_ERR_INVALID and one line naming the argument. */
static void test_bad_arguments(void) {
  static const struct {
    const char *spec, *names;
  } bad[] = {
      {"serve:heads=5", "heads"},
      {"serve:kv_heads=3", "kv_heads"},
      {"serve:dtype=3", "dtype"},
      {"serve:util=1.5", "util"},
      {"serve:prompt_min=100,prompt_max=10", "prompt_min"},
      {"serve:gen_min=0", "gen_min"},
      {"serve:prompt_max=9000", "prompt_max"},
      {"serve:experts=4,topk=8", "topk"},
      {"serve:card=8GiB", "util"},           /* the weights alone pass util x card */
      {"serve:hidden=512,heads=4,layers=2,vocab=100,ffn=64,card=100MiB,util=0.9,prompt_max=8000,gen_max=8000,"
       "max_tokens=8192",
       "prompt_max"},                        /* one request does not fit in the cache */
      {"serve:bogus=1", "bogus"},
      {"serve:layers=2,layers=3", "layers"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ab_events_t es;
    ab_diag_t diag = {""};
    ab_status st = ab_workload_build(bad[i].spec, 1, &es, &diag);
    CHECK_MSG(st == AB_ERR_INVALID, "%s: status %d", bad[i].spec, (int)st);
    CHECK_MSG(strstr(diag.msg, bad[i].names) != NULL && strchr(diag.msg, '\n') == NULL, "%s: '%s'", bad[i].spec,
              diag.msg);
    if (st == AB_OK) ab_events_free(&es);
  }
}

static const ab_test_t tests[] = {
    {"capture_sizes_as_vllm", test_capture_sizes_as_vllm},
    {"pool_events_balanced", test_pool_events_balanced},
    {"weights_from_shapes", test_weights_from_shapes},
    {"kv_cache_from_profiled_peak", test_kv_cache_from_profiled_peak},
    {"deterministic_per_seed", test_deterministic_per_seed},
    {"bad_arguments", test_bad_arguments},
};
AB_TEST_MAIN(tests)
