/* caching_test.c: the caching strategy (strategies/caching/caching.c) against PyTorch's own cases that
 * apply to one process without CUDA graphs (named after the tests of PyTorch v2.11.0's
 * test/test_cuda.py; derived_* cases follow its rules one step further), worked examples of
 * the small and large pools, and the rules of its ladder (garbage collection,
 * release_available_cached_blocks, the final retry, expandable segments), on the simulated
 * H200. Invariants (blocks tile segments, free sets ordered,
 * statistics equal sums over blocks) are checked after every call. */
#include "strategies/caching/caching.h"

#include "kernels/base/rng.h"
#include "kernels/base/units.h"
#include "kernels/device/device_open.h"
#include "strategies/registry.h"

#include "tests/check.h"
#include "tests/world.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)
#define TOTAL AB_H200_TOTAL_BYTES

/* ---- a strategy on a fresh simulated card ------------------------------------------------- */

#define MAX_EVENTS 4096

typedef struct event_s {
  ab_trace_action_t ev;
  ab_dptr_t addr;
  uint64_t bytes;
} event_t;

typedef struct world_s {
  ab_device_t *dev;
  ab_strategy_t *s;
  event_t events[MAX_EVENTS]; /* the segment decisions */
  size_t nevents;
} world_t;

static void on_segment(void *ctx, ab_trace_action_t ev, ab_dptr_t addr, uint64_t bytes, unsigned stream) {
  world_t *w = ctx;
  (void)stream;
  if (w->nevents < MAX_EVENTS) w->events[w->nevents++] = (event_t){ev, addr, bytes};
}

static world_t *open_world(const char *strategy, const char *conf, uint64_t budget) {
  world_t *w = calloc(1, sizeof *w);
  ab_device_config_t cfg = {0};
  cfg.budget_bytes = budget;
  if (w == NULL || !ab_test_world_open(&w->dev, &w->s, "sim:h200", &cfg, strategy, conf)) {
    free(w);
    return NULL;
  }
  ab_strategy_observe(w->s, on_segment, w);
  return w;
}

static void close_world(world_t *w) {
  ab_test_world_close(w->dev, w->s);
  free(w);
}

static void check_invariants(world_t *w) {
  ab_diag_t why = {""};
  CHECK_MSG(ab_strategy_check(w->s, &why) == AB_OK, "%s", why.msg);
}

/* One statistic of torch.cuda.memory_stats(), by its flattened name. */
static int64_t mstat(world_t *w, const char *name) {
  int64_t value = 0;
  bool found = ab_strategy_memory_stat(w->s, name, &value);
  CHECK_MSG(found, "no statistic %s", name);
  return value;
}

static ab_status try_alloc(world_t *w, uint64_t bytes, unsigned stream, ab_dptr_t *p) {
  *p = 0;
  ab_status st = ab_strategy_alloc(w->s, bytes, stream, p);
  check_invariants(w);
  return st;
}

static ab_dptr_t alloc_on(world_t *w, uint64_t bytes, unsigned stream) {
  ab_dptr_t p;
  ab_status st = try_alloc(w, bytes, stream, &p);
  CHECK_MSG(st == AB_OK, "alloc of %llu bytes: %s (%s)", (unsigned long long)bytes, ab_strerror(st), w->dev->diag.msg);
  return p;
}

static ab_dptr_t alloc(world_t *w, uint64_t bytes) { return alloc_on(w, bytes, 0); }

static void release_on(world_t *w, ab_dptr_t p, uint64_t bytes, unsigned stream) {
  ab_status st = ab_strategy_free(w->s, p, bytes, stream);
  CHECK_MSG(st == AB_OK, "free: %s (%s)", ab_strerror(st), w->dev->diag.msg);
  check_invariants(w);
}

static void release(world_t *w, ab_dptr_t p, uint64_t bytes) { release_on(w, p, bytes, 0); }

static void empty_cache(world_t *w) {
  CHECK(ab_strategy_empty_cache(w->s) == AB_OK);
  check_invariants(w);
}

static size_t count_events(const world_t *w, ab_trace_action_t ev) {
  size_t n = 0;
  for (size_t i = 0; i < w->nevents; i++) n += w->events[i].ev == ev;
  return n;
}

/* ---- section 1.4: rounding, pools and segment sizes --------------------------------------- */

static void worked_examples_of_section_1_4(void) {
  static const struct {
    const char *conf;
    uint64_t request, rounded, segment, split_rest; /* split_rest: inactive_split_bytes after */
    int small;
  } rows[] = {
      {"", 1, 512, 2 * MiB, 2096640, 1},
      {"", 1048576, 1048576, 2 * MiB, 1048576, 1},
      {"", 1048577, 1049088, 20 * MiB, 19922432, 0},
      {"", 10485248, 10485248, 20 * MiB, 10486272, 0},
      {"", 10486272, 10486272, 12 * MiB, 2096640, 0},
      {"", 11534336, 12582912, 12 * MiB, 0, 0}, /* 1 MiB left: not split, the whole block is handed out */
      {"roundup_power2_divisions:4", 88080384, 100663296, 96 * MiB, 0, 0},
      {"roundup_power2_divisions:8", 88080384, 92274688, 88 * MiB, 0, 0},
      {"roundup_power2_divisions:2", 419430400, 536870912, 512 * MiB, 0, 0},
      {"roundup_power2_divisions:4", 5000, 5120, 2 * MiB, 2 * MiB - 5120, 1},
      {"roundup_power2_divisions:4", 1200, 1536, 2 * MiB, 2 * MiB - 1536, 1}, /* the guard: 1200 <= 512 x 4 */
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    world_t *w = open_world("caching", rows[i].conf, 0);
    REQUIRE(w != NULL);
    ab_dptr_t p = alloc(w, rows[i].request);
    const char *pool = rows[i].small ? "small_pool" : "large_pool";
    char name[64];
    snprintf(name, sizeof name, "allocated_bytes.%s.current", pool);
    CHECK_MSG(mstat(w, name) == (int64_t)rows[i].rounded, "row %zu: %s is %lld", i, name, (long long)mstat(w, name));
    snprintf(name, sizeof name, "reserved_bytes.%s.current", pool);
    CHECK_MSG(mstat(w, name) == (int64_t)rows[i].segment, "row %zu: %s is %lld", i, name, (long long)mstat(w, name));
    CHECK_EQ(mstat(w, "inactive_split_bytes.all.current"), rows[i].split_rest);
    CHECK_EQ(mstat(w, "requested_bytes.all.current"), rows[i].request);
    REQUIRE(w->nevents == 1);
    CHECK(w->events[0].ev == AB_TR_SEGMENT_ALLOC && w->events[0].bytes == rows[i].segment);
    release(w, p, rows[i].request);
    close_world(w);
  }
}

