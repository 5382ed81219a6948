/* events.h: the event stream, the lingua franca between workloads and the replay engine.
 * Layer: events (workloads/events/), above vocab (the trace actions and the pool calls) and
 * kernels (their description); everything above shares it. It knows no strategy.
 *
 * A workload (a generator, or an importer of a recorded trace) becomes one array of compact
 * events, materialised once and replayed many times (a budget bisection replays it dozens
 * of times):
 *   ALLOC {id, bytes, stream, tag}  a new allocation; ids are dense, counted from 0
 *   FREE  {id, phase}               free of a live id, on the stream it was allocated on
 *                                   (ab_events_finish fills in that stream and the size).
 *                                   phase NOW: the memory is reusable at once; REQUEST then
 *                                   COMPLETE: the user let go at REQUEST, the memory became
 *                                   reusable at COMPLETE (PyTorch's free_requested and
 *                                   free_completed, for blocks used on other streams)
 *   KERNEL {index}                  compute on live buffers: kernels[index] describes it
 *   STEP  {n}                       a training step begins (timeline samples are taken here)
 *   SYNC                            the program synchronised the device
 *   EMPTY_CACHE                     the program asked for torch.cuda.empty_cache()
 *   POOL  {id = pool, aux = op, stream, bytes = flags}
 *                                   a private pool call (Note [Private pools], pools.h):
 *                                   "these allocations go to pool P" (BEGIN .. END), a pool
 *                                   made, released or emptied; pools are numbered from 1
 *
 * The builder functions append to a growing stream. A host allocation failure is sticky:
 * the stream remembers it (failed) and ab_events_finish reports it, so generators need not
 * check every call; they check `failed` once per step and stop there. The same happens
 * when the builder's stop flag is raised or its size limit would be passed (max_bytes). ab_events_finish also validates the stream (every FREE names a live id of
 * the right phase, kernels name live buffers large enough for their shapes), so the engine
 * never checks in its hot loop.
 *
 * Thread-safety: a stream is built by one thread; a finished stream is read-only and may be
 * replayed by several threads at once.
 *
 * Size: an event is 16 bytes; ab_events_finish gives back the room the building left, so a
 * finished stream holds its events and no more. Readers pass it by const pointer: a budget
 * search (bisect.h), a tuning grid and the ranks replay the one copy.
 */
#ifndef AB_EVENTS_H
#define AB_EVENTS_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/status.h"
#include "kernels/device/device.h"
#include "workloads/events/stacks.h"
#include "kernels/kernel_desc.h"
#include "strategies/protocol/pools.h"
#include "strategies/protocol/trace_actions.h"

typedef enum ab_event_kind_e {
  AB_EV_ALLOC = 1,
  AB_EV_FREE,
  AB_EV_KERNEL,
  AB_EV_STEP,
  AB_EV_SYNC,
  AB_EV_EMPTY_CACHE,
  AB_EV_POOL,
} ab_event_kind_t;

typedef enum ab_free_phase_e {
  AB_FREE_NOW = 0,
  AB_FREE_REQUEST,
  AB_FREE_COMPLETE,
} ab_free_phase_t;

/* What a buffer is, so results can be broken down by it. */
typedef enum ab_tag_e {
  AB_TAG_OTHER,
  AB_TAG_PARAM,     /* parameter */
  AB_TAG_GRAD,      /* gradient */
  AB_TAG_OPTIM,     /* optimizer state */
  AB_TAG_ACT,       /* activation */
  AB_TAG_TEMP,      /* temporary */
  AB_TAG_WORKSPACE,
  AB_TAG_COMM,      /* communication */
  AB_TAG_INPUT,
  /* Not a buffer: a request the recorded program saw fail (PyTorch's `oom` record) and went on
   * from. Its FREE (NOW) follows at once; where the replay fails it too, the engine counts the
   * OOM and passes over that FREE, as the program went on (engine.c, Note [Caught OOMs]). */
  AB_TAG_CAUGHT,
  AB_TAG_COUNT
} ab_tag_t;

typedef struct ab_event_s {
  uint8_t kind;    /* ab_event_kind_t */
  uint8_t aux;     /* ALLOC: ab_tag_t; FREE: ab_free_phase_t */
  uint16_t stream; /* ALLOC, FREE, KERNEL, SYNC: stream index (0 = default stream) */
  uint32_t id;     /* ALLOC, FREE: allocation id; STEP: step number; KERNEL: kernel index */
  uint64_t bytes;  /* ALLOC: bytes requested (> 0); FREE: the same, set by ab_events_finish */
} ab_event_t;

/* ---- what a recorded trace says the allocator did ------------------------------------------
 * Importers keep the recorded allocator's own decisions (PyTorch's segment_alloc,
 * segment_free, segment_map, segment_unmap) beside the events, so that a replay can be
 * compared with them and can reuse the recorded addresses. They are not replayed. */

typedef struct ab_seg_event_s {
  uint8_t action;    /* one of the segment actions of trace_actions.h */
  uint16_t stream;   /* stream index, as in the events */
  uint64_t addr;     /* as recorded */
  uint64_t bytes;
  uint64_t at_event; /* number of events before it: it happened just before ev[at_event] */
} ab_seg_event_t;

