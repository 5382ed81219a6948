/* trace_builder_test.c: the trace builder (workloads/traces/trace_builder.h), fed records
 * directly as every format's reader feeds it: streams ranked by their recorded value, the
 * free phases paired or kept apart, an address used again as a new id, a free of memory
 * allocated before the trace (Note [Memory that existed before the trace]), records
 * that contradict each other refused at their position, and each alloc record's call stack
 * given to the allocation it becomes (Note [Stacks of the records]). */
#include "harness/run/engine.h"
#include "harness/run/pipeline.h"
#include "harness/run/results.h"
#include "tests/check.h"
#include "tests/two_streams.h"
#include "workloads/traces/snapshot.h"
#include "workloads/traces/trace_builder.h"

typedef struct rec_s {
  ab_trace_action_t action;
  uint64_t addr, size, stream;
} rec_t;

/* Builds es from recs, counted and positioned as lines 2, 3, ... of a file "T". */
static ab_status build(const rec_t *recs, size_t n, ab_events_t *es, ab_trace_info_t *info, ab_diag_t *d) {
  ab_events_init(es);
  ab_trace_builder_t b;
  ab_trace_builder_init(&b, es, "T", false);
  for (size_t i = 0; i < n; i++) {
    const char *name = ab_trace_action_name(recs[i].action);
    ab_trace_builder_count(&b, name, strlen(name));
    ab_status st = ab_trace_builder_add(&b, recs[i].action, recs[i].addr, recs[i].size, recs[i].stream, i + 2, d);
    if (st != AB_OK) {
      ab_trace_builder_discard(&b);
      ab_events_free(es);
      return st;
    }
  }
  ab_status st = ab_trace_builder_finish(&b, d);
  *info = b.info;
  if (st != AB_OK) ab_events_free(es);
  return st;
}

static void builder_keeps_stream_order_and_phases(void) {
  static const rec_t recs[] = {
      {AB_TR_ALLOC, 4096, 100, 700},
      {AB_TR_FREE_REQUESTED, 4096, 100, 700},
      {AB_TR_ALLOC, 8192, 50, 300}, /* another stream: the first free is pending */
      {AB_TR_FREE_COMPLETED, 4096, 100, 700},
      {AB_TR_ALLOC, 4096, 10, 700}, /* the address again: a new id */
      {AB_TR_FREE_REQUESTED, 8192, 50, 300},
      {AB_TR_FREE_COMPLETED, 8192, 50, 300},
      {AB_TR_FREE_COMPLETED, 12288, 10, 700}, /* allocated before the trace */
  };
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(build(recs, sizeof recs / sizeof recs[0], &es, &in, &d) == AB_OK, "%s", d.msg);
  ab_test_check_two_streams(&es, &in);
  ab_events_free(&es);
}

