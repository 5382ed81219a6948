#include "kernels/base/tree.h"

static int height(const ab_tnode_t *n) { return n ? n->height : 0; }

static void update(ab_tnode_t *n) {
  int l = height(n->left), r = height(n->right);
  n->height = (l > r ? l : r) + 1;
}

/* Replaces old with new_ in old's parent (or the root). */
static void replace_child(ab_tree_t *t, ab_tnode_t *parent, ab_tnode_t *old, ab_tnode_t *new_) {
  if (parent == NULL)
    t->root = new_;
  else if (parent->left == old)
    parent->left = new_;
  else
    parent->right = new_;
  if (new_) new_->parent = parent;
}

static ab_tnode_t *rotate_left(ab_tree_t *t, ab_tnode_t *x) {
  ab_tnode_t *y = x->right;
  replace_child(t, x->parent, x, y);
  x->right = y->left;
  if (x->right) x->right->parent = x;
  y->left = x;
  x->parent = y;
  update(x);
  update(y);
  return y;
}

static ab_tnode_t *rotate_right(ab_tree_t *t, ab_tnode_t *x) {
  ab_tnode_t *y = x->left;
  replace_child(t, x->parent, x, y);
  x->left = y->right;
  if (x->left) x->left->parent = x;
  y->right = x;
  x->parent = y;
  update(x);
  update(y);
  return y;
}

/* Restores balance after an insertion below n. One rotation restores the height the subtree
 * had before the insertion, and an unchanged height means nothing above can change. */
static void rebalance_insert(ab_tree_t *t, ab_tnode_t *n) {
  while (n) {
    int old = n->height;
    update(n);
    int bal = height(n->left) - height(n->right);
    if (bal > 1) {
      if (height(n->left->left) < height(n->left->right)) rotate_left(t, n->left);
      rotate_right(t, n);
      return;
    }
    if (bal < -1) {
      if (height(n->right->right) < height(n->right->left)) rotate_right(t, n->right);
      rotate_left(t, n);
      return;
    }
    if (n->height == old) return;
    n = n->parent;
  }
}

void ab_tree_init(ab_tree_t *t, ab_tree_cmp_fn cmp) {
  t->root = NULL;
  t->cmp = cmp;
  t->size = 0;
}

void ab_tree_insert(ab_tree_t *t, ab_tnode_t *n) {
  ab_tnode_t *parent = NULL, *cur = t->root;
  bool left = false;
  while (cur) {
    parent = cur;
    left = t->cmp(n, parent) < 0;
    cur = left ? parent->left : parent->right;
  }
  ab_tree_link(t, parent, left, n);
}

void ab_tree_link(ab_tree_t *t, ab_tnode_t *parent, bool left, ab_tnode_t *n) {
  n->left = n->right = NULL;
  n->parent = parent;
  n->height = 1;
  if (parent == NULL)
    t->root = n;
  else if (left)
    parent->left = n;
  else
    parent->right = n;
  t->size++;
  rebalance_insert(t, parent);
}

void ab_tree_remove(ab_tree_t *t, ab_tnode_t *n) {
  ab_tnode_t *fix;
  if (n->left && n->right) {
    /* Swap in the successor, which has no left child. */
    ab_tnode_t *s = n->right;
    while (s->left) s = s->left;
    ab_tnode_t *s_parent = s->parent, *s_right = s->right;
    if (s_parent == n) {
      fix = s;
    } else {
      s_parent->left = s_right;
      if (s_right) s_right->parent = s_parent;
      s->right = n->right;
      s->right->parent = s;
      fix = s_parent;
    }
    s->left = n->left;
    s->left->parent = s;
    replace_child(t, n->parent, n, s);
    s->height = n->height;
  } else {
    ab_tnode_t *child = n->left ? n->left : n->right;
    fix = n->parent;
    replace_child(t, n->parent, n, child);
  }
  t->size--;
  /* Removal may shrink several levels: walk up while subtrees change height. A balanced node
   * whose height did not change leaves everything above it as it was. */
  for (ab_tnode_t *p = fix; p;) {
    int old = p->height;
    update(p);
    int bal = height(p->left) - height(p->right);
    if (bal > 1) {
      if (height(p->left->left) < height(p->left->right)) rotate_left(t, p->left);
      p = rotate_right(t, p);
    } else if (bal < -1) {
      if (height(p->right->right) < height(p->right->left)) rotate_right(t, p->right);
      p = rotate_left(t, p);
    } else if (p->height == old) {
      break;
    }
    p = p->parent;
  }
}

ab_tnode_t *ab_tree_first(const ab_tree_t *t) {
  ab_tnode_t *n = t->root;
  if (n)
    while (n->left) n = n->left;
  return n;
}

ab_tnode_t *ab_tree_last(const ab_tree_t *t) {
  ab_tnode_t *n = t->root;
  if (n)
    while (n->right) n = n->right;
  return n;
}

ab_tnode_t *ab_tree_next(const ab_tnode_t *n) {
  if (n->right) {
    n = n->right;
    while (n->left) n = n->left;
    return (ab_tnode_t *)n;
  }
  while (n->parent && n->parent->right == n) n = n->parent;
  return n->parent;
}

ab_tnode_t *ab_tree_prev(const ab_tnode_t *n) {
  if (n->left) {
    n = n->left;
    while (n->right) n = n->right;
    return (ab_tnode_t *)n;
  }
  while (n->parent && n->parent->left == n) n = n->parent;
  return n->parent;
}

ab_tnode_t *ab_tree_lower_bound(const ab_tree_t *t, const void *key, ab_tree_key_fn cmp) {
  ab_tnode_t *n = t->root, *best = NULL;
  while (n) {
    if (cmp(key, n) <= 0) {
      best = n;
      n = n->left;
    } else {
      n = n->right;
    }
  }
  return best;
}

ab_tnode_t *ab_tree_floor(const ab_tree_t *t, const void *key, ab_tree_key_fn cmp) {
  ab_tnode_t *n = t->root, *best = NULL;
  while (n) {
    if (cmp(key, n) >= 0) {
      best = n;
      n = n->right;
    } else {
      n = n->left;
    }
  }
  return best;
}

static int check_node(const ab_tree_t *t, const ab_tnode_t *n, size_t *count) {
  if (n == NULL) return 0;
  (*count)++;
  if (n->left && (n->left->parent != n || t->cmp(n->left, n) > 0)) return -1;
  if (n->right && (n->right->parent != n || t->cmp(n->right, n) < 0)) return -1;
  int l = check_node(t, n->left, count), r = check_node(t, n->right, count);
  if (l < 0 || r < 0) return -1;
  if (l - r > 1 || r - l > 1) return -1;
  int h = (l > r ? l : r) + 1;
  return h == n->height ? h : -1;
}

int ab_tree_check(const ab_tree_t *t) {
  size_t count = 0;
  if (t->root && t->root->parent) return -1;
  if (check_node(t, t->root, &count) < 0 || count != t->size) return -1;
  /* Order across the whole tree, not only parent-child. */
  const ab_tnode_t *prev = NULL;
  for (const ab_tnode_t *n = ab_tree_first(t); n; n = ab_tree_next(n)) {
    if (prev && t->cmp(prev, n) > 0) return -1;
    prev = n;
  }
  return 0;
}
