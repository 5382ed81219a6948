/* supervise.c: a library's runs in processes of their own (supervise.h, Note [A library in
 * a process of its own]). */
#include "run/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "run/oommap.h"
#include "run/results.h"
#include "strategies/pluggable/pluggable_library.h"

/* The child's descriptors, set up before it starts. */
#define JOB_FD 3
#define RESULT_FD 4
#define WATCH_FD 5

#define JOB_MAGIC 0x6a6f6231u    /* "job1" */
#define RESULT_MAGIC 0x72657331u /* "res1" */
#define RESULT_END 0x656e6431u   /* "end1": the results are whole */
#define NOT_STARTED (-1)         /* the watch word until the child runs */

typedef enum unit_e { UNIT_CHECK, UNIT_RUN_ONE, UNIT_PROBE } unit_t;

/* The hooks of the layers below (pipeline.h, bisect.h, run_one.h): NULL until enabled, and so
 * in a child, which runs its library in process. */
ab_status (*ab_pipeline_check_apart)(const ab_pipeline_t *p, ab_world_t *closed, ab_diag_t *diag);
ab_status (*ab_bisect_probe_apart)(const ab_events_t *es, const ab_bisect_opts_t *o, uint64_t budget, ab_run_t *run,
                                   uint64_t *held_peak, char device[96], ab_diag_t *diag);
ab_status (*ab_run_one_apart)(const ab_run_spec_t *o, const ab_events_t *es, const char *strategy, ab_run_t *run,
                                  ab_table_t *summary, ab_diag_t *diag);

void ab_supervise_enable(void) {
  ab_pipeline_check_apart = ab_supervise_check;
  ab_bisect_probe_apart = ab_supervise_probe;
  ab_run_one_apart = ab_supervise_run_one;
}

/* ---- writing and reading the files passed between the two ---------------------------------- */

/* Arrays start at multiples of ALIGN bytes of the file, so that they can be used in place. */
#define ALIGN 16

typedef struct writer_s {
  int fd;
  bool bad;
  size_t off; /* bytes written */
} writer_t;

static void put(writer_t *w, const void *p, size_t n) {
  const char *c = p;
  w->off += n;
  while (n && !w->bad) {
    ssize_t k = write(w->fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      w->bad = true;
      break;
    }
    c += k, n -= (size_t)k;
  }
}

static void put_u64(writer_t *w, uint64_t v) { put(w, &v, sizeof v); }

/* Zeros up to the next multiple of ALIGN. */
static void put_align(writer_t *w) {
  static const char zeros[ALIGN];
  put(w, zeros, (ALIGN - w->off % ALIGN) % ALIGN);
}

/* An array, aligned. */
static void put_array(writer_t *w, const void *p, size_t n) {
  put_align(w);
  put(w, p, n);
}

/* A string with its NUL; NULL as a length of UINT64_MAX. */
static void put_str(writer_t *w, const char *s) {
  put_u64(w, s ? strlen(s) + 1 : UINT64_MAX);
  if (s) put(w, s, strlen(s) + 1);
}

typedef struct reader_s {
  const char *p;
  size_t left;
  bool bad;
  size_t off; /* bytes read */
} reader_t;

/* n bytes of the file, in place; NULL (and bad) past its end. */
static const void *view(reader_t *r, size_t n) {
  if (r->bad || n > r->left) {
    r->bad = true;
    return NULL;
  }
  const void *v = r->p;
  r->p += n, r->left -= n, r->off += n;
  return v;
}

/* An array written by put_array, in place. */
static const void *view_array(reader_t *r, size_t n) {
  view(r, (ALIGN - r->off % ALIGN) % ALIGN);
  return view(r, n);
}

static void get(reader_t *r, void *dst, size_t n) {
  const void *v = view(r, n);
  if (v) memcpy(dst, v, n);
  else memset(dst, 0, n);
}

static uint64_t get_u64(reader_t *r) {
  uint64_t v;
  get(r, &v, sizeof v);
  return v;
}

static const char *get_str(reader_t *r) {
  uint64_t n = get_u64(r);
  if (n == UINT64_MAX || r->bad) return NULL;
  const char *s = view(r, n);
  if (s && (n == 0 || s[n - 1] != '\0')) r->bad = true;
  return r->bad ? NULL : s;
}

