/* kernels_test.c: the kernels against host references on small sizes, and the replay engine
 * launching them. Run with --device=cuda (the gpu label; skipped without a usable GPU) and
 * with --device=sim, where only the engine tests run and check that kernels are skipped. */
#include <math.h>

#include "kernels/base/units.h"
#include "kernels/device/device_open.h"
#include "kernels/kernels.h"
#include "kernels/pattern.h"
#include "harness/run/engine.h"
#include "strategies/registry.h"
#include "strategies/strategy.h"

#include "tests/check.h"

static bool on_cuda(void) { return strncmp(ab_test_device, "cuda", 4) == 0; }

#define NEED_GPU()                                                             \
  do {                                                                         \
    if (!on_cuda()) SKIP("runs with --device=cuda");                           \
    if (!ab_device_cuda_usable()) SKIP("no usable GPU");                       \
  } while (0)

/* A device and a kernels context for one test. */
typedef struct gpu_s {
  ab_device_t *dev;
  ab_kernels_t *kx;
} gpu_t;

static bool gpu_open(gpu_t *g) {
  ab_diag_t diag = {""};
  memset(g, 0, sizeof *g);
  if (ab_device_open(ab_test_device, NULL, &g->dev, &diag) != AB_OK)
    return ab_check_report(__FILE__, __LINE__, "ab_device_open", "%s", diag.msg);
  if (ab_kernels_open(g->dev, &g->kx, &diag) != AB_OK || g->kx == NULL) {
    ab_device_close(g->dev, NULL);
    return ab_check_report(__FILE__, __LINE__, "ab_kernels_open", "no kernels on %s: %s", g->dev->name, diag.msg);
  }
  return true;
}

static void gpu_close(gpu_t *g) {
  ab_diag_t diag = {""};
  CHECK_MSG(ab_kernels_close(g->kx, &diag) == AB_OK, "%s", diag.msg);
  CHECK_MSG(ab_device_close(g->dev, &diag) == AB_OK, "%s", diag.msg);
}

static ab_dptr_t gpu_alloc(gpu_t *g, uint64_t bytes) {
  ab_dptr_t p = 0;
  CHECK_MSG(ab_device_malloc(g->dev, bytes, &p) == AB_OK, "%s", g->dev->diag.msg);
  return p;
}

/* ---- host conversions of the 16-bit types --------------------------------------------- */

static float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Round to nearest even; the tests use no NaNs. */
static uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static float f16_to_f32(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? INFINITY : ldexpf((float)(m + 1024), e - 25);
  return h & 0x8000 ? -v : v;
}

/* Exact for the values the tests use: zero, and normal halves with at most 11 significant
 * bits; anything else is a test bug, caught by the round trip. */
static uint16_t f32_to_f16(float f) {
  if (f == 0) return 0;
  uint16_t sign = f < 0 ? 0x8000 : 0;
  if (isinf(f)) return sign | 0x7C00;
  int e;
  float m = frexpf(fabsf(f), &e); /* |f| = m 2^e, m in [0.5, 1) */
  uint16_t h = (uint16_t)(sign | (uint16_t)(e + 14) << 10 | (uint16_t)((m * 2 - 1) * 1024));
  CHECK_MSG(f16_to_f32(h) == f, "%g is not a half the tests can encode", (double)f);
  return h;
}

/* Uploads n floats to p as elements of type t. */
static void put(gpu_t *g, ab_dptr_t p, ab_dtype_t t, const float *v, size_t n) {
  void *buf = malloc(n * 4);
  for (size_t i = 0; i < n; i++) {
    if (t == AB_F32) ((float *)buf)[i] = v[i];
    if (t == AB_BF16) ((uint16_t *)buf)[i] = f32_to_bf16(v[i]);
    if (t == AB_F16) ((uint16_t *)buf)[i] = f32_to_f16(v[i]);
  }
  CHECK(ab_kernels_upload(g->kx, p, buf, n * ab_dtype_bytes(t)) == AB_OK);
  free(buf);
}

