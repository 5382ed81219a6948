/* stuck.c: a test plugin that allocates as raw does and never returns from its constructor
 * (AB_STUCK=load), its destructor (AB_STUCK=unload), or its destructor at the process's end,
 * having kept itself loaded (AB_STUCK=exit): the calls of a library that are no function
 * of its (supervise.h). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

extern int cudaMalloc(void **p, size_t bytes);
extern int cudaFree(void *p);

void *my_malloc(ssize_t bytes, int device, void *stream);
void my_free(void *p, ssize_t bytes, int device, void *stream);

static int here; /* an address in this library, for dladdr */

static int stuck(const char *where) {
  const char *s = getenv("AB_STUCK");
  return s && strcmp(s, where) == 0;
}

static void spin(void) {
  for (volatile int spinning = 1; spinning;) {
  }
}

__attribute__((constructor)) static void on_load(void) {
  if (stuck("load")) spin();
  if (stuck("exit")) {
    /* Loaded once more, never to be unloaded: its destructor runs when the process ends. */
    Dl_info self;
    if (dladdr(&here, &self) && self.dli_fname) dlopen(self.dli_fname, RTLD_NOW | RTLD_NODELETE);
  }
}

__attribute__((destructor)) static void on_unload(void) {
  if (stuck("unload") || stuck("exit")) spin();
}

void *my_malloc(ssize_t bytes, int device, void *stream) {
  (void)device, (void)stream;
  void *p = NULL;
  return cudaMalloc(&p, (size_t)bytes) == 0 ? p : NULL;
}

void my_free(void *p, ssize_t bytes, int device, void *stream) {
  (void)bytes, (void)device, (void)stream;
  cudaFree(p);
}
