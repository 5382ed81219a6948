/* store.c: PyTorch's TCPStore, from the client's side (store.h, Note [TCPStore's protocol]). */
#include "harness/ranks/store.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kernels/base/clock.h"

#define VALIDATION_MAGIC 0x3C85F7CEu
#define PROBE_S 0.3 /* how long the probe waits for an answer before it completes a 2.x WAIT: what
                      * connecting to the libuv server costs; a slower answer takes the longer way */

/* The commands used here, in each protocol (index: protocol - 1). */
enum { SET, GET, ADD, CHECK, WAIT, DELETE_KEY, GETNUMKEYS, NCOMMANDS };
static const uint8_t code[2][NCOMMANDS] = {
    {0, 2, 3, 4, 5, 8, 6}, /* 1.13: SET, COMPARE_SET, GET, ADD, CHECK, WAIT, GETNUMKEYS, WATCH_KEY, DELETE_KEY */
    {1, 3, 4, 5, 6, 8, 7}, /* 2.x: VALIDATE, SET, COMPARE_SET, GET, ADD, CHECK, WAIT, GETNUMKEYS, DELETE_KEY */
};
enum { VALIDATE_2 = 0, READY = 0, STOP_WAITING = 0 };

struct ab_store_s {
  char addr[256], port[8];
  char where[270];                  /* "addr:port" */
  int fd;                           /* -1: closed, reopened by the next call */
  int protocol;                     /* 1 or 2 */
  double answer_s;
  const volatile sig_atomic_t *stop;
  const char *waiting;              /* said once a second into the first connection; NULL: nothing */
  unsigned char *q;                 /* the query being built */
  size_t qn, qcap;
  bool q_failed;                    /* host memory ran out while it was built */
};

/* ---- the socket, every wait bounded --------------------------------------------------------- */

static bool stopped(const ab_store_t *s) { return s->stop && *s->stop; }

/* Waits until fd is readable (data, or its close), the deadline passes or a stop is asked. */
static ab_wait_t readable(const ab_store_t *s, int fd, double deadline) {
  for (;;) {
    if (stopped(s)) return AB_WAIT_STOPPED;
    double left = deadline - ab_clock_s();
    if (left <= 0) return AB_WAIT_TIMEOUT;
    int ms = left * 1000 < AB_WAIT_SLICE_MS ? (int)ceil(left * 1000) : AB_WAIT_SLICE_MS;
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, ms);
    if (r > 0) return AB_WAIT_DONE;
    if (r < 0 && errno != EINTR) return AB_WAIT_LOST;
  }
}

/* Reads n bytes into buf; *got (may be NULL) says how many came before the wait ended. */
static ab_wait_t read_all(const ab_store_t *s, int fd, void *buf, size_t n, double deadline, size_t *got) {
  char *p = buf;
  size_t done = 0;
  ab_wait_t w = AB_WAIT_DONE;
  while (done < n && (w = readable(s, fd, deadline)) == AB_WAIT_DONE) {
    ssize_t r = recv(fd, p + done, n - done, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      w = AB_WAIT_LOST;
      break;
    }
    done += (size_t)r;
  }
  if (got) *got = done;
  return done == n ? AB_WAIT_DONE : w;
}

static bool write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

/* One connection attempt to a, without blocking past the deadline or a stop: connect() to an
 * address that does not answer can otherwise take minutes. -1 with the reason in err. */
static int connect_once(const ab_store_t *s, const struct addrinfo *a, double deadline, bool hurry, char *err,
                        size_t size) {
  int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
  if (fd < 0) {
    snprintf(err, size, "%s", strerror(errno));
    return -1;
  }
  int flags = fcntl(fd, F_GETFL, 0);
  int e = flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 ? errno : 0;
  if (e == 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) e = errno;
  /* Polled in slices, and once more at the deadline, so that a refusal is named as one. */
  for (bool last = false; (e == EINPROGRESS || e == EINTR) && !last;) {
    last = !(hurry || !stopped(s)) || ab_clock_s() >= deadline;
    struct pollfd p = {fd, POLLOUT, 0};
    if (poll(&p, 1, last ? 0 : AB_WAIT_SLICE_MS) <= 0) continue;
    socklen_t len = sizeof e;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0) e = errno;
  }
  if (e == 0 && fcntl(fd, F_SETFL, flags) != 0) e = errno;
  if (e == 0) {
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }
  snprintf(err, size, "%s", e == EINPROGRESS || e == EINTR ? "no answer" : strerror(e));
  close(fd);
  return -1;
}

