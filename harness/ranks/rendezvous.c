/* rendezvous.c: ranks as processes over TCP (rendezvous.h): the launcher's environment, the
 * meeting at rank 0, and the group over the connections (a star: rank 0 hears every rank and
 * answers; the others talk to rank 0 only). */
#include "ranks/rendezvous.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/units.h"

#define MAGIC 0x56524241u /* "ABRV" */
#define VERSION 2u /* 2: verdicts say whether to abort */
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
  uint32_t verdict; /* ab_verdict_t: GO, STOP or ABORT */
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

ab_status ab_parse_seconds(const char *name, const char *text, double *out, ab_diag_t *diag) {
  char *end = NULL;
  errno = 0;
  double s = strtod(text, &end);
  if (errno || end == text || *end || !(s > 0 && s <= 86400))
    return ab_diag_set(diag, AB_ERR_INVALID, "%s='%s': expected seconds, more than 0 and at most 86400", name, text);
  *out = s;
  return AB_OK;
}

/* Seconds in variable name, or dflt when it is not set. */
static ab_status get_seconds(const char *(*get)(const char *, void *), void *ctx, const char *name, double dflt,
                             double *out, ab_diag_t *diag) {
  const char *v = get(name, ctx);
  *out = dflt;
  return v && v[0] ? ab_parse_seconds(name, v, out, diag) : AB_OK;
}

