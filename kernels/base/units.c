#include "kernels/base/units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

__extension__ typedef unsigned __int128 u128;

static const struct {
  const char *name;
  uint64_t bytes;
} units[] = {
    {"B", 1},
    {"KB", 1000ULL},
    {"MB", 1000ULL * 1000},
    {"GB", 1000ULL * 1000 * 1000},
    {"TB", 1000ULL * 1000 * 1000 * 1000},
    {"KiB", 1ULL << 10},
    {"MiB", 1ULL << 20},
    {"GiB", 1ULL << 30},
    {"TiB", 1ULL << 40},
    /* A bare letter is the binary unit, as memory sizes go in most tools ("--mem=20G"); the
     * command line says which it took (ab_size_bare_unit). */
    {"K", 1ULL << 10},
    {"M", 1ULL << 20},
    {"G", 1ULL << 30},
    {"T", 1ULL << 40},
};

const char *ab_size_bare_unit(const char *text) {
  static const char *const binary[] = {"KiB", "MiB", "GiB", "TiB"};
  size_t n = strlen(text);
  if (n < 2 || !isdigit((unsigned char)text[n - 2])) return NULL;
  const char *at = strchr("KMGT", toupper((unsigned char)text[n - 1]));
  return at && *at ? binary[at - "KMGT"] : NULL;
}

bool ab_size_is_decimal(const char *text) {
  size_t n = strlen(text), k = n;
  while (k > 0 && isalpha((unsigned char)text[k - 1])) k--;
  for (size_t i = 1; i < sizeof units / sizeof units[0]; i++)
    if (strcasecmp(text + k, units[i].name) == 0) return units[i].bytes % 1000 == 0;
  return false;
}

/* Parses a size; on error says why and where (1-based) without naming the input. */
static bool size_core(const char *text, uint64_t *out, size_t *pos, char *why, size_t whylen) {
  const char *p = text;
  *pos = 1;
  if (*p == '\0') return snprintf(why, whylen, "empty size (expected a number of bytes such as 512, 2MiB or 40GB)"), false;
  if (*p == '-' || *p == '+')
    return snprintf(why, whylen, "a size cannot have a sign (expected a number of bytes such as 512, 2MiB or 40GB)"), false;
  if (!isdigit((unsigned char)*p))
    return snprintf(why, whylen, "expected a number of bytes such as 512, 2MiB or 40GB, got '%s'", text), false;
  u128 whole = 0;
  for (; isdigit((unsigned char)*p); p++) {
    whole = whole * 10 + (u128)(*p - '0');
    if (whole > UINT64_MAX) goto too_big;
  }
  u128 frac = 0, frac_scale = 1;
  const char *point = *p == '.' ? p : NULL;
  if (point) {
    p++;
    if (!isdigit((unsigned char)*p)) {
      *pos = (size_t)(p - text) + 1;
      return snprintf(why, whylen, "expected a digit after the decimal point"), false;
    }
    for (; isdigit((unsigned char)*p); p++) {
      if (frac_scale < (u128)1000000000000000000ULL) { /* 18 digits are plenty */
        frac = frac * 10 + (u128)(*p - '0');
        frac_scale *= 10;
      }
    }
  }
  /* 20e9: bytes in a number's scientific form, whole, with no unit after it. */
  if (*p == 'e' || *p == 'E') {
    const char *e = p++;
    if (*p == '+') p++;
    if (!isdigit((unsigned char)*p)) {
      *pos = (size_t)(p - text) + 1;
      return snprintf(why, whylen, "expected the exponent's digits after '%c' (as in 20e9)", *e), false;
    }
    unsigned exp = 0;
    for (; isdigit((unsigned char)*p); p++)
      if ((exp = exp * 10 + (unsigned)(*p - '0')) > 20) goto too_big;
    if (*p != '\0') {
      *pos = (size_t)(p - text) + 1;
      return snprintf(why, whylen, "nothing may follow the exponent (20e9 is bytes; got '%s')", p), false;
    }
    u128 scale = 1;
    for (unsigned i = 0; i < exp; i++) scale *= 10;
    if (whole > UINT64_MAX / scale) goto too_big;
    /* The fraction's digits times the scale must be whole bytes. */
    if (frac * scale % frac_scale != 0) {
      *pos = (size_t)(point - text) + 1;
      return snprintf(why, whylen, "%s is not a whole number of bytes", text), false;
    }
    u128 bytes = whole * scale + frac * scale / frac_scale;
    if (bytes > UINT64_MAX) goto too_big;
    *out = (uint64_t)bytes;
    return true;
  }
  uint64_t unit = 1;
  if (*p != '\0') {
    size_t i, n = sizeof units / sizeof units[0];
    for (i = 0; i < n; i++)
      if (strcasecmp(p, units[i].name) == 0) break;
    if (i == n) {
      *pos = (size_t)(p - text) + 1;
      return snprintf(why, whylen, "unknown unit '%s' (expected B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, or K, M, G, T for the binary ones)", p), false;
    }
    unit = units[i].bytes;
  }
  /* "1.5" is no number of bytes: it is a unit short ("1.5GiB"), and rounding would hide that. */
  if (point && unit == 1) {
    *pos = (size_t)(point - text) + 1;
    return snprintf(why, whylen, "a fractional size needs a unit, such as %.*sGiB or %.*sGB (bytes are whole)",
                    (int)(p - text), text, (int)(p - text), text), false;
  }
  u128 bytes = whole * unit + (frac * unit + frac_scale / 2) / frac_scale;
  if (bytes > UINT64_MAX) goto too_big;
  *out = (uint64_t)bytes;
  return true;
too_big:
  return snprintf(why, whylen, "size too large (at most %llu bytes)", (unsigned long long)UINT64_MAX), false;
}

