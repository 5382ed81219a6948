/* blame_test.c: allocbench blame (harness/run/blame.h, Note [Blame]) on a trace with call
 * stacks, made here: a data loader (data.py) double-buffers batches of 40 and 38 MiB, and a
 * cache (model.py) keeps a 30 MiB block each step, carved out of the batch the loader has just
 * let go: the rest of that segment is too small for anything after it, and the loader takes a
 * new segment every step. The cache's splits are the fragmentation: it is ranked first, and
 * each change's figures equal those of the trace changed by hand (as the program changed so
 * would record it), replayed on its own. */
#include <stdlib.h>
#include <string.h>

#include "kernels/base/units.h"
#include "harness/run/blame.h"
#include "tests/check.h"

enum { STEPS = 24 };
static const uint64_t batch_mib[] = {40, 38};

typedef enum variant_e { AS_IT_IS, CACHE_IN_POOL, BATCHES_ROUNDED, BATCHES_FREED_EARLY } variant_t;

typedef struct sites_s {
  uint32_t loader, cache; /* stacks */
} sites_t;

/* The stacks, innermost first, with PyTorch's own frame innermost, as PyTorch records it. */
static sites_t make_stacks(ab_stacks_t *st) {
  static const char torch_file[] = "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", call[] = "_call_impl";
  uint32_t torch = ab_stacks_frame(st, torch_file, strlen(torch_file), call, strlen(call), 1736);
  uint32_t main_ = ab_stacks_frame(st, "/job/train.py", 13, "main", 4, 30);
  uint32_t load = ab_stacks_frame(st, "/job/data.py", 12, "load_batch", 10, 5);
  uint32_t keep = ab_stacks_frame(st, "/job/model.py", 13, "cache_kv", 8, 9);
  uint32_t loader[] = {torch, load, main_}, cache[] = {torch, keep, main_};
  return (sites_t){ab_stacks_intern(st, loader, 3), ab_stacks_intern(st, cache, 3)};
}

static uint32_t alloc(ab_events_t *es, uint64_t bytes, uint32_t stack) {
  uint32_t id = ab_events_alloc(es, bytes, 0, AB_TAG_OTHER);
  ab_stacks_set(es->stacks, id, stack);
  return id;
}

/* The program's trace, as it is or as a change of its code would make it record. */
static void build(ab_events_t *es, variant_t v) {
  ab_events_init(es);
  es->stacks = calloc(1, sizeof *es->stacks);
  REQUIRE(es->stacks != NULL);
  ab_stacks_init(es->stacks);
  sites_t s = make_stacks(es->stacks);
  snprintf(es->source, sizeof es->source, "blame_test");
  uint32_t previous = UINT32_MAX;
  bool pool_made = false;
  for (int i = 0; i < STEPS; i++) {
    uint64_t batch = (v == BATCHES_ROUNDED ? 40 : batch_mib[i % 2]) * AB_MiB;
    if (v == BATCHES_FREED_EARLY && previous != UINT32_MAX) ab_events_free_id(es, previous);
    uint32_t b = alloc(es, batch, s.loader);
    if (v != BATCHES_FREED_EARLY && previous != UINT32_MAX) ab_events_free_id(es, previous);
    /* use_mem_pool(pool) around the cache, as PyTorch records it and a trace's importer
     * routes it: the pool made once, each use a BEGIN and an END, then released. */
    if (v == CACHE_IN_POOL) {
      if (!pool_made) ab_events_pool(es, AB_POOL_CREATE, 1, 0, 0);
      pool_made = true;
      ab_events_pool(es, AB_POOL_BEGIN, 1, 0, AB_POOL_ALL_STREAMS);
    }
    alloc(es, 30 * AB_MiB, s.cache);
    if (v == CACHE_IN_POOL) {
      ab_events_pool(es, AB_POOL_END, 1, 0, 0);
      ab_events_pool(es, AB_POOL_RELEASE, 1, 0, 0);
    }
    previous = b;
  }
  if (v == CACHE_IN_POOL) es->npools = 1;
  ab_stacks_finish(es->stacks);
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_events_finish(es, &d) == AB_OK, "%s", d.msg);
}

static ab_blame_opts_t opts(void) {
  ab_blame_opts_t o;
  memset(&o, 0, sizeof o);
  o.b.strategy = "caching";
  o.b.device = "sim:h200";
  o.b.cap = true;
  o.top = 2;
  o.map_probes = 0; /* the whole cap map: safe caps */
  return o;
}

