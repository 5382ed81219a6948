/* cmd_record.c: `allocbench record`: a PyTorch program run unchanged, its allocator's history
 * recorded as the memory snapshot that `replay` and `tune` read.
 *
 * Note [Recording a job]
 * The program is not edited. A start-up hook (harness/cli/record/sitecustomize.py, which the build
 * copies beside this binary into allocbench_record/, and make install into lib/allocbench/record/
 * of the prefix) goes first on its PYTHONPATH, so every
 * Python process of the job runs it (torchrun's workers too), and AB_RECORD_OUT tells the hook
 * that it is recording, and where to; the hook's own header says what it does. It names each
 * file it wrote, and why it wrote none, one line each, in a manifest in a private folder
 * (AB_RECORD_STATE) that lives as long as this command. When the program has ended, each file
 * named there is read back with the trace reader (trace.h) and summarised in one line.
 *
 * The hook dumps into that folder; this command then writes each snapshot where it belongs
 * with the rules of every output (output.h, Note [Writing where the user points]): a device
 * or a FIFO written straight to, a link written through, a regular file replaced whole,
 * keeping its mode and owner. An output that is an input of the job (the program, a file
 * named among its arguments, also after a '=') is refused before the job starts.
 *
 * Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to this command are forwarded to the
 * program; on the first three its hook dumps and then dies of the signal. A Ctrl-C on the
 * terminal (or a hangup) reaches the whole foreground process group, the program included, so
 * that one is not forwarded a second time (a program may take a second Ctrl-C as "stop now"). The program's exit status is this command's, 128 + N
 * for a death by signal N, so that a script or a scheduler sees the job's own outcome; a command
 * that cannot be started exits 127 (not found) or 126, as a shell does. A job that ends
 * without a snapshot written (the program never used CUDA, was killed before its hook could
 * dump, or the snapshot could not be written where -o says) exits EXIT_NO_SNAPSHOT, 125, so
 * that `record ... && tune ...` does not go on to a file that is not there.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/base/output.h"
#include "kernels/base/units.h"
#include "harness/cli/cli.h"
#include "harness/cli/commands.h"
#include "harness/run/table.h"
#include "workloads/traces/trace.h"
#include "harness/run/stop.h"

#define HOOK_DIR "allocbench_record" /* beside the binary; CMakeLists.txt copies the hook there */
#define INSTALLED_HOOK_DIR "../lib/allocbench/record" /* from PREFIX/bin, where make install puts it */
#define EXIT_CANNOT_RUN 126
#define EXIT_NOT_FOUND 127
#define EXIT_NO_SNAPSHOT 125

static const ab_cli_command_t command = {
    "allocbench record", AB_CMD_RECORD, "-- COMMAND [ARGS...]",
    "Runs a PyTorch program unchanged and records its allocator's history: a start-up hook on the\n"
    "program's PYTHONPATH switches on torch.cuda.memory._record_memory_history (with the Python\n"
    "stack of each allocation, for allocbench blame) as the program first uses CUDA, and dumps the snapshot (torch.cuda.memory._dump_snapshot) when it exits, on an\n"
    "uncaught torch.OutOfMemoryError (while the memory is still held) and on SIGTERM, SIGINT or SIGHUP.\n"
    "Under torchrun each rank writes its own file, the rank in its name (FILE.rankN.pickle).\n"
    "Then it says on stderr where it wrote and what each file holds, and exits with the program's\n"
    "exit status (128 + N when a signal N ended it), or 125 when no snapshot was written (it says\n"
    "why). -o is written as every output of allocbench is: a device or a FIFO straight to, a link\n"
    "through, a file replaced whole keeping its mode and owner; the program's own files are\n"
    "refused. Read the snapshot with\n"
    "`allocbench tune -w replay:FILE` (the best PYTORCH_CUDA_ALLOC_CONF for the job) or\n"
    "`allocbench replay FILE`.\n"};

typedef struct record_args_s {
  const char *output;
  uint64_t max_entries; /* 0: PyTorch's default, all of them */
  bool recover;         /* --recover: collect what a killed record left, run nothing */
  const char *stacks;   /* PyTorch's stacks= ("python", "all"), or "none" for context=None */
  bool stacks_given;    /* --stacks or --no-stacks was given */
} record_args_t;

