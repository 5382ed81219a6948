/* zero.h: the zero workload (zero.c). */
#ifndef AB_ZERO_H
#define AB_ZERO_H

#include "workloads/workload.h"

extern const ab_workload_t ab_workload_zero;

#endif
