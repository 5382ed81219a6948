/* cuda_device.h: the real GPU behind device.h (cuda_device.c), through the CUDA runtime and, for virtual
 * memory, the driver API reached with cudaGetDriverEntryPoint so that the binary starts on
 * machines without a driver. Every call is checked (cuda_check.h). In a build without CUDA
 * ab_cuda_open fails with a message and ab_device_cuda_usable() is false. */
#ifndef AB_CUDA_DEVICE_H
#define AB_CUDA_DEVICE_H

#include "kernels/device/device.h"

/* True when this build has CUDA and a usable GPU is present. */
bool ab_device_cuda_usable(void);

/* Opens GPU `ordinal`, creates its stream-ordered pool lazily, and applies the budget. */
ab_status ab_cuda_open(int ordinal, const ab_device_config_t *cfg, ab_device_t **out,
                       ab_diag_t *diag);

#endif
