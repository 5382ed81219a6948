#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "oommap.h"
#include "output.h"
#include "pipeline.h"
#include "registry.h"
#include "results.h"
#include "strategy.h"
#include "units.h"
#include "workload.h"

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
    "      --recorded-addresses  sim, replaying a trace: give each device allocation the address\n"
    "                        the recorded run got (ties between equal free blocks break the same way)\n"
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
    case 'o': o->out_dir = arg; break; /* checked before any work (ab_cli_check_out) */
    case 'T': o->timeline = false; break;
    case 'K': o->check = true; break;
    case 'N': o->kernels = false; break;
    case 'V': o->verify = true; break;
    case 'A': o->recorded_addresses = true; break;
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

/* The short forms of AB_CLI_COMMON_SHORTOPTS whose long options the table lists: a command
 * without -w takes no -w either. */
static void short_options(const struct option *longopts, char *out) {
  size_t n = 0;
  for (const char *c = AB_CLI_COMMON_SHORTOPTS; *c; c++) {
    if (*c == ':') continue;
    for (const struct option *l = longopts; l->name; l++)
      if (l->val == *c) {
        out[n++] = *c;
        if (l->has_arg == required_argument) out[n++] = ':';
        break;
      }
  }
  out[n] = '\0';
}

int ab_cli_parse(int argc, char **argv, ab_cli_opts_t *o, const struct option *longopts, const char *help_head,
                 const char *extra_help, ab_cli_own_fn own, void *ctx, size_t max_args, char ***args, size_t *nargs) {
  ab_diag_t diag = {""};
  char shortopts[2 * sizeof AB_CLI_COMMON_SHORTOPTS];
  short_options(longopts, shortopts);
  int opt;
  optind = 1;
  opterr = 0;
  while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
    ab_status st = AB_OK;
    if (opt == 'h') {
      fputs(help_head, stdout);
      if (extra_help) fputs(extra_help, stdout);
      fputs(ab_cli_common_help, stdout);
      return AB_EXIT_OK;
    }
    if (opt == '?' || opt == ':') {
      snprintf(diag.msg, sizeof diag.msg, "bad option '%s' (see %s --help)", argv[optind - 1], o->cmd);
      return ab_cli_usage_error(o, diag.msg);
    }
    if (!(own && own(ctx, opt, optarg, &st, &diag)) && !ab_cli_common_option(opt, optarg, o, &st, &diag))
      return ab_cli_usage_error(o, "bad option");
    if (st != AB_OK) return ab_cli_usage_error(o, diag.msg);
  }
  size_t n = (size_t)(argc - optind);
  if (n > max_args) {
    snprintf(diag.msg, sizeof diag.msg, "unexpected argument '%s'", argv[optind + (int)max_args]);
    return ab_cli_usage_error(o, diag.msg);
  }
  if (args) *args = argv + optind;
  if (nargs) *nargs = n;
  return -1;
}

int ab_cli_usage_error(const ab_cli_opts_t *o, const char *msg) {
  fprintf(stderr, "%s: %s\n", o->cmd, msg);
  return AB_EXIT_USAGE;
}

int ab_cli_fail(const ab_cli_opts_t *o, const char *msg) {
  fprintf(stderr, "%s: %s\n", o->cmd, msg);
  return AB_EXIT_FAIL;
}

void ab_cli_note_device(const ab_cli_opts_t *o, const char *name, ab_device_kind_t kind) {
  static bool said = false; /* once per process, not once per run */
  if (strcmp(o->device, "auto") == 0 && !o->quiet && !said) {
    fprintf(stderr, "%s: --device auto: using %s%s\n", o->cmd, name,
            kind == AB_DEVICE_SIM ? " (no usable GPU; the simulated card)" : "");
    said = true;
  }
}

volatile sig_atomic_t ab_cli_stop = 0;

ab_status ab_cli_build(const ab_cli_opts_t *o, const char *spec, ab_events_t *es, ab_diag_t *diag) {
  ab_build_opts_t b = {&ab_cli_stop, 0};
  return ab_workload_build_with(spec, o->seed, &b, es, diag);
}

int ab_cli_build_failed(const ab_cli_opts_t *o, ab_status st, const ab_diag_t *diag) {
  if (ab_cli_stop) return ab_cli_interrupted(o, 0, 1);
  /* Bad arguments, a missing trace, a workload too big for the host: the user's to change. */
  return st == AB_ERR_INTERNAL ? ab_cli_fail(o, diag->msg) : ab_cli_usage_error(o, diag->msg);
}

static void ask_to_stop(int sig) { ab_cli_stop = sig; }

