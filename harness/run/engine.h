/* engine.h: the replay engine. It drives one event stream (events.h) through one strategy
 * (strategy.h) and measures what happened.
 * Layer: run (harness/run/), the lowest of the harness: nothing below it includes it.
 *
 * For every ALLOC and FREE it times the strategy call on the host (plus, on the simulated
 * device, the modelled time of the device calls made inside it) into a histogram; it keeps
 * the live pointers in a flat array indexed by id; it stops at the first OOM and records it
 * (event index, bytes asked, allocated and reserved at that moment, the strategy's message)
 * and classifies it; it samples a timeline at each STEP (a trace, which has none, at most
 * 200 times: Note [Timeline of a trace] in engine.c); and at the end it frees whatever is
 * still live, untimed, so that the strategy and the device can be checked for leaks.
 *
 * Kernels: on a device that runs them (kernels.h), each KERNEL event is launched on the live
 * buffers of its ids, on the event's stream; elsewhere, or with opts.kernels off, it is
 * counted in kernels_skipped. Step time is the device time between STEP events (CUDA events
 * on stream 0) when a kernels context is open, and otherwise the host time between them plus
 * the simulated device's modelled time; each step runs to the next STEP or the stream's end.
 * With opts.verify, every allocation is checked from allocation to free (verify.h).
 *
 * Ranks: in a run of several ranks (ranks.h) each rank replays its own stream with its own
 * strategy. Its collectives (allgather and reduce_scatter KERNEL events) run on opts.comm
 * (kernels.h, Note [Collectives]), and opts.lockstep is called around each of them, kernels
 * launched or not (Note [Ranks in lockstep], group.h); when it says stop, the replay stops
 * before the next event with status "stopped", as at an OOM but caused by another rank.
 *
 * Note [OOM kinds]: with L the memory the run could have (the budget, or the card's free
 * memory at the start), R the bytes the live allocations requested at the failure and A
 * the bytes of their blocks (allocated: rounded as the strategy rounds them), an OOM of a
 * request of r bytes is
 *   capacity       R + r > L: no packing of what is live could have served it;
 *   rounding       it fits as requested, but A + D > L, where D is what the request takes
 *                  from the device (ab_strategy_device_bytes: a segment, whole pages, a
 *                  chunk): the strategy's granularity, not scattered memory, is in the way;
 *   fragmentation  the rounded bytes fit too: free memory is there, scattered or cached.
 * A user reading "fragmentation" may reach for expandable segments; that only helps the last
 * kind.
 *
 * An ab_run_t holds the results and the scratch of a run; ab_run_prepare sizes it for a
 * stream once, and a prepared run can be replayed again and again (a budget bisection)
 * without allocating.
 *
 * Going on after an OOM (opts.continue_on_oom), as a program that catches the OOM does: the
 * allocation that failed is counted and its id is dead from then on: its FREE events, and
 * the KERNEL events that use it, are passed over (the stream itself was validated as if
 * every allocation succeeded). run->oom describes the first OOM. The loop pays nothing for
 * this until the first OOM: it runs up to the next event to pass over (the end, until an
 * allocation fails), and the events to pass over are found from a table of each id's later
 * references, built at the first OOM. One rank only: a passed-over collective would leave
 * the other ranks waiting, so it is refused with opts.lockstep.
 *
 * Stopping (opts.stop): every 1024 events the replay looks at *stop, and when it is
 * set, frees what is live and ends with status interrupted (a signal handler sets it).
 *
 * Statuses: ab_engine_replay returns AB_OK when the stream ran to its end, to an OOM or to a
 * stop (see run->status), and the strategy's or device's error otherwise, with run->message
 * set.
 */
#ifndef AB_ENGINE_H
#define AB_ENGINE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "workloads/events/events.h"
#include "harness/run/hist.h"
#include "strategies/strategy.h"

/* stopped: another rank of a multi-rank run failed, so this one stopped at a collective;
 * interrupted: opts.stop asked the replay to stop (a signal). */
