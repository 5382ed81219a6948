/* pooled.h: the pooled strategy (pooled.c). */
#ifndef AB_POOLED_H
#define AB_POOLED_H

#include "strategies/strategy.h"

extern const ab_strategy_ops_t ab_pooled_ops;

#endif