/* ---- section 9.1: PyTorch's tests ---------------------------------------------------------- */

/* A: active_bytes moves by the block and comes back; freed counts it. */
static void test_memory_stats(void) {
  world_t *w = open_world("caching", NULL, 0);
  REQUIRE(w != NULL);
  int64_t before = mstat(w, "active_bytes.all.current");
  ab_dptr_t p = alloc(w, 1024);
  CHECK_EQ(mstat(w, "active_bytes.all.current"), before + 1024);
  CHECK_EQ(mstat(w, "active_bytes.all.freed"), 0);
  release(w, p, 1024);
  empty_cache(w);
  CHECK_EQ(mstat(w, "active_bytes.all.current"), before);
  CHECK_EQ(mstat(w, "active_bytes.all.freed"), 1024);
  CHECK_EQ(mstat(w, "active_bytes.all.peak"), 1024);
  CHECK_EQ(mstat(w, "reserved_bytes.all.current"), 0);
  CHECK_EQ(mstat(w, "reserved_bytes.all.peak"), 2 * MiB);
  close_world(w);
}

/* B: one byte is 512 allocated in a new 2 MiB segment. */
static void test_memory_allocation(void) {
  world_t *w = open_world("caching", NULL, 0);
  REQUIRE(w != NULL);
  ab_dptr_t p = alloc(w, 1);
  CHECK_EQ(mstat(w, "allocated_bytes.all.current"), 512);
  CHECK_EQ(mstat(w, "reserved_bytes.all.current"), 2 * MiB);
  release(w, p, 1);
  CHECK_EQ(mstat(w, "allocated_bytes.all.current"), 0);
  close_world(w);
}

/* C: the OOM message; a request of 1 EB or more fails before the allocator. */
static void test_out_of_memory(void) {
  world_t *w = open_world("caching", NULL, 0);
  REQUIRE(w != NULL);
  char msg[1024];
  uint64_t huge = 1024ULL * 1024 * 1024 * 800000000ULL;
  ab_dptr_t p;
  CHECK(try_alloc(w, huge, 0, &p) == AB_ERR_OOM);
  ab_strategy_describe_oom(w->s, huge, 0, msg, sizeof msg);
  CHECK_STR_CONTAINS(msg, "CUDA out of memory. Tried to allocate 800000000.00 GiB. GPU 0 has a total capacity of 139.80 GiB");
  CHECK_STR_CONTAINS(msg, "See documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html");
  CHECK_EQ(mstat(w, "num_ooms"), 1);
  uint64_t beyond = 1024ULL * 1024 * 1024 * 8000000000ULL;
  CHECK(try_alloc(w, beyond, 0, &p) == AB_ERR_OOM);
  ab_strategy_describe_oom(w->s, beyond, 0, msg, sizeof msg);
  CHECK_STR_CONTAINS(msg, "Tried to allocate more than 1EB memory");
  CHECK_EQ(mstat(w, "num_ooms"), 1); /* not counted by PyTorch */
  close_world(w);
}

/* D: half the card twice fails; after the first is freed, the second fits. */
static void test_out_of_memory_retry(void) {
  world_t *w = open_world("caching", NULL, 0);
  REQUIRE(w != NULL);
  uint64_t half = TOTAL / 2;
  ab_dptr_t a = alloc(w, half), b;
  char msg[1024];
  CHECK(try_alloc(w, half, 0, &b) == AB_ERR_OOM);
  ab_strategy_describe_oom(w->s, half, 0, msg, sizeof msg);
  CHECK_STR_CONTAINS(msg, "Tried to allocate");
  CHECK_EQ(mstat(w, "num_alloc_retries"), 1);
  release(w, a, half);
  b = alloc(w, half);
  CHECK(b != 0);
  release(w, b, half);
  close_world(w);
}

/* E: a cap of half the card: 49.9% fits, 50% does not, since reserved + segment > cap. */
static void test_set_per_process_memory_fraction(void) {
  uint64_t cap = (uint64_t)(0.5 * (double)TOTAL);
  world_t *w = open_world("caching", NULL, cap);
  REQUIRE(w != NULL);
  uint64_t fits = (uint64_t)((double)TOTAL * 0.499);
  ab_dptr_t p = alloc(w, fits), q;
  release(w, p, fits);
  empty_cache(w);
  char msg[1024], cap_text[32], want[64];
  CHECK(try_alloc(w, cap, 0, &q) == AB_ERR_OOM);
  ab_strategy_describe_oom(w->s, cap, 0, msg, sizeof msg);
  CHECK_STR_CONTAINS(msg, "out of memory");
  snprintf(want, sizeof want, "%s allowed; ", ab_format_bytes_torch(cap, cap_text, sizeof cap_text));
  CHECK_STR_CONTAINS(msg, want);
  close_world(w);
}

/* F: per_process_memory_fraction caps at fraction x total; 1.0 means no cap, 0.0 no room. */
static void test_get_per_process_memory_fraction(void) {
  char msg[1024], cap_text[32], want[64];
  ab_dptr_t p;
  world_t *w = open_world("caching", "per_process_memory_fraction:0.25", 0);
  REQUIRE(w != NULL);
  uint64_t cap = (uint64_t)(0.25 * (double)TOTAL);
  CHECK(try_alloc(w, cap + 2 * MiB, 0, &p) == AB_ERR_OOM);
  ab_strategy_describe_oom(w->s, cap + 2 * MiB, 0, msg, sizeof msg);
  snprintf(want, sizeof want, "%s allowed; ", ab_format_bytes_torch(cap, cap_text, sizeof cap_text));
  CHECK_STR_CONTAINS(msg, want);
  close_world(w);
  w = open_world("caching", "per_process_memory_fraction:1.0", 0);
  REQUIRE(w != NULL);
  p = alloc(w, TOTAL / 2);
  CHECK(try_alloc(w, TOTAL, 0, &p) == AB_ERR_OOM);
  ab_strategy_describe_oom(w->s, TOTAL, 0, msg, sizeof msg);
  CHECK_MSG(strstr(msg, "allowed") == NULL, "%s", msg);
  close_world(w);
  w = open_world("caching", "per_process_memory_fraction:0.0", 0);
  REQUIRE(w != NULL);
  CHECK(try_alloc(w, 1, 0, &p) == AB_ERR_OOM);
  close_world(w);
}

