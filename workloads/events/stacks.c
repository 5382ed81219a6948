/* stacks.c: interned call stacks (stacks.h, Note [Stacks of a trace]). */
#include "events/stacks.h"

#include <stdlib.h>
#include <string.h>

void ab_stacks_init(ab_stacks_t *st) { memset(st, 0, sizeof *st); }

static void intern_free(ab_intern_t *t) {
  free(t->slot);
  memset(t, 0, sizeof *t);
}

void ab_stacks_free(ab_stacks_t *st) {
  free(st->text);
  free(st->frame);
  free(st->frames_of);
  free(st->start);
  free(st->stack_of);
  intern_free(&st->strings);
  intern_free(&st->frames);
  intern_free(&st->stacks);
  ab_stacks_init(st);
}

uint64_t ab_stacks_bytes(const ab_stacks_t *st) {
  return st->captext + (uint64_t)st->capframes * sizeof *st->frame + st->capframes_of * sizeof *st->frames_of +
         ((uint64_t)st->capstacks + 1) * sizeof *st->start + (uint64_t)st->capids * sizeof *st->stack_of +
         (st->strings.cap + st->frames.cap + st->stacks.cap) * sizeof(uint32_t);
}

/* Grows *p (of *cap items of size each) to hold need items; false when the host has no room. */
static bool reserve(void **p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return true;
  size_t c = *cap ? *cap : 16;
  while (c < need) c *= 2;
  void *grown = realloc(*p, c * size);
  if (grown == NULL) return false;
  *p = grown;
  *cap = c;
  return true;
}

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ULL; }

/* ---- the intern tables: indices, found by hash and compared by the caller's equal --------- */

typedef bool (*equal_fn)(const ab_stacks_t *st, uint32_t index, const void *key);

/* The index of key in t, or UINT32_MAX with *slot where it would go. */
static uint32_t intern_find(const ab_stacks_t *st, const ab_intern_t *t, uint64_t hash, const void *key, equal_fn equal,
                            size_t *slot) {
  size_t s = (size_t)(hash * 0x9E3779B97F4A7C15ULL >> 32) & (t->cap - 1);
  for (; t->slot[s]; s = (s + 1) & (t->cap - 1))
    if (equal(st, t->slot[s] - 1, key)) return t->slot[s] - 1;
  *slot = s;
  return UINT32_MAX;
}

/* Makes room for one more index (load at most 1/2); rehash gives each present index's hash. */
static bool intern_room(ab_stacks_t *st, ab_intern_t *t, uint64_t (*rehash)(const ab_stacks_t *, uint32_t)) {
  if ((t->n + 1) * 2 <= t->cap) return true;
  size_t cap = t->cap ? t->cap * 2 : 256;
  uint32_t *slot = calloc(cap, sizeof *slot);
  if (slot == NULL) return false;
  for (size_t i = 0; i < t->cap; i++) {
    if (t->slot[i] == 0) continue;
    size_t s = (size_t)(rehash(st, t->slot[i] - 1) * 0x9E3779B97F4A7C15ULL >> 32) & (cap - 1);
    while (slot[s]) s = (s + 1) & (cap - 1);
    slot[s] = t->slot[i];
  }
  free(t->slot);
  t->slot = slot;
  t->cap = cap;
  return true;
}

/* ---- strings ------------------------------------------------------------------------------- */

typedef struct text_key_s {
  const char *s;
  size_t len;
} text_key_t;

static uint64_t hash_text(const char *s, size_t len) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < len; i++) h = mix(h, (unsigned char)s[i]);
  return h;
}

static uint64_t rehash_text(const ab_stacks_t *st, uint32_t off) {
  const char *s = st->text + off;
  return hash_text(s, strlen(s));
}

static bool equal_text(const ab_stacks_t *st, uint32_t off, const void *key) {
  const text_key_t *k = key;
  return strncmp(st->text + off, k->s, k->len) == 0 && st->text[off + k->len] == '\0';
}

/* The offset of the string, interned; UINT32_MAX on failure. A NUL inside is cut there. */
static uint32_t intern_text(ab_stacks_t *st, const char *s, size_t len) {
  const char *nul = memchr(s, '\0', len);
  if (nul) len = (size_t)(nul - s);
  if (st->ntext + len + 1 > UINT32_MAX || !intern_room(st, &st->strings, rehash_text)) return st->failed = true, UINT32_MAX;
  text_key_t k = {s, len};
  size_t slot = 0;
  uint32_t found = st->strings.cap ? intern_find(st, &st->strings, hash_text(s, len), &k, equal_text, &slot) : UINT32_MAX;
  if (found != UINT32_MAX) return found;
  if (!reserve((void **)&st->text, &st->captext, st->ntext + len + 1, 1)) return st->failed = true, UINT32_MAX;
  uint32_t off = (uint32_t)st->ntext;
  memcpy(st->text + off, s, len);
  st->text[off + len] = '\0';
  st->ntext += len + 1;
  st->strings.slot[slot] = off + 1;
  st->strings.n++;
  return off;
}

