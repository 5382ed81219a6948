/* caching_conf.c: PYTORCH_CUDA_ALLOC_CONF, read as PyTorch 2.11 reads it (caching_conf.h).
 *
 * The option-list parser of units.h is stricter than PyTorch (it refuses items without a
 * separator, empty items and unbalanced brackets up front), and PyTorch's answers depend on
 * its token indices (the boolean error names one), so this module walks PyTorch's token
 * stream instead, pass by pass, index by index (c10/core/AllocatorConfig.{h,cpp},
 * c10/cuda/CUDAAllocatorConfig.cpp). */
#include "strategies/protocol/caching_conf.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kernels/base/units.h"

#define MiB (1ULL << 20)
#define MIN_LARGE_ALLOC_MB 10 /* kMinLargeAlloc: large_segment_size_mb must exceed it */
#define MAX_REGISTER_THREADS 128

typedef struct tok_s {
  const char *s; /* terminated, in parse_t.buf */
  size_t pos;    /* 1-based position of its first character in the text */
} tok_t;

typedef struct parse_s {
  const char *what, *text;
  char *buf;     /* the words, each terminated */
  tok_t *tok;
  size_t n;
  ab_caching_conf_t *c; /* the working copy */
  ab_diag_t *diag;
} parse_t;

static const char *const common_keys[] = {
    "large_segment_size_mb", "max_split_size_mb",          "max_non_split_rounding_mb", "garbage_collection_threshold",
    "roundup_power2_divisions", "expandable_segments", "pinned_use_background_threads", NULL};
static const char *const cuda_keys[] = {
    "backend", "release_lock_on_cudamalloc", "pinned_use_cuda_host_register", "release_lock_on_hipmalloc",
    "pinned_use_hip_host_register", "graph_capture_record_stream_reuse", "pinned_reserve_segment_size_mb",
    "pinned_num_register_threads", "per_process_memory_fraction", NULL};

void ab_caching_conf_defaults(ab_caching_conf_t *c) {
  memset(c, 0, sizeof *c);
  c->max_split_size = UINT64_MAX;
  c->large_segment_size = 20 * MiB;
  c->max_non_split_rounding = c->large_segment_size;
  c->memory_fraction = 1.0;
  c->round_large = 2 * MiB;
  c->register_threads = 1;
}

bool ab_caching_conf_alike_but_rounding(const ab_caching_conf_t *a, const ab_caching_conf_t *b) {
  return a->max_split_size == b->max_split_size && a->max_non_split_rounding == b->max_non_split_rounding &&
         a->large_segment_size == b->large_segment_size && a->gc_threshold == b->gc_threshold &&
         a->memory_fraction == b->memory_fraction && a->expandable == b->expandable &&
         a->capture_reuse == b->capture_reuse && a->round_large == b->round_large;
}

static bool is(const parse_t *p, size_t i, const char *s) { return i < p->n && strcmp(p->tok[i].s, s) == 0; }

static bool listed(const char *const *keys, const char *s) {
  for (; *keys; keys++)
    if (strcmp(*keys, s) == 0) return true;
  return false;
}

/* An error at token i (or at the end of the text when i is past the last token). */
static ab_status fail(const parse_t *p, size_t i, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static ab_status fail(const parse_t *p, size_t i, const char *fmt, ...) {
  char msg[AB_DIAG_BYTES];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  size_t pos = i < p->n ? p->tok[i].pos : strlen(p->text) + 1;
  /* No valid setting holds a ';', the separator people reach for first: whatever PyTorch
   * stumbled on, that is the fix. */
  size_t len = strlen(msg);
  const char *semicolon = !strchr(p->text, ';') ? ""
                          : len && msg[len - 1] == '.' ? " Separate the keys with ',', not ';'."
                                                       : ": separate the keys with ',', not ';'";
  return ab_diag_set(p->diag, AB_ERR_INVALID, "%s '%s': at position %zu: %s%s", p->what, p->text, pos, msg, semicolon);
}

/* Edits (insert, delete, replace one character) from a to b, for "did you mean". */
static size_t distance(const char *a, const char *b) {
  size_t nb = strlen(b), row[64];
  if (nb >= sizeof row / sizeof row[0]) return SIZE_MAX;
  for (size_t j = 0; j <= nb; j++) row[j] = j;
  for (size_t i = 1; a[i - 1]; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= nb; j++) {
      size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      diag = up;
      row[j] = best;
    }
  }
  return row[nb];
}

