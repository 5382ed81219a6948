/* cmd_blame.c: `allocbench blame TRACE`: whose code holds the memory at the peak (or the
 * OOM), and what changing it would save, each change a replay (harness/run/blame.h, Note [Blame]). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/output.h"
#include "kernels/base/units.h"
#include "harness/cli/cli.h"
#include "harness/cli/commands.h"
#include "harness/run/blame.h"
#include "harness/run/results.h"
#include "strategies/registry.h"
#include "harness/tune/report.h"
#include "harness/tune/tune.h"
#include "harness/run/stop.h"

static const ab_cli_command_t command = {
    "allocbench blame", AB_CMD_BLAME, "TRACE",
    "At the peak of a replay of TRACE (or its OOM, or an event), the bytes each call site holds\n"
    "(live) and the reserved bytes it left free (unused: freed blocks, the rest of the blocks it\n"
    "split), ranked by unused bytes; a call site is the innermost frame of the program in each\n"
    "allocation's stack (allocbench record keeps them), skipping PyTorch's, installed packages'\n"
    "and Python's own. For the first sites, three changes of their code, each a real replay of\n"
    "the trace changed so: pool (their allocations in a torch.cuda.MemPool of their own), early\n"
    "(each block freed before the site makes its next) and round (every allocation of the site at\n"
    "its largest size): the peak reserved and the safe cap (or smallest cap) each gives against\n"
    "the trace's own. A trace without stacks is blamed by allocation size and lifetime. Rows go to\n"
    "DIR/blame.csv; --change KIND:RANK replays that one change again.\n"};

typedef struct blame_args_s {
  ab_blame_opts_t b;
  bool top_given;
  int change;        /* ab_blame_change_t of --change; -1: none */
  size_t change_rank; /* 1-based */
  unsigned map_probes;
  bool map_off;
} blame_args_t;

static bool own_option(void *ctx, int opt, const char *arg, ab_status *st, ab_diag_t *diag) {
  blame_args_t *a = ctx;
  uint64_t v = 0;
  switch (opt) {
    case AB_OPT_AT:
      if (strcmp(arg, "peak") == 0) a->b.at = AB_BLAME_AT_PEAK;
      else if (strcmp(arg, "oom") == 0) a->b.at = AB_BLAME_AT_OOM;
      else if ((*st = ab_parse_u64("--at", arg, UINT32_MAX, &v, diag)) == AB_OK) a->b.at = AB_BLAME_AT_EVENT, a->b.at_event = v;
      else ab_diag_set(diag, AB_ERR_INVALID, "--at '%s': expected peak, oom or an event number (0 to %u)", arg, UINT32_MAX);
      return true;
    case AB_OPT_FRAMES:
      if (ab_parse_u64("--frames", arg, 64, &v, NULL) != AB_OK || v == 0)
        *st = ab_diag_set(diag, AB_ERR_INVALID, "--frames '%s': expected a whole number from 1 to 64", arg);
      a->b.frames = (unsigned)v;
      return true;
    case AB_OPT_TOP:
      *st = ab_parse_u64("--top", arg, 100, &v, diag);
      a->b.top = (unsigned)v;
      a->top_given = true;
      return true;
    case AB_OPT_CHANGE: {
      const char *colon = strchr(arg, ':');
      a->change = -1;
      for (int c = 0; colon && c < AB_BLAME_NCHANGES; c++) {
        const char *name = ab_blame_change_name((ab_blame_change_t)c);
        if (strlen(name) == (size_t)(colon - arg) && strncmp(arg, name, strlen(name)) == 0) a->change = c;
      }
      if (a->change >= 0) *st = ab_parse_u64("--change", colon + 1, UINT32_MAX, &v, diag);
      if (a->change < 0 || *st != AB_OK || v == 0)
        *st = ab_diag_set(diag, AB_ERR_INVALID, "--change '%s': expected pool:RANK, early:RANK or round:RANK (RANK from 1)", arg);
      a->change_rank = (size_t)v;
      return true;
    }
    case AB_OPT_CAP_MAP: *st = ab_cli_parse_cap_map(arg, &a->map_probes, &a->map_off, diag); return true;
    default: return false;
  }
}

/* ---- printing -------------------------------------------------------------------------------- */

