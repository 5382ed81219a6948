/* pickle.c: the pickle machine and writer (pickle.h).
 *
 * The machine follows Python's own unpickler (Lib/pickle.py, _Unpickler): one value stack,
 * a stack of MARK positions (Python's metastack), and the memo. Values below the newest
 * mark belong to the enclosing frame, so no opcode may pop them. */
#include "workloads/traces/pickle.h"
#include "workloads/traces/pickle_ops.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- opcodes (pickle_ops.h) ----------------------------------------------------------- */

_Static_assert((int)AB_PICKLE_INT64 == (int)AB_PK_INT64 && (int)AB_PICKLE_UINT64 == (int)AB_PK_UINT64 &&
                   (int)AB_PICKLE_BIGINT == (int)AB_PK_BIGINT,
               "pickle_ops.h's widths are pickle.h's");

const char *ab_pickle_opcode_name(unsigned byte) {
  switch (byte) {
#define OPCODE_CASE(name, b) \
  case b: return #name;
    AB_PICKLE_OPCODES(OPCODE_CASE)
#undef OPCODE_CASE
  }
  return NULL;
}

/* ---- the arena ------------------------------------------------------------------------- */

/* Chunks double from the first to the largest, so that a small pickle takes little. */
#define ARENA_FIRST_CHUNK_BYTES (16u << 10)
#define ARENA_CHUNK_BYTES (1u << 20)

typedef struct chunk_s {
  struct chunk_s *prev;
  size_t size;
  _Alignas(16) unsigned char data[];
} chunk_t;

struct ab_pk_arena_s {
  chunk_t *head;
  size_t used; /* bytes taken from head */
};

static size_t next_chunk_bytes(const ab_pk_arena_t *a) {
  if (a->head == NULL) return ARENA_FIRST_CHUNK_BYTES;
  return a->head->size >= ARENA_CHUNK_BYTES / 2 ? ARENA_CHUNK_BYTES : a->head->size * 2;
}

static void *arena_alloc(ab_pk_arena_t *a, size_t bytes) {
  bytes = (bytes + 15) & ~(size_t)15;
  if (a->head == NULL || a->head->size - a->used < bytes) {
    size_t size = next_chunk_bytes(a);
    if (size < bytes) size = bytes;
    chunk_t *c = malloc(sizeof *c + size);
    if (c == NULL) return NULL;
    c->prev = a->head;
    c->size = size;
    a->head = c;
    a->used = 0;
  }
  void *p = a->head->data + a->used;
  a->used += bytes;
  return p;
}

static void arena_free(ab_pk_arena_t *a) {
  if (a == NULL) return;
  for (chunk_t *c = a->head, *prev; c; c = prev) {
    prev = c->prev;
    free(c);
  }
  free(a);
}

/* ---- the machine ------------------------------------------------------------------------ */

typedef struct vm_s {
  const char *path;
  const unsigned char *data;
  size_t len;
  size_t p;        /* next byte */
  size_t at;       /* offset of the opcode being run */
  ab_pk_t *stack;
  size_t n, cap;
  size_t *marks;   /* stack heights at each open MARK */
  size_t nmarks, capmarks;
  ab_pk_t *memo;   /* type 0: an unset slot */
  size_t capmemo;
  size_t memo_count; /* slots set: MEMOIZE's next index, as Python's len(memo) */
  ab_pk_seq_t **dicts; /* every dict made, indexed when parsing ends (Note [Dict lookups]) */
  size_t ndicts, capdicts;
  ab_pk_arena_t *arena;
  ab_diag_t *diag;
} vm_t;

