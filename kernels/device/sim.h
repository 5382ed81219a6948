/* sim.h: the simulated card behind device.h.
 *
 * What it models (each choice is documented where it is made: in sim.c, the pool in
 * sim_pool.c, the cost model in sim_cost.c):
 * - capacity: the profile's total, less the CUDA context a fresh process holds;
 * - addresses: from 2 MiB up, placed as the driver places them, in 32 MiB chunks that go
 *   down in address (sim_place.c, Note [Driver placement]); below 2 MiB, best fit at the top
 *   of a free range, 512-byte aligned; never dereferenced; or the addresses of a recorded
 *   run, from an address plan (device.h);
 * - exact tracking: every live allocation, reservation and mapped granule is known, so a
 *   double free, a foreign pointer, a wrong size or a leak at close is an error;
 * - virtual memory on 2 MiB granules: map and unmap only inside a reservation, only whole
 *   unmapped / mapped granules;
 * - the stream-ordered pool: cudaMallocAsync's pool as one range of addresses where requests
 *   of every size are placed side by side, backed in 32 MiB chunks that can be remapped
 *   anywhere; the pool keeps what it holds across synchronisations up to its release
 *   threshold;
 * - the footprint (device.h): the 2 MiB pages live malloc'd allocations touch, mapped
 *   granules and the pool's chunks, as measured on the H200 (sim_cost.c,
 *   Note [Driver footprint]);
 * - fault injection (ab_faults_t) and a cost model of every call
 *   (sim_cost.c), added to modeled_ns.
 */
#ifndef AB_SIM_H
#define AB_SIM_H

#include "kernels/device/device.h"

/* Bytes a fresh process's CUDA context takes (cudaMemGetInfo on an H200: total minus free
 * before any allocation). */
#define AB_SIM_CONTEXT_BYTES (150109880320ULL - 149557477376ULL)

/* The simulated card's profiles, for `allocbench list`: name, total bytes, one line. */
typedef struct ab_sim_profile_s {
  const char *name;
  uint64_t total_bytes;
  const char *source;
} ab_sim_profile_t;
const ab_sim_profile_t *ab_sim_profiles(unsigned *count);


/* Opens a simulated card named `name` with `total_bytes` of memory. */
ab_status ab_sim_open(const char *name, uint64_t total_bytes, const ab_device_config_t *cfg,
                      ab_device_t **out, ab_diag_t *diag);

/* Live allocations (malloc and malloc_async) on a simulated device; for tests. */
uint64_t ab_sim_live_count(const ab_device_t *d);

#endif
