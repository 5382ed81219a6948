/* units.h: byte sizes and "key:value,key:value" option lists, parsed strictly.
 *
 * Sizes are written as a number and an optional unit: 512, 2MiB, 40GB, 1.5GiB, 20G, or in
 * scientific form, bytes: 20e9. Decimal units (KB, MB, GB, TB) are powers of 1000, binary
 * ones (KiB, MiB, GiB, TiB) powers of 1024, and a bare letter (K, M, G, T) is the binary
 * unit; units are case-insensitive, B is bytes. A fractional size needs a unit above B (or an
 * exponent that makes it whole) and is rounded to the nearest byte. Signs and anything after
 * the unit or the exponent are refused.
 *
 * Option lists are what `-c` (PYTORCH_CUDA_ALLOC_CONF's syntax: key:value) and workload
 * arguments (key=value) are made of. Items are separated by commas; a value may hold a
 * bracketed list with commas inside ([64:8,>:1]); blanks around keys and values are ignored.
 * Each item remembers its position in the text so that errors can point at it.
 *
 * Every error names the input (the `what` given by the caller: "--budget", "-c", ...), the
 * text, the 1-based position and what was expected, and returns AB_ERR_INVALID.
 */
#ifndef AB_UNITS_H
#define AB_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/status.h"

#define AB_KiB ((uint64_t)1 << 10)
#define AB_MiB ((uint64_t)1 << 20)
#define AB_GiB ((uint64_t)1 << 30)

/* Whether v is a power of two (0 is not). */
static inline bool ab_is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

/* The exponent of the largest power of two at most v; v > 0. */
static inline unsigned ab_log2_floor(uint64_t v) { return 63u - (unsigned)__builtin_clzll(v); }

/* Parses a size. `what` names the input in the error message. */
ab_status ab_parse_size(const char *what, const char *text, uint64_t *out, ab_diag_t *diag);

/* The binary unit a size's bare letter stands for ("GiB" for "20G"), or NULL when it has no
 * bare letter: the command line says it back, since GB would be decimal. */
const char *ab_size_bare_unit(const char *text);

/* Whether a size as ab_parse_size reads it has a decimal unit (KB, MB, GB, TB), which is
 * 2.4% to 10% less than the binary one of the same digits (40GB = 37.25 GiB). */
bool ab_size_is_decimal(const char *text);

/* Parses a whole non-negative decimal number no greater than max. */
ab_status ab_parse_u64(const char *what, const char *text, uint64_t max, uint64_t *out,
                       ab_diag_t *diag);

/* Formats bytes with a binary unit and two decimals ("1.50 GiB", "512 B"). Returns buf. */
char *ab_format_bytes(uint64_t bytes, char *buf, size_t size);

/* The room a figure of ab_format_bytes_apart takes, its terminator included. */
#define AB_BYTES_TEXT 48

/* Formats the n byte counts v that one sentence or table sets side by side, out[i] for v[i]:
 * as ab_format_bytes does, with the fewest decimals (2 to 4) under which no two counts that
 * differ read the same; where even 4 do not keep them apart, with 2 decimals and each count
 * that reads like a different one followed by its exact bytes: "89.81 MiB (94177280 B)"
 * beside "89.81 MiB (94177279 B)". Equal counts read the same. */
void ab_format_bytes_apart(const uint64_t *v, size_t n, char (*out)[AB_BYTES_TEXT]);

/* Formats bytes the way PyTorch's OOM message does (format_size in
 * CUDACachingAllocator.cpp): "N bytes" up to 1024, then KiB, MiB, GiB with two decimals,
 * each bound inclusive. Returns buf. */
char *ab_format_bytes_torch(uint64_t bytes, char *buf, size_t size);

#define AB_KV_MAX 32

typedef struct ab_kv_s {
  const char *key; /* points into the list's text; not terminated */
  size_t key_len;
  const char *val; /* points into the list's text; not terminated; may be empty */
  size_t val_len;
  size_t pos;      /* 1-based position of the key in the text */
  bool used;       /* set by the getters, checked by ab_kv_finish */
} ab_kv_t;

typedef struct ab_kvlist_s {
  const char *what; /* the input's name, for messages; not owned */
  const char *text; /* the parsed text; not owned, must outlive the list */
  ab_kv_t items[AB_KV_MAX];
  size_t n;
} ab_kvlist_t;

/* Splits text ("" or NULL gives an empty list) into items whose key and value are separated
 * by sep (':' or '='). Refuses empty keys, a missing separator, unbalanced brackets and
 * more than AB_KV_MAX items. */
ab_status ab_kv_parse(const char *what, const char *text, char sep, ab_kvlist_t *out,
                      ab_diag_t *diag);

/* Finds the last item with this key (a later item overrides an earlier one, as in
 * PYTORCH_CUDA_ALLOC_CONF), marks every item with the key used, and returns it or NULL. */
ab_kv_t *ab_kv_get(ab_kvlist_t *list, const char *key);

/* Typed getters: if the key is present, parse its value into *out, else leave *out (the
 * default) alone. Ranges are inclusive. */
ab_status ab_kv_get_size(ab_kvlist_t *list, const char *key, uint64_t *out, ab_diag_t *diag);
ab_status ab_kv_get_u64(ab_kvlist_t *list, const char *key, uint64_t min, uint64_t max,
                        uint64_t *out, ab_diag_t *diag);
ab_status ab_kv_get_double(ab_kvlist_t *list, const char *key, double min, double max,
                           double *out, ab_diag_t *diag);
/* Accepts true/false in any case, and 1/0. */
ab_status ab_kv_get_bool(ab_kvlist_t *list, const char *key, bool *out, ab_diag_t *diag);
/* Accepts one of the NULL-terminated choices; *out is its index. */
ab_status ab_kv_get_choice(ab_kvlist_t *list, const char *key, const char *const *choices,
                           int *out, ab_diag_t *diag);

/* Copies an item's value into buf as a terminated string; refuses one that does not fit. */
ab_status ab_kv_value(const ab_kvlist_t *list, const ab_kv_t *item, char *buf, size_t size,
                      ab_diag_t *diag);

/* Reports an error on an item with its position: "WHAT 'TEXT': at position P: MESSAGE". */
ab_status ab_kv_errorf(const ab_kvlist_t *list, const ab_kv_t *item, ab_diag_t *diag,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Refuses a key given twice, naming both positions: for lists where a repeat can only be a
 * mistake (a workload's arguments; a strategy's -c lets a later key win over its preset). */
ab_status ab_kv_unique(const ab_kvlist_t *list, ab_diag_t *diag);

/* Fails on the first item no getter asked for, listing the known keys. */
ab_status ab_kv_finish(const ab_kvlist_t *list, const char *known, ab_diag_t *diag);

#endif
