/* gbench_csv.c: Google Benchmark's JSON to CSV (gbench_csv.h).
 *
 * A small recursive-descent reader of JSON that keeps only what the CSV needs: the
 * "device" of the top-level "context" object and the scalar fields of each object of the
 * top-level "benchmarks" array. Everything else is parsed and skipped, so malformed input
 * anywhere is still refused with its byte offset.
 */
#include "harness/micro/gbench_csv.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/input.h"

/* The last column is never empty: gnuplot 5.4 misreads an empty last field. */
const ab_col_t ab_gbench_csv_cols[] = {
    {"name", false},    {"workload", false}, {"strategy", false},         {"args", false},
    {"device", false},  {"run_type", false}, {"aggregate", false},        {"error", false},
    {"real_ns", true},  {"cpu_ns", true},    {"items_per_second", true}, {"device_allocs", true},
    {"iterations", true},
};
const size_t ab_gbench_csv_ncols = sizeof ab_gbench_csv_cols / sizeof ab_gbench_csv_cols[0];

#define FIELD_BYTES 1024
#define MAX_DEPTH 64

typedef struct reader_s {
  const char *begin, *p, *end;
  const char *path;
  ab_diag_t *diag;
} reader_t;

static ab_status bad(reader_t *r, const char *expected) {
  return ab_diag_set(r->diag, AB_ERR_INVALID, "%s: byte %zu: expected %s (not Google Benchmark's JSON output?)",
                     r->path, (size_t)(r->p - r->begin), expected);
}

static void skip_ws(reader_t *r) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static bool eat(reader_t *r, char c) {
  skip_ws(r);
  if (r->p < r->end && *r->p == c) {
    r->p++;
    return true;
  }
  return false;
}

static int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Reads a string into out (cut to size, which may be 0 to skip it), as UTF-8. */
static ab_status read_string(reader_t *r, char *out, size_t size) {
  if (!eat(r, '"')) return bad(r, "a string");
  size_t n = 0;
  while (r->p < r->end && *r->p != '"') {
    unsigned code = (unsigned char)*r->p++;
    if (code < 0x20) return bad(r, "no control character inside a string");
    if (code == '\\') {
      if (r->p >= r->end) break;
      char e = *r->p++;
      switch (e) {
        case 'n': code = '\n'; break;
        case 't': code = '\t'; break;
        case 'r': code = '\r'; break;
        case 'b': code = '\b'; break;
        case 'f': code = '\f'; break;
        case '"': case '\\': case '/': code = (unsigned char)e; break;
        case 'u': {
          code = 0;
          for (int i = 0; i < 4; i++) {
            int h = r->p < r->end ? hex(*r->p) : -1;
            if (h < 0) return bad(r, "four hex digits after \\u");
            code = code * 16 + (unsigned)h;
            r->p++;
          }
          break;
        }
        default: r->p--; return bad(r, "an escape (\\n, \\\", \\uXXXX, ...)");
      }
    }
    /* Code points below 0x800 cover what benchmark names hold; others become '?'. */
    char enc[2];
    size_t k = 0;
    if (code < 0x80) {
      enc[k++] = (char)code;
    } else if (code < 0x800) {
      enc[k++] = (char)(0xC0 | (code >> 6));
      enc[k++] = (char)(0x80 | (code & 0x3F));
    } else {
      enc[k++] = '?';
    }
    for (size_t i = 0; i < k; i++)
      if (n + 1 < size) out[n++] = enc[i];
  }
  if (r->p >= r->end) return bad(r, "the end of a string");
  r->p++;
  if (size) out[n] = '\0';
  return AB_OK;
}

/* Reads a number, true, false or null as its text. */
static ab_status read_atom(reader_t *r, char *out, size_t size) {
  skip_ws(r);
  const char *start = r->p;
  /* Numbers, the three words, and the NaN and Infinity the library writes for non-finite
   * values (which strtod reads). */
  while (r->p < r->end && (isalnum((unsigned char)*r->p) || *r->p == '+' || *r->p == '-' || *r->p == '.')) r->p++;
  size_t len = (size_t)(r->p - start);
  bool word = (len == 4 && (memcmp(start, "true", 4) == 0 || memcmp(start, "null", 4) == 0)) ||
              (len == 5 && memcmp(start, "false", 5) == 0);
  if (!word) {
    char buf[64];
    char *stop = NULL;
    if (len == 0 || len >= sizeof buf) {
      r->p = start;
      return bad(r, "a value");
    }
    memcpy(buf, start, len);
    buf[len] = '\0';
    (void)strtod(buf, &stop);
    if (*stop != '\0') {
      r->p = start;
      return bad(r, "a number");
    }
  }
  if (size) snprintf(out, size, "%.*s", (int)len, start);
  return AB_OK;
}

