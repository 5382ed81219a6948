#include "harness/tune/report.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ab_version.h"
#include "kernels/base/output.h"
#include "kernels/base/units.h"
#include "harness/run/band.h"
#include "harness/run/results.h"
#include "strategies/registry.h"
#include "harness/run/stop.h"

#define MAX_INPUT_BYTES (256u << 20) /* a results file larger than this is not one of ours */

/* ---- files ---------------------------------------------------------------------------------- */

/* The whole file at path, NUL-terminated, into *text (the caller frees); false when there is
 * none or it cannot be read. */
static bool slurp(const char *path, char **text, size_t *len) {
  *text = NULL;
  FILE *f = fopen(path, "rb");
  if (f == NULL) return false;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    if (n == cap) {
      char *grown = cap >= MAX_INPUT_BYTES ? NULL : realloc(buf, 2 * cap + 1);
      if (grown == NULL) break;
      buf = grown, cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  bool ok = buf && !ferror(f) && feof(f);
  fclose(f);
  if (!ok) {
    free(buf);
    return false;
  }
  buf[n] = '\0';
  *text = buf;
  if (len) *len = n;
  return true;
}

static bool exists(const char *dir, const char *name) {
  char path[4096];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

/* ---- CSV: the results files, with a header line ---------------------------------------------- */

typedef struct csv_s {
  char *text;   /* the file, unquoted in place */
  char **cell;  /* nrows * ncols, row 0 the header */
  size_t nrows, ncols, cap;
} csv_t;

static void csv_free(csv_t *c) {
  free(c->text);
  free(c->cell);
  memset(c, 0, sizeof *c);
}

/* Splits the len bytes of c->text into c->cell (RFC 4180: quoted fields, "" inside them);
 * every row has the header's number of fields. A NUL byte before the end is refused, not
 * taken for the end, so that no row after it is lost unsaid. On an error c keeps what it
 * holds, for the caller's csv_free. */
static ab_status csv_split(const char *path, csv_t *c, size_t len, ab_diag_t *diag) {
  const char *stop = c->text + len;
  size_t n = 0, line = 1, fields = 0;
  char *p = c->text;
  while (p < stop) {
    if (n == c->cap) {
      size_t cap = c->cap ? 2 * c->cap : 1024;
      char **grown = realloc(c->cell, cap * sizeof *grown);
      if (grown == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "%s: out of host memory", path);
      c->cell = grown, c->cap = cap;
    }
    char *start = p, *w = p;
    if (*p == '"') {
      for (p++; p < stop && *p != '\0'; p++) {
        if (*p == '"' && p[1] == '"') *w++ = '"', p++;
        else if (*p == '"') break;
        else *w++ = *p;
      }
      if (p == stop) return ab_diag_set(diag, AB_ERR_INVALID, "%s: line %zu: a quoted field is not closed", path, line);
      if (*p == '"') p++;
    } else {
      while (*p && *p != ',' && *p != '\n' && *p != '\r') w++, p++;
    }
    if (*p == '\r') p++;
    if (*p == '\0' && p < stop) return ab_diag_set(diag, AB_ERR_INVALID, "%s: line %zu: a NUL byte (expected text)", path, line);
    char end = *p;
    if (end != ',' && end != '\n' && end != '\0')
      return ab_diag_set(diag, AB_ERR_INVALID, "%s: line %zu: expected ',' or the line's end after a quoted field", path, line);
    if (p < stop) p++;
    *w = '\0';
    c->cell[n++] = start;
    fields++;
    if (end != ',') {
      if (c->ncols == 0) c->ncols = fields;
      if (fields != c->ncols)
        return ab_diag_set(diag, AB_ERR_INVALID, "%s: line %zu: %zu fields, the header (line 1) has %zu", path, line, fields,
                           c->ncols);
      fields = 0;
      line++;
    }
  }
  if (fields) return ab_diag_set(diag, AB_ERR_INVALID, "%s: line %zu: the last line is cut short", path, line);
  c->nrows = c->ncols ? n / c->ncols : 0;
  if (c->nrows < 1) return ab_diag_set(diag, AB_ERR_INVALID, "%s: no header", path);
  return AB_OK;
}

static ab_status csv_read(const char *path, csv_t *c, ab_diag_t *diag) {
  memset(c, 0, sizeof *c);
  size_t len;
  if (!slurp(path, &c->text, &len)) return ab_diag_set(diag, AB_ERR_INVALID, "%s: cannot read it", path);
  ab_status st = csv_split(path, c, len, diag);
  if (st != AB_OK) csv_free(c);
  return st;
}

/* What a field of a results file holds, as allocbench writes it. Each kind but TEXT is
 * checked before anything is drawn, so that the page never shows a figure it read wrong
 * ('abc' as 0 B, '-5' as 16 EiB). The empty kinds are where allocbench itself leaves the
 * field empty: a budget search that found no budget, a blame row that replays no change. */
typedef enum field_kind_e {
  TEXT,          /* any text, escaped where the page shows it */
  COUNT,         /* a whole number: a rank, a count of calls, an event's index, a 0/1 flag */
  BYTES,         /* a whole number of bytes */
  BYTES_OR_NONE, /* a whole number of bytes, or empty */
  SAVED_OR_NONE, /* a whole number of bytes saved, negative where the change costs, or empty */
  DECIMAL,       /* a number, whole or with decimals: a time */
} field_kind_t;

/* What the error says a field of each kind should be. */
static const char *const expected[] = {
    [TEXT] = "text",
    [COUNT] = "a whole number",
    [BYTES] = "a whole number of bytes",
    [BYTES_OR_NONE] = "a whole number of bytes, or empty",
    [SAVED_OR_NONE] = "a whole number of bytes, signed, or empty",
    [DECIMAL] = "a number, whole or with decimals",
};

typedef struct column_s {
  const char *name; /* NULL: the end of the list */
  field_kind_t kind;
  bool required;    /* present in every version of the file allocbench has written */
} column_t;

/* Every column the page reads of each results file, with its kind. The required ones are
 * those the page keys on: a file without them is someone else's CSV under allocbench's name.
 * A column added later, such as peak_reserved_low, may be absent, and reads as empty. */
typedef struct results_file_s {
  const char *name;
  column_t columns[20]; /* up to the first NULL name: at most 19 */
} results_file_t;

static const results_file_t results_files[] = {
    {"tune.csv",
     {{"workload", TEXT, true}, {"rank", COUNT, true}, {"strategy", TEXT, true}, {"conf", TEXT, true},
      {"status", TEXT, true}, {"peak_reserved_bytes", BYTES, true}, {"cap_bytes", BYTES, false},
      {"min_budget_bytes", BYTES_OR_NONE, false}, {"num_device_alloc", COUNT, false}, {"peak_reserved_low", BYTES, false},
      {"peak_reserved_high", BYTES, false}, {"device_allocs_low", COUNT, false}, {"device_allocs_high", COUNT, false},
      {"worst", COUNT, false}, {"recommended", COUNT, false}, {"recorded", COUNT, false}}},
    {"compare.csv",
     {{"workload", TEXT, true}, {"strategy", TEXT, true}, {"conf", TEXT, true}, {"status", TEXT, true},
      {"peak_reserved_bytes", BYTES, true}, {"min_budget_bytes", BYTES_OR_NONE, true}, {"peak_requested_bytes", BYTES, false},
      {"alloc_ns_p50", DECIMAL, false}, {"free_ns_p50", DECIMAL, false}, {"step_ms_p50", DECIMAL, false}}},
    {"summary.csv",
     {{"workload", TEXT, true}, {"strategy", TEXT, true}, {"conf", TEXT, true}, {"status", TEXT, true},
      {"peak_reserved_bytes", BYTES, true}, {"peak_requested_bytes", BYTES, false}, {"alloc_ns_p50", DECIMAL, false},
      {"free_ns_p50", DECIMAL, false}, {"step_ms_p50", DECIMAL, false}}},
    {"oom.csv",
     {{"workload", TEXT, true}, {"strategy", TEXT, true}, {"conf", TEXT, true}, {"min_budget_bytes", BYTES_OR_NONE, true},
      {"peak_requested_bytes", BYTES, false}}},
    {"blame.csv",
     {{"trace", TEXT, true}, {"conf", TEXT, true}, {"moment_event", COUNT, true}, {"rank", COUNT, true}, {"site", TEXT, true},
      {"live_bytes", BYTES, false}, {"unused_bytes", BYTES, false}, {"allocs", COUNT, false},
      {"peak_reserved_bytes", BYTES_OR_NONE, false}, {"peak_saved_bytes", SAVED_OR_NONE, false},
      {"found_cap_bytes", BYTES_OR_NONE, false}, {"cap_saved_bytes", SAVED_OR_NONE, false}}},
};

/* The index of the column called name in c's header; c->ncols when there is none. */
static size_t column_of(const csv_t *c, const char *name) {
  size_t j = 0;
  while (j < c->ncols && strcmp(c->cell[j], name) != 0) j++;
  return j;
}

/* Whether s is digits alone (a sign, a space or an exponent is not) whose value fits in max. */
static bool whole(const char *s, uint64_t max) {
  if (*s == '\0' || strspn(s, "0123456789") != strlen(s)) return false;
  errno = 0;
  uint64_t v = strtoull(s, NULL, 10);
  return errno == 0 && v <= max;
}

static bool field_valid(field_kind_t kind, const char *s) {
  switch (kind) {
    case TEXT: return true;
    case COUNT:
    case BYTES: return whole(s, UINT64_MAX);
    case BYTES_OR_NONE: return *s == '\0' || whole(s, UINT64_MAX);
    case SAVED_OR_NONE: return *s == '\0' || whole(s + (*s == '-'), (uint64_t)INT64_MAX);
    case DECIMAL: {
      size_t digits = strspn(s, "0123456789");
      if (digits == 0) return false;
      if (s[digits] == '.') s += digits + 1, digits = strspn(s, "0123456789");
      return digits > 0 && s[digits] == '\0';
    }
  }
  return false;
}

/* AB_ERR_INVALID naming the first of f's required columns that c's header lacks, else the
 * first field of a column f names that is not of its kind, with its line and column. */
static ab_status csv_check(const csv_t *c, const char *path, const results_file_t *f, ab_diag_t *diag) {
  for (const column_t *col = f->columns; col->name; col++) {
    size_t j = column_of(c, col->name);
    if (j == c->ncols && col->required)
      return ab_diag_set(diag, AB_ERR_INVALID, "%s: line 1: no column '%s' (expected the header allocbench writes for %s)",
                         path, col->name, f->name);
    for (size_t r = 1; j < c->ncols && r < c->nrows; r++) {
      const char *s = c->cell[r * c->ncols + j];
      if (!field_valid(col->kind, s))
        return ab_diag_set(diag, AB_ERR_INVALID, "%s: line %zu, column '%s': '%.64s%s' is not %s", path, r + 1, col->name, s,
                           strlen(s) > 64 ? "..." : "", expected[col->kind]);
    }
  }
  return AB_OK;
}

/* Reads DIR/NAME, one of results_files, and checks its columns and fields: what the page
 * reads of it is what csv_check let through. */
static ab_status results_read(const char *dir, const char *name, csv_t *c, ab_diag_t *diag) {
  const results_file_t *f = results_files;
  while (strcmp(f->name, name) != 0) f++;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  AB_TRY(csv_read(path, c, diag));
  ab_status st = csv_check(c, path, f, diag);
  if (st != AB_OK) csv_free(c);
  return st;
}

/* The cell of row r (1: the first after the header) in the column called name; "" when the
 * file has no such column. */
static const char *get(const csv_t *c, size_t r, const char *name) {
  size_t j = column_of(c, name);
  return j < c->ncols ? c->cell[r * c->ncols + j] : "";
}

/* A field of a COUNT or BYTES column, which csv_check has let through; 0 when empty. */
static uint64_t num(const csv_t *c, size_t r, const char *name) { return strtoull(get(c, r, name), NULL, 10); }

/* A field of a DECIMAL column, which csv_check has let through; 0 when empty. */
static double decimal(const csv_t *c, size_t r, const char *name) { return strtod(get(c, r, name), NULL); }

/* ---- HTML ------------------------------------------------------------------------------------ */

/* The n bytes of s as HTML text: every text the page takes from a file goes through here. */
static void esc_span(FILE *f, const char *s, size_t n) {
  for (const char *end = s + n; s < end; s++) switch (*s) {
      case '&': fputs("&amp;", f); break;
      case '<': fputs("&lt;", f); break;
      case '>': fputs("&gt;", f); break;
      case '"': fputs("&quot;", f); break;
      default: fputc(*s, f);
    }
}

static void esc(FILE *f, const char *s) { esc_span(f, s, strlen(s)); }

static const char *bytes(uint64_t b, char *buf, size_t size) { return ab_format_bytes(b, buf, size); }

/* The style: print-friendly, no web fonts. */
static const char style[] =
    "body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:#222;max-width:1180px;margin:24px auto;padding:0 16px}"
    "h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}"
    ".sub{color:#555}.answer{background:#eef7ea;border:1px solid #b9dcab;border-radius:6px;padding:10px 16px}"
    "pre{background:#f5f5f5;padding:8px 10px;overflow-x:auto;font-size:13px;white-space:pre-wrap;word-break:break-all}"
    ".paste{background:#fff;border:1px solid #999;font-size:15px}"
    "table{border-collapse:collapse;font-size:13px;margin:8px 0;width:100%}"
    "th,td{border:1px solid #ccc;padding:3px 7px;text-align:left}td.conf{overflow-wrap:anywhere}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}tr.win{background:#dff2d8;font-weight:600}tr.rec{background:#fdf0e2}"
    "figure{margin:14px 0;break-inside:avoid}figure svg{width:100%;height:auto;display:block}"
    "figcaption{color:#555;font-size:13px}footer{margin-top:2em;color:#777;font-size:12px}"
    "@media print{body{margin:0;max-width:none}pre{white-space:pre-wrap}h2{break-after:avoid}}";

static void head(FILE *f, const char *title) {
  fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n<title>",
        f);
  esc(f, title);
  fprintf(f, "</title>\n<style>%s</style>\n</head><body>\n<h1>", style);
  esc(f, title);
  fputs("</h1>\n", f);
}

/* Copies the SVG at path into the page from its <svg element on, its ids made the figure's
 * own (fK-...), since several figures share one document. Returns the bytes written. */
static size_t inline_svg(FILE *f, const char *svg, int k) {
  const char *p = strstr(svg, "<svg");
  if (p == NULL) return 0;
  static const char *const refs[] = {"id='", "id=\"", "href='#", "href=\"#", "url(#"};
  size_t written = 0;
  while (*p) {
    size_t best = strlen(p), which = 0;
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
      const char *q = strstr(p, refs[i]);
      if (q && (size_t)(q - p) < best) best = (size_t)(q - p), which = i + 1;
    }
    fwrite(p, 1, best, f);
    written += best;
    p += best;
    if (which == 0) break;
    size_t len = strlen(refs[which - 1]);
    written += (size_t)fprintf(f, "%.*sf%d-", (int)len, p, k);
    p += len;
  }
  return written;
}

