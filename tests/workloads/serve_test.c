/* serve_test.c: the serve workload's stream (workloads/serve.c), recomputed from its events:
 * the graphs' captures as vLLM's cudagraph modes make them (Note [vLLM's CUDA graphs]), which
 * steps replay a graph, the weights from the model's shapes, the KV cache by vLLM's rule
 * (Note [vLLM's KV cache bytes]), determinism, and refusals. The vLLM start-up case is
 * serve_test.sh's. */
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
#define SPEC_ARGS                                                                                  \
  "hidden=256,layers=3,heads=4,kv_heads=2,vocab=1000,ffn=512,max_batch=24,max_tokens=512,card=1GiB," \
  "util=0.5,requests=12,prompt_max=300,gen_max=40"
#define SPEC "serve:" SPEC_ARGS
/* Its capture sizes: 1 2 4 8 16 24 32 40 48 (up to 2 x max_batch); the decode ones up to 24. */
#define SIZES 9
#define DECODE_SIZES 6

static bool build(const char *spec, uint64_t seed, ab_events_t *es) {
  ab_diag_t diag = {""};
  ab_status st = ab_workload_build(spec, seed, es, &diag);
  CHECK_MSG(st == AB_OK, "%s: %s", spec, diag.msg);
  return st == AB_OK;
}

/* Per id, the index of its FREE (not a free request) + 1; 0 while it lives to the end. */
static uint32_t *frees_of(const ab_events_t *es) {
  uint32_t *freed_at = calloc(es->nids ? es->nids : 1, sizeof *freed_at);
  if (freed_at == NULL) return NULL;
  for (size_t i = 0; i < es->n; i++)
    if (es->ev[i].kind == AB_EV_FREE && es->ev[i].aux != AB_FREE_REQUEST) freed_at[es->ev[i].id] = (uint32_t)i + 1;
  return freed_at;
}

/* One capture: its BEGIN and END, whether the cache was emptied right before it (SYNC then
 * EMPTY_CACHE then BEGIN), and its first and last allocation's bytes. */
typedef struct capture_s {
  size_t begin, end;
  bool emptied;
  uint64_t first_bytes, last_bytes;
  size_t allocs;
} capture_t;

static size_t captures_of(const ab_events_t *es, capture_t *out, size_t cap) {
  size_t n = 0;
  bool open = false;
  for (size_t i = 0; i < es->n; i++) {
    const ab_event_t *e = &es->ev[i];
    if (e->kind == AB_EV_POOL) {
      CHECK(e->id == 1); /* the one global graph pool */
      if (e->aux == AB_POOL_BEGIN) {
        CHECK(!open);
        open = true;
        if (n < cap)
          out[n] = (capture_t){.begin = i,
                               .emptied = i >= 2 && es->ev[i - 1].kind == AB_EV_EMPTY_CACHE &&
                                          es->ev[i - 2].kind == AB_EV_SYNC};
      } else {
        CHECK(e->aux == AB_POOL_END);
        CHECK(open);
        open = false;
        if (n < cap) out[n].end = i;
        n++;
      }
    } else if (open && e->kind == AB_EV_ALLOC && n < cap) {
      if (out[n].allocs++ == 0) out[n].first_bytes = e->bytes;
      out[n].last_bytes = e->bytes;
    }
  }
  CHECK(!open);
  return n;
}

/* The capture sizes, largest first, under graphs=full, where each size is one FULL capture
 * whose last allocation is the graph's output (size x hidden x dtype): 1, 2, 4, every 8 below
 * 256, every 16 from 256, up to min(2 x max_batch, 512, max_tokens). */
