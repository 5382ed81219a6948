/* rendezvous.c: ranks as processes over TCP (rendezvous.h): the launcher's environment, the
 * meeting at rank 0, and the group over the connections (a star: rank 0 hears every rank and
 * answers; the others talk to rank 0 only). */
#include "rendezvous.h"

#include <errno.h>
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

#include "units.h"

#define MAGIC 0x56524241u /* "ABRV" */
#define VERSION 1u
#define WHY_BYTES 512

typedef enum kind_e { HELLO = 1, WELCOME, ARRIVE, VERDICT, LEAVE } kind_t;

typedef struct head_s {
  uint32_t kind;  /* kind_t */
  uint32_t bytes; /* payload that follows */
} head_t;

typedef struct hello_s {
  uint32_t magic, version, rank, world;
  uint64_t digest;
} hello_t;

typedef struct welcome_s {
  uint32_t ok;
  unsigned char id[AB_COMM_ID_BYTES];
  char message[AB_DIAG_BYTES];
} welcome_t;

typedef struct verdict_s {
  uint32_t go;
  char why[WHY_BYTES];
} verdict_t;

/* ---- the environment ---------------------------------------------------------------------- */

/* A whole number from min to max in variable name; left alone when it is not set and not
 * required. */
static ab_status get_uint(const char *(*get)(const char *, void *), void *ctx, const char *name, uint64_t min,
                          uint64_t max, bool required, uint64_t *out, ab_diag_t *diag) {
  const char *v = get(name, ctx);
  if (v == NULL || v[0] == '\0') {
    if (!required) return AB_OK;
    return ab_diag_set(diag, AB_ERR_INVALID, "--ranks env: %s is not set (expected a whole number from %llu to %llu)",
                       name, (unsigned long long)min, (unsigned long long)max);
  }
  if (ab_parse_u64(name, v, max, out, diag) != AB_OK || *out < min)
    return ab_diag_set(diag, AB_ERR_INVALID, "--ranks env: %s='%s': expected a whole number from %llu to %llu", name, v,
                       (unsigned long long)min, (unsigned long long)max);
  return AB_OK;
}

ab_status ab_launch_parse(const char *(*get)(const char *name, void *ctx), void *ctx, ab_launch_t *out,
                          ab_diag_t *diag) {
  memset(out, 0, sizeof *out);
  uint64_t rank = 0, world = 0, local = 0, port = 0;
  AB_TRY(get_uint(get, ctx, "WORLD_SIZE", 1, 1 << 16, true, &world, diag));
  AB_TRY(get_uint(get, ctx, "RANK", 0, world - 1, true, &rank, diag));
  local = rank;
  AB_TRY(get_uint(get, ctx, "LOCAL_RANK", 0, 1023, false, &local, diag));
  const char *addr = get("MASTER_ADDR", ctx);
  if (addr == NULL || addr[0] == '\0')
    return ab_diag_set(diag, AB_ERR_INVALID, "--ranks env: MASTER_ADDR is not set (expected rank 0's host)");
  if (strlen(addr) >= sizeof out->addr)
    return ab_diag_set(diag, AB_ERR_INVALID, "--ranks env: MASTER_ADDR is longer than %zu characters", sizeof out->addr - 1);
  AB_TRY(get_uint(get, ctx, "MASTER_PORT", 1, 65535, true, &port, diag));
  out->timeout_s = AB_RENDEZVOUS_TIMEOUT_S;
  const char *t = get("AB_RENDEZVOUS_TIMEOUT", ctx);
  if (t && t[0]) {
    char *end = NULL;
    errno = 0;
    double s = strtod(t, &end);
    if (errno || end == t || *end || !(s > 0 && s <= 86400))
      return ab_diag_set(diag, AB_ERR_INVALID,
                         "--ranks env: AB_RENDEZVOUS_TIMEOUT='%s': expected seconds, more than 0 and at most 86400", t);
    out->timeout_s = s;
  }
  out->rank = (unsigned)rank;
  out->world = (unsigned)world;
  out->local_rank = (unsigned)local;
  snprintf(out->addr, sizeof out->addr, "%s", addr);
  snprintf(out->port, sizeof out->port, "%llu", (unsigned long long)port);
  return AB_OK;
}