static void check_change(const ab_blame_t *bl, size_t site, ab_blame_change_t c, variant_t v) {
  ab_events_t by_hand;
  build(&by_hand, v);
  ab_blame_opts_t o = opts();
  ab_blame_fig_t want;
  unsigned probes = 0;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_blame_figures(&by_hand, &o, &want, &probes, &d) == AB_OK, "%s", d.msg);
  const ab_blame_fig_t *got = &bl->site[site].change[c];
  CHECK_MSG(got->done && !got->unchanged, "%s of site %zu was not replayed", ab_blame_change_name(c), site + 1);
  CHECK_MSG(got->peak_reserved == want.peak_reserved, "%s: peak reserved %llu, the trace changed by hand %llu",
            ab_blame_change_name(c), (unsigned long long)got->peak_reserved, (unsigned long long)want.peak_reserved);
  CHECK_MSG(got->cap_found == want.cap_found && got->cap == want.cap && got->cap_safe == want.cap_safe,
            "%s: cap %llu (safe %d), the trace changed by hand %llu (safe %d)", ab_blame_change_name(c),
            (unsigned long long)got->cap, got->cap_safe, (unsigned long long)want.cap, want.cap_safe);
  ab_events_free(&by_hand);
}

static void ranks_the_cause_first_and_predicts_what_replays(void) {
  ab_events_t es;
  build(&es, AS_IT_IS);
  ab_blame_opts_t o = opts();
  ab_blame_t bl;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_blame_run(&es, &o, &bl, &d) == AB_OK, "%s", d.msg);
  CHECK(bl.stacks);
  REQUIRE(bl.nsites == 2);
  /* PyTorch's frame is passed over: the site is the program's line. */
  CHECK_MSG(strcmp(bl.site[0].name, "job/model.py:9 cache_kv") == 0, "first: %s", bl.site[0].name);
  CHECK_MSG(strcmp(bl.site[1].name, "job/data.py:5 load_batch") == 0, "second: %s", bl.site[1].name);
  CHECK(bl.site[0].unused_bytes > bl.site[1].unused_bytes);
  /* The peak is the last batch's segment, before the last cache block. */
  CHECK_EQ(bl.site[0].live_bytes, (uint64_t)(STEPS - 1) * 30 * AB_MiB);
  CHECK_EQ(bl.site[1].unused_bytes, 0u);
  /* The live bytes at the moment are what the trace holds then, and reserved holds them. */
  CHECK(bl.reserved >= bl.live);
  CHECK_EQ(bl.reserved, bl.base.peak_reserved);
  /* Moving the cache into a pool of its own saves memory, as does freeing each batch before
   * loading the next (then the cache never splits a batch's segment). */
  CHECK(bl.site[0].change[AB_BLAME_POOL].peak_reserved < bl.base.peak_reserved);
  CHECK(bl.site[1].change[AB_BLAME_EARLY].peak_reserved < bl.base.peak_reserved);
  check_change(&bl, 0, AB_BLAME_POOL, CACHE_IN_POOL);
  check_change(&bl, 1, AB_BLAME_ROUND, BATCHES_ROUNDED);
  check_change(&bl, 1, AB_BLAME_EARLY, BATCHES_FREED_EARLY);
  /* The cache is never freed and is of one size: those two changes leave the trace as it is. */
  CHECK(bl.site[0].change[AB_BLAME_EARLY].unchanged);
  CHECK(bl.site[0].change[AB_BLAME_ROUND].unchanged);
  ab_blame_free(&bl);
  ab_events_free(&es);
}

/* Without stacks, the sites are sizes and lifetimes, and the moment can be an event. */
static void without_stacks_by_size(void) {
  ab_events_t es;
  build(&es, AS_IT_IS);
  ab_stacks_free(es.stacks);
  free(es.stacks);
  es.stacks = NULL;
  ab_blame_opts_t o = opts();
  o.top = 0;
  o.at = AB_BLAME_AT_EVENT;
  o.at_event = 3; /* a batch, a cache block, the next batch, the first batch freed */
  ab_blame_t bl;
  ab_diag_t d = {""};
  REQUIRE_MSG(ab_blame_run(&es, &o, &bl, &d) == AB_OK, "%s", d.msg);
  CHECK(!bl.stacks);
  CHECK_EQ(bl.moment, 4u);
  CHECK_EQ(bl.live, (40 + 38 + 30) * AB_MiB - 40 * AB_MiB); /* batch, batch, the first freed; a cache block */
  bool found = false;
  for (size_t s = 0; s < bl.nsites; s++) found |= strcmp(bl.site[s].name, "size 30.00 MiB, never freed") == 0;
  CHECK(found);
  ab_blame_free(&bl);
  /* A moment that is not there is refused, naming it. */
  o.at_event = es.n;
  CHECK(ab_blame_run(&es, &o, &bl, &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "--at");
  o.at = AB_BLAME_AT_OOM;
  CHECK(ab_blame_run(&es, &o, &bl, &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "ran to its end");
  ab_events_free(&es);
}

static const ab_test_t tests[] = {
    {"ranks_the_cause_first_and_predicts_what_replays", ranks_the_cause_first_and_predicts_what_replays},
    {"without_stacks_by_size", without_stacks_by_size},
};
AB_TEST_MAIN(tests)
