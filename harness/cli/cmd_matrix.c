/* cmd_matrix.c: `allocbench matrix`: every strategy on every workload of a list, recorded,
 * with a summary table at the end. What `make bench` runs.
 *
 * 1. The workloads are built first, all of them, so bad input is refused before anything
 *    runs. The default list is the bench's: the registry's workloads with bench arguments
 *    (workload.h). Its recorded trace ships with the repository (tests/data), so one that
 *    cannot be read is an error like any other.
 * 2. Each pair runs on a fresh device (ab_run_one); its row is appended to
 *    DIR/summary.csv at once, so an interrupted matrix keeps what it measured, and its
 *    timeline is written.
 * 3. An OOM is a result. A run that fails (a strategy error, a leak) is recorded with status
 *    error, the others go on, and the command exits 1 at the end.
 * 4. Each pair that ran also gets its smallest budget searched (bisect.h, as `allocbench oom`
 *    does): a row in DIR/oom.csv, and the segment map of the failing probe in
 *    DIR/oommap_<workload>[_conf-<hash>]_<strategy>.csv.
 * 5. SIGINT or SIGTERM stops the run in progress (unrecorded) and the matrix; the table
 *    shows the runs recorded, and the command says where they are (cli.h).
 * 6. The table, a workload at a time, fits 120 columns (Note [The matrix for people]).
 * 7. Under a launcher (mpirun, srun, torchrun: spread.h) pair j, in the order above, is rank
 *    (j mod world)'s; each rank writes the timelines and maps of its own pairs into its DIR, and
 *    rank 0 gathers every pair's rows and appends them, in order, as one process would.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/clock.h"
#include "kernels/base/output.h"
#include "kernels/base/units.h"
#include "harness/cli/cli.h"
#include "harness/cli/commands.h"
#include "harness/cli/spread.h"
#include "harness/run/bisect.h"
#include "harness/run/oommap.h"
#include "harness/run/oomreport.h"
#include "harness/run/results.h"
#include "strategies/registry.h"
#include "strategies/strategy.h"
#include "harness/tune/report.h"
#include "workloads/workload.h"
#include "harness/run/stop.h"

#define MAX_WORKLOADS 64

static const ab_cli_command_t command = {
    "allocbench matrix", AB_CMD_MATRIX, NULL,
    "Runs every strategy on every workload, appends one row per pair to DIR/summary.csv, writes\n"
    "each pair's timeline, searches each pair's smallest budget (DIR/oom.csv, with the segment\n"
    "map of the run that failed just below it), and prints a summary table. By default: every\n"
    "strategy of `allocbench list` on the bench workloads (`allocbench list -v` shows each one's\n"
    "\"in the bench as\": the workloads of the figures and the replay of the recorded trace).\n"
    "An OOM is a result; the command exits 1 if a run failed. Under a launcher (mpirun, srun,\n"
    "torchrun) the pairs are dealt out between its ranks, rank 0 writing the rows.\n"};

/* The workload spec to run: with --quick, NAME:QUICK,ARGS, less the quick arguments the user
 * gave (theirs win; a key may not be given twice). Arguments that are no KEY=VALUE list go
 * to the workload as given, for it to refuse with their positions. */
static void spec_of(const char *given, bool quick, char *out, size_t size) {
  const char *colon = strchr(given, ':');
  size_t len = colon ? (size_t)(colon - given) : strlen(given);
  char name[64];
  snprintf(name, sizeof name, "%.*s", (int)len, given);
  const ab_workload_t *w = ab_workload_find(name);
  const char *args = colon ? colon + 1 : "";
  ab_kvlist_t theirs, short_run;
  ab_diag_t ignored = {""};
  if (!quick || w == NULL || w->quick_args == NULL || ab_kv_parse("-w", args, '=', &theirs, &ignored) != AB_OK ||
      ab_kv_parse("--quick", w->quick_args, '=', &short_run, &ignored) != AB_OK) {
    snprintf(out, size, "%s", given);
    return;
  }
  size_t used = (size_t)snprintf(out, size, "%s", name);
  char sep = ':';
  for (size_t i = 0; i < short_run.n && used < size; i++) {
    const ab_kv_t *q = &short_run.items[i];
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)q->key_len, q->key);
    if (ab_kv_get(&theirs, key)) continue;
    used += (size_t)snprintf(out + used, size - used, "%c%s=%.*s", sep, key, (int)q->val_len, q->val);
    sep = ',';
  }
  if (*args && used < size) snprintf(out + used, size - used, "%c%s", sep, args);
}