/* Maps the whole of fd (read only); NULL with *size 0 for an empty or unreadable file. */
static const char *map_file(int fd, size_t *size) {
  struct stat sb;
  *size = 0;
  if (fstat(fd, &sb) != 0 || sb.st_size <= 0) return NULL;
  void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (m == MAP_FAILED) return NULL;
  *size = (size_t)sb.st_size;
  return m;
}

static int anon_file(const char *name) { return memfd_create(name, MFD_CLOEXEC); }

/* ---- the job ------------------------------------------------------------------------------- */

/* Everything of the job but its strings and arrays. */
typedef struct job_head_s {
  uint32_t magic, unit;
  ab_device_config_t dev; /* plan: follows */
  uint64_t memory_cap;    /* check */
  uint64_t budget;        /* probe */
  uint64_t seed;          /* run */
  int32_t faults_rank, format;
  bool timeline, check, kernels, verify, quiet, verbose, recorded_addresses, device_said;
  bool cap, want_map; /* probe */
  bool record;        /* run: the run recorded (replay's exports), its log sent back */
  ab_events_t events;  /* arrays: follow */
} job_head_t;

typedef struct job_s {
  job_head_t h;
  const char *cmd, *strategy, *conf, *device, *workload, *out_dir;
  const ab_events_t *es; /* NULL for a check */
} job_t;

static void put_job(writer_t *w, const job_t *j) {
  job_head_t h = j->h;
  h.magic = JOB_MAGIC;
  h.dev.plan = NULL;
  if (j->es) {
    h.events = *j->es;
    h.events.ev = NULL, h.events.kernels = NULL, h.events.segs = NULL, h.events.stop = NULL;
  }
  put(w, &h, sizeof h);
  put_str(w, j->cmd);
  put_str(w, j->strategy);
  put_str(w, j->conf);
  put_str(w, j->device);
  put_str(w, j->workload);
  put_str(w, j->out_dir);
  if (j->h.dev.plan_len) put_array(w, j->h.dev.plan, j->h.dev.plan_len * sizeof *j->h.dev.plan);
  if (j->es) {
    put_array(w, j->es->ev, j->es->n * sizeof *j->es->ev);
    put_array(w, j->es->kernels, j->es->nkernels * sizeof *j->es->kernels);
    put_array(w, j->es->segs, j->es->nsegs * sizeof *j->es->segs);
  }
}

/* The job as the child reads it: its arrays point into the mapped file. */
static bool get_job(reader_t *r, job_t *j, ab_events_t *es) {
  memset(j, 0, sizeof *j);
  get(r, &j->h, sizeof j->h);
  if (j->h.magic != JOB_MAGIC) return false;
  j->cmd = get_str(r);
  j->strategy = get_str(r);
  j->conf = get_str(r);
  j->device = get_str(r);
  j->workload = get_str(r);
  j->out_dir = get_str(r);
  j->h.dev.plan = j->h.dev.plan_len ? view_array(r, j->h.dev.plan_len * sizeof *j->h.dev.plan) : NULL;
  if (j->h.unit != UNIT_CHECK) {
    *es = j->h.events;
    /* Read only: the engine takes the stream as const, and nothing frees these. */
    es->ev = (ab_event_t *)(uintptr_t)view_array(r, es->n * sizeof *es->ev);
    es->kernels = (ab_kernel_t *)(uintptr_t)view_array(r, es->nkernels * sizeof *es->kernels);
    es->segs = (ab_seg_event_t *)(uintptr_t)view_array(r, es->nsegs * sizeof *es->segs);
    es->cap = es->n, es->capkernels = es->nkernels, es->capsegs = es->nsegs;
    j->es = es;
  }
  return !r->bad && j->strategy != NULL;
}

/* ---- the results --------------------------------------------------------------------------- */

