/* launch.c: the launcher's variables and the waits' bounds (launch.h). */
#include "harness/ranks/launch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/units.h"

/* A whole number from min to max in variable name; left alone when it is not set and not
 * required. */
static ab_status get_uint(const char *(*get)(const char *, void *), void *ctx, const char *name, uint64_t min,
                          uint64_t max, bool required, uint64_t *out, ab_diag_t *diag) {
  const char *v = get(name, ctx);
  if (v == NULL || v[0] == '\0') {
    if (!required) return AB_OK;
    return ab_diag_set(diag, AB_ERR_INVALID, "--ranks env: %s is not set (expected a whole number from %llu to %llu)",
                       name, (unsigned long long)min, (unsigned long long)max);
  }
  if (ab_parse_u64(name, v, max, out, diag) != AB_OK || *out < min)
    return ab_diag_set(diag, AB_ERR_INVALID, "--ranks env: %s='%s': expected a whole number from %llu to %llu", name, v,
                       (unsigned long long)min, (unsigned long long)max);
  return AB_OK;
}

ab_status ab_parse_seconds(const char *name, const char *text, double *out, ab_diag_t *diag) {
  char *end = NULL;
  errno = 0;
  double s = strtod(text, &end);
  if (errno || end == text || *end || !(s > 0 && s <= 86400))
    return ab_diag_set(diag, AB_ERR_INVALID, "%s='%s': expected seconds, more than 0 and at most 86400", name, text);
  *out = s;
  return AB_OK;
}

/* Seconds in variable name, or dflt when it is not set. */
static ab_status get_seconds(const char *(*get)(const char *, void *), void *ctx, const char *name, double dflt,
                             double *out, ab_diag_t *diag) {
  const char *v = get(name, ctx);
  *out = dflt;
  return v && v[0] ? ab_parse_seconds(name, v, out, diag) : AB_OK;
}

ab_status ab_waits_parse(const char *(*get)(const char *name, void *ctx), void *ctx, ab_waits_t *out, ab_diag_t *diag) {
  memset(out, 0, sizeof *out);
  AB_TRY(get_seconds(get, ctx, "AB_RENDEZVOUS_TIMEOUT", AB_RENDEZVOUS_TIMEOUT_S, &out->meet_s, diag));
  AB_TRY(get_seconds(get, ctx, "AB_RESULTS_TIMEOUT", AB_RESULTS_TIMEOUT_S, &out->results_s, diag));
  return get_seconds(get, ctx, "AB_COLLECTIVE_TIMEOUT", AB_COLLECTIVE_TIMEOUT_S, &out->collective_s, diag);
}

static bool set(const char *(*get)(const char *, void *), void *ctx, const char *name) {
  const char *v = get(name, ctx);
  return v && v[0];
}

/* The keys' folder: the run and its attempt, each cut to what a key needs. */
static void store_prefix(const char *(*get)(const char *, void *), void *ctx, ab_launch_t *out) {
  const char *run = get("TORCHELASTIC_RUN_ID", ctx), *attempt = get("TORCHELASTIC_RESTART_COUNT", ctx);
  snprintf(out->prefix, sizeof out->prefix, "/allocbench/%.64s/%.16s/", run && run[0] ? run : "none",
           attempt && attempt[0] ? attempt : "0");
}