void ab_cli_catch_stop(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = ask_to_stop;
  sa.sa_flags = SA_RESTART | SA_RESETHAND; /* writes go on; a second signal ends the process */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

int ab_cli_interrupted(const ab_cli_opts_t *o, size_t recorded, size_t planned) {
  fprintf(stderr,
          "%s: interrupted (%s): %zu of %zu runs recorded in %s/summary.csv; what was in progress was "
          "stopped and not recorded\n",
          o->cmd, ab_cli_stop == SIGTERM ? "SIGTERM" : "SIGINT", recorded, planned, o->out_dir);
  return 128 + (ab_cli_stop ? ab_cli_stop : SIGINT);
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

/* At an OOM: the segment map, then the command's own hook. */
typedef struct oom_ctx_s {
  ab_oommap_t *map;
  const ab_cli_hooks_t *hooks; /* may be NULL */
} oom_ctx_t;

static void at_oom(void *ctx, ab_strategy_t *s, const ab_run_t *run) {
  oom_ctx_t *c = ctx;
  ab_oommap_capture(c->map, s, run);
  if (c->hooks && c->hooks->at_end) c->hooks->at_end(c->hooks->ctx, s, run);
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
      fprintf(stderr, "%s: no --budget: %s runs under its suggested %s\n", o->cmd, es->source,
              ab_format_bytes(es->suggested_budget, b, sizeof b));
  }
  ab_pipeline_t p = {.device = o->device, .dev = o->dev, .strategy = strategy, .conf = o->conf};
  if (o->hooks && o->hooks->wrap) {
    p.wrap = o->hooks->wrap;
    p.wrap_ctx = o->hooks->ctx;
  }
  ab_addr_hint_t *plan = NULL;
  if (o->recorded_addresses && ab_events_address_plan(es, &plan, &p.dev.plan_len) != AB_OK)
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  p.dev.plan = plan;
  ab_world_t w;
  ab_status st = ab_pipeline_open(&p, &w, diag);
  free(plan);
  if (st != AB_OK) return st;
  ab_cli_note_device(o, w.dev->name, w.dev->kind);
  if (diag->msg[0] && !o->quiet) fprintf(stderr, "%s: note: %s\n", o->cmd, diag->msg);
  diag->msg[0] = '\0';
  char label[160];
  snprintf(label, sizeof label, "%s on %s", strategy, es->source);
  progress_t prog = {label, {0, 0}, false};
  ab_run_opts_t ro = ab_run_defaults();
  ro.timeline = o->timeline;
  ro.check = o->check;
  ro.kernels = o->kernels;
  ro.verify = o->verify;
  ro.stop = &ab_cli_stop;
  ab_oommap_t map;
  ab_oommap_init(&map);
  oom_ctx_t at_oom_ctx = {&map, o->hooks};
  ro.on_oom = at_oom;
  ro.on_oom_ctx = &at_oom_ctx;
  if (o->hooks && o->hooks->at_end) {
    ro.at_end = o->hooks->at_end;
    ro.at_end_ctx = o->hooks->ctx;
  }
  if (o->hooks && o->hooks->replay_opts) o->hooks->replay_opts(o->hooks->ctx, &ro);
  if (!o->quiet && isatty(STDERR_FILENO) && es->n > (1u << 16)) {
    ro.progress = show_progress;
    ro.progress_ctx = &prog;
  }
  ab_status rst = ab_engine_replay(es, w.s, &ro, run);
  if (prog.shown) fprintf(stderr, "\r%*s\r", (int)strlen(label) + 32, "");
  ab_status cst = ab_pipeline_close(&w, run, NULL);
  if (rst == AB_OK) rst = cst;
  const char *device_name = w.device;
  if (run->status == AB_RUN_INTERRUPTED) {
    ab_oommap_free(&map);
    return AB_OK;
  }
  ab_run_desc_t desc = {es->source, strategy, o->conf, device_name, o->dev.budget_bytes, o->seed};
  st = ab_results_add_summary(summary, &desc, es, run);
  if (st == AB_OK && o->timeline && run->status != AB_RUN_ERROR) {
    st = ab_results_write_timeline(o->out_dir, &desc, run, diag);
  }
  if (st == AB_OK && run->status == AB_RUN_OOM) {
    char path[4096];
    st = ab_oommap_write(&map, o->out_dir, es->source, strategy, path, sizeof path, diag);
    if (!o->quiet) ab_oommap_report(stderr, &run->oom, strategy, device_name, o->dev.budget_bytes, &map, path);
  }
  ab_oommap_free(&map);
  if (rst != AB_OK) {
    ab_diag_set(diag, rst, "%s", run->message);
    return rst;
  }
  return st;
}

int ab_cli_run_single(const ab_cli_opts_t *o, const ab_events_t *es, ab_run_t *run) {
  ab_diag_t diag = {""};
  ab_table_t summary;
  ab_table_init(&summary, ab_summary_cols, ab_summary_ncols);
  ab_status st = ab_cli_run_one(o, es, o->strategy, run, &summary, &diag);
  int rc = AB_EXIT_OK;
  if (run->status == AB_RUN_INTERRUPTED) {
    rc = ab_cli_interrupted(o, 0, 1);
  } else if (st != AB_OK && summary.nrows == 0) {
    /* Nothing ran: a bad conf, or no device. */
    rc = st == AB_ERR_INVALID ? ab_cli_usage_error(o, diag.msg) : ab_cli_fail(o, diag.msg);
  } else {
    ab_diag_t io = {""};
    if (ab_cli_append(o, &summary, "summary.csv", &io) != AB_OK) rc = ab_cli_fail(o, io.msg);
    ab_cli_print(o, &summary, NULL, 0);
    if (run->kernels_skipped && o->format == AB_FORMAT_TABLE)
      printf("\n%llu kernels not run (%s)\n", (unsigned long long)run->kernels_skipped,
             o->kernels ? "the simulated device runs none; step times leave out compute" : "--no-kernels");
    if (st != AB_OK) rc = ab_cli_fail(o, diag.msg);
  }
  ab_table_free(&summary);
  return rc;
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
    fprintf(stderr, "%s: %s had other columns; it was moved to %s\n", o->cmd, path, moved);
  return AB_OK;
}

ab_status ab_cli_strategies(const char *list, const char *const *confs, size_t nconfs, ab_cli_strategies_t *out,
                            ab_diag_t *diag) {
  memset(out, 0, sizeof *out);
  for (const char *p = list;;) {
    size_t len = strcspn(p, ",");
    if (len == 0)
      return ab_diag_set(diag, AB_ERR_INVALID, "-s '%s': empty strategy name at position %zu", list,
                         (size_t)(p - list) + 1);
    if (out->n == AB_CLI_MAX_STRATEGIES)
      return ab_diag_set(diag, AB_ERR_INVALID, "-s '%s': more than %d strategies", list, AB_CLI_MAX_STRATEGIES);
    if (len >= sizeof out->name[0])
      return ab_diag_set(diag, AB_ERR_INVALID, "-s '%s': strategy name at position %zu is too long", list,
                         (size_t)(p - list) + 1);
    memcpy(out->name[out->n], p, len);
    out->name[out->n][len] = '\0';
    const ab_strategy_entry_t *e;
    AB_TRY(ab_strategy_lookup(out->name[out->n], &e, diag));
    out->n++;
    if (p[len] == '\0') break;
    p += len + 1;
  }
  if (nconfs > 1 && nconfs != out->n)
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "-c given %zu times for %zu strategies: give one -c for all of them or one per strategy", nconfs,
                       out->n);
  for (size_t i = 0; i < out->n; i++) out->conf[i] = nconfs == 0 ? NULL : confs[nconfs == 1 ? 0 : i];
  return AB_OK;
}