typedef struct result_head_s {
  uint32_t magic;
  int32_t status;
  char msg[AB_DIAG_BYTES];
  bool device_said;
  ab_run_t run;          /* its arrays: the timeline and step times follow */
  uint64_t held_peak;    /* probe */
  char device[96];       /* probe, check */
  int32_t kind;          /* check */
  uint64_t total_bytes;  /* check */
  uint64_t nrows, ncols; /* run: the summary rows it added */
  bool has_map;          /* probe: the map of its OOM follows */
  ab_trace_log_t log;    /* run, when recorded: its arrays follow */
} result_head_t;

/* The run's results into dst, which keeps its own scratch. */
static void adopt_run(ab_run_t *dst, const ab_run_t *src, const ab_tl_sample_t *timeline, const double *step_ms) {
  ab_run_t keep = *dst;
  *dst = *src;
  dst->ptr = keep.ptr, dst->requested = keep.requested, dst->stream_of = keep.stream_of, dst->foreign = keep.foreign;
  dst->nids = keep.nids;
  dst->ref_first = keep.ref_first, dst->refs = keep.refs, dst->pass_over = keep.pass_over;
  dst->timeline = keep.timeline, dst->captimeline = keep.captimeline;
  dst->step_ms = keep.step_ms, dst->capstep_ms = keep.capstep_ms;
  dst->ntimeline = src->ntimeline <= keep.captimeline && timeline ? src->ntimeline : 0;
  if (dst->ntimeline) memcpy(dst->timeline, timeline, dst->ntimeline * sizeof *timeline);
  dst->nstep_ms = src->nstep_ms <= keep.capstep_ms && step_ms ? src->nstep_ms : 0;
  if (dst->nstep_ms) memcpy(dst->step_ms, step_ms, dst->nstep_ms * sizeof *step_ms);
}

/* A run that ended as the message says, with no figures. */
static void failed_run(ab_run_t *run, ab_run_status_t status, ab_status error, const char *msg) {
  ab_run_t z;
  memset(&z, 0, sizeof z);
  z.status = status;
  z.error = error;
  snprintf(z.message, sizeof z.message, "%s", msg);
  ab_hist_reset(&z.alloc_ns);
  ab_hist_reset(&z.free_ns);
  adopt_run(run, &z, NULL, NULL);
}

static void put_map(writer_t *w, const ab_oommap_t *m) {
  ab_oommap_t h = *m;
  h.segs = NULL, h.blocks = NULL;
  memset(&h.owner, 0, sizeof h.owner);
  put_array(w, &h, sizeof h);
  put_array(w, m->segs, m->nsegs * sizeof *m->segs);
  put_array(w, m->blocks, m->nblocks * sizeof *m->blocks);
}

static bool get_map(reader_t *r, ab_oommap_t *m) {
  ab_oommap_t h;
  const void *head = view_array(r, sizeof h);
  if (head == NULL) return false;
  memcpy(&h, head, sizeof h);
  const void *segs = view_array(r, h.nsegs * sizeof *m->segs);
  const void *blocks = view_array(r, h.nblocks * sizeof *m->blocks);
  if (r->bad) return false;
  if (h.nsegs > m->capsegs) {
    void *p = realloc(m->segs, h.nsegs * sizeof *m->segs);
    if (p == NULL) return false;
    m->segs = p, m->capsegs = h.nsegs;
  }
  if (h.nblocks > m->capblocks) {
    void *p = realloc(m->blocks, h.nblocks * sizeof *m->blocks);
    if (p == NULL) return false;
    m->blocks = p, m->capblocks = h.nblocks;
  }
  if (h.nsegs) memcpy(m->segs, segs, h.nsegs * sizeof *m->segs);
  if (h.nblocks) memcpy(m->blocks, blocks, h.nblocks * sizeof *m->blocks);
  m->captured = h.captured, m->walk_status = h.walk_status;
  memcpy(m->walk_message, h.walk_message, sizeof m->walk_message);
  m->nsegs = h.nsegs, m->nblocks = h.nblocks;
  m->largest_free = h.largest_free, m->free_bytes = h.free_bytes, m->unmatched = h.unmatched;
  m->own_message = h.own_message;
  return true;
}

static void put_log(writer_t *w, const ab_trace_log_t *log) {
  put_array(w, log->recs, log->n * sizeof *log->recs);
  put_array(w, log->segs, log->nsegs * sizeof *log->segs);
  put_array(w, log->blocks, log->nblocks * sizeof *log->blocks);
}

