/* replay.h: the replay workload (replay.c). */
#ifndef AB_REPLAY_H
#define AB_REPLAY_H

#include "workloads/workload.h"

extern const ab_workload_t ab_workload_replay;

#endif
