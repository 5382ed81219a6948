/* oracle.h: the clairvoyant strategy (oracle.c). */
#ifndef AB_ORACLE_H
#define AB_ORACLE_H

#include "strategies/strategy.h"

extern const ab_strategy_ops_t ab_oracle_ops;

#endif