/* torchrun's, or by hand: the five variables, checked. */
static ab_status parse_store(const char *(*get)(const char *, void *), void *ctx, ab_launch_t *out, ab_diag_t *diag) {
  const char *agent = get("TORCHELASTIC_USE_AGENT_STORE", ctx);
  if (set(get, ctx, "TORCHELASTIC_RUN_ID") && agent && agent[0] && strcmp(agent, "True") != 0)
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "--ranks env: torchrun shares no store with its workers here (TORCHELASTIC_USE_AGENT_STORE=%s): "
                       "nothing serves them at MASTER_ADDR:MASTER_PORT; start torchrun with --master-addr and "
                       "--master-port (its static rendezvous), or launch with mpirun or srun",
                       agent);
  uint64_t rank = 0, world = 0, local = 0, port = 0;
  AB_TRY(get_uint(get, ctx, "WORLD_SIZE", 1, 1 << 16, true, &world, diag));
  AB_TRY(get_uint(get, ctx, "RANK", 0, world - 1, true, &rank, diag));
  local = rank;
  AB_TRY(get_uint(get, ctx, "LOCAL_RANK", 0, 1023, false, &local, diag));
  uint64_t local_world = 1;
  AB_TRY(get_uint(get, ctx, "LOCAL_WORLD_SIZE", 1, 1024, false, &local_world, diag));
  const char *addr = get("MASTER_ADDR", ctx);
  if (addr == NULL || addr[0] == '\0')
    return ab_diag_set(diag, AB_ERR_INVALID, "--ranks env: MASTER_ADDR is not set (expected the store's host)");
  if (strlen(addr) >= sizeof out->addr)
    return ab_diag_set(diag, AB_ERR_INVALID, "--ranks env: MASTER_ADDR is longer than %zu characters", sizeof out->addr - 1);
  AB_TRY(get_uint(get, ctx, "MASTER_PORT", 1, 65535, true, &port, diag));
  out->rank = (unsigned)rank;
  out->world = (unsigned)world;
  out->local_rank = (unsigned)local;
  out->local_world = (unsigned)local_world;
  snprintf(out->addr, sizeof out->addr, "%s", addr);
  snprintf(out->port, sizeof out->port, "%llu", (unsigned long long)port);
  store_prefix(get, ctx, out);
  return AB_OK;
}

ab_status ab_launch_parse(const char *(*get)(const char *name, void *ctx), void *ctx, ab_launch_t *out,
                          ab_diag_t *diag) {
  memset(out, 0, sizeof *out);
  /* torchrun's first, since `srun torchrun` sets Slurm's too (Note [Which launcher]). */
  static const char *const mpi[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"};
  /* The ranks the launcher says it started, where only the launcher sets the count: Slurm's
   * SLURM_NTASKS is set in a batch script too, where one process runs alone. */
  static const char *const mpi_world[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL, NULL};
  static const char *const by_hand[] = {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};
  if (set(get, ctx, "TORCHELASTIC_RUN_ID")) {
    out->kind = AB_LAUNCH_STORE;
    snprintf(out->by, sizeof out->by, "TORCHELASTIC_RUN_ID");
    return parse_store(get, ctx, out, diag);
  }
  for (size_t i = 0; i < sizeof mpi / sizeof mpi[0]; i++)
    if (set(get, ctx, mpi[i])) {
      out->kind = AB_LAUNCH_MPI;
      snprintf(out->by, sizeof out->by, "%s", mpi[i]);
      /* A count that does not read is not allocbench's to judge: MPI's own world stands. */
      uint64_t n = 0;
      const char *v = mpi_world[i] ? get(mpi_world[i], ctx) : NULL;
      if (v && ab_parse_u64(mpi_world[i], v, UINT32_MAX, &n, NULL) == AB_OK && n > 0) {
        out->announced = (unsigned)n;
        snprintf(out->announced_by, sizeof out->announced_by, "%s", mpi_world[i]);
      }
      return AB_OK;
    }
  for (size_t i = 0; i < sizeof by_hand / sizeof by_hand[0]; i++)
    if (set(get, ctx, by_hand[i])) {
      out->kind = AB_LAUNCH_STORE;
      snprintf(out->by, sizeof out->by, "%s", by_hand[i]);
      return parse_store(get, ctx, out, diag);
    }
  return AB_OK;
}

static const char *from_env(const char *name, void *ctx) {
  (void)ctx;
  return getenv(name);
}

ab_status ab_launch_from_env(ab_launch_t *out, ab_diag_t *diag) { return ab_launch_parse(from_env, NULL, out, diag); }

ab_status ab_waits_from_env(ab_waits_t *out, ab_diag_t *diag) { return ab_waits_parse(from_env, NULL, out, diag); }