static ab_status skip_value(reader_t *r, int depth);

/* Calls field(ctx, key) for each member of an object; field reads the value. */
typedef ab_status (*field_fn)(reader_t *r, void *ctx, const char *key, int depth);

static ab_status read_object(reader_t *r, field_fn field, void *ctx, int depth) {
  if (depth > MAX_DEPTH) return bad(r, "less nesting");
  if (!eat(r, '{')) return bad(r, "an object");
  if (eat(r, '}')) return AB_OK;
  do {
    char key[128];
    AB_TRY(read_string(r, key, sizeof key));
    if (!eat(r, ':')) return bad(r, "':' after a key");
    AB_TRY(field(r, ctx, key, depth + 1));
  } while (eat(r, ','));
  if (!eat(r, '}')) return bad(r, "',' or '}'");
  return AB_OK;
}

static ab_status skip_field(reader_t *r, void *ctx, const char *key, int depth) {
  (void)ctx;
  (void)key;
  return skip_value(r, depth);
}

static ab_status skip_value(reader_t *r, int depth) {
  if (depth > MAX_DEPTH) return bad(r, "less nesting");
  skip_ws(r);
  if (r->p >= r->end) return bad(r, "a value");
  switch (*r->p) {
    case '{': return read_object(r, skip_field, NULL, depth);
    case '[':
      r->p++;
      if (eat(r, ']')) return AB_OK;
      do AB_TRY(skip_value(r, depth + 1));
      while (eat(r, ','));
      if (!eat(r, ']')) return bad(r, "',' or ']'");
      return AB_OK;
    case '"': return read_string(r, NULL, 0);
    default: return read_atom(r, NULL, 0);
  }
}

/* ---- the benchmarks ------------------------------------------------------------------- */

/* The JSON fields a row is made of. */
#define RUN_FIELDS(X)                                                                           \
  X(name) X(run_name) X(run_type) X(aggregate_name) X(iterations) X(real_time) X(cpu_time) \
  X(time_unit) X(items_per_second) X(device_allocs) X(error_occurred) X(error_message)

typedef struct run_s {
#define RUN_FIELD(f) char f[FIELD_BYTES];
  RUN_FIELDS(RUN_FIELD)
#undef RUN_FIELD
} run_t;

