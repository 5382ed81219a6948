/* pools.h: the private pools' calls, as the event stream carries them (events.h) and a
 * strategy serves them (strategy.h).
 * Layer: protocol (strategies/protocol/), the words the event stream, the traces and the strategies
 * share; above base and device, below them all. */
#ifndef AB_POOLS_H
#define AB_POOLS_H

/* Note [Private pools]: PyTorch routes the allocations of a CUDA graph capture
 * (torch.cuda.graph(g, pool=...), graph trees under torch.compile(mode="reduce-overhead")) and of
 * torch.cuda.use_mem_pool(MemPool) to a private pool with its own free lists and segments, and
 * keeps that pool's segments out of every other allocation's reach until the pool is released.
 * The event stream says so with pool events (events.h), which reach a strategy as these calls,
 * named by a pool number (1, 2, ...; 0 is the default pool), PyTorch's calls on the
 * CUDACachingAllocator:
 *   CREATE   createOrIncrefPool: a MemPool is made (flags: USE_ON_OOM, NO_SPLIT), or a pool
 *            gains one more user; a pool never created is created by its first BEGIN
 *   BEGIN    beginAllocateToPool: allocations on `stream` (ALL_STREAMS: on every stream, as
 *            use_mem_pool's thread filter in a one-thread replay) go to the pool until its END;
 *            the pool gains a user; contexts nest, the latest matching one wins
 *   END      endAllocateToPool
 *   RELEASE  releasePool: a user lets go (a graph is destroyed, a MemPool deleted); with no user
 *            left, the pool's whole free segments go back at the next empty_cache or retry
 *   EMPTY    emptyCache(pool): the released pool's whole free segments go back now (MemPool's
 *            destructor)
 * A strategy without the operation serves everything from where it always does. */
typedef enum ab_pool_op_e {
  AB_POOL_CREATE = 0,
  AB_POOL_BEGIN,
  AB_POOL_END,
  AB_POOL_RELEASE,
  AB_POOL_EMPTY,
  AB_POOL_OPS
} ab_pool_op_t;

#define AB_POOL_USE_ON_OOM 1u  /* CREATE: searched for a free block before the default pool releases */
#define AB_POOL_NO_SPLIT 2u    /* CREATE: blocks are never split (MemPool(no_split=True)) */
#define AB_POOL_ALL_STREAMS 4u /* BEGIN: every stream's allocations, not only the event's stream */
#define AB_POOL_FLAGS 7u

#endif
