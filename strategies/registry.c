/* registry.c: every strategy, one line each. The CLI, the tests, the micro-benchmarks and
 * the bench matrix all iterate this table. */
#include "strategies/strategy.h"

#include "strategies/async.h"
#include "strategies/overlap.h"
#include "strategies/pooled.h"
#include "strategies/raw.h"

static const ab_strategy_entry_t registry[] = {
    {"raw", &ab_raw_ops, NULL, "one cudaMalloc per request, one cudaFree per free: the baseline",
     "  (no options)\n", false},
    {"pooled", &ab_pooled_ops, NULL, "size classes served from preallocated chunks, never split",
     "  classes_per_doubling:N  classes between two powers of two (power of two, default 4)\n"
     "  min_class:SIZE          smallest class (multiple of 512, default 512)\n"
     "  chunk:SIZE              bytes fetched from the device per refill (default 2MiB)\n"
     "  initial_pool:SIZE       bytes allocated once at creation and carved first (default 0)\n",
     false},
    {"async", &ab_async_ops, NULL, "cudaMallocAsync on a memory pool (the stream-ordered allocator)",
     "  release_threshold:SIZE|max  bytes the pool keeps across synchronisations (default max)\n", false},
    {"overlap", &ab_overlap_ops, NULL, "broken on purpose: hands out live memory again, for tests of --verify",
     "  every:N  every Nth request may share a live allocation's memory (default 4)\n", true},
};

const ab_strategy_entry_t *ab_strategy_registry(size_t *count) {
  *count = sizeof registry / sizeof registry[0];
  return registry;
}