/* H: active_bytes.all.allocated deltas under settings changed at run time. */
static void test_allocator_settings(void) {
  world_t *w = open_world("caching", NULL, 0);
  REQUIRE(w != NULL);
  const uint64_t nbytes = 21 * MiB * 4; /* 21 x 2^20 float32 */
  struct {
    const char *settings;
    uint64_t bytes, delta;
  } steps[] = {
      {"", nbytes, 88080384},
      {"roundup_power2_divisions:4", nbytes, 100663296},
      {"garbage_collection_threshold:0.5", nbytes, 88080384},
      {"garbage_collection_threshold:0.5,max_split_size_mb:40", nbytes, 88080384},
      {"garbage_collection_threshold:0.5,roundup_power2_divisions:[64:8,128:2,256:2,512:2,1024:1,>:1]", nbytes,
       92274688},
      {"garbage_collection_threshold:0.5,roundup_power2_divisions:[64:8,128:2,256:2,512:2,1024:1,>:1]", 419430400,
       536870912},
      {"release_lock_on_cudamalloc:True", nbytes, 88080384},
  };
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    ab_diag_t d = {""};
    CHECK_MSG(ab_caching_set_settings(w->s, steps[i].settings, &d) == AB_OK, "%s", d.msg);
    int64_t active = mstat(w, "active_bytes.all.allocated"), requested = mstat(w, "requested_bytes.all.allocated");
    ab_dptr_t p = alloc(w, steps[i].bytes);
    CHECK_MSG(mstat(w, "active_bytes.all.allocated") - active == (int64_t)steps[i].delta, "step %zu: delta %lld", i,
              (long long)(mstat(w, "active_bytes.all.allocated") - active));
    CHECK_EQ(mstat(w, "requested_bytes.all.allocated") - requested, steps[i].bytes);
    release(w, p, steps[i].bytes);
  }
  ab_diag_t d = {""};
  CHECK(ab_caching_set_settings(w->s, "max_split_size_mb:2", &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "max_split_size_mb too small");
  close_world(w);
}

/* I: cap 120 MiB, max_split_size_mb:40, a and c plain, b expandable. release_available frees
 * only the 80 MiB of plain blocks (not enough); the final retry also unmaps b. */
static void test_max_split_expandable(void) {
  world_t *w = open_world("caching", "max_split_size_mb:40", 120 * MiB);
  REQUIRE(w != NULL);
  ab_diag_t d = {""};
  uint64_t size = 40 * MiB;
  ab_dptr_t a = alloc(w, size);
  CHECK(ab_caching_set_settings(w->s, "max_split_size_mb:40,expandable_segments:True", &d) == AB_OK);
  ab_dptr_t b = alloc(w, size);
  CHECK(ab_caching_set_settings(w->s, "max_split_size_mb:40,expandable_segments:False", &d) == AB_OK);
  ab_dptr_t c = alloc(w, size), x;
  CHECK(try_alloc(w, size, 0, &x) == AB_ERR_OOM);
  release(w, a, size);
  release(w, b, size);
  release(w, c, size);
  size_t frees = count_events(w, AB_TR_SEGMENT_FREE), unmaps = count_events(w, AB_TR_SEGMENT_UNMAP);
  ab_dptr_t big = alloc(w, 120 * MiB);
  CHECK(big != 0);
  CHECK_EQ(count_events(w, AB_TR_SEGMENT_FREE) - frees, 2);
  CHECK_EQ(count_events(w, AB_TR_SEGMENT_UNMAP) - unmaps, 1);
  CHECK_EQ(mstat(w, "num_alloc_retries"), 2);
  release(w, big, 120 * MiB);
  close_world(w);
}

/* J: cap 120 MiB, threshold 0.5: GC frees a's whole segment; b's block is "split" (the
 * unmapped range follows it), so it stays. */
static void test_garbage_collect_expandable(void) {
  world_t *w = open_world("caching", "garbage_collection_threshold:0.5", 120 * MiB);
  REQUIRE(w != NULL);
  ab_diag_t d = {""};
  uint64_t size = 40 * MiB;
  ab_dptr_t a = alloc(w, size);
  CHECK(ab_caching_set_settings(w->s, "garbage_collection_threshold:0.5,expandable_segments:True", &d) == AB_OK);
  ab_dptr_t b = alloc(w, size);
  release(w, a, size);
  release(w, b, size);
  CHECK(ab_caching_set_settings(w->s, "garbage_collection_threshold:0.5", &d) == AB_OK);
  ab_dptr_t big = alloc(w, 80 * MiB);
  CHECK(big != 0);
  CHECK_EQ(count_events(w, AB_TR_SEGMENT_FREE), 1);
  CHECK_EQ(count_events(w, AB_TR_SEGMENT_UNMAP), 0);
  CHECK_EQ(mstat(w, "num_alloc_retries"), 0);
  release(w, big, 80 * MiB);
  close_world(w);
}

/* N: a block still used by another stream is not reused until its free completes. */
static void test_record_stream(void) {
  world_t *w = open_world("caching", NULL, 0);
  REQUIRE(w != NULL);
  uint64_t size = 50 * 4;
  ab_dptr_t tmp = alloc_on(w, size, 1);
  CHECK(ab_strategy_free_request(w->s, tmp, size, 1) == AB_OK);
  check_invariants(w);
  CHECK_EQ(mstat(w, "active.all.current"), 1);
  CHECK_EQ(mstat(w, "allocation.all.current"), 0);
  ab_dptr_t other = alloc_on(w, size, 1);
  CHECK(other != tmp);
  CHECK(ab_strategy_free_complete(w->s, tmp, size, 1) == AB_OK);
  check_invariants(w);
  ab_dptr_t again = alloc_on(w, size, 1);
  CHECK(again == tmp);
  release_on(w, again, size, 1);
  release_on(w, other, size, 1);
  close_world(w);
}

/* O: 100 x (160 MiB, used by another stream, freed) under a 1 GiB cap never runs out: the
 * final retry synchronises and completes the waiting frees. */
static void test_caching_allocator_record_stream_oom(void) {
  world_t *w = open_world("caching", NULL, 1 * GiB);
  REQUIRE(w != NULL);
  uint64_t size = 160 * MiB;
  ab_dptr_t ptrs[100];
  for (int i = 0; i < 100; i++) {
    ptrs[i] = alloc(w, size);
    CHECK(ab_strategy_free_request(w->s, ptrs[i], size, 0) == AB_OK);
  }
  CHECK(mstat(w, "num_sync_all_streams") >= 1);
  CHECK_EQ(mstat(w, "num_ooms"), 0);
  /* The completions arrive late; those already completed by a synchronisation are no-ops. */
  for (int i = 0; i < 100; i++) CHECK(ab_strategy_free_complete(w->s, ptrs[i], size, 0) == AB_OK);
  check_invariants(w);
  CHECK_EQ(mstat(w, "active.all.current"), 0);
  empty_cache(w);
  CHECK_EQ(mstat(w, "reserved_bytes.all.current"), 0);
  close_world(w);
}

