/* dynamic_shapes.h: the dynamic-shapes workload (dynamic_shapes.c). */
#ifndef AB_DYNAMIC_SHAPES_H
#define AB_DYNAMIC_SHAPES_H

#include "workloads/workload.h"

extern const ab_workload_t ab_workload_dynamic_shapes;

#endif