/* Downloads n elements of type t from p as floats. */
static void get(gpu_t *g, ab_dptr_t p, ab_dtype_t t, float *v, size_t n) {
  void *buf = malloc(n * 4);
  CHECK(ab_kernels_download(g->kx, buf, p, n * ab_dtype_bytes(t)) == AB_OK);
  for (size_t i = 0; i < n; i++)
    v[i] = t == AB_F32 ? ((float *)buf)[i] : t == AB_BF16 ? bf16_to_f32(((uint16_t *)buf)[i]) : f16_to_f32(((uint16_t *)buf)[i]);
  free(buf);
}

/* Half an ulp of the type, relative: what rounding one result may cost. */
static double rel_tol(ab_dtype_t t) { return t == AB_F32 ? 1e-6 : t == AB_BF16 ? 1.0 / 256 : 1.0 / 2048; }

static const char *dtype_name(ab_dtype_t t) { return t == AB_F32 ? "f32" : t == AB_BF16 ? "bf16" : "f16"; }

static void launch(gpu_t *g, const ab_kernel_t *k, ab_dptr_t b0, ab_dptr_t b1, ab_dptr_t b2, ab_dptr_t b3) {
  ab_dptr_t buf[AB_KERNEL_MAX_BUFS] = {b0, b1, b2, b3};
  CHECK_MSG(ab_kernels_launch(g->kx, k, buf, 0) == AB_OK, "%s: %s", ab_kernel_name((ab_kernel_op_t)k->op), g->dev->diag.msg);
}

/* ---- fill and check ------------------------------------------------------------------- */

static void fill_check_roundtrip(void) {
  NEED_GPU();
  gpu_t g;
  if (!gpu_open(&g)) return;
  /* An aligned allocation with a ragged tail, and an unaligned range inside another. */
  const uint64_t bytes = 3 * AB_MiB + 5;
  ab_dptr_t a = gpu_alloc(&g, bytes), b = gpu_alloc(&g, 4096);
  REQUIRE(a && b);
  REQUIRE(ab_kernels_fill(g.kx, a, bytes, 7, 0) == AB_OK);
  REQUIRE(ab_kernels_fill(g.kx, b + 3, 1001, 9, 0) == AB_OK);
  ab_pattern_fault_t f;
  REQUIRE(ab_kernels_check(g.kx, a, bytes, 7, &f) == AB_OK);
  CHECK(!f.bad);
  REQUIRE(ab_kernels_check(g.kx, b + 3, 1001, 9, &f) == AB_OK);
  CHECK(!f.bad);
  /* The device writes what the host formula says, bytes and tail included. */
  uint8_t *host = malloc(bytes);
  REQUIRE(ab_kernels_download(g.kx, host, a, bytes) == AB_OK);
  uint64_t wrong = 0;
  for (uint64_t o = 0; o < bytes; o++) wrong += host[o] != ab_pattern_byte(7, o);
  CHECK_EQ(wrong, 0);
  REQUIRE(ab_kernels_download(g.kx, host, b + 3, 1001) == AB_OK);
  for (uint64_t o = 0; o < 1001; o++) wrong += host[o] != ab_pattern_byte(9, o);
  CHECK_EQ(wrong, 0);
  free(host);
  /* Another id's pattern is found at the first byte where the two differ (ids live in the
   * high half of each word), and traced to its owner. */
  uint64_t first = 0;
  while (ab_pattern_byte(8, first) == ab_pattern_byte(7, first)) first++;
  REQUIRE(ab_kernels_check(g.kx, a, bytes, 8, &f) == AB_OK);
  CHECK(f.bad);
  CHECK_EQ(f.offset, first);
  CHECK(f.have_word);
  uint32_t id;
  uint64_t off;
  ab_pattern_decode(f.word, &id, &off);
  CHECK_EQ(id, 7);
  CHECK_EQ(off, 0);
  /* One byte changed in the tail: found at its offset, with no whole word to trace. */
  uint8_t zero = (uint8_t)~ab_pattern_byte(7, bytes - 2);
  REQUIRE(ab_kernels_upload(g.kx, a + bytes - 2, &zero, 1) == AB_OK);
  REQUIRE(ab_kernels_check(g.kx, a, bytes, 7, &f) == AB_OK);
  CHECK(f.bad);
  CHECK_EQ(f.offset, bytes - 2);
  CHECK(!f.have_word);
  ab_device_free(g.dev, a, bytes);
  ab_device_free(g.dev, b, 4096);
  gpu_close(&g);
}

