/* random.h: the random workload (random.c). */
#ifndef AB_RANDOM_H
#define AB_RANDOM_H

#include "workload.h"

extern const ab_workload_t ab_workload_random;

#endif
