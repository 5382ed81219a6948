/* pluggable_test.c: the pluggable strategy (pluggable.c) and its card (pluggable_card.c) on
 * the simulated device, with the example plugins (plugins/) and the test plugins
 * (tests/plugins/): each kind of CUDA call landing on the device and counted, the segment
 * decisions a library makes, its hooks, and the calls and libraries that are refused with
 * one line naming them. The command line and the acceptance against raw are
 * pluggable_cli_test.sh; conformance_test and invariants_test run the example plugins
 * through their suites (--strategy). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/base/units.h"
#include "kernels/device/device.h"
#include "kernels/device/device_open.h"
#include "strategies/registry.h"
#include "strategies/strategy.h"

#include "tests/check.h"

/* ---- a strategy on a simulated card, its segment decisions logged ------------------------- */

#define MAX_DECISIONS 256

typedef struct decision_s {
  ab_trace_action_t action;
  ab_dptr_t addr;
  uint64_t bytes;
  unsigned stream;
} decision_t;

typedef struct world_s {
  ab_device_t *dev;
  ab_strategy_t *s;
  decision_t log[MAX_DECISIONS];
  size_t nlog;
  ab_diag_t diag; /* why open failed */
} world_t;

static void observe(void *ctx, ab_trace_action_t action, ab_dptr_t addr, uint64_t bytes, unsigned stream) {
  world_t *w = ctx;
  if (w->nlog < MAX_DECISIONS) w->log[w->nlog++] = (decision_t){action, addr, bytes, stream};
}

static char plugin_path[4][1024];

/* An example plugin (strategies/plugins/) or a test plugin (tests/plugins/), as pluggable:PATH[suffix]. */
static const char *plugin(const char *dir, const char *name, const char *suffix) {
  static int next;
  char *out = plugin_path[next++ % 4];
  snprintf(out, sizeof plugin_path[0], "pluggable:%s/lib%s.so%s", dir, name, suffix);
  return out;
}
#define EXAMPLE(name, suffix) plugin(AB_PLUGINS_DIR, name, suffix)
#define TEST_PLUGIN(name, suffix) plugin(AB_TEST_PLUGINS_DIR, name, suffix)

/* Opens strategy with conf on a simulated card of `card` bytes (0: an H200) and budget. */
static bool world_open(world_t *w, const char *strategy, const char *conf, uint64_t card, uint64_t budget) {
  memset(w, 0, sizeof *w);
  ab_device_config_t cfg = {.budget_bytes = budget};
  char spec[64] = "sim";
  if (card) snprintf(spec, sizeof spec, "sim:%llu", (unsigned long long)card);
  if (ab_device_open(spec, &cfg, &w->dev, &w->diag) != AB_OK) return false;
  if (ab_strategy_create(strategy, w->dev, conf, &w->s, &w->diag) != AB_OK) {
    ab_device_close(w->dev, NULL);
    w->dev = NULL;
    return false;
  }
  ab_strategy_observe(w->s, observe, w);
  return true;
}

/* The invariant checks pass, then the strategy goes and the device closes without a leak. */
static void world_close(world_t *w) {
  ab_diag_t d = {""};
  CHECK_MSG(ab_strategy_check(w->s, &d) == AB_OK, "%s", d.msg);
  ab_strategy_destroy(w->s);
  CHECK_MSG(ab_device_close(w->dev, &d) == AB_OK, "leak: %s", d.msg);
}

static void check_ok(world_t *w) {
  ab_diag_t d = {""};
  CHECK_MSG(ab_strategy_check(w->s, &d) == AB_OK, "%s", d.msg);
}

static ab_stats_t stats_of(world_t *w) {
  ab_stats_t st;
  ab_strategy_stats(w->s, &st);
  return st;
}

/* ---- one cudaMalloc per request is raw ------------------------------------------------------ */

/* The same requests through raw and through a library doing one cudaMalloc per request give
 * the same answers, addresses, segment decisions and statistics, budget and OOMs included. */
