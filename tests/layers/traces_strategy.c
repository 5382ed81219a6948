/* traces must not reach adaptor_trace.h: the trace formats know no strategy, and this file
 * must not compile. */
#include "strategies/common/adaptor_trace.h"

int ab_layers_probe(void);
int ab_layers_probe(void) { return 0; }