typedef enum ab_run_status_e {
  AB_RUN_OK,
  AB_RUN_OOM,
  AB_RUN_ERROR,
  AB_RUN_STOPPED,
  AB_RUN_INTERRUPTED,
} ab_run_status_t;
typedef enum ab_oom_kind_e { AB_OOM_NONE, AB_OOM_FRAGMENTATION, AB_OOM_CAPACITY, AB_OOM_ROUNDING } ab_oom_kind_t;

const char *ab_run_status_name(ab_run_status_t st);
const char *ab_oom_kind_name(ab_oom_kind_t kind);

/* Note [Step peaks]: memory peaks inside a step (activations are freed before the next one
 * begins), so a sample at each step's start alone would miss what matters. Each sample also
 * holds the highest values since the previous sample: at the sample that begins step n, the
 * peaks of step n - 1. The engine resets the strategy's peaks after each sample and keeps
 * the run's own maxima, so run->stats still has the peaks of the whole run. */
typedef struct ab_tl_sample_s {
  uint64_t event;    /* index of the STEP event (the stream's length for the final sample) */
  uint32_t step;     /* the step that begins here */
  int64_t requested; /* the strategy's current bytes, PyTorch's names */
  int64_t allocated;
  int64_t reserved;
  int64_t peak_requested; /* the highest since the previous sample (Note [Step peaks]) */
  int64_t peak_allocated;
  int64_t peak_reserved;
} ab_tl_sample_t;

typedef struct ab_run_s ab_run_t;
typedef struct ab_comm_s ab_comm_t; /* kernels.h */

/* Where a rank is at a collective (Note [Ranks in lockstep], group.h). */
typedef enum ab_lockstep_e {
  AB_LOCKSTEP_ENTER,    /* about to launch it */
  AB_LOCKSTEP_LAUNCHED, /* launched (or, without kernels, passed over) */
  AB_LOCKSTEP_FAILED,   /* its launch failed */
} ab_lockstep_t;

typedef struct ab_run_opts_s {
  bool time_calls; /* histogram the allocs and frees (one in N timed: Note [Timing one call in N], engine.c) */
  bool timeline;   /* sample at every STEP (a trace: every n/200 events) and at the end */
  bool check;      /* run the strategy's invariant checks after every event, or every k-th where it
                    * holds more than 1 024 segments and blocks, and after the last
                    * (Note [What --check costs], engine.c; slow) */
  bool kernels;    /* launch KERNEL events where the device can */
  bool verify;     /* check that no two live allocations share memory (verify.h; slow) */
  bool continue_on_oom; /* count an OOM, pass over its id's events and go on (see above) */
  const volatile sig_atomic_t *stop; /* nonzero: stop at the next look (see above); may be NULL */
  /* Called about every 64k events with the progress so far; may be NULL. */
  void (*progress)(void *ctx, size_t done, size_t total);
  void *progress_ctx;
  /* Called at an OOM, before anything is freed, to look at the strategy's state (the
   * segment map); may be NULL. */
  void (*on_oom)(void *ctx, ab_strategy_t *s, const ab_run_t *run);
  void *on_oom_ctx;
  /* Called when the stream has run to its end, before what is left live is freed, to look
   * at the strategy's final state; may be NULL. */
  void (*at_end)(void *ctx, ab_strategy_t *s, const ab_run_t *run);
  void *at_end_ctx;
  /* Called once, after the first event at which the strategy's reserved bytes reach
   * at_reserved_bytes, to look at its state there (the segment map at a run's peak, which an
   * earlier run found); may be NULL. */
  void (*at_reserved)(void *ctx, ab_strategy_t *s, const ab_run_t *run);
  void *at_reserved_ctx;
  int64_t at_reserved_bytes;
  size_t *at_reserved_event; /* where the call was made: the event after which; may be NULL */
  /* Per allocation id (es->nids of them), the address its allocation got, kept after its
   * free (blame.h charges a free block to what last held it); may be NULL. */
  ab_dptr_t *addr_of;
  /* The rank's communicator: its collectives run on it; NULL: the one-GPU copy. */
  ab_comm_t *comm;
  /* Called at each collective, before its launch (ENTER) and after it (LAUNCHED or
   * FAILED); true goes on, false stops the replay there, with the reason in why (size
   * bytes). NULL: no lockstep (one rank). */
  bool (*lockstep)(void *ctx, ab_lockstep_t phase, char *why, size_t size);
  void *lockstep_ctx;
  /* Called between events, after event `done` - 1, about every checkpoint_every events (at a
   * multiple of 1024), to keep the replay as it stands there (prefix.h); may be NULL. */
  void (*checkpoint)(void *ctx, size_t done, ab_strategy_t *s, ab_run_t *run);
  void *checkpoint_ctx;
  size_t checkpoint_every;
} ab_run_opts_t;

