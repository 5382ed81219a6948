/* trace_bench.c: how fast a recorded trace is read and replayed. Prints figures; asserts
 * nothing (speed is measured here, never tested).
 *
 * usage: trace_bench [SNAPSHOT.pickle[.gz] [CSV.trace.csv[.gz]]] (default: the recorded run
 * cnn_dyn.default in tests/data)
 *
 * Figures, each the best of several repetitions:
 *   read      the file read and gunzipped (input.h)
 *   parse     the pickle machine alone, on the decompressed bytes (pickle.h)
 *   load      read + parse + the snapshot's extraction + the trace builder (trace.h), as
 *             `allocbench replay` does it; and the same for the CSV trace
 *   replay    the events through raw on the simulated H200 (the engine with its per-call
 *             timing, as the CLI runs it), bare and wrapped in the trace adaptor
 */
#include <stdio.h>

#include "adaptor_trace.h"
#include "clock.h"
#include "device_open.h"
#include "engine.h"
#include "input.h"
#include "pickle.h"
#include "registry.h"
#include "trace.h"

#define REPS 5

static int die(const char *what, const ab_diag_t *d) {
  fprintf(stderr, "trace_bench: %s: %s\n", what, d->msg);
  return 1;
}

static void capture(void *ctx, ab_strategy_t *s, const ab_run_t *run) {
  (void)ctx;
  (void)run;
  ab_adaptor_trace_capture(s);
}

/* Best time of a replay of es through raw on sim, optionally recorded. */
static double replay(const ab_events_t *es, bool record, ab_diag_t *d) {
  double best = 1e30;
  ab_run_t run;
  if (ab_run_prepare(&run, es) != AB_OK) return -1;
  for (int r = 0; r < REPS; r++) {
    ab_device_t *dev;
    ab_strategy_t *s;
    ab_trace_log_t log;
    ab_trace_log_init(&log);
    if (ab_device_open("sim", NULL, &dev, d) != AB_OK || ab_strategy_create("raw", dev, "", &s, d) != AB_OK) return -1;
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

int main(int argc, char **argv) {
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
  double bare = replay(&es, false, &d), recorded = replay(&es, true, &d);
  if (bare < 0 || recorded < 0) return die("replay", &d);
  printf("replay  %8.2f ms  %6.2f M events/s  (raw on sim:h200, calls timed)\n", bare * 1e3, (double)es.n / bare * 1e-6);
  printf("replay  %8.2f ms  %6.2f M events/s  (the same, recorded by the trace adaptor)\n", recorded * 1e3,
         (double)es.n / recorded * 1e-6);
  ab_events_free(&es);
  ab_input_free(&in);
  return 0;
}
