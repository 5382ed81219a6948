#include "harness/run/lifetimes.h"

#include <stdlib.h>

ab_status ab_lifetimes_build(const ab_events_t *es, ab_lifetime_t **out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (es->nids == 0) return AB_OK;
  ab_lifetime_t *lt = malloc(es->nids * sizeof *lt);
  if (lt == NULL) return AB_ERR_INTERNAL;
  uint32_t step = 0;
  for (size_t i = 0; i < es->n; i++) {
    const ab_event_t *e = &es->ev[i];
    if (e->kind == AB_EV_STEP) step++;
    if (e->kind == AB_EV_ALLOC) lt[e->id] = (ab_lifetime_t){e->bytes, i, UINT64_MAX, UINT64_MAX, step, e->stream};
    if (e->kind == AB_EV_FREE && e->aux != AB_FREE_REQUEST) lt[e->id].end = i;
  }
  /* Another stream may reuse the memory only once the device has synchronised after the
   * free (strategy.h: frees are stream-ordered): a backward pass over the SYNC events. */
  uint64_t next_sync = UINT64_MAX;
  size_t i = es->n;
  uint64_t *sync_after = malloc((es->n + 1) * sizeof *sync_after);
  if (sync_after == NULL) {
    free(lt);
    return AB_ERR_INTERNAL;
  }
  sync_after[es->n] = UINT64_MAX;
  while (i-- > 0) {
    if (es->ev[i].kind == AB_EV_SYNC) next_sync = i;
    sync_after[i] = next_sync;
  }
  for (uint32_t id = 0; id < es->nids; id++)
    lt[id].end_other = lt[id].end == UINT64_MAX ? UINT64_MAX : sync_after[lt[id].end];
  free(sync_after);
  *out = lt;
  *n = es->nids;
  return AB_OK;
}

ab_status ab_lifetimes_plan(const ab_events_t *es, ab_strategy_t *s) {
  if (!ab_strategy_plans(s)) return AB_OK;
  ab_lifetime_t *lt;
  size_t n;
  if (ab_lifetimes_build(es, &lt, &n) != AB_OK)
    return ab_diag_set(&s->dev->diag, AB_ERR_INTERNAL, "out of host memory building the plan's lifetimes");
  ab_status st = ab_strategy_plan(s, lt, n, &s->dev->diag);
  free(lt);
  return st;
}