static void test_capture_sizes_as_vllm(void) {
  static const struct {
    const char *spec;
    size_t captures;
    uint64_t largest;
  } cases[] = {
      {SPEC ",graphs=full", SIZES, 48},
      {"serve:hidden=256,layers=3,heads=4,kv_heads=2,vocab=1000,ffn=512,max_batch=24,max_tokens=40,card=1GiB,"
       "util=0.5,requests=4,prompt_max=30,gen_min=4,gen_max=8,graphs=full",
       8, 40},                                                      /* capped by max_tokens */
      {"serve:hidden=256,layers=1,heads=4,kv_heads=2,vocab=1000,ffn=512,max_batch=300,max_tokens=8192,card=4GiB,"
       "util=0.5,requests=4,prompt_max=30,gen_min=4,gen_max=8,graphs=full",
       3 + 31 + 17, 512},                                           /* up to 512 */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ab_events_t es;
    if (!build(cases[c].spec, 1, &es)) continue;
    capture_t cap[64];
    size_t n = captures_of(&es, cap, 64);
    CHECK_MSG(n == cases[c].captures, "%s: %zu captures, expected %zu", cases[c].spec, n, cases[c].captures);
    if (n) CHECK_MSG(cap[0].last_bytes == cases[c].largest * D * 2, "%s: the largest graph's output is %llu bytes",
                     cases[c].spec, (unsigned long long)cap[0].last_bytes);
    ab_events_free(&es);
  }
}

/* FULL graphs (graphs=full, and full_decode_only's decode graphs up to max_batch): each
 * capture empties the cache first (torch.cuda.graph's entry), and everything it allocates,
 * its output too (weak_ref_output), dies inside it, so the pool keeps nothing live. */
static void test_full_graphs_keep_nothing(void) {
  static const struct {
    const char *graphs;
    size_t captures;
  } cases[] = {{"full", SIZES}, {"full_decode_only", DECODE_SIZES}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char spec[512];
    snprintf(spec, sizeof spec, "%s,graphs=%s", SPEC, cases[c].graphs);
    ab_events_t es;
    if (!build(spec, 1, &es)) continue;
    uint32_t *freed_at = frees_of(&es);
    REQUIRE(freed_at);
    capture_t cap[64];
    size_t n = captures_of(&es, cap, 64);
    CHECK_MSG(n == cases[c].captures, "%s: %zu captures", spec, n);
    for (size_t k = 0; k < n && k < 64; k++) {
      CHECK_MSG(cap[k].emptied, "%s: capture %zu does not empty the cache first", spec, k);
      CHECK(cap[k].allocs > 1);
      for (size_t j = cap[k].begin; j < cap[k].end; j++) {
        const ab_event_t *a = &es.ev[j];
        if (a->kind != AB_EV_ALLOC) continue;
        CHECK(a->stream == es.ev[cap[k].begin].stream && a->stream != 0);
        CHECK_MSG(freed_at[a->id] != 0 && freed_at[a->id] - 1 < cap[k].end, "%s: id %u outlives capture %zu", spec,
                  a->id, k);
      }
    }
    free(freed_at);
    ab_events_free(&es);
  }
}

/* vLLM's default, FULL_AND_PIECEWISE: first, for every capture size, largest first, the model
 * split at its LAYERS attention ops into LAYERS + 1 pieces captured one by one, the cache
 * emptied before the first piece only (gc_disable); then FULL graphs of decode batches for
 * the sizes up to max_batch. A piece's outputs (the residual, QKV, the attention output it
 * allocates for attention to write) outlive it; all of a forward's pieces' allocations are
 * freed by the time its last piece ends. After the captures, their stream makes nothing
 * but the last dummy run's gather. */
