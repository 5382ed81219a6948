/* oomreport.h: what allocbench says of an out-of-memory: the segment map's file, and the
 * report of Note [OOM report]. The map is oommap.h's, captured at the OOM (or any moment a
 * caller chose); this writes it and says it, naming the run as results.h names it.
 *
 * The map file (ab_oomreport_write) has one row per block:
 *   segment          index of the segment, in address order, from 0
 *   offset, size     of the block inside its segment, bytes
 *   state            allocated | pending_free | free | unmapped
 *   alloc_id         the allocation id (event stream ids) of an allocated or pending-free
 *                    block; -1 for the others
 *   requested        bytes the allocation asked for where the strategy keeps it, else 0
 *   segment_size     the segment's size, bytes
 *   segment_address  the segment's first address (the device's, fake on sim)
 *   pool, stream     what the segment serves, as the strategy names it
 *   workload, conf, strategy  the run, whole (results.h, ab_results_run_cells); empty in a map
 *                    written for no one run (tune's)
 * plots/oommap.gp draws it: one bar per segment, blocks coloured by state.
 *
 * Note [OOM report]: PyTorch's message (PyTorch v2.11.0, CUDACachingAllocator.cpp, malloc's
 * "CUDA out of memory. Tried to allocate")
 * gives the bytes tried, the cap, allocated and "reserved but unallocated"; users then ask
 * where the unallocated bytes are. The report adds the largest free block and the number of
 * segments (so "3 GiB free in 400 pieces, none over 20 MiB" reads at once), the engine's
 * classification (capacity, rounding or fragmentation: Note [OOM kinds] in engine.h) in
 * words, and where the map was written.
 *
 * Statuses: the writes return AB_ERR_IO with the path in diag.
 * Not thread-safe.
 */
#ifndef AB_OOMREPORT_H
#define AB_OOMREPORT_H

#include <stdint.h>
#include <stdio.h>

#include "harness/run/engine.h"
#include "harness/run/oommap.h"

typedef struct ab_run_desc_s ab_run_desc_t; /* results.h: what makes a run */

/* Writes the map as the run's oommap file in dir (results.h, ab_results_run_file; written
 * atomically) and, if path is not NULL, the path written into it. A map whose walk failed
 * writes nothing and returns AB_OK with path "". */
ab_status ab_oomreport_write(const ab_oommap_t *m, const char *dir, const ab_run_desc_t *run, char *path,
                             size_t path_size, ab_diag_t *diag);

/* Writes the map to the file at path, atomically, whatever it was captured at (the OOM, or
 * any moment a caller chose: tune's map at the peak), its rows naming run (NULL: none). Needs
 * a captured map whose walk succeeded. */
ab_status ab_oomreport_write_file(const ab_oommap_t *m, const char *path, const ab_run_desc_t *run, ab_diag_t *diag);

/* Prints the report of Note [OOM report] for the OOM of a run: the strategy and device that
 * ran, the budget it ran under (0: none), m (may be NULL: no map), and map_path ("" or NULL
 * when none was written). */
void ab_oomreport_print(FILE *f, const ab_oom_info_t *oom, const char *strategy, const char *device, uint64_t budget,
                        const ab_oommap_t *m, const char *map_path);

/* The name of a block state in the map file. */
const char *ab_block_state_name(ab_block_state_t state);

#endif
