/* prefix.c: a replay kept at a few places, for runs under other caps to go on from
 * (prefix.h, Note [A prefix shared]). */
#include "harness/run/prefix.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/base/hostmem.h"
#include "harness/run/supervise.h"

/* A place: the process that keeps the source run there, the pipe its orders go down and the
 * one its copies' answers come up, after how many events, the caps it allows, and whether it
 * was kept for them (Note [Places by the caps]). */
typedef struct place_s {
  pid_t pid;
  int order, answer;
  size_t done;
  uint64_t lo, hi;
  bool by_cap;
} place_t;

struct ab_prefix_s {
  bool budget;       /* the runs differ by the device's budget, not the strategy's cap */
  size_t every;      /* events between two places kept as the run goes */
  size_t next;       /* the events after which the next of them is kept */
  uint64_t floor;    /* the cap from which places are kept for the caps (Note [Places by the caps]) */
  uint64_t step;     /* bytes of cap_lo between two of those */
  const volatile sig_atomic_t *stop;
  pid_t owner; /* the process that opened it */
  place_t place[AB_PREFIX_PLACES + AB_PREFIX_CAP_PLACES];
  size_t n;
  size_t by_cap; /* of them, kept for the caps */
  /* In a copy that went on from a place: */
  bool resumed;
  int answer_fd;
  size_t from; /* the place's events */
};

ab_prefix_t *ab_prefix_open(size_t events, size_t every, uint64_t floor, bool budget, const volatile sig_atomic_t *stop) {
  if (every == 0) {
    if (events < AB_PREFIX_MIN_EVENTS) return NULL;
    every = events / (AB_PREFIX_PLACES + 1);
  }
  ab_prefix_t *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  p->budget = budget;
  p->every = p->next = every ? every : 1;
  p->floor = floor;
  p->step = floor / 256 > 1 ? floor / 256 : 1;
  p->stop = stop;
  p->owner = getpid();
  p->answer_fd = -1;
  return p;
}

bool ab_prefix_resumed(const ab_prefix_t *p) { return p && p->resumed; }

