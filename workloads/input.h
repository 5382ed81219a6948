/* input.h: reading a user's file whole, gunzipped when it is gzip (recognised from its
 * first bytes, not its name). Errors name the file and what went wrong (a truncated or
 * corrupt gzip stream, a read error). */
#ifndef AB_INPUT_H
#define AB_INPUT_H

#include <stddef.h>

#include "strategies/status.h"

typedef struct ab_input_s {
  char *data; /* the contents, NUL-terminated (the NUL is not counted in len) */
  size_t len;
} ab_input_t;

/* Reads path into in. Refuses files over 8 GiB once decompressed. */
ab_status ab_input_read(const char *path, ab_input_t *in, ab_diag_t *diag);
void ab_input_free(ab_input_t *in);

#endif
