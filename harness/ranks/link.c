/* link.c: what the ranks of a launch do over their link, whatever carries it (link.h): meet,
 * gather, broadcast. */
#include "harness/ranks/link.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/clock.h"
#include "harness/ranks/group.h"

#define MAGIC 0x4c4e4b41u /* "ALNK" */
#define VERSION 3u        /* 3: over the launcher's engine */

typedef struct hello_s {
  uint32_t magic, version, rank, world;
  uint64_t digest;
} hello_t;

typedef struct welcome_s {
  uint32_t ok;
  unsigned char id[AB_COMM_ID_BYTES];
  char message[AB_DIAG_BYTES];
} welcome_t;

/* Note [A world MPI agrees with]
 * An MPI library speaks only to its own launcher: an allocbench built with MPICH and started by
 * OpenMPI's mpirun is given a world of one by MPI_Init, as a process started alone is, and
 * each of the launched processes would run the whole job as rank 0 of 1 and write its
 * results over the others'. mpirun says how many it started (OpenMPI's OMPI_COMM_WORLD_SIZE,
 * the PMI_SIZE of MPICH's and Intel's hydra), so a world that MPI sizes otherwise is refused,
 * with what each said. Slurm's task count is not taken as such a word: a batch script has it
 * too, where allocbench runs alone as it should. */
static ab_status open_mpi(const ab_launch_t *l, const ab_waits_t *w, ab_link_t **out, ab_diag_t *diag) {
  AB_TRY(ab_link_open_mpi(w, out, diag));
  if (l->announced == 0 || (*out)->world == l->announced) return AB_OK;
  unsigned world = (*out)->world;
  (*out)->ops->close(*out, true);
  *out = NULL;
  return ab_diag_set(diag, AB_ERR_INVALID,
                     "--ranks env: %s=%u, but MPI gives this process a world of %u: this allocbench's MPI is not "
                     "the one of the mpirun that started it (build it against that MPI, or start it with the "
                     "mpirun of its own)",
                     l->announced_by, l->announced, world);
}

ab_status ab_link_open(const ab_launch_t *l, const ab_waits_t *w, ab_link_t **out, ab_diag_t *diag) {
  if (l->kind == AB_LAUNCH_MPI) return open_mpi(l, w, out, diag);
  if (l->kind == AB_LAUNCH_STORE) return ab_link_open_store(l, w, out, diag);
  return ab_diag_set(diag, AB_ERR_INVALID, "not started by a launcher");
}

static int stop_signal(const ab_link_t *l) { return l->waits.stop ? (int)*l->waits.stop : 0; }

/* Why a wait of this rank for `whom` (to `doing`) ended, into diag. */
static ab_status gave_up(ab_link_t *l, ab_wait_t w, const char *whom, const char *doing, double waited,
                         const char *bound, ab_diag_t *diag) {
  l->gave_up = true;
  /* A stop signal that arrives while the engine is answering ends its request, not the wait,
   * which then sees the engine lost: the interrupt is still what ended it. */
  if (w == AB_WAIT_STOPPED || stop_signal(l))
    return ab_diag_set(diag, AB_ERR_IO, "interrupted (%s) while rank %u waited for %s through %s %s",
                       ab_signal_name(stop_signal(l)), l->rank, whom, l->engine, doing);
  if (w == AB_WAIT_TIMEOUT)
    return ab_diag_set(diag, AB_ERR_IO, "rank %u waited %g s for %s through %s %s (%s)", l->rank, waited, whom,
                       l->engine, doing, bound);
  return ab_diag_set(diag, AB_ERR_IO, "rank %u lost %s while it waited for %s %s: %s", l->rank, l->engine, whom, doing,
                     l->lost[0] ? l->lost : "the other end went away");
}