static void test_piecewise_then_full_decode(void) {
  ab_events_t es;
  if (!build(SPEC, 1, &es)) return;
  uint32_t *freed_at = frees_of(&es);
  REQUIRE(freed_at);
  capture_t cap[128];
  size_t n = captures_of(&es, cap, 128);
  CHECK_MSG(n == SIZES * (LAYERS + 1) + DECODE_SIZES, "%zu captures", n);
  REQUIRE(n <= 128);
  static const uint64_t sizes[SIZES] = {48, 40, 32, 24, 16, 8, 4, 2, 1};
  for (size_t s = 0; s < SIZES && s * (LAYERS + 1) + LAYERS < n; s++) {
    const capture_t *first = &cap[s * (LAYERS + 1)], *last = &cap[s * (LAYERS + 1) + LAYERS];
    CHECK_MSG(first->emptied, "size %llu: the first piece does not empty the cache", (unsigned long long)sizes[s]);
    CHECK_MSG(first->first_bytes == sizes[s] * D * 2, "size %llu: the first piece begins with %llu bytes",
              (unsigned long long)sizes[s], (unsigned long long)first->first_bytes);
    for (size_t k = 1; k <= LAYERS; k++) CHECK(!cap[s * (LAYERS + 1) + k].emptied);
    /* What a non-last piece allocates partly outlives it; nothing of the forward outlives
     * the last piece's capture by more than its own END's frees. */
    for (size_t k = 0; k < LAYERS; k++) {
      const capture_t *p = &cap[s * (LAYERS + 1) + k];
      size_t outlive = 0;
      for (size_t j = p->begin; j < p->end; j++)
        if (es.ev[j].kind == AB_EV_ALLOC && (freed_at[es.ev[j].id] == 0 || freed_at[es.ev[j].id] - 1 > p->end))
          outlive++;
      CHECK_MSG(outlive >= 2, "size %llu piece %zu: %zu allocations outlive it", (unsigned long long)sizes[s], k,
                outlive);
    }
    for (size_t j = first->begin; j < last->end; j++) {
      const ab_event_t *a = &es.ev[j];
      if (a->kind != AB_EV_ALLOC) continue;
      bool in_piece = false;
      for (size_t k = 0; k <= LAYERS; k++)
        in_piece |= j > cap[s * (LAYERS + 1) + k].begin && j < cap[s * (LAYERS + 1) + k].end;
      if (!in_piece) continue;
      /* freed at the latest among the frees that follow the last piece's END */
      size_t after = last->end + 1;
      while (after < es.n && es.ev[after].kind == AB_EV_FREE) after++;
      CHECK_MSG(freed_at[a->id] != 0 && freed_at[a->id] - 1 < after, "size %llu: id %u outlives the forward",
                (unsigned long long)sizes[s], a->id);
    }
  }
  static const uint64_t decode[DECODE_SIZES] = {24, 16, 8, 4, 2, 1};
  for (size_t k = 0; k < DECODE_SIZES && SIZES * (LAYERS + 1) + k < n; k++) {
    const capture_t *c = &cap[SIZES * (LAYERS + 1) + k];
    CHECK(c->emptied);
    CHECK_MSG(c->last_bytes == decode[k] * D * 2, "decode graph %zu: output of %llu bytes", k,
              (unsigned long long)c->last_bytes);
  }
  /* After the last capture, its dummy run's gather (1 row) is the capture stream's last. */
  size_t late = 0;
  for (size_t i = cap[n - 1].end + 1; i < es.n; i++)
    if (es.ev[i].kind == AB_EV_ALLOC && es.ev[i].stream == es.ev[cap[n - 1].end].stream)
      late += es.ev[i].bytes == 1 * D * 2 ? 1 : 100;
  CHECK_MSG(late == 1, "%zu", late);
  free(freed_at);
  ab_events_free(&es);
}

/* Which serving steps replay a graph: a replay allocates only the gather of last hidden states
 * and the sampler's four buffers (5 allocations), an eager forward many more. With prompts
 * and prefills of at most the largest capture size (max_tokens = 48), under the default every
 * serving step replays; under none, none does; under full_decode_only, decode steps replay
 * and prefills run eager. Serving steps: those after the KV cache, the captures (steps with
 * POOL events) and the sampler's warm-up (the first step after them). */
