/* small_pool.c: a small caching allocator, in plain C, as PyTorch's CUDAPluggableAllocator
 * loads it:
 *
 *   torch.cuda.memory.CUDAPluggableAllocator("libsmall_pool.so", "my_malloc", "my_free")
 *   allocbench run -w dynamic-shapes -s pluggable:build/plugins/libsmall_pool.so -c reset:pool_reset
 *
 * Policy:
 *   1. A request is rounded up to a power of two from 512 bytes to 1 MiB (small), or above
 *      to a multiple of 2 MiB and then to one of four steps per power of two (large: at most
 *      a quarter more). Blocks serve the stream they were made for; one freed there is
 *      reusable there at once.
 *   2. Small blocks are slots of 2 MiB slabs, one cudaMalloc each, cut into equal slots of one
 *      size; a small request takes a free slot of its size. A large block is a cudaMalloc of
 *      its own; a large request takes the smallest cached block that fits it with at most
 *      half its size to spare. Nothing is split or merged.
 *   3. When cudaMalloc runs out of memory, or the memory fraction would be passed, the pool
 *      releases every cached large block and every slab with no slot in use, and tries once
 *      more. pool_reset (PyTorch's empty_cache) releases the same.
 *   4. pool_record_stream marks a block used on another stream: when it is freed it waits on
 *      a pending list until the pool next needs memory, when a cudaStreamSynchronize of that
 *      stream makes it reusable.
 * The bookkeeping is on the host: a node per block, free lists per stream and size, and a
 * table from address to node for the frees. One lock serialises the calls, as PyTorch may
 * allocate from several threads.
 *
 * No CUDA header, no CUDA library needed: the calls are declared here.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

extern int cudaMalloc(void **p, size_t bytes);
extern int cudaFree(void *p);
extern int cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
extern int cudaStreamSynchronize(void *stream);

void *my_malloc(ssize_t bytes, int device, void *stream);
void my_free(void *p, ssize_t bytes, int device, void *stream);
void pool_init(int device_count);
void pool_reset(void);
void pool_memory_fraction(double fraction, int device);
void pool_record_stream(void *p, void *stream);

#define MIN_BLOCK 512
#define SLAB_BYTES (2u << 20)
#define SMALL_CLASSES 12 /* 512 B to 1 MiB */
#define MAX_STREAMS 64

typedef struct slab_s slab_t;

typedef struct block_s {
  uintptr_t ptr;        /* a device address, never dereferenced here */
  size_t size;          /* its class's size */
  void *stream;         /* the stream it serves */
  void *used_on;        /* another stream it was used on (pool_record_stream), or NULL */
  slab_t *slab;         /* small: the slab it is cut from; large: NULL */
  struct block_s *next; /* in a free list, or the pending list */
} block_t;

struct slab_s {
  uintptr_t base;
  size_t used;     /* slots handed out or pending */
  int releasing;   /* marked by release() */
  block_t *slots;
  slab_t *next;    /* every slab */
};

typedef struct lists_s {
  void *stream;
  block_t *small[SMALL_CLASSES];
  block_t *large; /* every size; searched for an exact match */
} lists_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static lists_t lists[MAX_STREAMS];
static int nlists;
static slab_t *slabs;
static block_t *pending;
static size_t reserved;    /* bytes held from cudaMalloc */
static size_t cap;         /* 0: none */
static size_t total_bytes; /* the card's, from cudaMemGetInfo */

/* ---- the live table: address -> block (open addressing, backward-shift deletion) ---- */

static block_t **table;
static size_t table_cap, table_n;

static size_t slot_of(uintptr_t p) { return (size_t)((p >> 9) * 0x9E3779B97F4A7C15ULL) & (table_cap - 1); }

static int table_put(block_t *b) {
  if (2 * (table_n + 1) > table_cap) {
    size_t old_cap = table_cap;
    block_t **old = table;
    table_cap = table_cap ? table_cap * 2 : 1024;
    table = calloc(table_cap, sizeof *table);
    if (table == NULL) {
      table = old;
      table_cap = old_cap;
      return -1;
    }
    table_n = 0;
    for (size_t i = 0; i < old_cap; i++)
      if (old[i]) table_put(old[i]);
    free(old);
  }
  size_t i = slot_of(b->ptr);
  while (table[i]) i = (i + 1) & (table_cap - 1);
  table[i] = b;
  table_n++;
  return 0;
}

