/* group_link.c: ranks as processes of a launch in lockstep (group.h) over their link (link.h):
 * rank 0 hears every rank at each barrier and answers with the verdict; the others hear rank
 * 0 only (Note [Messages through rank 0]). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/clock.h"
#include "harness/ranks/group.h"
#include "harness/ranks/link.h"

#define WHY_BYTES 512

typedef struct verdict_s {
  uint32_t verdict; /* ab_verdict_t: GO, STOP or ABORT */
  char why[WHY_BYTES];
} verdict_t;

typedef struct linked_s {
  ab_group_t g;              /* first: the group.h view */
  ab_link_t *link;           /* not owned */
  /* Rank 0's view. */
  bool *ended;               /* per rank, it has left (or was lost) */
  bool *told;                /* per rank, it was sent a stop */
  bool *arrived;             /* per rank, it is at the barrier being decided */
  bool *want;                /* per rank, a message is awaited from it */
  bool stop;                 /* a rank has left, failed or given up */
  bool abort;                /* and a device may hold an unmatched collective */
  char why[WHY_BYTES];       /* the first reason to stop */
  const char *what;          /* the collective being decided */
  ab_rank_result_t *results; /* per rank, once it has left */
  /* The others' view. */
  bool gone;                 /* rank 0 can no longer be reached */
  char gone_why[WHY_BYTES];
} linked_t;

static linked_t *linked_of(ab_group_t *g) { return (linked_t *)(void *)g; }

static void note_stop(linked_t *t, bool abort, const char *why) {
  t->abort |= abort;
  if (t->stop) return;
  t->stop = true;
  snprintf(t->why, sizeof t->why, "%s", why);
}

/* As in group.c: before a launch a stop leaves nothing unmatched unless a rank vanished or
 * gave up. */
static ab_verdict_t stop_verdict(const linked_t *t, ab_lockstep_t phase) {
  return phase == AB_LOCKSTEP_ENTER && !t->abort ? AB_VERDICT_STOP : AB_VERDICT_ABORT;
}

/* Rank 0 takes a rank's result: it has left. */
static void take_result(linked_t *t, unsigned r, const ab_rank_result_t *res) {
  t->results[r] = *res;
  ab_run_t *run = &t->results[r].run;
  run->ptr = NULL;
  run->live = NULL;
  run->requested = NULL;
  run->timeline = NULL;
  run->step_ms = NULL;
  t->ended[r] = true;
  char why[WHY_BYTES];
  ab_rank_failure(&t->results[r], r, why, sizeof why);
  note_stop(t, false, why);
}

/* Rank 0 lost rank r (why: how): its result says so. It may have died with a collective on
 * its device, so the others abort. */
static void lost(linked_t *t, unsigned r, const char *why) {
  ab_rank_result_t *res = &t->results[r];
  memset(res, 0, sizeof *res);
  res->status = AB_ERR_IO;
  snprintf(res->diag, sizeof res->diag, "%s", why); /* the workload is left for ranks.c to name */
  res->run.status = AB_RUN_ERROR;
  t->ended[r] = true;
  char stop[WHY_BYTES];
  snprintf(stop, sizeof stop, "rank %u was lost", r);
  note_stop(t, true, stop);
}

static void lost_link(linked_t *t, unsigned r) {
  char why[WHY_BYTES];
  snprintf(why, sizeof why, "lost %s before it reported: %s", t->link->engine, t->link->lost);
  lost(t, r, why);
}

static void tell(linked_t *t, unsigned r, ab_verdict_t verdict) {
  verdict_t v;
  memset(&v, 0, sizeof v);
  v.verdict = (uint32_t)verdict;
  if (verdict != AB_VERDICT_GO) snprintf(v.why, sizeof v.why, "%s", t->why);
  if (!t->link->ops->send(t->link, r, AB_MSG_VERDICT, &v, sizeof v)) lost_link(t, r);
  if (verdict != AB_VERDICT_GO) t->told[r] = true;
}

/* Rank 0 hears one message from each rank r with want[r], until the deadline: heard() handles
 * it and says whether that rank is done. DONE once every wanted rank is done; else why the
 * waiting ended, want[] naming the ranks not heard. */
typedef bool (*heard_fn)(linked_t *t, unsigned r, uint32_t kind, const void *payload, size_t bytes);

static ab_wait_t hear_one(linked_t *t, unsigned r, double deadline, heard_fn heard) {
  uint32_t kind = 0;
  void *payload = NULL;
  size_t bytes = 0;
  ab_wait_t w = t->link->ops->recv(t->link, r, &kind, &payload, &bytes, deadline);
  if (w == AB_WAIT_LOST) lost_link(t, r);
  if (w == AB_WAIT_LOST || (w == AB_WAIT_DONE && heard(t, r, kind, payload, bytes))) t->want[r] = false;
  free(payload);
  return w;
}

