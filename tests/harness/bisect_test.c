/* bisect_test.c: the budget search (harness/run/bisect.h) and the memory at an OOM
 * (harness/run/oommap.h), on streams whose answers are known by construction, and on the
 * recorded trace (tests/data) against the bracket PyTorch itself showed. Runs on the device of
 * --device= (sim by default; on cuda every probe is a real run, and the test skips where no
 * GPU is usable). */
#include <stdlib.h>
#include <unistd.h>

#include "kernels/base/units.h"
#include "kernels/device/device_open.h"
#include "harness/run/bisect.h"
#include "harness/run/oommap.h"
#include "harness/run/oomreport.h"
#include "harness/run/prefix.h"
#include "harness/run/results.h"
#include "strategies/registry.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

#include "tests/check.h"

#define CNN_DIR AB_TEST_DATA_DIR "/pytorch-2.11-h200"

/* Live at once: 3 + 1 + 2 MiB, then 2 + 2 + 3.5 MiB: the peak requested, 7.5 MiB, is
 * reached by e, event 6. */
static void raw_stream(ab_events_t *es) {
  ab_events_init(es);
  uint32_t a = ab_events_alloc(es, 3 << 20, 0, AB_TAG_ACT);
  uint32_t b = ab_events_alloc(es, 1 << 20, 0, AB_TAG_ACT);
  uint32_t c = ab_events_alloc(es, 2 << 20, 0, AB_TAG_ACT);
  ab_events_free_id(es, a);
  ab_events_free_id(es, b);
  uint32_t d = ab_events_alloc(es, 2 << 20, 0, AB_TAG_ACT);
  uint32_t e = ab_events_alloc(es, 7 << 19, 0, AB_TAG_ACT);
  ab_events_free_id(es, c);
  ab_events_free_id(es, d);
  ab_events_free_id(es, e);
}

/* pooled with 4 MiB chunks: A (1 MiB) takes a chunk of 1 MiB blocks, B (2 MiB) a chunk of
 * 2 MiB blocks: 8 MiB held while A lives. Once A is freed, C fits beside B, and D needs a third
 * chunk; over a budget of 8 MiB the retry releases A's empty chunk and D fits in 8 MiB. So the
 * smallest budget is exactly 8 MiB, though the live requests never pass 6 MiB (B, C, D), and
 * just below it B fails with 1 MiB live: fragmentation. */
static void pooled_stream(ab_events_t *es) {
  ab_events_init(es);
  uint32_t a = ab_events_alloc(es, 1 << 20, 0, AB_TAG_ACT);
  uint32_t b = ab_events_alloc(es, 2 << 20, 0, AB_TAG_ACT);
  ab_events_free_id(es, a);
  uint32_t c = ab_events_alloc(es, 2 << 20, 0, AB_TAG_ACT);
  uint32_t d = ab_events_alloc(es, 2 << 20, 0, AB_TAG_ACT);
  ab_events_free_id(es, b);
  ab_events_free_id(es, c);
  ab_events_free_id(es, d);
}

static ab_bisect_opts_t opts(const char *strategy, const char *conf) {
  ab_bisect_opts_t o = {.strategy = strategy, .conf = conf, .device = ab_test_device};
  return o;
}

#define NEED_DEVICE()                                                                      \
  do {                                                                                     \
    if (strcmp(ab_test_device, "cuda") == 0 && !ab_device_cuda_usable()) SKIP("no usable GPU"); \
  } while (0)

static void peak_requested(void) {
  NEED_DEVICE();
  ab_events_t es;
  raw_stream(&es);
  REQUIRE(ab_events_finish(&es, NULL) == AB_OK);
  CHECK_EQ(ab_bisect_peak_requested(&es), (2 << 20) + (2 << 20) + (7 << 19));
  ab_events_free(&es);
  /* A free in two halves keeps its bytes live until the second. */
  ab_events_init(&es);
  uint32_t a = ab_events_alloc(&es, 100, 0, AB_TAG_ACT);
  ab_events_free_phase(&es, a, AB_FREE_REQUEST);
  uint32_t b = ab_events_alloc(&es, 50, 0, AB_TAG_ACT);
  ab_events_free_phase(&es, a, AB_FREE_COMPLETE);
  ab_events_free_id(&es, b);
  REQUIRE(ab_events_finish(&es, NULL) == AB_OK);
  CHECK_EQ(ab_bisect_peak_requested(&es), 150);
  ab_events_free(&es);
}

/* raw holds exactly what is live, so its smallest budget is the peak requested, to the byte. */
static void raw_answer_is_peak_requested(void) {
  NEED_DEVICE();
  ab_events_t es;
  raw_stream(&es);
  REQUIRE(ab_events_finish(&es, NULL) == AB_OK);
  uint64_t peak = ab_bisect_peak_requested(&es);
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  ab_bisect_opts_t o = opts("raw", NULL);
  ab_bisect_result_t r;
  ab_diag_t diag = {""};
  REQUIRE_MSG(ab_bisect_search(&es, &o, &run, &r, &diag) == AB_OK, "%s", diag.msg);
  CHECK(r.passed && r.failed && !r.below_lo && !r.upper_bound);
  CHECK_EQ(r.peak_requested, peak);
  CHECK_EQ(r.min_budget, peak);
  CHECK_EQ(r.max_fail, peak - 1);
  CHECK(r.oom.kind == AB_OOM_CAPACITY);
  CHECK_EQ(r.oom.event, 6); /* e, the allocation that reaches the peak */
  CHECK_EQ(r.tolerance, AB_BISECT_DEFAULT_TOLERANCE_BYTES);
  CHECK_STR_CONTAINS(r.device, strcmp(ab_test_device, "sim") == 0 ? "sim:h200" : "cuda");

  /* A wide range and an odd tolerance: the answer is still bracketed within the tolerance. */
  o.lo = 1000;
  o.hi = 3ULL << 30;
  o.tolerance = 12345;
  REQUIRE_MSG(ab_bisect_search(&es, &o, &run, &r, &diag) == AB_OK, "%s", diag.msg);
  CHECK(r.passed && r.failed);
  CHECK_MSG(r.max_fail < peak && peak <= r.min_budget, "%llu < %llu <= %llu", (unsigned long long)r.max_fail,
            (unsigned long long)peak, (unsigned long long)r.min_budget);
  CHECK(r.min_budget - r.max_fail <= 12345);
  CHECK(r.probes > 10 && r.probes < 40);
  ab_run_release(&run);
  ab_events_free(&es);
}