static const char *from_env(const char *name, void *ctx) {
  (void)ctx;
  return getenv(name);
}

ab_status ab_launch_from_env(ab_launch_t *out, ab_diag_t *diag) { return ab_launch_parse(from_env, NULL, out, diag); }

/* ---- messages ----------------------------------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Waits until fd is readable or the deadline (0: none) passes. */
static bool wait_readable(int fd, double deadline) {
  for (;;) {
    int ms = -1;
    if (deadline > 0) {
      double left = deadline - now_s();
      if (left <= 0) return false;
      ms = (int)ceil(left * 1000);
    }
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, ms);
    if (r > 0) return true;
    if (r == 0 || errno != EINTR) return false;
  }
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

static bool read_all(int fd, void *buf, size_t n, double deadline) {
  char *p = buf;
  while (n > 0) {
    if (deadline > 0 && !wait_readable(fd, deadline)) return false;
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= (size_t)r;
  }
  return true;
}

static bool send_msg(int fd, kind_t kind, const void *payload, size_t bytes) {
  head_t h = {(uint32_t)kind, (uint32_t)bytes};
  return write_all(fd, &h, sizeof h) && write_all(fd, payload, bytes);
}

/* Reads one message of an expected kind and size into payload; false on anything else. For
 * the kinds a rank may send at a barrier, *kind says which came. */
static bool recv_msg(int fd, kind_t *kind, void *payload, size_t cap, size_t *bytes, double deadline) {
  head_t h;
  if (!read_all(fd, &h, sizeof h, deadline) || h.bytes > cap) return false;
  *kind = (kind_t)h.kind;
  *bytes = h.bytes;
  return read_all(fd, payload, h.bytes, deadline);
}

/* ---- the group over TCP --------------------------------------------------------------------- */

typedef struct tcp_s {
  ab_group_t g;            /* first: the group.h view */
  unsigned rank;           /* this process's */
  int *fd;                 /* rank 0: per rank, its connection (fd[0] unused); others: fd[0] to rank 0 */
  bool *ended;             /* rank 0: per rank, it has left (or its connection is gone) */
  bool *told;              /* rank 0: per rank, it was sent a stop */
  bool *arrived;           /* rank 0: per rank, it is at the barrier being decided */
  bool stop;               /* rank 0: a rank has left or failed */
  char why[WHY_BYTES];     /* rank 0: the first reason to stop */
  ab_rank_result_t *results; /* rank 0: per rank, once it has left */
  ab_rank_result_t scratch;  /* one message's payload */
} tcp_t;

static tcp_t *tcp_of(ab_group_t *g) { return (tcp_t *)(void *)g; }

static void note_stop(tcp_t *t, const char *why) {
  if (t->stop) return;
  t->stop = true;
  snprintf(t->why, sizeof t->why, "%s", why);
}

/* Rank 0 takes a rank's result: it has left. */
static void take_result(tcp_t *t, unsigned r, const ab_rank_result_t *res) {
  t->results[r] = *res;
  ab_run_t *run = &t->results[r].run;
  run->ptr = NULL;
  run->requested = NULL;
  run->timeline = NULL;
  run->step_ms = NULL;
  t->ended[r] = true;
  char why[WHY_BYTES];
  ab_rank_failure(&t->results[r], r, why, sizeof why);
  note_stop(t, why);
}

/* Rank 0 lost rank r: its result says so. */
static void lost(tcp_t *t, unsigned r) {
  ab_rank_result_t *res = &t->results[r];
  memset(res, 0, sizeof *res);
  res->status = AB_ERR_IO;
  snprintf(res->diag, sizeof res->diag, "the connection to rank %u closed before it reported (its process ended?)", r);
  snprintf(res->workload, sizeof res->workload, "rank %u", r);
  res->run.status = AB_RUN_ERROR;
  t->ended[r] = true;
  char why[WHY_BYTES];
  snprintf(why, sizeof why, "rank %u's process went away", r);
  note_stop(t, why);
}

static void tell(tcp_t *t, unsigned r, bool go) {
  verdict_t v;
  memset(&v, 0, sizeof v);
  v.go = go;
  if (!go) snprintf(v.why, sizeof v.why, "%s", t->why);
  if (!send_msg(t->fd[r], VERDICT, &v, sizeof v)) lost(t, r);
  if (!go) t->told[r] = true;
}