typedef struct figure_s {
  const char *name; /* NAME.svg in the folder */
  const char *caption;
} figure_t;

static const figure_t known[] = {
    {"tune_ranking", "Every setting tried, in the ranking: peak reserved and the smallest cap side by side; the "
                     "recommended one highlighted, the reference strategies (not PyTorch settings) hatched."},
    {"tune_timeline", "Memory over the job under the recorded configuration and the recommended one: reserved "
                      "(solid) and allocated (dashed); the dots are the reserved bytes PyTorch itself recorded, "
                      "the check of the replay."},
    {"tune_segments", "Where the memory sits at the peak under each: every segment in address order, its blocks "
                      "coloured by state; red is memory cached but free."},
    {"peak_reserved", "Peak reserved memory of each strategy on each workload, over what the workload requested."},
    {"min_budget", "The smallest budget each strategy completes each workload in, over the peak requested."},
    {"oommap_fragmenter", "The fragmenter's memory at its OOM: the free memory no request could use."},
    {"latency", "Per-call latency of allocation and free."},
    {"micro", "The micro-benchmarks."},
    {"zero_ranks", "ZeRO per rank, several GPUs against one."},
};

static int by_name(const void *a, const void *b) { return strcmp(a, b); }

/* The figures of the page in order: for tune its own three, else the known ones, then any
 * other SVG of the folder (a timeline) by name. */
