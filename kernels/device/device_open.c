#include "kernels/device/device_open.h"

#include <stdio.h>
#include <string.h>

#include "kernels/base/units.h"

ab_status ab_device_open(const char *spec, const ab_device_config_t *cfg, ab_device_t **out,
                         ab_diag_t *diag) {
  static const ab_device_config_t defaults = {0};
  if (cfg == NULL) cfg = &defaults;
  *out = NULL;
  if (spec == NULL || *spec == '\0') spec = "auto";
  if (strcmp(spec, "auto") == 0) spec = ab_device_cuda_usable() ? "cuda" : "sim";

  ab_status st;
  if (strcmp(spec, "sim") == 0 || strncmp(spec, "sim:", 4) == 0) {
    const char *what = spec[3] == ':' ? spec + 4 : "h200";
    uint64_t total = 0;
    unsigned n;
    const ab_sim_profile_t *profiles = ab_sim_profiles(&n);
    for (unsigned i = 0; i < n; i++)
      if (strcmp(what, profiles[i].name) == 0) total = profiles[i].total_bytes;
    if (total == 0) {
      ab_diag_t inner;
      if (ab_parse_size("--device sim", what, &total, &inner) != AB_OK || total == 0) {
        char names[256] = "";
        for (unsigned i = 0; i < n; i++) {
          size_t used = strlen(names);
          snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", profiles[i].name);
        }
        return ab_diag_set(diag, AB_ERR_INVALID,
                           "--device '%s': unknown simulated card '%s' (expected a profile: %s; or a capacity such as 40GB)",
                           spec, what, names);
      }
    }
    st = ab_sim_open(what, total, cfg, out, diag);
  } else if (strcmp(spec, "cuda") == 0 || strncmp(spec, "cuda:", 5) == 0) {
    uint64_t ordinal = 0;
    if (spec[4] == ':') {
      ab_diag_t inner;
      if (ab_parse_u64("--device cuda", spec + 5, 1023, &ordinal, &inner) != AB_OK)
        return ab_diag_set(diag, AB_ERR_INVALID, "--device '%s': expected cuda:N with N a GPU index", spec);
    }
    if (cfg->faults.fail_nth || cfg->faults.fail_rate > 0)
      return ab_diag_set(diag, AB_ERR_INVALID, "fault injection works on the simulated device only (--device sim)");
    if (cfg->plan_len)
      return ab_diag_set(diag, AB_ERR_INVALID, "recorded addresses work on the simulated device only (--device sim)");
    st = ab_cuda_open((int)ordinal, cfg, out, diag);
  } else {
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "--device '%s': expected auto, sim, sim:PROFILE, sim:SIZE, cuda or cuda:N", spec);
  }
  if (st != AB_OK) return st;
  if (cfg->budget_bytes > (*out)->total_bytes) {
    char b[32], t[32];
    ab_format_bytes(cfg->budget_bytes, b, sizeof b);
    ab_format_bytes((*out)->total_bytes, t, sizeof t);
    ab_device_close(*out, NULL);
    *out = NULL;
    return ab_diag_set(diag, AB_ERR_INVALID, "--budget %s is more than the device's total of %s", b, t);
  }
  (*out)->budget_bytes = cfg->budget_bytes;
  (*out)->budget_lo = 0;
  (*out)->budget_hi = UINT64_MAX;
  return AB_OK;
}