ab_status ab_cli_check_strategies(const ab_cli_opts_t *o, const ab_bisect_opts_t *search,
                                  const ab_cli_strategies_t *list, uint64_t *total, ab_diag_t *diag) {
  ab_world_t device;
  for (size_t i = 0; i < list->n; i++) {
    ab_bisect_opts_t b = ab_cli_search_opts(o, search, list->name[i], list->conf[i]);
    ab_status st = ab_bisect_check(&b, &device, diag);
    /* With several strategies, which one's conf was refused. */
    if (st != AB_OK && list->n > 1) ab_diag_prefix(diag, "%s: ", list->name[i]);
    if (st != AB_OK) return st;
  }
  *total = device.total_bytes;
  if (list->n) ab_cli_note_device(o, device.device, device.kind);
  return AB_OK;
}

const char ab_cli_search_help[] =
    "      --lo SIZE         where the search starts (default: the workload's peak requested bytes,\n"
    "                        since nothing runs with less than its live allocations asked for)\n"
    "      --hi SIZE         where it ends (default: the bytes an unbudgeted run held at its peak)\n"
    "      --tolerance SIZE  the answer is within this of the true smallest budget (default 1MiB)\n"
    "      --cap             search PyTorch's memory cap (set_per_process_memory_fraction) instead of a\n"
    "                        budget: the caching strategies check it as PyTorch does, and expandable\n"
    "                        segments may pass it by less than a page; a budget is a card of that size\n";

bool ab_cli_search_option(int opt, const char *arg, ab_bisect_opts_t *b, ab_status *st, ab_diag_t *diag) {
  uint64_t *field;
  const char *what;
  *st = AB_OK;
  switch (opt) {
    case 'C': b->cap = true; return true;
    case 'L': field = &b->lo, what = "--lo"; break;
    case 'H': field = &b->hi, what = "--hi"; break;
    case 'O': field = &b->tolerance, what = "--tolerance"; break;
    default: return false;
  }
  *st = ab_parse_size(what, arg, field, diag);
  if (*st == AB_OK && *field == 0) *st = ab_diag_set(diag, AB_ERR_INVALID, "%s '%s': must be more than 0 bytes", what, arg);
  return true;
}

