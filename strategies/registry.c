/* registry.c: every strategy, one line each (registry.h). */
#include "strategies/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strategies/async.h"
#include "strategies/caching/caching.h"
#include "strategies/overlap.h"
#include "strategies/planned/oracle.h"
#include "strategies/planned/planned.h"
#include "strategies/pluggable/pluggable.h"
#include "strategies/pooled.h"
#include "strategies/raw.h"
#include "strategies/stitching.h"

#define CACHING_CONF_HELP                                                                          \
  "  PYTORCH_CUDA_ALLOC_CONF, as PyTorch 2.11 reads it:\n"                                          \
  "  max_split_size_mb:N            blocks this big are never split (>= 20; default unlimited)\n"  \
  "  max_non_split_rounding_mb:N    an oversize block serves requests up to N MiB smaller (20)\n" \
  "  roundup_power2_divisions:N|[MB:N,...,>:N]  round requests to N steps per power of two\n"     \
  "  garbage_collection_threshold:F free old cached segments above F x the cap (0 < F < 1)\n"     \
  "  expandable_segments:True|False grow one segment per stream by mapping pages\n"              \
  "  large_segment_size_mb:N        segment of 1-10 MiB requests, expandable page (> 10; 20)\n"   \
  "  per_process_memory_fraction:F  cap at F x the device total (--budget overrides it)\n"        \
  "  release_lock_on_cudamalloc, graph_capture_record_stream_reuse, pinned_*: accepted, no effect\n"

#define PLANNED_CONF_HELP                                                                          \
  "  profile_steps:N      training steps profiled and planned (default 2)\n"                         \
  "  profile_share:F      without steps, the share of the allocations profiled (default 0.25)\n"     \
  "  misses:caching|arena what the plan does not match goes to a caching allocator (STAlloc's\n"     \
  "                       rule, planned's default) or best fit into the region, which grows (arena)\n"

static const ab_strategy_entry_t registry[] = {
    {"raw", &ab_raw_ops, NULL, "one cudaMalloc per request, one cudaFree per free: the baseline",
     "  (no options)\n", false, "the baseline: one cudaMalloc per request, nothing cached"},
    {"caching", &ab_caching_ops, NULL, "PyTorch's CUDACachingAllocator, decision for decision", CACHING_CONF_HELP, false, NULL},
    {"split-limited", &ab_caching_ops, "max_split_size_mb:128", "caching with max_split_size_mb:128 (unless -c says otherwise)",
     CACHING_CONF_HELP, false, NULL},
    {"expandable", &ab_caching_ops, "expandable_segments:True", "caching with expandable_segments:True: segments grow by mapping pages",
     CACHING_CONF_HELP, false, NULL},
    {"pooled", &ab_pooled_ops, NULL, "size classes served from preallocated chunks, never split",
     "  classes_per_doubling:N  classes between two powers of two (power of two, default 4)\n"
     "  min_class:SIZE          smallest class (multiple of 512, default 512)\n"
     "  chunk:SIZE              bytes fetched from the device per refill (default 2MiB;\n"
     "                          at most 4194304 blocks of min_class)\n"
     "  initial_pool:SIZE       bytes allocated once at creation and carved first (default 0)\n",
     false, NULL},
    {"async", &ab_async_ops, NULL, "cudaMallocAsync on a memory pool (the stream-ordered allocator)",
     "  release_threshold:SIZE|max  bytes the pool keeps across synchronisations (default max)\n", false, NULL},
    {"stitching", &ab_stitching_ops, NULL,
     "GMLake: 2 MiB physical chunks, free ones stitched into one virtual range for a large request",
     "  frag_limit:SIZE     stitch only for requests of at least this (GMLake's fragLimit, default 512MiB)\n"
     "  reuse_limit:X       a free stitched block serves requests down to 1/X of its size (reuseLimit, 10)\n"
     "  defrag_level:0|1|2  stitch before new memory (0), once it failed (1), or only after the release\n"
     "                      of cached blocks failed too (2) (defragLevel, 0)\n",
     false, NULL},
    {"planned", &ab_planned_ops, NULL,
     "STAlloc: the profiled steps planned at fixed offsets of one region, the rest sent to caching",
     PLANNED_CONF_HELP, false, NULL},
    {"arena", &ab_planned_ops, "misses:arena",
     "planned's plan, but misses best fit in the plan's region, which grows (not STAlloc)", PLANNED_CONF_HELP, false,
     "planned's plan with its misses in its region: no allocator one can deploy"},
    {"oracle", &ab_oracle_ops, NULL,
     "offline placement: the whole run known in advance, placed in one region by heuristics (not the limit)",
     "  (no options)\n", false, "a bound: the whole run placed offline, known in advance"},
    {"overlap", &ab_overlap_ops, NULL, "broken on purpose: hands out live memory again, for tests of --verify",
     "  every:N  every Nth request may share a live allocation's memory (default 4)\n", true, NULL},
};

