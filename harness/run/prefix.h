/* prefix.h: the replays of one configuration under different caps, sharing the events they
 * replay alike.
 *
 * Note [A prefix shared]
 * A replay under a cap makes every decision as a replay under another cap does until the first
 * decision the two caps take apart (Note [Taking a cap mid-run], strategy.h): its events up
 * to there are the other's. On a long trace that is much of them: a cap map's probes near the
 * peak refuse their first segment late in the run. So the configuration's first run, the
 * source, is kept at a few places as it goes (its process forked there, the copy waiting),
 * each with the caps its decisions so far allow; a probe under a cap goes on from the latest
 * place that allows it, in a copy of that copy, which takes the cap (ab_strategy_take_cap),
 * replays the rest, sends its run back and ends. Where no place allows the cap, or the copy
 * fails, the probe replays from the start as before: the results are the same either way,
 * only the time differs. On a random snapshot of 1.45 M entries most of tune's probes went on
 * from the fifth of eight places (5/9 of the stream), and tune replayed 108 M events where it
 * had replayed 235 M; under max_split_size_mb, whose uncapped run holds far more than any cap
 * probed, no place allows a probe's cap.
 *
 * Besides the places every n/9 events, the source is kept where its window passes the caps
 * the search probes most (Note [Places by the caps], prefix.c).
 *
 * A search of a budget shares its prefix the same way: a run under one budget makes every
 * check as a run under another does until the first check the two take apart
 * (Note [Budget window], device.h), and a copy takes its budget from the device's window. On a
 * random snapshot of 15 M entries the budget searches of raw, pooled and async replayed
 * 81 M events where they had replayed 139 M (raw and async 1.2 M each, where a budget refuses
 * their first allocation past it and the run ends).
 *
 * Only where a fork keeps the whole replay: the simulated card (a CUDA context does not cross
 * a fork), a strategy in this process (not a library's, supervise.h), and a trace long enough
 * that a fork (a few milliseconds) is worth it (AB_PREFIX_MIN_EVENTS). Each place is a process
 * that holds the pages the run has written since, at most AB_PREFIX_PLACES of them by the
 * events and AB_PREFIX_CAP_PLACES by the caps, none where the host has less than
 * AB_PREFIX_MIN_HOST_BYTES left. They end with ab_prefix_close,
 * with the thread that opened them (PR_SET_PDEATHSIG), or when their pipe closes.
 *
 * Thread-safety: a prefix belongs to the thread that opened it.
 */
#ifndef AB_PREFIX_H
#define AB_PREFIX_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/status.h"
#include "harness/run/engine.h"
#include "strategies/strategy.h"

#define AB_PREFIX_PLACES 8
#define AB_PREFIX_CAP_PLACES 16
#define AB_PREFIX_LOOK 4096 /* events between two looks of the source run for a place due */
#define AB_PREFIX_MIN_EVENTS (1u << 18)
#define AB_PREFIX_MIN_HOST_BYTES (1ull << 30)

typedef struct ab_prefix_s ab_prefix_t;

/* A prefix for the runs of a stream of `events` events, its places `every` events apart (0:
 * AB_PREFIX_PLACES spread over the stream, none below AB_PREFIX_MIN_EVENTS), and others spread
 * over the caps from `floor` up (Note [Places by the caps], prefix.c); stop as the runs' (may
 * be NULL). Its runs differ by the strategy's cap, or with budget by the device's budget
 * (Note [Budget window], device.h), which is then what its "caps" are. NULL when there is no
 * room for it. */
ab_prefix_t *ab_prefix_open(size_t events, size_t every, uint64_t floor, bool budget, const volatile sig_atomic_t *stop);

/* The source run's options keep it at its places: checkpoint, checkpoint_ctx and
 * checkpoint_every of o set (engine.h). */
void ab_prefix_source(ab_prefix_t *p, ab_run_opts_t *o);

/* Whether this process is a copy that went on from a place under another cap: its replay of
 * the source run has ended, and the caller hands its results to ab_prefix_answer. */
bool ab_prefix_resumed(const ab_prefix_t *p);

/* In such a copy: sends the run's results, and ends the process. */
_Noreturn void ab_prefix_answer(const ab_prefix_t *p, ab_status st, const ab_run_t *run, uint64_t held_peak,
                                const char *device, const ab_diag_t *diag);

/* A run under cap from the latest place that allows it, into run, held_peak and device, as
 * ab_bisect_probe would make it; *resumed false (nothing run) where no place allows it or the
 * copy could not go on. Its events are added to run->replayed. Stopped through p's stop, the
 * run is interrupted. */
ab_status ab_prefix_probe(ab_prefix_t *p, uint64_t cap, ab_run_t *run, uint64_t *held_peak, char device[96], bool *resumed,
                          ab_diag_t *diag);

/* Ends the places and frees p; p may be NULL. */
void ab_prefix_close(ab_prefix_t *p);

#endif
