/* snapshot_walk.h: the snapshot's reading over a tree of values (snapshot.c), for the
 * streaming reader (snapshot_stream.c), which hands it what it kept of the file besides the
 * entries in the same shape, so that both readers check the same things and feed the builder
 * the same records (the entries it reads itself, through ab_snapshot_add_entry). Errors are
 * snapshot.c's, naming path and byte. Internal to the traces layer. */
#ifndef AB_SNAPSHOT_WALK_H
#define AB_SNAPSHOT_WALK_H

#include "workloads/traces/pickle.h"
#include "workloads/traces/trace_builder.h"

/* The rest of the snapshot rooted at root (the device chosen, segments, settings), its chosen
 * device's entries already given to the builder (as snapshot.c's read_entry gives them):
 * device_traces need hold only lists of the right lengths. */
ab_status ab_snapshot_read_outline(const char *path, const ab_pk_t *root, int device, ab_trace_builder_t *b,
                                   ab_diag_t *diag);

/* Note [An entry's fields]
 * Both readers read an entry into the same fields, one for each key the replay reads (what
 * was set under it last, as Python keeps the last): absent, an int of 64 bits (signed or
 * not), a pool id's two ints, the action's name, or a value of any other type, which the
 * entry's action may refuse. ab_snapshot_add_entry is the one place that says which fields
 * each action reads and which values it takes. */
enum { AB_SNAP_ADDR, AB_SNAP_SIZE, AB_SNAP_STREAM, AB_SNAP_DEVICE_FREE, AB_SNAP_POOL, AB_SNAP_ACTION, AB_SNAP_FIELDS };
enum { AB_SNAP_ABSENT = 0, AB_SNAP_INT64, AB_SNAP_UINT64, AB_SNAP_BAD, AB_SNAP_PAIR, AB_SNAP_STR };

typedef struct ab_snap_entry_s {
  uint8_t kind[AB_SNAP_FIELDS]; /* AB_SNAP_ABSENT ... AB_SNAP_STR */
  uint8_t act;                  /* the action's ab_trace_action_t + 1; 0: found from its name */
  uint32_t stack;               /* an alloc's frames, as a number of the builder's stacks (Note
                                 * [An entry's frames]); 0: none */
  uint32_t action_len;
  const char *action;           /* AB_SNAP_STR: the name's bytes */
  uint64_t u[AB_SNAP_POOL];     /* the ints */
  int64_t pool[2];              /* AB_SNAP_PAIR */
} ab_snap_entry_t;

/* Whether e is an alloc (its action a str naming one): the entries whose frames are read. */
bool ab_snapshot_entry_is_alloc(const ab_snap_entry_t *e);

/* Note [An entry's frames]
 * Both readers read the frames of an alloc entry of the trace read, and of no other entry
 * (the replay's allocations are the allocs'): absent, or an empty list, is no stack;
 * otherwise a list of dicts, each with a `filename` and a `name` (str) and a `line` (an int,
 * kept when it is 1 to 2^32 - 1, else 0: unknown, as a C++ frame without one), other keys
 * passed over. Anything else in an alloc's frames is refused, naming the value
 * ("device_traces[0][12]['frames'][3]['line']: expected an int, got a str"), as a malformed
 * field is. Each alloc's frames are interned into the builder's stacks when the entry is read,
 * in the order of the entries (trace_builder.h, Note [Stacks of the records]), so that both
 * readers number frames and stacks alike. */
/* The line a frame keeps of an int of the given width (pickle.h) and bits. */
uint32_t ab_snapshot_frame_line(uint8_t width, uint64_t bits);

/* Called with the field an entry's action refuses (absent where required, or of the wrong
 * type): the tree reader says why, naming the value; the streaming reader departs. */
typedef ab_status (*ab_snap_refuse_fn)(void *ctx, int field);

/* The entry e, made at byte pos (its pool id at pool_pos), to the builder. */
ab_status ab_snapshot_add_entry(const ab_snap_entry_t *e, uint64_t pos, uint64_t pool_pos, ab_trace_builder_t *b,
                                ab_snap_refuse_fn refuse, void *ctx, ab_diag_t *diag);

#endif
