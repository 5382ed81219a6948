/* async.h: the async strategy (async.c). */
#ifndef AB_ASYNC_H
#define AB_ASYNC_H

#include "strategies/strategy.h"

extern const ab_strategy_ops_t ab_async_ops;

#endif
