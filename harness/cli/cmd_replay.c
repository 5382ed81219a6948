/* cmd_replay.c: `allocbench replay`: a recorded trace through one strategy, recorded; or,
 * with --info, what the trace holds. With --export-trace / --export-snapshot the run itself
 * is written out, with the strategy's own segment decisions (a trace adaptor wraps the
 * strategy: strategies/common/adaptor_trace.h). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels/base/output.h"
#include "kernels/base/units.h"
#include "harness/cli/cli.h"
#include "harness/cli/commands.h"
#include "harness/cli/trace_info.h"
#include "kernels/device/cuda_device.h"
#include "harness/run/results.h"
#include "strategies/common/adaptor_trace.h"
#include "strategies/registry.h"
#include "strategies/strategy.h"
#include "workloads/traces/snapshot.h"
#include "workloads/traces/trace.h"
#include "workloads/traces/trace_csv.h"
#include "harness/tune/tune_grid.h"
#include "harness/run/stop.h"

static const ab_cli_command_t command = {
    "allocbench replay", AB_CMD_REPLAY, "TRACE",
    "Replays a recorded trace through a strategy, prints the result and appends it to DIR/summary.csv,\n"
    "as `allocbench run -w replay:TRACE` does; with --info, prints what the trace holds instead. The\n"
    "trace's format is recognised from its content: a PyTorch memory snapshot (the pickle\n"
    "torch.cuda.memory._dump_snapshot() writes), allocbench's CSV trace (action,addr,size,stream,time_us),\n"
    "or an RMM logging_resource_adaptor log; plain or gzipped. Blocks that were live before the trace\n"
    "began are created at its start.\n"};

/* ---- --info ------------------------------------------------------------------------------ */

static int print_info(const ab_run_spec_t *o, const char *path, const ab_events_t *es, const ab_trace_info_t *in) {
  ab_cli_trace_info_t r;
  ab_cli_trace_info(path, es, in, &r);
  ab_table_t t;
  ab_table_init(&t, r.cols, r.n);
  const char *cells[AB_CLI_INFO_MAX_COLS];
  for (size_t i = 0; i < r.n; i++) cells[i] = r.cells[i];
  if (es->approximate[0]) fprintf(stderr, "%s: %s: approximate: %s\n", o->cmd, path, es->approximate);
  if (in->saturated)
    fprintf(stderr, "%s: note: %s: its sizes add up past 2^64 bytes; such figures are shown as %" PRIu64 "\n",
            o->cmd, path, UINT64_MAX);
  int rc = ab_table_add(&t, cells) == AB_OK ? AB_EXIT_OK : ab_cli_fail(o, "out of host memory");
  if (rc == AB_EXIT_OK && o->format == AB_FORMAT_TABLE)
    ab_cli_trace_info_write(&r, stdout);
  else if (rc == AB_EXIT_OK)
    ab_cli_print(o, &t, NULL, 0);
  ab_table_free(&t);
  return rc;
}

/* ---- exports ------------------------------------------------------------------------------ */

typedef struct export_s {
  ab_trace_log_t log;
} export_t;

/* The conf the strategy was given: its preset, then the user's. */
static void full_conf(const char *strategy, const char *conf, char *out, size_t size) {
  const ab_strategy_entry_t *e = ab_strategy_find(strategy);
  const char *preset = e && e->preset ? e->preset : "";
  if (conf == NULL) conf = "";
  snprintf(out, size, "%s%s%s", preset, *preset && *conf ? "," : "", conf);
}

static int write_exports(const ab_run_spec_t *o, const export_t *x, const ab_events_t *es, const ab_trace_info_t *in,
                         const char *trace_path, const char *snapshot_path) {
  ab_diag_t diag = {""};
  if (!x->log.captured || x->log.failed)
    return ab_cli_fail(o, x->log.failed ? "the run's record is incomplete (out of host memory): nothing exported"
                                        : "the run ended before its record was taken: nothing exported");
  if (trace_path && ab_trace_write_csv(trace_path, &x->log, in->stream_values, in->nstreams, &diag) != AB_OK)
    return ab_cli_fail(o, diag.msg);
  if (snapshot_path) {
    char conf[1024];
    full_conf(o->strategy, o->conf, conf, sizeof conf);
    /* Each alloc's call stack written back, when the trace held them (Note [Stacks written back]). */
    ab_snapshot_stacks_t stacks;
    ab_snapshot_stacks_init(&stacks, es);
    ab_status st = ab_snapshot_write_frames(snapshot_path, &x->log, in->stream_values, in->nstreams, conf,
                                            ab_strategy_is_pytorch(o->strategy),
                                            es->stacks ? ab_snapshot_write_stacks : NULL, &stacks, &diag);
    ab_snapshot_stacks_free(&stacks);
    if (st != AB_OK) return ab_cli_fail(o, diag.msg);
  }
  return AB_EXIT_OK;
}