/* A copy of the log whose counts and flags are in h, its arrays next in r, into log. */
static bool get_log(reader_t *r, const ab_trace_log_t *h, ab_trace_log_t *log) {
  const void *recs = view_array(r, h->n * sizeof *log->recs);
  const void *segs = view_array(r, h->nsegs * sizeof *log->segs);
  const void *blocks = view_array(r, h->nblocks * sizeof *log->blocks);
  if (r->bad) return false;
  ab_trace_log_free(log);
  log->recs = malloc(h->n * sizeof *log->recs + 1);
  log->segs = malloc(h->nsegs * sizeof *log->segs + 1);
  log->blocks = malloc(h->nblocks * sizeof *log->blocks + 1);
  if (log->recs == NULL || log->segs == NULL || log->blocks == NULL) {
    ab_trace_log_free(log);
    return false;
  }
  if (h->n) memcpy(log->recs, recs, h->n * sizeof *log->recs);
  if (h->nsegs) memcpy(log->segs, segs, h->nsegs * sizeof *log->segs);
  if (h->nblocks) memcpy(log->blocks, blocks, h->nblocks * sizeof *log->blocks);
  log->n = log->cap = h->n;
  log->nsegs = log->capsegs = h->nsegs;
  log->nblocks = log->capblocks = h->nblocks;
  log->captured = h->captured, log->failed = h->failed;
  return true;
}

/* ---- the parent's side ------------------------------------------------------------------------ */

/* SIGSEGV, with what the system calls it. */
static void signal_words(int sig, char *out, size_t size) {
  const char *abbrev = sigabbrev_np(sig);
  const char *desc = strsignal(sig);
  if (abbrev)
    snprintf(out, size, "SIG%s (%s)", abbrev, desc ? desc : "?");
  else
    snprintf(out, size, "signal %d", sig);
}

/* A child that went away: how, in *ws, whether it was killed after a stop, in *killed, and
 * the call it was in. */
typedef struct ending_s {
  int ws;
  bool stopped; /* the parent asked it to stop (a signal to allocbench) */
  bool killed;  /* it did not stop in time */
  int call;     /* the watch word when it ended or was killed */
} ending_t;

