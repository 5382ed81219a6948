/* lifetimes.h: the allocations of an event stream as the lifetimes a planning strategy is
 * handed (Note [Plans], strategy.h). Layer: run (harness/run/).
 *
 * Lifetime i is ALLOC id i (ids are dense, in the order of the ALLOC events). A FREE NOW
 * ends a lifetime where it stands, a FREE COMPLETE where it stands (the REQUEST before it
 * leaves the memory in use); an id never freed ends at UINT64_MAX.
 */
#ifndef AB_LIFETIMES_H
#define AB_LIFETIMES_H

#include <stddef.h>

#include "workloads/events/events.h"
#include "strategies/strategy.h"

/* *out (malloc'd, es->nids entries; NULL when there are none) receives the lifetimes of the
 * finished stream es. AB_ERR_INTERNAL when host memory runs out. */
ab_status ab_lifetimes_build(const ab_events_t *es, ab_lifetime_t **out, size_t *n);

/* Hands s the lifetimes of es when s plans (ab_strategy_plan), else nothing is built. The
 * strategy's error, with the reason in s->dev->diag. */
ab_status ab_lifetimes_plan(const ab_events_t *es, ab_strategy_t *s);

#endif