static void check_names_the_overlapping_id(void) {
  NEED_GPU();
  gpu_t g;
  if (!gpu_open(&g)) return;
  ab_dptr_t a = gpu_alloc(&g, 65536);
  REQUIRE(a);
  REQUIRE(ab_kernels_fill(g.kx, a, 65536, 1, 0) == AB_OK);
  /* id 2 is handed [a + 4096, +1024) while id 1 is live, and fills it. */
  REQUIRE(ab_kernels_fill(g.kx, a + 4096, 1024, 2, 0) == AB_OK);
  ab_pattern_fault_t f;
  REQUIRE(ab_kernels_check(g.kx, a + 4096, 1024, 2, &f) == AB_OK);
  CHECK(!f.bad);
  REQUIRE(ab_kernels_check(g.kx, a, 65536, 1, &f) == AB_OK);
  CHECK(f.bad);
  uint64_t first = 4096;
  while (ab_pattern_byte(2, first - 4096) == ab_pattern_byte(1, first)) first++;
  CHECK(first < 4096 + 8);
  CHECK_EQ(f.offset, first);
  uint32_t id;
  uint64_t off;
  ab_pattern_decode(f.word, &id, &off);
  CHECK_EQ(id, 2);
  CHECK_EQ(off, 0);
  ab_device_free(g.dev, a, 65536);
  gpu_close(&g);
}

/* ---- GEMM ----------------------------------------------------------------------------- */

static void gemm_against_host(void) {
  NEED_GPU();
  gpu_t g;
  if (!gpu_open(&g)) return;
  const size_t m = 33, n = 17, k = 40;
  const ab_dtype_t pairs[][2] = {{AB_F32, AB_F32}, {AB_BF16, AB_BF16}, {AB_BF16, AB_F32}, {AB_F16, AB_F16}, {AB_F16, AB_F32}};
  float *a = malloc(m * k * 4), *b = malloc(k * n * 4), *c = malloc(m * n * 4);
  /* Small integers: exact in every type, and every sum exact in fp32. */
  for (size_t i = 0; i < m * k; i++) a[i] = (float)((int)(i * 7 % 9) - 4);
  for (size_t i = 0; i < k * n; i++) b[i] = (float)((int)(i * 5 % 7) - 3);
  ab_dptr_t da = gpu_alloc(&g, m * k * 4), db = gpu_alloc(&g, k * n * 4), dc = gpu_alloc(&g, m * n * 4);
  REQUIRE(da && db && dc);
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
    ab_dtype_t in = pairs[p][0], out = pairs[p][1];
    put(&g, da, in, a, m * k);
    put(&g, db, in, b, k * n);
    ab_kernel_t kk = {AB_K_GEMM, {(uint8_t)in, (uint8_t)out}, 3, {0, 1, 2, 0}, m, n, k};
    launch(&g, &kk, da, db, dc, 0);
    get(&g, dc, out, c, m * n);
    size_t bad = 0;
    for (size_t i = 0; i < m; i++)
      for (size_t j = 0; j < n; j++) {
        double ref = 0;
        for (size_t q = 0; q < k; q++) ref += (double)a[i * k + q] * (double)b[q * n + j];
        if (fabs(c[i * n + j] - ref) > fabs(ref) * rel_tol(out) + 1e-6) bad++;
      }
    CHECK_MSG(bad == 0, "gemm %s -> %s: %zu of %zu results wrong", dtype_name(in), dtype_name(out), bad, m * n);
  }
  /* A pair cuBLAS cannot run is refused with the reason. */
  ab_kernel_t wrong = {AB_K_GEMM, {AB_F32, AB_BF16}, 3, {0, 1, 2, 0}, m, n, k};
  ab_dptr_t buf[AB_KERNEL_MAX_BUFS] = {da, db, dc, 0};
  CHECK(ab_kernels_launch(g.kx, &wrong, buf, 0) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(g.dev->diag.msg, "f32 inputs and bf16 output");
  free(a), free(b), free(c);
  ab_device_free(g.dev, da, m * k * 4);
  ab_device_free(g.dev, db, k * n * 4);
  ab_device_free(g.dev, dc, m * n * 4);
  gpu_close(&g);
}

