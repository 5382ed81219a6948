#include "harness/cli/cli.h"

#include <errno.h>
#include <inttypes.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels/base/output.h"
#include "kernels/base/units.h"
#include "harness/ranks/launch.h"
#include "harness/run/band.h"
#include "harness/run/oommap.h"
#include "harness/run/oomreport.h"
#include "harness/run/results.h"
#include "harness/run/supervise.h"
#include "strategies/registry.h"
#include "strategies/strategy.h"
#include "harness/run/stop.h"

/* ---- the option table ---------------------------------------------------------------------- */

#define RUNS (AB_CMD_RUN | AB_CMD_REPLAY | AB_CMD_OOM | AB_CMD_COMPARE | AB_CMD_MATRIX)
#define SEARCHES (AB_CMD_OOM | AB_CMD_COMPARE)
/* The commands that run a workload as given, not only the budget search's probes. */
#define WHOLE_RUNS (AB_CMD_RUN | AB_CMD_REPLAY | AB_CMD_COMPARE | AB_CMD_MATRIX)
/* Why tune takes no strategy, conf or budget of the user's. */
#define TUNE_CHOOSES "tune chooses the strategies and their confs and searches the caps itself (see allocbench tune --help)"

typedef struct option_entry_s {
  const char *name;  /* --NAME */
  char letter;       /* -L, or 0 */
  int id;            /* what the parser hands the command: the letter, else an AB_OPT_* */
  const char *arg;   /* the argument as usage and help write it; NULL: a flag */
  unsigned takes;    /* the commands that take it (AB_CMD_* bits) */
  unsigned needs;    /* those where it must be given */
  unsigned repeats;  /* those where it may be given again */
  unsigned refuses;  /* the commands that refuse it, saying `help` */
  const char *help;  /* what it does, lines separated by \n; for `refuses`, why not */
} option_entry_t;

