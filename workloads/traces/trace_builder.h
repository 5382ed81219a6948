/* trace_builder.h: PyTorch-style trace records turned into an event stream, for every
 * reader of a trace format (snapshot.h, trace_csv.h, rmm_log.h).
 *
 * The trace builder turns PyTorch-style actions into events, for every importer:
 *   alloc            ALLOC of a new id; the address maps to it until its free completes
 *                    (an address used again after free_completed is a new id)
 *   free_requested   FREE REQUEST of the id at that address
 *   free_completed   FREE COMPLETE; when it directly follows its free_requested (the
 *                    common case: no other stream used the block) the pair is one FREE NOW;
 *                    without a free_requested before it, a FREE NOW
 *   segment_alloc / segment_free / segment_map / segment_unmap
 *                    kept as recorded segment decisions (ab_events_t.segs), not replayed
 *   oom              counted in trace_ooms: the program caught an OOM and went on
 *   anything else    a no-op (snapshot, annotate, user_defined, ...)
 * Streams keep their identity and their numeric order (which decides PyTorch's iteration
 * order): the smallest recorded stream value becomes index 0. Each record's events are
 * written into the stream as it is added, and what only the rest of the trace tells is
 * settled at finish (trace_builder.c, Note [Records to events in one pass]): until finish,
 * or a discard, the stream is the builder's.
 *
 * Note [Memory that existed before the trace]
 * A trace can start after memory was already allocated: PyTorch's ring buffer wrapped
 * (max_entries), or recording began late. The builder reconstructs the start the way
 * PyTorch's viewer (MemoryViz.js) does, from the end state backwards:
 *   1. A free of an address the trace has not touched before is the free of a block that
 *      was live when the trace began (a lone free_completed: one whose free was already
 *      requested). A snapshot's `segments` section adds the blocks it shows allocated (or
 *      awaiting their free) at the end whose address the trace never touches.
 *   2. Those blocks are created at the start of the stream, before the first record, in
 *      address order, with the size and stream their record gives (the requested size).
 *      They are counted in info.preexisting.
 *   3. What still cannot be replayed is ignored and counted in ab_events_t.ignored: a free
 *      of an address whose block is already freed, a second free_requested, an alloc of
 *      zero bytes or at address 0.
 * An alloc at an address that is still live is an error (the trace contradicts itself).
 *
 * Note [Pools of a trace]
 * Allocations made in a CUDA graph capture or under use_mem_pool go to private pools (Note
 * [Private pools], pools.h). A record may name its pool (the CSV trace's pool column, a
 * snapshot entry's pool_id from PyTorch releases after 2.11); a 2.11 snapshot's entries do not,
 * but its `segments` name the pool of each segment alive at the dump (segment_pool_id). Then:
 *   1. A record's pool is that of the dump's segment its address falls in, if that memory
 *      lived on from the record to the dump: no segment_free or segment_unmap covers the
 *      address after the record. Otherwise it cannot be told (a segment freed before the
 *      dump, a MemPool deleted with its memory): the record is replayed in the default pool
 *      and counted in info.pool_unknown. An address on a stream no private pool is seen to
 *      allocate on is the default pool's: a pool's segments serve only its own streams (a
 *      pool that left nothing at all in the snapshot cannot be seen, on any stream). And an
 *      allocation between two of pool P on its stream (none of another pool between) was
 *      made in P's context: contexts are runs.
 *   2. The events say "these allocations go to pool P" around each run of allocations of P
 *      (the pool made at its first use, then BEGIN on every stream, END and RELEASE after the
 *      run, before any other allocation or any two-halved free), as use_mem_pool does.
 *      Pools are never released: a trace does not say when a graph or MemPool died.
 *   3. (Snapshots PyTorch wrote: their records are its allocator's.) A run of segment_free or
 *      segment_unmap records that no allocation follows with a new segment is the program's
 *      torch.cuda.empty_cache() (torch.cuda.graph calls it before each capture): it becomes an
 *      EMPTY_CACHE event. So is a run that a new segment of a private pool follows, when
 *      neither garbage collection nor max_split_size is set (the only ways a malloc of a
 *      private pool frees segments). A run that a new segment of the default pool follows is
 *      PyTorch's own when its condition held under the cap the program ran under, else the
 *      program's (trace_builder.c, Note [Releases inside a malloc]).
 * A replay is approximate (ab_events_t.approximate says why) when private pools were seen and
 * some allocation's pool could not be told, or when a run of releases could be told only with
 * the cap, which was not given.
 *
 * Note [Stacks of the records]
 * A snapshot names the call stack of each entry (its `frames`). A reader interns the frames of
 * each alloc record, in the order of the records, into the builder's stacks (stacks.h), made
 * at the first record that has any, and gives the record its stack's number; the ALLOC event
 * the record becomes takes it (ab_stacks_set under its id), and at finish the event stream
 * holds the stacks (es->stacks; NULL when no record had frames). Numbers go by first
 * appearance in the records, so that two readers that give the same records with the same
 * frames give the same numbers, whatever they shared or cached on the way. Allocations that no
 * alloc record made (blocks that existed before the trace, a final OOM's request) have none.
 *
 * Note [A trace that ends in an OOM]
 * PyTorch records an `oom` entry, not an alloc, for the request it could not serve, and so do
 * allocbench's exports (a CSV trace, a snapshot). When no alloc follows the last `oom` of a
 * snapshot or a CSV trace (the program ended there, frees of its unwinding aside), that
 * request is replayed: an ALLOC of the recorded (rounded) size on its stream,
 * where the OOM was, so that a replay runs out of memory where PyTorch did, or shows that it
 * would not. Every `oom` entry counts in ab_events_t.trace_ooms, the OOMs the program met.
 * One that an alloc follows, the program caught and went on from (a batch-size finder halving
 * its batch): its request is replayed too, where it was, as an ALLOC tagged AB_TAG_CAUGHT
 * followed by its FREE, so that a replay under the recorded settings and cap fails there as
 * PyTorch did (num_ooms equal) and goes on; a replay that serves it ran a job the program
 * would not have (engine.h, ab_run_t.caught_served). They are counted in info.caught_ooms.
 * The recorded segment decisions get the same treatment in the info: the reserved bytes
 * and segments at the start are those the end state implies (a snapshot's `segments`
 * total less what the trace added), or, without an end state, what the trace frees
 * beyond what it allocated.
 */
