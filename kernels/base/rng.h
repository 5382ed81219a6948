/* rng.h: splitmix64, the one random source of allocbench (seeded, reproducible on every
 * platform), with the draws workloads need. The random workload's sequence
 * (workloads/random.c) is defined on it. */
#ifndef AB_RNG_H
#define AB_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct ab_rng_s {
  uint64_t state;
} ab_rng_t;

static inline ab_rng_t ab_rng_seed(uint64_t seed) { return (ab_rng_t){seed}; }

static inline uint64_t ab_rng_next(ab_rng_t *r) {
  uint64_t z = (r->state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double ab_rng_uniform(ab_rng_t *r) { return (double)(ab_rng_next(r) >> 11) * 0x1.0p-53; }

/* Uniform integer in [lo, hi]. The modulo bias is below 2^-40 for ranges under 2^24. */
static inline uint64_t ab_rng_range(ab_rng_t *r, uint64_t lo, uint64_t hi) {
  return lo + ab_rng_next(r) % (hi - lo + 1);
}

/* Standard normal (Box-Muller; one of the pair is dropped to keep the state simple). */
static inline double ab_rng_normal(ab_rng_t *r) {
  double u = 1.0 - ab_rng_uniform(r), v = ab_rng_uniform(r);
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

#endif
