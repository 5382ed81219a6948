/* oommap.h: the memory at an out-of-memory, kept so that it can be explained: every block of
 * every segment the strategy held (through its segment walk), each allocated block mapped back
 * to the allocation id that holds it (through the run's pointer table), and the figures of
 * PyTorch's OOM message (Note [OOM report], oomreport.h, which writes the map and says it).
 *
 * ab_oommap_capture has the signature of the engine's on_oom hook (engine.h): set
 * opts.on_oom = ab_oommap_capture and opts.on_oom_ctx = the map, and the map is filled at the
 * OOM, before anything is freed. A map can capture again and again (a budget search captures
 * at each failing probe) and reuses its arrays; it allocates only while capturing, never in
 * the replay loop.
 *
 * Statuses: capture records a walk failure in the map (walk_status) rather than failing the
 * run.
 * Not thread-safe.
 */
#ifndef AB_OOMMAP_H
#define AB_OOMMAP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/base/hashmap.h"
#include "harness/run/engine.h"
#include "strategies/strategy.h"

typedef struct ab_oommap_segment_s {
  ab_dptr_t base;
  uint64_t bytes;
  unsigned stream;
  char pool[24];      /* the strategy's name for the segment's pool, cut to fit */
  size_t first_block; /* index of its first block in the map's blocks */
  size_t nblocks;
} ab_oommap_segment_t;

typedef struct ab_oommap_block_s {
  uint64_t offset;        /* inside its segment */
  uint64_t bytes;
  uint64_t requested;     /* 0 when the strategy does not keep it */
  int64_t alloc_id;       /* -1: no allocation holds it */
  ab_block_state_t state;
} ab_oommap_block_t;

typedef struct ab_oommap_s {
  bool captured;                 /* a capture ran since init */
  ab_status walk_status;         /* AB_OK, or why the segment walk failed (no walk: INVALID) */
  char walk_message[AB_DIAG_BYTES];
  ab_oommap_segment_t *segs;     /* in address order */
  size_t nsegs, capsegs;
  ab_oommap_block_t *blocks;
  size_t nblocks, capblocks;
  uint64_t largest_free;         /* largest block in state free */
  uint64_t free_bytes;           /* all blocks in state free */
  uint64_t unmatched;            /* allocated blocks at no live allocation's address */
  bool own_message;              /* the strategy words its OOM itself (describe_oom); else
                                    the message is the generic one, which the report repeats */
  ab_map_t owner;                /* scratch: address -> id + 1 of the live allocations */
} ab_oommap_t;

void ab_oommap_init(ab_oommap_t *m);
void ab_oommap_free(ab_oommap_t *m);

/* The engine's on_oom hook: ctx is the ab_oommap_t to fill. */
void ab_oommap_capture(void *ctx, ab_strategy_t *s, const ab_run_t *run);

#endif
