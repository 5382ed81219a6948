/* micro.c: allocbench_micro, the micro-benchmarks, run by Google Benchmark (gbench.h).
 *
 * For every strategy of the registry (hidden ones excepted) it registers:
 *   alloc_free/STRATEGY/bytes:N  one allocation of N bytes and its free per iteration (timed
 *                                PAIRS_PER_BATCH at a time), for N
 *                                from 512 B to 256 MiB, on one strategy instance, so a
 *                                caching strategy serves from its cache after the first;
 *   random/STRATEGY/ops:N        RMM's random_allocations: the `random` workload's sequence
 *                                (the reference one of gpu_measurements.md) replayed through
 *                                the engine, what is left live freed at the end;
 *   replay/STRATEGY/TRACE        a recorded trace (the one in tests/data, by default), likewise.
 * The time of an iteration comes from the device timer (device.h): CUDA events on cuda; on
 * sim host time plus the modelled time of the device calls, as summary.csv's latencies
 * count it. Each benchmark call opens its own device and strategy, untimed.
 *
 * The command line: Google Benchmark's flags (its --benchmark_* namespace, and --help, which
 * prints usage() before the library's flags) go to the library; the rest is parsed by the
 * parser of every allocbench command (ab_cli_parse, cli.h) against its table, so a
 * bad option reads as it does there. With --out DIR the JSON goes to DIR/micro.json and is
 * converted to DIR/micro.csv (gbench_csv.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/base/installed.h"
#include "kernels/base/output.h"
#include "kernels/base/units.h"
#include "harness/cli/cli.h"
#include "kernels/device/device_open.h"
#include "harness/micro/gbench.h"
#include "harness/micro/gbench_csv.h"
#include "harness/run/engine.h"
#include "harness/run/pipeline.h"
#include "harness/run/results.h"
#include "harness/run/table.h"
#include "strategies/registry.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

/* The default trace: installed under PREFIX/share/allocbench (CMakeLists.txt), else the
 * source tree's this binary was built from. */
#define DEFAULT_TRACE_NAME "cnn_dyn.default.trace.csv.gz"
#define INSTALLED_TRACE "../share/allocbench/traces/" DEFAULT_TRACE_NAME
#define SOURCE_TRACE AB_TEST_DATA_DIR "/pytorch-2.11-h200/" DEFAULT_TRACE_NAME
#define RANDOM_SPEC "random"
#define RANDOM_OPS 200000 /* the random workload's default */

static const uint64_t pair_sizes_bytes[] = {512, 64 * AB_KiB, AB_MiB, 16 * AB_MiB, 256 * AB_MiB};
#define PAIRS_PER_BATCH 64

typedef struct micro_case_s {
  const char *strategy;     /* registry name */
  const char *device;       /* --device spec */
  const ab_events_t *es;    /* the stream replayed; NULL for alloc_free */
  int *failures;            /* counts benchmarks that reported an error */
} micro_case_t;

static const ab_cli_command_t command = {
    "allocbench_micro", AB_CMD_MICRO, "[--benchmark_* ...]",
    "Micro-benchmarks of every strategy, named WORKLOAD/STRATEGY/ARGS (select with\n"
    "--benchmark_filter=REGEX): alloc_free (one allocation and its free, 512 B to 256 MiB),\n"
    "random (RMM's random_allocations) and replay (a recorded trace). Google Benchmark's\n"
    "options (--benchmark_*) follow ours.\n"};

/* --help: ours, then the library's. */
static void usage(void) {
  ab_cli_help(stdout, &command);
  putchar('\n');
}

/* Reports an error to the library and counts it. */
static void fail(ab_gb_state_t *st, const micro_case_t *c, const char *what, const char *msg) {
  char buf[sizeof(ab_diag_t) + 64];
  snprintf(buf, sizeof buf, "%s: %s", what, msg);
  ab_gb_skip_with_error(st, buf);
  (*c->failures)++;
}

/* The case's device (with the cost model, which the timings read) and strategy. */
static ab_pipeline_t pipeline_of(const micro_case_t *c) {
  return (ab_pipeline_t){.device = c->device, .dev = {.cost_model = true}, .strategy = c->strategy};
}

static bool open_world(ab_gb_state_t *st, const micro_case_t *c, ab_world_t *w) {
  ab_pipeline_t p = pipeline_of(c);
  ab_diag_t diag = {""};
  if (ab_pipeline_open(&p, w, &diag) != AB_OK) {
    fail(st, c, "open", diag.msg);
    return false;
  }
  return true;
}

