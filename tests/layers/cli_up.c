/* the command line must not reach gbench_csv.h, a header of a layer above it: this file must not compile. */
#include "harness/micro/gbench_csv.h"

int ab_layers_probe(void);
int ab_layers_probe(void) { return 0; }
