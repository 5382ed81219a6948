/* caching_pools_test.c: the private pools of the caching strategy (Note [Private pools] in
 * strategies/strategy.h; PyTorch v2.11.0 CUDACachingAllocator.cpp's PrivatePool), on the
 * simulated H200: PyTorch's TestMemPool cases that apply to one process, a graph pool that
 * keeps its segments until released, the last retry skipped while a capture is open, frees
 * across streams deferred by a capture, and the OOM message's private-pool bytes. Invariants
 * are checked after every call. */
#include <string.h>

#include "kernels/base/units.h"
#include "strategies/caching/caching.h"

#include "tests/check.h"
#include "tests/world.h"

#define MiB (1ULL << 20)

typedef struct pw_s {
  ab_device_t *dev;
  ab_strategy_t *s;
} pw_t;

static bool open_pw(pw_t *w, const char *conf, uint64_t budget) {
  ab_device_config_t cfg = {0};
  cfg.budget_bytes = budget;
  return ab_test_world_open(&w->dev, &w->s, "sim:h200", &cfg, "caching", conf);
}

static void checked(pw_t *w) {
  ab_diag_t why = {""};
  CHECK_MSG(ab_strategy_check(w->s, &why) == AB_OK, "%s", why.msg);
}

static ab_dptr_t alloc_ok(pw_t *w, uint64_t bytes, unsigned stream) {
  ab_dptr_t p = 0;
  ab_status st = ab_strategy_alloc(w->s, bytes, stream, &p);
  CHECK_MSG(st == AB_OK, "alloc of %llu: %s", (unsigned long long)bytes, w->dev->diag.msg);
  checked(w);
  return p;
}

static void pool(pw_t *w, ab_pool_op_t op, unsigned n, unsigned stream, unsigned flags) {
  CHECK_MSG(ab_strategy_pool(w->s, op, n, stream, flags) == AB_OK, "pool call %d on %u: %s", (int)op, n, w->dev->diag.msg);
  checked(w);
}

/* torch.cuda.use_mem_pool(pool): begin on every stream; end and release after. */
static ab_dptr_t alloc_in(pw_t *w, unsigned n, uint64_t bytes) {
  pool(w, AB_POOL_BEGIN, n, 0, AB_POOL_ALL_STREAMS);
  ab_dptr_t p = alloc_ok(w, bytes, 0);
  pool(w, AB_POOL_END, n, 0, 0);
  pool(w, AB_POOL_RELEASE, n, 0, 0);
  return p;
}

typedef struct census_s {
  unsigned segments[8]; /* by pool */
  unsigned blocks[8];
} census_t;

static int count(void *ctx, const ab_segment_info_t *seg) {
  census_t *c = ctx;
  if (seg->private_pool < 8) {
    c->segments[seg->private_pool]++;
    c->blocks[seg->private_pool] += (unsigned)seg->nblocks;
  }
  return 0;
}

static census_t census(pw_t *w) {
  census_t c;
  memset(&c, 0, sizeof c);
  CHECK(ab_strategy_walk(w->s, count, &c) == AB_OK);
  return c;
}

static int64_t stat(pw_t *w, const char *name) {
  int64_t v = -1;
  CHECK(ab_strategy_memory_stat(w->s, name, &v));
  return v;
}

/* 9.1 X test_nested_mempool: 20 MiB in pool1, pool2, pool3, pool2, pool1: each new segment in
 * its pool, none shared: 2 / 2 / 1 segments. */
static void test_nested_mempool(void) {
  pw_t w;
  REQUIRE(open_pw(&w, NULL, 0));
  for (unsigned n = 1; n <= 3; n++) pool(&w, AB_POOL_CREATE, n, 0, 0);
  unsigned order[] = {1, 2, 3, 2, 1};
  for (size_t i = 0; i < 5; i++) alloc_in(&w, order[i], 20 * MiB);
  census_t c = census(&w);
  CHECK_EQ(c.segments[0], 0);
  CHECK_EQ(c.segments[1], 2);
  CHECK_EQ(c.segments[2], 2);
  CHECK_EQ(c.segments[3], 1);
  ab_test_world_close(w.dev, w.s);
}

/* 9.1 X test_mempool_no_split: 4 MiB requests get 20 MiB segments; the no_split pool hands
 * each out whole, one block per segment, while a plain pool packs them. */
static void test_mempool_no_split(void) {
  pw_t w;
  REQUIRE(open_pw(&w, NULL, 0));
  pool(&w, AB_POOL_CREATE, 1, 0, AB_POOL_NO_SPLIT);
  pool(&w, AB_POOL_CREATE, 2, 0, 0);
  for (int i = 0; i < 3; i++) {
    alloc_in(&w, 1, 4 * MiB);
    alloc_in(&w, 2, 4 * MiB);
  }
  census_t c = census(&w);
  CHECK_EQ(c.segments[1], 3);
  CHECK_EQ(c.blocks[1], 3);
  CHECK_EQ(c.segments[2], 1);
  CHECK(c.blocks[1] < c.blocks[2]); /* 3 allocated + the remainder */
  ab_test_world_close(w.dev, w.s);
}

