/* caching.h: the caching strategy (caching.c, its decisions; caching_inspect.c, looking
 * inside it), PyTorch 2.11's CUDACachingAllocator, and what it offers beyond the strategy
 * vtable.
 *
 * Registry entries: `caching` (PYTORCH_CUDA_ALLOC_CONF from -c, caching_conf.h),
 * `split-limited` (max_split_size_mb:128 first) and `expandable` (expandable_segments:True
 * first). create leaves a note in diag when the conf had keys without effect on device
 * memory.
 *
 * The memory cap is torch.cuda.set_per_process_memory_fraction's: the device's budget when
 * there is one (--budget), else per_process_memory_fraction x the device total when that is
 * below 1, else none (and no garbage collection). See Note [Cap and pages] in caching.c.
 *
 * Not thread-safe: an instance belongs to one thread, like every strategy.
 */
#ifndef AB_CACHING_H
#define AB_CACHING_H

#include <stdint.h>

#include "strategies/strategy.h"

extern const ab_strategy_ops_t ab_caching_ops;

/* A `caching` instance (conf as -c gives it) whose segments of 10 MiB or more are rounded up to
 * round_large bytes (a multiple of 512) where PyTorch rounds them to 2 MiB (kRoundLarge): a
 * copy of PyTorch's allocator that changed that constant, as STAlloc's did (planned.c). */
ab_status ab_caching_create_rounded(ab_device_t *dev, const char *conf, uint64_t round_large, ab_strategy_t **out,
                                    ab_diag_t *diag);

/* torch.cuda.memory._set_allocator_settings(conf) on a live instance: one more settings parse
 * (caching_conf.h says what it resets). The memory cap and memory_stats' max_split_size keep
 * the values they got at creation, as in PyTorch. */
ab_status ab_caching_set_settings(ab_strategy_t *s, const char *conf, ab_diag_t *diag);

#endif
