/* sim_cost.c: the simulated card's cost model: the host time of each device call, which
 * the card adds to modeled_ns when the model is on (sim.h), and the memory the driver really
 * holds for the calls, the device's footprint (Note [Driver footprint], below).
 *
 * Host time per call on an H200, p50 (driver 580, CUDA 13.0; results/h200/micro.csv
 * measures the same calls through the strategies). Between two points
 * the time is interpolated on log(size); past the last point it grows in proportion to
 * size. va_release and synchronize were not measured: va_release is taken to cost what a
 * reservation costs, and a synchronisation of an idle device 2 us. */
#include <math.h>
#include <stdlib.h>

#include "kernels/device/sim_cost.h"
#include "kernels/device/sim_vaspace.h"

typedef struct cost_point_s {
  uint64_t bytes;
  double ns;
} cost_point_t;

#define PTS(a) a, log_##a, sizeof a / sizeof a[0]
static const cost_point_t cost_malloc[] = {{512, 43e3}, {20 << 20, 43e3}, {256 << 20, 83e3}, {1ULL << 30, 196e3}};
static const cost_point_t cost_free[] = {{512, 36e3}, {2 << 20, 36e3}, {20 << 20, 50e3}, {256 << 20, 174e3}, {1ULL << 30, 556e3}};
static const cost_point_t cost_create[] = {{2 << 20, 12e3}, {20 << 20, 14e3}, {256 << 20, 31e3}};
static const cost_point_t cost_unmap_release[] = {{2 << 20, 37e3}, {256 << 20, 158e3}};
/* log() of each point's size, computed on first use: the model is asked on every device
 * call, and one log() a call is what the interpolation needs. The values are the same
 * whoever computes them, so two threads filling a table at once write the same numbers. */
#define LOGS(a) log_##a[sizeof a / sizeof a[0]]
static double LOGS(cost_malloc), LOGS(cost_free), LOGS(cost_create), LOGS(cost_unmap_release);

/* The time between points i - 1 and i, on log(size); apart from cost_at so that its flat
 * stretches, most calls, take no registers to save. */
__attribute__((noinline)) static double cost_between(const cost_point_t *pts, double *logs, size_t n, size_t i,
                                                     uint64_t bytes) {
  if (logs[n - 1] == 0)
    for (size_t k = 0; k < n; k++) logs[k] = log((double)pts[k].bytes);
  double t = (log((double)bytes) - logs[i - 1]) / (logs[i] - logs[i - 1]);
  return pts[i - 1].ns + t * (pts[i].ns - pts[i - 1].ns);
}