/* A connection to the store, retried until the deadline (it may not listen yet) or, unless
 * hurry, a stop; wait_s, what the caller gave it, is what a failure says it waited. A name
 * that does not resolve is retried too, as PyTorch's own client does (v2.11.0
 * torch/csrc/distributed/c10d/socket.cpp, SocketConnectOp::tryConnect retries a getaddrinfo
 * failure until its timeout): a cluster's name for the first node may come into its DNS after
 * the other nodes start. The failure names the resolver's last answer. */
static int connect_to(const ab_store_t *s, double deadline, double wait_s, bool hurry, ab_diag_t *diag) {
  char last[256] = "no address";
  double since = ab_clock_s();
  bool said = false;
  while (hurry || !stopped(s)) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int e = getaddrinfo(s->addr, s->port, &hints, &res);
    if (e == 0) {
      for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd = connect_once(s, a, deadline, hurry, last, sizeof last);
        if (fd >= 0) {
          freeaddrinfo(res);
          return fd;
        }
      }
      freeaddrinfo(res);
    } else {
      snprintf(last, sizeof last, "%s", gai_strerror(e));
    }
    if (ab_clock_s() >= deadline) break;
    if (s->waiting && !said && ab_clock_s() - since >= 1.0) {
      fprintf(stderr, "%s: %s\n", s->waiting, last);
      said = true;
    }
    struct timespec nap = {0, 50 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
  if (!hurry && stopped(s)) ab_diag_set(diag, AB_ERR_IO, "interrupted while it connected to the store at %s", s->where);
  else ab_diag_set(diag, AB_ERR_IO, "could not reach the store at %s within %.3g s: %s", s->where, wait_s, last);
  return -1;
}

/* ---- the protocol ----------------------------------------------------------------------------- */

/* A new connection, replacing *fd, to a server known to speak protocol p. */
static ab_status reopen(ab_store_t *s, int *fd, int p, double deadline, bool *fresh, ab_diag_t *diag) {
  close(*fd);
  *fresh = true;
  s->protocol = p;
  *fd = connect_to(s, deadline, deadline - ab_clock_s(), false, diag);
  return *fd < 0 ? AB_ERR_IO : AB_OK;
}

/* Which protocol the store at the other end of *fd speaks (Note [TCPStore's protocol]); *fd
 * may be replaced by a new connection, which *fresh then says (else the one kept is in use). */
static ab_status probe(ab_store_t *s, int *fd, double deadline, bool *fresh, ab_diag_t *diag) {
  *fresh = false;
  unsigned char ask = code[0][GETNUMKEYS], answer[8];
  size_t got = 0;
  ab_wait_t w = write_all(*fd, &ask, 1) ? read_all(s, *fd, answer, 8, ab_clock_s() + PROBE_S, &got) : AB_WAIT_LOST;
  if (w == AB_WAIT_DONE) { /* an older server's number of keys */
    s->protocol = 1;
    return AB_OK;
  }
  if (w == AB_WAIT_LOST && got == 0) return reopen(s, fd, 2, deadline, fresh, diag); /* the classic 2.x server */
  if (w == AB_WAIT_TIMEOUT && got == 0) {
    /* The libuv server holds the byte: eight zero bytes make it a WAIT for no keys. */
    static const unsigned char none[8] = {0};
    w = write_all(*fd, none, sizeof none) ? read_all(s, *fd, answer, 1, ab_clock_s() + s->answer_s, &got) : AB_WAIT_LOST;
    if (w == AB_WAIT_DONE) {
      size_t more = 0;
      read_all(s, *fd, answer + 1, 7, ab_clock_s() + 0.1, &more);
      if (more == 7) return reopen(s, fd, 1, deadline, fresh, diag); /* an older server, slow: it holds a fragment */
      if (more == 0 && answer[0] == STOP_WAITING) {
        s->protocol = 2;
        return AB_OK;
      }
    } else if (w == AB_WAIT_LOST && got == 0) {
      return reopen(s, fd, 2, deadline, fresh, diag); /* the classic 2.x server, slow */
    }
  }
  if (w == AB_WAIT_STOPPED) return ab_diag_set(diag, AB_ERR_IO, "interrupted while it spoke to the store at %s", s->where);
  return ab_diag_set(diag, AB_ERR_IO, "the server at %s speaks no TCPStore protocol known here (PyTorch 1.13 to 2.x)",
                     s->where);
}

