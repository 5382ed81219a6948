/* supervise.c: a unit of work in a process of its own (supervise.h,
 * Note [A library in a process of its own]): the child, the files between the two, the watch. */
#include "harness/run/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernels/base/clock.h"
#include "strategies/pluggable/pluggable_library.h"
#include "harness/run/stop.h"

/* The child's descriptors, set up before it starts: 0 (/dev/null), 1 and 2 (the pipe its
 * parent drains) and these three. Note [What the library can reach] says what the child makes
 * of them before it loads a library. */
#define JOB_FD 3
#define RESULT_FD 4
#define WATCH_FD 5
#define CHILD_FDS 6 /* 0 to 5 */

#define JOB_MAGIC 0x6a6f6231u    /* "job1" */
#define RESULT_MAGIC 0x72657332u /* "res2" */
#define RESULT_END 0x656e6432u   /* "end2": the results are whole */
#define NOT_STARTED UINT64_MAX   /* the watch word until the child runs */
/* What the parent keeps of what the child wrote on its stdout and stderr: the end of it. */
#define OUTPUT_TAIL 4096
/* The longest quote of it in a failure's line. */
#define QUOTE_BYTES 160

/* Note [What the library can reach]
 * A library runs in the child's address space and may write into any descriptor it finds
 * (a scan of 3..1023 is a few lines of C), as it may print. What it can reach of the channel
 * between the child and allocbench, and what becomes of what it does there:
 *   - its stdout and stderr (the child's 1 and 2) are a pipe that allocbench drains: what it
 *     prints never reaches allocbench's stdout (a CSV on stdout stays whole) or stderr, and
 *     when its run fails, the last line of it is quoted in the failure's line, where it is
 *     most often the reason (an assertion's message). stdin is /dev/null.
 *   - the job: a memory file sealed against writes (F_SEAL_WRITE) before the child starts,
 *     mapped, its descriptor closed before anything is loaded. The watch word: mapped, its
 *     descriptor closed. The CUDA shim's file: sealed (pluggable_library.c).
 *   - the results: the one descriptor the child writes, moved to a number drawn at random
 *     (below 1024, where descriptor tables stay small), the low one closed. Before it writes,
 *     the child looks whether the descriptor is still its file (a library may close every
 *     number, or put /dev/null or a file of its own in their place: then the child writes
 *     nothing there and says so in the watch's memory) and whether anything is already
 *     there; what it writes is framed (a magic word at each end, its length and a checksum),
 *     which the parent checks before it reads a byte. A library that wrote there, or closed
 *     or replaced it, fails its run with one line saying so, never a crash of allocbench and
 *     never the wrong reason.
 *   - allocbench's own words in the child (notes, the OOM report) are gathered in memory
 *     (ab_run_notes) and said by the parent with the results: no descriptor of the child
 *     leads to allocbench's stderr.
 * Writes into anything else (closed numbers, the sealed files) fail in the library and harm
 * nothing. */

/* The memory the child shares with its parent. */
typedef struct watch_s {
  volatile uint64_t call;        /* the watch word (ab_plugin_call_slot); NOT_STARTED at first */
  volatile uint64_t done, total; /* a run's progress: events replayed, of total */
  volatile uint64_t lost;        /* the child found its results' descriptor closed or replaced */
} watch_t;

/* The deadline of one call into a library (ab_supervise_timeout). */
static double call_timeout_s = AB_SUPERVISE_TIMEOUT_S;

void ab_supervise_timeout(double seconds) { call_timeout_s = seconds; }

/* Whether this process supervises (ab_supervise_enable): not a child, which runs its library
 * in process, nor a program that links the harness. */
static bool enabled = false;

void ab_supervise_enable(void) { enabled = true; }

bool ab_supervise_apart(const char *strategy) { return enabled && ab_supervise_library(strategy); }

/* ---- writing and reading the files passed between the two ---------------------------------- */

/* Arrays start at multiples of ALIGN bytes of the file, so that they can be used in place. */
#define ALIGN 16

/* The checksum of the results (ab_supervise_sum_t): a multiply and a shift per 8 bytes
 * (FNV-1a's constants over words), fast enough for a log of millions of records; taken in
 * pieces as they are written. */
typedef ab_supervise_sum_t sum_t;

#define SUM_START {0xcbf29ce484222325u, {0}, 0}

static void sum_word(sum_t *s, uint64_t v) {
  s->h = (s->h ^ v) * 0x100000001b3u;
  s->h ^= s->h >> 32;
}

static void sum_add(sum_t *s, const void *p, size_t n) {
  const unsigned char *c = p;
  uint64_t v;
  if (s->npart) { /* the word begun by the last piece first */
    size_t take = n < 8u - s->npart ? n : 8u - s->npart;
    memcpy(s->part + s->npart, c, take);
    s->npart += take, c += take, n -= take;
    if (s->npart < 8) return;
    memcpy(&v, s->part, 8);
    sum_word(s, v);
    s->npart = 0;
  }
  for (; n >= 8; n -= 8, c += 8) {
    memcpy(&v, c, 8);
    sum_word(s, v);
  }
  memcpy(s->part, c, n);
  s->npart = n;
}

