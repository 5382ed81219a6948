/* conformance_test.c: the suite every registered strategy passes, on the simulated card
 * (--device=sim, in CI) and on the GPU (--device=cuda, label gpu).
 *
 * For each strategy: sizes from 1 byte to 64 GiB; live blocks never overlap, checked
 * against an interval set; random mixes over several streams; statistics consistent after
 * every call and back to zero once everything is freed and the cache emptied; OOM when the
 * budget is spent and recovery after frees; injected device failures (sim) surface as OOM
 * with nothing leaked. */
#include <stdlib.h>

#include "kernels/base/rng.h"
#include "kernels/base/tree.h"
#include "kernels/base/units.h"
#include "kernels/device/device.h"
#include "kernels/device/device_open.h"
#include "strategies/registry.h"
#include "strategies/strategy.h"

#include "tests/check.h"
#include "tests/world.h"

/* ---- an interval set of live blocks ------------------------------------------------------ */

typedef struct live_s {
  ab_tnode_t node;
  ab_dptr_t addr;
  uint64_t bytes;
  unsigned stream;
} live_t;

static int cmp_live(const ab_tnode_t *a, const ab_tnode_t *b) {
  ab_dptr_t x = AB_CONTAINER_OF(a, live_t, node)->addr, y = AB_CONTAINER_OF(b, live_t, node)->addr;
  return (x > y) - (x < y);
}

static int key_live(const void *k, const ab_tnode_t *n) {
  ab_dptr_t x = *(const ab_dptr_t *)k, y = AB_CONTAINER_OF(n, live_t, node)->addr;
  return (x > y) - (x < y);
}

typedef struct world_s {
  const char *strategy;
  ab_device_t *dev;
  ab_strategy_t *s;
  ab_tree_t live;
  live_t *slots;
  size_t nslots;
  uint64_t requested; /* sum of live request sizes */
} world_t;

static bool world_open(world_t *w, const char *strategy, const ab_device_config_t *cfg, size_t nslots) {
  memset(w, 0, sizeof *w);
  w->strategy = strategy;
  if (!ab_test_world_open(&w->dev, &w->s, ab_test_device, cfg, strategy, ab_test_conf_for(strategy))) return false;
  ab_tree_init(&w->live, cmp_live);
  w->slots = calloc(nslots, sizeof *w->slots);
  w->nslots = nslots;
  return w->slots != NULL;
}

/* Statistics that must hold after every call. */
static void check_stats(world_t *w) {
  ab_stats_t st;
  ab_strategy_stats(w->s, &st);
  CHECK_MSG(st.requested_bytes.current == (int64_t)w->requested, "%s: requested_bytes %lld, live requests sum to %llu",
            w->strategy, (long long)st.requested_bytes.current, (unsigned long long)w->requested);
  CHECK_MSG(st.allocated_bytes.current >= st.requested_bytes.current, "%s: allocated < requested", w->strategy);
  CHECK_MSG(st.reserved_bytes.current >= st.allocated_bytes.current, "%s: reserved %lld < allocated %lld", w->strategy,
            (long long)st.reserved_bytes.current, (long long)st.allocated_bytes.current);
  CHECK(st.requested_bytes.peak >= st.requested_bytes.current && st.reserved_bytes.peak >= st.reserved_bytes.current);
  ab_diag_t why = {""};
  CHECK_MSG(ab_strategy_check(w->s, &why) == AB_OK, "%s: invariant: %s", w->strategy, why.msg);
}

/* Allocates into slot i; returns the status. Checks the block overlaps no live block. */
static ab_status world_alloc(world_t *w, size_t i, uint64_t bytes, unsigned stream) {
  live_t *l = &w->slots[i];
  ab_dptr_t p = 0;
  ab_status st = ab_strategy_alloc(w->s, bytes, stream, &p);
  if (st != AB_OK) return st;
  CHECK_MSG(p != 0 && p % 256 == 0, "%s: address 0x%llx is not 256-byte aligned", w->strategy, (unsigned long long)p);
  ab_tnode_t *below = ab_tree_floor(&w->live, &p, key_live);
  if (below) {
    live_t *b = AB_CONTAINER_OF(below, live_t, node);
    CHECK_MSG(b->addr + b->bytes <= p, "%s: [0x%llx,+%llu) overlaps live [0x%llx,+%llu)", w->strategy,
              (unsigned long long)p, (unsigned long long)bytes, (unsigned long long)b->addr,
              (unsigned long long)b->bytes);
  }
  ab_tnode_t *above = below ? ab_tree_next(below) : ab_tree_first(&w->live);
  if (above) {
    live_t *a = AB_CONTAINER_OF(above, live_t, node);
    CHECK_MSG(p + bytes <= a->addr, "%s: [0x%llx,+%llu) overlaps live [0x%llx,+%llu)", w->strategy,
              (unsigned long long)p, (unsigned long long)bytes, (unsigned long long)a->addr,
              (unsigned long long)a->bytes);
  }
  *l = (live_t){.addr = p, .bytes = bytes, .stream = stream};
  ab_tree_insert(&w->live, &l->node);
  w->requested += bytes;
  return AB_OK;
}