/* The known key closest to s, if a few edits away (a third of its length at most), else NULL. */
static const char *closest_key(const char *s) {
  const char *const *lists[] = {common_keys, cuda_keys};
  const char *best = NULL;
  size_t best_d = strlen(s) / 3 + 1;
  for (size_t l = 0; l < 2; l++)
    for (const char *const *k = lists[l]; *k; k++) {
      size_t d = distance(s, *k);
      if (d < best_d) best = *k, best_d = d;
    }
  return best;
}

/* ConfigTokenizer::checkIndex: PyTorch asserts "Index out of bounds in ConfigTokenizer". */
static ab_status need(const parse_t *p, size_t i, size_t key) {
  if (i < p->n) return AB_OK;
  return fail(p, i, "'%s' lacks its value (PyTorch: Index out of bounds in ConfigTokenizer)", p->tok[key].s);
}

/* std::stoull: a numeric prefix, an optional sign (negative values wrap). */
static ab_status to_size(const parse_t *p, size_t i, size_t key, uint64_t *out) {
  AB_TRY(need(p, i, key));
  const char *s = p->tok[i].s;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return fail(p, i, "%s: expected a whole number, got '%s' (PyTorch: stoull)", p->tok[key].s, s);
  if (errno == ERANGE) return fail(p, i, "%s: '%s' is out of range (PyTorch: stoull)", p->tok[key].s, s);
  *out = v;
  return AB_OK;
}

/* std::stod: a numeric prefix, as strtod reads it. */
static ab_status to_double(const parse_t *p, size_t i, size_t key, double *out) {
  AB_TRY(need(p, i, key));
  const char *s = p->tok[i].s;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s) return fail(p, i, "%s: expected a number, got '%s' (PyTorch: stod)", p->tok[key].s, s);
  if (errno == ERANGE) return fail(p, i, "%s: '%s' is out of range (PyTorch: stod)", p->tok[key].s, s);
  *out = v;
  return AB_OK;
}

static ab_status to_bool(const parse_t *p, size_t i, size_t key, bool *out) {
  AB_TRY(need(p, i, key));
  if (is(p, i, "True")) return *out = true, AB_OK;
  if (is(p, i, "False")) return *out = false, AB_OK;
  /* PyTorch's words, then the fix: the spelling it takes. */
  const char *t = p->tok[i].s, *fix = strcasecmp(t, "true") == 0    ? ": use True"
                                     : strcasecmp(t, "false") == 0 ? ": use False"
                                     : strchr(t, ';')              ? "" /* fail() says what to do */
                                                                   : ": use True or False";
  return fail(p, i, "Expected 'True' or 'False' at index %zu in ConfigTokenizer but got '%s'%s", i, t, fix);
}

/* Notes a key that was accepted without effect on device memory. */
static void ignore(parse_t *p, size_t key) {
  char *list = p->c->ignored;
  const char *name = p->tok[key].s;
  if (strstr(list, name)) return;
  size_t used = strlen(list);
  snprintf(list + used, sizeof p->c->ignored - used, "%s%s", used ? ", " : "", name);
}

/* A list opened at token open must close: PyTorch runs off its tokens first and says "Index
 * out of bounds", which sends the reader after a value rather than the ']'. */
static ab_status closes(const parse_t *p, size_t open, size_t key) {
  for (size_t j = open + 1; j < p->n; j++)
    if (is(p, j, "]")) return AB_OK;
  return fail(p, p->n, "'%s': the list opened at position %zu lacks its closing ']' (PyTorch: Index out of bounds in ConfigTokenizer)",
              p->tok[key].s, p->tok[open].pos);
}

