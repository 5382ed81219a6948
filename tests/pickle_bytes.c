#include "tests/pickle_bytes.h"

#include <stdlib.h>
#include <string.h>

void ab_pb_put(ab_pb_t *b, const void *data, size_t len) {
  if (b->n + len > b->cap) {
    b->cap = (b->n + len) * 2;
    b->p = realloc(b->p, b->cap);
    if (b->p == NULL) abort();
  }
  memcpy(b->p + b->n, data, len);
  b->n += len;
}

void ab_pb_op(ab_pb_t *b, unsigned char code) { ab_pb_put(b, &code, 1); }

void ab_pb_op_u32(ab_pb_t *b, unsigned char code, uint32_t v) {
  unsigned char le[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                         (unsigned char)(v >> 24)};
  ab_pb_op(b, code);
  ab_pb_put(b, le, 4);
}

void ab_pb_str(ab_pb_t *b, const char *s) {
  ab_pb_op(b, 0x8c); /* SHORT_BINUNICODE */
  ab_pb_op(b, (unsigned char)strlen(s));
  ab_pb_put(b, s, strlen(s));
}
