/* stop.c: Note [Stopping a command] (stop.h). */
#include "harness/run/stop.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernels/base/input.h"
#include "kernels/base/output.h"

volatile sig_atomic_t ab_run_stop = 0;

static const int stopping[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define NSTOPPING (sizeof stopping / sizeof stopping[0])

#define SPAWN_GRACE_S 5.0 /* how long a spawned program has to end once sent SIGTERM */

static struct timespec first_at;             /* when ab_run_stop was set */
static volatile sig_atomic_t group = 0;      /* ab_run_watch_group's */
static volatile sig_atomic_t group_sent = 0; /* the stopping signal it sent */

static double since(const struct timespec *t) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) * 1e-9;
}

/* Whether the signal came from the watched group: sent by a process (si_code SI_USER,
 * SI_QUEUE or SI_TKILL, all below 1; the kernel's, as the terminal's ^C, are above), its
 * leader or one of its members. A sender already gone is taken for someone else. */
static bool from_group(const siginfo_t *si) {
  pid_t g = (pid_t)group;
  if (g <= 0 || si == NULL || si->si_code > 0) return false;
  int saved = errno;
  bool member = si->si_pid == g || getpgid(si->si_pid) == g;
  errno = saved;
  return member;
}

/* Only async-signal-safe calls: clock_gettime, write, kill, getpgid (a plain system call),
 * sigaction, raise. */
static void on_stop(int sig, siginfo_t *si, void *context) {
  (void)context;
  if (from_group(si)) {
    group_sent = sig;
    return;
  }
  if (ab_run_stop == 0) {
    clock_gettime(CLOCK_MONOTONIC, &first_at);
    ab_run_stop = sig;
    return;
  }
  if (since(&first_at) < 1.0) return; /* the same request, delivered twice */
  static const char line[] = "allocbench: stopped at once by a second signal\n";
  ssize_t ignored = write(STDERR_FILENO, line, sizeof line - 1);
  (void)ignored;
  if (group > 0) kill(-(pid_t)group, SIGKILL);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, NULL);
  raise(sig); /* delivered as this handler returns: the process ends by it */
}

void ab_run_catch_stop(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_stop;
  sa.sa_flags = SA_RESTART | SA_SIGINFO; /* writes go on; the sender is known */
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < NSTOPPING; i++) sigaddset(&sa.sa_mask, stopping[i]);
  for (size_t i = 0; i < NSTOPPING; i++) {
    /* nohup ignores SIGHUP, and a shell without job control SIGQUIT (and SIGINT) in what it
     * starts in the background: those two stay ignored; SIGINT and SIGTERM sent to the
     * process itself (kill -INT) are always its own to answer. */
    struct sigaction old;
    bool keep = stopping[i] == SIGHUP || stopping[i] == SIGQUIT;
    if (keep && sigaction(stopping[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    sigaction(stopping[i], &sa, NULL);
  }
  ab_output_stop_on(&ab_run_stop); /* a FIFO nobody reads does not hold the command */
  ab_input_stop_on(&ab_run_stop);  /* nor one nobody writes */
}

void ab_run_watch_group(pid_t pgid) {
  group_sent = 0;
  group = pgid;
}

int ab_run_group_signal(void) { return group_sent; }

int ab_run_spawn(const char *file, char *const argv[], int fd) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    setpgid(0, 0);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (size_t i = 0; i < NSTOPPING; i++) sigaction(stopping[i], &dfl, NULL);
    if (fd >= 0 && dup2(fd, STDOUT_FILENO) < 0) _exit(127);
    execvp(file, argv);
    _exit(127);
  }
  setpgid(pid, pid); /* also here, so that a stop before the child's own call finds the group */
  ab_run_watch_group(pid);
  int status;
  struct timespec told; /* when its group was sent SIGTERM */
  bool was_told = false;
  for (;;) {
    pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) break;
    if (got < 0 && errno != EINTR) {
      ab_run_watch_group(0);
      return -1;
    }
    if (ab_run_stop && !was_told) {
      kill(-pid, SIGTERM);
      clock_gettime(CLOCK_MONOTONIC, &told);
      was_told = true;
    } else if (was_told && since(&told) > SPAWN_GRACE_S) {
      kill(-pid, SIGKILL); /* it did not stop when asked */
    }
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  ab_run_watch_group(0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}
