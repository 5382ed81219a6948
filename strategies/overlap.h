/* overlap.h: the overlap strategy (overlap.c), broken on purpose, for tests of --verify. */
#ifndef AB_OVERLAP_H
#define AB_OVERLAP_H

#include "strategies/strategy.h"

extern const ab_strategy_ops_t ab_overlap_ops;

#endif
