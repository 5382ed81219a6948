#include "strategies/common/stats.h"

void ab_stats_reset_peaks(ab_stats_t *s) {
#define RESET_PEAK(name, doc) s->name.peak = s->name.current;
  AB_STAT_GAUGES(RESET_PEAK)
#undef RESET_PEAK
}

void ab_stats_merge(ab_stats_t *dst, const ab_stats_t *src) {
#define MERGE_GAUGE(name, doc)             \
  dst->name.current += src->name.current; \
  dst->name.peak += src->name.peak;
  AB_STAT_GAUGES(MERGE_GAUGE)
#undef MERGE_GAUGE
#define MERGE_COUNTER(name, doc) dst->name += src->name;
  AB_STAT_COUNTERS(MERGE_COUNTER)
#undef MERGE_COUNTER
}

ab_status ab_stats_check(const ab_stats_t *s, ab_diag_t *diag) {
#define CHECK_GAUGE(name, doc)                                                                                 \
  if (s->name.current < 0 || s->name.current > s->name.peak)                                                  \
    return ab_diag_set(diag, AB_ERR_INTERNAL, "stats: " #name " is %lld with a peak of %lld",                  \
                       (long long)s->name.current, (long long)s->name.peak);
  AB_STAT_GAUGES(CHECK_GAUGE)
#undef CHECK_GAUGE
  if (s->num_device_free > s->num_device_alloc)
    return ab_diag_set(diag, AB_ERR_INTERNAL, "stats: %llu device frees after %llu device allocations",
                       (unsigned long long)s->num_device_free, (unsigned long long)s->num_device_alloc);
  return AB_OK;
}
