/* raw.h: the raw strategy (raw.c). */
#ifndef AB_RAW_H
#define AB_RAW_H

#include "strategies/strategy.h"

extern const ab_strategy_ops_t ab_raw_ops;

#endif
