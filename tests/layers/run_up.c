/* the run must not reach ranks.h, a header of a layer above it: this file must not compile. */
#include "harness/ranks/ranks.h"

int ab_layers_probe(void);
int ab_layers_probe(void) { return 0; }