/* ---- elementwise ---------------------------------------------------------------------- */

#define N_ELEMS 1000

static void gelu_and_cast_against_host(void) {
  NEED_GPU();
  gpu_t g;
  if (!gpu_open(&g)) return;
  float x[N_ELEMS], y[N_ELEMS];
  /* -4 .. 4 in steps of 1/32: 8 significant bits at most, exact in every type. */
  for (int i = 0; i < N_ELEMS; i++) x[i] = (float)(i % 256 - 128) / 32;
  ab_dptr_t din = gpu_alloc(&g, N_ELEMS * 4), dout = gpu_alloc(&g, N_ELEMS * 4);
  REQUIRE(din && dout);
  for (int in = 0; in < AB_DTYPE_COUNT; in++)
    for (int out = 0; out < AB_DTYPE_COUNT; out++) {
      put(&g, din, (ab_dtype_t)in, x, N_ELEMS);
      ab_kernel_t gelu = {AB_K_GELU, {(uint8_t)in, (uint8_t)out}, 2, {0, 1, 0, 0}, 0, N_ELEMS, 0};
      launch(&g, &gelu, din, dout, 0, 0);
      get(&g, dout, (ab_dtype_t)out, y, N_ELEMS);
      size_t bad = 0;
      for (int i = 0; i < N_ELEMS; i++) {
        double ref = 0.5 * x[i] * (1 + erf(x[i] / sqrt(2.0)));
        if (fabs(y[i] - ref) > fabs(ref) * rel_tol((ab_dtype_t)out) + 1e-5) bad++;
      }
      CHECK_MSG(bad == 0, "gelu %s -> %s: %zu of %d wrong", dtype_name((ab_dtype_t)in), dtype_name((ab_dtype_t)out), bad,
                N_ELEMS);
      /* Casts of exactly representable values are exact. */
      ab_kernel_t cast = {AB_K_CAST, {(uint8_t)in, (uint8_t)out}, 2, {0, 1, 0, 0}, 0, N_ELEMS, 0};
      launch(&g, &cast, din, dout, 0, 0);
      get(&g, dout, (ab_dtype_t)out, y, N_ELEMS);
      bad = 0;
      for (int i = 0; i < N_ELEMS; i++) bad += y[i] != x[i];
      CHECK_MSG(bad == 0, "cast %s -> %s: %zu of %d wrong", dtype_name((ab_dtype_t)in), dtype_name((ab_dtype_t)out), bad,
                N_ELEMS);
    }
  /* A cast to bf16 rounds to nearest even, as the host does. */
  for (int i = 0; i < N_ELEMS; i++) x[i] = 1.0f + (float)i * 1.0e-4f;
  put(&g, din, AB_F32, x, N_ELEMS);
  ab_kernel_t cast = {AB_K_CAST, {AB_F32, AB_BF16}, 2, {0, 1, 0, 0}, 0, N_ELEMS, 0};
  launch(&g, &cast, din, dout, 0, 0);
  uint16_t h[N_ELEMS];
  REQUIRE(ab_kernels_download(g.kx, h, dout, sizeof h) == AB_OK);
  size_t bad = 0;
  for (int i = 0; i < N_ELEMS; i++) bad += h[i] != f32_to_bf16(x[i]);
  CHECK_EQ(bad, 0);
  ab_device_free(g.dev, din, N_ELEMS * 4);
  ab_device_free(g.dev, dout, N_ELEMS * 4);
  gpu_close(&g);
}