static size_t figures(const char *dir, bool tune, char names[][128], size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < sizeof known / sizeof known[0] && n < max; i++) {
    bool is_tune = strncmp(known[i].name, "tune_", 5) == 0;
    char file[160];
    snprintf(file, sizeof file, "%s.svg", known[i].name);
    if (is_tune == tune && exists(dir, file)) snprintf(names[n++], 128, "%s", known[i].name);
  }
  if (tune) return n;
  DIR *d = opendir(dir);
  struct dirent *e;
  size_t first_other = n;
  while (d && (e = readdir(d)) != NULL && n < max) {
    size_t len = strlen(e->d_name);
    if (len < 5 || len >= 128 + 4 || strcmp(e->d_name + len - 4, ".svg") != 0 || strncmp(e->d_name, "tune_", 5) == 0) continue;
    char stem[128];
    snprintf(stem, sizeof stem, "%.*s", (int)(len - 4), e->d_name);
    bool dup = false;
    for (size_t i = 0; i < n; i++) dup |= strcmp(names[i], stem) == 0;
    if (!dup) snprintf(names[n++], 128, "%s", stem);
  }
  if (d) closedir(d);
  qsort(names + first_other, n - first_other, 128, by_name);
  return n;
}

/* What plots/draw.sh did before the page was written. */
typedef struct drawing_s {
  bool tried; /* it ran */
  int rc;     /* its exit status: not 0 when a figure failed, which the page then lacks */
} drawing_t;

static void write_figures(FILE *f, const char *dir, bool tune, size_t *size, const drawing_t *drawing) {
  char names[32][128];
  size_t n = figures(dir, tune, names, 32);
  fputs("<h2>Figures</h2>\n", f);
  /* Which figure failed is in draw.sh's lines on stderr; the page says that one is missing, and
   * that a figure of the same name drawn before may stand in for it. */
  if (drawing->tried && drawing->rc != 0)
    fprintf(f, "<p>plots/draw.sh exited %d: a figure it failed to draw is missing here, or is an older one of this "
               "folder; its lines on stderr name it.</p>\n",
            drawing->rc);
  if (n == 0) {
    fprintf(f, "<p>No figures: %s</p>\n",
            !drawing->tried   ? "none was drawn in this folder."
            : drawing->rc == 0 ? "gnuplot drew none here (install it: <code>sudo apt-get install -y gnuplot-nox</code>, "
                                 "then <code>allocbench report DIR</code> again)."
                               : "it drew none.");
    return;
  }
  for (size_t i = 0; i < n; i++) {
    char path[4096], *svg;
    size_t len;
    snprintf(path, sizeof path, "%s/%s.svg", dir, names[i]);
    if (!slurp(path, &svg, &len)) continue;
    const char *caption = names[i];
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
      if (strcmp(known[k].name, names[i]) == 0) caption = known[k].caption;
    char capmap[256];
    if (strncmp(names[i], "capmap_", 7) == 0) {
      snprintf(capmap, sizeof capmap,
               "%s: the status at every memory cap (green: completes; red: out of memory), the safe cap marked: every "
               "cap from it up completes.",
               names[i] + 7);
      caption = capmap;
    }
    if (*size + len > AB_REPORT_BUDGET_BYTES) {
      fputs("<p>Left out to keep the page small: ", f);
      esc(f, names[i]);
      fprintf(f, ".svg (%zu KiB), beside this page.</p>\n", len >> 10);
    } else {
      fputs("<figure id=\"", f);
      esc(f, names[i]);
      fputs("\">\n", f);
      *size += inline_svg(f, svg, (int)i + 1);
      fputs("\n<figcaption>", f);
      esc(f, caption);
      fputs("</figcaption></figure>\n", f);
    }
    free(svg);
  }
}

/* A text file of the folder as a <pre> block under a heading; nothing when it is absent. */
static void pre_file(FILE *f, const char *dir, const char *name, const char *heading, const char *before) {
  char path[4096], *text;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (!slurp(path, &text, NULL)) return;
  fprintf(f, "<h2>%s</h2>\n%s<pre>", heading, before);
  esc(f, text);
  fputs("</pre>\n", f);
  free(text);
}

static void reproduce(FILE *f, const char *dir, const char *extra) {
  char path[4096], *text;
  snprintf(path, sizeof path, "%s/commands.txt", dir);
  fputs("<h2>To make it again</h2>\n<p>The commands that wrote this folder, in order:</p>\n<pre>", f);
  if (slurp(path, &text, NULL)) {
    esc(f, text);
    free(text);
  } else {
    fputs("(not recorded: the folder predates commands.txt)\n", f);
  }
  fputs("</pre>\n<p>and this page, from the folder:</p>\n<pre>", f);
  if (extra) esc(f, extra);
  fputs("allocbench report ", f);
  esc(f, dir);
  fputs("</pre>\n", f);
}

