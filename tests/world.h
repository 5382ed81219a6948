/* world.h: the world most tests start from: a device opened from a spec (a simulated card,
 * or ab_test_device for the suites that also run on the GPU) with its configuration, and a
 * strategy created on it; at the end the strategy destroyed and the device closed with its
 * leak check. A test's own world keeps its device and strategy where it likes and passes
 * their addresses.
 *
 * Built on the run pipeline (pipeline.h), as every run is. Failures are recorded as test
 * failures (check.h), naming the device, the strategy and its conf; nothing is left open when
 * the opening fails.
 */
#ifndef AB_TEST_WORLD_H
#define AB_TEST_WORLD_H

#include <stdbool.h>

#include "kernels/device/device.h"
#include "strategies/strategy.h"

/* Opens device (a spec, as --device takes it) with cfg (may be NULL) and creates strategy
 * with conf (may be NULL) on it, into *dev and *s. False, with a failure recorded, when
 * either cannot be. */
bool ab_test_world_open(ab_device_t **dev, ab_strategy_t **s, const char *device, const ab_device_config_t *cfg,
                   const char *strategy, const char *conf);

/* Destroys s and closes dev: the strategy must have given the device back every byte it
 * held (held_bytes 0), and the device's close must find nothing left (no live allocation,
 * reservation or mapping). */
void ab_test_world_close(ab_device_t *dev, ab_strategy_t *s);

#endif