static ab_wait_t hear_all(linked_t *t, double deadline, heard_fn heard) {
  for (bool any = true; any;) {
    any = false;
    for (unsigned r = 1; r < t->g.size; r++) {
      if (!t->want[r]) continue;
      any = true;
      ab_wait_t w = hear_one(t, r, deadline, heard);
      if (w == AB_WAIT_TIMEOUT) /* the ranks after r may have come: want[] names only those missing */
        for (unsigned q = r + 1; q < t->g.size; q++)
          if (t->want[q]) hear_one(t, q, ab_clock_s() + 0.05, heard);
      if (w == AB_WAIT_TIMEOUT || w == AB_WAIT_STOPPED) return w;
    }
  }
  return AB_WAIT_DONE;
}

/* What a rank says at a barrier: where it is, or its result. */
static bool heard_arrival(linked_t *t, unsigned r, uint32_t kind, const void *payload, size_t bytes) {
  if (kind == AB_MSG_ARRIVE && bytes == sizeof(uint32_t)) {
    uint32_t p;
    memcpy(&p, payload, sizeof p);
    if (p == AB_LOCKSTEP_FAILED) {
      char w[WHY_BYTES];
      snprintf(w, sizeof w, "rank %u could not launch a collective (%s)", r, t->what);
      note_stop(t, true, w);
    }
    t->arrived[r] = true;
  } else if (kind == AB_MSG_LEAVE && bytes == sizeof(ab_rank_result_t)) {
    take_result(t, r, payload);
  } else {
    lost(t, r, "sent rank 0 a message that made no sense");
  }
  return true;
}

/* What a rank says once rank 0 has ended: its result, or where it is (told to stop, then
 * awaited again for its result). */
static bool heard_result(linked_t *t, unsigned r, uint32_t kind, const void *payload, size_t bytes) {
  if (kind == AB_MSG_LEAVE && bytes == sizeof(ab_rank_result_t)) {
    take_result(t, r, payload);
    return true;
  }
  if (kind != AB_MSG_ARRIVE || bytes != sizeof(uint32_t)) {
    lost(t, r, "sent rank 0 a message that made no sense");
    return true;
  }
  uint32_t p;
  memcpy(&p, payload, sizeof p);
  if (!t->told[r]) tell(t, r, stop_verdict(t, (ab_lockstep_t)p));
  return t->ended[r];
}

/* The ranks in want[], for a message. */
static void wanted(const linked_t *t, char *list, size_t size) { ab_rank_list(t->want, t->g.size, list, size); }

static ab_verdict_t root_arrive(linked_t *t, ab_lockstep_t phase, const char *what, char *why, size_t size) {
  t->what = what;
  if (phase == AB_LOCKSTEP_FAILED) {
    char w[WHY_BYTES];
    snprintf(w, sizeof w, "rank 0 could not launch a collective (%s)", what);
    note_stop(t, true, w);
  }
  /* One message from every rank still in: where it is, or its result. */
  memset(t->arrived, 0, t->g.size * sizeof *t->arrived);
  for (unsigned r = 0; r < t->g.size; r++) t->want[r] = r > 0 && !t->ended[r];
  ab_waits_t *ws = &t->link->waits;
  ab_wait_t w = hear_all(t, ab_clock_s() + ws->collective_s, heard_arrival);
  ab_verdict_t v = t->stop ? stop_verdict(t, phase) : AB_VERDICT_GO;
  if (w == AB_WAIT_STOPPED || w == AB_WAIT_TIMEOUT) {
    char list[256];
    wanted(t, list, sizeof list);
    if (w == AB_WAIT_STOPPED)
      snprintf(why, size, "interrupted (%s) while rank 0 waited at %s for %s", ab_signal_name((int)*ws->stop), what, list);
    else
      snprintf(why, size, "rank 0 waited %g s at %s for %s (AB_COLLECTIVE_TIMEOUT)", ws->collective_s, what, list);
    char mine[WHY_BYTES];
    snprintf(mine, sizeof mine, "rank 0 gave up waiting at %s for %s", what, list);
    note_stop(t, true, mine);
    t->link->gave_up = true;
    v = AB_VERDICT_FAIL;
  }
  for (unsigned r = 1; r < t->g.size; r++)
    if (!t->ended[r] && t->arrived[r]) tell(t, r, v == AB_VERDICT_FAIL ? AB_VERDICT_ABORT : v);
  if (v != AB_VERDICT_GO && v != AB_VERDICT_FAIL) snprintf(why, size, "%s", t->why);
  return v;
}

