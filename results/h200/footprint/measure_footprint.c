/* measure_footprint.c: what the driver really holds for cudaMalloc and for cudaMallocAsync's
 * pool, on the random sequence of workloads/random.c and on probes of single sizes. The
 * simulated card's model of both (sim_cost.c, Note [Driver footprint]) is fitted to what
 * this prints; footprint.csv holds its figures and tests/kernels/footprint_test.c the model to them.
 *
 * Build and run (run.sh): nvcc -O2 -I../../.. measure_footprint.c -o measure -lcuda
 *   ./measure OUTDIR      writes OUTDIR/footprint.csv, OUTDIR/probe_*.csv, OUTDIR/ops_*.csv
 *
 * Footprint of cudaMalloc: the fall of cudaMemGetInfo's free bytes since the start (nothing
 * else runs in the process). Footprint of the pool: cudaMemPoolAttrReservedMemCurrent of a
 * pool made as cuda_device.c makes it, release threshold 0; its cudaMemGetInfo fall is
 * logged beside it. The sequence: splitmix64 seeded with 42, at most 1000 live, 200 000 ops,
 * whole KiB uniform in [min, max], exactly as `-w random:min=..,max=..` generates it. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/base/rng.h"

#define CHECK(call)                                                                                  \
  do {                                                                                               \
    cudaError_t e_ = (call);                                                                         \
    if (e_ != cudaSuccess) {                                                                         \
      fprintf(stderr, "%s failed at %s:%d: %s\n", #call, __FILE__, __LINE__, cudaGetErrorString(e_)); \
      exit(1);                                                                                       \
    }                                                                                                \
  } while (0)

#define KiB 1024ULL
#define MiB (1024ULL * KiB)
#define OPS 200000
#define MAX_LIVE 1000

static size_t free0; /* cudaMemGetInfo free at the start */

static unsigned long long used_now(void) {
  size_t f, t;
  CHECK(cudaMemGetInfo(&f, &t));
  return (unsigned long long)(free0 - f);
}

static cudaMemPool_t make_pool(void) {
  struct cudaMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool;
  CHECK(cudaMemPoolCreate(&pool, &props));
  cuuint64_t zero = 0;
  CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &zero));
  return pool;
}

static unsigned long long pool_reserved(cudaMemPool_t pool) {
  cuuint64_t v;
  CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &v));
  return (unsigned long long)v;
}

static void *alloc(cudaMemPool_t pool, size_t bytes) {
  void *p = NULL;
  if (pool)
    CHECK(cudaMallocFromPoolAsync(&p, bytes, pool, 0));
  else
    CHECK(cudaMalloc(&p, bytes));
  return p;
}

static void release(cudaMemPool_t pool, void *p) {
  if (pool)
    CHECK(cudaFreeAsync(p, 0));
  else
    CHECK(cudaFree(p));
}

/* The footprint now: the pool's reserve, or the device's fall in free memory. */
static unsigned long long footprint(cudaMemPool_t pool) { return pool ? pool_reserved(pool) : used_now(); }

/* One replay of the random sequence; a row of footprint.csv and a log of every op. */
static void replay(FILE *summary, const char *outdir, const char *api, const char *range, unsigned long long lo_kib,
                   unsigned long long hi_kib) {
  cudaMemPool_t pool = strcmp(api, "async") == 0 ? make_pool() : NULL;
  char path[4096];
  snprintf(path, sizeof path, "%s/ops_%s_%s.csv", outdir, api, range);
  FILE *log = fopen(path, "w");
  if (log == NULL) {
    perror(path);
    exit(1);
  }
  fprintf(log, "op,bytes,addr,footprint,memgetinfo_used\n");
  void **ptr = calloc(MAX_LIVE, sizeof *ptr);
  unsigned long long *size = calloc(MAX_LIVE, sizeof *size);
  unsigned long long base = used_now(), live = 0, peak_live = 0, peak_fp = 0, peak_used = 0;
  ab_rng_t rng = ab_rng_seed(42);
  size_t n = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int op = 0; op < OPS; op++) {
    uint64_t r = ab_rng_next(&rng);
    if (n == 0 || (n < MAX_LIVE && (r & 1) == 0)) {
      unsigned long long bytes = ab_rng_range(&rng, lo_kib, hi_kib) * KiB;
      ptr[n] = alloc(pool, bytes);
      size[n] = bytes;
      live += bytes;
      if (live > peak_live) peak_live = live;
      unsigned long long fp = footprint(pool) - (pool ? 0 : base), used = used_now() - base;
      if (fp > peak_fp) peak_fp = fp;
      if (used > peak_used) peak_used = used;
      fprintf(log, "a,%llu,%llx,%llu,%llu\n", bytes, (unsigned long long)(uintptr_t)ptr[n], fp, used);
      n++;
    } else {
      size_t i = (size_t)(ab_rng_next(&rng) % n);
      release(pool, ptr[i]);
      live -= size[i];
      unsigned long long fp = footprint(pool) - (pool ? 0 : base), used = used_now() - base;
      fprintf(log, "f,%llu,%llx,%llu,%llu\n", size[i], (unsigned long long)(uintptr_t)ptr[i], fp, used);
      ptr[i] = ptr[--n];
      size[i] = size[n];
    }
  }
  CHECK(cudaDeviceSynchronize());
  clock_gettime(CLOCK_MONOTONIC, &t1);
  unsigned long long high = 0;
  if (pool) {
    cuuint64_t v;
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &v));
    high = (unsigned long long)v;
  }
  for (size_t i = 0; i < n; i++) release(pool, ptr[i]);
  CHECK(cudaDeviceSynchronize());
  if (pool) CHECK(cudaMemPoolDestroy(pool));
  fclose(log);
  free(ptr);
  free(size);
  double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  fprintf(summary, "%s,%s,%llu,%llu,%llu,%llu,%.4f,%llu,%.4f,%.1f\n", api, range, lo_kib * KiB, hi_kib * KiB, peak_live,
          peak_fp, (double)peak_fp / (double)peak_live, peak_used, (double)peak_used / (double)peak_live, s);
  fflush(summary);
  printf("%-6s %-14s peak requested %llu footprint %llu (%.3fx) memgetinfo %llu (%.3fx) pool high %llu, %.1f s, left %llu\n",
         api, range, peak_live, peak_fp, (double)peak_fp / (double)peak_live, peak_used,
         (double)peak_used / (double)peak_live, high, s, used_now());
  fflush(stdout);
}