static void malloc_each_is_raw(void) {
  const char *names[] = {"raw", EXAMPLE("malloc_each", "")};
  world_t w[2];
  ab_dptr_t ptr[2][64] = {{0}};
  uint64_t bytes[64] = {0};
  ab_status answers[2][400];
  for (int k = 0; k < 2; k++) {
    REQUIRE_MSG(world_open(&w[k], names[k], NULL, 0, 300ULL << 20), "%s: %s", names[k], w[k].diag.msg);
    uint64_t seed = 7;
    for (int op = 0; op < 400; op++) {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      size_t i = (size_t)(seed >> 33) % 64;
      answers[k][op] = AB_OK;
      if (ptr[k][i]) {
        answers[k][op] = ab_strategy_free(w[k].s, ptr[k][i], bytes[i], (unsigned)i % 3);
        ptr[k][i] = 0;
      } else {
        bytes[i] = 1 + (seed >> 40) % (24ULL << 20);
        answers[k][op] = ab_strategy_alloc(w[k].s, bytes[i], (unsigned)i % 3, &ptr[k][i]);
        if (answers[k][op] != AB_OK) ptr[k][i] = 0;
      }
    }
    for (size_t i = 0; i < 64; i++)
      if (ptr[k][i]) CHECK(ab_strategy_free(w[k].s, ptr[k][i], bytes[i], (unsigned)i % 3) == AB_OK);
  }
  int ooms = 0;
  for (int op = 0; op < 400; op++) {
    CHECK_MSG(answers[0][op] == answers[1][op], "op %d: raw %s, plugin %s", op, ab_strerror(answers[0][op]),
              ab_strerror(answers[1][op]));
    ooms += answers[0][op] == AB_ERR_OOM;
  }
  CHECK_MSG(ooms > 0, "the budget was never reached: the comparison says nothing of OOMs");
  CHECK_EQ(w[0].nlog, w[1].nlog);
  for (size_t i = 0; i < w[0].nlog && i < w[1].nlog; i++)
    CHECK_MSG(memcmp(&w[0].log[i], &w[1].log[i], sizeof w[0].log[i]) == 0, "segment decision %zu differs", i);
  ab_stats_t a = stats_of(&w[0]), b = stats_of(&w[1]);
  CHECK_MSG(memcmp(&a, &b, sizeof a) == 0, "statistics differ: reserved peak %lld vs %lld, device allocs %llu vs %llu",
            (long long)a.reserved_bytes.peak, (long long)b.reserved_bytes.peak, (unsigned long long)a.num_device_alloc,
            (unsigned long long)b.num_device_alloc);
  CHECK_EQ(w[0].dev->held_peak, w[1].dev->held_peak);
  for (int k = 0; k < 2; k++) world_close(&w[k]);
}

/* ---- virtual memory ------------------------------------------------------------------------- */

typedef struct seg_seen_s {
  int segments;
  uint64_t bytes, blocks_live, unmapped;
  bool expandable;
} seg_seen_t;

static int seen_segment(void *ctx, const ab_segment_info_t *seg) {
  seg_seen_t *s = ctx;
  s->segments++;
  s->bytes += seg->bytes;
  s->expandable = seg->expandable;
  for (size_t i = 0; i < seg->nblocks; i++) {
    if (seg->blocks[i].state == AB_BLOCK_ALLOCATED) s->blocks_live += seg->blocks[i].bytes;
    if (seg->blocks[i].state == AB_BLOCK_UNMAPPED) s->unmapped += seg->blocks[i].bytes;
  }
  return 0;
}

/* Reservations, handles and mappings land on the device's virtual memory: a mapping is a
 * device allocation and a segment_map decision, the reservation an expandable segment. */
static void vmm_calls_land_on_the_card(void) {
  world_t w;
  REQUIRE_MSG(world_open(&w, TEST_PLUGIN("vmm", ""), NULL, 0, 0), "%s", w.diag.msg);
  ab_dptr_t p;
  REQUIRE(ab_strategy_alloc(w.s, 3 << 20, 0, &p) == AB_OK);
  ab_stats_t st = stats_of(&w);
  CHECK_EQ(st.reserved_bytes.current, 4 << 20);
  CHECK_EQ(st.requested_bytes.current, 3 << 20);
  CHECK_EQ(st.num_device_alloc, 1);
  CHECK_EQ(w.dev->held_bytes, 4 << 20);
  CHECK_EQ(w.dev->calls.va_reserve, 1);
  REQUIRE(w.nlog == 1);
  CHECK(w.log[0].action == AB_TR_SEGMENT_MAP && w.log[0].addr == p && w.log[0].bytes == 4 << 20);
  seg_seen_t seen = {0};
  CHECK(ab_strategy_walk(w.s, seen_segment, &seen) == AB_OK);
  CHECK(seen.segments == 1 && seen.expandable && seen.bytes == 4 << 20 && seen.blocks_live == 3 << 20);
  check_ok(&w);
  CHECK(ab_strategy_free(w.s, p, 3 << 20, 0) == AB_OK);
  st = stats_of(&w);
  CHECK_EQ(st.reserved_bytes.current, 0);
  CHECK_EQ(st.num_device_free, 1);
  CHECK_EQ(w.dev->held_bytes, 0);
  CHECK_EQ(w.dev->calls.va_release, 1);
  CHECK(w.nlog == 2 && w.log[1].action == AB_TR_SEGMENT_UNMAP && w.log[1].bytes == 4 << 20);
  world_close(&w);
}

