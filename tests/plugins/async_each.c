/* async_each.c: a test plugin on CUDA's stream-ordered allocator: cudaMallocAsync and
 * cudaFreeAsync on the stream PyTorch passes, from the device's default pool, which
 * keep_all (an init hook) tells to keep what it holds across synchronisations; trim_all (a
 * reset hook) gives it all back. */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

extern int cudaMallocAsync(void **p, size_t bytes, void *stream);
extern int cudaFreeAsync(void *p, void *stream);
extern int cudaDeviceGetDefaultMemPool(void **pool, int device);
extern int cudaMemPoolSetAttribute(void *pool, int attr, void *value);
extern int cudaGetDevice(int *device);
extern int cudaDeviceSynchronize(void);
extern int cudaMemPoolTrimTo(void *pool, size_t keep);

void *my_malloc(ssize_t bytes, int device, void *stream);
void my_free(void *p, ssize_t bytes, int device, void *stream);
void keep_all(int device_count);
void trim_all(void);

void *my_malloc(ssize_t bytes, int device, void *stream) {
  (void)device;
  void *p = NULL;
  return cudaMallocAsync(&p, (size_t)bytes, stream) == 0 ? p : NULL;
}

void my_free(void *p, ssize_t bytes, int device, void *stream) {
  (void)bytes;
  (void)device;
  cudaFreeAsync(p, stream);
}

void keep_all(int device_count) {
  (void)device_count;
  int device = -1;
  void *pool = NULL;
  uint64_t threshold = UINT64_MAX;
  if (cudaGetDevice(&device) == 0 && cudaDeviceGetDefaultMemPool(&pool, device) == 0)
    cudaMemPoolSetAttribute(pool, 4 /* cudaMemPoolAttrReleaseThreshold */, &threshold);
}

/* A reset hook: everything the pool holds goes back once the frees in flight are done. */
void trim_all(void) {
  int device = -1;
  void *pool = NULL;
  if (cudaDeviceSynchronize() == 0 && cudaGetDevice(&device) == 0 && cudaDeviceGetDefaultMemPool(&pool, device) == 0)
    cudaMemPoolTrimTo(pool, 0);
}
