/* sim_pool.h: the simulated card's stream-ordered pool, cudaMallocAsync's (sim_pool.c says
 * how it works). Its state is part of the card's (pool_t, sim_card.h); these are its calls.
 * Used by the files of the card only. */
#ifndef AB_SIM_POOL_H
#define AB_SIM_POOL_H

#include <stdint.h>

#include "kernels/base/status.h"
#include "kernels/device/device.h"

typedef struct pool_s pool_t;

/* Sets up an empty pool, and frees what it holds on the host. */
void ab_sim_pool_init(pool_t *p);
void ab_sim_pool_free(pool_t *p);

/* The pool's calls of the device vtable (device.h). */
ab_status ab_sim_pool_configure(ab_device_t *d, uint64_t release_threshold);
ab_status ab_sim_malloc_async(ab_device_t *d, uint64_t bytes, unsigned stream, ab_dptr_t *out);
ab_status ab_sim_free_async(ab_device_t *d, ab_dptr_t ptr, uint64_t bytes, unsigned stream);
ab_status ab_sim_pool_trim(ab_device_t *d, uint64_t keep_bytes);
ab_status ab_sim_pool_reset_peak(ab_device_t *d);
ab_status ab_sim_pool_reserved(ab_device_t *d, uint64_t *current, uint64_t *peak);

#endif