static uint64_t sum_end(sum_t s) {
  uint64_t v = 0;
  memcpy(&v, s.part, s.npart);
  sum_word(&s, v ^ (uint64_t)s.npart << 56);
  return s.h;
}

typedef ab_supervise_writer_t writer_t;

void ab_supervise_put(writer_t *w, const void *p, size_t n) {
  const char *c = p;
  w->off += n;
  if (w->sum) sum_add(w->sum, p, n);
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

static void put_u64(writer_t *w, uint64_t v) { ab_supervise_put(w, &v, sizeof v); }

/* Zeros up to the next multiple of ALIGN. */
static void put_align(writer_t *w) {
  static const char zeros[ALIGN];
  ab_supervise_put(w, zeros, (ALIGN - w->off % ALIGN) % ALIGN);
}

void ab_supervise_put_array(writer_t *w, const void *p, size_t n) {
  put_align(w);
  ab_supervise_put(w, p, n);
}

/* A string with its NUL; NULL as a length of UINT64_MAX. */
void ab_supervise_put_str(writer_t *w, const char *s) {
  put_u64(w, s ? strlen(s) + 1 : UINT64_MAX);
  if (s) ab_supervise_put(w, s, strlen(s) + 1);
}

typedef ab_supervise_reader_t reader_t;

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

/* An array written by ab_supervise_put_array, in place. */
const void *ab_supervise_get_array(reader_t *r, size_t n) {
  view(r, (ALIGN - r->off % ALIGN) % ALIGN);
  return view(r, n);
}

void ab_supervise_get(reader_t *r, void *dst, size_t n) {
  const void *v = view(r, n);
  if (v) memcpy(dst, v, n);
  else memset(dst, 0, n);
}

static uint64_t get_u64(reader_t *r) {
  uint64_t v;
  ab_supervise_get(r, &v, sizeof v);
  return v;
}

const char *ab_supervise_get_str(reader_t *r) {
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

static int anon_file(const char *name, unsigned flags) { return memfd_create(name, MFD_CLOEXEC | flags); }

/* ---- the job ------------------------------------------------------------------------------- */

/* Everything of the job but its strings and arrays. */
typedef struct job_head_s {
  uint32_t magic, unit;
  ab_device_config_t dev; /* plan: follows */
  bool has_events;
  ab_events_t events;     /* arrays: follow */
  uint64_t args_bytes;    /* the unit's args: follow, last */
} job_head_t;

static void put_job(writer_t *w, const ab_supervise_job_t *j) {
  job_head_t h;
  memset(&h, 0, sizeof h);
  h.magic = JOB_MAGIC;
  h.unit = (uint32_t)j->unit;
  h.dev = j->dev;
  h.dev.plan = NULL;
  h.has_events = j->es != NULL;
  if (j->es) {
    h.events = *j->es;
    h.events.ev = NULL, h.events.kernels = NULL, h.events.segs = NULL, h.events.stop = NULL;
  }
  h.args_bytes = j->args_bytes;
  ab_supervise_put(w, &h, sizeof h);
  ab_supervise_put_str(w, j->cmd);
  ab_supervise_put_str(w, j->strategy);
  ab_supervise_put_str(w, j->conf);
  ab_supervise_put_str(w, j->device);
  ab_supervise_put_str(w, j->workload);
  ab_supervise_put_str(w, j->out_dir);
  if (j->dev.plan_len) ab_supervise_put_array(w, j->dev.plan, j->dev.plan_len * sizeof *j->dev.plan);
  if (j->es) {
    ab_supervise_put_array(w, j->es->ev, j->es->n * sizeof *j->es->ev);
    ab_supervise_put_array(w, j->es->kernels, j->es->nkernels * sizeof *j->es->kernels);
    ab_supervise_put_array(w, j->es->segs, j->es->nsegs * sizeof *j->es->segs);
  }
  ab_supervise_put_array(w, j->args, j->args_bytes);
}

/* The job as the child reads it: its arrays point into the mapped file. */
static bool get_job(reader_t *r, ab_supervise_child_t *c) {
  ab_supervise_job_t *j = &c->job;
  job_head_t h;
  ab_supervise_get(r, &h, sizeof h);
  if (h.magic != JOB_MAGIC) return false;
  j->unit = (ab_supervise_unit_t)h.unit;
  j->cmd = ab_supervise_get_str(r);
  j->strategy = ab_supervise_get_str(r);
  j->conf = ab_supervise_get_str(r);
  j->device = ab_supervise_get_str(r);
  j->workload = ab_supervise_get_str(r);
  j->out_dir = ab_supervise_get_str(r);
  j->dev = h.dev;
  j->dev.plan = h.dev.plan_len ? ab_supervise_get_array(r, h.dev.plan_len * sizeof *h.dev.plan) : NULL;
  if (h.has_events) {
    ab_events_t *es = &c->events;
    *es = h.events;
    /* Read only: the engine takes the stream as const, and nothing frees these. */
    es->ev = (ab_event_t *)(uintptr_t)ab_supervise_get_array(r, es->n * sizeof *es->ev);
    es->kernels = (ab_kernel_t *)(uintptr_t)ab_supervise_get_array(r, es->nkernels * sizeof *es->kernels);
    es->segs = (ab_seg_event_t *)(uintptr_t)ab_supervise_get_array(r, es->nsegs * sizeof *es->segs);
    es->cap = es->n, es->capkernels = es->nkernels, es->capsegs = es->nsegs;
    j->es = es;
  }
  j->args = ab_supervise_get_array(r, h.args_bytes);
  j->args_bytes = h.args_bytes;
  return !r->bad && j->strategy != NULL;
}

/* ---- the results --------------------------------------------------------------------------- */

typedef struct result_head_s {
  uint32_t magic;
  int32_t status;        /* the unit's */
  uint64_t scribbled;    /* bytes the child found in its results' file before it wrote them */
  char msg[AB_DIAG_BYTES];
} result_head_t;
/* After the head: what the child said (its notes, a string), then what the unit writes
 * (ab_supervise_put*); last, the frame's end. */
typedef struct result_end_s {
  uint32_t magic, zero;
  uint64_t bytes; /* before this */
  uint64_t sum;   /* their checksum */
} result_end_t;

/* The results of src in dst; dst's scratch stays its own, with what says how it stands (the
 * foreign entries set, whether its process ends with the run). */
static void adopt_run(ab_run_t *dst, const ab_run_t *src, const ab_tl_sample_t *timeline, const double *step_ms) {
  ab_run_t keep = *dst;
  *dst = *src;
  dst->ptr = keep.ptr, dst->live = keep.live, dst->requested = keep.requested, dst->stream_of = keep.stream_of, dst->foreign = keep.foreign;
  dst->foreign_set = keep.foreign_set, dst->last = keep.last;
  dst->nids = keep.nids, dst->ids_used = keep.ids_used;
  dst->ref_first = keep.ref_first, dst->refs = keep.refs, dst->pass_over = keep.pass_over;
  dst->timeline = keep.timeline, dst->captimeline = keep.captimeline;
  dst->step_ms = keep.step_ms, dst->capstep_ms = keep.capstep_ms;
  dst->ntimeline = src->ntimeline <= keep.captimeline && timeline ? src->ntimeline : 0;
  if (dst->ntimeline) memcpy(dst->timeline, timeline, dst->ntimeline * sizeof *timeline);
  dst->nstep_ms = src->nstep_ms <= keep.capstep_ms && step_ms ? src->nstep_ms : 0;
  if (dst->nstep_ms) memcpy(dst->step_ms, step_ms, dst->nstep_ms * sizeof *step_ms);
}

void ab_supervise_put_run(writer_t *w, const ab_run_t *run) {
  ab_supervise_put(w, run, sizeof *run);
  ab_supervise_put_array(w, run->timeline, run->ntimeline * sizeof *run->timeline);
  ab_supervise_put_array(w, run->step_ms, run->nstep_ms * sizeof *run->step_ms);
}

void ab_supervise_get_run(reader_t *r, ab_run_t *run) {
  ab_run_t src;
  ab_supervise_get(r, &src, sizeof src);
  const ab_tl_sample_t *timeline = ab_supervise_get_array(r, src.ntimeline * sizeof *timeline);
  const double *step_ms = ab_supervise_get_array(r, src.nstep_ms * sizeof *step_ms);
  adopt_run(run, &src, timeline, step_ms);
}

void ab_supervise_failed_run(ab_run_t *run, ab_run_status_t status, ab_status error, const char *msg) {
  ab_run_t z;
  memset(&z, 0, sizeof z);
  z.status = status;
  z.error = error;
  snprintf(z.message, sizeof z.message, "%s", msg);
  ab_hist_reset(&z.alloc_ns);
  ab_hist_reset(&z.free_ns);
  adopt_run(run, &z, NULL, NULL);
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

/* The end of what a child wrote on its stdout and stderr. */
typedef struct output_s {
  char buf[OUTPUT_TAIL];
  size_t n;
  bool closed; /* every writer gone */
} output_t;

static void keep_output(output_t *o, const char *p, size_t n) {
  if (n >= OUTPUT_TAIL) {
    memcpy(o->buf, p + n - OUTPUT_TAIL, OUTPUT_TAIL);
    o->n = OUTPUT_TAIL;
    return;
  }
  if (o->n + n > OUTPUT_TAIL) {
    size_t drop = o->n + n - OUTPUT_TAIL;
    memmove(o->buf, o->buf + drop, o->n - drop);
    o->n -= drop;
  }
  memcpy(o->buf + o->n, p, n);
  o->n += n;
}

/* Reads what the pipe holds now (fd is non-blocking), a bounded amount at a time: a library
 * that prints without end does not keep the parent from its watch. */
static void drain(int fd, output_t *o) {
  char chunk[4096];
  for (int i = 0; i < 16 && !o->closed; i++) {
    ssize_t k = read(fd, chunk, sizeof chunk);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return; /* EAGAIN: nothing more now */
    if (k == 0) o->closed = true;
    keep_output(o, chunk, (size_t)k);
  }
}

/* The last line of the output, printable, cut to QUOTE_BYTES; "" when it wrote nothing. */
static void last_line(const output_t *o, char *out, size_t size) {
  size_t end = o->n;
  while (end && (o->buf[end - 1] == '\n' || o->buf[end - 1] == '\r' || o->buf[end - 1] == ' ')) end--;
  size_t from = end;
  while (from && o->buf[from - 1] != '\n') from--;
  bool cut = end - from > QUOTE_BYTES;
  if (cut) end = from + QUOTE_BYTES;
  size_t k = 0;
  for (size_t i = from; i < end && k + 1 < size; i++) {
    unsigned char c = (unsigned char)o->buf[i];
    out[k++] = c >= 0x20 && c < 0x7f && c != '"' ? (char)c : '?';
  }
  out[k] = '\0';
  if (cut && k + 4 < size) snprintf(out + k, size - k, "...");
}

/* A child that went away: how, and what the parent saw of it. */
typedef struct ending_s {
  int ws;           /* waitpid's status at the end */
  bool stopped;     /* the parent asked it to stop (a signal to allocbench) */
  bool killed;      /* it did not stop in time */
  bool timed_out;   /* killed: one call into the library went past the deadline */
  int stop_sig;     /* killed: the library stopped its process with this signal; 0: not */
  int sent_sig;     /* killed: its process (group) sent allocbench this stopping signal; 0: not */
  double timeout_s; /* the deadline it had */
  uint64_t call;    /* the watch word when it ended or was killed */
  output_t out;     /* what it wrote on its stdout and stderr */
} ending_t;

/* Starts the child on its descriptors 0 to 5 (from[i] becomes its i); -1 with errno when it
 * cannot. */
static pid_t start_child(const int from[CHILD_FDS]) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) {
    /* As the child does (either may run first); it fails harmlessly once the child has. */
    if (pid > 0) setpgid(pid, pid);
    return pid;
  }
  /* Only async-signal-safe calls from here to the exec: the parent may have threads. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  /* A process group of its own: the terminal's ^C and ^Z reach allocbench alone, which passes
   * a stop on to the child (wait_child), so that a child found stopped is one whose library
   * stopped it (SIGSTOP, or SIGTTOU or SIGTTIN at the terminal); and a kill reaches any
   * process the library started. */
  setpgid(0, 0);
  int high[CHILD_FDS];
  for (int i = 0; i < CHILD_FDS; i++)
    if ((high[i] = fcntl(from[i], F_DUPFD_CLOEXEC, 10)) < 0) _exit(127);
  for (int i = 0; i < CHILD_FDS; i++)
    if (dup2(high[i], i) < 0) _exit(127);
  /* Nothing else allocbench inherited goes on to the library: a make's jobserver pipes, a
   * terminal, a script's files. Written into by a library that scribbles on every number, a
   * pipe of someone else's can kill the child with SIGPIPE, or harm whoever reads it. */
  if (syscall(SYS_close_range, CHILD_FDS, ~0U, 0) != 0)
    for (int fd = CHILD_FDS; fd < 1024; fd++) close(fd);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  char *argv[] = {"allocbench", AB_SUPERVISE_ARG, NULL};
  execv("/proc/self/exe", argv);
  _exit(127);
}

/* The child and whatever its library started. */
static void kill_child(pid_t pid) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
}