static void pooled_fragmentation_answer(void) {
  NEED_DEVICE();
  ab_events_t es;
  pooled_stream(&es);
  REQUIRE(ab_events_finish(&es, NULL) == AB_OK);
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  ab_bisect_opts_t o = opts("pooled", "chunk:4MiB");
  ab_bisect_result_t r;
  ab_diag_t diag = {""};
  /* The default tolerance: within 1 MiB of 8 MiB. */
  REQUIRE_MSG(ab_bisect_search(&es, &o, &run, &r, &diag) == AB_OK, "%s", diag.msg);
  CHECK_EQ(r.peak_requested, 6 << 20);
  CHECK_EQ(r.hi, 12 << 20); /* the unbudgeted run kept A's empty chunk */
  CHECK(r.passed && r.failed);
  CHECK_MSG(r.max_fail < (8 << 20) && (8 << 20) <= r.min_budget && r.min_budget - r.max_fail <= (1 << 20),
            "(%llu, %llu]", (unsigned long long)r.max_fail, (unsigned long long)r.min_budget);
  /* One byte of tolerance: the exact answer. */
  o.tolerance = 1;
  REQUIRE_MSG(ab_bisect_search(&es, &o, &run, &r, &diag) == AB_OK, "%s", diag.msg);
  CHECK_EQ(r.min_budget, 8 << 20);
  CHECK_EQ(r.max_fail, (8 << 20) - 1);
  CHECK(r.oom.kind == AB_OOM_FRAGMENTATION);
  CHECK_EQ(r.oom.event, 1);
  CHECK_EQ(r.oom.live_requested, 1 << 20);
  ab_run_release(&run);
  ab_events_free(&es);
}

/* Reads a whole small file into buf. */
static bool slurp(const char *path, char *buf, size_t size) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return false;
  size_t n = fread(buf, 1, size - 1, f);
  buf[n] = '\0';
  fclose(f);
  return true;
}

/* The map at the OOM of the pooled case, row by row: one chunk of four 1 MiB blocks, A in
 * the lowest. */
static void oom_map_rows(void) {
  NEED_DEVICE();
  ab_events_t es;
  pooled_stream(&es);
  REQUIRE(ab_events_finish(&es, NULL) == AB_OK);
  snprintf(es.source, sizeof es.source, "frag-case");
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  ab_oommap_t map;
  ab_oommap_init(&map);
  ab_bisect_opts_t o = opts("pooled", "chunk:4MiB");
  o.on_oom = ab_oommap_capture;
  o.on_oom_ctx = &map;
  o.tolerance = 1;
  ab_bisect_result_t r;
  ab_diag_t diag = {""};
  REQUIRE_MSG(ab_bisect_search(&es, &o, &run, &r, &diag) == AB_OK, "%s", diag.msg);
  REQUIRE(map.captured && map.walk_status == AB_OK);
  CHECK_EQ(map.nsegs, 1);
  CHECK_EQ(map.nblocks, 4);
  CHECK_EQ(map.largest_free, 1 << 20);
  CHECK_EQ(map.free_bytes, 3 << 20);
  CHECK_EQ(map.unmatched, 0);

  char dir[] = "/tmp/ab_bisect_test_XXXXXX";
  REQUIRE(mkdtemp(dir) != NULL);
  char path[256], text[4096];
  ab_run_desc_t desc = {es.source, "pooled", NULL, "sim", 0, 0, 0, NULL};
  REQUIRE(ab_oomreport_write(&map, dir, &desc, path, sizeof path, &diag) == AB_OK);
  char want_path[256];
  snprintf(want_path, sizeof want_path, "%s/oommap_frag-case_pooled.csv", dir);
  CHECK_STR_CONTAINS(path, want_path);
  REQUIRE(slurp(path, text, sizeof text));
  uint64_t base = map.segs[0].base;
  char want[1024];
  snprintf(want, sizeof want,
           "segment,offset,size,state,alloc_id,requested,segment_size,segment_address,pool,stream,workload,conf,strategy\n"
           "0,0,1048576,allocated,0,0,4194304,%llu,chunk,0,frag-case,,pooled\n"
           "0,1048576,1048576,free,-1,0,4194304,%llu,chunk,0,frag-case,,pooled\n"
           "0,2097152,1048576,free,-1,0,4194304,%llu,chunk,0,frag-case,,pooled\n"
           "0,3145728,1048576,free,-1,0,4194304,%llu,chunk,0,frag-case,,pooled\n",
           (unsigned long long)base, (unsigned long long)base, (unsigned long long)base, (unsigned long long)base);
  CHECK_MSG(strcmp(text, want) == 0, "map file:\n%s\nexpected:\n%s", text, want);
  unlink(path);

  /* The report: PyTorch's figures, the largest free block, the segments, the kind. */
  FILE *f = fopen(path, "w+");
  REQUIRE(f);
  ab_oomreport_print(f, &r.oom, "pooled", r.device, r.max_fail, &map, path);
  fflush(f);
  rewind(f);
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  unlink(path);
  rmdir(dir);
  char said[200];
  snprintf(said, sizeof said, "pooled ran out of memory on %s at event 1 (allocation id 1)", r.device);
  CHECK_STR_CONTAINS(text, said);
  CHECK_STR_CONTAINS(text, "Tried to allocate 2.00 MiB with 8.00 MiB allowed");
  CHECK_STR_CONTAINS(text, "1024.00 KiB is allocated and 3.00 MiB is reserved but unallocated");
  CHECK_STR_CONTAINS(text, "the largest free block is 1024.00 KiB, in 1 segment.");
  CHECK_STR_CONTAINS(text, "Kind: fragmentation");
  CHECK_STR_CONTAINS(text, "Segment map: ");
  ab_oommap_free(&map);
  ab_run_release(&run);
  ab_events_free(&es);
}

