/* stacks.h: the call stacks a trace recorded with its allocations, interned.
 * Layer: events (workloads/events/), beside the event stream it annotates.
 *
 * Note [Stacks of a trace]
 * PyTorch's snapshot (with _record_memory_history(context="alloc")) gives every entry the
 * frames of the Python (and, with stacks="all", C++) code that made the request, innermost
 * first; a training loop makes the same requests from the same lines each step, so a
 * snapshot of a million entries names a few thousand distinct stacks. A trace keeps each
 * string once, each frame (file, line, function) once and each stack once, and each
 * allocation the number of its stack: the whole costs a few bytes per allocation, whatever
 * the depth. Stack 0 is "none recorded" (a frameless snapshot, a CSV trace, a generator).
 *
 * Errors: a host allocation failure is sticky (failed), as the event stream's is; the
 * builder checks it once. Not thread-safe while built; read-only afterwards.
 */
#ifndef AB_STACKS_H
#define AB_STACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ab_frame_s {
  uint32_t file; /* offset of the file name in ab_stacks_t.text */
  uint32_t name; /* offset of the function's name */
  uint32_t line; /* 0: unknown */
} ab_frame_t;

/* An open-addressing table of indices, for interning (stacks.c). */
typedef struct ab_intern_s {
  uint64_t *slot; /* the key's home << 32 | its index + 1; 0: empty */
  size_t cap;     /* a power of two, or 0 */
  size_t n;
} ab_intern_t;

typedef struct ab_stacks_s {
  char *text; /* the strings, each NUL-terminated, each once */
  size_t ntext, captext;
  ab_frame_t *frame; /* the frames, each once */
  uint32_t nframes, capframes;
  uint32_t *frames_of; /* the frames of every stack, innermost first, one stack after another */
  size_t nframes_of, capframes_of;
  uint32_t *start; /* stack k's frames: frames_of[start[k] .. start[k + 1]); start[0] = 0 */
  uint32_t nstacks, capstacks; /* stacks, the empty stack 0 included */
  uint32_t *stack_of; /* per allocation id: its stack (0: none) */
  uint32_t capids;
  ab_intern_t strings, frames, stacks; /* while building */
  bool failed;                         /* a host allocation failed */
} ab_stacks_t;

void ab_stacks_init(ab_stacks_t *st);
void ab_stacks_free(ab_stacks_t *st);
/* Host bytes held. */
uint64_t ab_stacks_bytes(const ab_stacks_t *st);

/* The number of the frame (file, name, line), interned; strings of len bytes (not
 * NUL-terminated; a NUL inside cuts them there). The file is interned before the name, so
 * that two readers interning the same frames in the same order number strings alike.
 * UINT32_MAX when a host allocation failed. */
uint32_t ab_stacks_frame(ab_stacks_t *st, const char *file, size_t file_len, const char *name, size_t name_len,
                         uint32_t line);
/* The two steps of ab_stacks_frame, for a reader that meets each string once and many frames
 * naming it: the offset of a string in text, interned (UINT32_MAX on failure), and the
 * number of the frame of strings already interned (UINT32_MAX on failure). */
uint32_t ab_stacks_string(ab_stacks_t *st, const char *s, size_t len);
uint32_t ab_stacks_frame_at(ab_stacks_t *st, uint32_t file, uint32_t name, uint32_t line);
/* The number (>= 1) of the stack of n frames, innermost first, interned; 0 for n == 0 or
 * when a host allocation failed. */
uint32_t ab_stacks_intern(ab_stacks_t *st, const uint32_t *frames, uint32_t n);
/* Prefetches where ab_stacks_intern of the same frames will look first: a caller that knows a
 * stack a while before it interns it hides the cache miss of a large table. */
void ab_stacks_prefetch(const ab_stacks_t *st, const uint32_t *frames, uint32_t n);
/* Records that allocation id was made by stack. */
void ab_stacks_set(ab_stacks_t *st, uint32_t id, uint32_t stack);
/* Numbers every allocation n higher, the first n with no stack: for a builder that learns at
 * the end of n allocations to be numbered before all others (a trace's blocks that existed
 * before it). */
void ab_stacks_shift_ids(ab_stacks_t *st, uint32_t n);
/* Gives back what building left over and drops the intern tables. */
void ab_stacks_finish(ab_stacks_t *st);
/* Whether a and b (either may be NULL: no stacks) hold the same frames under the same
 * numbers (compared by their strings and lines), the same stacks, and the same stack for every
 * allocation; when not, the first difference into why. */
bool ab_stacks_same(const ab_stacks_t *a, const ab_stacks_t *b, char *why, size_t size);

/* The stack of allocation id; 0: none recorded. */
static inline uint32_t ab_stacks_of(const ab_stacks_t *st, uint32_t id) {
  return st && id < st->capids ? st->stack_of[id] : 0;
}
/* The frames of stack k (innermost first) into *frames; their number. */
static inline uint32_t ab_stacks_frames(const ab_stacks_t *st, uint32_t k, const uint32_t **frames) {
  if (st == NULL || k == 0 || k >= st->nstacks) return 0;
  *frames = st->frames_of + st->start[k];
  return st->start[k + 1] - st->start[k];
}
static inline const char *ab_stacks_text(const ab_stacks_t *st, uint32_t off) { return st->text + off; }

#endif