/* Allocations of one size, one after another: the footprint after each and the addresses. */
static void probe(FILE *out, const char *api, unsigned long long bytes, int count) {
  cudaMemPool_t pool = strcmp(api, "async") == 0 ? make_pool() : NULL;
  void *p[256];
  unsigned long long base = pool ? 0 : used_now();
  for (int i = 0; i < count; i++) {
    p[i] = alloc(pool, bytes);
    fprintf(out, "%s,%llu,%d,%llx,%llu\n", api, bytes, i, (unsigned long long)(uintptr_t)p[i], footprint(pool) - base);
  }
  /* Free every other one, then all: what a partly freed page gives back. */
  for (int i = 0; i < count; i += 2) release(pool, p[i]);
  CHECK(cudaDeviceSynchronize());
  fprintf(out, "%s,%llu,half_freed,0,%llu\n", api, bytes, footprint(pool) - base);
  for (int i = 1; i < count; i += 2) release(pool, p[i]);
  CHECK(cudaDeviceSynchronize());
  fprintf(out, "%s,%llu,all_freed,0,%llu\n", api, bytes, footprint(pool) - base);
  if (pool) CHECK(cudaMemPoolDestroy(pool));
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: measure OUTDIR\n");
    return 2;
  }
  size_t t;
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(0)); /* the context first, so that it is not counted */
  CHECK(cudaMemGetInfo(&free0, &t));
  struct cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0, runtime = 0;
  CHECK(cudaDriverGetVersion(&driver));
  CHECK(cudaRuntimeGetVersion(&runtime));
  printf("%s, total %zu, free %zu, driver API %d, runtime %d\n", prop.name, t, free0, driver, runtime);

  /* What one cudaMemGetInfo costs (it is called around device calls on --device cuda). */
  struct timespec a, b;
  double ns[1000];
  for (int i = 0; i < 1000; i++) {
    clock_gettime(CLOCK_MONOTONIC, &a);
    (void)used_now();
    clock_gettime(CLOCK_MONOTONIC, &b);
    ns[i] = 1e9 * (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec);
  }
  for (int i = 1; i < 1000; i++)
    for (int j = i; j > 0 && ns[j - 1] > ns[j]; j--) {
      double x = ns[j];
      ns[j] = ns[j - 1];
      ns[j - 1] = x;
    }
  printf("cudaMemGetInfo: p50 %.0f ns, p99 %.0f ns\n", ns[500], ns[990]);

  char path[4096];
  snprintf(path, sizeof path, "%s/probe.csv", argv[1]);
  FILE *pr = fopen(path, "w");
  if (pr == NULL) {
    perror(path);
    return 1;
  }
  fprintf(pr, "api,bytes,i,addr,footprint\n");
  static const unsigned long long sizes[] = {1, 512, 513, 1 * KiB, 4 * KiB, 16 * KiB, 64 * KiB, 65 * KiB, 128 * KiB,
                                             256 * KiB, 512 * KiB, 768 * KiB, 1 * MiB, 1 * MiB + KiB, 1536 * KiB,
                                             2 * MiB - KiB, 2 * MiB, 2 * MiB + KiB, 3 * MiB, 4 * MiB, 4 * MiB + KiB,
                                             10 * MiB + KiB, 32 * MiB + KiB, 64 * MiB};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    int count = sizes[i] >= 10 * MiB ? 16 : 64;
    probe(pr, "malloc", sizes[i], count);
    probe(pr, "async", sizes[i], count);
  }
  fclose(pr);

  snprintf(path, sizeof path, "%s/footprint.csv", argv[1]);
  FILE *sum = fopen(path, "w");
  if (sum == NULL) {
    perror(path);
    return 1;
  }
  fprintf(sum, "api,range,min_bytes,max_bytes,peak_requested_bytes,peak_footprint_bytes,footprint_ratio,"
               "peak_memgetinfo_bytes,memgetinfo_ratio,seconds\n");
  static const struct {
    const char *name;
    unsigned long long lo, hi; /* KiB */
  } ranges[] = {{"1KiB-64KiB", 1, 64}, {"1KiB-4096KiB", 1, 4096}, {"1MiB-64MiB", 1024, 65536}};
  for (int r = 0; r < 3; r++) {
    replay(sum, argv[1], "malloc", ranges[r].name, ranges[r].lo, ranges[r].hi);
    replay(sum, argv[1], "async", ranges[r].name, ranges[r].lo, ranges[r].hi);
  }
  fclose(sum);
  return 0;
}
