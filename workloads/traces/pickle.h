/* pickle.h: Python pickles of plain data, read and written in C.
 *
 * Reading: a small pickle machine for what PyTorch's memory snapshots are made of
 * (torch.cuda.memory._dump_snapshot writes them with Python's pickle; the C++
 * _memory_snapshot_pickled with TorchScript's pickler): dicts, lists, tuples, strings,
 * bytes, ints of any width, floats, bools and None, with memo references, in protocols 2
 * to 5. The opcodes taken:
 *   PROTO FRAME STOP MARK POP POP_MARK
 *   NONE NEWTRUE NEWFALSE BININT BININT1 BININT2 LONG1 LONG4 BINFLOAT
 *   SHORT_BINUNICODE BINUNICODE BINUNICODE8 SHORT_BINBYTES BINBYTES BINBYTES8 BYTEARRAY8
 *   EMPTY_LIST APPEND APPENDS LIST EMPTY_TUPLE TUPLE TUPLE1 TUPLE2 TUPLE3
 *   EMPTY_DICT DICT SETITEM SETITEMS
 *   MEMOIZE PUT BINPUT LONG_BINPUT GET BINGET LONG_BINGET
 * Anything else (classes and their construction, the text opcodes of protocol 0, sets,
 * out-of-band buffers) is refused by name and byte offset:
 *   "FILE: byte 1234: unsupported pickle opcode GLOBAL (0x63)".
 * Every read is bounds-checked, so a truncated or corrupt file gets an error naming the
 * byte, never a crash; each opcode consumes at least one byte, so parsing ends.
 *
 * The values form a tree (a graph, with memo references) allocated from one arena that the
 * parsed pickle owns; strings point into the input, which must outlive the tree. A value
 * knows the byte offset of the opcode that made it, so a reader that finds the wrong type
 * can say where.
 *
 * Writing: ab_pkw_* emit protocol 4 (no frames) for the same plain data, with the short
 * names given to ab_pkw_name memoised, so that dicts of the same shape cost little.
 *
 * Not thread-safe; a parsed tree is read-only and may be shared.
 */
#ifndef AB_PICKLE_H
#define AB_PICKLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/base/hashmap.h"
#include "kernels/base/output.h"
#include "kernels/base/status.h"

typedef enum ab_pk_type_e {
  AB_PK_NONE = 1,
  AB_PK_BOOL,
  AB_PK_INT,
  AB_PK_FLOAT,
  AB_PK_STR,
  AB_PK_BYTES,
  AB_PK_LIST,
  AB_PK_TUPLE,
  AB_PK_DICT,
} ab_pk_type_t;

/* How an INT's value is held. */
typedef enum ab_pk_width_e {
  AB_PK_INT64 = 0, /* v.i */
  AB_PK_UINT64,    /* v.u, above INT64_MAX */
  AB_PK_BIGINT,    /* fits in neither: only its sign is kept (v.i is -1 or 1) */
} ab_pk_width_t;

typedef struct ab_pk_seq_s ab_pk_seq_t;

typedef struct ab_pk_s {
  uint8_t type;  /* ab_pk_type_t */
  uint8_t width; /* INT: ab_pk_width_t */
  uint32_t len;  /* STR, BYTES: bytes */
  uint64_t pos;  /* byte offset of the opcode that made the value */
  union {
    int64_t i;        /* INT, BOOL (0 or 1) */
    uint64_t u;       /* INT of width AB_PK_UINT64 */
    double f;         /* FLOAT */
    const char *s;    /* STR (UTF-8), BYTES: into the input, not terminated */
    ab_pk_seq_t *seq; /* LIST, TUPLE, DICT: shared by every reference */
  } v;
} ab_pk_t;

struct ab_pk_seq_s {
  ab_pk_t *items;  /* LIST, TUPLE: the items; DICT: key, value, key, value, ... */
  uint32_t n;      /* values held (two per dict entry) */
  uint32_t cap;
  uint32_t *index; /* DICT: Note [Dict lookups]; NULL for a small dict and anything else */
  uint32_t nindex; /* entries in index */
};

typedef struct ab_pk_arena_s ab_pk_arena_t;

