/* supervise.h: a unit of work of a library allocbench did not write (-s pluggable:PATH) in a
 * process of its own, watched by allocbench: the child, its job and its results carried
 * across. What a unit carries and what it does in the child are the business of the module
 * that owns it (ab_supervise_unit_t); this one starts, watches and carries, and lies below
 * them all.
 *
 * Note [A library in a process of its own]
 * A library loaded with -s pluggable runs in allocbench's address space: a crash, an exit()
 * or a hang in it would be allocbench's. As mimalloc-bench runs each allocator in a process
 * of its own, every run of one is made in a child process that allocbench supervises:
 *   1. What the child does: the whole run, from loading the library to unloading it, the
 *      workload's events and, on a GPU, its kernels, so that the library's pointers stay in
 *      the one CUDA context they came from, and the latency figures are timed around its
 *      calls in its own process, as before. The child is this binary started afresh
 *      (/proc/self/exe, never a bare fork: a process that has used CUDA cannot hand CUDA to
 *      a forked child), given the job in an anonymous file: the event stream, the strategy,
 *      its conf and the run's options. It writes what the parent needs (the run's figures,
 *      its summary row, the segment map at an OOM) into a second one, and writes its files
 *      (timeline, segment map) itself.
 *   2. The units of work: the check that a strategy can be made (ab_pipeline_check), a run
 *      (ab_run_one) and a probe of a budget search (ab_bisect_probe). Each module sends its
 *      own unit here when ab_supervise_apart says so: it writes the job (the common part,
 *      ab_supervise_job_t, and its own args), and reads back the results its side in the
 *      child wrote (ab_pipeline_check_child, ab_run_one_child, ab_bisect_probe_child, which
 *      apart.h runs by the job's unit). A run that replay exports is recorded in the child (the trace
 *      adaptor around the library's strategy) and the record sent back with the results.
 *      The ranks of run --ranks share one process (their lockstep and NCCL communicators): a
 *      library is refused there (ranks.h).
 *   3. Which call: around every call into the library the child writes which one it is
 *      into a word shared with the parent (ab_plugin_calling, pluggable_library.h), with a
 *      count of calls, so that the parent sees one call that lasts. Its loading (the
 *      constructors), its hooks, each alloc and free, its unloading (the destructors) and the
 *      process's end are calls; allocbench's own code between them and after the last is
 *      watched too (Note [What the deadline times], supervise.c).
 *   4. How it ends: a child that wrote its results whole and exited 0 is a run like any
 *      other. Otherwise the unit fails with one line naming the library, the call it was in
 *      and what happened: "crashed in alloc: SIGSEGV (Segmentation fault)", "ended its
 *      process in free with exit status 0", "stopped its process in alloc: SIGSTOP (Stopped
 *      (signal)); killed" (a child found stopped is killed: in a process group of its own,
 *      nothing but its library stops it), "did not return from alloc within 60 s
 *      (--plugin-timeout): killed" (one call past the deadline, AB_SUPERVISE_TIMEOUT_S unless
 *      ab_supervise_timeout says otherwise), "stalled its process in allocbench's code between
 *      or after its calls: no progress within 60 s" (as long without a call, once it was
 *      loaded), "sent SIGTERM (Terminated) to allocbench: killed" (a stopping
 *      signal from its process or its process group is no stop, Note [Stopping a command],
 *      stop.h), "wrote to a descriptor it does not own", "closed or replaced a descriptor it
 *      does not own"
 *      (Note [What the library can reach], supervise.c); the last line the library printed,
 *      if any, is quoted at its end. A command records that run as failed (an error row) and
 *      goes on with the rest, as it does for any run that fails.
 *      What the library prints never reaches allocbench's stdout or stderr; what allocbench
 *      says in the child (notes, the OOM report) does, through the parent.
 *   5. Stopping: on a signal that stops a command (ab_run_stop, stop.h) the parent sends the
 *      child the same signal, which stops its run as a signal stops any run; a child still there
 *      AB_SUPERVISE_GRACE_MS later (a library in a loop, or that ignores the signal) is
 *      killed, and the parent says so on stderr. The run is then interrupted, and the
 *      command ends as an interrupted command does (128 + the signal). A child whose parent
 *      dies is killed with it (PR_SET_PDEATHSIG).
 *   6. What it leaves: once the child has ended, however it ended, what is left of its process
 *      group (the processes its library started) is killed before the child is reaped, while
 *      the group's id is still the child's.
 * Only `allocbench` itself supervises (ab_supervise_enable, from main): test programs that
 * link the harness run libraries in process, and so does the child.
 *
 * The results cross in one file, framed (Note [What the library can reach], supervise.c):
 * the head (the unit's status and message) and what allocbench said in the child, then
 * what the unit writes with ab_supervise_put* and reads back, in the same order, with
 * ab_supervise_get*.
 * Statuses: ab_supervise_run returns AB_OK when the child ended with its results whole (the
 * unit's own status is in the reply); otherwise the unit's failure, in one line (point 4).
 * Not thread-safe: one unit at a time.
 */
