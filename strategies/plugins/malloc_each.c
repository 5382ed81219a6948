/* malloc_each.c: the smallest allocator PyTorch's CUDAPluggableAllocator can load: one
 * cudaMalloc per request, one cudaFree per free, nothing kept. allocbench's raw strategy, as
 * a library:
 *
 *   allocbench run -w dynamic-shapes -s pluggable:build/plugins/libmalloc_each.so --device sim
 *
 * It includes no CUDA header and may be linked with no CUDA library: the two calls are
 * declared here, with cudaError_t as the int it is, and cudaStream_t as a pointer. */
#include <stddef.h>
#include <sys/types.h>

extern int cudaMalloc(void **p, size_t bytes);
extern int cudaFree(void *p);

void *my_malloc(ssize_t bytes, int device, void *stream);
void my_free(void *p, ssize_t bytes, int device, void *stream);

void *my_malloc(ssize_t bytes, int device, void *stream) {
  (void)device;
  (void)stream;
  void *p = NULL;
  return cudaMalloc(&p, (size_t)bytes) == 0 ? p : NULL;
}

void my_free(void *p, ssize_t bytes, int device, void *stream) {
  (void)bytes;
  (void)device;
  (void)stream;
  cudaFree(p);
}