typedef struct ab_pickle_s {
  ab_pk_t root;          /* the value STOP returned */
  int protocol;          /* from PROTO; 0 when absent */
  ab_pk_arena_t *arena;  /* owns every container */
} ab_pickle_t;

/* Parses data[0..len) (named path in errors) into out. AB_ERR_INVALID with "PATH: byte N:
 * ..." for a malformed or unsupported pickle; AB_ERR_INTERNAL when host memory runs out. */
ab_status ab_pickle_parse(const char *path, const char *data, size_t len, ab_pickle_t *out, ab_diag_t *diag);
void ab_pickle_free(ab_pickle_t *p);

/* Python's name of a value's type ("dict", "list", "str", ...). */
const char *ab_pk_type_name(const ab_pk_t *v);
/* Note [Dict lookups]
 * A dict may be shared by memo references among many values (every trace entry, say), so a
 * lookup that scanned it would make reading quadratic in a crafted file: a dict of 200 000
 * junk keys shared by 100 000 entries. When parsing ends, each dict of more than
 * AB_PK_SCAN_ENTRIES entries gets an index: its entries with str keys of at most
 * AB_PK_INDEX_KEY_BYTES bytes, sorted by key, then by position. A lookup is a binary search
 * there (a longer key, which no reader asks for, is looked for by a scan); a small dict is
 * scanned. Building the indexes costs O(n log n) over the dicts' entries, each of which took
 * bytes of the input. */
#define AB_PK_SCAN_ENTRIES 16
#define AB_PK_INDEX_KEY_BYTES 64

/* The value under a str key of a dict (the last one, as Python keeps); NULL when v is no
 * dict or the key is absent. Logarithmic in the dict's size (Note [Dict lookups]). */
const ab_pk_t *ab_pk_get(const ab_pk_t *dict, const char *key);
/* Items of a list or tuple, entries of a dict; 0 for anything else. */
size_t ab_pk_len(const ab_pk_t *v);
/* True if v is a str equal to s. */
bool ab_pk_str_is(const ab_pk_t *v, const char *s);

/* ---- writing ------------------------------------------------------------------------ */

typedef struct ab_pkw_s {
  ab_output_t out; /* the file (output.h) */
  FILE *f;         /* out.f */
  ab_map_t names;  /* address of a name given to ab_pkw_name -> memo index + 1 */
  uint32_t nmemo;
  bool failed;     /* host memory ran out (the file is still valid, only larger) */
} ab_pkw_t;

/* Opens path as output.h does and writes the protocol header. AB_ERR_INVALID for a path
 * refused, AB_ERR_IO naming the path on failure. */
ab_status ab_pkw_open(ab_pkw_t *w, const char *path, ab_diag_t *diag);
/* Writes STOP and closes; AB_ERR_IO if any write failed, and then what was there before
 * stays (output.h). */
ab_status ab_pkw_close(ab_pkw_t *w, ab_diag_t *diag);

void ab_pkw_none(ab_pkw_t *w);
void ab_pkw_bool(ab_pkw_t *w, bool b);
void ab_pkw_int(ab_pkw_t *w, int64_t v);
void ab_pkw_uint(ab_pkw_t *w, uint64_t v);
void ab_pkw_float(ab_pkw_t *w, double v);
void ab_pkw_str(ab_pkw_t *w, const char *s, size_t len);
/* A string with static storage used again and again (keys, action names): memoised by its
 * address. */
void ab_pkw_name(ab_pkw_t *w, const char *s);
/* Memoises the value just written and returns its memo index, for ab_pkw_get; UINT32_MAX
 * when the memo is full (nothing memoised). */
uint32_t ab_pkw_memoize(ab_pkw_t *w);
/* A reference to memo entry idx: the same object again, as Python's pickler writes a value
 * it has pickled before. */
void ab_pkw_get(ab_pkw_t *w, uint32_t idx);
/* Containers: begin, the items (a dict's as key, value, key, value), end. */
void ab_pkw_dict_begin(ab_pkw_t *w);
void ab_pkw_dict_end(ab_pkw_t *w);
void ab_pkw_list_begin(ab_pkw_t *w);
void ab_pkw_list_end(ab_pkw_t *w);
void ab_pkw_tuple_begin(ab_pkw_t *w);
void ab_pkw_tuple_end(ab_pkw_t *w);

#endif