/* Pending frees are mapped to their allocation too, and raw's segments are its allocations. */
static void oom_map_ids_of_raw(void) {
  NEED_DEVICE();
  ab_events_t es;
  ab_events_init(&es);
  ab_events_alloc(&es, 3000, 0, AB_TAG_ACT);
  uint32_t b = ab_events_alloc(&es, 2000, 0, AB_TAG_ACT);
  ab_events_free_phase(&es, b, AB_FREE_REQUEST);
  ab_events_alloc(&es, 10000, 0, AB_TAG_ACT);
  REQUIRE(ab_events_finish(&es, NULL) == AB_OK);
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  ab_oommap_t map;
  ab_oommap_init(&map);
  ab_bisect_opts_t o = opts("raw", NULL);
  o.on_oom = ab_oommap_capture;
  o.on_oom_ctx = &map;
  uint64_t held;
  ab_diag_t diag = {""};
  REQUIRE(ab_bisect_probe(&es, &o, 8000, NULL, &run, &held, NULL, &diag) == AB_OK);
  CHECK(run.status == AB_RUN_OOM);
  CHECK_EQ(run.oom.event, 3);
  REQUIRE(map.captured && map.walk_status == AB_OK);
  REQUIRE(map.nsegs == 2);
  /* Each segment holds one allocation: a (id 0, 3000 bytes) and b (id 1, freed on request). */
  for (size_t i = 0; i < 2; i++) {
    REQUIRE(map.segs[i].nblocks == 1);
    const ab_oommap_block_t *blk = &map.blocks[map.segs[i].first_block];
    CHECK_EQ(blk->alloc_id, blk->bytes == 3000 ? 0 : 1);
    CHECK(blk->bytes == 3000 || blk->bytes == 2000);
  }
  CHECK(map.segs[0].base < map.segs[1].base);
  ab_oommap_free(&map);
  ab_run_release(&run);
  ab_events_free(&es);
}

static void outcomes_none_and_below_lo(void) {
  NEED_DEVICE();
  ab_events_t es;
  raw_stream(&es);
  REQUIRE(ab_events_finish(&es, NULL) == AB_OK);
  uint64_t peak = ab_bisect_peak_requested(&es);
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  ab_bisect_result_t r;
  ab_diag_t diag = {""};
  /* hi below what the stream needs: nothing passes. */
  ab_bisect_opts_t o = opts("raw", NULL);
  o.lo = 1 << 20;
  o.hi = 5 << 20;
  REQUIRE(ab_bisect_search(&es, &o, &run, &r, &diag) == AB_OK);
  CHECK(!r.passed && r.failed);
  CHECK_EQ(r.max_fail, 5 << 20);
  CHECK_EQ(r.probes, 1);
  ab_table_t t;
  ab_table_init(&t, ab_oom_cols, ab_oom_ncols);
  ab_run_desc_t d = {"w", "raw", NULL, r.device, 0, 42, 0, NULL};
  REQUIRE(ab_results_add_oom(&t, &d, &es, &r) == AB_OK);
  CHECK_STR_CONTAINS(ab_table_get(&t, 0, "note"), "no budget up to hi");
  CHECK(ab_table_get(&t, 0, "min_budget_bytes")[0] == '\0');
  CHECK(ab_table_get(&t, 0, "overhead_pct")[0] == '\0');
  /* lo above the answer: lo - 1 passes too, and the result says so. */
  o.lo = peak + 4096;
  o.hi = 0;
  REQUIRE(ab_bisect_search(&es, &o, &run, &r, &diag) == AB_OK);
  CHECK(r.passed && r.below_lo && !r.failed);
  CHECK_EQ(r.min_budget, peak + 4095);
  REQUIRE(ab_results_add_oom(&t, &d, &es, &r) == AB_OK);
  CHECK_STR_CONTAINS(ab_table_get(&t, 1, "note"), "below lo");
  CHECK(ab_table_get(&t, 1, "max_fail_bytes")[0] == '\0');
  ab_table_free(&t);
  ab_run_release(&run);
  ab_events_free(&es);
}