/* The k-th workload of the bench as a spec in buf, or NULL past the last. */
static const char *bench_spec(size_t k, char *buf, size_t size) {
  size_t n;
  const ab_workload_t *const *reg = ab_workload_registry(&n);
  for (size_t i = 0; i < n; i++) {
    if (reg[i]->bench_args == NULL || k--) continue;
    snprintf(buf, size, "%s%s%s", reg[i]->name, *reg[i]->bench_args ? ":" : "", reg[i]->bench_args);
    return buf;
  }
  return NULL;
}

/* Time in ns, with a unit a person reads at a glance. */
static const char *format_ns(double ns, char *buf, size_t size) {
  if (ns < 1e3)
    snprintf(buf, size, "%.0f ns", ns);
  else if (ns < 1e6)
    snprintf(buf, size, "%.1f us", ns / 1e3);
  else if (ns < 1e9)
    snprintf(buf, size, "%.1f ms", ns / 1e6);
  else
    snprintf(buf, size, "%.2f s", ns / 1e9);
  return buf;
}

/* Note [The matrix for people]
 * The table fits 120 columns; summary.csv and oom.csv hold the wide form (every column, every
 * size in bytes). Each workload is a table of its own under its name, whole, and the live peak
 * its stream needs whatever the strategy (summary.csv's live_peak_bytes), so that neither a
 * long spec nor the peak requested, the same for every strategy that completes, takes a
 * column; the harness's wall time stays in the CSV. A workload's sizes are read as one set
 * (ab_format_bytes_apart) so that two strategies' figures that differ never read the same; where
 * even four decimals do not keep two apart, a figure would need its bytes, which would
 * double the table's width: it is marked '*' instead, and the bytes of the marked figures
 * follow the table. */
static const ab_col_t display_cols[] = {
    {"strategy", false},      {"status", false},    {"peak reserved", true}, {"smallest budget", true},
    {"res/req", true},        {"peak frag", true},  {"device allocs", true}, {"alloc p50", true},
    {"alloc p99", true},      {"step p50", true},
};
#define DISPLAY_NCOLS (sizeof display_cols / sizeof display_cols[0])
#define TABLE_WIDTH 120 /* what the table, with the registry's strategies, fits in */

/* A pair's smallest budget, as the table shows it. */
typedef struct budget_s {
  enum { BUDGET_UNSEARCHED, BUDGET_FOUND, BUDGET_NONE } state;
  uint64_t bytes; /* BUDGET_FOUND */
} budget_t;

/* A figure of the set, in the table's width: one that needs its bytes to read apart is cut back
 * to its unit and marked (Note [The matrix for people]); true when it was. */
static bool narrow(char *fig) {
  char *bytes = strstr(fig, " (");
  if (bytes == NULL) return false;
  snprintf(bytes, AB_BYTES_TEXT - (size_t)(bytes - fig), "*");
  return true;
}

