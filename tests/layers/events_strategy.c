/* events must not reach strategy.h: the event stream knows no strategy, and this file must
 * not compile. */
#include "strategies/strategy.h"

int ab_layers_probe(void);
int ab_layers_probe(void) { return 0; }
