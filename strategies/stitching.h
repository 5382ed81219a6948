/* stitching.h: GMLake's virtual memory stitching allocator (stitching.c). */
#ifndef AB_STITCHING_H
#define AB_STITCHING_H

#include "strategies/strategy.h"

extern const ab_strategy_ops_t ab_stitching_ops;

#endif