static bool own_option(void *ctx, int opt, const char *arg, ab_status *st, ab_diag_t *diag) {
  record_args_t *a = ctx;
  switch (opt) {
    case 'o': a->output = arg; return true;
    case AB_OPT_RECOVER: a->recover = true; return true;
    case AB_OPT_NO_STACKS:
    case AB_OPT_STACKS:
      /* The two say opposite things: given both, which one was meant is not known. */
      if ((opt == AB_OPT_NO_STACKS) != (strcmp(a->stacks, "none") == 0) && a->stacks_given)
        *st = ab_diag_set(diag, AB_ERR_INVALID, "--stacks and --no-stacks: give one of them");
      else if (opt == AB_OPT_STACKS && strcmp(arg, "python") != 0 && strcmp(arg, "all") != 0)
        *st = ab_diag_set(diag, AB_ERR_INVALID, "--stacks '%s': expected python or all (or --no-stacks)", arg);
      a->stacks = opt == AB_OPT_NO_STACKS ? "none" : arg;
      a->stacks_given = true;
      return true;
    case AB_OPT_MAX_ENTRIES:
      /* One message for every value refused, with the range that is taken: 0 is not in it. */
      *st = ab_parse_u64("--max-entries", arg, INT64_MAX, &a->max_entries, diag);
      if (*st != AB_OK || a->max_entries == 0)
        *st = ab_diag_set(diag, AB_ERR_INVALID, "--max-entries '%s': expected a whole number of events from 1 to %lld", arg,
                          (long long)INT64_MAX);
      return true;
    default: return false;
  }
}

/* The absolute path of the snapshot, its folder made and writable: a job of hours should not
 * run for nothing. */
static ab_status output_path(const char *arg, char *out, size_t size, size_t *made, ab_diag_t *diag) {
  /* An empty path, a folder, a link to nothing, an input: refused as every output is. */
  AB_TRY(ab_output_check("-o", arg, diag));
  size_t len = strlen(arg);
  if (strpbrk(arg, "\t\n")) return ab_diag_set(diag, AB_ERR_INVALID, "-o '%s': a file name without tabs or newlines", arg);
  if (arg[len - 1] == '/') return ab_diag_set(diag, AB_ERR_INVALID, "-o '%s': expected a file, not a folder", arg);
  char cwd[PATH_MAX] = "";
  if (arg[0] != '/' && getcwd(cwd, sizeof cwd) == NULL)
    return ab_diag_set(diag, AB_ERR_IO, "-o '%s': cannot tell the current folder: %s", arg, strerror(errno));
  int n = snprintf(out, size, "%s%s%s", cwd, cwd[0] ? "/" : "", arg);
  if (n < 0 || (size_t)n >= size) return ab_diag_set(diag, AB_ERR_INVALID, "-o '%s': the path is too long", arg);
  if (ab_output_is_special(out)) return AB_OK; /* a device or a FIFO: written straight to */
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", out);
  *strrchr(dir, '/') = '\0';
  if (dir[0] == '\0') snprintf(dir, sizeof dir, "/");
  AB_TRY(ab_output_mkdirs_made(dir, made, diag));
  if (access(dir, W_OK | X_OK) != 0)
    return ab_diag_set(diag, AB_ERR_INVALID, "-o '%s': cannot write in %s: %s", arg, dir, strerror(errno));
  return AB_OK;
}

/* Whether path and the output out are one file (through any link). */
static bool same_file(const char *path, const struct stat *out) {
  struct stat sb;
  return stat(path, &sb) == 0 && sb.st_dev == out->st_dev && sb.st_ino == out->st_ino;
}

/* The program's file as execvp finds it: cmd itself when it has a '/', else the first
 * match on PATH. */
static bool program_is(const char *cmd, const struct stat *out) {
  if (strchr(cmd, '/')) return same_file(cmd, out);
  const char *path = getenv("PATH");
  for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
    size_t len = strcspn(p, ":");
    char file[PATH_MAX];
    if (snprintf(file, sizeof file, "%.*s%s%s", (int)len, p, len ? "/" : "", cmd) < (int)sizeof file &&
        access(file, X_OK) == 0)
      return same_file(file, out);
    p += len + (p[len] == ':');
  }
  return false;
}

/* Refuses an output that is an input of the job: the program, or a file named among its
 * arguments, whole or after a '=' (--config=FILE): writing there would destroy the job. */
