/* cli.h: what the subcommands of `allocbench` share: the options, parsed into a run's spec
 * (run_one.h, which runs it), and the printing of what the runs recorded.
 *
 * Errors on the command line are printed as one line, "allocbench CMD: MESSAGE" (the command
 * as ab_run_spec_defaults names it; allocbench_micro parses its options here too), and the command
 * exits with AB_EXIT_USAGE; a run that failed exits with AB_EXIT_FAIL. An OOM is a result,
 * not a failure: it exits 0.
 *
 * Stopping: the commands that run catch SIGINT, SIGTERM, SIGHUP and SIGQUIT
 * (Note [Stopping a command], stop.h). The run in progress (or the budget search,
 * ab_run_search_opts) stops within 1024 events, frees what it holds and is not recorded (a
 * result of part of a stream would mislead); what earlier runs appended stays, whole rows only
 * (table.h); the command says where, and exits 128 + the signal.
 */
#ifndef AB_CLI_H
#define AB_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/device/device.h"
#include "workloads/events/events.h"
#include "harness/run/bisect.h"
#include "harness/run/engine.h"
#include "harness/run/oommap.h"
#include "harness/run/run_one.h"
#include "harness/run/table.h"

typedef struct ab_run_desc_s ab_run_desc_t; /* results.h: what makes a run */

/* ---- the options: one table (cli.c) for every command ----
 *
 * Each command is a bit; each entry of the table names an option, the commands that take it
 * (or refuse it, saying why) and its help. The parser takes exactly the options of the
 * command, and the command's usage line and --help are written from the same entries, so
 * that help never lists an option the command refuses, nor misses one it takes. An option
 * with a value given twice is refused unless its entry says the command takes it again
 * (`repeats`): one of the two would otherwise be dropped without a word. An option
 * whose help or argument differs between commands has one entry per group of commands. */

enum {
  AB_CMD_LIST = 1u << 0,
  AB_CMD_RUN = 1u << 1,
  AB_CMD_REPLAY = 1u << 2,
  AB_CMD_OOM = 1u << 3,
  AB_CMD_COMPARE = 1u << 4,
  AB_CMD_MATRIX = 1u << 5,
  AB_CMD_TUNE = 1u << 6,
  AB_CMD_RECORD = 1u << 7,
  AB_CMD_MICRO = 1u << 8, /* allocbench_micro */
  AB_CMD_REPORT = 1u << 9,
  AB_CMD_BLAME = 1u << 10,
};

/* What the parser hands a command for an option without a short letter (getopt's values
 * above every character); an option with one is its letter. */
enum {
  AB_OPT_DEVICE = 256, AB_OPT_BUDGET, AB_OPT_SEED, AB_OPT_OUT, AB_OPT_FORMAT, AB_OPT_FAULTS, AB_OPT_NO_TIMELINE,
  AB_OPT_CHECK, AB_OPT_NO_KERNELS, AB_OPT_VERIFY, AB_OPT_RECORDED_ADDRESSES, AB_OPT_SIM_ADDRESSES, AB_OPT_LO, AB_OPT_HI,
  AB_OPT_TOLERANCE, AB_OPT_CAP, AB_OPT_RANKS, AB_OPT_NCCL, AB_OPT_COLLECTIVE_TIMEOUT, AB_OPT_INFO,
  AB_OPT_TRACE_DEVICE, AB_OPT_EXPORT_TRACE, AB_OPT_EXPORT_SNAPSHOT, AB_OPT_MAX_INFLATED, AB_OPT_QUICK,
  AB_OPT_STRATEGIES, AB_OPT_WORKLOADS, AB_OPT_OBJECTIVE, AB_OPT_JOBS, AB_OPT_MAX_ENTRIES, AB_OPT_RECOVER, AB_OPT_STACKS, AB_OPT_NO_STACKS,
  AB_OPT_TRACE,
  AB_OPT_REPORT, AB_OPT_SEARCH, AB_OPT_CAP_MAP, AB_OPT_AT, AB_OPT_FRAMES, AB_OPT_TOP, AB_OPT_CHANGE,
  AB_OPT_PLUGIN_TIMEOUT, AB_OPT_PLACEMENT,
};

