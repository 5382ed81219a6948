/* snapshot.h: PyTorch's memory snapshot, read into the trace builder and written from a run.
 *
 * The snapshot is the dict torch.cuda.memory._snapshot() returns, pickled by
 * _dump_snapshot() (PyTorch v2.11.0, torch/cuda/memory.py and the TraceEntry of
 * c10/cuda/CUDACachingAllocator.h):
 *   device_traces       a list per device of trace entries {action, addr (oom: device_free),
 *                       size, stream, time_us, ...}
 *   segments            the segments at the snapshot, each with its device, address,
 *                       total_size, stream, is_expandable and blocks {address, size,
 *                       requested_size, state}
 *   allocator_settings  the settings at the snapshot (PYTORCH_CUDA_ALLOC_CONF, max_split_size,
 *                       expandable_segments, roundup_power2_divisions, ...:
 *                       Note [The settings a snapshot holds] in snapshot.c)
 *
 * Reading takes one device's trace (the first with entries unless one is asked for), its
 * segments as the end state (trace.h: Note [Memory that existed before the trace]) and the
 * settings, as a PYTORCH_CUDA_ALLOC_CONF string that says what differs from the defaults
 * (into the events' settings). A structure that is not a snapshot's is refused naming the
 * byte where the offending value starts and where it sits ("device_traces[0][12]: expected a
 * dict, got a list").
 *
 * Writing produces the same layout from a run's log (trace_log.h, as the recording adaptor
 * fills it): the trace as device_traces[0], the captured segment map as segments, so that
 * PyTorch's memory viewer (torch.cuda._memory_viz, pytorch.org/memory_viz) shows a simulated
 * run.
 */
#ifndef AB_SNAPSHOT_H
#define AB_SNAPSHOT_H

#include "kernels/base/input.h"
#include "workloads/traces/pickle.h"
#include "workloads/traces/trace_builder.h"
#include "strategies/protocol/trace_log.h"

/* Reads the snapshot pickled in `in` into the builder; device < 0 picks the first device
 * with trace entries. Errors name path and the byte offset. The whole file is parsed into a
 * tree first (pickle.h): memory of several times the file. */
ab_status ab_snapshot_read(const char *path, const ab_input_t *in, int device, ab_trace_builder_t *b, ab_diag_t *diag);
/* The same, streaming (Note [Streaming a snapshot] in snapshot_stream.c): one pass over the
 * stream from its first byte, keeping only what the replay reads, in memory that grows with
 * the trace's records, not with the file. What it does not take the way PyTorch writes it
 * (and every error) it reads again with ab_snapshot_read, so the events, the info and the
 * errors are those of ab_snapshot_read. The builder must be fresh (trace_builder.h). */
ab_status ab_snapshot_read_stream(const char *path, ab_instream_t *in, int device, ab_trace_builder_t *b,
                                  ab_diag_t *diag);

/* Writes log as a snapshot pickle at path: streams under their recorded values
 * (stream_values[index]; the index itself beyond nstreams), conf as the recorded
 * PYTORCH_CUDA_ALLOC_CONF. With caching (the run was one of PyTorch's allocator, conf its
 * settings), the structured settings PyTorch writes beside the string too
 * (Note [The settings a snapshot holds] in snapshot.c). The log must have been captured. AB_ERR_IO naming the
 * path. */
ab_status ab_snapshot_write(const char *path, const ab_trace_log_t *log, const uint64_t *stream_values,
                            unsigned nstreams, const char *conf, bool caching, ab_diag_t *diag);
/* The same, with each trace entry's `frames` (its stack, as PyTorch records it) written by
 * frames(ctx, w, record): one value, with ab_pkw_* (pickle.h). */
typedef void (*ab_snapshot_frames_fn)(void *ctx, ab_pkw_t *w, const ab_trace_rec_t *record);
ab_status ab_snapshot_write_frames(const char *path, const ab_trace_log_t *log, const uint64_t *stream_values,
                                   unsigned nstreams, const char *conf, bool caching, ab_snapshot_frames_fn frames,
                                   void *ctx, ab_diag_t *diag);

/* Note [Stacks written back]
 * A run of a trace that held call stacks (es->stacks) is written with them: each alloc record
 * of the run's log is the ALLOC event the engine replayed in that place (one record, an alloc or
 * an oom, for each ALLOC event, in order), and its entry's frames are that allocation's stack;
 * the frees of the block name the alloc's list, as PyTorch's do; every other entry's frames are
 * an empty list. Each distinct string, frame and stack is written once and named through the
 * memo after, as PyTorch's pickle does. A record whose size is not its event's (a log that is not
 * the replay of es) ends the matching: the entries after it get empty lists. */
typedef struct ab_snapshot_stacks_s {
  const ab_events_t *es;
  size_t next;          /* the event after the last ALLOC matched */
  bool lost;            /* a record matched no ALLOC: no stacks after it */
  ab_map_t text_of;     /* a string's offset in es->stacks' text + 1 -> its memo index + 1 */
  uint32_t *frame_memo; /* per frame: its dict's memo index + 1 */
  uint32_t *stack_memo; /* per stack: its list's memo index + 1 */
  ab_map_t list_of;     /* a live block's address -> its alloc's list's memo index + 1 */
  bool failed;          /* the host had no room: stacks written whole each time (still valid) */
} ab_snapshot_stacks_t;

/* A writer of es's stacks for ab_snapshot_write_frames (its ctx); es must outlive it. */
void ab_snapshot_stacks_init(ab_snapshot_stacks_t *x, const ab_events_t *es);
void ab_snapshot_stacks_free(ab_snapshot_stacks_t *x);
/* An ab_snapshot_frames_fn, with ctx an ab_snapshot_stacks_t. */
void ab_snapshot_write_stacks(void *ctx, ab_pkw_t *w, const ab_trace_rec_t *record);

#endif
