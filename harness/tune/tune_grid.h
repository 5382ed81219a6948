/* tune_grid.h: the configurations `allocbench tune` tries, and how they are made.
 *
 * Note [Tuning grid]
 * The question is which PYTORCH_CUDA_ALLOC_CONF suits one job (field_2026.md §1). Only the
 * settings that change what the caching allocator holds from the device are tried
 * (caching_conf.h), each over the values that can matter for the stream, in two stages:
 *   1. one family at a time:
 *      - the defaults, and expandable_segments:True;
 *      - max_split_size_mb over 20, 32, 64, ..., 4096, each alone and with
 *        max_non_split_rounding_mb of the same size (that key acts only on requests of
 *        max_split_size or more, so never alone); a value no smaller than the largest segment
 *        the stream can make changes no decision and is left out;
 *      - roundup_power2_divisions:N for N = 2, 4, 8, 16, and in the list form
 *        [256:1,512:2,1024:4,>:8] (PyTorch's documented example: coarse below 256 MiB, finer
 *        above) and [64:0,>:4] (requests of 128 MiB and more only);
 *      - garbage_collection_threshold 0.6 and 0.8, only under a memory cap, since PyTorch runs
 *        it only then (pytorch#106660);
 *   2. the best of each family, by the objective, together where PyTorch takes them together:
 *      max_split with rounding, expandable segments with rounding, and under a cap the
 *      threshold with max_split and with expandable segments.
 * The recorded configuration is tried as well. A configuration whose settings equal one
 * already in the list (as caching_conf.h reads them) is not tried twice. The other strategies
 * (raw, pooled, async, and any named with -s, a pluggable:PATH library say) are tried once
 * each for reference: they are not PyTorch settings, so never the recommendation.
 */
#ifndef AB_TUNE_GRID_H
#define AB_TUNE_GRID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/status.h"

typedef enum ab_tune_family_e {
  AB_TUNE_DEFAULT,
  AB_TUNE_EXPANDABLE,
  AB_TUNE_SPLIT,    /* max_split_size_mb, alone or with max_non_split_rounding_mb */
  AB_TUNE_ROUNDUP,  /* roundup_power2_divisions */
  AB_TUNE_GC,       /* garbage_collection_threshold */
  AB_TUNE_COMBINED, /* stage 2 */
  AB_TUNE_RECORDED, /* the recorded configuration, when it is none of the above */
  AB_TUNE_REFERENCE, /* another strategy */
  AB_TUNE_FAMILIES
} ab_tune_family_t;

#define AB_TUNE_CONF_BYTES 256
#define AB_TUNE_STRATEGY_BYTES 1024 /* room for pluggable:PATH */

typedef struct ab_tune_candidate_s {
  char strategy[AB_TUNE_STRATEGY_BYTES]; /* a registry name */
  char conf[AB_TUNE_CONF_BYTES]; /* PYTORCH_CUDA_ALLOC_CONF for caching; "" for the defaults */
  ab_tune_family_t family;
  bool recorded;                /* its settings are the recorded configuration's */
} ab_tune_candidate_t;

typedef struct ab_tune_list_s {
  ab_tune_candidate_t *c; /* owned */
  size_t n, cap;
} ab_tune_list_t;

void ab_tune_list_init(ab_tune_list_t *l);
void ab_tune_list_free(ab_tune_list_t *l);

/* Adds a caching configuration unless one with the same settings is there already (then
 * that one is marked recorded when this one is). AB_ERR_INVALID when caching does not take
 * conf, with caching_conf.h's reason. */
ab_status ab_tune_list_add_conf(ab_tune_list_t *l, const char *conf, ab_tune_family_t family, bool recorded,
                                ab_diag_t *diag);

/* Stage 1 into l (empty): the families above, the recorded configuration (recorded: its
 * conf without a memory fraction; "" for the defaults), and the reference strategies.
 * largest_request is the stream's largest allocation in bytes; capped says whether the runs
 * have a memory cap. */
ab_status ab_tune_grid_first(ab_tune_list_t *l, const char *recorded, uint64_t largest_request, bool capped,
                             ab_diag_t *diag);

/* Adds another strategy for reference (tune -s), with its defaults, unless it is there
 * already. AB_ERR_INVALID for caching or one of its presets, whose settings the grid searches. */
ab_status ab_tune_list_add_reference(ab_tune_list_t *l, const char *strategy, ab_diag_t *diag);

/* Stage 2: appends the combinations of the best configuration of each family (best[f]: an
 * index into l, or SIZE_MAX where the family has none that ran to its end). */
ab_status ab_tune_grid_combine(ab_tune_list_t *l, const size_t best[AB_TUNE_FAMILIES], bool capped, ab_diag_t *diag);

/* conf without its per_process_memory_fraction item, into rest; the item itself, as written,
 * into fraction ("" when there is none). A memory fraction is the job's cap, not a setting to
 * tune: tune takes it as its --cap and gives it back in the line to paste. */
void ab_tune_split_fraction(const char *conf, char *rest, size_t rest_size, char *fraction, size_t fraction_size);

#endif