/* In the order usage and help show them. */
static const option_entry_t options[] = {
    {"workload", 'w', 'w', "WORKLOAD[:ARGS]", AB_CMD_RUN | SEARCHES, AB_CMD_RUN | SEARCHES, 0, 0,
     "a workload of `allocbench list`, with KEY=VALUE arguments after ':'"},
    {"workload", 'w', 'w', "WORKLOAD[:ARGS]", AB_CMD_MATRIX, 0, AB_CMD_MATRIX, 0,
     "a workload with its arguments; repeat for several (default: the bench list)"},
    {"workload", 'w', 'w', "WORKLOAD[:ARGS]", AB_CMD_TUNE, AB_CMD_TUNE, AB_CMD_TUNE, 0,
     "replay:TRACE (a snapshot, as `allocbench record` writes it), or a workload\n"
     "of `allocbench list` with KEY=VALUE arguments after ':'. Several (-w\n"
     "again, or a glob: 'replay:job.rank*.pickle') are the ranks of one job,\n"
     "tuned together"},
    {"workload", 'w', 'w', "WORKLOAD", 0, 0, 0, AB_CMD_REPLAY, "the trace is the argument: replay TRACE"},
    {"workload", 'w', 'w', "WORKLOAD", 0, 0, 0, AB_CMD_BLAME, "the trace is the argument: blame TRACE"},
    {"strategy", 's', 's', "STRATEGY", AB_CMD_RUN, AB_CMD_RUN, 0, 0, "a strategy of `allocbench list`"},
    {"strategy", 's', 's', "STRATEGY", AB_CMD_BLAME, 0, 0, 0,
     "a strategy of `allocbench list` that takes PyTorch's cap (default: caching\n"
     "with the recorded settings as its conf)"},
    {"strategy", 's', 's', "STRATEGY", AB_CMD_REPLAY, 0, 0, 0,
     "a strategy of `allocbench list` (default: caching with the recorded\n"
     "settings as its conf when that strategy exists, else raw)"},
    {"strategy", 's', 's', "STRATEGY[,STRATEGY...]", SEARCHES, SEARCHES, 0, 0,
     "strategies of `allocbench list`, separated by commas"},
    {"strategy", 's', 's', "STRATEGY[,STRATEGY...]", AB_CMD_MATRIX, 0, 0, 0,
     "strategies, separated by commas (default: every one of `allocbench list`)"},
    {"strategy", 's', 's', "STRATEGY[,STRATEGY...]", AB_CMD_TUNE, 0, 0, 0,
     "other strategies to rank beside the settings, for reference, with\n"
     "their defaults (a pluggable:PATH library, say); raw, pooled and async\n"
     "always are"},
    {"conf", 'c', 'c', "CONF", AB_CMD_RUN | AB_CMD_REPLAY | AB_CMD_BLAME, 0, 0, 0,
     "the strategy's options, KEY:VALUE,... (PYTORCH_CUDA_ALLOC_CONF syntax)"},
    {"conf", 'c', 'c', "CONF", SEARCHES | AB_CMD_MATRIX, 0, SEARCHES | AB_CMD_MATRIX, 0,
     "the strategies' options (PYTORCH_CUDA_ALLOC_CONF syntax): once for all\n"
     "of them, or once per strategy in the order of -s"},
    {"conf", 'c', 'c', "CONF", 0, 0, 0, AB_CMD_TUNE, TUNE_CHOOSES},
    {"output", 'o', 'o', "FILE", AB_CMD_RECORD, 0, 0, 0, "where the snapshot goes (default snapshot.pickle)"},
    {"output", 'o', 'o', "FILE", AB_CMD_REPORT, 0, 0, 0, "where the page goes (default DIR/report.html)"},
    {"max-entries", 0, AB_OPT_MAX_ENTRIES, "N", AB_CMD_RECORD, 0, 0, 0,
     "keep only the last N events of the history (default: all of them)"},
    {"stacks", 0, AB_OPT_STACKS, "python|all", AB_CMD_RECORD, 0, 0, 0,
     "the call stacks recorded with each allocation: python (default: the\n"
     "Python frames), all (C++ frames too: slower); allocbench blame reads them"},
    {"no-stacks", 0, AB_OPT_NO_STACKS, NULL, AB_CMD_RECORD, 0, 0, 0,
     "record no call stacks (a smaller snapshot, and no blame by call site)"},
    {"recover", 0, AB_OPT_RECOVER, NULL, AB_CMD_RECORD, 0, 0, 0,
     "run nothing: write the snapshots that a record killed before its job ended\n"
     "left beside -o (FILE.unfinished-*), as that record would have"},
    {"objective", 0, AB_OPT_OBJECTIVE, "reserved|budget|time", AB_CMD_TUNE, 0, 0, 0,
     "reserved: the lowest peak reserved bytes (default); budget: the smallest cap;\n"
     "time: the least allocator time over the job (the card's cost model), of\n"
     "the settings that run under --cap when one is given"},
    {"device", 0, AB_OPT_DEVICE, "SPEC", RUNS, 0, 0, 0,
     "auto (default: cuda if a GPU is usable, else sim), sim, sim:PROFILE,\nsim:SIZE, cuda, cuda:N"},
    {"device", 0, AB_OPT_DEVICE, "SPEC", AB_CMD_TUNE | AB_CMD_BLAME, 0, 0, 0,
     "sim (default here: the simulated H200, for predictions and many runs at\n"
     "once), sim:PROFILE, sim:SIZE, cuda, cuda:N, auto"},
    {"device", 0, AB_OPT_DEVICE, "SPEC", AB_CMD_MICRO, 0, 0, 0,
     "sim (default; or the environment variable AB_DEVICE), sim:PROFILE,\n"
     "cuda, cuda:N, auto. On cuda the time is the GPU's, from CUDA events"},
    {"budget", 0, AB_OPT_BUDGET, "SIZE", AB_CMD_RUN | AB_CMD_REPLAY | AB_CMD_MATRIX, 0, 0, 0,
     "a hard limit: bytes the strategy may hold from the device, a card of\n"
     "that size (512, 2MiB, 40GB, 1.5GiB); not PyTorch's cap (see --cap)"},
    {"cap", 0, AB_OPT_CAP, "SIZE", AB_CMD_RUN | AB_CMD_REPLAY | AB_CMD_MATRIX | AB_CMD_BLAME, 0, 0, 0,
     "PyTorch's memory cap, torch.cuda.set_per_process_memory_fraction(SIZE /\n"
     "the card's total): the caching strategies refuse a segment that would take\n"
     "reserved past it, collect garbage under it, and a trace is read knowing\n"
     "it (the cap the program ran under); strategies without it are refused.\n"
     "SIZE has a unit (20GiB, 20GB, 20G = 20GiB) or is bytes as 20e9; 0.05x is\n"
     "that fraction of the card (per_process_memory_fraction:0.05 in -c)"},
    {"budget", 0, AB_OPT_BUDGET, "SIZE", 0, 0, 0, SEARCHES,
     "the search sets the budget of each run; give --lo and --hi instead"},
    {"budget", 0, AB_OPT_BUDGET, "SIZE", 0, 0, 0, AB_CMD_TUNE, TUNE_CHOOSES},
    {"seed", 0, AB_OPT_SEED, "N", AB_CMD_RUN | SEARCHES | AB_CMD_MATRIX | AB_CMD_TUNE, 0, 0, 0,
     "seed of the workload's random draws (default 42)"},
    {"seed", 0, AB_OPT_SEED, "N", 0, 0, 0, AB_CMD_REPLAY, "a trace replays as it was recorded: it draws nothing"},
    {"lo", 0, AB_OPT_LO, "SIZE", SEARCHES, 0, 0, 0,
     "where the search starts (default: the workload's peak requested bytes,\n"
     "since nothing runs with less than its live allocations asked for)"},
    {"hi", 0, AB_OPT_HI, "SIZE", SEARCHES, 0, 0, 0, "where it ends (default: the bytes an unbudgeted run held at its peak)"},
    {"tolerance", 0, AB_OPT_TOLERANCE, "SIZE", SEARCHES, 0, 0, 0,
     "the answer is within this of the true smallest budget (default 1MiB)"},
    {"search", 0, AB_OPT_SEARCH, "budget|cap", SEARCHES, 0, 0, 0,
     "budget (default): the smallest card; cap: PyTorch's memory cap\n"
     "(set_per_process_memory_fraction), mapped at every cap for the caching\n"
     "strategies: the smallest that completes and the safe cap, from which\n"
     "every cap up completes"},
    {"at", 0, AB_OPT_AT, "peak|oom|EVENT", AB_CMD_BLAME, 0, 0, 0,
     "the moment blamed: the peak of reserved bytes (default), the OOM (under a\n"
     "--cap it fails), or just after event EVENT (0 is the first)"},
    {"frames", 0, AB_OPT_FRAMES, "N", AB_CMD_BLAME, 0, 0, 0,
     "frames of the program naming a call site (default 1: the innermost)"},
    {"top", 0, AB_OPT_TOP, "N", AB_CMD_BLAME, 0, 0, 0,
     "sites whose changes are replayed (default 3; 0: none)"},
    {"change", 0, AB_OPT_CHANGE, "pool|early|round:RANK", AB_CMD_BLAME, 0, 0, 0,
     "replay only that change of the site ranked RANK, and print its figures"},
    {"cap-map", 0, AB_OPT_CAP_MAP, "N|all|off", SEARCHES | AB_CMD_TUNE | AB_CMD_BLAME, 0, 0, 0,
     "a search of caps maps every cap (all, the default of oom and compare), or\n"
     "up to N intervals of caps that replay alike, a replay each (tune's default:\n"
     "128), bisecting past them; off bisects, as if the status were monotonic"},
    {"cap", 0, AB_OPT_CAP, "SIZE", SEARCHES, 0, 0, 0,
     "the job's memory cap (as in run; 20GiB, 20e9, 0.05x): the caps are searched\n"
     "(--search cap) and the answer says whether this one completes, and its\n"
     "headroom over the safe cap"},
    {"cap", 0, AB_OPT_CAP, "SIZE", AB_CMD_TUNE, 0, 0, 0,
     "the job runs under this memory cap (set_per_process_memory_fraction; 20GiB,\n"
     "20e9, 0.05x); each run is made under it, and garbage_collection_threshold\n"
     "is tried (default: the recorded per_process_memory_fraction, if any)"},
    {"jobs", 0, AB_OPT_JOBS, "N", AB_CMD_TUNE, 0, 0, 0,
     "runs at once (default: one per core; 1 on a real GPU, whose memory they share)"},
    {"report", 0, AB_OPT_REPORT, NULL, AB_CMD_TUNE, 0, 0, 0,
     "draw the figures and write DIR/report.html, one page to share: the line to\n"
     "paste, the ranking, the figures, the trace, the commands (allocbench report)"},
    {"quick", 0, AB_OPT_QUICK, NULL, AB_CMD_MATRIX, 0, 0, 0,
     "a short run of each workload (fewer steps or ops, the same pattern)"},
    {"ranks", 0, AB_OPT_RANKS, "N|env", AB_CMD_RUN, 0, 0, 0,
     "N: run -w zero as N ranks, one thread each: on GPUs cuda:0..N-1 (from cuda:K\n"
     "with --device cuda:K) with NCCL collectives, or each on a simulated card;\n"
     "a row per rank and a combined row. env: this process is one rank of a job a\n"
     "launcher started, joined through its engine: mpirun or srun (MPI), torchrun\n"
     "(its store at MASTER_ADDR:MASTER_PORT); rank 0 writes the rows"},
    {"nccl", 0, AB_OPT_NCCL, "PATH", AB_CMD_RUN, 0, 0, 0,
     "with --ranks: NCCL's library (default: AB_NCCL_LIBRARY, else searched: the\n"
     "CUDA toolkit, the loader's path, PyTorch's site-packages/nvidia/nccl/lib)"},
    {"collective-timeout", 0, AB_OPT_COLLECTIVE_TIMEOUT, "S", AB_CMD_RUN, 0, 0, 0,
     "with --ranks: give up after S seconds at one collective (waiting for the\n"
     "other ranks, or for it to complete on the GPU); default AB_COLLECTIVE_TIMEOUT,\n"
     "else 300. Meeting and making NCCL's communicators: AB_RENDEZVOUS_TIMEOUT,\n"
     "else 300"},
    {"plugin-timeout", 0, AB_OPT_PLUGIN_TIMEOUT, "S", RUNS | AB_CMD_TUNE, 0, 0, 0,
     "a pluggable:PATH library's process is killed, and its run fails, when one\n"
     "call into it (alloc, free, a hook, its constructors or destructors) lasts\n"
     "S seconds (default 60)"},
    {"info", 0, AB_OPT_INFO, NULL, AB_CMD_REPLAY, 0, 0, 0,
     "print what the trace holds (events, actions, streams, recorded settings,\n"
     "peaks, segments) and replay nothing"},
    {"trace-device", 0, AB_OPT_TRACE_DEVICE, "N", AB_CMD_REPLAY, 0, 0, 0,
     "snapshots: the device whose trace to read (default: the first with entries)"},
    {"max-inflated", 0, AB_OPT_MAX_INFLATED, "SIZE", AB_CMD_REPLAY, 0, 0, 0,
     "a gzipped trace may inflate to SIZE (default: 100 times its size, at least\n"
     "64MiB; traces inflate some 10 times, a crafted file to gigabytes)"},
    {"export-trace", 0, AB_OPT_EXPORT_TRACE, "FILE", AB_CMD_REPLAY, 0, 0, 0,
     "write the run as a CSV trace, with the strategy's own segment decisions"},
    {"export-snapshot", 0, AB_OPT_EXPORT_SNAPSHOT, "FILE", AB_CMD_REPLAY, 0, 0, 0,
     "write the run as a PyTorch memory snapshot: its trace, and its segments at\n"
     "the end (or at the OOM); `python3 -m torch.cuda._memory_viz trace_plot FILE`\n"
     "or pytorch.org/memory_viz show it"},
    {"trace", 0, AB_OPT_TRACE, "PATH|none", AB_CMD_MICRO, 0, 0, 0,
     "the trace of the replay benchmarks, or none (default: the recorded run of\n"
     "tests/data, installed in PREFIX/share/allocbench/traces)"},
    {"out", 0, AB_OPT_OUT, "DIR", RUNS | AB_CMD_TUNE | AB_CMD_BLAME, 0, 0, 0, "where results go (default results/latest)"},
    {"out", 0, AB_OPT_OUT, "DIR", AB_CMD_MICRO, 0, 0, 0,
     "write DIR/micro.json (Google Benchmark's JSON) and DIR/micro.csv"},
    {"format", 0, AB_OPT_FORMAT, "table|csv|json", RUNS | AB_CMD_TUNE | AB_CMD_BLAME, 0, 0, 0,
     "table (default), csv (header and rows on stdout) or json"},
    {"faults", 0, AB_OPT_FAULTS, "SPEC", AB_CMD_RUN, 0, 0, 0,
     "sim only: nth=N (fail the Nth device allocation) or rate=F[,seed=S];\n"
     "with --ranks, rank=R fails only rank R's card"},
    {"faults", 0, AB_OPT_FAULTS, "SPEC", AB_CMD_REPLAY, 0, 0, 0,
     "sim only: nth=N (fail the Nth device allocation) or rate=F[,seed=S]"},
    {"faults", 0, AB_OPT_FAULTS, "SPEC", 0, 0, 0, SEARCHES | AB_CMD_MATRIX | AB_CMD_TUNE,
     "a budget search needs runs that fail only for want of memory; inject faults with run or replay"},
    {"no-timeline", 0, AB_OPT_NO_TIMELINE, NULL, WHOLE_RUNS, 0, 0, 0, "do not write the timeline file"},
    {"check", 0, AB_OPT_CHECK, NULL, RUNS | AB_CMD_TUNE, 0, 0, 0,
     "run the strategy's invariant checks after every event (slow)"},
    {"no-kernels", 0, AB_OPT_NO_KERNELS, NULL, WHOLE_RUNS, 0, 0, 0,
     "do not launch the workload's kernels (only cuda launches them)"},
    {"verify", 0, AB_OPT_VERIFY, NULL, WHOLE_RUNS, 0, 0, 0,
     "fail if two live allocations share memory: a pattern per allocation\n"
     "written and checked on cuda, a map of live ranges on sim (slow)"},
    {"verify", 0, AB_OPT_VERIFY, NULL, 0, 0, 0, AB_CMD_TUNE, TUNE_CHOOSES},
    {"recorded-addresses", 0, AB_OPT_RECORDED_ADDRESSES, NULL, WHOLE_RUNS, 0, 0, 0,
     "sim, replaying a trace: give each device allocation the address the\n"
     "recorded run got (ties between equal free blocks break the same way);\n"
     "replay does so by default under the recorded settings"},
    {"sim-addresses", 0, AB_OPT_SIM_ADDRESSES, NULL, AB_CMD_REPLAY, 0, 0, 0,
     "sim: the simulated card places every device allocation itself, also\n"
     "under the recorded settings"},
    {"recorded-addresses", 0, AB_OPT_RECORDED_ADDRESSES, NULL, 0, 0, 0, AB_CMD_TUNE, TUNE_CHOOSES},
    {"placement", 0, AB_OPT_PLACEMENT, "V", AB_CMD_RUN | AB_CMD_REPLAY, 0, 0, 0,
     "sim: place device allocations by variant V (1-6) of the driver's placement\n"
     "(the placement bands' variants) instead of its rules as measured: the run\n"
     "behind one end of a band"},
    {"verbose", 'v', 'v', NULL, AB_CMD_LIST, 0, 0, 0, "also list each strategy's -c keys and each workload's arguments"},
    {"verbose", 'v', 'v', NULL, AB_CMD_COMPARE, 0, 0, 0,
     "also print on stderr the OOM report of each strategy's failing probe"},
    {"strategies", 0, AB_OPT_STRATEGIES, NULL, AB_CMD_LIST, 0, 0, 0, "only the strategies' names, one per line (for scripts)"},
    {"workloads", 0, AB_OPT_WORKLOADS, NULL, AB_CMD_LIST, 0, 0, 0, "only the workloads' names, one per line (for scripts)"},
    {"quiet", 'q', 'q', NULL, RUNS | AB_CMD_TUNE | AB_CMD_BLAME, 0, 0, 0, "no progress and no notices on stderr"},
    {"quiet", 'q', 'q', NULL, AB_CMD_RECORD, 0, 0, 0, "say nothing on stderr unless something goes wrong"},
    /* Not allocbench_micro's: its --help is Google Benchmark's, which prints this help first. */
    {"help", 'h', 'h', NULL, RUNS | AB_CMD_LIST | AB_CMD_TUNE | AB_CMD_RECORD | AB_CMD_REPORT | AB_CMD_BLAME, 0, 0, 0,
     "this help"},
};
#define NOPTIONS (sizeof options / sizeof options[0])

