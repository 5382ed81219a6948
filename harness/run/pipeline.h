/* pipeline.h: the one way a run is put together and taken apart.
 *
 *   open    the device from its spec and configuration (device_open.h), then the strategy
 *           by name with its preset and the user's conf (registry.h), given a memory cap
 *           when one is asked for, and wrapped when a wrapper is given (the recording
 *           adaptor of --export-*)
 *   ...     the caller replays events through the engine (engine.h), once or many times
 *   close   the strategy destroyed, then the device closed with the leak check: a strategy
 *           that leaks device memory fails the run, whatever it measured
 *
 * Every run goes through it: run, replay, matrix and compare (ab_run_one), each probe of
 * the budget search, each rank, the micro-benchmarks and torch_compare. "Can this strategy
 * be made with this conf on this device" is ab_pipeline_check, asked once before a command
 * starts its work.
 */
#ifndef AB_PIPELINE_H
#define AB_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/device/device.h"
#include "harness/run/engine.h"
#include "strategies/strategy.h"

typedef struct ab_supervise_child_s ab_supervise_child_t; /* supervise.h */

typedef struct ab_pipeline_s {
  const char *device;     /* a spec for ab_device_open ("auto", "sim:h200", "cuda:1") */
  ab_device_config_t dev; /* budget, faults, address plan, cost model */
  const char *strategy;   /* a name of the registry */
  const char *conf;       /* the user's conf; NULL: none */
  /* The strategy's memory cap in bytes, given to it as PyTorch's per_process_memory_fraction
   * of the device (Note [Budget or cap], bisect.c); 0: none. */
  uint64_t memory_cap;
  /* Optional: replaces *s by a strategy that wraps it and owns it. On failure *s is still
   * the caller's to destroy. */
  ab_status (*wrap)(void *ctx, ab_strategy_t **s, ab_diag_t *diag);
  void *wrap_ctx;
} ab_pipeline_t;

/* What a run stands on. After close, the fields below s describe the closed device. */
typedef struct ab_world_s {
  ab_device_t *dev;
  ab_strategy_t *s;
  char device[96];       /* what ran ("sim:h200", "cuda:0 NVIDIA H200"), not what was asked for */
  ab_device_kind_t kind;
  uint64_t total_bytes;  /* the card's total */
  uint64_t held_peak;    /* the most bytes the device held */
} ab_world_t;

/* The cap (< total) as a fraction of the card, in the fewest digits from which PyTorch's
 * (size_t)(fraction * total) makes the cap again: a cap given as 0.06x reads 0.06, as the user
 * would write per_process_memory_fraction in -c, and runs to the same bytes. */
void ab_pipeline_cap_fraction(uint64_t cap, uint64_t total, char *buf, size_t size);

/* The conf the strategy gets on a card of total bytes: p->conf, with p->memory_cap as
 * per_process_memory_fraction when there is one. */
ab_status ab_pipeline_conf(const ab_pipeline_t *p, uint64_t total, char *buf, size_t size, ab_diag_t *diag);

/* Opens the device and makes the strategy. On failure nothing is left open; diag says why
 * (an unknown strategy, a bad conf, no such device). On success diag may hold the strategy's
 * note (keys accepted without effect). */
ab_status ab_pipeline_open(const ab_pipeline_t *p, ab_world_t *w, ab_diag_t *diag);

/* What a run refuses of an open world that the strategy itself takes (PyTorch's
 * per_process_memory_fraction:0, a cap of 0 bytes). ab_pipeline_check says it too. */
ab_status ab_pipeline_runnable(const ab_pipeline_t *p, const ab_world_t *w, ab_diag_t *diag);

/* The figures of w's device that ab_pipeline_close takes (device, kind, total_bytes,
 * held_peak), the strategy and device left open: for a process that ends after its run
 * (ab_run_t.last), where closing would only write pages. */
void ab_pipeline_leave(ab_world_t *w);

/* Destroys the strategy and closes the device. A leak is AB_ERR_INVALID, said in diag (may be
 * NULL); when run is not NULL and holds no error yet, it becomes the run's error. */
ab_status ab_pipeline_close(ab_world_t *w, ab_run_t *run, ab_diag_t *diag);

/* Opens and closes at once: the check that p can run, before any work. *closed describes the
 * device (when closed is not NULL). A refusal of p (an unknown strategy, a bad conf) is
 * AB_ERR_INVALID; a supervised library that took its process down as it was loaded (a crash
 * in a constructor or its init, a deadline passed) is AB_ERR_IO: its run fails the same way. */
ab_status ab_pipeline_check(const ab_pipeline_t *p, ab_world_t *closed, ab_diag_t *diag);

/* The child's side of a library's check, made in a process of its own (ab_pipeline_check,
 * Note [A library in a process of its own], supervise.h): reads the job, checks, writes the
 * results; whether they were written whole. */
bool ab_pipeline_check_child(ab_supervise_child_t *c);

#endif