/* An alloc at an address that is still live: the trace contradicts itself. */
static void builder_refuses_an_alloc_over_a_live_block(void) {
  static const rec_t recs[] = {{AB_TR_ALLOC, 1, 2, 0}, {AB_TR_ALLOC, 1, 2, 0}};
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  CHECK(build(recs, 2, &es, &in, &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "T:3: alloc at 0x1, which is already allocated");
}


/* ---- releases inside a malloc (trace_builder.c, Note [Releases inside a malloc]) ---------- */

#define MIB (1ULL << 20)
#define CHECK_STR_EQ(a, b) CHECK_MSG(strcmp((a), (b)) == 0, "'%s' is not '%s'", (a), (b))


/* What PyTorch's snapshot reader tells the builder: its records are PyTorch's allocator's,
 * under `settings`, for a program that ran under `cap` (0: not given). */
typedef struct pt_run_s {
  const char *settings;
  uint64_t cap, card;
} pt_run_t;

static ab_status build_pytorch(const rec_t *recs, size_t n, const pt_run_t *run, ab_events_t *es, ab_trace_info_t *info,
                               ab_diag_t *d) {
  ab_events_init(es);
  snprintf(es->settings, sizeof es->settings, "%s", run->settings);
  ab_trace_builder_t b;
  ab_trace_builder_init(&b, es, "T", false);
  b.pytorch = true;
  b.cap = run->cap;
  b.card = run->card;
  for (size_t i = 0; i < n; i++) {
    const char *name = ab_trace_action_name(recs[i].action);
    ab_trace_builder_count(&b, name, strlen(name));
    ab_status st = ab_trace_builder_add(&b, recs[i].action, recs[i].addr, recs[i].size, recs[i].stream, i + 2, d);
    if (st != AB_OK) {
      ab_trace_builder_discard(&b);
      ab_events_free(es);
      return st;
    }
  }
  ab_status st = ab_trace_builder_finish(&b, d);
  *info = b.info;
  if (st != AB_OK) ab_events_free(es);
  return st;
}

static size_t count_kind(const ab_events_t *es, ab_event_kind_t kind) {
  size_t n = 0;
  for (size_t i = 0; i < es->n; i++) n += es->ev[i].kind == kind;
  return n;
}

/* A 40 MiB segment cached free and a 30 MiB one in use (70 MiB reserved); then a malloc of
 * `asked` bytes finds no free block that fits: the 40 MiB segment is released, and the
 * request's own segment made. */
static void pressed_records(uint64_t asked, rec_t out[9]) {
  const rec_t recs[] = {
      {AB_TR_SEGMENT_ALLOC, 0x10000000, 40 * MIB, 7}, {AB_TR_ALLOC, 0x10000000, 40 * MIB, 7},
      {AB_TR_FREE_REQUESTED, 0x10000000, 40 * MIB, 7}, {AB_TR_FREE_COMPLETED, 0x10000000, 40 * MIB, 7},
      {AB_TR_SEGMENT_ALLOC, 0x20000000, 30 * MIB, 7}, {AB_TR_ALLOC, 0x20000000, 30 * MIB, 7},
      {AB_TR_SEGMENT_FREE, 0x10000000, 40 * MIB, 7}, {AB_TR_SEGMENT_ALLOC, 0x30000000, asked, 7},
      {AB_TR_ALLOC, 0x30000000, asked, 7},
  };
  memcpy(out, recs, sizeof recs);
}

/* Under a cap of 100 MiB with garbage_collection_threshold:0.5, 70 MiB reserved is above the
 * threshold (50 MiB), while 70 + 20 stays within the cap: the release was garbage collection,
 * PyTorch's own, and the replay leaves it to the strategy. */
static void capped_gc_releases_are_pytorchs(void) {
  rec_t recs[9];
  pressed_records(20 * MIB, recs);
  pt_run_t run = {"garbage_collection_threshold:0.5", 100 * MIB, 0};
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(build_pytorch(recs, 9, &run, &es, &in, &d) == AB_OK, "%s", d.msg);
  CHECK_EQ(in.releases_pytorch, 1);
  CHECK_EQ(in.empty_caches, 0);
  CHECK_EQ(in.releases_untold, 0);
  CHECK_EQ(count_kind(&es, AB_EV_EMPTY_CACHE), 0);
  CHECK_STR_EQ(es.approximate, "");
  ab_events_free(&es);
  /* The same with the cap given as the recorded fraction of a card of 1000 MiB. */
  pt_run_t fraction = {"garbage_collection_threshold:0.5,per_process_memory_fraction:0.1", 0, 1000 * MIB};
  REQUIRE_MSG(build_pytorch(recs, 9, &fraction, &es, &in, &d) == AB_OK, "%s", d.msg);
  CHECK_EQ(in.releases_pytorch, 1);
  CHECK_EQ(count_kind(&es, AB_EV_EMPTY_CACHE), 0);
  ab_events_free(&es);
  /* Under a cap of 200 MiB, 70 MiB is below the threshold (100 MiB) and 90 within the cap:
   * nothing in PyTorch's malloc would have released; the program emptied the cache. */
  run.cap = 200 * MIB;
  REQUIRE_MSG(build_pytorch(recs, 9, &run, &es, &in, &d) == AB_OK, "%s", d.msg);
  CHECK_EQ(in.releases_pytorch, 0);
  CHECK_EQ(in.empty_caches, 1);
  CHECK_EQ(count_kind(&es, AB_EV_EMPTY_CACHE), 1);
  ab_events_free(&es);
}

/* Without garbage collection, under a cap of 100 MiB: 70 MiB reserved and a 40 MiB segment
 * asked for passes it, so PyTorch released its cached segment and retried. */
static void capped_retry_releases_are_pytorchs(void) {
  rec_t recs[9];
  pressed_records(40 * MIB, recs);
  pt_run_t run = {"", 100 * MIB, 0};
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(build_pytorch(recs, 9, &run, &es, &in, &d) == AB_OK, "%s", d.msg);
  CHECK_EQ(in.releases_pytorch, 1);
  CHECK_EQ(in.empty_caches, 0);
  CHECK_EQ(count_kind(&es, AB_EV_EMPTY_CACHE), 0);
  CHECK_STR_EQ(es.approximate, "");
  ab_events_free(&es);
  /* 70 + 30 is not past the cap: no refusal, so the program's empty_cache. */
  pressed_records(30 * MIB, recs);
  REQUIRE_MSG(build_pytorch(recs, 9, &run, &es, &in, &d) == AB_OK, "%s", d.msg);
  CHECK_EQ(in.releases_pytorch, 0);
  CHECK_EQ(in.empty_caches, 1);
  CHECK_EQ(count_kind(&es, AB_EV_EMPTY_CACHE), 1);
  ab_events_free(&es);
}

/* The program's empty_cache: releases no new segment follows are its own under any cap, and
 * so are releases before a malloc whose segment keeps reserved below what the run held (a cap
 * would have let it through) and below the threshold of it (no garbage collection). */
static void program_empty_cache_is_kept(void) {
  const rec_t recs[] = {
      {AB_TR_SEGMENT_ALLOC, 0x10000000, 40 * MIB, 7}, {AB_TR_ALLOC, 0x10000000, 40 * MIB, 7},
      {AB_TR_SEGMENT_ALLOC, 0x20000000, 60 * MIB, 7}, {AB_TR_ALLOC, 0x20000000, 60 * MIB, 7}, /* 100 MiB held */
      {AB_TR_FREE_REQUESTED, 0x20000000, 60 * MIB, 7}, {AB_TR_FREE_COMPLETED, 0x20000000, 60 * MIB, 7},
      {AB_TR_SEGMENT_FREE, 0x20000000, 60 * MIB, 7}, /* empty_cache() */
      {AB_TR_FREE_REQUESTED, 0x10000000, 40 * MIB, 7}, {AB_TR_FREE_COMPLETED, 0x10000000, 40 * MIB, 7},
      {AB_TR_SEGMENT_FREE, 0x10000000, 40 * MIB, 7}, /* empty_cache(), then a small allocation */
      {AB_TR_SEGMENT_ALLOC, 0x30000000, 2 * MIB, 7}, {AB_TR_ALLOC, 0x30000000, 512, 7},
      {AB_TR_FREE_REQUESTED, 0x30000000, 512, 7}, {AB_TR_FREE_COMPLETED, 0x30000000, 512, 7},
      {AB_TR_SEGMENT_FREE, 0x30000000, 2 * MIB, 7}, /* empty_cache() at the end */
  };
  size_t n = sizeof recs / sizeof recs[0];
  for (int capped = 0; capped < 2; capped++) {
    pt_run_t run = {"garbage_collection_threshold:0.8", capped ? 128 * MIB : 0, 0};
    ab_events_t es;
    ab_trace_info_t in;
    ab_diag_t d = {""};
    REQUIRE_MSG(build_pytorch(recs, n, &run, &es, &in, &d) == AB_OK, "%s", d.msg);
    CHECK_EQ(in.empty_caches, 3);
    CHECK_EQ(in.releases_pytorch, 0);
    CHECK_EQ(in.releases_untold, 0);
    CHECK_EQ(count_kind(&es, AB_EV_EMPTY_CACHE), 3);
    CHECK_STR_EQ(es.approximate, "");
    ab_events_free(&es);
  }
}

/* Without the cap, releases that a cap could explain cannot be told: read as before (the
 * program's, no OOM in sight), and the stream says it is approximate and why. */
static void untold_releases_make_the_run_approximate(void) {
  rec_t recs[9];
  pressed_records(20 * MIB, recs);
  pt_run_t run = {"garbage_collection_threshold:0.5", 0, 0};
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(build_pytorch(recs, 9, &run, &es, &in, &d) == AB_OK, "%s", d.msg);
  CHECK_EQ(in.releases_untold, 1);
  CHECK_EQ(in.empty_caches, 1);
  CHECK_EQ(count_kind(&es, AB_EV_EMPTY_CACHE), 1);
  CHECK_STR_CONTAINS(es.approximate, "1 runs of segment releases inside a malloc may be PyTorch's own");
  CHECK_STR_CONTAINS(es.approximate, "read as the program's; give the cap: --cap");
  ab_events_free(&es);
}

/* ---- what only finish tells (trace_builder.c, Note [Records to events in one pass]) ------- */

/* The events of es as "A0 N0 R1 C1 E P" (ALLOC, FREE NOW/REQUEST/COMPLETE with the id, EMPTY_CACHE,
 * a pool call), for comparing with what the rules give. */
static void spell(const ab_events_t *es, char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < es->n && used + 16 < size; i++) {
    const ab_event_t *e = &es->ev[i];
    static const char phase[] = "NRC";
    if (e->kind == AB_EV_ALLOC) used += (size_t)snprintf(out + used, size - used, "%sA%u", used ? " " : "", e->id);
    else if (e->kind == AB_EV_FREE) used += (size_t)snprintf(out + used, size - used, "%s%c%u", used ? " " : "", phase[e->aux], e->id);
    else used += (size_t)snprintf(out + used, size - used, "%s%c", used ? " " : "", e->kind == AB_EV_EMPTY_CACHE ? 'E' : 'P');
  }
}