static void footer(FILE *f) {
  char when[64];
  time_t now = time(NULL);
  struct tm tm;
  strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime_r(&now, &tm));
  fprintf(f, "<footer>Written by allocbench %s (commit %s) on %s. A benchmark and stress test of GPU memory "
             "allocator strategies; every figure here is from the CSV files beside this page.</footer>\n</body></html>\n",
          AB_VERSION, AB_COMMIT, when);
}

/* ---- tune ------------------------------------------------------------------------------------- */

/* ---- blame: which code (Note [Blame], harness/run/blame.h) ------------------------------------------------ */

/* "-1.00 GiB" from a signed count of bytes saved (positive: saved). */
static const char *saved(const char *text, char *buf, size_t size) {
  long long v = strtoll(text, NULL, 10);
  char b[AB_BYTES_TEXT];
  if (v == 0) return snprintf(buf, size, "the same"), buf;
  snprintf(buf, size, "%s%s", v > 0 ? "-" : "+", bytes((uint64_t)(v > 0 ? v : -v), b, sizeof b));
  return buf;
}

/* The section of DIR/blame.csv's last blame, when there is one: the sites, the changes
 * replayed, and the stacks of the first sites. */
static ab_status blame_section(FILE *f, const char *dir, bool answer_first, ab_diag_t *diag) {
  if (!exists(dir, "blame.csv")) return AB_OK;
  char a[AB_BYTES_TEXT], b[AB_BYTES_TEXT];
  csv_t c;
  AB_TRY(results_read(dir, "blame.csv", &c, diag));
  /* The last blame: the rows at the end with its trace, setting and moment. */
  size_t last = c.nrows - 1, first = last;
  while (first > 1 && strcmp(get(&c, first - 1, "trace"), get(&c, last, "trace")) == 0 &&
         strcmp(get(&c, first - 1, "conf"), get(&c, last, "conf")) == 0 &&
         strcmp(get(&c, first - 1, "moment_event"), get(&c, last, "moment_event")) == 0 &&
         num(&c, first - 1, "rank") <= num(&c, first, "rank"))
    first--;
  if (c.nrows < 2) {
    csv_free(&c);
    return AB_OK;
  }
  bool by_stack = strcmp(get(&c, first, "by"), "stack") == 0;
  /* The change that saves most at the peak, for the answer. */
  size_t best = 0;
  long long most = 0;
  for (size_t r = first; r <= last; r++)
    if (*get(&c, r, "change") && strtoll(get(&c, r, "peak_saved_bytes"), NULL, 10) > most)
      most = strtoll(get(&c, r, "peak_saved_bytes"), NULL, 10), best = r;
  if (answer_first) {
    fputs("<section class=\"answer\">\n<h2 style=\"border:0;margin-top:.3em\">The answer</h2>\n<p>", f);
    if (best) {
      fputs("Change <code>", f);
      esc(f, get(&c, best, "site"));
      fputs("</code> (", f);
      esc(f, get(&c, best, "change"));
      fprintf(f, "): %s less reserved at the peak. Replay it: <code>allocbench blame TRACE --change ",
              bytes((uint64_t)most, a, sizeof a));
      esc(f, get(&c, best, "change"));
      fputs(":", f);
      esc(f, get(&c, best, "rank"));
      fputs("</code>.", f);
    } else {
      fputs("None of the changes tried saves memory at the peak; <code>", f);
      esc(f, get(&c, first, "site"));
      fputs("</code> leaves the most unused.", f);
    }
    fputs("</p>\n</section>\n", f);
  }
  fputs("<h2>Which code holds the memory</h2>\n<p>At event ", f);
  esc(f, get(&c, first, "moment_event"));
  fputs(" of ", f);
  esc(f, get(&c, first, "trace"));
  fputs(" under ", f);
  esc(f, get(&c, first, "strategy"));
  fputs(*get(&c, first, "conf") ? " <code>" : "", f);
  esc(f, get(&c, first, "conf"));
  fprintf(f, "%s: each %s, the bytes it holds (live) and the reserved bytes it left free (unused); each change a replay of "
             "the trace changed so (<code>allocbench blame</code>).%s</p>\n",
          *get(&c, first, "conf") ? "</code>" : "", by_stack ? "call site" : "size and lifetime of allocations",
          by_stack ? "" : " The trace has no call stacks: <code>allocbench record</code> keeps them.");
  fputs("<table>\n<tr><th>rank</th><th>site</th><th>live</th><th>unused</th><th>allocs</th><th>change</th>"
        "<th>peak reserved</th><th>cap</th></tr>\n",
        f);
  for (size_t r = first; r <= last && num(&c, r, "rank") <= 10; r++) {
    bool change = *get(&c, r, "change") != '\0';
    fprintf(f, "<tr%s><td class=\"n\">", r == best ? " class=\"win\"" : "");
    if (!change) esc(f, get(&c, r, "rank"));
    fputs("</td><td class=\"conf\">", f);
    if (!change) esc(f, get(&c, r, "site"));
    fprintf(f, "</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">",
            change ? "" : bytes(num(&c, r, "live_bytes"), a, sizeof a), change ? "" : bytes(num(&c, r, "unused_bytes"), b, sizeof b));
    if (!change) esc(f, get(&c, r, "allocs"));
    fputs("</td><td>", f);
    esc(f, change ? get(&c, r, "change") : "as it is");
    fputs("</td>", f);
    char d[AB_BYTES_TEXT + 8], e[AB_BYTES_TEXT + 8];
    if (strcmp(get(&c, r, "status"), "unchanged") == 0) {
      fputs("<td colspan=\"2\">changes nothing in the trace</td></tr>\n", f);
    } else if (*get(&c, r, "peak_reserved_bytes")) {
      fprintf(f, "<td class=\"n\">%s (%s)</td><td class=\"n\">", bytes(num(&c, r, "peak_reserved_bytes"), a, sizeof a),
              saved(get(&c, r, "peak_saved_bytes"), d, sizeof d));
      esc(f, get(&c, r, "cap_kind"));
      fprintf(f, " %s (%s)</td></tr>\n", *get(&c, r, "found_cap_bytes") ? bytes(num(&c, r, "found_cap_bytes"), b, sizeof b) : "-",
              saved(get(&c, r, "cap_saved_bytes"), e, sizeof e));
    } else {
      fputs("<td></td><td></td></tr>\n", f);
    }
  }
  fputs("</table>\n", f);
  for (size_t r = first; by_stack && r <= last && num(&c, r, "rank") <= 3; r++) {
    if (*get(&c, r, "change") || !*get(&c, r, "stack")) continue;
    fputs("<p>The stack of site ", f);
    esc(f, get(&c, r, "rank"));
    fputs(", innermost first:</p>\n<pre>", f);
    /* A frame a line: the file writes them on one, "; " between. */
    const char *p = get(&c, r, "stack");
    for (const char *next; (next = strstr(p, "; ")) != NULL; p = next + 2) {
      esc_span(f, p, (size_t)(next - p));
      fputc('\n', f);
    }
    esc(f, p);
    fputs("</pre>\n", f);
  }
  csv_free(&c);
  return AB_OK;
}