/* The entry of the option `id` for the command `bit` (taken or refused), or NULL. */
static const option_entry_t *entry_of(unsigned bit, int id) {
  for (size_t i = 0; i < NOPTIONS; i++)
    if (options[i].id == id && ((options[i].takes | options[i].refuses) & bit)) return &options[i];
  return NULL;
}

/* One option as the usage line writes it: "-w WORKLOAD[:ARGS]", "[--cap]", "[-c CONF]...". */
static void usage_word(const option_entry_t *e, unsigned bit, char *out, size_t size) {
  char form[160];
  if (e->letter)
    snprintf(form, sizeof form, "-%c%s%s", e->letter, e->arg ? " " : "", e->arg ? e->arg : "");
  else
    snprintf(form, sizeof form, "--%s%s%s", e->name, e->arg ? " " : "", e->arg ? e->arg : "");
  bool needed = e->needs & bit;
  snprintf(out, size, "%s%s%s%s", needed ? "" : "[", form, needed ? "" : "]", e->repeats & bit ? "..." : "");
}

#define USAGE_WIDTH 100
#define HELP_COLUMN 24

/* "usage: allocbench CMD" and each option, the operands last, wrapped under the first. */
static void write_usage(FILE *f, const ab_cli_command_t *cmd) {
  int indent = fprintf(f, "usage: %s", cmd->name), col = indent;
  char word[200];
  for (size_t i = 0; i <= NOPTIONS; i++) {
    if (i == NOPTIONS) {
      if (cmd->operands == NULL) break;
      snprintf(word, sizeof word, "%s", cmd->operands);
    } else {
      const option_entry_t *e = &options[i];
      if (!(e->takes & cmd->bit) || e->id == 'h') continue;
      usage_word(e, cmd->bit, word, sizeof word);
    }
    int len = (int)strlen(word);
    if (col + 1 + len > USAGE_WIDTH) col = fprintf(f, "\n%*s", indent, "") - 1;
    col += fprintf(f, " %s", word);
  }
  fputc('\n', f);
}

/* "  -w, --workload ARG" then the help, its lines at HELP_COLUMN. */
static void write_option_help(FILE *f, const option_entry_t *e) {
  char left[200];
  snprintf(left, sizeof left, "  %s%c%s--%s%s%s", e->letter ? "-" : " ", e->letter ? e->letter : ' ',
           e->letter ? ", " : "  ", e->name, e->arg ? " " : "", e->arg ? e->arg : "");
  int len = fprintf(f, "%s", left);
  if (len + 2 > HELP_COLUMN) len = fprintf(f, "\n") - 1;
  for (const char *line = e->help; *line;) {
    size_t n = strcspn(line, "\n");
    fprintf(f, "%*s%.*s\n", HELP_COLUMN - len, "", (int)n, line);
    len = 0;
    line += n + (line[n] == '\n');
  }
}

void ab_cli_help(FILE *f, const ab_cli_command_t *cmd) {
  write_usage(f, cmd);
  fprintf(f, "\n%s\n", cmd->about);
  for (size_t i = 0; i < NOPTIONS; i++)
    if (options[i].takes & cmd->bit) write_option_help(f, &options[i]);
}

static ab_status parse_faults(const char *arg, ab_faults_t *f, int *rank, ab_diag_t *diag) {
  ab_kvlist_t kv;
  uint64_t r = UINT64_MAX;
  AB_TRY(ab_kv_parse("--faults", arg, '=', &kv, diag));
  AB_TRY(ab_kv_unique(&kv, diag)); /* an option of ours: a key twice is a slip, not an override */
  AB_TRY(ab_kv_get_u64(&kv, "nth", 1, UINT64_MAX, &f->fail_nth, diag));
  AB_TRY(ab_kv_get_double(&kv, "rate", 0, 1, &f->fail_rate, diag));
  AB_TRY(ab_kv_get_u64(&kv, "seed", 0, UINT64_MAX, &f->fail_seed, diag));
  AB_TRY(ab_kv_get_u64(&kv, "rank", 0, 65535, &r, diag));
  AB_TRY(ab_kv_finish(&kv, "nth, rate, seed, rank", diag));
  *rank = r == UINT64_MAX ? -1 : (int)r;
  if ((f->fail_nth == 0) == (f->fail_rate == 0))
    return ab_diag_set(diag, AB_ERR_INVALID, "--faults '%s': expected nth=N or rate=F (one of them)", arg);
  return AB_OK;
}

/* Note [Decimal sizes]: "40GB" is 37.25 GiB, while a card sold as 40 GB (sim:a100-40gb) has
 * 40 GiB; a budget or cap written in decimal units is said in both, on stderr, the first time
 * one is given (after parsing, so that -q anywhere on the line silences it). */
static char size_note[160];

void ab_cli_size_given(const char *what, const char *text, uint64_t bytes) {
  static bool said = false;
  const char *bare = ab_size_bare_unit(text);
  if (said || !(bare || ab_size_is_decimal(text))) return;
  said = true;
  char b[32];
  int digits = (int)strspn(text, "0123456789.");
  if (bare)
    snprintf(size_note, sizeof size_note, "%s %s = %s (%c read as %s; %.*s%cB would be decimal)", what, text,
             ab_format_bytes(bytes, b, sizeof b), text[digits], bare, digits, text, bare[0]);
  else
    snprintf(size_note, sizeof size_note, "%s %s = %s (decimal units; %.*sGiB would be binary)", what, text,
             ab_format_bytes(bytes, b, sizeof b), digits, text);
}

