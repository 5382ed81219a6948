/* bisect.h: the smallest budget under which a whole event stream runs through a strategy.
 *
 * A probe replays the stream once on a freshly opened device whose budget is the probed
 * number of bytes, through a freshly created strategy: every probe starts from the same
 * state, so on the simulated card the same budget always gives the same answer. The caller's
 * ab_run_t (prepared once for the stream) is reused by every probe, and the replay loop runs
 * without timing or timeline, so a probe allocates nothing per event.
 *
 * Note [Budget search]
 *   1. hi, by default, is the peak of bytes held from the device by an unbudgeted run (a
 *      probe with no budget): that run never held more, so it is the first budget expected to
 *      pass. hi is probed. A strategy may need more under a budget than it held without one
 *      (the caching family takes the budget as PyTorch's cap, checked against whole segment
 *      sizes), so a default hi that fails is a floor: the search gallops up from it, the step
 *      doubling, to the device's total. A hi given that fails ends the search (none passed).
 *   2. lo, by default, is the stream's peak requested bytes: no strategy can hold less than
 *      its live allocations asked for, so every budget below lo fails without a probe.
 *   3. Bisection between the largest failing budget (at first lo - 1) and the smallest
 *      passing one until they are at most `tolerance` apart: the answer is within tolerance
 *      of the true smallest budget (the true one lies in (max_fail, min_budget]).
 *   4. If no probe failed, lo - 1 is probed once, so that the result always has the failing
 *      run's OOM (its kind, event and segment map); if it passes, the answer is below lo and
 *      the result says so (below_lo).
 * Bisection assumes that a budget which passes is followed by passing ones above it. Caching
 * allocators can break this in rare cases (a different cap changes when memory is released);
 * PyTorch's own bisection of set_per_process_memory_fraction makes the same assumption.
 *
 * What is probed is a budget, the device's hard limit (a card of that size), or with opts.cap
 * PyTorch's memory cap (set_per_process_memory_fraction), which a caching allocator checks
 * itself and which its expandable segments may pass by less than a page
 * (Note [Budget or cap] in bisect.c). PyTorch's own bisections, as in the fixtures, are of the cap.
 *
 * With opts.cap, for a strategy that keeps its cap window (Note [Cap window], strategy.h), no
 * bisection: the cap map (Note [Cap map] in bisect.c) gives the status at every cap, exactly,
 * one replay per interval of caps that replay alike. Its answers: min_budget, the smallest
 * cap that completes; safe_cap, the smallest from which every cap up completes (a cap to
 * deploy, under every placement variant of the simulated card:
 * Note [A safe cap across the band] in bisect.c); max_fail, the largest cap that fails (safe_cap - 1 but where a variant
 * raised the safe cap), with its OOM.
 *
 * Traces whose program caught OOMs and went on (ab_events_t.trace_ooms > 0) changed course
 * under memory pressure; a replay cannot know what the program would have done under a
 * smaller budget, so for them the budget found is an upper bound (upper_bound in the result).
 *
 * Statuses: AB_OK when the search ran (whatever it found); AB_ERR_INVALID for bad options
 * (lo > hi, a zero tolerance, a budget above the device's total, a bad strategy or conf);
 * otherwise the device's or strategy's error of the probe that failed, with diag set.
 * Not thread-safe: one search per ab_run_t.
 */
#ifndef AB_BISECT_H
#define AB_BISECT_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/device/device.h"
#include "workloads/events/events.h"
#include "harness/run/engine.h"
#include "harness/run/pipeline.h"
#include "harness/run/prefix.h"

#define AB_BISECT_DEFAULT_TOLERANCE_BYTES (1ULL << 20)

typedef struct ab_supervise_child_s ab_supervise_child_t; /* supervise.h */

/* One interval of the cap map: every cap of [lo, hi] replays to the same run. */
typedef struct ab_cap_class_s {
  uint64_t lo, hi;  /* bytes; hi UINT64_MAX: every cap from lo up */
  bool ok;          /* the run completed; else it ran out of memory */
  size_t oom_event; /* the event of its OOM */
  unsigned alike;   /* the placement variants under which it replays alike (ab_run_t.variants_alike) */
} ab_cap_class_t;

/* The cap map of a search, in ascending caps, each interval starting where the one before
 * ended. The caller owns it: zeroed to start, ab_capmap_free to end. */
typedef struct ab_capmap_s {
  ab_cap_class_t *classes;
  size_t n, room;
} ab_capmap_t;

void ab_capmap_free(ab_capmap_t *m);

/* The ranges of caps above `above` that fail, the map's adjacent failing intervals merged, in
 * ascending caps: up to max of them into ranges ([0] the first cap, [1] the last); returns how
 * many there are (which may be more than max). */
size_t ab_capmap_fail_ranges(const ab_capmap_t *m, uint64_t above, uint64_t (*ranges)[2], size_t max);

