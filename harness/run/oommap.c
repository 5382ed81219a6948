#include "harness/run/oommap.h"

#include <stdlib.h>
#include <string.h>

void ab_oommap_init(ab_oommap_t *m) {
  memset(m, 0, sizeof *m);
  ab_map_init(&m->owner);
}

void ab_oommap_free(ab_oommap_t *m) {
  free(m->segs);
  free(m->blocks);
  ab_map_free(&m->owner);
  memset(m, 0, sizeof *m);
}

static bool grow(void **arr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t c = *cap ? *cap : 64;
  while (c < need) c *= 2;
  void *p = realloc(*arr, c * elem);
  if (p == NULL) return false;
  *arr = p;
  *cap = c;
  return true;
}

static int add_segment(void *ctx, const ab_segment_info_t *seg) {
  ab_oommap_t *m = ctx;
  if (!grow((void **)&m->segs, &m->capsegs, m->nsegs + 1, sizeof *m->segs) ||
      !grow((void **)&m->blocks, &m->capblocks, m->nblocks + seg->nblocks, sizeof *m->blocks)) {
    m->walk_status = AB_ERR_INTERNAL;
    snprintf(m->walk_message, sizeof m->walk_message, "out of host memory while copying the segment map");
    return 1;
  }
  ab_oommap_segment_t *sg = &m->segs[m->nsegs++];
  sg->base = seg->base;
  sg->bytes = seg->bytes;
  sg->stream = seg->stream;
  snprintf(sg->pool, sizeof sg->pool, "%s", seg->pool ? seg->pool : "");
  sg->first_block = m->nblocks;
  sg->nblocks = seg->nblocks;
  for (size_t i = 0; i < seg->nblocks; i++) {
    const ab_block_info_t *b = &seg->blocks[i];
    ab_oommap_block_t *out = &m->blocks[m->nblocks++];
    out->offset = b->addr - seg->base;
    out->bytes = b->bytes;
    bool live = b->state == AB_BLOCK_ALLOCATED || b->state == AB_BLOCK_PENDING_FREE;
    out->requested = live ? b->requested : 0; /* a free block's last request is no allocation's */
    out->state = b->state;
    out->alloc_id = -1;
    uint64_t owner;
    if (b->state == AB_BLOCK_ALLOCATED || b->state == AB_BLOCK_PENDING_FREE) {
      if (ab_map_get(&m->owner, b->addr, &owner))
        out->alloc_id = (int64_t)owner - 1;
      else
        m->unmatched++;
    } else if (b->state == AB_BLOCK_FREE) {
      m->free_bytes += b->bytes;
      if (b->bytes > m->largest_free) m->largest_free = b->bytes;
    }
  }
  return 0;
}

void ab_oommap_capture(void *ctx, ab_strategy_t *s, const ab_run_t *run) {
  ab_oommap_t *m = ctx;
  m->captured = true;
  m->walk_status = AB_OK;
  m->walk_message[0] = '\0';
  m->nsegs = m->nblocks = 0;
  m->largest_free = m->free_bytes = m->unmatched = 0;
  m->own_message = s->ops->describe_oom != NULL;
  /* The run's pointer table, turned around: which live allocation sits at an address. An id
   * is live until its free completes, so pending frees are found too. */
  if (m->owner.cap) memset(m->owner.slots, 0, m->owner.cap * sizeof *m->owner.slots);
  m->owner.n = 0;
  for (uint32_t id = 0; id < run->nids; id++) {
    if (!ab_run_live(run, id)) continue;
    if (ab_map_put(&m->owner, run->ptr[id], (uint64_t)id + 1) != AB_OK) {
      m->walk_status = AB_ERR_INTERNAL;
      snprintf(m->walk_message, sizeof m->walk_message, "out of host memory while mapping addresses to allocations");
      return;
    }
  }
  ab_status st = ab_strategy_walk(s, add_segment, m);
  if (st != AB_OK && m->walk_status == AB_OK) {
    m->walk_status = st;
    snprintf(m->walk_message, sizeof m->walk_message, "%s", s->dev->diag.msg[0] ? s->dev->diag.msg : ab_strerror(st));
  }
}