static void gone(linked_t *t) {
  if (t->gone) return;
  t->gone = true;
  snprintf(t->gone_why, sizeof t->gone_why, "lost %s: %s", t->link->engine, t->link->lost);
}

static ab_verdict_t rank_arrive(linked_t *t, ab_lockstep_t phase, const char *what, char *why, size_t size) {
  ab_link_t *l = t->link;
  uint32_t p = (uint32_t)phase;
  if (!t->gone && !l->ops->send(l, 0, AB_MSG_ARRIVE, &p, sizeof p)) gone(t);
  if (t->gone) {
    snprintf(why, size, "rank %u %s", l->rank, t->gone_why);
    return AB_VERDICT_ABORT;
  }
  uint32_t kind = 0;
  void *payload = NULL;
  size_t bytes = 0;
  ab_wait_t w = l->ops->recv(l, 0, &kind, &payload, &bytes, ab_clock_s() + l->waits.collective_s);
  if (w == AB_WAIT_STOPPED || w == AB_WAIT_TIMEOUT) {
    if (w == AB_WAIT_STOPPED)
      snprintf(why, size, "interrupted (%s) while rank %u waited at %s for rank 0 through %s",
               ab_signal_name((int)*l->waits.stop), l->rank, what, l->engine);
    else
      snprintf(why, size, "rank %u waited %g s at %s for rank 0 through %s (AB_COLLECTIVE_TIMEOUT)", l->rank,
               l->waits.collective_s, what, l->engine);
    l->gave_up = true;
    return AB_VERDICT_FAIL;
  }
  verdict_t v;
  bool ok = w == AB_WAIT_DONE && kind == AB_MSG_VERDICT && bytes == sizeof v;
  if (ok) memcpy(&v, payload, sizeof v);
  free(payload);
  if (!ok || v.verdict > AB_VERDICT_ABORT) {
    if (l->lost[0] == '\0') snprintf(l->lost, sizeof l->lost, "rank 0's answer at a barrier made no sense");
    gone(t);
    snprintf(why, size, "rank %u %s", l->rank, t->gone_why);
    return AB_VERDICT_ABORT;
  }
  v.why[sizeof v.why - 1] = '\0';
  if (v.verdict != AB_VERDICT_GO) snprintf(why, size, "%s", v.why);
  return (ab_verdict_t)v.verdict;
}

static ab_verdict_t linked_arrive(ab_group_t *g, unsigned rank, ab_lockstep_t phase, const char *what, char *why,
                                  size_t size) {
  linked_t *t = linked_of(g);
  (void)rank;
  return t->link->rank == 0 ? root_arrive(t, phase, what, why, size) : rank_arrive(t, phase, what, why, size);
}

static void linked_leave(ab_group_t *g, unsigned rank, const ab_rank_result_t *res) {
  linked_t *t = linked_of(g);
  (void)rank;
  if (t->link->rank != 0) {
    /* No waiting here: the communicator's teardown comes next, and NCCL's needs every rank's
     * (Note [Bounded waits]); the link's close sees the message through. */
    if (!t->gone && !t->link->ops->send(t->link, 0, AB_MSG_LEAVE, res, sizeof *res)) gone(t);
    return;
  }
  t->results[0] = *res;
  t->ended[0] = true;
  char why[WHY_BYTES];
  ab_rank_failure(res, 0, why, sizeof why);
  note_stop(t, false, why);
  /* The others are at most at their next ENTER: rank 0 has passed every barrier they have. */
  for (unsigned r = 1; r < g->size; r++)
    if (!t->ended[r] && !t->told[r]) tell(t, r, stop_verdict(t, AB_LOCKSTEP_ENTER));
}

/* Rank 0's last word to every rank: whether it records their rows. */
static void tell_done(linked_t *t, bool ok, const char *why) {
  verdict_t v;
  memset(&v, 0, sizeof v);
  v.verdict = ok;
  snprintf(v.why, sizeof v.why, "%s", why);
  for (unsigned r = 1; r < t->g.size; r++) (void)t->link->ops->send(t->link, r, AB_MSG_DONE, &v, sizeof v);
}

/* A rank other than 0 hears whether rank 0 records its row: a rank 0 interrupted or lost
 * would otherwise leave it saying that rank 0 writes the results. */
