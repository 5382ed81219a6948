/* pluggable_card.h: the CUDA calls of a pluggable library, served by the run's device
 * (pluggable_card.c), the card of Note [The CUDA shim] (pluggable_shim.h).
 *
 * The card keeps what the library holds from the device: its cudaMalloc'd and
 * pool-allocated ranges, its reservations, its physical allocations (handles) and where each
 * is mapped. Each device allocation, free, map and unmap is a segment decision of the
 * strategy that owns the card: it is counted in the strategy's statistics (reserved bytes,
 * device allocations and frees) and reported to its observer, as raw reports its cudaMalloc.
 *
 * A call the library gets wrong (a free of memory it does not hold, a refused call) is
 * recorded, the first one per call into the library, so that the strategy fails the
 * operation with one line naming it; an out-of-memory answer is recorded as such, so that a
 * NULL from the library can be told from a library that gives up for no reason.
 *
 * Thread-safety: a card belongs to the thread of its strategy.
 */
#ifndef AB_PLUGGABLE_CARD_H
#define AB_PLUGGABLE_CARD_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/base/hashmap.h"
#include "kernels/base/tree.h"
#include "strategies/pluggable/pluggable_shim.h"
#include "strategies/strategy.h"

typedef struct ab_card_s {
  ab_shim_card_t table;      /* what the shim calls; table.ctx is this card */
  ab_strategy_t *s;          /* whose device, statistics and observer the calls use; not owned */
  const char *who;           /* the library, for messages; not owned */
  ab_tree_t held;            /* ranges holding device memory, by address (cudaMalloc'd, pool, mapped) */
  ab_tree_t reservations;    /* reserved address ranges, by address */
  ab_map_t handles;          /* CUmemGenericAllocationHandle -> its record */
  uint64_t next_handle;
  uint64_t held_ranges;      /* ranges in held */
  uint64_t own_bytes;        /* cudaMalloc'd and mapped bytes now */
  uint64_t async_bytes;      /* bytes of live pool allocations */
  uint64_t async_peak;       /* their highest */
  uint64_t unmapped_bytes;   /* physical memory created and not mapped: counted against the room */
  uint64_t pool_bytes;       /* the stream-ordered pool's reserve, as last read */
  uint64_t pool_threshold;   /* its release threshold (CUDA's default: 0) */
  bool pool_used;
  void *streams[AB_MAX_STREAMS]; /* the cudaStream_t the library was given for each stream */
  unsigned stream;           /* the stream of the call into the library in progress */
  bool oom;                  /* a call failed for lack of memory during it */
  bool failed;               /* a call was refused or misused during it; why in error */
  ab_diag_t error;
} ab_card_t;

/* Sets the card up for strategy s's device; the library is called `who` in messages. */
ab_status ab_card_init(ab_card_t *c, ab_strategy_t *s, const char *who);
/* Returns everything the library still holds to the device, then frees the card. */
void ab_card_destroy(ab_card_t *c);

/* Begins a call into the library on stream: clears what the last call recorded. */
void ab_card_begin(ab_card_t *c, unsigned stream);
/* The cudaStream_t the library is given for stream (on sim, a stand-in it never looks into). */
void *ab_card_stream(ab_card_t *c, unsigned stream);
/* Re-reads the pool's reserve into the strategy's reserved bytes. */
void ab_card_account(ab_card_t *c);

/* True when [p, p + bytes) lies in memory the library holds: one allocation, or mapped
 * ranges that follow each other. */
bool ab_card_holds(const ab_card_t *c, ab_dptr_t p, uint64_t bytes);

/* A live block of the library, for the segment walk. */
typedef struct ab_card_block_s {
  ab_dptr_t addr;
  uint64_t bytes;
} ab_card_block_t;

/* Walks the segments (each cudaMalloc'd or pool range, each reservation) with blocks, the
 * library's live ones in address order, placed in them; blocks outside every segment are
 * left out (ab_card_holds tells). AB_ERR_INTERNAL when host memory runs out. */
ab_status ab_card_walk(const ab_card_t *c, const ab_card_block_t *blocks, size_t nblocks, ab_segment_fn fn, void *ctx);

#endif