static void adam_against_host(void) {
  NEED_GPU();
  gpu_t g;
  if (!gpu_open(&g)) return;
  static float p[N_ELEMS], gr[N_ELEMS], m[N_ELEMS], v[N_ELEMS], out[N_ELEMS];
  ab_dptr_t dp = gpu_alloc(&g, N_ELEMS * 4), dg = gpu_alloc(&g, N_ELEMS * 4), dm = gpu_alloc(&g, N_ELEMS * 4),
            dv = gpu_alloc(&g, N_ELEMS * 4);
  REQUIRE(dp && dg && dm && dv);
  for (int t = 0; t < AB_DTYPE_COUNT; t++) {
    for (int i = 0; i < N_ELEMS; i++) {
      p[i] = (float)(i % 17) / 8 - 1;
      gr[i] = (float)(i % 13) / 16 - 0.375f;
      m[i] = (float)(i % 5) / 32;
      v[i] = (float)(i % 7) / 64;
    }
    put(&g, dp, AB_F32, p, N_ELEMS);
    put(&g, dg, (ab_dtype_t)t, gr, N_ELEMS);
    put(&g, dm, AB_F32, m, N_ELEMS);
    put(&g, dv, AB_F32, v, N_ELEMS);
    ab_kernel_t k = {AB_K_ADAM, {(uint8_t)t, AB_F32}, 4, {0, 1, 2, 3}, 0, N_ELEMS, 0};
    launch(&g, &k, dp, dg, dm, dv);
    size_t bad = 0;
    get(&g, dp, AB_F32, out, N_ELEMS);
    for (int i = 0; i < N_ELEMS; i++) {
      double mi = 0.9 * m[i] + 0.1 * gr[i], vi = 0.999 * v[i] + 0.001 * (double)gr[i] * gr[i];
      double ref = p[i] * (1 - 1e-3 * 1e-2) - 1e-3 * (mi / 0.1) / (sqrt(vi / 0.001) + 1e-8);
      if (fabs(out[i] - ref) > 1e-5 * fabs(ref) + 1e-6) bad++;
    }
    get(&g, dm, AB_F32, out, N_ELEMS);
    for (int i = 0; i < N_ELEMS; i++) bad += fabs(out[i] - (0.9 * m[i] + 0.1 * gr[i])) > 1e-6;
    CHECK_MSG(bad == 0, "adam with %s gradients: %zu wrong", dtype_name((ab_dtype_t)t), bad);
  }
  ab_device_free(g.dev, dp, N_ELEMS * 4);
  ab_device_free(g.dev, dg, N_ELEMS * 4);
  ab_device_free(g.dev, dm, N_ELEMS * 4);
  ab_device_free(g.dev, dv, N_ELEMS * 4);
  gpu_close(&g);
}

static void scale_check_against_host(void) {
  NEED_GPU();
  gpu_t g;
  if (!gpu_open(&g)) return;
  float x[N_ELEMS], y[N_ELEMS], flag;
  ab_dptr_t dg = gpu_alloc(&g, N_ELEMS * 4), dflag = gpu_alloc(&g, 4);
  REQUIRE(dg && dflag);
  for (int t = 0; t < AB_DTYPE_COUNT; t++)
    for (int with_inf = 0; with_inf < 2; with_inf++) {
      /* Exact in every type, and still normal once scaled by 2^-16, so unscaling is exact. */
      for (int i = 0; i < N_ELEMS; i++) x[i] = (float)((i % 64 + 64) * 4) * (i % 2 ? -1.0f : 1.0f);
      if (with_inf) x[123] = INFINITY;
      float zero = 0;
      put(&g, dg, (ab_dtype_t)t, x, N_ELEMS);
      REQUIRE(ab_kernels_upload(g.kx, dflag, &zero, 4) == AB_OK);
      ab_kernel_t k = {AB_K_SCALE_CHECK, {(uint8_t)t, AB_F32}, 2, {0, 1, 0, 0}, 0, N_ELEMS, 0};
      launch(&g, &k, dg, dflag, 0, 0);
      get(&g, dg, (ab_dtype_t)t, y, N_ELEMS);
      REQUIRE(ab_kernels_download(g.kx, &flag, dflag, 4) == AB_OK);
      size_t bad = 0;
      for (int i = 0; i < N_ELEMS; i++) bad += y[i] != x[i] / 65536;
      CHECK_MSG(bad == 0, "scale_check %s: %zu wrong", dtype_name((ab_dtype_t)t), bad);
      CHECK_MSG(flag == (with_inf ? 1.0f : 0.0f), "scale_check %s: flag %g with%s an inf", dtype_name((ab_dtype_t)t),
                (double)flag, with_inf ? "" : "out");
    }
  ab_device_free(g.dev, dg, N_ELEMS * 4);
  ab_device_free(g.dev, dflag, 4);
  gpu_close(&g);
}

