/* input.h: reading a user's file whole, gunzipped when it is gzip (recognised from its
 * first bytes, not its name). Errors name the file and what went wrong (a truncated or
 * corrupt gzip stream, a read error). */
#ifndef AB_INPUT_H
#define AB_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct ab_input_s {
  char *data; /* the contents, NUL-terminated (the NUL is not counted in len) */
  size_t len;
} ab_input_t;

/* A gzip file may inflate to AB_INPUT_INFLATE_RATIO times its size, or to
 * AB_INPUT_INFLATE_FLOOR_BYTES when that is more: traces inflate some 10 times, and a
 * crafted file of 1 MB that inflates to gigabytes is refused before it fills the memory. */
#define AB_INPUT_INFLATE_RATIO 100
#define AB_INPUT_INFLATE_FLOOR_BYTES (64ULL << 20)

/* Reads path into in. Refuses files over 8 GiB once decompressed, and gzip files that
 * inflate past the cap above. The file is remembered as an input of this process
 * (ab_input_is_input). */
ab_status ab_input_read(const char *path, ab_input_t *in, ab_diag_t *diag);
/* The same with the cap on inflating set to max_inflated bytes (at most 8 GiB); 0: the
 * default above. */
ab_status ab_input_read_capped(const char *path, uint64_t max_inflated, ab_input_t *in, ab_diag_t *diag);
/* Takes bytes already in memory as ab_input_read takes a file's contents: copied into in,
 * gunzipped when they are gzip; `name` stands for the path in errors. For readers of bytes
 * that come from no file (tests, fuzzing). */
ab_status ab_input_from_memory(const char *name, const void *data, size_t len, ab_input_t *in, ab_diag_t *diag);
void ab_input_free(ab_input_t *in);
/* True when path (followed through links) is a file this process has read with
 * ab_input_read: the same device and inode, whatever the name. Outputs refuse it (output.h).
 * Thread-safe. */
bool ab_input_is_input(const char *path);

#endif