static ab_status fail(vm_t *vm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ab_status fail(vm_t *vm, const char *fmt, ...) {
  char msg[AB_DIAG_BYTES];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ab_diag_set(vm->diag, AB_ERR_INVALID, "%s: byte %zu: %s", vm->path, vm->at, msg);
}

static ab_status out_of_memory(vm_t *vm) {
  return ab_diag_set(vm->diag, AB_ERR_INTERNAL, "%s: out of host memory while reading the pickle", vm->path);
}

static const char *current_op(vm_t *vm) { return ab_pickle_opcode_name(vm->data[vm->at]); }

/* Takes n bytes of argument; NULL (with the error set) when the file ends first. */
static const unsigned char *take(vm_t *vm, size_t n, ab_status *st) {
  if (vm->len - vm->p < n) {
    *st = fail(vm, "truncated: %s needs %zu bytes of argument, %zu remain", current_op(vm), n, vm->len - vm->p);
    return NULL;
  }
  const unsigned char *q = vm->data + vm->p;
  vm->p += n;
  return q;
}


/* A decimal line argument (PUT, GET): digits, then a newline. */
static ab_status line_number(vm_t *vm, uint64_t *out) {
  const unsigned char *nl = memchr(vm->data + vm->p, '\n', vm->len - vm->p);
  if (nl == NULL) return fail(vm, "truncated: %s needs a line ending in a newline", current_op(vm));
  const unsigned char *q = vm->data + vm->p;
  int shown = nl - q > 20 ? 20 : (int)(nl - q);
  uint64_t v = 0;
  if (q == nl) return fail(vm, "%s: expected a memo index, got an empty line", current_op(vm));
  for (const unsigned char *d = q; d < nl; d++) {
    if (*d < '0' || *d > '9' || v > UINT64_MAX / 10 - 1)
      return fail(vm, "%s: expected a memo index, got '%.*s'", current_op(vm), shown, (const char *)q);
    v = v * 10 + (uint64_t)(*d - '0');
  }
  vm->p = (size_t)(nl - vm->data) + 1;
  *out = v;
  return AB_OK;
}

static size_t floor_height(const vm_t *vm) { return vm->nmarks ? vm->marks[vm->nmarks - 1] : 0; }

/* Values the current frame holds (those above the newest mark). */
static size_t avail(const vm_t *vm) { return vm->n - floor_height(vm); }

static ab_status need(vm_t *vm, size_t k) {
  if (avail(vm) < k)
    return fail(vm, "%s needs %zu value%s on the stack, %zu %s there", current_op(vm), k, k == 1 ? "" : "s", avail(vm),
                avail(vm) == 1 ? "is" : "are");
  return AB_OK;
}

static ab_status push(vm_t *vm, ab_pk_t v) {
  if (vm->n == vm->cap) {
    size_t cap = vm->cap ? vm->cap * 2 : 256;
    ab_pk_t *grown = realloc(vm->stack, cap * sizeof *grown);
    if (grown == NULL) return out_of_memory(vm);
    vm->stack = grown;
    vm->cap = cap;
  }
  vm->stack[vm->n++] = v;
  return AB_OK;
}

static ab_pk_t scalar(vm_t *vm, ab_pk_type_t type) {
  ab_pk_t v;
  memset(&v, 0, sizeof v);
  v.type = (uint8_t)type;
  v.pos = vm->at;
  return v;
}

static ab_status push_int(vm_t *vm, int64_t i) {
  ab_pk_t v = scalar(vm, AB_PK_INT);
  v.v.i = i;
  return push(vm, v);
}

static ab_status remember_dict(vm_t *vm, ab_pk_seq_t *seq) {
  if (vm->ndicts == vm->capdicts) {
    size_t cap = vm->capdicts ? vm->capdicts * 2 : 64;
    ab_pk_seq_t **grown = realloc(vm->dicts, cap * sizeof *grown);
    if (grown == NULL) return out_of_memory(vm);
    vm->dicts = grown;
    vm->capdicts = cap;
  }
  vm->dicts[vm->ndicts++] = seq;
  return AB_OK;
}

/* A new empty container holding room for n values. */
static ab_status container(vm_t *vm, ab_pk_type_t type, size_t n, ab_pk_t *out) {
  if (n > UINT32_MAX) return fail(vm, "%s: more than 2^32 items", current_op(vm));
  *out = scalar(vm, type);
  ab_pk_seq_t *seq = arena_alloc(vm->arena, sizeof *seq);
  if (seq == NULL) return out_of_memory(vm);
  memset(seq, 0, sizeof *seq);
  seq->cap = (uint32_t)n;
  seq->items = n ? arena_alloc(vm->arena, n * sizeof *seq->items) : NULL;
  if (n && seq->items == NULL) return out_of_memory(vm);
  out->v.seq = seq;
  return type == AB_PK_DICT ? remember_dict(vm, seq) : AB_OK;
}

/* Appends k values to a container, growing it geometrically inside the arena. */
static ab_status extend(vm_t *vm, ab_pk_seq_t *seq, const ab_pk_t *items, size_t k) {
  if (k > UINT32_MAX - seq->n) return fail(vm, "%s: more than 2^32 items in one container", current_op(vm));
  if (seq->n + k > seq->cap) {
    uint64_t cap = seq->cap ? (uint64_t)seq->cap * 2 : 4;
    if (cap < seq->n + k) cap = seq->n + k;
    if (cap > UINT32_MAX) cap = UINT32_MAX;
    ab_pk_t *grown = arena_alloc(vm->arena, cap * sizeof *grown);
    if (grown == NULL) return out_of_memory(vm);
    if (seq->n) memcpy(grown, seq->items, seq->n * sizeof *grown);
    seq->items = grown;
    seq->cap = (uint32_t)cap;
  }
  if (k) memcpy(seq->items + seq->n, items, k * sizeof *items);
  seq->n += (uint32_t)k;
  return AB_OK;
}

/* Pops the newest mark; *from receives the stack height it marked. */
static ab_status pop_mark(vm_t *vm, size_t *from) {
  if (vm->nmarks == 0) return fail(vm, "%s without a MARK before it", current_op(vm));
  *from = vm->marks[--vm->nmarks];
  return AB_OK;
}

/* The items since the newest mark become a new container, which replaces them. */
static ab_status collect(vm_t *vm, ab_pk_type_t type) {
  size_t from = 0;
  AB_TRY(pop_mark(vm, &from));
  size_t k = vm->n - from;
  if (type == AB_PK_DICT && k % 2) return fail(vm, "DICT with an odd number of values (%zu) after its MARK", k);
  ab_pk_t c;
  AB_TRY(container(vm, type, k, &c));
  c.pos = vm->at;
  if (k) AB_TRY(extend(vm, c.v.seq, vm->stack + from, k)); /* the stack may not exist yet */
  vm->n = from;
  return push(vm, c);
}

/* The items since the newest mark are added to the list or dict below the mark. */
static ab_status add_marked(vm_t *vm, ab_pk_type_t want) {
  size_t from = 0;
  AB_TRY(pop_mark(vm, &from));
  if (from <= floor_height(vm))
    return fail(vm, "%s with no %s below its MARK", current_op(vm), want == AB_PK_DICT ? "dict" : "list");
  ab_pk_t *target = &vm->stack[from - 1];
  size_t k = vm->n - from;
  if (target->type != want)
    return fail(vm, "%s to a %s (expected a %s)", current_op(vm), ab_pk_type_name(target),
                want == AB_PK_DICT ? "dict" : "list");
  if (want == AB_PK_DICT && k % 2) return fail(vm, "SETITEMS with an odd number of values (%zu)", k);
  AB_TRY(extend(vm, target->v.seq, vm->stack + from, k));
  vm->n = from;
  return AB_OK;
}

static ab_status memo_put(vm_t *vm, uint64_t idx) {
  AB_TRY(need(vm, 1));
  if (idx > vm->len) return fail(vm, "%s: memo index %llu is beyond any the file could use", current_op(vm), (unsigned long long)idx);
  if (idx >= vm->capmemo) {
    size_t cap = vm->capmemo ? vm->capmemo : 1024;
    while (cap <= idx) cap *= 2;
    ab_pk_t *grown = realloc(vm->memo, cap * sizeof *grown);
    if (grown == NULL) return out_of_memory(vm);
    memset(grown + vm->capmemo, 0, (cap - vm->capmemo) * sizeof *grown);
    vm->memo = grown;
    vm->capmemo = cap;
  }
  if (vm->memo[idx].type == 0) vm->memo_count++;
  vm->memo[idx] = vm->stack[vm->n - 1];
  return AB_OK;
}

static ab_status memo_get(vm_t *vm, uint64_t idx) {
  if (idx >= vm->capmemo || vm->memo[idx].type == 0)
    return fail(vm, "%s of memo entry %llu, which was never stored", current_op(vm), (unsigned long long)idx);
  return push(vm, vm->memo[idx]);
}

/* An int from n bytes of little-endian two's complement (LONG1, LONG4). */
static ab_status push_long(vm_t *vm, const unsigned char *q, size_t n) {
  ab_pk_t v = scalar(vm, AB_PK_INT);
  ab_pickle_long(q, n, &v.width, &v.v.u);
  return push(vm, v);
}

static ab_status push_text(vm_t *vm, ab_pk_type_t type, uint64_t len) {
  ab_status st = AB_OK;
  if (len > UINT32_MAX) return fail(vm, "%s of %llu bytes: longer than 4 GiB", current_op(vm), (unsigned long long)len);
  const unsigned char *q = take(vm, (size_t)len, &st);
  if (q == NULL) return st;
  ab_pk_t v = scalar(vm, type);
  v.len = (uint32_t)len;
  v.v.s = (const char *)q;
  return push(vm, v);
}

/* Runs one opcode; *done is set at STOP. */
static ab_status step(vm_t *vm, ab_pickle_t *out, bool *done) {
  ab_status st = AB_OK;
  const unsigned char *q;
  vm->at = vm->p;
  unsigned op = vm->data[vm->p++];
#define ARG(nbytes)                   \
  do {                                \
    q = take(vm, (nbytes), &st);      \
    if (q == NULL) return st;         \
  } while (0)
  switch (op) {
    case OP_PROTO:
      ARG(1);
      if (q[0] < 2 || q[0] > 5) return fail(vm, "unsupported pickle protocol %u (expected 2 to 5)", q[0]);
      out->protocol = q[0];
      return AB_OK;
    case OP_FRAME:
      ARG(8);
      if (ab_pickle_le(q, 8) > vm->len - vm->p)
        return fail(vm, "truncated: FRAME of %llu bytes, %zu remain", (unsigned long long)ab_pickle_le(q, 8), vm->len - vm->p);
      return AB_OK;
    case OP_STOP:
      AB_TRY(need(vm, 1));
      out->root = vm->stack[vm->n - 1];
      *done = true;
      return AB_OK;
    case OP_MARK:
      if (vm->nmarks == vm->capmarks) {
        size_t cap = vm->capmarks ? vm->capmarks * 2 : 64;
        size_t *grown = realloc(vm->marks, cap * sizeof *grown);
        if (grown == NULL) return out_of_memory(vm);
        vm->marks = grown;
        vm->capmarks = cap;
      }
      vm->marks[vm->nmarks++] = vm->n;
      return AB_OK;
    case OP_POP:
      if (avail(vm) > 0) {
        vm->n--;
        return AB_OK;
      }
      { /* Python pops the mark when the frame is empty */
        size_t from = 0;
        return pop_mark(vm, &from);
      }
    case OP_POP_MARK: {
      size_t from = 0;
      AB_TRY(pop_mark(vm, &from));
      vm->n = from;
      return AB_OK;
    }
    case OP_NONE: return push(vm, scalar(vm, AB_PK_NONE));
    case OP_NEWTRUE:
    case OP_NEWFALSE: {
      ab_pk_t v = scalar(vm, AB_PK_BOOL);
      v.v.i = op == OP_NEWTRUE;
      return push(vm, v);
    }
    case OP_BININT: ARG(4); return push_int(vm, (int32_t)(uint32_t)ab_pickle_le(q, 4));
    case OP_BININT1: ARG(1); return push_int(vm, q[0]);
    case OP_BININT2: ARG(2); return push_int(vm, (int64_t)ab_pickle_le(q, 2));
    case OP_LONG1: {
      ARG(1);
      size_t n = q[0];
      ARG(n);
      return push_long(vm, q, n);
    }
    case OP_LONG4: {
      ARG(4);
      int32_t n = (int32_t)(uint32_t)ab_pickle_le(q, 4);
      if (n < 0) return fail(vm, "LONG4 with a negative length (%d)", n);
      ARG((size_t)n);
      return push_long(vm, q, (size_t)n);
    }
    case OP_BINFLOAT: {
      ARG(8);
      ab_pk_t v = scalar(vm, AB_PK_FLOAT);
      v.v.f = ab_pickle_float(q);
      return push(vm, v);
    }
    case OP_SHORT_BINUNICODE: ARG(1); return push_text(vm, AB_PK_STR, q[0]);
    case OP_BINUNICODE: ARG(4); return push_text(vm, AB_PK_STR, ab_pickle_le(q, 4));
    case OP_BINUNICODE8: ARG(8); return push_text(vm, AB_PK_STR, ab_pickle_le(q, 8));
    case OP_SHORT_BINBYTES: ARG(1); return push_text(vm, AB_PK_BYTES, q[0]);
    case OP_BINBYTES: ARG(4); return push_text(vm, AB_PK_BYTES, ab_pickle_le(q, 4));
    case OP_BINBYTES8:
    case OP_BYTEARRAY8: ARG(8); return push_text(vm, AB_PK_BYTES, ab_pickle_le(q, 8));
    case OP_EMPTY_LIST:
    case OP_EMPTY_DICT:
    case OP_EMPTY_TUPLE: {
      ab_pk_t c;
      AB_TRY(container(vm, op == OP_EMPTY_LIST ? AB_PK_LIST : op == OP_EMPTY_DICT ? AB_PK_DICT : AB_PK_TUPLE, 0, &c));
      return push(vm, c);
    }
    case OP_LIST: return collect(vm, AB_PK_LIST);
    case OP_TUPLE: return collect(vm, AB_PK_TUPLE);
    case OP_DICT: return collect(vm, AB_PK_DICT);
    case OP_TUPLE1:
    case OP_TUPLE2:
    case OP_TUPLE3: {
      size_t k = op - OP_TUPLE1 + 1u;
      AB_TRY(need(vm, k));
      ab_pk_t c;
      AB_TRY(container(vm, AB_PK_TUPLE, k, &c));
      AB_TRY(extend(vm, c.v.seq, vm->stack + vm->n - k, k));
      vm->n -= k;
      return push(vm, c);
    }
    case OP_APPEND:
    case OP_SETITEM: {
      size_t k = op == OP_APPEND ? 1 : 2;
      ab_pk_type_t want = op == OP_APPEND ? AB_PK_LIST : AB_PK_DICT;
      AB_TRY(need(vm, k + 1));
      ab_pk_t *target = &vm->stack[vm->n - k - 1];
      if (target->type != want)
        return fail(vm, "%s to a %s (expected a %s)", current_op(vm), ab_pk_type_name(target),
                    want == AB_PK_DICT ? "dict" : "list");
      AB_TRY(extend(vm, target->v.seq, vm->stack + vm->n - k, k));
      vm->n -= k;
      return AB_OK;
    }
    case OP_APPENDS: return add_marked(vm, AB_PK_LIST);
    case OP_SETITEMS: return add_marked(vm, AB_PK_DICT);
    case OP_MEMOIZE: return memo_put(vm, vm->memo_count);
    case OP_BINPUT: ARG(1); return memo_put(vm, q[0]);
    case OP_LONG_BINPUT: ARG(4); return memo_put(vm, ab_pickle_le(q, 4));
    case OP_BINGET: ARG(1); return memo_get(vm, q[0]);
    case OP_LONG_BINGET: ARG(4); return memo_get(vm, ab_pickle_le(q, 4));
    case OP_PUT:
    case OP_GET: {
      uint64_t idx = 0;
      AB_TRY(line_number(vm, &idx));
      return op == OP_PUT ? memo_put(vm, idx) : memo_get(vm, idx);
    }
    default: {
      const char *name = ab_pickle_opcode_name(op);
      if (name) return fail(vm, "unsupported pickle opcode %s (0x%02x)", name, op);
      return fail(vm, "not a pickle opcode: 0x%02x", op);
    }
  }
#undef ARG
}

/* ---- the dicts' indexes (Note [Dict lookups]) ------------------------------------------------ */

typedef struct key_ref_s {
  const char *s;
  uint32_t len;
  uint32_t entry; /* the entry's number in its dict */
} key_ref_t;

/* Orders keys by length, then bytes: any total order serves a binary search, and this one
 * compares lengths first, which is cheap. */
static int key_order(const char *a, size_t alen, const char *b, size_t blen) {
  if (alen != blen) return alen < blen ? -1 : 1;
  return memcmp(a, b, alen);
}

static int by_key_then_entry(const void *x, const void *y) {
  const key_ref_t *a = x, *b = y;
  int c = key_order(a->s, a->len, b->s, b->len);
  if (c) return c;
  return (a->entry > b->entry) - (a->entry < b->entry);
}

static bool indexable(const ab_pk_t *key) { return key->type == AB_PK_STR && key->len <= AB_PK_INDEX_KEY_BYTES; }

/* Indexes one dict, with scratch room for its entries. */
static ab_status index_dict(vm_t *vm, ab_pk_seq_t *seq, key_ref_t *scratch) {
  uint32_t n = 0;
  for (uint32_t e = 0; e < seq->n / 2; e++) {
    const ab_pk_t *key = &seq->items[2 * e];
    if (indexable(key)) scratch[n++] = (key_ref_t){key->v.s, key->len, e};
  }
  qsort(scratch, n, sizeof *scratch, by_key_then_entry);
  seq->index = n ? arena_alloc(vm->arena, n * sizeof *seq->index) : NULL;
  if (n && seq->index == NULL) return out_of_memory(vm);
  for (uint32_t i = 0; i < n; i++) seq->index[i] = scratch[i].entry;
  seq->nindex = n;
  return AB_OK;
}

static ab_status index_dicts(vm_t *vm) {
  size_t most = 0;
  for (size_t i = 0; i < vm->ndicts; i++)
    if (vm->dicts[i]->n / 2 > most) most = vm->dicts[i]->n / 2;
  if (most <= AB_PK_SCAN_ENTRIES) return AB_OK;
  key_ref_t *scratch = malloc(most * sizeof *scratch);
  if (scratch == NULL) return out_of_memory(vm);
  ab_status st = AB_OK;
  for (size_t i = 0; i < vm->ndicts && st == AB_OK; i++)
    if (vm->dicts[i]->n / 2 > AB_PK_SCAN_ENTRIES) st = index_dict(vm, vm->dicts[i], scratch);
  free(scratch);
  return st;
}

ab_status ab_pickle_parse(const char *path, const char *data, size_t len, ab_pickle_t *out, ab_diag_t *diag) {
  memset(out, 0, sizeof *out);
  vm_t vm;
  memset(&vm, 0, sizeof vm);
  vm.path = path;
  vm.data = (const unsigned char *)data;
  vm.len = len;
  vm.diag = diag;
  vm.arena = calloc(1, sizeof *vm.arena);
  ab_status st = vm.arena ? AB_OK : out_of_memory(&vm);
  bool done = false;
  while (st == AB_OK && !done) {
    if (vm.p == vm.len) {
      vm.at = vm.p;
      st = fail(&vm, "the pickle ends without STOP (truncated?)");
      break;
    }
    st = step(&vm, out, &done);
  }
  if (st == AB_OK && vm.p < vm.len) {
    vm.at = vm.p;
    st = fail(&vm, "%zu bytes after the pickle's STOP (expected its end: two files joined into one?)", vm.len - vm.p);
  }
  if (st == AB_OK) st = index_dicts(&vm);
  free(vm.dicts);
  free(vm.stack);
  free(vm.marks);
  free(vm.memo);
  if (st != AB_OK) {
    arena_free(vm.arena);
    memset(out, 0, sizeof *out);
    return st;
  }
  out->arena = vm.arena;
  return AB_OK;
}

void ab_pickle_free(ab_pickle_t *p) {
  arena_free(p->arena);
  memset(p, 0, sizeof *p);
}

/* ---- reading the tree ------------------------------------------------------------------- */

const char *ab_pk_type_name(const ab_pk_t *v) {
  if (v == NULL) return "nothing";
  switch ((ab_pk_type_t)v->type) {
    case AB_PK_NONE: return "None";
    case AB_PK_BOOL: return "bool";
    case AB_PK_INT: return "int";
    case AB_PK_FLOAT: return "float";
    case AB_PK_STR: return "str";
    case AB_PK_BYTES: return "bytes";
    case AB_PK_LIST: return "list";
    case AB_PK_TUPLE: return "tuple";
    case AB_PK_DICT: return "dict";
  }
  return "?";
}

bool ab_pk_str_is(const ab_pk_t *v, const char *s) {
  size_t n = strlen(s);
  return v != NULL && v->type == AB_PK_STR && v->len == n && memcmp(v->v.s, s, n) == 0;
}

const ab_pk_t *ab_pk_get(const ab_pk_t *dict, const char *key) {
  if (dict == NULL || dict->type != AB_PK_DICT) return NULL;
  const ab_pk_seq_t *seq = dict->v.seq;
  size_t len = strlen(key);
  if (seq->index == NULL || len > AB_PK_INDEX_KEY_BYTES) {
    for (uint32_t i = seq->n; i >= 2; i -= 2) {
      const ab_pk_t *k = &seq->items[i - 2];
      if (k->type == AB_PK_STR && k->len == len && (len == 0 || k->v.s[0] == key[0]) && memcmp(k->v.s, key, len) == 0)
        return k + 1;
    }
    return NULL;
  }
  /* The last entry of the key: the first one past it, less one. */
  uint32_t lo = 0, hi = seq->nindex;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    const ab_pk_t *k = &seq->items[2 * seq->index[mid]];
    if (key_order(k->v.s, k->len, key, len) <= 0) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return NULL;
  const ab_pk_t *k = &seq->items[2 * seq->index[lo - 1]];
  return key_order(k->v.s, k->len, key, len) == 0 ? k + 1 : NULL;
}

size_t ab_pk_len(const ab_pk_t *v) {
  if (v == NULL) return 0;
  switch ((ab_pk_type_t)v->type) {
    case AB_PK_LIST:
    case AB_PK_TUPLE: return v->v.seq->n;
    case AB_PK_DICT: return v->v.seq->n / 2;
    default: return 0;
  }
}

/* ---- writing ------------------------------------------------------------------------------ */

static void emit(ab_pkw_t *w, const void *p, size_t n) { fwrite(p, 1, n, w->f); }

static void emit_op(ab_pkw_t *w, unsigned op) { putc((int)op, w->f); }

static void emit_le(ab_pkw_t *w, uint64_t v, size_t n) {
  unsigned char b[8];
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(v >> (8 * i));
  emit(w, b, n);
}

ab_status ab_pkw_open(ab_pkw_t *w, const char *path, ab_diag_t *diag) {
  memset(w, 0, sizeof *w);
  ab_map_init(&w->names);
  AB_TRY(ab_output_open(&w->out, path, diag));
  w->f = w->out.f;
  setvbuf(w->f, NULL, _IOFBF, 1 << 20);
  emit_op(w, OP_PROTO);
  emit_op(w, 4);
  return AB_OK;
}

ab_status ab_pkw_close(ab_pkw_t *w, ab_diag_t *diag) {
  emit_op(w, OP_STOP);
  ab_map_free(&w->names);
  w->f = NULL;
  return ab_output_commit(&w->out, diag);
}

void ab_pkw_none(ab_pkw_t *w) { emit_op(w, OP_NONE); }
void ab_pkw_bool(ab_pkw_t *w, bool b) { emit_op(w, b ? OP_NEWTRUE : OP_NEWFALSE); }

void ab_pkw_int(ab_pkw_t *w, int64_t v) {
  if (v >= 0 && v <= 0xff) {
    emit_op(w, OP_BININT1);
    emit_le(w, (uint64_t)v, 1);
  } else if (v >= 0 && v <= 0xffff) {
    emit_op(w, OP_BININT2);
    emit_le(w, (uint64_t)v, 2);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    emit_op(w, OP_BININT);
    emit_le(w, (uint64_t)v, 4);
  } else {
    /* The shortest two's complement that keeps the sign. */
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)v >> (8 * i));
    size_t n = 8;
    while (n > 1 && ((b[n - 1] == 0x00 && !(b[n - 2] & 0x80)) || (b[n - 1] == 0xff && (b[n - 2] & 0x80)))) n--;
    emit_op(w, OP_LONG1);
    emit_op(w, (unsigned)n);
    emit(w, b, n);
  }
}

