/* registry.c: every workload, one line each. */
#include "workloads/workload.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kernels/base/hostmem.h"
#include "kernels/base/units.h"

#include "workloads/cnn_dynamic.h"
#include "workloads/dynamic_shapes.h"
#include "workloads/fragmenter.h"
#include "workloads/mixed_precision.h"
#include "workloads/random.h"
#include "workloads/replay.h"
#include "workloads/serve.h"
#include "workloads/zero.h"

static const ab_workload_t *const registry[] = {
    &ab_workload_dynamic_shapes,
    &ab_workload_cnn_dynamic,
    &ab_workload_mixed_precision,
    &ab_workload_zero,
    &ab_workload_random,
    &ab_workload_fragmenter,
    &ab_workload_serve,
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

/* ---- the size of a stream before it is built
 * (Note [A workload's size before it is generated]) ------------------------------------------------------------------------------ */

/* A probe's stream may hold this much: at 1 and 2 of each scaling key, any workload holds far
 * less. */
#define PROBE_MAX_BYTES (256ULL << 20)
/* What a replay keeps per allocation id (engine.h's run state, and the validation of
 * ab_events_finish): well under this. */
#define RUN_BYTES_PER_ID 24

/* The workload's arguments and which of its scaling keys grow: those given above twice their
 * probe value. */
typedef struct scaling_s {
  const ab_workload_t *w;
  char what[80];       /* "-w NAME", for messages */
  ab_kvlist_t args;
  const char *keys[2]; /* the keys that grow */
  uint64_t probe[2];   /* their probe values */
  uint64_t at[2];      /* the values asked for */
  size_t n;
} scaling_t;

static ab_status find_scaling(const ab_workload_t *w, const char *args, scaling_t *sc, ab_diag_t *diag) {
  memset(sc, 0, sizeof *sc);
  sc->w = w;
  snprintf(sc->what, sizeof sc->what, "-w %s", w->name);
  AB_TRY(ab_kv_parse(sc->what, args, '=', &sc->args, diag));
  AB_TRY(ab_kv_unique(&sc->args, diag));
  for (const ab_scale_key_t *k = w->scale; k->key && sc->n < 2; k++) {
    uint64_t v = 0;
    ab_diag_t ignored = {""};
    ab_kv_t *item = ab_kv_get(&sc->args, k->key);
    /* A value that does not parse is the generator's to refuse. */
    if (item && ab_kv_get_u64(&sc->args, k->key, 0, UINT64_MAX, &v, &ignored) == AB_OK && v > 2 * k->probe) {
      sc->keys[sc->n] = k->key;
      sc->probe[sc->n] = k->probe;
      sc->at[sc->n++] = v;
    }
  }
  return AB_OK;
}

/* The arguments with each growing key set to `times` its probe value. */
static void probe_args(const scaling_t *sc, const uint64_t *times, char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < sc->args.n; i++) {
    const ab_kv_t *kv = &sc->args.items[i];
    bool grows = false;
    for (size_t k = 0; k < sc->n; k++)
      grows = grows || (strlen(sc->keys[k]) == kv->key_len && memcmp(sc->keys[k], kv->key, kv->key_len) == 0);
    if (!grows && used < size)
      used += (size_t)snprintf(out + used, size - used, "%s%.*s=%.*s", used ? "," : "", (int)kv->key_len, kv->key,
                               (int)kv->val_len, kv->val);
  }
  for (size_t k = 0; k < sc->n && used < size; k++)
    used += (size_t)snprintf(out + used, size - used, "%s%s=%llu", used ? "," : "", sc->keys[k],
                             (unsigned long long)(times[k] * sc->probe[k]));
}

typedef struct counts_s {
  double events, kernels, ids;
} counts_t;

static ab_status probe(const scaling_t *sc, const uint64_t *times, uint64_t seed, counts_t *out, ab_diag_t *diag) {
  char args[4096];
  probe_args(sc, times, args, sizeof args);
  ab_events_t es;
  ab_events_init(&es);
  es.max_bytes = PROBE_MAX_BYTES;
  ab_status st = sc->w->generate(args, seed, &es, diag);
  if (st == AB_OK && es.failed)
    st = ab_diag_set(diag, AB_ERR_INVALID, "-w %s:%s: more than %llu MiB of events at its smallest", sc->w->name, args,
                     (unsigned long long)(PROBE_MAX_BYTES >> 20));
  *out = (counts_t){(double)es.n, (double)es.nkernels, (double)es.nids};
  ab_events_free(&es);
  return st;
}