/* 9.1 X test_mempool_limited_memory_with_allocator: an 80 MiB cap, 40 MiB in pool A and 40 MiB
 * in pool B (use_on_oom). A default 40 MiB request runs out; once b is freed, a 30 MiB default
 * request is served from B at b's address; another runs out (A is not used on OOM). */
static void test_mempool_limited_memory(void) {
  pw_t w;
  REQUIRE(open_pw(&w, NULL, 80 * MiB));
  pool(&w, AB_POOL_CREATE, 1, 0, 0);
  pool(&w, AB_POOL_CREATE, 2, 0, AB_POOL_USE_ON_OOM);
  ab_dptr_t a = alloc_in(&w, 1, 40 * MiB);
  ab_dptr_t b = alloc_in(&w, 2, 40 * MiB);
  ab_dptr_t p;
  CHECK(ab_strategy_alloc(w.s, 40 * MiB, 0, &p) == AB_ERR_OOM);
  CHECK(ab_strategy_free(w.s, b, 40 * MiB, 0) == AB_OK);
  ab_dptr_t c = alloc_ok(&w, 30 * MiB, 0);
  CHECK_EQ(c, b);
  CHECK(ab_strategy_alloc(w.s, 30 * MiB, 0, &p) == AB_ERR_OOM);
  char msg[1024];
  ab_strategy_describe_oom(w.s, 30 * MiB, 0, msg, sizeof msg);
  CHECK_STR_CONTAINS(msg, "80.00 MiB allowed;");
  /* PyTorch counts the free cached blocks of private pools: a's 40 MiB in A and the 10 MiB
   * that c left of b's block in B. */
  CHECK(ab_strategy_free(w.s, a, 40 * MiB, 0) == AB_OK);
  ab_strategy_describe_oom(w.s, 30 * MiB, 0, msg, sizeof msg);
  CHECK_STR_CONTAINS(msg, "with 50.00 MiB allocated in private pools (e.g., CUDA Graphs), ");
  CHECK(ab_strategy_free(w.s, c, 30 * MiB, 0) == AB_OK);
  ab_test_world_close(w.dev, w.s);
}

/* A graph's pool keeps its segments through empty_cache until the graph is destroyed; then
 * the next empty_cache gives them back, and the default pool never reuses them meanwhile. */
static void graph_pool_kept_until_released(void) {
  pw_t w;
  REQUIRE(open_pw(&w, NULL, 0));
  pool(&w, AB_POOL_BEGIN, 1, 1, 0); /* capture on stream 1 */
  ab_dptr_t x = alloc_ok(&w, 30 * MiB, 1);
  ab_dptr_t y = alloc_ok(&w, 3 * MiB, 0); /* another stream: not captured */
  CHECK(ab_strategy_free(w.s, x, 30 * MiB, 1) == AB_OK);
  pool(&w, AB_POOL_END, 1, 0, 0);
  census_t c = census(&w);
  CHECK_EQ(c.segments[1], 1);
  CHECK_EQ(c.segments[0], 1);
  ab_dptr_t z = alloc_ok(&w, 30 * MiB, 1); /* default pool: a segment of its own */
  CHECK(z != x);
  CHECK(ab_strategy_free(w.s, z, 30 * MiB, 1) == AB_OK);
  CHECK(ab_strategy_free(w.s, y, 3 * MiB, 0) == AB_OK);
  CHECK(ab_strategy_empty_cache(w.s) == AB_OK);
  checked(&w);
  CHECK_EQ(stat(&w, "reserved_bytes.all.current"), (int64_t)(30 * MiB));
  pool(&w, AB_POOL_RELEASE, 1, 0, 0); /* the graph is destroyed */
  CHECK_EQ(stat(&w, "reserved_bytes.all.current"), (int64_t)(30 * MiB));
  CHECK(ab_strategy_empty_cache(w.s) == AB_OK);
  checked(&w);
  CHECK_EQ(stat(&w, "reserved_bytes.all.current"), 0);
  CHECK(ab_strategy_pool(w.s, AB_POOL_RELEASE, 1, 0, 0) == AB_ERR_INVALID); /* erased: no user left */
  ab_test_world_close(w.dev, w.s);
}

/* Two graphs sharing one pool (9.1 L): the second capture reuses what the first freed. */
static void shared_pool_reuses(void) {
  pw_t w;
  REQUIRE(open_pw(&w, NULL, 0));
  for (int g = 0; g < 2; g++) {
    pool(&w, AB_POOL_BEGIN, 1, 1, 0);
    ab_dptr_t t = alloc_ok(&w, 1000, 1);
    CHECK(ab_strategy_free(w.s, t, 1000, 1) == AB_OK);
    pool(&w, AB_POOL_END, 1, 0, 0);
  }
  CHECK_EQ(stat(&w, "reserved_bytes.all.current"), (int64_t)(2 * MiB));
  pool(&w, AB_POOL_RELEASE, 1, 0, 0);
  pool(&w, AB_POOL_RELEASE, 1, 0, 0);
  CHECK(ab_strategy_empty_cache(w.s) == AB_OK);
  CHECK_EQ(stat(&w, "reserved_bytes.all.current"), 0);
  ab_test_world_close(w.dev, w.s);
}