/* Note [What the deadline times]
 * The deadline (--plugin-timeout) is on the child's progress: the watch word changes as each
 * call begins and ends, and one value held past the deadline kills the child. It holds from
 * the library's loading to the process's end: in each call, and in allocbench's own code
 * between the calls and after the last (AB_PLUGIN_BETWEEN), where a library's thread can hold
 * the process too (a signal handler that never returns, a lock it keeps). Only the start-up
 * before the first loading is not timed (AB_PLUGIN_OUTSIDE): a GPU's CUDA context is made
 * there, a third of a second on the H200 and more on a busy machine, and no library is in the
 * process yet. The stretches it times are short: on the simulated card, random:ops=1000000
 * through malloc_each or small_pool, the watch sampling every millisecond, the longest time
 * without a call between two of them was 10 ms, and the writing of the timeline and the
 * results after the last 20 ms; --check and --verify are checked between calls each a few
 * milliseconds apart. */

/* Whether the watch word says the child is where the deadline holds
 * (Note [What the deadline times]). */
static bool timed(uint64_t word) {
  if (word == NOT_STARTED) return false;
  ab_plugin_call_t c = ab_plugin_call_of(word);
  return c > AB_PLUGIN_OUTSIDE && c <= AB_PLUGIN_EXITING;
}