/* ConfigTokenizer::skipKey: past the key, its ':' and its value (a whole [...] list). */
static ab_status skip_key(const parse_t *p, size_t *i) {
  size_t key = *i, j = *i + 1;
  AB_TRY(need(p, j, key)); /* the ':', unchecked */
  AB_TRY(need(p, ++j, key));
  if (is(p, j, "[")) {
    while (++j < p->n && !is(p, j, "]")) {
    }
    if (j >= p->n) return fail(p, j, "'%s': Expected closing bracket ']' in ConfigTokenizer but reached end of config", p->tok[key].s);
  }
  *i = j;
  return AB_OK;
}

/* A size in MiB no smaller than min_mb, as max_split_size_mb and friends take it. */
static ab_status size_mb(const parse_t *p, size_t *i, uint64_t min_mb, const char *too_small, uint64_t *out) {
  size_t key = *i;
  uint64_t v;
  AB_TRY(need(p, key + 1, key));
  AB_TRY(to_size(p, key + 2, key, &v));
  if (v < min_mb) return fail(p, key + 2, "%s%llu", too_small, (unsigned long long)min_mb);
  if (v > UINT64_MAX / MiB) v = UINT64_MAX / MiB;
  *out = v * MiB;
  *i = key + 2;
  return AB_OK;
}

static ab_status large_segment_size(parse_t *p, size_t *i) {
  size_t key = *i;
  uint64_t v;
  AB_TRY(need(p, key + 1, key));
  AB_TRY(to_size(p, key + 2, key, &v));
  if (v <= MIN_LARGE_ALLOC_MB)
    return fail(p, key + 2, "CachingAllocator option large_segment_size_mb must be > %d MB", MIN_LARGE_ALLOC_MB);
  if (v > UINT64_MAX / MiB) v = UINT64_MAX / MiB;
  p->c->large_segment_size = v * MiB;
  *i = key + 2;
  return AB_OK;
}

/* roundup_power2_divisions:N, or the list [MB:N,...,>:N]: the first key also fills every
 * lower interval, each later key sets its own, '>' fills those after the last key. */
static ab_status divisions(parse_t *p, size_t *i) {
  size_t key = *i, j = key + 1;
  uint64_t *div = p->c->divisions;
  AB_TRY(need(p, j, key));
  AB_TRY(need(p, ++j, key));
  if (!is(p, j, "[")) {
    uint64_t v;
    AB_TRY(to_size(p, j, key, &v));
    if (!ab_is_pow2(v)) return fail(p, j, "For roundups, the divisions has to be power of 2 ");
    for (size_t k = 0; k < AB_CACHING_DIVISION_INTERVALS; k++) div[k] = v;
    *i = j;
    return AB_OK;
  }
  AB_TRY(closes(p, j, key));
  size_t last = 0;
  bool first = true;
  while (++j < p->n && !is(p, j, "]")) {
    size_t at = j;
    uint64_t v;
    AB_TRY(need(p, ++j, key));
    AB_TRY(to_size(p, ++j, key, &v));
    if (v != 0 && !ab_is_pow2(v)) return fail(p, j, "For roundups, the divisions has to be power of 2 or 0 to disable roundup ");
    if (is(p, at, ">")) {
      for (size_t k = last + 1; k < AB_CACHING_DIVISION_INTERVALS; k++) div[k] = v;
    } else {
      uint64_t mb;
      AB_TRY(to_size(p, at, key, &mb));
      if (!ab_is_pow2(mb)) return fail(p, at, "For roundups, the intervals have to be power of 2 ");
      size_t k = ab_log2_floor(mb);
      if (k > AB_CACHING_DIVISION_INTERVALS - 1) k = AB_CACHING_DIVISION_INTERVALS - 1;
      if (first) {
        for (size_t m = 0; m < k; m++) div[m] = v;
        first = false;
      }
      div[k] = v;
      last = k;
    }
    AB_TRY(need(p, j + 1, key));
    if (!is(p, j + 1, "]")) j++; /* the ',', unchecked */
  }
  if (j >= p->n) return fail(p, j, "'%s': Expected closing bracket ']' in ConfigTokenizer but reached end of config", p->tok[key].s);
  *i = j;
  return AB_OK;
}

