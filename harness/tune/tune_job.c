/* tune_job.c: a tuning job, whole (tune_job.h): its traces, the grid run on them over the
 * ranks, the configurations judged by their worst trace and ranked, and tune.csv's rows. */
#include "harness/tune/tune_job.h"

#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/base/clock.h"
#include "kernels/base/input.h"
#include "kernels/base/units.h"
#include "harness/run/pipeline.h"
#include "harness/run/results.h"
#include "harness/tune/tune_figures.h"
#include "strategies/protocol/caching_conf.h"
#include "harness/run/stop.h"
#include "harness/run/supervise.h"

/* ---- the traces --------------------------------------------------------------------------- */

/* Adds a trace to the job; one given twice is refused (its rows would count twice): the same
 * -w, or a replay of the same file by another path or a link. */
static ab_status add_trace(ab_tune_job_t *job, const char *spec, const char *given, ab_diag_t *diag) {
  struct stat sb;
  bool file = strncmp(spec, "replay:", 7) == 0 && stat(spec + 7, &sb) == 0 && S_ISREG(sb.st_mode);
  uint64_t dev = file ? (uint64_t)sb.st_dev : 0, ino = file ? (uint64_t)sb.st_ino : 0;
  for (size_t k = 0; k < job->n; k++)
    if (strcmp(job->t[k].spec, spec) == 0 || (file && job->t[k].dev == dev && job->t[k].ino == ino))
      return ab_diag_set(diag, AB_ERR_INVALID, "-w '%s': %s is in the job already (as %s); give each trace once", given,
                         spec, job->t[k].spec);
  if (job->n == job->room) { /* doubled: a glob of thousands of ranks' files */
    size_t room = job->room ? 2 * job->room : 8;
    ab_tune_job_trace_t *more = realloc(job->t, room * sizeof *more);
    if (more == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
    job->t = more;
    job->room = room;
  }
  memset(&job->t[job->n], 0, sizeof job->t[0]);
  if ((job->t[job->n].spec = strdup(spec)) == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  job->t[job->n].dev = dev;
  job->t[job->n].ino = ino;
  job->n++;
  return AB_OK;
}

/* The traces of the -w options, in order. A replay:PATTERN whose PATTERN names no file and has
 * a wildcard is expanded here with glob(3), its matches in glob's (sorted) order, so that the
 * quoted 'replay:job.rank*.pickle' means every rank's file; a pattern matching nothing is an
 * error, never a job of fewer ranks. */
static ab_status expand(const ab_tune_request_t *req, ab_tune_job_t *job, ab_diag_t *diag) {
  for (size_t i = 0; i < req->nworkloads; i++) {
    const char *spec = req->workloads[i];
    const char *path = strncmp(spec, "replay:", 7) == 0 ? spec + 7 : NULL;
    if (path == NULL || strpbrk(path, "*?[") == NULL || access(path, F_OK) == 0) {
      AB_TRY(add_trace(job, spec, spec, diag));
      continue;
    }
    glob_t g;
    int rc = glob(path, 0, NULL, &g);
    ab_status st = AB_OK;
    if (rc == GLOB_NOMATCH)
      st = ab_diag_set(diag, AB_ERR_INVALID, "-w '%s': no file matches '%s'", spec, path);
    else if (rc != 0)
      st = ab_diag_set(diag, rc == GLOB_NOSPACE ? AB_ERR_INTERNAL : AB_ERR_INVALID, "-w '%s': cannot read the folders of '%s'",
                       spec, path);
    for (size_t m = 0; st == AB_OK && m < g.gl_pathc; m++) {
      char one[sizeof job->t[0].es.source + 8];
      if ((size_t)snprintf(one, sizeof one, "replay:%s", g.gl_pathv[m]) >= sizeof one)
        st = ab_diag_set(diag, AB_ERR_INVALID, "-w '%s': the path %s is too long", spec, g.gl_pathv[m]);
      else
        st = add_trace(job, one, spec, diag);
    }
    if (rc == 0 || rc == GLOB_NOMATCH) globfree(&g);
    AB_TRY(st);
  }
  return AB_OK;
}

/* Builds every trace; each is then called by the name people read (a trace by its file name),
 * or by its whole spec where two file names are the same. tune writes no file named after its
 * workload, so the stream can carry that name into tune.csv and every line. */
static ab_status build_traces(const ab_run_spec_t *o, const ab_tune_request_t *req, ab_tune_job_t *job, ab_diag_t *diag) {
  uint64_t *digest = calloc(job->n + 1, sizeof *digest), *bytes = calloc(job->n + 1, sizeof *bytes);
  if (digest == NULL || bytes == NULL) {
    free(digest);
    free(bytes);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  ab_status st = AB_OK;
  for (size_t k = 0; k < job->n && st == AB_OK; k++) {
    ab_tune_job_trace_t *t = &job->t[k];
    /* A trace file whose bytes an earlier one has is not read again: its events are that one's. */
    const char *path = strncmp(t->spec, "replay:", 7) == 0 ? t->spec + 7 : NULL;
    ab_diag_t ignored = {""};
    bool hashed = path && ab_input_digest(path, &digest[k], &bytes[k], &ignored) == AB_OK;
    for (size_t j = 0; j < k && hashed && !t->built; j++)
      if (bytes[j] == bytes[k] && digest[j] == digest[k] && job->t[j].built && !job->t[j].borrowed) {
        t->es = job->t[j].es;
        t->info = job->t[j].info;
        snprintf(t->es.source, sizeof t->es.source, "%s", t->spec);
        t->built = t->borrowed = true;
      }
    if (!hashed) bytes[k] = UINT64_MAX; /* never alike */
    if (!t->built && (st = ab_run_build(o, t->spec, &t->es, &t->info, diag)) == AB_OK) t->built = true;
  }
  free(digest);
  free(bytes);
  AB_TRY(st);
  for (size_t k = 0; k < job->n; k++) {
    ab_tune_job_trace_t *t = &job->t[k];
    char name[sizeof t->es.source];
    ab_results_workload_name(t->es.source, name, sizeof name);
    snprintf(t->es.source, sizeof t->es.source, "%s", name);
  }
  for (size_t k = 0; k < job->n; k++)
    for (size_t j = k + 1; j < job->n; j++)
      if (strcmp(job->t[k].es.source, job->t[j].es.source) == 0) {
        for (size_t i = 0; i < job->n; i++) snprintf(job->t[i].es.source, sizeof job->t[i].es.source, "%s", job->t[i].spec);
        k = j = job->n;
      }
  if (job->n == 1) {
    snprintf(job->name, sizeof job->name, "%s", job->t[0].es.source);
    return AB_OK;
  }
  for (size_t i = 0; i < req->nworkloads; i++) {
    char name[sizeof job->t[0].es.source];
    ab_results_workload_name(req->workloads[i], name, sizeof name);
    size_t used = strlen(job->name);
    snprintf(job->name + used, sizeof job->name - used, "%s%s", used ? " " : "", name);
  }
  return AB_OK;
}

/* The recorded configuration (the first trace's), the device and the cap, bad input refused;
 * what is set aside or replaced is said. */
static ab_status setup(const ab_run_spec_t *o, const ab_tune_request_t *req, const ab_events_t *es, ab_tune_job_t *job,
                       ab_diag_t *diag) {
  ab_tune_split_fraction(es->settings, job->recorded_conf, sizeof job->recorded_conf, job->fraction, sizeof job->fraction);
  ab_caching_conf_t recorded;
  ab_caching_conf_defaults(&recorded);
  ab_diag_t refused = {""};
  if (ab_caching_conf_apply(&recorded, "the recorded settings", es->settings, &refused) != AB_OK) {
    if (!o->quiet) fprintf(stderr, "%s: warning: %s; the savings are over the defaults instead\n", o->cmd, refused.msg);
    job->recorded_conf[0] = job->fraction[0] = '\0';
    recorded.memory_fraction = 1.0;
  }
  ab_pipeline_t p = {.device = o->device, .dev = o->dev, .strategy = "raw"};
  ab_world_t closed;
  AB_TRY(ab_pipeline_check(&p, &closed, diag));
  /* The strategies of -s, checked before anything runs: each can be made on the device. A
   * library that crashes as it is loaded is no bad argument (ab_pipeline_check): its row fails
   * the same way, an error, while the others are ranked. */
  for (size_t i = 0; i < req->nreferences; i++) {
    ab_pipeline_t q = p;
    q.strategy = req->references[i];
    ab_status st = ab_pipeline_check(&q, NULL, diag);
    if (st != AB_OK && !(st != AB_ERR_INVALID && ab_supervise_apart(q.strategy))) return st;
  }
  ab_run_note_device(o, closed.device, closed.kind);
  snprintf(job->device, sizeof job->device, "%s", closed.device);
  job->total = closed.total_bytes;
  char x[32], y[32];
  if (req->cap > closed.total_bytes)
    return ab_diag_set(diag, AB_ERR_INVALID, "--cap %s is more than the device's total of %s",
                       ab_format_bytes(req->cap, x, sizeof x), ab_format_bytes(closed.total_bytes, y, sizeof y));
  job->cap = req->cap;
  /* The recorded configuration under the job's cap is the recorded run, unless --cap replaces
   * the fraction it ran under; only the simulated card takes addresses. */
  job->addresses = closed.kind == AB_DEVICE_SIM && !(req->cap && job->fraction[0]);
  if (req->cap && job->fraction[0]) {
    if (!o->quiet) fprintf(stderr, "%s: --cap replaces the recorded %s\n", o->cmd, job->fraction);
    job->fraction[0] = '\0';
  } else if (recorded.memory_fraction < 1.0) {
    /* As PyTorch turns the fraction into its cap (caching.c does the same); the line to paste
     * says it in the fewest digits that make the same cap. */
    job->cap = (uint64_t)(recorded.memory_fraction * (double)closed.total_bytes);
    char fraction[32];
    ab_pipeline_cap_fraction(job->cap, closed.total_bytes, fraction, sizeof fraction);
    snprintf(job->fraction, sizeof job->fraction, "per_process_memory_fraction:%s", fraction);
  }
  job->jobs = req->jobs;
  if (closed.kind != AB_DEVICE_SIM) {
    if (req->jobs > 1 && !o->quiet)
      fprintf(stderr, "%s: --jobs 1 on %s: the runs would share its memory\n", o->cmd, closed.device);
    job->jobs = 1;
  }
  return AB_OK;
}

/* What is said of each trace before the runs, and the recorded addresses each takes. */
static ab_status prepare_traces(const ab_run_spec_t *o, ab_tune_job_t *job, ab_diag_t *diag) {
  const ab_events_t *first = &job->t[0].es;
  for (size_t k = 0; k < job->n; k++) {
    ab_tune_job_trace_t *t = &job->t[k];
    bool same = strcmp(t->es.settings, first->settings) == 0;
    if (!same && !o->quiet)
      fprintf(stderr,
              "%s: warning: %s was recorded under '%s', %s under '%s': the recorded configuration and "
              "its cap are %s's\n",
              o->cmd, t->es.source, t->es.settings[0] ? t->es.settings : "the defaults", first->source,
              first->settings[0] ? first->settings : "the defaults", first->source);
    if (t->es.trace_ooms && !o->quiet)
      fprintf(stderr,
              "%s: warning: %s%sthe traced program caught %" PRIu64 " OOMs and went on (it changed course "
              "under memory pressure): the figures are bounds, not predictions\n",
              o->cmd, job->n > 1 ? t->es.source : "", job->n > 1 ? ": " : "", t->es.trace_ooms);
    /* The recorded configuration under the job's cap (--cap, or the recorded fraction) is the
     * recorded run: its device allocations go where the trace says they went
     * (Note [Recorded addresses], cmd_replay.c). */
    if (job->addresses && same && ab_events_address_plan(&t->es, &t->plan, &t->plan_len) != AB_OK)
      return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  return AB_OK;
}

static uint64_t largest_request(const ab_tune_job_t *job) {
  uint64_t m = 0;
  for (size_t k = 0; k < job->n; k++) {
    const ab_events_t *es = &job->t[k].es;
    for (size_t i = 0; i < es->n; i++)
      if (es->ev[i].kind == AB_EV_ALLOC && es->ev[i].bytes > m) m = es->ev[i].bytes;
  }
  return m;
}

/* Each trace as tune.h takes it, the traces alike found (Note [Traces alike]). */
static ab_status find_alike(ab_tune_job_t *job, ab_diag_t *diag) {
  job->tt = calloc(job->n, sizeof *job->tt);
  if (job->tt == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  for (size_t k = 0; k < job->n; k++)
    job->tt[k] = (ab_tune_trace_t){&job->t[k].es, job->t[k].es.source, job->t[k].plan, job->t[k].plan_len, 0, k};
  ab_tune_alike(job->tt, job->n);
  job->distinct = 0;
  for (size_t k = 0; k < job->n; k++) job->distinct += job->tt[k].same == k;
  return AB_OK;
}

/* What every rank must agree on before the runs are dealt out: the traces as they replay, the
 * configurations, and what each run is asked. */
static uint64_t job_digest(const ab_tune_job_t *job, const ab_tune_list_t *list, const ab_tune_opts_t *o) {
  uint64_t h = 1469598103934665603ULL;
#define FOLD(p, bytes)                                                                        \
  do {                                                                                        \
    const unsigned char *b_ = (const unsigned char *)(p);                                     \
    for (size_t i_ = 0; i_ < (bytes); i_++) h = (h ^ b_[i_]) * 1099511628211ULL;              \
  } while (0)
  FOLD(&job->n, sizeof job->n);
  for (size_t k = 0; k < job->n; k++) {
    FOLD(&job->tt[k].digest, sizeof job->tt[k].digest);
    FOLD(&job->tt[k].same, sizeof job->tt[k].same);
  }
  for (size_t i = 0; i < list->n; i++) {
    FOLD(list->c[i].strategy, strlen(list->c[i].strategy));
    FOLD(list->c[i].conf, strlen(list->c[i].conf) + 1);
    FOLD(&list->c[i].family, sizeof list->c[i].family);
    FOLD(&list->c[i].recorded, sizeof list->c[i].recorded);
  }
  if (o->device) FOLD(o->device, strlen(o->device));
  FOLD(&o->cap, sizeof o->cap);
  FOLD(&o->map_probes, sizeof o->map_probes);
  FOLD(&o->no_map, sizeof o->no_map);
  FOLD(&o->check, sizeof o->check);
#undef FOLD
  return h;
}

/* ---- the runs ----------------------------------------------------------------------------- */

typedef struct progress_s {
  const ab_run_spec_t *o;
  const char *trace;    /* the trace the runs are on, where the job has several; else NULL */
  size_t offset, total; /* runs before this trace's part of the stage, and in all so far */
} progress_t;

static void on_done(void *ctx, const ab_tune_result_t *r, size_t done, size_t total) {
  progress_t *p = ctx;
  (void)total;
  if (p->o->quiet || r->status == AB_RUN_INTERRUPTED) return;
  char a[32], b[32];
  const char *trace = p->trace ? ab_tune_job_short_name(p->trace) : "";
  if (r->status == AB_RUN_ERROR) { /* a library's failure names the library already */
    bool named = strncmp(r->message, r->cand.strategy, strlen(r->cand.strategy)) == 0;
    fprintf(stderr, "%s: [%zu/%zu] %s%s%s%s%s%sfailed: %s (%.1f s)\n", p->o->cmd, p->offset + done, p->total, trace,
            p->trace ? ": " : "", named ? "" : r->cand.strategy, named || r->cand.family == AB_TUNE_REFERENCE ? "" : " ",
            named || r->cand.family == AB_TUNE_REFERENCE ? "" : r->cand.conf[0] ? r->cand.conf : "(default)",
            named ? "" : ": ", r->message, r->wall_s);
    return;
  }
  fprintf(stderr, "%s: [%zu/%zu] %s%s%s%s%s: peak reserved %s, smallest %s %s (%.1f s)\n", p->o->cmd, p->offset + done,
          p->total, trace, p->trace ? ": " : "", r->cand.strategy, r->cand.family == AB_TUNE_REFERENCE ? "" : " ",
          r->cand.family == AB_TUNE_REFERENCE ? "" : r->cand.conf[0] ? r->cand.conf : "(default)",
          r->status == AB_RUN_OK ? ab_format_bytes((uint64_t)r->stats.reserved_bytes.peak, a, sizeof a)
                                 : ab_run_status_name(r->status),
          r->cand.family == AB_TUNE_REFERENCE ? "budget" : "cap",
          r->search.passed ? ab_format_bytes(r->search.min_budget, b, sizeof b) : "none", r->wall_s);
}

/* Whether run j is this rank's: run j is rank (j mod world)'s. */
static bool mine(const ab_tune_job_t *job, size_t j) { return j % job->world == job->rank; }

/* r takes the results of from, a configuration alike it on the same trace
 * (Note [Settings alike]): its own name and place, and no time of its own. */
static void take_alike(ab_tune_result_t *r, const ab_tune_result_t *from) {
  ab_tune_result_t own = *r;
  *r = *from;
  r->cand = own.cand;
  r->order = own.order;
  r->alike = from->order;
  r->wall_s = 0;
}

/* Every configuration of [from, to) alike an earlier one on a distinct trace takes its results. */
static void take_alike_all(ab_tune_job_t *job, size_t from, size_t to) {
  for (size_t k = 0; k < job->n; k++)
    for (size_t i = from; i < to && job->tt[k].same == k; i++)
      if (job->t[k].r[i].alike != i) take_alike(&job->t[k].r[i], &job->t[k].r[job->t[k].r[i].alike]);
}

/* Says which configurations of [first, list.n) take an earlier one's runs on trace k. */
static void say_alike(const ab_tune_job_t *job, const ab_run_spec_t *o, size_t k, size_t first, const size_t *same) {
  for (size_t i = first; i < job->list.n && !o->quiet && job->rank == 0; i++) {
    const ab_tune_candidate_t *c = &job->list.c[i], *like = &job->list.c[same[i]];
    if (same[i] == i) continue;
    fprintf(stderr, "%s: %s%s%s %s: rounds every request as %s does, so its runs are that one's\n", o->cmd,
            job->distinct > 1 ? ab_tune_job_short_name(job->t[k].es.source) : "", job->distinct > 1 ? ": " : "",
            c->strategy, c->conf, like->conf[0] ? like->conf : "(default)");
  }
}

/* Runs list.c[first, list.n) on every distinct trace (Note [Traces alike]), into each trace's
 * results from first, but those alike an earlier configuration on a trace, which take its
 * results (Note [Settings alike]); stops between traces at a signal. With several ranks run j,
 * configuration i on the d-th distinct trace (j = d n + i), is rank j mod world's; the results
 * come together at rank 0, and back to every rank when to_all. */
static ab_status run_stage(ab_tune_job_t *job, const ab_tune_ranks_t *ranks, size_t first, const ab_tune_opts_t *opts,
                           progress_t *prog, bool to_all, ab_diag_t *diag) {
  const ab_tune_list_t *list = &job->list;
  size_t n = list->n - first, runs = job->distinct * n;
  ab_tune_candidate_t *cands = malloc((n ? n : 1) * sizeof *cands);
  ab_tune_result_t *got = malloc((n ? n : 1) * sizeof *got), *all = calloc(runs ? runs : 1, sizeof *all);
  size_t *which = malloc((n ? n : 1) * sizeof *which);
  size_t *same = malloc((job->distinct * list->n + 1) * sizeof *same); /* by distinct trace */
  ab_status st = cands && got && all && which && same ? AB_OK : ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  prog->offset = 0;
  prog->total = 0;
  for (size_t k = 0, d = 0; k < job->n && st == AB_OK; k++) {
    if (job->tt[k].same != k) continue;
    size_t *s = same + d * list->n;
    ab_tune_settings_alike(&job->t[k].es, list->c, list->n, job->t[k].plan_len > 0, s);
    say_alike(job, prog->o, k, first, s);
    for (size_t i = 0; i < n; i++) prog->total += mine(job, d * n + i) && s[first + i] == first + i;
    d++;
  }
  for (size_t k = 0, d = 0; k < job->n && st == AB_OK && !ab_run_stop; k++) {
    ab_tune_job_trace_t *t = &job->t[k];
    if (job->tt[k].same != k) continue;
    size_t m = 0;
    const size_t *s = same + d * list->n;
    for (size_t i = 0; i < n; i++) {
      if (!mine(job, d * n + i)) continue;
      if (s[first + i] == first + i) {
        cands[m] = list->c[first + i], which[m++] = i;
        continue;
      }
      ab_tune_result_t *r = &all[d * n + i]; /* its results are taken once every run is in */
      r->cand = list->c[first + i];
      r->order = first + i;
      r->alike = s[first + i];
    }
    ab_tune_opts_t one = *opts;
    one.plan = t->plan;
    one.plan_len = t->plan_len;
    prog->trace = job->distinct > 1 ? t->es.source : NULL;
    if (m) st = ab_tune_run(&t->es, cands, m, 0, &one, got, diag);
    for (size_t q = 0; q < m && st == AB_OK; q++) {
      got[q].order = got[q].alike = first + which[q];
      all[d * n + which[q]] = got[q];
    }
    prog->offset += m;
    d++;
  }
  if (st == AB_OK && !ab_run_stop && job->world > 1)
    st = ranks->share(ranks->ctx, all, runs, sizeof *all, to_all, "tune's runs", diag);
  /* Every trace takes the results of the first trace alike it. */
  for (size_t k = 0, d = 0; st == AB_OK && k < job->n; k++) {
    if (job->tt[k].same != k) continue;
    memcpy(job->t[k].r + first, all + d * n, n * sizeof *all);
    d++;
  }
  if (st == AB_OK) take_alike_all(job, first, list->n);
  for (size_t k = 0; st == AB_OK && k < job->n; k++)
    if (job->tt[k].same != k) memcpy(job->t[k].r + first, job->t[job->tt[k].same].r + first, n * sizeof *all);
  free(cands);
  free(got);
  free(all);
  free(which);
  free(same);
  return st;
}

/* Each configuration of [from, to) as its worst trace's result
 * (Note [A job of several traces]); of equal ones, the first trace's. */
static void take_worst(ab_tune_job_t *job, size_t from, size_t to) {
  for (size_t i = from; i < to; i++) {
    ab_tune_result_t *worst = &job->ranked[i];
    *worst = job->t[0].r[i];
    worst->trace = 0;
    for (size_t k = 1; k < job->n; k++)
      if (ab_tune_compare(&job->t[k].r[i], worst, job->objective) > 0) {
        *worst = job->t[k].r[i];
        worst->trace = k;
      }
  }
}

/* At least AB_TUNE_HEADROOM_PCT of the cap as headroom, or no cap to have it under. */
static bool comfortable(const ab_tune_job_t *job, const ab_tune_result_t *r) {
  int64_t h;
  return !ab_tune_job_headroom(job, r, &h) || h * 100 >= (int64_t)job->cap * AB_TUNE_HEADROOM_PCT;
}

/* The configurations ranked by their worst trace, and the recommendation: the first that is a
 * PyTorch setting and completes (with a cap found, where the cap is the objective), of those
 * with the headroom where any has it (Note [Headroom]). */
static void rank_and_choose(ab_tune_job_t *job) {
  ab_tune_result_t *r = job->ranked;
  size_t n = job->list.n;
  ab_tune_rank(r, n, job->objective);
  const ab_tune_result_t *first = NULL, *roomy = NULL;
  for (size_t i = 0; i < n; i++) {
    bool eligible = r[i].cand.family != AB_TUNE_REFERENCE && ab_tune_completes(&r[i]) &&
                    (job->objective != AB_TUNE_BUDGET || r[i].search.passed);
    if (first == NULL && eligible) first = &r[i];
    if (roomy == NULL && eligible && comfortable(job, &r[i])) roomy = &r[i];
    if (job->recorded == NULL && r[i].cand.recorded) job->recorded = &r[i];
  }
  job->winner = roomy ? roomy : first;
  if (job->winner != first) job->tight = first;
}

/* Whether configuration i awaits its placement walks on some trace. */
static bool band_pending(const ab_tune_job_t *job, size_t i) {
  for (size_t k = 0; k < job->n; k++)
    if (job->tt[k].same == k && ab_tune_band_pending(&job->t[k].r[i])) return true;
  return false;
}

/* Ranks the configurations and chooses, walking the placement variants of the safe caps the
 * answer names until it names none unwalked (Note [Bands where the answer rests]). */
static ab_status rank_with_bands(ab_tune_job_t *job, ab_diag_t *diag) {
  for (;;) {
    take_worst(job, 0, job->list.n); /* ranked, in the grid's order again */
    job->winner = job->recorded = job->tight = NULL;
    rank_and_choose(job);
    size_t want[2], nwant = 0;
    const ab_tune_result_t *named[2] = {job->winner, job->tight};
    for (size_t j = 0; j < 2; j++)
      if (named[j] && band_pending(job, named[j]->order)) want[nwant++] = named[j]->order;
    if (nwant == 0 || ab_run_stop) return AB_OK;
    for (size_t k = 0; k < job->n; k++) {
      if (job->tt[k].same != k) continue;
      ab_tune_result_t *walk[2];
      size_t m = 0;
      for (size_t j = 0; j < nwant; j++) {
        ab_tune_result_t *r = &job->t[k].r[job->t[k].r[want[j]].alike]; /* the one whose runs they are */
        if (ab_tune_band_pending(r) && (m == 0 || walk[0] != r)) walk[m++] = r;
      }
      ab_tune_opts_t one = job->opts;
      one.plan = job->t[k].plan;
      one.plan_len = job->t[k].plan_len;
      if (m) AB_TRY(ab_tune_walk_bands(&job->t[k].es, &one, walk, m, diag));
    }
    /* Every configuration takes the results of the first alike it, every trace those of the
     * first trace alike it. */
    take_alike_all(job, 0, job->list.n);
    for (size_t k = 0; k < job->n; k++)
      for (size_t i = 0; i < job->list.n && job->tt[k].same != k; i++) job->t[k].r[i] = job->t[job->tt[k].same].r[i];
  }
}

/* The grid's two stages on every trace, over the ranks; at rank 0, ranked. */
static ab_status run_grid(ab_tune_job_t *job, const ab_run_spec_t *o, const ab_tune_request_t *req,
                          const ab_tune_ranks_t *ranks, ab_diag_t *diag) {
  if (job->jobs == 0 && job->world > 1) { /* the cores of this host, shared by its ranks */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    job->jobs = cores > (long)job->local ? (unsigned)(cores / (long)job->local) : 1;
  }
  ab_status st = prepare_traces(o, job, diag);
  if (st == AB_OK) st = find_alike(job, diag);
  progress_t prog = {o, NULL, 0, 0};
  ab_tune_opts_t opts = {.device = o->device, .dev = o->dev, .cap = job->cap, .map_probes = req->map_probes,
                         .no_map = req->no_map, .check = o->check, .jobs = job->jobs, .stop = &ab_run_stop,
                         .on_done = on_done, .on_done_ctx = &prog, .replayed = &job->replayed};
  /* The figures' runs take the same options, without the progress (prog is this call's). */
  job->opts = opts;
  job->opts.on_done = NULL;
  job->opts.on_done_ctx = NULL;
  job->t0 = ab_clock_s();
  size_t best[AB_TUNE_FAMILIES];
  if (st == AB_OK)
    st = ab_tune_grid_first(&job->list, job->recorded_conf, largest_request(job), job->cap > 0, diag);
  for (size_t i = 0; st == AB_OK && i < req->nreferences; i++)
    st = ab_tune_list_add_reference(&job->list, req->references[i], diag);
  /* Stage 2 adds a few combinations at most: room for the whole grid once more. */
  size_t first = job->list.n;
  if (st == AB_OK && (job->ranked = calloc(2 * first, sizeof *job->ranked)) == NULL)
    st = ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  for (size_t k = 0; st == AB_OK && k < job->n; k++)
    if ((job->t[k].r = calloc(2 * first, sizeof *job->t[k].r)) == NULL)
      st = ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  if (st == AB_OK && job->world > 1) st = ranks->meet(ranks->ctx, job_digest(job, &job->list, &opts), o->quiet, diag);
  if (st == AB_OK && job->world > 1 && !o->quiet)
    fprintf(stderr, "%s: %zu runs dealt out between %u ranks; rank 0 writes the results\n", o->cmd,
            job->distinct * job->list.n, job->world);
  /* The first stage's results decide the second stage: every rank needs them. */
  if (st == AB_OK) st = run_stage(job, ranks, 0, &opts, &prog, true, diag);
  if (st == AB_OK && !ab_run_stop) {
    take_worst(job, 0, first);
    ab_tune_best_of_families(job->ranked, first, job->objective, best);
    st = ab_tune_grid_combine(&job->list, best, job->cap > 0, diag);
    if (st == AB_OK && job->list.n > 2 * first) st = ab_diag_set(diag, AB_ERR_INTERNAL, "the grid's second stage outgrew its room");
    if (st == AB_OK && job->list.n > first && !o->quiet)
      fprintf(stderr, "%s: then %zu combination%s of the settings that did best\n", o->cmd, job->list.n - first,
              job->list.n - first == 1 ? "" : "s");
    if (st == AB_OK) st = run_stage(job, ranks, first, &opts, &prog, false, diag);
    if (st == AB_OK) take_worst(job, first, job->list.n);
  }
  if (st == AB_OK && !ab_run_stop && job->rank == 0) st = rank_with_bands(job, diag);
  return st;
}

ab_status ab_tune_job_run(ab_tune_job_t *job, const ab_run_spec_t *o, const ab_tune_request_t *req,
                          const ab_tune_ranks_t *ranks, ab_diag_t *diag) {
  job->step = AB_TUNE_STEP_LIST;
  job->world = job->local = 1;
  job->objective = req->objective;
  AB_TRY(expand(req, job, diag));
  ab_run_catch_stop(); /* a signal while the workload is generated stops that too */
  /* Under a launcher, the ranks deal out the runs; rank 0 alone says what it does. */
  if (ranks && ranks->join) AB_TRY(ranks->join(ranks->ctx, &job->rank, &job->world, &job->local, diag));
  ab_run_catch_stop(); /* again: MPI's start may have set its own handlers */
  ab_run_spec_t spec = *o; /* quiet at ranks other than 0 */
  spec.quiet = spec.quiet || job->rank != 0;
  job->step = AB_TUNE_STEP_BUILD;
  AB_TRY(build_traces(&spec, req, job, diag));
  job->step = AB_TUNE_STEP_SETUP;
  AB_TRY(setup(&spec, req, &job->t[0].es, job, diag));
  job->step = AB_TUNE_STEP_RUNS;
  AB_TRY(run_grid(job, &spec, req, ranks, diag));
  job->step = AB_TUNE_STEP_DONE;
  return AB_OK;
}

void ab_tune_job_free(ab_tune_job_t *job) {
  for (size_t k = 0; k < job->n; k++) {
    free(job->t[k].spec);
    if (job->t[k].built && !job->t[k].borrowed) ab_events_free(&job->t[k].es);
    free(job->t[k].r);
    free(job->t[k].plan);
  }
  free(job->t);
  free(job->tt);
  free(job->ranked);
  ab_tune_list_free(&job->list);
  memset(job, 0, sizeof *job);
}

/* ---- the results -------------------------------------------------------------------------- */

bool ab_tune_job_headroom(const ab_tune_job_t *job, const ab_tune_result_t *r, int64_t *headroom) {
  if (job->cap == 0 || !r->search.passed) return false;
  *headroom = (int64_t)job->cap - (int64_t)ab_tune_deployable(r);
  return true;
}

/* Appends one clause to a note. */
static void clause(char *out, size_t size, const char *text) {
  size_t used = strlen(out);
  snprintf(out + used, size - used, "%s%s", used ? "; " : "", text);
}

void ab_tune_job_note(const ab_tune_job_t *job, size_t k, const ab_tune_result_t *r, bool brief, char *out, size_t size) {
  const ab_events_t *es = &job->t[k].es;
  out[0] = '\0';
  if (r->status == AB_RUN_ERROR) {
    snprintf(out, size, "error: %s", r->message);
    return;
  }
  if (r->cand.family == AB_TUNE_REFERENCE) clause(out, size, "reference: not a PyTorch setting; its limit is a budget");
  if (r->alike != r->order) { /* Note [Settings alike], tune.h; the table names it by its rank */
    char runs[AB_TUNE_CONF_BYTES + 64];
    const char *like = job->list.c[r->alike].conf;
    size_t rank = 0;
    for (size_t i = 0; i < job->list.n && brief; i++)
      if (job->ranked[i].order == r->alike) rank = job->ranked[i].rank;
    if (rank)
      snprintf(runs, sizeof runs, "the runs of rank %zu", rank);
    else
      snprintf(runs, sizeof runs, "the runs of %s, which rounds every request alike", like[0] ? like : "the defaults");
    clause(out, size, runs);
  }
  if (r->status == AB_RUN_OOM) clause(out, size, job->cap ? "out of memory under the cap" : "out of memory on the card");
  if (!r->search.passed) clause(out, size, "no cap up to the card's total sufficed");
  /* Note [Cap map] (bisect.c); short, as the table's last column. */
  bool unwalked = ab_tune_band_pending(r); /* Note [Bands where the answer rests] */
  if (r->search.mapped && r->search.fail_ranges) {
    char safe[80], b[32];
    snprintf(safe, sizeof safe, "fails above it; safe from %s%s", ab_format_bytes(r->search.safe_cap, b, sizeof b),
             unwalked && brief ? " (placements unchecked)" : "");
    clause(out, size, safe);
  }
  if (r->search.mapped && r->search.band_raised && !r->search.fail_ranges) {
    char safe[80], b[32];
    snprintf(safe, sizeof safe, "a placement fails above it; safe from %s", ab_format_bytes(r->search.safe_cap, b, sizeof b));
    clause(out, size, safe);
  }
  if (r->status == AB_RUN_OK && r->band.oom_variants) clause(out, size, "out of memory under some placements");
  if (unwalked) {
    if (!brief) clause(out, size, "placements not checked");
  } else if (r->search.mapped && r->search.band_checked != UINT64_MAX) {
    char upto[80], b[32];
    snprintf(upto, sizeof upto, "placements checked up to %s", ab_format_bytes(r->search.band_checked, b, sizeof b));
    clause(out, size, upto);
  }
  if (r->search.map_cut)
    clause(out, size, r->search.passed && r->search.max_fail + 1 == r->search.min_budget ? "mapped up to the smallest"
                                                                                          : "caps bisected, not mapped");
  if (r->search.upper_bound) {
    char bound[96];
    snprintf(bound, sizeof bound, "upper bound: the traced program survived %" PRIu64 " OOMs", es->trace_ooms);
    clause(out, size, bound);
  }
}

/* tune.csv's columns (harness/README.md, "Recording a job, and tuning its settings"). */
#define TUNE_COLUMNS(X)                                                                                \
  X(workload, 0) X(trace, 0) X(worst, 1) X(device, 0) X(objective, 0) X(cap_bytes, 1) X(rank, 1)      \
  X(strategy, 0) X(conf, 0) X(recommended, 1) X(recorded, 1) X(status, 0) X(oom_kind, 0)               \
  X(peak_requested_bytes, 1) X(peak_allocated_bytes, 1) X(peak_reserved_bytes, 1) X(num_device_alloc, 1) \
  X(num_device_free, 1) X(num_alloc_retries, 1) X(min_budget_bytes, 1) X(max_fail_bytes, 1)            \
  X(safe_cap_bytes, 1) X(fail_ranges, 1) X(headroom_bytes, 1) X(limit, 0)                             \
  X(probes, 1) X(wall_s, 1) X(note, 0) X(trace_ooms, 1) X(alloc_time_s, 1) X(peak_reserved_low, 1)       \
  X(peak_reserved_high, 1) X(device_allocs_low, 1) X(device_allocs_high, 1)

#define TUNE_COL(name, numeric) {#name, numeric},
static const ab_col_t tune_cols[] = {TUNE_COLUMNS(TUNE_COL)};
#undef TUNE_COL
#define TUNE_INDEX(name, numeric) C_##name,
enum { TUNE_COLUMNS(TUNE_INDEX) NCOLS };
#undef TUNE_INDEX

static const char *objective_name(ab_tune_objective_t o) {
  return o == AB_TUNE_BUDGET ? "budget" : o == AB_TUNE_TIME ? "time" : "reserved";
}

/* The row of trace k under the configuration cfg (ranked: its worst trace's result). */
static ab_status add_row(ab_table_t *t, const ab_tune_job_t *job, size_t k, const ab_tune_result_t *cfg) {
  const ab_tune_job_trace_t *tr = &job->t[k];
  const ab_tune_result_t *r = &tr->r[cfg->order];
  char cells[NCOLS][AB_DIAG_BYTES + 64];
  const char *row[NCOLS];
  for (int i = 0; i < NCOLS; i++) row[i] = cells[i], cells[i][0] = '\0';
#define SET(col, ...) snprintf(cells[C_##col], sizeof cells[0], __VA_ARGS__)
  SET(workload, "%s", job->name);
  SET(trace, "%s", tr->es.source);
  SET(worst, "%d", cfg->trace == k);
  SET(device, "%s", job->device);
  SET(objective, "%s", objective_name(job->objective));
  SET(cap_bytes, "%" PRIu64, job->cap);
  SET(rank, "%zu", cfg->rank);
  SET(strategy, "%s", r->cand.strategy);
  SET(conf, "%s", r->cand.conf);
  SET(recommended, "%d", cfg == job->winner);
  SET(recorded, "%d", r->cand.recorded);
  SET(status, "%s", ab_run_status_name(r->status));
  SET(oom_kind, "%s", ab_oom_kind_name(r->oom_kind));
  SET(peak_requested_bytes, "%" PRIu64, r->search.peak_requested);
  SET(peak_allocated_bytes, "%" PRId64, r->stats.allocated_bytes.peak);
  SET(peak_reserved_bytes, "%" PRId64, r->stats.reserved_bytes.peak);
  SET(num_device_alloc, "%" PRIu64, r->stats.num_device_alloc);
  SET(num_device_free, "%" PRIu64, r->stats.num_device_free);
  SET(num_alloc_retries, "%" PRIu64, r->stats.num_alloc_retries);
  if (r->search.passed) SET(min_budget_bytes, "%" PRIu64, r->search.min_budget);
  if (r->search.failed) SET(max_fail_bytes, "%" PRIu64, r->search.max_fail);
  if (r->search.mapped && r->search.passed) SET(safe_cap_bytes, "%" PRIu64, r->search.safe_cap);
  if (r->search.mapped) SET(fail_ranges, "%u", r->search.fail_ranges);
  int64_t headroom;
  if (r->cand.family != AB_TUNE_REFERENCE && ab_tune_job_headroom(job, r, &headroom)) SET(headroom_bytes, "%" PRId64, headroom);
  SET(limit, "%s", r->cand.family == AB_TUNE_REFERENCE ? "budget" : "cap");
  SET(probes, "%u", r->search.probes);
  SET(wall_s, "%.6f", r->wall_s);
  ab_tune_job_note(job, k, r, false, cells[C_note], sizeof cells[0]);
  SET(trace_ooms, "%" PRIu64, tr->es.trace_ooms);
  if (r->status == AB_RUN_OK && r->alloc_time_s >= 0) SET(alloc_time_s, "%.6f", r->alloc_time_s);
  SET(peak_reserved_low, "%" PRIu64, r->band.reserved_lo);
  SET(peak_reserved_high, "%" PRIu64, r->band.reserved_hi);
  SET(device_allocs_low, "%" PRIu64, r->band.allocs_lo);
  SET(device_allocs_high, "%" PRIu64, r->band.allocs_hi);
#undef SET
  return ab_table_add(t, row);
}

ab_status ab_tune_job_rows(const ab_tune_job_t *job, ab_table_t *rows) {
  ab_table_init(rows, tune_cols, NCOLS);
  ab_status st = AB_OK;
  for (size_t i = 0; i < job->list.n && st == AB_OK; i++)
    for (size_t k = 0; k < job->n && st == AB_OK; k++) st = add_row(rows, job, k, &job->ranked[i]);
  return st;
}

ab_status ab_tune_job_figures(const ab_tune_job_t *job, const char *dir, bool *interrupted, ab_diag_t *diag) {
  *interrupted = false;
  if (job->recorded == NULL) return AB_OK;
  ab_tune_seen_t *seen = calloc(2 * job->n, sizeof *seen);
  if (seen == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  for (size_t k = 0; k < job->n; k++) {
    const ab_tune_result_t *r[2] = {&job->t[k].r[job->recorded->order], job->winner ? &job->t[k].r[job->winner->order] : NULL};
    for (int c = 0; c < 2; c++)
      if (r[c]) seen[2 * k + c] = (ab_tune_seen_t){r[c]->status, r[c]->stats.reserved_bytes.peak};
  }
  ab_status st = ab_tune_figures_write(job->tt, job->n, &job->opts, &job->recorded->cand,
                                       job->winner ? &job->winner->cand : NULL, seen, dir, interrupted, diag);
  free(seen);
  return st;
}