#ifndef AB_TRACE_BUILDER_H
#define AB_TRACE_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/hashmap.h"
#include "kernels/base/input.h"
#include "workloads/events/events.h"
#include "strategies/protocol/trace_actions.h"

#define AB_TRACE_MAX_STREAMS AB_MAX_STREAMS /* device.h */
#define AB_TRACE_MAX_ACTION_NAMES 16
#define AB_TRACE_MAX_POOLS 64 /* pools a trace may name, the default included */
#define AB_TRACE_POOL_INFER (-1) /* a record whose pool the builder infers (Note [Pools of a trace]) */

/* What a trace holds, as recorded; filled by the readers and the builder. */
typedef struct ab_trace_info_s {
  const char *format;        /* "pytorch-snapshot", "allocbench-csv" or "rmm-log" */
  int device;                /* snapshots: the device read; -1 for the other formats */
  unsigned ndevices;         /* snapshots: devices in device_traces */
  uint64_t records;          /* trace records read: the recorded trace's events */
  struct {
    char name[32];           /* as recorded ("alloc", "allocate failure", ...) */
    uint64_t count;
  } actions[AB_TRACE_MAX_ACTION_NAMES]; /* in order of first appearance */
  unsigned nactions;
  uint64_t other_actions;    /* records under names beyond the table's room */
  unsigned nstreams;
  uint64_t stream_values[AB_TRACE_MAX_STREAMS]; /* the recorded value of each stream index */
  uint64_t preexisting;      /* blocks created at the start (Note [Memory that existed before the trace]) */
  uint64_t peak_requested;   /* highest sum of the requested bytes of live blocks */
  bool end_state;            /* a snapshot's `segments` gave the state at the end */
  uint64_t reserved_start, reserved_peak, reserved_end; /* bytes the recorded segment events imply */
  uint64_t segments_start, segments_peak, segments_end; /* live cudaMalloc'd segments */
  uint64_t device_allocs;    /* segment_alloc and segment_map events: PyTorch's num_device_alloc */
  uint64_t device_frees;     /* segment_free and segment_unmap events */
  bool reread;               /* snapshots: read again whole, its shape not the one streamed
                              * (snapshot_stream.c, Note [Streaming a snapshot]) */
  bool saturated;            /* a byte figure passed 2^64 - 1 and is shown as that
                              * (trace_builder.c, Note [Figures past 64 bits]) */
  /* Note [Pools of a trace] */
  unsigned npools;           /* pools named, the default (pools[0]) included */
  struct {
    int64_t id[2];           /* as recorded: PyTorch's MempoolId_t; (0, N) for the CSV's N */
    uint64_t allocs;         /* allocations replayed in it */
    uint64_t segments;       /* its segments alive at the dump (snapshots) */
  } pools[AB_TRACE_MAX_POOLS];
  uint64_t pool_inferred;    /* allocations whose pool came from the segment they fall in */
  uint64_t pool_unknown;     /* allocations whose pool could not be told (in pools[0]) */
  uint64_t empty_caches;     /* torch.cuda.empty_cache() calls recognised in the records */
  uint64_t releases_pytorch; /* runs of segment releases that were PyTorch's own
                              * (Note [Releases inside a malloc], trace_builder.c) */
  uint64_t releases_untold;  /* runs that could be either, without the cap (the same Note) */
  bool final_oom;            /* Note [A trace that ends in an OOM]: its request is replayed */
  uint64_t caught_ooms;      /* the same Note: OOMs the program caught, requested again */
} ab_trace_info_t;

