/* registry.h: the strategies by name (registry.c), and creating one from its name, preset
 * and the user's conf. The CLI, the tests, the micro-benchmarks and the bench matrix all
 * go through it. */
#ifndef AB_REGISTRY_H
#define AB_REGISTRY_H

#include <stdbool.h>

#include "strategies/strategy.h"

typedef struct ab_strategy_entry_s {
  const char *name;           /* what -s takes */
  const ab_strategy_ops_t *ops;
  const char *preset;         /* conf applied before the user's -c; NULL for none */
  const char *summary;        /* one line for `allocbench list` */
  const char *conf_help;      /* the -c keys, one per line, for `allocbench list -v` */
  bool hidden;                /* for tests only: not listed, not in the bench matrix */
  const char *reference;      /* a reference, not a choice anyone deploys: what it stands for
                                 ("the floor: ..."); NULL for the strategies to choose from */
} ab_strategy_entry_t;

/* A family of strategies named NAME:ARGUMENT, one strategy per argument (pluggable:PATH). They
 * are not among the entries above, which anything can make by name alone; ab_strategy_find,
 * ab_strategy_lookup and ab_strategy_create take their names like any other. */
typedef struct ab_strategy_family_s {
  ab_strategy_entry_t entry; /* name: the part before the first colon; preset unused */
  const char *argument;      /* how the argument reads, for help ("PATH[:ALLOC_FN:FREE_FN]") */
  ab_status (*create)(const char *argument, ab_device_t *dev, const char *conf, ab_strategy_t **out,
                      ab_diag_t *diag);
} ab_strategy_family_t;

/* All entries, hidden ones included; *count receives their number. */
const ab_strategy_entry_t *ab_strategy_registry(size_t *count);
/* The families; *count receives their number. */
const ab_strategy_family_t *ab_strategy_families(size_t *count);
/* The entry called name (for NAME:ARGUMENT, its family's), or NULL. */
const ab_strategy_entry_t *ab_strategy_find(const char *name);
/* The same, with an error naming the known strategies when there is none. */
ab_status ab_strategy_lookup(const char *name, const ab_strategy_entry_t **out, ab_diag_t *diag);

/* Whether the strategy called name is blind to addresses (strategy.h): false for a name
 * that is not found, whose decisions may look at them. */
bool ab_strategy_address_blind(const char *name);

/* Whether the strategy called name is PyTorch's caching allocator (under some preset), its
 * conf a PYTORCH_CUDA_ALLOC_CONF: what an export may call PyTorch's settings. */
bool ab_strategy_is_pytorch(const char *name);

/* Creates the strategy called name with its preset and then conf. Unknown names and bad
 * confs are AB_ERR_INVALID with the reason in diag. */
ab_status ab_strategy_create(const char *name, ab_device_t *dev, const char *conf, ab_strategy_t **out,
                             ab_diag_t *diag);

#endif