#define TICK_S 0.1 /* the watch's period when nothing happens */

/* The child's progress on a terminal, as a run in this process draws it (run_one.c), at most
 * ten updates a second. */
typedef struct progress_s {
  const char *label; /* NULL: none drawn */
  double last;
  uint64_t done;
  bool shown;
} progress_t;

static void draw_progress(progress_t *p, const watch_t *w, double now) {
  uint64_t done = w->done, total = w->total;
  if (p->label == NULL || total == 0 || done == p->done || now - p->last < 0.1) return;
  p->done = done, p->last = now, p->shown = true;
  fprintf(stderr, "\r%s: %3.0f%% (%llu/%llu events)", p->label, 100.0 * (double)done / (double)total,
          (unsigned long long)done, (unsigned long long)total);
  fflush(stderr);
}

/* Whether the child stopped (its signal in *stop_sig) or ended, left unreaped: its pid, the
 * id of its process group, stays its own until reap_child. */
static bool child_changed(pid_t pid, int *stop_sig) {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  *stop_sig = 0;
  if (waitid(P_PID, (id_t)pid, &si, WEXITED | WSTOPPED | WNOHANG | WNOWAIT) != 0) return errno != EINTR;
  if (si.si_pid != pid) return false;
  if (si.si_code == CLD_STOPPED) *stop_sig = si.si_status;
  return true;
}