typedef struct seek_s {
  ab_dptr_t addr;
  uint64_t requested;
  ab_block_state_t state;
  bool found;
} seek_t;

static int seek_block(void *ctx, const ab_segment_info_t *seg) {
  seek_t *k = ctx;
  for (size_t i = 0; i < seg->nblocks; i++)
    if (seg->blocks[i].addr == k->addr) {
      k->requested = seg->blocks[i].requested;
      k->state = seg->blocks[i].state;
      k->found = true;
    }
  return 0;
}

/* P: the segment walk shows the block with its requested size; after free and empty_cache
 * the last decision is a segment free. */
static void test_memory_snapshot(void) {
  world_t *w = open_world("caching", NULL, 0);
  REQUIRE(w != NULL);
  uint64_t size = 311 * 411 * 4;
  ab_dptr_t p = alloc(w, size);
  seek_t k = {p, 0, AB_BLOCK_FREE, false};
  CHECK(ab_strategy_walk(w->s, seek_block, &k) == AB_OK);
  CHECK(k.found && k.requested == 511284 && k.state == AB_BLOCK_ALLOCATED);
  release(w, p, size);
  empty_cache(w);
  REQUIRE(w->nevents > 0);
  CHECK(w->events[w->nevents - 1].ev == AB_TR_SEGMENT_FREE);
  close_world(w);
}

/* T: raw_alloc of 1 MiB counts 1 MiB requested. */
static void test_cachingAllocator_raw_alloc(void) {
  world_t *w = open_world("caching", NULL, 0);
  REQUIRE(w != NULL);
  int64_t before = mstat(w, "requested_bytes.all.allocated");
  ab_dptr_t p = alloc(w, MiB);
  CHECK_EQ(mstat(w, "requested_bytes.all.allocated") - before, MiB);
  release(w, p, MiB);
  close_world(w);
}

/* U: 2^40 float32 is out of memory, with or without max_split_size_mb:1024. */
static void test_raises_oom(void) {
  const char *confs[] = {NULL, "max_split_size_mb:1024"};
  for (int i = 0; i < 2; i++) {
    world_t *w = open_world("caching", confs[i], 0);
    REQUIRE(w != NULL);
    ab_dptr_t p;
    CHECK(try_alloc(w, (1ULL << 40) * 4, 0, &p) == AB_ERR_OOM);
    CHECK_EQ(mstat(w, "num_ooms"), 1);
    close_world(w);
  }
}

/* V: seed 123, 10 000 steps of 2-20 MiB allocations, random frees and empty_cache, the live
 * total under 1 GiB; every block stays disjoint from the others. */
static void test_allocator_fuzz(void) {
  world_t *w = open_world("caching", NULL, 0);
  REQUIRE(w != NULL);
  ab_rng_t rng = ab_rng_seed(123);
  ab_dptr_t ptrs[512];
  uint64_t sizes[512], live = 0;
  size_t n = 0;
  for (int step = 0; step < 10000; step++) {
    double r = ab_rng_uniform(&rng) * 2.1;
    if (r < 1.0 && n < 512) {
      uint64_t bytes = ab_rng_range(&rng, 512 * 1024, 5 * 1024 * 1024 - 1) * 4;
      if (live + bytes >= GiB) continue;
      ptrs[n] = alloc(w, bytes);
      for (size_t i = 0; i < n; i++)
        CHECK_MSG(ptrs[n] + bytes <= ptrs[i] || ptrs[i] + sizes[i] <= ptrs[n], "step %d: overlap", step);
      sizes[n++] = bytes;
      live += bytes;
    } else if (r < 2.0 && n > 0) {
      size_t i = (size_t)ab_rng_range(&rng, 0, n - 1);
      release(w, ptrs[i], sizes[i]);
      live -= sizes[i];
      ptrs[i] = ptrs[n - 1];
      sizes[i] = sizes[--n];
    } else if (r >= 2.0) {
      empty_cache(w);
    }
  }
  while (n > 0) {
    n--;
    release(w, ptrs[n], sizes[n]);
  }
  close_world(w);
}

/* Y: statistics stay consistent after every step; empty_cache counts one synchronisation;
 * whenever memory is allocated, a device allocation happened. */
static void test_memory_stats_generator(void) {
  world_t *w = open_world("caching", NULL, 0);
  REQUIRE(w != NULL);
  static const uint64_t shapes[] = {1, 100, 1000, 10000, 100000, 1000000, 4000000, 10000000, 30000000};
  ab_dptr_t ptrs[64];
  uint64_t sizes[64];
  size_t n = 0;
  ab_rng_t rng = ab_rng_seed(7);
  for (int round = 0; round < 5; round++) {
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
      for (int k = 0; k < 3; k++) {
        sizes[n] = shapes[i] * 4 + (uint64_t)k * 4;
        ptrs[n] = alloc(w, sizes[n]);
        n++;
        CHECK(mstat(w, "num_device_alloc") >= 1);
      }
    }
    while (n > 0) { /* in a permuted order */
      size_t i = (size_t)ab_rng_range(&rng, 0, n - 1);
      release(w, ptrs[i], sizes[i]);
      ptrs[i] = ptrs[n - 1];
      sizes[i] = sizes[--n];
    }
    int64_t syncs = mstat(w, "num_sync_all_streams");
    empty_cache(w);
    CHECK_EQ(mstat(w, "num_sync_all_streams"), syncs + 1);
  }
  close_world(w);
}

/* ---- section 9.2: derived cases ------------------------------------------------------------ */

/* 1: four 512 KiB blocks fill one small segment, the fourth takes the rest whole. */
static void derived_small_packing(void) {
  world_t *w = open_world("caching", NULL, 0);
  REQUIRE(w != NULL);
  uint64_t size = 524288;
  ab_dptr_t p[5];
  p[0] = alloc(w, size);
  CHECK_EQ(mstat(w, "inactive_split.all.current"), 1);
  CHECK_EQ(mstat(w, "inactive_split_bytes.all.current"), 1572864);
  for (int i = 1; i < 4; i++) p[i] = alloc(w, size);
  CHECK_EQ(mstat(w, "inactive_split.all.current"), 0);
  CHECK_EQ(mstat(w, "segment.small_pool.current"), 1);
  p[4] = alloc(w, size);
  CHECK_EQ(mstat(w, "segment.small_pool.current"), 2);
  for (int i = 0; i < 5; i++) release(w, p[i], size);
  close_world(w);
}