static void world_free(world_t *w, size_t i) {
  live_t *l = &w->slots[i];
  if (l->bytes == 0) return;
  ab_tree_remove(&w->live, &l->node);
  w->requested -= l->bytes;
  ab_status st = ab_strategy_free(w->s, l->addr, l->bytes, l->stream);
  CHECK_MSG(st == AB_OK, "%s: free: %s (%s)", w->strategy, ab_strerror(st), w->dev->diag.msg);
  l->bytes = 0;
}

/* Frees everything, empties the cache, checks that nothing is left, closes. */
static void world_close(world_t *w) {
  for (size_t i = 0; i < w->nslots; i++) world_free(w, i);
  check_stats(w);
  CHECK(ab_strategy_empty_cache(w->s) == AB_OK);
  ab_stats_t st;
  ab_strategy_stats(w->s, &st);
  CHECK_MSG(st.requested_bytes.current == 0 && st.allocated_bytes.current == 0 && st.reserved_bytes.current == 0,
            "%s: after freeing everything and emptying the cache: %lld requested, %lld allocated, %lld reserved",
            w->strategy, (long long)st.requested_bytes.current, (long long)st.allocated_bytes.current,
            (long long)st.reserved_bytes.current);
  ab_test_world_close(w->dev, w->s);
  free(w->slots);
}

/* Calls fn once per strategy that users can pick (or the one --strategy names). */
static void each_strategy(void (*fn)(const char *name)) {
  const char *names[64];
  size_t n = ab_test_strategies(names, 64);
  for (size_t i = 0; i < n; i++) fn(names[i]);
}

static bool want_device(void) {
  return strcmp(ab_test_device, "cuda") != 0 || ab_device_cuda_usable();
}

/* ---- the suite ---------------------------------------------------------------------------- */

static void sizes_one(const char *name) {
  static const uint64_t sizes[] = {1,         511,       512,       513,        4096,         (1 << 20) - 1,
                                   1 << 20,   (1 << 20) + 1, 10 << 20, (10 << 20) + 512, 20 << 20, (20 << 20) + 1,
                                   255 << 20, 1ULL << 30, 5ULL << 30, 64ULL << 30};
  const size_t n = sizeof sizes / sizeof sizes[0];
  ab_device_config_t cfg = {.cost_model = true};
  world_t w;
  if (!world_open(&w, name, &cfg, n)) return;
  /* Two rounds: the second may be served from what the first cached. */
  for (int round = 0; round < 2; round++) {
    for (size_t i = 0; i < n; i++) {
      ab_status st = world_alloc(&w, i, sizes[i], 0);
      CHECK_MSG(st == AB_OK, "%s: alloc of %llu bytes: %s", name, (unsigned long long)sizes[i], ab_strerror(st));
      check_stats(&w);
    }
    for (size_t i = 0; i < n; i += 2) world_free(&w, i);
    for (size_t i = 1; i < n; i += 2) world_free(&w, i);
    check_stats(&w);
  }
  world_close(&w);
}

static void sizes_1b_to_64gib(void) {
  if (!want_device()) SKIP("no usable GPU");
  each_strategy(sizes_one);
}

static void mix_one(const char *name) {
  enum { SLOTS = 600, OPS = 12000 };
  ab_device_config_t cfg = {.cost_model = true};
  world_t w;
  if (!world_open(&w, name, &cfg, SLOTS)) return;
  ab_rng_t r = ab_rng_seed(2024);
  for (int op = 0; op < OPS; op++) {
    size_t i = (size_t)ab_rng_range(&r, 0, SLOTS - 1);
    if (w.slots[i].bytes) {
      world_free(&w, i);
    } else {
      /* Log-uniform sizes from 1 byte to 64 MiB, as a training step mixes them. */
      uint64_t bytes = (uint64_t)exp(ab_rng_uniform(&r) * log(64.0 * 1048576.0)) + 1;
      unsigned stream = (unsigned)ab_rng_range(&r, 0, 2);
      ab_status st = world_alloc(&w, i, bytes, stream);
      CHECK_MSG(st == AB_OK, "%s: alloc of %llu bytes: %s", name, (unsigned long long)bytes, ab_strerror(st));
    }
    check_stats(&w);
    if (op % 4000 == 3999) CHECK(ab_strategy_empty_cache(w.s) == AB_OK);
  }
  world_close(&w);
}

