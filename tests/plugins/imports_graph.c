/* imports_graph.c: a test plugin that calls a CUDA function the simulated card does not
 * provide (cudaGraphLaunch), so that loading it on sim is refused, naming it. */
#include <stddef.h>
#include <sys/types.h>

extern int cudaMalloc(void **p, size_t bytes);
extern int cudaFree(void *p);
extern int cudaGraphLaunch(void *graph, void *stream);

void *my_malloc(ssize_t bytes, int device, void *stream);
void my_free(void *p, ssize_t bytes, int device, void *stream);

void *my_malloc(ssize_t bytes, int device, void *stream) {
  (void)device;
  void *p = NULL;
  if (bytes < 0) cudaGraphLaunch(NULL, stream);
  return cudaMalloc(&p, (size_t)bytes) == 0 ? p : NULL;
}

void my_free(void *p, ssize_t bytes, int device, void *stream) {
  (void)bytes, (void)device, (void)stream;
  cudaFree(p);
}
