/* workloads must not reach engine.h, a header of a layer above it: this file must not compile. */
#include "harness/run/engine.h"

int ab_layers_probe(void);
int ab_layers_probe(void) { return 0; }