/* f(x) from f(p) and f(2p), never below f(p). */
static double extend_line(double f1, double f2, double p, double x) { return f1 + (f2 > f1 ? f2 - f1 : 0) * (x - p) / p; }

static counts_t extend_counts(counts_t c1, counts_t c2, double p, double x) {
  return (counts_t){extend_line(c1.events, c2.events, p, x), extend_line(c1.kernels, c2.kernels, p, x),
                    extend_line(c1.ids, c2.ids, p, x)};
}

/* A probe refused its arguments: the error names positions in the probe's text, so the
 * user's own are given to the generator, which refuses them where they stand, at once (a
 * stream that may hold nothing stops at its first event). A probe's other errors stand. */
static ab_status probe_refused(const scaling_t *sc, const char *args, uint64_t seed, ab_status st, ab_diag_t *diag) {
  ab_events_t es;
  ab_events_init(&es);
  es.max_bytes = 1;
  ab_diag_t own = {""};
  if (sc->w->generate(args, seed, &es, &own) == AB_ERR_INVALID) st = ab_diag_set(diag, AB_ERR_INVALID, "%s", own.msg);
  ab_events_free(&es);
  return st;
}

static ab_status estimate(const scaling_t *sc, uint64_t seed, ab_workload_size_t *out, ab_diag_t *diag) {
  counts_t c;
  if (sc->n == 0) {
    AB_TRY(probe(sc, NULL, seed, &c, diag)); /* nothing grows: the stream itself */
  } else if (sc->n == 1) {
    counts_t c1, c2;
    AB_TRY(probe(sc, (uint64_t[]){1}, seed, &c1, diag));
    AB_TRY(probe(sc, (uint64_t[]){2}, seed, &c2, diag));
    c = extend_counts(c1, c2, (double)sc->probe[0], (double)sc->at[0]);
  } else {
    /* Along the second key at the first key's 1 and 2, then along the first. */
    counts_t c11, c12, c21, c22;
    AB_TRY(probe(sc, (uint64_t[]){1, 1}, seed, &c11, diag));
    AB_TRY(probe(sc, (uint64_t[]){1, 2}, seed, &c12, diag));
    AB_TRY(probe(sc, (uint64_t[]){2, 1}, seed, &c21, diag));
    AB_TRY(probe(sc, (uint64_t[]){2, 2}, seed, &c22, diag));
    double py = (double)sc->probe[1], y = (double)sc->at[1];
    c = extend_counts(extend_counts(c11, c12, py, y), extend_counts(c21, c22, py, y), (double)sc->probe[0],
                      (double)sc->at[0]);
  }
  out->events = c.events;
  out->kernels = c.kernels;
  out->ids = c.ids;
  /* The arrays double as they grow, so they may hold twice what they use. */
  out->host_bytes = 2 * (c.events * (double)sizeof(ab_event_t) + c.kernels * (double)sizeof(ab_kernel_t)) +
                    c.ids * RUN_BYTES_PER_ID;
  return AB_OK;
}

static void scaling_keys_text(const scaling_t *sc, char *out, size_t size) {
  if (sc->n == 2)
    snprintf(out, size, "%s or %s", sc->keys[0], sc->keys[1]);
  else
    snprintf(out, size, "%s", sc->n ? sc->keys[0] : "its arguments");
}

/* Refuses a workload that will not fit (the Note). */
static ab_status check_size(const char *spec, const scaling_t *sc, const ab_workload_size_t *size, uint64_t host_bytes,
                            ab_diag_t *diag) {
  char keys[128], need[32], have[32];
  scaling_keys_text(sc, keys, sizeof keys);
  if (size->ids > (double)UINT32_MAX)
    return ab_diag_set(diag, AB_ERR_INVALID, "-w %s: about %.3g allocations, more than the 2^32 a stream can number: lower %s",
                       spec, size->ids, keys);
  if (size->host_bytes > (double)host_bytes) {
    uint64_t bytes = size->host_bytes >= 1.8e19 ? UINT64_MAX : (uint64_t)size->host_bytes;
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "-w %s: about %.3g events, %s of host memory with what a replay keeps, more than the %s "
                       "available: lower %s",
                       spec, size->events, ab_format_bytes(bytes, need, sizeof need),
                       ab_format_bytes(host_bytes, have, sizeof have), keys);
  }
  return AB_OK;
}

