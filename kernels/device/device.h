/* device.h: the only door to GPU memory. Two implementations sit behind it:
 *   sim   a simulated card (sim.c): a capacity, fake addresses that are never dereferenced,
 *         exact tracking of what is live, 2 MiB virtual-memory granules, an emulated
 *         stream-ordered pool, fault injection and a cost model of each call;
 *   cuda  the real runtime and driver API (cuda_device.c), present when built with CUDA.
 * Layer: device (kernels/device/), above base. Which implementation runs is chosen above
 * this interface, in device_open.h; neither implementation knows the other.
 *
 * Operations: plain allocation (cudaMalloc / cudaFree); virtual memory (reserve an address
 * range, map physical memory into it granule by granule, unmap, release the range); the
 * stream-ordered pool (cudaMallocAsync / cudaFreeAsync on a pool with a release threshold,
 * trimmed at synchronisation); memory info; synchronisation; streams.
 *
 * The budget: with budget_bytes set, the bytes held from the device (malloc'd, mapped, and
 * the stream-ordered pool's reserve) never exceed it, on both implementations; a call that
 * would cross it fails with AB_ERR_OOM before reaching the driver. That is how an H200 plays
 * a 40 GB card, and what `--budget` means.
 *
 * Note [Budget window]
 * The budget is consulted only at those checks, each of the form "budget >= held + extra", so
 * the budgets under which a run makes every check as it made it form one interval,
 * [budget_lo, budget_hi], narrowed at each check (a run with no budget passes every check, and
 * its window is every budget at least what it held). Strategies read the budget nowhere else
 * in their decisions (only in an OOM's message, read when it is written, and the caching
 * strategy, which takes a budget as its cap when it is created). So on the simulated card a
 * copy of the run (a fork) may take another budget of the window and go on, as if it had run
 * under that budget from the start (ab_device_take_budget): the budget's counterpart of
 * Note [Taking a cap mid-run], strategy.h, for the searches of a budget (bisect.h).
 *
 * Statuses: AB_ERR_OOM when the device (or the budget) has no room, or an injected fault
 * fired; AB_ERR_INVALID for a call that breaks the contract (double free, foreign pointer,
 * wrong size, unaligned map, leak at close); AB_ERR_CUDA for any other driver error. The
 * reason for anything but OOM is left in dev->diag.
 *
 * Virtual memory: a reservation is a range of addresses with no memory behind it. Each map
 * call creates one physical allocation for [at, at+bytes) and maps it (cuMemCreate, cuMemMap,
 * cuMemSetAccess); since physical memory cannot be split once mapped, an unmap must cover
 * whole map calls (one or several). Addresses and sizes are multiples of granule_bytes.
 *
 * Frees are sized: the caller passes the size it allocated, and the simulated device checks
 * it. Streams are small indices (0 is the default stream); the device creates the real
 * streams on first use.
 *
 * The footprint: the device memory the calls of the run really took, beside what the strategy
 * counts as reserved. cudaMalloc rounds and packs its requests, and the stream-ordered pool
 * holds more than is live, so a strategy's reserved bytes are not what the card lost. On
 * cuda it is measured: the fall of cudaMemGetInfo's free bytes across each malloc, free, map
 * and unmap, plus the pool's reserve as the driver reports it. On sim it is the driver's
 * rounding and packing as sim_cost.c models them (Note [Driver footprint]). held_bytes stays
 * the budget's count: what was asked of the device, not what it took.
 *
 * The timer measures what happens between two points of a stream, for benchmarks: on cuda
 * with a pair of CUDA events (what the GPU saw between the two records, as RMM's
 * cuda_event_timer does); on sim as the engine counts a call, host time plus the modelled
 * time of the device calls made in between. One timer per device, not nested.
 *
 * Thread-safety: a device belongs to one thread.
 */
#ifndef AB_DEVICE_H
#define AB_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/status.h"

typedef uint64_t ab_dptr_t; /* a device address; 0 is never a valid one */

typedef struct ab_device_s ab_device_t;

/* What cudaMemGetInfo reported as total on an H200 (driver 580.159.04, CUDA 13.0; the same
 * figure PyTorch's recorded runs in tests/data report). */
#define AB_H200_TOTAL_BYTES 150109880320ULL
/* The VMM granule of every current NVIDIA GPU (minimum and recommended on the H200). */
#define AB_GRANULE_BYTES (2ULL << 20)
/* Streams a run may use (PyTorch programs with many side streams exist; CUDA streams are
 * created on first use, so the room costs a pointer each). */
#define AB_MAX_STREAMS 1024

typedef enum ab_device_kind_e { AB_DEVICE_SIM, AB_DEVICE_CUDA } ab_device_kind_t;