/* A block whose free was requested before the trace, completed by the first record: the
 * request (at the start, where the block is made) and the completion are one free. */
static void block_before_completed_first(void) {
  static const rec_t recs[] = {{AB_TR_FREE_COMPLETED, 0x1000, 64, 0}, {AB_TR_ALLOC, 0x2000, 64, 0}};
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(build(recs, 2, &es, &in, &d) == AB_OK, "%s", d.msg);
  char got[256];
  spell(&es, got, sizeof got);
  CHECK_STR_EQ(got, "A0 N0 A1");
  CHECK_EQ(in.preexisting, 1);
  ab_events_free(&es);
}

/* A free whose request a segment release came between: one free, unless the release was the
 * program's empty_cache (a PyTorch snapshot's, followed by no malloc), which comes between. */
static void release_between_request_and_completion(void) {
  static const rec_t recs[] = {
      {AB_TR_SEGMENT_ALLOC, 0x10000000, 20 * MIB, 0}, {AB_TR_SEGMENT_ALLOC, 0x20000000, 20 * MIB, 0},
      {AB_TR_ALLOC, 0x10000000, MIB, 0},              {AB_TR_FREE_REQUESTED, 0x10000000, MIB, 0},
      {AB_TR_SEGMENT_FREE, 0x20000000, 20 * MIB, 0},  {AB_TR_FREE_COMPLETED, 0x10000000, MIB, 0},
  };
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  char got[256];
  REQUIRE_MSG(build(recs, 6, &es, &in, &d) == AB_OK, "%s", d.msg);
  spell(&es, got, sizeof got);
  CHECK_STR_EQ(got, "A0 N0");
  ab_events_free(&es);
  pt_run_t run = {"", 0, 0};
  REQUIRE_MSG(build_pytorch(recs, 6, &run, &es, &in, &d) == AB_OK, "%s", d.msg);
  spell(&es, got, sizeof got);
  CHECK_STR_EQ(got, "A0 R0 E C0");
  CHECK_EQ(in.empty_caches, 1);
  REQUIRE(es.nsegs == 3);
  CHECK_EQ(es.segs[2].at_event, 3); /* after its EMPTY_CACHE */
  ab_events_free(&es);
}