/* The rows [first, end) of one workload as people read them, to f. */
static ab_status print_workload(FILE *f, const ab_table_t *rows, const budget_t *budgets, size_t first, size_t end) {
  size_t n = end - first;
  uint64_t *v = malloc((2 * n + 1) * sizeof *v);
  char(*fig)[AB_BYTES_TEXT] = malloc((2 * n + 1) * sizeof *fig);
  if (v == NULL || fig == NULL) {
    free(v);
    free(fig);
    return AB_ERR_INTERNAL;
  }
  for (size_t r = first; r < end; r++) {
    v[2 * (r - first)] = strtoull(ab_table_get(rows, r, "peak_reserved_bytes"), NULL, 10);
    v[2 * (r - first) + 1] = budgets[r].state == BUDGET_FOUND ? budgets[r].bytes : 0;
  }
  ab_format_bytes_apart(v, 2 * n, fig);
  char live[32];
  fprintf(f, "%s: live peak %s\n", ab_table_get(rows, first, "workload"),
          ab_format_bytes(strtoull(ab_table_get(rows, first, "live_peak_bytes"), NULL, 10), live, sizeof live));
  ab_table_t t;
  ab_table_init(&t, display_cols, DISPLAY_NCOLS);
  ab_status st = AB_OK;
  bool marked = false;
  for (size_t r = first; r < end && st == AB_OK; r++) {
    char *res = fig[2 * (r - first)], *found = fig[2 * (r - first) + 1];
    marked |= narrow(res);
    const char *budget = budgets[r].state == BUDGET_NONE ? "none" : budgets[r].state == BUDGET_FOUND ? found : "";
    if (budgets[r].state == BUDGET_FOUND) marked |= narrow(found);
    char ratio[32], frag[32], p50[32], p99[32], step[32];
    uint64_t requested = strtoull(ab_table_get(rows, r, "peak_requested_bytes"), NULL, 10);
    if (requested)
      snprintf(ratio, sizeof ratio, "%.3f", (double)v[2 * (r - first)] / (double)requested);
    else
      snprintf(ratio, sizeof ratio, "-");
    snprintf(frag, sizeof frag, "%.1f%%", strtod(ab_table_get(rows, r, "frag_pct"), NULL));
    /* A trace has no steps: no step time. */
    double step_ms = strtod(ab_table_get(rows, r, "step_ms_p50"), NULL);
    if (step_ms > 0)
      format_ns(step_ms * 1e6, step, sizeof step);
    else
      step[0] = '\0';
    char shown[1024];
    const char *cells[] = {ab_cli_strategy_shown(ab_table_get(rows, r, "strategy"), shown, sizeof shown),
                           ab_table_get(rows, r, "status"), res, budget, ratio, frag,
                           ab_table_get(rows, r, "num_device_alloc"),
                           format_ns(strtod(ab_table_get(rows, r, "alloc_ns_p50"), NULL), p50, sizeof p50),
                           format_ns(strtod(ab_table_get(rows, r, "alloc_ns_p99"), NULL), p99, sizeof p99), step};
    st = ab_table_add(&t, cells);
  }
  if (st == AB_OK) ab_table_write_text(&t, f, NULL, 0);
  /* The bytes of the marked figures, each strategy's once per column, on lines of at most
   * TABLE_WIDTH. */
  for (int c = 0; c < 2 && st == AB_OK && marked; c++) {
    size_t used = 0;
    for (size_t r = first; r < end; r++) {
      const char *shown = fig[2 * (r - first) + (size_t)c];
      if (shown[strlen(shown) - 1] != '*' || (c == 1 && budgets[r].state != BUDGET_FOUND)) continue;
      char item[160], name[1024];
      int len = snprintf(item, sizeof item, "%s %" PRIu64 " B",
                         ab_cli_strategy_shown(ab_table_get(rows, r, "strategy"), name, sizeof name),
                         v[2 * (r - first) + (size_t)c]);
      if (used == 0)
        used = (size_t)fprintf(f, "%s", c == 0 ? "* in bytes, peak reserved: " : "* in bytes, smallest budget: ");
      else if (used + 2 + (size_t)len > TABLE_WIDTH)
        fprintf(f, ",\n  "), used = 2;
      else
        used += (size_t)fprintf(f, ", ");
      used += (size_t)fprintf(f, "%s", item);
    }
    if (used) fputc('\n', f);
  }
  ab_table_free(&t);
  free(v);
  free(fig);
  return st;
}

/* The summary rows, as a person reads them (Note [The matrix for people]), with each pair's
 * smallest budget (budgets[r]): one table per workload, in the order they ran. */
static ab_status display(FILE *f, const ab_table_t *rows, const budget_t *budgets) {
  for (size_t first = 0, end; first < rows->nrows; first = end) {
    /* The rows of one workload follow each other. */
    for (end = first + 1; end < rows->nrows; end++)
      if (strcmp(ab_table_get(rows, end, "workload"), ab_table_get(rows, first, "workload")) != 0) break;
    fputc('\n', f);
    AB_TRY(print_workload(f, rows, budgets, first, end));
  }
  return AB_OK;
}

