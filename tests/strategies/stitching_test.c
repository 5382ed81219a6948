/* stitching_test.c: the rules of GMLake that change what `stitching` holds
 * (Note [GMLake's rules], strategies/stitching.c), each on a fresh simulated H200, with the strategy's
 * invariant checks after every call: the release frees only pBlocks that are not split; a
 * freed stitched block's chunks serve any request from their pBlocks; an sBlock whose chunks
 * are all free serves a later request whole; empty_cache drops the sBlocks not in use. */
#include "kernels/base/units.h"
#include "strategies/registry.h"

#include "tests/check.h"
#include "tests/world.h"

#define MiB (1ULL << 20)

typedef struct world_s {
  ab_device_t *dev;
  ab_strategy_t *s;
} world_t;

static bool open_world(world_t *w, const char *conf, uint64_t budget) {
  ab_device_config_t cfg = {0};
  cfg.budget_bytes = budget;
  return ab_test_world_open(&w->dev, &w->s, "sim:h200", &cfg, "stitching", conf);
}

static void check_invariants(world_t *w) {
  ab_diag_t why = {""};
  CHECK_MSG(ab_strategy_check(w->s, &why) == AB_OK, "%s", why.msg);
}

static ab_status alloc(world_t *w, uint64_t bytes, ab_dptr_t *p) {
  *p = 0;
  ab_status st = ab_strategy_alloc(w->s, bytes, 0, p);
  check_invariants(w);
  return st;
}

static void release(world_t *w, ab_dptr_t p, uint64_t bytes) {
  CHECK(ab_strategy_free(w->s, p, bytes, 0) == AB_OK);
  check_invariants(w);
}

static int64_t stat(world_t *w, const char *name) {
  int64_t v = -1;
  CHECK_MSG(ab_strategy_memory_stat(w->s, name, &v), "no statistic %s", name);
  return v;
}

static int64_t reserved(world_t *w) { return w->s->stats.reserved_bytes.current; }

/* A 4 MiB request gets a 20 MiB pBlock, split: 16 MiB free beside it. Under a 40 MiB budget a
 * 30 MiB request needs new memory; the release before the retry frees only pBlocks that are
 * not split (GMLake's release_blocks), so the 16 MiB stay and the request runs out of
 * memory. With the 4 MiB freed, the pBlock is whole again, goes, and the request fits. */
static void release_frees_only_unsplit_pblocks(void) {
  world_t w;
  REQUIRE(open_world(&w, NULL, 40 * MiB));
  ab_dptr_t a, b;
  REQUIRE(alloc(&w, 4 * MiB, &a) == AB_OK);
  CHECK_EQ(reserved(&w), 20 * MiB);
  CHECK(alloc(&w, 30 * MiB, &b) == AB_ERR_OOM);
  CHECK_EQ(reserved(&w), 20 * MiB);
  CHECK_EQ(w.s->stats.num_alloc_retries, 1);
  release(&w, a, 4 * MiB);
  REQUIRE(alloc(&w, 30 * MiB, &b) == AB_OK);
  CHECK_EQ(reserved(&w), 30 * MiB);
  release(&w, b, 30 * MiB);
  ab_test_world_close(w.dev, w.s);
}

/* Two free 12 MiB pBlocks, not neighbours (a live one between them), are stitched for a
 * 24 MiB request (frag_limit lowered to let it). Freed, the sBlock's chunks are free in their
 * pBlocks again: a 2 MiB request, for which the 24 MiB sBlock is over ten times too big, is
 * served from one of them without new memory. */
static void freed_sblock_chunks_serve_from_their_pblocks(void) {
  world_t w;
  REQUIRE(open_world(&w, "frag_limit:16MiB", 0));
  ab_dptr_t a, x, b, s, c;
  REQUIRE(alloc(&w, 12 * MiB, &a) == AB_OK);
  REQUIRE(alloc(&w, 12 * MiB, &x) == AB_OK);
  REQUIRE(alloc(&w, 12 * MiB, &b) == AB_OK);
  release(&w, a, 12 * MiB);
  release(&w, b, 12 * MiB);
  REQUIRE(alloc(&w, 24 * MiB, &s) == AB_OK);
  CHECK_EQ(stat(&w, "stitch.count"), 1);
  CHECK_EQ(reserved(&w), 36 * MiB);
  CHECK(s != a && s != b);
  release(&w, s, 24 * MiB);
  uint64_t before = w.s->stats.num_device_alloc;
  REQUIRE(alloc(&w, 2 * MiB, &c) == AB_OK);
  CHECK(c == a || c == b);
  CHECK_EQ(reserved(&w), 36 * MiB);
  CHECK_EQ(w.s->stats.num_device_alloc, before);
  release(&w, c, 2 * MiB);
  release(&w, x, 12 * MiB);
  ab_test_world_close(w.dev, w.s);
}

/* The same sBlock, its chunks all free again, serves a second 24 MiB request whole (GMLake's
 * free_fused_blocks), at its own address; while one of its pBlocks is in use it does not, and
 * the request takes new memory. empty_cache then drops it with the pBlocks. */
static void idle_sblock_serves_again_while_its_chunks_are_free(void) {
  world_t w;
  REQUIRE(open_world(&w, "frag_limit:16MiB", 0));
  ab_dptr_t a, x, b, s, s2, c;
  REQUIRE(alloc(&w, 12 * MiB, &a) == AB_OK);
  REQUIRE(alloc(&w, 12 * MiB, &x) == AB_OK);
  REQUIRE(alloc(&w, 12 * MiB, &b) == AB_OK);
  release(&w, a, 12 * MiB);
  release(&w, b, 12 * MiB);
  REQUIRE(alloc(&w, 24 * MiB, &s) == AB_OK);
  release(&w, s, 24 * MiB);
  REQUIRE(alloc(&w, 24 * MiB, &s2) == AB_OK);
  CHECK_EQ(s2, s);
  CHECK_EQ(stat(&w, "stitch.reuses"), 1);
  CHECK_EQ(stat(&w, "stitch.count"), 1);
  release(&w, s2, 24 * MiB);
  /* One pBlock in use: the sBlock cannot serve, and nothing else holds 24 MiB but new memory. */
  REQUIRE(alloc(&w, 12 * MiB, &c) == AB_OK);
  REQUIRE(alloc(&w, 24 * MiB, &s2) == AB_OK);
  CHECK(s2 != s);
  CHECK_EQ(stat(&w, "stitch.reuses"), 1);
  release(&w, s2, 24 * MiB);
  release(&w, c, 12 * MiB);
  release(&w, x, 12 * MiB);
  REQUIRE(ab_strategy_empty_cache(w.s) == AB_OK);
  check_invariants(&w);
  CHECK_EQ(reserved(&w), 0);
  ab_test_world_close(w.dev, w.s);
}

static const ab_test_t tests[] = {
    {"release_frees_only_unsplit_pblocks", release_frees_only_unsplit_pblocks},
    {"freed_sblock_chunks_serve_from_their_pblocks", freed_sblock_chunks_serve_from_their_pblocks},
    {"idle_sblock_serves_again_while_its_chunks_are_free", idle_sblock_serves_again_while_its_chunks_are_free},
};
AB_TEST_MAIN(tests)