static const ab_strategy_family_t families[] = {
    {{"pluggable", &ab_pluggable_ops, NULL,
      "a library PyTorch's CUDAPluggableAllocator loads, its CUDA calls on the run's device",
      "  PATH: the library; ALLOC_FN, FREE_FN: its functions (default my_malloc, my_free)\n"
      "  init:FN             void FN(int device_count), called once it is loaded\n"
      "  reset:FN            void FN(void), PyTorch's empty_cache\n"
      "  memory_fraction:FN  void FN(double fraction, int device), given a cap (--cap)\n"
      "  record_stream:FN    void FN(void *ptr, cudaStream_t stream), for blocks freed while another\n"
      "                      stream uses them (they are then freed at once, as PyTorch does)\n",
      false, NULL},
     "PATH[:ALLOC_FN:FREE_FN]", ab_pluggable_create},
};

const ab_strategy_entry_t *ab_strategy_registry(size_t *count) {
  *count = sizeof registry / sizeof registry[0];
  return registry;
}

const ab_strategy_family_t *ab_strategy_families(size_t *count) {
  *count = sizeof families / sizeof families[0];
  return families;
}

/* The family of a name NAME:ARGUMENT, with *argument pointing into name; NULL for others. */
static const ab_strategy_family_t *family_of(const char *name, const char **argument) {
  const char *colon = strchr(name, ':');
  if (colon == NULL) return NULL;
  for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
    size_t n = strlen(families[i].entry.name);
    if ((size_t)(colon - name) == n && strncmp(name, families[i].entry.name, n) == 0) {
      *argument = colon + 1;
      return &families[i];
    }
  }
  return NULL;
}

const ab_strategy_entry_t *ab_strategy_find(const char *name) {
  size_t n;
  const ab_strategy_entry_t *all = ab_strategy_registry(&n);
  for (size_t i = 0; i < n; i++)
    if (strcmp(all[i].name, name) == 0) return &all[i];
  const char *argument;
  const ab_strategy_family_t *f = family_of(name, &argument);
  return f ? &f->entry : NULL;
}

bool ab_strategy_address_blind(const char *name) {
  const ab_strategy_entry_t *e = ab_strategy_find(name);
  return e != NULL && e->ops->address_blind;
}

bool ab_strategy_is_pytorch(const char *name) {
  const ab_strategy_entry_t *e = ab_strategy_find(name);
  return e != NULL && e->ops == &ab_caching_ops;
}

ab_status ab_strategy_lookup(const char *name, const ab_strategy_entry_t **out, ab_diag_t *diag) {
  if ((*out = ab_strategy_find(name)) != NULL) return AB_OK;
  char names[512] = "";
  size_t n;
  const ab_strategy_entry_t *all = ab_strategy_registry(&n);
  for (size_t i = 0; i < n; i++) {
    if (all[i].hidden) continue;
    size_t used = strlen(names);
    snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", all[i].name);
  }
  for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
    size_t used = strlen(names);
    snprintf(names + used, sizeof names - used, ", %s:%s", families[i].entry.name, families[i].argument);
  }
  /* Several strategies where one is taken: the commands that take a list are named. */
  if (strchr(name, ','))
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "-s '%s': one strategy here; compare, oom and matrix take several, separated by ','", name);
  return ab_diag_set(diag, AB_ERR_INVALID, "-s '%s': unknown strategy (expected one of %s)", name, names);
}

/* A refusal of a preset followed by the user's conf quotes what the user typed, at the
 * position there: the preset is ours. The parsers word a refusal "WHAT 'TEXT': at position
 * P: WHY" (units.h); one that points into the preset keeps the whole text. */
static void quote_users_conf(ab_diag_t *diag, const char *full, size_t preset_len, const char *conf) {
  char quoted[AB_DIAG_BYTES];
  snprintf(quoted, sizeof quoted, "'%s': at position ", full);
  char *at = strstr(diag->msg, quoted);
  if (at == NULL) return;
  char *end;
  unsigned long long pos = strtoull(at + strlen(quoted), &end, 10);
  if (pos <= preset_len + 1) return;
  char msg[AB_DIAG_BYTES];
  snprintf(msg, sizeof msg, "%.*s'%s': at position %llu%s", (int)(at - diag->msg), diag->msg, conf,
           pos - preset_len - 1, end);
  snprintf(diag->msg, sizeof diag->msg, "%s", msg);
}

ab_status ab_strategy_create(const char *name, ab_device_t *dev, const char *conf, ab_strategy_t **out,
                             ab_diag_t *diag) {
  *out = NULL;
  const ab_strategy_entry_t *e;
  AB_TRY(ab_strategy_lookup(name, &e, diag));
  if (conf == NULL) conf = "";
  const char *argument;
  const ab_strategy_family_t *f = family_of(name, &argument);
  if (f) return f->create(argument, dev, conf, out, diag);
  if (e->preset == NULL || *e->preset == '\0') return e->ops->create(dev, conf, out, diag);
  /* The preset comes first so that the user's keys override it. */
  size_t len = strlen(e->preset) + 1 + strlen(conf) + 1;
  char *full = malloc(len);
  if (full == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  snprintf(full, len, "%s%s%s", e->preset, *conf ? "," : "", conf);
  ab_status st = e->ops->create(dev, full, out, diag);
  if (st == AB_ERR_INVALID && *conf && diag) quote_users_conf(diag, full, strlen(e->preset), conf);
  free(full);
  return st;
}