/* A command, as its usage and help present it. */
typedef struct ab_cli_command_s {
  const char *name;     /* "allocbench run": as usage and messages name it */
  unsigned bit;         /* AB_CMD_RUN */
  const char *operands; /* what follows the options ("TRACE"); NULL: nothing */
  const char *about;    /* what it does: the lines between the usage and the options */
} ab_cli_command_t;

/* A command's own options: called for each option that is not a common one; returns true
 * when it took opt, setting *st when its value is bad (the reason in diag). */
typedef bool (*ab_cli_own_fn)(void *ctx, int opt, const char *arg, ab_status *st, ab_diag_t *diag);

/* Parses a command line with the options of cmd: the common ones into o, the command's own
 * through own (may be NULL; it sees every option first); an option the table says cmd
 * refuses is refused with its reason. -h prints the help. At most max_args operands are
 * taken, into *args and *nargs. Returns -1 when the command goes on, else the exit code
 * (help printed, or one line saying what was wrong). */
int ab_cli_parse(int argc, char **argv, const ab_cli_command_t *cmd, ab_run_spec_t *o, ab_cli_own_fn own, void *ctx,
                 size_t max_args, char ***args, size_t *nargs);
/* Applies one common option; false if opt is not one of them. Errors go to diag. */
bool ab_cli_common_option(int opt, const char *arg, ab_run_spec_t *o, ab_status *st, ab_diag_t *diag);
/* A budget or cap (what: "--budget") of text, parsed to bytes: when text has a decimal unit,
 * ab_cli_parse says both readings on stderr once it has parsed the line (Note [Decimal sizes]). */
void ab_cli_size_given(const char *what, const char *text, uint64_t bytes);
/* --cap-map N|all|off: at most N replays for a cap map (all: *probes 0, no limit), or off. */
ab_status ab_cli_parse_cap_map(const char *arg, unsigned *probes, bool *off, ab_diag_t *diag);
/* Writes cmd's help: its usage, about and options. */
void ab_cli_help(FILE *f, const ab_cli_command_t *cmd);

/* Prints "CMD: MESSAGE" (CMD: "allocbench run", ...) and returns AB_EXIT_USAGE. */
int ab_cli_usage_error(const ab_run_spec_t *o, const char *msg);
/* Prints "CMD: MESSAGE" and returns AB_EXIT_FAIL. */
int ab_cli_fail(const ab_run_spec_t *o, const char *msg);
/* The same for what failed of one strategy: "CMD: NAME: MESSAGE", or "CMD: MESSAGE" when the
 * message opens with NAME already (a library's failure names it, supervise.h). */
int ab_cli_fail_of(const ab_run_spec_t *o, const char *name, const char *msg);

/* The exit of a command whose workload did not build: interrupted, refused (AB_EXIT_USAGE) or
 * failed (out of host memory), with its line. */
int ab_cli_build_failed(const ab_run_spec_t *o, ab_status st, const ab_diag_t *diag);
/* Refuses (AB_ERR_INVALID) an output path that names a file the run itself writes in
 * o->out_dir (summary.csv, oom.csv, compare.csv, tune.csv, a timeline or a segment map):
 * one of the two would be lost. what names the option. */
ab_status ab_cli_check_not_results(const ab_run_spec_t *o, const char *what, const char *path, ab_diag_t *diag);
/* Prints "CMD: interrupted (SIGTERM)WHAT" and returns the exit status for the signal. */
int ab_cli_stopped(const ab_run_spec_t *o, const char *what);

/* Note [A file size limit]: under `ulimit -f` a write past the limit raises SIGXFSZ, whose
 * default action kills the process mid-write, with no line of allocbench's and a NAME.tmp.PID
 * left behind. With the signal ignored the write fails with EFBIG instead, as on a full disk
 * (ENOSPC, EDQUOT), and every writer's error path runs (output.h, table.h): one line naming
 * the file, the temporary removed, an append cut back. main ignores it first thing; a program
 * that allocbench runs for the user (record's job) gets back the disposition allocbench was
 * started with (ab_cli_restore_file_size_limit, in the child before exec). */
