/* link_store.c: the messages of a launch through torchrun's store (link.h,
 * Note [Messages through rank 0]; store.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/clock.h"
#include "harness/ranks/link.h"
#include "harness/ranks/store.h"

typedef struct store_link_s {
  ab_link_t l;       /* first: the link.h view */
  ab_store_t *s;
  char prefix[256];  /* PREFIX/USE/ */
  uint64_t *sent;    /* per peer: messages sent to it */
  uint64_t *got;     /* per peer: messages received from it */
  char last[300];    /* the last key set, for the check at close */
} store_link_t;

static store_link_t *store_of(ab_link_t *l) { return (store_link_t *)(void *)l; }

static void lose(store_link_t *x, const ab_diag_t *d) {
  if (x->l.lost[0] == '\0') snprintf(x->l.lost, sizeof x->l.lost, "%s", d->msg);
}

/* The key of message k from a to b, chunk c (0: the first, which says the length). */
static void key_of(const store_link_t *x, unsigned a, unsigned b, uint64_t k, size_t c, char *key, size_t size) {
  if (c == 0) snprintf(key, size, "%sm/%u/%u/%" PRIu64, x->prefix, a, b, k);
  else snprintf(key, size, "%sm/%u/%u/%" PRIu64 ".%zu", x->prefix, a, b, k, c);
}

/* The message's bytes: its kind and payload, in chunks; the first chunk, set last, begins with
 * the total, so that the receiver finds every other chunk there once it sees the first. */
static bool store_send(ab_link_t *l, unsigned to, uint32_t kind, const void *payload, size_t bytes) {
  store_link_t *x = store_of(l);
  size_t total = sizeof kind + bytes;
  unsigned char *buf = malloc(sizeof(uint64_t) + total);
  ab_diag_t d = {""};
  if (buf == NULL) {
    snprintf(l->lost, sizeof l->lost, "out of host memory");
    return false;
  }
  uint64_t t = total;
  memcpy(buf, &t, sizeof t);
  memcpy(buf + sizeof t, &kind, sizeof kind);
  if (bytes) memcpy(buf + sizeof t + sizeof kind, payload, bytes);
  size_t all = sizeof t + total, chunks = (all + AB_STORE_VALUE_MAX_BYTES - 1) / AB_STORE_VALUE_MAX_BYTES;
  uint64_t k = x->sent[to]++;
  char key[300];
  ab_status st = AB_OK;
  for (size_t c = chunks; c-- > 0 && st == AB_OK;) {
    size_t at = c * AB_STORE_VALUE_MAX_BYTES, n = all - at < AB_STORE_VALUE_MAX_BYTES ? all - at : AB_STORE_VALUE_MAX_BYTES;
    key_of(x, l->rank, to, k, c, key, sizeof key);
    st = ab_store_set(x->s, key, buf + at, n, &d);
  }
  free(buf);
  if (st != AB_OK) lose(x, &d);
  snprintf(x->last, sizeof x->last, "%s", key);
  return st == AB_OK;
}

/* Reads and deletes one key that exists. */
static ab_status take(store_link_t *x, const char *key, void **value, size_t *bytes, ab_diag_t *d) {
  AB_TRY(ab_store_get(x->s, key, value, bytes, d));
  ab_status st = ab_store_delete(x->s, key, d);
  if (st != AB_OK) free(*value);
  return st;
}

