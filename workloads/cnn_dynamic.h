/* cnn_dynamic.h: the cnn-dynamic workload (cnn_dynamic.c). */
#ifndef AB_CNN_DYNAMIC_H
#define AB_CNN_DYNAMIC_H

#include "workloads/workload.h"

extern const ab_workload_t ab_workload_cnn_dynamic;

#endif
