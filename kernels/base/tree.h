/* tree.h: an intrusive ordered set (AVL tree with parent links).
 *
 * The ordered structure every allocator here needs: free blocks by (stream, size, address),
 * segments by address, free address ranges of the simulated device. A node is embedded in
 * the caller's struct; the tree never allocates, so inserting and removing cannot fail.
 * Recover the containing struct with AB_CONTAINER_OF.
 *
 * Order is given by a comparison function over two nodes. Equal nodes are allowed and keep
 * their insertion order (a new node goes after its equals). Searches take a key object and
 * a function comparing that key with a node, so callers need not build a fake node.
 *
 * All operations are O(log n); first/last/next/prev walk parent links.
 * Not thread-safe.
 */
#ifndef AB_TREE_H
#define AB_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AB_CONTAINER_OF(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

typedef struct ab_tnode_s {
  struct ab_tnode_s *left, *right, *parent;
  int height; /* of the subtree rooted here; 1 for a leaf */
} ab_tnode_t;

typedef int (*ab_tree_cmp_fn)(const ab_tnode_t *a, const ab_tnode_t *b);
/* Compares a search key with a node: negative if the key orders before the node. */
typedef int (*ab_tree_key_fn)(const void *key, const ab_tnode_t *node);

typedef struct ab_tree_s {
  ab_tnode_t *root;
  ab_tree_cmp_fn cmp;
  size_t size; /* number of nodes */
} ab_tree_t;

void ab_tree_init(ab_tree_t *t, ab_tree_cmp_fn cmp);
void ab_tree_insert(ab_tree_t *t, ab_tnode_t *n);
/* Inserts n as the left (or right) child of parent, a leaf position found by the caller's own
 * descent in cmp's order (parent NULL: into the empty tree). For hot paths that compare
 * inline rather than through cmp. */
void ab_tree_link(ab_tree_t *t, ab_tnode_t *parent, bool left, ab_tnode_t *n);
/* n must be in t. */
void ab_tree_remove(ab_tree_t *t, ab_tnode_t *n);

ab_tnode_t *ab_tree_first(const ab_tree_t *t);
ab_tnode_t *ab_tree_last(const ab_tree_t *t);
ab_tnode_t *ab_tree_next(const ab_tnode_t *n);
ab_tnode_t *ab_tree_prev(const ab_tnode_t *n);

/* The first node not ordered before key (key <= node), or NULL. */
ab_tnode_t *ab_tree_lower_bound(const ab_tree_t *t, const void *key, ab_tree_key_fn cmp);
/* The last node not ordered after key (node <= key), or NULL. */
ab_tnode_t *ab_tree_floor(const ab_tree_t *t, const void *key, ab_tree_key_fn cmp);

/* c ? a : b, computed without a branch. A descent turns left or right at every node as the
 * keys fall, which the processor cannot predict: a mispredicted branch costs more than the
 * node's compare and load, so the hot descents pick the next node with this. */
static inline ab_tnode_t *ab_tree_pick(bool c, ab_tnode_t *a, ab_tnode_t *b) {
  uintptr_t take_a = (uintptr_t)0 - (uintptr_t)c;
  return (ab_tnode_t *)(((uintptr_t)a & take_a) | ((uintptr_t)b & ~take_a));
}

/* Checks heights, balance, parent links, order and size; returns 0 if sound. For tests and
 * the invariant checkers. */
int ab_tree_check(const ab_tree_t *t);

#endif