/* 2: 3 MiB takes a 20 MiB segment and leaves the rest split; a second one reuses it. */
static void derived_large_buffer(void) {
  world_t *w = open_world("caching", NULL, 0);
  REQUIRE(w != NULL);
  ab_dptr_t a = alloc(w, 3 * MiB);
  CHECK_EQ(mstat(w, "reserved_bytes.all.current"), 20 * MiB);
  CHECK_EQ(mstat(w, "inactive_split_bytes.all.current"), 17825792);
  ab_dptr_t b = alloc(w, 3 * MiB);
  CHECK_EQ(mstat(w, "num_device_alloc"), 1);
  release(w, a, 3 * MiB);
  release(w, b, 3 * MiB);
  ab_dptr_t c = alloc(w, 3 * MiB + 1);
  CHECK_EQ(mstat(w, "inactive_split_bytes.all.current"), 17825280);
  release(w, c, 3 * MiB + 1);
  close_world(w);
}

/* 3: 11 MiB gets a 12 MiB segment, all of it: 1 MiB left over is not split off. */
static void derived_no_split_at_1mib(void) {
  world_t *w = open_world("caching", NULL, 0);
  REQUIRE(w != NULL);
  ab_dptr_t p = alloc(w, 11 * MiB);
  CHECK_EQ(mstat(w, "allocated_bytes.all.current"), 12582912);
  CHECK_EQ(mstat(w, "inactive_split.all.current"), 0);
  release(w, p, 11 * MiB);
  close_world(w);
}

/* 4: max_split_size_mb:100: an oversize cached block serves requests >= 100 MiB within
 * 20 MiB of its size, and nothing smaller. */
static void derived_oversize(void) {
  world_t *w = open_world("caching", "max_split_size_mb:100", 0);
  REQUIRE(w != NULL);
  ab_dptr_t big = alloc(w, 300 * MiB);
  CHECK_EQ(mstat(w, "oversize_segments.current"), 1);
  CHECK_EQ(mstat(w, "oversize_allocations.current"), 1);
  release(w, big, 300 * MiB);
  CHECK_EQ(mstat(w, "oversize_allocations.current"), 0);
  ab_dptr_t p = alloc(w, 290 * MiB);
  CHECK(p == big);
  CHECK_EQ(mstat(w, "num_device_alloc"), 1);
  release(w, p, 290 * MiB);
  p = alloc(w, 270 * MiB);
  CHECK_EQ(mstat(w, "num_device_alloc"), 2);
  release(w, p, 270 * MiB);
  p = alloc(w, 50 * MiB);
  CHECK_EQ(mstat(w, "num_device_alloc"), 3);
  release(w, p, 50 * MiB);
  close_world(w);
  /* max_non_split_rounding_mb widens the window. */
  w = open_world("caching", "max_split_size_mb:100,max_non_split_rounding_mb:50", 0);
  REQUIRE(w != NULL);
  big = alloc(w, 300 * MiB);
  release(w, big, 300 * MiB);
  p = alloc(w, 270 * MiB);
  CHECK(p == big);
  release(w, p, 270 * MiB);
  close_world(w);
}

/* planned's misses go to the caching allocator STAlloc ships (Note [STAlloc's fallback] in
 * planned.c): with no plan every request is a miss; a segment for 10 MiB or more is the
 * request rounded to 512 bytes (PyTorch: 2 MiB), and blocks of 128 MiB or more are not split. */
static void stalloc_fallback(void) {
  world_t *w = open_world("planned", NULL, 0);
  REQUIRE(w != NULL);
  ab_dptr_t a = alloc(w, 11 * MiB + 1);
  REQUIRE(w->nevents == 1);
  CHECK_EQ(w->events[0].ev, AB_TR_SEGMENT_ALLOC);
  CHECK_EQ(w->events[0].bytes, 11 * MiB + 512);
  ab_dptr_t big = alloc(w, 200 * MiB);
  release(w, big, 200 * MiB);
  ab_dptr_t p = alloc(w, 100 * MiB);
  CHECK(p != big);
  CHECK_EQ(count_events(w, AB_TR_SEGMENT_ALLOC), 3);
  release(w, p, 100 * MiB);
  release(w, a, 11 * MiB + 1);
  close_world(w);
  /* The same requests under PyTorch's own defaults. */
  w = open_world("caching", NULL, 0);
  REQUIRE(w != NULL);
  a = alloc(w, 11 * MiB + 1);
  CHECK_EQ(w->events[0].bytes, 12 * MiB);
  big = alloc(w, 200 * MiB);
  release(w, big, 200 * MiB);
  p = alloc(w, 100 * MiB);
  CHECK(p == big);
  release(w, p, 100 * MiB);
  release(w, a, 11 * MiB + 1);
  close_world(w);
}

/* 5: a block freed on one stream never serves another stream. */
static void derived_streams(void) {
  world_t *w = open_world("caching", NULL, 0);
  REQUIRE(w != NULL);
  ab_dptr_t a = alloc_on(w, 4 * MiB, 1);
  release_on(w, a, 4 * MiB, 1);
  ab_dptr_t b = alloc_on(w, 4 * MiB, 2);
  CHECK_EQ(mstat(w, "num_device_alloc"), 2);
  CHECK(b != a);
  release_on(w, b, 4 * MiB, 2);
  close_world(w);
}

/* 6: frees merge with free neighbours; a whole free segment goes at empty_cache. */
static void derived_coalescing(void) {
  world_t *w = open_world("caching", NULL, 0);
  REQUIRE(w != NULL);
  uint64_t size = 4 * MiB;
  ab_dptr_t x = alloc(w, size), y = alloc(w, size), z = alloc(w, size);
  CHECK_EQ(mstat(w, "segment.all.current"), 1);
  release(w, y, size);
  CHECK_EQ(mstat(w, "inactive_split.all.current"), 2);
  release(w, x, size);
  CHECK_EQ(mstat(w, "inactive_split.all.current"), 2);
  release(w, z, size);
  CHECK_EQ(mstat(w, "inactive_split.all.current"), 0);
  empty_cache(w);
  CHECK_EQ(mstat(w, "num_device_free"), 1);
  CHECK_EQ(mstat(w, "segment.all.current"), 0);
  close_world(w);
}

/* 7: cap 30 MiB: 5 MiB takes a 20 MiB segment; 16 MiB cannot have a new one and nothing
 * can be released: OOM after one retry. 12 MiB fits the 15 MiB remainder. */
