/* verify.h: the --verify mode of the replay engine: proof that no two live allocations
 * share memory.
 *
 * Every allocation is watched from the moment the strategy hands it out until it is freed:
 * - with kernels (the cuda device): it is filled with its pattern (kernels/pattern.h, Note
 *   [Verify pattern]) on its stream when allocated, filled again after each kernel that
 *   writes it, and checked, once all work on the device is done, before it is freed. A byte
 *   that differs fails the run; the message names the allocation, the byte, and the
 *   allocation whose pattern was found there when the word found can be traced to one.
 * - without (the simulated device, whose addresses are never dereferenced): an ordered set
 *   of the live ranges [addr, addr + bytes) catches an allocation that overlaps a live one
 *   when it is made, and names both.
 * The pattern also catches what the range set cannot see, such as two addresses mapped to
 * the same physical memory.
 *
 * Statuses: AB_ERR_INVALID when the check fails (a strategy broke its contract), with the
 * reason in diag; the kernels' errors otherwise; AB_ERR_INTERNAL when host memory ran out.
 * Memory: ab_verify_init allocates one record per allocation id; ab_verify_release frees
 * them. Not thread-safe.
 */
#ifndef AB_VERIFY_H
#define AB_VERIFY_H

#include <stdint.h>

#include "kernels/base/status.h"
#include "kernels/base/tree.h"
#include "workloads/events/events.h"
#include "kernels/kernels.h"

typedef struct ab_verify_block_s {
  ab_tnode_t node; /* in ab_verify_t.live_set (the range set) while live */
  ab_dptr_t addr;  /* where the strategy put it; kept after its free, for messages */
  uint64_t bytes;  /* its size; 0 until it is allocated */
  uint8_t live;    /* 1 from its allocation to its free */
} ab_verify_block_t;

typedef struct ab_verify_s {
  ab_kernels_t *kx;          /* not owned; NULL: the range set is the check */
  uint32_t nids;
  ab_verify_block_t *blocks; /* per allocation id */
  ab_tree_t live_set;        /* live blocks by address (range set only) */
} ab_verify_t;

/* Prepares a check of nids allocation ids; with kx the pattern, without the range set. */
ab_status ab_verify_init(ab_verify_t *v, uint32_t nids, ab_kernels_t *kx, ab_diag_t *diag);
void ab_verify_release(ab_verify_t *v);

/* Id was handed [p, p + bytes), on stream. */
ab_status ab_verify_alloc(ab_verify_t *v, uint32_t id, ab_dptr_t p, uint64_t bytes, unsigned stream, ab_diag_t *diag);
/* Kernel k just ran on stream: the buffers it wrote get their patterns back (errors go to
 * the device's diag, as the kernels' do). */
ab_status ab_verify_wrote(ab_verify_t *v, const ab_kernel_t *k, unsigned stream);
/* Id is about to be freed: checks it and forgets it (an id that is not live passes). */
ab_status ab_verify_free(ab_verify_t *v, uint32_t id, ab_diag_t *diag);

#endif