static block_t *table_find(uintptr_t p, size_t *at) {
  if (table_cap == 0) return NULL;
  for (size_t i = slot_of(p); table[i]; i = (i + 1) & (table_cap - 1))
    if (table[i]->ptr == p) {
      *at = i;
      return table[i];
    }
  return NULL;
}

static block_t *table_take(uintptr_t p) {
  size_t i;
  block_t *b = table_find(p, &i);
  if (b == NULL) return NULL;
  table[i] = NULL;
  table_n--;
  /* Move back every later entry of the run that may now sit after its home. */
  for (size_t j = (i + 1) & (table_cap - 1); table[j]; j = (j + 1) & (table_cap - 1)) {
    size_t home = slot_of(table[j]->ptr);
    if (((j - home) & (table_cap - 1)) >= ((j - i) & (table_cap - 1))) {
      table[i] = table[j];
      table[j] = NULL;
      i = j;
    }
  }
  return b;
}

/* ---- classes --------------------------------------------------------------------------- */

static size_t round_up(size_t bytes, size_t step) { return (bytes + step - 1) / step * step; }

static size_t round_size(size_t bytes) {
  if (bytes > SLAB_BYTES / 2) {
    size_t n = round_up(bytes, SLAB_BYTES), power = SLAB_BYTES;
    while (power * 2 <= n) power *= 2;
    return power >= 4 * SLAB_BYTES ? round_up(n, power / 4) : n;
  }
  size_t s = MIN_BLOCK;
  while (s < bytes) s *= 2;
  return s;
}

static int small_class(size_t size) {
  int c = 0;
  for (size_t s = MIN_BLOCK; s < size; s *= 2) c++;
  return c;
}

static lists_t *lists_of(void *stream) {
  for (int i = 0; i < nlists; i++)
    if (lists[i].stream == stream) return &lists[i];
  if (nlists == MAX_STREAMS) return NULL;
  lists[nlists].stream = stream;
  return &lists[nlists++];
}

static void push_free(block_t *b) {
  lists_t *l = lists_of(b->stream); /* exists: the block was made for it */
  block_t **head = b->slab ? &l->small[small_class(b->size)] : &l->large;
  b->next = *head;
  *head = b;
  if (b->slab) b->slab->used--;
}

static block_t *take_free(lists_t *l, size_t size) {
  if (size <= SLAB_BYTES / 2) {
    block_t *b = l->small[small_class(size)];
    if (b) {
      l->small[small_class(size)] = b->next;
      b->slab->used++;
    }
    return b;
  }
  /* The smallest cached block that fits, wasting at most half the request. */
  block_t **best = NULL;
  for (block_t **at = &l->large; *at; at = &(*at)->next)
    if ((*at)->size >= size && (*at)->size <= size + size / 2 && (best == NULL || (*at)->size < (*best)->size)) best = at;
  if (best == NULL) return NULL;
  block_t *b = *best;
  *best = b->next;
  return b;
}

/* ---- the device ------------------------------------------------------------------------ */

/* Pending blocks become reusable once the streams that used them are done. */
static void reclaim_pending(void) {
  while (pending) {
    block_t *b = pending;
    pending = b->next;
    cudaStreamSynchronize(b->used_on);
    b->used_on = NULL;
    push_free(b);
  }
}

/* Policy 3: gives back cached large blocks and slabs with no slot in use. */
static void release(void) {
  for (int i = 0; i < nlists; i++) {
    while (lists[i].large) {
      block_t *b = lists[i].large;
      lists[i].large = b->next;
      cudaFree((void *)b->ptr);
      reserved -= b->size;
      free(b);
    }
  }
  for (slab_t *s = slabs; s; s = s->next) s->releasing = s->used == 0;
  for (int i = 0; i < nlists; i++)
    for (int c = 0; c < SMALL_CLASSES; c++)
      for (block_t **at = &lists[i].small[c]; *at;)
        if ((*at)->slab->releasing) *at = (*at)->next;
        else at = &(*at)->next;
  for (slab_t **at = &slabs; *at;) {
    slab_t *s = *at;
    if (!s->releasing) {
      at = &s->next;
      continue;
    }
    *at = s->next;
    cudaFree((void *)s->base);
    reserved -= SLAB_BYTES;
    free(s->slots);
    free(s);
  }
}

/* cudaMalloc within the cap; NULL when there is no room. */
static void *device_alloc(size_t bytes) {
  void *p = NULL;
  if (cap && reserved + bytes > cap) return NULL;
  if (cudaMalloc(&p, bytes) != 0) return NULL;
  reserved += bytes;
  return p;
}

