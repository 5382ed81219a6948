/* sim_test.c: the simulated card keeps its contract (kernels/device/sim.h). */
#include <string.h>

#include "kernels/base/units.h"
#include "kernels/device/device_open.h"
#include "kernels/device/sim.h"

#include "tests/check.h"

static ab_device_t *open_sim(const char *spec, uint64_t budget) {
  ab_device_config_t cfg = {.budget_bytes = budget, .cost_model = true};
  ab_device_t *d = NULL;
  ab_diag_t diag = {""};
  if (ab_device_open(spec, &cfg, &d, &diag) != AB_OK) fprintf(stderr, "  open %s: %s\n", spec, diag.msg);
  return d;
}

static void profiles(void) {
  ab_device_t *d = open_sim("sim:h200", 0);
  REQUIRE(d);
  CHECK_EQ(d->total_bytes, 150109880320ULL);
  uint64_t free_b, total;
  CHECK(ab_device_mem_info(d, &free_b, &total) == AB_OK);
  CHECK_EQ(free_b, 149557477376ULL); /* a fresh process on the H200 */
  CHECK(ab_device_close(d, NULL) == AB_OK);
  d = open_sim("sim:40GB", 0);
  REQUIRE(d);
  CHECK_EQ(d->total_bytes, 40000000000ULL);
  ab_device_close(d, NULL);
  ab_diag_t diag;
  ab_device_config_t cfg = {0};
  CHECK(ab_device_open("sim:h300", &cfg, &d, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "unknown simulated card 'h300'");
  CHECK_STR_CONTAINS(diag.msg, "a100-40gb");
  CHECK(ab_device_open("tpu", &cfg, &d, &diag) == AB_ERR_INVALID);
  cfg.budget_bytes = 200ULL << 30;
  CHECK(ab_device_open("sim:h200", &cfg, &d, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "--budget");
}

static void malloc_free_addresses(void) {
  ab_device_t *d = open_sim("sim", 0);
  REQUIRE(d);
  ab_dptr_t a, b, c;
  REQUIRE(ab_device_malloc(d, 1000, &a) == AB_OK);
  REQUIRE(ab_device_malloc(d, 1000, &b) == AB_OK);
  REQUIRE(ab_device_malloc(d, 3 << 20, &c) == AB_OK);
  CHECK(a % 256 == 0 && b % 256 == 0);
  CHECK(c % (2 << 20) == 0);
  CHECK_MSG(b < a && c < b, "addresses are handed out top-down: 0x%llx 0x%llx 0x%llx", (unsigned long long)a,
            (unsigned long long)b, (unsigned long long)c);
  CHECK(b + 1024 <= a); /* no overlap */
  CHECK_EQ(d->held_bytes, 2000 + (3 << 20));
  CHECK(ab_device_free(d, b, 1000) == AB_OK);
  /* A freed hole is reused by a request it fits best. */
  ab_dptr_t b2;
  REQUIRE(ab_device_malloc(d, 900, &b2) == AB_OK);
  CHECK_EQ(b2, b);
  CHECK(ab_device_free(d, b2, 900) == AB_OK);
  CHECK(ab_device_free(d, a, 1000) == AB_OK);
  CHECK(ab_device_free(d, c, 3 << 20) == AB_OK);
  CHECK_EQ(d->held_bytes, 0);
  CHECK_EQ(d->held_peak, 2000 + (3 << 20));
  CHECK_EQ(d->calls.malloc, 4);
  CHECK(ab_device_close(d, NULL) == AB_OK);
}

static void misuse_is_caught(void) {
  ab_device_t *d = open_sim("sim", 0);
  REQUIRE(d);
  ab_dptr_t a;
  REQUIRE(ab_device_malloc(d, 4096, &a) == AB_OK);
  CHECK(ab_device_free(d, a, 4000) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d->diag.msg, "allocated with 4096");
  CHECK(ab_device_free(d, a + 512, 4096) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d->diag.msg, "not a live allocation");
  CHECK(ab_device_free(d, a, 4096) == AB_OK);
  CHECK(ab_device_free(d, a, 4096) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d->diag.msg, "double free");
  CHECK(ab_device_malloc(d, 0, &a) == AB_ERR_INVALID);
  /* A leak is reported at close. */
  REQUIRE(ab_device_malloc(d, 1 << 20, &a) == AB_OK);
  ab_diag_t diag = {""};
  CHECK(ab_device_close(d, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "leak at teardown: 1 live allocations");
}

static void capacity_and_budget(void) {
  ab_device_t *d = open_sim("sim:2GiB", 0);
  REQUIRE(d);
  uint64_t free_b, total;
  REQUIRE(ab_device_mem_info(d, &free_b, &total) == AB_OK);
  CHECK_EQ(free_b, (2ULL << 30) - AB_SIM_CONTEXT_BYTES);
  ab_dptr_t a, b;
  CHECK(ab_device_malloc(d, free_b + 1, &a) == AB_ERR_OOM);
  REQUIRE(ab_device_malloc(d, free_b, &a) == AB_OK);
  CHECK(ab_device_malloc(d, 512, &b) == AB_ERR_OOM);
  CHECK(ab_device_free(d, a, free_b) == AB_OK);
  CHECK(ab_device_close(d, NULL) == AB_OK);

  d = open_sim("sim:h200", 100 << 20);
  REQUIRE(d);
  REQUIRE(ab_device_mem_info(d, &free_b, &total) == AB_OK);
  CHECK_EQ(free_b, 100 << 20);
  REQUIRE(ab_device_malloc(d, 60 << 20, &a) == AB_OK);
  uint64_t calls = d->calls.malloc;
  CHECK(ab_device_malloc(d, 50 << 20, &b) == AB_ERR_OOM);
  CHECK_EQ(d->calls.malloc, calls); /* refused before the driver */
  REQUIRE(ab_device_malloc(d, 40 << 20, &b) == AB_OK);
  CHECK(ab_device_free(d, a, 60 << 20) == AB_OK);
  CHECK(ab_device_free(d, b, 40 << 20) == AB_OK);
  CHECK_EQ(d->held_peak, 100 << 20);
  CHECK(ab_device_close(d, NULL) == AB_OK);
}

static void virtual_memory(void) {
  ab_device_t *d = open_sim("sim", 64 << 20);
  REQUIRE(d);
  ab_dptr_t base;
  CHECK(ab_device_va_reserve(d, 3 << 20, &base) == AB_ERR_INVALID); /* not whole granules */
  REQUIRE(ab_device_va_reserve(d, 1ULL << 36, &base) == AB_OK);      /* 64 GiB of addresses, no memory */
  CHECK(base % (2 << 20) == 0);
  CHECK_EQ(d->held_bytes, 0);
  const uint64_t G = AB_GRANULE_BYTES;
  REQUIRE(ab_device_map(d, base, 2 * G) == AB_OK);
  REQUIRE(ab_device_map(d, base + 2 * G, 10 * G) == AB_OK);
  CHECK_EQ(d->held_bytes, 12 * G);
  CHECK(ab_device_map(d, base + G, G) == AB_ERR_INVALID); /* already mapped */
  CHECK(ab_device_map(d, base + 12 * G + 4096, G) == AB_ERR_INVALID); /* unaligned */
  CHECK(ab_device_map(d, base + 20 * G, 21 * G) == AB_ERR_OOM);       /* over the 64 MiB budget */
  CHECK(ab_device_unmap(d, base + 2 * G, 5 * G) == AB_ERR_INVALID);   /* half of one map call */
  CHECK_STR_CONTAINS(d->diag.msg, "whole mapped ranges");
  CHECK(ab_device_va_release(d, base, 1ULL << 36) == AB_ERR_INVALID); /* still mapped */
  CHECK(ab_device_unmap(d, base, 12 * G) == AB_OK);                   /* both map calls at once */
  CHECK_EQ(d->held_bytes, 0);
  CHECK(ab_device_unmap(d, base, 2 * G) == AB_ERR_INVALID);
  CHECK(ab_device_map(d, (ab_dptr_t)1 << 40, G) == AB_ERR_INVALID); /* outside any reservation */
  CHECK(ab_device_va_release(d, base, 1ULL << 36) == AB_OK);
  /* Address space runs out as memory does: an OOM, as the driver's, not an error. */
  ab_dptr_t most;
  REQUIRE(ab_device_va_reserve(d, 100ULL << 40, &most) == AB_OK);
  CHECK(ab_device_va_reserve(d, 100ULL << 40, &base) == AB_ERR_OOM);
  CHECK_STR_CONTAINS(d->diag.msg, "address space");
  CHECK(ab_device_va_release(d, most, 100ULL << 40) == AB_OK);
  /* A range past the whole address space is refused as such, before its map of granules
   * (256 GiB of host memory for 2^62 bytes) is asked for. */
  CHECK(ab_device_va_reserve(d, 1ULL << 62, &base) == AB_ERR_OOM);
  CHECK_STR_CONTAINS(d->diag.msg, "address space");
  CHECK(ab_device_close(d, NULL) == AB_OK);
}

/* The pool backs its range in chunks of 32 MiB (sim_cost.c, Note [Driver footprint]). */
#define POOL_CHUNK (32ULL << 20)

static void stream_ordered_pool(void) {
  ab_device_t *d = open_sim("sim", 2 * POOL_CHUNK);
  REQUIRE(d);
  REQUIRE(ab_device_pool_configure(d, 0) == AB_OK); /* CUDA's default threshold */
  ab_dptr_t small[8], big;
  for (int i = 0; i < 8; i++) REQUIRE(ab_device_malloc_async(d, 100 * 1024, 0, &small[i]) == AB_OK);
  uint64_t cur, peak;
  REQUIRE(ab_device_pool_reserved(d, &cur, &peak) == AB_OK);
  CHECK_EQ(cur, POOL_CHUNK); /* eight small ones share one chunk */
  REQUIRE(ab_device_malloc_async(d, 5 << 20, 1, &big) == AB_OK);
  REQUIRE(ab_device_pool_reserved(d, &cur, &peak) == AB_OK);
  CHECK_EQ(cur, POOL_CHUNK); /* and 5 MiB is placed beside them, whatever its size */
  CHECK_EQ(d->held_bytes, cur);
  CHECK_EQ(d->footprint_bytes, cur);
  CHECK(ab_device_free_async(d, big, 5 << 20, 1) == AB_OK);
  CHECK(ab_device_free_async(d, big, 5 << 20, 1) == AB_ERR_INVALID);
  /* 40 MiB reaches into a second chunk, on another stream. */
  REQUIRE(ab_device_malloc_async(d, 40 << 20, 2, &big) == AB_OK);
  REQUIRE(ab_device_pool_reserved(d, &cur, &peak) == AB_OK);
  CHECK_EQ(cur, 2 * POOL_CHUNK);
  CHECK(ab_device_malloc_async(d, 64 << 20, 0, &small[0]) == AB_ERR_OOM); /* the budget holds */
  CHECK(ab_device_free_async(d, big, 40 << 20, 2) == AB_OK);
  for (int i = 1; i < 8; i++) CHECK(ab_device_free_async(d, small[i], 100 * 1024, 0) == AB_OK);
  REQUIRE(ab_device_pool_reserved(d, &cur, &peak) == AB_OK);
  CHECK_EQ(cur, 2 * POOL_CHUNK); /* kept until a synchronisation */
  CHECK(ab_device_synchronize(d) == AB_OK);
  REQUIRE(ab_device_pool_reserved(d, &cur, &peak) == AB_OK);
  CHECK_EQ(cur, POOL_CHUNK); /* small[0] still holds its chunk */
  CHECK_EQ(peak, 2 * POOL_CHUNK);
  CHECK(ab_device_free_async(d, small[0], 100 * 1024, 0) == AB_OK);
  CHECK(ab_device_pool_trim(d, 0) == AB_OK);
  CHECK_EQ(d->held_bytes, 0);
  CHECK(ab_device_close(d, NULL) == AB_OK);

  /* With the threshold at max, a synchronisation keeps everything. */
  d = open_sim("sim", 0);
  REQUIRE(d);
  REQUIRE(ab_device_pool_configure(d, UINT64_MAX) == AB_OK);
  REQUIRE(ab_device_malloc_async(d, 9 << 20, 0, &big) == AB_OK);
  CHECK(ab_device_free_async(d, big, 9 << 20, 0) == AB_OK);
  CHECK(ab_device_synchronize(d) == AB_OK);
  CHECK_EQ(d->held_bytes, POOL_CHUNK);
  CHECK(ab_device_pool_trim(d, 0) == AB_OK);
  CHECK(ab_device_close(d, NULL) == AB_OK);
}

static void fault_injection(void) {
  ab_device_config_t cfg = {.faults = {.fail_nth = 3}};
  ab_device_t *d = NULL;
  ab_diag_t diag;
  REQUIRE(ab_device_open("sim", &cfg, &d, &diag) == AB_OK);
  ab_dptr_t p[5];
  CHECK(ab_device_malloc(d, 4096, &p[0]) == AB_OK);
  CHECK(ab_device_malloc(d, 4096, &p[1]) == AB_OK);
  CHECK(ab_device_malloc(d, 4096, &p[2]) == AB_ERR_OOM);
  CHECK(ab_device_malloc(d, 4096, &p[2]) == AB_OK);
  CHECK_EQ(d->calls.failed, 1);
  for (int i = 0; i < 3; i++) CHECK(ab_device_free(d, p[i], 4096) == AB_OK);
  CHECK(ab_device_close(d, NULL) == AB_OK);

  /* A seeded rate fails about that fraction, the same calls each time. */
  int fails[2] = {0, 0};
  uint64_t pattern[2] = {0, 0};
  for (int round = 0; round < 2; round++) {
    cfg = (ab_device_config_t){.faults = {.fail_rate = 0.25, .fail_seed = 7}};
    REQUIRE(ab_device_open("sim", &cfg, &d, &diag) == AB_OK);
    for (int i = 0; i < 4000; i++) {
      ab_dptr_t q;
      ab_status st = ab_device_malloc(d, 512, &q);
      if (st == AB_OK) {
        CHECK(ab_device_free(d, q, 512) == AB_OK);
      } else {
        CHECK(st == AB_ERR_OOM);
        fails[round]++;
        if (i < 64) pattern[round] |= 1ULL << i;
      }
    }
    CHECK(ab_device_close(d, NULL) == AB_OK);
  }
  CHECK_MSG(fails[0] > 900 && fails[0] < 1100, "%d of 4000 failed at rate 0.25", fails[0]);
  CHECK_EQ(fails[0], fails[1]);
  CHECK_EQ(pattern[0], pattern[1]);
  cfg = (ab_device_config_t){.faults = {.fail_rate = 1}};
  CHECK(ab_device_open("cuda", &cfg, &d, &diag) == AB_ERR_INVALID); /* faults are for the sim */
}

static void cost_model(void) {
  ab_device_t *d = open_sim("sim", 0);
  REQUIRE(d);
  ab_dptr_t a, b;
  REQUIRE(ab_device_malloc(d, 4096, &a) == AB_OK);
  CHECK_EQ(d->modeled_ns, 43000); /* cudaMalloc p50 on the H200 */
  REQUIRE(ab_device_malloc(d, 1ULL << 30, &b) == AB_OK);
  CHECK_EQ(d->modeled_ns, 43000 + 196000);
  CHECK(ab_device_free(d, b, 1ULL << 30) == AB_OK);
  CHECK_EQ(d->modeled_ns, 43000 + 196000 + 556000);
  CHECK(ab_device_free(d, a, 4096) == AB_OK);
  ab_device_close(d, NULL);
  ab_device_config_t cfg = {0};
  ab_diag_t diag;
  REQUIRE(ab_device_open("sim", &cfg, &d, &diag) == AB_OK);
  REQUIRE(ab_device_malloc(d, 4096, &a) == AB_OK);
  CHECK_EQ(d->modeled_ns, 0); /* off unless asked for */
  CHECK(ab_device_free(d, a, 4096) == AB_OK);
  ab_device_close(d, NULL);
}

/* Freed ranges merge with their neighbours: after random allocations and frees, once all is
 * freed the address space is whole again, so the same requests get the same addresses as on
 * a fresh card, and no two live allocations ever overlap. */
static void address_space_merges(void) {
  enum { N = 4000 };
  static ab_dptr_t first[N], again[N];
  static uint64_t size[N];
  uint64_t x = 7;
  for (int i = 0; i < N; i++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    size[i] = (x >> 33) % 3 == 0 ? ((x >> 40) % 8 + 1) << 20 : (x >> 40) % 100000 + 1;
  }
  ab_device_t *d = open_sim("sim", 0);
  REQUIRE(d);
  for (int round = 0; round < 2; round++) {
    ab_dptr_t *p = round ? again : first;
    /* Allocate all, free every third, reallocate those, then free all in a scrambled order. */
    for (int i = 0; i < N; i++) REQUIRE(ab_device_malloc(d, size[i], &p[i]) == AB_OK);
    for (int i = 0; i < N; i += 3) REQUIRE(ab_device_free(d, p[i], size[i]) == AB_OK);
    for (int i = 0; i < N; i += 3) REQUIRE(ab_device_malloc(d, size[i], &p[i]) == AB_OK);
    static ab_dptr_t order[N];
    for (int i = 0; i < N; i++) order[i] = p[i];
    for (int i = 0; i < N - 1; i++)
      for (int j = i + 1; j < N && j < i + 64; j++)
        CHECK_MSG(order[i] + size[i] <= order[j] || order[j] + size[j] <= order[i], "blocks %d and %d overlap", i, j);
    for (int k = 0; k < N; k++) {
      int i = (int)(((uint64_t)k * 2654435761ULL) % N); /* a permutation, since N and the factor are coprime */
      REQUIRE(ab_device_free(d, p[i], size[i]) == AB_OK);
    }
  }
  for (int i = 0; i < N; i++) CHECK_MSG(first[i] == again[i], "allocation %d: 0x%llx then 0x%llx", i,
                                        (unsigned long long)first[i], (unsigned long long)again[i]);
  CHECK(ab_device_close(d, NULL) == AB_OK);
}

/* ---- best fit (Note [Size bins], kernels/device/sim_vaspace.c) ------------------------- */

/* The free ranges of a plain list, by address: the rule the card's requests below 2 MiB and
 * its reservations follow, written out without bins or trees. */
typedef struct plain_s {
  ab_dptr_t base[4096];
  uint64_t bytes[4096];
  int n;
} plain_t;

/* The smallest range holding `bytes` aligned to `align` at its top (the lowest of equal
 * ones), carved there; 0 when none does. */
static ab_dptr_t plain_alloc(plain_t *f, uint64_t bytes, uint64_t align) {
  int best = -1;
  for (int i = 0; i < f->n; i++) {
    if (f->bytes[i] < bytes || ((f->base[i] + f->bytes[i] - bytes) & ~(align - 1)) < f->base[i]) continue;
    if (best < 0 || f->bytes[i] < f->bytes[best]) best = i; /* by address: the first of equals */
  }
  if (best < 0) return 0;
  ab_dptr_t top = f->base[best] + f->bytes[best], at = (top - bytes) & ~(align - 1);
  f->bytes[best] = at - f->base[best];
  if (at + bytes < top) { /* the piece above, after it */
    memmove(&f->base[best + 2], &f->base[best + 1], (size_t)(f->n - best - 1) * sizeof *f->base);
    memmove(&f->bytes[best + 2], &f->bytes[best + 1], (size_t)(f->n - best - 1) * sizeof *f->bytes);
    f->base[best + 1] = at + bytes;
    f->bytes[best + 1] = top - at - bytes;
    f->n++;
  }
  if (f->bytes[best] == 0) {
    memmove(&f->base[best], &f->base[best + 1], (size_t)(f->n - best - 1) * sizeof *f->base);
    memmove(&f->bytes[best], &f->bytes[best + 1], (size_t)(f->n - best - 1) * sizeof *f->bytes);
    f->n--;
  }
  return at;
}

static void plain_free(plain_t *f, ab_dptr_t at, uint64_t bytes) {
  int i = 0;
  while (i < f->n && f->base[i] < at) i++;
  memmove(&f->base[i + 1], &f->base[i], (size_t)(f->n - i) * sizeof *f->base);
  memmove(&f->bytes[i + 1], &f->bytes[i], (size_t)(f->n - i) * sizeof *f->bytes);
  f->base[i] = at;
  f->bytes[i] = bytes;
  f->n++;
  for (int k = i > 0 ? i - 1 : 0; k + 1 < f->n && k <= i;) /* merge with the neighbours */
    if (f->base[k] + f->bytes[k] == f->base[k + 1]) {
      f->bytes[k] += f->bytes[k + 1];
      memmove(&f->base[k + 1], &f->base[k + 2], (size_t)(f->n - k - 2) * sizeof *f->base);
      memmove(&f->bytes[k + 1], &f->bytes[k + 2], (size_t)(f->n - k - 2) * sizeof *f->bytes);
      f->n--;
      i--;
    } else {
      k++;
    }
}

/* Small requests (bins, and the ranges past them once merges grow a hole past 2 MiB) and
 * reservations aligned to 2 MiB land where the plain list says, call after call. */
static void best_fit_matches_a_plain_list(void) {
  enum { LIVE = 600, OPS = 30000 };
  static plain_t f;
  static ab_dptr_t at[LIVE];
  static uint64_t size[LIVE];
  static bool resv[LIVE];
  ab_device_t *d = open_sim("sim:h200", 0);
  REQUIRE(d);
  /* The card's space starts as one range; its top is where the first request lands. Its
   * base does not matter: no range grows as large, so it is never the best fit. */
  ab_dptr_t first;
  REQUIRE(ab_device_malloc(d, 512, &first) == AB_OK);
  f.n = 1;
  f.base[0] = 0;
  f.bytes[0] = first + 512;
  CHECK_EQ(plain_alloc(&f, 512, 512), first);
  uint64_t x = 11;
  int mismatches = 0, holes_past_bins = 0;
  for (int op = 0; op < OPS && mismatches < 5; op++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    int i = (int)((x >> 20) % LIVE);
    if (at[i]) {
      CHECK(resv[i] ? ab_device_va_release(d, at[i], size[i]) == AB_OK : ab_device_free(d, at[i], size[i]) == AB_OK);
      plain_free(&f, at[i], (size[i] + 511) & ~511ULL);
      at[i] = 0;
      continue;
    }
    unsigned kind = (unsigned)(x >> 40) % 16;
    resv[i] = kind == 0;
    size[i] = resv[i] ? ((x >> 44) % 3 + 1) * AB_GRANULE_BYTES
              : kind < 10 ? (x >> 33) % 16384 + 1
                          : (x >> 33) % (AB_GRANULE_BYTES - 512) + 1; /* rounds below 2 MiB */
    ab_dptr_t want = plain_alloc(&f, (size[i] + 511) & ~511ULL, resv[i] ? AB_GRANULE_BYTES : 512);
    REQUIRE(resv[i] ? ab_device_va_reserve(d, size[i], &at[i]) == AB_OK : ab_device_malloc(d, size[i], &at[i]) == AB_OK);
    if (at[i] != want) mismatches++;
    CHECK_MSG(at[i] == want, "op %d: %s of %llu bytes at 0x%llx; best fit is 0x%llx", op, resv[i] ? "reservation" : "malloc",
              (unsigned long long)size[i], (unsigned long long)at[i], (unsigned long long)want);
    for (int k = 1; k < f.n; k++) holes_past_bins += f.bytes[k] >= AB_GRANULE_BYTES && f.base[k] + f.bytes[k] < first;
  }
  CHECK_MSG(holes_past_bins > 1000, "the sequence left few holes of 2 MiB and more (%d)", holes_past_bins);
  for (int i = 0; i < LIVE; i++)
    if (at[i]) CHECK(resv[i] ? ab_device_va_release(d, at[i], size[i]) == AB_OK : ab_device_free(d, at[i], size[i]) == AB_OK);
  CHECK(ab_device_free(d, first, 512) == AB_OK);
  CHECK(ab_device_close(d, NULL) == AB_OK);
}

/* ---- the driver's placement (Note [Driver placement], kernels/device/sim_place.c) ------ */

/* Replays the cudaMalloc and cudaFree calls of one sequence of the H200 probe
 * (tests/data/h200-placement/probe.csv: seq,op,index,bytes,address,offset in MiB from the
 * sequence's first) on a fresh simulated card and checks that each allocation from the
 * sequence's `anchor`-th on lands at the H200's offset from the anchor's. The allocations
 * before the anchor are left out: the H200 put them in holes the CUDA context had left,
 * which the card does not model. */
static void placement_sequence(const char *seq, int anchor) {
  FILE *f = fopen(AB_TEST_DATA_DIR "/h200-placement/probe.csv", "r");
  REQUIRE(f);
  ab_device_t *d = open_sim("sim:h200", 0);
  REQUIRE(d);
  enum { MAX = 128 };
  ab_dptr_t got[MAX] = {0};
  uint64_t bytes[MAX] = {0};
  long long want[MAX] = {0};
  ab_dptr_t base = 0;
  long long want_base = 0;
  int checked = 0;
  char line[256], name[32], op[16];
  while (fgets(line, sizeof line, f)) {
    int i;
    unsigned long long size, addr;
    long long off;
    REQUIRE(sscanf(line, "%31[^,],%15[^,],%d,%llu,%llx,%lld", name, op, &i, &size, &addr, &off) == 6);
    if (strcmp(name, seq) != 0) continue;
    REQUIRE(i >= 0 && i < MAX);
    if (i < anchor) continue;
    if (strcmp(op, "free") == 0) {
      CHECK(ab_device_free(d, got[i], bytes[i]) == AB_OK);
      got[i] = 0;
      continue;
    }
    bytes[i] = size;
    want[i] = (long long)(addr >> 20);
    REQUIRE(ab_device_malloc(d, size, &got[i]) == AB_OK);
    if (i == anchor) base = got[i], want_base = want[i];
    long long have = ((long long)(got[i] >> 20)) - (long long)(base >> 20);
    CHECK_MSG(have == want[i] - want_base, "%s: allocation %d of %llu MiB at %+lld MiB from allocation %d; the H200 put it at %+lld",
              seq, i, size >> 20, have, anchor, want[i] - want_base);
    checked++;
  }
  fclose(f);
  CHECK_MSG(checked > 10, "%s: only %d allocations compared", seq, checked);
  for (int i = 0; i < MAX; i++) /* what the sequence left live */
    if (got[i]) CHECK(ab_device_free(d, got[i], bytes[i]) == AB_OK);
  CHECK(ab_device_close(d, NULL) == AB_OK);
}

static void placement_growth(void) { placement_sequence("growth", 4); }
static void placement_tails(void) { placement_sequence("tail", 7); }
static void placement_holes(void) { placement_sequence("holes", 0); }
static void placement_churn(void) { placement_sequence("churn", 0); }

static const ab_test_t tests[] = {
    {"profiles", profiles},
    {"malloc_free_addresses", malloc_free_addresses},
    {"misuse_is_caught", misuse_is_caught},
    {"capacity_and_budget", capacity_and_budget},
    {"virtual_memory", virtual_memory},
    {"stream_ordered_pool", stream_ordered_pool},
    {"fault_injection", fault_injection},
    {"cost_model", cost_model},
    {"address_space_merges", address_space_merges},
    {"best_fit_matches_a_plain_list", best_fit_matches_a_plain_list},
    {"placement_growth", placement_growth},
    {"placement_tails", placement_tails},
    {"placement_holes", placement_holes},
    {"placement_churn", placement_churn},
};
AB_TEST_MAIN(tests)
