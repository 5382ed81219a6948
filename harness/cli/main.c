/* main.c: `allocbench`, the command. Dispatches to the subcommands of commands.h. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ab_version.h" /* generated at build time (harness/cli/version.cmake) */
#include "harness/cli/cli.h"
#include "harness/cli/commands.h"
#include "harness/run/apart.h"
#include "harness/run/supervise.h"
#include "harness/run/stop.h"

static const struct {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *summary;
} commands[] = {
    {"list", ab_cmd_list, "strategies, workloads and simulated cards, one line each (-v: their options)"},
    {"run", ab_cmd_run, "run a workload through a strategy and record the result"},
    {"oom", ab_cmd_oom, "the smallest budget under which a workload runs, per strategy, and why it fails below"},
    {"compare", ab_cmd_compare, "strategies side by side: peak reserved, smallest budget, fragmentation, latency"},
    {"matrix", ab_cmd_matrix, "run every strategy on every workload of a list, with a summary table"},
    {"replay", ab_cmd_replay, "replay a recorded trace (PyTorch snapshot, CSV, RMM log) through a strategy; --info"},
    {"record", ab_cmd_record, "run a PyTorch program unchanged and record its allocator's history (a snapshot)"},
    {"blame", ab_cmd_blame, "which code holds the memory at the peak or the OOM, and what changing it would save"},
    {"tune", ab_cmd_tune, "the PYTORCH_CUDA_ALLOC_CONF that suits a recorded job, ranked, with the line to paste"},
    {"report", ab_cmd_report, "one page to share for a results folder of tune, compare, matrix or oom"},
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: allocbench COMMAND [OPTIONS]\n\n"
          "A benchmark and stress test of GPU memory allocator strategies.\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "\n`allocbench COMMAND --help` (or `allocbench help COMMAND`) describes each command;\n"
             "`allocbench --version` says which build this is.\n");
}

/* A result may exist only on stdout (--format csv > file): a write that failed there fails
 * the command, with a line, even when everything else went well. */
static int close_stdout(const char *cmd, int rc) {
  bool failed = ferror(stdout) != 0;
  errno = 0;
  if (fclose(stdout) != 0) failed = true;
  if (!failed) return rc;
  fprintf(stderr, "allocbench %s: writing to stdout failed%s%s\n", cmd, errno ? ": " : "", errno ? strerror(errno) : "");
  return rc ? rc : AB_EXIT_FAIL;
}

int main(int argc, char **argv) {
  ab_cli_ignore_file_size_limit(); /* Note [A file size limit] (cli.h) */
  if (argc == 2 && strcmp(argv[1], AB_SUPERVISE_ARG) == 0) return ab_apart_child();
  ab_supervise_enable();
  if (argc < 2) {
    usage(stderr);
    return AB_EXIT_USAGE;
  }
  if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
    printf("allocbench %s (commit %s)\nbuilt with: %s\n", AB_VERSION, AB_COMMIT, AB_BUILD_OPTIONS);
    return close_stdout("--version", AB_EXIT_OK);
  }
  /* `help CMD` is `CMD --help`. */
  char help[] = "--help";
  if (strcmp(argv[1], "help") == 0 && argc > 2) {
    argv[1] = argv[2];
    argv[2] = help;
    argc = 3;
  } else if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return close_stdout("--help", AB_EXIT_OK);
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[1], commands[i].name) == 0) {
      int rc = commands[i].fn(argc - 1, argv + 1);
      /* A signal that stopped an output (a FIFO nobody read) ends the command as a signal does. */
      if (ab_run_stop && rc != 128 + ab_run_stop) {
        fprintf(stderr, "allocbench %s: interrupted (%s)\n", argv[1], ab_signal_name(ab_run_stop));
        rc = 128 + ab_run_stop;
      }
      return close_stdout(argv[1], rc);
    }
  fprintf(stderr, "allocbench: unknown command '%s' (expected one of", argv[1]);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) fprintf(stderr, " %s", commands[i].name);
  fprintf(stderr, "; see allocbench --help)\n");
  return AB_EXIT_USAGE;
}