/* The last oom, which no alloc follows, stays a request (no FREE); what came after it moves
 * back by the FREE it lost. */
static void final_oom_with_a_tail(void) {
  static const rec_t recs[] = {
      {AB_TR_SEGMENT_ALLOC, 0x10000000, 60 * MIB, 7}, {AB_TR_ALLOC, 0x10000000, 60 * MIB, 7},
      {AB_TR_OOM, 1, 60 * MIB, 7},                    {AB_TR_FREE_REQUESTED, 0x10000000, 60 * MIB, 7},
      {AB_TR_FREE_COMPLETED, 0x10000000, 60 * MIB, 7}, {AB_TR_SEGMENT_FREE, 0x10000000, 60 * MIB, 7},
  };
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(build(recs, 6, &es, &in, &d) == AB_OK, "%s", d.msg);
  char got[256];
  spell(&es, got, sizeof got);
  CHECK_STR_EQ(got, "A0 A1 N0");
  CHECK(es.ev[1].aux == AB_TAG_OTHER);
  CHECK(in.final_oom);
  CHECK_EQ(in.caught_ooms, 0);
  CHECK_EQ(es.trace_ooms, 1);
  REQUIRE(es.nsegs == 2);
  CHECK_EQ(es.segs[1].at_event, 3);
  ab_events_free(&es);
}