static ab_status blame_page(FILE *f, const char *dir, size_t *size, ab_diag_t *diag) {
  (void)size;
  head(f, "allocbench blame");
  AB_TRY(blame_section(f, dir, true, diag));
  pre_file(f, dir, "tune_trace.txt", "What the trace holds", "");
  reproduce(f, dir, NULL);
  return AB_OK;
}

static ab_status tune_page(FILE *f, const char *dir, const drawing_t *drawing, size_t *size, ab_diag_t *diag) {
  char path[4096], a[32];
  csv_t c;
  AB_TRY(results_read(dir, "tune.csv", &c, diag));
  /* The last run: from the first of its rows of rank 1 (one per trace), as plots/tune_confs.gp
   * finds it; of its rows, those of each configuration's worst trace, by which it is ranked. */
  size_t first = 1;
  for (size_t r = 1; r < c.nrows; r++)
    if (num(&c, r, "rank") == 1 &&
        (r == 1 || num(&c, r - 1, "rank") != 1 || strcmp(get(&c, r, "trace"), get(&c, first, "trace")) == 0 ||
         strcmp(get(&c, r, "workload"), get(&c, first, "workload")) != 0))
      first = r;
  size_t ntraces = 0;
  for (size_t r = first; r < c.nrows && num(&c, r, "rank") == 1; r++) ntraces++;
  char title[512];
  snprintf(title, sizeof title, "allocbench tune: %s", c.nrows > 1 ? get(&c, first, "workload") : "(no rows)");
  head(f, title);
  if (c.nrows > 1) {
    uint64_t cap = num(&c, first, "cap_bytes");
    fprintf(f, "<p class=\"sub\">%zu configurations%s on ", (c.nrows - first) / (ntraces ? ntraces : 1),
            ntraces > 1 ? " on every trace of the job, each ranked by its worst trace," : "");
    esc(f, get(&c, first, "device"));
    fprintf(f, ", ranked by %s%s%s.</p>\n", strcmp(get(&c, first, "objective"), "budget") == 0 ? "the smallest cap" : "peak reserved",
            cap ? ", under a cap of " : "", cap ? bytes(cap, a, sizeof a) : "");
  }
  /* The answer: the block tune printed, the line to paste first. */
  char *answer;
  snprintf(path, sizeof path, "%s/tune_answer.txt", dir);
  fputs("<section class=\"answer\">\n<h2 style=\"border:0;margin-top:.3em\">The answer</h2>\n", f);
  if (slurp(path, &answer, NULL)) {
    char *save = NULL;
    bool pasted = false;
    for (char *line = strtok_r(answer, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
      if (strncmp(line, "export ", 7) == 0) {
        fputs("<p>Paste this line where the job starts:</p>\n<pre class=\"paste\">", f);
        esc(f, line);
        fputs("</pre>\n", f);
        pasted = true;
      } else {
        /* The comments tune printed under the line, as sentences. */
        char *text = strncmp(line, "# ", 2) == 0 ? line + 2 : line;
        if (*text >= 'a' && *text <= 'z') *text = (char)(*text - 'a' + 'A');
        fputs("<p>", f);
        esc(f, text);
        fputs(".</p>\n", f);
      }
    }
    if (!pasted) fputs("<p>No PYTORCH_CUDA_ALLOC_CONF to paste.</p>\n", f);
    free(answer);
  } else {
    fputs("<p>(tune_answer.txt is missing: run <code>allocbench tune</code> into this folder again.)</p>\n", f);
  }
  fputs("</section>\n", f);
  fputs("<h2>Every setting tried</h2>\n<table>\n<tr><th>rank</th><th>strategy</th><th>PYTORCH_CUDA_ALLOC_CONF</th>"
        "<th>peak reserved</th><th>smallest cap</th><th>device allocs</th>",
        f);
  fputs(ntraces > 1 ? "<th>worst trace</th><th></th></tr>\n" : "<th></th></tr>\n", f);
  /* The table's sizes as one set, so that two settings ranked apart never read the same:
   * fig[2 (r - first)] a row's peak reserved, fig[2 (r - first) + 1] its smallest cap. */
  size_t nfig = 2 * (c.nrows - first);
  uint64_t *sizes = malloc((nfig + 1) * sizeof *sizes);
  char(*fig)[AB_BYTES_TEXT] = malloc((nfig + 1) * sizeof *fig);
  if (sizes == NULL || fig == NULL) {
    free(sizes);
    free(fig);
    csv_free(&c);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  for (size_t r = first; r < c.nrows; r++) {
    sizes[2 * (r - first)] = num(&c, r, "peak_reserved_bytes");
    sizes[2 * (r - first) + 1] = num(&c, r, "min_budget_bytes");
  }
  ab_format_bytes_apart(sizes, nfig, fig);
  for (size_t r = first; r < c.nrows; r++) {
    if (strcmp(get(&c, r, "worst"), "0") == 0) continue;
    bool win = strcmp(get(&c, r, "recommended"), "1") == 0, rec = strcmp(get(&c, r, "recorded"), "1") == 0;
    bool ref = strcmp(get(&c, r, "limit"), "budget") == 0, ok = strcmp(get(&c, r, "status"), "ok") == 0;
    fprintf(f, "<tr%s><td class=\"n\">", win ? " class=\"win\"" : rec ? " class=\"rec\"" : "");
    esc(f, get(&c, r, "rank"));
    fputs("</td><td>", f);
    esc(f, get(&c, r, "strategy"));
    fputs("</td><td class=\"conf\">", f); /* a long setting wraps where it must, the figures never */
    esc(f, ref ? "-" : *get(&c, r, "conf") ? get(&c, r, "conf") : "(default)");
    /* A placement band beside its figure where it is not a point (band.h); a tune.csv written
     * before the band columns has none. */
    char reserved[3 * AB_BYTES_TEXT], allocs[80];
    const char *rlo = get(&c, r, "peak_reserved_low"), *rhi = get(&c, r, "peak_reserved_high");
    const char *alo = get(&c, r, "device_allocs_low"), *ahi = get(&c, r, "device_allocs_high");
    snprintf(reserved, sizeof reserved, "%s", ok ? fig[2 * (r - first)] : get(&c, r, "status"));
    if (ok && *rlo && *rhi && strcmp(rlo, rhi) != 0)
      ab_band_format_bytes(num(&c, r, "peak_reserved_bytes"), num(&c, r, "peak_reserved_low"), num(&c, r, "peak_reserved_high"),
                           reserved, sizeof reserved);
    snprintf(allocs, sizeof allocs, "%s", get(&c, r, "num_device_alloc"));
    if (*alo && *ahi && strcmp(alo, ahi) != 0) snprintf(allocs, sizeof allocs, "%s (%s-%s)", get(&c, r, "num_device_alloc"), alo, ahi);
    fputs("</td><td class=\"n\">", f);
    esc(f, reserved);
    fprintf(f, "</td><td class=\"n\">%s%s</td><td class=\"n\">", *get(&c, r, "min_budget_bytes") ? fig[2 * (r - first) + 1] : "-",
            ref && *get(&c, r, "min_budget_bytes") ? " budget" : "");
    esc(f, allocs);
    fputs("</td><td>", f);
    if (ntraces > 1) {
      esc(f, get(&c, r, "trace"));
      fputs("</td><td>", f);
    }
    fprintf(f, "%s%s%s", win ? "recommended" : "", win && rec ? ", " : "", rec ? "recorded" : "");
    if (*get(&c, r, "note") && !ref) {
      fputs(win || rec ? "; " : "", f);
      esc(f, get(&c, r, "note"));
    }
    fputs("</td></tr>\n", f);
  }
  fputs("</table>\n", f);
  free(sizes);
  free(fig);
  csv_free(&c);
  write_figures(f, dir, true, size, drawing);
  AB_TRY(blame_section(f, dir, false, diag));
  pre_file(f, dir, "tune_trace.txt", "What the trace holds", "<p>As <code>allocbench replay --info</code> reads it:</p>\n");
  reproduce(f, dir, NULL);
  return AB_OK;
}

/* ---- matrix, oom, compare: strategies on workloads ------------------------------------------------ */

typedef struct cell_s {
  bool run, searched;
  bool ok;             /* the unbudgeted run completed */
  uint64_t requested;  /* peak requested bytes */
  uint64_t reserved;   /* peak reserved bytes of the run */
  uint64_t budget;     /* the smallest budget found; 0: none */
  double call_ns;      /* the run's median allocation and free, added: ns a pair of calls */
  double step_ms;      /* the run's median step; 0: none (a trace, or no steps timed) */
} cell_t;

/* The workloads or the strategies of a grid, in the order the files first name them; each
 * name points into the file it was read from. */
typedef struct names_s {
  const char **name;
  size_t n, cap;
} names_t;

/* The index of name in names, added at the end where it is new; SIZE_MAX when out of memory. */
static size_t name_index(names_t *names, const char *name) {
  for (size_t i = 0; i < names->n; i++)
    if (strcmp(names->name[i], name) == 0) return i;
  if (names->n == names->cap) {
    size_t cap = names->cap ? 2 * names->cap : 16;
    const char **grown = realloc(names->name, cap * sizeof *grown);
    if (grown == NULL) return SIZE_MAX;
    names->name = grown, names->cap = cap;
  }
  names->name[names->n] = name;
  return names->n++;
}

/* A results file of a grid page, and what its rows give. */
typedef struct grid_file_s {
  const char *name;
  bool runs;     /* its rows are runs: status, peak reserved, times */
  bool searches; /* its rows are budget searches: the smallest budget */
} grid_file_t;

/* Every strategy on every workload, sized to what the files hold: a table of the page leaves
 * none out. */
typedef struct grid_s {
  csv_t file[2];      /* the files read, which the names point into */
  names_t w, s;       /* workloads, strategies */
  cell_t *cell;       /* w.n * s.n, a workload's strategies side by side */
  const char *device; /* as the last row that names one names it; "" for none */
} grid_t;

static cell_t *at(const grid_t *g, size_t w, size_t s) { return &g->cell[w * g->s.n + s]; }

static void grid_free(grid_t *g) {
  for (size_t k = 0; k < sizeof g->file / sizeof g->file[0]; k++) csv_free(&g->file[k]);
  free(g->w.name);
  free(g->s.name);
  free(g->cell);
}

/* Row r of c into its cell: the last row of each pair wins. */
static void grid_add(grid_t *g, const csv_t *c, size_t r, const grid_file_t *file) {
  cell_t *x = at(g, name_index(&g->w, get(c, r, "workload")), name_index(&g->s, get(c, r, "strategy")));
  if (*get(c, r, "device")) g->device = get(c, r, "device");
  if (num(c, r, "peak_requested_bytes")) x->requested = num(c, r, "peak_requested_bytes");
  if (file->runs) {
    x->run = true;
    x->ok = strcmp(get(c, r, "status"), "ok") == 0;
    x->reserved = num(c, r, "peak_reserved_bytes");
    x->call_ns = decimal(c, r, "alloc_ns_p50") + decimal(c, r, "free_ns_p50");
    x->step_ms = decimal(c, r, "step_ms_p50");
  }
  if (file->searches) {
    x->searched = true;
    x->budget = num(c, r, "min_budget_bytes");
  }
}

/* Reads the files of the grid that dir holds: every name first, then the cells. */
static ab_status grid_read(grid_t *g, const char *dir, const grid_file_t *files, size_t nfiles, ab_diag_t *diag) {
  g->device = "";
  for (size_t k = 0; k < nfiles; k++) {
    if (!exists(dir, files[k].name)) continue;
    AB_TRY(results_read(dir, files[k].name, &g->file[k], diag));
    for (size_t r = 1; r < g->file[k].nrows; r++)
      if (name_index(&g->w, get(&g->file[k], r, "workload")) == SIZE_MAX ||
          name_index(&g->s, get(&g->file[k], r, "strategy")) == SIZE_MAX)
        return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  g->cell = calloc(g->w.n * g->s.n + 1, sizeof *g->cell);
  if (g->cell == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  for (size_t k = 0; k < nfiles; k++)
    for (size_t r = 1; r < g->file[k].nrows; r++) grid_add(g, &g->file[k], r, &files[k]);
  return AB_OK;
}

/* Note [The bench page's answer]: what a user deploying one of the strategies asks, per
 * workload: which holds the least memory, which is fastest, and the trade-off, the fastest of
 * those within AB_REPORT_NEAR_PCT of the least memory. Only runs that completed count (the
 * peak of a run that ran out of memory is where it stopped), and only the strategies one
 * deploys: the registry's references (raw, the baseline; oracle, a bound from the whole run
 * known offline) are shown beside the answer, never as it. Time is the median step where
 * every candidate has one (workloads with steps, timed on a GPU), else the median
 * allocation and free, added. */
#define AB_REPORT_NEAR_PCT 10

static bool is_reference(const char *strategy) {
  const ab_strategy_entry_t *e = ab_strategy_find(strategy);
  return e && e->reference;
}

/* The time of a cell in the workload's measure (steps or calls), for ranking and words. */
static double time_of(const cell_t *x, bool steps) { return steps ? x->step_ms : x->call_ns; }

static void say_time(FILE *f, const cell_t *x, bool steps) {
  if (steps)
    fprintf(f, "%.1f ms a step", x->step_ms);
  else
    fprintf(f, "%.0f ns an allocation and its free", x->call_ns);
}

static void grid_answer(FILE *f, const grid_t *g) {
  char a[32], b[32];
  fputs("<section class=\"answer\">\n<h2 style=\"border:0;margin-top:.3em\">The answer</h2>\n<ul>\n", f);
  for (size_t w = 0; w < g->w.n; w++) {
    size_t least = SIZE_MAX, fastest = SIZE_MAX, balanced = SIZE_MAX, smallest = SIZE_MAX;
    bool steps = true, any = false;
    for (size_t s = 0; s < g->s.n; s++) {
      const cell_t *x = at(g, w, s);
      if (!x->run || !x->ok || is_reference(g->s.name[s])) continue;
      any = true;
      steps &= x->step_ms > 0;
      if (least == SIZE_MAX || x->reserved < at(g, w, least)->reserved) least = s;
    }
    for (size_t s = 0; s < g->s.n; s++) {
      const cell_t *x = at(g, w, s);
      if (x->searched && x->budget && !is_reference(g->s.name[s]) &&
          (smallest == SIZE_MAX || x->budget < at(g, w, smallest)->budget))
        smallest = s;
      if (!x->run || !x->ok || is_reference(g->s.name[s])) continue;
      if (fastest == SIZE_MAX || time_of(x, steps) < time_of(at(g, w, fastest), steps)) fastest = s;
      bool near = (double)x->reserved * 100.0 <= (double)at(g, w, least)->reserved * (100.0 + AB_REPORT_NEAR_PCT);
      if (near && (balanced == SIZE_MAX || time_of(x, steps) < time_of(at(g, w, balanced), steps))) balanced = s;
    }
    fputs("<li><b>", f);
    esc(f, g->w.name[w]);
    fputs("</b>: ", f);
    if (any) {
      const cell_t *x = at(g, w, least);
      fputs(least == fastest ? "for memory and time, <b>" : "for memory, <b>", f);
      esc(f, g->s.name[least]);
      fprintf(f, "</b> (%s at the peak", bytes(x->reserved, a, sizeof a));
      if (x->requested) fprintf(f, ", %.2f&times; what the program requested", (double)x->reserved / (double)x->requested);
      if (least == fastest) {
        fputs(", ", f);
        say_time(f, x, steps);
      } else {
        fputs("); for time, <b>", f);
        esc(f, g->s.name[fastest]);
        fputs("</b> (", f);
        say_time(f, at(g, w, fastest), steps);
      }
      fputs(")", f);
      /* The trade-off, where it is a third answer. */
      if (balanced != least && balanced != fastest) {
        fprintf(f, "; within %d%% of the least memory, <b>", AB_REPORT_NEAR_PCT);
        esc(f, g->s.name[balanced]);
        fputs("</b> is the fastest (", f);
        say_time(f, at(g, w, balanced), steps);
        fputs(")", f);
      } else if (balanced == fastest && fastest != least) {
        fputs("; <b>", f);
        esc(f, g->s.name[fastest]);
        fprintf(f, "</b> is within %d%% of the least memory too", AB_REPORT_NEAR_PCT);
      }
    }
    if (smallest != SIZE_MAX) {
      fputs(any ? "; " : "", f);
      fputs("<b>", f);
      esc(f, g->s.name[smallest]);
      fprintf(f, "</b> runs in the smallest budget (%s)", bytes(at(g, w, smallest)->budget, b, sizeof b));
    }
    if (!any && smallest == SIZE_MAX) fputs("no strategy one deploys completed it", f);
    /* The references, beside the answer. */
    bool said = false;
    for (size_t s = 0; s < g->s.n; s++) {
      const cell_t *x = at(g, w, s);
      if (!x->run || !is_reference(g->s.name[s])) continue;
      fputs(said ? ", " : ". For reference: ", f);
      said = true;
      esc(f, g->s.name[s]);
      fputs(" (", f);
      esc(f, ab_strategy_find(g->s.name[s])->reference);
      if (!x->ok)
        fputs(") ran out of memory", f);
      else if (x->requested)
        fprintf(f, ") %.2f&times;", (double)x->reserved / (double)x->requested);
      else
        fprintf(f, ") %s", bytes(x->reserved, a, sizeof a));
    }
    fputs(".</li>\n", f);
  }
  fputs("</ul>\n</section>\n", f);
}

static ab_status grid_table(FILE *f, const grid_t *g, bool runs, bool searches, ab_diag_t *diag) {
  /* A row's sizes as one set, so that two strategies' figures that differ never read the
   * same: fig[0] the requested, fig[1 + 2s] a strategy's peak reserved, fig[2 + 2s] its budget. */
  uint64_t *sizes = malloc((1 + 2 * g->s.n) * sizeof *sizes);
  char(*fig)[AB_BYTES_TEXT] = malloc((1 + 2 * g->s.n) * sizeof *fig);
  if (sizes == NULL || fig == NULL) {
    free(sizes);
    free(fig);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  fprintf(f, "<h2>Every strategy on every workload</h2>\n<p>Each cell: %s%s%s.</p>\n<table>\n<tr><th>workload</th>",
          runs ? "peak reserved over peak requested" : "", runs && searches ? ", then " : "",
          searches ? "the smallest budget it completes in" : "");
  for (size_t s = 0; s < g->s.n; s++) {
    fputs("<th>", f);
    esc(f, g->s.name[s]);
    fputs("</th>", f);
  }
  fputs("</tr>\n", f);
  for (size_t w = 0; w < g->w.n; w++) {
    fputs("<tr><td>", f);
    esc(f, g->w.name[w]);
    uint64_t req = 0;
    for (size_t s = 0; s < g->s.n; s++)
      if (at(g, w, s)->requested) req = at(g, w, s)->requested;
    sizes[0] = req;
    for (size_t s = 0; s < g->s.n; s++) {
      sizes[1 + 2 * s] = at(g, w, s)->reserved;
      sizes[2 + 2 * s] = at(g, w, s)->budget;
    }
    ab_format_bytes_apart(sizes, 1 + 2 * g->s.n, fig);
    if (req) fprintf(f, " (%s requested)", fig[0]);
    fputs("</td>", f);
    for (size_t s = 0; s < g->s.n; s++) {
      const cell_t *x = at(g, w, s);
      fputs("<td class=\"n\">", f);
      if (x->run) {
        if (!x->ok) fputs("OOM", f);
        else if (x->requested) fprintf(f, "%.2f", (double)x->reserved / (double)x->requested);
        else fputs(fig[1 + 2 * s], f);
      }
      if (x->searched) fprintf(f, "%s%s", x->run ? ", " : "", x->budget ? fig[2 + 2 * s] : "none");
      fputs("</td>", f);
    }
    fputs("</tr>\n", f);
  }
  fputs("</table>\n", f);
  free(sizes);
  free(fig);
  return AB_OK;
}

static ab_status grid_page(FILE *f, const char *dir, const char *kind, const drawing_t *drawing, size_t *size,
                           ab_diag_t *diag) {
  static const grid_file_t compare_files[] = {{"compare.csv", true, true}};
  static const grid_file_t matrix_files[] = {{"summary.csv", true, false}, {"oom.csv", false, true}};
  bool compare = strcmp(kind, "compare") == 0;
  grid_t g = {0};
  ab_status st = compare ? grid_read(&g, dir, compare_files, 1, diag) : grid_read(&g, dir, matrix_files, 2, diag);
  if (st == AB_OK) {
    bool runs = false, searches = false;
    for (size_t w = 0; w < g.w.n; w++)
      for (size_t s = 0; s < g.s.n; s++) runs |= at(&g, w, s)->run, searches |= at(&g, w, s)->searched;
    char title[512];
    snprintf(title, sizeof title, "allocbench %s: %zu workload%s, %zu strateg%s", kind, g.w.n, g.w.n == 1 ? "" : "s", g.s.n,
             g.s.n == 1 ? "y" : "ies");
    head(f, title);
    fputs("<p class=\"sub\">On ", f);
    esc(f, g.device[0] ? g.device : "an unnamed device");
    fputs(".</p>\n", f);
    grid_answer(f, &g);
    st = grid_table(f, &g, runs, searches, diag);
  }
  if (st == AB_OK) {
    write_figures(f, dir, false, size, drawing);
    st = blame_section(f, dir, false, diag);
  }
  if (st == AB_OK) {
    pre_file(f, dir, "tune_trace.txt", "What the trace holds", "");
    reproduce(f, dir, strcmp(kind, "matrix") == 0 ? "make bench   # the matrix and its figures into results/latest, with this page\n" : NULL);
  }
  grid_free(&g);
  return st;
}

/* ---- the command's pieces --------------------------------------------------------------------------- */

ab_status ab_report_run_self(char *const argv[], const char *path, ab_diag_t *diag) {
  ab_output_t out;
  AB_TRY(ab_output_open(&out, path, diag));
  fflush(out.f);
  int rc = ab_run_spawn("/proc/self/exe", argv, fileno(out.f));
  if (rc != 0) {
    fclose(out.f);
    unlink(out.tmp);
    return ab_diag_set(diag, AB_ERR_IO, "%s: allocbench %s exited %d", path, argv[1], rc);
  }
  return ab_output_commit(&out, diag);
}

ab_status ab_report_log_command(const char *dir, int argc, char **argv, ab_diag_t *diag) {
  char path[4096];
  snprintf(path, sizeof path, "%s/commands.txt", dir);
  FILE *f = fopen(path, "a");
  if (f == NULL) return ab_diag_set(diag, AB_ERR_IO, "%s: %s", path, strerror(errno));
  fputs("allocbench", f);
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    bool plain = *a != '\0';
    for (const char *p = a; *p; p++) plain &= strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%", *p) != NULL;
    if (plain) {
      fprintf(f, " %s", a);
      continue;
    }
    fputs(" '", f);
    for (const char *p = a; *p; p++) *p == '\'' ? fputs("'\\''", f) : fputc(*p, f);
    fputc('\'', f);
  }
  fputc('\n', f);
  if (fclose(f) != 0) return ab_diag_set(diag, AB_ERR_IO, "%s: %s", path, strerror(errno));
  return AB_OK;
}

/* Note [The page beside the results]: the page reads every file of its folder it shows (the
 * results, the timelines and maps, the figures, commands.txt) and draw.sh writes figures there
 * first, so a page written over one of them would destroy what it shows: -o naming a file in
 * the results folder (through any path or link) is refused before anything is drawn or
 * written, unless it is a page (.html), which the page never reads. */
static ab_status check_page_path(const char *dir, const char *path, ab_diag_t *diag) {
  AB_TRY(ab_output_check("-o", path, diag));
  AB_TRY(ab_output_check_folder("-o", path, diag));
  char real_dir[PATH_MAX], target[PATH_MAX], parent[PATH_MAX];
  if (realpath(dir, real_dir) == NULL) return AB_OK; /* refused later, naming the folder */
  /* The file the page would be renamed onto: the link's target where path is a link. */
  if (realpath(path, target) == NULL) snprintf(target, sizeof target, "%s", path);
  const char *slash = strrchr(target, '/');
  const char *base = slash ? slash + 1 : target;
  if (slash == target) snprintf(parent, sizeof parent, "/");
  else if (slash) snprintf(parent, sizeof parent, "%.*s", (int)(slash - target), target);
  else snprintf(parent, sizeof parent, ".");
  char real_parent[PATH_MAX];
  if (realpath(parent, real_parent) == NULL || strcmp(real_parent, real_dir) != 0) return AB_OK;
  size_t n = strlen(base);
  if (n > 5 && strcmp(base + n - 5, ".html") == 0) return AB_OK;
  return ab_diag_set(diag, AB_ERR_INVALID,
                     "-o '%s': reaches '%s' in the results folder '%s', whose files the page reads and draws "
                     "(expected a name ending in .html, or a path outside the folder)",
                     path, target, dir);
}

ab_status ab_report_write(const char *dir, const char *out, bool draw, char *written, size_t written_size,
                          ab_diag_t *diag) {
  if (written && written_size) written[0] = '\0';
  const char *kind = exists(dir, "tune.csv")      ? "tune"
                     : exists(dir, "compare.csv") ? "compare"
                     : exists(dir, "summary.csv") ? "matrix"
                     : exists(dir, "oom.csv")     ? "oom"
                     : exists(dir, "blame.csv")   ? "blame"
                                                  : NULL;
  if (kind == NULL)
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "'%s' holds no results of tune, compare, matrix, oom or blame (expected tune.csv, compare.csv, "
                       "summary.csv, oom.csv or blame.csv)",
                       dir);
  if (out) AB_TRY(check_page_path(dir, out, diag));
  /* Every results file is read and checked before anything is drawn: bad input leaves the
   * folder as it was. */
  for (size_t i = 0; i < sizeof results_files / sizeof results_files[0]; i++) {
    csv_t c;
    if (!exists(dir, results_files[i].name)) continue;
    AB_TRY(results_read(dir, results_files[i].name, &c, diag));
    csv_free(&c);
  }
  drawing_t drawing = {false, 0};
  if (ab_run_stop) return ab_diag_set(diag, AB_ERR_IO, "stopped before the page was written");
  if (draw) {
    char script[4096];
    snprintf(script, sizeof script, "%s/draw.sh", ab_results_plots_dir());
    if (access(script, R_OK) == 0) {
      fprintf(stderr, "allocbench report: drawing the figures with %s\n", script);
      char *argv[] = {"bash", script, (char *)dir, NULL};
      /* Its lines are progress: stdout stays the command's (tune --format csv prints rows). */
      int rc = ab_run_spawn("bash", argv, STDERR_FILENO);
      drawing = (drawing_t){true, rc};
      if (ab_run_stop) return ab_diag_set(diag, AB_ERR_IO, "stopped while drawing the figures: the page was not written");
      if (rc != 0) fprintf(stderr, "allocbench report: %s exited %d: the page has the figures that were drawn\n", script, rc);
    } else {
      fprintf(stderr, "allocbench report: no %s: the page has the figures already in %s\n", script, dir);
    }
  }
  char path[4096];
  snprintf(path, sizeof path, "%s", out ? out : "");
  if (out == NULL) snprintf(path, sizeof path, "%s/report.html", dir);
  ab_output_t o;
  AB_TRY(ab_output_open(&o, path, diag));
  size_t size = 0;
  ab_status st = strcmp(kind, "tune") == 0    ? tune_page(o.f, dir, &drawing, &size, diag)
                 : strcmp(kind, "blame") == 0 ? blame_page(o.f, dir, &size, diag)
                                              : grid_page(o.f, dir, kind, &drawing, &size, diag);
  if (st == AB_OK) footer(o.f);
  if (st != AB_OK) {
    fclose(o.f);
    if (o.tmp[0]) unlink(o.tmp);
    return st;
  }
  AB_TRY(ab_output_commit(&o, diag));
  if (written) snprintf(written, written_size, "%s", path);
  return AB_OK;
}
