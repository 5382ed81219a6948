/* pickle_bytes.h: raw pickle opcodes for crafted inputs the writer (pickle.h) never emits,
 * such as a memoised container referenced many times, with which pickle_test.c and
 * snapshot_test.c build hostile files byte by byte. */
#ifndef AB_TEST_PICKLE_BYTES_H
#define AB_TEST_PICKLE_BYTES_H

#include <stddef.h>
#include <stdint.h>

#define AB_PB_LONG_BINPUT 0x72
#define AB_PB_LONG_BINGET 0x6a

typedef struct ab_pb_s {
  char *p;
  size_t n, cap;
} ab_pb_t;

/* Appends len bytes; aborts when the memory runs out (a test's own buffer). */
void ab_pb_put(ab_pb_t *b, const void *data, size_t len);
void ab_pb_op(ab_pb_t *b, unsigned char code);
/* An opcode followed by a 4-byte little-endian argument (BININT, LONG_BINPUT, ...). */
void ab_pb_op_u32(ab_pb_t *b, unsigned char code, uint32_t v);
/* SHORT_BINUNICODE of a string shorter than 256 bytes. */
void ab_pb_str(ab_pb_t *b, const char *s);

#endif
