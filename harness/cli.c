#include "harness/cli.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness/results.h"
#include "strategies/strategy.h"
#include "strategies/units.h"

const char ab_cli_common_help[] =
    "      --device SPEC     auto (default: cuda if a GPU is usable, else sim), sim, sim:PROFILE,\n"
    "                        sim:SIZE, cuda, cuda:N\n"
    "      --budget SIZE     bytes the strategy may hold from the device (512, 2MiB, 40GB, 1.5GiB)\n"
    "      --seed N          seed of the workload's random draws (default 42)\n"
    "      --out DIR         where results go (default results/latest)\n"
    "      --format FMT      table (default), csv (header and rows on stdout) or json\n"
    "      --faults SPEC     sim only: nth=N (fail the Nth device allocation) or rate=F[,seed=S];\n"
    "                        with --ranks, rank=R fails only rank R's card\n"
    "      --no-timeline     do not write the timeline file\n"
    "      --check           run the strategy's invariant checks after every event (slow)\n"
    "      --no-kernels      do not launch the workload's kernels (only cuda launches them)\n"
    "      --verify          fail if two live allocations share memory: a pattern per allocation\n"
    "                        written and checked on cuda, a map of live ranges on sim (slow)\n"
    "  -q, --quiet           no progress and no notices on stderr\n"
    "  -h, --help            this help\n";

void ab_cli_defaults(ab_cli_opts_t *o, const char *cmd) {
  memset(o, 0, sizeof *o);
  o->cmd = cmd;
  o->device = "auto";
  o->out_dir = "results/latest";
  o->seed = 42;
  o->timeline = true;
  o->kernels = true;
  o->dev.cost_model = true;
  o->faults_rank = -1;
}

static ab_status parse_faults(const char *arg, ab_faults_t *f, int *rank, ab_diag_t *diag) {
  ab_kvlist_t kv;
  uint64_t r = UINT64_MAX;
  AB_TRY(ab_kv_parse("--faults", arg, '=', &kv, diag));
  AB_TRY(ab_kv_get_u64(&kv, "nth", 1, UINT64_MAX, &f->fail_nth, diag));
  AB_TRY(ab_kv_get_double(&kv, "rate", 0, 1, &f->fail_rate, diag));
  AB_TRY(ab_kv_get_u64(&kv, "seed", 0, UINT64_MAX, &f->fail_seed, diag));
  AB_TRY(ab_kv_get_u64(&kv, "rank", 0, 65535, &r, diag));
  AB_TRY(ab_kv_finish(&kv, "nth, rate, seed, rank", diag));
  *rank = r == UINT64_MAX ? -1 : (int)r;
  if (f->fail_nth == 0 && f->fail_rate == 0)
    return ab_diag_set(diag, AB_ERR_INVALID, "--faults '%s': expected nth=N or rate=F", arg);
  return AB_OK;
}

bool ab_cli_common_option(int opt, const char *arg, ab_cli_opts_t *o, ab_status *st, ab_diag_t *diag) {
  *st = AB_OK;
  switch (opt) {
    case 'w': o->workload = arg; break;
    case 's': o->strategy = arg; break;
    case 'c': o->conf = arg; break;
    case 'D': o->device = arg; break;
    case 'o': o->out_dir = arg; break;
    case 'T': o->timeline = false; break;
    case 'K': o->check = true; break;
    case 'N': o->kernels = false; break;
    case 'V': o->verify = true; break;
    case 'q': o->quiet = true; break;
    case 'B':
      *st = ab_parse_size("--budget", arg, &o->dev.budget_bytes, diag);
      if (*st == AB_OK && o->dev.budget_bytes == 0)
        *st = ab_diag_set(diag, AB_ERR_INVALID, "--budget '%s': must be more than 0 bytes", arg);
      break;
    case 'S': *st = ab_parse_u64("--seed", arg, UINT64_MAX, &o->seed, diag); break;
    case 'F': *st = parse_faults(arg, &o->dev.faults, &o->faults_rank, diag); break;
    case 'f':
      if (strcmp(arg, "table") == 0)
        o->format = AB_FORMAT_TABLE;
      else if (strcmp(arg, "csv") == 0)
        o->format = AB_FORMAT_CSV;
      else if (strcmp(arg, "json") == 0)
        o->format = AB_FORMAT_JSON;
      else
        *st = ab_diag_set(diag, AB_ERR_INVALID, "--format '%s': expected table, csv or json", arg);
      break;
    default: return false;
  }
  return true;
}

int ab_cli_usage_error(const ab_cli_opts_t *o, const char *msg) {
  fprintf(stderr, "allocbench %s: %s\n", o->cmd, msg);
  return AB_EXIT_USAGE;
}

int ab_cli_fail(const ab_cli_opts_t *o, const char *msg) {
  fprintf(stderr, "allocbench %s: %s\n", o->cmd, msg);
  return AB_EXIT_FAIL;
}

ab_status ab_cli_open_device(const ab_cli_opts_t *o, ab_device_t **out, ab_diag_t *diag) {
  AB_TRY(ab_device_open(o->device, &o->dev, out, diag));
  static bool said = false; /* once per process, not once per run */
  if (strcmp(o->device, "auto") == 0 && !o->quiet && !said) {
    fprintf(stderr, "allocbench %s: --device auto: using %s%s\n", o->cmd, (*out)->name,
            (*out)->kind == AB_DEVICE_SIM ? " (no usable GPU; the simulated card)" : "");
    said = true;
  }
  return AB_OK;
}

