#include "harness/run/verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/pattern.h"

static int cmp_addr(const ab_tnode_t *a, const ab_tnode_t *b) {
  ab_dptr_t x = AB_CONTAINER_OF(a, ab_verify_block_t, node)->addr, y = AB_CONTAINER_OF(b, ab_verify_block_t, node)->addr;
  return (x > y) - (x < y);
}

static int key_addr(const void *key, const ab_tnode_t *n) {
  ab_dptr_t k = *(const ab_dptr_t *)key, a = AB_CONTAINER_OF(n, ab_verify_block_t, node)->addr;
  return (k > a) - (k < a);
}

ab_status ab_verify_init(ab_verify_t *v, uint32_t nids, ab_kernels_t *kx, ab_diag_t *diag) {
  memset(v, 0, sizeof *v);
  v->kx = kx;
  v->nids = nids;
  v->blocks = calloc(nids ? nids : 1, sizeof *v->blocks);
  if (v->blocks == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "verify: out of host memory for %u ids", nids);
  ab_tree_init(&v->live_set, cmp_addr);
  return AB_OK;
}

void ab_verify_release(ab_verify_t *v) {
  free(v->blocks);
  memset(v, 0, sizeof *v);
}

/* "id 7 at [0x7f0000000000, +4096)" */
static const char *describe(const ab_verify_t *v, uint32_t id, char *buf, size_t size) {
  const ab_verify_block_t *b = &v->blocks[id];
  snprintf(buf, size, "id %u at [0x%llx, +%llu)", id, (unsigned long long)b->addr, (unsigned long long)b->bytes);
  return buf;
}

/* The live block that overlaps [p, p + bytes), or NULL. Live blocks never overlap one
 * another, so only the last one starting at or below p and the first one above it can. */
static const ab_verify_block_t *overlapping(const ab_verify_t *v, ab_dptr_t p, uint64_t bytes) {
  ab_tnode_t *n = ab_tree_floor(&v->live_set, &p, key_addr);
  if (n) {
    const ab_verify_block_t *b = AB_CONTAINER_OF(n, ab_verify_block_t, node);
    if (b->addr + b->bytes > p) return b;
    n = ab_tree_next(n);
  } else {
    n = ab_tree_first(&v->live_set);
  }
  if (n) {
    const ab_verify_block_t *b = AB_CONTAINER_OF(n, ab_verify_block_t, node);
    if (b->addr < p + bytes) return b;
  }
  return NULL;
}

ab_status ab_verify_alloc(ab_verify_t *v, uint32_t id, ab_dptr_t p, uint64_t bytes, unsigned stream, ab_diag_t *diag) {
  ab_verify_block_t *b = &v->blocks[id];
  b->addr = p;
  b->bytes = bytes;
  if (v->kx) {
    AB_TRY(ab_kernels_fill(v->kx, p, bytes, id, stream));
  } else {
    const ab_verify_block_t *other = overlapping(v, p, bytes);
    if (other) {
      char a[96], o[96];
      return ab_diag_set(diag, AB_ERR_INVALID, "verify: %s overlaps %s, which is live", describe(v, id, a, sizeof a),
                         describe(v, (uint32_t)(other - v->blocks), o, sizeof o));
    }
    ab_tree_insert(&v->live_set, &b->node);
  }
  b->live = 1;
  return AB_OK;
}

ab_status ab_verify_wrote(ab_verify_t *v, const ab_kernel_t *k, unsigned stream) {
  if (v->kx == NULL) return AB_OK;
  unsigned writes = ab_kernel_writes(k);
  for (unsigned i = 0; i < k->nbuf; i++) {
    if (!(writes & 1u << i)) continue;
    const ab_verify_block_t *b = &v->blocks[k->buf[i]];
    AB_TRY(ab_kernels_fill(v->kx, b->addr, b->bytes, k->buf[i], stream));
  }
  return AB_OK;
}

/* The message for a pattern that changed: whose pattern is there instead, if any. */
static ab_status report_fault(const ab_verify_t *v, uint32_t id, const ab_pattern_fault_t *f, ab_diag_t *diag) {
  const ab_verify_block_t *b = &v->blocks[id];
  char self[96], other[96];
  describe(v, id, self, sizeof self);
  unsigned long long at = (unsigned long long)(b->addr + f->offset);
  if (f->have_word) {
    uint32_t oid;
    uint64_t ooff;
    ab_pattern_decode(f->word, &oid, &ooff);
    ooff += f->offset & 7;
    /* A word traces to an allocation when that id has been allocated and is large enough
     * to have a byte at that offset; anything else is taken for foreign data. */
    if (oid < v->nids && v->blocks[oid].bytes > ooff)
      return ab_diag_set(diag, AB_ERR_INVALID,
                         "verify: %s changed while live: its byte %llu (0x%llx) holds byte %llu of the pattern of %s, %s",
                         self, (unsigned long long)f->offset, at, (unsigned long long)ooff,
                         describe(v, oid, other, sizeof other), v->blocks[oid].live ? "which is live" : "since freed");
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "verify: %s changed while live: its byte %llu (0x%llx) is in the word 0x%016llx, no allocation's pattern",
                       self, (unsigned long long)f->offset, at, (unsigned long long)f->word);
  }
  return ab_diag_set(diag, AB_ERR_INVALID, "verify: %s changed while live: its byte %llu (0x%llx) differs from its pattern",
                     self, (unsigned long long)f->offset, at);
}

ab_status ab_verify_free(ab_verify_t *v, uint32_t id, ab_diag_t *diag) {
  ab_verify_block_t *b = &v->blocks[id];
  if (!b->live) return AB_OK;
  b->live = 0;
  if (v->kx == NULL) {
    ab_tree_remove(&v->live_set, &b->node);
    return AB_OK;
  }
  ab_pattern_fault_t f;
  AB_TRY(ab_kernels_check(v->kx, b->addr, b->bytes, id, &f));
  return f.bad ? report_fault(v, id, &f, diag) : AB_OK;
}