/* Pools the end state names (a 2.11 snapshot's segment_pool_id): the allocations' pool calls
 * are known only at finish, and go before them. */
static void pools_named_by_the_end_state(void) {
  ab_events_t es;
  ab_events_init(&es);
  ab_trace_builder_t b;
  ab_trace_builder_init(&b, &es, "T", true);
  ab_diag_t d = {""};
  REQUIRE(ab_trace_builder_add_pooled(&b, AB_TR_SEGMENT_ALLOC, 0x10000000, 20 * MIB, 0, AB_TRACE_POOL_INFER, 1, &d) == AB_OK);
  REQUIRE(ab_trace_builder_add_pooled(&b, AB_TR_ALLOC, 0x10000000, MIB, 0, AB_TRACE_POOL_INFER, 2, &d) == AB_OK);
  REQUIRE(ab_trace_builder_add_pooled(&b, AB_TR_ALLOC, 0x20000000, MIB, 0, AB_TRACE_POOL_INFER, 3, &d) == AB_OK);
  int pool = 0;
  REQUIRE(ab_trace_builder_pool(&b, 1, 7, 4, &pool, &d) == AB_OK && pool == 1);
  ab_trace_builder_dump_segment(&b, 0x10000000, 20 * MIB, 1);
  ab_trace_builder_dump_segment(&b, 0x20000000, 20 * MIB, 0);
  ab_trace_builder_end_state(&b, 40 * MIB, 2);
  REQUIRE_MSG(ab_trace_builder_finish(&b, &d) == AB_OK, "%s", d.msg);
  char got[256];
  spell(&es, got, sizeof got);
  CHECK_STR_EQ(got, "P P A0 P P A1");
  CHECK(es.ev[0].aux == AB_POOL_CREATE && es.ev[1].aux == AB_POOL_BEGIN && es.ev[3].aux == AB_POOL_END);
  CHECK_EQ(es.npools, 1);
  CHECK_EQ(b.info.pools[1].allocs, 1);
  CHECK_EQ(b.info.pools[0].allocs, 1);
  CHECK_EQ(b.info.pool_inferred, 2);
  REQUIRE(es.nsegs == 1);
  CHECK_EQ(es.segs[0].at_event, 0);
  ab_events_free(&es);
}

