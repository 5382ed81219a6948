/* trace_actions.h: the one vocabulary of what callers and allocators do, PyTorch's
 * TraceEntry actions (PyTorch v2.11.0, c10/cuda/CUDACachingAllocator.h, struct TraceEntry):
 *   alloc, free_requested, free_completed   the caller's calls
 *   segment_alloc, segment_free             an allocator's cudaMalloc and cudaFree of a segment
 *                                          (a stream-ordered pool's allocations count as one
 *                                          segment each)
 *   segment_map, segment_unmap              pages mapped into or unmapped from an expandable
 *                                          segment, one action per range the allocator maps
 *   oom                                     an allocation the allocator could not serve
 *   snapshot                                a marker of PyTorch's, read and never written
 * The segment actions are the allocator's decisions: strategies report them to their
 * observer (strategy.h), traces record them (adaptor_trace.h), importers keep them beside the
 * events (events.h) so that a replay can be compared with the recorded allocator. */
#ifndef AB_TRACE_ACTIONS_H
#define AB_TRACE_ACTIONS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AB_TRACE_ACTIONS(X)                   \
  X(AB_TR_ALLOC, "alloc")                     \
  X(AB_TR_FREE_REQUESTED, "free_requested")   \
  X(AB_TR_FREE_COMPLETED, "free_completed")   \
  X(AB_TR_SEGMENT_ALLOC, "segment_alloc")     \
  X(AB_TR_SEGMENT_FREE, "segment_free")       \
  X(AB_TR_SEGMENT_MAP, "segment_map")         \
  X(AB_TR_SEGMENT_UNMAP, "segment_unmap")     \
  X(AB_TR_OOM, "oom")                         \
  X(AB_TR_SNAPSHOT, "snapshot")               \
  X(AB_TR_EMPTY_CACHE, "empty_cache")

typedef enum ab_trace_action_e {
#define AB_TRACE_ACTION_ENUM(name, text) name,
  AB_TRACE_ACTIONS(AB_TRACE_ACTION_ENUM)
#undef AB_TRACE_ACTION_ENUM
  AB_TR_OTHER, /* any other name (annotate, user_defined, ...): a no-op */
} ab_trace_action_t;

/* PyTorch's name of an action ("other" for AB_TR_OTHER). */
const char *ab_trace_action_name(ab_trace_action_t a);
/* The action called name[0..len); AB_TR_OTHER for names outside the vocabulary. */
ab_trace_action_t ab_trace_action_of(const char *name, size_t len);

#ifdef __cplusplus
}
#endif

#endif