static void derived_cap(void) {
  world_t *w = open_world("caching", NULL, 30 * MiB);
  REQUIRE(w != NULL);
  ab_dptr_t a = alloc(w, 5 * MiB), b;
  char msg[1024];
  CHECK(try_alloc(w, 16 * MiB, 0, &b) == AB_ERR_OOM);
  ab_strategy_describe_oom(w->s, 16 * MiB, 0, msg, sizeof msg);
  CHECK_STR_CONTAINS(msg, "Tried to allocate 16.00 MiB");
  CHECK_STR_CONTAINS(msg, "30.00 MiB allowed; Of the allocated memory 5.00 MiB is allocated by PyTorch, and 15.00 MiB "
                          "is reserved by PyTorch but unallocated.");
  CHECK_EQ(mstat(w, "num_alloc_retries"), 1);
  CHECK_EQ(mstat(w, "num_ooms"), 1);
  b = alloc(w, 12 * MiB);
  CHECK_EQ(mstat(w, "num_device_alloc"), 1);
  release(w, a, 5 * MiB);
  release(w, b, 12 * MiB);
  close_world(w);
}

/* ---- sections 3 and 4: the ladder and expandable segments ---------------------------------- */

/* 3.1: with a cap, release_available frees the smallest oversize block that is big enough. */
static void release_available_smallest_big_enough(void) {
  world_t *w = open_world("caching", "max_split_size_mb:100", 700 * MiB);
  REQUIRE(w != NULL);
  ab_dptr_t a = alloc(w, 300 * MiB), b = alloc(w, 200 * MiB);
  release(w, a, 300 * MiB);
  release(w, b, 200 * MiB);
  ab_dptr_t c = alloc(w, 250 * MiB);
  CHECK_EQ(count_events(w, AB_TR_SEGMENT_FREE), 1);
  CHECK(w->events[2].ev == AB_TR_SEGMENT_FREE && w->events[2].addr == a);
  CHECK_EQ(mstat(w, "num_alloc_retries"), 0);
  release(w, c, 250 * MiB);
  close_world(w);
}

/* 3.1: when none is big enough alone, the largest ones go until enough is freed. */
static void release_available_largest_first(void) {
  world_t *w = open_world("caching", "max_split_size_mb:100", 500 * MiB);
  REQUIRE(w != NULL);
  ab_dptr_t p[3];
  for (int i = 0; i < 3; i++) p[i] = alloc(w, 150 * MiB);
  for (int i = 0; i < 3; i++) release(w, p[i], 150 * MiB);
  ab_dptr_t big = alloc(w, 300 * MiB);
  CHECK_EQ(count_events(w, AB_TR_SEGMENT_FREE), 2);
  CHECK_EQ(mstat(w, "reserved_bytes.all.current"), 450 * MiB);
  CHECK_EQ(mstat(w, "num_alloc_retries"), 0);
  release(w, big, 300 * MiB);
  close_world(w);
}

/* 3.2: without max_split_size, the final retry frees every whole cached segment. */
static void final_retry_frees_cache(void) {
  world_t *w = open_world("caching", NULL, 40 * MiB);
  REQUIRE(w != NULL);
  ab_dptr_t a = alloc(w, 3 * MiB);
  release(w, a, 3 * MiB);
  ab_dptr_t b = alloc(w, 30 * MiB);
  CHECK_EQ(mstat(w, "num_alloc_retries"), 1);
  CHECK_EQ(mstat(w, "num_sync_all_streams"), 1);
  CHECK_EQ(mstat(w, "num_device_free"), 1);
  CHECK_EQ(mstat(w, "num_ooms"), 0);
  release(w, b, 30 * MiB);
  close_world(w);
}

/* 3.3: GC frees whole cached large segments at least as old as the average, only under a cap
 * and only once reserved passes threshold x cap. */
static void garbage_collection_by_age(void) {
  for (int capped = 0; capped < 2; capped++) {
    world_t *w = open_world("caching", "garbage_collection_threshold:0.5", capped ? 400 * MiB : 0);
    REQUIRE(w != NULL);
    ab_dptr_t s1 = alloc_on(w, 12 * MiB, 1);
    release_on(w, s1, 12 * MiB, 1);
    ab_dptr_t p[4];
    for (int i = 0; i < 4; i++) p[i] = alloc(w, 40 * MiB);
    release(w, p[0], 40 * MiB); /* a ages while stream 1 keeps the pool busy */
    for (int i = 0; i < 10; i++) release_on(w, alloc_on(w, 12 * MiB, 1), 12 * MiB, 1);
    release(w, p[1], 40 * MiB);
    ab_dptr_t e = alloc(w, 44 * MiB); /* 172 MiB reserved: below the 200 MiB threshold */
    CHECK_EQ(count_events(w, AB_TR_SEGMENT_FREE), 0);
    ab_dptr_t f = alloc(w, 46 * MiB); /* 216 MiB: frees a (age 12 >= average 16/3) only */
    if (capped) {
      REQUIRE(count_events(w, AB_TR_SEGMENT_FREE) == 1);
      CHECK(w->events[w->nevents - 2].ev == AB_TR_SEGMENT_FREE && w->events[w->nevents - 2].addr == p[0]);
    } else {
      CHECK_EQ(count_events(w, AB_TR_SEGMENT_FREE), 0);
    }
    release(w, e, 44 * MiB);
    release(w, f, 46 * MiB);
    release(w, p[2], 40 * MiB);
    release(w, p[3], 40 * MiB);
    close_world(w);
  }
}

/* 4: pages are mapped as needed; segment counts ignore expandable memory; empty_cache unmaps
 * whole free pages and gives the range back once nothing is mapped. */
static void expandable_grows_and_shrinks(void) {
  world_t *w = open_world("expandable", NULL, 0);
  REQUIRE(w != NULL);
  ab_dptr_t a = alloc(w, 3 * MiB);
  CHECK_EQ(mstat(w, "reserved_bytes.all.current"), 20 * MiB);
  CHECK_EQ(mstat(w, "segment.all.current"), 0);
  ab_dptr_t b = alloc(w, 3 * MiB);
  CHECK(b == a + 3 * MiB);
  CHECK_EQ(mstat(w, "num_device_alloc"), 1);
  ab_dptr_t c = alloc(w, 30 * MiB); /* 14 MiB free at the tail: one more page */
  CHECK(c == b + 3 * MiB);
  CHECK_EQ(mstat(w, "reserved_bytes.all.current"), 40 * MiB);
  CHECK_EQ(mstat(w, "num_device_alloc"), 2);
  CHECK_EQ(mstat(w, "inactive_split.all.current"), 0);
  release(w, c, 30 * MiB);
  empty_cache(w); /* [6 MiB, 40 MiB) is free: page 1 goes, page 0 is partly in use */
  CHECK_EQ(mstat(w, "reserved_bytes.all.current"), 20 * MiB);
  CHECK_EQ(mstat(w, "num_device_free"), 1);
  release(w, a, 3 * MiB);
  release(w, b, 3 * MiB);
  empty_cache(w);
  CHECK_EQ(mstat(w, "reserved_bytes.all.current"), 0);
  CHECK_EQ(w->dev->calls.va_release, 1);
  close_world(w);
}

