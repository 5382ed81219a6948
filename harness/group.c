/* group.c: ranks as threads of one process, in lockstep (group.h).
 *
 * One mutex and one condition variable. A barrier is a generation: the last rank to arrive
 * completes it, writes its verdict and wakes the others, who read the verdict of the
 * generation they waited on (the next barrier cannot complete before they have arrived at
 * it). Once a rank has left, every ENTER stops at once, waiting for nobody; a LAUNCHED
 * barrier always waits for all ranks, so that no communicator is aborted while another
 * rank is still launching. */
#include "group.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct threads_s {
  ab_group_t g;             /* first: the group.h view */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned arrived;         /* at the open barrier */
  unsigned ended;           /* ranks that have left */
  uint64_t generation;      /* barriers completed */
  bool stop;                /* a rank has left or failed a launch: stop at the next barrier */
  char why[512];            /* the first reason to stop */
  bool verdict_go;          /* of the last completed barrier */
  char verdict_why[512];
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
  else
    snprintf(why, size, "rank %u reached the end of its stream", rank);
}

/* The last of the ranks is here (or has left): the open barrier's verdict, for everyone. */
static void complete(threads_t *t) {
  t->verdict_go = !t->stop;
  memcpy(t->verdict_why, t->why, sizeof t->why);
  t->arrived = 0;
  t->generation++;
  pthread_cond_broadcast(&t->cv);
}

static bool threads_arrive(ab_group_t *g, unsigned rank, ab_lockstep_t phase, char *why, size_t size) {
  threads_t *t = threads_of(g);
  pthread_mutex_lock(&t->mu);
  if (phase == AB_LOCKSTEP_FAILED && !t->stop) {
    t->stop = true;
    snprintf(t->why, sizeof t->why, "rank %u could not launch a collective", rank);
  }
  bool go;
  if (phase == AB_LOCKSTEP_ENTER && t->stop) {
    go = false;
    snprintf(why, size, "%s", t->why);
  } else {
    uint64_t gen = t->generation;
    if (++t->arrived + t->ended == g->size) {
      complete(t);
    } else {
      while (t->generation == gen && !(phase == AB_LOCKSTEP_ENTER && t->stop)) pthread_cond_wait(&t->cv, &t->mu);
    }
    if (t->generation != gen) {
      go = t->verdict_go;
      if (!go) snprintf(why, size, "%s", t->verdict_why);
    } else { /* an ENTER given up: a rank left meanwhile */
      t->arrived--;
      go = false;
      snprintf(why, size, "%s", t->why);
    }
  }
  pthread_mutex_unlock(&t->mu);
  return go;
}

static void threads_leave(ab_group_t *g, unsigned rank, const ab_rank_result_t *res) {
  threads_t *t = threads_of(g);
  pthread_mutex_lock(&t->mu);
  t->results[rank] = *res;
  t->ended++;
  if (!t->stop) {
    t->stop = true;
    ab_rank_failure(res, rank, t->why, sizeof t->why);
  }
  /* Ranks waiting at a LAUNCHED barrier wait for every rank still in; none is left to come
   * if this was the last. (A rank leaves between collectives, so this is a safeguard.) */
  if (t->arrived && t->arrived + t->ended == g->size)
    complete(t);
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
  free(t->results);
  free(t);
}

static const ab_group_ops_t threads_ops = {threads_arrive, threads_leave, threads_results, threads_destroy};

ab_status ab_group_threads(unsigned size, ab_group_t **out, ab_diag_t *diag) {
  threads_t *t = calloc(1, sizeof *t);
  ab_rank_result_t *results = calloc(size ? size : 1, sizeof *results);
  if (t == NULL || results == NULL) {
    free(t);
    free(results);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  t->g.ops = &threads_ops;
  t->g.size = size;
  t->results = results;
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  *out = &t->g;
  return AB_OK;
}
