/* gives_up.c: a test plugin that gives up for lack of memory without a CUDA call failing. Two
 * ways: bump_alloc bumps through one 8 MiB cudaMalloc made at its first call and returns
 * NULL once the region is spent (its own pool is its limit; bump_free gives nothing back
 * until everything is freed); room_alloc asks cudaMemGetInfo first and returns NULL when the
 * request is more than the free memory. */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

extern int cudaMalloc(void **p, size_t bytes);
extern int cudaFree(void *p);
extern int cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);

void *bump_alloc(ssize_t bytes, int device, void *stream);
void bump_free(void *p, ssize_t bytes, int device, void *stream);
void *room_alloc(ssize_t bytes, int device, void *stream);
void room_free(void *p, ssize_t bytes, int device, void *stream);

#define REGION_BYTES (8u << 20)

static char *region;
static size_t used, live;

void *bump_alloc(ssize_t bytes, int device, void *stream) {
  (void)device, (void)stream;
  size_t n = ((size_t)bytes + 511) / 512 * 512;
  if (region == NULL && cudaMalloc((void **)&region, REGION_BYTES) != 0) return NULL;
  if (n > REGION_BYTES - used) return NULL;
  used += n;
  live++;
  return region + used - n;
}

void bump_free(void *p, ssize_t bytes, int device, void *stream) {
  (void)p, (void)bytes, (void)device, (void)stream;
  if (--live == 0) used = 0;
}

void *room_alloc(ssize_t bytes, int device, void *stream) {
  (void)device, (void)stream;
  size_t free_bytes = 0, total = 0;
  void *p = NULL;
  if (cudaMemGetInfo(&free_bytes, &total) != 0 || (size_t)bytes > free_bytes) return NULL;
  return cudaMalloc(&p, (size_t)bytes) == 0 ? p : NULL;
}

void room_free(void *p, ssize_t bytes, int device, void *stream) {
  (void)bytes, (void)device, (void)stream;
  cudaFree(p);
}