static void bad_options_are_refused(void) {
  NEED_DEVICE();
  ab_events_t es;
  raw_stream(&es);
  REQUIRE(ab_events_finish(&es, NULL) == AB_OK);
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  ab_bisect_result_t r;
  ab_diag_t diag = {""};
  ab_bisect_opts_t o = opts("raw", NULL);
  o.lo = 2 << 20;
  o.hi = 1 << 20;
  CHECK(ab_bisect_search(&es, &o, &run, &r, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "--lo 2.00 MiB is above --hi 1.00 MiB");
  o = opts("raw", NULL);
  o.hi = 200ULL << 30;
  CHECK(ab_bisect_search(&es, &o, &run, &r, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "more than the device's total");
  o = opts("nosuch", NULL);
  CHECK(ab_bisect_search(&es, &o, &run, &r, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "unknown strategy");
  o = opts("pooled", "chunk:abc");
  CHECK(ab_bisect_search(&es, &o, &run, &r, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "chunk");
  o = opts("raw", NULL);
  o.cap = true;
  CHECK(ab_bisect_search(&es, &o, &run, &r, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "--cap: raw has no memory cap");
  CHECK_EQ(r.probes, 0);
  ab_run_release(&run);
  ab_events_free(&es);
}

/* A probe starts from a fresh device: the same budget gives the same run, twice. */
static void probes_are_repeatable(void) {
  NEED_DEVICE();
  ab_events_t es;
  ab_diag_t diag = {""};
  REQUIRE(ab_workload_build("random:ops=20000", 42, &es, &diag) == AB_OK);
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  ab_bisect_opts_t o = opts("pooled", NULL);
  uint64_t held1, held2;
  REQUIRE(ab_bisect_probe(&es, &o, 0, NULL, &run, &held1, NULL, &diag) == AB_OK);
  uint64_t budget = held1 - held1 / 8;
  REQUIRE(ab_bisect_probe(&es, &o, budget, NULL, &run, &held1, NULL, &diag) == AB_OK);
  size_t event1 = run.status == AB_RUN_OOM ? run.oom.event : 0;
  ab_stats_t s1 = run.stats;
  REQUIRE(ab_bisect_probe(&es, &o, budget, NULL, &run, &held2, NULL, &diag) == AB_OK);
  CHECK_EQ(held1, held2);
  CHECK_EQ(run.status == AB_RUN_OOM ? run.oom.event : 0, event1);
  CHECK_EQ(run.stats.reserved_bytes.peak, s1.reserved_bytes.peak);
  CHECK_EQ(run.stats.num_device_alloc, s1.num_device_alloc);
  ab_run_release(&run);
  ab_events_free(&es);
}

/* Every strategy on a workload that fits the card gets an answer, bracketed within the
 * tolerance, whatever the strategy does with its budget: the caching family takes it as
 * PyTorch's cap, under which expandable needs more than its unbudgeted peak on cnn-dynamic. */
static void every_strategy_gets_an_answer(void) {
  NEED_DEVICE();
  static const char *const workloads[] = {"cnn-dynamic", "random:ops=20000", "fragmenter"};
  size_t n;
  const ab_strategy_entry_t *all = ab_strategy_registry(&n);
  for (size_t w = 0; w < sizeof workloads / sizeof workloads[0]; w++) {
    ab_events_t es;
    ab_diag_t diag = {""};
    if (ab_workload_build(workloads[w], 42, &es, &diag) != AB_OK) {
      CHECK_MSG(strstr(diag.msg, "unknown workload") != NULL, "%s", diag.msg);
      continue; /* not in this build */
    }
    uint64_t peak = ab_bisect_peak_requested(&es);
    ab_run_t run;
    REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
    for (size_t i = 0; i < n; i++) {
      if (all[i].hidden) continue;
      ab_bisect_opts_t o = opts(all[i].name, NULL);
      ab_bisect_result_t r;
      REQUIRE_MSG(ab_bisect_search(&es, &o, &run, &r, &diag) == AB_OK, "%s: %s", all[i].name, diag.msg);
      CHECK_MSG(r.passed && r.failed && r.max_fail < r.min_budget && r.min_budget - r.max_fail <= r.tolerance &&
                    r.min_budget >= peak,
                "%s on %s: passed %d at %llu, failed %d at %llu, peak requested %llu", all[i].name, workloads[w],
                r.passed, (unsigned long long)r.min_budget, r.failed, (unsigned long long)r.max_fail,
                (unsigned long long)peak);
    }
    ab_run_release(&run);
    ab_events_free(&es);
  }
}

/* A trace whose program caught OOMs and went on (as PyTorch records it: an `oom` line where
 * it raised, then what the program did instead): the answer is an upper bound, and says so. */
static void survived_ooms_make_an_upper_bound(void) {
  NEED_DEVICE();
  static const char csv[] =
      "action,addr,size,stream,time_us\n"
      "alloc,4096,1048576,0,1\n"
      "oom,0,8388608,0,2\n"
      "oom,0,8388608,0,3\n"
      "alloc,2101248,2097152,0,4\n"
      "free_requested,4096,1048576,0,5\n"
      "free_completed,4096,1048576,0,6\n"
      "free_requested,2101248,2097152,0,7\n"
      "free_completed,2101248,2097152,0,8\n";
  char dir[] = "/tmp/ab_bisect_test_XXXXXX", path[64];
  REQUIRE(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/survived.csv", dir);
  FILE *f = fopen(path, "w");
  REQUIRE(f != NULL);
  fputs(csv, f);
  fclose(f);
  ab_events_t es;
  ab_diag_t diag = {""};
  char spec[512];
  snprintf(spec, sizeof spec, "replay:%s", path);
  ab_status built = ab_workload_build(spec, 42, &es, &diag);
  unlink(path);
  rmdir(dir);
  REQUIRE_MSG(built == AB_OK, "%s", diag.msg);
  CHECK_EQ(es.trace_ooms, 2);
  ab_run_t run;
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  ab_bisect_opts_t o = opts("raw", NULL);
  ab_bisect_result_t r;
  REQUIRE_MSG(ab_bisect_search(&es, &o, &run, &r, &diag) == AB_OK, "%s", diag.msg);
  CHECK(r.passed && r.upper_bound);
  ab_table_t t;
  ab_table_init(&t, ab_oom_cols, ab_oom_ncols);
  ab_run_desc_t d = {es.source, "raw", NULL, r.device, 0, 42, 0, NULL};
  REQUIRE(ab_results_add_oom(&t, &d, &es, &r) == AB_OK);
  CHECK_STR_CONTAINS(ab_table_get(&t, 0, "trace_ooms"), "2");
  CHECK_STR_CONTAINS(ab_table_get(&t, 0, "note"), "upper bound");
  ab_table_free(&t);
  ab_run_release(&run);
  ab_events_free(&es);
}

/* One cap replayed alone, as a search's probe: whether the whole stream ran. */
static bool completes_at(const ab_events_t *es, const ab_bisect_opts_t *o, ab_run_t *run, uint64_t cap) {
  ab_diag_t diag = {""};
  ab_status st = ab_bisect_probe(es, o, cap, NULL, run, NULL, NULL, &diag);
  CHECK_MSG(st == AB_OK, "cap %llu: %s", (unsigned long long)cap, diag.msg);
  return st == AB_OK && run->status == AB_RUN_OK;
}

/* The status of the cap map at one cap: 1 completes, 0 fails, -1 not mapped. */
static int map_status(const ab_capmap_t *m, uint64_t cap) {
  for (size_t i = 0; i < m->n; i++)
    if (m->classes[i].lo <= cap && cap <= m->classes[i].hi) return m->classes[i].ok;
  return -1;
}

/* The acceptance of the OOM search: on the recorded snapshot (and its CSV trace: the
 * allocation sequence of every config), caching under max_split_size_mb:128 and under
 * expandable_segments:True on an H200 agrees with PyTorch's own bisection of the memory cap
 * (cnn_dyn.json, min_cap_bisect: passed at min_pass_cap, OOM at max_fail_cap): the cap map
 * fails at the one and completes at the other, and its smallest cap is not above the pass.
 * Under max_split_size_mb:128 the smallest cap lies below PyTorch's failing cap: the status is
 * not monotonic, and PyTorch's bisection found a boundary above the smallest. What PyTorch
 * bisected is the cap, so the search is of the cap: its expandable run at min_pass_cap held
 * 3.8 MB more than the cap (Note [Budget or cap]).
 * A probe replays the events and kernels alone, so the CSV trace, whose events and kernels are
 * the snapshot's, byte for byte, has the snapshot's map: the map (three thousand replays under
 * max_split_size_mb:128) is walked once, on the snapshot. */
static void recorded_within_pytorch_bracket(void) {
  NEED_DEVICE();
  static const struct {
    const char *strategy, *conf;
    uint64_t max_fail_cap, min_pass_cap;
  } cases[] = {
      {"split-limited", "max_split_size_mb:128", 7905625000ULL, 7932031250ULL},
      {"expandable", "expandable_segments:True", 7843750000ULL, 7850000000ULL},
  };
  static const char *const files[] = {CNN_DIR "/cnn_dyn.default.pickle.gz", CNN_DIR "/cnn_dyn.default.trace.csv.gz"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (ab_strategy_find(cases[i].strategy) == NULL)
      SKIP("needs the %s strategy (the caching allocator), which this build does not have", cases[i].strategy);
  ab_events_t es[2];
  ab_diag_t diag = {""};
  for (size_t f = 0; f < 2; f++) {
    char spec[512];
    snprintf(spec, sizeof spec, "replay:%s", files[f]);
    REQUIRE_MSG(ab_workload_build(spec, 42, &es[f], &diag) == AB_OK, "%s", diag.msg);
    CHECK_EQ(es[f].trace_ooms, 0);
  }
  /* The CSV trace replays as the snapshot: the same events and kernels, so the same map. */
  CHECK_MSG(es[1].n == es[0].n && es[1].nkernels == es[0].nkernels &&
                memcmp(es[1].ev, es[0].ev, es[0].n * sizeof *es[0].ev) == 0 &&
                (es[0].nkernels == 0 || memcmp(es[1].kernels, es[0].kernels, es[0].nkernels * sizeof *es[0].kernels) == 0),
            "the CSV trace's %zu events differ from the snapshot's %zu", es[1].n, es[0].n);
  for (size_t f = 0; f < 2; f++) {
    ab_run_t run;
    REQUIRE(ab_run_prepare(&run, &es[f]) == AB_OK);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      ab_bisect_opts_t o = opts(cases[i].strategy, cases[i].conf);
      o.cap = true;
      /* PyTorch's two caps, replayed alone, end as PyTorch's runs did; on every device. */
      CHECK_MSG(!completes_at(&es[f], &o, &run, cases[i].max_fail_cap), "%s on %s: PyTorch's failing cap completes",
                cases[i].strategy, files[f]);
      CHECK_MSG(completes_at(&es[f], &o, &run, cases[i].min_pass_cap), "%s on %s: PyTorch's passing cap fails",
                cases[i].strategy, files[f]);
      /* The whole map, a few thousand replays: on the simulated card, of the snapshot. */
      if (strcmp(ab_test_device, "sim") != 0 || f > 0) continue;
      ab_capmap_t map = {0};
      o.map = &map;
      o.band_probes = 64; /* the point's map is checked here; the variants' in placement_test */
      ab_bisect_result_t r;
      REQUIRE_MSG(ab_bisect_search(&es[f], &o, &run, &r, &diag) == AB_OK, "%s: %s", cases[i].strategy, diag.msg);
      CHECK_MSG(r.mapped && r.passed && r.min_budget <= cases[i].min_pass_cap &&
                    map_status(&map, cases[i].max_fail_cap) == 0 && map_status(&map, cases[i].min_pass_cap) == 1,
                "%s on %s: smallest cap %llu, safe cap %llu; map %d at PyTorch's failing cap %llu, %d at its passing "
                "cap %llu",
                cases[i].strategy, files[f], (unsigned long long)r.min_budget, (unsigned long long)r.safe_cap,
                map_status(&map, cases[i].max_fail_cap), (unsigned long long)cases[i].max_fail_cap,
                map_status(&map, cases[i].min_pass_cap), (unsigned long long)cases[i].min_pass_cap);
      ab_capmap_free(&map);
    }
    ab_run_release(&run);
  }
  ab_events_free(&es[0]);
  ab_events_free(&es[1]);
}

/* Checks Note [Cap map]: the map's intervals tile the caps from below the live peak up; each
 * interval's end caps, replayed alone, end as the interval says; and every cap from the safe
 * cap up, at 2 MiB steps to the uncapped peak reserved, completes when replayed alone. On
 * recorded jobs and settings whose status is not monotonic in the cap (failing ranges above
 * the smallest cap), and on ones whose status is. */
/* The events of a recorded trace, as `replay:PATH` reads it. */
static void read_trace(const char *path, ab_events_t *es) {
  char spec[512];
  ab_diag_t diag = {""};
  snprintf(spec, sizeof spec, "replay:%s", path);
  REQUIRE_MSG(ab_workload_build(spec, 42, es, &diag) == AB_OK, "%s", diag.msg);
}

static void cap_map_is_exact(void) {
  NEED_DEVICE();
  if (strcmp(ab_test_device, "sim") != 0) SKIP("a thousand replays of a trace: on the simulated card");
  if (ab_strategy_find("caching") == NULL) SKIP("needs the caching strategy, which this build does not have");
  static const struct {
    const char *trace, *conf;
    uint64_t fine_bytes; /* 2 MiB steps this far above the safe cap, then 64 MiB steps */
    unsigned check_every; /* the end caps of every n-th interval are replayed */
  } cases[] = {
      {CNN_DIR "/cnn_dyn.default.pickle.gz", "max_split_size_mb:128,max_non_split_rounding_mb:128", 1ULL << 30, 16},
      {CNN_DIR "/cnn_dyn.default.pickle.gz", "roundup_power2_divisions:[64:0,>:4]", UINT64_MAX, 1},
      {CNN_DIR "/cnn_dyn.default.pickle.gz", "", UINT64_MAX, 1},
      {CNN_DIR "/cnn_dyn.default.pickle.gz", "expandable_segments:True", UINT64_MAX, 1},
      {CNN_DIR "/pools/gc07split128.pickle.gz", "garbage_collection_threshold:0.7,max_split_size_mb:128", 1ULL << 30, 4},
  };
  unsigned nonmonotonic = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ab_events_t es;
    ab_diag_t diag = {""};
    read_trace(cases[i].trace, &es);
    ab_run_t run;
    REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
    ab_bisect_opts_t o = opts("caching", cases[i].conf);
    ab_capmap_t map = {0};
    o.cap = true;
    o.map = &map;
    o.band_probes = 64; /* the point's map is checked here; the variants' in placement_test */
    ab_bisect_result_t r;
    REQUIRE_MSG(ab_bisect_search(&es, &o, &run, &r, &diag) == AB_OK, "%s", diag.msg);
    REQUIRE_MSG(r.mapped && r.passed && map.n > 0, "%s under '%s': mapped %d, passed %d", cases[i].trace, cases[i].conf,
                r.mapped, r.passed);
    nonmonotonic += r.fail_ranges > 0;
    CHECK(map.classes[0].lo <= r.peak_requested && !map.classes[0].ok);
    for (size_t k = 1; k < map.n; k++)
      CHECK_MSG(map.classes[k].lo == map.classes[k - 1].hi + 1, "interval %zu starts at %llu, after %llu", k,
                (unsigned long long)map.classes[k].lo, (unsigned long long)map.classes[k - 1].hi);
    CHECK_EQ(map_status(&map, r.min_budget), 1);
    CHECK_EQ(map_status(&map, r.min_budget - 1), 0);
    CHECK_EQ(map_status(&map, r.safe_cap - 1), 0);
    CHECK_EQ(r.max_fail, r.safe_cap - 1);
    /* The failing ranges above the smallest cap: as many as the result counts, the last ending
     * just below the safe cap, each failing at both ends and passing just outside them. */
    uint64_t(*ranges)[2] = malloc((map.n + 1) * sizeof *ranges);
    REQUIRE(ranges != NULL);
    size_t nranges = ab_capmap_fail_ranges(&map, r.min_budget, ranges, map.n + 1);
    CHECK_EQ(nranges, r.fail_ranges);
    if (nranges) CHECK_EQ(ranges[nranges - 1][1], r.safe_cap - 1);
    for (size_t k = 0; k < nranges; k++)
      CHECK(map_status(&map, ranges[k][0]) == 0 && map_status(&map, ranges[k][1]) == 0 &&
            map_status(&map, ranges[k][0] - 1) == 1 && map_status(&map, ranges[k][1] + 1) == 1);
    free(ranges);
    for (size_t k = 0; k < map.n; k += cases[i].check_every) {
      const ab_cap_class_t *c = &map.classes[k];
      uint64_t ends[2] = {c->lo > 0 ? c->lo : 1, c->hi < (uint64_t)1 << 40 ? c->hi : c->lo};
      for (int e = 0; e < 2; e++)
        CHECK_MSG(completes_at(&es, &o, &run, ends[e]) == c->ok, "%s under '%s': cap %llu, mapped %s", cases[i].trace,
                  cases[i].conf, (unsigned long long)ends[e], c->ok ? "ok" : "oom");
    }
    /* The uncapped peak: the search's hi before the walk, where the walk's last interval ends. */
    ab_bisect_opts_t uncapped = opts("caching", cases[i].conf);
    uint64_t peak = 0;
    REQUIRE(ab_bisect_probe(&es, &uncapped, 0, NULL, &run, &peak, NULL, &diag) == AB_OK);
    uint64_t fails = 0, tried = 0;
    for (uint64_t cap = r.safe_cap; cap <= peak;) {
      tried++;
      if (!completes_at(&es, &o, &run, cap)) {
        fails++;
        CHECK_MSG(false, "%s under '%s': cap %llu, above the safe cap %llu, fails", cases[i].trace, cases[i].conf,
                  (unsigned long long)cap, (unsigned long long)r.safe_cap);
      }
      cap += cap - r.safe_cap < cases[i].fine_bytes ? 2ULL << 20 : 64ULL << 20;
    }
    CHECK(tried > 0 && fails == 0);
    ab_capmap_free(&map);
    ab_run_release(&run);
    ab_events_free(&es);
  }
  /* The shipped job has settings whose status is not monotonic: the test exercises them. */
  CHECK(nonmonotonic >= 2);
}

/* Note [A prefix shared] (prefix.h): a probe that goes on from a place the source run was kept
 * at is the probe replayed from the start: the same status, figures and cap window at every
 * end of every interval of the cap map, and the same search; most of them go on from a place.
 * Sources uncapped and capped; under garbage collection an uncapped source allows no cap (the
 * cap would have collected), and every probe replays from the start. */
static void prefix_probes_are_replays(void) {
  NEED_DEVICE();
  if (strcmp(ab_test_device, "sim") != 0) SKIP("a fork keeps a replay on the simulated card only");
  if (ab_strategy_find("caching") == NULL) SKIP("needs the caching strategy, which this build does not have");
  static const struct {
    const char *trace, *conf;
    uint64_t source_cap; /* 0: uncapped */
    int resumes;         /* 1: most probes go on from a place; 0: none may; -1: as the trace has it
                          * (under max_split_size_mb:128 the caps near the live peak refuse a
                          * segment in the first step, before the first place) */
  } cases[] = {
      {CNN_DIR "/cnn_dyn.default.pickle.gz", "", 0, 1},
      {CNN_DIR "/cnn_dyn.default.pickle.gz", "expandable_segments:True", 0, 1},
      {CNN_DIR "/cnn_dyn.default.pickle.gz", "max_split_size_mb:128,max_non_split_rounding_mb:128", 0, -1},
      {CNN_DIR "/cnn_dyn.default.pickle.gz", "", 8ULL << 30, 1},
      {CNN_DIR "/pools/gc07split128.pickle.gz", "garbage_collection_threshold:0.7,max_split_size_mb:128", 0, 0},
  };
  unsigned walks = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ab_events_t es;
    ab_diag_t diag = {""};
    read_trace(cases[i].trace, &es);
    ab_run_t run, again;
    REQUIRE(ab_run_prepare(&run, &es) == AB_OK && ab_run_prepare(&again, &es) == AB_OK);
    ab_bisect_opts_t o = opts("caching", cases[i].conf);
    o.cap = true;
    o.map_probes = 200;
    ab_capmap_t map = {0};
    o.map = &map;
    ab_bisect_result_t plain, shared;
    REQUIRE_MSG(ab_bisect_search(&es, &o, &run, &plain, &diag) == AB_OK, "%s", diag.msg);
    /* The source, kept every ninth of the stream; a copy that goes on ends in the test. */
    ab_prefix_t *p = ab_prefix_open(es.n, es.n / 9, ab_bisect_peak_requested(&es), false, NULL);
    REQUIRE(p != NULL);
    ab_run_opts_t source;
    memset(&source, 0, sizeof source);
    char device[96] = "";
    REQUIRE_MSG(ab_bisect_probe_kept(&es, &o, cases[i].source_cap, &source, p, &run, NULL, device, &diag) == AB_OK, "%s",
                diag.msg);
    unsigned resumed = 0;
    for (size_t k = 0; k < map.n; k++) {
      uint64_t ends[2] = {map.classes[k].lo > 0 ? map.classes[k].lo : 1, map.classes[k].hi < (1ULL << 40) ? map.classes[k].hi : 0};
      for (int e = 0; e < 2; e++) {
        if (ends[e] == 0) continue;
        bool from_place = false;
        uint64_t held_a = 0, held_b = 0;
        REQUIRE(ab_prefix_probe(p, ends[e], &run, &held_a, device, &from_place, &diag) == AB_OK);
        CHECK(!run.last); /* the copy ended with its run; this process goes on with its own */
        if (!from_place) continue;
        resumed++;
        REQUIRE(ab_bisect_probe(&es, &o, ends[e], NULL, &again, &held_b, NULL, &diag) == AB_OK);
        CHECK_MSG(run.status == again.status && run.cap_window == again.cap_window && run.cap_lo == again.cap_lo &&
                      run.cap_hi == again.cap_hi && held_a == held_b &&
                      run.stats.reserved_bytes.peak == again.stats.reserved_bytes.peak &&
                      run.stats.num_device_alloc == again.stats.num_device_alloc &&
                      run.stats.num_alloc_retries == again.stats.num_alloc_retries && run.oom.event == again.oom.event,
                  "%s under '%s', cap %llu: from a place %s [%llu, %llu], from the start %s [%llu, %llu]",
                  cases[i].trace, cases[i].conf, (unsigned long long)ends[e], ab_run_status_name(run.status),
                  (unsigned long long)run.cap_lo, (unsigned long long)run.cap_hi, ab_run_status_name(again.status),
                  (unsigned long long)again.cap_lo, (unsigned long long)again.cap_hi);
      }
    }
    CHECK_MSG(cases[i].resumes < 0 || (cases[i].resumes ? resumed > map.n / 2 : resumed == 0),
              "%s under '%s': %u of %zu intervals' ends from a place",
              cases[i].trace, cases[i].conf, resumed, 2 * map.n);
    /* The search through the places: the same answers. */
    if (cases[i].source_cap == 0) {
      o.prefix = p;
      o.map = NULL;
      REQUIRE_MSG(ab_bisect_search(&es, &o, &run, &shared, &diag) == AB_OK, "%s", diag.msg);
      CHECK(shared.passed == plain.passed && shared.min_budget == plain.min_budget && shared.safe_cap == plain.safe_cap &&
            shared.max_fail == plain.max_fail && shared.fail_ranges == plain.fail_ranges &&
            shared.intervals == plain.intervals && shared.probes == plain.probes);
    }
    ab_prefix_close(p);
    /* The walks of the safe cap under the placement variants, each from its first probe's
     * places: the same safe cap, checked as far. */
    if (cases[i].source_cap == 0 && plain.mapped && plain.safe_cap) {
      ab_bisect_opts_t w = opts("caching", cases[i].conf);
      w.cap = true;
      w.map_probes = 200;
      ab_bisect_result_t walked, kept;
      REQUIRE_MSG(ab_bisect_search(&es, &w, &run, &walked, &diag) == AB_OK, "%s", diag.msg);
      w.prefix_every = es.n / 9;
      REQUIRE_MSG(ab_bisect_search(&es, &w, &run, &kept, &diag) == AB_OK, "%s", diag.msg);
      CHECK_MSG(kept.safe_cap == walked.safe_cap && kept.band_checked == walked.band_checked &&
                    kept.band_probes == walked.band_probes && kept.band_raised == walked.band_raised,
                "%s under '%s': walks from places: safe from %llu (%u probes), from the start %llu (%u)", cases[i].trace,
                cases[i].conf, (unsigned long long)kept.safe_cap, kept.band_probes, (unsigned long long)walked.safe_cap,
                walked.band_probes);
      walks += walked.band_probes > AB_PLACEMENT_VARIANTS; /* a walk went past its first probe */
    }
    ab_capmap_free(&map);
    ab_run_release(&run);
    ab_run_release(&again);
    ab_events_free(&es);
  }
  CHECK(walks > 0);
}

/* Note [Budget window] (device.h): a budget probe that goes on from a place its source was
 * kept at is the probe replayed from the start, for the strategies that keep no cap: the same
 * status, figures, window and OOM at budgets across the search's range and at the ends of its
 * answer, and the same search through the places; most go on from one. The caching family takes
 * a budget as its cap, and gets no places for a budget. */
static void budget_probes_from_places_are_replays(void) {
  NEED_DEVICE();
  if (strcmp(ab_test_device, "sim") != 0) SKIP("a fork keeps a replay on the simulated card only");
  static const struct {
    const char *workload, *strategy;
  } cases[] = {
      {"replay:" CNN_DIR "/cnn_dyn.default.pickle.gz", "raw"},
      {"replay:" CNN_DIR "/cnn_dyn.default.pickle.gz", "pooled"},
      {"replay:" CNN_DIR "/cnn_dyn.default.pickle.gz", "async"},
      {"random:ops=60000", "pooled"},
      {"random:ops=60000", "async"},
  };
  unsigned tried = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (ab_strategy_find(cases[i].strategy) == NULL) continue;
    tried++;
    ab_events_t es;
    ab_diag_t diag = {""};
    REQUIRE_MSG(ab_workload_build(cases[i].workload, 42, &es, &diag) == AB_OK, "%s", diag.msg);
    ab_run_t run, again;
    REQUIRE(ab_run_prepare(&run, &es) == AB_OK && ab_run_prepare(&again, &es) == AB_OK);
    ab_bisect_opts_t o = opts(cases[i].strategy, "");
    ab_bisect_result_t plain, shared;
    REQUIRE_MSG(ab_bisect_search(&es, &o, &run, &plain, &diag) == AB_OK, "%s", diag.msg);
    REQUIRE(plain.passed && plain.failed);
    o.prefix_every = es.n / 9;
    /* Sources without a budget, and for pooled, which frees its cache and retries where the
     * budget refuses it, under the smallest budget, whose refusals narrow the window. */
    unsigned resumed = 0;
    for (int with_budget = 0; with_budget < 1 + (strcmp(cases[i].strategy, "pooled") == 0); with_budget++) {
      ab_prefix_t *p = ab_bisect_prefix_open(&es, &o, 0);
      REQUIRE(p != NULL);
      ab_run_opts_t source;
      memset(&source, 0, sizeof source);
      uint64_t source_budget = with_budget ? plain.min_budget : 0;
      REQUIRE_MSG(ab_bisect_probe_kept(&es, &o, source_budget, &source, p, &run, NULL, NULL, &diag) == AB_OK, "%s",
                  diag.msg);
      if (with_budget) CHECK(run.status == AB_RUN_OK);
      /* Budgets across the search's range, and the two ends of its answer. */
      enum { SPREAD = 12 };
      uint64_t budgets[SPREAD + 2];
      for (int k = 0; k < SPREAD; k++) budgets[k] = plain.lo + (plain.hi - plain.lo) * (uint64_t)k / (SPREAD - 1);
      budgets[SPREAD] = plain.min_budget, budgets[SPREAD + 1] = plain.max_fail;
      for (int k = 0; k < SPREAD + 2; k++) {
        bool from_place = false;
        uint64_t held_a = 0, held_b = 0;
        char device[96];
        REQUIRE(ab_prefix_probe(p, budgets[k], &run, &held_a, device, &from_place, &diag) == AB_OK);
        if (!from_place) continue;
        resumed++;
        REQUIRE(ab_bisect_probe(&es, &o, budgets[k], NULL, &again, &held_b, NULL, &diag) == AB_OK);
        CHECK_MSG(run.status == again.status && held_a == held_b &&
                      run.stats.reserved_bytes.peak == again.stats.reserved_bytes.peak &&
                      run.stats.num_device_alloc == again.stats.num_device_alloc && run.oom.event == again.oom.event &&
                      run.oom.limit == again.oom.limit && run.oom.kind == again.oom.kind &&
                      strcmp(run.oom.message, again.oom.message) == 0,
                  "%s through %s, source's budget %llu, budget %llu: from a place %s (event %zu, limit %llu), from the "
                  "start %s (event %zu, limit %llu)",
                  cases[i].workload, cases[i].strategy, (unsigned long long)source_budget, (unsigned long long)budgets[k],
                  ab_run_status_name(run.status), run.oom.event, (unsigned long long)run.oom.limit,
                  ab_run_status_name(again.status), again.oom.event, (unsigned long long)again.oom.limit);
      }
      if (with_budget) {
        ab_prefix_close(p);
        continue;
      }
      CHECK_MSG(resumed > SPREAD / 2, "%s through %s: %u of %d budgets from a place", cases[i].workload,
                cases[i].strategy, resumed, SPREAD + 2);
      /* The search through the places: the same answers. */
      o.prefix = p;
      REQUIRE_MSG(ab_bisect_search(&es, &o, &run, &shared, &diag) == AB_OK, "%s", diag.msg);
      o.prefix = NULL;
      CHECK_MSG(shared.passed == plain.passed && shared.min_budget == plain.min_budget &&
                    shared.max_fail == plain.max_fail && shared.probes == plain.probes &&
                    shared.oom.event == plain.oom.event,
                "%s through %s: through the places %llu (fails at %llu), from the start %llu (%llu)", cases[i].workload,
                cases[i].strategy, (unsigned long long)shared.min_budget, (unsigned long long)shared.max_fail,
                (unsigned long long)plain.min_budget, (unsigned long long)plain.max_fail);
      ab_prefix_close(p);
    }
    ab_run_release(&run);
    ab_run_release(&again);
    ab_events_free(&es);
  }
  CHECK(tried > 0);
  if (ab_strategy_find("caching")) {
    ab_events_t es;
    read_trace(CNN_DIR "/cnn_dyn.default.pickle.gz", &es);
    ab_bisect_opts_t o = opts("caching", "");
    o.prefix_every = es.n / 9;
    CHECK(ab_bisect_prefix_open(&es, &o, 0) == NULL);
    ab_events_free(&es);
  }
}

static const ab_test_t tests[] = {
    {"cap_map_is_exact", cap_map_is_exact},
    {"prefix_probes_are_replays", prefix_probes_are_replays},
    {"budget_probes_from_places_are_replays", budget_probes_from_places_are_replays},
    {"peak_requested", peak_requested},
    {"raw_answer_is_peak_requested", raw_answer_is_peak_requested},
    {"pooled_fragmentation_answer", pooled_fragmentation_answer},
    {"oom_map_rows", oom_map_rows},
    {"oom_map_ids_of_raw", oom_map_ids_of_raw},
    {"outcomes_none_and_below_lo", outcomes_none_and_below_lo},
    {"bad_options_are_refused", bad_options_are_refused},
    {"probes_are_repeatable", probes_are_repeatable},
    {"every_strategy_gets_an_answer", every_strategy_gets_an_answer},
    {"survived_ooms_make_an_upper_bound", survived_ooms_make_an_upper_bound},
    {"recorded_within_pytorch_bracket", recorded_within_pytorch_bracket},
};
AB_TEST_MAIN(tests)