static bool tcp_arrive(ab_group_t *g, unsigned rank, ab_lockstep_t phase, char *why, size_t size) {
  tcp_t *t = tcp_of(g);
  (void)rank;
  if (t->rank != 0) {
    uint32_t p = (uint32_t)phase;
    verdict_t v;
    kind_t kind;
    size_t bytes;
    if (!send_msg(t->fd[0], ARRIVE, &p, sizeof p) || !recv_msg(t->fd[0], &kind, &v, sizeof v, &bytes, 0) ||
        kind != VERDICT || bytes != sizeof v) {
      snprintf(why, size, "the connection to rank 0 closed (its process ended?)");
      return false;
    }
    v.why[sizeof v.why - 1] = '\0';
    if (!v.go) snprintf(why, size, "%s", v.why);
    return v.go != 0;
  }
  if (phase == AB_LOCKSTEP_FAILED) note_stop(t, "rank 0 could not launch a collective");
  /* One message from every rank still in: where it is, or its result. */
  bool *arrived = t->arrived;
  memset(arrived, 0, g->size * sizeof *arrived);
  for (unsigned r = 1; r < g->size; r++) {
    if (t->ended[r]) continue;
    kind_t kind;
    size_t bytes;
    if (!recv_msg(t->fd[r], &kind, &t->scratch, sizeof t->scratch, &bytes, 0)) {
      lost(t, r);
    } else if (kind == ARRIVE && bytes == sizeof(uint32_t)) {
      uint32_t p;
      memcpy(&p, &t->scratch, sizeof p);
      if (p == AB_LOCKSTEP_FAILED) {
        char w[WHY_BYTES];
        snprintf(w, sizeof w, "rank %u could not launch a collective", r);
        note_stop(t, w);
      }
      arrived[r] = true;
    } else if (kind == LEAVE && bytes == sizeof(ab_rank_result_t)) {
      take_result(t, r, &t->scratch);
    } else {
      lost(t, r);
    }
  }
  bool go = !t->stop;
  for (unsigned r = 1; r < g->size; r++)
    if (!t->ended[r] && arrived[r]) tell(t, r, go);
  if (!go) snprintf(why, size, "%s", t->why);
  return go;
}

static void tcp_leave(ab_group_t *g, unsigned rank, const ab_rank_result_t *res) {
  tcp_t *t = tcp_of(g);
  (void)rank;
  if (t->rank != 0) {
    /* Then wait for rank 0 to close: closing with its unread verdicts in our buffer would
     * reset the connection and could lose the result on the way. */
    if (send_msg(t->fd[0], LEAVE, res, sizeof *res) && shutdown(t->fd[0], SHUT_WR) == 0) {
      char sink[256];
      while (recv(t->fd[0], sink, sizeof sink, 0) > 0) continue;
    }
    return;
  }
  t->results[0] = *res;
  t->ended[0] = true;
  char why[WHY_BYTES];
  ab_rank_failure(res, 0, why, sizeof why);
  note_stop(t, why);
  for (unsigned r = 1; r < g->size; r++)
    if (!t->ended[r] && !t->told[r]) tell(t, r, false);
}

static ab_status tcp_results(ab_group_t *g, ab_rank_result_t *all, bool *have, ab_diag_t *diag) {
  tcp_t *t = tcp_of(g);
  (void)diag;
  *have = t->rank == 0;
  if (t->rank != 0) return AB_OK;
  /* The others' results; a rank still arriving is told to stop (it has been already, unless
   * rank 0 ended first without reason to). */
  for (unsigned r = 1; r < g->size; r++) {
    while (!t->ended[r]) {
      kind_t kind;
      size_t bytes;
      if (!recv_msg(t->fd[r], &kind, &t->scratch, sizeof t->scratch, &bytes, 0))
        lost(t, r);
      else if (kind == LEAVE && bytes == sizeof(ab_rank_result_t))
        take_result(t, r, &t->scratch);
      else if (kind != ARRIVE)
        lost(t, r);
      else if (!t->told[r])
        tell(t, r, false);
    }
  }
  memcpy(all, t->results, g->size * sizeof *all);
  return AB_OK;
}