void ab_cli_ignore_file_size_limit(void);
void ab_cli_restore_file_size_limit(void);
/* Prints "allocbench CMD: interrupted: ..." saying how many runs were recorded, and where,
 * and returns the exit status for the signal (128 + its number). */
int ab_cli_interrupted(const ab_run_spec_t *o, size_t recorded, size_t planned);

/* The end of a command that runs one strategy over es (run, replay): runs it
 * (ab_run_one), appends its row to DIR/summary.csv, prints it, and tells a reader of the
 * table what the row cannot (kernels that did not run). Returns the exit code; run keeps the
 * results. */
int ab_cli_run_single(const ab_run_spec_t *o, const ab_events_t *es, ab_run_t *run);

/* ---- commands that take several strategies and search budgets (oom, compare) ---- */

#define AB_CLI_MAX_STRATEGIES 16

/* -s a,b,c with the -c options given: none, one for every strategy, or one per strategy in
 * order (a conf may hold commas, so each -c is one conf). */
typedef struct ab_cli_strategies_s {
  char name[AB_CLI_MAX_STRATEGIES][1024]; /* room for pluggable:PATH */
  const char *conf[AB_CLI_MAX_STRATEGIES]; /* NULL: none; not owned */
  size_t n;
} ab_cli_strategies_t;

/* Splits and looks up the list; unknown or empty names, too many, and a count of confs that
 * is neither 0, 1 nor the number of strategies are AB_ERR_INVALID. */
ab_status ab_cli_strategies(const char *list, const char *const *confs, size_t nconfs, ab_cli_strategies_t *out,
                            ab_diag_t *diag);

/* A strategy's name as the text tables show it: pluggable:PATH[:ALLOC_FN:FREE_FN] as PATH's
 * file name (libmine.so; the CSVs keep the whole name), so that a library in a deep folder
 * does not widen every table; any other name as it is. Returns buf. */
const char *ab_cli_strategy_shown(const char *name, char *buf, size_t size);

/* Opens the device of o (saying which one `auto` chose) and checks each strategy with its
 * conf for the search (ab_bisect_check), so that a bad conf, or --cap for a strategy without
 * one, is refused before anything runs; the device's total goes to *total. */
ab_status ab_cli_check_strategies(const ab_run_spec_t *o, const ab_bisect_opts_t *search,
                                  const ab_cli_strategies_t *list, uint64_t *total, ab_diag_t *diag);

/* Applies one search option (--lo, --hi, --tolerance, --cap) to b; false if opt is not one
 * of them. Errors go to diag. */
bool ab_cli_search_option(int opt, const char *arg, ab_bisect_opts_t *b, ab_status *st, ab_diag_t *diag);

/* The start of a command that takes several strategies and searches budgets (oom, compare):
 * parses the command line (cmd's options: the search options, -c once or once per
 * strategy), builds the workload into es and checks every strategy and conf on the device,
 * so that bad input is refused before anything runs. Returns -1 when the command goes on (es
 * is then the caller's to free), else the exit code to return (help printed, or the error). */
int ab_cli_search_setup(int argc, char **argv, const ab_cli_command_t *cmd, ab_run_spec_t *o, ab_bisect_opts_t *search,
                        ab_cli_strategies_t *list, ab_events_t *es);

/* Writes the map of a search's failing probe and, with report (and not quiet), prints its
 * OOM report. */
ab_status ab_cli_search_oom(const ab_run_spec_t *o, const ab_run_desc_t *run, const ab_bisect_result_t *res,
                            const ab_oommap_t *map, bool report, ab_diag_t *diag);

/* Prints a results table in the chosen format: csv (header and rows), json, or text with
 * the named columns (all when NULL). */
void ab_cli_print(const ab_run_spec_t *o, const ab_table_t *t, const char *const *cols, size_t ncols);

/* Appends a table to DIR/NAME, saying on stderr if an older file was moved aside. */
ab_status ab_cli_append(const ab_run_spec_t *o, const ab_table_t *t, const char *name, ab_diag_t *diag);


#endif
