#include "tests/world.h"

#include "harness/run/pipeline.h"
#include "tests/check.h"

bool ab_test_world_open(ab_device_t **dev, ab_strategy_t **s, const char *device, const ab_device_config_t *cfg,
                        const char *strategy, const char *conf) {
  ab_pipeline_t p = {.device = device, .strategy = strategy, .conf = conf};
  if (cfg != NULL) p.dev = *cfg;
  ab_world_t w;
  ab_diag_t d = {""};
  *dev = NULL;
  *s = NULL;
  if (ab_pipeline_open(&p, &w, &d) != AB_OK)
    return ab_check_report(__FILE__, __LINE__, "ab_pipeline_open", "%s -c '%s' on %s: %s", strategy,
                           conf ? conf : "", device, d.msg);
  *dev = w.dev;
  *s = w.s;
  return true;
}

void ab_test_world_close(ab_device_t *dev, ab_strategy_t *s) {
  const char *name = s->ops->name;
  /* The pipeline's close checks the device; the strategy's own count of what it held is
   * checked first, while the device still exists. */
  ab_world_t w = {.dev = dev, .s = s};
  ab_strategy_destroy(s);
  w.s = NULL;
  CHECK_MSG(dev->held_bytes == 0, "%s left %llu bytes held on the device", name, (unsigned long long)dev->held_bytes);
  ab_diag_t d = {""};
  CHECK_MSG(ab_pipeline_close(&w, NULL, &d) == AB_OK, "%s: %s", name, d.msg);
}
