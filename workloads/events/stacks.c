/* stacks.c: interned call stacks (stacks.h, Note [Stacks of a trace]). */
#include "workloads/events/stacks.h"

#include <stdio.h>
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
         (st->start ? (uint64_t)st->capstacks + 1 : 0) * sizeof *st->start + (uint64_t)st->capids * sizeof *st->stack_of +
         (st->strings.cap + st->frames.cap + st->stacks.cap) * sizeof *st->strings.slot;
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

/* A slot holds an index + 1 in its low half and its key's home in the high half (the top bits
 * of the key's hash, which place it in a table of any size): a search compares keys only where
 * the homes agree, and growing moves the slots without reading a key again. A snapshot can name
 * a million distinct stacks (allocbench's test snapshots do), and reading each back to hash it
 * again, at random places in memory, cost as much as interning it. */
typedef bool (*equal_fn)(const ab_stacks_t *st, uint32_t index, const void *key);

static uint32_t home_of(uint64_t hash) { return (uint32_t)(hash * 0x9E3779B97F4A7C15ULL >> 32); }

/* The index of key in t, or UINT32_MAX with *slot where it would go. */
static uint32_t intern_find(const ab_stacks_t *st, const ab_intern_t *t, uint32_t home, const void *key, equal_fn equal,
                            size_t *slot) {
  size_t mask = t->cap - 1, s = home & mask;
  for (uint64_t v; (v = t->slot[s]) != 0; s = (s + 1) & mask)
    if ((uint32_t)(v >> 32) == home && equal(st, (uint32_t)v - 1, key)) return (uint32_t)v - 1;
  *slot = s;
  return UINT32_MAX;
}

static void intern_put(ab_intern_t *t, size_t slot, uint32_t home, uint32_t index) {
  t->slot[slot] = (uint64_t)home << 32 | ((uint64_t)index + 1);
  t->n++;
}

