/* tree_test.c: the ordered set and the hash map against simple references. */
#include "kernels/base/hashmap.h"
#include "kernels/base/rng.h"
#include "kernels/base/tree.h"

#include "tests/check.h"

typedef struct item_s {
  ab_tnode_t node;
  uint64_t key;
  int in;
} item_t;

static int cmp(const ab_tnode_t *a, const ab_tnode_t *b) {
  uint64_t x = AB_CONTAINER_OF(a, item_t, node)->key, y = AB_CONTAINER_OF(b, item_t, node)->key;
  return (x > y) - (x < y);
}

static int key_cmp(const void *k, const ab_tnode_t *n) {
  uint64_t x = *(const uint64_t *)k, y = AB_CONTAINER_OF(n, item_t, node)->key;
  return (x > y) - (x < y);
}

#define N 2000

static void tree_random(void) {
  static item_t items[N];
  ab_tree_t t;
  ab_tree_init(&t, cmp);
  ab_rng_t r = ab_rng_seed(1);
  for (int i = 0; i < N; i++) items[i] = (item_t){.key = ab_rng_next(&r) % 500, .in = 0};
  for (int round = 0; round < 20000; round++) {
    item_t *it = &items[ab_rng_next(&r) % N];
    if (it->in)
      ab_tree_remove(&t, &it->node);
    else
      ab_tree_insert(&t, &it->node);
    it->in = !it->in;
    if (round % 997 == 0) REQUIRE(ab_tree_check(&t) == 0);
  }
  REQUIRE(ab_tree_check(&t) == 0);
  size_t in = 0;
  for (int i = 0; i < N; i++) in += (size_t)items[i].in;
  CHECK_EQ(t.size, in);
  /* lower_bound and floor against a linear scan. */
  for (uint64_t k = 0; k < 510; k += 7) {
    uint64_t lb = UINT64_MAX, fl = UINT64_MAX;
    for (int i = 0; i < N; i++) {
      if (!items[i].in) continue;
      if (items[i].key >= k && (lb == UINT64_MAX || items[i].key < lb)) lb = items[i].key;
      if (items[i].key <= k && (fl == UINT64_MAX || items[i].key > fl)) fl = items[i].key;
    }
    ab_tnode_t *a = ab_tree_lower_bound(&t, &k, key_cmp), *b = ab_tree_floor(&t, &k, key_cmp);
    CHECK_EQ(a ? AB_CONTAINER_OF(a, item_t, node)->key : UINT64_MAX, lb);
    CHECK_EQ(b ? AB_CONTAINER_OF(b, item_t, node)->key : UINT64_MAX, fl);
  }
  /* In order, forwards and backwards. */
  size_t count = 0;
  uint64_t prev = 0;
  for (ab_tnode_t *n = ab_tree_first(&t); n; n = ab_tree_next(n), count++) {
    CHECK(AB_CONTAINER_OF(n, item_t, node)->key >= prev);
    prev = AB_CONTAINER_OF(n, item_t, node)->key;
  }
  CHECK_EQ(count, t.size);
  count = 0;
  for (ab_tnode_t *n = ab_tree_last(&t); n; n = ab_tree_prev(n)) count++;
  CHECK_EQ(count, t.size);
}

static void tree_equal_keys_keep_order(void) {
  item_t items[5];
  ab_tree_t t;
  ab_tree_init(&t, cmp);
  for (int i = 0; i < 5; i++) {
    items[i] = (item_t){.key = 3};
    ab_tree_insert(&t, &items[i].node);
  }
  int i = 0;
  for (ab_tnode_t *n = ab_tree_first(&t); n; n = ab_tree_next(n), i++) CHECK(n == &items[i].node);
}

static void map_random(void) {
  ab_map_t m;
  ab_map_init(&m);
  static uint64_t ref[4096];
  ab_rng_t r = ab_rng_seed(9);
  for (int round = 0; round < 200000; round++) {
    uint64_t k = (ab_rng_next(&r) % 4096) + 1;
    uint64_t v;
    uint64_t op = ab_rng_next(&r) % 3;
    if (op == 0) {
      uint64_t val = ab_rng_next(&r) | 1;
      REQUIRE(ab_map_put(&m, k << 8, val) == AB_OK);
      ref[k - 1] = val;
    } else if (op == 1) { /* found in place, or added with 0 and set */
      size_t slot = 0;
      bool added = false;
      REQUIRE(ab_map_slot_or_add(&m, k << 8, &slot, &added) == AB_OK);
      CHECK_EQ(added, ref[k - 1] == 0);
      CHECK_EQ(m.slots[slot].key, k << 8);
      CHECK_EQ(m.slots[slot].val, added ? 0 : ref[k - 1]);
      m.slots[slot].val = ab_rng_next(&r) | 1;
      ref[k - 1] = m.slots[slot].val;
    } else {
      bool had = ab_map_take(&m, k << 8, &v);
      CHECK_EQ(had, ref[k - 1] != 0);
      if (had) CHECK_EQ(v, ref[k - 1]);
      ref[k - 1] = 0;
    }
  }
  size_t n = 0;
  for (uint64_t k = 1; k <= 4096; k++) {
    uint64_t v = 0;
    bool has = ab_map_get(&m, k << 8, &v);
    CHECK_EQ(has, ref[k - 1] != 0);
    if (has) CHECK_EQ(v, ref[k - 1]);
    n += has;
  }
  CHECK_EQ(n, m.n);
  CHECK(ab_map_put(&m, 0, 1) != AB_OK);
  size_t slot;
  bool added;
  CHECK(ab_map_slot_or_add(&m, 0, &slot, &added) != AB_OK);
  ab_map_free(&m);
}

static const ab_test_t tests[] = {
    {"tree_random", tree_random},
    {"tree_equal_keys_keep_order", tree_equal_keys_keep_order},
    {"map_random", map_random},
};
AB_TEST_MAIN(tests)
