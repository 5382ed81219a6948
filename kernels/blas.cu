/* blas.cu: loading cuBLAS (cublas_check.h says why it is not linked).
 *
 * The library is looked for first in the toolkit the binary was built with
 * (AB_CUDA_LIBRARY_DIR, from CMake), then on the loader's search path, under the soname of
 * the major version whose header was compiled in. It is never unloaded. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "kernels/kernels_internal.h"

#define STR_(x) #x
#define STR(x) STR_(x)
#define SONAME "libcublas.so." STR(CUBLAS_VER_MAJOR)

static ab_cublas_t api;
static char failure[AB_DIAG_BYTES]; /* why loading failed; "" when it worked */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
  void *lib = dlopen(AB_CUDA_LIBRARY_DIR "/" SONAME, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) lib = dlopen(SONAME, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    snprintf(failure, sizeof failure, "cannot load cuBLAS (%s): %s", SONAME, dlerror());
    return;
  }
#define AB_CUBLAS_LOAD(name)                                                            \
  if ((api.name = (decltype(api.name))dlsym(lib, #name)) == NULL && failure[0] == '\0') \
    snprintf(failure, sizeof failure, "%s has no %s", SONAME, #name);
  AB_CUBLAS_FUNCS(AB_CUBLAS_LOAD)
#undef AB_CUBLAS_LOAD
}

const ab_cublas_t *ab_cublas(ab_diag_t *diag) {
  int e = pthread_once(&once, load);
  if (e != 0) snprintf(failure, sizeof failure, "cannot load cuBLAS: pthread_once failed (%d)", e);
  if (failure[0]) {
    ab_diag_set(diag, AB_ERR_CUDA, "%s", failure);
    return NULL;
  }
  return &api;
}
