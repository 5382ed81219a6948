/* group.c: ranks as threads of one process, in lockstep (group.h).
 *
 * One mutex and one condition variable. A barrier is a generation: the last rank to arrive
 * completes it, writes its verdict and wakes the others, who read the verdict of the
 * generation they waited on (the next barrier cannot complete before they have arrived at
 * it). Once a rank has left, every ENTER stops at once, waiting for nobody; a LAUNCHED
 * barrier waits for all ranks, so that no communicator is aborted while another rank is
 * still launching, unless a rank gave up waiting (Note [Bounded waits]): then every waiting
 * rank stops and aborts. */
#include "harness/ranks/group.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/base/clock.h"

typedef struct threads_s {
  ab_group_t g;             /* first: the group.h view */
  ab_waits_t waits;
  pthread_mutex_t mu;
  pthread_cond_t cv;        /* on CLOCK_MONOTONIC */
  unsigned arrived;         /* at the open barrier */
  unsigned ended;           /* ranks that have left */
  uint64_t generation;      /* barriers completed */
  bool stop;                /* a rank has left, failed a launch or given up: stop at the next barrier */
  bool abort;               /* and a device may hold an unmatched collective */
  char why[512];            /* the first reason to stop */
  ab_verdict_t verdict;     /* of the last completed barrier */
  char verdict_why[512];
  bool *here;               /* per rank: at the open barrier */
  bool *left;               /* per rank: has left */
  ab_rank_result_t *results; /* per rank, once it has left */
} threads_t;

static threads_t *threads_of(ab_group_t *g) { return (threads_t *)(void *)g; }

void ab_rank_failure(const ab_rank_result_t *res, unsigned rank, char *why, size_t size) {
  const ab_run_t *r = &res->run;
  if (res->status != AB_OK || r->status == AB_RUN_ERROR)
    snprintf(why, size, "rank %u failed: %s", rank, res->status != AB_OK ? res->diag : r->message);
  else if (r->status == AB_RUN_OOM)
    snprintf(why, size, "rank %u ran out of memory at event %zu (%s)", rank, r->oom.event,
             ab_oom_kind_name(r->oom.kind));
  else if (r->status == AB_RUN_STOPPED)
    snprintf(why, size, "rank %u stopped", rank);
  else if (r->status == AB_RUN_INTERRUPTED)
    snprintf(why, size, "rank %u was interrupted", rank);
  else
    snprintf(why, size, "rank %u reached the end of its stream", rank);
}

void ab_rank_list(const bool *pick, unsigned n, char *buf, size_t size) {
  unsigned count = 0, shown = 0, last = 0;
  for (unsigned r = 0; r < n; r++)
    if (pick[r]) count++;
  size_t at = (size_t)snprintf(buf, size, count == 1 ? "rank " : count ? "ranks " : "no rank");
  for (unsigned r = 0; r < n && at < size; r++) {
    if (!pick[r]) continue;
    last = r;
    if (++shown == count && count > 1) break; /* the last one goes after "and" */
    if (shown > 8) { /* a long list is cut: the count says how many */
      at += (size_t)snprintf(buf + at, size - at, "%s... (%u ranks in all)", shown > 1 ? ", " : "", count);
      return;
    }
    at += (size_t)snprintf(buf + at, size - at, "%s%u", shown > 1 ? ", " : "", r);
  }
  if (count > 1 && at < size) snprintf(buf + at, size - at, " and %u", last);
}

/* The first reason to stop wins; abort sticks once any reason needs it. */
static void note_stop(threads_t *t, bool abort, const char *why) {
  t->abort |= abort;
  if (t->stop) return;
  t->stop = true;
  snprintf(t->why, sizeof t->why, "%s", why);
}

/* What a stop means for a rank at this phase: before a launch nothing is unmatched, unless
 * a rank vanished or gave up; after it, the collective is on some devices. */
static ab_verdict_t stop_verdict(const threads_t *t, ab_lockstep_t phase) {
  return phase == AB_LOCKSTEP_ENTER && !t->abort ? AB_VERDICT_STOP : AB_VERDICT_ABORT;
}

/* The last of the ranks is here (or has left): the open barrier's verdict, for everyone. */
static void complete(threads_t *t, ab_lockstep_t phase) {
  t->verdict = t->stop ? stop_verdict(t, phase) : AB_VERDICT_GO;
  memcpy(t->verdict_why, t->why, sizeof t->why);
  t->arrived = 0;
  memset(t->here, 0, t->g.size * sizeof *t->here);
  t->generation++;
  pthread_cond_broadcast(&t->cv);
}

static void wait_slice(threads_t *t, double deadline) {
  double until = ab_clock_s() + AB_WAIT_SLICE_MS * 1e-3;
  if (until > deadline) until = deadline;
  struct timespec ts = {(time_t)until, (long)((until - floor(until)) * 1e9)};
  pthread_cond_timedwait(&t->cv, &t->mu, &ts);
}

/* Rank `rank` gives up the open barrier (deadline or signal): the others are told to stop
 * and abort, and why says whom it waited for. */
