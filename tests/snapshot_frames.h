/* snapshot_frames.h: stack frames for the entries of a written snapshot (snapshot.h,
 * ab_snapshot_write_frames), shaped as PyTorch 2.x records them, so that tests and
 * benchmarks read files whose size is mostly frames, as real snapshots' is:
 *   - a frame is a dict {filename, line, name}, drawn from a pool of distinct frames; the
 *     pickle writes each one whole the first time and refers to it after (PyTorch shares one
 *     dict per distinct frame: py_symbolize), and its strings likewise;
 *   - an alloc (and each segment action) gets a fresh list of 4 to 12 frames; the frees of
 *     that block refer to the alloc's list (they record the block's allocation context).
 * Deterministic for a seed. */
#ifndef AB_TEST_SNAPSHOT_FRAMES_H
#define AB_TEST_SNAPSHOT_FRAMES_H

#include "kernels/base/hashmap.h"
#include "kernels/base/rng.h"
#include "workloads/traces/snapshot.h"

typedef struct ab_frames_s {
  ab_rng_t rng;
  uint32_t *frame_memo; /* pool index -> memo index + 1; 0: not written yet */
  uint32_t *file_memo, *name_memo;
  size_t pool;
  ab_map_t list_of;     /* live block address -> memo index + 1 of its alloc's frames list */
} ab_frames_t;

void ab_frames_init(ab_frames_t *f, uint64_t seed);
/* An ab_snapshot_frames_fn, with ctx an ab_frames_t. */
void ab_frames_write(void *ctx, ab_pkw_t *w, const ab_trace_rec_t *r);
void ab_frames_free(ab_frames_t *f);

/* Runs the workload `spec` (seed 42) through caching on the simulated H200 and writes the run
 * as a snapshot at path, as `allocbench replay --export-snapshot` does, with frames when
 * asked. *records: the trace entries written (may be NULL). */
ab_status ab_frames_export(const char *spec, bool frames, const char *path, size_t *records, ab_diag_t *diag);
/* Runs es as ab_frames_export runs a workload and writes the run at path with es's call stacks,
 * as `allocbench replay --export-snapshot` writes a trace that held them. */
ab_status ab_frames_write_back(ab_events_t *es, const char *path, ab_diag_t *diag);

#endif
