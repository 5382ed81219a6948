/* workloads, below the harness, reaches every layer under it: this file compiles. */
#include "kernels/base/status.h"
#include "kernels/device/device.h"
#include "workloads/events/events.h"
#include "kernels/kernels.h"
#include "workloads/traces/trace.h"
#include "strategies/protocol/pools.h"
#include "strategies/protocol/trace_log.h"
#include "workloads/workload.h"

int ab_layers_probe(void);
int ab_layers_probe(void) { return 0; }