/* Starts the child on the three descriptors; -1 with errno when it cannot. */
static pid_t start_child(int job, int result, int watch) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) return pid;
  /* Only async-signal-safe calls from here to the exec: the parent may have threads. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  int fds[3] = {fcntl(job, F_DUPFD_CLOEXEC, 10), fcntl(result, F_DUPFD_CLOEXEC, 10), fcntl(watch, F_DUPFD_CLOEXEC, 10)};
  if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0) _exit(127);
  if (dup2(fds[0], JOB_FD) < 0 || dup2(fds[1], RESULT_FD) < 0 || dup2(fds[2], WATCH_FD) < 0) _exit(127);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  char *argv[] = {"allocbench", AB_SUPERVISE_ARG, NULL};
  execv("/proc/self/exe", argv);
  _exit(127);
}

static void wait_child(pid_t pid, volatile int *watch, ending_t *e) {
  memset(e, 0, sizeof *e);
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  double deadline = 0;
  for (;;) {
    pid_t r = waitpid(pid, &e->ws, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) break;
    int sig = ab_run_stop;
    if (sig && !e->stopped) {
      e->stopped = true;
      kill(pid, sig);
      deadline = ab_clock_s() + AB_SUPERVISE_GRACE_MS / 1000.0;
    }
    if (e->stopped && !e->killed && ab_clock_s() >= deadline) {
      e->call = *watch;
      e->killed = true;
      kill(pid, SIGKILL);
    }
    int ms = e->stopped ? 10 : 100; /* a signal cuts the wait short (EINTR) */
    if (pidfd >= 0) {
      struct pollfd pf = {pidfd, POLLIN, 0};
      poll(&pf, 1, ms);
    } else {
      struct timespec ts = {0, 2 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  if (pidfd >= 0) close(pidfd);
  if (!e->killed) e->call = *watch;
}

/* The unit's failure when the child did not end with its results: diag says how it ended. */
static ab_status say_ending(const char *cmd, const char *strategy, const ending_t *e, ab_diag_t *diag) {
  const char *call = ab_plugin_call_name((ab_plugin_call_t)e->call);
  if (e->killed) {
    fprintf(stderr, "%s: %s did not stop within %.1f s of the signal (in %s): killed\n", cmd, strategy,
            AB_SUPERVISE_GRACE_MS / 1000.0, call);
    return ab_diag_set(diag, AB_ERR_INVALID, "%s: killed in %s after the signal", strategy, call);
  }
  if (e->call == NOT_STARTED)
    return ab_diag_set(diag, AB_ERR_INTERNAL, "%s: cannot start a process for the run (/proc/self/exe)", strategy);
  if (WIFSIGNALED(e->ws)) {
    char sig[96];
    signal_words(WTERMSIG(e->ws), sig, sizeof sig);
    return ab_diag_set(diag, AB_ERR_INVALID, "%s crashed in %s: %s", strategy, call, sig);
  }
  return ab_diag_set(diag, AB_ERR_INVALID, "%s ended its process in %s with exit status %d (exit or _exit)", strategy,
                     call, WIFEXITED(e->ws) ? WEXITSTATUS(e->ws) : -1);
}

/* Runs the job in a child. AB_OK with *results mapped (the caller unmaps *size bytes) when
 * it ended with them whole; otherwise the unit's failure, *stopped when it was a stop. */
static ab_status run_job(const job_t *j, const char **results, size_t *size, bool *stopped, ab_diag_t *diag) {
  *results = NULL, *size = 0, *stopped = false;
  int job = anon_file("allocbench-job"), result = anon_file("allocbench-result"), watchfd = anon_file("allocbench-watch");
  volatile int *watch = MAP_FAILED;
  ab_status st = AB_OK;
  if (job < 0 || result < 0 || watchfd < 0 || ftruncate(watchfd, sizeof(int)) != 0) {
    st = ab_diag_set(diag, AB_ERR_IO, "%s: cannot make the files of a supervised run: %s", j->strategy, strerror(errno));
    goto out;
  }
  watch = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED, watchfd, 0);
  if (watch == MAP_FAILED) {
    st = ab_diag_set(diag, AB_ERR_IO, "%s: cannot share memory with a supervised run: %s", j->strategy, strerror(errno));
    goto out;
  }
  *watch = NOT_STARTED;
  writer_t w = {job, false, 0};
  put_job(&w, j);
  if (w.bad || lseek(job, 0, SEEK_SET) != 0) {
    st = ab_diag_set(diag, AB_ERR_IO, "%s: cannot write the job of a supervised run: %s", j->strategy, strerror(errno));
    goto out;
  }
  /* What this process has said goes out before what the child says. */
  fflush(stdout);
  fflush(stderr);
  pid_t pid = start_child(job, result, watchfd);
  if (pid < 0) {
    st = ab_diag_set(diag, AB_ERR_IO, "%s: cannot start a process for the run: %s", j->strategy, strerror(errno));
    goto out;
  }
  ending_t e;
  wait_child(pid, watch, &e);
  const char *m = map_file(result, size);
  bool whole = false;
  if (m && *size >= sizeof(result_head_t) + sizeof(uint32_t)) {
    uint32_t end;
    memcpy(&end, m + *size - sizeof end, sizeof end);
    whole = ((const result_head_t *)(const void *)m)->magic == RESULT_MAGIC && end == RESULT_END;
  }
  if (whole && WIFEXITED(e.ws) && WEXITSTATUS(e.ws) == 0) {
    *results = m;
  } else {
    if (m) munmap((void *)(uintptr_t)m, *size);
    *size = 0;
    *stopped = e.stopped;
    st = say_ending(j->cmd ? j->cmd : "allocbench", j->strategy, &e, diag);
  }
out:
  if (watch != MAP_FAILED) munmap((void *)(uintptr_t)watch, sizeof(int));
  if (job >= 0) close(job);
  if (result >= 0) close(result);
  if (watchfd >= 0) close(watchfd);
  return st;
}

