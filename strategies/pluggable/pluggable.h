/* pluggable.h: any allocator PyTorch can load, run unchanged (pluggable.c): -s
 * pluggable:PATH[:ALLOC_FN:FREE_FN], a family of strategies named by their argument
 * (registry.h), made with ab_pluggable_create; the ops' create is not used. */
#ifndef AB_PLUGGABLE_H
#define AB_PLUGGABLE_H

#include "strategies/strategy.h"

extern const ab_strategy_ops_t ab_pluggable_ops;

/* Makes the strategy for argument "PATH[:ALLOC_FN:FREE_FN]" (defaults my_malloc, my_free),
 * with conf's hooks (see the registry's help). A bad argument, conf or library is
 * AB_ERR_INVALID with one line in diag. */
ab_status ab_pluggable_create(const char *argument, ab_device_t *dev, const char *conf, ab_strategy_t **out,
                              ab_diag_t *diag);

#endif