static ab_status not_an_input(const char *arg, const char *out, char **cmd, ab_diag_t *diag) {
  struct stat sb;
  if (stat(out, &sb) != 0 || !S_ISREG(sb.st_mode)) return AB_OK; /* nothing there yet, or a device */
  if (program_is(cmd[0], &sb))
    return ab_diag_set(diag, AB_ERR_INVALID, "-o '%s': is the program '%s'; refusing to write over it", arg, cmd[0]);
  for (size_t i = 1; cmd[i]; i++) {
    const char *eq = strchr(cmd[i], '=');
    if (same_file(cmd[i], &sb) || (eq && same_file(eq + 1, &sb)))
      return ab_diag_set(diag, AB_ERR_INVALID,
                         "-o '%s': is '%s', named among the program's arguments (an input of the job); refusing to "
                         "write over it",
                         arg, cmd[i]);
  }
  return AB_OK;
}

/* The folder of the start-up hook: beside this binary in a build, in ../lib/allocbench/record
 * in an installed tree (CMakeLists.txt, install). */
static ab_status hook_dir(char *dir, size_t size, ab_diag_t *diag) {
  static const char *const places[] = {HOOK_DIR, INSTALLED_HOOK_DIR};
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return ab_diag_set(diag, AB_ERR_IO, "cannot find this binary's path (/proc/self/exe): %s", strerror(errno));
  exe[n] = '\0';
  *strrchr(exe, '/') = '\0';
  char file[PATH_MAX + 64];
  for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
    snprintf(dir, size, "%s/%s", exe, places[i]);
    snprintf(file, sizeof file, "%s/sitecustomize.py", dir);
    if (access(file, R_OK) == 0) return AB_OK;
  }
  return ab_diag_set(diag, AB_ERR_IO,
                     "the start-up hook sitecustomize.py is in neither %s/%s nor %s/%s (the build copies "
                     "harness/cli/record/sitecustomize.py to the first, make install to the second: run make)",
                     exe, HOOK_DIR, exe, INSTALLED_HOOK_DIR);
}

/* The program's environment: the hook first on its path, and what the hook reads. */
static ab_status hook_environment(const char *hook, const char *out, const char *state, uint64_t max_entries,
                                  const char *stacks, ab_diag_t *diag) {
  const char *old = getenv("PYTHONPATH");
  size_t len = strlen(hook) + (old ? strlen(old) + 1 : 0) + 1;
  char *path = malloc(len);
  if (path == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  snprintf(path, len, "%s%s%s", hook, old && *old ? ":" : "", old ? old : "");
  char entries[32];
  snprintf(entries, sizeof entries, "%" PRIu64, max_entries);
  int bad = setenv("PYTHONPATH", path, 1) | setenv("AB_RECORD_OUT", out, 1) | setenv("AB_RECORD_STATE", state, 1);
  /* Set even when it is 0, so that a record inside a recorded job does not inherit the outer one's. */
  bad |= setenv("AB_RECORD_MAX_ENTRIES", max_entries ? entries : "", 1);
  bad |= setenv("AB_RECORD_STACKS", stacks, 1);
  free(path);
  return bad ? ab_diag_set(diag, AB_ERR_INTERNAL, "cannot set the environment: %s", strerror(errno)) : AB_OK;
}

/* ---- running the program ------------------------------------------------------------------ */

static volatile sig_atomic_t child_pid = 0;

static void forward(int sig, siginfo_t *info, void *uctx) {
  (void)uctx;
  /* si_code <= 0: sent by a process to this one alone; from the terminal it is SI_KERNEL and
   * went to the program as well (Note [Recording a job]). */
  if (child_pid > 0 && info->si_code <= 0) kill((pid_t)child_pid, sig);
}

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT}; /* those that stop a command (stop.h) */
#define NFORWARDED (sizeof forwarded / sizeof forwarded[0])

/* Runs cmd and waits for it; *status is its exit status as this command returns it. On
 * failure to start it, *status is 126 or 127 and diag says why. */