ab_bisect_opts_t ab_cli_search_opts(const ab_cli_opts_t *o, const ab_bisect_opts_t *search, const char *strategy,
                                    const char *conf) {
  ab_bisect_opts_t b = *search;
  b.strategy = strategy;
  b.conf = conf;
  b.device = o->device;
  b.dev = o->dev;
  b.check = o->check;
  b.stop = &ab_cli_stop;
  return b;
}

/* The own options of the search commands: the search's, -c once per strategy, no --budget. */
typedef struct search_args_s {
  ab_bisect_opts_t *search;
  const char *confs[AB_CLI_MAX_STRATEGIES];
  size_t nconfs;
} search_args_t;

static bool search_own(void *ctx, int opt, const char *arg, ab_status *st, ab_diag_t *diag) {
  search_args_t *a = ctx;
  if (opt == 'B') {
    *st = ab_diag_set(diag, AB_ERR_INVALID, "--budget: the search sets the budget of each run; give --lo and --hi instead");
  } else if (opt == 'c') {
    if (a->nconfs == AB_CLI_MAX_STRATEGIES)
      *st = ab_diag_set(diag, AB_ERR_INVALID, "-c given more times than there can be strategies");
    else
      a->confs[a->nconfs++] = arg;
  } else {
    return ab_cli_search_option(opt, arg, a->search, st, diag);
  }
  return true;
}

int ab_cli_search_setup(int argc, char **argv, const char *help_head, ab_cli_opts_t *o, ab_bisect_opts_t *search,
                        ab_cli_strategies_t *list, ab_events_t *es) {
  static const struct option longopts[] = {AB_CLI_COMMON_LONGOPTS, AB_CLI_SEARCH_LONGOPTS, {0, 0, 0, 0}};
  ab_diag_t diag = {""};
  memset(search, 0, sizeof *search);
  search_args_t args = {search, {NULL}, 0};
  int rc = ab_cli_parse(argc, argv, o, longopts, help_head, ab_cli_search_help, search_own, &args, 0, NULL, NULL);
  if (rc >= 0) return rc;
  if (o->workload == NULL || o->strategy == NULL)
    return ab_cli_usage_error(o, "-w WORKLOAD and -s STRATEGY[,STRATEGY...] are required");
  if (o->faults_rank >= 0) return ab_cli_usage_error(o, "--faults rank=R: only a run of several ranks (run --ranks) has ranks");
  if (ab_output_check_dir("--out", o->out_dir, &diag) != AB_OK) return ab_cli_usage_error(o, diag.msg);
  char a[32], b[32];
  if (search->lo && search->hi && search->lo > search->hi) {
    snprintf(diag.msg, sizeof diag.msg, "--lo %s is above --hi %s", ab_format_bytes(search->lo, a, sizeof a),
             ab_format_bytes(search->hi, b, sizeof b));
    return ab_cli_usage_error(o, diag.msg);
  }
  if (ab_cli_strategies(o->strategy, args.confs, args.nconfs, list, &diag) != AB_OK) return ab_cli_usage_error(o, diag.msg);
  ab_status built = ab_cli_build(o, o->workload, es, &diag);
  if (built != AB_OK) return ab_cli_build_failed(o, built, &diag);
  uint64_t total = 0;
  ab_status st = ab_cli_check_strategies(o, search, list, &total, &diag);
  if (st == AB_OK && (search->lo > total || search->hi > total))
    st = ab_diag_set(&diag, AB_ERR_INVALID, "--%s %s is more than the device's total of %s", search->hi > total ? "hi" : "lo",
                     ab_format_bytes(search->hi > total ? search->hi : search->lo, a, sizeof a),
                     ab_format_bytes(total, b, sizeof b));
  if (st != AB_OK) {
    ab_events_free(es);
    return st == AB_ERR_INVALID ? ab_cli_usage_error(o, diag.msg) : ab_cli_fail(o, diag.msg);
  }
  return -1;
}

ab_status ab_cli_search_oom(const ab_cli_opts_t *o, const ab_events_t *es, const char *strategy,
                            const ab_bisect_result_t *res, const ab_oommap_t *map, ab_diag_t *diag) {
  if (!res->failed) return AB_OK;
  char path[4096];
  ab_status st = ab_oommap_write(map, o->out_dir, es->source, strategy, path, sizeof path, diag);
  /* The failing probe ran unbudgeted only when the search found nothing that fits. */
  uint64_t budget = !res->passed && res->hi == 0 ? 0 : res->max_fail;
  if (!o->quiet) ab_oommap_report(stderr, &res->oom, strategy, res->device, budget, map, path);
  return st;
}
