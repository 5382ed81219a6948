/* trace_bench.c: how fast a recorded trace is read and replayed. Prints figures; asserts
 * nothing (speed is measured here, never tested).
 *
 * usage: trace_bench [--anchor ALLOCBENCH] [SNAPSHOT.pickle[.gz] [CSV.trace.csv[.gz]]]
 * (default: the recorded run cnn_dyn.default in tests/data)
 *
 * Figures, each the best of several repetitions:
 *   read      the file read and gunzipped (input.h)
 *   parse     the pickle machine alone, on the decompressed bytes (pickle.h)
 *   load      read + parse + the snapshot's extraction + the trace builder (trace.h), as
 *             `allocbench replay` does it; and the same for the CSV trace
 *   replay    the events through raw and caching on the simulated H200 (the engine with its
 *             per-call timing, as the CLI runs it), raw also wrapped in the trace adaptor
 *   cli       `allocbench replay -s caching|raw SNAPSHOT` of this build, its events/s as it
 *             reports them (the replay loop alone), the fastest of TURNS runs, and, with
 *             --anchor, the same of another build of allocbench (tests/bench/anchor_build.sh COMMIT
 *             DIR makes one), the two runs taking turns: the ratio of the fastest runs, and
 *             the median of the turns' ratios. A shared machine moves one run of a few tens of
 *             milliseconds by a third either way, so one pair proves little; the median of
 *             many turns is what it does not move.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/base/clock.h"
#include "kernels/base/input.h"
#include "kernels/device/device_open.h"
#include "harness/run/engine.h"
#include "strategies/common/adaptor_trace.h"
#include "strategies/registry.h"
#include "workloads/traces/pickle.h"
#include "workloads/traces/trace.h"

#define REPS 5
#define TURNS 11

static int die(const char *what, const ab_diag_t *d) {
  fprintf(stderr, "trace_bench: %s: %s\n", what, d->msg);
  return 1;
}

static void capture(void *ctx, ab_strategy_t *s, const ab_run_t *run) {
  (void)ctx;
  (void)run;
  ab_adaptor_trace_capture(s);
}

/* Best time of a replay of es through strategy on sim, optionally recorded. */
static double replay(const ab_events_t *es, const char *strategy, bool record, ab_diag_t *d) {
  double best = 1e30;
  ab_run_t run;
  if (ab_run_prepare(&run, es) != AB_OK) return -1;
  for (int r = 0; r < REPS; r++) {
    ab_device_t *dev;
    ab_strategy_t *s;
    ab_trace_log_t log;
    ab_trace_log_init(&log);
    if (ab_device_open("sim", NULL, &dev, d) != AB_OK || ab_strategy_create(strategy, dev, "", &s, d) != AB_OK) return -1;
    if (record && ab_adaptor_trace_create(s, &log, &s) != AB_OK) return -1;
    ab_run_opts_t ro = ab_run_defaults();
    ro.timeline = false;
    if (record) ro.at_end = capture;
    double t0 = ab_clock_s();
    ab_engine_replay(es, s, &ro, &run);
    double t = ab_clock_s() - t0;
    if (t < best) best = t;
    ab_strategy_destroy(s);
    ab_device_close(dev, NULL);
    ab_trace_log_free(&log);
  }
  ab_run_release(&run);
  return best;
}

/* The events/s `BIN replay -s strategy --format csv trace` reports (its events_per_s
 * column: the replay loop alone); 0 when it fails. */
