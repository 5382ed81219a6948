/* mixed_precision.h: the mixed-precision workload (mixed_precision.c). */
#ifndef AB_MIXED_PRECISION_H
#define AB_MIXED_PRECISION_H

#include "workloads/workload.h"

extern const ab_workload_t ab_workload_mixed_precision;

#endif