/* Note [One grammar for a cap]: a cap is PyTorch's set_per_process_memory_fraction, on every
 * command. It is a size with its unit (20GiB, 20GB, 20G), bytes in scientific form (20e9),
 * or a fraction of the card (0.05x), which becomes (size_t)(0.05 * total) bytes once the
 * card is known, as PyTorch makes it and as per_process_memory_fraction:0.05 in -c does. A
 * bare number is refused: 20 bytes is no cap anyone means, and 20 GiB is a guess. */
static ab_status parse_cap(const char *arg, ab_run_spec_t *o, ab_diag_t *diag) {
  size_t n = strlen(arg), digits = strspn(arg, "0123456789.");
  o->cap_bytes = 0;
  o->cap_fraction = 0;
  if (n > 1 && (arg[n - 1] == 'x' || arg[n - 1] == 'X')) {
    char *end = NULL;
    double f = digits == n - 1 ? strtod(arg, &end) : -1;
    if (end != arg + n - 1 || !(f > 0 && f <= 1))
      return ab_diag_set(diag, AB_ERR_INVALID,
                         "--cap '%s': at position 1: a fraction of the card is a number above 0 and at most 1 before "
                         "the x, as in 0.05x",
                         arg);
    o->cap_fraction = f;
    return AB_OK;
  }
  if (n > 0 && digits == n) {
    double v = strtod(arg, NULL);
    if (v == 0) return ab_diag_set(diag, AB_ERR_INVALID, "--cap '%s': must be more than 0 bytes", arg);
    if (v <= 1)
      return ab_diag_set(diag, AB_ERR_INVALID, "--cap '%s': at position %zu: a fraction of the card is written %sx", arg,
                         n + 1, arg);
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "--cap '%s': at position %zu: a bare number is no cap: give its unit (%sGiB, %sGB or %sG), or "
                       "bytes in scientific form (2e10), or a fraction of the card (0.05x)",
                       arg, n + 1, arg, arg, arg);
  }
  AB_TRY(ab_parse_size("--cap", arg, &o->cap_bytes, diag));
  if (o->cap_bytes == 0) return ab_diag_set(diag, AB_ERR_INVALID, "--cap '%s': must be more than 0 bytes", arg);
  ab_cli_size_given("--cap", arg, o->cap_bytes);
  return AB_OK;
}

/* -c takes what PYTORCH_CUDA_ALLOC_CONF holds; the variable's name pasted with it (from a
 * shell line, `export PYTORCH_CUDA_ALLOC_CONF=...`) is refused with the fix. */
static ab_status check_conf(const char *arg, ab_diag_t *diag) {
  static const char name[] = "PYTORCH_CUDA_ALLOC_CONF=";
  const char *p = strncmp(arg, "export ", 7) == 0 ? arg + 7 : arg;
  if (strncmp(p, name, sizeof name - 1) != 0) return AB_OK;
  const char *value = p + sizeof name - 1;
  size_t n = strlen(value);
  bool quoted = n >= 2 && (value[0] == '\'' || value[0] == '"') && value[n - 1] == value[0];
  return ab_diag_set(diag, AB_ERR_INVALID, "-c '%s': -c takes the variable's value, without '%.*s': -c '%.*s'", arg,
                     (int)(value - arg), arg, (int)(quoted ? n - 2 : n), quoted ? value + 1 : value);
}

bool ab_cli_common_option(int opt, const char *arg, ab_run_spec_t *o, ab_status *st, ab_diag_t *diag) {
  *st = AB_OK;
  switch (opt) {
    case 'w': o->workload = arg; break;
    case 's': o->strategy = arg; break;
    case 'c':
      o->conf = arg;
      *st = check_conf(arg, diag);
      break;
    case AB_OPT_DEVICE:
      o->device = arg;
      if (*arg == '\0')
        *st = ab_diag_set(diag, AB_ERR_INVALID,
                          "--device '': expected a device (auto, sim, sim:PROFILE, sim:SIZE, cuda, cuda:N)");
      break;
    case AB_OPT_OUT: o->out_dir = arg; break; /* checked before any work (output.h) */
    case AB_OPT_NO_TIMELINE: o->timeline = false; break;
    case AB_OPT_CHECK: o->check = true; break;
    case AB_OPT_NO_KERNELS: o->kernels = false; break;
    case AB_OPT_VERIFY: o->verify = true; break;
    case AB_OPT_RECORDED_ADDRESSES: o->recorded_addresses = true; break;
    case 'q': o->quiet = true; break;
    case 'v': o->verbose = true; break;
    case AB_OPT_BUDGET:
      *st = ab_parse_size("--budget", arg, &o->dev.budget_bytes, diag);
      if (*st == AB_OK && o->dev.budget_bytes == 0)
        *st = ab_diag_set(diag, AB_ERR_INVALID, "--budget '%s': must be more than 0 bytes", arg);
      if (*st == AB_OK) ab_cli_size_given("--budget", arg, o->dev.budget_bytes);
      break;
    case AB_OPT_CAP: *st = parse_cap(arg, o, diag); break;
    case AB_OPT_SEED: *st = ab_parse_u64("--seed", arg, UINT64_MAX, &o->seed, diag); break;
    case AB_OPT_FAULTS: *st = parse_faults(arg, &o->dev.faults, &o->faults_rank, diag); break;
    case AB_OPT_PLACEMENT: {
      uint64_t v;
      *st = ab_parse_u64("--placement", arg, AB_PLACEMENT_VARIANTS, &v, diag);
      /* 0 is the rules as measured, which a run without --placement has already. */
      if (*st == AB_OK && v == 0)
        *st = ab_diag_set(diag, AB_ERR_INVALID,
                          "--placement '0': expected a variant from 1 to %d (without --placement, the rules as measured)",
                          AB_PLACEMENT_VARIANTS);
      o->dev.placement = (unsigned)v;
      break;
    }
    case AB_OPT_PLUGIN_TIMEOUT: {
      double seconds;
      *st = ab_parse_seconds("--plugin-timeout", arg, &seconds, diag);
      if (*st == AB_OK) ab_supervise_timeout(seconds); /* the supervisor's, for the whole command */
      break;
    }
    case AB_OPT_FORMAT:
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

/* getopt's tables for the command: the options it takes or refuses. shortopts opens with ':'
 * so that a missing value comes back as ':', not as an unknown option. */
static void getopt_tables(unsigned bit, struct option *longopts, char *shortopts) {
  size_t n = 0, k = 1;
  shortopts[0] = ':';
  shortopts[1] = '\0';
  for (size_t i = 0; i < NOPTIONS; i++) {
    const option_entry_t *e = &options[i];
    if (!((e->takes | e->refuses) & bit)) continue;
    longopts[n++] = (struct option){e->name, e->arg ? required_argument : no_argument, NULL, e->id};
    if (e->letter && strchr(shortopts, e->letter) == NULL) {
      shortopts[k++] = e->letter;
      if (e->arg) shortopts[k++] = ':';
      shortopts[k] = '\0';
    }
  }
  longopts[n] = (struct option){NULL, 0, NULL, 0};
}

/* Whether word is one of the command's options ("--out", "--out=DIR", "-w"), not a value. */
static bool names_option(unsigned bit, const char *word) {
  if (word[0] != '-') return false;
  for (size_t i = 0; i < NOPTIONS; i++) {
    const option_entry_t *e = &options[i];
    if (!((e->takes | e->refuses) & bit)) continue;
    size_t len = strlen(e->name);
    if (word[1] == '-' && strncmp(word + 2, e->name, len) == 0 && (word[2 + len] == '\0' || word[2 + len] == '='))
      return true;
    if (e->letter && word[1] == e->letter && word[2] == '\0') return true;
  }
  return false;
}

/* "--budget needs a value (SIZE)", and what came in its place. */
static int missing_value(const ab_run_spec_t *o, const ab_cli_command_t *cmd, const option_entry_t *e, const char *next) {
  char msg[AB_DIAG_BYTES], name[64];
  if (e == NULL) return ab_cli_usage_error(o, "an option lacks its value");
  if (e->letter)
    snprintf(name, sizeof name, "-%c", e->letter);
  else
    snprintf(name, sizeof name, "--%s", e->name);
  if (next)
    snprintf(msg, sizeof msg, "%s needs a value (%s), but the option '%s' follows it (see %s --help)", name, e->arg, next,
             cmd->name);
  else
    snprintf(msg, sizeof msg, "%s needs a value (%s) after it (see %s --help)", name, e->arg, cmd->name);
  return ab_cli_usage_error(o, msg);
}

int ab_cli_parse(int argc, char **argv, const ab_cli_command_t *cmd, ab_run_spec_t *o, ab_cli_own_fn own, void *ctx,
                 size_t max_args, char ***args, size_t *nargs) {
  struct option longopts[NOPTIONS + 1];
  char shortopts[2 * NOPTIONS + 2] = "";
  getopt_tables(cmd->bit, longopts, shortopts);
  ab_diag_t diag = {""};
  const char *given[NOPTIONS] = {NULL}; /* the value each entry was given, to refuse it twice */
  int opt;
  optind = 1;
  opterr = 0;
  while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
    ab_status st = AB_OK;
    const option_entry_t *e = opt == '?' ? NULL : entry_of(cmd->bit, opt == ':' ? optopt : opt);
    /* A refused option is refused for what it is, with or without its value. */
    if (opt == ':' && (e == NULL || (e->takes & cmd->bit))) return missing_value(o, cmd, e, NULL);
    if (e == NULL) {
      snprintf(diag.msg, sizeof diag.msg, "bad option '%s' (see %s --help)", argv[optind - 1], cmd->name);
      return ab_cli_usage_error(o, diag.msg);
    }
    if (!(e->takes & cmd->bit)) {
      if (e->letter)
        snprintf(diag.msg, sizeof diag.msg, "-%c: %s", e->letter, e->help);
      else
        snprintf(diag.msg, sizeof diag.msg, "--%s: %s", e->name, e->help);
      return ab_cli_usage_error(o, diag.msg);
    }
    if (opt == 'h') {
      ab_cli_help(stdout, cmd);
      return AB_EXIT_OK;
    }
    /* `--budget --out DIR`: getopt took the next option for the value. */
    if (e->arg && names_option(cmd->bit, optarg)) return missing_value(o, cmd, e, optarg);
    /* An option that takes one value, given twice: the first would be dropped without a word. */
    size_t idx = (size_t)(e - options);
    if (e->arg && !(e->repeats & cmd->bit)) {
      if (given[idx]) {
        char name[64];
        if (e->letter)
          snprintf(name, sizeof name, "-%c", e->letter);
        else
          snprintf(name, sizeof name, "--%s", e->name);
        snprintf(diag.msg, sizeof diag.msg, "%s given twice ('%s', then '%s'): %s takes one %s; give it once", name,
                 given[idx], optarg, cmd->name, e->arg);
        return ab_cli_usage_error(o, diag.msg);
      }
      given[idx] = optarg;
    }
    if (!(own && own(ctx, opt, optarg, &st, &diag)) && !ab_cli_common_option(opt, optarg, o, &st, &diag))
      return ab_cli_usage_error(o, "bad option");
    if (st != AB_OK) return ab_cli_usage_error(o, diag.msg);
  }
  if ((o->cap_bytes || o->cap_fraction > 0) && o->dev.budget_bytes)
    return ab_cli_usage_error(o, "--cap and --budget: choose one (--cap is PyTorch's memory cap, --budget a card of that size)");
  if (ab_run_resolve_cap(o, &diag) != AB_OK) return ab_cli_usage_error(o, diag.msg);
  size_t n = (size_t)(argc - optind);
  if (size_note[0] && !o->quiet) fprintf(stderr, "%s: %s\n", o->cmd, size_note);
  size_note[0] = '\0';
  if (n > max_args) {
    snprintf(diag.msg, sizeof diag.msg, "unexpected argument '%s'", argv[optind + (int)max_args]);
    return ab_cli_usage_error(o, diag.msg);
  }
  if (args) *args = argv + optind;
  if (nargs) *nargs = n;
  return -1;
}

int ab_cli_usage_error(const ab_run_spec_t *o, const char *msg) {
  fprintf(stderr, "%s: %s\n", o->cmd, msg);
  return AB_EXIT_USAGE;
}

int ab_cli_fail(const ab_run_spec_t *o, const char *msg) {
  fprintf(stderr, "%s: %s\n", o->cmd, msg);
  return AB_EXIT_FAIL;
}

int ab_cli_fail_of(const ab_run_spec_t *o, const char *name, const char *msg) {
  size_t n = strlen(name);
  bool named = strncmp(msg, name, n) == 0 && (msg[n] == ' ' || msg[n] == ':');
  if (named) return ab_cli_fail(o, msg);
  fprintf(stderr, "%s: %s: %s\n", o->cmd, name, msg);
  return AB_EXIT_FAIL;
}

/* Whether two folder names are one folder: the same file when both exist, else the same
 * name once "./" and trailing slashes are set aside. */
static bool same_folder(const char *a, const char *b) {
  struct stat sa, sb;
  if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  while (a[0] == '.' && a[1] == '/') a += 2;
  while (b[0] == '.' && b[1] == '/') b += 2;
  size_t la = strlen(a), lb = strlen(b);
  while (la > 1 && a[la - 1] == '/') la--;
  while (lb > 1 && b[lb - 1] == '/') lb--;
  return la == lb && strncmp(a, b, la) == 0;
}

ab_status ab_cli_check_not_results(const ab_run_spec_t *o, const char *what, const char *path, ab_diag_t *diag) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  char dir[4096];
  if (slash == path) snprintf(dir, sizeof dir, "/");
  else if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  else snprintf(dir, sizeof dir, ".");
  static const char *const files[] = {"summary.csv", "oom.csv", "compare.csv", "tune.csv"};
  bool ours = false;
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) ours |= strcmp(base, files[i]) == 0;
  size_t n = strlen(base);
  bool csv = n > 4 && strcmp(base + n - 4, ".csv") == 0;
  ours |= csv && (strncmp(base, "timeline_", 9) == 0 || strncmp(base, "oommap_", 7) == 0);
  if (ours && same_folder(dir, o->out_dir))
    return ab_diag_set(diag, AB_ERR_INVALID, "%s '%s': is a file this run writes in --out %s; choose another name", what,
                       path, o->out_dir);
  return AB_OK;
}