ab_status ab_parse_size(const char *what, const char *text, uint64_t *out, ab_diag_t *diag) {
  char why[256];
  size_t pos;
  if (text == NULL) text = "";
  if (size_core(text, out, &pos, why, sizeof why)) return AB_OK;
  return ab_diag_set(diag, AB_ERR_INVALID, "%s '%s': at position %zu: %s", what, text, pos, why);
}

/* Parses a whole number no greater than max; on error says why and where. */
static bool u64_core(const char *text, uint64_t max, uint64_t *out, size_t *pos, char *why, size_t whylen) {
  *pos = 1;
  if (*text == '\0') return snprintf(why, whylen, "empty value (expected a whole number)"), false;
  uint64_t v = 0;
  for (const char *p = text; *p; p++) {
    if (!isdigit((unsigned char)*p)) {
      *pos = (size_t)(p - text) + 1;
      return snprintf(why, whylen, "expected a whole number from 0 to %llu, got '%s'", (unsigned long long)max, text), false;
    }
    unsigned d = (unsigned)(*p - '0');
    if (d > max || v > (max - d) / 10)
      return snprintf(why, whylen, "too large (at most %llu)", (unsigned long long)max), false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

ab_status ab_parse_u64(const char *what, const char *text, uint64_t max, uint64_t *out,
                       ab_diag_t *diag) {
  char why[256];
  size_t pos;
  if (text == NULL) text = "";
  if (u64_core(text, max, out, &pos, why, sizeof why)) return AB_OK;
  return ab_diag_set(diag, AB_ERR_INVALID, "%s '%s': at position %zu: %s", what, text, pos, why);
}

/* bytes in a binary unit with the given decimals. */
static char *format_bytes_at(uint64_t bytes, int decimals, char *buf, size_t size) {
  static const char *names[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) {
    snprintf(buf, size, "%llu B", (unsigned long long)bytes);
    return buf;
  }
  double v = (double)bytes / 1024.0;
  int i = 0;
  while (v >= 1024.0 && i < 5) {
    v /= 1024.0;
    i++;
  }
  snprintf(buf, size, "%.*f %s", decimals, v, names[i]);
  return buf;
}

char *ab_format_bytes(uint64_t bytes, char *buf, size_t size) { return format_bytes_at(bytes, 2, buf, size); }

static int by_count(const void *pa, const void *pb) {
  uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
  return (a > b) - (a < b);
}

/* Whether count reads, under `decimals`, like another count of sorted[0..n) (sorted
 * ascending). The formatting never decreases with the count within a unit and differs across
 * units, so a count can read like another only where it reads like its neighbours. */
static bool reads_like_another(uint64_t count, const uint64_t *sorted, size_t n, int decimals) {
  size_t lo = 0, hi = n; /* the first element not below count */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < count) lo = mid + 1;
    else hi = mid;
  }
  char self[AB_BYTES_TEXT], other[AB_BYTES_TEXT];
  format_bytes_at(count, decimals, self, sizeof self);
  size_t above = lo;
  while (above < n && sorted[above] == count) above++;
  if (lo > 0 && strcmp(format_bytes_at(sorted[lo - 1], decimals, other, sizeof other), self) == 0) return true;
  return above < n && strcmp(format_bytes_at(sorted[above], decimals, other, sizeof other), self) == 0;
}

