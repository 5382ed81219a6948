/* cmd_run.c: `allocbench run`: one workload through one strategy, recorded; with --ranks,
 * the zero workload as several ranks (ranks.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/base/output.h"
#include "kernels/base/units.h"
#include "harness/cli/cli.h"
#include "harness/cli/commands.h"
#include "harness/ranks/ranks.h"
#include "harness/run/results.h"
#include "strategies/registry.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"
#include "harness/run/stop.h"

static const ab_cli_command_t command = {
    "allocbench run", AB_CMD_RUN, NULL,
    "Replays the workload's events through the strategy, prints the result and appends it to\n"
    "DIR/summary.csv, and the memory over time to DIR/timeline_<run>.csv: <run> is\n"
    "<workload>[_conf-<hash>]_<strategy>, the workload's short name, a hash of the settings\n"
    "when -c gives some, and the strategy.\n"
    "An OOM is a result: the row says where and why, the report on stderr explains it, the\n"
    "segment map at that moment goes to DIR/oommap_<run>.csv (plots/oommap.gp draws it), and\n"
    "the command exits 0. With --ranks, the zero workload runs as several ranks.\n"};

/* The columns the text table shows for several ranks. */
static const char *const rank_cols[] = {"workload",    "status",      "peak_allocated_bytes", "peak_reserved_bytes",
                                        "num_device_alloc", "num_ooms", "step_ms_p50",          "nccl_bytes"};

/* A watchdog's end of a wait nothing else can end (Note [Bounded waits]): nothing has been
 * recorded yet, so the process can go at once. */
static void give_up_now(int code, const char *why) {
  fprintf(stderr, "allocbench run: %s; nothing recorded\n", why);
  fflush(stderr);
  _exit(code);
}

/* `run --ranks`: the ranks' rows and the combined one, printed and appended. */
static int run_ranks(const ab_run_spec_t *o, const ab_ranks_opts_t *ro) {
  ab_table_t summary;
  ab_table_init(&summary, ab_summary_cols, ab_summary_ncols);
  ab_diag_t diag = {""};
  unsigned world = ro->link ? ro->link->world : ro->n, n = 0;
  ab_rank_result_t *results = calloc(world, sizeof *results);
  if (results == NULL) return ab_cli_fail(o, "out of host memory");
  ab_status st = ab_ranks_run(o, ro, &summary, results, &n, &diag);
  int rc = AB_EXIT_OK;
  if (ab_run_stop) { /* the ranks stopped part way: nothing to record; say what they waited for */
    fprintf(stderr, "allocbench run: %s; nothing recorded\n", diag.msg[0] ? diag.msg : "interrupted");
    rc = 128 + ab_run_stop;
  } else if (summary.nrows == 0) {
    if (st != AB_OK)
      rc = st == AB_ERR_INVALID ? ab_cli_usage_error(o, diag.msg) : ab_cli_fail(o, diag.msg);
    else if (!o->quiet) /* a launched rank other than 0 */
      fprintf(stderr, "allocbench run: rank %u of %u done; rank 0 writes the results\n", ro->link->rank, world);
  } else {
    ab_diag_t io = {""};
    if (ab_cli_append(o, &summary, "summary.csv", &io) != AB_OK) rc = ab_cli_fail(o, io.msg);
    if (o->format == AB_FORMAT_TABLE)
      ab_cli_print(o, &summary, rank_cols, sizeof rank_cols / sizeof rank_cols[0]);
    else
      ab_cli_print(o, &summary, NULL, 0);
    for (unsigned i = 0; i < n && o->format == AB_FORMAT_TABLE; i++) {
      const ab_run_t *run = &results[i].run;
      if (run->status == AB_RUN_OOM)
        printf("\nrank %u: OOM at event %zu (%s): %s\n", i, run->oom.event, ab_oom_kind_name(run->oom.kind),
               run->oom.message);
      else if (run->status == AB_RUN_STOPPED || run->status == AB_RUN_ERROR)
        printf("\nrank %u: %s\n", i, run->message[0] ? run->message : results[i].diag);
    }
    if (n && results[0].run.kernels_skipped && o->format == AB_FORMAT_TABLE)
      printf("\n%llu kernels not run on rank 0 (%s)\n", (unsigned long long)results[0].run.kernels_skipped,
             o->kernels ? "the simulated card runs none: no collective moved data" : "--no-kernels");
    if (st != AB_OK) rc = ab_cli_fail(o, diag.msg);
  }
  free(results);
  ab_table_free(&summary);
  return rc;
}

/* `run --ranks env`: this process is one rank of a launch (launch.h, Note [Which launcher]),
 * joined through the launcher's engine (link.h) for the run. */