/* "-1.23 GiB" or "+4.00 MiB": what a change moved, signed. */
static const char *delta(uint64_t base, uint64_t now, char *buf, size_t size) {
  char b[AB_BYTES_TEXT];
  if (base == now) return snprintf(buf, size, "the same"), buf;
  snprintf(buf, size, "%s%s", now < base ? "-" : "+", ab_format_bytes(now < base ? base - now : now - base, b, sizeof b));
  return buf;
}

static const char *cap_word(const ab_blame_fig_t *f) { return f->cap_safe ? "safe cap" : "smallest cap"; }

/* One change's line of figures. */
static void say_change(const ab_blame_t *bl, const ab_blame_fig_t *f, const char *name, bool caps) {
  char a[AB_BYTES_TEXT], b[AB_BYTES_TEXT], d1[AB_BYTES_TEXT + 8], d2[AB_BYTES_TEXT + 8];
  if (f->unchanged) {
    printf("    %-6s changes nothing in the trace\n", name);
    return;
  }
  printf("    %-6s peak reserved %s (%s)%s", name, ab_format_bytes(f->peak_reserved, a, sizeof a),
         delta(bl->base.peak_reserved, f->peak_reserved, d1, sizeof d1), f->ok ? "" : ", runs out of memory");
  if (caps && f->cap_found && bl->base.cap_found)
    printf(", %s %s (%s)", cap_word(f), ab_format_bytes(f->cap, b, sizeof b), delta(bl->base.cap, f->cap, d2, sizeof d2));
  else if (caps)
    printf(", %s", f->cap_found ? "a cap found where the trace's own had none" : "no cap up to the card suffices");
  printf("\n");
}

/* What a deployer weighs a change by: the bytes it saves at the peak, and of cap. */
static int64_t saving(const ab_blame_t *bl, const ab_blame_fig_t *f) {
  if (!f->done || f->unchanged) return INT64_MIN;
  int64_t peak = (int64_t)bl->base.peak_reserved - (int64_t)f->peak_reserved;
  if (f->cap_found && bl->base.cap_found) return (int64_t)bl->base.cap - (int64_t)f->cap > peak ? (int64_t)bl->base.cap - (int64_t)f->cap : peak;
  return peak;
}

static const char *change_words(ab_blame_change_t c) {
  switch (c) {
    case AB_BLAME_POOL: return "its allocations in a pool of their own (torch.cuda.MemPool with use_mem_pool around it)";
    case AB_BLAME_EARLY: return "each of its blocks freed before it makes the next (del before reallocating)";
    case AB_BLAME_ROUND: return "all its allocations of one size, its largest (preallocated)";
    case AB_BLAME_NCHANGES: break;
  }
  return "";
}

/* The answer in one line: the change that saves most, with the command that replays it. */
static void answer(const ab_run_spec_t *o, const char *trace, const ab_blame_t *bl, unsigned top) {
  size_t best_site = SIZE_MAX;
  int best_change = 0;
  int64_t best = 0;
  for (size_t s = 0; s < top && s < bl->nsites; s++)
    for (int c = 0; c < AB_BLAME_NCHANGES; c++)
      if (saving(bl, &bl->site[s].change[c]) > best) best = saving(bl, &bl->site[s].change[c]), best_site = s, best_change = c;
  if (bl->nsites == 0) return;
  const ab_blame_site_t *s0 = &bl->site[0];
  char a[AB_BYTES_TEXT], b[AB_BYTES_TEXT], after[AB_BYTES_TEXT];
  if (best_site == SIZE_MAX) {
    printf("\n%s leaves the most unused (%s at the moment); none of the changes tried saves memory.\n", s0->name,
           ab_format_bytes(s0->unused_bytes, a, sizeof a));
    return;
  }
  const ab_blame_site_t *s = &bl->site[best_site];
  const ab_blame_fig_t *f = &s->change[best_change];
  printf("\nChange %s: %s. It saves %s at the peak (%s to %s)", s->name, change_words((ab_blame_change_t)best_change),
         ab_format_bytes(bl->base.peak_reserved > f->peak_reserved ? bl->base.peak_reserved - f->peak_reserved : 0, a, sizeof a),
         ab_format_bytes(bl->base.peak_reserved, b, sizeof b), ab_format_bytes(f->peak_reserved, after, sizeof after));
  if (f->cap_found && bl->base.cap_found) {
    char c1[AB_BYTES_TEXT], c2[AB_BYTES_TEXT];
    printf(", and its %s goes from %s to %s", cap_word(f), ab_format_bytes(bl->base.cap, c1, sizeof c1),
           ab_format_bytes(f->cap, c2, sizeof c2));
  }
  printf(". Replay it: allocbench blame %s -s %s%s%s%s --change %s:%zu\n", trace, o->strategy, o->conf && *o->conf ? " -c '" : "",
         o->conf && *o->conf ? o->conf : "", o->conf && *o->conf ? "'" : "", ab_blame_change_name((ab_blame_change_t)best_change),
         best_site + 1);
}