void ab_format_bytes_apart(const uint64_t *v, size_t n, char (*out)[AB_BYTES_TEXT]) {
  uint64_t *sorted = malloc((n ? n : 1) * sizeof *sorted);
  if (sorted == NULL) { /* no room to compare: each exactly, which always reads apart */
    for (size_t i = 0; i < n; i++) snprintf(out[i], AB_BYTES_TEXT, "%llu B", (unsigned long long)v[i]);
    return;
  }
  if (n) memcpy(sorted, v, n * sizeof *sorted);
  qsort(sorted, n, sizeof *sorted, by_count);
  int decimals = 2;
  for (; decimals <= 4; decimals++) {
    size_t i = 0;
    while (i < n && !reads_like_another(sorted[i], sorted, n, decimals)) i++;
    if (i == n) break;
  }
  bool exact = decimals > 4;
  if (exact) decimals = 2;
  for (size_t i = 0; i < n; i++) {
    format_bytes_at(v[i], decimals, out[i], AB_BYTES_TEXT);
    if (exact && v[i] >= 1024 && reads_like_another(v[i], sorted, n, decimals)) {
      size_t len = strlen(out[i]);
      snprintf(out[i] + len, AB_BYTES_TEXT - len, " (%llu B)", (unsigned long long)v[i]);
    }
  }
  free(sorted);
}

char *ab_format_bytes_torch(uint64_t bytes, char *buf, size_t size) {
  if (bytes <= 1024)
    snprintf(buf, size, "%llu bytes", (unsigned long long)bytes);
  else if (bytes <= AB_MiB)
    snprintf(buf, size, "%.2f KiB", (double)bytes / 1024.0);
  else if (bytes <= AB_GiB)
    snprintf(buf, size, "%.2f MiB", (double)bytes / (double)AB_MiB);
  else
    snprintf(buf, size, "%.2f GiB", (double)bytes / (double)AB_GiB);
  return buf;
}

/* ---- option lists ---------------------------------------------------------------------- */

static bool is_key_char(char c) {
  return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.';
}

static void trim(const char **s, size_t *len) {
  while (*len > 0 && isspace((unsigned char)**s)) (*s)++, (*len)--;
  while (*len > 0 && isspace((unsigned char)(*s)[*len - 1])) (*len)--;
}