/* A validated connection, opened again after a wait given up. After a stop it is still
 * opened, within a second, so that what a stopped rank says on its way out (its result, rank
 * 0's last word) reaches the others. */
static ab_status reconnect(ab_store_t *s, double deadline, double wait_s, ab_diag_t *diag) {
  if (s->fd >= 0) return AB_OK;
  bool hurry = stopped(s) && s->protocol != 0;
  if (hurry && deadline > ab_clock_s() + 1.0) deadline = ab_clock_s() + 1.0, wait_s = 1.0;
  int fd = connect_to(s, deadline, wait_s, hurry, diag);
  if (fd < 0) return AB_ERR_IO;
  bool fresh = true; /* a connection that has sent nothing yet */
  /* The libuv server's connection, kept by the probe, is an ordinary one already. */
  if (s->protocol == 0 && probe(s, &fd, deadline, &fresh, diag) != AB_OK) {
    if (fd >= 0) close(fd);
    return AB_ERR_IO;
  }
  if (s->protocol == 2 && fresh) {
    unsigned char v[5] = {VALIDATE_2};
    uint32_t magic = VALIDATION_MAGIC;
    memcpy(v + 1, &magic, sizeof magic);
    if (!write_all(fd, v, sizeof v)) {
      close(fd);
      return ab_diag_set(diag, AB_ERR_IO, "the store at %s closed the connection", s->where);
    }
  }
  s->fd = fd;
  return AB_OK;
}

static void drop(ab_store_t *s) {
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
}

static bool grow(ab_store_t *s, size_t more) {
  if (s->qn + more <= s->qcap) return true;
  size_t cap = s->qcap ? s->qcap : 256;
  while (cap < s->qn + more) cap *= 2;
  unsigned char *q = realloc(s->q, cap);
  if (q == NULL) return false;
  s->q = q;
  s->qcap = cap;
  return true;
}

/* The query: begin with its command, add numbers and strings, then send. */
static void add_raw(ab_store_t *s, const void *p, size_t n) {
  if (s->q_failed || !grow(s, n)) {
    s->q_failed = true; /* sticky: send_query says so */
    return;
  }
  memcpy(s->q + s->qn, p, n);
  s->qn += n;
}

static void begin(ab_store_t *s, int cmd) {
  s->qn = 0;
  s->q_failed = false;
  add_raw(s, &code[s->protocol - 1][cmd], 1);
}

static void add_u64(ab_store_t *s, uint64_t v) { add_raw(s, &v, sizeof v); }

static void add_string(ab_store_t *s, const void *p, size_t n) {
  add_u64(s, n);
  add_raw(s, p, n);
}

static ab_status send_query(ab_store_t *s, ab_diag_t *diag) {
  if (s->q_failed) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  if (write_all(s->fd, s->q, s->qn)) return AB_OK;
  drop(s);
  return ab_diag_set(diag, AB_ERR_IO, "the store at %s closed the connection", s->where);
}

/* The answer to a query, n bytes. */
static ab_status answer(ab_store_t *s, void *buf, size_t n, ab_diag_t *diag) {
  ab_wait_t w = read_all(s, s->fd, buf, n, ab_clock_s() + s->answer_s, NULL);
  if (w == AB_WAIT_DONE) return AB_OK;
  drop(s); /* half an answer leaves the connection out of step */
  if (w == AB_WAIT_STOPPED) return ab_diag_set(diag, AB_ERR_IO, "interrupted while the store at %s answered", s->where);
  if (w == AB_WAIT_TIMEOUT)
    return ab_diag_set(diag, AB_ERR_IO, "the store at %s did not answer within %g s", s->where, s->answer_s);
  return ab_diag_set(diag, AB_ERR_IO, "the store at %s closed the connection", s->where);
}

/* ---- the calls ------------------------------------------------------------------------------------ */