/* While a capture is open the last retry (release everything) is skipped: a default request
 * that needs the cached segment back runs out; after the capture ends it succeeds. */
static void capture_skips_last_retry(void) {
  pw_t w;
  REQUIRE(open_pw(&w, NULL, 40 * MiB));
  ab_dptr_t a = alloc_ok(&w, 30 * MiB, 0);
  CHECK(ab_strategy_free(w.s, a, 30 * MiB, 0) == AB_OK); /* cached, whole */
  pool(&w, AB_POOL_BEGIN, 1, 1, 0);
  ab_dptr_t p;
  uint64_t retries = w.s->stats.num_alloc_retries;
  CHECK(ab_strategy_alloc(w.s, 34 * MiB, 0, &p) == AB_ERR_OOM);
  CHECK_EQ(w.s->stats.num_alloc_retries, retries);
  pool(&w, AB_POOL_END, 1, 0, 0);
  p = alloc_ok(&w, 34 * MiB, 0);
  CHECK_EQ(w.s->stats.num_alloc_retries, retries + 1);
  CHECK(ab_strategy_free(w.s, p, 34 * MiB, 0) == AB_OK);
  ab_test_world_close(w.dev, w.s);
}

/* A block used on another stream and freed during a capture is not reused before the capture
 * ends, even once its other stream is done (Note [Captures]); with
 * graph_capture_record_stream_reuse it is. */
static void capture_defers_cross_stream_frees(void) {
  for (int reuse = 0; reuse < 2; reuse++) {
    pw_t w;
    REQUIRE(open_pw(&w, reuse ? "graph_capture_record_stream_reuse:True" : NULL, 0));
    pool(&w, AB_POOL_BEGIN, 1, 1, 0);
    ab_dptr_t a = alloc_ok(&w, 1 * MiB, 1);
    CHECK(ab_strategy_free_request(w.s, a, 1 * MiB, 1) == AB_OK);
    CHECK(ab_strategy_free_complete(w.s, a, 1 * MiB, 1) == AB_OK);
    checked(&w);
    ab_dptr_t b = alloc_ok(&w, 1 * MiB, 1);
    CHECK_MSG(reuse ? b == a : b != a, "reuse %d: a 0x%llx, b 0x%llx", reuse, (unsigned long long)a, (unsigned long long)b);
    pool(&w, AB_POOL_END, 1, 0, 0);
    ab_dptr_t c = alloc_ok(&w, 1 * MiB, 1); /* the default pool: not the graph's */
    CHECK(ab_strategy_free(w.s, b, 1 * MiB, 1) == AB_OK);
    CHECK(ab_strategy_free(w.s, c, 1 * MiB, 1) == AB_OK);
    checked(&w);
    CHECK_EQ(stat(&w, "active_bytes.all.current"), 0);
    ab_test_world_close(w.dev, w.s);
  }
}

/* Calls the pools' state refuses. */
static void bad_pool_calls(void) {
  pw_t w;
  REQUIRE(open_pw(&w, NULL, 0));
  CHECK(ab_strategy_pool(w.s, AB_POOL_BEGIN, 0, 0, 0) == AB_ERR_INVALID);
  CHECK(ab_strategy_pool(w.s, AB_POOL_END, 4, 0, 0) == AB_ERR_INVALID);
  CHECK(ab_strategy_pool(w.s, AB_POOL_RELEASE, 4, 0, 0) == AB_ERR_INVALID);
  CHECK(ab_strategy_pool(w.s, AB_POOL_CREATE, 4, 0, 64) == AB_ERR_INVALID);
  pool(&w, AB_POOL_BEGIN, 4, 0, 0);
  CHECK(ab_strategy_pool(w.s, AB_POOL_BEGIN, 4, 0, 0) == AB_ERR_INVALID);
  pool(&w, AB_POOL_END, 4, 0, 0);
  ab_test_world_close(w.dev, w.s);
}

static const ab_test_t tests[] = {
    {"test_nested_mempool", test_nested_mempool},
    {"test_mempool_no_split", test_mempool_no_split},
    {"test_mempool_limited_memory", test_mempool_limited_memory},
    {"graph_pool_kept_until_released", graph_pool_kept_until_released},
    {"shared_pool_reuses", shared_pool_reuses},
    {"capture_skips_last_retry", capture_skips_last_retry},
    {"capture_defers_cross_stream_frees", capture_defers_cross_stream_frees},
    {"bad_pool_calls", bad_pool_calls},
};

AB_TEST_MAIN(tests)