/* A block over two mappings is held; one unmap of both frees two device allocations. */
static void a_block_over_two_mappings(void) {
  world_t w;
  REQUIRE_MSG(world_open(&w, TEST_PLUGIN("vmm", ":split_malloc:split_free"), NULL, 0, 0), "%s", w.diag.msg);
  ab_dptr_t p;
  REQUIRE(ab_strategy_alloc(w.s, 7 << 20, 1, &p) == AB_OK);
  ab_stats_t st = stats_of(&w);
  CHECK_EQ(st.num_device_alloc, 2);
  CHECK_EQ(st.reserved_bytes.current, 8 << 20);
  CHECK(w.nlog == 2 && w.log[0].stream == 1 && w.log[1].addr == w.log[0].addr + w.log[0].bytes);
  seg_seen_t seen = {0};
  CHECK(ab_strategy_walk(w.s, seen_segment, &seen) == AB_OK);
  CHECK(seen.segments == 1 && seen.bytes == 8 << 20 && seen.blocks_live == 7 << 20);
  check_ok(&w);
  CHECK(ab_strategy_free(w.s, p, 7 << 20, 1) == AB_OK);
  CHECK_EQ(stats_of(&w).num_device_free, 2);
  CHECK(w.nlog == 3 && w.log[2].action == AB_TR_SEGMENT_UNMAP && w.log[2].bytes == 8 << 20);
  world_close(&w);
}

/* cuMemCreate past the budget is cudaErrorMemoryAllocation: the library gives up, which is an
 * OOM, and what it reserved is back. */
static void vmm_oom_is_an_oom(void) {
  world_t w;
  REQUIRE_MSG(world_open(&w, TEST_PLUGIN("vmm", ""), NULL, 0, 8 << 20), "%s", w.diag.msg);
  ab_dptr_t p, q;
  CHECK(ab_strategy_alloc(w.s, 6 << 20, 0, &p) == AB_OK);
  CHECK(ab_strategy_alloc(w.s, 4 << 20, 0, &q) == AB_ERR_OOM);
  ab_stats_t st = stats_of(&w);
  CHECK_EQ(st.num_ooms, 1);
  CHECK_EQ(w.dev->calls.va_reserve, w.dev->calls.va_release + 1);
  CHECK(w.dev->held_peak <= 8 << 20);
  check_ok(&w);
  CHECK(ab_strategy_free(w.s, p, 6 << 20, 0) == AB_OK);
  world_close(&w);
}

/* ---- the stream-ordered pool ------------------------------------------------------------------ */

/* cudaMallocAsync on the streams the library was given lands on those streams of the device's
 * pool; reserved bytes are the pool's reserve, kept across a synchronisation only when the
 * library raises the release threshold (CUDA's default keeps nothing), and the reset hook
 * trims it. */
static void async_calls_use_the_pool(void) {
  for (int keep = 0; keep < 2; keep++) {
    world_t w;
    REQUIRE_MSG(world_open(&w, TEST_PLUGIN("async_each", ""), keep ? "init:keep_all,reset:trim_all" : NULL, 0, 0), "%s",
                w.diag.msg);
    ab_dptr_t p[3];
    for (unsigned k = 0; k < 3; k++) REQUIRE(ab_strategy_alloc(w.s, (k + 1) << 20, k, &p[k]) == AB_OK);
    REQUIRE(w.nlog == 3);
    for (unsigned k = 0; k < 3; k++) CHECK(w.log[k].action == AB_TR_SEGMENT_ALLOC && w.log[k].stream == k);
    ab_stats_t st = stats_of(&w);
    CHECK(st.reserved_bytes.current >= 6 << 20);
    CHECK_EQ(st.reserved_bytes.current, w.dev->held_bytes);
    check_ok(&w);
    for (unsigned k = 0; k < 3; k++) CHECK(ab_strategy_free(w.s, p[k], (k + 1) << 20, k) == AB_OK);
    CHECK(ab_strategy_synchronize(w.s) == AB_OK);
    st = stats_of(&w);
    CHECK_MSG(keep ? st.reserved_bytes.current > 0 : st.reserved_bytes.current == 0, "keep %d: %lld reserved", keep,
              (long long)st.reserved_bytes.current);
    CHECK(ab_strategy_empty_cache(w.s) == AB_OK);
    CHECK_EQ(stats_of(&w).reserved_bytes.current, 0);
    CHECK_EQ(stats_of(&w).num_device_free, 3);
    world_close(&w);
  }
}