/* Counts of calls that reached the implementation, successful or not. */
#define AB_DEVICE_CALLS(X) \
  X(malloc) X(free) X(va_reserve) X(va_release) X(map) X(unmap) X(malloc_async) \
  X(free_async) X(synchronize) X(failed)

typedef struct ab_device_calls_s {
#define AB_DEVICE_CALL_FIELD(name) uint64_t name;
  AB_DEVICE_CALLS(AB_DEVICE_CALL_FIELD)
#undef AB_DEVICE_CALL_FIELD
} ab_device_calls_t;

typedef struct ab_device_ops_s {
  ab_status (*malloc)(ab_device_t *d, uint64_t bytes, ab_dptr_t *out);
  ab_status (*free)(ab_device_t *d, ab_dptr_t p, uint64_t bytes);
  ab_status (*va_reserve)(ab_device_t *d, uint64_t bytes, ab_dptr_t *out);
  ab_status (*va_release)(ab_device_t *d, ab_dptr_t base, uint64_t bytes);
  ab_status (*map)(ab_device_t *d, ab_dptr_t at, uint64_t bytes);
  ab_status (*unmap)(ab_device_t *d, ab_dptr_t at, uint64_t bytes);
  ab_status (*pool_configure)(ab_device_t *d, uint64_t release_threshold);
  ab_status (*malloc_async)(ab_device_t *d, uint64_t bytes, unsigned stream, ab_dptr_t *out);
  ab_status (*free_async)(ab_device_t *d, ab_dptr_t p, uint64_t bytes, unsigned stream);
  ab_status (*pool_trim)(ab_device_t *d, uint64_t keep_bytes);
  ab_status (*pool_reserved)(ab_device_t *d, uint64_t *current, uint64_t *peak);
  ab_status (*pool_reset_peak)(ab_device_t *d);
  ab_status (*mem_info)(ab_device_t *d, uint64_t *free_bytes, uint64_t *total_bytes);
  ab_status (*synchronize)(ab_device_t *d);
  ab_status (*stream_synchronize)(ab_device_t *d, unsigned stream);
  void *(*stream_handle)(ab_device_t *d, unsigned stream); /* cudaStream_t; NULL on sim */
  /* Optional: the GPU clock (CUDA events). NULL: host time plus modeled_ns (sim). */
  ab_status (*timer_start)(ab_device_t *d, unsigned stream);
  ab_status (*timer_stop)(ab_device_t *d, unsigned stream, double *seconds);
  ab_status (*close)(ab_device_t *d, ab_diag_t *diag);     /* checks for leaks, frees d */
} ab_device_ops_t;

struct ab_device_s {
  const ab_device_ops_t *ops;
  ab_device_kind_t kind;
  char name[96];            /* "sim:h200", "cuda:0 NVIDIA H200" */
  uint64_t total_bytes;     /* the card's total, as cudaMemGetInfo reports it */
  uint64_t budget_bytes;    /* cap on held_bytes; 0 when there is none */
  uint64_t budget_lo;       /* the budgets under which every check so far went as it went */
  uint64_t budget_hi;       /* (Note [Budget window]); set by ab_device_open */
  uint64_t granule_bytes;   /* VMM granule; map and unmap work in multiples of it */
  uint64_t held_bytes;      /* malloc'd + mapped + pool reserve, now */
  uint64_t held_peak;       /* highest held_bytes */
  uint64_t footprint_bytes; /* device memory the calls took, now (see above) */
  uint64_t footprint_peak;  /* highest footprint_bytes since open or ab_device_footprint_reset_peak */
  uint64_t modeled_ns;      /* sim: modelled time of all calls so far; cuda: 0 */
  unsigned variants_alike;  /* sim with follow_variants: bit v - 1 set while placement variant v
                             * has put every range handed out in the same order as the card did
                             * (Note [Variants followed], sim_follow.c); else 0 */
  ab_device_calls_t calls;  /* calls that reached the implementation */
  uint64_t timer_host_ns;   /* host clock at the last timer start (timers without a GPU clock) */
  uint64_t timer_modeled_ns; /* modeled_ns then */
  ab_diag_t diag;           /* why the last call failed, when it was not OOM */
};

/* Fault injection on the simulated device: allocation-type calls (malloc, va_reserve, map,
 * malloc_async) fail with AB_ERR_OOM as a driver out of memory would. */
typedef struct ab_faults_s {
  uint64_t fail_nth;  /* fail the Nth such call (1-based); 0: off */
  double fail_rate;   /* fail this fraction of such calls, drawn from fail_seed; 0: off */
  uint64_t fail_seed; /* seed of the draws */
} ab_faults_t;

/* An address plan (sim only): the addresses a recorded run got from cudaMalloc, in order, so
 * that a replay breaks ties between equal free blocks by the same addresses. The k-th malloc
 * of the device consumes plan[k]: it gets plan[k].addr when its size is plan[k].bytes and
 * that range is free, and an address of its own otherwise. */
