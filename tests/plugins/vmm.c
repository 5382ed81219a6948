/* vmm.c: a test plugin that takes its memory with the driver's virtual memory calls, as
 * PyTorch's expandable segments do: a reservation per request, rounded to the granule, with
 * physical memory created, mapped, given access and released at once (the mapping keeps it);
 * the free unmaps and frees the reservation. split_malloc maps a request of two granules or
 * more as two handles and split_free unmaps both in one call. No CUDA header: the calls are
 * declared as the driver's ABI has them (CUdeviceptr and handles are 64-bit). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

typedef struct {
  int type, handle_types, location_type, location_id;
  void *win32;
  unsigned char flags[8];
} prop_t;

typedef struct {
  int location_type, location_id;
  int flags;
} access_t;

extern int cuMemGetAllocationGranularity(size_t *g, const prop_t *prop, int option);
extern int cuMemAddressReserve(unsigned long long *p, size_t bytes, size_t align, unsigned long long addr,
                               unsigned long long flags);
extern int cuMemAddressFree(unsigned long long p, size_t bytes);
extern int cuMemCreate(unsigned long long *h, size_t bytes, const prop_t *prop, unsigned long long flags);
extern int cuMemRelease(unsigned long long h);
extern int cuMemMap(unsigned long long p, size_t bytes, size_t offset, unsigned long long h, unsigned long long flags);
extern int cuMemUnmap(unsigned long long p, size_t bytes);
extern int cuMemSetAccess(unsigned long long p, size_t bytes, const access_t *desc, size_t count);

void *my_malloc(ssize_t bytes, int device, void *stream);
void my_free(void *p, ssize_t bytes, int device, void *stream);
void *split_malloc(ssize_t bytes, int device, void *stream);
void split_free(void *p, ssize_t bytes, int device, void *stream);

static size_t rounded(ssize_t bytes, int device) {
  prop_t prop = {1, 0, 1, device, NULL, {0}};
  size_t g = 0;
  if (cuMemGetAllocationGranularity(&g, &prop, 0) != 0 || g == 0) return 0;
  return ((size_t)bytes + g - 1) / g * g;
}

/* Maps `pieces` handles of equal size over [p, p + size); returns the bytes mapped, all of
 * size when everything went well. */
static size_t map(unsigned long long p, size_t size, int pieces, int device) {
  prop_t prop = {1, 0, 1, device, NULL, {0}};
  access_t access = {1, device, 3};
  size_t piece = size / (size_t)pieces, mapped = 0;
  for (int i = 0; i < pieces; i++) {
    unsigned long long h = 0;
    size_t n = i == pieces - 1 ? size - mapped : piece;
    if (cuMemCreate(&h, n, &prop, 0) != 0) return mapped;
    int r = cuMemMap(p + mapped, n, 0, h, 0);
    cuMemRelease(h); /* the mapping keeps the memory until the unmap */
    if (r != 0) return mapped;
    mapped += n;
  }
  return cuMemSetAccess(p, size, &access, 1) == 0 ? mapped : 0;
}

static void *take(ssize_t bytes, int device, int pieces) {
  size_t size = rounded(bytes, device);
  unsigned long long p = 0;
  if (size == 0 || cuMemAddressReserve(&p, size, 0, 0, 0) != 0) return NULL;
  size_t mapped = map(p, size, pieces, device);
  if (mapped != size) {
    if (mapped) cuMemUnmap(p, mapped);
    cuMemAddressFree(p, size);
    return NULL;
  }
  return (void *)(uintptr_t)p;
}

static void give(void *p, ssize_t bytes, int device) {
  size_t size = rounded(bytes, device);
  cuMemUnmap((unsigned long long)(uintptr_t)p, size);
  cuMemAddressFree((unsigned long long)(uintptr_t)p, size);
}

void *my_malloc(ssize_t bytes, int device, void *stream) {
  (void)stream;
  return take(bytes, device, 1);
}

void my_free(void *p, ssize_t bytes, int device, void *stream) {
  (void)stream;
  give(p, bytes, device);
}

void *split_malloc(ssize_t bytes, int device, void *stream) {
  (void)stream;
  size_t g = rounded(1, device);
  return take(bytes, device, rounded(bytes, device) >= 2 * g ? 2 : 1);
}

void split_free(void *p, ssize_t bytes, int device, void *stream) {
  (void)stream;
  give(p, bytes, device);
}