/* Makes room for one more index (load at most 1/2). */
static bool intern_room(ab_intern_t *t) {
  if ((t->n + 1) * 2 <= t->cap) return true;
  size_t cap = t->cap ? t->cap * 2 : 256;
  uint64_t *slot = calloc(cap, sizeof *slot);
  if (slot == NULL) return false;
  for (size_t i = 0; i < t->cap; i++) {
    if (t->slot[i] == 0) continue;
    size_t s = (size_t)(t->slot[i] >> 32) & (cap - 1);
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

static bool equal_text(const ab_stacks_t *st, uint32_t off, const void *key) {
  const text_key_t *k = key;
  return strncmp(st->text + off, k->s, k->len) == 0 && st->text[off + k->len] == '\0';
}

/* The offset of the string, interned; UINT32_MAX on failure. A NUL inside is cut there. */
static uint32_t intern_text(ab_stacks_t *st, const char *s, size_t len) {
  const char *nul = memchr(s, '\0', len);
  if (nul) len = (size_t)(nul - s);
  if (st->ntext + len + 1 > UINT32_MAX || !intern_room(&st->strings)) return st->failed = true, UINT32_MAX;
  text_key_t k = {s, len};
  size_t slot = 0;
  uint32_t home = home_of(hash_text(s, len));
  uint32_t found = intern_find(st, &st->strings, home, &k, equal_text, &slot);
  if (found != UINT32_MAX) return found;
  if (!reserve((void **)&st->text, &st->captext, st->ntext + len + 1, 1)) return st->failed = true, UINT32_MAX;
  uint32_t off = (uint32_t)st->ntext;
  memcpy(st->text + off, s, len);
  st->text[off + len] = '\0';
  st->ntext += len + 1;
  intern_put(&st->strings, slot, home, off);
  return off;
}

/* ---- frames -------------------------------------------------------------------------------- */

static uint64_t hash_frame(const ab_frame_t *f) { return mix(mix(mix(0xcbf29ce484222325ULL, f->file), f->name), f->line); }
static bool equal_frame(const ab_stacks_t *st, uint32_t i, const void *key) {
  const ab_frame_t *a = &st->frame[i], *b = key;
  return a->file == b->file && a->name == b->name && a->line == b->line;
}

uint32_t ab_stacks_string(ab_stacks_t *st, const char *s, size_t len) {
  return st->failed ? UINT32_MAX : intern_text(st, s, len);
}

uint32_t ab_stacks_frame_at(ab_stacks_t *st, uint32_t file, uint32_t name, uint32_t line) {
  if (st->failed || file == UINT32_MAX || name == UINT32_MAX || !intern_room(&st->frames))
    return st->failed = true, UINT32_MAX;
  ab_frame_t f = {file, name, line};
  size_t slot = 0;
  uint32_t home = home_of(hash_frame(&f));
  uint32_t found = intern_find(st, &st->frames, home, &f, equal_frame, &slot);
  if (found != UINT32_MAX) return found;
  size_t cap = st->capframes;
  if (st->nframes == UINT32_MAX - 1 || !reserve((void **)&st->frame, &cap, (size_t)st->nframes + 1, sizeof f))
    return st->failed = true, UINT32_MAX;
  st->capframes = (uint32_t)cap;
  st->frame[st->nframes] = f;
  intern_put(&st->frames, slot, home, st->nframes);
  return st->nframes++;
}

uint32_t ab_stacks_frame(ab_stacks_t *st, const char *file, size_t file_len, const char *name, size_t name_len,
                         uint32_t line) {
  /* One statement each: the file's string is numbered before the name's, whoever calls. */
  uint32_t f = ab_stacks_string(st, file, file_len);
  uint32_t n = ab_stacks_string(st, name, name_len);
  return ab_stacks_frame_at(st, f, n, line);
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
  if (!intern_room(&st->stacks)) return st->failed = true, 0;
  stack_key_t key = {frames, n};
  size_t slot = 0;
  uint32_t home = home_of(hash_stack(frames, n));
  uint32_t found = intern_find(st, &st->stacks, home, &key, equal_stack, &slot);
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
  intern_put(&st->stacks, slot, home, k);
  return k;
}

void ab_stacks_prefetch(const ab_stacks_t *st, const uint32_t *frames, uint32_t n) {
  if (st->stacks.cap) __builtin_prefetch(&st->stacks.slot[home_of(hash_stack(frames, n)) & (st->stacks.cap - 1)]);
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

void ab_stacks_shift_ids(ab_stacks_t *st, uint32_t n) {
  if (st->failed || n == 0 || st->capids == 0) return;
  size_t had = st->capids, cap = had;
  if (had + n > UINT32_MAX || !reserve((void **)&st->stack_of, &cap, had + n, sizeof *st->stack_of)) {
    st->failed = true;
    return;
  }
  memmove(st->stack_of + n, st->stack_of, had * sizeof *st->stack_of);
  memset(st->stack_of, 0, n * sizeof *st->stack_of);
  memset(st->stack_of + had + n, 0, (cap - had - n) * sizeof *st->stack_of);
  st->capids = (uint32_t)cap;
}

void ab_stacks_finish(ab_stacks_t *st) {
  intern_free(&st->strings);
  intern_free(&st->frames);
  intern_free(&st->stacks);
}

/* ---- comparing ----------------------------------------------------------------------------- */

static uint32_t count_of(const ab_stacks_t *st, int what) {
  if (st == NULL) return 0;
  return what == 0 ? st->nframes : st->nstacks > 1 ? st->nstacks - 1 : 0;
}

bool ab_stacks_same(const ab_stacks_t *a, const ab_stacks_t *b, char *why, size_t size) {
  static const char *const what[] = {"frames", "stacks"};
  for (int k = 0; k < 2; k++)
    if (count_of(a, k) != count_of(b, k)) {
      snprintf(why, size, "%u %s against %u", count_of(a, k), what[k], count_of(b, k));
      return false;
    }
  for (uint32_t i = 0; a && b && i < a->nframes; i++) {
    const ab_frame_t *x = &a->frame[i], *y = &b->frame[i];
    if (strcmp(a->text + x->file, b->text + y->file) || strcmp(a->text + x->name, b->text + y->name) || x->line != y->line) {
      snprintf(why, size, "frame %u: %s:%u %s against %s:%u %s", i, a->text + x->file, x->line, a->text + x->name,
               b->text + y->file, y->line, b->text + y->name);
      return false;
    }
  }
  for (uint32_t k = 1; k <= count_of(a, 1); k++) {
    const uint32_t *x = NULL, *y = NULL;
    uint32_t n = ab_stacks_frames(a, k, &x);
    if (ab_stacks_frames(b, k, &y) != n || memcmp(x, y, n * sizeof *x) != 0) {
      snprintf(why, size, "stack %u: its frames differ", k);
      return false;
    }
  }
  uint32_t ids = a ? a->capids : 0;
  if (b && b->capids > ids) ids = b->capids;
  for (uint32_t id = 0; id < ids; id++)
    if (ab_stacks_of(a, id) != ab_stacks_of(b, id)) {
      snprintf(why, size, "allocation %u: stack %u against %u", id, ab_stacks_of(a, id), ab_stacks_of(b, id));
      return false;
    }
  return true;
}