static ab_status hear_done(linked_t *t, ab_diag_t *diag) {
  ab_link_t *l = t->link;
  if (t->gone) return ab_diag_set(diag, AB_ERR_IO, "rank %u %s: nothing was recorded", l->rank, t->gone_why);
  if (l->gave_up) /* rank 0 may be what it waited for */
    return ab_diag_set(diag, AB_ERR_IO, "rank %u gave up waiting for rank 0: nothing was recorded", l->rank);
  uint32_t kind = 0;
  void *payload = NULL;
  size_t bytes = 0;
  ab_wait_t w;
  /* Verdicts sent before rank 0 heard that this rank had left are passed over. */
  while ((w = l->ops->recv(l, 0, &kind, &payload, &bytes, ab_clock_s() + l->waits.collective_s)) == AB_WAIT_DONE &&
         kind == AB_MSG_VERDICT)
    free(payload);
  verdict_t v;
  bool ok = w == AB_WAIT_DONE && kind == AB_MSG_DONE && bytes == sizeof v;
  if (ok) memcpy(&v, payload, sizeof v);
  free(payload);
  if (ok && v.verdict) return AB_OK;
  if (ok) {
    v.why[sizeof v.why - 1] = '\0';
    return ab_diag_set(diag, AB_ERR_IO, "rank %u: %s: nothing was recorded", l->rank, v.why);
  }
  if (w == AB_WAIT_STOPPED)
    return ab_diag_set(diag, AB_ERR_IO, "interrupted (%s) while rank %u waited for rank 0 through %s to record the results",
                       ab_signal_name((int)*l->waits.stop), l->rank, l->engine);
  l->gave_up = true;
  if (w == AB_WAIT_TIMEOUT)
    return ab_diag_set(diag, AB_ERR_IO,
                       "rank %u waited %g s for rank 0 through %s to record the results (AB_COLLECTIVE_TIMEOUT): nothing "
                       "was recorded",
                       l->rank, l->waits.collective_s, l->engine);
  return ab_diag_set(diag, AB_ERR_IO, "rank %u lost %s before rank 0 recorded the results: %s", l->rank, l->engine,
                     l->lost[0] ? l->lost : "a message that made no sense");
}

static ab_status linked_results(ab_group_t *g, ab_rank_result_t *all, bool *have, ab_diag_t *diag) {
  linked_t *t = linked_of(g);
  ab_link_t *l = t->link;
  *have = l->rank == 0;
  if (l->rank != 0) return hear_done(t, diag);
  for (unsigned r = 0; r < g->size; r++) t->want[r] = r > 0 && !t->ended[r];
  ab_wait_t w = hear_all(t, ab_clock_s() + l->waits.collective_s, heard_result);
  if (w == AB_WAIT_STOPPED || w == AB_WAIT_TIMEOUT) {
    l->gave_up = true;
    char list[256];
    wanted(t, list, sizeof list);
    if (w == AB_WAIT_STOPPED) {
      char why[WHY_BYTES];
      snprintf(why, sizeof why, "rank 0 was interrupted (%s)", ab_signal_name((int)*l->waits.stop));
      tell_done(t, false, why);
      return ab_diag_set(diag, AB_ERR_IO, "interrupted (%s) while rank 0 waited for the results of %s",
                         ab_signal_name((int)*l->waits.stop), list);
    }
    for (unsigned r = 1; r < g->size; r++) {
      if (!t->want[r]) continue;
      char why[WHY_BYTES];
      snprintf(why, sizeof why, "rank %u did not report within %g s of rank 0's end (AB_COLLECTIVE_TIMEOUT)", r,
               l->waits.collective_s);
      lost(t, r, why);
    }
  }
  /* A signal that came meanwhile stops the rows too (cmd_run.c records nothing then). */
  int sig = l->waits.stop ? (int)*l->waits.stop : 0;
  char why[WHY_BYTES] = "";
  if (sig) snprintf(why, sizeof why, "rank 0 was interrupted (%s)", ab_signal_name(sig));
  tell_done(t, sig == 0, why);
  memcpy(all, t->results, g->size * sizeof *all);
  return AB_OK;
}

static void linked_destroy(ab_group_t *g) {
  linked_t *t = linked_of(g);
  if (t == NULL) return;
  free(t->ended);
  free(t->told);
  free(t->arrived);
  free(t->want);
  free(t->results);
  free(t);
}

static const ab_group_ops_t linked_ops = {linked_arrive, linked_leave, linked_results, linked_destroy};

ab_status ab_group_link(ab_link_t *l, ab_group_t **out, ab_diag_t *diag) {
  linked_t *t = calloc(1, sizeof *t);
  bool ok = t != NULL;
  if (t && l->rank == 0) {
    t->ended = calloc(l->world, sizeof *t->ended);
    t->told = calloc(l->world, sizeof *t->told);
    t->arrived = calloc(l->world, sizeof *t->arrived);
    t->want = calloc(l->world, sizeof *t->want);
    t->results = calloc(l->world, sizeof *t->results);
    ok = t->ended && t->told && t->arrived && t->want && t->results;
  }
  if (!ok) {
    if (t) linked_destroy(&t->g);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  t->g.ops = &linked_ops;
  t->g.size = l->world;
  t->link = l;
  *out = &t->g;
  return AB_OK;
}
