/* planned.h: STAlloc's profile-plan-serve allocator (planned.c). */
#ifndef AB_PLANNED_H
#define AB_PLANNED_H

#include "strategies/strategy.h"

extern const ab_strategy_ops_t ab_planned_ops;

#endif