static ab_status run_field(reader_t *r, void *ctx, const char *key, int depth) {
  run_t *run = ctx;
#define RUN_MATCH(f)                                                  \
  if (strcmp(key, #f) == 0) {                                         \
    skip_ws(r);                                                       \
    if (r->p < r->end && *r->p == '"') return read_string(r, run->f, sizeof run->f); \
    if (r->p < r->end && (*r->p == '{' || *r->p == '[')) return bad(r, "a scalar for \"" #f "\""); \
    return read_atom(r, run->f, sizeof run->f);                       \
  }
  RUN_FIELDS(RUN_MATCH)
#undef RUN_MATCH
  return skip_value(r, depth);
}

/* Seconds per unit of time_unit; 0 for an unknown unit. */
static double unit_ns(const char *unit) {
  if (strcmp(unit, "ns") == 0 || unit[0] == '\0') return 1;
  if (strcmp(unit, "us") == 0) return 1e3;
  if (strcmp(unit, "ms") == 0) return 1e6;
  if (strcmp(unit, "s") == 0) return 1e9;
  return 0;
}

/* A name component Google Benchmark adds, not part of the benchmark's own arguments. */
static bool decoration(const char *part, size_t len) {
  static const char *const words[] = {"manual_time", "real_time", "process_time", NULL};
  static const char *const prefixes[] = {"threads:", "iterations:", "repeats:", "min_time:", "min_warmup_time:", NULL};
  for (size_t i = 0; words[i]; i++)
    if (strlen(words[i]) == len && memcmp(part, words[i], len) == 0) return true;
  for (size_t i = 0; prefixes[i]; i++)
    if (len >= strlen(prefixes[i]) && memcmp(part, prefixes[i], strlen(prefixes[i])) == 0) return true;
  return false;
}

/* Splits WORKLOAD/STRATEGY/ARGS... into its parts, leaving decorations out of args. */
static void split_name(const char *name, char *workload, char *strategy, char *args, size_t size) {
  workload[0] = strategy[0] = args[0] = '\0';
  size_t index = 0, used = 0;
  for (const char *p = name; *p;) {
    const char *slash = strchr(p, '/');
    size_t len = slash ? (size_t)(slash - p) : strlen(p);
    if (index == 0) {
      snprintf(workload, size, "%.*s", (int)len, p);
    } else if (index == 1) {
      snprintf(strategy, size, "%.*s", (int)len, p);
    } else if (!decoration(p, len) && used + len + 2 < size) {
      used += (size_t)snprintf(args + used, size - used, "%s%.*s", used ? "/" : "", (int)len, p);
    }
    index++;
    p += len + (slash != NULL);
  }
}

/* A numeric field times scale, with six significant digits; empty when absent. */
static void number(const char *text, double scale, char *out, size_t size) {
  if (text[0] == '\0')
    out[0] = '\0';
  else
    snprintf(out, size, "%.6g", strtod(text, NULL) * scale);
}

typedef struct doc_s {
  ab_table_t *t;
  char device[FIELD_BYTES];
  char build_type[FIELD_BYTES];
} doc_t;

static ab_status add_row(reader_t *r, doc_t *doc, const run_t *run) {
  if (run->name[0] == '\0') return bad(r, "a \"name\" in each benchmark");
  double scale = unit_ns(run->time_unit);
  if (scale == 0) return bad(r, "a time_unit of ns, us, ms or s");
  const char *base = run->run_name[0] ? run->run_name : run->name;
  char workload[FIELD_BYTES], strategy[FIELD_BYTES], args[FIELD_BYTES];
  split_name(base, workload, strategy, args, FIELD_BYTES);
  char real[64], cpu[64], items[64], allocs[64];
  number(run->real_time, scale, real, sizeof real);
  number(run->cpu_time, scale, cpu, sizeof cpu);
  number(run->items_per_second, 1, items, sizeof items);
  number(run->device_allocs, 1, allocs, sizeof allocs);
  bool failed = strcmp(run->error_occurred, "true") == 0;
  const char *cells[] = {
      run->name, workload, strategy, args, doc->device, run->run_type[0] ? run->run_type : "iteration",
      run->aggregate_name, failed ? (run->error_message[0] ? run->error_message : "failed") : "",
      real, cpu, items, allocs, run->iterations[0] ? run->iterations : "0",
  };
  return ab_table_add(doc->t, cells) == AB_OK ? AB_OK : ab_diag_set(r->diag, AB_ERR_INTERNAL, "out of host memory");
}

static ab_status context_field(reader_t *r, void *ctx, const char *key, int depth) {
  doc_t *doc = ctx;
  skip_ws(r);
  if (strcmp(key, "device") == 0 && r->p < r->end && *r->p == '"') return read_string(r, doc->device, sizeof doc->device);
  if (strcmp(key, "library_build_type") == 0 && r->p < r->end && *r->p == '"')
    return read_string(r, doc->build_type, sizeof doc->build_type);
  return skip_value(r, depth);
}

static ab_status top_field(reader_t *r, void *ctx, const char *key, int depth) {
  doc_t *doc = ctx;
  if (strcmp(key, "context") == 0) return read_object(r, context_field, doc, depth);
  if (strcmp(key, "benchmarks") != 0) return skip_value(r, depth);
  if (!eat(r, '[')) return bad(r, "an array for \"benchmarks\"");
  if (eat(r, ']')) return AB_OK;
  run_t *run = malloc(sizeof *run);
  if (run == NULL) return ab_diag_set(r->diag, AB_ERR_INTERNAL, "out of host memory");
  ab_status st;
  do {
    memset(run, 0, sizeof *run);
    st = read_object(r, run_field, run, depth + 1);
    if (st == AB_OK) st = add_row(r, doc, run);
  } while (st == AB_OK && eat(r, ','));
  free(run);
  if (st == AB_OK && !eat(r, ']')) st = bad(r, "',' or ']'");
  return st;
}

static ab_status parse(const char *text, size_t len, const char *path, doc_t *doc, ab_diag_t *diag) {
  reader_t r = {text, text, text + len, path, diag};
  /* The context comes first in the library's output; rows get the device as it was then. */
  AB_TRY(read_object(&r, top_field, doc, 0));
  skip_ws(&r);
  if (r.p != r.end) return bad(&r, "the end of the file");
  return AB_OK;
}

ab_status ab_gbench_csv_parse(const char *text, size_t len, const char *path, ab_table_t *t, ab_diag_t *diag) {
  doc_t doc = {t, "", ""};
  return parse(text, len, path, &doc, diag);
}

ab_status ab_gbench_csv_convert(const char *json_path, const char *csv_path, ab_gbench_context_t *context,
                                ab_diag_t *diag) {
  ab_input_t in;
  AB_TRY(ab_input_read(json_path, &in, diag));
  ab_table_t t;
  ab_table_init(&t, ab_gbench_csv_cols, ab_gbench_csv_ncols);
  doc_t doc = {&t, "", ""};
  ab_status st = parse(in.data, in.len, json_path, &doc, diag);
  if (st == AB_OK && context) snprintf(context->library_build_type, sizeof context->library_build_type, "%s", doc.build_type);
  if (st == AB_OK) st = ab_table_write_file(&t, csv_path, diag);
  ab_table_free(&t);
  ab_input_free(&in);
  return st;
}