#ifndef AB_SUPERVISE_H
#define AB_SUPERVISE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernels/device/device.h"
#include "workloads/events/events.h"
#include "harness/run/engine.h"

/* How long a child is given to stop after the signal, before it is killed. */
#define AB_SUPERVISE_GRACE_MS 1000
/* The deadline of one call into a library, unless ab_supervise_timeout says otherwise: far
 * past any allocator's call on the simulated card, or a GPU's cudaMalloc. */
#define AB_SUPERVISE_TIMEOUT_S 60.0
/* The word main() looks for in argv[1]: this process is a supervised child. */
#define AB_SUPERVISE_ARG "--supervised-child"

/* The units of work, each owned by the module named. */
typedef enum ab_supervise_unit_e {
  AB_UNIT_CHECK,   /* ab_pipeline_check (pipeline.h) */
  AB_UNIT_RUN_ONE, /* ab_run_one (run_one.h) */
  AB_UNIT_PROBE,   /* ab_bisect_probe (bisect.h) */
} ab_supervise_unit_t;

/* Lets this process run libraries in children (main of allocbench): from now on
 * ab_supervise_apart says yes to a library's strategy. */
void ab_supervise_enable(void);

/* The deadline of one call into a library, in seconds (--plugin-timeout), for the units
 * started from now on. */
void ab_supervise_timeout(double seconds);

/* Whether strategy is a library's (-s pluggable:PATH), whatever this process makes of it. */
static inline bool ab_supervise_library(const char *strategy) {
  return strategy != NULL && strncmp(strategy, "pluggable:", 10) == 0;
}

/* Whether strategy's units of work go to a child: a library's, in a process that supervises. */
bool ab_supervise_apart(const char *strategy);

/* What a job says; the child reads it back as it was written, its arrays in place. */
typedef struct ab_supervise_job_s {
  ab_supervise_unit_t unit;  /* which: apart.c runs it in the child */
  const char *cmd;           /* the command, as messages name it; NULL: "allocbench" */
  const char *strategy;      /* the library's strategy; never NULL */
  const char *conf, *device; /* may be NULL */
  const char *workload;      /* as the run names it; may be NULL */
  const char *out_dir;       /* where the run writes its files; may be NULL */
  ab_device_config_t dev;    /* its address plan goes too */
  const ab_events_t *es;     /* the stream; NULL: none (a check) */
  const void *args;          /* the unit's own, a struct without pointers */
  size_t args_bytes;
  const char *progress;      /* the parent's only: the label of the child's progress it draws
                                on a terminal; NULL: none */
} ab_supervise_job_t;

/* A checksum taken in pieces as they are written (supervise.c). */
typedef struct ab_supervise_sum_s {
  uint64_t h;
  unsigned char part[8]; /* the bytes of a word not yet whole */
  size_t npart;
} ab_supervise_sum_t;