static const ab_workload_t *lookup(const char *spec, const char **args, ab_diag_t *diag) {
  const char *colon = strchr(spec, ':');
  size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
  char name[64];
  const ab_workload_t *w = NULL;
  if (len < sizeof name) {
    memcpy(name, spec, len);
    name[len] = '\0';
    w = ab_workload_find(name);
  }
  *args = colon ? colon + 1 : "";
  if (w) return w;
  char names[512] = "";
  for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++) {
    size_t used = strlen(names);
    snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", registry[i]->name);
  }
  /* A recorded trace given by its path alone: the workload that reads it is replay. */
  if (access(spec, R_OK) == 0)
    ab_diag_set(diag, AB_ERR_INVALID, "-w '%s': unknown workload; '%s' is a file: a recorded trace is -w replay:%s", spec,
                spec, spec);
  else
    ab_diag_set(diag, AB_ERR_INVALID, "-w '%s': unknown workload '%.*s' (expected one of %s)", spec, (int)len, spec, names);
  return NULL;
}

/* The Note's check, before generating: arguments given twice, and the estimate. */
static ab_status check_fits(const char *spec, const ab_workload_t *w, const char *args, uint64_t seed, uint64_t host_bytes,
                            ab_diag_t *diag) {
  scaling_t sc;
  ab_workload_size_t size;
  AB_TRY(find_scaling(w, args, &sc, diag));
  /* With no key past its probes the stream is as small as they are: the limit on the stream
   * as it is built suffices. */
  if (sc.n == 0) return AB_OK;
  ab_status st = estimate(&sc, seed, &size, diag);
  if (st != AB_OK) return st == AB_ERR_INVALID ? probe_refused(&sc, args, seed, st, diag) : st;
  return check_size(spec, &sc, &size, host_bytes, diag);
}

ab_status ab_workload_estimate(const char *spec, uint64_t seed, ab_workload_size_t *out, ab_diag_t *diag) {
  memset(out, 0, sizeof *out);
  const char *args;
  const ab_workload_t *w = lookup(spec, &args, diag);
  if (w == NULL) return AB_ERR_INVALID;
  if (w->scale == NULL) return ab_diag_set(diag, AB_ERR_INVALID, "-w %s: a trace is read, not estimated", spec);
  scaling_t sc;
  AB_TRY(find_scaling(w, args, &sc, diag));
  ab_status st = estimate(&sc, seed, out, diag);
  return st == AB_ERR_INVALID ? probe_refused(&sc, args, seed, st, diag) : st;
}

ab_status ab_workload_build_with(const char *spec, uint64_t seed, const ab_build_opts_t *opts, ab_events_t *out,
                                 ab_diag_t *diag) {
  static const ab_build_opts_t defaults = {.stop = NULL};
  if (opts == NULL) opts = &defaults;
  ab_events_init(out);
  const char *args;
  const ab_workload_t *w = lookup(spec, &args, diag);
  if (w == NULL) return AB_ERR_INVALID;
  uint64_t host_bytes = opts->host_bytes ? opts->host_bytes : ab_host_memory_available();
  if (w->scale) AB_TRY(check_fits(spec, w, args, seed, host_bytes, diag));
  out->stop = opts->stop;
  out->max_bytes = host_bytes == UINT64_MAX ? 0 : host_bytes;
  ab_status st = w->read ? w->read(args, opts, out, diag) : w->generate(args, seed, out, diag);
  if (st == AB_OK) st = ab_events_finish(out, diag);
  if (st != AB_OK) {
    ab_events_free(out);
    return st;
  }
  snprintf(out->source, sizeof out->source, "%s", spec);
  return AB_OK;
}

ab_status ab_workload_build(const char *spec, uint64_t seed, ab_events_t *out, ab_diag_t *diag) {
  return ab_workload_build_with(spec, seed, NULL, out, diag);
}