typedef struct ab_bisect_opts_s {
  const char *strategy;      /* a registry name */
  const char *conf;          /* its -c options; NULL for none */
  const char *device;        /* a device spec (device.h); NULL: auto */
  ab_device_config_t dev;    /* faults and cost model; the budget is set per probe */
  uint64_t lo, hi;           /* the range searched; 0: the defaults above */
  uint64_t tolerance;        /* bytes; 0: AB_BISECT_DEFAULT_TOLERANCE_BYTES */
  bool check;                /* run the strategy's invariant checks after every event */
  bool cap;                  /* probe PyTorch's memory cap, not a device budget (Note
                                [Budget or cap], bisect.c); only for strategies that take
                                per_process_memory_fraction */
  /* Called at each failing probe's OOM (the engine's on_oom hook), so that what it keeps
   * ends with max_fail's OOM: ab_oommap_capture and a map (oommap.h); may be NULL. */
  void (*on_oom)(void *ctx, ab_strategy_t *s, const ab_run_t *run);
  void *on_oom_ctx;
  const volatile sig_atomic_t *stop; /* nonzero: the probe in progress stops (engine.h) and
                                        the search ends, interrupted; may be NULL */
  /* Called after each probe (budget 0: the unbudgeted run); may be NULL. */
  void (*on_probe)(void *ctx, uint64_t budget, const ab_run_t *run);
  void *on_probe_ctx;
  ab_capmap_t *map;  /* with cap: the cap map's intervals go here (emptied first); may be NULL */
  unsigned map_probes; /* with cap: the most replays the map may take, else the caps are
                          bisected and the result says so (map_cut); 0: no limit */
  bool no_map;         /* with cap: bisect the caps, as if the status were monotonic */
  unsigned band_probes; /* with cap: the most replays each placement variant's walk of the safe
                           cap may take (Note [A safe cap across the band], bisect.c); 0: two
                           thirds of the map's, and eight (ab_bisect_band_budget) */
  bool defer_band;      /* with cap: leave those walks to the caller (ab_bisect_band_walk): the
                           result's band_checked is 0 until it merges them, but where the map
                           answers every one of them (Note [Walks the map answers], bisect.c) */
  uint64_t unbudgeted_peak; /* the device's peak held bytes in an unbudgeted run of es under these
                               options that the caller made and that completed, which the search
                               then does not make again (Note [Budget search], 1; on_probe is not
                               called for it); 0: it makes it */
  /* with cap, and no on_oom: the places a run of es under these options was kept at, from which
   * a probe goes on where one allows its cap (Note [A prefix shared], prefix.h); may be NULL */
  ab_prefix_t *prefix;
  size_t prefix_every; /* with cap: the walks of the safe cap keep their first probe every this
                          many events for the others (prefix.h); 0: AB_PREFIX_PLACES places
                          spread over a stream of AB_PREFIX_MIN_EVENTS or more, none below */
} ab_bisect_opts_t;

/* The most intervals of a map from its safe cap up that a result keeps for the walks. */
#define AB_BISECT_ABOVE 64

typedef struct ab_bisect_result_s {
  bool passed;              /* a probed budget passed: min_budget is set */
  bool failed;              /* a probed budget failed: max_fail and oom are set */
  bool below_lo;            /* lo - 1 passed: the answer is below lo (lo was not a bound) */
  bool upper_bound;         /* the trace's program survived OOMs (trace_ooms > 0) */
  bool cap;                 /* the numbers are PyTorch's memory caps (opts.cap), not budgets */
  bool interrupted;         /* opts.stop ended the search before it had an answer */
  bool mapped;              /* the cap map was walked: the answers below are exact */
  bool map_cut;             /* the map needed more than opts.map_probes replays: bisected */
  uint64_t min_budget;      /* smallest budget seen to pass, bytes */
  uint64_t max_fail;        /* largest budget seen to fail, bytes (0 with no budget) */
  uint64_t safe_cap;        /* mapped: every cap from it up completes (0: none does) */
  unsigned fail_ranges;     /* mapped: ranges of failing caps above min_budget */
  bool band_raised;         /* mapped: a placement variant failed above the map's safe cap, which
                               safe_cap is past (Note [A safe cap across the band], bisect.c) */
  unsigned band_probes;     /* the variants' replays that checked safe_cap (counted in probes too) */
  uint64_t band_checked;    /* mapped: safe_cap holds under every variant for every cap below this
                               (UINT64_MAX: every cap); a check cut short stops below the top;
                               0: the variants were not walked (opts.defer_band) */
  unsigned intervals;       /* mapped: the map's intervals (replays), which size the variants' walks */
  ab_cap_class_t above[AB_BISECT_ABOVE]; /* mapped: its intervals from the safe cap up, in order, */
  unsigned nabove;                       /* as many as fit (Note [Walks the map answers], bisect.c) */
  uint64_t top;             /* mapped: the highest cap walked to (hi, or the card's total) */
  uint64_t peak_requested;  /* of the stream */
  uint64_t lo, hi;          /* the range searched, defaults applied */
  uint64_t tolerance;
  ab_oom_info_t oom;        /* the OOM of the probe at max_fail */
  ab_stats_t oom_stats;     /* the strategy's statistics at that OOM */
  unsigned probes;          /* replays made, the unbudgeted one included */
  double wall_s;            /* host time of the whole search */
  char device[96];          /* the device that ran ("sim:h200") */
} ab_bisect_result_t;