static ab_verdict_t give_up(threads_t *t, unsigned rank, int sig, const char *what, char *why, size_t size) {
  t->here[rank] = false;
  t->arrived--;
  bool *missing = calloc(t->g.size, sizeof *missing);
  char list[256] = "the others";
  if (missing) {
    for (unsigned r = 0; r < t->g.size; r++) missing[r] = !t->here[r] && !t->left[r] && r != rank;
    ab_rank_list(missing, t->g.size, list, sizeof list);
    free(missing);
  }
  if (sig)
    snprintf(why, size, "interrupted (%s) while rank %u waited at %s for %s", ab_signal_name(sig), rank, what,
             list);
  else
    snprintf(why, size, "rank %u waited %g s at %s for %s (AB_COLLECTIVE_TIMEOUT)", rank,
             t->waits.collective_s, what, list);
  char mine[512];
  snprintf(mine, sizeof mine, "rank %u gave up waiting at %s", rank, what);
  note_stop(t, true, mine);
  pthread_cond_broadcast(&t->cv);
  return AB_VERDICT_FAIL;
}

static ab_verdict_t threads_arrive(ab_group_t *g, unsigned rank, ab_lockstep_t phase, const char *what, char *why,
                                   size_t size) {
  threads_t *t = threads_of(g);
  pthread_mutex_lock(&t->mu);
  if (phase == AB_LOCKSTEP_FAILED) {
    char w[512];
    snprintf(w, sizeof w, "rank %u could not launch a collective (%s)", rank, what);
    note_stop(t, true, w);
  }
  ab_verdict_t v = AB_VERDICT_GO;
  if (phase == AB_LOCKSTEP_ENTER && t->stop) {
    v = stop_verdict(t, phase);
    snprintf(why, size, "%s", t->why);
    pthread_mutex_unlock(&t->mu);
    return v;
  }
  uint64_t gen = t->generation;
  t->here[rank] = true;
  if (++t->arrived + t->ended == g->size) {
    complete(t, phase);
  } else {
    double deadline = ab_clock_s() + t->waits.collective_s;
    /* At ENTER any stop ends the wait; at LAUNCHED only one that aborts, since the others'
     * launches must be over before anyone aborts (Note [Ranks in lockstep]). */
    while (t->generation == gen && !(t->stop && (phase == AB_LOCKSTEP_ENTER || t->abort))) {
      int sig = t->waits.stop ? (int)*t->waits.stop : 0;
      if (sig || ab_clock_s() >= deadline) {
        v = give_up(t, rank, sig, what, why, size);
        pthread_mutex_unlock(&t->mu);
        return v;
      }
      wait_slice(t, deadline);
    }
  }
  if (t->generation != gen) {
    v = t->verdict;
    if (v != AB_VERDICT_GO) snprintf(why, size, "%s", t->verdict_why);
  } else { /* given up: a rank left or gave up meanwhile */
    t->here[rank] = false;
    t->arrived--;
    v = stop_verdict(t, phase);
    snprintf(why, size, "%s", t->why);
  }
  pthread_mutex_unlock(&t->mu);
  return v;
}

static void threads_leave(ab_group_t *g, unsigned rank, const ab_rank_result_t *res) {
  threads_t *t = threads_of(g);
  pthread_mutex_lock(&t->mu);
  t->results[rank] = *res;
  t->left[rank] = true;
  t->ended++;
  if (!t->stop) {
    char why[512];
    ab_rank_failure(res, rank, why, sizeof why);
    note_stop(t, false, why);
  }
  /* Ranks waiting at a LAUNCHED barrier wait for every rank still in; none is left to come
   * if this was the last. (A rank leaves between collectives, so this is a safeguard.) */
  if (t->arrived && t->arrived + t->ended == g->size)
    complete(t, AB_LOCKSTEP_LAUNCHED);
  else
    pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

static ab_status threads_results(ab_group_t *g, ab_rank_result_t *all, bool *have, ab_diag_t *diag) {
  threads_t *t = threads_of(g);
  pthread_mutex_lock(&t->mu);
  bool done = t->ended == g->size;
  if (done) memcpy(all, t->results, g->size * sizeof *all);
  pthread_mutex_unlock(&t->mu);
  *have = done;
  return done ? AB_OK : ab_diag_set(diag, AB_ERR_INTERNAL, "results asked for before every rank ended");
}

static void threads_destroy(ab_group_t *g) {
  threads_t *t = threads_of(g);
  if (t == NULL) return;
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv);
  free(t->here);
  free(t->left);
  free(t->results);
  free(t);
}

static const ab_group_ops_t threads_ops = {threads_arrive, threads_leave, threads_results, threads_destroy};

ab_status ab_group_threads(unsigned size, const ab_waits_t *w, ab_group_t **out, ab_diag_t *diag) {
  threads_t *t = calloc(1, sizeof *t);
  unsigned n = size ? size : 1;
  if (t) {
    t->results = calloc(n, sizeof *t->results);
    t->here = calloc(n, sizeof *t->here);
    t->left = calloc(n, sizeof *t->left);
  }
  if (t == NULL || !t->results || !t->here || !t->left) {
    if (t) {
      free(t->results);
      free(t->here);
      free(t->left);
    }
    free(t);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  t->g.ops = &threads_ops;
  t->g.size = size;
  t->waits = *w;
  pthread_mutex_init(&t->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&t->cv, &ca);
  pthread_condattr_destroy(&ca);
  *out = &t->g;
  return AB_OK;
}