/* A leak fails the benchmark. */
static void close_world(ab_gb_state_t *st, const micro_case_t *c, ab_world_t *w) {
  ab_diag_t leak = {""};
  if (ab_pipeline_close(w, NULL, &leak) != AB_OK) fail(st, c, "close", leak.msg);
}

static void bench_alloc_free(ab_gb_state_t *st, void *ctx) {
  const micro_case_t *c = ctx;
  ab_world_t w;
  if (!open_world(st, c, &w)) return;
  ab_device_t *dev = w.dev;
  ab_strategy_t *s = w.s;
  uint64_t bytes = (uint64_t)ab_gb_range(st, 0);
  uint64_t allocs0 = s->stats.num_device_alloc;
  /* Pairs are timed in batches: a CUDA event pair costs about a microsecond, more than a
   * cached allocation and its free. */
  while (ab_gb_keep_running_batch(st, PAIRS_PER_BATCH)) {
    ab_dptr_t p = 0;
    double seconds = 0;
    ab_status e = ab_device_timer_start(dev, 0);
    for (int i = 0; i < PAIRS_PER_BATCH && e == AB_OK; i++) {
      e = ab_strategy_alloc(s, bytes, 0, &p);
      if (e == AB_OK) e = ab_strategy_free(s, p, bytes, 0);
    }
    if (e == AB_OK) e = ab_device_timer_stop(dev, 0, &seconds);
    if (e != AB_OK) {
      fail(st, c, ab_strerror(e), dev->diag.msg[0] ? dev->diag.msg : "alloc/free");
      break;
    }
    ab_gb_set_iteration_time(st, seconds);
  }
  ab_gb_set_items_processed(st, ab_gb_iterations(st));
  ab_gb_set_counter(st, "device_allocs", (double)(s->stats.num_device_alloc - allocs0), AB_GB_COUNTER_AVG_ITERATIONS);
  close_world(st, c, &w);
}

static void bench_replay(ab_gb_state_t *st, void *ctx) {
  const micro_case_t *c = ctx;
  ab_world_t w;
  if (!open_world(st, c, &w)) return;
  ab_device_t *dev = w.dev;
  ab_strategy_t *s = w.s;
  ab_run_t run;
  if (ab_run_prepare(&run, c->es) != AB_OK) {
    fail(st, c, "replay", "out of host memory");
    close_world(st, c, &w);
    return;
  }
  ab_run_opts_t ro = ab_run_defaults();
  ro.time_calls = false;
  ro.timeline = false;
  ro.kernels = false; /* the allocator alone */
  uint64_t allocs0 = s->stats.num_device_alloc;
  while (ab_gb_keep_running(st)) {
    double seconds = 0;
    ab_status e = ab_device_timer_start(dev, 0);
    if (e == AB_OK) e = ab_engine_replay(c->es, s, &ro, &run);
    if (e == AB_OK) e = ab_device_timer_stop(dev, 0, &seconds);
    if (e != AB_OK) {
      fail(st, c, ab_strerror(e), run.message[0] ? run.message : dev->diag.msg);
      break;
    }
    if (run.status == AB_RUN_OOM) {
      char msg[128];
      snprintf(msg, sizeof msg, "at event %zu", run.oom.event);
      fail(st, c, "out of memory", msg);
      break;
    }
    ab_gb_set_iteration_time(st, seconds);
  }
  ab_gb_set_items_processed(st, ab_gb_iterations(st) * (int64_t)c->es->n);
  ab_gb_set_counter(st, "device_allocs", (double)(s->stats.num_device_alloc - allocs0), AB_GB_COUNTER_AVG_ITERATIONS);
  ab_run_release(&run);
  close_world(st, c, &w);
}

/* The short name of a trace for benchmark names: its file name up to the first of
 * .trace / .csv / .pickle / .gz. */
static void trace_name(const char *path, char *out, size_t size) {
  ab_results_file_part(path, out, size);
  static const char *const suffixes[] = {".trace", ".csv", ".pickle", ".gz", NULL};
  for (size_t i = 0; suffixes[i]; i++) {
    char *at = strstr(out, suffixes[i]);
    if (at && at != out) *at = '\0';
  }
}

static bool own_option(void *ctx, int opt, const char *arg, ab_status *st, ab_diag_t *diag) {
  (void)diag;
  *st = AB_OK;
  if (opt != AB_OPT_TRACE) return false;
  *(const char **)ctx = arg;
  return true;
}

