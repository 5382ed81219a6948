/* random.h: the random workload (random.c). */
#ifndef AB_RANDOM_H
#define AB_RANDOM_H

#include "workloads/workload.h"

extern const ab_workload_t ab_workload_random;

#endif