/* Kills what is left of the child's process group (the processes its library started, which
 * outlive it otherwise), then reaps the child into *ws. */
static void reap_child(pid_t pid, int *ws) {
  kill(-pid, SIGKILL);
  while (waitpid(pid, ws, 0) < 0 && errno == EINTR) {
  }
}

/* Waits for the child to end, draining its output (out, non-blocking): passes a signal to
 * allocbench on (and kills a child still there AB_SUPERVISE_GRACE_MS later), kills a child
 * its library stopped, that sent allocbench a stopping signal, or whose watch word stayed the
 * same past the deadline (Note [What the deadline times]); what is left of its process group
 * once it ended is killed. */
static void wait_child(pid_t pid, const watch_t *watch, int out, const char *label, ending_t *e) {
  memset(e, 0, sizeof *e);
  progress_t prog = {label, 0, 0, false};
  e->timeout_s = call_timeout_s;
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  double grace_end = 0, now = ab_clock_s(), last = now, since = now;
  uint64_t seen = watch->call;
  bool dead = false; /* killed: only the reaping is left */
  ab_run_watch_group(pid);
  for (;;) {
    int stop_sig;
    if (child_changed(pid, &stop_sig) && stop_sig == 0) break;
    if (stop_sig) {
      if (!dead) {
        e->stop_sig = stop_sig;
        e->call = watch->call;
        dead = true;
      }
      kill_child(pid); /* SIGKILL ends a stopped process too */
    }
    int sent = ab_run_group_signal();
    if (sent && !dead) {
      e->sent_sig = sent;
      e->call = watch->call;
      dead = true;
      kill_child(pid);
    }
    now = ab_clock_s();
    /* Time this process did not run (stopped by ^Z, or starved) is not the library's. */
    if (now - last > 1.0 + TICK_S) since += now - last - TICK_S;
    last = now;
    draw_progress(&prog, watch, now);
    uint64_t word = watch->call;
    if (word != seen) {
      seen = word;
      since = now;
    } else if (!dead && timed(word) && now - since > e->timeout_s) {
      e->timed_out = true;
      e->call = word;
      dead = true;
      kill_child(pid);
    }
    int sig = ab_run_stop;
    if (sig && !e->stopped && !dead) {
      e->stopped = true;
      kill(pid, sig);
      grace_end = now + AB_SUPERVISE_GRACE_MS / 1000.0;
    }
    if (e->stopped && !dead && now >= grace_end) {
      e->call = watch->call;
      e->killed = true;
      dead = true;
      kill_child(pid);
    }
    /* A signal cuts the wait short (EINTR); so do the child's end and its output. */
    struct pollfd pf[2];
    nfds_t n = 0;
    if (pidfd >= 0) pf[n++] = (struct pollfd){pidfd, POLLIN, 0};
    if (!e->out.closed) pf[n++] = (struct pollfd){out, POLLIN, 0};
    poll(pf, n, e->stopped || dead ? 10 : (int)(TICK_S * 1000));
    drain(out, &e->out);
  }
  reap_child(pid, &e->ws);
  ab_run_watch_group(0);
  /* What it wrote before it ended is in the pipe; a process it started (in another process
   * group) may hold the pipe open, so nothing waits for its end. */
  drain(out, &e->out);
  if (pidfd >= 0) close(pidfd);
  if (!dead) e->call = watch->call;
  if (prog.shown) fprintf(stderr, "\r%*s\r", (int)strlen(label) + 32, "");
}