static void release(const char *results, size_t size) {
  if (results) munmap((void *)(uintptr_t)results, size);
}

/* The head of a child's results and its run, read back into *h and run; the reader is left
 * at what the unit wrote after the run. */
static reader_t read_run(const char *m, size_t size, result_head_t *h, ab_run_t *run) {
  reader_t r = {m, size, false, 0};
  get(&r, h, sizeof *h);
  const ab_tl_sample_t *timeline = view_array(&r, h->run.ntimeline * sizeof *timeline);
  const double *step_ms = view_array(&r, h->run.nstep_ms * sizeof *step_ms);
  adopt_run(run, &h->run, timeline, step_ms);
  return r;
}

ab_status ab_supervise_check(const ab_pipeline_t *p, ab_world_t *closed, ab_diag_t *diag) {
  job_t j;
  memset(&j, 0, sizeof j);
  j.h.unit = UNIT_CHECK;
  j.h.dev = p->dev;
  j.h.memory_cap = p->memory_cap;
  j.cmd = "allocbench", j.strategy = p->strategy, j.conf = p->conf, j.device = p->device;
  const char *m;
  size_t size;
  bool stopped;
  AB_TRY(run_job(&j, &m, &size, &stopped, diag));
  reader_t r = {m, size, false, 0};
  result_head_t h;
  get(&r, &h, sizeof h);
  ab_status st = (ab_status)h.status;
  if (st != AB_OK) {
    ab_diag_set(diag, st, "%s", h.msg);
  } else {
    if (diag) snprintf(diag->msg, sizeof diag->msg, "%s", h.msg); /* the strategy's note */
    if (closed) {
      memset(closed, 0, sizeof *closed);
      snprintf(closed->device, sizeof closed->device, "%s", h.device);
      closed->kind = (ab_device_kind_t)h.kind;
      closed->total_bytes = h.total_bytes;
      closed->held_peak = h.held_peak;
    }
  }
  release(m, size);
  return st;
}

ab_status ab_supervise_run_one(const ab_run_spec_t *o, const ab_events_t *es, const char *strategy, ab_run_t *run,
                               ab_table_t *summary, ab_diag_t *diag) {
  job_t j;
  memset(&j, 0, sizeof j);
  j.h.unit = UNIT_RUN_ONE;
  j.h.dev = o->dev;
  j.h.seed = o->seed;
  j.h.faults_rank = o->faults_rank;
  j.h.format = (int32_t)o->format;
  j.h.timeline = o->timeline, j.h.check = o->check, j.h.kernels = o->kernels, j.h.verify = o->verify;
  j.h.quiet = o->quiet, j.h.verbose = o->verbose, j.h.recorded_addresses = o->recorded_addresses;
  j.h.device_said = ab_run_device_said;
  j.h.record = o->hooks && o->hooks->record;
  j.cmd = o->cmd, j.strategy = strategy, j.conf = o->conf, j.device = o->device, j.workload = o->workload;
  j.out_dir = o->out_dir;
  j.es = es;
  const char *m;
  size_t size;
  bool stopped;
  ab_status st = run_job(&j, &m, &size, &stopped, diag);
  if (st != AB_OK) {
    if (stopped) {
      failed_run(run, AB_RUN_INTERRUPTED, AB_OK, diag->msg);
      diag->msg[0] = '\0';
      return AB_OK;
    }
    /* The run failed: its row says so, as for any run that fails. */
    failed_run(run, AB_RUN_ERROR, st, diag->msg);
    ab_run_desc_t desc = {es->source, strategy, o->conf, o->device, o->dev.budget_bytes, o->seed, 0};
    if (ab_results_add_summary(summary, &desc, es, run) != AB_OK) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
    return st;
  }
  result_head_t h;
  reader_t r = read_run(m, size, &h, run);
  if (h.device_said) ab_run_device_said = true;
  st = (ab_status)h.status;
  if (st != AB_OK) ab_diag_set(diag, st, "%s", h.msg);
  const char **row = calloc(h.ncols ? h.ncols : 1, sizeof *row);
  for (uint64_t i = 0; i < h.nrows && row && !r.bad; i++) {
    for (uint64_t c = 0; c < h.ncols; c++) row[c] = get_str(&r);
    if (!r.bad && h.ncols == summary->ncols && ab_table_add(summary, row) != AB_OK) r.bad = true;
  }
  free(row);
  if (row != NULL && !r.bad && j.h.record && !get_log(&r, &h.log, o->hooks->record)) r.bad = true;
  if (row == NULL || r.bad) st = ab_diag_set(diag, AB_ERR_INTERNAL, "%s: the results of its process do not read back", strategy);
  release(m, size);
  return st;
}