/* Says once, after a second of waiting, what this rank waits for. */
static void say_once(FILE *say, bool *said, double since, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void say_once(FILE *say, bool *said, double since, const char *fmt, ...) {
  if (say == NULL || *said || ab_clock_s() - since < 1.0) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(say, fmt, ap);
  va_end(ap);
  fflush(say);
  *said = true;
}

/* A message of kind from `from`, exactly `bytes` long, into buf; waits until deadline, first a
 * second so that `said` can be said. A message of another kind or size loses the link. */
static ab_wait_t recv_exact(ab_link_t *l, unsigned from, uint32_t kind, void *buf, size_t bytes, double deadline,
                            double since, FILE *say, bool *said, const char *line) {
  ab_wait_t w;
  uint32_t got = 0;
  void *payload = NULL;
  size_t n = 0;
  for (;;) {
    double step = !*said && say && since + 1.0 < deadline ? since + 1.0 : deadline;
    w = l->ops->recv(l, from, &got, &payload, &n, step);
    if (w != AB_WAIT_TIMEOUT || step >= deadline) break;
    say_once(say, said, since, "%s", line);
  }
  if (w != AB_WAIT_DONE) return w;
  if (got == kind && n == bytes) memcpy(buf, payload, bytes);
  else snprintf(l->lost, sizeof l->lost, "a message from rank %u made no sense (kind %u, %zu bytes)", from, got, n);
  free(payload);
  return got == kind && n == bytes ? AB_WAIT_DONE : AB_WAIT_LOST;
}

/* Rank 0 hears every other rank's hello; the first refusal goes to diag. Ranks heard are
 * marked in heard. */
static ab_status hear_hellos(ab_link_t *l, uint64_t digest, const char *what, FILE *say, const char *prog, bool *heard,
                             ab_diag_t *diag) {
  double since = ab_clock_s(), deadline = since + l->waits.meet_s;
  bool said = false;
  char line[400];
  snprintf(line, sizeof line, "%s: rank 0 of %u waits for rank%s %s%u through %s (up to %g s)\n", prog, l->world,
           l->world > 2 ? "s" : "", l->world > 2 ? "1 to " : "", l->world - 1, l->engine, l->waits.meet_s);
  ab_status st = AB_OK;
  for (unsigned r = 1; r < l->world; r++) {
    hello_t h;
    ab_wait_t w = recv_exact(l, r, AB_MSG_HELLO, &h, sizeof h, deadline, since, say, &said, line);
    if (w == AB_WAIT_TIMEOUT || w == AB_WAIT_STOPPED) {
      /* Every rank missing is named: at the bound, those after r that came are heard first. */
      for (unsigned q = r + 1; q < l->world && w == AB_WAIT_TIMEOUT; q++)
        heard[q] = recv_exact(l, q, AB_MSG_HELLO, &h, sizeof h, ab_clock_s() + 0.05, since, NULL, &said, line) == AB_WAIT_DONE;
      bool *missing = calloc(l->world, sizeof *missing);
      char list[256] = "the other ranks", whom[320];
      if (missing) {
        for (unsigned q = r; q < l->world; q++) missing[q] = !heard[q];
        ab_rank_list(missing, l->world, list, sizeof list);
        free(missing);
      }
      snprintf(whom, sizeof whom, "%s of %u", list, l->world);
      return gave_up(l, w, whom, "to meet", l->waits.meet_s, "AB_RENDEZVOUS_TIMEOUT", diag);
    }
    if (w != AB_WAIT_DONE) {
      char whom[32];
      snprintf(whom, sizeof whom, "rank %u", r);
      return gave_up(l, w, whom, "to meet", l->waits.meet_s, "AB_RENDEZVOUS_TIMEOUT", diag);
    }
    heard[r] = true;
    if (st != AB_OK) continue;
    if (h.magic != MAGIC || h.version != VERSION || h.world != l->world || h.rank != r)
      st = ab_diag_set(diag, AB_ERR_INVALID,
                       "a process said it is rank %u of %u (protocol %u); rank 0 expected rank %u of %u (protocol %u): "
                       "are WORLD_SIZE and RANK right, and is it the same allocbench?",
                       h.rank, h.world, h.version, r, l->world, VERSION);
    else if (h.digest != digest)
      st = ab_diag_set(diag, AB_ERR_INVALID, "rank %u's %s", r, what);
  }
  return st;
}

ab_status ab_link_meet(ab_link_t *l, uint64_t digest, const char *what, ab_comm_id_t *id, FILE *say, const char *prog,
                       ab_diag_t *diag) {
  if (l->world == 1) return AB_OK;
  if (l->rank == 0) {
    bool *heard = calloc(l->world, sizeof *heard);
    if (heard == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
    ab_status st = hear_hellos(l, digest, what, say, prog, heard, diag);
    /* Every rank hears the answer, a refusal too, so that none waits for its bound. */
    welcome_t wel;
    memset(&wel, 0, sizeof wel);
    wel.ok = st == AB_OK;
    if (st == AB_OK && id) memcpy(wel.id, id->bytes, sizeof wel.id);
    if (st != AB_OK) snprintf(wel.message, sizeof wel.message, "rank 0 refused the job: %s", diag->msg);
    for (unsigned r = 1; r < l->world; r++)
      if (!l->ops->send(l, r, AB_MSG_WELCOME, &wel, sizeof wel) && st == AB_OK)
        st = ab_diag_set(diag, AB_ERR_IO, "rank 0 lost %s while it answered rank %u: %s", l->engine, r, l->lost);
    free(heard);
    return st;
  }
  hello_t h = {MAGIC, VERSION, l->rank, l->world, digest};
  if (!l->ops->send(l, 0, AB_MSG_HELLO, &h, sizeof h))
    return ab_diag_set(diag, AB_ERR_IO, "rank %u lost %s: %s", l->rank, l->engine, l->lost);
  welcome_t wel;
  char line[400];
  snprintf(line, sizeof line, "%s: rank %u of %u waits for rank 0 through %s (up to %g s)\n", prog, l->rank, l->world,
           l->engine, l->waits.meet_s);
  bool said = false;
  double since = ab_clock_s();
  ab_wait_t w = recv_exact(l, 0, AB_MSG_WELCOME, &wel, sizeof wel, since + l->waits.meet_s, since, say, &said, line);
  if (w != AB_WAIT_DONE) return gave_up(l, w, "rank 0", "to meet", l->waits.meet_s, "AB_RENDEZVOUS_TIMEOUT", diag);
  wel.message[sizeof wel.message - 1] = '\0';
  if (!wel.ok) return ab_diag_set(diag, AB_ERR_INVALID, "%s", wel.message);
  if (id) memcpy(id->bytes, wel.id, sizeof id->bytes);
  return AB_OK;
}

ab_status ab_link_gather(ab_link_t *l, const void *mine, size_t bytes, void **all, size_t *sizes, double deadline,
                         const char *what, ab_diag_t *diag) {
  if (l->rank != 0) {
    if (l->ops->send(l, 0, AB_MSG_BLOB, mine, bytes)) return AB_OK;
    return ab_diag_set(diag, AB_ERR_IO, "rank %u lost %s while it sent %s: %s", l->rank, l->engine, what, l->lost);
  }
  for (unsigned r = 0; r < l->world; r++) all[r] = NULL;
  all[0] = malloc(bytes ? bytes : 1);
  if (all[0] == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  memcpy(all[0], mine, bytes);
  sizes[0] = bytes;
  double since = ab_clock_s();
  for (unsigned r = 1; r < l->world; r++) {
    uint32_t kind = 0;
    ab_wait_t w = l->ops->recv(l, r, &kind, &all[r], &sizes[r], deadline);
    if (w == AB_WAIT_DONE && kind != AB_MSG_BLOB) {
      snprintf(l->lost, sizeof l->lost, "rank %u sent a message of kind %u where %s were due", r, kind, what);
      w = AB_WAIT_LOST;
    }
    if (w != AB_WAIT_DONE) {
      char whom[64], doing[128];
      snprintf(whom, sizeof whom, "rank %u of %u", r, l->world);
      snprintf(doing, sizeof doing, "to send %s", what);
      return gave_up(l, w, whom, doing, ab_clock_s() - since, "AB_RESULTS_TIMEOUT", diag);
    }
  }
  return AB_OK;
}

ab_status ab_link_bcast(ab_link_t *l, void **blob, size_t *bytes, double deadline, const char *what, ab_diag_t *diag) {
  if (l->rank == 0) {
    for (unsigned r = 1; r < l->world; r++)
      if (!l->ops->send(l, r, AB_MSG_BLOB, *blob, *bytes))
        return ab_diag_set(diag, AB_ERR_IO, "rank 0 lost %s while it sent %s: %s", l->engine, what, l->lost);
    return AB_OK;
  }
  uint32_t kind = 0;
  double since = ab_clock_s();
  ab_wait_t w = l->ops->recv(l, 0, &kind, blob, bytes, deadline);
  if (w == AB_WAIT_DONE && kind == AB_MSG_BLOB) return AB_OK;
  if (w == AB_WAIT_DONE) {
    free(*blob);
    snprintf(l->lost, sizeof l->lost, "rank 0 sent a message of kind %u where %s were due", kind, what);
    w = AB_WAIT_LOST;
  }
  char doing[128];
  snprintf(doing, sizeof doing, "to send %s", what);
  return gave_up(l, w, "rank 0", doing, ab_clock_s() - since, "AB_RESULTS_TIMEOUT", diag);
}