ab_status ab_waits_parse(const char *(*get)(const char *name, void *ctx), void *ctx, ab_waits_t *out, ab_diag_t *diag) {
  memset(out, 0, sizeof *out);
  AB_TRY(get_seconds(get, ctx, "AB_RENDEZVOUS_TIMEOUT", AB_RENDEZVOUS_TIMEOUT_S, &out->meet_s, diag));
  return get_seconds(get, ctx, "AB_COLLECTIVE_TIMEOUT", AB_COLLECTIVE_TIMEOUT_S, &out->collective_s, diag);
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
  if (get_seconds(get, ctx, "AB_RENDEZVOUS_TIMEOUT", AB_RENDEZVOUS_TIMEOUT_S, &out->timeout_s, diag) != AB_OK) {
    ab_diag_prefix(diag, "--ranks env: ");
    return AB_ERR_INVALID;
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

ab_status ab_waits_from_env(ab_waits_t *out, ab_diag_t *diag) { return ab_waits_parse(from_env, NULL, out, diag); }

/* ---- messages (every wait bounded: Note [Bounded waits]) --------------------------------------- */

/* How a wait ended. */
typedef enum io_e { IO_OK, IO_CLOSED, IO_TIMEOUT, IO_STOPPED } io_t;

static int stop_signal(const ab_waits_t *w) { return w->stop ? (int)*w->stop : 0; }

/* The next poll's timeout: a slice, or what is left before the deadline; IO_OK to poll. */
static io_t next_slice(double deadline, const ab_waits_t *w, int *ms) {
  if (stop_signal(w)) return IO_STOPPED;
  double left = deadline - ab_clock_s();
  if (left <= 0) return IO_TIMEOUT;
  *ms = left * 1000 < AB_WAIT_SLICE_MS ? (int)ceil(left * 1000) : AB_WAIT_SLICE_MS;
  return IO_OK;
}

/* Waits until fd is readable (data, or its close), the deadline passes or a stop is asked. */
static io_t wait_readable(int fd, double deadline, const ab_waits_t *w) {
  for (;;) {
    int ms = 0;
    io_t io = next_slice(deadline, w, &ms);
    if (io != IO_OK) return io;
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, ms);
    if (r > 0) return IO_OK;
    if (r < 0 && errno != EINTR) return IO_CLOSED;
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

static io_t read_all(int fd, void *buf, size_t n, double deadline, const ab_waits_t *w) {
  char *p = buf;
  while (n > 0) {
    io_t io = wait_readable(fd, deadline, w);
    if (io != IO_OK) return io;
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return IO_CLOSED;
    p += r;
    n -= (size_t)r;
  }
  return IO_OK;
}

static bool send_msg(int fd, kind_t kind, const void *payload, size_t bytes) {
  head_t h = {(uint32_t)kind, (uint32_t)bytes};
  return write_all(fd, &h, sizeof h) && write_all(fd, payload, bytes);
}

/* Reads one message into payload (at most cap bytes); *kind and *bytes say what came. A
 * message that does not fit is a broken connection. */
static io_t recv_msg(int fd, kind_t *kind, void *payload, size_t cap, size_t *bytes, double deadline,
                     const ab_waits_t *w) {
  head_t h;
  io_t io = read_all(fd, &h, sizeof h, deadline, w);
  if (io != IO_OK) return io;
  if (h.bytes > cap) return IO_CLOSED;
  *kind = (kind_t)h.kind;
  *bytes = h.bytes;
  return read_all(fd, payload, h.bytes, deadline, w);
}

/* ---- the group over TCP --------------------------------------------------------------------- */

typedef struct tcp_s {
  ab_group_t g;            /* first: the group.h view */
  unsigned rank;           /* this process's */
  ab_waits_t waits;
  char rank0[300];         /* rank 0's ADDR:PORT, for messages */
  int *fd;                 /* rank 0: per rank, its connection (fd[0] unused); others: fd[0] to rank 0 */
  /* Rank 0's view. */
  bool *ended;             /* per rank, it has left (or its connection is gone) */
  bool *told;              /* per rank, it was sent a stop */
  bool *arrived;           /* per rank, it is at the barrier being decided */
  bool *want;              /* per rank, a message is awaited from it */
  struct pollfd *polls;    /* per rank, scratch for hear_all */
  unsigned *who;
  bool stop;               /* a rank has left, failed or given up */
  bool abort;              /* and a device may hold an unmatched collective */
  char why[WHY_BYTES];     /* the first reason to stop */
  const char *what;        /* the collective being decided */
  ab_rank_result_t *results; /* per rank, once it has left */
  ab_rank_result_t scratch;  /* one message's payload */
  /* The others' view. */
  bool gone;               /* the connection to rank 0 is lost */
  char gone_why[WHY_BYTES];
} tcp_t;

static tcp_t *tcp_of(ab_group_t *g) { return (tcp_t *)(void *)g; }

static void note_stop(tcp_t *t, bool abort, const char *why) {
  t->abort |= abort;
  if (t->stop) return;
  t->stop = true;
  snprintf(t->why, sizeof t->why, "%s", why);
}

/* As in group.c: before a launch a stop leaves nothing unmatched unless a rank vanished or
 * gave up. */
static ab_verdict_t stop_verdict(const tcp_t *t, ab_lockstep_t phase) {
  return phase == AB_LOCKSTEP_ENTER && !t->abort ? AB_VERDICT_STOP : AB_VERDICT_ABORT;
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
  note_stop(t, false, why);
}

/* Rank 0 lost rank r (why: how): its result says so. It may have died with a collective on
 * its device, so the others abort. */
static void lost(tcp_t *t, unsigned r, const char *why) {
  ab_rank_result_t *res = &t->results[r];
  memset(res, 0, sizeof *res);
  res->status = AB_ERR_IO;
  snprintf(res->diag, sizeof res->diag, "%s", why); /* the workload is left for ranks.c to name */
  res->run.status = AB_RUN_ERROR;
  t->ended[r] = true;
  char stop[WHY_BYTES];
  snprintf(stop, sizeof stop, "rank %u's process went away", r);
  note_stop(t, true, stop);
}

static void closed(tcp_t *t, unsigned r) {
  char why[WHY_BYTES];
  snprintf(why, sizeof why, "the connection to rank %u closed before it reported (its process ended?)", r);
  lost(t, r, why);
}

static void tell(tcp_t *t, unsigned r, ab_verdict_t verdict) {
  verdict_t v;
  memset(&v, 0, sizeof v);
  v.verdict = (uint32_t)verdict;
  if (verdict != AB_VERDICT_GO) snprintf(v.why, sizeof v.why, "%s", t->why);
  if (!send_msg(t->fd[r], VERDICT, &v, sizeof v)) closed(t, r);
  if (verdict != AB_VERDICT_GO) t->told[r] = true;
}

/* Rank 0 hears one message from each rank r with want[r], until the deadline: heard()
 * handles it and says whether that rank is done. IO_OK once every wanted rank is done; else
 * why the waiting ended, want[] naming the ranks not heard. */
typedef bool (*heard_fn)(tcp_t *t, unsigned r, kind_t kind, size_t bytes);

static io_t hear_all(tcp_t *t, double deadline, heard_fn heard) {
  for (;;) {
    unsigned n = 0;
    for (unsigned r = 1; r < t->g.size; r++)
      if (t->want[r]) {
        t->polls[n] = (struct pollfd){t->fd[r], POLLIN, 0};
        t->who[n++] = r;
      }
    if (n == 0) return IO_OK;
    int ms = 0;
    io_t io = next_slice(deadline, &t->waits, &ms);
    if (io != IO_OK) return io;
    if (poll(t->polls, n, ms) <= 0) continue; /* a slice passed, or a signal */
    for (unsigned i = 0; i < n; i++) {
      if (t->polls[i].revents == 0) continue;
      unsigned r = t->who[i];
      kind_t kind = 0;
      size_t bytes = 0;
      io = recv_msg(t->fd[r], &kind, &t->scratch, sizeof t->scratch, &bytes, deadline, &t->waits);
      if (io == IO_STOPPED || io == IO_TIMEOUT) return io;
      if (io == IO_CLOSED) closed(t, r);
      if (io == IO_CLOSED || heard(t, r, kind, bytes)) t->want[r] = false;
    }
  }
}

/* What a rank says at a barrier: where it is, or its result. */
static bool heard_arrival(tcp_t *t, unsigned r, kind_t kind, size_t bytes) {
  if (kind == ARRIVE && bytes == sizeof(uint32_t)) {
    uint32_t p;
    memcpy(&p, &t->scratch, sizeof p);
    if (p == AB_LOCKSTEP_FAILED) {
      char w[WHY_BYTES];
      snprintf(w, sizeof w, "rank %u could not launch a collective (%s)", r, t->what);
      note_stop(t, true, w);
    }
    t->arrived[r] = true;
  } else if (kind == LEAVE && bytes == sizeof(ab_rank_result_t)) {
    take_result(t, r, &t->scratch);
  } else {
    closed(t, r);
  }
  return true;
}

/* What a rank says once rank 0 has ended: its result, or where it is (told to stop, then
 * awaited again for its result). */
static bool heard_result(tcp_t *t, unsigned r, kind_t kind, size_t bytes) {
  if (kind == LEAVE && bytes == sizeof(ab_rank_result_t)) {
    take_result(t, r, &t->scratch);
    return true;
  }
  if (kind != ARRIVE || bytes != sizeof(uint32_t)) {
    closed(t, r);
    return true;
  }
  uint32_t p;
  memcpy(&p, &t->scratch, sizeof p);
  if (!t->told[r]) tell(t, r, stop_verdict(t, (ab_lockstep_t)p));
  return t->ended[r];
}

/* The ranks in want[], for a message. */
static void wanted(const tcp_t *t, char *list, size_t size) { ab_rank_list(t->want, t->g.size, list, size); }

static ab_verdict_t root_arrive(tcp_t *t, ab_lockstep_t phase, const char *what, char *why, size_t size) {
  t->what = what;
  if (phase == AB_LOCKSTEP_FAILED) {
    char w[WHY_BYTES];
    snprintf(w, sizeof w, "rank 0 could not launch a collective (%s)", what);
    note_stop(t, true, w);
  }
  /* One message from every rank still in: where it is, or its result. */
  memset(t->arrived, 0, t->g.size * sizeof *t->arrived);
  for (unsigned r = 0; r < t->g.size; r++) t->want[r] = r > 0 && !t->ended[r];
  io_t io = hear_all(t, ab_clock_s() + t->waits.collective_s, heard_arrival);
  ab_verdict_t v = t->stop ? stop_verdict(t, phase) : AB_VERDICT_GO;
  if (io == IO_STOPPED || io == IO_TIMEOUT) {
    char list[256];
    wanted(t, list, sizeof list);
    int sig = stop_signal(&t->waits);
    if (io == IO_STOPPED)
      snprintf(why, size, "interrupted (%s) while rank 0 waited at %s for %s", ab_signal_name(sig), what, list);
    else
      snprintf(why, size, "rank 0 waited %g s at %s for %s (AB_COLLECTIVE_TIMEOUT)", t->waits.collective_s, what,
               list);
    char mine[WHY_BYTES];
    snprintf(mine, sizeof mine, "rank 0 gave up waiting at %s for %s", what, list);
    note_stop(t, true, mine);
    v = AB_VERDICT_FAIL;
  }
  for (unsigned r = 1; r < t->g.size; r++)
    if (!t->ended[r] && t->arrived[r]) tell(t, r, v == AB_VERDICT_FAIL ? AB_VERDICT_ABORT : v);
  if (v != AB_VERDICT_GO && v != AB_VERDICT_FAIL) snprintf(why, size, "%s", t->why);
  return v;
}

static void gone(tcp_t *t, const char *why) {
  if (t->gone) return;
  t->gone = true;
  snprintf(t->gone_why, sizeof t->gone_why, "%s", why);
}

static ab_verdict_t rank_arrive(tcp_t *t, ab_lockstep_t phase, const char *what, char *why, size_t size) {
  char lost0[WHY_BYTES];
  snprintf(lost0, sizeof lost0, "the connection to rank 0 (%s) closed (its process ended?)", t->rank0);
  uint32_t p = (uint32_t)phase;
  if (!t->gone && !send_msg(t->fd[0], ARRIVE, &p, sizeof p)) gone(t, lost0);
  if (t->gone) {
    snprintf(why, size, "%s", t->gone_why);
    return AB_VERDICT_ABORT;
  }
  verdict_t v;
  kind_t kind = 0;
  size_t bytes = 0;
  io_t io = recv_msg(t->fd[0], &kind, &v, sizeof v, &bytes, ab_clock_s() + t->waits.collective_s, &t->waits);
  if (io == IO_STOPPED || io == IO_TIMEOUT) {
    if (io == IO_STOPPED)
      snprintf(why, size, "interrupted (%s) while rank %u waited at %s for rank 0 (%s)",
               ab_signal_name(stop_signal(&t->waits)), t->rank, what, t->rank0);
    else
      snprintf(why, size, "rank %u waited %g s at %s for rank 0 (%s) (AB_COLLECTIVE_TIMEOUT)", t->rank,
               t->waits.collective_s, what, t->rank0);
    return AB_VERDICT_FAIL;
  }
  if (io != IO_OK || kind != VERDICT || bytes != sizeof v || v.verdict > AB_VERDICT_ABORT) {
    gone(t, lost0);
    snprintf(why, size, "%s", t->gone_why);
    return AB_VERDICT_ABORT;
  }
  v.why[sizeof v.why - 1] = '\0';
  if (v.verdict != AB_VERDICT_GO) snprintf(why, size, "%s", v.why);
  return (ab_verdict_t)v.verdict;
}

static ab_verdict_t tcp_arrive(ab_group_t *g, unsigned rank, ab_lockstep_t phase, const char *what, char *why,
                               size_t size) {
  tcp_t *t = tcp_of(g);
  (void)rank;
  return t->rank == 0 ? root_arrive(t, phase, what, why, size) : rank_arrive(t, phase, what, why, size);
}

static void tcp_leave(ab_group_t *g, unsigned rank, const ab_rank_result_t *res) {
  tcp_t *t = tcp_of(g);
  (void)rank;
  if (t->rank != 0) {
    /* No waiting here: the communicator's teardown comes next, and NCCL's needs every rank's
     * (Note [Bounded waits]); destroy waits for rank 0 to close. */
    if (!t->gone && !(send_msg(t->fd[0], LEAVE, res, sizeof *res) && shutdown(t->fd[0], SHUT_WR) == 0)) {
      char why[WHY_BYTES];
      snprintf(why, sizeof why, "the connection to rank 0 (%s) closed before it had this rank's result", t->rank0);
      gone(t, why);
    }
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

static ab_status tcp_results(ab_group_t *g, ab_rank_result_t *all, bool *have, ab_diag_t *diag) {
  tcp_t *t = tcp_of(g);
  *have = t->rank == 0;
  if (t->rank != 0)
    return t->gone ? ab_diag_set(diag, AB_ERR_IO, "rank %u: %s: nothing was recorded", t->rank, t->gone_why) : AB_OK;
  for (unsigned r = 0; r < g->size; r++) t->want[r] = r > 0 && !t->ended[r];
  io_t io = hear_all(t, ab_clock_s() + t->waits.collective_s, heard_result);
  if (io == IO_STOPPED || io == IO_TIMEOUT) {
    char list[256];
    wanted(t, list, sizeof list);
    if (io == IO_STOPPED)
      return ab_diag_set(diag, AB_ERR_IO, "interrupted (%s) while rank 0 waited for the results of %s",
                         ab_signal_name(stop_signal(&t->waits)), list);
    for (unsigned r = 1; r < g->size; r++) {
      if (!t->want[r]) continue;
      char why[WHY_BYTES];
      snprintf(why, sizeof why, "rank %u did not report within %g s of rank 0's end (AB_COLLECTIVE_TIMEOUT)", r,
               t->waits.collective_s);
      lost(t, r, why);
    }
  }
  memcpy(all, t->results, g->size * sizeof *all);
  return AB_OK;
}

static void tcp_destroy(ab_group_t *g) {
  tcp_t *t = tcp_of(g);
  if (t == NULL) return;
  /* A rank other than 0 closes after rank 0 does: closing with rank 0's unread verdicts in
   * its buffer would reset the connection and could lose its result on the way. */
  if (t->rank != 0 && t->fd && t->fd[0] >= 0 && !t->gone) {
    double deadline = ab_clock_s() + t->waits.collective_s;
    char sink[256];
    while (wait_readable(t->fd[0], deadline, &t->waits) == IO_OK && recv(t->fd[0], sink, sizeof sink, 0) > 0) continue;
  }
  unsigned n = t->rank == 0 ? g->size : 1;
  for (unsigned r = 0; t->fd && r < n; r++)
    if (t->fd[r] >= 0) close(t->fd[r]);
  free(t->fd);
  free(t->ended);
  free(t->told);
  free(t->arrived);
  free(t->want);
  free(t->polls);
  free(t->who);
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

/* One connection attempt to a, without blocking past the deadline or a stop: connect() to an
 * address that does not answer can otherwise take minutes. -1 with *io (or the reason in
 * err) when it failed. */
static int connect_once(const struct addrinfo *a, double deadline, const ab_waits_t *w, io_t *io, char *err,
                        size_t size) {
  int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
  if (fd < 0) {
    snprintf(err, size, "%s", strerror(errno));
    return -1;
  }
  int flags = fcntl(fd, F_GETFL, 0);
  int e = flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 ? errno : 0;
  if (e == 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) e = errno;
  while (e == EINPROGRESS || e == EINTR) {
    int ms = 0;
    *io = next_slice(deadline, w, &ms);
    if (*io != IO_OK) break;
    struct pollfd p = {fd, POLLOUT, 0};
    if (poll(&p, 1, ms) <= 0) continue;
    socklen_t len = sizeof e;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0) e = errno;
  }
  if (e == 0 && fcntl(fd, F_SETFL, flags) != 0) e = errno;
  if (e == 0) return fd;
  if (e != EINPROGRESS && e != EINTR) snprintf(err, size, "%s", strerror(e));
  close(fd);
  return -1;
}

/* Another rank's connection to rank 0, retried until the deadline or a stop. */
static int connect_to(const ab_launch_t *l, const ab_waits_t *w, double deadline, ab_diag_t *diag) {
  char last[256] = "no address";
  io_t io = IO_OK;
  while (io == IO_OK) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int e = getaddrinfo(l->addr, l->port, &hints, &res);
    if (e == 0) {
      for (struct addrinfo *a = res; a && io == IO_OK; a = a->ai_next) {
        int fd = connect_once(a, deadline, w, &io, last, sizeof last);
        if (fd >= 0) {
          freeaddrinfo(res);
          return fd;
        }
      }
      freeaddrinfo(res);
    } else {
      snprintf(last, sizeof last, "%s", gai_strerror(e));
    }
    /* Rank 0 may not listen yet: try again a little later. */
    int ms = 0;
    if (io == IO_OK && (io = next_slice(deadline, w, &ms)) == IO_OK) {
      struct timespec nap = {0, (long)ms * 1000 * 1000};
      nanosleep(&nap, NULL);
    }
  }
  if (io == IO_STOPPED)
    ab_diag_set(diag, AB_ERR_IO, "interrupted (%s) while rank %u waited for rank 0 at %s:%s to meet (%s)",
                ab_signal_name(stop_signal(w)), l->rank, l->addr, l->port, last);
  else
    ab_diag_set(diag, AB_ERR_IO, "--ranks env: rank %u could not reach rank 0 at %s:%s within %g s (%s; "
                "AB_RENDEZVOUS_TIMEOUT)", l->rank, l->addr, l->port, w->meet_s, last);
  return -1;
}

static ab_status new_tcp(const ab_launch_t *l, const ab_waits_t *w, tcp_t **out, ab_diag_t *diag) {
  tcp_t *t = calloc(1, sizeof *t);
  unsigned n = l->rank == 0 ? l->world : 1;
  bool ok = t != NULL;
  if (t) {
    ok = (t->fd = malloc(n * sizeof *t->fd)) != NULL;
    if (l->rank == 0) {
      t->ended = calloc(l->world, sizeof *t->ended);
      t->told = calloc(l->world, sizeof *t->told);
      t->arrived = calloc(l->world, sizeof *t->arrived);
      t->want = calloc(l->world, sizeof *t->want);
      t->polls = calloc(l->world, sizeof *t->polls);
      t->who = calloc(l->world, sizeof *t->who);
      t->results = calloc(l->world, sizeof *t->results);
      ok = ok && t->ended && t->told && t->arrived && t->want && t->polls && t->who && t->results;
    }
  }
  if (!ok) {
    if (t) tcp_destroy(&t->g);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  for (unsigned r = 0; r < n; r++) t->fd[r] = -1;
  t->g.ops = &tcp_ops;
  t->g.size = l->world;
  t->rank = l->rank;
  t->waits = *w;
  snprintf(t->rank0, sizeof t->rank0, "%s:%s", l->addr, l->port);
  *out = t;
  return AB_OK;
}

/* Rank 0's answer to one connection: its hello, checked. AB_OK with the rank in *rank;
 * IO_* in *io for a wait that ended; a refusal (sent back) otherwise. */
static ab_status hello_of(const ab_launch_t *l, uint64_t digest, tcp_t *t, int fd, double deadline, io_t *io,
                          unsigned *rank, ab_diag_t *diag) {
  hello_t h;
  kind_t kind = 0;
  size_t bytes = 0;
  *io = recv_msg(fd, &kind, &h, sizeof h, &bytes, deadline, &t->waits);
  if (*io == IO_STOPPED || *io == IO_TIMEOUT) return AB_ERR_IO;
  if (*io != IO_OK || kind != HELLO || bytes != sizeof h || h.magic != MAGIC) {
    *io = IO_CLOSED; /* not one of ours */
    return AB_ERR_IO;
  }
  if (h.version != VERSION || h.world != l->world || h.rank == 0 || h.rank >= l->world || t->fd[h.rank] >= 0)
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "--ranks env: a process said it is rank %u of %u (protocol %u); rank 0 expected one of "
                       "ranks 1 to %u of %u, each once (protocol %u)",
                       h.rank, h.world, h.version, l->world - 1, l->world, VERSION);
  if (h.digest != digest)
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "--ranks env: rank %u's stream makes other collectives than rank 0's: give every rank the same -w "
                       "arguments and seed",
                       h.rank);
  *rank = h.rank;
  return AB_OK;
}

/* Why rank 0 stopped waiting for the others to meet (io), naming those that did not come. */
static ab_status root_gave_up(const ab_launch_t *l, tcp_t *t, io_t io, const ab_waits_t *w, ab_diag_t *diag) {
  bool *missing = calloc(l->world, sizeof *missing);
  char list[256] = "the other ranks";
  if (missing) {
    for (unsigned r = 1; r < l->world; r++) missing[r] = t->fd[r] < 0;
    ab_rank_list(missing, l->world, list, sizeof list);
    free(missing);
  }
  if (io == IO_STOPPED)
    return ab_diag_set(diag, AB_ERR_IO, "interrupted (%s) while rank 0 waited on port %s for %s of %u to meet",
                       ab_signal_name(stop_signal(w)), l->port, list, l->world);
  return ab_diag_set(diag, AB_ERR_IO, "--ranks env: rank 0 waited %g s on port %s for %s of %u to meet "
                     "(AB_RENDEZVOUS_TIMEOUT)", w->meet_s, l->port, list, l->world);
}

/* Says once, after a second of waiting, what this rank waits for. */
static void say_once(FILE *say, bool *said, double since, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void say_once(FILE *say, bool *said, double since, const char *fmt, ...) {
  if (say == NULL || *said || ab_clock_s() - since < 1.0) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(say, fmt, ap);
  va_end(ap);
  fflush(say);
  *said = true;
}

/* Rank 0: waits for every other rank's hello, checks it, answers with the id. */
static ab_status meet_as_root(const ab_launch_t *l, const ab_waits_t *w, FILE *say, uint64_t digest,
                              const ab_comm_id_t *id, tcp_t *t, ab_diag_t *diag) {
  int lfd = listen_on(l, diag);
  if (lfd < 0) return AB_ERR_IO;
  double since = ab_clock_s(), deadline = since + w->meet_s;
  bool said = false;
  ab_status st = AB_OK;
  for (unsigned joined = 1; joined < l->world && st == AB_OK;) {
    /* In slices, so that the line below comes while the wait goes on. */
    io_t io = wait_readable(lfd, ab_clock_s() + 1.0 < deadline ? ab_clock_s() + 1.0 : deadline, w);
    say_once(say, &said, since, "allocbench run: rank 0 of %u waits on port %s for rank%s %s%u (up to %g s)\n",
             l->world, l->port, l->world > 2 ? "s" : "", l->world > 2 ? "1 to " : "", l->world - 1, w->meet_s);
    if (io == IO_TIMEOUT && ab_clock_s() < deadline) continue;
    if (io != IO_OK) {
      st = root_gave_up(l, t, io, w, diag);
      break;
    }
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0) continue;
    unsigned rank = 0;
    st = hello_of(l, digest, t, fd, deadline, &io, &rank, diag);
    if (st == AB_ERR_IO && io == IO_CLOSED) {
      close(fd);
      st = AB_OK;
      continue;
    }
    if (st == AB_ERR_IO) {
      close(fd);
      st = root_gave_up(l, t, io, w, diag);
      break;
    }
    if (st != AB_OK) {
      welcome_t wel;
      memset(&wel, 0, sizeof wel);
      snprintf(wel.message, sizeof wel.message, "%s", diag->msg);
      send_msg(fd, WELCOME, &wel, sizeof wel);
      close(fd);
      break;
    }
    no_delay(fd);
    t->fd[rank] = fd;
    joined++;
  }
  close(lfd);
  welcome_t wel;
  memset(&wel, 0, sizeof wel);
  wel.ok = st == AB_OK;
  if (st == AB_OK)
    memcpy(wel.id, id->bytes, sizeof wel.id);
  else
    snprintf(wel.message, sizeof wel.message, "rank 0 refused the job: %s", diag->msg);
  for (unsigned r = 1; r < l->world; r++)
    if (t->fd[r] >= 0 && !send_msg(t->fd[r], WELCOME, &wel, sizeof wel) && st == AB_OK)
      st = ab_diag_set(diag, AB_ERR_IO, "--ranks env: rank %u went away during the rendezvous", r);
  return st;
}

static ab_status meet_as_rank(const ab_launch_t *l, const ab_waits_t *w, FILE *say, uint64_t digest, ab_comm_id_t *id,
                              tcp_t *t, ab_diag_t *diag) {
  double since = ab_clock_s(), deadline = since + w->meet_s;
  bool said = false;
  int fd = -1;
  /* Connecting in steps of a second, so that the line below comes while the wait goes on. */
  for (;;) {
    double step = ab_clock_s() + 1.0 < deadline ? ab_clock_s() + 1.0 : deadline;
    fd = connect_to(l, w, step, diag);
    say_once(say, &said, since, "allocbench run: rank %u of %u waits for rank 0 at %s:%s (up to %g s)\n", l->rank,
             l->world, l->addr, l->port, w->meet_s);
    if (fd >= 0 || step >= deadline || stop_signal(w)) break;
  }
  if (fd < 0) return AB_ERR_IO;
  no_delay(fd);
  t->fd[0] = fd;
  hello_t h = {MAGIC, VERSION, l->rank, l->world, digest};
  welcome_t wel;
  kind_t kind = 0;
  size_t bytes = 0;
  io_t io = send_msg(fd, HELLO, &h, sizeof h) ? IO_OK : IO_CLOSED;
  while (io == IO_OK) { /* rank 0 answers once every rank has come */
    io = wait_readable(fd, ab_clock_s() + 1.0 < deadline ? ab_clock_s() + 1.0 : deadline, w);
    say_once(say, &said, since, "allocbench run: rank %u of %u waits for rank 0 at %s:%s to hear from every rank (up "
             "to %g s)\n", l->rank, l->world, l->addr, l->port, w->meet_s);
    if (io == IO_TIMEOUT && ab_clock_s() < deadline) io = IO_OK;
    else if (io == IO_OK) break;
  }
  if (io == IO_OK) io = recv_msg(fd, &kind, &wel, sizeof wel, &bytes, deadline, w);
  if (io == IO_STOPPED)
    return ab_diag_set(diag, AB_ERR_IO, "interrupted (%s) while rank %u waited for rank 0 at %s:%s to hear from every rank",
                       ab_signal_name(stop_signal(w)), l->rank, l->addr, l->port);
  if (io == IO_TIMEOUT)
    return ab_diag_set(diag, AB_ERR_IO, "--ranks env: rank %u: rank 0 at %s:%s did not answer within %g s (it waits "
                       "for every rank; AB_RENDEZVOUS_TIMEOUT)", l->rank, l->addr, l->port, w->meet_s);
  if (io != IO_OK || kind != WELCOME || bytes != sizeof wel)
    return ab_diag_set(diag, AB_ERR_IO, "--ranks env: rank %u: rank 0 at %s:%s closed the connection during the "
                       "rendezvous", l->rank, l->addr, l->port);
  wel.message[sizeof wel.message - 1] = '\0';
  if (!wel.ok) return ab_diag_set(diag, AB_ERR_INVALID, "%s", wel.message);
  memcpy(id->bytes, wel.id, sizeof wel.id);
  return AB_OK;
}

ab_status ab_rendezvous(const ab_launch_t *l, const ab_waits_t *w, FILE *say, uint64_t digest, ab_comm_id_t *id,
                        ab_group_t **out, ab_diag_t *diag) {
  tcp_t *t = NULL;
  AB_TRY(new_tcp(l, w, &t, diag));
  ab_status st = l->rank == 0 ? meet_as_root(l, w, say, digest, id, t, diag) : meet_as_rank(l, w, say, digest, id, t, diag);
  if (st != AB_OK) {
    t->gone = true; /* nothing to wait for in destroy */
    tcp_destroy(&t->g);
    return st;
  }
  *out = &t->g;
  return AB_OK;
}
