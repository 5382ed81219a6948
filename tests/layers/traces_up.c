/* traces must not reach workload.h, a header of a layer above it: this file must not compile. */
#include "workloads/workload.h"

int ab_layers_probe(void);
int ab_layers_probe(void) { return 0; }