/* ---- caught OOMs (Note [A trace that ends in an OOM]; engine.c, Note [Caught OOMs]) --------- */

/* A 60 MiB block in use, a second 60 MiB refused (the program caught it: the `oom`), then a
 * 30 MiB one instead, which it got. */
static const rec_t caught[] = {
    {AB_TR_SEGMENT_ALLOC, 0x10000000, 60 * MIB, 7}, {AB_TR_ALLOC, 0x10000000, 60 * MIB, 7},
    {AB_TR_OOM, 1, 60 * MIB, 7},
    {AB_TR_SEGMENT_ALLOC, 0x20000000, 30 * MIB, 7}, {AB_TR_ALLOC, 0x20000000, 30 * MIB, 7},
    {AB_TR_FREE_REQUESTED, 0x20000000, 30 * MIB, 7}, {AB_TR_FREE_COMPLETED, 0x20000000, 30 * MIB, 7},
};

/* Replays es under caching with conf and PyTorch's cap (0: none) on a simulated H200. */
static void replay_caching(const ab_events_t *es, const char *conf, uint64_t cap, ab_run_t *run) {
  ab_pipeline_t p = {.device = "sim:h200", .strategy = "caching", .conf = conf, .memory_cap = cap};
  ab_world_t w;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_pipeline_open(&p, &w, &d) == AB_OK, "%s", d.msg);
  ab_run_opts_t opts = ab_run_defaults();
  opts.timeline = false;
  CHECK_MSG(ab_engine_replay(es, w.s, &opts, run) == AB_OK, "%s", run->message);
  CHECK(ab_pipeline_close(&w, run, &d) == AB_OK);
}

static void caught_oom_is_replayed(void) {
  pt_run_t rec = {"", 100 * MIB, 0};
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(build_pytorch(caught, sizeof caught / sizeof caught[0], &rec, &es, &in, &d) == AB_OK, "%s", d.msg);
  CHECK_EQ(es.trace_ooms, 1);
  CHECK_EQ(in.caught_ooms, 1);
  CHECK(!in.final_oom);
  /* The request again, let go at once, where the oom was: after the first alloc. */
  REQUIRE(es.n == 5);
  CHECK(es.ev[1].kind == AB_EV_ALLOC && es.ev[1].aux == AB_TAG_CAUGHT && es.ev[1].bytes == 60 * MIB);
  CHECK(es.ev[2].kind == AB_EV_FREE && es.ev[2].id == es.ev[1].id && es.ev[2].aux == AB_FREE_NOW);
  CHECK_EQ(in.peak_requested, 90 * MIB); /* what PyTorch served, not the refused request */
  /* Under the recorded settings and cap it fails where PyTorch's did, and the run goes on. */
  ab_run_t run;
  memset(&run, 0, sizeof run);
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  replay_caching(&es, "", 100 * MIB, &run);
  CHECK_EQ(run.status, AB_RUN_OK);
  CHECK_EQ(run.stats.num_ooms, es.trace_ooms);
  CHECK_EQ(run.caught_ooms, 1);
  CHECK_EQ(run.caught_served, 0);
  CHECK_EQ(run.stats.num_device_alloc, 2);
  CHECK_EQ(run.stats.reserved_bytes.peak, (int64_t)(90 * MIB));
  char why[512];
  ab_results_approximate(&es, &run, why, sizeof why);
  CHECK_STR_EQ(why, "no");
  /* Under a cap it would not fail: served, the program's path would have differed, and the
   * run says so. */
  replay_caching(&es, "", 200 * MIB, &run);
  CHECK_EQ(run.status, AB_RUN_OK);
  CHECK_EQ(run.stats.num_ooms, 0);
  CHECK_EQ(run.caught_served, 1);
  ab_results_approximate(&es, &run, why, sizeof why);
  CHECK_STR_EQ(why, "the program caught 1 OOM that this run served");
  ab_run_release(&run);
  ab_events_free(&es);
}