static struct sigaction xfsz_at_start; /* Note [A file size limit] (cli.h) */

void ab_cli_ignore_file_size_limit(void) {
  struct sigaction ignore;
  memset(&ignore, 0, sizeof ignore);
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGXFSZ, &ignore, &xfsz_at_start);
}

void ab_cli_restore_file_size_limit(void) { sigaction(SIGXFSZ, &xfsz_at_start, NULL); }

int ab_cli_stopped(const ab_run_spec_t *o, const char *what) {
  fprintf(stderr, "%s: interrupted (%s)%s\n", o->cmd, ab_signal_name(ab_run_stop), what);
  return 128 + (ab_run_stop ? ab_run_stop : SIGINT);
}

int ab_cli_build_failed(const ab_run_spec_t *o, ab_status st, const ab_diag_t *diag) {
  if (ab_run_stop) return ab_cli_stopped(o, " while building the workload: nothing was run or written");
  /* Bad arguments, a missing trace, a workload too big for the host: the user's to change. */
  return st == AB_ERR_INTERNAL ? ab_cli_fail(o, diag->msg) : ab_cli_usage_error(o, diag->msg);
}

int ab_cli_interrupted(const ab_run_spec_t *o, size_t recorded, size_t planned) {
  fprintf(stderr,
          "%s: interrupted (%s): %zu of %zu runs recorded in %s/summary.csv; what was in progress was "
          "stopped and not recorded\n",
          o->cmd, ab_signal_name(ab_run_stop), recorded, planned, o->out_dir);
  return 128 + (ab_run_stop ? ab_run_stop : SIGINT);
}

/* The answer of a single run, in a sentence or two after its table: how it ended, its peak
 * reserved beside what PyTorch recorded where the trace says so, and where it was written. */
static void say_run(const ab_run_spec_t *o, const ab_events_t *es, const ab_table_t *summary) {
  const char *status = ab_table_get(summary, 0, "status"), *kind = ab_table_get(summary, 0, "oom_kind");
  const char *event = ab_table_get(summary, 0, "oom_event"), *peak = ab_table_get(summary, 0, "peak_reserved_bytes");
  if (status == NULL || peak == NULL) return;
  uint64_t reserved = strtoull(peak, NULL, 10);
  char name[256], a[32];
  ab_results_workload_name(es->source, name, sizeof name);
  printf("\n%s on %s: ", o->strategy, name);
  if (strcmp(status, "oom") == 0)
    printf("out of memory at event %s (%s), having reserved %s at the peak.", event ? event : "?", kind ? kind : "?",
           ab_format_bytes(reserved, a, sizeof a));
  else if (strcmp(status, "ok") == 0)
    printf("ran to the end, %s reserved at the peak.", ab_format_bytes(reserved, a, sizeof a));
  else
    printf("%s, %s reserved at the peak.", status, ab_format_bytes(reserved, a, sizeof a));
  if (o->recorded_peak_reserved) {
    uint64_t rec = o->recorded_peak_reserved;
    const uint64_t pair[] = {rec, reserved};
    char apart[2][AB_BYTES_TEXT];
    ab_format_bytes_apart(pair, 2, apart);
    printf(" PyTorch recorded %s; this replay %s: ", apart[0], apart[1]);
    if (rec == reserved)
      printf("equal.");
    else
      printf("%s %s (%.1f%%).", ab_format_bytes(rec > reserved ? rec - reserved : reserved - rec, a, sizeof a),
             rec > reserved ? "less" : "more", 100.0 * (double)(rec > reserved ? rec - reserved : reserved - rec) / (double)rec);
  }
  /* The run's files, named as they were written (results.h, ab_results_run_file). */
  const char *conf = ab_table_get(summary, 0, "conf");
  ab_run_desc_t run = {es->source, o->strategy, conf, NULL, 0, 0, 0, NULL};
  char timeline[4096], map[4096];
  ab_results_run_file(o->out_dir, "timeline", &run, timeline, sizeof timeline);
  ab_results_run_file(o->out_dir, "oommap", &run, map, sizeof map);
  printf("\nWritten to %s/summary.csv", o->out_dir);
  if (o->timeline) printf(" and %s", timeline);
  if (strcmp(status, "oom") == 0) printf(", with the segment map at the OOM in %s", map);
  printf(".\n");
}

