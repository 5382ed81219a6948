/* band.h: a figure's range over the placements the driver is seen to make.
 *
 * On the simulated card, where a segment lies decides which of two equal free blocks a
 * caching allocator reuses, and from there its peak reserved bytes and its device calls. The
 * card places segments by the driver's rules as measured, and also by AB_PLACEMENT_VARIANTS
 * variants of them (sim_place.c, Note [Placement bands]): the band of a run is its figures
 * over the rules and every variant, each a replay of the same stream on a fresh card. Where
 * no placement choice decides anything, every variant replays to the same figures and the
 * band is the point. On a GPU the driver placed the run's segments itself: the band is the
 * run's own figures.
 */
#ifndef AB_BAND_H
#define AB_BAND_H

#include <stdbool.h>
#include <stdint.h>

#include "workloads/events/events.h"
#include "harness/run/bisect.h"
#include "harness/run/engine.h"

typedef struct ab_band_s {
  uint64_t reserved_lo, reserved_hi; /* peak reserved bytes */
  uint64_t allocs_lo, allocs_hi;     /* successful device allocation calls */
  unsigned variants;                 /* variants measured: replayed, or followed alike (0: the band
                                        is the point) */
  unsigned oom_variants;             /* of them, those that ran out of memory */
  unsigned ok_variants;              /* of them, those that completed */
  unsigned worst;                    /* the variant of reserved_hi (0: the rules as measured) */
} ab_band_t;

/* The band of one run: its figures, a point. */
ab_band_t ab_band_point(const ab_run_t *run);

/* Whether the band is a single figure in both. */
bool ab_band_is_point(const ab_band_t *b);

/* Replays es under each placement variant, as ab_bisect_probe replays it with o at budget
 * (o->cap: PyTorch's cap), into run (prepared for es, holding the point run; its figures are
 * the last variant's replayed after), and widens *b, which holds the point run's figures, by
 * theirs. A variant under which the point run ordered every range alike (run->variants_alike)
 * is not replayed: its figures are the point run's. A device other than the simulated card,
 * or a strategy blind to addresses (ab_strategy_address_blind), leaves *b as it is. A variant's error is returned with diag;
 * o->stop ends it early, *b holding the variants replayed so far. */
ab_status ab_band_measure(const ab_events_t *es, const ab_bisect_opts_t *o, uint64_t budget, ab_run_t *run, ab_band_t *b,
                          ab_diag_t *diag);

/* "7.27 GiB" for a point, "7.27 GiB (7.25-7.31)" for a band: the figure and, where it
 * is not a point, its range. */
const char *ab_band_format_bytes(uint64_t point, uint64_t lo, uint64_t hi, char *buf, size_t size);

#endif