static void tcp_destroy(ab_group_t *g) {
  tcp_t *t = tcp_of(g);
  if (t == NULL) return;
  unsigned n = t->rank == 0 ? g->size : 1;
  for (unsigned r = 0; t->fd && r < n; r++)
    if (t->fd[r] >= 0) close(t->fd[r]);
  free(t->fd);
  free(t->ended);
  free(t->told);
  free(t->arrived);
  free(t->results);
  free(t);
}

static const ab_group_ops_t tcp_ops = {tcp_arrive, tcp_leave, tcp_results, tcp_destroy};

/* ---- meeting --------------------------------------------------------------------------------- */

static void no_delay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Rank 0's listening socket on every interface, IPv6 and IPv4 where it can. */
static int listen_on(const ab_launch_t *l, ab_diag_t *diag) {
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  int e = getaddrinfo(NULL, l->port, &hints, &res);
  if (e != 0) {
    ab_diag_set(diag, AB_ERR_IO, "--ranks env: MASTER_PORT=%s: %s", l->port, gai_strerror(e));
    return -1;
  }
  int fd = -1, err = 0;
  /* IPv6 first: with IPV6_V6ONLY off it takes IPv4 too. */
  for (int pass = 0; pass < 2 && fd < 0; pass++)
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
      if ((pass == 0) != (a->ai_family == AF_INET6)) continue;
      fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd < 0) {
        err = errno;
        continue;
      }
      int one = 1, zero = 0;
      (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (a->ai_family == AF_INET6) (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 128) != 0) {
        err = errno;
        close(fd);
        fd = -1;
      }
    }
  freeaddrinfo(res);
  if (fd < 0) ab_diag_set(diag, AB_ERR_IO, "--ranks env: rank 0 cannot listen on port %s: %s", l->port, strerror(err));
  return fd;
}

/* Another rank's connection to rank 0, retried until the deadline. */
static int connect_to(const ab_launch_t *l, double deadline, ab_diag_t *diag) {
  char last[256] = "no address";
  for (;;) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int e = getaddrinfo(l->addr, l->port, &hints, &res);
    if (e == 0) {
      for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          freeaddrinfo(res);
          return fd;
        }
        snprintf(last, sizeof last, "%s", strerror(errno));
        if (fd >= 0) close(fd);
      }
      freeaddrinfo(res);
    } else {
      snprintf(last, sizeof last, "%s", gai_strerror(e));
    }
    if (now_s() >= deadline) break;
    struct timespec nap = {0, 100 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
  ab_diag_set(diag, AB_ERR_IO, "--ranks env: rank %u could not reach rank 0 at %s:%s within %.0f s (%s)", l->rank, l->addr,
              l->port, l->timeout_s, last);
  return -1;
}

