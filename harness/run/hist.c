#include "harness/run/hist.h"

#include <string.h>

void ab_hist_reset(ab_hist_t *h) {
  memset(h, 0, sizeof *h);
  h->min = UINT64_MAX;
}

/* The smallest value that falls in bucket i. */
static uint64_t bucket_low(unsigned i) {
  if (i < AB_HIST_SUB) return i;
  unsigned e = i / AB_HIST_SUB + AB_HIST_SUB_BITS - 1, sub = i % AB_HIST_SUB;
  return ((uint64_t)AB_HIST_SUB + sub) << (e - AB_HIST_SUB_BITS);
}

uint64_t ab_hist_quantile(const ab_hist_t *h, double q) {
  if (h->count == 0) return 0;
  if (q <= 0) return h->min;
  if (q >= 1) return h->max;
  uint64_t rank = (uint64_t)(q * (double)(h->count - 1)) + 1, seen = 0;
  for (unsigned i = 0; i < AB_HIST_BUCKETS; i++) {
    seen += h->bucket[i];
    if (seen >= rank) {
      uint64_t lo = bucket_low(i), hi = i + 1 < AB_HIST_BUCKETS ? bucket_low(i + 1) - 1 : UINT64_MAX;
      uint64_t mid = lo + (hi - lo) / 2;
      return mid < h->min ? h->min : mid > h->max ? h->max : mid;
    }
  }
  return h->max;
}

void ab_hist_merge(ab_hist_t *dst, const ab_hist_t *src) {
  for (unsigned i = 0; i < AB_HIST_BUCKETS; i++) dst->bucket[i] += src->bucket[i];
  dst->count += src->count;
  dst->sum += src->sum;
  if (src->min < dst->min) dst->min = src->min;
  if (src->max > dst->max) dst->max = src->max;
}
