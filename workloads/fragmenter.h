/* fragmenter.h: the fragmenter workload (fragmenter.c). */
#ifndef AB_FRAGMENTER_H
#define AB_FRAGMENTER_H

#include "workloads/workload.h"

extern const ab_workload_t ab_workload_fragmenter;

#endif