static bool write_all(int fd, const void *buf, size_t n) {
  const char *c = buf;
  while (n) {
    ssize_t k = write(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k, n -= (size_t)k;
  }
  return true;
}

/* Reads n bytes, waiting at most until *stop is set (looked at every 200 ms; NULL: waits as
 * long as it takes): 1 done, 0 the other end closed or failed, -1 stopped. */
static int read_all(int fd, void *buf, size_t n, const volatile sig_atomic_t *stop) {
  char *c = buf;
  while (n) {
    if (stop && *stop) return -1;
    struct pollfd pf = {fd, POLLIN, 0};
    int r = poll(&pf, 1, stop ? 200 : -1);
    if (r < 0 && errno != EINTR) return 0;
    if (r <= 0) continue;
    ssize_t k = read(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return 0;
    c += k, n -= (size_t)k;
  }
  return 1;
}

/* An answer that carries nothing: the copy could not go on, or ended without its results. */
static void answer_none(int fd) {
  uint64_t none = 0;
  (void)write_all(fd, &none, sizeof none);
}

/* The window of the source run now: the caps its strategy's decisions allow
 * (Note [Cap window], strategy.h), or the budgets its device's checks allow
 * (Note [Budget window], device.h); false when it has none a copy could take. */
static bool window(const ab_prefix_t *p, const ab_strategy_t *s, uint64_t *lo, uint64_t *hi) {
  if (p->budget) {
    *lo = s->dev->budget_lo, *hi = s->dev->budget_hi;
    return *lo <= *hi;
  }
  *lo = s->cap_lo, *hi = s->cap_hi;
  return s->ops->take_cap != NULL && *hi != 0 && *lo <= *hi;
}

/* Takes cap, as the prefix's runs take it: the strategy's cap or the device's budget. */
static bool take(const ab_prefix_t *p, ab_strategy_t *s, uint64_t cap) {
  return p->budget ? ab_device_take_budget(s->dev, cap) : ab_strategy_take_cap(s, cap);
}

/* Closes every descriptor but the standard ones and a and b (a < b). */
static void close_others(int a, int b) {
  if (a > 3) close_range(3, (unsigned)a - 1, 0);
  if (b > a + 1) close_range((unsigned)a + 1, (unsigned)b - 1, 0);
  close_range((unsigned)b + 1, ~0U, 0);
}

/* The place's process: waits for a cap, and for each makes a copy of itself that takes it and
 * returns, to go on with the replay; answers for a copy that ends without answering. Ends
 * (never returns) when its order pipe closes, or with the thread that forked it. */
static void keep(ab_prefix_t *p, int order, int answer, size_t done, ab_strategy_t *s) {
  (void)setpgid(0, 0); /* its copies with it: one kill ends them all */
  (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != p->owner) _exit(0); /* the owner ended before the line above */
  close_others(order < answer ? order : answer, order < answer ? answer : order);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGINT, SIG_IGN); /* the owner stops it (ab_prefix_probe) */
  signal(SIGTERM, SIG_DFL);
  for (;;) {
    uint64_t cap;
    if (read_all(order, &cap, sizeof cap, NULL) != 1) _exit(0);
    pid_t copy = fork();
    if (copy == 0) {
      (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
      close(order);
      if (!take(p, s, cap)) {
        answer_none(answer);
        _exit(0);
      }
      p->resumed = true;
      p->answer_fd = answer;
      p->from = done;
      return;
    }
    int ws = 0;
    while (copy > 0 && waitpid(copy, &ws, 0) < 0 && errno == EINTR) {
    }
    if (copy < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) answer_none(answer);
  }
}

/* Note [Places by the caps]
 * A probe under a cap goes on from the latest place that allows it, so it replays the events
 * from there to its first refusal before it replays anything of its own: with places every
 * n/9 events, up to a ninth of the stream. The caps a search probes most lie from a floor up
 * (the live peak for the cap map, the safe cap for a walk), and the source run passes each of
 * them as its window's lower end climbs (cap_lo: the most the run has reserved so far, a
 * segment ahead).
 * So besides the places every n/9 events, the source is kept each time cap_lo passes the floor
 * by another `step` bytes, at most AB_PREFIX_CAP_PLACES of these; when they are all taken,
 * the step doubles and every other one ends, so that they stay spread over the caps the run
 * has passed, however high its peak turns out to be. On a random snapshot of 15 M entries
 * tune replayed 2 105 M events where it had replayed 2 140 M: most of a probe's events come
 * after its first refusal, which no place can share. */

/* Ends place k and takes it out of the list, the others kept in the order they were kept. */
static void end_place(ab_prefix_t *p, size_t k) {
  place_t *pl = &p->place[k];
  close(pl->order);
  close(pl->answer);
  kill(-pl->pid, SIGKILL);
  kill(pl->pid, SIGKILL); /* should it not have made its group yet */
  while (waitpid(pl->pid, NULL, 0) < 0 && errno == EINTR) {
  }
  p->by_cap -= pl->by_cap;
  memmove(pl, pl + 1, (--p->n - k) * sizeof *pl);
}

/* The lower end of the window from which the next place for the caps is due: a step above the
 * last one (places are kept in order, and cap_lo only climbs), else the floor. */
static uint64_t cap_due(const ab_prefix_t *p) {
  for (size_t k = p->n; k-- > 0;)
    if (p->place[k].by_cap) return p->place[k].lo + p->step;
  return p->floor;
}

/* Doubles the step between the places kept for the caps, ending each that lies less than the
 * new step above the last one kept before it. */
static void widen(ab_prefix_t *p) {
  p->step *= 2;
  bool any = false;
  uint64_t last = 0;
  for (size_t k = 0; k < p->n;) {
    const place_t *pl = &p->place[k];
    if (pl->by_cap && any && pl->lo < last + p->step) {
      end_place(p, k);
      continue;
    }
    if (pl->by_cap) last = pl->lo, any = true;
    k++;
  }
}

/* Forks the place of the source run after `done` events (a copy, under its cap, returns from
 * it with run->last set, to go on with the replay). */
static void keep_at(ab_prefix_t *p, size_t done, ab_strategy_t *s, ab_run_t *run, bool by_cap) {
  int order[2], answer[2];
  if (pipe2(order, O_CLOEXEC) != 0) return;
  if (pipe2(answer, O_CLOEXEC) != 0) {
    close(order[0]), close(order[1]);
    return;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(order[1]), close(answer[0]);
    ab_run_forget_ahead(run); /* Note [Pages a replay writes], engine.h: its copies start fresh there */
    keep(p, order[0], answer[1], done, s);
    run->last = true; /* a copy, under its cap: the replay goes on, and the copy ends with it */
    return;
  }
  close(order[0]), close(answer[1]);
  if (pid < 0) {
    close(order[1]), close(answer[0]);
    return;
  }
  ab_run_forget_ahead(run); /* and the replay's next pages are its own */
  uint64_t lo = 0, hi = 0;
  window(p, s, &lo, &hi);
  p->place[p->n++] = (place_t){pid, order[1], answer[0], done, lo, hi, by_cap};
  p->by_cap += by_cap;
}

/* ab_run_opts_t.checkpoint, every AB_PREFIX_LOOK events: keeps the source run where a place is
 * due, by its events or by the caps it passed (Note [Places by the caps]). */
static void keep_here(void *ctx, size_t done, ab_strategy_t *s, ab_run_t *run) {
  ab_prefix_t *p = ctx;
  uint64_t lo, hi;
  if (p->resumed || !window(p, s, &lo, &hi)) return;
  bool by_time = done >= p->next && p->n - p->by_cap < AB_PREFIX_PLACES;
  if (by_time) p->next = done + p->every;
  bool by_cap = !by_time && lo >= cap_due(p);
  while (by_cap && p->by_cap == AB_PREFIX_CAP_PLACES) { /* ends when one place for the caps is left */
    widen(p);
    by_cap = lo >= cap_due(p);
  }
  if ((by_time || by_cap) && ab_host_memory_available() >= AB_PREFIX_MIN_HOST_BYTES) keep_at(p, done, s, run, by_cap);
}

void ab_prefix_source(ab_prefix_t *p, ab_run_opts_t *o) {
  if (p == NULL) return;
  o->checkpoint = keep_here;
  o->checkpoint_ctx = p;
  o->checkpoint_every = AB_PREFIX_LOOK;
}

/* What a copy sends: the run's status and message, the run, the device's figures, the events
 * it replayed itself. */
_Noreturn void ab_prefix_answer(const ab_prefix_t *p, ab_status st, const ab_run_t *run, uint64_t held_peak,
                                const char *device, const ab_diag_t *diag) {
  int mem = memfd_create("allocbench-prefix", MFD_CLOEXEC);
  if (mem < 0) {
    answer_none(p->answer_fd);
    _exit(0);
  }
  ab_supervise_writer_t w = {mem, false, 0, NULL};
  int32_t status = st;
  uint64_t own = run->events_done > p->from ? run->events_done - p->from : 0;
  ab_supervise_put(&w, &status, sizeof status);
  ab_supervise_put_str(&w, diag ? diag->msg : "");
  ab_supervise_put_run(&w, run);
  ab_supervise_put(&w, &held_peak, sizeof held_peak);
  ab_supervise_put_str(&w, device ? device : "");
  ab_supervise_put(&w, &own, sizeof own);
  uint64_t size = w.off;
  char *body = w.bad ? NULL : mmap(NULL, size ? size : 1, PROT_READ, MAP_SHARED, mem, 0);
  if (body == NULL || body == MAP_FAILED || !write_all(p->answer_fd, &size, sizeof size) ||
      !write_all(p->answer_fd, body, size))
    answer_none(p->answer_fd);
  _exit(0);
}

ab_status ab_prefix_probe(ab_prefix_t *p, uint64_t cap, ab_run_t *run, uint64_t *held_peak, char device[96], bool *resumed,
                          ab_diag_t *diag) {
  *resumed = false;
  if (p == NULL || cap == 0) return AB_OK;
  size_t best = p->n;
  for (size_t k = 0; k < p->n; k++)
    if (p->place[k].lo <= cap && cap <= p->place[k].hi && (best == p->n || p->place[k].done > p->place[best].done)) best = k;
  if (best == p->n) return AB_OK;
  place_t *pl = &p->place[best];
  uint64_t size = 0;
  int got = write_all(pl->order, &cap, sizeof cap) ? read_all(pl->answer, &size, sizeof size, p->stop) : 0;
  char *body = NULL;
  if (got == 1 && size > 0) {
    body = malloc(size);
    got = body ? read_all(pl->answer, body, size, p->stop) : 0;
  }
  if (got == -1) { /* stopped: the copy with its place */
    end_place(p, best);
    free(body);
    ab_supervise_failed_run(run, AB_RUN_INTERRUPTED, AB_OK, "interrupted");
    *resumed = true;
    return AB_OK;
  }
  if (got == 0) end_place(p, best); /* it failed: not asked again */
  if (got != 1 || size == 0) {
    free(body);
    return AB_OK;
  }
  ab_supervise_reader_t r = {body, size, false, 0};
  int32_t status;
  ab_supervise_get(&r, &status, sizeof status);
  const char *msg = ab_supervise_get_str(&r);
  uint64_t replayed = run->replayed, own = 0;
  ab_supervise_get_run(&r, run);
  ab_supervise_get(&r, held_peak, sizeof *held_peak);
  const char *dev = ab_supervise_get_str(&r);
  ab_supervise_get(&r, &own, sizeof own);
  run->replayed = replayed + own;
  ab_status st = AB_OK;
  if (r.bad) {
    st = ab_diag_set(diag, AB_ERR_INTERNAL, "a replay from a kept place answered in part");
  } else {
    if (device) snprintf(device, 96, "%s", dev);
    if (status != AB_OK) st = ab_diag_set(diag, (ab_status)status, "%s", msg);
    *resumed = true;
  }
  free(body);
  return st;
}

void ab_prefix_close(ab_prefix_t *p) {
  if (p == NULL) return;
  while (p->n) end_place(p, p->n - 1);
  free(p);
}