ab_status ab_kv_parse(const char *what, const char *text, char sep, ab_kvlist_t *out,
                      ab_diag_t *diag) {
  memset(out, 0, sizeof *out);
  out->what = what;
  out->text = text ? text : "";
  const char *p = out->text;
  while (*p) {
    /* one item: up to the next comma outside brackets */
    const char *start = p;
    int depth = 0;
    for (; *p && !(*p == ',' && depth == 0); p++) {
      if (*p == '[') depth++;
      if (*p == ']' && --depth < 0)
        return ab_diag_set(diag, AB_ERR_INVALID, "%s '%s': at position %zu: ']' without '['", what,
                           out->text, (size_t)(p - out->text) + 1);
    }
    if (depth != 0)
      return ab_diag_set(diag, AB_ERR_INVALID, "%s '%s': at position %zu: '[' without ']'", what,
                         out->text, (size_t)(start - out->text) + 1);
    const char *item = start;
    size_t item_len = (size_t)(p - start);
    if (*p == ',') p++;
    trim(&item, &item_len);
    if (item_len == 0) {
      if (*p == '\0' && start != out->text) break; /* a trailing comma is harmless */
      return ab_diag_set(diag, AB_ERR_INVALID, "%s '%s': at position %zu: empty item (expected key%cvalue)",
                         what, out->text, (size_t)(start - out->text) + 1, sep);
    }
    const char *s = memchr(item, sep, item_len);
    if (s == NULL)
      return ab_diag_set(diag, AB_ERR_INVALID, "%s '%s': at position %zu: expected key%cvalue, got '%.*s'",
                         what, out->text, (size_t)(item - out->text) + 1, sep, (int)item_len, item);
    if (out->n == AB_KV_MAX)
      return ab_diag_set(diag, AB_ERR_INVALID, "%s '%s': more than %d items", what, out->text, AB_KV_MAX);
    ab_kv_t *kv = &out->items[out->n++];
    kv->key = item;
    kv->key_len = (size_t)(s - item);
    kv->val = s + 1;
    kv->val_len = item_len - kv->key_len - 1;
    trim(&kv->key, &kv->key_len);
    trim(&kv->val, &kv->val_len);
    kv->pos = (size_t)(kv->key - out->text) + 1;
    if (kv->key_len == 0)
      return ab_diag_set(diag, AB_ERR_INVALID, "%s '%s': at position %zu: empty key", what, out->text, kv->pos);
    for (size_t i = 0; i < kv->key_len; i++)
      if (!is_key_char(kv->key[i]))
        return ab_diag_set(diag, AB_ERR_INVALID, "%s '%s': at position %zu: unexpected character '%c' in key",
                           what, out->text, kv->pos + i, kv->key[i]);
  }
  return AB_OK;
}

ab_status ab_kv_unique(const ab_kvlist_t *list, ab_diag_t *diag) {
  for (size_t i = 0; i < list->n; i++)
    for (size_t j = 0; j < i; j++) {
      const ab_kv_t *a = &list->items[j], *b = &list->items[i];
      if (a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0)
        return ab_kv_errorf(list, b, diag, "'%.*s' given again (first at position %zu)", (int)b->key_len, b->key, a->pos);
    }
  return AB_OK;
}

ab_kv_t *ab_kv_get(ab_kvlist_t *list, const char *key) {
  ab_kv_t *found = NULL;
  size_t len = strlen(key);
  for (size_t i = 0; i < list->n; i++) {
    ab_kv_t *kv = &list->items[i];
    if (kv->key_len == len && memcmp(kv->key, key, len) == 0) {
      kv->used = true;
      found = kv;
    }
  }
  return found;
}

ab_status ab_kv_errorf(const ab_kvlist_t *list, const ab_kv_t *item, ab_diag_t *diag,
                       const char *fmt, ...) {
  char msg[AB_DIAG_BYTES];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ab_diag_set(diag, AB_ERR_INVALID, "%s '%s': at position %zu: %s", list->what, list->text,
                     item ? item->pos : (size_t)1, msg);
}

ab_status ab_kv_value(const ab_kvlist_t *list, const ab_kv_t *item, char *buf, size_t size,
                      ab_diag_t *diag) {
  if (item->val_len + 1 > size)
    return ab_kv_errorf(list, item, diag, "value of '%.*s' is too long (at most %zu characters)",
                        (int)item->key_len, item->key, size - 1);
  memcpy(buf, item->val, item->val_len);
  buf[item->val_len] = '\0';
  return AB_OK;
}

/* Copies a value for the parsers above, which want terminated strings. */
static ab_status value_of(const ab_kvlist_t *list, const ab_kv_t *kv, char *buf, size_t size,
                          ab_diag_t *diag) {
  AB_TRY(ab_kv_value(list, kv, buf, size, diag));
  if (buf[0] == '\0')
    return ab_kv_errorf(list, kv, diag, "'%.*s' has no value", (int)kv->key_len, kv->key);
  return AB_OK;
}

/* An error at a position inside an item's value. */
static ab_status value_error(const ab_kvlist_t *list, const ab_kv_t *kv, size_t pos, ab_diag_t *diag, const char *why) {
  return ab_diag_set(diag, AB_ERR_INVALID, "%s '%s': at position %zu: %.*s: %s", list->what, list->text,
                     (size_t)(kv->val - list->text) + pos, (int)kv->key_len, kv->key, why);
}