typedef struct ab_addr_hint_s {
  uint64_t bytes;
  ab_dptr_t addr;
} ab_addr_hint_t;

/* The placements of cudaMalloc the simulated card can make besides the driver's rules as
 * measured (sim_place.c, Note [Placement bands]): variant 1 .. AB_PLACEMENT_VARIANTS. A figure
 * that depends on placement is given as its range over them. */
#define AB_PLACEMENT_VARIANTS 6

typedef struct ab_device_config_s {
  uint64_t budget_bytes;       /* 0: no budget */
  unsigned placement;          /* sim only: 0, the driver's rules; 1 .. AB_PLACEMENT_VARIANTS, a variant */
  ab_faults_t faults;          /* sim only; zero: none */
  bool cost_model;             /* sim only: charge modelled call times to modeled_ns */
  const ab_addr_hint_t *plan;  /* sim only; copied at open; NULL: none */
  size_t plan_len;
  bool follow_variants;        /* sim only, under the card's own rules (placement 0): keep variants_alike */
} ab_device_config_t;

/* Checks that nothing is still held (a leak is AB_ERR_INVALID, with the count in diag),
 * then frees the device. NULL is a no-op. */
ab_status ab_device_close(ab_device_t *d, ab_diag_t *diag);

/* The operations, with the budget and the counters applied. */
ab_status ab_device_malloc(ab_device_t *d, uint64_t bytes, ab_dptr_t *out);
ab_status ab_device_free(ab_device_t *d, ab_dptr_t p, uint64_t bytes);
ab_status ab_device_va_reserve(ab_device_t *d, uint64_t bytes, ab_dptr_t *out);
ab_status ab_device_va_release(ab_device_t *d, ab_dptr_t base, uint64_t bytes);
ab_status ab_device_map(ab_device_t *d, ab_dptr_t at, uint64_t bytes);
ab_status ab_device_unmap(ab_device_t *d, ab_dptr_t at, uint64_t bytes);
/* Sets the pool's release threshold (bytes kept across synchronisations; UINT64_MAX keeps
 * everything). Call before the first malloc_async. */
ab_status ab_device_pool_configure(ab_device_t *d, uint64_t release_threshold);
ab_status ab_device_malloc_async(ab_device_t *d, uint64_t bytes, unsigned stream, ab_dptr_t *out);
ab_status ab_device_free_async(ab_device_t *d, ab_dptr_t p, uint64_t bytes, unsigned stream);
/* Releases unused pool memory until the pool holds at most keep_bytes. */
ab_status ab_device_pool_trim(ab_device_t *d, uint64_t keep_bytes);
/* The pool's reserve now and at its highest. */
ab_status ab_device_pool_reserved(ab_device_t *d, uint64_t *current, uint64_t *peak);
/* Starts the pool's highest reserve again from its current reserve. */
ab_status ab_device_pool_reset_peak(ab_device_t *d);
/* Free and total bytes; free is also bounded by what the budget leaves. */
ab_status ab_device_mem_info(ab_device_t *d, uint64_t *free_bytes, uint64_t *total_bytes);
ab_status ab_device_synchronize(ab_device_t *d);
ab_status ab_device_stream_synchronize(ab_device_t *d, unsigned stream);
/* The cudaStream_t of a stream index, for kernel launches; NULL on the simulated device. */
void *ab_device_stream_handle(ab_device_t *d, unsigned stream);
/* Starts the timer on stream (see the contract above). */
ab_status ab_device_timer_start(ab_device_t *d, unsigned stream);
/* Stops it on the same stream, waits for the stream to get there, and writes the seconds
 * since the start. */
ab_status ab_device_timer_stop(ab_device_t *d, unsigned stream, double *seconds);

/* Takes budget (not 0), of [budget_lo, budget_hi], as the budget from now on; false, changing
 * nothing, for one outside the window or a device other than the simulated card (a GPU's
 * stream-ordered pool was made with its budget). Note [Budget window]. */
bool ab_device_take_budget(ab_device_t *d, uint64_t budget);

/* For implementations: true if `extra` more held bytes stay within the budget; the check
 * narrows the budget window. */
bool ab_device_budget_allows(ab_device_t *d, uint64_t extra);
/* For implementations: adjusts held_bytes and its peak. */
void ab_device_hold(ab_device_t *d, int64_t delta);
/* For implementations: adjusts footprint_bytes and its peak (never below 0: on cuda a free
 * can give back memory that something outside the device took in between: NCCL, another rank's
 * process on the same GPU). */
void ab_device_footprint_add(ab_device_t *d, int64_t delta);
/* Starts footprint_peak again from footprint_bytes (a strategy's reset_peaks). */
void ab_device_footprint_reset_peak(ab_device_t *d);

#endif