/* The smallest budget of one pair, searched into the pair's run, its row of DIR/oom.csv added
 * to row; the segment map of its failing probe is written into DIR. */
static ab_status search_pair(const ab_run_spec_t *o, const ab_events_t *es, const char *strategy, ab_run_t *run,
                             ab_oommap_t *map, ab_bisect_result_t *res, ab_table_t *row, ab_diag_t *diag) {
  ab_bisect_opts_t range = {0};
  ab_bisect_opts_t b = ab_run_search_opts(o, &range, strategy, o->conf);
  b.on_oom = ab_oommap_capture;
  b.on_oom_ctx = map;
  AB_TRY(ab_bisect_search(es, &b, run, res, diag));
  if (res->interrupted) return AB_OK; /* no answer to record */
  ab_run_desc_t desc = {es->source, strategy, o->conf, res->device, 0, o->seed, 0, NULL};
  ab_status st = ab_results_add_oom(row, &desc, es, res);
  if (st == AB_OK && res->failed) st = ab_oomreport_write(map, o->out_dir, &desc, NULL, 0, diag);
  return st;
}

/* ---- a pair's outcome, carried to rank 0 -------------------------------------------------------- */

/* What one pair gave: its summary row, its row of oom.csv, its smallest budget. */
typedef struct pair_s {
  ab_table_t row;      /* ab_summary_cols; no row: nothing ran */
  ab_table_t oom;      /* ab_oom_cols; no row: not searched */
  budget_t budget;
  bool failed;         /* its run failed (status error) */
  bool search_failed;  /* its budget search failed */
} pair_t;

static void pair_init(pair_t *p) {
  memset(p, 0, sizeof *p);
  ab_table_init(&p->row, ab_summary_cols, ab_summary_ncols);
  ab_table_init(&p->oom, ab_oom_cols, ab_oom_ncols);
}

static void pair_free(pair_t *p) {
  ab_table_free(&p->row);
  ab_table_free(&p->oom);
}

/* A growing buffer of bytes: a rank's pairs, packed. */
typedef struct pack_s {
  unsigned char *b;
  size_t n, cap;
  bool failed;
} pack_t;

static void put(pack_t *k, const void *p, size_t n) {
  if (k->failed) return;
  if (k->n + n > k->cap) {
    size_t cap = k->cap ? k->cap : 4096;
    while (cap < k->n + n) cap *= 2;
    unsigned char *b = realloc(k->b, cap);
    if (b == NULL) {
      k->failed = true;
      return;
    }
    k->b = b;
    k->cap = cap;
  }
  memcpy(k->b + k->n, p, n);
  k->n += n;
}

/* A table's rows: their count, then every cell with its NUL. */
static void put_table(pack_t *k, const ab_table_t *t) {
  uint32_t rows = (uint32_t)t->nrows;
  put(k, &rows, sizeof rows);
  for (size_t i = 0; i < t->nrows * t->ncols; i++) put(k, t->cells[i] ? t->cells[i] : "", strlen(t->cells[i] ? t->cells[i] : "") + 1);
}

static void put_pair(pack_t *k, uint64_t j, const pair_t *p) {
  put(k, &j, sizeof j);
  put(k, &p->budget, sizeof p->budget);
  uint8_t flags = (uint8_t)(p->failed | p->search_failed << 1);
  put(k, &flags, sizeof flags);
  put_table(k, &p->row);
  put_table(k, &p->oom);
}

/* The reading side: false when the bytes run out or make no sense. */
static bool get(const unsigned char **at, const unsigned char *end, void *p, size_t n) {
  if ((size_t)(end - *at) < n) return false;
  memcpy(p, *at, n);
  *at += n;
  return true;
}

static bool get_table(const unsigned char **at, const unsigned char *end, ab_table_t *t) {
  uint32_t rows = 0;
  if (!get(at, end, &rows, sizeof rows) || rows > 1) return false;
  const char *cells[64];
  if (t->ncols > 64) return false;
  for (uint32_t r = 0; r < rows; r++) {
    for (size_t c = 0; c < t->ncols; c++) {
      const unsigned char *nul = memchr(*at, '\0', (size_t)(end - *at));
      if (nul == NULL) return false;
      cells[c] = (const char *)*at;
      *at = nul + 1;
    }
    if (ab_table_add(t, cells) != AB_OK) return false;
  }
  return true;
}