/* Progress on a terminal, at most ten updates a second. */
typedef struct progress_s {
  const char *label;
  struct timespec last;
  bool shown;
} progress_t;

static void show_progress(void *ctx, size_t done, size_t total) {
  progress_t *p = ctx;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  double dt = (double)(now.tv_sec - p->last.tv_sec) + (double)(now.tv_nsec - p->last.tv_nsec) * 1e-9;
  if (p->shown && dt < 0.1) return;
  p->last = now;
  p->shown = true;
  fprintf(stderr, "\r%s: %3.0f%% (%zu/%zu events)", p->label, 100.0 * (double)done / (double)total, done, total);
  fflush(stderr);
}

ab_status ab_cli_run_one(const ab_cli_opts_t *o, const ab_events_t *es, const char *strategy, ab_run_t *run,
                         ab_table_t *summary, ab_diag_t *diag) {
  if (o->faults_rank >= 0)
    return ab_diag_set(diag, AB_ERR_INVALID, "--faults rank=%d: only a run of several ranks (run --ranks) has ranks",
                       o->faults_rank);
  /* A workload built for a budget (the fragmenter) runs under it unless --budget was given. */
  ab_cli_opts_t suggested;
  if (o->dev.budget_bytes == 0 && es->suggested_budget > 0) {
    suggested = *o;
    suggested.dev.budget_bytes = es->suggested_budget;
    o = &suggested;
    char b[32];
    if (!o->quiet)
      fprintf(stderr, "allocbench %s: no --budget: %s runs under its suggested %s\n", o->cmd, es->source,
              ab_format_bytes(es->suggested_budget, b, sizeof b));
  }
  ab_device_t *dev = NULL;
  ab_strategy_t *s = NULL;
  ab_status st = ab_cli_open_device(o, &dev, diag);
  if (st != AB_OK) return st;
  st = ab_strategy_create(strategy, dev, o->conf, &s, diag);
  if (st == AB_OK && o->hooks && o->hooks->wrap) {
    st = o->hooks->wrap(o->hooks->ctx, &s, diag);
    if (st != AB_OK) ab_strategy_destroy(s);
  }
  if (st != AB_OK) {
    ab_device_close(dev, NULL);
    return st;
  }
  char label[160];
  snprintf(label, sizeof label, "%s on %s", strategy, es->source);
  progress_t prog = {label, {0, 0}, false};
  ab_run_opts_t ro = ab_run_defaults();
  ro.timeline = o->timeline;
  ro.check = o->check;
  ro.kernels = o->kernels;
  ro.verify = o->verify;
  if (o->hooks && o->hooks->at_end) {
    ro.at_end = ro.on_oom = o->hooks->at_end;
    ro.at_end_ctx = ro.on_oom_ctx = o->hooks->ctx;
  }
  if (o->hooks && o->hooks->replay_opts) o->hooks->replay_opts(o->hooks->ctx, &ro);
  if (!o->quiet && isatty(STDERR_FILENO) && es->n > (1u << 16)) {
    ro.progress = show_progress;
    ro.progress_ctx = &prog;
  }
  ab_status rst = ab_engine_replay(es, s, &ro, run);
  if (prog.shown) fprintf(stderr, "\r%*s\r", (int)strlen(label) + 32, "");
  ab_strategy_destroy(s);
  /* The device column names what ran ("sim:h200"), not what was asked for ("auto"). */
  char device_name[sizeof dev->name];
  memcpy(device_name, dev->name, sizeof device_name);
  /* A strategy that leaks device memory is a failed run, whatever it measured. */
  ab_diag_t leak = {""};
  if (ab_device_close(dev, &leak) != AB_OK && rst == AB_OK) {
    rst = AB_ERR_INVALID;
    run->status = AB_RUN_ERROR;
    run->error = rst;
    snprintf(run->message, sizeof run->message, "%s", leak.msg);
  }
  ab_run_desc_t desc = {es->source, strategy, o->conf, device_name, o->dev.budget_bytes, o->seed};
  st = ab_results_add_summary(summary, &desc, es, run);
  if (st == AB_OK && o->timeline && run->status != AB_RUN_ERROR) {
    st = ab_results_write_timeline(o->out_dir, &desc, run, diag);
  }
  if (rst != AB_OK) {
    ab_diag_set(diag, rst, "%s", run->message);
    return rst;
  }
  return st;
}

void ab_cli_print(const ab_cli_opts_t *o, const ab_table_t *t, const char *const *cols, size_t ncols) {
  switch (o->format) {
    case AB_FORMAT_CSV: ab_table_write_csv(t, stdout, true); break;
    case AB_FORMAT_JSON: ab_table_write_json(t, stdout); break;
    case AB_FORMAT_TABLE:
      if (t->nrows == 1 && cols == NULL)
        ab_table_write_pairs(t, 0, stdout);
      else
        ab_table_write_text(t, stdout, cols, ncols);
      break;
  }
  fflush(stdout);
}

ab_status ab_cli_append(const ab_cli_opts_t *o, const ab_table_t *t, const char *name, ab_diag_t *diag) {
  char path[4096], moved[4200];
  snprintf(path, sizeof path, "%s/%s", o->out_dir, name);
  AB_TRY(ab_table_append_csv(t, path, moved, sizeof moved, diag));
  if (moved[0] && !o->quiet)
    fprintf(stderr, "allocbench %s: %s had other columns; it was moved to %s\n", o->cmd, path, moved);
  return AB_OK;
}