static double cost_at(const cost_point_t *pts, double *logs, size_t n, uint64_t bytes) {
  if (bytes <= pts[0].bytes) return pts[0].ns;
  for (size_t i = 1; i < n; i++)
    if (bytes <= pts[i].bytes) {
      /* A flat stretch (cudaMalloc up to 20 MiB, cudaFree up to 2 MiB: most calls) costs
       * its points' time, which is what the interpolation gives there too, exactly (t * 0
       * adds nothing), without the log() it takes. */
      if (pts[i].ns == pts[i - 1].ns) return pts[i].ns;
      return cost_between(pts, logs, n, i, bytes);
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

/* Note [Driver footprint]
 * ~~~~~~~~~~~~~~~~~~~~~~~~
 * What the driver really holds for a run, beside what strategies count as reserved; the
 * device's footprint (device.h). Measured on the H200 (driver 580.159.04, CUDA 13.0) by
 * results/h200/footprint/measure_footprint.c, which logs the address of every allocation and
 * the footprint after every call on the random sequence (workloads/random.c, seed 42, at
 * most 1000 live, 200 000 ops) with sizes of 1-64 KiB, 1-4096 KiB and 1-64 MiB:
 *
 *   cudaMalloc: the fall of cudaMemGetInfo's free bytes is, after every one of the 600 000
 *   calls, exactly 2 MiB times the number of 2 MiB pages that live allocations touch. The
 *   driver packs requests of any size into its address space (a 1 MiB request lands in the
 *   tail of a 3 MiB one's last page), backs each touched page and gives a page back as soon
 *   as nothing in it is live. Peak footprint / peak requested: 1.103, 1.278, 1.030.
 *
 *   cudaMallocAsync (release threshold 0, no synchronisation): the pool is one range of
 *   addresses in which requests of every size are placed next to each other, and its reserve
 *   (cudaMemPoolAttrReservedMemCurrent, which cudaMemGetInfo's fall matched) is after every
 *   call exactly 32 MiB times the highest number of 32 MiB chunks of that range touched by
 *   live allocations so far: chunks are backed as requests touch them, and a chunk left
 *   empty is kept and remapped where the next one is needed rather than given back. Peak
 *   reserve / peak requested: 2.207 (the first chunk holds the whole run), 1.248, 1.171.
 *
 * The simulated card keeps the same rules over its own placement: a malloc'd allocation
 * counts the 2 MiB pages it touches (sim.c), a pool allocation the 32 MiB chunks of the
 * pool's range (sim_pool.c), and a mapped range its granules. cudaMalloc's addresses are the
 * sim's (best fit, top-down; from 2 MiB up, whole pages, so a large request's tail is not
 * shared), so its footprints agree in total rather than call by call. The pool's placement
 * follows the per-call logs: a request goes to the start of the free range freed or cut last
 * that holds it (a range freed moments before is split, even when a smaller hole would do;
 * what is left of a cut range is the next one tried), else past everything handed out; a
 * freed range merges with its free neighbours and, at the end of what was handed out, gives
 * it back. Best fit packed 10-12% tighter than the driver on the two larger ranges. On the
 * measured sequences the simulated footprints are 1.103, 1.285, 1.030 for cudaMalloc and
 * 2.207, 1.248, 1.190 for the pool, against 1.103, 1.278, 1.030 and 2.207, 1.248, 1.171;
 * tests/kernels/footprint_test.c holds each to the H200's footprint.csv within 5%.
 *
 * These are the pool of an idle device, and so is the model. On the bench workloads with
 * nothing running on the H200 (--no-kernels) the simulated pool holds what the driver's does
 * within 2.4%; with their kernels queued the driver's holds up to 15% more (ZeRO stage 3:
 * 1.194 against 1.045 idle), placing requests past everything handed out where the idle
 * pool reuses a range freed on the same stream moments before (results/h200/footprint/
 * busy.sh). How far the device has got decides that, and the simulated card runs no kernels. */

#define TOUCHED_LEAF 4096u

void ab_sim_touched_init(touched_t *t, uint64_t page_bytes) {
  t->shift = (unsigned)__builtin_ctzll(page_bytes);
  t->leaves = NULL;
  t->npages = ((AB_SIM_VA_END >> t->shift) + TOUCHED_LEAF - 1) / TOUCHED_LEAF * TOUCHED_LEAF;
  t->pages = 0;
}

void ab_sim_touched_free(touched_t *t) {
  if (t->leaves)
    for (size_t i = 0; i < t->npages / TOUCHED_LEAF; i++) free(t->leaves[i]);
  free(t->leaves);
  t->leaves = NULL;
}

/* Note [End pages]: live allocations never overlap, so a page strictly inside one is touched
 * by it alone; only its first and last pages can be shared. The allocations touching each end
 * page are counted, and the pages inside count without a counter: a call costs two counts
 * whatever its size, where one per page made a 1 GiB allocation 512. The counters are a
 * two-level table over the card's address space, as a page table is: a leaf of TOUCHED_LEAF
 * counters for each stretch of pages that ever held an end page, made on first use (small
 * allocations sit together at the top of the space, so a run makes a few), found from the
 * page's number with two loads, where a hash map's search and removal took a probe each
 * and a shift of the entries after it. */

/* The leaf of page pg, made (with the table) when missing; NULL on host memory, or for a
 * page past the card's space. */
__attribute__((noinline)) static uint32_t *leaf_make(touched_t *t, uint64_t pg) {
  if (pg >= t->npages) return NULL;
  if (t->leaves == NULL && (t->leaves = calloc(t->npages / TOUCHED_LEAF, sizeof *t->leaves)) == NULL) return NULL;
  uint32_t **leaf = &t->leaves[pg / TOUCHED_LEAF];
  if (*leaf == NULL) *leaf = calloc(TOUCHED_LEAF, sizeof **leaf);
  return *leaf;
}

/* The leaf of page pg, or NULL when it has none yet. */
static inline uint32_t *leaf_of(const touched_t *t, uint64_t pg) {
  return t->leaves && pg < t->npages ? t->leaves[pg / TOUCHED_LEAF] : NULL;
}

static inline ab_status end_add(touched_t *t, uint64_t pg, int64_t *delta) {
  uint32_t *leaf = leaf_of(t, pg);
  if (leaf == NULL && (leaf = leaf_make(t, pg)) == NULL) return AB_ERR_INTERNAL;
  bool added = leaf[pg % TOUCHED_LEAF]++ == 0;
  t->pages += added;
  *delta += added;
  return AB_OK;
}

/* Takes one allocation off an end page; a page end_add never counted is left alone. */
static inline void end_remove(touched_t *t, uint64_t pg, int64_t *delta) {
  uint32_t *leaf = leaf_of(t, pg);
  if (leaf == NULL || leaf[pg % TOUCHED_LEAF] == 0) return;
  bool emptied = --leaf[pg % TOUCHED_LEAF] == 0;
  t->pages -= emptied;
  *delta -= emptied;
}

ab_status ab_sim_touched_add(touched_t *t, ab_dptr_t at, uint64_t bytes, int64_t *delta_pages) {
  uint64_t first = at >> t->shift, last = (at + bytes - 1) >> t->shift;
  int64_t delta = 0;
  *delta_pages = 0;
  if (end_add(t, first, &delta) != AB_OK) return AB_ERR_INTERNAL;
  if (last != first && end_add(t, last, &delta) != AB_OK) {
    end_remove(t, first, &delta);
    return AB_ERR_INTERNAL;
  }
  uint64_t inside = last > first + 1 ? last - first - 1 : 0;
  t->pages += inside;
  *delta_pages = delta + (int64_t)inside;
  return AB_OK;
}

void ab_sim_touched_remove(touched_t *t, ab_dptr_t at, uint64_t bytes, int64_t *delta_pages) {
  uint64_t first = at >> t->shift, last = (at + bytes - 1) >> t->shift;
  int64_t delta = 0;
  end_remove(t, first, &delta);
  if (last != first) end_remove(t, last, &delta);
  uint64_t inside = last > first + 1 ? last - first - 1 : 0;
  t->pages -= inside;
  *delta_pages = delta - (int64_t)inside;
}