static bool get_pair(const unsigned char **at, const unsigned char *end, size_t npairs, pair_t *pairs) {
  uint64_t j = 0;
  uint8_t flags = 0;
  budget_t budget;
  if (!get(at, end, &j, sizeof j) || j >= npairs || !get(at, end, &budget, sizeof budget) || !get(at, end, &flags, 1))
    return false;
  pair_t *p = &pairs[j];
  p->budget = budget;
  p->failed = flags & 1;
  p->search_failed = flags & 2;
  return get_table(at, end, &p->row) && get_table(at, end, &p->oom);
}

/* Every rank's pairs at rank 0 (spread.h): each rank sends those it ran. */
static ab_status gather_pairs(const ab_spread_t *sp, pair_t *pairs, size_t n, ab_diag_t *diag) {
  pack_t k = {NULL, 0, 0, false};
  for (size_t j = 0; j < n; j++)
    if (ab_spread_mine(sp, j) && pairs[j].row.nrows) put_pair(&k, j, &pairs[j]);
  void **blobs = calloc(sp->world, sizeof *blobs);
  size_t *sizes = calloc(sp->world, sizeof *sizes);
  ab_status st = !k.failed && blobs && sizes ? AB_OK : ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  if (st == AB_OK)
    st = ab_link_gather(sp->link, k.b ? k.b : (void *)"", k.n, blobs, sizes, ab_clock_s() + sp->link->waits.results_s,
                        "matrix's runs", diag);
  for (unsigned r = 1; st == AB_OK && sp->rank == 0 && r < sp->world; r++) {
    const unsigned char *at = blobs[r], *end = at + sizes[r];
    while (at < end && st == AB_OK)
      if (!get_pair(&at, end, n, pairs)) st = ab_diag_set(diag, AB_ERR_IO, "rank %u sent matrix's runs that made no sense", r);
  }
  for (unsigned r = 0; blobs && r < sp->world; r++) free(blobs[r]);
  free(blobs);
  free(sizes);
  free(k.b);
  return st;
}

