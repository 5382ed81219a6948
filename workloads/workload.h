/* workload.h: workloads, behind one interface, and their registry.
 * Layer: workloads (workloads/), above traces (the replay workload reads them).
 *
 * A workload turns its arguments and a seed into an event stream (workloads/events/events.h):
 * generators synthesise one, importers read a recorded trace. Workloads never allocate
 * device memory. A generator is deterministic: the same arguments and seed give the same
 * stream, bit for bit.
 *
 * A workload is named on the command line as NAME or NAME:ARGS. Generators take ARGS as
 * key=value pairs separated by commas (units.h parses them, so errors name the key and its
 * position); `replay` takes a file path. Each workload documents its parameters in
 * params_help, shown by `allocbench list -v`, and its size model in its source file.
 */
#ifndef AB_WORKLOAD_H
#define AB_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"
#include "status.h"

typedef struct ab_workload_s {
  const char *name;
  const char *summary;     /* one line for `allocbench list` */
  const char *params_help; /* one parameter per line, for `allocbench list -v` */
  /* Arguments of a short run, for `allocbench matrix --quick` (fewer steps or ops, same
   * pattern); NULL when the defaults are short already. Arguments the user gives win. */
  const char *quick_args;
  /* Appends the workload's events to out (initialised, empty). args is "" when none were
   * given. Bad arguments: AB_ERR_INVALID, naming the key and its position. */
  ab_status (*generate)(const char *args, uint64_t seed, ab_events_t *out, ab_diag_t *diag);
} ab_workload_t;

/* All workloads; *count receives their number. */
const ab_workload_t *const *ab_workload_registry(size_t *count);
const ab_workload_t *ab_workload_find(const char *name);

/* Builds the stream for spec ("NAME[:ARGS]") and seed into out, which it initialises;
 * validates it (ab_events_finish) and records spec as its source. On failure out is
 * released. */
ab_status ab_workload_build(const char *spec, uint64_t seed, ab_events_t *out, ab_diag_t *diag);

#endif