static const ab_col_t blame_cols[] = {
    {"trace", false},         {"strategy", false},        {"conf", false},         {"cap_bytes", true},
    {"moment_event", true},   {"rank", true},             {"site", false},         {"live_bytes", true},
    {"unused_bytes", true},   {"allocs", true},           {"change", false},       {"status", false},
    {"peak_reserved_bytes", true}, {"peak_saved_bytes", true}, {"cap_kind", false}, {"found_cap_bytes", true},
    {"cap_saved_bytes", true}, {"by", false},          {"stack", false},
};
#define NCOLS (sizeof blame_cols / sizeof blame_cols[0])

/* One row: a site with the change c (-1: the site alone, the trace's own figures). */
static ab_status add_row(ab_table_t *t, const ab_run_spec_t *o, const ab_events_t *es, const ab_blame_t *bl, size_t s, int c) {
  const ab_blame_site_t *site = &bl->site[s];
  const ab_blame_fig_t *f = c < 0 ? &bl->base : &site->change[c];
  char cap[24], moment[24], rank[24], live[24], unused[24], allocs[24], peak[24], saved[24], found[24], cap_saved[24];
  snprintf(cap, sizeof cap, "%" PRIu64, o->cap_bytes);
  snprintf(moment, sizeof moment, "%zu", bl->moment ? bl->moment - 1 : 0);
  snprintf(rank, sizeof rank, "%zu", s + 1);
  snprintf(live, sizeof live, "%" PRIu64, site->live_bytes);
  snprintf(unused, sizeof unused, "%" PRIu64, site->unused_bytes);
  snprintf(allocs, sizeof allocs, "%" PRIu64, site->allocs);
  bool figures = f->done && !f->unchanged;
  snprintf(peak, sizeof peak, "%" PRIu64, figures ? f->peak_reserved : 0);
  snprintf(saved, sizeof saved, "%" PRId64, figures ? (int64_t)bl->base.peak_reserved - (int64_t)f->peak_reserved : 0);
  snprintf(found, sizeof found, "%" PRIu64, figures && f->cap_found ? f->cap : 0);
  snprintf(cap_saved, sizeof cap_saved, "%" PRId64,
           figures && f->cap_found && bl->base.cap_found ? (int64_t)bl->base.cap - (int64_t)f->cap : 0);
  const char *status = !f->done ? (f->unchanged ? "unchanged" : "") : f->ok ? "ok" : "oom";
  /* The site's whole stack on its first row, innermost first, for the page. */
  char stack[2048] = "";
  const uint32_t *fr = NULL;
  uint32_t n = c < 0 && es->stacks ? ab_stacks_frames(es->stacks, site->stack, &fr) : 0;
  for (uint32_t i = 0, used = 0; i < n && used < sizeof stack; i++) {
    const ab_frame_t *x = &es->stacks->frame[fr[i]];
    used += (uint32_t)snprintf(stack + used, sizeof stack - used, "%s%s:%u %s", i ? "; " : "",
                               ab_stacks_text(es->stacks, x->file), x->line, ab_stacks_text(es->stacks, x->name));
  }
  const char *row[NCOLS] = {es->source, o->strategy, o->conf ? o->conf : "", cap, moment, rank, site->name, live, unused, allocs,
                            c < 0 ? "" : ab_blame_change_name((ab_blame_change_t)c), status, figures ? peak : "",
                            figures ? saved : "", figures && f->cap_found ? (f->cap_safe ? "safe" : "smallest") : "",
                            figures && f->cap_found ? found : "", figures && f->cap_found ? cap_saved : "",
                            bl->stacks ? "stack" : "size_lifetime", stack};
  return ab_table_add(t, row);
}