/* ---- a cap set in code, on a recording (tests/data/pytorch-2.11-h200/pools/moe_gc06) -------- */

/* PyTorch's moe_gc06.json: the cap was per_process_memory_fraction:0.0521 of the H200's
 * 150109880320 bytes, with garbage_collection_threshold:0.6. */
#define MOE_CAP ((uint64_t)(0.0521 * 150109880320.0))

/* Reads moe_gc06 as if its program had set the cap in code: the recorded settings without
 * their fraction, and the cap (0: none) given as the run's. */
static ab_status read_moe_capped_in_code(uint64_t cap, ab_events_t *es, ab_trace_info_t *info, ab_diag_t *d) {
  const char *path = AB_TEST_DATA_DIR "/pytorch-2.11-h200/pools/moe_gc06.pickle.gz";
  ab_input_t in;
  AB_TRY(ab_input_read(path, &in, d));
  ab_events_init(es);
  ab_trace_builder_t b;
  ab_trace_builder_init(&b, es, path, true);
  b.cap = cap;
  ab_status st = ab_snapshot_read(path, &in, -1, &b, d);
  ab_input_free(&in);
  if (st == AB_OK) {
    CHECK_STR_EQ(es->settings, "per_process_memory_fraction:0.0521,garbage_collection_threshold:0.6");
    snprintf(es->settings, sizeof es->settings, "garbage_collection_threshold:0.6");
    st = ab_trace_builder_finish(&b, d);
  } else {
    ab_trace_builder_discard(&b);
  }
  if (st == AB_OK) *info = b.info;
  else ab_events_free(es);
  return st;
}

static void cap_set_in_code_replays_as_pytorch(void) {
  ab_events_t es;
  ab_trace_info_t in;
  ab_diag_t d = {""};
  REQUIRE_MSG(read_moe_capped_in_code(MOE_CAP, &es, &in, &d) == AB_OK, "%s", d.msg);
  CHECK_EQ(in.releases_pytorch, 3);
  CHECK_EQ(in.empty_caches, 0);
  CHECK_STR_EQ(es.approximate, "");
  /* Replayed under the settings and the cap, each cudaMalloc at its recorded address (cmd_replay.c,
   * Note [Recorded addresses]): PyTorch's figures. */
  ab_pipeline_t p = {.device = "sim:h200", .strategy = "caching", .conf = es.settings, .memory_cap = MOE_CAP};
  ab_addr_hint_t *plan = NULL;
  REQUIRE(ab_events_address_plan(&es, &plan, &p.dev.plan_len) == AB_OK);
  p.dev.plan = plan;
  ab_world_t w;
  ab_status st = ab_pipeline_open(&p, &w, &d);
  free(plan);
  REQUIRE_MSG(st == AB_OK, "%s", d.msg);
  ab_run_t run;
  memset(&run, 0, sizeof run);
  REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
  ab_run_opts_t opts = ab_run_defaults();
  opts.timeline = false;
  CHECK_MSG(ab_engine_replay(&es, w.s, &opts, &run) == AB_OK, "%s", run.message);
  CHECK(ab_pipeline_close(&w, &run, &d) == AB_OK);
  CHECK_EQ(run.status, AB_RUN_OK);
  CHECK_EQ(run.stats.reserved_bytes.peak, 5869928448LL);
  CHECK_EQ(run.stats.num_device_alloc, 261);
  CHECK_EQ(run.stats.num_device_free, 17);
  ab_run_release(&run);
  ab_events_free(&es);
  /* Without the cap, those releases cannot be told from the program's empty_cache: said. */
  REQUIRE_MSG(read_moe_capped_in_code(0, &es, &in, &d) == AB_OK, "%s", d.msg);
  CHECK_EQ(in.releases_untold, 3);
  CHECK_STR_CONTAINS(es.approximate, "3 runs of segment releases inside a malloc");
  ab_events_free(&es);
}

/* Stacks given to alloc records go to their allocations' ids, after the blocks that existed
 * before the trace (which have none); a trace that names none has no stacks. */