typedef struct ab_oom_info_s {
  size_t event;           /* index of the ALLOC that failed */
  uint32_t id;            /* its allocation id */
  uint64_t bytes;         /* bytes it asked for */
  int64_t allocated;      /* the strategy's allocated and reserved bytes then */
  int64_t reserved;
  uint64_t live_requested; /* bytes requested by the live allocations then */
  uint64_t device_bytes;  /* what the request takes from the device (ab_strategy_device_bytes) */
  uint64_t limit;         /* the memory the run could have: the card, its budget, or the cap */
  bool capped;            /* limit is the strategy's memory cap (PyTorch's, not the card's) */
  ab_oom_kind_t kind;
  char message[1024];     /* the strategy's OOM message */
} ab_oom_info_t;

/* The kind of an OOM from its figures (Note [OOM kinds]). */
ab_oom_kind_t ab_oom_classify(const ab_oom_info_t *oom);

struct ab_run_s {
  /* scratch, sized by ab_run_prepare */
  /* Per id (Note [Pages a replay writes]): */
  ab_dptr_t *ptr;            /* the address its ALLOC was given, kept after its free */
  uint64_t *live;            /* a bit: allocated, its free not yet complete (ab_run_live) */
  uint64_t *requested;       /* a bit: between its FREE REQUEST and FREE COMPLETE */
  uint16_t *stream_of;       /* the stream it was allocated on, where kernels are launched */
  uint32_t ids_used;         /* one past the highest id this replay allocated */
  uint64_t *foreign;         /* per id: the other streams its kernels ran on (bit s: stream s) */
  bool foreign_set;          /* an entry of foreign may be nonzero */
  bool last;                 /* the process ends after this run (a copy that went on from a kept
                              * place, prefix.h): what it leaves live is not freed, so that the
                              * copy writes no page it need not; the run is not replayed again */
  uint32_t nids;
  size_t *ref_first;         /* continue_on_oom, from the first OOM: per id, where its references */
  size_t *refs;              /* (FREE and KERNEL events, in order) start in refs; nids + 1 entries */
  uint64_t *pass_over;       /* continue_on_oom: a bit per event, set for a dead id's events */
  ab_tl_sample_t *timeline;  /* up to nsteps + 1 samples (a trace: 201) */
  size_t ntimeline, captimeline;
  /* results */
  ab_run_status_t status;
  ab_status error;           /* AB_OK unless status is AB_RUN_ERROR */
  char message[1024];        /* the error, or why the run stopped */
  size_t events_done;        /* events replayed (the failing one excluded) */
  uint64_t replayed;         /* events the replays of this run went through since it was prepared,
                              * all of them together: what a run's replays cost */
  ab_oom_info_t oom;         /* when status is AB_RUN_OOM, or ooms > 0: the first OOM */
  uint64_t ooms;             /* allocations that ended in OOM: at most 1 without continue_on_oom */
  uint64_t oom_streak;       /* the most allocations in a row that ended in OOM */
  size_t last_oom_event;     /* the index of the last of them */
  uint64_t passed_over;      /* events of dead ids passed over (continue_on_oom) */
  uint64_t caught_ooms;      /* requests the program caught failing (AB_TAG_CAUGHT) that failed
                              * here too: the run went on, as the program did */
  uint64_t caught_served;    /* such requests this run served: the program's path would have
                              * differed, so the run only approximates its job */
  ab_stats_t stats;          /* the strategy's statistics at the end or at the OOM */
  ab_plan_stats_t plan;      /* its plan's, then (Note [Plan statistics], strategy.h) */
  bool cap_window;           /* the strategy kept its cap window (Note [Cap window], strategy.h): */
  uint64_t cap_lo, cap_hi;   /* then every cap of [cap_lo, cap_hi] replays to this same run */
  unsigned variants_alike;   /* the placement variants under which this run would replay as it
                              * did (bit v - 1: variant v; Note [Variants followed],
                              * sim_follow.c): its strategy read addresses only by their order
                              * and the device followed the variants (follow_variants) */
  ab_stats_t seen;           /* the peaks of the samples taken so far (Note [Step peaks]) */
  ab_hist_t alloc_ns, free_ns;
  double loop_s;             /* host time of the replay loop */
  uint64_t modeled_ns;       /* simulated device time inside the loop (sim only) */
  uint64_t kernels_skipped;  /* KERNEL events passed over */
  uint64_t kernels_launched; /* KERNEL events launched */
  double kernel_ms;          /* device time of the launched kernels */
  double *step_ms;           /* per step, its time in ms (see above), in order; sized by prepare */
  size_t nstep_ms, capstep_ms;
  double step_ms_p50;        /* the median of step_ms; 0 without steps */
  uint64_t harness_ns;       /* host time of the loop outside strategy calls, kernel launches,
                              * lockstep waits and verify checks; 0 when calls are not timed */
  uint64_t comm_bytes;       /* device memory of opts.comm at the end (ab_comm_bytes); 0 without */
  uint64_t checks;           /* invariant checks run (opts.check) */
};

