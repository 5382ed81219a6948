/* snapshot_bench.c: how reading a PyTorch snapshot scales with its entries. Prints figures;
 * asserts nothing (speed is measured here, never tested).
 *
 * usage: snapshot_bench [--dir DIR] [--python-max N] [--frameless | --stacks] [--reps N] [ENTRIES|FILE...]
 * (default 1000000 3000000 10000000 entries; snapshots are kept in DIR, default
 * $TMPDIR/allocbench-snapshots, and written once; a FILE, a snapshot recorded by PyTorch, is
 * measured as it is)
 *
 * Each snapshot is a long random run (random:ops=...) through caching on the simulated H200,
 * written as `allocbench replay --export-snapshot` writes it, with stack frames shaped as
 * PyTorch records them (snapshot_frames.h) so that most of the file is frames, as in real
 * snapshots, then gzipped. For each, in a process of its own, measured by wall time and peak
 * resident memory:
 *   allocbench   `allocbench replay --info FILE` (the streaming reader)
 *   tree         the whole-tree reader (gunzip, pickle.h, snapshot.c) it replaces, up to
 *                --python-max entries
 *   python3      CPython's gzip + pickle.loads of the same file, when python3 is on the PATH,
 *                up to --python-max entries (default 3000000: it needs gigabytes beyond)
 *   inflate      the file inflated alone, through the stream allocbench reads it with: the floor
 * Each is run --reps times (default 5; the tree reader and python3, which take seconds, 3),
 * taking turns, and its figures are the best run's (its wall time, with that run's processor
 * time; the peak memory is the largest of all): a busy machine only ever adds to a run, so the
 * fastest is the nearest to what the reader costs. A second line gives the median wall time of
 * each over the same turns, and their ratios. The speedup (python3 over allocbench) and
 * allocbench over inflate are ratios of figures measured in the same run, which a busy
 * machine moves less than the figures.
 * --frameless writes snapshots without stack frames, as `allocbench record` writes them
 * (context=None): then the parse, not the frames, is what the reader's time is.
 * --stacks measures what keeping the call stacks costs: for each number of entries, the
 * snapshot with frames and the one without (the same run, so the same entries), each read by
 * `allocbench replay --info` in alternate turns (--reps, default 9), and prints the median
 * times and their ratio, "framed X s, frameless Y s, ratio Z", with each one's fastest run
 * and peak memory. Medians, not the fastest: the ratio of two readers that a busy machine
 * slows alike is what is asked for, and a median of alternate turns moves least. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef AB_HAVE_ZLIB
#include <zlib.h>
#endif

#include "kernels/base/clock.h"
#include "kernels/base/input.h"
#include "tests/snapshot_frames.h"
#include "workloads/traces/snapshot.h"
#include "workloads/traces/trace.h"

#define MAX_SIZES 16

static uint64_t file_bytes(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

/* Runs argv as a child; its wall time, processor time (user and system, all threads) and peak
 * resident bytes; false when it failed. */
static bool measure(char *const argv[], double *secs, double *cpu, uint64_t *peak) {
  double t0 = ab_clock_s();
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    if (freopen("/dev/null", "w", stdout) == NULL) _exit(127);
    execvp(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) != pid) return false;
  *secs = ab_clock_s() - t0;
  *cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
         (double)ru.ru_stime.tv_usec * 1e-6;
  *peak = (uint64_t)ru.ru_maxrss << 10;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

#define MAX_REPS 99

/* A command's figures over its runs: the fastest run's wall and processor time, the largest
 * peak, and every run's wall time (for the median); false when any run failed. */
typedef struct best_s {
  double secs, cpu;
  uint64_t peak;
  bool ok;
  double wall[MAX_REPS];
  int n;
} best_t;

