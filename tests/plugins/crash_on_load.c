/* crash_on_load.c: a test plugin whose constructor crashes, as a library does that was
 * built for another machine or finds its environment wrong. */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Read through a volatile pointer: the compiler cannot see that it is NULL. */
static int *volatile nowhere = NULL;

void *my_malloc(ssize_t bytes, int device, void *stream);
void my_free(void *p, ssize_t bytes, int device, void *stream);

__attribute__((constructor)) static void start(void) { *nowhere = 1; }

void *my_malloc(ssize_t bytes, int device, void *stream) {
  (void)bytes, (void)device, (void)stream;
  return 0;
}

void my_free(void *p, ssize_t bytes, int device, void *stream) { (void)p, (void)bytes, (void)device, (void)stream; }