ab_status ab_supervise_probe(const ab_events_t *es, const ab_bisect_opts_t *o, uint64_t budget, ab_run_t *run,
                             uint64_t *held_peak, char device[96], ab_diag_t *diag) {
  job_t j;
  memset(&j, 0, sizeof j);
  j.h.unit = UNIT_PROBE;
  j.h.dev = o->dev;
  j.h.budget = budget;
  j.h.check = o->check;
  j.h.cap = o->cap;
  /* The segment map crosses back; another hook could not run in this process. */
  j.h.want_map = o->on_oom == ab_oommap_capture;
  j.cmd = "allocbench", j.strategy = o->strategy, j.conf = o->conf, j.device = o->device;
  j.es = es;
  const char *m;
  size_t size;
  bool stopped;
  ab_status st = run_job(&j, &m, &size, &stopped, diag);
  if (st != AB_OK) {
    failed_run(run, stopped ? AB_RUN_INTERRUPTED : AB_RUN_ERROR, stopped ? AB_OK : st, diag->msg);
    if (!stopped) return st;
    diag->msg[0] = '\0';
    return AB_OK;
  }
  result_head_t h;
  reader_t r = read_run(m, size, &h, run);
  if (held_peak) *held_peak = h.held_peak;
  if (device) snprintf(device, 96, "%s", h.device);
  if (h.has_map && j.h.want_map && !get_map(&r, o->on_oom_ctx))
    st = ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  if (st == AB_OK && h.status != AB_OK) st = ab_diag_set(diag, (ab_status)h.status, "%s", h.msg);
  release(m, size);
  return st;
}

/* ---- the child's side ------------------------------------------------------------------------ */

static void put_result(writer_t *w, result_head_t *h, const ab_run_t *run) {
  h->magic = RESULT_MAGIC;
  if (run) h->run = *run;
  put(w, h, sizeof *h);
  if (run) {
    put_array(w, run->timeline, run->ntimeline * sizeof *run->timeline);
    put_array(w, run->step_ms, run->nstep_ms * sizeof *run->step_ms);
  }
}

static void put_end(writer_t *w) {
  uint32_t end = RESULT_END;
  put(w, &end, sizeof end);
}

static int child_check(const job_t *j, writer_t *w) {
  ab_pipeline_t p = {.device = j->device, .dev = j->h.dev, .strategy = j->strategy, .conf = j->conf,
                     .memory_cap = j->h.memory_cap};
  ab_world_t closed;
  ab_diag_t diag = {""};
  result_head_t h;
  memset(&h, 0, sizeof h);
  h.status = ab_pipeline_check(&p, &closed, &diag);
  snprintf(h.msg, sizeof h.msg, "%s", diag.msg);
  if (h.status == AB_OK) {
    snprintf(h.device, sizeof h.device, "%s", closed.device);
    h.kind = (int32_t)closed.kind;
    h.total_bytes = closed.total_bytes;
    h.held_peak = closed.held_peak;
  }
  put_result(w, &h, NULL);
  put_end(w);
  return w->bad ? AB_EXIT_FAIL : AB_EXIT_OK;
}

