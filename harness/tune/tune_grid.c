#include "harness/tune/tune_grid.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/units.h"
#include "strategies/registry.h"
#include "strategies/protocol/caching_conf.h"

#define SMALL_REQUEST_BYTES (1ULL << 20)      /* kSmallSize: larger requests use the large pool */
#define MIN_LARGE_ALLOC_BYTES (10ULL << 20)   /* kMinLargeAlloc: smaller ones get a 20 MiB segment */
#define LARGE_SEGMENT_BYTES (20ULL << 20)     /* kLargeBuffer */
#define ROUND_LARGE_BYTES (2ULL << 20)        /* kRoundLarge */

static const unsigned split_mb[] = {20, 32, 64, 128, 256, 512, 1024, 2048, 4096};
static const char *const roundups[] = {"2", "4", "8", "16", "[256:1,512:2,1024:4,>:8]", "[64:0,>:4]"};
static const char *const gc_thresholds[] = {"0.6", "0.8"};
static const char *const references[] = {"raw", "pooled", "async"};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

void ab_tune_list_init(ab_tune_list_t *l) { memset(l, 0, sizeof *l); }

void ab_tune_list_free(ab_tune_list_t *l) {
  free(l->c);
  ab_tune_list_init(l);
}

static ab_status push(ab_tune_list_t *l, const char *strategy, const char *conf, ab_tune_family_t family, bool recorded,
                      ab_diag_t *diag) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 32;
    ab_tune_candidate_t *c = realloc(l->c, cap * sizeof *c);
    if (c == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
    l->c = c;
    l->cap = cap;
  }
  ab_tune_candidate_t *c = &l->c[l->n];
  memset(c, 0, sizeof *c);
  if (snprintf(c->strategy, sizeof c->strategy, "%s", strategy) >= (int)sizeof c->strategy)
    return ab_diag_set(diag, AB_ERR_INVALID, "-s '%.40s...': a strategy name longer than %d characters", strategy,
                       AB_TUNE_STRATEGY_BYTES - 1);
  if (snprintf(c->conf, sizeof c->conf, "%s", conf) >= (int)sizeof c->conf)
    return ab_diag_set(diag, AB_ERR_INVALID, "'%s': a configuration longer than %d characters", conf, AB_TUNE_CONF_BYTES - 1);
  c->family = family;
  c->recorded = recorded;
  l->n++;
  return AB_OK;
}

/* The settings as the caching strategy acts on them: max_non_split_rounding acts only on
 * requests of max_split_size or more, so without a max_split_size it is no setting at all. */
static ab_status settings_of(const char *conf, ab_caching_conf_t *c, ab_diag_t *diag) {
  ab_caching_conf_defaults(c);
  AB_TRY(ab_caching_conf_apply(c, "-c", conf, diag));
  if (c->max_split_size == UINT64_MAX) c->max_non_split_rounding = c->large_segment_size;
  return AB_OK;
}

static bool same_settings(const ab_caching_conf_t *a, const ab_caching_conf_t *b) {
  return a->max_split_size == b->max_split_size && a->max_non_split_rounding == b->max_non_split_rounding &&
         a->large_segment_size == b->large_segment_size && a->gc_threshold == b->gc_threshold &&
         a->expandable == b->expandable && memcmp(a->divisions, b->divisions, sizeof a->divisions) == 0;
}

ab_status ab_tune_list_add_conf(ab_tune_list_t *l, const char *conf, ab_tune_family_t family, bool recorded,
                                ab_diag_t *diag) {
  ab_caching_conf_t mine, theirs;
  AB_TRY(settings_of(conf, &mine, diag));
  for (size_t i = 0; i < l->n; i++) {
    if (l->c[i].family == AB_TUNE_REFERENCE || settings_of(l->c[i].conf, &theirs, NULL) != AB_OK) continue;
    if (same_settings(&mine, &theirs)) {
      l->c[i].recorded |= recorded;
      return AB_OK;
    }
  }
  return push(l, "caching", conf, family, recorded, diag);
}

/* The largest segment the caching allocator can make for the stream (its requests unrounded):
 * a max_split_size above it changes no decision. 0 when every request fits the small pool. */
static uint64_t largest_segment(uint64_t largest_request) {
  uint64_t r = (largest_request + 511) / 512 * 512;
  if (r <= SMALL_REQUEST_BYTES) return 0;
  if (r < MIN_LARGE_ALLOC_BYTES) return LARGE_SEGMENT_BYTES;
  return (r + ROUND_LARGE_BYTES - 1) / ROUND_LARGE_BYTES * ROUND_LARGE_BYTES;
}

