/* snapshot_walk.h: the snapshot's reading over a tree of values (snapshot.c), for the
 * streaming reader (snapshot_stream.c), which hands it what it kept of the file in the same
 * shape, so that both readers check the same things and feed the builder the same records.
 * Errors are snapshot.c's, naming path and byte. Internal to the traces layer. */
#ifndef AB_SNAPSHOT_WALK_H
#define AB_SNAPSHOT_WALK_H

#include "pickle.h"
#include "trace_builder.h"

/* One trace entry e, device_traces[dev][index], into the builder. */
ab_status ab_snapshot_read_entry(const char *path, const ab_pk_t *e, long dev, long index, ab_trace_builder_t *b,
                                 ab_diag_t *diag);
/* The rest of the snapshot rooted at root (the device chosen, segments, settings), its chosen
 * device's entries already given to the builder with ab_snapshot_read_entry: device_traces
 * need hold only lists of the right lengths. */
ab_status ab_snapshot_read_outline(const char *path, const ab_pk_t *root, int device, ab_trace_builder_t *b,
                                   ab_diag_t *diag);

#endif