ab_status ab_store_open(const char *addr, const char *port, double wait_s, double answer_s,
                        const volatile sig_atomic_t *stop, const char *waiting, ab_store_t **out, ab_diag_t *diag) {
  ab_store_t *s = calloc(1, sizeof *s);
  if (s == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  snprintf(s->addr, sizeof s->addr, "%s", addr);
  snprintf(s->port, sizeof s->port, "%s", port);
  snprintf(s->where, sizeof s->where, "%s:%s", addr, port);
  s->fd = -1;
  s->answer_s = answer_s;
  s->stop = stop;
  s->waiting = waiting;
  ab_status st = reconnect(s, ab_clock_s() + wait_s, wait_s, diag);
  s->waiting = NULL; /* the first connection only: later ones are replies awaited */
  if (st != AB_OK) {
    ab_store_close(s);
    return AB_ERR_IO;
  }
  *out = s;
  return AB_OK;
}

int ab_store_protocol(const ab_store_t *s) { return s->protocol; }

const char *ab_store_where(const ab_store_t *s) { return s->where; }

ab_status ab_store_set(ab_store_t *s, const char *key, const void *value, size_t bytes, ab_diag_t *diag) {
  AB_TRY(reconnect(s, ab_clock_s() + s->answer_s, s->answer_s, diag));
  begin(s, SET);
  add_string(s, key, strlen(key));
  add_string(s, value, bytes);
  return send_query(s, diag);
}

ab_status ab_store_get(ab_store_t *s, const char *key, void **value, size_t *bytes, ab_diag_t *diag) {
  AB_TRY(reconnect(s, ab_clock_s() + s->answer_s, s->answer_s, diag));
  begin(s, GET);
  add_string(s, key, strlen(key));
  AB_TRY(send_query(s, diag));
  uint64_t n = 0;
  AB_TRY(answer(s, &n, sizeof n, diag));
  if (n > ((size_t)8 << 20)) { /* more than any server keeps: not an answer */
    drop(s);
    return ab_diag_set(diag, AB_ERR_IO, "the store at %s answered a value of %llu bytes for %s", s->where,
                       (unsigned long long)n, key);
  }
  void *v = malloc(n ? n : 1);
  if (v == NULL) {
    drop(s);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  ab_status st = answer(s, v, n, diag);
  if (st != AB_OK) {
    free(v);
    return st;
  }
  *value = v;
  *bytes = n;
  return AB_OK;
}

ab_status ab_store_add(ab_store_t *s, const char *key, int64_t delta, int64_t *sum, ab_diag_t *diag) {
  AB_TRY(reconnect(s, ab_clock_s() + s->answer_s, s->answer_s, diag));
  begin(s, ADD);
  add_string(s, key, strlen(key));
  add_raw(s, &delta, sizeof delta);
  AB_TRY(send_query(s, diag));
  return answer(s, sum, sizeof *sum, diag);
}

ab_status ab_store_check(ab_store_t *s, const char *const *keys, size_t n, bool *ready, ab_diag_t *diag) {
  AB_TRY(reconnect(s, ab_clock_s() + s->answer_s, s->answer_s, diag));
  begin(s, CHECK);
  add_u64(s, n);
  for (size_t i = 0; i < n; i++) add_string(s, keys[i], strlen(keys[i]));
  AB_TRY(send_query(s, diag));
  unsigned char r = 0;
  AB_TRY(answer(s, &r, 1, diag));
  *ready = r == READY;
  return AB_OK;
}

ab_status ab_store_delete(ab_store_t *s, const char *key, ab_diag_t *diag) {
  AB_TRY(reconnect(s, ab_clock_s() + s->answer_s, s->answer_s, diag));
  begin(s, DELETE_KEY);
  add_string(s, key, strlen(key));
  AB_TRY(send_query(s, diag));
  int64_t deleted = 0;
  return answer(s, &deleted, sizeof deleted, diag);
}

ab_wait_t ab_store_wait(ab_store_t *s, const char *key, double deadline, ab_diag_t *diag) {
  if (reconnect(s, deadline, deadline - ab_clock_s(), diag) != AB_OK) return stopped(s) ? AB_WAIT_STOPPED : AB_WAIT_LOST;
  begin(s, WAIT);
  add_u64(s, 1);
  add_string(s, key, strlen(key));
  if (send_query(s, diag) != AB_OK) return AB_WAIT_LOST;
  unsigned char r = 1;
  ab_wait_t w = read_all(s, s->fd, &r, 1, deadline, NULL);
  if (w == AB_WAIT_DONE && r == STOP_WAITING) return AB_WAIT_DONE;
  drop(s); /* the server still holds the wait: only closing ends it (Note [TCPStore's protocol]) */
  if (w == AB_WAIT_DONE || w == AB_WAIT_LOST) {
    ab_diag_set(diag, AB_ERR_IO, "the store at %s closed the connection", s->where);
    return AB_WAIT_LOST;
  }
  return w;
}

void ab_store_close(ab_store_t *s) {
  if (s == NULL) return;
  drop(s);
  free(s->q);
  free(s);
}