/* The export paths, refused before the run where writing them would harm something
 * (Note [Writing where the user points]) or where both name one file. */
static ab_status check_exports(const ab_run_spec_t *o, const char *trace_path, const char *snapshot_path,
                               ab_diag_t *diag) {
  if (trace_path) AB_TRY(ab_output_check("--export-trace", trace_path, diag));
  if (snapshot_path) AB_TRY(ab_output_check("--export-snapshot", snapshot_path, diag));
  if (trace_path) AB_TRY(ab_output_check_folder("--export-trace", trace_path, diag));
  if (snapshot_path) AB_TRY(ab_output_check_folder("--export-snapshot", snapshot_path, diag));
  if (trace_path) AB_TRY(ab_cli_check_not_results(o, "--export-trace", trace_path, diag));
  if (snapshot_path) AB_TRY(ab_cli_check_not_results(o, "--export-snapshot", snapshot_path, diag));
  struct stat a, b;
  bool same = trace_path && snapshot_path &&
              (strcmp(trace_path, snapshot_path) == 0 ||
               (stat(trace_path, &a) == 0 && stat(snapshot_path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino));
  if (same)
    return ab_diag_set(diag, AB_ERR_INVALID, "--export-trace '%s' and --export-snapshot '%s' name the same file", trace_path,
                       snapshot_path);
  return AB_OK;
}

/* ---- the command -------------------------------------------------------------------------- */

/* Note [Recorded addresses]: the caching allocator breaks ties between free blocks of one size
 * by address, so where the driver put each segment decides which block a request gets, and,
 * through that, which segments garbage collection and the release of oversize blocks free.
 * The simulated card places segments as the driver does (Note [Driver placement],
 * kernels/device/sim_place.c), but not the holes that the CUDA context and libraries
 * leave before a program's first segment, which some runs' first segments fill. A trace
 * records where each segment went, so replaying the run as it was recorded (caching, its
 * settings, no other budget) on the simulated card takes each cudaMalloc's address from the
 * trace; under other settings the run differs and the card places segments itself. On a GPU
 * the driver places them, always. */
static bool as_recorded(const ab_run_spec_t *o, const ab_events_t *es) {
  const char *dev = o->device && *o->device ? o->device : "auto";
  bool sim = strcmp(dev, "auto") == 0 ? !ab_device_cuda_usable() : strncmp(dev, "sim", 3) == 0;
  if (!sim || strcmp(o->strategy, "caching") != 0 || o->dev.budget_bytes != 0 || o->conf == NULL) return false;
  /* A per_process_memory_fraction in -c is the cap, as --cap is (Note [One grammar for a cap],
   * cli.c), and a run under --cap takes the recorded addresses: the fraction on either side
   * is left out of the comparison. */
  char mine[AB_TUNE_CONF_BYTES], theirs[AB_TUNE_CONF_BYTES], fraction[64];
  ab_tune_split_fraction(o->conf, mine, sizeof mine, fraction, sizeof fraction);
  ab_tune_split_fraction(es->settings, theirs, sizeof theirs, fraction, sizeof fraction);
  const char *x = mine, *y = theirs;
  for (;; x++, y++) { /* equal but for spaces */
    while (*x == ' ') x++;
    while (*y == ' ') y++;
    if (*x != *y) return false;
    if (*x == '\0') break;
  }
  for (size_t i = 0; i < es->nsegs; i++)
    if (es->segs[i].action == AB_TR_SEGMENT_ALLOC) return true;
  return false;
}

/* replay's own options. */
typedef struct replay_args_s {
  ab_trace_opts_t topts;
  bool info_only;
  bool sim_addresses; /* --sim-addresses */
  const char *export_trace, *export_snapshot;
} replay_args_t;

static bool own_option(void *ctx, int opt, const char *arg, ab_status *st, ab_diag_t *diag) {
  replay_args_t *a = ctx;
  switch (opt) {
    case AB_OPT_INFO: a->info_only = true; return true;
    case AB_OPT_SIM_ADDRESSES: a->sim_addresses = true; return true;
    case AB_OPT_EXPORT_TRACE: a->export_trace = arg; return true;
    case AB_OPT_EXPORT_SNAPSHOT: a->export_snapshot = arg; return true;
    case AB_OPT_MAX_INFLATED:
      *st = ab_parse_size("--max-inflated", arg, &a->topts.max_inflated, diag);
      if (*st == AB_OK && a->topts.max_inflated == 0)
        *st = ab_diag_set(diag, AB_ERR_INVALID, "--max-inflated '%s': must be more than 0 bytes", arg);
      return true;
    case AB_OPT_TRACE_DEVICE: {
      uint64_t d = 0;
      *st = ab_parse_u64("--trace-device", arg, 1023, &d, diag);
      a->topts.device = (int)d;
      return true;
    }
    default: return false;
  }
}

int ab_cmd_replay(int argc, char **argv) {
  ab_run_spec_t o;
  ab_run_spec_defaults(&o, "allocbench replay");
  ab_diag_t diag = {""};
  replay_args_t a = {.topts = {.device = -1}};
  char **args;
  size_t nargs;
  int rc = ab_cli_parse(argc, argv, &command, &o, own_option, &a, 1, &args, &nargs);
  if (rc >= 0) return rc;
  if (nargs == 0) return ab_cli_usage_error(&o, "expected the trace to replay (see allocbench replay --help)");
  if (a.sim_addresses && o.recorded_addresses)
    return ab_cli_usage_error(&o, "--sim-addresses and --recorded-addresses: choose one");
  ab_trace_opts_t topts = a.topts;
  bool info_only = a.info_only;
  const char *export_trace = a.export_trace, *export_snapshot = a.export_snapshot;
  const char *path = args[0];
  /* --info describes the trace and runs nothing: an option of a run beside it would be dropped
   * unseen (an export expected and never written). */
  const char *dropped = !info_only                  ? NULL
                        : export_trace              ? "--export-trace"
                        : export_snapshot           ? "--export-snapshot"
                        : o.strategy                ? "-s"
                        : o.dev.budget_bytes        ? "--budget"
                        : o.cap                     ? "--cap"
                                                    : NULL;
  if (dropped) {
    char msg[160];
    snprintf(msg, sizeof msg, "--info describes the trace and runs nothing: %s is for a replay (drop one of them)", dropped);
    return ab_cli_usage_error(&o, msg);
  }
  /* --info writes nothing. */
  if (!info_only && ab_results_check_out(o.out_dir, &diag) != AB_OK) return ab_cli_usage_error(&o, diag.msg);
  ab_run_catch_stop();

  ab_events_t es;
  ab_trace_info_t info;
  topts.decisions_only = info_only; /* a trace of decisions alone can be described */
  if (ab_run_trace_limits(&o, &topts.cap, &topts.card, &diag) != AB_OK) return ab_cli_usage_error(&o, diag.msg);
  if (ab_trace_load(path, &topts, &es, &info, &diag) != AB_OK) return ab_cli_usage_error(&o, diag.msg);
  /* Before the run, not after it: the trace now counts as an input (output.h), also where
   * --out holds it under a name the run writes (summary.csv), as run -w replay: says. */
  if (check_exports(&o, export_trace, export_snapshot, &diag) != AB_OK ||
      (!info_only && ab_results_check_inputs(o.out_dir, &diag) != AB_OK)) {
    ab_events_free(&es);
    return ab_cli_usage_error(&o, diag.msg);
  }
  if (info_only) {
    rc = print_info(&o, path, &es, &info);
    ab_events_free(&es);
    return rc;
  }

  if (es.approximate[0]) fprintf(stderr, "%s: %s: approximate: %s\n", o.cmd, path, es.approximate);
  if (o.strategy == NULL) o.strategy = ab_strategy_find("caching") ? "caching" : "raw";
  if (o.conf == NULL && strcmp(o.strategy, "caching") == 0) {
    o.conf = es.settings;
    if (!o.quiet)
      fprintf(stderr, "allocbench replay: -s caching -c '%s' (the recorded settings%s)\n", o.conf,
              o.conf[0] ? "" : ": PyTorch's defaults");
  }
  if (!a.sim_addresses && as_recorded(&o, &es)) o.recorded_addresses = true; /* said once the card is open */
  const ab_strategy_entry_t *entry;
  if (ab_strategy_lookup(o.strategy, &entry, &diag) != AB_OK) {
    ab_events_free(&es);
    return ab_cli_usage_error(&o, diag.msg);
  }
  export_t x;
  ab_trace_log_init(&x.log);
  ab_run_hooks_t hooks = {.record = &x.log};
  if (export_trace || export_snapshot) o.hooks = &hooks;

  ab_run_t run;
  if (ab_run_prepare(&run, &es) != AB_OK) {
    ab_events_free(&es);
    return ab_cli_fail(&o, "out of host memory");
  }
  /* A trace with segment events (a snapshot, a CSV trace from one) recorded PyTorch's peak. */
  if (info.device_allocs) o.recorded_peak_reserved = info.reserved_peak;
  rc = ab_cli_run_single(&o, &es, &run);
  if (rc == AB_EXIT_OK && o.hooks) rc = write_exports(&o, &x, &es, &info, export_trace, export_snapshot);
  ab_trace_log_free(&x.log);
  ab_run_release(&run);
  ab_events_free(&es);
  return rc;
}