/* A library may run out without a CUDA call failing: its own pool spent, or no room on the
 * device by cudaMemGetInfo. Its NULL is an OOM. */
static void oom_without_a_failed_call(void) {
  world_t w;
  REQUIRE_MSG(world_open(&w, TEST_PLUGIN("gives_up", ":bump_alloc:bump_free"), NULL, 0, 0), "%s", w.diag.msg);
  ab_dptr_t p[3];
  for (int i = 0; i < 2; i++) CHECK(ab_strategy_alloc(w.s, 3 << 20, 0, &p[i]) == AB_OK);
  CHECK(ab_strategy_alloc(w.s, 3 << 20, 0, &p[2]) == AB_ERR_OOM);
  CHECK_EQ(stats_of(&w).num_ooms, 1);
  CHECK_EQ(w.dev->calls.failed, 0);
  for (int i = 0; i < 2; i++) CHECK(ab_strategy_free(w.s, p[i], 3 << 20, 0) == AB_OK);
  world_close(&w);

  REQUIRE_MSG(world_open(&w, TEST_PLUGIN("gives_up", ":room_alloc:room_free"), NULL, 1ULL << 30, 0), "%s", w.diag.msg);
  CHECK(ab_strategy_alloc(w.s, 2ULL << 30, 0, &p[0]) == AB_ERR_OOM);
  CHECK_EQ(stats_of(&w).num_ooms, 1);
  CHECK_EQ(w.dev->calls.malloc, 0);
  world_close(&w);
}

/* ---- hooks ------------------------------------------------------------------------------------ */

#define POOL_HOOKS "init:pool_init,reset:pool_reset,memory_fraction:pool_memory_fraction"

/* The example pool keeps what is freed (reserved stays), reuses it, and gives it back on
 * reset (empty_cache); told a memory fraction, it refuses past the cap, an OOM though the
 * device had room. */
static void pool_hooks(void) {
  world_t w;
  REQUIRE_MSG(world_open(&w, EXAMPLE("small_pool", ""), POOL_HOOKS ",per_process_memory_fraction:0.5", 4ULL << 30, 0),
              "%s", w.diag.msg);
  ab_dptr_t big, small[3];
  REQUIRE(ab_strategy_alloc(w.s, 1536ULL << 20, 0, &big) == AB_OK);
  for (int i = 0; i < 3; i++) REQUIRE(ab_strategy_alloc(w.s, 1000, 0, &small[i]) == AB_OK);
  CHECK(small[1] == small[0] + 1024 && small[2] == small[1] + 1024); /* slots of one slab */
  ab_stats_t st = stats_of(&w);
  CHECK_EQ(st.num_device_alloc, 2);
  CHECK_EQ(st.reserved_bytes.current, (1536LL << 20) + (2 << 20));
  ab_dptr_t more;
  CHECK(ab_strategy_alloc(w.s, 1ULL << 30, 0, &more) == AB_ERR_OOM);
  CHECK_EQ(stats_of(&w).num_ooms, 1);
  CHECK_EQ(w.dev->calls.failed, 0);
  for (int i = 0; i < 3; i++) CHECK(ab_strategy_free(w.s, small[i], 1000, 0) == AB_OK);
  CHECK(ab_strategy_free(w.s, big, 1536ULL << 20, 0) == AB_OK);
  CHECK_EQ(stats_of(&w).reserved_bytes.current, (1536LL << 20) + (2 << 20));
  ab_dptr_t again;
  CHECK(ab_strategy_alloc(w.s, 1536ULL << 20, 0, &again) == AB_OK && again == big);
  CHECK_EQ(stats_of(&w).num_device_alloc, 2);
  CHECK(ab_strategy_free(w.s, again, 1536ULL << 20, 0) == AB_OK);
  CHECK(ab_strategy_empty_cache(w.s) == AB_OK);
  st = stats_of(&w);
  CHECK_EQ(st.reserved_bytes.current, 0);
  CHECK_EQ(st.num_device_free, 2);
  world_close(&w);
}