/* ", saying: \"...\"", the last line of what the child wrote, or "" when it wrote nothing. */
static void quote_output(const ending_t *e, char *out, size_t size) {
  char line[QUOTE_BYTES + 8];
  last_line(&e->out, line, sizeof line);
  if (line[0])
    snprintf(out, size, "; its last output: \"%s\"", line);
  else
    out[0] = '\0';
}

/* The unit's failure when the child did not end with its results: diag says how it ended,
 * in one line naming the library and the call. */
static ab_status say_ending(const char *cmd, const char *strategy, const ending_t *e, ab_diag_t *diag) {
  const char *call = ab_plugin_call_name(ab_plugin_call_of(e->call));
  char said[QUOTE_BYTES + 40];
  quote_output(e, said, sizeof said);
  if (e->killed) {
    fprintf(stderr, "%s: %s did not stop within %.1f s of the signal (in %s): killed\n", cmd, strategy,
            AB_SUPERVISE_GRACE_MS / 1000.0, call);
    return ab_diag_set(diag, AB_ERR_INVALID, "%s: killed in %s after the signal", strategy, call);
  }
  if (e->call == NOT_STARTED)
    return ab_diag_set(diag, AB_ERR_INTERNAL, "%s: cannot start a process for the run (/proc/self/exe)%s", strategy,
                       said);
  char sig[96];
  if (e->sent_sig) { /* no call named: the child went on while the signal reached this process */
    signal_words(e->sent_sig, sig, sizeof sig);
    return ab_diag_set(diag, AB_ERR_INVALID, "%s sent %s to allocbench: killed%s", strategy, sig, said);
  }
  if (e->stop_sig) {
    signal_words(e->stop_sig, sig, sizeof sig);
    return ab_diag_set(diag, AB_ERR_INVALID, "%s stopped its process in %s: %s; killed%s", strategy, call, sig, said);
  }
  if (e->timed_out && ab_plugin_call_of(e->call) == AB_PLUGIN_BETWEEN)
    return ab_diag_set(diag, AB_ERR_INVALID, "%s stalled its process in %s: no progress within %g s (--plugin-timeout): killed%s",
                       strategy, call, e->timeout_s, said);
  if (e->timed_out)
    return ab_diag_set(diag, AB_ERR_INVALID, "%s did not return from %s within %g s (--plugin-timeout): killed%s",
                       strategy, call, e->timeout_s, said);
  if (WIFSIGNALED(e->ws)) {
    signal_words(WTERMSIG(e->ws), sig, sizeof sig);
    return ab_diag_set(diag, AB_ERR_INVALID, "%s crashed in %s: %s%s", strategy, call, sig, said);
  }
  return ab_diag_set(diag, AB_ERR_INVALID, "%s ended its process in %s with exit status %d (exit or _exit)%s", strategy,
                     call, WIFEXITED(e->ws) ? WEXITSTATUS(e->ws) : -1, said);
}

/* The result file is the child's, whole: framed as put_end frames it, its checksum right. */
static bool results_whole(const char *m, size_t size) {
  result_end_t end;
  result_head_t h;
  if (m == NULL || size < sizeof h + sizeof end) return false;
  memcpy(&end, m + size - sizeof end, sizeof end);
  memcpy(&h, m, sizeof h);
  if (h.magic != RESULT_MAGIC || end.magic != RESULT_END || end.bytes != size - sizeof end) return false;
  sum_t sum = SUM_START;
  sum_add(&sum, m, end.bytes);
  return sum_end(sum) == end.sum;
}

/* The head of the results and what the child said (its notes), read; the reader is left at
 * what the unit wrote next. */
static reader_t read_head(const char *m, size_t size, result_head_t *h, const char **notes) {
  reader_t r = {m, size, false, 0};
  ab_supervise_get(&r, h, sizeof *h);
  *notes = ab_supervise_get_str(&r);
  return r;
}

/* What the parent makes for a child: its descriptors, and its end of the pipe. */
typedef struct files_s {
  int null, out, in; /* /dev/null; the pipe's ends: the parent reads out, the child writes in */
  int job, result, watch;
} files_t;

static void close_files(files_t *f) {
  int *all[] = {&f->null, &f->out, &f->in, &f->job, &f->result, &f->watch};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    if (*all[i] >= 0) close(*all[i]);
    *all[i] = -1;
  }
}

