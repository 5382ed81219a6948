/* The micro-benchmarks' layer, at the top, reaches every layer of the harness: this file
 * compiles. */
#include "harness/cli/cli.h"
#include "harness/micro/gbench_csv.h"
#include "harness/ranks/ranks.h"
#include "harness/run/engine.h"
#include "harness/run/run_one.h"
#include "strategies/strategy.h"
#include "harness/tune/tune.h"

int ab_layers_probe(void);
int ab_layers_probe(void) { return 0; }