static void best_add(best_t *b, char *const argv[]) {
  double secs = 0, cpu = 0;
  uint64_t peak = 0;
  bool ok = measure(argv, &secs, &cpu, &peak);
  if (ok && b->n < MAX_REPS) b->wall[b->n++] = secs;
  if (!ok) b->ok = false;
  else if (b->secs == 0 || secs < b->secs) {
    b->secs = secs;
    b->cpu = cpu;
  }
  if (peak > b->peak) b->peak = peak;
}

/* ---- the child modes ------------------------------------------------------------------------ */

/* Writes a snapshot of about `entries` entries at path (gzipped when zlib is there). */
static int generate(uint64_t entries, bool frames, const char *path) {
  ab_diag_t d = {""};
  /* Entries per random op, from a short run: an alloc or a free each, and segment actions. */
  const char *pilot = "/dev/null";
  size_t pilot_records = 0;
  char spec[128];
  snprintf(spec, sizeof spec, "random:ops=200000");
  char plain[4096];
  snprintf(plain, sizeof plain, "%s.tmp", path);
  if (ab_frames_export(spec, frames, plain, &pilot_records, &d) != AB_OK || pilot_records == 0) {
    fprintf(stderr, "snapshot_bench: %s: %s\n", pilot, d.msg);
    return 1;
  }
  uint64_t ops = (uint64_t)((double)entries * 200000.0 / (double)pilot_records);
  snprintf(spec, sizeof spec, "random:ops=%llu", (unsigned long long)ops);
  size_t records = 0;
  if (ab_frames_export(spec, frames, plain, &records, &d) != AB_OK) {
    fprintf(stderr, "snapshot_bench: %s\n", d.msg);
    return 1;
  }
#ifdef AB_HAVE_ZLIB
  FILE *in = fopen(plain, "rb");
  gzFile out = gzopen(path, "wb6");
  if (in == NULL || out == NULL) return 1;
  static char buf[1 << 20];
  for (size_t got; (got = fread(buf, 1, sizeof buf, in)) > 0;)
    if (gzwrite(out, buf, (unsigned)got) != (int)got) return 1;
  fclose(in);
  if (gzclose(out) != Z_OK) return 1;
  remove(plain);
#else
  if (rename(plain, path) != 0) return 1;
#endif
  return 0;
}

/* The whole-tree reader: the file gunzipped whole, parsed into a tree, read. */
static int read_tree(const char *path) {
  ab_diag_t d = {""};
  ab_input_t in;
  if (ab_input_read_capped(path, 8ULL << 30, &in, &d) != AB_OK) return 1;
  ab_events_t es;
  ab_events_init(&es);
  ab_trace_builder_t b;
  ab_trace_builder_init(&b, &es, path, true);
  ab_status st = ab_snapshot_read(path, &in, -1, &b, &d);
  ab_input_free(&in);
  st = st == AB_OK ? ab_trace_builder_finish(&b, &d) : (ab_trace_builder_discard(&b), st);
  if (st != AB_OK) fprintf(stderr, "snapshot_bench: %s\n", d.msg);
  ab_events_free(&es);
  return st != AB_OK;
}

/* Inflating alone: the file through the stream allocbench reads it with (input.h, on its
 * inflate thread), every byte consumed and nothing parsed: the floor of the import. */
static int inflate_only(const char *path) {
  ab_diag_t d = {""};
  ab_instream_t *in;
  if (ab_instream_open(path, 8ULL << 30, &in, &d) != AB_OK) return 1;
  ab_status st;
  for (;;) {
    const unsigned char *data;
    size_t avail = 0;
    if ((st = ab_instream_window(in, 1 << 16, &data, &avail, &d)) != AB_OK || avail == 0) break;
    ab_instream_consume(in, avail);
  }
  ab_instream_close(in);
  if (st != AB_OK) fprintf(stderr, "snapshot_bench: %s\n", d.msg);
  return st != AB_OK;
}

/* ---- --stacks: framed against frameless ------------------------------------------------------ */