/* What every rank must agree on before the pairs are dealt out. */
static uint64_t matrix_digest(const ab_events_t *streams, size_t nw, const ab_cli_strategies_t *list, const ab_run_spec_t *o) {
  uint64_t h = 1469598103934665603ULL;
  uint64_t words[3] = {nw, list->n, o->seed};
  for (size_t i = 0; i < 3; i++) h = (h ^ words[i]) * 1099511628211ULL;
  for (size_t w = 0; w < nw; w++) h = (h ^ ab_events_hash(&streams[w])) * 1099511628211ULL;
  for (size_t s = 0; s < list->n; s++) {
    const char *texts[2] = {list->name[s], list->conf[s] ? list->conf[s] : ""};
    for (int t = 0; t < 2; t++)
      for (const char *c = texts[t]; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL;
  }
  return h;
}

/* matrix's own options: --quick, and -w and -c, which may repeat. */
typedef struct matrix_args_s {
  bool quick;
  const char *given[MAX_WORKLOADS];
  size_t ngiven;
  const char *confs[AB_CLI_MAX_STRATEGIES];
  size_t nconfs;
} matrix_args_t;

static bool own_option(void *ctx, int opt, const char *arg, ab_status *st, ab_diag_t *diag) {
  matrix_args_t *a = ctx;
  if (opt == AB_OPT_QUICK) {
    a->quick = true;
  } else if (opt == 'w') {
    if (a->ngiven == MAX_WORKLOADS) *st = ab_diag_set(diag, AB_ERR_INVALID, "more than %d -w", MAX_WORKLOADS);
    else a->given[a->ngiven++] = arg;
  } else if (opt == 'c') {
    if (a->nconfs == AB_CLI_MAX_STRATEGIES) *st = ab_diag_set(diag, AB_ERR_INVALID, "more than %d -c", AB_CLI_MAX_STRATEGIES);
    else a->confs[a->nconfs++] = arg;
  } else {
    return false;
  }
  return true;
}

int ab_cmd_matrix(int argc, char **argv) {
  ab_run_spec_t o;
  ab_run_spec_defaults(&o, "allocbench matrix");
  ab_diag_t diag = {""};
  matrix_args_t a;
  memset(&a, 0, sizeof a);
  int rc = ab_cli_parse(argc, argv, &command, &o, own_option, &a, 0, NULL, NULL);
  if (rc >= 0) return rc;
  if (ab_results_check_out(o.out_dir, &diag) != AB_OK) return ab_cli_usage_error(&o, diag.msg);
  rc = AB_EXIT_OK;
  ab_run_catch_stop();

  /* The strategies: -s with their -c (as `allocbench oom` takes them), or every one listed. */
  ab_cli_strategies_t list;
  if (o.strategy) {
    if (ab_cli_strategies(o.strategy, a.confs, a.nconfs, &list, &diag) != AB_OK) return ab_cli_usage_error(&o, diag.msg);
  } else {
    if (a.nconfs) return ab_cli_usage_error(&o, "-c: name the strategies it is for with -s");
    memset(&list, 0, sizeof list);
    size_t n;
    const ab_strategy_entry_t *entries = ab_strategy_registry(&n);
    for (size_t i = 0; i < n && list.n < AB_CLI_MAX_STRATEGIES; i++)
      if (!entries[i].hidden) snprintf(list.name[list.n++], sizeof list.name[0], "%s", entries[i].name);
  }
  /* Each strategy is made once with its -c before anything runs, so a bad conf or library
   * stops the command before the first row. */
  ab_bisect_opts_t unsearched = {0};
  uint64_t total;
  ab_status checked = ab_cli_check_strategies(&o, &unsearched, &list, &total, &diag);
  if (checked != AB_OK) return checked == AB_ERR_INVALID ? ab_cli_usage_error(&o, diag.msg) : ab_cli_fail(&o, diag.msg);
  size_t nstrat = list.n;
  const char **given = a.given;
  size_t ngiven = a.ngiven;
  bool quick = a.quick;

  /* The workloads, built before anything runs: those given, or the bench's. */
  char bench[4200];
  if (ngiven == 0)
    while (bench_spec(ngiven, bench, sizeof bench)) ngiven++;
  ab_events_t *streams = calloc(ngiven ? ngiven : 1, sizeof *streams);
  if (streams == NULL) return ab_cli_fail(&o, "out of host memory");
  size_t nw = 0;
  for (size_t i = 0; i < ngiven && rc == AB_EXIT_OK; i++) {
    char spec[4200];
    spec_of(a.ngiven ? given[i] : bench_spec(i, bench, sizeof bench), quick, spec, sizeof spec);
    ab_status st = ab_run_build(&o, spec, &streams[nw], NULL, &diag);
    /* Rows are known by their workload's name: two of one name (one -w twice, or traces of
     * one file name in two folders) would be rows nobody can tell apart, here and in the page. */
    char name[4200], other[4200];
    if (st == AB_OK) ab_results_workload_name(streams[nw].source, name, sizeof name);
    for (size_t k = 0; st == AB_OK && k < nw; k++) {
      ab_results_workload_name(streams[k].source, other, sizeof other);
      if (strcmp(name, other) == 0) {
        st = ab_diag_set(&diag, AB_ERR_INVALID, "-w '%s': its rows would be named %s, as an earlier -w's are (give each "
                         "workload once; a trace of another's file name, under a name of its own)", spec, name);
        ab_events_free(&streams[nw]);
      }
    }
    if (st == AB_OK)
      nw++;
    else if (ab_run_stop)
      rc = ab_cli_interrupted(&o, 0, 0);
    else
      rc = st == AB_ERR_INVALID ? ab_cli_usage_error(&o, diag.msg) : ab_cli_fail(&o, diag.msg);
  }
  if (rc == AB_EXIT_OK && nw == 0) rc = ab_cli_usage_error(&o, "no workload to run");

  /* Under a launcher the pairs are dealt out (spread.h): every rank has built the same. */
  ab_spread_t sp;
  memset(&sp, 0, sizeof sp);
  sp.world = 1;
  sp.say_as = o.quiet ? NULL : o.cmd;
  if (rc == AB_EXIT_OK) {
    ab_status joined = ab_spread_open(&sp, &diag);
    if (joined == AB_OK) {
      ab_run_catch_stop(); /* again: MPI's start may have set its own handlers */
      joined = ab_spread_meet(&sp, matrix_digest(streams, nw, &list, &o), "allocbench matrix", o.quiet, &diag);
    }
    if (joined != AB_OK) rc = joined == AB_ERR_INVALID ? ab_cli_usage_error(&o, diag.msg) : ab_cli_fail(&o, diag.msg);
  }
  /* Rank 0 alone says what the runs do; the others say only what fails. */
  bool asked_quiet = o.quiet;
  o.quiet = o.quiet || sp.rank != 0;
  bool quiet = o.quiet;

  ab_table_t all;
  ab_table_init(&all, ab_summary_cols, ab_summary_ncols);
  ab_oommap_t map;
  ab_oommap_init(&map);
  size_t failed = 0, done = 0, searches_failed = 0, npairs = nw * nstrat;
  double t0 = ab_clock_s();
  budget_t *budgets = calloc(npairs + 1, sizeof *budgets); /* per row of all: its smallest budget */
  pair_t *pairs = calloc(npairs + 1, sizeof *pairs);
  for (size_t j = 0; pairs && j < npairs; j++) pair_init(&pairs[j]);
  if (rc == AB_EXIT_OK && (budgets == NULL || pairs == NULL)) rc = ab_cli_fail(&o, "out of host memory");
  for (size_t w = 0; w < nw && rc == AB_EXIT_OK && !ab_run_stop; w++) {
    ab_run_t run;
    if (ab_run_prepare(&run, &streams[w]) != AB_OK) {
      rc = ab_cli_fail(&o, "out of host memory");
      break;
    }
    for (size_t s = 0; s < nstrat && rc == AB_EXIT_OK && !ab_run_stop; s++) {
      size_t j = w * nstrat + s;
      if (!ab_spread_mine(&sp, j)) continue;
      pair_t *p = &pairs[j];
      ab_run_spec_t os = o; /* the strategy's own -c */
      os.conf = list.conf[s];
      const char *strategy = list.name[s];
      ab_diag_t why = {""};
      ab_status st = ab_run_one(&os, &streams[w], strategy, &run, &p->row, NULL, &why);
      if (run.status == AB_RUN_INTERRUPTED) { /* not recorded */
        ab_table_free(&p->row);
        ab_table_init(&p->row, ab_summary_cols, ab_summary_ncols);
        break;
      }
      if (p->row.nrows == 0) { /* nothing ran: no device, or a bad -c */
        rc = st == AB_ERR_INVALID ? ab_cli_usage_error(&o, why.msg) : ab_cli_fail(&o, why.msg);
        break;
      }
      done++;
      char name[256];
      ab_results_workload_name(streams[w].source, name, sizeof name);
      p->failed = st != AB_OK;
      if (st != AB_OK)
        fprintf(stderr, "allocbench matrix: %s on %s failed: %s\n", strategy, name, why.msg);
      else if (!quiet)
        fprintf(stderr, "allocbench matrix: [%zu/%zu] %s on %s: %s, %.2f s\n", done, npairs, strategy, name,
                ab_run_status_name(run.status), run.loop_s);
      ab_bisect_result_t res;
      if (st == AB_OK && search_pair(&os, &streams[w], strategy, &run, &map, &res, &p->oom, &why) != AB_OK) {
        p->search_failed = true;
        fprintf(stderr, "allocbench matrix: the budget search of %s on %s failed: %s\n", strategy, name, why.msg);
      } else if (st == AB_OK && !quiet && !res.interrupted) {
        char budget[32];
        if (res.passed)
          ab_format_bytes(res.min_budget, budget, sizeof budget);
        else
          snprintf(budget, sizeof budget, "none");
        fprintf(stderr, "allocbench matrix:   smallest budget %s (%u probes, %.2f s)\n", budget, res.probes, res.wall_s);
      }
      if (st == AB_OK && !res.interrupted)
        p->budget = res.passed ? (budget_t){BUDGET_FOUND, res.min_budget} : (budget_t){BUDGET_NONE, 0};
      /* Alone, the rows go to the files at once, so that an interrupted matrix keeps them. */
      if (sp.link == NULL) {
        ab_diag_t io = {""};
        if (ab_cli_append(&os, &p->row, "summary.csv", &io) != AB_OK ||
            (p->oom.nrows && ab_cli_append(&os, &p->oom, "oom.csv", &io) != AB_OK))
          rc = ab_cli_fail(&o, io.msg);
      }
    }
    ab_run_release(&run);
  }
  /* With several ranks, rank 0 gathers every pair and appends the rows in order. */
  if (sp.link && rc == AB_EXIT_OK && !ab_run_stop) {
    ab_status st = gather_pairs(&sp, pairs, npairs, &diag);
    if (st != AB_OK && !ab_run_stop) rc = ab_cli_fail(&o, diag.msg);
    for (size_t j = 0; j < npairs && rc == AB_EXIT_OK && sp.rank == 0; j++) {
      ab_diag_t io = {""};
      if ((pairs[j].row.nrows && ab_cli_append(&o, &pairs[j].row, "summary.csv", &io) != AB_OK) ||
          (pairs[j].oom.nrows && ab_cli_append(&o, &pairs[j].oom, "oom.csv", &io) != AB_OK))
        rc = ab_cli_fail(&o, io.msg);
    }
    done = 0;
    for (size_t j = 0; j < npairs; j++) done += pairs[j].row.nrows > 0;
  }
  for (size_t j = 0; j < npairs && rc == AB_EXIT_OK && sp.rank == 0; j++) {
    if (pairs[j].row.nrows == 0) continue;
    if (ab_table_add(&all, (const char *const *)pairs[j].row.cells) != AB_OK) rc = ab_cli_fail(&o, "out of host memory");
    budgets[all.nrows - 1] = pairs[j].budget;
    failed += pairs[j].failed;
    searches_failed += pairs[j].search_failed;
  }
  for (size_t j = 0; pairs && j < npairs; j++) pair_free(&pairs[j]);
  free(pairs);
  if (sp.rank != 0) {
    /* The rows are rank 0's to write. */
    if (rc == AB_EXIT_OK && !ab_run_stop && !asked_quiet)
      fprintf(stderr, "allocbench matrix: rank %u of %u: its share of the runs done; rank 0 writes the results\n", sp.rank,
              sp.world);
    if (rc == AB_EXIT_OK && ab_run_stop) rc = ab_cli_interrupted(&o, done, npairs);
  } else {
    if (all.nrows > 0) {
      if (o.format == AB_FORMAT_TABLE) {
        if (display(stdout, &all, budgets) == AB_OK)
          printf("\n%zu runs (%zu workloads x %zu strategies) in %.1f s; rows appended to %s/summary.csv\n", all.nrows,
                 nw, nstrat, ab_clock_s() - t0, o.out_dir);
        else
          rc = ab_cli_fail(&o, "out of host memory");
      } else {
        ab_cli_print(&o, &all, NULL, 0);
      }
    }
    if (rc == AB_EXIT_OK && ab_run_stop) rc = ab_cli_interrupted(&o, done, nw * nstrat);
    if (rc == AB_EXIT_OK && failed) {
      snprintf(diag.msg, sizeof diag.msg, "%zu of %zu runs failed (status error in summary.csv)", failed, done);
      rc = ab_cli_fail(&o, diag.msg);
    }
    if (rc == AB_EXIT_OK && searches_failed) {
      snprintf(diag.msg, sizeof diag.msg, "%zu budget search(es) failed (see above)", searches_failed);
      rc = ab_cli_fail(&o, diag.msg);
    }
  }
  ab_spread_close(&sp, !ab_run_stop);
  ab_oommap_free(&map);
  ab_table_free(&all);
  free(budgets);
  for (size_t w = 0; w < nw; w++) ab_events_free(&streams[w]);
  free(streams);
  /* The command line, for the page of the folder (report.h). */
  ab_diag_t logged = {""};
  if (rc == AB_EXIT_OK && sp.rank == 0 && ab_report_log_command(o.out_dir, argc, argv, &logged) != AB_OK)
    rc = ab_cli_fail(&o, logged.msg);
  return rc;
}