static void stacks_follow_the_records(void) {
  ab_events_t es;
  ab_events_init(&es);
  ab_trace_builder_t b;
  ab_trace_builder_init(&b, &es, "T", true);
  ab_diag_t d = {""};
  ab_stacks_t *st = ab_trace_builder_stacks(&b);
  REQUIRE(st != NULL && st == ab_trace_builder_stacks(&b));
  uint32_t f = ab_stacks_frame(st, "a.py", 4, "f", 1, 3), g = ab_stacks_frame(st, "b.py", 4, "g", 1, 9);
  uint32_t fg[] = {f, g}, s1 = ab_stacks_intern(st, fg, 2), s2 = ab_stacks_intern(st, &g, 1);
  REQUIRE(ab_trace_builder_add(&b, AB_TR_FREE_COMPLETED, 8192, 64, 0, 1, &d) == AB_OK); /* existed before: id 0 */
  REQUIRE(ab_trace_builder_add(&b, AB_TR_ALLOC, 4096, 100, 0, 2, &d) == AB_OK);
  ab_trace_builder_stack(&b, s1);
  REQUIRE(ab_trace_builder_add(&b, AB_TR_ALLOC, 12288, 100, 0, 3, &d) == AB_OK); /* none */
  REQUIRE(ab_trace_builder_add(&b, AB_TR_ALLOC, 16384, 100, 0, 4, &d) == AB_OK);
  ab_trace_builder_stack(&b, s2);
  REQUIRE(ab_trace_builder_add(&b, AB_TR_ALLOC, 20480, 100, 0, 5, &d) == AB_OK);
  ab_trace_builder_stack(&b, s1);
  REQUIRE_MSG(ab_trace_builder_finish(&b, &d) == AB_OK, "%s", d.msg);
  REQUIRE(es.stacks != NULL);
  CHECK_EQ(es.nids, 5u);
  static const uint32_t want[] = {0, 1, 0, 2, 1};
  for (uint32_t id = 0; id < 5; id++) CHECK_EQ(ab_stacks_of(es.stacks, id) ? (ab_stacks_of(es.stacks, id) == s1 ? 1u : 2u) : 0u, want[id]);
  CHECK(es.stacks->stacks.slot == NULL); /* finished: the intern tables given back */
  ab_events_free(&es);
  /* No stack named: none kept. */
  ab_events_init(&es);
  ab_trace_builder_init(&b, &es, "T", true);
  REQUIRE(ab_trace_builder_add(&b, AB_TR_ALLOC, 4096, 100, 0, 1, &d) == AB_OK);
  ab_trace_builder_stack(&b, 0);
  REQUIRE_MSG(ab_trace_builder_finish(&b, &d) == AB_OK, "%s", d.msg);
  CHECK(es.stacks == NULL);
  ab_events_free(&es);
}

static const ab_test_t tests[] = {
    {"stacks_follow_the_records", stacks_follow_the_records},
    {"block_before_completed_first", block_before_completed_first},
    {"release_between_request_and_completion", release_between_request_and_completion},
    {"final_oom_with_a_tail", final_oom_with_a_tail},
    {"pools_named_by_the_end_state", pools_named_by_the_end_state},
    {"capped_gc_releases_are_pytorchs", capped_gc_releases_are_pytorchs},
    {"capped_retry_releases_are_pytorchs", capped_retry_releases_are_pytorchs},
    {"program_empty_cache_is_kept", program_empty_cache_is_kept},
    {"untold_releases_make_the_run_approximate", untold_releases_make_the_run_approximate},
    {"caught_oom_is_replayed", caught_oom_is_replayed},
    {"cap_set_in_code_replays_as_pytorch", cap_set_in_code_replays_as_pytorch},
    {"builder_keeps_stream_order_and_phases", builder_keeps_stream_order_and_phases},
    {"builder_refuses_an_alloc_over_a_live_block", builder_refuses_an_alloc_over_a_live_block},
};
AB_TEST_MAIN(tests)
