/* snapshot_walk.h: the snapshot's reading over a tree of values (snapshot.c), for the
 * streaming reader (snapshot_stream.c), which hands it what it kept of the file besides the
 * entries in the same shape, so that both readers check the same things and feed the builder
 * the same records (the entries it reads itself, by snapshot.c's rules). Errors are
 * snapshot.c's, naming path and byte. Internal to the traces layer. */
#ifndef AB_SNAPSHOT_WALK_H
#define AB_SNAPSHOT_WALK_H

#include "traces/pickle.h"
#include "traces/trace_builder.h"

/* The rest of the snapshot rooted at root (the device chosen, segments, settings), its chosen
 * device's entries already given to the builder (as snapshot.c's read_entry gives them):
 * device_traces need hold only lists of the right lengths. */
ab_status ab_snapshot_read_outline(const char *path, const ab_pk_t *root, int device, ab_trace_builder_t *b,
                                   ab_diag_t *diag);

#endif
