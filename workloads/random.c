/* random.c: RMM's random_allocations benchmark (rapidsai/rmm,
 * benchmarks/random_allocations/random_allocations.cpp) as a sequence of events.
 *
 * Size model and sequence (the default, with seed 42, is the sequence the H200's results
 * were measured on):
 *   1. A splitmix64 stream seeded with the seed; at most max_live (1000) blocks live.
 *   2. Each op draws r. If nothing is live, or fewer than max_live are and r is even, it
 *      allocates a size drawn from the distribution; otherwise it frees the live block at
 *      index (next % live), moving the last live block into its place (swap-remove).
 *   3. Sizes: uniform (default): whole KiB from min to max, ((next % 4096) + 1) KiB for the
 *      defaults 1KiB..4MiB, as RMM's benchmark draws its max_size; lognormal: median and
 *      sigma, clamped to [min, max], rounded up to whole KiB; fixed: always max.
 *   4. A STEP every step_ops ops, so the timeline has points; with streams > 1 each
 *      allocation draws its stream uniformly (one more draw per allocation).
 * What is live at the end stays live; the engine frees it, untimed.
 */
#include "workloads/random.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/base/rng.h"
#include "kernels/base/units.h"

static ab_status generate(const char *args, uint64_t seed, ab_events_t *out, ab_diag_t *diag) {
  ab_kvlist_t p;
  AB_TRY(ab_kv_parse("-w random", args, '=', &p, diag));
  uint64_t ops = 200000, max_live = 1000, min = AB_KiB, max = 4096 * AB_KiB, median = 64 * AB_KiB, step_ops = 1000,
           streams = 1;
  double sigma = 1.5;
  int dist = 0;
  static const char *const dists[] = {"uniform", "lognormal", "fixed", NULL};
  AB_TRY(ab_kv_get_u64(&p, "ops", 1, 1ULL << 32, &ops, diag));
  AB_TRY(ab_kv_get_u64(&p, "max_live", 1, 1ULL << 24, &max_live, diag));
  AB_TRY(ab_kv_get_choice(&p, "dist", dists, &dist, diag));
  AB_TRY(ab_kv_get_size(&p, "min", &min, diag));
  AB_TRY(ab_kv_get_size(&p, "max", &max, diag));
  AB_TRY(ab_kv_get_size(&p, "median", &median, diag));
  AB_TRY(ab_kv_get_double(&p, "sigma", 0, 10, &sigma, diag));
  AB_TRY(ab_kv_get_u64(&p, "step_ops", 1, UINT64_MAX, &step_ops, diag));
  AB_TRY(ab_kv_get_u64(&p, "streams", 1, 16, &streams, diag));
  AB_TRY(ab_kv_finish(&p, "ops, max_live, dist, min, max, median, sigma, step_ops, streams", diag));
  if (min == 0 || min > max || max > (1ULL << 40))
    return ab_kv_errorf(&p, ab_kv_get(&p, "min"), diag, "need 0 < min <= max <= 1TiB");
  /* The live bytes must not wrap (transformer.h, Note [Sizes that fit in 64 bits]). */
  if ((double)max_live * (double)max > 0x1p62)
    return ab_kv_errorf(&p, ab_kv_get(&p, "max_live") ? ab_kv_get(&p, "max_live") : ab_kv_get(&p, "max"), diag,
                        "max_live x max would hold %.3g bytes live, more than 2^62", (double)max_live * (double)max);
  uint64_t lo = (min + AB_KiB - 1) / AB_KiB, hi = max / AB_KiB > lo ? max / AB_KiB : lo;

  uint32_t *live = malloc(max_live * sizeof *live);
  if (live == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  ab_rng_t rng = ab_rng_seed(seed);
  size_t nlive = 0;
  for (uint64_t op = 0; op < ops && !out->failed; op++) { /* a failed stream stops here (events.h) */
    if (op % step_ops == 0) ab_events_step(out);
    uint64_t r = ab_rng_next(&rng);
    if (nlive == 0 || (nlive < max_live && (r & 1) == 0)) {
      uint64_t bytes;
      if (dist == 0) {
        bytes = ab_rng_range(&rng, lo, hi) * AB_KiB;
      } else if (dist == 1) {
        double v = (double)median * exp(sigma * ab_rng_normal(&rng));
        v = v < (double)min ? (double)min : v > (double)max ? (double)max : v;
        bytes = ((uint64_t)v + AB_KiB - 1) / AB_KiB * AB_KiB;
      } else {
        bytes = max;
      }
      unsigned stream = streams > 1 ? (unsigned)(ab_rng_next(&rng) % streams) : 0;
      live[nlive++] = ab_events_alloc(out, bytes, stream, AB_TAG_OTHER);
    } else {
      size_t i = (size_t)(ab_rng_next(&rng) % nlive);
      ab_events_free_id(out, live[i]);
      live[i] = live[--nlive];
    }
  }
  free(live);
  return AB_OK;
}

const ab_workload_t ab_workload_random = {
    .name = "random",
    .summary = "RMM's random_allocations: random sizes, at most 1000 live, 200 000 ops",
    .params_help = "  ops=N          operations, each an alloc or a free (default 200000)\n"
                   "  max_live=N     most blocks live at once (default 1000)\n"
                   "  dist=uniform|lognormal|fixed  size distribution (default uniform)\n"
                   "  min=SIZE       smallest size (default 1KiB)\n"
                   "  max=SIZE       largest size; the size of fixed (default 4MiB)\n"
                   "  median=SIZE    lognormal median (default 64KiB)\n"
                   "  sigma=X        lognormal sigma (default 1.5)\n"
                   "  step_ops=N     ops per timeline step (default 1000)\n"
                   "  streams=N      streams the allocations are spread over (default 1)\n",
    .quick_args = "ops=20000",
    .bench_args = "",
    .generate = generate,
    .scale = (const ab_scale_key_t[]){{"ops", 4096}, {NULL, 0}},
};
