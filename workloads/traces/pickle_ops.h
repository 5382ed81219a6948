/* pickle_ops.h: the pickle opcodes and the decoding of their arguments, for the two pickle
 * machines of the traces layer, which must agree on both: the tree reader (pickle.c), which
 * builds every value, and the streaming snapshot reader (snapshot_stream.c), which keeps only
 * what the replay reads and hands anything else to the tree reader. Internal to the traces
 * layer.
 *
 * The opcodes and their arguments are those of Python's pickle (Lib/pickletools.py documents
 * each; Lib/pickle.py, _Unpickler, reads them). */
#ifndef AB_PICKLE_OPS_H
#define AB_PICKLE_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every opcode of protocols 0 to 5, so that a refusal can name it. */
#define AB_PICKLE_OPCODES(X)                                                                          \
  X(MARK, 0x28) X(STOP, 0x2e) X(POP, 0x30) X(POP_MARK, 0x31) X(DUP, 0x32) X(FLOAT, 0x46) X(INT, 0x49)   \
  X(BININT, 0x4a) X(BININT1, 0x4b) X(LONG, 0x4c) X(BININT2, 0x4d) X(NONE, 0x4e) X(PERSID, 0x50)        \
  X(BINPERSID, 0x51) X(REDUCE, 0x52) X(STRING, 0x53) X(BINSTRING, 0x54) X(SHORT_BINSTRING, 0x55)        \
  X(UNICODE, 0x56) X(BINUNICODE, 0x58) X(APPEND, 0x61) X(BUILD, 0x62) X(GLOBAL, 0x63) X(DICT, 0x64)    \
  X(EMPTY_DICT, 0x7d) X(APPENDS, 0x65) X(GET, 0x67) X(BINGET, 0x68) X(INST, 0x69) X(LONG_BINGET, 0x6a)  \
  X(LIST, 0x6c) X(EMPTY_LIST, 0x5d) X(OBJ, 0x6f) X(PUT, 0x70) X(BINPUT, 0x71) X(LONG_BINPUT, 0x72)      \
  X(SETITEM, 0x73) X(TUPLE, 0x74) X(EMPTY_TUPLE, 0x29) X(SETITEMS, 0x75) X(BINFLOAT, 0x47)              \
  X(PROTO, 0x80) X(NEWOBJ, 0x81) X(EXT1, 0x82) X(EXT2, 0x83) X(EXT4, 0x84) X(TUPLE1, 0x85)              \
  X(TUPLE2, 0x86) X(TUPLE3, 0x87) X(NEWTRUE, 0x88) X(NEWFALSE, 0x89) X(LONG1, 0x8a) X(LONG4, 0x8b)      \
  X(BINBYTES, 0x42) X(SHORT_BINBYTES, 0x43) X(SHORT_BINUNICODE, 0x8c) X(BINUNICODE8, 0x8d)             \
  X(BINBYTES8, 0x8e) X(EMPTY_SET, 0x8f) X(ADDITEMS, 0x90) X(FROZENSET, 0x91) X(NEWOBJ_EX, 0x92)         \
  X(STACK_GLOBAL, 0x93) X(MEMOIZE, 0x94) X(FRAME, 0x95) X(BYTEARRAY8, 0x96) X(NEXT_BUFFER, 0x97)        \
  X(READONLY_BUFFER, 0x98)

enum {
#define AB_PICKLE_OPCODE_ENUM(name, byte) OP_##name = byte,
  AB_PICKLE_OPCODES(AB_PICKLE_OPCODE_ENUM)
#undef AB_PICKLE_OPCODE_ENUM
};

/* The opcode's name ("GLOBAL"), NULL for a byte that is none. */
const char *ab_pickle_opcode_name(unsigned byte);

/* n bytes of a little-endian number (the binary arguments). */
static inline uint64_t ab_pickle_le(const unsigned char *q, size_t n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (n == 1 || n == 2 || n == 4 || n == 8) { /* the sizes of the opcodes' arguments: one load */
    uint64_t v = 0;
    __builtin_memcpy(&v, q, n);
    return v;
  }
  if (n > 4 && n < 8) { /* a LONG1's address or time: two loads that overlap, none past q + n */
    uint32_t lo, hi;
    __builtin_memcpy(&lo, q, 4);
    __builtin_memcpy(&hi, q + n - 4, 4);
    return (uint64_t)lo | (uint64_t)hi << (8 * (n - 4));
  }
#endif
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = v << 8 | q[i];
  return v;
}

/* BINFLOAT's argument: a big-endian IEEE double. */
static inline double ab_pickle_float(const unsigned char *q) {
  uint64_t bits = 0;
  for (int i = 0; i < 8; i++) bits = bits << 8 | q[i];
  double f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}

/* How ab_pickle_long's int is held: pickle.h's ab_pk_width_t, which pickle.c checks it is. */
enum { AB_PICKLE_INT64 = 0, AB_PICKLE_UINT64, AB_PICKLE_BIGINT };

/* An int from n bytes of little-endian two's complement (LONG1, LONG4) into *width
 * (AB_PICKLE_*) and *bits (v.i or v.u of pickle.h's ab_pk_t). */
static inline void ab_pickle_long(const unsigned char *q, size_t n, uint8_t *width, uint64_t *bits) {
  *width = AB_PICKLE_INT64;
  *bits = 0;
  if (n == 0) return;
  bool negative = q[n - 1] & 0x80;
  /* Bytes beyond the eighth must only repeat the sign. */
  size_t sig = n;
  while (sig > 1 && q[sig - 1] == (negative ? 0xff : 0x00)) sig--;
  if (sig > 8 || (sig == 8 && negative != ((q[7] & 0x80) != 0))) {
    if (!negative && sig <= 8) { /* 8 bytes with the top bit set, then a zero byte */
      *width = AB_PICKLE_UINT64;
      *bits = ab_pickle_le(q, 8);
    } else {
      *width = AB_PICKLE_BIGINT;
      *bits = negative ? (uint64_t)-1 : 1;
    }
    return;
  }
  uint64_t u = ab_pickle_le(q, sig);
  if (negative && sig < 8) u |= ~0ULL << (8 * sig);
  *bits = u;
}

#endif