/* Makes a child's files, the job written into f->job and sealed, and maps the watch word. */
static ab_status make_files(const ab_supervise_job_t *j, files_t *f, watch_t **watch, ab_diag_t *diag) {
  int pipe_fds[2] = {-1, -1};
  f->null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  bool ok = f->null >= 0 && pipe2(pipe_fds, O_CLOEXEC) == 0;
  f->out = pipe_fds[0], f->in = pipe_fds[1];
  if (!ok || fcntl(f->out, F_SETFL, O_NONBLOCK) != 0)
    return ab_diag_set(diag, AB_ERR_IO, "%s: cannot make the descriptors of a supervised run: %s", j->strategy,
                       strerror(errno));
  f->job = anon_file("allocbench-job", MFD_ALLOW_SEALING);
  f->result = anon_file("allocbench-result", 0);
  f->watch = anon_file("allocbench-watch", 0);
  if (f->job < 0 || f->result < 0 || f->watch < 0 || ftruncate(f->watch, sizeof(watch_t)) != 0)
    return ab_diag_set(diag, AB_ERR_IO, "%s: cannot make the files of a supervised run: %s", j->strategy, strerror(errno));
  *watch = mmap(NULL, sizeof(watch_t), PROT_READ | PROT_WRITE, MAP_SHARED, f->watch, 0);
  if (*watch == MAP_FAILED)
    return ab_diag_set(diag, AB_ERR_IO, "%s: cannot share memory with a supervised run: %s", j->strategy, strerror(errno));
  (*watch)->call = NOT_STARTED;
  writer_t w = {f->job, false, 0, NULL};
  put_job(&w, j);
  /* Sealed: nothing in the child, its library included, can change the job it reads. */
  if (w.bad || fcntl(f->job, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
    return ab_diag_set(diag, AB_ERR_IO, "%s: cannot write the job of a supervised run: %s", j->strategy, strerror(errno));
  return AB_OK;
}

/* The unit's failure when the child found its results' descriptor closed or replaced. */
static ab_status say_lost(const char *strategy, ab_diag_t *diag) {
  return ab_diag_set(diag, AB_ERR_INVALID,
                     "%s closed or replaced a descriptor it does not own (allocbench's results) during its run", strategy);
}

/* The unit's failure when the child ended with its results whole (h) but found something in
 * their file before it wrote them, or ended well without them whole. */
static ab_status say_scribbled(const char *strategy, const result_head_t *h, ab_diag_t *diag) {
  if (h)
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "%s wrote to a descriptor it does not own (allocbench's results: %llu bytes) during its run",
                       strategy, (unsigned long long)h->scribbled);
  return ab_diag_set(diag, AB_ERR_INVALID,
                     "%s wrote to a descriptor it does not own: allocbench's results from its process do not read back",
                     strategy);
}

ab_status ab_supervise_run(const ab_supervise_job_t *j, ab_supervise_reply_t *reply, bool *stopped,
                           ab_diag_t *diag) {
  memset(reply, 0, sizeof *reply);
  *stopped = false;
  files_t f = {-1, -1, -1, -1, -1, -1};
  watch_t *watch = MAP_FAILED;
  ending_t *e = malloc(sizeof *e); /* its output's tail is too large for a thread's stack */
  ab_status st = e ? make_files(j, &f, &watch, diag) : ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  if (st != AB_OK) goto out;
  /* What this process has said goes out before what the child says. */
  fflush(stdout);
  fflush(stderr);
  const int fds[CHILD_FDS] = {f.null, f.in, f.in, f.job, f.result, f.watch};
  pid_t pid = start_child(fds);
  if (pid < 0) {
    st = ab_diag_set(diag, AB_ERR_IO, "%s: cannot start a process for the run: %s", j->strategy, strerror(errno));
    goto out;
  }
  close(f.in); /* the child's end */
  f.in = -1;
  wait_child(pid, watch, f.out, j->progress, e);
  size_t size;
  const char *m = map_file(f.result, &size);
  bool clean = !e->killed && !e->timed_out && !e->stop_sig && !e->sent_sig && WIFEXITED(e->ws) && WEXITSTATUS(e->ws) == 0;
  result_head_t h;
  const char *notes = NULL;
  reader_t r = {NULL, 0, true, 0};
  if (clean && results_whole(m, size)) r = read_head(m, size, &h, &notes);
  if (notes && h.scribbled == 0) {
    fputs(notes, stderr);
    reply->status = (ab_status)h.status;
    memcpy(reply->msg, h.msg, sizeof reply->msg);
    reply->msg[sizeof reply->msg - 1] = '\0';
    reply->in = r;
    reply->map = m, reply->size = size;
    goto out;
  }
  if (m) munmap((void *)(uintptr_t)m, size);
  *stopped = e->stopped;
  bool ended = !e->killed && !e->timed_out && !e->stop_sig && !e->sent_sig && WIFEXITED(e->ws);
  if (ended && watch->lost)
    st = say_lost(j->strategy, diag);
  else if (notes || (clean && ab_plugin_call_of(e->call) == AB_PLUGIN_EXITING))
    st = say_scribbled(j->strategy, notes ? &h : NULL, diag);
  else
    st = say_ending(j->cmd ? j->cmd : "allocbench", j->strategy, e, diag);
out:
  free(e);
  if (watch != MAP_FAILED) munmap(watch, sizeof(watch_t));
  close_files(&f);
  return st;
}

void ab_supervise_release(ab_supervise_reply_t *reply) {
  if (reply->map) munmap((void *)(uintptr_t)reply->map, reply->size);
  reply->map = NULL, reply->size = 0;
}

/* ---- the child's side ------------------------------------------------------------------------ */

/* The memory shared with the parent. */
static watch_t *child_watch;

void ab_supervise_progress(void *ctx, size_t done, size_t total) {
  (void)ctx;
  child_watch->total = total;
  child_watch->done = done;
}

/* What allocbench has said in this process (ab_supervise_child_t's notes), for the parent to
 * say. */
static char *notes_text;
static size_t notes_bytes;

/* The results' file as the child set it up (hide_results): what its descriptor must still be. */
static struct stat results_file;

/* Whether fd is still the results' file; if not, the child says so to its parent and writes
 * nothing through it (Note [What the library can reach]): what is there now is the library's,
 * or no file at all. */
static bool results_kept(writer_t *w) {
  struct stat now;
  bool kept = fstat(w->fd, &now) == 0 && now.st_dev == results_file.st_dev && now.st_ino == results_file.st_ino;
  if (!kept) {
    child_watch->lost = 1;
    w->bad = true;
  }
  return kept;
}

/* Empties the results' file and says how many bytes were in it: the library's, since nothing
 * else in the process has the descriptor and the child writes it only now
 * (Note [What the library can reach]). */
static uint64_t clear_results(writer_t *w) {
  off_t end = lseek(w->fd, 0, SEEK_END);
  if (end < 0 || ftruncate(w->fd, 0) != 0 || lseek(w->fd, 0, SEEK_SET) != 0) w->bad = true;
  return end > 0 ? (uint64_t)end : 0;
}

void ab_supervise_reply(ab_supervise_child_t *c, ab_status status, const char *msg) {
  result_head_t h;
  memset(&h, 0, sizeof h);
  h.magic = RESULT_MAGIC;
  h.status = status;
  h.scribbled = results_kept(&c->out) ? clear_results(&c->out) : 0;
  snprintf(h.msg, sizeof h.msg, "%s", msg);
  ab_supervise_put(&c->out, &h, sizeof h);
  fflush(c->notes);
  ab_supervise_put_str(&c->out, notes_text ? notes_text : "");
}

/* The frame's end: the parent reads nothing of a file whose end does not match. */
bool ab_supervise_reply_end(ab_supervise_child_t *c) {
  result_end_t end = {RESULT_END, 0, c->out.off, sum_end(*c->out.sum)};
  ab_supervise_put(&c->out, &end, sizeof end);
  return !c->out.bad;
}

/* Moves the results' descriptor to a number drawn at random
 * (Note [What the library can reach]); the new descriptor, or -1. */
static int hide_results(void) {
  int lo = 64, hi = 1024; /* below 1024: the descriptor table stays small */
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)hi) hi = (int)rl.rlim_cur;
  uint32_t r;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
    r = (uint32_t)getpid() * 2654435761u ^ (uint32_t)(ab_clock_s() * 1e9); /* no entropy yet: still unknown to it */
  int fd = fcntl(RESULT_FD, F_DUPFD_CLOEXEC, hi > lo ? lo + (int)(r % (uint32_t)(hi - lo)) : 10);
  if (fd < 0) fd = fcntl(RESULT_FD, F_DUPFD_CLOEXEC, 10); /* the number drawn and those above it taken */
  if (fd < 0 || close(RESULT_FD) != 0 || fstat(fd, &results_file) != 0) return -1;
  return fd;
}