void ab_pkw_uint(ab_pkw_t *w, uint64_t v) {
  if (v <= INT64_MAX) {
    ab_pkw_int(w, (int64_t)v);
    return;
  }
  emit_op(w, OP_LONG1);
  emit_op(w, 9);
  emit_le(w, v, 8);
  emit_op(w, 0); /* positive */
}

void ab_pkw_float(ab_pkw_t *w, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  unsigned char b[8];
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(bits >> (56 - 8 * i));
  emit_op(w, OP_BINFLOAT);
  emit(w, b, 8);
}

void ab_pkw_str(ab_pkw_t *w, const char *s, size_t len) {
  if (len <= 0xff) {
    emit_op(w, OP_SHORT_BINUNICODE);
    emit_le(w, len, 1);
  } else if (len <= UINT32_MAX) {
    emit_op(w, OP_BINUNICODE);
    emit_le(w, len, 4);
  } else {
    emit_op(w, OP_BINUNICODE8);
    emit_le(w, len, 8);
  }
  emit(w, s, len);
}

uint32_t ab_pkw_memoize(ab_pkw_t *w) {
  if (w->nmemo == UINT32_MAX) return UINT32_MAX;
  emit_op(w, OP_MEMOIZE);
  return w->nmemo++;
}

void ab_pkw_get(ab_pkw_t *w, uint32_t idx) {
  if (idx <= 0xff) {
    emit_op(w, OP_BINGET);
    emit_le(w, idx, 1);
  } else {
    emit_op(w, OP_LONG_BINGET);
    emit_le(w, idx, 4);
  }
}

void ab_pkw_name(ab_pkw_t *w, const char *s) {
  uint64_t idx;
  if (ab_map_get(&w->names, (uint64_t)(uintptr_t)s, &idx)) {
    ab_pkw_get(w, (uint32_t)(idx - 1));
    return;
  }
  ab_pkw_str(w, s, strlen(s));
  if (w->failed || w->nmemo == UINT32_MAX) return;
  emit_op(w, OP_MEMOIZE);
  if (ab_map_put(&w->names, (uint64_t)(uintptr_t)s, (uint64_t)w->nmemo + 1) != AB_OK) w->failed = true;
  w->nmemo++;
}

void ab_pkw_dict_begin(ab_pkw_t *w) {
  emit_op(w, OP_EMPTY_DICT);
  emit_op(w, OP_MARK);
}
void ab_pkw_dict_end(ab_pkw_t *w) { emit_op(w, OP_SETITEMS); }
void ab_pkw_list_begin(ab_pkw_t *w) {
  emit_op(w, OP_EMPTY_LIST);
  emit_op(w, OP_MARK);
}
void ab_pkw_list_end(ab_pkw_t *w) { emit_op(w, OP_APPENDS); }
void ab_pkw_tuple_begin(ab_pkw_t *w) { emit_op(w, OP_MARK); }
void ab_pkw_tuple_end(ab_pkw_t *w) { emit_op(w, OP_TUPLE); }