typedef struct ab_trace_rec_in_s ab_trace_rec_in_t;

typedef struct ab_trace_builder_s {
  ab_events_t *es;            /* the events, written as the records come (trace_builder.c,
                               * Note [Records to events in one pass]) */
  ab_trace_info_t info;
  const char *path;
  bool byte_pos;              /* positions are byte offsets ("PATH: byte N"), else lines ("PATH:N") */
  size_t nrecs;               /* records added */
  ab_trace_rec_in_t *held;    /* blocks the end state shows live */
  size_t nheld, capheld;
  uint64_t streams[AB_TRACE_MAX_STREAMS]; /* raw stream values, in order of first use */
  unsigned nstreams;
  ab_map_t stream_of;         /* raw stream value + 1 -> its index + 1 (a value of UINT64_MAX: max_stream) */
  int max_stream;             /* the index of the stream UINT64_MAX, -1 before it is seen */
  uint64_t last_stream_raw;   /* the raw stream value last looked up (with nstreams > 0) */
  uint16_t last_stream;       /* its index */
  bool failed;                /* host memory ran out */
  uint64_t end_reserved;      /* with info.end_state: reserved bytes at the end */
  uint64_t end_segments;      /* with info.end_state: cudaMalloc'd segments at the end */
  struct ab_trace_dumpseg_s *dump; /* the end state's segments and their pools */
  size_t ndump, capdump;
  bool infer;                 /* some record's pool is to be inferred */
  bool pytorch;               /* the records are PyTorch's allocator's (a snapshot with its
                               * structured allocator_settings), whose rules the builder reads in */
  /* What the run is made under, set after init (plain numbers; 0: not known): the memory cap
   * the program ran under, in bytes (PyTorch's set_per_process_memory_fraction times the
   * card), and the card's total, which turns a recorded per_process_memory_fraction into one
   * (trace_builder.c, Note [Releases inside a malloc]). */
  uint64_t cap, card;
  uint8_t action_len[AB_TRACE_MAX_ACTION_NAMES]; /* strlen of info.actions[i].name */
  unsigned last_action;       /* the index of info.actions counted last */
  uint8_t known_slot[AB_TR_OTHER]; /* a named action's index in info.actions + 1; 0: not yet */
  /* Each free's block, found as the records come (trace_builder.c, add_free): */
  ab_map_t blocks;            /* every address an alloc or a free touched -> the block live there */
  struct ab_trace_pre_s *pre; /* the blocks found to exist before the trace */
  size_t npre, cappre;
  size_t hint_rec;            /* the record whose search was made already (a free completing at once) */
  size_t hint_slot;           /* its slot in blocks */
  bool twice;                 /* an alloc at an address already allocated, at twice_pos */
  uint64_t twice_pos, twice_addr;
  ab_map_t segments;          /* each segment the trace allocated and has not freed: address -> size */
  struct ab_trace_bad_segment_s { /* the first segment record that contradicts them (check_segment) */
    bool set;
    uint64_t pos, addr, size, had;
    uint8_t action;
  } bad_segment;
  /* What the events written so far leave open (trace_builder.c, Note [Records to events in one pass]): */
  uint64_t *alloc_addr;       /* each allocation's recorded address, by its number, from the first
                               * record whose pool is inferred on (NULL before) */
  int8_t *alloc_pool;         /* each allocation's pool code, once two differ (NULL: all pool_first) */
  size_t capalloc;            /* the room of alloc_addr and alloc_pool, in allocations */
  int8_t pool_first;          /* the pool code of every allocation while alloc_pool is NULL */
  uint64_t nvalid;            /* alloc records that became allocations */
  struct ab_trace_item_s *stray; /* alloc records that became none (0 bytes, address 0), whose pools
                                  * the rules still read */
  size_t nstray, capstray;
  struct ab_trace_run_s *runs; /* the runs of segment releases, in order */
  size_t nruns, capruns;
  bool run_open;              /* the record added last was a release: runs[nruns - 1] goes on */
  size_t asking;              /* runs from this one on that a map ended wait for the next alloc's size */
  size_t last_oom;            /* the event of the last oom's request + 1, while no alloc followed it */
  bool merge_late;            /* a free_completed whose request a run of releases came between */
  uint32_t last_alloc;        /* the allocation the record added last became + 1; 0: none */
  uint64_t expect;            /* records the reader expects (ab_trace_builder_reserve); 0: not said */
  /* Note [Stacks of the records] */
  ab_stacks_t *stacks;        /* NULL until a record has frames; es->stacks at finish */
} ab_trace_builder_t;