static ab_wait_t store_recv(ab_link_t *l, unsigned from, uint32_t *kind, void **payload, size_t *bytes,
                            double deadline) {
  store_link_t *x = store_of(l);
  uint64_t k = x->got[from];
  char key[300];
  ab_diag_t d = {""};
  key_of(x, from, l->rank, k, 0, key, sizeof key);
  ab_wait_t w = ab_store_wait(x->s, key, deadline, &d);
  if (w != AB_WAIT_DONE) {
    if (w == AB_WAIT_LOST) lose(x, &d);
    return w;
  }
  void *first = NULL;
  size_t n = 0;
  if (take(x, key, &first, &n, &d) != AB_OK) {
    lose(x, &d);
    return AB_WAIT_LOST;
  }
  uint64_t total = 0;
  if (n >= sizeof total) memcpy(&total, first, sizeof total);
  size_t want = sizeof total + (size_t)total; /* the message, chunked from here */
  if (n < sizeof total + sizeof *kind || total < sizeof *kind || total > ((uint64_t)1 << 40) || n > want ||
      (n < want && n != AB_STORE_VALUE_MAX_BYTES)) {
    free(first);
    snprintf(l->lost, sizeof l->lost, "the key %s holds no message of allocbench's", key);
    return AB_WAIT_LOST;
  }
  unsigned char *all = malloc(want);
  if (all == NULL) {
    free(first);
    snprintf(l->lost, sizeof l->lost, "out of host memory");
    return AB_WAIT_LOST;
  }
  memcpy(all, first, n);
  free(first);
  /* The other chunks were set before the first. */
  for (size_t c = 1, at = n; at < want; c++) {
    void *more = NULL;
    size_t m = 0;
    key_of(x, from, l->rank, k, c, key, sizeof key);
    if (take(x, key, &more, &m, &d) != AB_OK || m == 0 || at + m > want) {
      free(more);
      free(all);
      if (d.msg[0]) lose(x, &d);
      else snprintf(l->lost, sizeof l->lost, "the key %s does not fit its message", key);
      return AB_WAIT_LOST;
    }
    memcpy(all + at, more, m);
    at += m;
    free(more);
  }
  x->got[from]++;
  memcpy(kind, all + sizeof total, sizeof *kind);
  *bytes = total - sizeof *kind;
  memmove(all, all + sizeof total + sizeof *kind, *bytes);
  *payload = all;
  return AB_WAIT_DONE;
}

static void store_close(ab_link_t *l, bool clean) {
  store_link_t *x = store_of(l);
  /* An answer to a query after the last SET says the store has taken it: closing at once
   * could otherwise reset the connection over it. */
  if (clean && !l->gave_up && x->s && x->last[0]) {
    bool ready = false;
    ab_diag_t d = {""};
    const char *keys[] = {x->last};
    (void)ab_store_check(x->s, keys, 1, &ready, &d);
  }
  ab_store_close(x->s);
  free(x->sent);
  free(x->got);
  free(x);
}

static const ab_link_ops_t store_ops = {store_send, store_recv, store_close};

ab_status ab_link_open_store(const ab_launch_t *la, const ab_waits_t *w, ab_link_t **out, ab_diag_t *diag) {
  store_link_t *x = calloc(1, sizeof *x);
  if (x == NULL || (x->sent = calloc(la->world, sizeof *x->sent)) == NULL ||
      (x->got = calloc(la->world, sizeof *x->got)) == NULL) {
    if (x) free(x->sent);
    free(x);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  x->l.ops = &store_ops;
  x->l.rank = la->rank;
  x->l.world = la->world;
  x->l.local_rank = la->local_rank;
  x->l.local = la->local_world;
  x->l.waits = *w;
  snprintf(x->l.engine, sizeof x->l.engine, "the store at %s:%s", la->addr, la->port);
  char waiting[600];
  snprintf(waiting, sizeof waiting, "%s: rank %u of %u waits for the store at %s:%s (up to %g s)", w->say_as ? w->say_as : "",
           la->rank, la->world, la->addr, la->port, w->meet_s);
  ab_status st = ab_store_open(la->addr, la->port, w->meet_s, w->collective_s, w->stop, w->say_as ? waiting : NULL, &x->s, diag);
  if (st != AB_OK) {
    store_close(&x->l, false);
    if (w->stop && *w->stop)
      return ab_diag_set(diag, AB_ERR_IO, "interrupted (%s) while rank %u waited for the store at %s:%s",
                         ab_signal_name((int)*w->stop), la->rank, la->addr, la->port);
    char was[AB_DIAG_BYTES];
    snprintf(was, sizeof was, "%s", diag->msg);
    return ab_diag_set(diag, AB_ERR_IO, "rank %u: %s (AB_RENDEZVOUS_TIMEOUT)", la->rank, was);
  }
  /* Which job of this rank under the launch this is (Note [Messages through rank 0]). */
  char key[300];
  int64_t use = 0;
  snprintf(key, sizeof key, "%suse/%u", la->prefix, la->rank);
  if (ab_store_add(x->s, key, 1, &use, diag) != AB_OK) {
    store_close(&x->l, false);
    return AB_ERR_IO;
  }
  snprintf(x->prefix, sizeof x->prefix, "%s%" PRId64 "/", la->prefix, use);
  *out = &x->l;
  return AB_OK;
}
