/* supervise.h: each run of a library allocbench did not write (-s pluggable:PATH) in a
 * process of its own, watched by allocbench.
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
 *      (ab_run_one) and a probe of a budget search (ab_bisect_probe); each asks its
 *      hook first (ab_apart, pipeline.h). A run that replay exports is recorded in the
 *      child (the trace adaptor around the library's strategy) and the record sent back with
 *      the results. The ranks of run --ranks share one process (their lockstep and NCCL
 *      communicators): a library is refused there (ranks.h).
 *   3. Which call: around every call into the library the child writes which one it is
 *      into a word shared with the parent (ab_plugin_calling, pluggable_library.h), with a
 *      count of calls, so that the parent sees one call that lasts. Its loading (the
 *      constructors), its hooks, each alloc and free, its unloading (the destructors) and the
 *      process's end are calls.
 *   4. How it ends: a child that wrote its results whole and exited 0 is a run like any
 *      other. Otherwise the unit fails with one line naming the library, the call it was in
 *      and what happened: "crashed in alloc: SIGSEGV (Segmentation fault)", "ended its
 *      process in free with exit status 0", "stopped its process in alloc: SIGSTOP (Stopped
 *      (signal)); killed" (a child found stopped is killed: in a process group of its own,
 *      nothing but its library stops it), "did not return from alloc within 60 s
 *      (--plugin-timeout): killed" (one call past the deadline, AB_SUPERVISE_TIMEOUT_S unless
 *      ab_supervise_timeout says otherwise), "wrote to a descriptor it does not own" (Note
 *      [What the library can reach], supervise.c); the last line the library printed, if
 *      any, is quoted at its end. A command records that run as failed (an error row) and
 *      goes on with the rest, as it does for any run that fails.
 *      What the library prints never reaches allocbench's stdout or stderr; what allocbench
 *      says in the child (notes, the OOM report) does, through the parent.
 *   5. Stopping: on SIGINT or SIGTERM (ab_run_stop) the parent sends the child the same
 *      signal, which stops its run as a signal stops any run (engine.h); a child still there
 *      AB_SUPERVISE_GRACE_MS later (a library in a loop, or that ignores the signal) is
 *      killed, and the parent says so on stderr. The run is then interrupted, and the
 *      command ends as an interrupted command does (128 + the signal). A child whose parent
 *      dies is killed with it (PR_SET_PDEATHSIG).
 * Only `allocbench` itself supervises (ab_supervise_enable, from main): test programs that
 * link the harness run libraries in process.
 */
#ifndef AB_SUPERVISE_H
#define AB_SUPERVISE_H

#include <stdbool.h>
#include <stdint.h>

#include "harness/run/bisect.h"
#include "harness/run/pipeline.h"
#include "harness/run/run_one.h"
#include "harness/run/table.h"

/* How long a child is given to stop after the signal, before it is killed. */
#define AB_SUPERVISE_GRACE_MS 1000
/* The deadline of one call into a library, unless ab_supervise_timeout says otherwise: far
 * past any allocator's call on the simulated card, or a GPU's cudaMalloc. */
#define AB_SUPERVISE_TIMEOUT_S 60.0
/* The word main() looks for in argv[1]: this process is a supervised child. */
#define AB_SUPERVISE_ARG "--supervised-child"

/* Lets this process run libraries in children (main of allocbench): installs the hooks of
 * pipeline.h, bisect.h and run_one.h (ab_apart), through which a library's unit of work, and
 * only a library's, comes to the three functions below. */
void ab_supervise_enable(void);

/* The deadline of one call into a library, in seconds (--plugin-timeout), for the units
 * started from now on. */
void ab_supervise_timeout(double seconds);

/* ab_pipeline_check in a child; p->wrap must be NULL. */
ab_status ab_supervise_check(const ab_pipeline_t *p, ab_world_t *closed, ab_diag_t *diag);

/* ab_run_one in a child; o->hooks must be NULL. A child that failed adds an error row. */
ab_status ab_supervise_run_one(const ab_run_spec_t *o, const ab_events_t *es, const char *strategy, ab_run_t *run,
                               ab_table_t *summary, ab_diag_t *diag);

/* ab_bisect_probe (with its default engine options) in a child; an on_oom hook of o is
 * taken as ab_oommap_capture, its map filled from the child's. */
ab_status ab_supervise_probe(const ab_events_t *es, const ab_bisect_opts_t *o, uint64_t budget, ab_run_t *run,
                             uint64_t *held_peak, char device[96], ab_diag_t *diag);

/* The child's side: reads the job, does it, writes the results; its exit status. */
int ab_supervise_child(void);

#endif