int ab_cli_run_single(const ab_run_spec_t *o, const ab_events_t *es, ab_run_t *run) {
  ab_diag_t diag = {""};
  ab_table_t summary;
  ab_table_init(&summary, ab_summary_cols, ab_summary_ncols);
  ab_status st = ab_run_one(o, es, o->strategy, run, &summary, NULL, &diag);
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
    if (o->format == AB_FORMAT_TABLE && rc == AB_EXIT_OK && st == AB_OK) say_run(o, es, &summary);
    if (st != AB_OK) rc = ab_cli_fail(o, diag.msg);
  }
  ab_table_free(&summary);
  return rc;
}

/* Note [Tables for people]
 * The text tables show the numbers one way, whatever the command: headers in words, bytes
 * in MiB or GiB, times with their unit, percentages with '%', a limit searched as a cap
 * called a cap, and nothing that does not apply to the run (a step time for a trace, which
 * has no steps; a seed for a trace, which draws nothing at random; NCCL bytes outside a run of
 * ranks; the conf of a strategy that was given none): such a row of a single run is left out, such a column of several runs is left out
 * where it applies to none of them. CSV and JSON keep the raw numbers under the column
 * names, which are the same in summary.csv. */

/* How a column's cells read. */
typedef enum { SHOW_TEXT, SHOW_BYTES, SHOW_NS, SHOW_MS, SHOW_S, SHOW_PCT, SHOW_RATE } show_t;

/* The columns whose header is not its name read as words, and when a cell does not apply. */
static const struct {
  const char *name, *words, *words_cap; /* words_cap: under --cap (NULL: the same) */
  const char *absent;                   /* the value that means "does not apply", or NULL */
} labels[] = {
    {"budget_bytes", "budget", "cap", "0"},
    {"min_budget_bytes", "smallest budget", "smallest cap", NULL},
    {"max_fail_bytes", "largest failing budget", "largest failing cap", NULL},
    {"safe_cap_bytes", "safe cap", NULL, NULL},
    {"fail_ranges", "failing ranges above it", NULL, NULL},
    {"frag_pct", "peak fragmentation", NULL, NULL},
    {"overhead_pct", "over requested", NULL, NULL},
    {"oom_kind", "OOM kind", NULL, "none"},
    {"oom_kind_at_fail", "OOM below it", NULL, "none"},
    {"oom_event", "OOM at event", NULL, "-1"},
    {"oom_event_at_fail", "OOM at event below it", NULL, "-1"},
    {"num_device_alloc", "device allocations", NULL, NULL},
    {"num_device_free", "device frees", NULL, NULL},
    {"num_alloc_retries", "retries", NULL, NULL},
    {"num_ooms", "OOMs", NULL, NULL},
    {"step_ms_p50", "step p50", NULL, "0.0000"},
    {"kernel_ms_total", "kernel time", NULL, "0.000"},
    {"nccl_bytes", "NCCL bytes", NULL, "0"},
    {"approximate", "approximate", NULL, "no"},
    {"events_per_s", "events per second", NULL, NULL},
    {"harness_ns_per_event", "harness per event", NULL, NULL},
    {"wall_s", "wall time", NULL, NULL},
    {"conf", "conf", NULL, ""},
    {"note", "note", NULL, ""},
};

/* The kind of a column, from the unit its name ends with. */
static show_t show_of(const char *name) {
  size_t n = strlen(name);
#define ENDS(suffix) (n > strlen(suffix) && strcmp(name + n - strlen(suffix), suffix) == 0)
  if (ENDS("_bytes")) return SHOW_BYTES;
  if (ENDS("_pct")) return SHOW_PCT;
  if (ENDS("_per_s")) return SHOW_RATE;
  if (ENDS("_s")) return SHOW_S;
  if (ENDS("_ns") || strstr(name, "_ns_")) return SHOW_NS;
  if (ENDS("_ms") || strstr(name, "_ms_")) return SHOW_MS;
#undef ENDS
  return SHOW_TEXT;
}

/* The header of a column: its words, else its name less the unit, '_' read as ' '
 * ("alloc_ns_p99" is "alloc p99"). */
static void header_of(const char *name, bool cap, char *out, size_t size) {
  for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++)
    if (strcmp(labels[i].name, name) == 0) {
      snprintf(out, size, "%s", cap && labels[i].words_cap ? labels[i].words_cap : labels[i].words);
      return;
    }
  static const char *const units[] = {"_bytes", "_pct", "_ns", "_ms", "_s"};
  size_t k = 0;
  for (const char *c = name; *c && k + 1 < size;) {
    size_t skip = 0;
    for (size_t u = 0; u < sizeof units / sizeof units[0] && !skip; u++) {
      size_t len = strlen(units[u]);
      if (strncmp(c, units[u], len) == 0 && (c[len] == '\0' || c[len] == '_')) skip = len;
    }
    if (skip) {
      c += skip;
      continue;
    }
    out[k++] = *c == '_' ? ' ' : *c;
    c++;
  }
  out[k] = '\0';
}

static bool absent(const char *name, const char *cell) {
  if (cell == NULL || cell[0] == '\0') return true;
  for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++)
    if (strcmp(labels[i].name, name) == 0) return labels[i].absent && strcmp(cell, labels[i].absent) == 0;
  return false;
}

/* Whether cell c of row r does not apply: by its value, or a seed where the workload is a
 * recorded trace, which draws nothing at random. */
static bool absent_at(const ab_table_t *t, size_t r, size_t c) {
  const char *name = t->cols[c].name;
  if (absent(name, t->cells[r * t->ncols + c])) return true;
  if (strcmp(name, "seed") != 0) return false;
  const char *w = ab_table_get(t, r, "workload");
  return w && strncmp(w, "replay:", 7) == 0;
}

/* A time of v in unit (1 = s, 1e-3 = ms, 1e-9 = ns) with the unit that reads best. */
static const char *format_time(double v, double unit, char *buf, size_t size) {
  double s = v * unit;
  if (s == 0)
    snprintf(buf, size, "0 s");
  else if (s < 1e-6)
    snprintf(buf, size, "%.0f ns", s * 1e9);
  else if (s < 1e-3)
    snprintf(buf, size, "%.1f us", s * 1e6);
  else if (s < 1)
    snprintf(buf, size, "%.1f ms", s * 1e3);
  else
    snprintf(buf, size, "%.2f s", s);
  return buf;
}

static const char *format_cell(show_t kind, const char *cell, char *buf, size_t size) {
  char *end;
  double v = strtod(cell, &end);
  if (end == cell || *end != '\0') return cell; /* not a number: as it is */
  switch (kind) {
    case SHOW_BYTES: return ab_format_bytes(strtoull(cell, NULL, 10), buf, size);
    case SHOW_NS: return format_time(v, 1e-9, buf, size);
    case SHOW_MS: return format_time(v, 1e-3, buf, size);
    case SHOW_S: return format_time(v, 1, buf, size);
    case SHOW_PCT: return snprintf(buf, size, "%.1f%%", v), buf;
    case SHOW_RATE:
      if (v >= 1e6) return snprintf(buf, size, "%.2f M", v / 1e6), buf;
      if (v >= 1e3) return snprintf(buf, size, "%.1f k", v / 1e3), buf;
      return snprintf(buf, size, "%.0f", v), buf;
    case SHOW_TEXT: break;
  }
  return cell;
}

/* Two figures read "fragmentation" and can seem to disagree: frag_pct, the papers' ratio
 * over the whole run (1 - peak allocated / peak reserved, taken at the peaks), and the OOM
 * kind, the state at the failure (Note [OOM kinds] in engine.h). A run can end in a
 * fragmentation OOM with 0% peak fragmentation: the peak came first, the scattered holes
 * after it. So the one run's table says what the kind means, beside "peak fragmentation". */