static int child_run_one(const job_t *j, writer_t *w) {
  ab_run_spec_t o;
  ab_run_spec_defaults(&o, j->cmd ? j->cmd : "allocbench");
  o.workload = j->workload, o.strategy = j->strategy, o.conf = j->conf, o.device = j->device;
  o.out_dir = j->out_dir ? j->out_dir : o.out_dir;
  o.seed = j->h.seed, o.dev = j->h.dev, o.faults_rank = j->h.faults_rank, o.format = (ab_format_t)j->h.format;
  o.timeline = j->h.timeline, o.check = j->h.check, o.kernels = j->h.kernels, o.verify = j->h.verify;
  o.quiet = j->h.quiet, o.verbose = j->h.verbose, o.recorded_addresses = j->h.recorded_addresses;
  ab_run_device_said = j->h.device_said;
  /* Recorded here, where the library runs; the log goes back with the results. */
  ab_trace_log_t log;
  ab_trace_log_init(&log);
  ab_run_hooks_t hooks = {.record = &log};
  if (j->h.record) o.hooks = &hooks;
  ab_run_t run;
  if (ab_run_prepare(&run, j->es) != AB_OK) return AB_EXIT_FAIL;
  ab_table_t summary;
  ab_table_init(&summary, ab_summary_cols, ab_summary_ncols);
  ab_diag_t diag = {""};
  result_head_t h;
  memset(&h, 0, sizeof h);
  h.status = ab_run_one(&o, j->es, j->strategy, &run, &summary, &diag);
  snprintf(h.msg, sizeof h.msg, "%s", diag.msg);
  h.device_said = ab_run_device_said;
  h.nrows = summary.nrows, h.ncols = summary.ncols;
  h.log = log;
  h.log.recs = NULL, h.log.segs = NULL, h.log.blocks = NULL;
  put_result(w, &h, &run);
  for (size_t i = 0; i < summary.nrows * summary.ncols; i++) put_str(w, summary.cells[i]);
  if (j->h.record) put_log(w, &log);
  put_end(w);
  ab_trace_log_free(&log);
  ab_table_free(&summary);
  ab_run_release(&run);
  return w->bad ? AB_EXIT_FAIL : AB_EXIT_OK;
}

static int child_probe(const job_t *j, writer_t *w) {
  ab_bisect_opts_t b;
  memset(&b, 0, sizeof b);
  b.strategy = j->strategy, b.conf = j->conf, b.device = j->device, b.dev = j->h.dev;
  b.check = j->h.check, b.cap = j->h.cap, b.stop = &ab_run_stop;
  ab_oommap_t map;
  ab_oommap_init(&map);
  if (j->h.want_map) b.on_oom = ab_oommap_capture, b.on_oom_ctx = &map;
  ab_run_t run;
  if (ab_run_prepare(&run, j->es) != AB_OK) return AB_EXIT_FAIL;
  ab_diag_t diag = {""};
  result_head_t h;
  memset(&h, 0, sizeof h);
  h.status = ab_bisect_probe(j->es, &b, j->h.budget, NULL, &run, &h.held_peak, h.device, &diag);
  snprintf(h.msg, sizeof h.msg, "%s", diag.msg);
  h.has_map = j->h.want_map && map.captured;
  put_result(w, &h, &run);
  if (h.has_map) put_map(w, &map);
  put_end(w);
  ab_oommap_free(&map);
  ab_run_release(&run);
  return w->bad ? AB_EXIT_FAIL : AB_EXIT_OK;
}

int ab_supervise_child(void) {
  /* A signal stops the run as it stops any (engine.h); the parent kills what does not. */
  ab_run_catch_stop();
  void *watch = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED, WATCH_FD, 0);
  if (watch == MAP_FAILED) return AB_EXIT_FAIL;
  ab_plugin_call_slot = watch;
  ab_plugin_calling(AB_PLUGIN_OUTSIDE);
  size_t size;
  const char *m = map_file(JOB_FD, &size);
  reader_t r = {m, size, m == NULL, 0};
  job_t j;
  ab_events_t es;
  if (!get_job(&r, &j, &es)) {
    fprintf(stderr, "allocbench: %s: the job does not read back\n", AB_SUPERVISE_ARG);
    return AB_EXIT_FAIL;
  }
  writer_t w = {RESULT_FD, false, 0};
  switch ((unit_t)j.h.unit) {
    case UNIT_CHECK: return child_check(&j, &w);
    case UNIT_RUN_ONE: return child_run_one(&j, &w);
    case UNIT_PROBE: return child_probe(&j, &w);
  }
  return AB_EXIT_FAIL;
}