/* With record_stream a free in two halves reaches the library at the request; without it,
 * at the completion. */
static void record_stream_frees_early(void) {
  for (int hook = 0; hook < 2; hook++) {
    world_t w;
    REQUIRE_MSG(world_open(&w, EXAMPLE("small_pool", ""), hook ? "record_stream:pool_record_stream" : NULL, 0, 0), "%s",
                w.diag.msg);
    ab_dptr_t p, q;
    REQUIRE(ab_strategy_alloc(w.s, 4096, 1, &p) == AB_OK);
    CHECK(ab_strategy_free_request(w.s, p, 4096, 1) == AB_OK);
    CHECK_EQ(stats_of(&w).requested_bytes.current, hook ? 0 : 4096);
    /* The early free makes the block reusable at once; its completion must not free the new one. */
    REQUIRE(ab_strategy_alloc(w.s, 4096, 1, &q) == AB_OK);
    CHECK(hook ? q == p : q != p);
    CHECK(ab_strategy_free_complete(w.s, p, 4096, 1) == AB_OK);
    CHECK_EQ(stats_of(&w).requested_bytes.current, 4096);
    CHECK(ab_strategy_free(w.s, q, 4096, 1) == AB_OK);
    world_close(&w);
  }
}

/* ---- what the library gets wrong, and what the card does not do ------------------------------ */

/* Runs one allocation of 1 MiB through strategy; returns its status, the reason in why. */
static ab_status one_alloc(const char *strategy, char *why, size_t size) {
  world_t w;
  why[0] = '\0';
  if (!world_open(&w, strategy, NULL, 0, 0)) {
    snprintf(why, size, "%s", w.diag.msg);
    return AB_ERR_IO; /* not made at all */
  }
  ab_dptr_t p = 0;
  ab_status st = ab_strategy_alloc(w.s, 1 << 20, 0, &p);
  if (st == AB_OK) st = ab_strategy_free(w.s, p, 1 << 20, 0);
  snprintf(why, size, "%s", w.dev->diag.msg);
  ab_strategy_destroy(w.s);
  ab_diag_t d = {""};
  CHECK_MSG(ab_device_close(w.dev, &d) == AB_OK, "%s: what the library held was not given back: %s", strategy, d.msg);
  return st;
}

