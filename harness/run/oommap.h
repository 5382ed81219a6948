/* oommap.h: the memory at an out-of-memory, kept so that it can be explained: every block of
 * every segment the strategy held (through its segment walk), each allocated block mapped back
 * to the allocation id that holds it (through the run's pointer table), and the figures of
 * PyTorch's OOM message (Note [OOM report]).
 *
 * ab_oommap_capture has the signature of the engine's on_oom hook (engine.h): set
 * opts.on_oom = ab_oommap_capture and opts.on_oom_ctx = the map, and the map is filled at the
 * OOM, before anything is freed. A map can capture again and again (a budget search captures
 * at each failing probe) and reuses its arrays; it allocates only while capturing, never in
 * the replay loop.
 *
 * The map file (ab_oommap_write) has one row per block:
 *   segment          index of the segment, in address order, from 0
 *   offset, size     of the block inside its segment, bytes
 *   state            allocated | pending_free | free | unmapped
 *   alloc_id         the allocation id (event stream ids) of an allocated or pending-free
 *                    block; -1 for the others
 *   requested        bytes the allocation asked for where the strategy keeps it, else 0
 *   segment_size     the segment's size, bytes
 *   segment_address  the segment's first address (the device's, fake on sim)
 *   pool, stream     what the segment serves, as the strategy names it
 *   workload, conf, strategy  the run, whole (results.h, ab_results_run_cells); empty in a map
 *                    written for no one run (tune's)
 * plots/oommap.gp draws it: one bar per segment, blocks coloured by state.
 *
 * Note [OOM report]: PyTorch's message (PyTorch v2.11.0, CUDACachingAllocator.cpp, malloc's
 * "CUDA out of memory. Tried to allocate")
 * gives the bytes tried, the cap, allocated and "reserved but unallocated"; users then ask
 * where the unallocated bytes are. The report adds the largest free block and the number of
 * segments (so "3 GiB free in 400 pieces, none over 20 MiB" reads at once), the engine's
 * classification (capacity, rounding or fragmentation: Note [OOM kinds] in engine.h) in
 * words, and where the map was written.
 *
 * Statuses: capture records a walk failure in the map (walk_status) rather than failing the
 * run; ab_oommap_write returns AB_ERR_IO with the path in diag.
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

typedef struct ab_run_desc_s ab_run_desc_t; /* results.h: what makes a run */

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

/* Writes the map as the run's oommap file in dir (results.h, ab_results_run_file; written
 * atomically) and, if path is not NULL, the path written into it. A map whose walk failed
 * writes nothing and returns AB_OK with path "". */
ab_status ab_oommap_write(const ab_oommap_t *m, const char *dir, const ab_run_desc_t *run, char *path, size_t path_size,
                          ab_diag_t *diag);

/* Writes the map to the file at path, atomically, whatever it was captured at (the OOM, or
 * any moment a caller chose: tune's map at the peak), its rows naming run (NULL: none). Needs
 * a captured map whose walk succeeded. */
ab_status ab_oommap_write_file(const ab_oommap_t *m, const char *path, const ab_run_desc_t *run, ab_diag_t *diag);

/* Prints the report of Note [OOM report] for the OOM of a run: the strategy and device that
 * ran, the budget it ran under (0: none), m (may be NULL: no map), and map_path ("" or NULL
 * when none was written). */
void ab_oommap_report(FILE *f, const ab_oom_info_t *oom, const char *strategy, const char *device, uint64_t budget,
                      const ab_oommap_t *m, const char *map_path);

/* The name of a block state in the map file. */
const char *ab_block_state_name(ab_block_state_t state);

#endif