static void copies_move_the_bytes(void) {
  NEED_GPU();
  gpu_t g;
  if (!gpu_open(&g)) return;
  const uint64_t n = 100003;
  ab_dptr_t src = gpu_alloc(&g, n), dst = gpu_alloc(&g, 4 * n);
  REQUIRE(src && dst);
  uint8_t *host = malloc(n);
  const ab_kernel_op_t ops[] = {AB_K_COPY, AB_K_ALLGATHER, AB_K_REDUCE_SCATTER};
  for (uint32_t i = 0; i < 3; i++) {
    /* reduce_scatter reads the full buffer and writes the shard. */
    ab_dptr_t from = ops[i] == AB_K_REDUCE_SCATTER ? dst : src, to = ops[i] == AB_K_REDUCE_SCATTER ? src : dst;
    REQUIRE(ab_kernels_fill(g.kx, from, n, 100 + i, 0) == AB_OK);
    ab_kernel_t k = {(uint8_t)ops[i], {AB_F32, AB_F32}, 2, {0, 1, 0, 0}, 0, n, 0};
    launch(&g, &k, from, to, 0, 0);
    REQUIRE(ab_kernels_download(g.kx, host, to, n) == AB_OK);
    uint64_t wrong = 0;
    for (uint64_t o = 0; o < n; o++) wrong += host[o] != ab_pattern_byte(100 + i, o);
    CHECK_MSG(wrong == 0, "%s: %llu bytes wrong", ab_kernel_name(ops[i]), (unsigned long long)wrong);
  }
  free(host);
  ab_device_free(g.dev, src, n);
  ab_device_free(g.dev, dst, 4 * n);
  gpu_close(&g);
}

/* More launches and marks than the timing rings hold: nothing is lost when they wrap. */
static void timing_counts_every_launch_and_step(void) {
  NEED_GPU();
  gpu_t g;
  if (!gpu_open(&g)) return;
  ab_dptr_t a = gpu_alloc(&g, 4096), b = gpu_alloc(&g, 4096);
  REQUIRE(a && b);
  const int marks = 150, per_mark = 40; /* 6000 launches: past the 4096-pair ring */
  ab_kernel_t k = {AB_K_COPY, {AB_F32, AB_F32}, 2, {0, 1, 0, 0}, 0, 4096, 0};
  for (int s = 0; s < marks; s++) {
    REQUIRE(ab_kernels_mark(g.kx) == AB_OK);
    for (int i = 0; i < per_mark; i++) launch(&g, &k, a, b, 0, 0);
  }
  static double ms[512];
  size_t n = 0;
  double kernel_ms = -1;
  REQUIRE(ab_kernels_timing(g.kx, ms, 512, &n, &kernel_ms) == AB_OK);
  CHECK_EQ(n, marks - 1);
  CHECK(kernel_ms > 0);
  size_t negative = 0;
  for (size_t i = 0; i < n; i++) negative += ms[i] < 0;
  CHECK_EQ(negative, 0);
  /* The counts start again. */
  REQUIRE(ab_kernels_timing(g.kx, ms, 512, &n, &kernel_ms) == AB_OK);
  CHECK_EQ(n, 0);
  CHECK(kernel_ms == 0);
  ab_device_free(g.dev, a, 4096);
  ab_device_free(g.dev, b, 4096);
  gpu_close(&g);
}

/* ---- the engine with kernels ---------------------------------------------------------- */