static ab_status new_tcp(const ab_launch_t *l, tcp_t **out, ab_diag_t *diag) {
  tcp_t *t = calloc(1, sizeof *t);
  unsigned n = l->rank == 0 ? l->world : 1;
  if (t) {
    t->fd = malloc(n * sizeof *t->fd);
    if (l->rank == 0) {
      t->ended = calloc(l->world, sizeof *t->ended);
      t->told = calloc(l->world, sizeof *t->told);
      t->arrived = calloc(l->world, sizeof *t->arrived);
      t->results = calloc(l->world, sizeof *t->results);
    }
  }
  if (t == NULL || t->fd == NULL || (l->rank == 0 && (!t->ended || !t->told || !t->arrived || !t->results))) {
    if (t) tcp_destroy(&t->g);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  for (unsigned r = 0; r < n; r++) t->fd[r] = -1;
  t->g.ops = &tcp_ops;
  t->g.size = l->world;
  t->rank = l->rank;
  *out = t;
  return AB_OK;
}

/* Rank 0: waits for every other rank's hello, checks it, answers with the id. */
static ab_status meet_as_root(const ab_launch_t *l, uint64_t digest, const ab_comm_id_t *id, tcp_t *t,
                              ab_diag_t *diag) {
  int lfd = listen_on(l, diag);
  if (lfd < 0) return AB_ERR_IO;
  double deadline = now_s() + l->timeout_s;
  ab_status st = AB_OK;
  for (unsigned joined = 1; joined < l->world && st == AB_OK;) {
    if (!wait_readable(lfd, deadline)) {
      st = ab_diag_set(diag, AB_ERR_IO, "--ranks env: %u of %u ranks met rank 0 on port %s within %.0f s", joined, l->world,
                       l->port, l->timeout_s);
      break;
    }
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0) continue;
    hello_t h;
    kind_t kind;
    size_t bytes;
    if (!recv_msg(fd, &kind, &h, sizeof h, &bytes, deadline) || kind != HELLO || bytes != sizeof h || h.magic != MAGIC) {
      close(fd); /* not one of ours */
      continue;
    }
    if (h.version != VERSION || h.world != l->world || h.rank == 0 || h.rank >= l->world || t->fd[h.rank] >= 0)
      st = ab_diag_set(diag, AB_ERR_INVALID,
                       "--ranks env: a process said it is rank %u of %u (protocol %u); rank 0 expected one of "
                       "ranks 1 to %u of %u, each once (protocol %u)",
                       h.rank, h.world, h.version, l->world - 1, l->world, VERSION);
    else if (h.digest != digest)
      st = ab_diag_set(diag, AB_ERR_INVALID,
                       "--ranks env: rank %u's stream makes other collectives than rank 0's: give every rank the same -w "
                       "arguments and seed",
                       h.rank);
    if (st != AB_OK) {
      welcome_t w;
      memset(&w, 0, sizeof w);
      snprintf(w.message, sizeof w.message, "%s", diag->msg);
      send_msg(fd, WELCOME, &w, sizeof w);
      close(fd);
      break;
    }
    no_delay(fd);
    t->fd[h.rank] = fd;
    joined++;
  }
  close(lfd);
  welcome_t w;
  memset(&w, 0, sizeof w);
  w.ok = st == AB_OK;
  if (st == AB_OK)
    memcpy(w.id, id->bytes, sizeof w.id);
  else
    snprintf(w.message, sizeof w.message, "rank 0 refused the job: %s", diag->msg);
  for (unsigned r = 1; r < l->world; r++)
    if (t->fd[r] >= 0 && !send_msg(t->fd[r], WELCOME, &w, sizeof w) && st == AB_OK)
      st = ab_diag_set(diag, AB_ERR_IO, "--ranks env: rank %u went away during the rendezvous", r);
  return st;
}

static ab_status meet_as_rank(const ab_launch_t *l, uint64_t digest, ab_comm_id_t *id, tcp_t *t, ab_diag_t *diag) {
  double deadline = now_s() + l->timeout_s;
  int fd = connect_to(l, deadline, diag);
  if (fd < 0) return AB_ERR_IO;
  no_delay(fd);
  t->fd[0] = fd;
  hello_t h = {MAGIC, VERSION, l->rank, l->world, digest};
  welcome_t w;
  kind_t kind;
  size_t bytes;
  if (!send_msg(fd, HELLO, &h, sizeof h) || !recv_msg(fd, &kind, &w, sizeof w, &bytes, deadline) || kind != WELCOME ||
      bytes != sizeof w)
    return ab_diag_set(diag, AB_ERR_IO, "--ranks env: rank %u: rank 0 at %s:%s did not answer within %.0f s", l->rank,
                       l->addr, l->port, l->timeout_s);
  w.message[sizeof w.message - 1] = '\0';
  if (!w.ok) return ab_diag_set(diag, AB_ERR_INVALID, "%s", w.message);
  memcpy(id->bytes, w.id, sizeof w.id);
  return AB_OK;
}

ab_status ab_rendezvous(const ab_launch_t *l, uint64_t digest, ab_comm_id_t *id, ab_group_t **out, ab_diag_t *diag) {
  tcp_t *t = NULL;
  AB_TRY(new_tcp(l, &t, diag));
  ab_status st = l->rank == 0 ? meet_as_root(l, digest, id, t, diag) : meet_as_rank(l, digest, id, t, diag);
  if (st != AB_OK) {
    tcp_destroy(&t->g);
    return st;
  }
  *out = &t->g;
  return AB_OK;
}