static void misuse_fails_the_call(void) {
  static const struct {
    const char *fns, *says;
  } cases[] = {
      {":null_alloc:my_free", "null_alloc(1048576) returned NULL without running out of memory"},
      {":bogus_alloc:my_free", "bogus_alloc(1048576) returned 0x1000, which is not inside device memory the library holds"},
      {":copy_alloc:my_free", "it called cudaMemcpy, which the simulated card does not provide"},
      {":attribute_alloc:my_free", "it called cudaDeviceGetAttribute(attribute 16), which the simulated card does not provide"},
      {":leaky_alloc:twice_free", "of memory the library did not get from cudaMalloc"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char why[AB_DIAG_BYTES];
    const char *strategy = TEST_PLUGIN("misbehaving", cases[i].fns);
    ab_status st = one_alloc(strategy, why, sizeof why);
    CHECK_MSG(st == AB_ERR_INVALID, "%s: %s (%s)", cases[i].fns, ab_strerror(st), why);
    CHECK_STR_CONTAINS(why, cases[i].says);
    CHECK_STR_CONTAINS(why, "pluggable: ");
    CHECK_STR_CONTAINS(why, "libmisbehaving.so");
  }
}

/* CUDA's error names and texts; calls reached through cuGetProcAddress land like the others;
 * memory a library never frees is given back when the strategy goes. */
static void entry_points_and_leaks(void) {
  char why[AB_DIAG_BYTES];
  CHECK_MSG(one_alloc(TEST_PLUGIN("misbehaving", ":error_names_alloc:my_free"), why, sizeof why) == AB_OK, "%s", why);
  CHECK_MSG(one_alloc(TEST_PLUGIN("misbehaving", ":driver_alloc:driver_free"), why, sizeof why) == AB_OK, "%s", why);
  CHECK_MSG(one_alloc(TEST_PLUGIN("misbehaving", ":leaky_alloc:no_free"), why, sizeof why) == AB_OK, "%s", why);
}

/* Bad libraries and bad names: one line each, nothing made. */
static void bad_libraries_are_refused(void) {
  char text[300], dir[300], each[300], missing[300], libc_free[300], graph[300], fifo[300];
  snprintf(text, sizeof text, "pluggable:%s/tests/strategies/pluggable_test.c", AB_SOURCE_DIR);
  /* Opened to be read, a FIFO would wait for a writer for ever. */
  const char *fifo_path = ab_test_tmp_path("lib.fifo");
  unlink(fifo_path);
  REQUIRE_MSG(mkfifo(fifo_path, 0600) == 0, "mkfifo %s", fifo_path);
  snprintf(fifo, sizeof fifo, "pluggable:%s", fifo_path);
  snprintf(dir, sizeof dir, "pluggable:%s", AB_TEST_PLUGINS_DIR);
  snprintf(each, sizeof each, "%s", EXAMPLE("malloc_each", ""));
  snprintf(missing, sizeof missing, "%s", EXAMPLE("malloc_each", ":nosuch:my_free"));
  snprintf(libc_free, sizeof libc_free, "%s", EXAMPLE("malloc_each", ":my_malloc:free"));
  snprintf(graph, sizeof graph, "%s", TEST_PLUGIN("imports_graph", ""));
  const struct {
    const char *strategy, *conf, *says;
  } cases[] = {
      {"pluggable:/no/such/lib.so", NULL, "pluggable: /no/such/lib.so: No such file or directory"},
      {text, NULL, "pluggable: cannot load"},
      {dir, NULL, "not a file (a directory)"},
      {fifo, NULL, "not a file (a FIFO): a library is a regular file"},
      {"pluggable:/dev/zero", NULL, "pluggable: /dev/zero: not a file (a character device)"},
      {missing, NULL, "exports no function 'nosuch' (name the functions: -s pluggable:PATH:ALLOC_FN:FREE_FN)"},
      {libc_free, NULL, "exports no function 'free'"},
      {graph, NULL, "calls cudaGraphLaunch, which the simulated card does not provide"},
      {each, "init:nosuch", "exports no function 'nosuch' (-c init:FN)"},
      {each, "init:1bad", "expected the name of a function of the library"},
      {each, "per_process_memory_fraction:0.5", "only through its memory_fraction hook"},
      {each, "bogus:x", "unknown key 'bogus'"},
      {"pluggable:", NULL, "expected pluggable:PATH or pluggable:PATH:ALLOC_FN:FREE_FN"},
      {"pluggable:a.so:my_malloc", NULL, "expected pluggable:PATH or pluggable:PATH:ALLOC_FN:FREE_FN"},
      {"pluggable:a.so:1:my_free", NULL, "expected pluggable:PATH or pluggable:PATH:ALLOC_FN:FREE_FN"},
      {"pluggable", NULL, "unknown strategy"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    world_t w;
    CHECK_MSG(!world_open(&w, cases[i].strategy, cases[i].conf, 0, 0), "%s was made", cases[i].strategy);
    CHECK_STR_CONTAINS(w.diag.msg, cases[i].says);
    CHECK_MSG(strchr(w.diag.msg, '\n') == NULL, "%s", w.diag.msg);
  }
}

/* A library's globals are one allocator's: a second run of it waits for the first to end. */
static void one_run_per_library(void) {
  world_t a, b;
  const char *lib = EXAMPLE("small_pool", "");
  REQUIRE_MSG(world_open(&a, lib, NULL, 0, 0), "%s", a.diag.msg);
  CHECK(!world_open(&b, lib, NULL, 0, 0));
  CHECK_STR_CONTAINS(b.diag.msg, "is in use by another run of this process");
  world_close(&a);
  CHECK_MSG(world_open(&b, lib, NULL, 0, 0), "%s", b.diag.msg);
  if (b.s) world_close(&b);
}

static const ab_test_t tests[] = {
    {"malloc_each_is_raw", malloc_each_is_raw},
    {"vmm_calls_land_on_the_card", vmm_calls_land_on_the_card},
    {"a_block_over_two_mappings", a_block_over_two_mappings},
    {"vmm_oom_is_an_oom", vmm_oom_is_an_oom},
    {"async_calls_use_the_pool", async_calls_use_the_pool},
    {"oom_without_a_failed_call", oom_without_a_failed_call},
    {"pool_hooks", pool_hooks},
    {"record_stream_frees_early", record_stream_frees_early},
    {"misuse_fails_the_call", misuse_fails_the_call},
    {"entry_points_and_leaks", entry_points_and_leaks},
    {"bad_libraries_are_refused", bad_libraries_are_refused},
    {"one_run_per_library", one_run_per_library},
};
AB_TEST_MAIN(tests)