static int run_launched(const ab_run_spec_t *o, ab_ranks_opts_t *ro) {
  ab_diag_t diag = {""};
  ab_launch_t launch;
  if (ab_launch_from_env(&launch, &diag) != AB_OK) return ab_cli_usage_error(o, diag.msg);
  /* Refused before the meeting, which may wait for the others a long time. */
  if (o->device && strncmp(o->device, "cuda:", 5) == 0) {
    snprintf(diag.msg, sizeof diag.msg,
             "--device %s: with --ranks env each rank drives the GPU of its rank on its host; give --device cuda", o->device);
    return ab_cli_usage_error(o, diag.msg);
  }
  if (launch.kind == AB_LAUNCH_NONE)
    return ab_cli_usage_error(o, "--ranks env: no launcher started this process (mpirun or srun set OMPI_COMM_WORLD_RANK, "
                                 "PMI_RANK, PMIX_RANK or SLURM_PROCID; torchrun sets RANK, WORLD_SIZE, MASTER_ADDR and "
                                 "MASTER_PORT); on one host, --ranks N runs N ranks as threads");
  ab_status st = ab_link_open(&launch, &ro->waits, &ro->link, &diag);
  if (st != AB_OK) {
    if (ab_run_stop) {
      fprintf(stderr, "allocbench run: %s; nothing recorded\n", diag.msg);
      return 128 + ab_run_stop;
    }
    return st == AB_ERR_INVALID ? ab_cli_usage_error(o, diag.msg) : ab_cli_fail(o, diag.msg);
  }
  ab_run_catch_stop(); /* again: MPI's start may have set its own handlers */
  int rc = run_ranks(o, ro);
  ro->link->ops->close(ro->link, !ab_run_stop);
  return rc;
}

/* run's own options: --ranks, --nccl and --collective-timeout. */
typedef struct run_args_s {
  const char *ranks, *nccl, *collective_timeout;
} run_args_t;

static bool own_option(void *ctx, int opt, const char *arg, ab_status *st, ab_diag_t *diag) {
  run_args_t *a = ctx;
  (void)st;
  (void)diag;
  if (opt == AB_OPT_RANKS) a->ranks = arg;
  else if (opt == AB_OPT_NCCL) a->nccl = arg;
  else if (opt == AB_OPT_COLLECTIVE_TIMEOUT) a->collective_timeout = arg;
  else return false;
  return true;
}

int ab_cmd_run(int argc, char **argv) {
  run_args_t a = {NULL, NULL, NULL};
  ab_run_spec_t o;
  ab_run_spec_defaults(&o, "allocbench run");
  ab_diag_t diag = {""};
  int rc = ab_cli_parse(argc, argv, &command, &o, own_option, &a, 0, NULL, NULL);
  if (rc >= 0) return rc;
  const char *ranks = a.ranks, *nccl = a.nccl;
  if (o.workload == NULL || o.strategy == NULL) return ab_cli_usage_error(&o, "-w WORKLOAD and -s STRATEGY are required");
  if (ab_results_check_out(o.out_dir, &diag) != AB_OK) return ab_cli_usage_error(&o, diag.msg);
  ab_run_catch_stop();
  const ab_strategy_entry_t *entry;
  if (ab_strategy_lookup(o.strategy, &entry, &diag) != AB_OK) return ab_cli_usage_error(&o, diag.msg);
  if (nccl && ranks == NULL) return ab_cli_usage_error(&o, "--nccl: only runs of several ranks (--ranks) use NCCL");
  if (a.collective_timeout && ranks == NULL)
    return ab_cli_usage_error(&o, "--collective-timeout: only runs of several ranks (--ranks) have collectives");
  if (ranks) {
    ab_ranks_opts_t ro;
    memset(&ro, 0, sizeof ro);
    ro.nccl = nccl ? nccl : getenv("AB_NCCL_LIBRARY");
    if (ab_waits_from_env(&ro.waits, &diag) != AB_OK ||
        (a.collective_timeout &&
         ab_parse_seconds("--collective-timeout", a.collective_timeout, &ro.waits.collective_s, &diag) != AB_OK))
      return ab_cli_usage_error(&o, diag.msg);
    ro.waits.stop = &ab_run_stop;
    ro.waits.give_up = give_up_now;
    ro.say = o.quiet ? NULL : stderr;
    ro.waits.say_as = o.quiet ? NULL : o.cmd;
    uint64_t n = 0;
    if (strcmp(ranks, "env") == 0) return run_launched(&o, &ro);
    if (ab_parse_u64("--ranks", ranks, AB_RANKS_MAX, &n, &diag) != AB_OK || n == 0) {
      snprintf(diag.msg, sizeof diag.msg, "--ranks '%s': expected 1 to %d ranks, or env", ranks, AB_RANKS_MAX);
      return ab_cli_usage_error(&o, diag.msg);
    }
    ro.n = (unsigned)n;
    return run_ranks(&o, &ro);
  }
  ab_events_t es;
  ab_status built = ab_run_build(&o, o.workload, &es, NULL, &diag);
  if (built != AB_OK) return ab_cli_build_failed(&o, built, &diag);
  ab_run_t run;
  if (ab_run_prepare(&run, &es) != AB_OK) {
    ab_events_free(&es);
    return ab_cli_fail(&o, "out of host memory");
  }
  rc = ab_cli_run_single(&o, &es, &run);
  ab_run_release(&run);
  ab_events_free(&es);
  return rc;
}