/* Sizes the scratch of run for es. */
ab_status ab_run_prepare(ab_run_t *run, const ab_events_t *es);
void ab_run_release(ab_run_t *run);

/* Note [Pages a replay writes]: a process forked from a replay (a kept place and its copies,
 * prefix.h) shares the replay's pages until it writes one, and then the kernel copies that
 * page for it: about 14 us a 4 KiB page on the 2-core machine, where a fresh huge page costs
 * 0.3 us per 4 KiB, and the replay that goes on after the fork pays the same for each page
 * it shares with the place. So the per-id tables are laid out for few written pages: an
 * address is written once, at the ALLOC, where the ids handed out so far end, and what a free
 * changes is a bit, 64 ids to a word, where a table of addresses cleared at each free had
 * the copy write one page for each 512 ids it freed, all over the table. A place then forgets
 * the tables' pages past the ids used (ab_run_forget_ahead), which hold nothing yet, so that
 * its copies and the replay write fresh pages there, on huge pages where the system gives
 * them. A table of streams is written only where kernels are launched, its one reader. On a
 * random snapshot of 15 M entries tune took 0.37 M page faults where it had taken 1.5 M, and
 * 12 s of processor time in the kernel where it had taken 29 s (of 150 s in all). */

/* Whether id is live in run: allocated and its free not yet complete. */
static inline bool ab_run_live(const ab_run_t *run, uint32_t id) { return run->live[id / 64] >> (id % 64) & 1; }

/* Gives back the pages of run's per-id tables that lie wholly past the ids this replay used:
 * they read as zero again, as they were, and a later write takes a fresh page. */
void ab_run_forget_ahead(ab_run_t *run);

/* The default options: time calls, sample the timeline, launch kernels. */
ab_run_opts_t ab_run_defaults(void);

/* Replays es through s. The run must have been prepared for es. A stopped run returns AB_OK
 * (the failure was another rank's). */
ab_status ab_engine_replay(const ab_events_t *es, ab_strategy_t *s, const ab_run_opts_t *opts, ab_run_t *run);

#endif