/* The highest sum of requested bytes of the live allocations of es (an allocation is live
 * from its ALLOC until its free completes). */
uint64_t ab_bisect_peak_requested(const ab_events_t *es);

/* One probe: es through a fresh strategy on a fresh device with the budget (0: none) into
 * run, with the engine options ro (NULL: no timing, no timeline; o->check applies). The
 * device's peak held bytes go to *held_peak and its name to device (may be NULL). AB_OK when
 * the run completed or ended in OOM (see run->status). Without ro, a library's probe is made
 * in a process of its own (ab_supervise_apart), where an on_oom of o can only be
 * ab_oommap_capture, its map filled from the child's. */
ab_status ab_bisect_probe(const ab_events_t *es, const ab_bisect_opts_t *o, uint64_t budget, const ab_run_opts_t *ro,
                          ab_run_t *run, uint64_t *held_peak, char device[96], ab_diag_t *diag);

/* Places for the probes of es under o to go on from (Note [A prefix shared], prefix.h), for
 * one run to be kept at: on the simulated card, no on_oom, a strategy in this process, and a
 * stream long enough (or o->prefix_every set); a search of the cap, or of the budget of a
 * strategy that keeps no cap (Note [Budget window], device.h); spread over the caps from
 * floor up besides (0: the stream's peak requested bytes, where a search starts). NULL where
 * none can be kept. */
ab_prefix_t *ab_bisect_prefix_open(const ab_events_t *es, const ab_bisect_opts_t *o, uint64_t floor);

/* ab_bisect_probe with the engine options ro (not NULL), its run kept at p's places as it goes
 * (p may be NULL: a plain probe). A copy that went on from one of them under another cap
 * answers its probe and ends in here (ab_prefix_answer). */
ab_status ab_bisect_probe_kept(const ab_events_t *es, const ab_bisect_opts_t *o, uint64_t budget, const ab_run_opts_t *ro,
                               ab_prefix_t *p, ab_run_t *run, uint64_t *held_peak, char device[96], ab_diag_t *diag);

/* Checks o's strategy and conf (and, with o->cap, that the strategy takes a cap) on its
 * device, and describes the device in *closed; the search does it before its first probe. */
ab_status ab_bisect_check(const ab_bisect_opts_t *o, ab_world_t *closed, ab_diag_t *diag);

/* The search of Note [Budget search], with run prepared for es. */
ab_status ab_bisect_search(const ab_events_t *es, const ab_bisect_opts_t *o, ab_run_t *run, ab_bisect_result_t *out,
                           ab_diag_t *diag);

/* One placement variant's walk of a mapped result's safe cap
 * (Note [A safe cap across the band], bisect.c): what it found, for ab_bisect_band_merge. */
typedef struct ab_band_walk_s {
  uint64_t safe_cap; /* past the highest interval that failed; 0: none failed */
  uint64_t checked;  /* walked every cap below this (UINT64_MAX: to the top) */
  bool none;         /* every cap up to the top failed: no cap is safe */
  bool interrupted;  /* opts.stop ended it */
  unsigned probes;
} ab_band_walk_t;

/* The most replays one variant's walk takes under o for res. */
unsigned ab_bisect_band_budget(const ab_bisect_opts_t *o, const ab_bisect_result_t *res);

/* Walks variant (1 .. AB_PLACEMENT_VARIANTS) up from res's safe cap, with run prepared for es,
 * into *w; a result that is not mapped, has no safe cap, or whose strategy is blind to
 * addresses needs no walk (w says nothing). Variants' walks are independent: each may run on
 * its own thread with its own run. */
ab_status ab_bisect_band_walk(const ab_events_t *es, const ab_bisect_opts_t *o, const ab_bisect_result_t *res,
                              unsigned variant, ab_run_t *run, ab_band_walk_t *w, ab_diag_t *diag);

/* Takes the walks of res's variants (n of them; fewer only when one was interrupted) into res:
 * its safe cap raised past every variant's failures, band_checked, band_raised, the probes. */
void ab_bisect_band_merge(ab_bisect_result_t *res, const ab_band_walk_t *w, unsigned n);

/* The child's side of a library's probe, made in a process of its own (ab_bisect_probe
 * without engine options, Note [A library in a process of its own], supervise.h): reads the
 * job, probes, writes the results; whether they were written whole. */
bool ab_bisect_probe_child(ab_supervise_child_t *c);

#endif
