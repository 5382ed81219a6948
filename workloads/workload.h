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

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/status.h"
#include "workloads/events/events.h"

struct ab_build_opts_s; /* below */

typedef struct ab_workload_s {
  const char *name;
  const char *summary;     /* one line for `allocbench list` */
  const char *params_help; /* one parameter per line, for `allocbench list -v` */
  /* Arguments of a short run, for `allocbench matrix --quick` (fewer steps or ops, same
   * pattern); NULL when the defaults are short already. Arguments the user gives win. */
  const char *quick_args;
  /* Its arguments in the bench (`allocbench matrix` without -w, what `make bench` runs), ""
   * for its defaults; NULL when it is not in the bench. The bench runs the registry's
   * workloads that have them, in the registry's order, which is the order of the figures. */
  const char *bench_args;
  /* Appends the workload's events to out (initialised, empty). args is "" when none were
   * given. Bad arguments: AB_ERR_INVALID, naming the key and its position. */
  ab_status (*generate)(const char *args, uint64_t seed, ab_events_t *out, ab_diag_t *diag);
  /* An importer's instead of generate: reads the trace args names into out (initialised,
   * empty), knowing what the run is made under (opts: cap and card). */
  ab_status (*read)(const char *args, const struct ab_build_opts_s *opts, ab_events_t *out, ab_diag_t *diag);
  /* The keys its stream grows with, as the loops of its generator nest (steps, then layers
   * or pairs), at most two, ending with a NULL key:
   * Note [A workload's size before it is generated]. NULL for a workload whose arguments are no key=value list (replay). */
  const struct ab_scale_key_s *scale;
} ab_workload_t;

typedef struct ab_scale_key_s {
  const char *key;
  uint64_t probe; /* the probes take this value and twice it: 1 for steps, more where one
                   * step of the loop is a draw (random's ops) */
} ab_scale_key_t;

/* Note [A workload's size before it is generated]
 * A generator's stream grows with its arguments (steps x layers for the transformers), and a
 * stream too large for host memory used to be found out only when a push failed, minutes in.
 * Before generating, the registry generates the workload with each scaling key that was
 * given above twice its probe value at that value and at twice it (every other argument as
 * given) and extrapolates the events, kernels and allocation ids to the values asked for,
 * linearly in each key and in their product, as the generators' loops nest; tests/workloads/workloads_test.c holds the estimate to the truth. A workload whose stream,
 * with what a replay keeps per allocation, would not fit in the host memory available
 * (hostmem.h), or that would need more than 2^32 allocation ids, is refused before it
 * starts, naming its scaling keys. While generating, the stream stops at its first failed
 * push, at the stop flag, or when it passes the host memory available (events.h), and the
 * generators stop with it, at the end of the step. */

/* How a stream is built; a zero struct is the default. */
typedef struct ab_trace_info_s ab_trace_info_t; /* workloads/traces/trace_builder.h */

typedef struct ab_build_opts_s {
  const volatile sig_atomic_t *stop; /* may be NULL: building stops once *stop is set */
  uint64_t host_bytes;               /* host memory the stream may take; 0: what is available now */
  /* For a trace's reader (trace.h, ab_trace_opts_t), in bytes; 0: not known. */
  uint64_t cap;  /* the memory cap the program ran under */
  uint64_t card; /* the card's total */
  ab_trace_info_t *info; /* replay: what the trace's reader found; may be NULL */
} ab_build_opts_t;

/* What a workload's stream will hold, by the Note's estimate. */
typedef struct ab_workload_size_s {
  double events, kernels, ids;
  double host_bytes; /* the stream's arrays as they grow, and a replay's state per allocation */
} ab_workload_size_t;

/* All workloads; *count receives their number. */
const ab_workload_t *const *ab_workload_registry(size_t *count);
const ab_workload_t *ab_workload_find(const char *name);

/* Builds the stream for spec ("NAME[:ARGS]") and seed into out, which it initialises;
 * validates it (ab_events_finish) and records spec as its source. On failure out is
 * released. A key given twice is refused, and so is a workload that will not fit (the Note);
 * a stream stopped by opts->stop fails with AB_ERR_INTERNAL. opts may be NULL. */
ab_status ab_workload_build_with(const char *spec, uint64_t seed, const ab_build_opts_t *opts, ab_events_t *out,
                                 ab_diag_t *diag);
/* ab_workload_build_with with the default options. */
ab_status ab_workload_build(const char *spec, uint64_t seed, ab_events_t *out, ab_diag_t *diag);
/* The Note's estimate of the stream spec would build. */
ab_status ab_workload_estimate(const char *spec, uint64_t seed, ab_workload_size_t *out, ab_diag_t *diag);

#endif