/* Prints the table, the changes and the answer, and appends blame.csv. */
static int report_blame(const ab_run_spec_t *o, const char *trace, const ab_events_t *es, const ab_blame_t *bl, unsigned top,
                        bool caps) {
  ab_table_t rows;
  ab_table_init(&rows, blame_cols, NCOLS);
  ab_status st = AB_OK;
  for (size_t s = 0; s < bl->nsites && st == AB_OK; s++) {
    st = add_row(&rows, o, es, bl, s, -1);
    for (int c = 0; c < AB_BLAME_NCHANGES && st == AB_OK && s < top; c++) st = add_row(&rows, o, es, bl, s, c);
  }
  ab_diag_t io = {""};
  int rc = st != AB_OK ? ab_cli_fail(o, "out of host memory") : AB_EXIT_OK;
  if (rc == AB_EXIT_OK && ab_cli_append(o, &rows, "blame.csv", &io) != AB_OK) rc = ab_cli_fail(o, io.msg);
  if (rc == AB_EXIT_OK && o->format != AB_FORMAT_TABLE) ab_cli_print(o, &rows, NULL, 0);
  if (rc == AB_EXIT_OK && o->format == AB_FORMAT_TABLE) {
    char a[AB_BYTES_TEXT], b[AB_BYTES_TEXT], c[AB_BYTES_TEXT];
    printf("%s at event %zu of %zu: %s reserved, %s live\n", trace, bl->moment ? bl->moment - 1 : 0, es->n,
           ab_format_bytes(bl->reserved, a, sizeof a), ab_format_bytes(bl->live, b, sizeof b));
    if (!bl->stacks)
      printf("The trace has no call stacks: blamed by allocation size and lifetime. `allocbench record` (or\n"
             "torch.cuda.memory._record_memory_history(context=\"alloc\")) records them.\n");
    printf("\n rank  %-52s %12s %12s %8s\n", bl->stacks ? "call site" : "allocations", "live", "unused", "allocs");
    for (size_t s = 0; s < bl->nsites && s < 20; s++) {
      const ab_blame_site_t *site = &bl->site[s];
      printf("%5zu  %-52.52s %12s %12s %8" PRIu64 "\n", s + 1, site->name, ab_format_bytes(site->live_bytes, a, sizeof a),
             ab_format_bytes(site->unused_bytes, b, sizeof b), site->allocs);
    }
    if (bl->nsites > 20) printf("  ... %zu more sites in %s/blame.csv\n", bl->nsites - 20, o->out_dir);
    if (top) {
      printf("\nThe trace as it is: peak reserved %s", ab_format_bytes(bl->base.peak_reserved, a, sizeof a));
      if (caps && bl->base.cap_found) printf(", %s %s", cap_word(&bl->base), ab_format_bytes(bl->base.cap, c, sizeof c));
      printf(". Each change below is a replay of the trace changed so:\n");
    }
    for (size_t s = 0; s < top && s < bl->nsites; s++) {
      printf("  %zu. %s\n", s + 1, bl->site[s].name);
      for (int ch = 0; ch < AB_BLAME_NCHANGES; ch++)
        say_change(bl, &bl->site[s].change[ch], ab_blame_change_name((ab_blame_change_t)ch), caps);
    }
    answer(o, trace, bl, top);
  }
  ab_table_free(&rows);
  return rc;
}

