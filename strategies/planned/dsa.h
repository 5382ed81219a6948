/* dsa.h: offline dynamic storage allocation: every lifetime of a known run gets an offset in
 * one address range so that no two that live at the same time overlap, the range as small
 * as the heuristic finds. Layer: strategies (strategies/); used by oracle.c and planned.c.
 *
 * The heuristic is greedy by size with best fit (TFLite's "greedy by size" memory planner,
 * XLA's GlobalDecreasingSizeBestFitHeap): lifetimes from the largest down, each at the
 * smallest gap of the address range that is free for the whole of its life among those
 * already placed, else above them all. In a run of one stream the gaps are read from the
 * free space, kept as cells in an interval tree over time: a placement costs O(log^2 n) plus
 * the cells of the gaps of its life, not the lifetimes it overlaps
 * (Note [Greedy by size over the free space], dsa.c); with several streams it still gathers those.
 * Lifetimes never freed are stacked at the bottom first: they all meet one another.
 * Greedy by size is weak where sizes and lifetimes are drawn at random (RMM's random
 * sequence), so best fit in time order is also run, first, and the smaller of the two kept;
 * greedy by size stops once what it has placed reaches past best fit in time's peak, which
 * it could only lose to (the plan is the one of both run to the end).
 *
 * Two lifetimes overlap in time when each starts before the other ends, an end as the other's
 * stream sees it (ab_lifetime_t: end for the same stream, end_other for another).
 */
#ifndef AB_DSA_H
#define AB_DSA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/status.h"
#include "strategies/strategy.h"

/* Places lt[0..n), sorted by start, each start before its end and its end no later than its
 * end_other (as the engine builds them), each rounded up to align bytes (a power of two):
 * offset[i] receives lt[i]'s offset, *peak the range's size. AB_ERR_OOM when the rounded
 * sizes add up past 2^64 - 1 bytes (ab_dsa_fits: no range could hold them, whatever the
 * placement), AB_ERR_INTERNAL when host memory runs out. */
ab_status ab_dsa_place(const ab_lifetime_t *lt, size_t n, uint64_t align, uint64_t *offset, uint64_t *peak);

/* Greedy by size alone, on the same terms as ab_dsa_place (which keeps the smaller of it and
 * best fit in time): for the tests that compare its placements with the first version's. */
ab_status ab_dsa_greedy_by_size(const ab_lifetime_t *lt, size_t n, uint64_t align, uint64_t *offset, uint64_t *peak);

/* bytes rounded up to align (a power of two); UINT64_MAX when that passes 2^64 - 1. */
uint64_t ab_dsa_round(uint64_t bytes, uint64_t align);

/* Whether the sizes of lt[0..n), each rounded up to align, add up to at most 2^64 - 1;
 * *total receives the sum (UINT64_MAX when they do not). */
bool ab_dsa_fits(const ab_lifetime_t *lt, size_t n, uint64_t align, uint64_t *total);

/* Why ab_dsa_place could not make a plan (AB_ERR_OOM), in diag: "WHO: the N allocations to
 * plan ask more than 2^64 - 1 bytes together (the largest ...)"; returns AB_ERR_INVALID. */
ab_status ab_dsa_refuse(ab_diag_t *diag, const char *who, const ab_lifetime_t *lt, size_t n);

/* The most bytes live at once among lt[0..n), each rounded up to align: the bound no
 * placement can beat; UINT64_MAX when it passes 2^64 - 1. */
uint64_t ab_dsa_live_peak(const ab_lifetime_t *lt, size_t n, uint64_t align);

#endif
