/* pooled_check_test.c: pooled's invariant check fires on every structure it guards. The
 * strategy's source is compiled into this test, so that the test can reach its internals and
 * break them one at a time: the free lists, the chunks' bitmaps and counts, the table of live
 * blocks, the chunk tree, the statistics; each break must make the check fail naming it, and
 * the check must pass again once it is undone. */
#include "strategies/pooled.c"

#include "tests/check.h"
#include "tests/world.h"

typedef struct world_s {
  ab_device_t *dev;
  ab_strategy_t *s;
  pooled_t *p;
  ab_dptr_t live[6];
  uint64_t bytes[6];
} world_t;

/* pooled with an initial pool and two classes in use: 1 KiB blocks (one live, the rest free)
 * and 3 MiB blocks in device chunks. */
static bool world_open(world_t *w) {
  ab_diag_t d = {""};
  memset(w, 0, sizeof *w);
  if (!ab_test_world_open(&w->dev, &w->s, "sim", NULL, "pooled", "initial_pool:4MiB,chunk:1MiB")) return false;
  w->p = (pooled_t *)w->s;
  static const uint64_t sizes[6] = {1000, 1024, 700, 3 << 20, 3 << 20, 100 << 10};
  for (int i = 0; i < 6; i++) {
    w->bytes[i] = sizes[i];
    if (ab_strategy_alloc(w->s, sizes[i], 0, &w->live[i]) != AB_OK) return false;
  }
  CHECK(ab_strategy_free(w->s, w->live[2], w->bytes[2], 0) == AB_OK);
  w->bytes[2] = 0;
  CHECK_MSG(ab_strategy_check(w->s, &d) == AB_OK, "the untouched strategy: %s", d.msg);
  return true;
}

static void world_close(world_t *w) {
  for (int i = 0; i < 6; i++)
    if (w->bytes[i]) CHECK(ab_strategy_free(w->s, w->live[i], w->bytes[i], 0) == AB_OK);
  ab_test_world_close(w->dev, w->s);
}

/* The check must fail saying `says`. */
static void broken(world_t *w, const char *what, const char *says) {
  ab_diag_t d = {""};
  CHECK_MSG(ab_strategy_check(w->s, &d) == AB_ERR_INTERNAL, "%s: the check passed", what);
  CHECK_MSG(strstr(d.msg, says) != NULL, "%s: '%s' does not say '%s'", what, d.msg, says);
}

static void mended(world_t *w, const char *what) {
  ab_diag_t d = {""};
  CHECK_MSG(ab_strategy_check(w->s, &d) == AB_OK, "%s, undone: %s", what, d.msg);
}

static class_t *class_with_free(pooled_t *p, uint64_t bytes) {
  class_t *cl = &p->classes[class_of(p, bytes)];
  return cl->nfree ? cl : NULL;
}

static void free_lists(void) {
  world_t w;
  if (!world_open(&w)) return;
  class_t *cl = class_with_free(w.p, 1024);
  REQUIRE(cl != NULL && cl->nfree >= 2);
  free_t top = cl->free[cl->nfree - 1];

  REQUIRE(push_free(cl, top.addr, top.chunk) == AB_OK);
  broken(&w, "a free block listed twice", "is listed twice");
  cl->nfree--;
  mended(&w, "a free block listed twice");

  cl->free[cl->nfree - 1].addr = w.live[1];
  broken(&w, "a live block on the free list", "is handed out");
  cl->free[cl->nfree - 1] = top;

  cl->free[cl->nfree - 1].addr = top.addr + 512;
  broken(&w, "half a block on the free list", "is not at the start of a block");
  cl->free[cl->nfree - 1] = top;

  cl->free[cl->nfree - 1] = (free_t){w.live[3], chunk_of(w.p, w.live[3])};
  broken(&w, "a block of another class on the list", "lies in a chunk of another class");
  cl->free[cl->nfree - 1] = top;

  cl->free[cl->nfree - 1].chunk = chunk_of(w.p, w.live[3]);
  broken(&w, "a free block listed with a chunk not its own", "is listed with another chunk");
  cl->free[cl->nfree - 1] = top;

  cl->free[cl->nfree - 1].addr = 0x1000;
  broken(&w, "an address outside every chunk", "lies in no chunk");
  cl->free[cl->nfree - 1] = top;

  cl->nfree--;
  broken(&w, "a free block lost from its list", "1 of its blocks are neither handed out nor on the free lists");
  cl->nfree++;
  mended(&w, "the free lists");
  world_close(&w);
}