/* A small training loop in the shape the workloads emit: parameters, then per step an input,
 * a bf16 GEMM into an fp32 output, a cast and a GELU into temporaries, gradient unscaling,
 * an Adam update, and copies standing in for collectives, on streams 0 and 1. */
static size_t build_training(ab_events_t *es, unsigned steps) {
  const uint64_t m = 256, n = 512, k = 384;
  ab_events_init(es);
  uint32_t w = ab_events_alloc(es, k * n * 2, 0, AB_TAG_PARAM);
  uint32_t master = ab_events_alloc(es, k * n * 4, 0, AB_TAG_PARAM);
  uint32_t mom = ab_events_alloc(es, k * n * 4, 0, AB_TAG_OPTIM), var = ab_events_alloc(es, k * n * 4, 0, AB_TAG_OPTIM);
  uint32_t flag = ab_events_alloc(es, 4, 0, AB_TAG_OTHER);
  size_t kernels = 0;
  for (unsigned s = 0; s < steps; s++) {
    ab_events_step(es);
    uint32_t x = ab_events_alloc(es, m * k * 2, 0, AB_TAG_INPUT);
    uint32_t y = ab_events_alloc(es, m * n * 4, 0, AB_TAG_ACT);
    ab_kernel_t gemm = {AB_K_GEMM, {AB_BF16, AB_F32}, 3, {x, w, y, 0}, m, n, k};
    ab_events_kernel(es, &gemm, 0);
    uint32_t h = ab_events_alloc(es, m * n * 2, 0, AB_TAG_TEMP);
    ab_kernel_t cast = {AB_K_CAST, {AB_F32, AB_BF16}, 2, {y, h, 0, 0}, 0, m * n, 0};
    ab_events_kernel(es, &cast, 0);
    uint32_t act = ab_events_alloc(es, m * n * 2, 0, AB_TAG_ACT);
    ab_kernel_t gelu = {AB_K_GELU, {AB_BF16, AB_BF16}, 2, {h, act, 0, 0}, 0, m * n, 0};
    ab_events_kernel(es, &gelu, 0);
    ab_events_free_id(es, h);
    uint32_t grad = ab_events_alloc(es, k * n * 4, 0, AB_TAG_GRAD);
    ab_kernel_t to_grad = {AB_K_COPY, {AB_F32, AB_F32}, 2, {master, grad, 0, 0}, 0, k * n * 4, 0};
    ab_events_kernel(es, &to_grad, 0);
    ab_kernel_t unscale = {AB_K_SCALE_CHECK, {AB_F32, AB_F32}, 2, {grad, flag, 0, 0}, 0, k * n, 0};
    ab_events_kernel(es, &unscale, 0);
    ab_kernel_t adam = {AB_K_ADAM, {AB_F32, AB_F32}, 4, {master, grad, mom, var}, 0, k * n, 0};
    ab_events_kernel(es, &adam, 0);
    /* A gather of the parameter shard on a communication stream. */
    uint32_t full = ab_events_alloc(es, 2 * k * n * 2, 1, AB_TAG_COMM);
    ab_kernel_t gather = {AB_K_ALLGATHER, {AB_BF16, AB_BF16}, 2, {w, full, 0, 0}, 0, k * n * 2, 0};
    ab_events_kernel(es, &gather, 1);
    ab_events_sync(es, 1);
    ab_events_free_id(es, full);
    ab_events_free_id(es, grad);
    ab_events_free_id(es, act);
    ab_events_free_id(es, y);
    ab_events_free_id(es, x);
    kernels += 7;
  }
  ab_events_free_id(es, flag);
  return kernels;
}

typedef struct replay_s {
  ab_status st;
  ab_run_t run;
  char message[1024];
} replay_t;

