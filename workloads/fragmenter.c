/* fragmenter.c: the smallest reproduction of a fragmentation OOM.
 *
 * The pattern, with b = block and k = pairs (defaults 32 MiB and 4):
 *   1. A transient of 2kb (256 MiB) is allocated and freed: a first step's logits, say. A
 *      caching allocator keeps the segment it got.
 *   2. k pairs of blocks of b are allocated, alternating long-lived and short-lived: weights
 *      and activations, activation checkpoints and recomputed tensors (ZeRO's account of
 *      its OOMs, peers.md §6.1). Best fit carves them all out of the cached segment.
 *   3. The short-lived blocks are freed: kb (128 MiB) is free, in k holes of b, each between
 *      two live blocks.
 *   4. A request of 2b (64 MiB) follows. The budget, (2k+1)b = 288 MiB, less the live kb
 *      leaves (k+1)b = 160 MiB, room for it; but no hole holds it.
 *   5. Everything is freed.
 * Why a splitting allocator (PyTorch's caching allocator, pytorch_caching_allocator.md
 * §2-3) cannot serve step 4:
 *   - a request is served from one free block; blocks merge only with free neighbours in
 *     the same segment, never across segments, so the k holes stay k blocks of b;
 *   - a new segment of 2b would take reserved memory to (2k+2)b, past the budget;
 *   - before giving up it frees cached memory, but only whole free segments
 *     (release_cached_blocks; release_available_cached_blocks only with max_split_size set):
 *     the one segment holds live blocks, so nothing is released, and the request fails with
 *     (k+1)b of the budget unused: oom_kind fragmentation.
 * Expandable segments serve it: the same final retry also unmaps every whole granule (20 MiB
 * in the large pool, counted from the segment's start) lying inside a free block. Each
 * 32 MiB hole holds one here (a hole of 40 MiB or more holds one wherever the grid falls),
 * so 80 MiB come back and the request maps new granules at the segment's end.
 * max_split_size_mb (the split-limited strategy) avoids it too: the cached 256 MiB block is
 * then oversize, never split for the small blocks, and released when they need room.
 * The default budget is the workload's suggested budget: `allocbench run -w fragmenter`
 * uses it when no --budget is given.
 */
#include "workloads/fragmenter.h"

#include "kernels/base/units.h"
#include "workloads/autograd.h"

#define MAX_PAIRS 1024

static ab_status generate(const char *text, uint64_t seed, ab_events_t *out, ab_diag_t *diag) {
  (void)seed; /* nothing is drawn: the pattern is the point */
  ab_kvlist_t p;
  AB_TRY(ab_kv_parse("-w fragmenter", text, '=', &p, diag));
  uint64_t block = 32 * AB_MiB, pairs = 4, steps = 1, budget = 0;
  AB_TRY(ab_kv_get_size(&p, "block", &block, diag));
  AB_TRY(ab_kv_get_u64(&p, "pairs", 1, MAX_PAIRS, &pairs, diag));
  AB_TRY(ab_kv_get_u64(&p, "steps", 1, 1 << 20, &steps, diag));
  AB_TRY(ab_kv_get_size(&p, "budget", &budget, diag));
  AB_TRY(ab_kv_finish(&p, "block, pairs, steps, budget", diag));
  if (block == 0 || block > (1ULL << 40))
    return ab_kv_errorf(&p, ab_kv_get(&p, "block"), diag, "need 0 < block <= 1TiB");
  out->suggested_budget = budget ? budget : (2 * pairs + 1) * block;

  ab_tape_t t;
  ab_tape_init(&t, out, 0);
  uint32_t live[2 * MAX_PAIRS];
  for (uint64_t s = 0; s < steps && !out->failed; s++) { /* a failed stream stops here (events.h) */
    ab_events_step(out);
    ab_tape_drop(&t, ab_tape_new(&t, 2 * pairs * block, AB_TAG_TEMP));
    for (uint64_t i = 0; i < 2 * pairs; i++) {
      live[i] = ab_tape_new(&t, block, i % 2 ? AB_TAG_TEMP : AB_TAG_ACT);
      if (i % 2) ab_tape_move(&t, AB_K_COPY, live[i - 1], live[i], block, 0);
    }
    for (uint64_t i = 1; i < 2 * pairs; i += 2) ab_tape_drop(&t, live[i]);
    uint32_t big = ab_tape_new(&t, 2 * block, AB_TAG_ACT);
    ab_tape_move(&t, AB_K_COPY, live[0], big, block, 0);
    ab_tape_drop(&t, big);
    for (uint64_t i = 0; i < 2 * pairs; i += 2) ab_tape_drop(&t, live[i]);
  }
  ab_tape_free(&t);
  return AB_OK;
}

const ab_workload_t ab_workload_fragmenter = {
    .name = "fragmenter",
    .summary = "the smallest fragmentation OOM: free holes between live blocks, then a larger request",
    .params_help = "  block=SIZE     the small blocks; the holes (default 32MiB)\n"
                   "  pairs=N        long/short pairs carved from one freed transient (default 4)\n"
                   "  steps=N        times the pattern repeats (default 1)\n"
                   "  budget=SIZE    the budget it is meant for, used by `run` when no --budget is given\n"
                   "                 (default (2 pairs + 1) blocks: 288MiB)\n",
    .bench_args = "",
    .generate = generate,
    .scale = (const ab_scale_key_t[]){{"steps", 1}, {"pairs", 1}, {NULL, 0}},
};