static int by_value(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The path of the snapshot of `entries` entries in dir, written when it is not there yet. */
static bool snapshot_of(const char *self, const char *dir, uint64_t entries, bool frames, char *path, size_t size) {
  snprintf(path, size, "%s/random_%llu%s.pickle.gz", dir, (unsigned long long)entries, frames ? "" : "_frameless");
  if (file_bytes(path) > 0) return true;
  char n[32];
  snprintf(n, sizeof n, "%llu", (unsigned long long)entries);
  char *gen[] = {(char *)self, "--generate", n, frames ? "frames" : "frameless", path, NULL};
  double secs, cpu;
  uint64_t peak;
  if (measure(gen, &secs, &cpu, &peak)) return true;
  fprintf(stderr, "snapshot_bench: could not write %s\n", path);
  return false;
}

/* The framed and the frameless snapshot of `entries` entries read in alternate turns. */
static int framed_against_frameless(const char *self, const char *dir, uint64_t entries, int reps) {
  char paths[2][4096];
  for (int f = 0; f < 2; f++)
    if (!snapshot_of(self, dir, entries, f == 0, paths[f], sizeof paths[f])) return 1;
  double wall[2][MAX_REPS], cpu[2][MAX_REPS], fastest[2] = {0, 0};
  uint64_t peak[2] = {0, 0};
  if (reps > MAX_REPS) reps = MAX_REPS;
  for (int r = 0; r < reps; r++)
    for (int k = 0; k < 2; k++) {
      int f = (r + k) % 2; /* each goes first in every other turn */
      char *argv[] = {AB_ALLOCBENCH, "replay", "--info", "--max-inflated", "8GiB", paths[f], NULL};
      uint64_t rss = 0;
      if (!measure(argv, &wall[f][r], &cpu[f][r], &rss)) {
        fprintf(stderr, "snapshot_bench: allocbench replay --info %s failed\n", paths[f]);
        return 1;
      }
      if (fastest[f] == 0 || wall[f][r] < fastest[f]) fastest[f] = wall[f][r];
      if (rss > peak[f]) peak[f] = rss;
    }
  double w[2], c[2];
  for (int f = 0; f < 2; f++) {
    w[f] = median(wall[f], reps);
    c[f] = median(cpu[f], reps);
  }
  printf("%llu entries: framed %.3f s, frameless %.3f s, ratio %.2f (medians of %d alternate turns each; processor "
         "%.3f s and %.3f s, ratio %.2f; fastest %.3f s and %.3f s; peaks %.0f MB and %.0f MB)\n",
         (unsigned long long)entries, w[0], w[1], w[0] / w[1], reps, c[0], c[1], c[0] / c[1], fastest[0], fastest[1],
         (double)peak[0] / 1e6, (double)peak[1] / 1e6);
  fflush(stdout);
  return 0;
}

/* ---- the table ------------------------------------------------------------------------------- */

/* python3's own executable (a launcher such as pyenv's shim would add its start-up to the
 * figures); false when there is none. */
static bool find_python(char *out, size_t size) {
  FILE *p = popen("python3 -c 'import sys, gzip, pickle; print(sys.executable)' 2>/dev/null", "r");
  if (p == NULL) return false;
  bool ok = fgets(out, (int)size, p) != NULL;
  pclose(p);
  out[strcspn(out, "\n")] = '\0';
  return ok && out[0] == '/';
}

int main(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[1], "--generate") == 0)
    return generate(strtoull(argv[2], NULL, 10), strcmp(argv[3], "frames") == 0, argv[4]);
  if (argc == 3 && strcmp(argv[1], "--read-tree") == 0) return read_tree(argv[2]);
  if (argc == 3 && strcmp(argv[1], "--inflate") == 0) return inflate_only(argv[2]);
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char dir[2048];
  snprintf(dir, sizeof dir, "%s/allocbench-snapshots", tmp);
  uint64_t sizes[MAX_SIZES] = {0}, python_max = 3000000;
  int reps = 5;
  bool frames = true, stacks = false, reps_given = false;
  const char *files[MAX_SIZES] = {NULL}; /* files[i] set: measured as it is, sizes[i] unused */
  size_t nsizes = 0;
  for (int i = 1; i < argc; i++) {
    char *end;
    uint64_t n = strtoull(argv[i], &end, 10);
    if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) snprintf(dir, sizeof dir, "%s", argv[++i]);
    else if (strcmp(argv[i], "--frameless") == 0) frames = false;
    else if (strcmp(argv[i], "--stacks") == 0) stacks = true;
    else if (strcmp(argv[i], "--python-max") == 0 && i + 1 < argc) python_max = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0) reps = atoi(argv[++i]), reps_given = true;
    else if (nsizes < MAX_SIZES && n > 0 && *end == '\0') sizes[nsizes++] = n;
    else if (nsizes < MAX_SIZES && file_bytes(argv[i]) > 0) files[nsizes++] = argv[i];
    else {
      fprintf(stderr, "usage: %s [--dir DIR] [--python-max N] [--frameless | --stacks] [--reps N] [ENTRIES|FILE...]\n",
              argv[0]);
      return 2;
    }
  }
  if (stacks && !frames) {
    fprintf(stderr, "snapshot_bench: --stacks measures both, with frames and without: leave out --frameless\n");
    return 2;
  }
  if (nsizes == 0) {
    sizes[nsizes++] = 1000000;
    sizes[nsizes++] = 3000000;
    sizes[nsizes++] = 10000000;
  }
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "snapshot_bench: %s: %s\n", dir, strerror(errno));
    return 1;
  }
  if (stacks) {
    for (size_t i = 0; i < nsizes; i++) {
      if (files[i] != NULL) {
        fprintf(stderr, "snapshot_bench: --stacks writes its own snapshots, with frames and without: give ENTRIES\n");
        return 2;
      }
      if (framed_against_frameless(argv[0], dir, sizes[i], reps_given ? reps : 9) != 0) return 1;
    }
    return 0;
  }
  char py_exe[4096];
  bool python = find_python(py_exe, sizeof py_exe);
  printf("%10s %7s %7s | %16s %7s %8s | %16s %7s | %16s %7s | %13s | %16s %9s\n", "entries", "gz MB", "pickle",
         "allocbench s", "peak MB", "us/entry", "tree s", "peak MB", "python3 s", "peak MB", "speedup", "inflate s",
         "allocbench");
  printf("%10s %7s %7s | %16s %7s %8s | %16s %7s | %16s %7s | %13s | %16s %9s\n", "", "", "MB", "wall (cpu)", "", "wall",
         "wall (cpu)", "", "wall (cpu)", "", "wall (cpu)", "wall (cpu)", "/ inflate");
  for (size_t i = 0; i < nsizes; i++) {
    char path[4096], n[32];
    snprintf(path, sizeof path, "%s/random_%llu%s.pickle.gz", dir, (unsigned long long)sizes[i],
             frames ? "" : "_frameless");
    if (files[i] != NULL) snprintf(path, sizeof path, "%s", files[i]);
    snprintf(n, sizeof n, "%llu", (unsigned long long)sizes[i]);
    double secs, cpu;
    uint64_t peak;
    if (files[i] == NULL && file_bytes(path) == 0) {
      char *gen[] = {argv[0], "--generate", n, frames ? "frames" : "frameless", path, NULL};
      if (!measure(gen, &secs, &cpu, &peak)) {
        fprintf(stderr, "snapshot_bench: could not write %s\n", path);
        return 1;
      }
    }
    /* The entries and the inflated size, as allocbench reads them. */
    ab_events_t es;
    ab_trace_info_t info;
    ab_diag_t d = {""};
    ab_trace_opts_t opts = {.device = -1, .max_inflated = 8ULL << 30};
    if (ab_trace_load(path, &opts, &es, &info, &d) != AB_OK) {
      fprintf(stderr, "snapshot_bench: %s\n", d.msg);
      return 1;
    }
    ab_events_free(&es);
    ab_input_t whole;
    uint64_t inflated = ab_input_read_capped(path, 8ULL << 30, &whole, &d) == AB_OK ? whole.len : 0;
    ab_input_free(&whole);
    char *ours[] = {AB_ALLOCBENCH, "replay", "--info", "--max-inflated", "8GiB", path, NULL};
    char *tree[] = {argv[0], "--read-tree", path, NULL};
    char *py[] = {py_exe, "-c", "import gzip, pickle, sys; pickle.loads(gzip.open(sys.argv[1]).read())", path, NULL};
    char *infl[] = {argv[0], "--inflate", path, NULL};
    bool slow_too = info.records <= python_max;
    best_t a = {.ok = true}, t = {.ok = slow_too}, py_best = {.ok = python && slow_too}, in = {.ok = true};
    for (int r = 0; r < reps; r++) { /* in turns, so that a busy spell weighs on all alike */
      best_add(&a, ours);
      best_add(&in, infl);
      if (r < 3 && t.ok) best_add(&t, tree);
      if (r < 3 && py_best.ok) best_add(&py_best, py);
    }
    double a_s = a.secs, a_cpu = a.cpu, t_s = t.secs, t_cpu = t.cpu, p_s = py_best.secs, p_cpu = py_best.cpu;
    uint64_t a_rss = a.peak, t_rss = t.peak, p_rss = py_best.peak;
    bool a_ok = a.ok, t_ok = t.ok, p_ok = py_best.ok;
    double i_s = in.secs, i_cpu = in.cpu;
    bool i_ok = in.ok;
    char infl_s[32] = "-", over[32] = "-";
    if (i_ok) snprintf(infl_s, sizeof infl_s, "%.2f (%.2f)", i_s, i_cpu);
    if (i_ok && a_ok) snprintf(over, sizeof over, "%.1fx", a_s / i_s);
    char ours_s[32], tree_s[32] = "-", tree_rss[32] = "-", py_s[32] = "-", py_rss[32] = "-", speedup[32] = "-";
    snprintf(ours_s, sizeof ours_s, "%.2f (%.2f)%s", a_s, a_cpu, a_ok ? "" : "!");
    if (t_ok) {
      snprintf(tree_s, sizeof tree_s, "%.2f (%.2f)", t_s, t_cpu);
      snprintf(tree_rss, sizeof tree_rss, "%.0f", (double)t_rss / 1e6);
    }
    if (p_ok) {
      snprintf(py_s, sizeof py_s, "%.2f (%.2f)", p_s, p_cpu);
      snprintf(py_rss, sizeof py_rss, "%.0f", (double)p_rss / 1e6);
      if (a_ok) snprintf(speedup, sizeof speedup, "%.1fx (%.1fx)", p_s / a_s, p_cpu / a_cpu);
    }
    printf("%10llu %7.1f %7.1f | %16s %7.0f %8.3f | %16s %7s | %16s %7s | %13s | %16s %9s\n",
           (unsigned long long)info.records, (double)file_bytes(path) / 1e6, (double)inflated / 1e6, ours_s,
           (double)a_rss / 1e6, a_s / (double)info.records * 1e6, tree_s, tree_rss, py_s, py_rss, speedup, infl_s, over);
    /* The medians of the same turns, which a busy spell moves less than it moves the fastest. */
    double a_m = a.n ? median(a.wall, a.n) : 0, p_m = py_best.n ? median(py_best.wall, py_best.n) : 0;
    double i_m = in.n ? median(in.wall, in.n) : 0, t_m = t.n ? median(t.wall, t.n) : 0;
    printf("%10s medians of the turns: allocbench %.2f s (%d), tree %.2f s (%d), python3 %.2f s (%d), inflate %.2f s "
           "(%d); python3 / allocbench %.1fx, allocbench / inflate %.1fx\n",
           "", a_m, a.n, t_m, t.n, p_m, py_best.n, i_m, in.n, a_m > 0 ? p_m / a_m : 0, i_m > 0 ? a_m / i_m : 0);
    fflush(stdout);
  }
  return 0;
}