static ab_status run_program(char **cmd, int *status, ab_diag_t *diag) {
  struct sigaction old[NFORWARDED], sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = forward;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigset_t block, saved;
  sigemptyset(&block);
  for (size_t i = 0; i < NFORWARDED; i++) sigaddset(&block, forwarded[i]);
  /* Until the program's pid is known, a signal waits, and is then forwarded. */
  sigprocmask(SIG_BLOCK, &block, &saved);
  for (size_t i = 0; i < NFORWARDED; i++) {
    sigaction(forwarded[i], NULL, &old[i]);
    /* A signal the command was started ignoring stays ignored, for the program too. */
    if (old[i].sa_handler != SIG_IGN) sigaction(forwarded[i], &sa, NULL);
  }
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    for (size_t i = 0; i < NFORWARDED; i++) sigaction(forwarded[i], &old[i], NULL);
    sigprocmask(SIG_SETMASK, &saved, NULL);
    *status = EXIT_CANNOT_RUN;
    return ab_diag_set(diag, AB_ERR_IO, "cannot start '%s': %s", cmd[0], strerror(errno));
  }
  pid_t pid = fork();
  if (pid == 0) {
    for (size_t i = 0; i < NFORWARDED; i++) sigaction(forwarded[i], &old[i], NULL);
    sigprocmask(SIG_SETMASK, &saved, NULL);
    ab_cli_restore_file_size_limit(); /* the job's own, as it was started with */
    execvp(cmd[0], cmd);
    int err = errno; /* the exec failed: tell the parent why */
    if (write(pipefd[1], &err, sizeof err) != (ssize_t)sizeof err) _exit(EXIT_CANNOT_RUN);
    _exit(err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN);
  }
  int fork_errno = errno;
  if (pid > 0) child_pid = pid;
  sigprocmask(SIG_SETMASK, &saved, NULL);
  close(pipefd[1]);
  if (pid < 0) {
    close(pipefd[0]);
    *status = EXIT_CANNOT_RUN;
    return ab_diag_set(diag, AB_ERR_IO, "cannot start '%s': %s", cmd[0], strerror(fork_errno));
  }
  int exec_errno = 0;
  ssize_t got;
  while ((got = read(pipefd[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  close(pipefd[0]);
  /* Wait without reaping, so that the pid cannot be reused while a signal may still be
   * forwarded to it; then stop forwarding, and reap. */
  siginfo_t info;
  while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
  child_pid = 0;
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  for (size_t i = 0; i < NFORWARDED; i++) sigaction(forwarded[i], &old[i], NULL);
  if (got == (ssize_t)sizeof exec_errno) {
    *status = exec_errno == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN;
    const char *why = exec_errno != ENOENT ? strerror(exec_errno) : strchr(cmd[0], '/') ? "no such file" : "not found on PATH";
    return ab_diag_set(diag, AB_ERR_INVALID, "cannot run '%s': %s", cmd[0], why);
  }
  *status = WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : WEXITSTATUS(ws);
  return AB_OK;
}

/* ---- what was written ---------------------------------------------------------------------- */

/* One line on a snapshot written to path, from what `replay --info` reads of its dump; verb
 * says how it got there ("wrote", "recovered"). */
static void summarise(const char *verb, const char *dump, const char *path, const char *why) {
  ab_events_t es;
  ab_trace_info_t info;
  ab_diag_t diag = {""};
  if (ab_trace_load(dump, NULL, &es, &info, &diag) != AB_OK) {
    fprintf(stderr, "allocbench record: %s %s (%s), which does not read back: %s\n", verb, path, why, diag.msg);
    return;
  }
  char requested[32], reserved[32], ooms[64] = "";
  if (es.trace_ooms)
    snprintf(ooms, sizeof ooms, ", %" PRIu64 " OOM%s in the trace", es.trace_ooms, es.trace_ooms == 1 ? "" : "s");
  fprintf(stderr,
          "allocbench record: %s %s (%s): %" PRIu64 " events, %" PRIu32 " allocations, peak requested %s, "
          "peak reserved %s in %" PRIu64 " device allocations%s, settings: %s\n",
          verb, path, why, info.records, es.nids - (info.final_oom ? 1 : 0), ab_format_bytes(info.peak_requested, requested, sizeof requested),
          ab_format_bytes(info.reserved_peak, reserved, sizeof reserved), info.device_allocs, ooms,
          es.settings[0] ? es.settings : "default");
  ab_events_free(&es);
}

/* The rank files' pattern from one of them: "DIR/job.rank1.pickle" gives "DIR/job.rank*.pickle"
 * (the hook's names, sitecustomize.py); false when path's file name has no ".rankN". */
static bool rank_pattern(const char *path, char *out, size_t size) {
  const char *base = strrchr(path, '/'), *mark = NULL;
  base = base ? base + 1 : path;
  for (const char *p = strstr(base, ".rank"); p; p = strstr(p + 1, ".rank"))
    if (p[5] >= '0' && p[5] <= '9') mark = p;
  if (mark == NULL) return false;
  const char *rest = mark + 5;
  while (*rest >= '0' && *rest <= '9') rest++;
  return (size_t)snprintf(out, size, "%.*s.rank*%s", (int)(mark - path), path, rest) < size;
}

/* Writes the dump to path by the output rules (output.h); false, with why, when it could
 * not. */
static bool place(const char *dump, const char *path, ab_diag_t *why) {
  /* The hook writes regular files: anything else there (a FIFO would wait for a writer) is
   * not its dump. */
  int fd = open(dump, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  struct stat sb;
  FILE *in = fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) ? fdopen(fd, "rb") : NULL;
  if (in == NULL) {
    ab_diag_set(why, AB_ERR_IO, "%s: cannot read the dump %s: %s", path, dump,
                fd >= 0 ? "not a regular file" : strerror(errno));
    if (fd >= 0) close(fd);
    return false;
  }
  ab_output_t o;
  if (ab_output_open(&o, path, why) != AB_OK) {
    fclose(in);
    return false;
  }
  char buf[1 << 16];
  bool ok = true;
  for (size_t n; ok && (n = fread(buf, 1, sizeof buf, in)) > 0;)
    if (fwrite(buf, 1, n, o.f) != n) ok = !ab_diag_set(why, AB_ERR_IO, "%s: write failed: %s", path, strerror(errno));
  if (ok && ferror(in)) ok = !ab_diag_set(why, AB_ERR_IO, "%s: cannot read the dump %s", path, dump);
  fclose(in);
  if (!ok) {
    ab_output_abort(&o);
    return false;
  }
  return ab_output_commit(&o, why) == AB_OK;
}

/* The processes of the job that ran the hook, from the manifest (Note [An unfinished record]). */
#define MAX_PROCS 64
typedef struct procs_s {
  long pid[MAX_PROCS];
  char exe[MAX_PROCS][256];
  bool recording[MAX_PROCS], ended[MAX_PROCS]; /* recording: used CUDA; ended: dumped, or said why not */
  size_t n;
} procs_t;

static size_t proc_of(procs_t *p, long pid) {
  for (size_t i = 0; i < p->n; i++)
    if (p->pid[i] == pid) return i;
  if (p->n == MAX_PROCS) return MAX_PROCS;
  p->pid[p->n] = pid, p->exe[p->n][0] = '\0', p->recording[p->n] = p->ended[p->n] = false;
  return p->n++;
}

/* path with ".recovered" before its extension (job.rank1.pickle: job.rank1.recovered.pickle):
 * where a snapshot collected by a later record goes, since that record's own job is about to
 * take path. */
static void recovered_name(const char *path, char *out, size_t size) {
  const char *base = strrchr(path, '/');
  const char *dot = strrchr(base ? base + 1 : path, '.');
  if (dot == NULL || dot == (base ? base + 1 : path)) snprintf(out, size, "%s.recovered", path);
  else snprintf(out, size, "%.*s.recovered%s", (int)(dot - path), path, dot);
}

/* Whether target is a name the hook gives a snapshot of out (sitecustomize.py, _name): out
 * itself, or with ".rankN", ".pidN" or both inserted before its extension (Python's
 * os.path.splitext: the last dot of the file name, unless the name starts with it). A
 * manifest is a file on disk: what it names anything else is not written to. */
static bool hook_name(const char *out, const char *target) {
  const char *base = strrchr(out, '/');
  base = base ? base + 1 : out;
  const char *start = base;
  while (*start == '.') start++;
  const char *dot = strrchr(start, '.');
  size_t root = dot ? (size_t)(dot - out) : strlen(out);
  const char *ext = out + root;
  if (strncmp(target, out, root) != 0) return false;
  const char *p = target + root;
  static const char *const marks[] = {".rank", ".pid"};
  for (size_t m = 0; m < 2; m++) {
    size_t k = strlen(marks[m]);
    if (strncmp(p, marks[m], k) != 0 || p[k] < '0' || p[k] > '9') continue;
    for (p += k; *p >= '0' && *p <= '9'; p++) {
    }
  }
  return strcmp(p, ext) == 0;
}

/* Reads the hook's manifest: writes and summarises each snapshot dumped, or says why none
 * was; the number written. out: the -o the hook was given; recovered: the snapshots are an
 * earlier record's, collected now (Note [An unfinished record]); rename: and written under
 * recovered_name. */
static size_t report(const char *state, const char *out, bool quiet, bool recovered, bool rename) {
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/manifest", state);
  FILE *f = fopen(path, "r");
  char line[2 * PATH_MAX], first[PATH_MAX] = "", ranks[PATH_MAX + 8] = "";
  char notes[4][512];
  size_t nnotes = 0, written = 0, ranked = 0;
  procs_t procs = {.n = 0};
  while (f && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    /* KIND<tab>PID<tab>REST (sitecustomize.py, _manifest_line) */
    char *kind = line, *pid = strchr(line, '\t'), *rest = pid ? strchr(pid + 1, '\t') : NULL;
    if (rest == NULL) continue;
    *pid++ = '\0', *rest++ = '\0';
    size_t p = proc_of(&procs, strtol(pid, NULL, 10));
    if (strcmp(kind, "start") == 0 && p < MAX_PROCS) {
      snprintf(procs.exe[p], sizeof procs.exe[p], "%s", rest);
    } else if (strcmp(kind, "recording") == 0 && p < MAX_PROCS) {
      procs.recording[p] = true;
    } else if (strcmp(kind, "wrote") == 0) {
      if (p < MAX_PROCS) procs.ended[p] = true;
      char *file = strchr(rest, '\t');
      if (file == NULL) continue;
      *file++ = '\0';
      char *dump = strchr(file, '\t');
      if (dump) *dump++ = '\0';
      char target[PATH_MAX + 16];
      if (rename) recovered_name(file, target, sizeof target);
      else snprintf(target, sizeof target, "%s", file);
      ab_diag_t why = {""};
      if (!hook_name(out, file) || dump == NULL || strncmp(dump, state, strlen(state)) != 0 || dump[strlen(state)] != '/') {
        if (nnotes < 4)
          snprintf(notes[nnotes++], sizeof notes[0], "%s/manifest names %s, which is not a snapshot of %s; not written",
                   state, file, out);
        continue;
      }
      if (!place(dump, target, &why)) {
        if (nnotes < 4) snprintf(notes[nnotes++], sizeof notes[0], "%s", why.msg);
        continue;
      }
      if (!quiet) summarise(recovered ? "recovered" : "wrote", dump, target, rest);
      if (written++ == 0) snprintf(first, sizeof first, "%s", target);
      char pattern[sizeof ranks];
      if (rank_pattern(target, pattern, sizeof pattern) && ranked++ == 0) snprintf(ranks, sizeof ranks, "%s", pattern);
    } else if (strcmp(kind, "note") == 0) {
      if (p < MAX_PROCS) procs.ended[p] = true;
      bool seen = false;
      for (size_t i = 0; i < nnotes; i++) seen |= strcmp(notes[i], rest) == 0;
      if (!seen && nnotes < 4) snprintf(notes[nnotes++], sizeof notes[0], "%s", rest);
    }
  }
  if (f) fclose(f);
  /* A process that started the hook and neither dumped nor said why ended where no hook runs. */
  for (size_t i = 0; i < procs.n && nnotes < 4; i++) {
    if (procs.ended[i] || procs.exe[i][0] == '\0') continue;
    snprintf(notes[nnotes++], sizeof notes[0],
             procs.recording[i] ? "%s (pid %ld) used CUDA but ended without the interpreter's exit path (os._exit, a "
                                  "crash or SIGKILL): its history was lost with it"
                                : "%s (pid %ld) ended without the interpreter's exit path (os._exit, a crash or SIGKILL) "
                                  "before it used CUDA",
             procs.exe[i], procs.pid[i]);
  }
  if (written == 0) {
    fprintf(stderr, "allocbench record: no snapshot was written%s\n",
            nnotes ? ":" : procs.n ? "" : ": no Python process of the program started the hook (is it a Python program?)");
  } else if (!quiet && ranked > 1) {
    /* A torchrun job: its ranks tuned together (harness/tune/tune_job.h, Note [A job of several traces]). */
    fprintf(stderr, "allocbench record: next: allocbench tune -w 'replay:%s'\n", ranks);
  } else if (!quiet) {
    fprintf(stderr, "allocbench record: next: allocbench tune -w replay:%s\n", first);
  }
  for (size_t i = 0; i < nnotes; i++) fprintf(stderr, "  %s\n", notes[i]);
  return written;
}

static void remove_state(const char *state) {
  DIR *d = opendir(state);
  if (d == NULL) return;
  struct dirent *e;
  char path[PATH_MAX + 300];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(path, sizeof path, "%s/%s", state, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(state);
}

/* ---- the private folder, and what a killed record left ------------------------------------ */

/* Note [An unfinished record]: the hook dumps into a private folder, and this command writes
 * each dump where -o says once the job has ended. A record killed before then (SIGKILL, the
 * OOM killer, a lost session) leaves its job running, and the job still dumps as it ends. So
 * the folder lives beside -o, named FILE.unfinished-XXXXXX: it holds this command's pid
 * (owner) and the hook's manifest. A later `record -o FILE`, before its own job starts, or
 * `record --recover -o FILE` finds the folders whose record and job processes have all ended,
 * writes their snapshots as the killed record would have, says so, and removes them; a later
 * record writes them under recovered_name, since its own job's snapshot takes FILE. A folder
 * whose job still runs is left for later, saying so. A manifest is a file on disk, read as
 * input: only the names the hook gives snapshots of FILE are written, each from a regular
 * file in the folder itself (hook_name). An output that is a device or a FIFO keeps its
 * folder in $TMPDIR instead: a stream has no place beside it to wait in. */
#define UNFINISHED ".unfinished-"

static bool alive(long pid) { return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM); }

/* Makes the private folder for the output out, and writes this command's pid into it. */
static ab_status make_state(const char *out, char *state, size_t size, ab_diag_t *diag) {
  const char *tmp = getenv("TMPDIR");
  if (ab_output_is_special(out)) snprintf(state, size, "%s/allocbench-record.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  else snprintf(state, size, "%s" UNFINISHED "XXXXXX", out);
  if (mkdtemp(state) == NULL) return ab_diag_set(diag, AB_ERR_IO, "cannot make a private folder %s: %s", state, strerror(errno));
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/owner", state);
  FILE *f = fopen(path, "w");
  bool ok = f && fprintf(f, "%ld\n", (long)getpid()) > 0;
  if (f && fclose(f) != 0) ok = false;
  return ok ? AB_OK : ab_diag_set(diag, AB_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
}

/* The first process of the folder's job (its manifest's start lines) still running; 0: none. */
static long job_running(const char *state) {
  char path[PATH_MAX + 16], line[2 * PATH_MAX];
  snprintf(path, sizeof path, "%s/manifest", state);
  FILE *f = fopen(path, "r");
  long running = 0;
  while (f && running == 0 && fgets(line, sizeof line, f)) {
    char *tab = strchr(line, '\t');
    if (tab && strncmp(line, "start\t", 6) == 0 && alive(strtol(tab + 1, NULL, 10))) running = strtol(tab + 1, NULL, 10);
  }
  if (f) fclose(f);
  return running;
}

static void remove_state(const char *state);

/* Collects the folders a killed record of out left (Note [An unfinished record]); the number
 * of snapshots written into *written, of folders found into *found. */
static void collect(const char *out, bool recover, bool quiet, size_t *written, size_t *found) {
  *written = *found = 0;
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", out);
  char *slash = strrchr(dir, '/'); /* out is absolute (output_path) */
  if (slash == NULL) return;
  const char *base = out + (slash - dir) + 1;
  *slash = '\0';
  DIR *d = opendir(dir[0] ? dir : "/");
  if (d == NULL) return;
  size_t blen = strlen(base);
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strncmp(e->d_name, base, blen) != 0 || strncmp(e->d_name + blen, UNFINISHED, strlen(UNFINISHED)) != 0) continue;
    char state[PATH_MAX + 300], owner[PATH_MAX + 320];
    snprintf(state, sizeof state, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(state, &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid()) continue;
    snprintf(owner, sizeof owner, "%s/owner", state);
    FILE *f = fopen(owner, "r");
    long pid = 0;
    if (f == NULL || fscanf(f, "%ld", &pid) != 1) pid = 0;
    if (f) fclose(f);
    if (alive(pid)) continue; /* a record at work */
    (*found)++;
    long job = job_running(state);
    if (job) {
      fprintf(stderr,
              "allocbench record: %s: left by a record that was killed; its job (pid %ld) still runs: run allocbench "
              "record --recover -o %s once it has ended\n",
              state, job, out);
      continue;
    }
    if (!quiet) fprintf(stderr, "allocbench record: %s: left by a record killed before its job ended; collecting it\n", state);
    *written += report(state, out, quiet, true, !recover);
    remove_state(state);
  }
  closedir(d);
}

/* The folders output_path made for out, those left empty (a job refused, not started, or that
 * wrote nothing). */
static void unmake(const char *out, size_t made) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", out);
  char *slash = strrchr(dir, '/');
  if (slash && slash != dir) *slash = '\0';
  ab_output_unmake(dir, made);
}

int ab_cmd_record(int argc, char **argv) {
  ab_run_spec_t o;
  ab_run_spec_defaults(&o, "allocbench record");
  /* The options end at "--"; the program and its arguments follow it untouched. */
  int dd = 1;
  while (dd < argc && strcmp(argv[dd], "--") != 0) dd++;
  record_args_t a = {"snapshot.pickle", 0, false, "python", false};
  /* Without "--", the program's words are taken as arguments here, to be refused below. */
  int rc = ab_cli_parse(dd, argv, &command, &o, own_option, &a, dd == argc ? SIZE_MAX : 0, NULL, NULL);
  if (rc >= 0) return rc;
  ab_diag_t diag = {""};
  char out[PATH_MAX];
  size_t made = 0; /* the folders of -o this command made, removed if it ends with nothing in them */
  if (a.recover) {
    if (dd < argc) return ab_cli_usage_error(&o, "--recover runs nothing: expected no program (nothing after --)");
    if (output_path(a.output, out, sizeof out, &made, &diag) != AB_OK) return ab_cli_usage_error(&o, diag.msg);
    size_t written, found;
    collect(out, true, o.quiet, &written, &found);
    if (found == 0) fprintf(stderr, "allocbench record: nothing to recover: no %s" UNFINISHED "* folder whose record has ended\n", out);
    unmake(out, made);
    return written ? AB_EXIT_OK : EXIT_NO_SNAPSHOT;
  }
  if (dd >= argc - 1) {
    return ab_cli_usage_error(&o, dd == argc ? "expected -- COMMAND [ARGS...]: the program to run, after --"
                                             : "expected the program to run after --");
  }
  ab_status st = output_path(a.output, out, sizeof out, &made, &diag);
  if (st == AB_OK) st = not_an_input(a.output, out, argv + dd + 1, &diag);
  char hook[PATH_MAX];
  if (st == AB_OK) st = hook_dir(hook, sizeof hook, &diag);
  if (st != AB_OK) {
    unmake(out, made);
    return st == AB_ERR_INVALID ? ab_cli_usage_error(&o, diag.msg) : ab_cli_fail(&o, diag.msg);
  }

  /* What an earlier record of this output left goes first, under other names: this job's
   * snapshot takes the output's. */
  size_t recovered, found;
  collect(out, false, o.quiet, &recovered, &found);
  char state[PATH_MAX + 32];
  if (make_state(out, state, sizeof state, &diag) != AB_OK ||
      hook_environment(hook, out, state, a.max_entries, a.stacks, &diag) != AB_OK) {
    remove_state(state);
    unmake(out, made);
    return ab_cli_fail(&o, diag.msg);
  }
  int status;
  if (run_program(argv + dd + 1, &status, &diag) != AB_OK) {
    ab_cli_fail(&o, diag.msg);
  } else {
    /* Writing to a FIFO nobody reads stops at a signal (output.h). */
    ab_run_catch_stop();
    size_t written = report(state, out, o.quiet, false, false);
    if (written == 0) {
      char how[64];
      if (status > 128) snprintf(how, sizeof how, "ended by signal %d", status - 128);
      else snprintf(how, sizeof how, "exited %d", status);
      fprintf(stderr, "allocbench record: the program %s; exiting %d: no snapshot\n", how, EXIT_NO_SNAPSHOT);
      status = EXIT_NO_SNAPSHOT;
    }
  }
  remove_state(state);
  unmake(out, made);
  return status;
}