/* 2.2: in an expandable segment, best fit avoids the tail before the unmapped range while
 * another block fits. */
static void expandable_best_fit_avoids_tail(void) {
  world_t *w = open_world("expandable", NULL, 0);
  REQUIRE(w != NULL);
  ab_dptr_t a = alloc(w, 4 * MiB), b = alloc(w, 4 * MiB), c = alloc(w, 4 * MiB), d = alloc(w, 5 * MiB);
  release(w, b, 4 * MiB); /* a 4 MiB hole; 3 MiB free at the tail */
  ab_dptr_t e = alloc(w, 3 * MiB);
  CHECK(e == b);
  release(w, a, 4 * MiB);
  release(w, c, 4 * MiB);
  release(w, d, 5 * MiB);
  release(w, e, 3 * MiB);
  close_world(w);
}

/* 4: a map the device refuses (the budget) fails like a cuMemCreate OOM: nothing stays
 * mapped for it, and the ladder goes on. */
static void expandable_refused_page(void) {
  world_t *w = open_world("expandable", NULL, 50 * MiB);
  REQUIRE(w != NULL);
  ab_dptr_t a = alloc(w, 15 * MiB), b;
  /* 5 MiB free at the tail; 30 MiB more pass the cap check (20 + 30 <= 50) but need two more
   * pages: 60 MiB > the 50 MiB the card has. */
  CHECK(try_alloc(w, 30 * MiB, 0, &b) == AB_ERR_OOM);
  CHECK_EQ(mstat(w, "reserved_bytes.all.current"), 20 * MiB);
  CHECK_EQ(w->dev->held_bytes, 20 * MiB);
  CHECK_EQ(mstat(w, "num_device_alloc"), 1);
  release(w, a, 15 * MiB);
  close_world(w);
}

/* Each stream grows its own segment. */
static void expandable_per_stream(void) {
  world_t *w = open_world("expandable", NULL, 0);
  REQUIRE(w != NULL);
  ab_dptr_t a = alloc_on(w, 3 * MiB, 0), b = alloc_on(w, 3 * MiB, 1);
  CHECK_EQ(w->dev->calls.va_reserve, 2);
  CHECK_EQ(mstat(w, "reserved_bytes.large_pool.current"), 40 * MiB);
  release_on(w, a, 3 * MiB, 0);
  release_on(w, b, 3 * MiB, 1);
  close_world(w);
}

/* The reservation covers 1 1/8 of the card in whole pages (section 4). */
static void expandable_reservation_size(void) {
  world_t *w = open_world("expandable", NULL, 0);
  REQUIRE(w != NULL);
  ab_dptr_t p = alloc(w, 512);     /* the small pool's segment */
  ab_dptr_t q = alloc(w, 2 * MiB); /* the large pool's, reserved next, just below it */
  uint64_t large = (TOTAL + TOTAL / 8 + 20 * MiB - 1) / (20 * MiB) * (20 * MiB);
  CHECK_EQ(p - q, large);
  release(w, p, 512);
  release(w, q, 2 * MiB);
  empty_cache(w);
  CHECK_EQ(w->dev->calls.va_release, 2);
  close_world(w);
}

/* large_segment_size_mb sets the segment of 1-10 MiB requests. */
static void large_segment_size(void) {
  world_t *w = open_world("caching", "large_segment_size_mb:40", 0);
  REQUIRE(w != NULL);
  ab_dptr_t p = alloc(w, 2 * MiB);
  CHECK_EQ(mstat(w, "reserved_bytes.all.current"), 40 * MiB);
  release(w, p, 2 * MiB);
  close_world(w);
}

/* The presets, and memory_stats' max_split_size frozen at creation. */
static void presets_and_max_split_size(void) {
  world_t *w = open_world("split-limited", NULL, 0);
  REQUIRE(w != NULL);
  CHECK_EQ(mstat(w, "max_split_size"), 128 * MiB);
  ab_diag_t d = {""};
  CHECK(ab_caching_set_settings(w->s, "max_split_size_mb:256", &d) == AB_OK);
  CHECK_EQ(mstat(w, "max_split_size"), 128 * MiB);
  close_world(w);
  w = open_world("split-limited", "max_split_size_mb:512", 0);
  REQUIRE(w != NULL);
  CHECK_EQ(mstat(w, "max_split_size"), 512 * MiB);
  close_world(w);
  w = open_world("caching", NULL, 0);
  REQUIRE(w != NULL);
  CHECK_EQ(mstat(w, "max_split_size"), -1);
  close_world(w);
  w = open_world("expandable", "expandable_segments:False", 0);
  REQUIRE(w != NULL);
  ab_dptr_t p = alloc(w, 3 * MiB);
  CHECK_EQ(mstat(w, "segment.all.current"), 1);
  release(w, p, 3 * MiB);
  close_world(w);
}