/* One side's writing: the job (sealed once written) or the results (framed and summed). */
typedef struct ab_supervise_writer_s {
  int fd;
  bool bad;                /* a write failed */
  size_t off;              /* bytes written */
  ab_supervise_sum_t *sum; /* their checksum; NULL: none taken (the job) */
} ab_supervise_writer_t;

/* The other side's reading, in place. */
typedef struct ab_supervise_reader_s {
  const char *p;
  size_t left;
  bool bad; /* a read went past the end, or a string was not one */
  size_t off; /* bytes read */
} ab_supervise_reader_t;

/* What the child said of its unit, with the unit's own results next in `in`. */
typedef struct ab_supervise_reply_s {
  ab_status status;
  char msg[AB_DIAG_BYTES];   /* the unit's diag: why it failed, or a strategy's note */
  ab_supervise_reader_t in;
  const char *map;           /* the results' file, mapped: ab_supervise_release */
  size_t size;
} ab_supervise_reply_t;

/* Runs j in a child and waits for it. AB_OK with *reply when it ended with its results
 * whole, having said on stderr what allocbench said in the child; otherwise the unit's
 * failure in diag, *stopped when it was a stop (a signal to this process). */
ab_status ab_supervise_run(const ab_supervise_job_t *j, ab_supervise_reply_t *reply, bool *stopped,
                           ab_diag_t *diag);
void ab_supervise_release(ab_supervise_reply_t *reply);

/* The unit's own results, in the order written. A string goes with its NUL (NULL crosses);
 * an array is aligned in the file, for use in place. */
void ab_supervise_put(ab_supervise_writer_t *w, const void *p, size_t n);
void ab_supervise_put_str(ab_supervise_writer_t *w, const char *s);
void ab_supervise_put_array(ab_supervise_writer_t *w, const void *p, size_t n);
/* Reads past the end zero what they fill and return NULL, and make r bad. */
void ab_supervise_get(ab_supervise_reader_t *r, void *dst, size_t n);
const char *ab_supervise_get_str(ab_supervise_reader_t *r);
const void *ab_supervise_get_array(ab_supervise_reader_t *r, size_t n);

/* A run's results, its timeline and step times with them; the reading adopts them into run,
 * which keeps its own scratch. */
void ab_supervise_put_run(ab_supervise_writer_t *w, const ab_run_t *run);
void ab_supervise_get_run(ab_supervise_reader_t *r, ab_run_t *run);
/* Makes run one that ended as msg says, with no figures: a unit whose child failed. */
void ab_supervise_failed_run(ab_run_t *run, ab_run_status_t status, ab_status error, const char *msg);

/* The child's side. */
typedef struct ab_supervise_child_s {
  ab_supervise_job_t job;     /* as the parent wrote it; es points at `events` */
  ab_events_t events;         /* the stream, its arrays in the job's file */
  ab_supervise_writer_t out;  /* the unit's results, after ab_supervise_reply */
  ab_supervise_sum_t sum;     /* out's checksum */
  FILE *notes;                /* where allocbench says what it has to say in the child: its
                                 parent says it (ab_run_notes, run_one.h) */
} ab_supervise_child_t;

/* Sets up the child's end of Note [What the library can reach] and reads the job. False,
 * having said why on stderr, when it cannot. */
bool ab_supervise_child_begin(ab_supervise_child_t *c);
/* The head of the results, with what allocbench said in the child; the unit's own follow. */
void ab_supervise_reply(ab_supervise_child_t *c, ab_status status, const char *msg);
/* The frame's end: whether the results were written whole. */
bool ab_supervise_reply_end(ab_supervise_child_t *c);
/* In a child, the run's progress for the parent to draw (ab_run_hooks_t's progress). */
void ab_supervise_progress(void *ctx, size_t done, size_t total);
/* The unit is done: what runs from now is the process's end, and the destructors of a
 * library that was never unloaded, under the deadline of a call. */
void ab_supervise_child_end(void);

#endif