/* ---- the stream ---------------------------------------------------------------------- */

typedef struct ab_events_s {
  ab_event_t *ev;       /* the events, in order */
  size_t n, cap;
  ab_kernel_t *kernels; /* described by KERNEL events */
  size_t nkernels, capkernels;
  uint32_t nids;        /* ids handed out: ALLOC events */
  uint32_t nsteps;      /* STEP events */
  uint16_t nstreams;    /* highest stream index used, plus one */
  uint32_t npools;      /* highest private pool number used (POOL events), 0: none */
  char approximate[640]; /* why the stream only approximates what was recorded (a trace
                          * whose pools could not all be told, ...), reasons separated by
                          * "; "; "" when it does not (ab_events_approximate) */
  uint64_t unknown_pools; /* with approximate: allocations whose pool could not be told */
  ab_seg_event_t *segs; /* recorded segment decisions of a trace; none for generators */
  size_t nsegs, capsegs;
  bool failed;          /* a host allocation failed while building */
  bool finished;        /* ab_events_finish validated it */
  char source[256];     /* what the stream came from: a workload spec or a trace path */
  char settings[256];   /* allocator settings recorded with a trace; "" when none */
  uint64_t trace_ooms;  /* OOMs the recorded program caught and survived (traces) */
  uint64_t ignored;     /* trace records that could not be replayed (see the importer) */
  ab_stacks_t *stacks;  /* the call stack of each allocation, where the trace recorded them
                         * (Note [Stacks of a trace], stacks.h); NULL: none */
  uint64_t suggested_budget; /* bytes the workload is meant to run under (the CLI applies it
                              * when no --budget is given); 0: none */
  /* Limits on building, set after ab_events_init by whoever builds (workload.h): */
  const volatile sig_atomic_t *stop; /* may be NULL; once *stop is set, building fails (halted
                                      * STOPPED; checked every 4096 events) */
  uint64_t max_bytes;   /* 0: none; building fails (halted OVER_LIMIT) once the arrays would
                         * hold more (ab_events_bytes) */
  uint8_t halted;       /* why building failed: ab_events_halt_t */
} ab_events_t;

/* Why a stream's building failed (ab_events_t.failed). */
typedef enum ab_events_halt_e {
  AB_EVENTS_OUT_OF_MEMORY = 0, /* a host allocation failed */
  AB_EVENTS_STOPPED,           /* *stop was set */
  AB_EVENTS_OVER_LIMIT,        /* max_bytes would have been passed */
} ab_events_halt_t;

/* Host bytes of a stream's arrays: events, kernels and segment decisions as allocated. */
uint64_t ab_events_bytes(const ab_events_t *es);

void ab_events_init(ab_events_t *es);
void ab_events_free(ab_events_t *es);
/* Gives the stream room for `more` events beyond those it holds, at once, so that a builder
 * that knows its size does not grow the array step by step; a large array is asked onto huge
 * pages (hostmem.h), as a grown one is. No failure: without the room (the host's, or under
 * max_bytes) the array grows as events come. */
void ab_events_reserve(ab_events_t *es, size_t more);

/* Appends ALLOC and returns the new id. */
uint32_t ab_events_alloc(ab_events_t *es, uint64_t bytes, unsigned stream, ab_tag_t tag);
/* Appends FREE of id (phase NOW) on the stream it was allocated on. */
void ab_events_free_id(ab_events_t *es, uint32_t id);
/* Appends FREE of id with a phase. */
void ab_events_free_phase(ab_events_t *es, uint32_t id, ab_free_phase_t phase);
/* Appends KERNEL for a copy of *k, run on stream. */
void ab_events_kernel(ab_events_t *es, const ab_kernel_t *k, unsigned stream);
/* Appends STEP with the next step number. */
void ab_events_step(ab_events_t *es);
void ab_events_sync(ab_events_t *es, unsigned stream);
void ab_events_empty_cache(ab_events_t *es);
/* Appends POOL: op on pool (>= 1) with flags (pools.h); stream is BEGIN's stream. */
void ab_events_pool(ab_events_t *es, ab_pool_op_t op, uint32_t pool, unsigned stream, unsigned flags);
/* Adds a reason why the stream only approximates what was recorded to es->approximate. */
void ab_events_approximate(ab_events_t *es, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Records a segment decision of the traced allocator, before the next event. */
void ab_events_segment(ab_events_t *es, ab_trace_action_t action, unsigned stream, uint64_t addr, uint64_t bytes);

/* The cudaMalloc addresses the traced allocator got (its segment_alloc decisions, in order),
 * as the simulated device's address plan (device.h). *out is malloc'd (NULL when there are
 * none); AB_ERR_INTERNAL if host memory ran out. */
ab_status ab_events_address_plan(const ab_events_t *es, ab_addr_hint_t **out, size_t *n);

/* Reports a build failure and validates the stream, once (later calls return AB_OK at
 * once). On error diag names the event index. */
ab_status ab_events_finish(ab_events_t *es, ab_diag_t *diag);

/* A 64-bit FNV-1a hash of the events and kernels, for determinism checks. */
uint64_t ab_events_hash(const ab_events_t *es);

#endif