/* Pass 1: large_segment_size_mb, wherever the word appears. */
static ab_status pass_large_segment(parse_t *p) {
  for (size_t i = 0; i < p->n; i++)
    if (is(p, i, "large_segment_size_mb")) AB_TRY(large_segment_size(p, &i));
  return AB_OK;
}

/* Pass 2: the common keys. */
static ab_status pass_common(parse_t *p) {
  ab_caching_conf_t *c = p->c;
  for (size_t i = 0; i < p->n; i++) {
    size_t key = i;
    if (is(p, i, "max_split_size_mb")) {
      AB_TRY(size_mb(p, &i, c->large_segment_size / MiB, "CachingAllocator option max_split_size_mb too small, must be >= ",
                     &c->max_split_size));
    } else if (is(p, i, "max_non_split_rounding_mb")) {
      AB_TRY(size_mb(p, &i, c->large_segment_size / MiB,
                     "CachingAllocator option max_non_split_rounding_mb too small, must be >= ", &c->max_non_split_rounding));
    } else if (is(p, i, "garbage_collection_threshold")) {
      double v;
      AB_TRY(need(p, i + 1, key));
      AB_TRY(to_double(p, i + 2, key, &v));
      if (!(v > 0 && v < 1.0)) return fail(p, i + 2, "garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
      c->gc_threshold = v;
      i += 2;
    } else if (is(p, i, "roundup_power2_divisions")) {
      AB_TRY(divisions(p, &i));
    } else if (is(p, i, "expandable_segments")) {
      AB_TRY(need(p, i + 1, key));
      AB_TRY(to_bool(p, i + 2, key, &c->expandable));
      i += 2;
    } else if (is(p, i, "pinned_use_background_threads")) {
      bool v;
      AB_TRY(need(p, i + 1, key));
      AB_TRY(to_bool(p, i + 2, key, &v));
      ignore(p, key);
      i += 2;
    } else {
      if (!listed(common_keys, p->tok[i].s) && !listed(cuda_keys, p->tok[i].s))
      {
        const char *near = closest_key(p->tok[i].s);
        return fail(p, i, "Unrecognized key '%s' in Accelerator allocator config.%s%s%s", p->tok[i].s,
                    near ? " Did you mean '" : "", near ? near : "", near ? "'?" : "");
      }
      AB_TRY(skip_key(p, &i));
    }
    if (i + 1 < p->n) i++; /* the ',', unchecked */
  }
  return AB_OK;
}

/* Pass 3: the CUDA keys. */
static ab_status pass_cuda(parse_t *p) {
  for (size_t i = 0; i < p->n; i++) {
    size_t key = i;
    bool b;
    uint64_t v;
    if (is(p, i, "backend")) {
      AB_TRY(need(p, i + 1, key));
      AB_TRY(need(p, i + 2, key));
      if (is(p, i + 2, "cudaMallocAsync"))
        return fail(p, i + 2, "backend:cudaMallocAsync is PyTorch's other allocator, the stream-ordered one: run it as the async strategy (-s async)");
      if (!is(p, i + 2, "native")) return fail(p, i + 2, "Unknown allocator backend, options are native and cudaMallocAsync");
      i += 2;
    } else if (is(p, i, "graph_capture_record_stream_reuse")) {
      AB_TRY(need(p, i + 1, key));
      AB_TRY(to_bool(p, i + 2, key, &b));
      p->c->capture_reuse = b;
      i += 2;
    } else if (is(p, i, "release_lock_on_cudamalloc") || is(p, i, "release_lock_on_hipmalloc") ||
               is(p, i, "pinned_use_cuda_host_register") || is(p, i, "pinned_use_hip_host_register")) {
      AB_TRY(need(p, i + 1, key));
      AB_TRY(to_bool(p, i + 2, key, &b));
      if (strncmp(p->tok[key].s, "release_lock", 12) == 0) p->c->release_lock = b;
      else p->c->host_register = b;
      ignore(p, key);
      i += 2;
    } else if (is(p, i, "pinned_num_register_threads")) {
      AB_TRY(need(p, i + 1, key));
      AB_TRY(to_size(p, i + 2, key, &v));
      if (!ab_is_pow2(v)) return fail(p, i + 2, "Number of register threads has to be power of 2, got %llu", (unsigned long long)v);
      if (v > MAX_REGISTER_THREADS)
        return fail(p, i + 2, "Number of register threads should be less than or equal to %d, got %llu", MAX_REGISTER_THREADS,
                    (unsigned long long)v);
      p->c->register_threads = v;
      ignore(p, key);
      i += 2;
    } else if (is(p, i, "pinned_reserve_segment_size_mb")) {
      AB_TRY(need(p, i + 1, key));
      AB_TRY(to_size(p, i + 2, key, &v));
      if (v == 0) return fail(p, i + 2, "Pinned reserve segment size has to be greater than 0");
      ignore(p, key);
      i += 2;
    } else if (is(p, i, "per_process_memory_fraction")) {
      double f;
      AB_TRY(need(p, i + 1, key));
      AB_TRY(to_double(p, i + 2, key, &f));
      if (!(f >= 0.0 && f <= 1.0)) return fail(p, i + 2, "per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
      p->c->memory_fraction = f;
      i += 2;
    } else {
      /* A common key (pass 2 refused all others). */
      AB_TRY(skip_key(p, &i));
    }
    if (i + 1 < p->n) i++; /* the ',', unchecked */
  }
  return AB_OK;
}

/* ConfigTokenizer's split: separators are tokens, whitespace vanishes, the rest are words. */
static ab_status tokenize(parse_t *p) {
  size_t len = strlen(p->text);
  p->buf = malloc(2 * len + 2);
  p->tok = malloc((len + 1) * sizeof *p->tok);
  if (p->buf == NULL || p->tok == NULL) return ab_diag_set(p->diag, AB_ERR_INTERNAL, "out of host memory");
  char *w = p->buf;
  bool in_word = false;
  for (size_t k = 0; k < len; k++) {
    char ch = p->text[k];
    if (ch == ',' || ch == ':' || ch == '[' || ch == ']') {
      if (in_word) *w++ = '\0', in_word = false;
      p->tok[p->n++] = (tok_t){w, k + 1};
      *w++ = ch;
      *w++ = '\0';
    } else if (!isspace((unsigned char)ch)) {
      if (!in_word) p->tok[p->n++] = (tok_t){w, k + 1}, in_word = true;
      *w++ = ch;
    }
  }
  if (in_word) *w = '\0';
  return AB_OK;
}

ab_status ab_caching_conf_apply(ab_caching_conf_t *c, const char *what, const char *text, ab_diag_t *diag) {
  ab_caching_conf_t work = *c;
  parse_t p = {what, text ? text : "", NULL, NULL, 0, &work, diag};
  /* The settings every parse resets. */
  work.max_split_size = UINT64_MAX;
  memset(work.divisions, 0, sizeof work.divisions);
  work.gc_threshold = 0;
  ab_status st = tokenize(&p);
  if (st == AB_OK) st = pass_large_segment(&p);
  if (st == AB_OK) {
    work.max_non_split_rounding = work.large_segment_size;
    st = pass_common(&p);
  }
  if (st == AB_OK) st = pass_cuda(&p);
  free(p.buf);
  free(p.tok);
  if (st == AB_OK) *c = work;
  return st;
}
