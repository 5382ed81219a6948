/* sim_cost.c: the simulated card's cost model, the host time of each device call, which
 * the card adds to modeled_ns when the model is on (sim.h).
 *
 * Host time per call on the H200, p50 (reference/gpu_measurements.md). Between two points
 * the time is interpolated on log(size); past the last point it grows in proportion to
 * size. va_release and synchronize were not measured: va_release is taken to cost what a
 * reservation costs, and a synchronisation of an idle device 2 us. */
#include <math.h>

#include "sim_internal.h"

typedef struct cost_point_s {
  uint64_t bytes;
  double ns;
} cost_point_t;

#define PTS(a) a, sizeof a / sizeof a[0]
static const cost_point_t cost_malloc[] = {{512, 43e3}, {20 << 20, 43e3}, {256 << 20, 83e3}, {1ULL << 30, 196e3}};
static const cost_point_t cost_free[] = {{512, 36e3}, {2 << 20, 36e3}, {20 << 20, 50e3}, {256 << 20, 174e3}, {1ULL << 30, 556e3}};
static const cost_point_t cost_create[] = {{2 << 20, 12e3}, {20 << 20, 14e3}, {256 << 20, 31e3}};
static const cost_point_t cost_unmap_release[] = {{2 << 20, 37e3}, {256 << 20, 158e3}};
static double cost_at(const cost_point_t *pts, size_t n, uint64_t bytes) {
  if (bytes <= pts[0].bytes) return pts[0].ns;
  for (size_t i = 1; i < n; i++)
    if (bytes <= pts[i].bytes) {
      double t = (log((double)bytes) - log((double)pts[i - 1].bytes)) /
                 (log((double)pts[i].bytes) - log((double)pts[i - 1].bytes));
      return pts[i - 1].ns + t * (pts[i].ns - pts[i - 1].ns);
    }
  return pts[n - 1].ns * (double)bytes / (double)pts[n - 1].bytes;
}

double ab_sim_cost_ns(ab_sim_call_t call, uint64_t bytes) {
  switch (call) {
    case AB_SIM_CALL_MALLOC: return cost_at(PTS(cost_malloc), bytes);
    case AB_SIM_CALL_FREE: return cost_at(PTS(cost_free), bytes);
    case AB_SIM_CALL_CREATE: return cost_at(PTS(cost_create), bytes);
    case AB_SIM_CALL_MAP: return 1e3; /* any size */
    case AB_SIM_CALL_SET_ACCESS: return 54e3; /* 51-57 us */
    case AB_SIM_CALL_UNMAP_RELEASE: return cost_at(PTS(cost_unmap_release), bytes);
    case AB_SIM_CALL_VA_RESERVE:
    case AB_SIM_CALL_VA_RELEASE: return 15e3;
    case AB_SIM_CALL_MALLOC_ASYNC: return 520; /* pool hit, 0.50-0.54 us */
    case AB_SIM_CALL_FREE_ASYNC: return 650; /* 0.62-0.69 us */
    case AB_SIM_CALL_SYNC: return 2e3;
  }
  return 0;
}