/* A block of a new slab or a new large block, releasing the cache once if needed. */
static block_t *fresh(lists_t *l, size_t size) {
  size_t want = size <= SLAB_BYTES / 2 ? SLAB_BYTES : size;
  void *p = device_alloc(want);
  if (p == NULL) {
    reclaim_pending();
    release();
    p = device_alloc(want);
  }
  if (p == NULL) return NULL;
  if (want == size) {
    block_t *b = calloc(1, sizeof *b);
    if (b == NULL) {
      cudaFree(p);
      reserved -= want;
      return NULL;
    }
    *b = (block_t){(uintptr_t)p, size, l->stream, NULL, NULL, NULL};
    return b;
  }
  slab_t *s = calloc(1, sizeof *s);
  size_t n = SLAB_BYTES / size;
  if (s == NULL || (s->slots = calloc(n, sizeof *s->slots)) == NULL) {
    free(s);
    cudaFree(p);
    reserved -= want;
    return NULL;
  }
  s->base = (uintptr_t)p;
  s->next = slabs;
  slabs = s;
  /* Pushed from the top, so that the slab is handed out from its lowest address up. */
  for (size_t i = n; i-- > 0;) {
    s->slots[i] = (block_t){s->base + i * size, size, l->stream, NULL, s, NULL};
    s->used++;
    if (i) push_free(&s->slots[i]);
  }
  return &s->slots[0];
}

/* ---- PyTorch's functions ------------------------------------------------------------------ */

void *my_malloc(ssize_t bytes, int device, void *stream) {
  (void)device;
  if (bytes <= 0) return NULL;
  size_t size = round_size((size_t)bytes);
  pthread_mutex_lock(&lock);
  lists_t *l = lists_of(stream);
  block_t *b = l ? take_free(l, size) : NULL;
  if (l && b == NULL && pending) {
    reclaim_pending();
    b = take_free(l, size);
  }
  if (l && b == NULL) b = fresh(l, size);
  if (b && table_put(b) != 0) {
    push_free(b);
    b = NULL;
  }
  pthread_mutex_unlock(&lock);
  return b ? (void *)b->ptr : NULL;
}

void my_free(void *p, ssize_t bytes, int device, void *stream) {
  (void)bytes;
  (void)device;
  (void)stream; /* a block goes back to the stream it was made for */
  pthread_mutex_lock(&lock);
  block_t *b = table_take((uintptr_t)p);
  if (b && b->used_on && b->used_on != b->stream) {
    b->next = pending;
    pending = b;
  } else if (b) {
    push_free(b);
  }
  pthread_mutex_unlock(&lock);
}

void pool_init(int device_count) {
  (void)device_count;
  size_t free_bytes;
  pthread_mutex_lock(&lock);
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != 0) total_bytes = 0;
  pthread_mutex_unlock(&lock);
}

void pool_reset(void) {
  pthread_mutex_lock(&lock);
  reclaim_pending();
  release();
  pthread_mutex_unlock(&lock);
}

void pool_memory_fraction(double fraction, int device) {
  (void)device;
  size_t free_bytes;
  pthread_mutex_lock(&lock);
  if (total_bytes == 0 && cudaMemGetInfo(&free_bytes, &total_bytes) != 0) total_bytes = 0;
  cap = fraction >= 1 || total_bytes == 0 ? 0 : (size_t)(fraction * (double)total_bytes);
  pthread_mutex_unlock(&lock);
}

/* When the library is unloaded, its host bookkeeping goes with it; the device memory is the
 * process's to end with the CUDA context (PyTorch keeps allocators to the end). */
__attribute__((destructor)) static void forget(void) {
  for (int i = 0; i < nlists; i++)
    for (block_t *b = lists[i].large, *next; b; b = next) {
      next = b->next;
      free(b);
    }
  for (block_t *b = pending, *next; b; b = next) {
    next = b->next;
    if (b->slab == NULL) free(b);
  }
  for (size_t i = 0; i < table_cap; i++)
    if (table[i] && table[i]->slab == NULL) free(table[i]);
  for (slab_t *s = slabs, *next; s; s = next) {
    next = s->next;
    free(s->slots);
    free(s);
  }
  free(table);
}

void pool_record_stream(void *p, void *stream) {
  pthread_mutex_lock(&lock);
  size_t at;
  block_t *b = table_find((uintptr_t)p, &at);
  if (b) b->used_on = stream;
  pthread_mutex_unlock(&lock);
}