/* For the readers: parses a whole decimal number [p, end) into *out; false when it is not one
 * or passes 2^64 - 1. */
bool ab_trace_parse_dec(const char *p, const char *end, uint64_t *out);

/* For the line readers (CSV trace, RMM log): the lines of a stream, read in bounded pieces.
 * A line is given without its newline, and stays valid until the next call. */
typedef struct ab_trace_lines_s {
  ab_instream_t *in;
  const unsigned char *win, *p, *end; /* the stream's window; p: the next line */
  bool eof;                           /* the window holds the rest of the stream */
} ab_trace_lines_t;

void ab_trace_lines_init(ab_trace_lines_t *l, ab_instream_t *in);
/* The next line as [*s, *s + *len); *more is false at the end (a last line without a
 * newline is a line). Errors are the stream's. */
ab_status ab_trace_lines_next(ab_trace_lines_t *l, const char **s, size_t *len, bool *more, ab_diag_t *diag);

/* Starts building into es (initialised); path and byte_pos say how errors name positions. */
void ab_trace_builder_init(ab_trace_builder_t *b, ab_events_t *es, const char *path, bool byte_pos);
/* Counts one record under its action's name as recorded. */
void ab_trace_builder_count(ab_trace_builder_t *b, const char *name, size_t len);
/* The same count for a record whose name is known to be act's own (act not AB_TR_OTHER, whose
 * names differ): a reader that matched the name once passes its action, and no name is compared
 * again. Counts as ab_trace_builder_count of ab_trace_action_name(act) does. */