static void chunks(void) {
  world_t w;
  if (!world_open(&w)) return;
  chunk_t *c = chunk_of(w.p, w.live[0]);
  REQUIRE(c != NULL);

  c->live++;
  broken(&w, "a live count off by one", "counts");
  c->live--;

  c->in_use[0] ^= 2; /* a free block marked live: the count, and the list, disagree */
  broken(&w, "a bitmap bit flipped", "live blocks, has");
  c->in_use[0] ^= 2;

  uint64_t owner = 0;
  REQUIRE(ab_map_take(&w.p->live, w.live[0], &owner));
  broken(&w, "a live block missing from the table of live blocks", "in the table of live blocks");
  REQUIRE(ab_map_put(&w.p->live, w.live[0], (uint64_t)(uintptr_t)chunk_of(w.p, w.live[3])) == AB_OK);
  broken(&w, "a live block in the table with another chunk", "is no live block of its chunk");
  REQUIRE(ab_map_put(&w.p->live, w.live[0], owner) == AB_OK);
  mended(&w, "the table of live blocks");

  c->block += 512;
  broken(&w, "a chunk of no class", "is no whole number of blocks of a class");
  c->block -= 512;

  chunk_t *big = chunk_of(w.p, w.live[4]); /* live[3] took the rest of the initial pool */
  REQUIRE(big != NULL && !big->initial);
  big->initial = true; /* a device chunk taken for part of the initial pool */
  broken(&w, "a device chunk marked initial", "lies outside the initial pool");
  big->initial = false;

  ab_dptr_t base = big->base;
  ab_tnode_t *prev = ab_tree_prev(&big->node);
  REQUIRE(prev != NULL);
  chunk_t *before = AB_CONTAINER_OF(prev, chunk_t, node);
  big->base = before->base + before->bytes - 512; /* overlapping the chunk below */
  broken(&w, "overlapping chunks", "out of order or overlapping");
  big->base = base;

  int height = w.p->chunks.root->height;
  w.p->chunks.root->height = height + 5;
  broken(&w, "an unsound chunk tree", "chunk tree is unsound");
  w.p->chunks.root->height = height;
  mended(&w, "the chunks");
  world_close(&w);
}

static void statistics(void) {
  world_t w;
  if (!world_open(&w)) return;
  ab_stats_t good = w.s->stats;
  w.s->stats.allocated_bytes.current -= 1024;
  broken(&w, "allocated bytes below the live blocks", "blocks sum to");
  w.s->stats = good;
  w.s->stats.reserved_bytes.current -= 1;
  w.s->stats.reserved_bytes.peak -= 1;
  broken(&w, "reserved bytes off by one", "reserved, blocks sum to");
  w.s->stats = good;
  w.s->stats.num_device_alloc++;
  broken(&w, "a device allocation that holds nothing", "device allocations not freed");
  w.s->stats = good;
  w.s->stats.requested_bytes.current = w.s->stats.allocated_bytes.current + 1;
  w.s->stats.requested_bytes.peak = w.s->stats.requested_bytes.current;
  broken(&w, "more requested than allocated", "requested but only");
  w.s->stats = good;
  mended(&w, "the statistics");
  world_close(&w);
}

static const ab_test_t tests[] = {
    {"free_lists", free_lists},
    {"chunks", chunks},
    {"statistics", statistics},
};
AB_TEST_MAIN(tests)