ab_status ab_kv_get_size(ab_kvlist_t *list, const char *key, uint64_t *out, ab_diag_t *diag) {
  ab_kv_t *kv = ab_kv_get(list, key);
  if (kv == NULL) return AB_OK;
  char buf[64], why[256];
  size_t pos;
  AB_TRY(value_of(list, kv, buf, sizeof buf, diag));
  if (!size_core(buf, out, &pos, why, sizeof why)) return value_error(list, kv, pos, diag, why);
  return AB_OK;
}

ab_status ab_kv_get_u64(ab_kvlist_t *list, const char *key, uint64_t min, uint64_t max,
                        uint64_t *out, ab_diag_t *diag) {
  ab_kv_t *kv = ab_kv_get(list, key);
  if (kv == NULL) return AB_OK;
  char buf[64], why[256];
  size_t pos;
  uint64_t v;
  AB_TRY(value_of(list, kv, buf, sizeof buf, diag));
  if (!u64_core(buf, UINT64_MAX, &v, &pos, why, sizeof why)) return value_error(list, kv, pos, diag, why);
  if (v < min || v > max)
    return ab_kv_errorf(list, kv, diag, "%s must be from %llu to %llu, got %llu", key,
                        (unsigned long long)min, (unsigned long long)max, (unsigned long long)v);
  *out = v;
  return AB_OK;
}

ab_status ab_kv_get_double(ab_kvlist_t *list, const char *key, double min, double max,
                           double *out, ab_diag_t *diag) {
  ab_kv_t *kv = ab_kv_get(list, key);
  if (kv == NULL) return AB_OK;
  char buf[64];
  AB_TRY(value_of(list, kv, buf, sizeof buf, diag));
  char *end;
  errno = 0;
  double v = strtod(buf, &end);
  if (*end != '\0' || errno != 0 || !isfinite(v) || isspace((unsigned char)buf[0]))
    return ab_kv_errorf(list, kv, diag, "%s: expected a number, got '%s'", key, buf);
  if (v < min || v > max)
    return ab_kv_errorf(list, kv, diag, "%s must be from %g to %g, got %g", key, min, max, v);
  *out = v;
  return AB_OK;
}

ab_status ab_kv_get_bool(ab_kvlist_t *list, const char *key, bool *out, ab_diag_t *diag) {
  ab_kv_t *kv = ab_kv_get(list, key);
  if (kv == NULL) return AB_OK;
  char buf[16];
  if (kv->val_len < sizeof buf) {
    AB_TRY(ab_kv_value(list, kv, buf, sizeof buf, diag));
    if (strcasecmp(buf, "true") == 0 || strcmp(buf, "1") == 0) return *out = true, AB_OK;
    if (strcasecmp(buf, "false") == 0 || strcmp(buf, "0") == 0) return *out = false, AB_OK;
  }
  return ab_kv_errorf(list, kv, diag, "%s: expected true or false, got '%.*s'", key,
                      (int)kv->val_len, kv->val);
}

ab_status ab_kv_get_choice(ab_kvlist_t *list, const char *key, const char *const *choices,
                           int *out, ab_diag_t *diag) {
  ab_kv_t *kv = ab_kv_get(list, key);
  if (kv == NULL) return AB_OK;
  char known[256] = "";
  for (int i = 0; choices[i]; i++) {
    if (strlen(choices[i]) == kv->val_len && memcmp(choices[i], kv->val, kv->val_len) == 0)
      return *out = i, AB_OK;
    size_t used = strlen(known);
    snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", choices[i]);
  }
  return ab_kv_errorf(list, kv, diag, "%s: expected one of %s, got '%.*s'", key, known,
                      (int)kv->val_len, kv->val);
}

ab_status ab_kv_finish(const ab_kvlist_t *list, const char *known, ab_diag_t *diag) {
  for (size_t i = 0; i < list->n; i++) {
    const ab_kv_t *kv = &list->items[i];
    if (!kv->used)
      return ab_kv_errorf(list, kv, diag, "unknown key '%.*s' (known: %s)", (int)kv->key_len,
                          kv->key, known && *known ? known : "none");
  }
  return AB_OK;
}