static double cli_events_per_s(const char *bin, const char *strategy, const char *trace) {
  char out[] = "/tmp/trace_bench.XXXXXX";
  if (mkdtemp(out) == NULL) return 0;
  int fd[2];
  if (pipe(fd) != 0) return 0;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    close(fd[1]);
    execl(bin, bin, "replay", "-s", strategy, "--format", "csv", "--no-timeline", "-q", "--out", out, trace, (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  static char buf[1 << 16];
  size_t len = 0;
  for (ssize_t got; len + 1 < sizeof buf && (got = read(fd[0], buf + len, sizeof buf - 1 - len)) > 0;) len += (size_t)got;
  buf[len] = '\0';
  close(fd[0]);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 0;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", out);
  if (system(cmd) != 0) return 0;
  /* The header names the column; the last line is the run. */
  char *rows = strchr(buf, '\n');
  if (rows == NULL) return 0;
  *rows++ = '\0';
  int col = 0, want = -1;
  for (char *h = strtok(buf, ","); h; h = strtok(NULL, ","), col++)
    if (strcmp(h, "events_per_s") == 0) want = col;
  char *last = rows, *nl;
  while ((nl = strchr(last, '\n')) != NULL && nl[1] != '\0') last = nl + 1;
  col = 0;
  for (char *c = last; want >= 0 && c; c = strchr(c, ','), c = c ? c + 1 : NULL, col++)
    if (col == want) return strtod(c, NULL);
  return 0;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  const char *anchor = NULL;
  if (argc > 2 && strcmp(argv[1], "--anchor") == 0) {
    anchor = argv[2];
    argc -= 2;
    argv += 2;
  }
  const char *pickle = argc > 1 ? argv[1] : AB_TEST_DATA_DIR "/pytorch-2.11-h200/cnn_dyn.default.pickle.gz";
  const char *csv = argc > 2 ? argv[2] : AB_TEST_DATA_DIR "/pytorch-2.11-h200/cnn_dyn.default.trace.csv.gz";
  ab_diag_t d = {""};
  ab_input_t in;
  double read_s = 1e30, parse_s = 1e30, load_s = 1e30, csv_s = 1e30;
  for (int r = 0; r < REPS; r++) {
    double t0 = ab_clock_s();
    if (ab_input_read(pickle, &in, &d) != AB_OK) return die(pickle, &d);
    double t1 = ab_clock_s();
    ab_pickle_t pk;
    if (ab_pickle_parse(pickle, in.data, in.len, &pk, &d) != AB_OK) return die(pickle, &d);
    double t2 = ab_clock_s();
    ab_pickle_free(&pk);
    if (t1 - t0 < read_s) read_s = t1 - t0;
    if (t2 - t1 < parse_s) parse_s = t2 - t1;
    if (r + 1 < REPS) ab_input_free(&in);
  }
  ab_events_t es, ces;
  ab_trace_info_t info;
  for (int r = 0; r < REPS; r++) {
    double t0 = ab_clock_s();
    if (ab_trace_load(pickle, NULL, &es, &info, &d) != AB_OK) return die(pickle, &d);
    double t1 = ab_clock_s();
    if (ab_trace_load(csv, NULL, &ces, NULL, &d) != AB_OK) return die(csv, &d);
    double t2 = ab_clock_s();
    if (t1 - t0 < load_s) load_s = t1 - t0;
    if (t2 - t1 < csv_s) csv_s = t2 - t1;
    ab_events_free(&ces);
    if (r + 1 < REPS) ab_events_free(&es);
  }
  double rec = (double)info.records, mb = (double)in.len / 1e6;
  printf("trace   %s: %.0f records, %.2f MB of pickle, %zu events to replay\n", pickle, rec, mb, es.n);
  printf("read    %8.2f ms  (file and gunzip)\n", read_s * 1e3);
  printf("parse   %8.2f ms  %7.1f MB/s  %6.2f M records/s  (pickle machine alone)\n", parse_s * 1e3, mb / parse_s,
         rec / parse_s * 1e-6);
  printf("load    %8.2f ms  %6.2f M records/s  (snapshot: read, parse, extract, build)\n", load_s * 1e3,
         rec / load_s * 1e-6);
  printf("load    %8.2f ms  %6.2f M records/s  (CSV trace of the same run)\n", csv_s * 1e3, rec / csv_s * 1e-6);
  double bare = replay(&es, "raw", false, &d), recorded = replay(&es, "raw", true, &d);
  double caching = replay(&es, "caching", false, &d);
  if (bare < 0 || recorded < 0 || caching < 0) return die("replay", &d);
  printf("replay  %8.2f ms  %6.2f M events/s  (raw on sim:h200, calls timed)\n", bare * 1e3, (double)es.n / bare * 1e-6);
  printf("replay  %8.2f ms  %6.2f M events/s  (the same, recorded by the trace adaptor)\n", recorded * 1e3,
         (double)es.n / recorded * 1e-6);
  printf("replay  %8.2f ms  %6.2f M events/s  (caching on sim:h200, calls timed)\n", caching * 1e3,
         (double)es.n / caching * 1e-6);
  ab_events_free(&es);
  ab_input_free(&in);
  /* The CLI of this build and of the anchor, taking turns. */
  static const char *const strategies[] = {"caching", "raw"};
  for (size_t k = 0; k < 2; k++) {
    double ours = 0, theirs = 0, ratio[TURNS];
    for (int r = 0; r < TURNS; r++) {
      double a = cli_events_per_s(AB_ALLOCBENCH, strategies[k], pickle);
      double b = anchor ? cli_events_per_s(anchor, strategies[k], pickle) : 0;
      if (a > ours) ours = a;
      if (b > theirs) theirs = b;
      ratio[r] = b > 0 ? a / b : 0;
    }
    if (ours <= 0) return die("allocbench replay", &(ab_diag_t){"failed"});
    printf("cli     %-8s %6.2f M events/s", strategies[k], ours * 1e-6);
    qsort(ratio, TURNS, sizeof *ratio, by_value);
    if (anchor && theirs > 0 && ratio[0] > 0)
      printf("  anchor %6.2f M events/s  ratio %.2fx, median of %d turns %.2fx (%.2f-%.2f)  (%s)", theirs * 1e-6,
             ours / theirs, TURNS, ratio[TURNS / 2], ratio[0], ratio[TURNS - 1], anchor);
    else if (anchor)
      printf("  anchor failed (%s)", anchor);
    printf("\n");
  }
  return 0;
}