bool ab_supervise_child_begin(ab_supervise_child_t *c) {
  memset(c, 0, sizeof *c);
  /* A signal stops the run as it stops any (engine.h); the parent kills what does not. */
  ab_run_catch_stop();
  /* The job and the watch word mapped, their descriptors closed; the results' moved; the notes
   * gathered in memory (Note [What the library can reach]). */
  void *shared = mmap(NULL, sizeof(watch_t), PROT_READ | PROT_WRITE, MAP_SHARED, WATCH_FD, 0);
  if (shared == MAP_FAILED || close(WATCH_FD) != 0) return false;
  child_watch = shared;
  ab_plugin_call_slot = &child_watch->call;
  ab_plugin_calling(AB_PLUGIN_OUTSIDE);
  size_t size;
  const char *m = map_file(JOB_FD, &size);
  reader_t r = {m, size, m == NULL, 0};
  if (close(JOB_FD) != 0 || !get_job(&r, c)) {
    fprintf(stderr, "allocbench: %s: the job does not read back\n", AB_SUPERVISE_ARG);
    return false;
  }
  int results = hide_results();
  c->notes = open_memstream(&notes_text, &notes_bytes);
  if (results < 0 || c->notes == NULL) {
    fprintf(stderr, "allocbench: %s: cannot set up its results: %s\n", AB_SUPERVISE_ARG, strerror(errno));
    return false;
  }
  c->sum = (sum_t)SUM_START;
  c->out = (writer_t){results, false, 0, &c->sum};
  return true;
}

void ab_supervise_child_end(void) { ab_plugin_calling(AB_PLUGIN_EXITING); }