ab_status ab_tune_grid_first(ab_tune_list_t *l, const char *recorded, uint64_t largest_request, bool capped,
                             ab_diag_t *diag) {
  char conf[AB_TUNE_CONF_BYTES];
  AB_TRY(ab_tune_list_add_conf(l, "", AB_TUNE_DEFAULT, false, diag));
  AB_TRY(ab_tune_list_add_conf(l, "expandable_segments:True", AB_TUNE_EXPANDABLE, false, diag));
  uint64_t top = largest_segment(largest_request);
  for (size_t i = 0; i < COUNT(split_mb); i++) {
    if ((uint64_t)split_mb[i] * AB_MiB > top) break;
    snprintf(conf, sizeof conf, "max_split_size_mb:%u", split_mb[i]);
    AB_TRY(ab_tune_list_add_conf(l, conf, AB_TUNE_SPLIT, false, diag));
    snprintf(conf, sizeof conf, "max_split_size_mb:%u,max_non_split_rounding_mb:%u", split_mb[i], split_mb[i]);
    AB_TRY(ab_tune_list_add_conf(l, conf, AB_TUNE_SPLIT, false, diag));
  }
  for (size_t i = 0; i < COUNT(roundups); i++) {
    snprintf(conf, sizeof conf, "roundup_power2_divisions:%s", roundups[i]);
    AB_TRY(ab_tune_list_add_conf(l, conf, AB_TUNE_ROUNDUP, false, diag));
  }
  for (size_t i = 0; capped && i < COUNT(gc_thresholds); i++) {
    snprintf(conf, sizeof conf, "garbage_collection_threshold:%s", gc_thresholds[i]);
    AB_TRY(ab_tune_list_add_conf(l, conf, AB_TUNE_GC, false, diag));
  }
  AB_TRY(ab_tune_list_add_conf(l, recorded, AB_TUNE_RECORDED, true, diag));
  for (size_t i = 0; i < COUNT(references); i++)
    if (ab_strategy_find(references[i])) AB_TRY(push(l, references[i], "", AB_TUNE_REFERENCE, false, diag));
  return AB_OK;
}

ab_status ab_tune_list_add_reference(ab_tune_list_t *l, const char *strategy, ab_diag_t *diag) {
  const ab_strategy_entry_t *e;
  AB_TRY(ab_strategy_lookup(strategy, &e, diag));
  const ab_strategy_entry_t *caching = ab_strategy_find("caching");
  if (caching != NULL && e->ops == caching->ops)
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "-s %s: tune searches the caching allocator's settings itself; -s names other strategies to "
                       "compare with them",
                       strategy);
  for (size_t i = 0; i < l->n; i++)
    if (l->c[i].family == AB_TUNE_REFERENCE && strcmp(l->c[i].strategy, strategy) == 0) return AB_OK;
  return push(l, strategy, "", AB_TUNE_REFERENCE, false, diag);
}

/* Adds a's conf and b's together, when both families have a best. */
static ab_status pair(ab_tune_list_t *l, size_t a, size_t b, ab_diag_t *diag) {
  if (a == SIZE_MAX || b == SIZE_MAX) return AB_OK;
  char conf[2 * AB_TUNE_CONF_BYTES + 1];
  const char *x = l->c[a].conf, *y = l->c[b].conf;
  snprintf(conf, sizeof conf, "%s%s%s", x, *x && *y ? "," : "", y);
  return ab_tune_list_add_conf(l, conf, AB_TUNE_COMBINED, false, diag);
}

ab_status ab_tune_grid_combine(ab_tune_list_t *l, const size_t best[AB_TUNE_FAMILIES], bool capped, ab_diag_t *diag) {
  AB_TRY(pair(l, best[AB_TUNE_SPLIT], best[AB_TUNE_ROUNDUP], diag));
  AB_TRY(pair(l, best[AB_TUNE_EXPANDABLE], best[AB_TUNE_ROUNDUP], diag));
  if (capped) {
    AB_TRY(pair(l, best[AB_TUNE_GC], best[AB_TUNE_SPLIT], diag));
    AB_TRY(pair(l, best[AB_TUNE_GC], best[AB_TUNE_EXPANDABLE], diag));
  }
  return AB_OK;
}

/* Copies s[0, len) without the blanks around it, appended to out after sep when out has
 * something already. */
static void append_trimmed(char *out, size_t size, const char *s, size_t len, const char *sep) {
  while (len && isspace((unsigned char)*s)) s++, len--;
  while (len && isspace((unsigned char)s[len - 1])) len--;
  size_t used = strlen(out);
  snprintf(out + used, size - used, "%s%.*s", used ? sep : "", (int)len, s);
}

void ab_tune_split_fraction(const char *conf, char *rest, size_t rest_size, char *fraction, size_t fraction_size) {
  rest[0] = fraction[0] = '\0';
  static const char key[] = "per_process_memory_fraction";
  /* Items end at commas outside brackets (the list form of roundup_power2_divisions). */
  for (const char *p = conf; *p;) {
    const char *q = p;
    int depth = 0;
    for (; *q && (*q != ',' || depth > 0); q++) depth += *q == '[' ? 1 : *q == ']' ? -1 : 0;
    const char *k = p;
    while (k < q && isspace((unsigned char)*k)) k++;
    size_t klen = strcspn(k, ": \t,");
    if (klen == sizeof key - 1 && strncmp(k, key, klen) == 0)
      append_trimmed(fraction, fraction_size, p, (size_t)(q - p), ",");
    else if (q > p)
      append_trimmed(rest, rest_size, p, (size_t)(q - p), ",");
    p = *q ? q + 1 : q;
  }
}
