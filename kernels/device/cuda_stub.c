/* cuda_stub.c: the CUDA device in a build without the CUDA toolkit. */
#include "kernels/device/cuda_device.h"

bool ab_device_cuda_usable(void) { return false; }

ab_status ab_cuda_open(int ordinal, const ab_device_config_t *cfg, ab_device_t **out, ab_diag_t *diag) {
  (void)ordinal;
  (void)cfg;
  *out = NULL;
  return ab_diag_set(diag, AB_ERR_INVALID, "--device cuda: this build has no CUDA support (configure with the CUDA toolkit installed); use --device sim");
}
