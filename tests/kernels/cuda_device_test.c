/* cuda_device_test.c: the real device behind device.h (label gpu; skipped without a GPU). */
#include "kernels/base/units.h"
#include "kernels/device/device.h"
#include "kernels/device/device_open.h"

#include "tests/check.h"

static ab_device_t *open_cuda(uint64_t budget) {
  ab_device_config_t cfg = {.budget_bytes = budget};
  ab_device_t *d = NULL;
  ab_diag_t diag = {""};
  if (ab_device_open("cuda", &cfg, &d, &diag) != AB_OK) fprintf(stderr, "  open cuda: %s\n", diag.msg);
  return d;
}

static void malloc_free_info(void) {
  if (!ab_device_cuda_usable()) SKIP("no usable GPU");
  ab_device_t *d = open_cuda(0);
  REQUIRE(d);
  CHECK(d->kind == AB_DEVICE_CUDA);
  uint64_t free0, total;
  REQUIRE(ab_device_mem_info(d, &free0, &total) == AB_OK);
  CHECK_EQ(total, d->total_bytes);
  CHECK(free0 > 0 && free0 <= total);
  ab_dptr_t p;
  REQUIRE(ab_device_malloc(d, 256ULL << 20, &p) == AB_OK);
  CHECK(p % 256 == 0);
  uint64_t free1;
  REQUIRE(ab_device_mem_info(d, &free1, &total) == AB_OK);
  CHECK_MSG(free0 - free1 >= (256ULL << 20), "free went from %llu to %llu", (unsigned long long)free0,
            (unsigned long long)free1);
  CHECK(ab_device_free(d, p, 255ULL << 20) == AB_ERR_INVALID); /* wrong size */
  CHECK(ab_device_free(d, p, 256ULL << 20) == AB_OK);
  CHECK(ab_device_free(d, p, 256ULL << 20) == AB_ERR_INVALID); /* double free */
  CHECK(ab_device_malloc(d, total + 1, &p) == AB_ERR_OOM);     /* larger than the card */
  CHECK(ab_device_close(d, NULL) == AB_OK);
}

static void budget_holds(void) {
  if (!ab_device_cuda_usable()) SKIP("no usable GPU");
  ab_device_t *d = open_cuda(100ULL << 20);
  REQUIRE(d);
  ab_dptr_t a, b;
  REQUIRE(ab_device_malloc(d, 60ULL << 20, &a) == AB_OK);
  CHECK(ab_device_malloc(d, 50ULL << 20, &b) == AB_ERR_OOM);
  CHECK(ab_device_free(d, a, 60ULL << 20) == AB_OK);
  /* The stream-ordered pool is created with the budget as its maximum size. */
  REQUIRE(ab_device_pool_configure(d, UINT64_MAX) == AB_OK);
  REQUIRE(ab_device_malloc_async(d, 64ULL << 20, 0, &a) == AB_OK);
  CHECK(ab_device_malloc_async(d, 64ULL << 20, 0, &b) == AB_ERR_OOM);
  CHECK(ab_device_free_async(d, a, 64ULL << 20, 0) == AB_OK);
  CHECK(ab_device_pool_trim(d, 0) == AB_OK);
  CHECK(ab_device_close(d, NULL) == AB_OK);
}

static void virtual_memory(void) {
  if (!ab_device_cuda_usable()) SKIP("no usable GPU");
  ab_device_t *d = open_cuda(0);
  REQUIRE(d);
  const uint64_t G = d->granule_bytes;
  ab_dptr_t base;
  REQUIRE_MSG(ab_device_va_reserve(d, 1ULL << 36, &base) == AB_OK, "%s", d->diag.msg);
  REQUIRE_MSG(ab_device_map(d, base, G) == AB_OK, "%s", d->diag.msg);
  REQUIRE(ab_device_map(d, base + G, 10 * G) == AB_OK);
  CHECK_EQ(d->held_bytes, 11 * G);
  CHECK(ab_device_unmap(d, base + G, 5 * G) == AB_ERR_INVALID); /* part of one physical allocation */
  CHECK(ab_device_unmap(d, base + G, 10 * G) == AB_OK);
  CHECK(ab_device_unmap(d, base, G) == AB_OK);
  CHECK_EQ(d->held_bytes, 0);
  CHECK(ab_device_va_release(d, base, 1ULL << 36) == AB_OK);
  CHECK(ab_device_close(d, NULL) == AB_OK);
}

static void streams_and_pool(void) {
  if (!ab_device_cuda_usable()) SKIP("no usable GPU");
  ab_device_t *d = open_cuda(0);
  REQUIRE(d);
  REQUIRE(ab_device_pool_configure(d, 0) == AB_OK);
  ab_dptr_t p[4];
  for (unsigned s = 0; s < 4; s++) REQUIRE(ab_device_malloc_async(d, (s + 1) << 20, s, &p[s]) == AB_OK);
  CHECK(ab_device_stream_handle(d, 0) == NULL); /* the legacy default stream */
  CHECK(ab_device_stream_handle(d, 3) != NULL);
  uint64_t cur, peak;
  REQUIRE(ab_device_pool_reserved(d, &cur, &peak) == AB_OK);
  CHECK(cur >= 10ULL << 20);
  for (unsigned s = 0; s < 4; s++) CHECK(ab_device_free_async(d, p[s], (s + 1) << 20, s) == AB_OK);
  CHECK(ab_device_synchronize(d) == AB_OK);
  REQUIRE(ab_device_pool_reserved(d, &cur, &peak) == AB_OK);
  CHECK_MSG(cur == 0, "release threshold 0: the pool keeps %llu bytes after a synchronisation", (unsigned long long)cur);
  CHECK(peak >= 10ULL << 20);
  CHECK(ab_device_close(d, NULL) == AB_OK);
}

static const ab_test_t tests[] = {
    {"malloc_free_info", malloc_free_info},
    {"budget_holds", budget_holds},
    {"virtual_memory", virtual_memory},
    {"streams_and_pool", streams_and_pool},
};
AB_TEST_MAIN(tests)