static void random_mix_no_overlap(void) {
  if (!want_device()) SKIP("no usable GPU");
  each_strategy(mix_one);
}

static uint64_t ooms_of(world_t *w) {
  ab_stats_t st;
  ab_strategy_stats(w->s, &st);
  return st.num_ooms;
}

static void oom_one(const char *name) {
  enum { SLOTS = 64 };
  const uint64_t budget = 256ULL << 20, chunk = 24ULL << 20;
  ab_device_config_t cfg = {.budget_bytes = budget, .cost_model = true};
  world_t w;
  if (!world_open(&w, name, &cfg, SLOTS)) return;
  size_t got = 0;
  ab_status st = AB_OK;
  while (got < SLOTS && (st = world_alloc(&w, got, chunk, 0)) == AB_OK) got++;
  CHECK_MSG(st == AB_ERR_OOM, "%s: expected OOM once the budget is spent, got %s", name, ab_strerror(st));
  CHECK_MSG(got >= 1 && got * chunk <= budget, "%s: %zu blocks of 24 MiB within 256 MiB", name, got);
  CHECK_MSG(w.dev->held_peak <= budget, "%s: held %llu bytes over the budget", name, (unsigned long long)w.dev->held_peak);
  /* Each failed request counts once, however many ways the strategy tried first. */
  CHECK_MSG(ooms_of(&w) == 1, "%s: %llu OOMs counted for one", name, (unsigned long long)ooms_of(&w));
  check_stats(&w);
  /* Recovery: after frees the same requests are served again. */
  for (size_t i = 0; i < got; i++) world_free(&w, i);
  for (size_t i = 0; i < got; i++) {
    st = world_alloc(&w, i, chunk, 0);
    CHECK_MSG(st == AB_OK, "%s: after freeing, alloc %zu failed: %s", name, i, ab_strerror(st));
  }
  /* A request larger than the budget fails however much is freed. */
  for (size_t i = 0; i < got; i++) world_free(&w, i);
  CHECK(world_alloc(&w, 0, budget + 1, 0) == AB_ERR_OOM);
  /* ... and so does one no device could hold, refused before the strategy's search. */
  CHECK(world_alloc(&w, 0, 1ULL << 62, 0) == AB_ERR_OOM);
  CHECK_MSG(ooms_of(&w) == 3, "%s: %llu OOMs counted for three", name, (unsigned long long)ooms_of(&w));
  world_close(&w);
}

static void oom_and_recovery(void) {
  if (!want_device()) SKIP("no usable GPU");
  each_strategy(oom_one);
}

static void faults_one(const char *name) {
  enum { SLOTS = 300, OPS = 6000 };
  ab_device_config_t cfg = {.faults = {.fail_rate = 0.2, .fail_seed = 11}};
  world_t w;
  if (!world_open(&w, name, &cfg, SLOTS)) return;
  ab_rng_t r = ab_rng_seed(5);
  int ooms = 0;
  for (int op = 0; op < OPS; op++) {
    size_t i = (size_t)ab_rng_range(&r, 0, SLOTS - 1);
    if (w.slots[i].bytes) {
      world_free(&w, i);
      check_stats(&w);
      continue;
    }
    uint64_t bytes = (uint64_t)exp(ab_rng_uniform(&r) * log(48.0 * 1048576.0)) + 1;
    ab_status st = world_alloc(&w, i, bytes, 0);
    CHECK_MSG(st == AB_OK || st == AB_ERR_OOM, "%s: an injected failure became %s (%s)", name, ab_strerror(st),
              w.dev->diag.msg);
    ooms += st == AB_ERR_OOM;
    check_stats(&w); /* a failed allocation leaves the strategy consistent too */
    if (op % 1000 == 0) CHECK(ab_strategy_empty_cache(w.s) == AB_OK);
  }
  check_stats(&w);
  (void)ooms; /* strategies that cache see few device calls, hence few failures */
  world_close(&w);
}

static void injected_failures(void) {
  if (strcmp(ab_test_device, "sim") != 0) SKIP("fault injection is for the simulated device");
  each_strategy(faults_one);
}

static const ab_test_t tests[] = {
    {"sizes_1b_to_64gib", sizes_1b_to_64gib},
    {"random_mix_no_overlap", random_mix_no_overlap},
    {"oom_and_recovery", oom_and_recovery},
    {"injected_failures", injected_failures},
};
AB_TEST_MAIN(tests)