/* Replays es through strategy on a fresh device of the test's kind. */
static bool replay(const ab_events_t *es, const char *strategy, bool kernels, bool verify, replay_t *r) {
  ab_device_t *dev = NULL;
  ab_strategy_t *s = NULL;
  ab_diag_t diag = {""};
  if (ab_run_prepare(&r->run, es) != AB_OK) return ab_check_report(__FILE__, __LINE__, "ab_run_prepare", NULL);
  if (ab_device_open(ab_test_device, NULL, &dev, &diag) != AB_OK ||
      ab_strategy_create(strategy, dev, ab_test_conf_for(strategy), &s, &diag) != AB_OK) {
    ab_device_close(dev, NULL);
    ab_run_release(&r->run);
    return ab_check_report(__FILE__, __LINE__, "replay", "%s: %s", strategy, diag.msg);
  }
  ab_run_opts_t o = ab_run_defaults();
  o.kernels = kernels;
  o.verify = verify;
  r->st = ab_engine_replay(es, s, &o, &r->run);
  snprintf(r->message, sizeof r->message, "%s", r->run.message);
  ab_strategy_destroy(s);
  CHECK_MSG(ab_device_close(dev, &diag) == AB_OK, "%s: %s", strategy, diag.msg);
  return true;
}

static void engine_runs_kernels_under_every_strategy(void) {
  if (on_cuda() && !ab_device_cuda_usable()) SKIP("no usable GPU");
  ab_events_t es;
  const unsigned steps = 6;
  size_t nk = build_training(&es, steps);
  ab_diag_t diag = {""};
  REQUIRE_MSG(ab_events_finish(&es, &diag) == AB_OK, "%s", diag.msg);
  const char *names[64];
  size_t n = ab_test_strategies(names, 64);
  for (size_t i = 0; i < n; i++) {
    for (int verify = 0; verify < 2; verify++) {
      replay_t r;
      if (!replay(&es, names[i], true, verify, &r)) continue;
      CHECK_MSG(r.st == AB_OK && r.run.status == AB_RUN_OK, "%s%s: %s", names[i], verify ? " --verify" : "", r.message);
      CHECK_EQ(r.run.nstep_ms, steps);
      CHECK(r.run.step_ms_p50 > 0);
      if (on_cuda()) {
        CHECK_EQ(r.run.kernels_launched, nk);
        CHECK_EQ(r.run.kernels_skipped, 0);
        CHECK(r.run.kernel_ms > 0);
      } else {
        CHECK_EQ(r.run.kernels_launched, 0);
        CHECK_EQ(r.run.kernels_skipped, nk);
        CHECK(r.run.kernel_ms == 0);
      }
      ab_run_release(&r.run);
    }
  }
  ab_events_free(&es);
}

static void no_kernels_skips_them(void) {
  if (on_cuda() && !ab_device_cuda_usable()) SKIP("no usable GPU");
  ab_events_t es;
  size_t nk = build_training(&es, 3);
  ab_diag_t diag = {""};
  REQUIRE_MSG(ab_events_finish(&es, &diag) == AB_OK, "%s", diag.msg);
  replay_t r;
  if (!replay(&es, "raw", false, false, &r)) return;
  CHECK_MSG(r.st == AB_OK && r.run.status == AB_RUN_OK, "%s", r.message);
  CHECK_EQ(r.run.kernels_skipped, nk);
  CHECK_EQ(r.run.kernels_launched, 0);
  CHECK(r.run.kernel_ms == 0);
  CHECK_EQ(r.run.nstep_ms, 3);
  ab_run_release(&r.run);
  ab_events_free(&es);
}

static const ab_test_t tests[] = {
    {"fill_check_roundtrip", fill_check_roundtrip},
    {"check_names_the_overlapping_id", check_names_the_overlapping_id},
    {"gemm_against_host", gemm_against_host},
    {"gelu_and_cast_against_host", gelu_and_cast_against_host},
    {"adam_against_host", adam_against_host},
    {"scale_check_against_host", scale_check_against_host},
    {"copies_move_the_bytes", copies_move_the_bytes},
    {"timing_counts_every_launch_and_step", timing_counts_every_launch_and_step},
    {"engine_runs_kernels_under_every_strategy", engine_runs_kernels_under_every_strategy},
    {"no_kernels_skips_them", no_kernels_skips_them},
};
AB_TEST_MAIN(tests)
