/* caching_conf.h: PYTORCH_CUDA_ALLOC_CONF as PyTorch 2.11 reads it, for the caching strategy.
 *
 * The text is split the way PyTorch's ConfigTokenizer splits it: ',', ':', '[' and ']' are
 * tokens of their own, whitespace is dropped everywhere, everything else makes up words. The
 * words are then read in PyTorch's three passes over one string:
 *   1. large_segment_size_mb, wherever it appears (the minimum of max_split_size_mb and
 *      max_non_split_rounding_mb depends on it);
 *   2. the common keys (AcceleratorAllocatorConfig): max_split_size_mb,
 *      max_non_split_rounding_mb, garbage_collection_threshold, roundup_power2_divisions,
 *      expandable_segments, pinned_use_background_threads; any key neither pass knows is
 *      refused here, so its error comes first;
 *   3. the CUDA keys (CUDAAllocatorConfig): backend, release_lock_on_cudamalloc,
 *      pinned_use_cuda_host_register (and their hip spellings), pinned_num_register_threads,
 *      pinned_reserve_segment_size_mb, graph_capture_record_stream_reuse,
 *      per_process_memory_fraction.
 * Values are checked as PyTorch checks them, with PyTorch's error text: numbers are read as
 * std::stoull / std::stod read them (a numeric prefix is enough: "128MB" is 128), booleans
 * must be exactly True or False, and separators between items are not checked (PyTorch
 * ignores the result of that check). A later key overrides an earlier one; the list form of
 * roundup_power2_divisions edits the table in place. Keys that do not touch device memory
 * (host-side pinned_*, release_lock_on_cudamalloc) are accepted and named in
 * `ignored`. backend:cudaMallocAsync is refused with a pointer to the async strategy.
 *
 * Every parse starts, as PyTorch's does, by resetting max_split_size, the divisions table and
 * the garbage-collection threshold, and setting max_non_split_rounding to large_segment_size;
 * the other settings keep their values. On error the configuration is left unchanged and diag
 * says "WHAT 'TEXT': at position P: MESSAGE" (P is 1-based in TEXT).
 */
#ifndef AB_CACHING_CONF_H
#define AB_CACHING_CONF_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/base/status.h"
#include "kernels/base/units.h"

#define AB_CACHING_DIVISION_INTERVALS 16

typedef struct ab_caching_conf_s {
  uint64_t max_split_size;         /* bytes; UINT64_MAX: unlimited */
  uint64_t max_non_split_rounding; /* bytes an oversize block may exceed a request by */
  uint64_t large_segment_size;     /* segment of 1-10 MiB requests, expandable large page */
  uint64_t divisions[AB_CACHING_DIVISION_INTERVALS]; /* by floor(log2(size)) - 20, clamped */
  double gc_threshold;             /* garbage_collection_threshold; 0: off */
  double memory_fraction;          /* per_process_memory_fraction; 1: no cap */
  bool expandable;                 /* expandable_segments */
  bool capture_reuse;              /* graph_capture_record_stream_reuse: a block freed across
                                    * streams during a capture may be reused in it */
  uint64_t round_large;            /* kRoundLarge, what a segment of 10 MiB or more is rounded
                                    * up to: PyTorch's constant 2 MiB, no conf key sets it (a
                                    * parse keeps it); a copy of the allocator may differ
                                    * (ab_caching_create_rounded) */
  /* Host-side keys: no effect on device memory, kept because a snapshot reports them
   * (snapshot.c, Note [The settings a snapshot holds]). */
  bool release_lock;               /* release_lock_on_cudamalloc (or _hipmalloc) */
  bool host_register;              /* pinned_use_cuda_host_register (or _hip_) */
  uint64_t register_threads;       /* pinned_num_register_threads; PyTorch's default 1 */
  char ignored[256];               /* keys accepted without effect, "a, b"; "" when none */
} ab_caching_conf_t;

/* PyTorch's defaults: no limits, 20 MiB large segments, no rounding, no GC, no cap, large
 * segments rounded up to 2 MiB, one pinned-memory register thread. */
void ab_caching_conf_defaults(ab_caching_conf_t *c);

/* Applies text (NULL or "" applies nothing but the resets) to c as one settings parse.
 * `what` names the input in messages ("-c"). AB_ERR_INVALID on a refused string. */
ab_status ab_caching_conf_apply(ab_caching_conf_t *c, const char *what, const char *text, ab_diag_t *diag);

/* PyTorch's sizes (v2.11.0 c10/cuda/CUDACachingAllocator.cpp, round_size and
 * get_allocation_size): a request rounded up to 512 B, or to a power-of-two division of its
 * interval when the table asks for more than one; and the segment a rounded size gets: 2 MiB up
 * to 1 MiB (the small pool), large_segment_size below 10 MiB, else the size rounded up to
 * round_large (2 MiB in PyTorch). */
static inline uint64_t ab_caching_round_size(const ab_caching_conf_t *c, uint64_t size) {
  const uint64_t min_block = 512;
  if (size < min_block) return min_block;
  unsigned log = ab_log2_floor(size), i = log > 20 ? log - 20 : 0;
  if (i > AB_CACHING_DIVISION_INTERVALS - 1) i = AB_CACHING_DIVISION_INTERVALS - 1;
  uint64_t d = c->divisions[i];
  if (d > 1 && size > min_block * d) {
    if (ab_is_pow2(size)) return size;
    uint64_t floor = 1ULL << log, step = floor >> ab_log2_floor(d);
    if (step == 0) return floor << 1;
    uint64_t down = size & ~(step - 1);
    return down == size ? size : down + step;
  }
  return (size + min_block - 1) / min_block * min_block;
}

/* Whether a and b decide alike wherever they round a request alike: every setting that acts
 * on device memory is equal but the divisions table, which acts only through
 * ab_caching_round_size (what a request is rounded to decides its pool, its block and its
 * segment; the unrounded size is kept only as the requested bytes). */
bool ab_caching_conf_alike_but_rounding(const ab_caching_conf_t *a, const ab_caching_conf_t *b);

static inline uint64_t ab_caching_allocation_size(const ab_caching_conf_t *c, uint64_t rounded) {
  const uint64_t small_size = 1ULL << 20, small_buffer = 2ULL << 20, min_large_alloc = 10ULL << 20;
  if (rounded <= small_size) return small_buffer;
  if (rounded < min_large_alloc) return c->large_segment_size;
  return (rounded + c->round_large - 1) / c->round_large * c->round_large;
}

#endif
