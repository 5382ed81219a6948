/* misbehaving.c: test plugins that do what a library must not, or what the simulated card
 * cannot do, one alloc function each (-s pluggable:PATH:ALLOC_FN:FREE_FN), and a few that
 * reach the card in less common ways. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

extern int cudaMalloc(void **p, size_t bytes);
extern int cudaFree(void *p);
extern int cudaMemcpy(void *dst, const void *src, size_t n, int kind);
extern int cudaDeviceGetAttribute(int *value, int attr, int device);
extern int cudaGetLastError(void);
extern const char *cudaGetErrorName(int code);
extern const char *cudaGetErrorString(int code);
extern int cuGetErrorName(int code, const char **name);
extern int cuGetProcAddress_v2(const char *symbol, void **fn, int version, unsigned long long flags, int *status);

void *null_alloc(ssize_t bytes, int device, void *stream);
void *bogus_alloc(ssize_t bytes, int device, void *stream);
void *copy_alloc(ssize_t bytes, int device, void *stream);
void *attribute_alloc(ssize_t bytes, int device, void *stream);
void *error_names_alloc(ssize_t bytes, int device, void *stream);
void *driver_alloc(ssize_t bytes, int device, void *stream);
void driver_free(void *p, ssize_t bytes, int device, void *stream);
void *leaky_alloc(ssize_t bytes, int device, void *stream);
void no_free(void *p, ssize_t bytes, int device, void *stream);
void twice_free(void *p, ssize_t bytes, int device, void *stream);
void my_free(void *p, ssize_t bytes, int device, void *stream);

/* Gives up without asking the device. */
void *null_alloc(ssize_t bytes, int device, void *stream) {
  (void)bytes, (void)device, (void)stream;
  return NULL;
}

/* Hands out an address it never got. */
void *bogus_alloc(ssize_t bytes, int device, void *stream) {
  (void)bytes, (void)device, (void)stream;
  return (void *)(uintptr_t)0x1000;
}

/* Copies into what it allocates: no simulated card can. */
void *copy_alloc(ssize_t bytes, int device, void *stream) {
  (void)device, (void)stream;
  void *p = NULL;
  char zero[16] = {0};
  if (cudaMalloc(&p, (size_t)bytes) != 0) return NULL;
  cudaMemcpy(p, zero, sizeof zero < (size_t)bytes ? sizeof zero : (size_t)bytes, 1);
  return p;
}

/* Asks an attribute the card does not know (16: multiprocessor count), and goes on when
 * told it is not supported, the error named as CUDA names it. */
void *attribute_alloc(ssize_t bytes, int device, void *stream) {
  (void)stream;
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, 16, device) != 0 &&
      strcmp(cudaGetErrorName(cudaGetLastError()), "cudaErrorNotSupported") != 0)
    return NULL;
  void *p = NULL;
  return cudaMalloc(&p, (size_t)bytes) == 0 ? p : NULL;
}

/* Allocates only when CUDA's errors are named as CUDA names them. */
void *error_names_alloc(ssize_t bytes, int device, void *stream) {
  (void)device, (void)stream;
  const char *driver = NULL;
  if (strcmp(cudaGetErrorName(2), "cudaErrorMemoryAllocation") != 0 ||
      strcmp(cudaGetErrorString(801), "operation not supported") != 0 || cuGetErrorName(400, &driver) != 0 ||
      strcmp(driver, "CUDA_ERROR_INVALID_HANDLE") != 0)
    return NULL;
  void *p = NULL;
  return cudaMalloc(&p, (size_t)bytes) == 0 ? p : NULL;
}

/* Fetches the driver's cuMemAlloc and cuMemFree by name, as libraries avoiding a link
 * against libcuda do. */
typedef int (*mem_alloc_fn)(unsigned long long *p, size_t bytes);
typedef int (*mem_free_fn)(unsigned long long p);

static void *driver_function(const char *name) {
  void *fn = NULL;
  int status = -1;
  return cuGetProcAddress_v2(name, &fn, 12000, 0, &status) == 0 && status == 0 ? fn : NULL;
}

void *driver_alloc(ssize_t bytes, int device, void *stream) {
  (void)device, (void)stream;
  mem_alloc_fn alloc;
  void *fn = driver_function("cuMemAlloc");
  unsigned long long p = 0;
  if (fn == NULL) return NULL;
  memcpy(&alloc, &fn, sizeof fn);
  return alloc(&p, (size_t)bytes) == 0 ? (void *)(uintptr_t)p : NULL;
}

void driver_free(void *p, ssize_t bytes, int device, void *stream) {
  (void)bytes, (void)device, (void)stream;
  mem_free_fn release;
  void *fn = driver_function("cuMemFree");
  if (fn == NULL) return;
  memcpy(&release, &fn, sizeof fn);
  release((unsigned long long)(uintptr_t)p);
}

/* Allocates like raw; no_free never gives anything back, twice_free gives it back twice. */
void *leaky_alloc(ssize_t bytes, int device, void *stream) {
  (void)device, (void)stream;
  void *p = NULL;
  return cudaMalloc(&p, (size_t)bytes) == 0 ? p : NULL;
}

void no_free(void *p, ssize_t bytes, int device, void *stream) { (void)p, (void)bytes, (void)device, (void)stream; }

void twice_free(void *p, ssize_t bytes, int device, void *stream) {
  (void)bytes, (void)device, (void)stream;
  cudaFree(p);
  cudaFree(p);
}

void my_free(void *p, ssize_t bytes, int device, void *stream) {
  (void)bytes, (void)device, (void)stream;
  cudaFree(p);
}