/* True for an argument of Google Benchmark's (see the top of this file). */
static bool library_arg(const char *arg) {
  return strncmp(arg, "--benchmark_", 12) == 0 || strcmp(arg, "--help") == 0;
}

/* Registers the benchmarks of every listed strategy; cases has room for three per entry. */
static void register_all(const char *device, const ab_events_t *random_es, const ab_events_t *trace_es,
                         const char *trace_label, micro_case_t *cases, int *failures) {
  size_t ns;
  const ab_strategy_entry_t *entries = ab_strategy_registry(&ns);
  size_t nc = 0;
  for (size_t i = 0; i < ns; i++) {
    if (entries[i].hidden) continue;
    char name[256];
    micro_case_t *pair = &cases[nc++];
    *pair = (micro_case_t){entries[i].name, device, NULL, failures};
    snprintf(name, sizeof name, "alloc_free/%s", entries[i].name);
    ab_gb_bench_t *b = ab_gb_register(name, bench_alloc_free, pair);
    for (size_t k = 0; k < sizeof pair_sizes_bytes / sizeof pair_sizes_bytes[0]; k++)
      ab_gb_arg(b, (int64_t)pair_sizes_bytes[k]);
    ab_gb_arg_name(b, "bytes");
    ab_gb_use_manual_time(b);
    ab_gb_unit(b, AB_GB_NS);

    micro_case_t *rnd = &cases[nc++];
    *rnd = (micro_case_t){entries[i].name, device, random_es, failures};
    snprintf(name, sizeof name, "random/%s/ops:%d", entries[i].name, RANDOM_OPS);
    b = ab_gb_register(name, bench_replay, rnd);
    ab_gb_use_manual_time(b);
    ab_gb_unit(b, AB_GB_MS);

    if (trace_es) {
      micro_case_t *rep = &cases[nc++];
      *rep = (micro_case_t){entries[i].name, device, trace_es, failures};
      snprintf(name, sizeof name, "replay/%s/%s", entries[i].name, trace_label);
      b = ab_gb_register(name, bench_replay, rep);
      ab_gb_use_manual_time(b);
      ab_gb_unit(b, AB_GB_MS);
    }
  }
}

