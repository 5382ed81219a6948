/* events must not reach trace.h, a header of a layer above it: this file must not compile. */
#include "workloads/traces/trace.h"

int ab_layers_probe(void);
int ab_layers_probe(void) { return 0; }
