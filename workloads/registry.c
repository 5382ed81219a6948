/* registry.c: every workload, one line each. */
#include "workload.h"

#include <stdio.h>
#include <string.h>

#include "cnn_dynamic.h"
#include "dynamic_shapes.h"
#include "fragmenter.h"
#include "mixed_precision.h"
#include "random.h"
#include "replay.h"
#include "zero.h"

static const ab_workload_t *const registry[] = {
    &ab_workload_dynamic_shapes,
    &ab_workload_cnn_dynamic,
    &ab_workload_mixed_precision,
    &ab_workload_zero,
    &ab_workload_random,
    &ab_workload_fragmenter,
    &ab_workload_replay,
};

const ab_workload_t *const *ab_workload_registry(size_t *count) {
  *count = sizeof registry / sizeof registry[0];
  return registry;
}

const ab_workload_t *ab_workload_find(const char *name) {
  for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
    if (strcmp(registry[i]->name, name) == 0) return registry[i];
  return NULL;
}

ab_status ab_workload_build(const char *spec, uint64_t seed, ab_events_t *out, ab_diag_t *diag) {
  ab_events_init(out);
  const char *colon = strchr(spec, ':');
  size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
  char name[64];
  const ab_workload_t *w = NULL;
  if (len < sizeof name) {
    memcpy(name, spec, len);
    name[len] = '\0';
    w = ab_workload_find(name);
  }
  if (w == NULL) {
    char names[512] = "";
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++) {
      size_t used = strlen(names);
      snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", registry[i]->name);
    }
    return ab_diag_set(diag, AB_ERR_INVALID, "-w '%s': unknown workload '%.*s' (expected one of %s)", spec, (int)len, spec,
                       names);
  }
  ab_status st = w->generate(colon ? colon + 1 : "", seed, out, diag);
  if (st == AB_OK) st = ab_events_finish(out, diag);
  if (st != AB_OK) {
    ab_events_free(out);
    return st;
  }
  snprintf(out->source, sizeof out->source, "%s", spec);
  return AB_OK;
}