/* ---- frames -------------------------------------------------------------------------------- */

static uint64_t hash_frame(const ab_frame_t *f) { return mix(mix(mix(0xcbf29ce484222325ULL, f->file), f->name), f->line); }
static uint64_t rehash_frame(const ab_stacks_t *st, uint32_t i) { return hash_frame(&st->frame[i]); }
static bool equal_frame(const ab_stacks_t *st, uint32_t i, const void *key) {
  const ab_frame_t *a = &st->frame[i], *b = key;
  return a->file == b->file && a->name == b->name && a->line == b->line;
}

uint32_t ab_stacks_frame(ab_stacks_t *st, const char *file, size_t file_len, const char *name, size_t name_len,
                         uint32_t line) {
  if (st->failed) return UINT32_MAX;
  ab_frame_t f = {intern_text(st, file, file_len), intern_text(st, name, name_len), line};
  if (st->failed || !intern_room(st, &st->frames, rehash_frame)) return st->failed = true, UINT32_MAX;
  size_t slot = 0;
  uint32_t found = intern_find(st, &st->frames, hash_frame(&f), &f, equal_frame, &slot);
  if (found != UINT32_MAX) return found;
  size_t cap = st->capframes;
  if (st->nframes == UINT32_MAX - 1 || !reserve((void **)&st->frame, &cap, (size_t)st->nframes + 1, sizeof f))
    return st->failed = true, UINT32_MAX;
  st->capframes = (uint32_t)cap;
  st->frame[st->nframes] = f;
  st->frames.slot[slot] = st->nframes + 1;
  st->frames.n++;
  return st->nframes++;
}

/* ---- stacks -------------------------------------------------------------------------------- */

typedef struct stack_key_s {
  const uint32_t *frames;
  uint32_t n;
} stack_key_t;

static uint64_t hash_stack(const uint32_t *frames, uint32_t n) {
  uint64_t h = mix(0xcbf29ce484222325ULL, n);
  for (uint32_t i = 0; i < n; i++) h = mix(h, frames[i]);
  return h;
}

static uint64_t rehash_stack(const ab_stacks_t *st, uint32_t k) {
  return hash_stack(st->frames_of + st->start[k], st->start[k + 1] - st->start[k]);
}

static bool equal_stack(const ab_stacks_t *st, uint32_t k, const void *key) {
  const stack_key_t *s = key;
  return st->start[k + 1] - st->start[k] == s->n && memcmp(st->frames_of + st->start[k], s->frames, s->n * sizeof *s->frames) == 0;
}

uint32_t ab_stacks_intern(ab_stacks_t *st, const uint32_t *frames, uint32_t n) {
  if (st->failed || n == 0) return 0;
  if (st->nstacks == 0) { /* stack 0: the empty stack, "none recorded" */
    size_t cap = 0;
    if (!reserve((void **)&st->start, &cap, 2, sizeof *st->start)) return st->failed = true, 0;
    st->capstacks = (uint32_t)cap - 1;
    st->start[0] = st->start[1] = 0;
    st->nstacks = 1;
  }
  if (!intern_room(st, &st->stacks, rehash_stack)) return st->failed = true, 0;
  stack_key_t key = {frames, n};
  size_t slot = 0;
  uint32_t found = intern_find(st, &st->stacks, hash_stack(frames, n), &key, equal_stack, &slot);
  if (found != UINT32_MAX) return found;
  size_t capstart = (size_t)st->capstacks + 1;
  if (st->nframes_of + n > UINT32_MAX || st->nstacks == UINT32_MAX - 1 ||
      !reserve((void **)&st->frames_of, &st->capframes_of, st->nframes_of + n, sizeof *st->frames_of) ||
      !reserve((void **)&st->start, &capstart, (size_t)st->nstacks + 2, sizeof *st->start))
    return st->failed = true, 0;
  st->capstacks = (uint32_t)capstart - 1;
  memcpy(st->frames_of + st->nframes_of, frames, n * sizeof *frames);
  st->nframes_of += n;
  uint32_t k = st->nstacks++;
  st->start[k + 1] = (uint32_t)st->nframes_of;
  /* The table holds stack numbers; stack 0 is never in it. */
  st->stacks.slot[slot] = k + 1;
  st->stacks.n++;
  return k;
}

void ab_stacks_set(ab_stacks_t *st, uint32_t id, uint32_t stack) {
  if (st->failed || stack == 0) return;
  if (id >= st->capids) {
    size_t cap = st->capids, old = st->capids;
    if (id == UINT32_MAX || !reserve((void **)&st->stack_of, &cap, (size_t)id + 1, sizeof *st->stack_of) || cap > UINT32_MAX) {
      st->failed = true;
      return;
    }
    memset(st->stack_of + old, 0, (cap - old) * sizeof *st->stack_of);
    st->capids = (uint32_t)cap;
  }
  st->stack_of[id] = stack;
}

void ab_stacks_finish(ab_stacks_t *st) {
  intern_free(&st->strings);
  intern_free(&st->frames);
  intern_free(&st->stacks);
}
