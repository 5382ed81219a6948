/* hostile.c: test plugins that take their process down, one way each: a crash, an abort,
 * exit and _exit, a loop, a library deaf to SIGTERM and SIGINT, one that stops its process
 * (SIGSTOP, SIGTTOU) (supervise.h); and plugins that reach past their calls: into the
 * descriptors they find (3 to 9, or every one up to 1023), onto stdout and stderr. Each alloc
 * function misbehaves on its call number AB_HOSTILE_AT (default 100), so that the run is
 * under way when it does, and, when AB_HOSTILE_READY names a file, creates it first: the
 * test's cue that the library is in its loop. */
#include <fcntl.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Read through a volatile pointer: the compiler cannot see that it is NULL. */
static int *volatile nowhere = NULL;

extern int cudaMalloc(void **p, size_t bytes);
extern int cudaFree(void *p);

void *segv_alloc(ssize_t bytes, int device, void *stream);
void *abort_alloc(ssize_t bytes, int device, void *stream);
void *exit_alloc(ssize_t bytes, int device, void *stream);
void *quick_exit_alloc(ssize_t bytes, int device, void *stream);
void *loop_alloc(ssize_t bytes, int device, void *stream);
void *deaf_alloc(ssize_t bytes, int device, void *stream);
void *stop_alloc(ssize_t bytes, int device, void *stream);
void *ttou_alloc(ssize_t bytes, int device, void *stream);
void *scribble_alloc(ssize_t bytes, int device, void *stream);
void *scribble_all_alloc(ssize_t bytes, int device, void *stream);
void *chatty_alloc(ssize_t bytes, int device, void *stream);
void *said_segv_alloc(ssize_t bytes, int device, void *stream);
void *my_malloc(ssize_t bytes, int device, void *stream);
void my_free(void *p, ssize_t bytes, int device, void *stream);
void segv_free(void *p, ssize_t bytes, int device, void *stream);
void segv_reset(void);

static long calls;

/* True on the call that is to fail. */
static int now(void) {
  const char *at = getenv("AB_HOSTILE_AT");
  if (++calls != (at ? atol(at) : 100)) return 0;
  const char *ready = getenv("AB_HOSTILE_READY");
  if (ready) close(open(ready, O_WRONLY | O_CREAT, 0600));
  return 1;
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

void *segv_alloc(ssize_t bytes, int device, void *stream) {
  if (now()) *nowhere = 1;
  return my_malloc(bytes, device, stream);
}

void *abort_alloc(ssize_t bytes, int device, void *stream) {
  if (now()) abort();
  return my_malloc(bytes, device, stream);
}

void *exit_alloc(ssize_t bytes, int device, void *stream) {
  if (now()) exit(0);
  return my_malloc(bytes, device, stream);
}

void *quick_exit_alloc(ssize_t bytes, int device, void *stream) {
  if (now()) _exit(3);
  return my_malloc(bytes, device, stream);
}

/* Spins: stops only when its process is stopped. */
void *loop_alloc(ssize_t bytes, int device, void *stream) {
  if (now())
    for (volatile int spin = 1; spin;) {
    }
  return my_malloc(bytes, device, stream);
}

/* Ignores SIGTERM and SIGINT, then waits for ever. */
void *deaf_alloc(ssize_t bytes, int device, void *stream) {
  if (now()) {
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    for (;;) pause();
  }
  return my_malloc(bytes, device, stream);
}

void segv_free(void *p, ssize_t bytes, int device, void *stream) {
  if (now()) *nowhere = 1;
  my_free(p, bytes, device, stream);
}

/* As a reset hook: crashes at the end of the run, when the rest is freed. */
void segv_reset(void) { *nowhere = 1; }

/* Stops its process, as raise(SIGSTOP) does, or a write to the terminal from the background. */
void *stop_alloc(ssize_t bytes, int device, void *stream) {
  if (now()) raise(SIGSTOP);
  return my_malloc(bytes, device, stream);
}

void *ttou_alloc(ssize_t bytes, int device, void *stream) {
  if (now()) raise(SIGTTOU);
  return my_malloc(bytes, device, stream);
}

/* Writes garbage into the descriptors from 3 to last, which it never opened. */
static void scribble(int last) {
  static const char garbage[] = "\xde\xad\xbe\xef garbage from a library \x01\x02\x03";
  for (int fd = 3; fd <= last; fd++) {
    ssize_t n = write(fd, garbage, sizeof garbage);
    (void)n; /* most are closed, or refuse it */
  }
}

void *scribble_alloc(ssize_t bytes, int device, void *stream) {
  if (now()) scribble(9);
  return my_malloc(bytes, device, stream);
}

void *scribble_all_alloc(ssize_t bytes, int device, void *stream) {
  if (now()) scribble(1023);
  return my_malloc(bytes, device, stream);
}

/* Prints on stdout at every call (buffered and not) and on stderr, as a library's debugging
 * output does. */
void *chatty_alloc(ssize_t bytes, int device, void *stream) {
  static const char raw[] = "hostile: raw bytes on stdout\n";
  printf("hostile: alloc(%lld)\n", (long long)bytes);
  if (now()) {
    ssize_t n = write(STDOUT_FILENO, raw, sizeof raw - 1);
    (void)n;
    fprintf(stderr, "hostile: a word on stderr\n");
  }
  return my_malloc(bytes, device, stream);
}

/* Says why on stderr, as an assertion does, then crashes. */
void *said_segv_alloc(ssize_t bytes, int device, void *stream) {
  if (now()) {
    fprintf(stderr, "hostile: pool.c:42: carve: assertion 'block->size >= bytes' failed\n");
    *nowhere = 1;
  }
  return my_malloc(bytes, device, stream);
}