void ab_trace_builder_count_known(ab_trace_builder_t *b, ab_trace_action_t act);
/* Adds one record at pos (a line or a byte offset), in the default pool. Errors: more than
 * AB_TRACE_MAX_STREAMS. */
ab_status ab_trace_builder_add(ab_trace_builder_t *b, ab_trace_action_t action, uint64_t addr, uint64_t size,
                               uint64_t stream, size_t pos, ab_diag_t *diag);
/* The same in pool `pool` (ab_trace_builder_pool), or AB_TRACE_POOL_INFER. */
ab_status ab_trace_builder_add_pooled(ab_trace_builder_t *b, ab_trace_action_t action, uint64_t addr, uint64_t size,
                                      uint64_t stream, int pool, size_t pos, ab_diag_t *diag);
/* The index of the pool recorded as (id0, id1), 0 for (0, 0), registered at its first use.
 * Errors: more than AB_TRACE_MAX_POOLS pools, naming pos. */
ab_status ab_trace_builder_pool(ab_trace_builder_t *b, int64_t id0, int64_t id1, size_t pos, int *out, ab_diag_t *diag);
/* The reader expects about `records` records (from its input's size): the events are given
 * their room at once (Note [Records to events in one pass]). A hint: more or fewer are no
 * error, and a host without the room is none either. */
void ab_trace_builder_reserve(ab_trace_builder_t *b, uint64_t records);
/* The stacks the records name (Note [Stacks of the records]), made at the first call; NULL,
 * with the builder failed, when the host has no room. */
ab_stacks_t *ab_trace_builder_stacks(ab_trace_builder_t *b);
/* The record added last was made by `stack`, a number of ab_trace_builder_stacks's (0: none). */
void ab_trace_builder_stack(ab_trace_builder_t *b, uint32_t stack);
/* The allocation the record added last became, for ab_trace_builder_stack_at: 0 when it became
 * none (it was no alloc, or one that is not replayed). */
size_t ab_trace_builder_last_alloc(const ab_trace_builder_t *b);
/* The same as ab_trace_builder_stack for allocation `alloc` (ab_trace_builder_last_alloc's), for
 * a reader that interns a stack later; nothing for alloc 0. */
void ab_trace_builder_stack_at(ab_trace_builder_t *b, size_t alloc, uint32_t stack);
/* A segment of the end state (snapshots): [addr, addr + bytes) in pool `pool`. */
void ab_trace_builder_dump_segment(ab_trace_builder_t *b, uint64_t addr, uint64_t bytes, int pool);
/* The end state (snapshots): a block live at the end, of `requested` bytes; pending when its
 * free was requested and not completed. */
ab_status ab_trace_builder_held(ab_trace_builder_t *b, uint64_t addr, uint64_t requested, uint64_t stream,
                                bool pending, size_t pos, ab_diag_t *diag);
/* The end state's reserved bytes and cudaMalloc'd segments. */
void ab_trace_builder_end_state(ab_trace_builder_t *b, uint64_t reserved, uint64_t segments);
/* Builds the events (Note [Memory that existed before the trace]), ranks the streams,
 * validates the stream, fills the info, and releases the builder, whatever the outcome. */
ab_status ab_trace_builder_finish(ab_trace_builder_t *b, ab_diag_t *diag);
/* Releases a builder that will not be finished, and empties the events it wrote (its stream
 * as ab_events_init left it, but for the limits, source and settings set on it). */
void ab_trace_builder_discard(ab_trace_builder_t *b);

#endif