/* --change KIND:RANK: the sites again, then that one change replayed and its figures. */
static int one_change(const ab_run_spec_t *o, const ab_events_t *es, const blame_args_t *a, const ab_blame_opts_t *bo) {
  ab_blame_opts_t first = *bo;
  first.top = 0;
  ab_blame_t bl;
  ab_diag_t diag = {""};
  if (ab_blame_run(es, &first, &bl, &diag) != AB_OK) return ab_cli_fail(o, diag.msg);
  int rc = AB_EXIT_OK;
  if (a->change_rank > bl.nsites) {
    snprintf(diag.msg, sizeof diag.msg, "--change %s:%zu: the trace has %zu call sites", ab_blame_change_name((ab_blame_change_t)a->change),
             a->change_rank, bl.nsites);
    rc = ab_cli_usage_error(o, diag.msg);
  }
  ab_events_t changed;
  bool differs = false;
  size_t s = a->change_rank - 1;
  if (rc == AB_EXIT_OK && ab_blame_changed(es, &bl, s, (ab_blame_change_t)a->change, &changed, &differs, &diag) != AB_OK)
    rc = ab_cli_fail(o, diag.msg);
  else if (rc == AB_EXIT_OK) {
    ab_blame_fig_t *f = &bl.site[s].change[a->change];
    if (differs && ab_blame_figures(&changed, bo, f, &bl.probes, &diag) != AB_OK) rc = ab_cli_fail(o, diag.msg);
    f->unchanged = !differs;
    ab_events_free(&changed);
    if (rc == AB_EXIT_OK) {
      printf("%s, %s: %s\n", bl.site[s].name, ab_blame_change_name((ab_blame_change_t)a->change),
             change_words((ab_blame_change_t)a->change));
      char p[AB_BYTES_TEXT], c[AB_BYTES_TEXT];
      printf("    as it is peak reserved %s", ab_format_bytes(bl.base.peak_reserved, p, sizeof p));
      if (!bo->no_caps && bl.base.cap_found) printf(", %s %s", cap_word(&bl.base), ab_format_bytes(bl.base.cap, c, sizeof c));
      printf("\n");
      say_change(&bl, f, "changed", !bo->no_caps);
    }
  }
  ab_blame_free(&bl);
  return rc;
}

int ab_cmd_blame(int argc, char **argv) {
  ab_run_spec_t o;
  ab_run_spec_defaults(&o, "allocbench blame");
  o.device = "sim"; /* what-ifs: the simulated card, as tune (--device cuda replays on the GPU) */
  blame_args_t a;
  memset(&a, 0, sizeof a);
  a.change = -1;
  char **args = NULL;
  size_t nargs = 0;
  int rc = ab_cli_parse(argc, argv, &command, &o, own_option, &a, 1, &args, &nargs);
  if (rc >= 0) return rc;
  if (nargs == 0) return ab_cli_usage_error(&o, "expected the trace to blame (see allocbench blame --help)");
  ab_diag_t diag = {""};
  if (ab_results_check_out(o.out_dir, &diag) != AB_OK) return ab_cli_usage_error(&o, diag.msg);
  ab_run_catch_stop();
  char spec[4200];
  snprintf(spec, sizeof spec, "replay:%s", args[0]);
  ab_events_t es;
  ab_status built = ab_run_build(&o, spec, &es, NULL, &diag);
  if (built != AB_OK) return ab_cli_build_failed(&o, built, &diag);
  /* An event past the trace's end is a bad argument, said before any replay. */
  if (ab_blame_check(&es, &a.b, &diag) != AB_OK) {
    ab_events_free(&es);
    return ab_cli_usage_error(&o, diag.msg);
  }
  if (o.strategy == NULL) o.strategy = "caching";
  if (o.conf == NULL && strcmp(o.strategy, "caching") == 0) o.conf = es.settings;
  ab_blame_opts_t bo = a.b;
  bo.top = a.top_given ? a.b.top : 3;
  bo.cap = o.cap_bytes;
  bo.map_probes = a.map_off ? 0 : a.map_probes ? a.map_probes : AB_TUNE_MAP_PROBES;
  ab_bisect_opts_t search;
  memset(&search, 0, sizeof search);
  search.cap = true; /* PyTorch's cap: what a job is deployed under */
  search.no_map = a.map_off;
  bo.b = ab_run_search_opts(&o, &search, o.strategy, o.conf);
  ab_world_t closed;
  if (ab_bisect_check(&bo.b, &closed, &diag) != AB_OK) {
    ab_events_free(&es);
    return ab_cli_usage_error(&o, diag.msg);
  }
  if (a.change >= 0) {
    rc = one_change(&o, &es, &a, &bo);
  } else {
    ab_blame_t bl;
    if (ab_blame_run(&es, &bo, &bl, &diag) != AB_OK) {
      rc = ab_run_stop ? ab_cli_stopped(&o, "") : ab_cli_fail(&o, diag.msg);
    } else {
      rc = report_blame(&o, args[0], &es, &bl, bo.top, !bo.no_caps);
      ab_blame_free(&bl);
    }
  }
  ab_events_free(&es);
  /* The command line beside blame.csv, for the page; --change writes no results. */
  ab_diag_t logged = {""};
  if (rc == AB_EXIT_OK && a.change < 0 && ab_report_log_command(o.out_dir, argc, argv, &logged) != AB_OK)
    rc = ab_cli_fail(&o, logged.msg);
  return rc;
}
