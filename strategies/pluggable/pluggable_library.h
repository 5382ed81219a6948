/* pluggable_library.h: a library made for PyTorch's CUDAPluggableAllocator, loaded for the
 * pluggable strategy (pluggable_library.c), with the CUDA shim loaded before it
 * (Note [The CUDA shim], pluggable_shim.h).
 *
 * The functions are PyTorch's: alloc(size, device, stream) and free(ptr, size, device,
 * stream), and the optional hooks its loader knows: init(device_count), reset() (PyTorch's
 * emptyCache), memory_fraction(fraction, device) and record_stream(ptr, stream). A function
 * counts only when the library itself defines it (not libc's free, found through its
 * dependencies).
 *
 * One run at a time may use a library: its globals are one allocator's state. A library is
 * loaded afresh for each run when nothing else holds it, so each run starts from a clean
 * state.
 *
 * The file loaded is the one checked: the path resolved once (realpath) from the working
 * folder, never searched for as dlopen searches a name without a slash (LD_LIBRARY_PATH).
 * What a library changes of its process that allocbench relies on, its working folder
 * (chdir) and its umask, is put back when it is unloaded: the paths resolved and the files
 * written after it (the timeline, the segment map, the library loaded again) are where the
 * user said, with the user's permissions.
 *
 * Every failure is one line in diag naming the library: no such file, not a regular file (a
 * FIFO is refused without waiting for a writer), not a shared object, a CUDA call the
 * simulated card does not provide or that would not reach the shim (read from its imports
 * before it is loaded), a missing function. Thread-safety: any thread may open and close
 * libraries.
 */
#ifndef AB_PLUGGABLE_LIBRARY_H
#define AB_PLUGGABLE_LIBRARY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kernels/base/status.h"
#include "strategies/pluggable/pluggable_shim.h"

/* The names of the functions to use; NULL for a hook not wanted. */
typedef struct ab_plugin_names_s {
  const char *alloc, *free;                              /* required */
  const char *init, *reset, *memory_fraction, *record_stream; /* optional */
} ab_plugin_names_t;

typedef struct ab_plugin_s {
  void *handle;
  int cwd;      /* the working folder when it was loaded (O_PATH), put back when unloaded */
  mode_t umask; /* the umask when it was loaded, put back when unloaded */
  void *(*alloc)(ssize_t bytes, int device, void *stream);
  void (*free)(void *p, ssize_t bytes, int device, void *stream);
  void (*init)(int device_count);              /* NULL when not named */
  void (*reset)(void);                         /* NULL when not named */
  void (*memory_fraction)(double fraction, int device); /* NULL when not named */
  void (*record_stream)(void *p, void *stream); /* NULL when not named */
} ab_plugin_t;

/* Which of a library's functions runs now. A run of a library may take its process down
 * (a crash, exit, a hang): allocbench runs each in a process of its own and names, when it
 * dies, the call it died in (supervise.h). */
typedef enum ab_plugin_call_e {
  AB_PLUGIN_OUTSIDE, /* none: the process's start-up, before the library was loaded */
  AB_PLUGIN_BETWEEN, /* none: the process's own code once the library was loaded, between its
                        calls and after the last (supervise.c, Note [What the deadline times]) */
  AB_PLUGIN_LOADING, /* dlopen: its constructors */
  AB_PLUGIN_INIT,
  AB_PLUGIN_MEMORY_FRACTION,
  AB_PLUGIN_ALLOC,
  AB_PLUGIN_FREE,
  AB_PLUGIN_RECORD_STREAM,
  AB_PLUGIN_RESET,
  AB_PLUGIN_UNLOADING, /* dlclose: its destructors */
  AB_PLUGIN_EXITING,   /* the process ends, its results written (supervise.h) */
} ab_plugin_call_t;

/* Where the call is written (memory shared with the process watching this one); NULL:
 * nobody watches. The word holds the call in its low byte and, above it, how many times a
 * call began or ended: the watcher tells one call that lasts (a loop, a wait) from calls that
 * follow one another, which is what its deadline measures. */
extern volatile uint64_t *ab_plugin_call_slot;
#define AB_PLUGIN_CALL_BITS 8
static inline ab_plugin_call_t ab_plugin_call_of(uint64_t word) {
  return (ab_plugin_call_t)(word & ((1u << AB_PLUGIN_CALL_BITS) - 1));
}
static inline void ab_plugin_calling(ab_plugin_call_t call) {
  if (ab_plugin_call_slot)
    *ab_plugin_call_slot = ((*ab_plugin_call_slot >> AB_PLUGIN_CALL_BITS) + 1) << AB_PLUGIN_CALL_BITS | (uint64_t)call;
}
/* The call now (AB_PLUGIN_OUTSIDE when nobody watches). */
static inline ab_plugin_call_t ab_plugin_call_now(void) {
  return ab_plugin_call_slot ? ab_plugin_call_of(*ab_plugin_call_slot) : AB_PLUGIN_OUTSIDE;
}
/* "alloc", "loading it (its constructors)", "none of its calls". */
const char *ab_plugin_call_name(ab_plugin_call_t call);

/* The shim, loaded into the process once: *use receives its ab_shim_use. */
ab_status ab_plugin_shim(ab_shim_use_fn *use, ab_diag_t *diag);

/* Loads the library at path and finds the named functions. simulated: also refuse a library
 * that imports a CUDA function the shim does not export. Constructors of the library run
 * here, so the caller has its card in use. */
ab_status ab_plugin_open(ab_plugin_t *p, const char *path, const ab_plugin_names_t *names, bool simulated,
                         ab_diag_t *diag);

/* Unloads it (its destructors run: the caller has its card in use). */
void ab_plugin_close(ab_plugin_t *p);

#endif
