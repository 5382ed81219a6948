/* replay.c: a recorded trace as a workload: `-w replay:PATH`. The format is recognised from
 * the content (trace.h); the seed plays no part. */
#include "workloads/replay.h"

#include "workloads/traces/trace.h"

static ab_status read_trace(const char *args, const ab_build_opts_t *opts, ab_events_t *out, ab_diag_t *diag) {
  if (args == NULL || *args == '\0')
    return ab_diag_set(diag, AB_ERR_INVALID, "-w replay: expected replay:PATH, the trace to replay");
  ab_events_free(out);
  ab_trace_opts_t topts = {.device = -1, .cap = opts->cap, .card = opts->card};
  return ab_trace_load(args, &topts, out, opts->info, diag);
}

const ab_workload_t ab_workload_replay = {
    .name = "replay",
    .summary = "a recorded trace: replay:PATH (PyTorch snapshot, allocbench CSV trace or RMM log; plain or gzipped)",
    .params_help = "  PATH           the trace file; its format is recognised from its content\n",
    /* The recorded run that ships with the repository (tests/data/README.md). */
    .bench_args = AB_TEST_DATA_DIR "/pytorch-2.11-h200/cnn_dyn.default.trace.csv.gz",
    .read = read_trace,
};
