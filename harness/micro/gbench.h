/* gbench.h: Google Benchmark from C.
 *
 * Google Benchmark has no C interface (its header needs C++), so this header declares one
 * and harness/micro/gbench_shim.cc, the project's only C++ file, implements it over the library.
 * A benchmark is a C function that receives an opaque state and the context pointer it was
 * registered with, and loops while ab_gb_keep_running says so:
 *
 *   static void bench(ab_gb_state_t *st, void *ctx) {
 *     ... setup, untimed ...
 *     while (ab_gb_keep_running(st)) { ... one iteration ... }
 *     ... teardown ...
 *   }
 *
 * Registration happens at run time (ab_gb_register), so a C table drives it: the
 * micro-benchmarks register one benchmark per strategy of the registry.
 *
 * Lifecycle: ab_gb_init consumes the --benchmark_* flags from argv, then benchmarks are
 * registered, ab_gb_run runs those that --benchmark_filter selects, and ab_gb_shutdown
 * releases the library. The context pointers are not owned and must outlive ab_gb_run.
 *
 * Thread-safety: one thread registers and runs; a state belongs to its benchmark call.
 */
#ifndef AB_GBENCH_H
#define AB_GBENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ab_gb_state_s ab_gb_state_t; /* a benchmark::State */
typedef struct ab_gb_bench_s ab_gb_bench_t; /* a registered benchmark, to configure */

typedef void (*ab_gb_fn)(ab_gb_state_t *st, void *ctx);

/* Counter flags, one to one with benchmark::Counter's. */
enum {
  AB_GB_COUNTER_RATE = 1 << 0,           /* divided by the elapsed time: per second */
  AB_GB_COUNTER_AVG_THREADS = 1 << 1,    /* divided by the thread count */
  AB_GB_COUNTER_INVARIANT = 1 << 2,      /* multiplied by the iterations */
  AB_GB_COUNTER_AVG_ITERATIONS = 1 << 3, /* divided by the iterations: per iteration */
  AB_GB_COUNTER_INVERT = 1 << 4,         /* 1 / value (with RATE: seconds per unit) */
  AB_GB_COUNTER_1024 = 1 << 5,           /* binary prefixes when displayed (Ki, Mi) */
};

typedef enum ab_gb_unit_e { AB_GB_NS, AB_GB_US, AB_GB_MS, AB_GB_S } ab_gb_unit_t;

/* ---- inside a benchmark ------------------------------------------------------------- */

/* True while another iteration should run; the timed region is between two calls. */
bool ab_gb_keep_running(ab_gb_state_t *st);
/* The same, counting n iterations per pass (Google Benchmark's KeepRunningBatch): for bodies
 * too short to time one at a time. */
bool ab_gb_keep_running_batch(ab_gb_state_t *st, int64_t n);
/* The i-th argument of this instance (ab_gb_arg). */
int64_t ab_gb_range(const ab_gb_state_t *st, size_t i);
/* Iterations run so far. */
int64_t ab_gb_iterations(const ab_gb_state_t *st);
/* The time of the iteration just run, for benchmarks registered with manual time. */
void ab_gb_set_iteration_time(ab_gb_state_t *st, double seconds);
/* Sets a named counter reported beside the timings (flags: AB_GB_COUNTER_*). */
void ab_gb_set_counter(ab_gb_state_t *st, const char *name, double value, unsigned flags);
/* Reports items processed, shown as items_per_second. */
void ab_gb_set_items_processed(ab_gb_state_t *st, int64_t items);
/* Marks the run failed with a message; the caller leaves its loop at once. */
void ab_gb_skip_with_error(ab_gb_state_t *st, const char *msg);

/* ---- registration ------------------------------------------------------------------- */

/* Registers fn under name (copied) with ctx; returns the benchmark to configure. */
ab_gb_bench_t *ab_gb_register(const char *name, ab_gb_fn fn, void *ctx);
/* Adds an instance with one argument, read with ab_gb_range(st, 0); its name is NAME/VALUE. */
void ab_gb_arg(ab_gb_bench_t *b, int64_t value);
/* Names the argument: instance names become NAME/ARG_NAME:VALUE. */
void ab_gb_arg_name(ab_gb_bench_t *b, const char *arg_name);
/* The iteration time comes from ab_gb_set_iteration_time, not from the host clock. */
void ab_gb_use_manual_time(ab_gb_bench_t *b);
/* The unit the console shows times in. */
void ab_gb_unit(ab_gb_bench_t *b, ab_gb_unit_t unit);

/* ---- lifecycle ---------------------------------------------------------------------- */

/* Consumes the --benchmark_* flags from argv. On --help it calls usage (may be NULL), lists
 * the library's flags, and exits 0. */
void ab_gb_init(int *argc, char **argv, void (*usage)(void));
/* Records a key and value in the context of the output (the JSON "context" object). */
void ab_gb_add_context(const char *key, const char *value);
/* Runs the selected benchmarks; returns how many ran. */
size_t ab_gb_run(void);
void ab_gb_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif
