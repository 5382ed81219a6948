/* snapshot_stream.c: PyTorch's memory snapshot read in one pass over a stream (snapshot.h).
 *
 * Note [Streaming a snapshot]
 * A real snapshot is mostly stack frames, every entry's, written once each and named through
 * the memo after. The tree reader (pickle.h, snapshot.c) builds all of it, some ten times the
 * file in memory. This reader runs the same pickle machine over the stream, opcode by opcode,
 * but keeps of each container only what snapshot.c reads:
 *   1. Each dict or list gets a role when it is made: root, device_traces, one device's
 *      trace, an entry, segments, a segment, blocks, a block, allocator_settings,
 *      roundup_power2_divisions, a list of frames, a frame (Note [Frames as they are read]);
 *      anything else is opaque (annotations, whatever sits under them), of which only the
 *      type is kept. The role comes from where the container
 *      is made: under the newest MARK (a batch of APPENDS or SETITEMS), or on top of a list or
 *      beside a key (a single APPEND or SETITEM), the ways Python's pickler writes, and the
 *      type the layout allows there.
 *   2. A dict with a role keeps the pairs of the keys snapshot.c looks up, as a small dict of
 *      the same shape; segments, blocks and settings are kept so (a few thousand). An entry
 *      keeps its fields as they are set, each in its slot (Note [Entries as they are read]),
 *      goes to the builder when it is appended to its trace, and is forgotten.
 *   3. The role is checked when the container is placed: an item appended to a list, or set
 *      under a key, must be the container made for that place. Anything else (a container
 *      shared through the memo, one placed elsewhere than where it was made, a pickle either
 *      reader refuses) departs: the file is read again from its start by the tree reader,
 *      whose events and errors are then the answer. So the result is always the tree
 *      reader's: the tests and the fuzz target compare the two on every input.
 *   4. The memo keeps a word per entry: the type of a container, the string (interned, when
 *      short and named again) or number stored there, or the frame or list of frames.
 *   5. Stack values are small (32 bytes: a type, a position and one word), and the keys read
 *      are found by a table on their length, so that each opcode costs a few instructions.
 * Memory: the stack, a window of the stream, the memo's words, what is kept of segments and
 * settings, each distinct frame and list of frames, and the builder's events and stacks;
 * never the file. */
#include <stdlib.h>
#include <string.h>

#include "kernels/base/hashmap.h"
#include "workloads/events/stacks.h"
#include "workloads/traces/pickle_ops.h"
#include "workloads/traces/snapshot.h"
#include "workloads/traces/snapshot_walk.h"

/* ---- roles and the keys read (snapshot.c) ---------------------------------------------------- */

enum {
  R_OPAQUE = 0, R_ROOT, R_TRACES, R_TRACE, R_ENTRY, R_SEGMENTS, R_SEGMENT, R_BLOCKS, R_BLOCK, R_SETTINGS, R_DIVISIONS,
  R_FRAMES, R_FRAME, /* a list of frames (an entry's, a segment's, a block's) and a frame in it */
  R_COUNT,
  R_RUN = R_COUNT /* a stack value standing for entries already read (Note [A run of entries]) */
};

#define KEYS(X)                                                                                                  \
  X(device_traces) X(segments) X(allocator_settings) X(action) X(addr) X(size) X(stream) X(device_free)         \
  X(device) X(address) X(total_size) X(is_expandable) X(blocks) X(requested_size) X(state)                       \
  X(PYTORCH_CUDA_ALLOC_CONF) X(max_split_size) X(garbage_collection_threshold) X(expandable_segments)            \
  X(release_lock_on_cudamalloc) X(graph_capture_record_stream_reuse) X(roundup_power2_divisions) X(pool_id)   \
  X(segment_pool_id) X(frames) X(filename) X(name) X(line)

enum {
  K_NONE = 0,
#define KEY_ENUM(name) K_##name,
  KEYS(KEY_ENUM)
#undef KEY_ENUM
  K_DIV0, /* "1", "2", ..., "32768": roundup_power2_divisions' keys */
  K_COUNT = K_DIV0 + 16
};

static const char *const key_names[K_COUNT] = {
    NULL,
#define KEY_NAME(name) #name,
    KEYS(KEY_NAME)
#undef KEY_NAME
    "1", "2", "4", "8", "16", "32", "64", "128", "256", "512", "1024", "2048", "4096", "8192", "16384", "32768"};

/* What a dict of each role keeps under a key: W_SCALAR, or the role of the container kept
 * there (a list or dict, by the layout); 0: nothing. */
#define W_SCALAR 0xff
static uint8_t wanted[R_COUNT][K_COUNT];
/* The field of each key an entry keeps (wanted[R_ENTRY]). */
static const uint8_t entry_field[K_COUNT] = {[K_action] = AB_SNAP_ACTION, [K_addr] = AB_SNAP_ADDR, [K_size] = AB_SNAP_SIZE,
                                             [K_stream] = AB_SNAP_STREAM, [K_device_free] = AB_SNAP_DEVICE_FREE,
                                             [K_pool_id] = AB_SNAP_POOL};

/* The role of a list's items, and their type. */
static const uint8_t item_role[R_COUNT] = {[R_TRACES] = R_TRACE, [R_TRACE] = R_ENTRY, [R_SEGMENTS] = R_SEGMENT,
                                           [R_BLOCKS] = R_BLOCK, [R_FRAMES] = R_FRAME};
static const uint8_t role_type[R_COUNT] = {
    [R_ROOT] = AB_PK_DICT,     [R_TRACES] = AB_PK_LIST,  [R_TRACE] = AB_PK_LIST, [R_ENTRY] = AB_PK_DICT,
    [R_SEGMENTS] = AB_PK_LIST, [R_SEGMENT] = AB_PK_DICT, [R_BLOCKS] = AB_PK_LIST, [R_BLOCK] = AB_PK_DICT,
    [R_SETTINGS] = AB_PK_DICT, [R_DIVISIONS] = AB_PK_DICT, [R_FRAMES] = AB_PK_LIST, [R_FRAME] = AB_PK_DICT};

static uint8_t key_len[K_COUNT];
/* The keys of each length, for key_of: a handful at most. */
#define KEY_MAX_BYTES 40
#define KEYS_PER_LENGTH 12
static uint8_t keys_of_len[KEY_MAX_BYTES + 1][KEYS_PER_LENGTH];

static void init_wanted(void) {
  if (wanted[R_ROOT][K_segments]) return; /* filled once; the same each time, so a race is harmless */
  wanted[R_ROOT][K_device_traces] = R_TRACES;
  wanted[R_ROOT][K_allocator_settings] = R_SETTINGS;
  static const uint8_t entry[] = {K_action, K_addr, K_size, K_stream, K_device_free, K_pool_id};
  for (size_t i = 0; i < sizeof entry; i++) wanted[R_ENTRY][entry[i]] = W_SCALAR;
  static const uint8_t segment[] = {K_device, K_address, K_total_size, K_stream, K_is_expandable, K_segment_pool_id};
  for (size_t i = 0; i < sizeof segment; i++) wanted[R_SEGMENT][segment[i]] = W_SCALAR;
  wanted[R_SEGMENT][K_blocks] = R_BLOCKS;
  static const uint8_t block[] = {K_size, K_address, K_requested_size, K_state};
  for (size_t i = 0; i < sizeof block; i++) wanted[R_BLOCK][block[i]] = W_SCALAR;
  static const uint8_t settings[] = {K_PYTORCH_CUDA_ALLOC_CONF, K_max_split_size, K_garbage_collection_threshold,
                                     K_expandable_segments, K_release_lock_on_cudamalloc,
                                     K_graph_capture_record_stream_reuse};
  for (size_t i = 0; i < sizeof settings; i++) wanted[R_SETTINGS][settings[i]] = W_SCALAR;
  wanted[R_SETTINGS][K_roundup_power2_divisions] = R_DIVISIONS;
  for (int i = 0; i < 16; i++) wanted[R_DIVISIONS][K_DIV0 + i] = W_SCALAR;
  /* Frames are read where PyTorch writes them, since a frame or a list of them is written
   * whole the first time only, wherever that is (Note [Frames as they are read]). */
  wanted[R_ENTRY][K_frames] = wanted[R_SEGMENT][K_frames] = wanted[R_BLOCK][K_frames] = R_FRAMES;
  wanted[R_FRAME][K_filename] = wanted[R_FRAME][K_name] = wanted[R_FRAME][K_line] = W_SCALAR;
  for (unsigned k = 1; k < K_COUNT; k++) {
    key_len[k] = (uint8_t)strlen(key_names[k]);
    uint8_t *slot = keys_of_len[key_len[k]];
    while (*slot) slot++; /* the table has room: no length has more than KEYS_PER_LENGTH - 1 keys */
    *slot = (uint8_t)k;
  }
  wanted[R_ROOT][K_segments] = R_SEGMENTS;
}

/* The key a string names, K_NONE for any other: the keys of its length, first byte first. */
static uint8_t key_of(const char *s, size_t len) {
  if (len == 0 || len > KEY_MAX_BYTES) return K_NONE;
  for (const uint8_t *k = keys_of_len[len]; *k; k++)
    if (key_names[*k][0] == s[0] && memcmp(key_names[*k], s, len) == 0) return *k;
  return K_NONE;
}

/* ---- kept strings: an arena that only grows ------------------------------------------------- */

typedef struct chunk_s {
  struct chunk_s *prev;
  size_t used, size;
  _Alignas(16) char data[];
} chunk_t;

/* bytes of memory, aligned for any value, that live as long as the arena. */
static void *keep_mem(chunk_t **head, size_t bytes) {
  chunk_t *c = *head;
  size_t at = c ? (c->used + 15) & ~(size_t)15 : 0;
  if (c == NULL || at > c->size || c->size - at < bytes) {
    size_t size = bytes > (64u << 10) ? bytes : (64u << 10);
    c = malloc(sizeof *c + size);
    if (c == NULL) return NULL;
    c->prev = *head;
    c->used = 0;
    c->size = size;
    *head = c;
    at = 0;
  }
  c->used = at + bytes;
  return c->data + at;
}

static const char *keep_bytes(chunk_t **head, const char *s, size_t len) {
  char *p = keep_mem(head, len + 1);
  if (p == NULL) return NULL;
  if (len) memcpy(p, s, len);
  p[len] = '\0';
  return p;
}

static void free_chunks(chunk_t *c) {
  for (chunk_t *prev; c; c = prev) {
    prev = c->prev;
    free(c);
  }
}

/* ---- values and containers -------------------------------------------------------------------- */

typedef struct cont_s cont_t;

/* Where a STR's bytes are; for a LIST or TUPLE, S_PAIR: two ints kept (a pool id), packed in
 * v.u when each fits in 32 bits (S_PAIR32), else at v.u in the machine's pairs (S_PAIR); a
 * DICT or LIST fetched from the memo that stands for a frame (S_FRAME: v.u its local number)
 * or a list of frames (S_FRAMES: v.u the memo's word for it), Note [Frames as they are read]. */
enum { S_KEPT = 0, S_STACK, S_NONE, S_PAIR = S_STACK, S_PAIR32 = S_NONE + 1, S_FRAME, S_FRAMES };

/* A stack value: what the tree reader's ab_pk_t holds of a scalar, in 32 bytes. */
typedef struct sv_s {
  uint8_t type;  /* ab_pk_type_t */
  uint8_t width; /* INT: ab_pk_width_t */
  uint8_t where; /* STR: S_*; LIST, TUPLE: S_PAIR or S_PAIR32 when two ints were kept */
  uint8_t key;   /* STR: K_*, when it names a key read */
  uint8_t role;  /* containers: R_* */
  uint8_t act;   /* STR kept: its ab_trace_action_t + 1, 0 when not yet known */
  uint8_t field; /* STR naming a key an entry keeps: its field (AB_SNAP_*) + 1; else 0 */
  uint32_t len;  /* STR, BYTES: bytes */
  uint64_t pos;  /* byte offset of the opcode that made it */
  union {
    int64_t i;
    uint64_t u;    /* INT of width AB_PK_UINT64; S_STACK: the offset in strs; R_RUN: entries */
    double f;
    const char *s; /* S_KEPT */
  } v;
  cont_t *c;     /* containers with a role; NULL for opaque ones; R_RUN: the trace */
} sv_t;

/* Note [Entries as they are read]
 * An entry keeps, for each key the replay reads, what was set under it last, in the fields
 * both readers read an entry into (snapshot_walk.h, Note [An entry's fields]). When the entry
 * is appended, ab_snapshot_add_entry checks the fields its action reads and gives it to the
 * builder; any field it refuses departs, so the error is the tree reader's. */
struct cont_s {
  ab_pk_t self;      /* the container as the tree reader reads it: type, pos, v.seq = &seq */
  ab_pk_seq_t seq;   /* dicts: the pairs kept; lists: the items kept (a trace: only their count) */
  uint8_t role;
  bool may_take;     /* Python's pickler could add a group: none yet, or the last was a full batch */
  bool placed;
  cont_t *parent;    /* where it was made to go */
  uint64_t index;    /* the item it was made to be, in a list parent */
  uint64_t count;    /* items or pairs placed */
  uint64_t seen;     /* a trace: entries read (placed, or in a run) */
  ab_snap_entry_t e; /* an entry: its fields (Note [Entries as they are read]) */
  cont_t *next, *prev; /* every container made, to free them */
  /* a list of frames, or an entry holding one (Note [Frames as they are read]) */
  uint8_t fkind;     /* F_*: how the list is known */
  uint32_t fref;     /* F_REF: the memo's word for the list named */
  uint32_t *ids;     /* F_IDS: its frames' local numbers */
  uint32_t nids, capids;
  uint64_t memo;     /* a list or a frame: the memo index it was put at + 1 (0: none) */
  uint32_t mword;    /* the word put there while it is read (T_PENDING), naming it in claims */
  bool fixed;        /* a list or a frame fetched while read: fref is the word for it now */
  /* a frame: its fields as set last */
  uint32_t file, name; /* offsets in the local text, or F_NOSTR, F_BADSTR */
  uint32_t line;
  uint8_t lstate;      /* L_* */
};

/* How an entry's frames are known (Note [Frames as they are read]). */
enum { F_ABSENT = 0, F_IDS, F_REF, F_BAD };
enum { L_ABSENT = 0, L_OK, L_BAD };
/* A frame's string not set, or not one kept (another type, too long) */
#define F_NOSTR UINT32_MAX
#define F_BADSTR (UINT32_MAX - 1)

#define PICKLE_BATCH 1000 /* Python's pickler: items per APPENDS or SETITEMS */
#define STACK_STR_BYTES 4096 /* strings kept on the stack (keys, actions, a conf string); longer ones depart when read */

static ab_pk_seq_t no_items; /* an opaque container read as a value: empty, of its type */

/* The memo's words: 0 never set; the type of an opaque container; a container with a role
 * (refused when fetched); a string too long to keep; a bytes value; or an index into vals;
 * past W_TAGGED, a tag in the top three bits and a number below
 * (Note [Frames as they are read]): a frame, a list of frames interned locally or in the builder's stacks, or a frame or
 * list still being read (refused when fetched). */
enum { M_UNSET = 0, M_LIST, M_DICT, M_TUPLE, M_ROLE, M_LONGSTR, M_BYTES, M_VALS };
enum { T_FRAME = 4, T_LOCAL, T_STACK, T_PENDING };
#define W_TAGGED (1u << 31)
#define W_MAX ((1u << 29) - 1) /* the largest number a tagged word holds */
#define W_MAKE(tag, x) ((uint32_t)(tag) << 29 | (uint32_t)(x))
#define W_TAG(w) ((w) >> 29)
#define W_NUM(w) ((w) & W_MAX)

static inline bool is_val(uint32_t w) { return w >= M_VALS && w < W_TAGGED; }

/* An alloc's stack to be interned (Note [A stack interned one entry late]). */
typedef struct late_s {
  bool on;
  uint32_t *ids; /* its frames, numbered in the builder's stacks */
  uint32_t n, cap;
  size_t alloc;  /* the allocation the alloc became (ab_trace_builder_last_alloc; 0: none), or
                  * LATE_PENDING while it goes to the builder */
  uint64_t memo; /* its list's memo index + 1 (0: none), and the word the list put there */
  uint32_t mword;
} late_t;
#define LATE_PENDING SIZE_MAX

typedef struct svm_s {
  const char *path;
  ab_instream_t *in;
  const unsigned char *win, *p, *end; /* the stream's window; p: the next byte */
  uint64_t win_off;                   /* offset of win */
  uint64_t base;                      /* win_off less win's address: a byte's offset is base + its address */
  uint64_t at;                        /* offset of the opcode being run */
  sv_t *stack;
  size_t n, cap;
  size_t *marks;
  size_t nmarks, capmarks;
  size_t run_top;                     /* 1 + the index of the highest run on the stack; 0: none */
  size_t str_top;                     /* 1 + the index of the highest S_STACK string; 0: none */
  char *strs;                         /* bytes of the S_STACK strings */
  size_t nstrs, capstrs;
  uint32_t *memo;
  size_t capmemo, memo_count;
  sv_t *vals;                         /* values the memo holds */
  size_t nvals, capvals;
  int64_t (*pairs)[2];                /* the S_PAIR values' ints */
  size_t npairs, cappairs;
  ab_map_t interned;                  /* hash of a short string -> its index in vals + 1 */
  chunk_t *kept;                      /* bytes of the kept strings */
  cont_t *live, *spare;
  cont_t *root, *candidate;
  uint64_t frame_need;                /* the contents must hold this many bytes (FRAME) */
  /* Note [Frames as they are read] */
  ab_stacks_t local;                  /* every frame and list of frames met, by content */
  ab_map_t text_of;                   /* a kept string's address -> its offset in local + 1 */
  uint32_t *global_frame;             /* a local frame's number in the builder's stacks + 1 */
  uint32_t *global_stack;             /* the same for a local stack */
  size_t capglobal_frame, capglobal_stack;
  uint32_t *gids;                     /* a stack's frames, numbered in the builder's stacks */
  size_t capgids;
  late_t late;                        /* Note [A stack interned one entry late] */
  uint32_t serial;                    /* the next T_PENDING word's number */
  ab_map_t claims;                    /* a T_PENDING word's number + 1 -> the container it names */
  int device;
  ab_trace_builder_t *b;
  ab_diag_t *diag;
} svm_t;

/* Departs from streaming (Note [Streaming a snapshot], 3): the tree reader reads the file. */
#define DEPART AB_ERR_INVALID

/* ---- claims (Note [Frames as they are read], 2) ------------------------------------------- */

/* c names no memo index any more. */
static void claim_drop(svm_t *vm, cont_t *c) {
  if (c->memo) ab_map_take(&vm->claims, W_NUM(c->mword) + 1, NULL);
  c->memo = 0;
}

/* The word c, a frame or a list still being read, puts at memo index idx: one no other holds,
 * which names c until it is read (its last index only). M_ROLE, which departs when fetched,
 * when the numbers run out or the host has no room. */
static uint32_t claim(svm_t *vm, cont_t *c, uint64_t idx) {
  claim_drop(vm, c);
  if (vm->serial > W_MAX || ab_map_put(&vm->claims, (uint64_t)vm->serial + 1, (uint64_t)(uintptr_t)c) != AB_OK)
    return M_ROLE;
  c->memo = idx + 1;
  c->mword = W_MAKE(T_PENDING, vm->serial++);
  return c->mword;
}

/* Whether the memo still holds the word c put for itself while it was read. */
static bool claim_held(const svm_t *vm, const cont_t *c) { return c->memo && vm->memo[c->memo - 1] == c->mword; }

/* What c stands for, now that it is read, where it put itself in the memo. */
static void claim_set(svm_t *vm, cont_t *c, uint32_t word) {
  if (claim_held(vm, c)) vm->memo[c->memo - 1] = word;
  claim_drop(vm, c);
}

/* c's claim passes to `to` (an entry takes over its list's). */
static void claim_move(svm_t *vm, cont_t *c, cont_t *to) {
  to->memo = c->memo;
  to->mword = c->mword;
  size_t s = c->memo ? ab_map_slot(&vm->claims, W_NUM(c->mword) + 1) : vm->claims.cap;
  if (s < vm->claims.cap) vm->claims.slots[s].val = (uint64_t)(uintptr_t)to;
  c->memo = 0;
}

static void cont_free(svm_t *vm, cont_t *c) {
  claim_drop(vm, c);
  if (c->prev) c->prev->next = c->next;
  else vm->live = c->next;
  if (c->next) c->next->prev = c->prev;
  c->next = vm->spare;
  vm->spare = c;
}

/* A container made afresh at the opcode being run, with its kept items' room. */
static void cont_reset(svm_t *vm, cont_t *c, uint8_t role, uint8_t type) {
  /* Field by field, the items kept for the next container: one is made per entry. */
  c->self = (ab_pk_t){.type = type, .pos = vm->at, .v.seq = &c->seq};
  c->seq.n = 0;
  c->seq.index = NULL;
  c->seq.nindex = 0;
  c->role = role;
  c->may_take = true;
  c->placed = false;
  c->parent = NULL;
  c->index = c->count = c->seen = 0;
  if (role == R_ENTRY) memset(&c->e, 0, sizeof c->e);
  c->fkind = role == R_FRAMES ? F_IDS : F_ABSENT;
  c->nids = 0;
  claim_drop(vm, c);
  c->fixed = false;
  c->file = c->name = F_NOSTR;
  c->lstate = L_ABSENT;
}

static cont_t *cont_new(svm_t *vm, uint8_t role, uint8_t type) {
  cont_t *c = vm->spare;
  if (c) {
    vm->spare = c->next;
  } else {
    c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
  }
  cont_reset(vm, c, role, type);
  c->prev = NULL;
  c->next = vm->live;
  if (vm->live) vm->live->prev = c;
  vm->live = c;
  return c;
}

static ab_status seq_add(ab_pk_seq_t *seq, const ab_pk_t *v) {
  if (seq->n == seq->cap) {
    if (seq->cap == UINT32_MAX) return DEPART;
    uint64_t want = seq->cap ? (uint64_t)seq->cap * 2 : 8;
    if (want > UINT32_MAX) want = UINT32_MAX;
    ab_pk_t *grown = realloc(seq->items, want * sizeof *grown);
    if (grown == NULL) return DEPART;
    seq->items = grown;
    seq->cap = (uint32_t)want;
  }
  seq->items[seq->n++] = *v;
  return AB_OK;
}

/* ---- the stream ---------------------------------------------------------------------------- */

/* Makes k bytes visible at vm->p, or what is left of the contents when fewer; an error only
 * when the stream fails (and then nothing is visible). */
static ab_status more(svm_t *vm, size_t k) {
  ab_instream_consume(vm->in, (size_t)(vm->p - vm->win));
  vm->win = vm->p = vm->end = NULL;
  const unsigned char *data = NULL;
  size_t avail = 0;
  AB_TRY(ab_instream_window(vm->in, k, &data, &avail, vm->diag));
  vm->win_off = ab_instream_offset(vm->in);
  vm->base = vm->win_off - (uint64_t)(uintptr_t)data;
  vm->win = vm->p = data;
  vm->end = data + avail;
  return AB_OK;
}

/* k bytes at vm->p, or DEPART: the file ends first (truncated). */
#define NEED(k)                                                \
  do {                                                         \
    if ((size_t)(vm->end - vm->p) < (k)) {                     \
      AB_TRY(more(vm, (k)));                                   \
      if ((size_t)(vm->end - vm->p) < (k)) return DEPART;      \
    }                                                          \
  } while (0)

static uint64_t offset(const svm_t *vm) { return vm->base + (uint64_t)(uintptr_t)vm->p; }

/* ---- the stack -------------------------------------------------------------------------------- */

static size_t floor_height(const svm_t *vm) { return vm->nmarks ? vm->marks[vm->nmarks - 1] : 0; }

static ab_status need(const svm_t *vm, size_t k) { return vm->n - floor_height(vm) < k ? DEPART : AB_OK; }

static ab_status grow_stack(svm_t *vm) {
  size_t cap = vm->cap ? vm->cap * 2 : 256;
  sv_t *grown = realloc(vm->stack, cap * sizeof *grown);
  if (grown == NULL) return DEPART;
  vm->stack = grown;
  vm->cap = cap;
  return AB_OK;
}

/* Room for one more value on the stack, returned for the caller to fill. */
static inline sv_t *slot(svm_t *vm) {
  if (vm->n == vm->cap && grow_stack(vm) != AB_OK) return NULL;
  return &vm->stack[vm->n++];
}

/* A stack value of `type` made at pos, nothing else set. Values are set in place, field by
 * field: one built aside and copied in is read back in wider loads than it was written, which
 * the processor cannot forward from its pending stores, and every opcode would wait on it. */
static inline void sv_clear(sv_t *v, uint8_t type, uint64_t pos) {
  memset(v, 0, sizeof *v);
  v->type = type;
  v->pos = pos;
}

/* Pushes a value made by the opcode being run: no string, no container. */
static inline ab_status push_scalar(svm_t *vm, uint8_t type, uint8_t width, uint64_t bits) {
  sv_t *v = slot(vm);
  if (v == NULL) return DEPART;
  sv_clear(v, type, vm->at);
  v->width = width;
  v->v.u = bits;
  return AB_OK;
}

/* Pops the stack down to k values, and the bytes of the strings popped. A run of entries
 * leaves only by being appended to its trace (`placed`). */
static ab_status drop_to(svm_t *vm, size_t k, bool placed) {
  /* Most drops hold neither: runs are only below run_top, strings with bytes in strs only
   * below str_top (popped in the order they were pushed). */
  if (k < vm->run_top) {
    if (!placed) return DEPART;
    size_t top = k;
    while (top > 0 && vm->stack[top - 1].role != R_RUN) top--;
    vm->run_top = top;
  }
  if (k < vm->str_top) {
    for (size_t i = k; i < vm->n; i++)
      if (vm->stack[i].type == AB_PK_STR && vm->stack[i].where == S_STACK) {
        vm->nstrs = (size_t)vm->stack[i].v.u;
        break;
      }
    size_t top = k;
    while (top > 0 && !(vm->stack[top - 1].type == AB_PK_STR && vm->stack[top - 1].where == S_STACK)) top--;
    vm->str_top = top;
  }
  vm->n = k;
  return AB_OK;
}

static const char *str_bytes(const svm_t *vm, const sv_t *v) {
  return v->where == S_STACK ? vm->strs + v->v.u : v->where == S_KEPT ? v->v.s : NULL;
}

/* A STR or BYTES of len bytes at vm->p. */
static ab_status push_text(svm_t *vm, ab_pk_type_t type, uint64_t len) {
  if (len > UINT32_MAX) return DEPART;
  sv_t v = {.type = (uint8_t)type, .where = S_NONE, .len = (uint32_t)len, .pos = vm->at};
  if (type == AB_PK_STR && len <= STACK_STR_BYTES) {
    NEED((size_t)len);
    if (vm->strs == NULL || vm->capstrs - vm->nstrs < len) { /* never NULL once a string is made, even "" */
      size_t cap = vm->capstrs ? vm->capstrs * 2 : 4096;
      char *grown = realloc(vm->strs, cap);
      if (grown == NULL) return DEPART;
      vm->strs = grown;
      vm->capstrs = cap;
    }
    memcpy(vm->strs + vm->nstrs, vm->p, (size_t)len);
    v.where = S_STACK;
    v.v.u = vm->nstrs;
    v.key = key_of((const char *)vm->p, (size_t)len);
    v.field = wanted[R_ENTRY][v.key] == W_SCALAR ? (uint8_t)(entry_field[v.key] + 1) : 0;
    vm->nstrs += (size_t)len;
    vm->p += len;
  } else {
    /* Nothing the reader reads is this long: skipped piece by piece, never held whole. */
    while (len > 0) {
      if (vm->p == vm->end) {
        AB_TRY(more(vm, 1));
        if (vm->p == vm->end) return DEPART; /* truncated */
      }
      size_t k = (size_t)(vm->end - vm->p) < len ? (size_t)(vm->end - vm->p) : (size_t)len;
      vm->p += k;
      len -= k;
    }
  }
  sv_t *at = slot(vm);
  if (at == NULL) return DEPART;
  *at = v;
  if (v.where == S_STACK) vm->str_top = vm->n;
  return AB_OK;
}

/* An int from n bytes of little-endian two's complement, as pickle.c reads it. */
static ab_status push_long(svm_t *vm, size_t n) {
  if (n > 4096) return DEPART; /* no number the reader reads; the window stays small */
  NEED(n);
  uint8_t width;
  uint64_t bits;
  ab_pickle_long(vm->p, n, &width, &bits);
  vm->p += n;
  return push_scalar(vm, AB_PK_INT, width, bits);
}

/* ---- roles (Note [Streaming a snapshot], 1) ---------------------------------------------------- */

static ab_status read_run(svm_t *vm, cont_t *trace, size_t fl);

/* The role of a container of `type` made to be an item of list c. */
static uint8_t as_item(const cont_t *c, uint8_t type) {
  uint8_t r = item_role[c->role];
  return r && role_type[r] == type ? r : R_OPAQUE;
}

/* The role of a container of `type` made to go under key in dict c. */
static uint8_t as_value(const cont_t *c, const sv_t *key, uint8_t type) {
  if (key->type != AB_PK_STR) return R_OPAQUE;
  uint8_t w = wanted[c->role][key->key];
  return w && w != W_SCALAR && role_type[w] == type ? w : R_OPAQUE;
}

/* A new empty list or dict, with the role of the place it is made for. */
static ab_status make(svm_t *vm, uint8_t type) {
  size_t fl = floor_height(vm), n = vm->n;
  uint8_t role = R_OPAQUE;
  cont_t *parent = NULL;
  uint64_t index = 0;
  /* A single APPEND: on top of a list that may take one more. */
  const sv_t *top = n > fl ? &vm->stack[n - 1] : NULL;
  if (top && top->c && top->role != R_RUN && top->type == AB_PK_LIST && top->c->may_take &&
      (role = as_item(top->c, type))) {
    parent = top->c;
    index = top->c->count;
  }
  /* A single SETITEM: a key on top of a dict that may take one more. */
  if (!role && n >= fl + 2) {
    const sv_t *d = &vm->stack[n - 2];
    if (d->c && d->role != R_RUN && d->type == AB_PK_DICT && d->c->may_take && (role = as_value(d->c, top, type)))
      parent = d->c;
  }
  /* A batch: the container below the newest mark. */
  if (!role && vm->nmarks && fl >= 1 && vm->stack[fl - 1].c && vm->stack[fl - 1].role != R_RUN) {
    cont_t *c = vm->stack[fl - 1].c;
    if (c->self.type == AB_PK_LIST && (role = as_item(c, type))) index = c->count + (n - fl);
    else if (c->self.type == AB_PK_DICT && (n - fl) % 2 == 1) role = as_value(c, top, type);
    if (role) parent = c;
    if (role == R_ENTRY && n > fl) AB_TRY(read_run(vm, c, fl));
  }
  if (!role && n == 0 && vm->nmarks == 0 && vm->root == NULL && type == AB_PK_DICT) role = R_ROOT;
  cont_t *c = NULL;
  if (role) {
    c = cont_new(vm, role, type);
    if (c == NULL) return DEPART;
    c->parent = parent;
    c->index = index;
    if (role == R_ROOT) vm->root = c;
  }
  sv_t *at = slot(vm);
  if (at == NULL) return DEPART;
  sv_clear(at, type, vm->at);
  at->role = role;
  at->c = c;
  return AB_OK;
}

/* ---- frames (Note [Frames as they are read]) ---------------------------------------------- */

/* Note [Frames as they are read]
 * PyTorch writes each distinct frame as one dict, and each distinct stack as one list, the
 * first time a snapshot needs it (in a block of `segments`, which comes first, or in an entry),
 * and names it through the memo after: an alloc and its frees name one list, and so do a
 * segment_alloc and the alloc that made it. So an alloc's frames are often written long before
 * it, where the replay reads nothing. Hence:
 *   1. A list under `frames` (in an entry, a segment or a block) and the dicts in it get roles.
 *      A frame keeps its filename, name and line, its strings interned in the machine's own
 *      ab_stacks_t (by content: the memo's strings once each); appended to its list, it is
 *      interned there as a frame, and the list keeps its frames' local numbers.
 *   2. The memo holds a word for each (Note [Streaming a snapshot], 4): a frame's local number,
 *      a list's local stack, or, once an alloc of the trace read named it, its stack in the
 *      builder's. While a frame or list is being read its word is one no other holds
 *      (T_PENDING), which departs when fetched; when it is read that word is replaced, if the
 *      memo still holds it.
 *   3. Fetched, a frame or list is a value (S_FRAME, S_FRAMES): appended to a list of frames,
 *      or set as an entry's frames, it is what it stands for; changed (an APPEND or SETITEM on
 *      it) it departs, as the tree reader would see the change.
 *   4. An entry's frames are looked at when it goes to the builder. An alloc's, of the trace
 *      read, are interned in the builder's stacks (each local frame once: a table keeps its
 *      number there), entry after entry as the tree reader does (Note [An entry's frames]); what
 *      is not frames as that Note says (a field absent or of another type, a string too long to
 *      keep, a list made another way) departs then, and the tree reader says what is wrong.
 *      Another entry's list is kept by its local stack, for an alloc that names it later.
 * The cost: a few words per distinct frame and list, and for each alloc the lookup of its
 * frames, which are read at once with the entry (Note [An entry's frames at once]). */

static inline ab_status push_id(cont_t *c, uint32_t id) {
  if (c->nids == c->capids) {
    if (c->capids >= UINT32_MAX / 2) return DEPART;
    uint32_t cap = c->capids ? c->capids * 2 : 16;
    uint32_t *grown = realloc(c->ids, cap * sizeof *grown);
    if (grown == NULL) return DEPART;
    c->ids = grown;
    c->capids = cap;
  }
  c->ids[c->nids++] = id;
  return AB_OK;
}

/* Grows a table of numbers + 1 (0: not known yet) to hold index i. */
static bool grow_zeroed(uint32_t **t, size_t *cap, size_t i) {
  if (i < *cap) return true;
  size_t want = *cap ? *cap : 1024;
  while (want <= i) want *= 2;
  uint32_t *grown = realloc(*t, want * sizeof *grown);
  if (grown == NULL) return false;
  memset(grown + *cap, 0, (want - *cap) * sizeof *grown);
  *t = grown;
  *cap = want;
  return true;
}

/* A frame's string, interned locally: a string of the memo once (it is named many times), one
 * on the stack each time; F_BADSTR for another value, or a string too long to be kept. */
static uint32_t local_string(svm_t *vm, const sv_t *v) {
  if (v->type != AB_PK_STR || v->where == S_NONE) return F_BADSTR;
  if (v->where == S_STACK) return ab_stacks_string(&vm->local, vm->strs + v->v.u, v->len);
  uint64_t key = (uint64_t)(uintptr_t)v->v.s, off = 0;
  if (ab_map_get(&vm->text_of, key, &off)) return (uint32_t)(off - 1);
  uint32_t o = ab_stacks_string(&vm->local, v->v.s, v->len);
  /* A cache the host has no room for only costs hashing the string again. */
  if (o != UINT32_MAX) (void)ab_map_put(&vm->text_of, key, (uint64_t)o + 1);
  return o;
}

/* A frame's field set under key (the last one set counts, as in a dict). */
static void frame_field(svm_t *vm, cont_t *f, uint8_t key, const sv_t *v) {
  if (key == K_line) {
    f->lstate = v->type == AB_PK_INT ? L_OK : L_BAD;
    f->line = v->type == AB_PK_INT ? ab_snapshot_frame_line(v->width, v->v.u) : 0;
  } else if (key == K_filename) {
    f->file = local_string(vm, v);
  } else {
    f->name = local_string(vm, v);
  }
}

/* A frame appended to its list: its local number, UINT32_MAX when it is not one as
 * Note [An entry's frames] says; its memo word becomes that (an opaque dict when not one). */
static ab_status frame_done(svm_t *vm, cont_t *f, uint32_t *id) {
  if (f->fixed) { /* read already, when it was fetched */
    *id = W_TAG(f->fref) == T_FRAME ? W_NUM(f->fref) : UINT32_MAX;
    return AB_OK;
  }
  *id = UINT32_MAX;
  if (f->file < F_BADSTR && f->name < F_BADSTR && f->lstate == L_OK)
    *id = ab_stacks_frame_at(&vm->local, f->file, f->name, f->line);
  if (vm->local.failed) return DEPART;
  claim_set(vm, f, *id <= W_MAX ? W_MAKE(T_FRAME, *id) : M_DICT);
  return AB_OK;
}

/* A list of frames read (c, or the entry c holding it), kept for what names it later: its memo
 * word becomes its local stack (stack 0: an empty list), or an opaque list when it is not one
 * of frames. */
static ab_status list_keep(svm_t *vm, cont_t *c, uint32_t *word) {
  *word = M_LIST;
  if (!claim_held(vm, c)) { /* nothing can name it again */
    claim_drop(vm, c);
    return AB_OK;
  }
  if (c->fkind == F_IDS) {
    uint32_t k = ab_stacks_intern(&vm->local, c->ids, c->nids);
    if (vm->local.failed) return DEPART;
    if (k <= W_MAX) *word = W_MAKE(T_LOCAL, k);
  }
  claim_set(vm, c, *word);
  return AB_OK;
}

/* A frame or a list fetched (memo word w) while it is read, as a segment's empty list is by
 * its blocks: what it holds is what it stands for (a change to it after departs), and the
 * memo names that from now on. */
static ab_status fix_claimed(svm_t *vm, uint32_t w) {
  uint64_t at = 0;
  if (!ab_map_get(&vm->claims, W_NUM(w) + 1, &at)) return DEPART; /* put again elsewhere since */
  cont_t *c = (cont_t *)(uintptr_t)at;
  uint32_t word = M_DICT, id = UINT32_MAX;
  if (c->role == R_FRAME) {
    AB_TRY(frame_done(vm, c, &id));
    if (id != UINT32_MAX) word = W_MAKE(T_FRAME, id);
  } else {
    AB_TRY(list_keep(vm, c, &word));
  }
  if (c->role == R_ENTRY) { /* the list it holds, from the body read at once */
    c->fkind = W_TAG(word) == T_LOCAL ? F_REF : F_BAD;
    c->nids = 0;
  } else {
    c->fixed = true;
  }
  c->fref = word;
  return AB_OK;
}

/* Items [from, from + k) of the stack appended to list of frames c: frames read or fetched;
 * anything else makes it no list of frames (F_BAD). */
static ab_status place_frames(svm_t *vm, cont_t *c, size_t from, size_t k) {
  if (c->fixed) return DEPART; /* fetched before: the tree reader sees what is appended */
  for (size_t i = 0; i < k; i++) {
    const sv_t *v = &vm->stack[from + i];
    cont_t *it = v->c;
    uint32_t id = UINT32_MAX;
    if (it) {
      if (v->role == R_RUN || it->role != R_FRAME || it->placed || it->parent != c) return DEPART;
      AB_TRY(frame_done(vm, it, &id));
      it->placed = true;
      cont_free(vm, it);
    } else if (v->type == AB_PK_DICT && v->where == S_FRAME) {
      id = (uint32_t)v->v.u;
    }
    c->count++;
    if (id == UINT32_MAX) c->fkind = F_BAD;
    else if (c->fkind == F_IDS) AB_TRY(push_id(c, id));
  }
  return AB_OK;
}

/* The value v set under `frames` in dict c: an entry holds it until it is read (its list's
 * frames and memo index taken over); a segment's or a block's list is only kept. */
static ab_status frames_set(svm_t *vm, cont_t *c, const sv_t *v) {
  cont_t *list = v->c;
  if (list && (v->role == R_RUN || list->role != R_FRAMES || list->placed || list->parent != c)) return DEPART;
  uint32_t word;
  if (c->role != R_ENTRY) {
    if (list == NULL) return AB_OK;
    list->placed = true;
    ab_status st = list->fixed ? AB_OK : list_keep(vm, list, &word);
    cont_free(vm, list);
    return st;
  }
  if (c->fkind == F_IDS || c->fkind == F_BAD) AB_TRY(list_keep(vm, c, &word)); /* a key set twice: the first list kept */
  c->nids = 0;
  claim_drop(vm, c);
  c->fkind = F_BAD; /* anything but a list of frames */
  if (list && list->fixed) {
    c->fkind = W_TAG(list->fref) == T_LOCAL ? F_REF : F_BAD;
    c->fref = list->fref;
    list->placed = true;
    cont_free(vm, list);
  } else if (list) {
    uint32_t *ids = c->ids, cap = c->capids;
    c->ids = list->ids;
    c->capids = list->capids;
    c->nids = list->nids;
    list->ids = ids;
    list->capids = cap;
    c->fkind = list->fkind;
    claim_move(vm, list, c);
    list->placed = true;
    cont_free(vm, list);
  } else if (v->type == AB_PK_LIST && v->where == S_FRAMES) {
    c->fkind = F_REF;
    c->fref = (uint32_t)v->v.u;
  }
  return AB_OK;
}

/* The number in the builder's stacks g of local frame f; UINT32_MAX when the host has no room. */
static uint32_t global_frame(svm_t *vm, ab_stacks_t *g, uint32_t f) {
  if (!grow_zeroed(&vm->global_frame, &vm->capglobal_frame, f)) return UINT32_MAX;
  if (vm->global_frame[f]) return vm->global_frame[f] - 1;
  const ab_frame_t *lf = &vm->local.frame[f];
  const char *file = ab_stacks_text(&vm->local, lf->file), *name = ab_stacks_text(&vm->local, lf->name);
  /* One statement each: the file's string before the name's, as the tree reader. */
  uint32_t fo = ab_stacks_string(g, file, strlen(file));
  uint32_t no = ab_stacks_string(g, name, strlen(name));
  uint32_t id = ab_stacks_frame_at(g, fo, no, lf->line);
  if (id != UINT32_MAX) vm->global_frame[f] = id + 1;
  return id;
}

/* The builder's numbers of n local frames into vm->gids: the builder's stacks, or NULL when
 * the builder failed (its finish says so). */
static ab_status global_frames(svm_t *vm, const uint32_t *ids, uint32_t n, ab_stacks_t **out) {
  *out = NULL;
  ab_stacks_t *g = ab_trace_builder_stacks(vm->b);
  if (g == NULL) return AB_OK;
  if (n > vm->capgids) {
    uint32_t *grown = realloc(vm->gids, n * sizeof *grown);
    if (grown == NULL) return DEPART;
    vm->gids = grown;
    vm->capgids = n;
  }
  for (uint32_t k = 0; k < n; k++) {
    uint32_t f = ids[k], known = f < vm->capglobal_frame ? vm->global_frame[f] : 0; /* most are known */
    if ((vm->gids[k] = known ? known - 1 : global_frame(vm, g, f)) == UINT32_MAX) return g->failed ? AB_OK : DEPART;
  }
  *out = g;
  return AB_OK;
}

/* Note [A stack interned one entry late]
 * An alloc's stack is often new (allocbench's test snapshots name a million), and interning a
 * new one is a cache miss in a table of megabytes. So the stack of an alloc's own list is
 * interned one entry late: its frames are numbered and its slot in the table prefetched when
 * the alloc goes to the builder, and it is interned when the next stack is, when its list is
 * fetched from the memo, or at the end, the entries read in between hiding the miss. The
 * stacks keep the order of the entries; the allocation the alloc became gets its stack then
 * (ab_trace_builder_stack_at), and the list's memo index names it then (until then the word
 * the list put there stays, which flushes it when fetched). */
static ab_status late_flush(svm_t *vm) {
  late_t *l = &vm->late;
  if (!l->on) return AB_OK;
  l->on = false;
  uint32_t stack = ab_stacks_intern(vm->b->stacks, l->ids, l->n);
  ab_trace_builder_stack_at(vm->b, l->alloc, stack);
  if (l->memo && vm->memo[l->memo - 1] == l->mword) vm->memo[l->memo - 1] = stack <= W_MAX ? W_MAKE(T_STACK, stack) : M_LIST;
  return AB_OK;
}

/* Entry c's new list of frames, an alloc's, to be interned late; its claim passes to vm->late. */
static ab_status late_stack(svm_t *vm, cont_t *c) {
  AB_TRY(late_flush(vm));
  ab_stacks_t *g;
  AB_TRY(global_frames(vm, c->ids, c->nids, &g));
  if (g == NULL) return AB_OK;
  late_t *l = &vm->late;
  uint32_t *ids = l->ids, cap = l->cap; /* the numbers made become the late stack's: no copy */
  l->ids = vm->gids;
  l->cap = vm->capgids > UINT32_MAX ? UINT32_MAX : (uint32_t)vm->capgids;
  vm->gids = ids;
  vm->capgids = cap;
  l->n = c->nids;
  l->alloc = LATE_PENDING; /* the alloc is about to go to the builder (add_entry) */
  l->memo = c->memo;
  l->mword = c->memo ? c->mword : M_UNSET; /* a word of no pending kind when it put none */
  claim_drop(vm, c); /* the memo keeps its word, which now names the late stack */
  ab_stacks_prefetch(g, l->ids, l->n);
  l->on = true;
  return AB_OK;
}

/* The stack of local stack k, once per stack. */
static ab_status global_of_local(svm_t *vm, uint32_t k, uint32_t *stack) {
  *stack = 0;
  if (!grow_zeroed(&vm->global_stack, &vm->capglobal_stack, k)) return DEPART;
  if (vm->global_stack[k]) {
    *stack = vm->global_stack[k] - 1;
    return AB_OK;
  }
  const uint32_t *frames = NULL;
  uint32_t n = ab_stacks_frames(&vm->local, k, &frames);
  if (n == 0) return AB_OK;
  AB_TRY(late_flush(vm)); /* the stacks in the order of the entries */
  ab_stacks_t *g;
  AB_TRY(global_frames(vm, frames, n, &g));
  if (g == NULL) return AB_OK;
  *stack = ab_stacks_intern(g, vm->gids, n);
  if (*stack) vm->global_stack[k] = *stack + 1;
  return AB_OK;
}

/* An alloc's stack, as it goes to the builder (Note [Frames as they are read], 4): 0 when it
 * has none, or when it is interned late (Note [A stack interned one entry late]). */
static ab_status entry_stack(svm_t *vm, cont_t *c, uint32_t *stack) {
  *stack = 0;
  switch (c->fkind) {
    case F_ABSENT: return AB_OK;
    case F_REF:
      if (W_TAG(c->fref) == T_STACK) {
        *stack = W_NUM(c->fref);
        return AB_OK;
      }
      return global_of_local(vm, W_NUM(c->fref), stack);
    case F_IDS:
      if (c->nids) return late_stack(vm, c);
      claim_set(vm, c, W_MAKE(T_STACK, 0)); /* an empty list: no stack */
      return AB_OK;
    default: return DEPART; /* no list of frames: the tree reader says why */
  }
}

/* Another entry's frames, kept for an alloc that names them later. */
static ab_status frames_kept(svm_t *vm, cont_t *c) {
  uint32_t word;
  return c->fkind == F_IDS || c->fkind == F_BAD ? list_keep(vm, c, &word) : AB_OK;
}

/* ---- placing items (Note [Streaming a snapshot], 2 and 3) --------------------------------------- */

/* The ints of an S_PAIR or S_PAIR32 value. */
static void pair_of(const svm_t *vm, const sv_t *v, int64_t out[2]) {
  if (v->where == S_PAIR32) {
    out[0] = (int32_t)(uint32_t)v->v.u;
    out[1] = (int32_t)(uint32_t)(v->v.u >> 32);
  } else {
    out[0] = vm->pairs[v->v.u][0];
    out[1] = vm->pairs[v->v.u][1];
  }
}

static bool is_pair(const sv_t *v) {
  return v->type != AB_PK_DICT && v->c == NULL && (v->where == S_PAIR || v->where == S_PAIR32);
}

/* A string's bytes where they outlive the stack: kept already, or copied. */
static const char *kept_str(svm_t *vm, const sv_t *v) {
  return v->where == S_STACK ? keep_bytes(&vm->kept, vm->strs + v->v.u, v->len) : v->v.s;
}

/* A value kept under a key, as the tree reader has it: STR bytes copied out of the stack; a
 * container as its own captured self, or, opaque, as an empty one of its type (read as a
 * scalar, it is refused). */
static ab_status keep_value(svm_t *vm, const sv_t *v, ab_pk_t *out) {
  *out = (ab_pk_t){.type = v->type, .width = v->width, .len = v->len, .pos = v->pos};
  out->v.u = v->v.u;
  if (v->type == AB_PK_STR) {
    if (v->where == S_NONE) return DEPART;
    out->v.s = kept_str(vm, v);
    if (out->v.s == NULL) return DEPART;
  } else if (v->type == AB_PK_LIST || v->type == AB_PK_DICT || v->type == AB_PK_TUPLE) {
    out->len = 0;
    out->v.seq = &no_items;
    if (is_pair(v)) { /* a pool id: its two ints */
      ab_pk_seq_t *seq = keep_mem(&vm->kept, sizeof *seq + 2 * sizeof(ab_pk_t));
      if (seq == NULL) return DEPART;
      ab_pk_t *items = (ab_pk_t *)(seq + 1);
      int64_t ids[2];
      pair_of(vm, v, ids);
      for (int k = 0; k < 2; k++) items[k] = (ab_pk_t){.type = AB_PK_INT, .width = AB_PK_INT64, .pos = v->pos, .v.i = ids[k]};
      *seq = (ab_pk_seq_t){items, 2, 2, NULL, 0};
      out->v.seq = seq;
    }
  }
  return AB_OK;
}

/* An entry's field set under key (Note [Entries as they are read]). */
static inline ab_status set_field(svm_t *vm, ab_snap_entry_t *e, uint8_t key, const sv_t *v) {
  if (v->type == AB_PK_STR && v->where == S_NONE) return DEPART; /* as keep_value */
  int f = entry_field[key];
  if (f == AB_SNAP_ACTION) {
    e->kind[f] = AB_SNAP_BAD;
    if (v->type != AB_PK_STR) return AB_OK;
    e->action = kept_str(vm, v);
    if (e->action == NULL) return DEPART;
    e->action_len = v->len;
    e->act = v->where == S_KEPT ? v->act : 0; /* the memo's strings know theirs */
    e->kind[f] = AB_SNAP_STR;
  } else if (f == AB_SNAP_POOL) {
    e->kind[f] = AB_SNAP_BAD;
    if ((v->type == AB_PK_TUPLE || v->type == AB_PK_LIST) && is_pair(v)) {
      pair_of(vm, v, e->pool);
      e->kind[f] = AB_SNAP_PAIR;
    }
  } else {
    e->kind[f] = v->type != AB_PK_INT || v->width == AB_PK_BIGINT ? AB_SNAP_BAD : v->width == AB_PK_UINT64 ? AB_SNAP_UINT64 : AB_SNAP_INT64;
    e->u[f] = v->v.u;
  }
  return AB_OK;
}

/* The streaming reader departs where an entry's field is refused. */
static ab_status depart_field(void *ctx, int field) {
  (void)ctx;
  (void)field;
  return DEPART;
}

/* An entry to the builder, by the rules both readers share; DEPART for any it refuses. */
static ab_status add_entry(svm_t *vm, cont_t *c) {
  if (ab_snapshot_entry_is_alloc(&c->e)) AB_TRY(entry_stack(vm, c, &c->e.stack));
  else AB_TRY(frames_kept(vm, c));
  ab_status st = ab_snapshot_add_entry(&c->e, c->self.pos, c->self.pos, vm->b, depart_field, NULL, vm->diag);
  if (vm->late.on && vm->late.alloc == LATE_PENDING) vm->late.alloc = ab_trace_builder_last_alloc(vm->b);
  return st == AB_OK ? AB_OK : DEPART;
}

/* An entry of trace read: to the builder when the trace is the device's. */
static ab_status take_entry(svm_t *vm, cont_t *trace, cont_t *e) {
  if (vm->candidate == NULL && (vm->device < 0 || trace->index == (uint64_t)vm->device)) vm->candidate = trace;
  trace->seen++;
  return trace == vm->candidate ? add_entry(vm, e) : frames_kept(vm, e);
}

static ab_status read_entry(svm_t *vm, cont_t *trace, cont_t *e) {
  ab_status st = take_entry(vm, trace, e);
  e->placed = true;
  cont_free(vm, e); /* an entry is read once: nothing refers to it again */
  return st;
}

/* Note [A run of entries]
 * allocbench's own writer (pickle.h) appends a whole trace in one batch, so a million
 * entries would wait on the stack for their APPENDS. When a new entry is made in a trace's
 * batch, the entries before it in the batch are finished (a dict below the top of the stack
 * can change only through an opcode that reaches it, and each of those departs), so they are
 * read then and replaced by one value, a run, that stands for them until the APPENDS adds
 * their number to the trace. A run taken off the stack any other way departs. */
static ab_status read_run(svm_t *vm, cont_t *trace, size_t fl) {
  for (size_t i = fl; i < vm->n; i++) {
    const sv_t *v = &vm->stack[i];
    bool run = v->role == R_RUN && i == fl && v->c == trace;
    if (!run && !(v->c && v->role == R_ENTRY && !v->c->placed)) return AB_OK; /* not only entries: left as is */
  }
  uint64_t count = 0;
  size_t from = fl;
  if (vm->stack[fl].role == R_RUN) count = vm->stack[from++].v.u;
  for (size_t i = from; i < vm->n; i++) AB_TRY(read_entry(vm, trace, vm->stack[i].c));
  count += vm->n - from;
  vm->n = fl; /* containers only: no string bytes to pop */
  vm->stack[vm->n++] = (sv_t){.type = AB_PK_DICT, .role = R_RUN, .pos = vm->at, .v.u = count, .c = trace};
  if (vm->run_top < vm->n) vm->run_top = vm->n;
  return AB_OK;
}

/* Items [from, from + k) of the stack appended to list c. */
static ab_status place_items(svm_t *vm, cont_t *c, size_t from, size_t k) {
  if (c->role == R_FRAMES) return place_frames(vm, c, from, k);
  uint8_t want = item_role[c->role];
  for (size_t i = 0; i < k; i++) {
    const sv_t *v = &vm->stack[from + i];
    cont_t *it = v->c;
    if (v->role == R_RUN) {
      if (it != c) return DEPART;
      c->count += v->v.u;
      continue;
    }
    if (it == NULL || it->role != want || it->placed) return DEPART;
    if (want == R_TRACE && (it->parent != c || it->index != c->count)) return DEPART;
    if (want == R_ENTRY) {
      AB_TRY(read_entry(vm, c, it));
    } else {
      it->placed = true;
      AB_TRY(seq_add(&c->seq, &it->self));
    }
    c->count++;
    if (c->role == R_TRACE) c->seq.n = (uint32_t)(c->count > UINT32_MAX ? UINT32_MAX : c->count);
  }
  return AB_OK;
}

/* Pairs [from, from + 2k) of the stack set in dict c. */
static ab_status place_pairs(svm_t *vm, cont_t *c, size_t from, size_t k) {
  for (size_t i = 0; i < k; i++) {
    const sv_t *key = &vm->stack[from + 2 * i], *v = &vm->stack[from + 2 * i + 1];
    c->count++;
    uint8_t w = key->type == AB_PK_STR ? wanted[c->role][key->key] : 0;
    if (!w) continue;
    if (w == R_FRAMES) { /* Note [Frames as they are read] */
      AB_TRY(frames_set(vm, c, v));
      continue;
    }
    if (c->role == R_FRAME) {
      /* A container with a role placed elsewhere than where it was made; a frame fetched before. */
      if (v->c || c->fixed) return DEPART;
      frame_field(vm, c, key->key, v);
      continue;
    }
    if (c->role == R_ENTRY) { /* all its other keys are scalars' */
      AB_TRY(set_field(vm, &c->e, key->key, v));
      continue;
    }
    ab_pk_t pair[2] = {{.type = AB_PK_STR, .len = key->len, .pos = key->pos}, {0}};
    pair[0].v.s = key_names[key->key];
    if (w == W_SCALAR) {
      AB_TRY(keep_value(vm, v, &pair[1]));
    } else if (v->c == NULL && (v->type == AB_PK_LIST || v->type == AB_PK_DICT || v->type == AB_PK_TUPLE)) {
      return DEPART; /* a container read here, of which nothing was kept */
    } else if (v->c) {
      if (v->role == R_RUN || v->c->role != w || v->c->placed || v->c->parent != c) return DEPART;
      v->c->placed = true;
      pair[1] = v->c->self;
    } else {
      AB_TRY(keep_value(vm, v, &pair[1]));
    }
    /* The root's parts are read once each: a second one would replace what was read. */
    if (c->role == R_ROOT)
      for (uint32_t j = 0; j < c->seq.n; j += 2)
        if (c->seq.items[j].v.s == pair[0].v.s) return DEPART;
    AB_TRY(seq_add(&c->seq, &pair[0]));
    AB_TRY(seq_add(&c->seq, &pair[1]));
  }
  return AB_OK;
}

/* k values from the stack (items, or 2k for pairs) go into the container v. */
static ab_status place(svm_t *vm, const sv_t *target, size_t from, size_t k, bool single) {
  cont_t *c = target->c;
  if (target->role == R_RUN) return DEPART; /* entries already read, changed */
  /* Opaque: nothing kept; but a frame, a list of frames or a pool id fetched would change. */
  if (c == NULL) return target->where >= S_FRAME || is_pair(target) ? DEPART : AB_OK;
  if (c->self.type == AB_PK_LIST) AB_TRY(place_items(vm, c, from, k));
  else AB_TRY(place_pairs(vm, c, from, k / 2));
  c->may_take = !single && (c->self.type == AB_PK_LIST ? k : k / 2) == PICKLE_BATCH;
  return AB_OK;
}

/* ---- the memo (Note [Streaming a snapshot], 4) ---------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t len) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
  return h | 1; /* never 0, which the map reserves */
}

static ab_status add_val(svm_t *vm, const sv_t *v, uint32_t *word) {
  if (vm->nvals == vm->capvals) {
    size_t cap = vm->capvals ? vm->capvals * 2 : 256;
    sv_t *grown = realloc(vm->vals, cap * sizeof *grown);
    if (grown == NULL) return DEPART;
    vm->vals = grown;
    vm->capvals = cap;
  }
  if (vm->nvals >= W_TAGGED - M_VALS) return DEPART;
  vm->vals[vm->nvals] = *v;
  *word = (uint32_t)(M_VALS + vm->nvals++);
  return AB_OK;
}

/* The memo's word for a value. */
static ab_status memo_word(svm_t *vm, const sv_t *v, uint32_t *word) {
  switch ((ab_pk_type_t)v->type) {
    case AB_PK_LIST:
      if (v->c) *word = M_ROLE;
      else if (v->where == S_FRAMES) *word = (uint32_t)v->v.u;
      else if (is_pair(v)) return add_val(vm, v, word);
      else *word = M_LIST;
      return AB_OK;
    case AB_PK_DICT:
      if (v->c) *word = M_ROLE;
      else *word = v->where == S_FRAME ? W_MAKE(T_FRAME, v->v.u) : M_DICT;
      return AB_OK;
    case AB_PK_TUPLE:
      if (is_pair(v)) return add_val(vm, v, word);
      *word = M_TUPLE;
      return AB_OK;
    case AB_PK_BYTES: *word = M_BYTES; return AB_OK;
    case AB_PK_STR: {
      if (v->where == S_NONE) {
        *word = M_LONGSTR;
        return AB_OK;
      }
      const char *s = str_bytes(vm, v);
      uint64_t h = hash_bytes(s, v->len), idx;
      if (ab_map_get(&vm->interned, h, &idx)) {
        const sv_t *known = &vm->vals[idx];
        if (known->len == v->len && memcmp(known->v.s, s, v->len) == 0) {
          *word = (uint32_t)(M_VALS + idx);
          return AB_OK;
        }
      }
      sv_t kept = *v;
      kept.where = S_KEPT;
      kept.v.s = keep_bytes(&vm->kept, s, v->len);
      if (kept.v.s == NULL) return DEPART;
      kept.act = (uint8_t)(ab_trace_action_of(kept.v.s, kept.len) + 1); /* once per string kept, not per entry */
      AB_TRY(add_val(vm, &kept, word));
      if (!ab_map_get(&vm->interned, h, NULL) && ab_map_put(&vm->interned, h, *word - M_VALS) != AB_OK) return DEPART;
      return AB_OK;
    }
    default: return add_val(vm, v, word);
  }
}

static ab_status memo_put(svm_t *vm, uint64_t idx) {
  AB_TRY(need(vm, 1));
  /* No file of this length names such an index (pickle.c refuses past its length). */
  if (idx > vm->at) return DEPART;
  if (idx >= vm->capmemo) {
    size_t cap = vm->capmemo ? vm->capmemo : 1024;
    while (cap <= idx) cap *= 2;
    uint32_t *grown = realloc(vm->memo, cap * sizeof *grown);
    if (grown == NULL) return DEPART;
    memset(grown + vm->capmemo, 0, (cap - vm->capmemo) * sizeof *grown);
    vm->memo = grown;
    vm->capmemo = cap;
  }
  if (vm->memo[idx] == M_UNSET) vm->memo_count++;
  cont_t *c = vm->stack[vm->n - 1].c;
  if (c && (c->role == R_FRAME || c->role == R_FRAMES)) { /* Note [Frames as they are read], 2 */
    vm->memo[idx] = c->fixed ? c->fref : claim(vm, c, idx);
    return AB_OK;
  }
  return memo_word(vm, &vm->stack[vm->n - 1], &vm->memo[idx]);
}

static ab_status memo_get(svm_t *vm, uint64_t idx) {
  uint32_t w = idx < vm->capmemo ? vm->memo[idx] : M_UNSET;
  if (W_TAG(w) == T_PENDING) { /* a list interned late, or a frame or a list being read: fixed as it is now */
    if (vm->late.on && w == vm->late.mword) AB_TRY(late_flush(vm));
    else AB_TRY(fix_claimed(vm, w));
    w = vm->memo[idx];
    if (W_TAG(w) == T_PENDING) return DEPART; /* no container claims it: never so, kept safe */
  }
  /* Never stored; or shared, which only the tree reader follows. */
  if (w == M_UNSET || w == M_ROLE) return DEPART;
  sv_t *v = slot(vm);
  if (v == NULL) return DEPART;
  if (is_val(w)) {
    *v = vm->vals[w - M_VALS];
    return AB_OK;
  }
  if (w >= W_TAGGED) { /* a frame, or a list of them, read before */
    bool frame = W_TAG(w) == T_FRAME;
    sv_clear(v, frame ? AB_PK_DICT : AB_PK_LIST, vm->at);
    v->where = frame ? S_FRAME : S_FRAMES;
    v->v.u = frame ? W_NUM(w) : w;
    return AB_OK;
  }
  /* An opaque container, a bytes value or a long string: its type is all there is. */
  static const uint8_t types[M_VALS] = {[M_LIST] = AB_PK_LIST, [M_DICT] = AB_PK_DICT, [M_TUPLE] = AB_PK_TUPLE,
                                        [M_LONGSTR] = AB_PK_STR, [M_BYTES] = AB_PK_BYTES};
  *v = (sv_t){.type = types[w], .where = S_NONE, .pos = vm->at};
  return AB_OK;
}

/* A decimal line argument (PUT, GET): digits and a newline within 21 bytes (longer ones,
 * with leading zeros, depart). */
static ab_status line_number(svm_t *vm, uint64_t *out) {
  if ((size_t)(vm->end - vm->p) < 21) AB_TRY(more(vm, 21));
  size_t avail = (size_t)(vm->end - vm->p);
  const unsigned char *nl = memchr(vm->p, '\n', avail < 21 ? avail : 21);
  if (nl == NULL || nl == vm->p || nl - vm->p > 19) return DEPART;
  uint64_t v = 0;
  for (const unsigned char *d = vm->p; d < nl; d++) {
    if (*d < '0' || *d > '9') return DEPART;
    v = v * 10 + (uint64_t)(*d - '0');
  }
  vm->p = nl + 1;
  *out = v;
  return AB_OK;
}
/* ---- the machine -------------------------------------------------------------------------------- */

static ab_status pop_mark(svm_t *vm, size_t *from) {
  if (vm->nmarks == 0) return DEPART;
  *from = vm->marks[--vm->nmarks];
  return AB_OK;
}

/* LIST, TUPLE, DICT, TUPLE1-3: the items become an opaque container; two ints are kept (a
 * pool id, segment_pool_id). */
static ab_status collect(svm_t *vm, ab_pk_type_t type, size_t from) {
  size_t k = vm->n - from;
  if (type == AB_PK_DICT && k % 2) return DEPART;
  sv_t v = {.type = (uint8_t)type, .pos = vm->at};
  if (type != AB_PK_DICT && k == 2) { /* the stack holds the two items: not an empty one */
    const sv_t *it = &vm->stack[from];
    if (it[0].type == AB_PK_INT && it[0].width == AB_PK_INT64 && it[1].type == AB_PK_INT &&
        it[1].width == AB_PK_INT64) {
      if (it[0].v.i == (int32_t)it[0].v.i && it[1].v.i == (int32_t)it[1].v.i) {
        v.where = S_PAIR32;
        v.v.u = (uint64_t)(uint32_t)it[0].v.i | (uint64_t)(uint32_t)it[1].v.i << 32;
      } else {
        if (vm->npairs == vm->cappairs) {
          size_t cap = vm->cappairs ? vm->cappairs * 2 : 16;
          int64_t(*grown)[2] = realloc(vm->pairs, cap * sizeof *grown);
          if (grown == NULL) return DEPART;
          vm->pairs = grown;
          vm->cappairs = cap;
        }
        vm->pairs[vm->npairs][0] = it[0].v.i;
        vm->pairs[vm->npairs][1] = it[1].v.i;
        v.where = S_PAIR;
        v.v.u = vm->npairs++;
      }
    }
  }
  AB_TRY(drop_to(vm, from, false));
  sv_t *at = slot(vm);
  if (at == NULL) return DEPART;
  *at = v;
  return AB_OK;
}

/* Note [An entry's body at once]
 * Nearly every entry is written the same way: its dict, a MARK, then pairs of a key fetched
 * from the memo and a value (fetched; an int or None written in place; a short string written
 * afresh and memoised, as PyTorch's compile_context 'N/A' is in every entry; its frames, Note
 * [An entry's frames at once]), then SETITEMS. At the MARK after a new entry, the pairs are
 * read straight from the window and set in the entry, with the effect on the machine that
 * running the opcodes one by one would have (the stack and the marks as they were; the memo
 * ops run at the end; the entry's fields and count set), and no value pushed. At any other
 * opcode, or at the window's end, the entry's fields are cleared and the body is run opcode
 * by opcode from its MARK: the memo as it was (a string the memo keeps is kept once, read
 * again or not). */
/* A memo index at p (BINGET, LONG_BINGET) in *at, the word there in *w; false for another
 * opcode or past end. */
static inline bool fast_get(const svm_t *vm, const unsigned char **pp, const unsigned char *end, uint32_t *w,
                            uint64_t *at) {
  const unsigned char *p = *pp;
  uint64_t idx;
  if (*p == OP_BINGET && end - p >= 2) {
    idx = p[1];
    *pp = p + 2;
  } else if (*p == OP_LONG_BINGET && end - p >= 5) {
    idx = ab_pickle_le(p + 1, 4);
    *pp = p + 5;
  } else {
    return false;
  }
  *w = idx < vm->capmemo ? vm->memo[idx] : M_UNSET;
  *at = idx;
  return true;
}

/* Memo ops met in a body read at once wait for its end (Note [An entry's body at once]): at
 * most FAST_PUTS, each to an index the memo has not set, so that a fetch of one in the body
 * finds it unset and gives up, as running the opcodes would find what was put there. */
#define FAST_PUTS 4
typedef struct fast_put_s {
  uint64_t idx;
  uint32_t word; /* 0: the claim of the entry's list of frames (Note [Frames as they are read]) */
} fast_put_t;

typedef struct fast_puts_s {
  fast_put_t put[FAST_PUTS];
  unsigned n;
  bool claimed; /* a list of frames put: the entry holds its claim */
} fast_puts_t;

/* A memo op at *pp (MEMOIZE, BINPUT, LONG_BINPUT) putting word, if there is one: 1 when taken,
 * 0 when none is there, -1 to give up (an index the memo has set, or past its room, which the
 * machine grows, or past the bytes read, which departs). */
static inline int fast_memo_op(const svm_t *vm, const unsigned char **pp, const unsigned char *end, fast_puts_t *fp,
                               uint32_t word) {
  const unsigned char *p = *pp;
  uint64_t idx;
  if (*p == OP_MEMOIZE) {
    idx = vm->memo_count + fp->n; /* each waiting put counts: it sets an index unset */
    p++;
  } else if (*p == OP_BINPUT && end - p >= 2) {
    idx = p[1];
    p += 2;
  } else if (*p == OP_LONG_BINPUT && end - p >= 5) {
    idx = ab_pickle_le(p + 1, 4);
    p += 5;
  } else {
    return 0;
  }
  if (fp->n == FAST_PUTS || idx >= vm->capmemo || idx > vm->base + (uint64_t)(uintptr_t)*pp || vm->memo[idx] != M_UNSET)
    return -1;
  for (unsigned k = 0; k < fp->n; k++)
    if (fp->put[k].idx == idx) return -1;
  fp->put[fp->n++] = (fast_put_t){idx, word};
  *pp = p;
  return 1;
}

/* Note [An entry's frames at once]
 * An entry's frames, in the body read at once, are written one of two ways: a list read
 * before, fetched, or a new list, EMPTY_LIST with a memo op before or after it and its frames,
 * each fetched, in one batch (MARK ... APPENDS) or alone (APPEND). Both are read here, the
 * frames' local numbers into the entry (Note [Frames as they are read]), the list's memo op
 * waiting with the body's others; a frame written whole, a second batch or anything else
 * gives up, and the opcodes run one by one. */

/* A frame fetched at *pp, its local number into c; false for anything else. */
static inline bool fast_frame(const svm_t *vm, cont_t *c, const unsigned char **pp, const unsigned char *end) {
  uint32_t w;
  uint64_t idx;
  return fast_get(vm, pp, end, &w, &idx) && W_TAG(w) == T_FRAME && push_id(c, W_NUM(w)) == AB_OK;
}

/* The value under `frames` at *pp into entry c; false to give up. */
static bool fast_frames(svm_t *vm, cont_t *c, const unsigned char **pp, const unsigned char *end, fast_puts_t *fp) {
  const unsigned char *p = *pp;
  if (fp->claimed) return false; /* a second list put in the memo */
  c->nids = 0;
  if (*p == OP_BINGET || *p == OP_LONG_BINGET) { /* a list read before */
    uint32_t w;
    uint64_t idx;
    if (!fast_get(vm, &p, end, &w, &idx)) return false;
    if (vm->late.on && w == vm->late.mword) { /* the last alloc's: interned now (work done, not undone) */
      if (late_flush(vm) != AB_OK) return false;
      w = vm->memo[idx];
    }
    if (W_TAG(w) != T_STACK && W_TAG(w) != T_LOCAL) return false;
    c->fkind = F_REF;
    c->fref = w;
    *pp = p;
    return true;
  }
  if (*p++ != OP_EMPTY_LIST) return false;
  c->fkind = F_IDS;
  unsigned puts = fp->n;
  if (end - p < 1 || fast_memo_op(vm, &p, end, fp, 0) < 0 || end - p < 1) return false;
  if (*p == OP_MARK) {
    for (p++;;) {
      if (end - p < 6) return false; /* a frame's five bytes at most, and APPENDS */
      if (*p == OP_APPENDS) break;
      if (!fast_frame(vm, c, &p, end)) return false;
    }
    p++;
    if (c->nids >= PICKLE_BATCH) return false; /* another batch may follow */
  } else if (*p == OP_BINGET || *p == OP_LONG_BINGET) {
    if (!fast_frame(vm, c, &p, end) || end - p < 1 || *p != OP_APPEND) return false;
    p++;
  }
  if (fp->n == puts && (end - p < 1 || fast_memo_op(vm, &p, end, fp, 0) < 0)) return false;
  fp->claimed = fp->n > puts;
  *pp = p;
  return true;
}

/* An int written in place as field f, as set_field sets it. */
static inline void fast_int(ab_snap_entry_t *e, unsigned f, uint8_t width, uint64_t bits) {
  if (f >= AB_SNAP_POOL) { /* the pool id and the action are no ints */
    e->kind[f] = AB_SNAP_BAD;
    return;
  }
  e->kind[f] = width == AB_PK_BIGINT ? AB_SNAP_BAD : width == AB_PK_UINT64 ? AB_SNAP_UINT64 : AB_SNAP_INT64;
  e->u[f] = bits;
}

/* A pair's most bytes but for a LONG1's value: a LONG_BINGET key and a LONG_BINGET or BININT
 * value, five bytes each. Farther than that from the window's end (and a SETITEMS), a pair's
 * bytes are in the window without a check for each. */
#define PAIR_BYTES 10

/* True when the body was read (Note [An entry's body at once]). */
static bool fast_entry(svm_t *vm) {
  cont_t *c = vm->stack[vm->n - 1].c;
  if (c == NULL || c->placed || c->count || (vm->nmarks && vm->marks[vm->nmarks - 1] >= vm->n)) return false;
  const unsigned char *p = vm->p, *end = vm->end;
  ab_snap_entry_t *e = &c->e;
  uint64_t pairs = 0, idx;
  fast_puts_t fp;
  fp.n = 0;
  fp.claimed = false;
  /* count 0: nothing was set in the entry, so that giving up leaves it as it was */
  for (;;) {
    if (end - p <= PAIR_BYTES) goto give_up; /* near the window's end: opcode by opcode */
    if (*p == OP_SETITEMS) break;
    uint32_t w;
    if (!fast_get(vm, &p, end, &w, &idx) || !is_val(w)) goto give_up;
    unsigned f = vm->vals[w - M_VALS].field; /* the key's field + 1; 0: a key not read */
    uint8_t key = vm->vals[w - M_VALS].key;
    if (key == K_frames) {
      if (!fast_frames(vm, c, &p, end, &fp)) goto give_up;
      pairs++;
      continue;
    }
    switch (*p) {
      case OP_BINGET:
      case OP_LONG_BINGET:
        if (!fast_get(vm, &p, end, &w, &idx) || !is_val(w)) goto give_up; /* unset, shared, nothing kept */
        if (f && set_field(vm, e, key, &vm->vals[w - M_VALS]) != AB_OK) goto give_up;
        break;
      case OP_SHORT_BINUNICODE: { /* written afresh (PyTorch's 'N/A' each time), and memoised */
        const unsigned char *q = p + 2 + p[1];
        if (end - q < 6) goto give_up; /* the memo op's five bytes at most, and the next opcode */
        sv_t v;
        sv_clear(&v, AB_PK_STR, vm->base + (uint64_t)(uintptr_t)p);
        v.len = p[1];
        v.v.s = (const char *)p + 2; /* S_KEPT for memo_word, which copies it when it keeps it */
        v.key = key_of(v.v.s, v.len);
        v.field = wanted[R_ENTRY][v.key] == W_SCALAR ? (uint8_t)(entry_field[v.key] + 1) : 0;
        if (memo_word(vm, &v, &w) != AB_OK || !is_val(w) || fast_memo_op(vm, &q, end, &fp, w) != 1) goto give_up;
        if (f && set_field(vm, e, key, &vm->vals[w - M_VALS]) != AB_OK) goto give_up;
        p = q;
        break;
      }
      case OP_BININT1:
        if (f) fast_int(e, f - 1, AB_PK_INT64, p[1]);
        p += 2;
        break;
      case OP_BININT2:
        if (f) fast_int(e, f - 1, AB_PK_INT64, ab_pickle_le(p + 1, 2));
        p += 3;
        break;
      case OP_BININT:
        if (f) fast_int(e, f - 1, AB_PK_INT64, (uint64_t)(int64_t)(int32_t)(uint32_t)ab_pickle_le(p + 1, 4));
        p += 5;
        break;
      case OP_LONG1: {
        if ((size_t)(end - p - 2) < p[1]) goto give_up;
        if (f) {
          uint8_t width;
          uint64_t bits;
          ab_pickle_long(p + 2, p[1], &width, &bits);
          fast_int(e, f - 1, width, bits);
        }
        p += 2 + p[1];
        break;
      }
      case OP_NONE:
        if (f) e->kind[f - 1] = AB_SNAP_BAD;
        p++;
        break;
      default: goto give_up;
    }
    pairs++;
  }
  c->count = pairs;
  c->may_take = pairs == PICKLE_BATCH; /* as SETITEMS leaves it */
  vm->p = p + 1;
  for (unsigned k = 0; k < fp.n; k++) { /* the memo ops, as memo_put runs them; each sets an index unset */
    vm->memo_count++;
    vm->memo[fp.put[k].idx] = fp.put[k].word ? fp.put[k].word : claim(vm, c, fp.put[k].idx);
  }
  return true;
give_up: /* the opcodes run one by one, setting the same fields again */
  memset(e, 0, sizeof *e);
  c->fkind = F_ABSENT;
  c->nids = 0;
  return false;
}

/* Note [Entries in a row]
 * In a trace's batch, entry follows entry: EMPTY_DICT, MARK, the body, SETITEMS, then the
 * next one's EMPTY_DICT. When an entry's body was read at once
 * (Note [An entry's body at once]) and the next entry begins right after it in the window, what make() would do there
 * is done without its search for the place: the entry read goes to the builder and joins the
 * run below it (Note [A run of entries]), and its container becomes the next entry, made at
 * that EMPTY_DICT, whose body is read at once in turn. The loop stops at anything else, with
 * the machine as running the opcodes one by one leaves it; a next entry whose body cannot be
 * read at once stays made, its MARK still to run. */
static ab_status entries_in_a_row(svm_t *vm) {
  for (;;) {
    const unsigned char *p = vm->p;
    size_t fl = floor_height(vm), n = vm->n;
    if (vm->end - p < 2 || p[0] != OP_EMPTY_DICT || p[1] != OP_MARK) return AB_OK;
    /* The entry on top of its trace's batch, alone or above the run of the ones before. */
    bool run = n == fl + 2 && vm->stack[fl].role == R_RUN;
    if (vm->nmarks == 0 || fl == 0 || !(n == fl + 1 || run)) return AB_OK;
    const sv_t *t = &vm->stack[fl - 1];
    cont_t *trace = t->c, *c = vm->stack[n - 1].c;
    if (trace == NULL || t->role != R_TRACE || (run && vm->stack[fl].c != trace)) return AB_OK;
    uint64_t index = trace->count + (n - fl), count = (run ? vm->stack[fl].v.u : 0) + 1;
    vm->at = offset(vm);
    AB_TRY(take_entry(vm, trace, c));
    sv_t *v = &vm->stack[fl];
    sv_clear(v, AB_PK_DICT, vm->at);
    v->role = R_RUN;
    v->v.u = count;
    v->c = trace;
    if (vm->run_top < fl + 1) vm->run_top = fl + 1;
    cont_reset(vm, c, R_ENTRY, AB_PK_DICT);
    c->parent = trace;
    c->index = index;
    v = &vm->stack[fl + 1];
    sv_clear(v, AB_PK_DICT, vm->at);
    v->role = R_ENTRY;
    v->c = c;
    vm->n = fl + 2;
    vm->p = p + 2;
    if (!fast_entry(vm)) {
      vm->p = p + 1; /* the MARK, run as an opcode */
      return AB_OK;
    }
  }
}

/* Runs one opcode; *done at STOP. */
static ab_status step(svm_t *vm, bool *done) {
  NEED(1);
  vm->at = offset(vm);
  unsigned op = *vm->p++;
  const unsigned char *q;
#define ARG(nbytes)              \
  do {                           \
    NEED(nbytes);                \
    q = vm->p;                   \
    vm->p += (nbytes);           \
  } while (0)
  switch (op) {
    case OP_BINGET: ARG(1); return memo_get(vm, q[0]);
    case OP_LONG_BINGET: ARG(4); return memo_get(vm, ab_pickle_le(q, 4));
    case OP_BININT: ARG(4); return push_scalar(vm, AB_PK_INT, AB_PK_INT64, (uint64_t)(int64_t)(int32_t)(uint32_t)ab_pickle_le(q, 4));
    case OP_BININT1: ARG(1); return push_scalar(vm, AB_PK_INT, AB_PK_INT64, q[0]);
    case OP_BININT2: ARG(2); return push_scalar(vm, AB_PK_INT, AB_PK_INT64, ab_pickle_le(q, 2));
    case OP_LONG1: ARG(1); return push_long(vm, q[0]);
    case OP_PROTO:
      ARG(1);
      return q[0] >= 2 && q[0] <= 5 ? AB_OK : DEPART;
    case OP_FRAME: {
      ARG(8);
      uint64_t len = ab_pickle_le(q, 8), end = offset(vm) + len;
      if (end < len) return DEPART;
      if (end > vm->frame_need) vm->frame_need = end;
      return AB_OK;
    }
    case OP_STOP:
      AB_TRY(need(vm, 1));
      if (vm->root == NULL || vm->stack[vm->n - 1].c != vm->root) return DEPART;
      /* Bytes after it (two snapshots joined) are the tree reader's to refuse, by position. */
      if (vm->p == vm->end) AB_TRY(more(vm, 1));
      if (vm->p < vm->end) return DEPART;
      *done = true;
      return AB_OK;
    case OP_MARK:
      if (vm->n && vm->stack[vm->n - 1].role == R_ENTRY && fast_entry(vm)) return entries_in_a_row(vm);
      if (vm->nmarks == vm->capmarks) {
        size_t cap = vm->capmarks ? vm->capmarks * 2 : 64;
        size_t *grown = realloc(vm->marks, cap * sizeof *grown);
        if (grown == NULL) return DEPART;
        vm->marks = grown;
        vm->capmarks = cap;
      }
      vm->marks[vm->nmarks++] = vm->n;
      return AB_OK;
    case OP_POP:
      if (vm->n > floor_height(vm)) return drop_to(vm, vm->n - 1, false);
      return vm->nmarks ? (vm->nmarks--, AB_OK) : DEPART;
    case OP_POP_MARK: {
      size_t from = 0;
      AB_TRY(pop_mark(vm, &from));
      return drop_to(vm, from, false);
    }
    case OP_NONE: return push_scalar(vm, AB_PK_NONE, 0, 0);
    case OP_NEWTRUE:
    case OP_NEWFALSE: return push_scalar(vm, AB_PK_BOOL, 0, op == OP_NEWTRUE);
    case OP_LONG4: {
      ARG(4);
      int32_t n = (int32_t)(uint32_t)ab_pickle_le(q, 4);
      return n < 0 ? DEPART : push_long(vm, (size_t)n);
    }
    case OP_BINFLOAT: {
      ARG(8);
      union { double f; uint64_t u; } bits = {.f = ab_pickle_float(q)};
      return push_scalar(vm, AB_PK_FLOAT, 0, bits.u);
    }
    case OP_SHORT_BINUNICODE: ARG(1); return push_text(vm, AB_PK_STR, q[0]);
    case OP_BINUNICODE: ARG(4); return push_text(vm, AB_PK_STR, ab_pickle_le(q, 4));
    case OP_BINUNICODE8: ARG(8); return push_text(vm, AB_PK_STR, ab_pickle_le(q, 8));
    case OP_SHORT_BINBYTES: ARG(1); return push_text(vm, AB_PK_BYTES, q[0]);
    case OP_BINBYTES: ARG(4); return push_text(vm, AB_PK_BYTES, ab_pickle_le(q, 4));
    case OP_BINBYTES8:
    case OP_BYTEARRAY8: ARG(8); return push_text(vm, AB_PK_BYTES, ab_pickle_le(q, 8));
    case OP_EMPTY_LIST: return make(vm, AB_PK_LIST);
    case OP_EMPTY_DICT: return make(vm, AB_PK_DICT);
    case OP_EMPTY_TUPLE: return collect(vm, AB_PK_TUPLE, vm->n);
    case OP_LIST:
    case OP_TUPLE:
    case OP_DICT: {
      size_t from = 0;
      AB_TRY(pop_mark(vm, &from));
      return collect(vm, op == OP_LIST ? AB_PK_LIST : op == OP_TUPLE ? AB_PK_TUPLE : AB_PK_DICT, from);
    }
    case OP_TUPLE1:
    case OP_TUPLE2:
    case OP_TUPLE3: {
      size_t k = op - OP_TUPLE1 + 1u;
      AB_TRY(need(vm, k));
      return collect(vm, AB_PK_TUPLE, vm->n - k);
    }
    case OP_APPEND:
    case OP_SETITEM: {
      size_t k = op == OP_APPEND ? 1 : 2;
      AB_TRY(need(vm, k + 1));
      const sv_t *target = &vm->stack[vm->n - k - 1];
      if (target->type != (op == OP_APPEND ? AB_PK_LIST : AB_PK_DICT)) return DEPART;
      AB_TRY(place(vm, target, vm->n - k, k, true));
      return drop_to(vm, vm->n - k, true);
    }
    case OP_APPENDS:
    case OP_SETITEMS: {
      size_t from = 0;
      AB_TRY(pop_mark(vm, &from));
      if (from <= floor_height(vm)) return DEPART;
      const sv_t *target = &vm->stack[from - 1];
      size_t k = vm->n - from;
      if (target->type != (op == OP_APPENDS ? AB_PK_LIST : AB_PK_DICT)) return DEPART;
      if (op == OP_SETITEMS && k % 2) return DEPART;
      AB_TRY(place(vm, target, from, k, false));
      return drop_to(vm, from, true);
    }
    case OP_MEMOIZE: return memo_put(vm, vm->memo_count);
    case OP_BINPUT: ARG(1); return memo_put(vm, q[0]);
    case OP_LONG_BINPUT: ARG(4); return memo_put(vm, ab_pickle_le(q, 4));
    case OP_PUT:
    case OP_GET: {
      uint64_t idx = 0;
      AB_TRY(line_number(vm, &idx));
      return op == OP_PUT ? memo_put(vm, idx) : memo_get(vm, idx);
    }
    default: return DEPART; /* what pickle.c refuses, and DUP, which it does not take either */
  }
#undef ARG
}

/* Reads to the end of the stream (the inflater's checks, the cap), where the tree reader
 * would read. */
static ab_status drain(svm_t *vm) {
  ab_instream_consume(vm->in, (size_t)(vm->p - vm->win));
  vm->win = vm->p = vm->end = NULL;
  for (;;) {
    const unsigned char *data = NULL;
    size_t avail = 0;
    AB_TRY(ab_instream_window(vm->in, 1, &data, &avail, vm->diag));
    if (avail == 0) return AB_OK;
    ab_instream_consume(vm->in, avail);
  }
}
/* The checks at the end: the candidate trace is the chosen device's (Note [Streaming a snapshot], 3). */
static ab_status finish(svm_t *vm) {
  AB_TRY(drain(vm));
  uint64_t total = ab_instream_offset(vm->in);
  /* Past 4 GiB a container could pass 2^32 items, which the tree reader refuses. */
  if (vm->frame_need > total || total > (4ULL << 30)) return DEPART;
  if (ab_snapshot_read_outline(vm->path, &vm->root->self, vm->device, vm->b, vm->diag) != AB_OK) return DEPART;
  const ab_pk_t *traces = ab_pk_get(&vm->root->self, "device_traces");
  int dev = vm->b->info.device;
  size_t ndev = ab_pk_len(traces);
  if (vm->candidate == NULL) return AB_OK; /* no entries anywhere: none were read */
  if (vm->candidate->seen != vm->candidate->count || dev < 0 || (size_t)dev >= ndev || traces->v.seq->items[dev].v.seq != &vm->candidate->seq) return DEPART;
  return AB_OK;
}

static void svm_free(svm_t *vm) {
  for (cont_t *lists[2] = {vm->live, vm->spare}, **l = lists; l < lists + 2; l++)
    for (cont_t *c = *l, *next; c; c = next) {
      next = c->next;
      free(c->seq.items);
      free(c->ids);
      free(c);
    }
  ab_stacks_free(&vm->local);
  ab_map_free(&vm->text_of);
  ab_map_free(&vm->claims);
  free(vm->global_frame);
  free(vm->global_stack);
  free(vm->gids);
  free(vm->late.ids);
  free(vm->stack);
  free(vm->marks);
  free(vm->strs);
  free(vm->memo);
  free(vm->vals);
  free(vm->pairs);
  ab_map_free(&vm->interned);
  free_chunks(vm->kept);
}

/* About the fewest bytes of pickle an entry takes as PyTorch and allocbench write them (a dict
 * of action, addr, size and stream, keys from the memo: allocbench's frameless entries take 47,
 * PyTorch's more), for the entries a file may hold: the builder sizes its events from it at
 * once (trace_builder.c, Note [Records to events in one pass]). */
#define ENTRY_MIN_BYTES 40

static ab_status stream(const char *path, ab_instream_t *in, int device, ab_trace_builder_t *b, ab_diag_t *diag) {
  init_wanted();
  ab_trace_builder_reserve(b, ab_instream_size_hint(in) / ENTRY_MIN_BYTES);
  svm_t vm;
  memset(&vm, 0, sizeof vm);
  vm.path = path;
  vm.in = in;
  vm.device = device;
  vm.b = b;
  vm.diag = diag;
  ab_map_init(&vm.interned);
  ab_map_init(&vm.text_of);
  ab_map_init(&vm.claims);
  ab_stacks_init(&vm.local);
  ab_status st = AB_OK;
  bool done = false;
  while (st == AB_OK && !done) st = step(&vm, &done);
  if (st == AB_OK) st = late_flush(&vm);
  if (st == AB_OK) st = finish(&vm);
  svm_free(&vm);
  return st;
}

ab_status ab_snapshot_read_stream(const char *path, ab_instream_t *in, int device, ab_trace_builder_t *b,
                                  ab_diag_t *diag) {
  ab_diag_t quiet = {""};
  if (stream(path, in, device, b, &quiet) == AB_OK) return AB_OK;
  /* Departed: the tree reader reads it all, from a fresh builder. */
  ab_events_t *es = b->es;
  bool byte_pos = b->byte_pos;
  ab_trace_builder_discard(b);
  ab_trace_builder_init(b, es, path, byte_pos);
  b->info.reread = true;
  es->settings[0] = '\0';
  AB_TRY(ab_instream_rewind(in, diag));
  ab_input_t whole;
  AB_TRY(ab_instream_read_all(in, &whole, diag));
  ab_status st = ab_snapshot_read(path, &whole, device, b, diag);
  ab_input_free(&whole);
  return st;
}
