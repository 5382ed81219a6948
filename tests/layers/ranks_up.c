/* the ranks must not reach tune.h, a header of a layer beside it, which it does not link: this file must not compile. */
#include "harness/tune/tune.h"

int ab_layers_probe(void);
int ab_layers_probe(void) { return 0; }
