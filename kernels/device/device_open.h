/* device_open.h: a device from a spec, the choice between the implementations.
 *
 * It sits above the interface (device.h) and both implementations (sim.h, cuda_device.h),
 * which know nothing of each other or of it. */
#ifndef AB_DEVICE_OPEN_H
#define AB_DEVICE_OPEN_H

#include "kernels/device/cuda_device.h"
#include "kernels/device/device.h"
#include "kernels/device/sim.h"

/* Opens a device from a spec: "sim" (the h200 profile), "sim:PROFILE", "sim:SIZE" (a
 * card of that capacity), "cuda" or "cuda:N", or "auto" (cuda when a usable GPU exists,
 * else sim). Unknown specs, a budget above the card, and faults on cuda are refused. */
ab_status ab_device_open(const char *spec, const ab_device_config_t *cfg, ab_device_t **out,
                         ab_diag_t *diag);

#endif
