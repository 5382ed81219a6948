/* hist.h: latency histograms with bounded relative error and no allocation.
 *
 * Log-linear buckets: each power of two is split into 32 buckets, so a quantile is known to
 * within 1/32 (about 3%) of its value, over the whole range of uint64_t nanoseconds. Adding
 * a sample is a few instructions, cheap enough for the replay loop. Count, sum, min and max
 * are exact over the values added; the replay adds a sample of its calls, each counted for the
 * calls it stands for (Note [Timing one call in N], engine.c).
 */
#ifndef AB_HIST_H
#define AB_HIST_H

#include <stdint.h>

#include "kernels/base/units.h"

#define AB_HIST_SUB_BITS 5
#define AB_HIST_SUB (1u << AB_HIST_SUB_BITS)
#define AB_HIST_BUCKETS ((64 - AB_HIST_SUB_BITS + 1) * AB_HIST_SUB)

typedef struct ab_hist_s {
  uint64_t count, sum, min, max;
  uint64_t bucket[AB_HIST_BUCKETS];
} ab_hist_t;

void ab_hist_reset(ab_hist_t *h);

static inline unsigned ab_hist_index(uint64_t v) {
  if (v < AB_HIST_SUB) return (unsigned)v;
  unsigned e = ab_log2_floor(v); /* e >= AB_HIST_SUB_BITS */
  unsigned sub = (unsigned)(v >> (e - AB_HIST_SUB_BITS)) & (AB_HIST_SUB - 1);
  return (e - AB_HIST_SUB_BITS + 1) * AB_HIST_SUB + sub;
}

static inline void ab_hist_add(ab_hist_t *h, uint64_t v) {
  h->bucket[ab_hist_index(v)]++;
  h->count++;
  h->sum += v;
  if (v < h->min) h->min = v;
  if (v > h->max) h->max = v;
}

/* v counted n times: a sampled value that stands for n calls (Note [Timing one call in N],
 * engine.c). */
static inline void ab_hist_add_n(ab_hist_t *h, uint64_t v, uint64_t n) {
  h->bucket[ab_hist_index(v)] += n;
  h->count += n;
  h->sum += v * n;
  if (v < h->min) h->min = v;
  if (v > h->max) h->max = v;
}

/* The value at quantile q (0..1): the midpoint of the bucket holding that rank, clamped to
 * [min, max]; 0 for an empty histogram. */
uint64_t ab_hist_quantile(const ab_hist_t *h, double q);
void ab_hist_merge(ab_hist_t *dst, const ab_hist_t *src);

#endif
