/* serve.h: the serve workload (serve.c). */
#ifndef AB_SERVE_H
#define AB_SERVE_H

#include "workloads/workload.h"

extern const ab_workload_t ab_workload_serve;

#endif