static void step_allocs(const char *graphs, size_t *replayed, size_t *eager) {
  char spec[512];
  snprintf(spec, sizeof spec,
           "serve:hidden=256,layers=3,heads=4,kv_heads=2,vocab=1000,ffn=512,max_batch=24,max_tokens=48,card=1GiB,"
           "util=0.5,requests=12,prompt_max=40,gen_max=20,graphs=%s",
           graphs);
  *replayed = *eager = 0;
  ab_events_t es;
  if (!build(spec, 1, &es)) return;
  size_t kv = 0;
  for (size_t i = 0; i < es.n; i++)
    if (es.ev[i].kind == AB_EV_ALLOC && es.ev[i].aux == AB_TAG_OTHER) kv = i;
  bool warmed = false, in_step = false, pool = false;
  size_t allocs = 0;
  for (size_t i = kv + 1; i <= es.n; i++) {
    if (i == es.n || es.ev[i].kind == AB_EV_STEP) {
      if (in_step && !pool) {
        if (!warmed)
          warmed = true;
        else if (allocs == 5)
          ++*replayed;
        else
          ++*eager;
      }
      in_step = true;
      pool = false;
      allocs = 0;
      continue;
    }
    if (es.ev[i].kind == AB_EV_POOL) pool = true;
    if (es.ev[i].kind == AB_EV_ALLOC) allocs++;
  }
  ab_events_free(&es);
}