static const char *kind_meaning(const char *kind) {
  if (strcmp(kind, "capacity") == 0) return "the live requests and this one exceed the limit";
  if (strcmp(kind, "rounding") == 0) return "fits as requested, not as the strategy rounds it";
  if (strcmp(kind, "fragmentation") == 0) return "fits, but the free memory was scattered or cached at the OOM";
  return NULL;
}

/* Whether a cell of column `name` is a size shown in a binary unit. */
static bool is_size(const char *name, const char *cell) {
  if (cell == NULL || *cell == '\0' || absent(name, cell) || show_of(name) != SHOW_BYTES) return false;
  char *end;
  errno = 0;
  strtoull(cell, &end, 10);
  return *end == '\0' && errno == 0 && cell[0] != '-';
}

/* The figures that come with a placement band (band.h): the table shows the band beside the
 * figure where it is not a point, and never the band's own columns. */
static const struct {
  const char *point, *low, *high;
} bands[] = {
    {"peak_reserved_bytes", "peak_reserved_low", "peak_reserved_high"},
    {"num_device_alloc", "device_allocs_low", "device_allocs_high"},
};

static bool is_band_end(const char *name) {
  for (size_t i = 0; i < sizeof bands / sizeof bands[0]; i++)
    if (strcmp(name, bands[i].low) == 0 || strcmp(name, bands[i].high) == 0) return true;
  return false;
}

/* Row r's cell of column `name`, or NULL when t has no such column. */
static const char *cell_named(const ab_table_t *t, size_t r, const char *name) {
  for (size_t c = 0; c < t->ncols; c++)
    if (strcmp(t->cols[c].name, name) == 0) return t->cells[r * t->ncols + c];
  return NULL;
}

/* Row r's figure of column `name` with its band, into buf, when the row has a band that is
 * not a point: "6.05 GiB (6.03-6.05 GiB)", "365 (363-365)". NULL otherwise. */
static const char *with_band(const ab_table_t *t, size_t r, const char *name, char *buf, size_t size) {
  for (size_t i = 0; i < sizeof bands / sizeof bands[0]; i++) {
    if (strcmp(name, bands[i].point) != 0) continue;
    const char *v = cell_named(t, r, name), *lo = cell_named(t, r, bands[i].low), *hi = cell_named(t, r, bands[i].high);
    if (v == NULL || lo == NULL || hi == NULL || !*v || !*lo || !*hi || strcmp(lo, hi) == 0) return NULL;
    uint64_t p = strtoull(v, NULL, 10), l = strtoull(lo, NULL, 10), h = strtoull(hi, NULL, 10);
    if (show_of(name) == SHOW_BYTES) return ab_band_format_bytes(p, l, h, buf, size);
    snprintf(buf, size, "%" PRIu64 " (%" PRIu64 "-%" PRIu64 ")", p, l, h);
    return buf;
  }
  return NULL;
}

/* t as people read it (Note [Tables for people]): the columns named (all when names is
 * NULL) that apply, under their words, their cells formatted. cols_out holds the headers
 * and is freed by the caller after out. */
static ab_status for_people(const ab_table_t *t, const char *const *names, size_t nnames, bool cap, ab_table_t *out,
                            ab_col_t **cols_out) {
  size_t n = names ? nnames : t->ncols, k = 0;
  size_t *pick = malloc((n + 1) * sizeof *pick);
  ab_col_t *cols = malloc((n + 1) * sizeof *cols);
  char(*words)[48] = malloc((n + 1) * sizeof *words);
  const char **row = malloc((n + 1) * sizeof *row);
  char(*cell)[128] = malloc((n + 1) * sizeof *cell);
  *cols_out = cols;
  ab_status st = pick && cols && words && row && cell ? AB_OK : AB_ERR_INTERNAL;
  for (size_t i = 0; i < n && st == AB_OK; i++) {
    size_t c = i;
    if (names) {
      for (c = 0; c < t->ncols && strcmp(t->cols[c].name, names[i]) != 0; c++) continue;
      if (c == t->ncols) continue;
    }
    if (is_band_end(t->cols[c].name)) continue;
    /* A column that applies to no row is left out; so is a single run's row that does not apply. */
    bool applies = false;
    for (size_t r = 0; r < t->nrows && !applies; r++) applies = !absent_at(t, r, c);
    if (!applies && t->nrows > 0) continue;
    pick[k] = c;
    header_of(t->cols[c].name, cap, words[k], sizeof words[k]);
    cols[k] = (ab_col_t){words[k], t->cols[c].numeric};
    k++;
  }
  if (st == AB_OK) ab_table_init(out, cols, k);
  /* The sizes of the table read apart where they differ (the smallest budget beside the largest
   * failing one, one strategy's peak beside another's): all of them formatted as one set. */
  size_t nsizes = 0;
  uint64_t *sizes = st == AB_OK ? malloc((t->nrows * k + 1) * sizeof *sizes) : NULL;
  char(*texts)[AB_BYTES_TEXT] = sizes ? malloc((t->nrows * k + 1) * sizeof *texts) : NULL;
  if (st == AB_OK && texts == NULL) st = AB_ERR_INTERNAL;
  for (size_t r = 0; r < t->nrows && st == AB_OK; r++)
    for (size_t j = 0; j < k; j++) {
      const char *v = t->cells[r * t->ncols + pick[j]];
      if (is_size(t->cols[pick[j]].name, v)) sizes[nsizes++] = strtoull(v, NULL, 10);
    }
  if (st == AB_OK) ab_format_bytes_apart(sizes, nsizes, texts);
  nsizes = 0;
  for (size_t r = 0; r < t->nrows && st == AB_OK; r++) {
    for (size_t j = 0; j < k; j++) {
      size_t c = pick[j];
      const char *v = t->cells[r * t->ncols + c];
      const char *meaning = t->nrows == 1 && !names && strcmp(t->cols[c].name, "oom_kind") == 0 && v ? kind_meaning(v) : NULL;
      if (is_size(t->cols[c].name, v))
        row[j] = texts[nsizes++];
      else if (meaning)
        row[j] = (snprintf(cell[j], sizeof cell[j], "%s (%s)", v, meaning), cell[j]);
      else
        row[j] = !absent_at(t, r, c) ? format_cell(show_of(t->cols[c].name), v, cell[j], sizeof cell[j]) : "";
      const char *banded = with_band(t, r, t->cols[c].name, cell[j], sizeof cell[j]);
      if (banded) row[j] = banded;
    }
    st = ab_table_add(out, row);
  }
  free(sizes);
  free(texts);
  /* The headers live in words, which the table points to: keep them with the columns. */
  if (st == AB_OK && k) {
    ab_col_t *kept = realloc(cols, k * sizeof *cols + k * sizeof *words);
    if (kept) {
      char(*moved)[48] = (void *)(kept + k);
      memcpy(moved, words, k * sizeof *words);
      for (size_t j = 0; j < k; j++) kept[j].name = moved[j];
      out->cols = kept;
      *cols_out = kept;
    } else {
      st = AB_ERR_INTERNAL;
    }
  }
  free(pick);
  free(words);
  free(row);
  free(cell);
  return st;
}

void ab_cli_print(const ab_run_spec_t *o, const ab_table_t *t, const char *const *cols, size_t ncols) {
  ab_table_t shown = {0};
  ab_col_t *headers = NULL;
  switch (o->format) {
    case AB_FORMAT_CSV: ab_table_write_csv(t, stdout, true); break;
    case AB_FORMAT_JSON: ab_table_write_json(t, stdout); break;
    case AB_FORMAT_TABLE: {
      if (for_people(t, cols, ncols, o->cap, &shown, &headers) != AB_OK) {
        ab_table_write_text(t, stdout, cols, ncols); /* the raw table will do */
        ab_table_free(&shown);
        free(headers);
        break;
      }
      if (shown.nrows == 1 && cols == NULL)
        ab_table_write_pairs(&shown, 0, stdout);
      else
        ab_table_write_text(&shown, stdout, NULL, 0);
      ab_table_free(&shown);
      free(headers);
      break;
    }
  }
  fflush(stdout);
}

ab_status ab_cli_append(const ab_run_spec_t *o, const ab_table_t *t, const char *name, ab_diag_t *diag) {
  char path[4096], moved[4200];
  snprintf(path, sizeof path, "%s/%s", o->out_dir, name);
  AB_TRY(ab_table_append_csv(t, path, moved, sizeof moved, diag));
  if (moved[0] && !o->quiet)
    fprintf(stderr, "%s: %s had other columns; it was moved to %s\n", o->cmd, path, moved);
  return AB_OK;
}

