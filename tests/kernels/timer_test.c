/* timer_test.c: the device timer (device.h) on the device of --device=SPEC: on sim it counts
 * the modelled time of the calls in between; on cuda (label gpu) it reads CUDA events. */
#include "kernels/base/units.h"
#include "kernels/device/device.h"
#include "kernels/device/device_open.h"

#include "tests/check.h"

static ab_device_t *open_device(void) {
  ab_device_config_t cfg = {.cost_model = true};
  ab_device_t *d = NULL;
  ab_diag_t diag = {""};
  if (ab_device_open(ab_test_device, &cfg, &d, &diag) != AB_OK) fprintf(stderr, "  open %s: %s\n", ab_test_device, diag.msg);
  return d;
}

static void measures_calls(void) {
  if (strncmp(ab_test_device, "cuda", 4) == 0 && !ab_device_cuda_usable()) SKIP("no usable GPU");
  ab_device_t *d = open_device();
  REQUIRE(d);
  for (int round = 0; round < 2; round++) { /* the timer can be used again */
    uint64_t modeled0 = d->modeled_ns;
    ab_dptr_t p = 0;
    double seconds = -1;
    REQUIRE(ab_device_timer_start(d, 0) == AB_OK);
    REQUIRE(ab_device_malloc(d, 64 * AB_MiB, &p) == AB_OK);
    REQUIRE(ab_device_free(d, p, 64 * AB_MiB) == AB_OK);
    REQUIRE_MSG(ab_device_timer_stop(d, 0, &seconds) == AB_OK, "%s", d->diag.msg);
    if (d->kind == AB_DEVICE_SIM) {
      /* Host time plus the model: at least what the model charged for the two calls. */
      double modeled = (double)(d->modeled_ns - modeled0) * 1e-9;
      CHECK(modeled > 0);
      CHECK_MSG(seconds >= modeled, "%g s measured, %g s modelled", seconds, modeled);
    } else {
      CHECK_MSG(seconds > 0, "%g s", seconds);
    }
  }
  /* Another stream works too (created on first use on cuda). */
  double seconds = -1;
  REQUIRE(ab_device_timer_start(d, 3) == AB_OK);
  CHECK(ab_device_timer_stop(d, 3, &seconds) == AB_OK);
  CHECK(seconds >= 0);
  CHECK(ab_device_close(d, NULL) == AB_OK);
}

static const ab_test_t tests[] = {{"measures_calls", measures_calls}};
AB_TEST_MAIN(tests)