int main(int argc, char **argv) {
  ab_run_spec_t o;
  ab_run_spec_defaults(&o, "allocbench_micro");
  o.device = getenv("AB_DEVICE");
  if (o.device == NULL || *o.device == '\0') o.device = "sim";
  o.out_dir = NULL; /* no --out: the console only */
  static char installed[4096];
  const char *trace = ab_installed_find(INSTALLED_TRACE, installed, sizeof installed) ? installed : SOURCE_TRACE;
  bool default_trace = true;
  ab_diag_t diag = {""};
  int rc = 0;
  ab_events_t random_es, trace_es;
  bool have_random = false, have_trace = false;
  micro_case_t *cases = NULL;
  char json_arg[4200];
  /* argv split in two, the program's name first in each: the library's (with room for the
   * two flags --out adds) and ours. */
  char **gargv = calloc((size_t)argc + 3, sizeof *gargv), **ours = calloc((size_t)argc + 1, sizeof *ours);
  if (gargv == NULL || ours == NULL) {
    free(gargv);
    free(ours);
    return AB_EXIT_FAIL;
  }
  int gargc = 0, nours = 0;
  gargv[gargc++] = ours[nours++] = argv[0];
  for (int i = 1; i < argc; i++) {
    if (library_arg(argv[i]))
      gargv[gargc++] = argv[i];
    else
      ours[nours++] = argv[i];
  }
  /* No -h for this command in the table: --help is the library's. */
  const char *given = trace;
  rc = ab_cli_parse(nours, ours, &command, &o, own_option, &trace, 0, NULL, NULL);
  if (rc >= 0) goto done;
  rc = 0;
  default_trace = trace == given;
  const char *out_dir = o.out_dir, *device = o.device;
  for (int i = 1; i < gargc && out_dir; i++) {
    if (strncmp(gargv[i], "--benchmark_out", 15) == 0) {
      snprintf(diag.msg, sizeof diag.msg, "--out writes DIR/micro.json itself; drop '%s'", gargv[i]);
      rc = ab_cli_usage_error(&o, diag.msg);
      goto done;
    }
  }
  if (out_dir) {
    /* The library writes the file; the folder must exist first. */
    if (ab_output_check_dir("--out", out_dir, &diag) != AB_OK || ab_output_mkdirs(out_dir, &diag) != AB_OK) {
      rc = ab_cli_usage_error(&o, diag.msg);
      goto done;
    }
    snprintf(json_arg, sizeof json_arg, "--benchmark_out=%s/micro.json", out_dir);
    gargv[gargc++] = json_arg;
    gargv[gargc++] = "--benchmark_out_format=json";
  }
  ab_gb_init(&gargc, gargv, usage);
  if (gargc > 1) {
    snprintf(diag.msg, sizeof diag.msg, "bad option '%s' (see allocbench_micro --help)", gargv[1]);
    rc = ab_cli_usage_error(&o, diag.msg);
    goto done;
  }

  /* Open the device once to refuse a bad spec before anything runs, and to name it. */
  ab_device_t *dev = NULL;
  ab_device_config_t cfg = {.cost_model = true};
  if (ab_device_open(device, &cfg, &dev, &diag) != AB_OK) {
    rc = ab_cli_usage_error(&o, diag.msg);
    goto done;
  }
  ab_gb_add_context("device", dev->name);
  fprintf(stderr, "%s: device %s%s\n", o.cmd, dev->name,
          dev->kind == AB_DEVICE_SIM ? " (time: host plus modelled device time)" : " (time: CUDA events)");
  ab_device_close(dev, NULL);

  if (ab_workload_build(RANDOM_SPEC, 42, &random_es, &diag) != AB_OK) {
    rc = ab_cli_fail(&o, diag.msg);
    goto done;
  }
  have_random = true;
  char trace_label[128] = "";
  if (strcmp(trace, "none") != 0) {
    char spec[4200];
    snprintf(spec, sizeof spec, "replay:%s", trace);
    if (ab_workload_build(spec, 42, &trace_es, &diag) == AB_OK) {
      have_trace = true;
      trace_name(trace, trace_label, sizeof trace_label);
      ab_gb_add_context("trace", trace);
    } else if (default_trace && access(trace, R_OK) != 0) {
      fprintf(stderr,
              "%s: no replay benchmarks: the default trace is in neither %s from this binary's folder nor %s "
              "(make install puts it in the first; --trace FILE names another)\n",
              o.cmd, INSTALLED_TRACE, SOURCE_TRACE);
    } else {
      fprintf(stderr, "%s: no replay benchmarks: %s\n", o.cmd, diag.msg);
    }
  }

  size_t ns;
  ab_strategy_registry(&ns);
  cases = calloc(ns * 3, sizeof *cases);
  if (cases == NULL) {
    rc = ab_cli_fail(&o, "out of host memory");
    goto done;
  }
  int failures = 0;
  register_all(device, &random_es, have_trace ? &trace_es : NULL, trace_label, cases, &failures);
  size_t ran = ab_gb_run();
  ab_gb_shutdown();
  if (ran == 0) {
    rc = ab_cli_fail(&o, have_trace || strcmp(trace, "none") == 0
                             ? "no benchmark matched the filter"
                             : "no benchmark matched the filter (there are no replay benchmarks: their trace is missing, see above)");
  } else if (failures) {
    snprintf(diag.msg, sizeof diag.msg, "%d benchmark(s) failed (the error column says why)", failures);
    rc = ab_cli_fail(&o, diag.msg);
  }
  if (out_dir && ran > 0) {
    char json[4200], csv[4200];
    snprintf(json, sizeof json, "%s/micro.json", out_dir);
    snprintf(csv, sizeof csv, "%s/micro.csv", out_dir);
    ab_gbench_context_t context = {""};
    if (ab_gbench_csv_convert(json, csv, &context, &diag) != AB_OK)
      rc = ab_cli_fail(&o, diag.msg);
    else
      fprintf(stderr, "%s: results in %s and %s\n", o.cmd, json, csv);
    /* Debian's libbenchmark is built so, and its warning reads as if the numbers were. */
    if (strcmp(context.library_build_type, "debug") == 0)
      fprintf(stderr,
              "%s: note: \"Library was built as DEBUG\" is Google Benchmark speaking of its own build "
              "(Debian's is); the times above come from allocbench's timer (manual time) around its own optimised "
              "code, so they are not affected\n",
              o.cmd);
  }

done:
  free(cases);
  if (have_trace) ab_events_free(&trace_es);
  if (have_random) ab_events_free(&random_es);
  free(gargv);
  free(ours);
  return rc;
}
