/* blocks.h: a block of a segment, as a strategy's segment walk reports it (strategy.h) and a
 * trace's segment map keeps it (trace_log.h).
 * Layer: protocol (strategies/protocol/). */
#ifndef AB_BLOCKS_H
#define AB_BLOCKS_H

#include <stdint.h>

#include "kernels/device/device.h"

typedef enum ab_block_state_e {
  AB_BLOCK_ALLOCATED,    /* handed out */
  AB_BLOCK_PENDING_FREE, /* freed by the user, not yet reusable (PyTorch's active_pending_free) */
  AB_BLOCK_FREE,         /* cached, reusable */
  AB_BLOCK_UNMAPPED,     /* reserved address space with no memory behind it */
} ab_block_state_t;

typedef struct ab_block_info_s {
  ab_dptr_t addr;
  uint64_t bytes;     /* the block's size as the strategy handed it out */
  uint64_t requested; /* bytes the user asked for (a free block: the last request, where the
                       * strategy keeps it, as PyTorch's snapshot shows); else 0 */
  ab_block_state_t state;
} ab_block_info_t;

#endif