/* Frees that do not match a live allocation are refused with a reason. */
static void bad_frees_refused(void) {
  world_t *w = open_world("caching", NULL, 0);
  REQUIRE(w != NULL);
  ab_dptr_t p = alloc(w, 4096);
  CHECK(ab_strategy_free(w->s, p + 512, 4096, 0) == AB_ERR_INVALID);
  CHECK(ab_strategy_free(w->s, p, 100, 0) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(w->dev->diag.msg, "allocated as 4096 bytes");
  CHECK(ab_strategy_free_complete(w->s, p, 4096, 0) == AB_ERR_INVALID);
  release(w, p, 4096);
  CHECK(ab_strategy_free(w->s, p, 4096, 0) == AB_ERR_INVALID);
  close_world(w);
}

/* Everything held is given back at destroy, live allocations included. */
static void destroy_returns_everything(void) {
  world_t *w = open_world("expandable", NULL, 0);
  REQUIRE(w != NULL);
  alloc(w, 3 * MiB);
  alloc(w, 100);
  ab_dptr_t p = alloc(w, 64 * MiB);
  CHECK(ab_strategy_free_request(w->s, p, 64 * MiB, 0) == AB_OK);
  ab_diag_t d = {""};
  CHECK(ab_caching_set_settings(w->s, "expandable_segments:False", &d) == AB_OK);
  alloc(w, 30 * MiB);
  close_world(w); /* the device checks for leaks */
}

/* Random mixes under every kind of configuration, with a budget or without: allocations of
 * 1 byte to 40 MiB on three streams, plain and two-halved frees, empty_cache, expandable
 * segments switched on and off. Live blocks never overlap (blocks whose frees completed early
 * at a synchronisation excepted), the invariants hold, and everything comes back. */
typedef struct mixed_s {
  ab_dptr_t p;
  uint64_t bytes;
  unsigned stream;
  int state; /* 0 live, 1 free requested, 2 completed early by a synchronisation */
} mixed_t;

static void random_mix_everything(void) {
  static const char *const confs[] = {
      "", "max_split_size_mb:40", "expandable_segments:True",
      "roundup_power2_divisions:[1:4,64:2,>:8],max_split_size_mb:64,max_non_split_rounding_mb:30",
      "garbage_collection_threshold:0.3,max_split_size_mb:20", "large_segment_size_mb:30,expandable_segments:True"};
  for (int seed = 0; seed < 12; seed++) {
    world_t *w = open_world("caching", confs[seed % 6], seed % 3 == 0 ? 0 : (uint64_t)(200 + seed * 37) * MiB);
    REQUIRE(w != NULL);
    ab_rng_t r = ab_rng_seed((uint64_t)seed);
    mixed_t live[400];
    int n = 0;
    for (int step = 0; step < 8000; step++) {
      uint64_t x = ab_rng_next(&r) % 100;
      if (x < 45 && n < 400) {
        uint64_t bytes = ab_rng_next(&r) % 4 == 0 ? ab_rng_range(&r, 1, 4096)
                                                  : (ab_rng_range(&r, 1, 40) * MiB) >> (ab_rng_next(&r) % 8);
        unsigned stream = (unsigned)(ab_rng_next(&r) % 3);
        int64_t syncs = mstat(w, "num_sync_all_streams");
        ab_dptr_t p;
        ab_status st = ab_strategy_alloc(w->s, bytes, stream, &p);
        if (mstat(w, "num_sync_all_streams") != syncs)
          for (int i = 0; i < n; i++) live[i].state = live[i].state == 1 ? 2 : live[i].state;
        if (st == AB_ERR_OOM) continue;
        REQUIRE_MSG(st == AB_OK, "seed %d step %d: %s", seed, step, w->dev->diag.msg);
        for (int i = 0; i < n; i++)
          REQUIRE_MSG(live[i].state == 2 || p + bytes <= live[i].p || live[i].p + live[i].bytes <= p,
                      "seed %d step %d: overlap", seed, step);
        live[n++] = (mixed_t){p, bytes, stream, 0};
      } else if (x < 85 && n > 0) {
        int i = (int)(ab_rng_next(&r) % (uint64_t)n);
        ab_status st;
        if (live[i].state > 0) {
          st = ab_strategy_free_complete(w->s, live[i].p, live[i].bytes, live[i].stream);
          live[i] = live[--n];
        } else if (ab_rng_next(&r) % 4 == 0) {
          st = ab_strategy_free_request(w->s, live[i].p, live[i].bytes, live[i].stream);
          live[i].state = 1;
        } else {
          st = ab_strategy_free(w->s, live[i].p, live[i].bytes, live[i].stream);
          live[i] = live[--n];
        }
        REQUIRE_MSG(st == AB_OK, "seed %d step %d: %s", seed, step, w->dev->diag.msg);
      } else if (x < 87) {
        CHECK(ab_strategy_empty_cache(w->s) == AB_OK);
        for (int k = 0; k < n; k++) live[k].state = live[k].state == 1 ? 2 : live[k].state;
      } else if (x < 88) {
        ab_diag_t d = {""};
        const char *toggle = ab_rng_next(&r) % 2 ? "expandable_segments:True" : "expandable_segments:False";
        CHECK(ab_caching_set_settings(w->s, toggle, &d) == AB_OK);
      }
      if (step % 7 == 0) check_invariants(w);
    }
    for (int i = 0; i < n; i++)
      CHECK(live[i].state ? ab_strategy_free_complete(w->s, live[i].p, live[i].bytes, live[i].stream) == AB_OK
                          : ab_strategy_free(w->s, live[i].p, live[i].bytes, live[i].stream) == AB_OK);
    empty_cache(w);
    CHECK_EQ(mstat(w, "reserved_bytes.all.current"), 0);
    CHECK_EQ(mstat(w, "active.all.current"), 0);
    close_world(w);
  }
}

static const ab_test_t tests[] = {
    {"worked_examples_of_section_1_4", worked_examples_of_section_1_4},
    {"test_memory_stats", test_memory_stats},
    {"test_memory_allocation", test_memory_allocation},
    {"test_out_of_memory", test_out_of_memory},
    {"test_out_of_memory_retry", test_out_of_memory_retry},
    {"test_set_per_process_memory_fraction", test_set_per_process_memory_fraction},
    {"test_get_per_process_memory_fraction", test_get_per_process_memory_fraction},
    {"test_allocator_settings", test_allocator_settings},
    {"test_max_split_expandable", test_max_split_expandable},
    {"test_garbage_collect_expandable", test_garbage_collect_expandable},
    {"test_record_stream", test_record_stream},
    {"test_caching_allocator_record_stream_oom", test_caching_allocator_record_stream_oom},
    {"test_memory_snapshot", test_memory_snapshot},
    {"test_cachingAllocator_raw_alloc", test_cachingAllocator_raw_alloc},
    {"test_raises_oom", test_raises_oom},
    {"test_allocator_fuzz", test_allocator_fuzz},
    {"test_memory_stats_generator", test_memory_stats_generator},
    {"derived_small_packing", derived_small_packing},
    {"derived_large_buffer", derived_large_buffer},
    {"derived_no_split_at_1mib", derived_no_split_at_1mib},
    {"derived_oversize", derived_oversize},
    {"stalloc_fallback", stalloc_fallback},
    {"derived_streams", derived_streams},
    {"derived_coalescing", derived_coalescing},
    {"derived_cap", derived_cap},
    {"release_available_smallest_big_enough", release_available_smallest_big_enough},
    {"release_available_largest_first", release_available_largest_first},
    {"final_retry_frees_cache", final_retry_frees_cache},
    {"garbage_collection_by_age", garbage_collection_by_age},
    {"expandable_grows_and_shrinks", expandable_grows_and_shrinks},
    {"expandable_best_fit_avoids_tail", expandable_best_fit_avoids_tail},
    {"expandable_refused_page", expandable_refused_page},
    {"expandable_per_stream", expandable_per_stream},
    {"expandable_reservation_size", expandable_reservation_size},
    {"large_segment_size", large_segment_size},
    {"presets_and_max_split_size", presets_and_max_split_size},
    {"bad_frees_refused", bad_frees_refused},
    {"destroy_returns_everything", destroy_returns_everything},
    {"random_mix_everything", random_mix_everything},
};

AB_TEST_MAIN(tests)