const char *ab_cli_strategy_shown(const char *name, char *buf, size_t size) {
  static const char prefix[] = "pluggable:";
  if (strncmp(name, prefix, sizeof prefix - 1) != 0) {
    snprintf(buf, size, "%s", name);
    return buf;
  }
  /* The path holds no ':' (the strategy refuses one), so it ends at the first. */
  const char *path = name + sizeof prefix - 1, *end = path + strcspn(path, ":"), *file = path;
  for (const char *p = path; p < end; p++)
    if (*p == '/') file = p + 1;
  snprintf(buf, size, "%.*s", (int)(end - file), file);
  return buf;
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
  /* A strategy named twice with the same options runs the same thing twice, and a verdict
   * between the two would name one row for both. */
  for (size_t i = 0; i < out->n; i++)
    for (size_t j = i + 1; j < out->n; j++)
      if (strcmp(out->name[i], out->name[j]) == 0 && strcmp(out->conf[i] ? out->conf[i] : "", out->conf[j] ? out->conf[j] : "") == 0)
        return ab_diag_set(diag, AB_ERR_INVALID, "-s '%s': %s is named at positions %zu and %zu with the same options; name it once%s",
                           list, out->name[i], i + 1, j + 1, confs ? ", or give each its own -c" : "");
  return AB_OK;
}

ab_status ab_cli_check_strategies(const ab_run_spec_t *o, const ab_bisect_opts_t *search,
                                  const ab_cli_strategies_t *list, uint64_t *total, ab_diag_t *diag) {
  ab_world_t device;
  memset(&device, 0, sizeof device);
  ab_status failed = AB_OK; /* the first library that failed as it was loaded */
  ab_diag_t why = {""};
  size_t checked = 0;
  for (size_t i = 0; i < list->n; i++) {
    ab_bisect_opts_t b = ab_run_search_opts(o, search, list->name[i], list->conf[i]);
    ab_world_t one;
    ab_diag_t said = {""};
    ab_status st = ab_bisect_check(&b, &one, &said);
    /* A library that crashed as it was loaded is no bad argument: its runs fail the same way
     * and are recorded as error rows while the others run (strategies/README.md). */
    if (st != AB_OK && st != AB_ERR_INVALID && ab_supervise_apart(list->name[i])) {
      if (failed == AB_OK) failed = st, why = said;
      continue;
    }
    if (st != AB_OK) {
      /* With several strategies, which one's conf was refused (a library names itself). */
      *diag = said;
      if (list->n > 1 && strncmp(diag->msg, list->name[i], strlen(list->name[i])) != 0)
        ab_diag_prefix(diag, "%s: ", list->name[i]);
      return st;
    }
    device = one;
    checked++;
  }
  if (checked == 0 && failed != AB_OK) { /* nothing else to run */
    *diag = why;
    return failed;
  }
  *total = device.total_bytes;
  if (list->n) ab_run_note_device(o, device.device, device.kind);
  return AB_OK;
}

ab_status ab_cli_parse_cap_map(const char *arg, unsigned *probes, bool *off, ab_diag_t *diag) {
  uint64_t n = 0;
  *off = strcmp(arg, "off") == 0;
  *probes = 0;
  if (*off || strcmp(arg, "all") == 0) return AB_OK;
  if (ab_parse_u64("--cap-map", arg, UINT32_MAX, &n, NULL) != AB_OK || n == 0)
    return ab_diag_set(diag, AB_ERR_INVALID, "--cap-map '%s': expected a number of intervals from 1 to %u, all or off", arg,
                       UINT32_MAX);
  *probes = (unsigned)n;
  return AB_OK;
}

bool ab_cli_search_option(int opt, const char *arg, ab_bisect_opts_t *b, ab_status *st, ab_diag_t *diag) {
  uint64_t *field;
  const char *what;
  *st = AB_OK;
  switch (opt) {
    case AB_OPT_CAP_MAP: *st = ab_cli_parse_cap_map(arg, &b->map_probes, &b->no_map, diag); return true;
    case AB_OPT_SEARCH:
      if (strcmp(arg, "cap") != 0 && strcmp(arg, "budget") != 0)
        *st = ab_diag_set(diag, AB_ERR_INVALID, "--search '%s': expected budget or cap", arg);
      b->cap = strcmp(arg, "cap") == 0;
      return true;
    case AB_OPT_LO: field = &b->lo, what = "--lo"; break;
    case AB_OPT_HI: field = &b->hi, what = "--hi"; break;
    case AB_OPT_TOLERANCE: field = &b->tolerance, what = "--tolerance"; break;
    default: return false;
  }
  *st = ab_parse_size(what, arg, field, diag);
  if (*st == AB_OK && *field == 0) *st = ab_diag_set(diag, AB_ERR_INVALID, "%s '%s': must be more than 0 bytes", what, arg);
  return true;
}

/* The own options of the search commands: the search's, -c once per strategy. */
typedef struct search_args_s {
  ab_bisect_opts_t *search;
  const char *confs[AB_CLI_MAX_STRATEGIES];
  size_t nconfs;
  const char *searched; /* --search, as given; NULL: not given */
} search_args_t;

static bool search_own(void *ctx, int opt, const char *arg, ab_status *st, ab_diag_t *diag) {
  search_args_t *a = ctx;
  if (opt == 'c') {
    if (a->nconfs == AB_CLI_MAX_STRATEGIES)
      *st = ab_diag_set(diag, AB_ERR_INVALID, "-c given more times than there can be strategies");
    else if ((*st = check_conf(arg, diag)) == AB_OK)
      a->confs[a->nconfs++] = arg;
  } else {
    if (opt == AB_OPT_SEARCH) a->searched = arg;
    return ab_cli_search_option(opt, arg, a->search, st, diag);
  }
  return true;
}

/* A workload that asks for more than the card at its peak fits no budget, whatever the
 * strategy: said first, in words, before the searches find it out one by one. On stdout
 * with the table it heads; on stderr where stdout is data. */
static void say_too_large(const ab_run_spec_t *o, const ab_events_t *es, uint64_t total) {
  uint64_t peak = ab_bisect_peak_requested(es);
  if (peak <= total) return;
  char a[32], b[32], line[AB_DIAG_BYTES], name[256];
  ab_results_workload_name(es->source, name, sizeof name);
  snprintf(line, sizeof line, "%s requests %s at its peak, more than the device's %s: it fits no budget there, whatever the strategy.",
           name, ab_format_bytes(peak, a, sizeof a), ab_format_bytes(total, b, sizeof b));
  if (o->format == AB_FORMAT_TABLE)
    printf("%s\n", line);
  else if (!o->quiet)
    fprintf(stderr, "%s: %s\n", o->cmd, line);
  fflush(stdout);
}

int ab_cli_search_setup(int argc, char **argv, const ab_cli_command_t *cmd, ab_run_spec_t *o, ab_bisect_opts_t *search,
                        ab_cli_strategies_t *list, ab_events_t *es) {
  ab_diag_t diag = {""};
  memset(search, 0, sizeof *search);
  search_args_t args = {search, {NULL}, 0, NULL};
  int rc = ab_cli_parse(argc, argv, cmd, o, search_own, &args, 0, NULL, NULL);
  if (rc >= 0) return rc;
  /* The job's cap is a cap: its caps are the ones searched. */
  if (o->cap_bytes && args.searched && !search->cap)
    return ab_cli_usage_error(o, "--cap and --search budget: a cap is searched as a cap (--search cap, or leave --search out)");
  if (o->cap_bytes) search->cap = true;
  o->cap = search->cap;
  if (o->workload == NULL || o->strategy == NULL)
    return ab_cli_usage_error(o, "-w WORKLOAD and -s STRATEGY[,STRATEGY...] are required");
  if (ab_results_check_out(o->out_dir, &diag) != AB_OK) return ab_cli_usage_error(o, diag.msg);
  char a[32], b[32];
  if (search->lo && search->hi && search->lo > search->hi) {
    snprintf(diag.msg, sizeof diag.msg, "--lo %s is above --hi %s", ab_format_bytes(search->lo, a, sizeof a),
             ab_format_bytes(search->hi, b, sizeof b));
    return ab_cli_usage_error(o, diag.msg);
  }
  if (ab_cli_strategies(o->strategy, args.confs, args.nconfs, list, &diag) != AB_OK) return ab_cli_usage_error(o, diag.msg);
  ab_run_catch_stop(); /* a search stops within 1024 events of a signal, and says so */
  ab_status built = ab_run_build(o, o->workload, es, NULL, &diag);
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
  say_too_large(o, es, total);
  return -1;
}

ab_status ab_cli_search_oom(const ab_run_spec_t *o, const ab_run_desc_t *run, const ab_bisect_result_t *res,
                            const ab_oommap_t *map, bool report, ab_diag_t *diag) {
  if (!res->failed) return AB_OK;
  char path[4096];
  ab_status st = ab_oomreport_write(map, o->out_dir, run, path, sizeof path, diag);
  /* The failing probe ran unbudgeted only when the search found nothing that fits. */
  uint64_t budget = !res->passed && res->hi == 0 ? 0 : res->max_fail;
  if (report && !o->quiet) ab_oomreport_print(stderr, &res->oom, run->strategy, res->device, budget, map, path);
  return st;
}