static void test_steps_replay_their_graphs(void) {
  size_t replayed, eager;
  step_allocs("full_and_piecewise", &replayed, &eager);
  CHECK_MSG(replayed > 12 && eager == 0, "full_and_piecewise: %zu steps replayed, %zu eager", replayed, eager);
  step_allocs("piecewise", &replayed, &eager);
  CHECK_MSG(replayed > 12 && eager == 0, "piecewise: %zu steps replayed, %zu eager", replayed, eager);
  step_allocs("none", &replayed, &eager);
  CHECK_MSG(replayed == 0 && eager > 12, "none: %zu steps replayed, %zu eager", replayed, eager);
  step_allocs("full_decode_only", &replayed, &eager);
  CHECK_MSG(replayed > 0 && eager > 0, "full_decode_only: %zu steps replayed, %zu eager", replayed, eager);
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

/* Note [vLLM's KV cache bytes] on a configuration worked by hand (dtype 1: no kernels, so no
 * cuBLAS workspace; one layer; d = 256, head_dim 64, QKV 256 + 2 x 128 = 512 wide; counted
 * as PyTorch counts, each request rounded up to 512 bytes):
 *   runner's buffers: ids 64 -> 512, positions 128 -> 512, slots 128 -> 512, inputs_embeds
 *     16 x 256 = 4096, block table 8 requests x 2 blocks x 4 = 64 -> 512:       6144
 *   weights: embedding and lm_head 1000 x 256 = 256000 each, QKV 256 x 512 = 131072, o 65536,
 *     w13 256 x 8192 = 2097152, w2 4096 x 256 = 1048576, three norms 256 -> 512:
 *     weights_memory                                                              3855872
 *   the repack (pad 0) makes the new w13 beside the old: the load peaks at
 *     6144 + 3855872 + 2097152 = 5959168, which the reset peak statistics leave out;
 *   profile_run, 16 tokens: residual 4096, norm 4096, gate_up 16 x 8192 = 131072 and the
 *     activation 16 x 4096 = 65536 live together: torch_peak_increase             204800
 *     (the sampler over 8 requests, beside the output and the gather, peaks at
 *     4096 + 2048 + 32256 + 32256 + 512 = 71168: fp32 logits, probabilities, ids)
 *   available = 0.5 x 64 MiB - (3855872 + 204800) = 33554432 - 4060672 =          29493760
 *   one block of the layer: 16 tokens x 2 x 2 heads x 64 x 1 = 4096 bytes:
 *     num_blocks = 29493760 / 4096 = 7200.6 -> 7200, the cache 7200 x 4096 =     29491200
 * Where the peak since the start were taken (util x card - 5959168), it would be 6737 blocks;
 * where the runner's buffers counted, 7199. */
static void test_kv_cache_by_hand(void) {
  ab_events_t es;
  if (!build("serve:hidden=256,layers=1,heads=4,kv_heads=2,vocab=1000,ffn=4096,dtype=1,max_batch=8,max_tokens=16,"
             "prompt_min=4,prompt_max=16,gen_min=2,gen_max=8,card=64MiB,util=0.5,repack=true,requests=4",
             1, &es))
    return;
  uint64_t kv = 0;
  size_t tensors = 0;
  for (size_t i = 0; i < es.n; i++)
    if (es.ev[i].kind == AB_EV_ALLOC && es.ev[i].aux == AB_TAG_OTHER) {
      kv += es.ev[i].bytes;
      tensors++;
    }
  CHECK(tensors == 1);
  CHECK_MSG(kv == 29491200, "the KV cache is %llu bytes, by hand 29491200", (unsigned long long)kv);
  ab_events_free(&es);
}

/* The same rule recomputed from the events of SPEC: weights_memory is the PARAM bytes live
 * when the profile's step begins, torch_peak_increase the most allocated bytes during that
 * step less those at its start, the runner's INPUT buffers in no term. */
static void test_kv_cache_recomputed(void) {
  ab_events_t es;
  if (!build(SPEC, 1, &es)) return;
  uint64_t *bytes = calloc(es.nids, sizeof *bytes);
  uint8_t *tag = calloc(es.nids, 1);
  REQUIRE(bytes && tag);
  uint64_t live = 0, weights = 0, base = 0, peak = 0, kv = 0, tensors = 0;
  bool profiling = false, done = false;
  for (size_t i = 0; i < es.n && !done; i++) {
    const ab_event_t *e = &es.ev[i];
    if (e->kind == AB_EV_STEP && e->id == 1) { /* the profile; repack=false: no steps before */
      profiling = true;
      base = peak = live;
      for (uint32_t id = 0; id < es.nids; id++)
        if (tag[id] == AB_TAG_PARAM) weights += bytes[id];
    }
    if (e->kind == AB_EV_ALLOC && e->aux == AB_TAG_OTHER) {
      kv += e->bytes;
      tensors++;
      if (es.ev[i + 1].kind != AB_EV_ALLOC || es.ev[i + 1].aux != AB_TAG_OTHER) done = true;
      continue;
    }
    if (e->kind == AB_EV_ALLOC) {
      bytes[e->id] = (e->bytes + 511) / 512 * 512;
      tag[e->id] = e->aux;
      live += bytes[e->id];
      if (profiling && live > peak) peak = live;
    } else if (e->kind == AB_EV_FREE && e->aux != AB_FREE_REQUEST) {
      live -= bytes[e->id];
      tag[e->id] = 0;
    }
  }
  CHECK(profiling && tensors == LAYERS);
  uint64_t block_all_layers = 16ULL * 2 * KV_HEADS * (D / HEADS) * 2 * LAYERS;
  uint64_t blocks = (uint64_t)((UTIL * (double)CARD_BYTES - (double)(weights + peak - base)) / (double)block_all_layers);
  CHECK_MSG(kv == blocks * block_all_layers, "KV %llu bytes, by the rule %llu blocks of %llu", (unsigned long long)kv,
            (unsigned long long)blocks, (unsigned long long)block_all_layers);
  CHECK(es.suggested_budget == CARD_BYTES);
  free(bytes);
  free(tag);
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
      {"serve:graphs=eager", "graphs"},
      {"serve:outside=9GiB", "outside"},     /* 71 GiB free at start-up, util x card 72 GiB */
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
    {"full_graphs_keep_nothing", test_full_graphs_keep_nothing},
    {"piecewise_then_full_decode", test_piecewise_then_full_decode},
    {"steps_replay_their_graphs", test_steps_replay_their_graphs},
    {"weights_from_shapes", test_weights_from_shapes},
    {"kv_cache_by_hand", test_kv_cache_by_hand},
    {"kv_cache_recomputed", test_kv_cache_recomputed},
    {"deterministic_per_seed", test_deterministic_per_seed},
    {"bad_arguments", test_bad_arguments},
};
AB_TEST_MAIN(tests)
