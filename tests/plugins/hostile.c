/* hostile.c: test plugins that take their process down, one way each: a crash, an abort,
 * exit and _exit, a loop, a library deaf to SIGTERM and SIGINT, one that stops its process
 * (SIGSTOP, SIGTTOU), one whose thread freezes the process between its calls (supervise.h);
 * and plugins that reach past their calls: into the descriptors they find (3 to 9, or every
 * one up to 1023, closed or replaced), onto stdout and stderr, allocbench itself (SIGTERM),
 * the process's working folder and umask, processes of their own that outlive the run. Each
 * alloc function misbehaves on its call number AB_HOSTILE_AT (default 100), so that the run is
 * under way when it does, and, when AB_HOSTILE_READY names a file, creates it first: the
 * test's cue that the library is in its loop. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
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
void *freeze_alloc(ssize_t bytes, int device, void *stream);
void freeze_free(void *p, ssize_t bytes, int device, void *stream);
void *term_alloc(ssize_t bytes, int device, void *stream);
void *wander_alloc(ssize_t bytes, int device, void *stream);
void *fork_alloc(ssize_t bytes, int device, void *stream);
void *fork_segv_alloc(ssize_t bytes, int device, void *stream);
void *close_all_alloc(ssize_t bytes, int device, void *stream);
void *null_all_alloc(ssize_t bytes, int device, void *stream);
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

/* A thread that sends the process's first thread SIGUSR1 every 50 us, then every 2 ms once
 * it froze; the handler never returns when none of the library's calls runs: the process is
 * frozen in allocbench's own code, between two of its calls. Whether a call runs is read where allocbench's watch reads
 * it, the word it shares with its parent (the mapping named allocbench-watch), so that the
 * freeze is never in a call that has just returned. */
static volatile uint64_t *watch_word;
static uint64_t alloc_call, free_call; /* the word's low byte in alloc, in free */
static atomic_int poking, started, frozen;
static pthread_t first_thread, poker;

static volatile uint64_t *find_watch_word(void) {
  FILE *maps = fopen("/proc/self/maps", "r");
  char line[512];
  unsigned long at = 0;
  while (maps && at == 0 && fgets(line, sizeof line, maps))
    if (strstr(line, "allocbench-watch") && sscanf(line, "%lx", &at) != 1) at = 0;
  if (maps) fclose(maps);
  return (volatile uint64_t *)(uintptr_t)at;
}

static void freeze_between_calls(int sig) {
  (void)sig;
  uint64_t call = watch_word ? *watch_word & 0xff : 0;
  if (watch_word && (call == alloc_call || call == free_call)) return;
  atomic_store(&frozen, 1);
  for (;;) pause();
}

static void *poke(void *arg) {
  (void)arg;
  struct timespec soon = {0, 50 * 1000}, two_ms = {0, 2 * 1000 * 1000};
  atomic_store(&started, 1);
  while (atomic_load(&poking)) {
    pthread_kill(first_thread, SIGUSR1);
    nanosleep(atomic_load(&frozen) ? &two_ms : &soon, NULL);
  }
  return NULL;
}

/* Its thread gone before its code is. */
__attribute__((destructor)) static void stop_poking(void) {
  if (atomic_exchange(&poking, 0)) pthread_join(poker, NULL);
}

void *freeze_alloc(ssize_t bytes, int device, void *stream) {
  if (now()) {
    watch_word = find_watch_word();
    if (watch_word) alloc_call = *watch_word & 0xff;
    signal(SIGUSR1, freeze_between_calls);
    first_thread = pthread_self();
    atomic_store(&poking, 1);
    pthread_create(&poker, NULL, poke, NULL);
    while (!atomic_load(&started)) {
    }
  }
  return my_malloc(bytes, device, stream);
}

void freeze_free(void *p, ssize_t bytes, int device, void *stream) {
  if (watch_word) free_call = *watch_word & 0xff;
  my_free(p, bytes, device, stream);
}

/* Sends allocbench SIGTERM, once per load. */
void *term_alloc(ssize_t bytes, int device, void *stream) {
  if (now()) kill(getppid(), SIGTERM);
  return my_malloc(bytes, device, stream);
}

/* Moves its process to / and makes whatever it creates unreadable to all. */
void *wander_alloc(ssize_t bytes, int device, void *stream) {
  if (now()) {
    if (chdir("/") != 0) abort();
    umask(0777);
  }
  return my_malloc(bytes, device, stream);
}

/* Starts a process that sleeps 300 s, its pid appended to the file AB_HOSTILE_PIDS names. */
static void fork_sleeper(void) {
  pid_t pid = fork();
  if (pid == 0) {
    sleep(300);
    _exit(0);
  }
  const char *pids = getenv("AB_HOSTILE_PIDS");
  FILE *f = pids ? fopen(pids, "a") : NULL;
  if (f) {
    fprintf(f, "%d\n", (int)pid);
    fclose(f);
  }
}

void *fork_alloc(ssize_t bytes, int device, void *stream) {
  if (now()) fork_sleeper();
  return my_malloc(bytes, device, stream);
}

void *fork_segv_alloc(ssize_t bytes, int device, void *stream) {
  if (now()) {
    fork_sleeper();
    *nowhere = 1;
  }
  return my_malloc(bytes, device, stream);
}

/* Closes every descriptor up to 1023, or puts /dev/null in its place. */
void *close_all_alloc(ssize_t bytes, int device, void *stream) {
  if (now())
    for (int fd = 0; fd < 1024; fd++) close(fd);
  return my_malloc(bytes, device, stream);
}

void *null_all_alloc(ssize_t bytes, int device, void *stream) {
  if (now()) {
    int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 1024; fd++)
      if (fd != null) dup2(null, fd);
  }
  return my_malloc(bytes, device, stream);
}
