#include "harness/tune/tune_figures.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/output.h"
#include "harness/run/oommap.h"
#include "harness/run/oomreport.h"
#include "harness/run/table.h"
#include "strategies/protocol/trace_actions.h"

/* The samples of one run, copied out of the run that is reused. */
typedef struct series_s {
  ab_tl_sample_t *s;
  size_t n;
  ab_run_status_t status;
  int64_t peak_reserved;
  uint64_t oom_reserved; /* at its OOM */
} series_t;

enum { RECORDED, RECOMMENDED, NCONFIGS };
static const char *const config_name[NCONFIGS] = {"recorded", "recommended"};

/* The cap every run of o is made under: tune's own (ab_tune_probe_opts says cap or budget). */
static uint64_t limit_of(const ab_tune_opts_t *o) { return o->cap; }

static ab_tune_opts_t opts_for(const ab_tune_opts_t *o, const ab_tune_trace_t *t) {
  ab_tune_opts_t x = *o;
  x.plan = t->plan;
  x.plan_len = t->plan_len;
  return x;
}

/* The run of configuration b over es with its timeline, into *out, and its map into m: at the
 * first moment its reserved bytes reached the peak tune saw (seen), or at its OOM where tune saw
 * one; *event is the index of the event after which it was taken. The run replays as tune's
 * did, so it reaches that peak at the same event. */
static ab_status figure_run(const ab_events_t *es, const ab_bisect_opts_t *b, uint64_t limit, const ab_tune_seen_t *seen,
                            ab_run_t *run, series_t *out, ab_oommap_t *m, size_t *event, ab_diag_t *diag) {
  ab_run_opts_t ro;
  memset(&ro, 0, sizeof ro);
  ro.timeline = true;
  ro.check = b->check;
  ro.stop = b->stop;
  if (seen->status == AB_RUN_OOM) {
    ro.on_oom = ab_oommap_capture;
    ro.on_oom_ctx = m;
  } else if (seen->status == AB_RUN_OK) { /* else no map: tune saw no peak to take it at */
    ro.at_reserved = ab_oommap_capture;
    ro.at_reserved_ctx = m;
    ro.at_reserved_bytes = (uint64_t)seen->peak_reserved;
    ro.at_reserved_event = event;
  }
  AB_TRY(ab_bisect_probe(es, b, limit, &ro, run, NULL, NULL, diag));
  if (seen->status == AB_RUN_OOM) *event = run->oom.event;
  out->s = malloc((run->ntimeline ? run->ntimeline : 1) * sizeof *out->s);
  if (out->s == NULL) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  memcpy(out->s, run->timeline, run->ntimeline * sizeof *out->s);
  out->n = run->ntimeline;
  out->status = run->status;
  out->peak_reserved = run->stats.reserved_bytes.peak;
  out->oom_reserved = run->oom.reserved;
  return AB_OK;
}

static const ab_col_t timeline_cols[] = {{"trace", false},    {"config", false},         {"event", true},
                                         {"step", true},      {"allocated", true},       {"reserved", true},
                                         {"peak_allocated", true}, {"peak_reserved", true}};
#define TL_NCOLS (sizeof timeline_cols / sizeof timeline_cols[0])

static ab_status add_sample(ab_table_t *t, const char *trace, const char *config, const ab_tl_sample_t *x, bool allocated) {
  char c[6][32];
  snprintf(c[0], 32, "%" PRIu64, x->event);
  snprintf(c[1], 32, "%" PRIu32, x->step);
  snprintf(c[2], 32, "%" PRId64, x->allocated);
  snprintf(c[3], 32, "%" PRId64, x->reserved);
  snprintf(c[4], 32, "%" PRId64, x->peak_allocated);
  snprintf(c[5], 32, "%" PRId64, x->peak_reserved);
  const char *row[TL_NCOLS] = {trace, config, c[0], c[1], allocated ? c[2] : "", c[3], allocated ? c[4] : "", c[5]};
  return ab_table_add(t, row);
}

/* What the traced allocator itself held at the samples of ser: its segment decisions summed
 * up to each sample's event, and their highest since the sample before (as the engine's
 * samples hold them). A decision at_event e happened before ev[e], inside the handling of
 * ev[e], which a sample at e has not yet replayed. */
static ab_status add_recorded(ab_table_t *t, const char *trace, const ab_events_t *es, const series_t *ser) {
  int64_t held = 0, peak = 0;
  size_t k = 0;
  for (size_t j = 0; j < ser->n; j++) {
    for (; k < es->nsegs && es->segs[k].at_event < ser->s[j].event + (ser->s[j].event == es->n); k++) {
      const ab_seg_event_t *g = &es->segs[k];
      if (g->action == AB_TR_SEGMENT_ALLOC || g->action == AB_TR_SEGMENT_MAP) held += (int64_t)g->bytes;
      if (g->action == AB_TR_SEGMENT_FREE || g->action == AB_TR_SEGMENT_UNMAP) held -= (int64_t)g->bytes;
      if (held > peak) peak = held;
    }
    ab_tl_sample_t x = ser->s[j];
    x.reserved = held;
    x.peak_reserved = j == 0 ? held : peak;
    AB_TRY(add_sample(t, trace, "pytorch", &x, false));
    peak = held;
  }
  return AB_OK;
}

static ab_status write_notes(const char *dir, const char *trace, const size_t event[NCONFIGS],
                             const int64_t reserved[NCONFIGS], const bool oom[NCONFIGS], bool have[NCONFIGS],
                             ab_diag_t *diag) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tune_segments.txt", dir);
  ab_output_t out;
  AB_TRY(ab_output_open(&out, path, diag));
  fprintf(out.f, "trace %s\n", trace);
  for (int c = 0; c < NCONFIGS; c++)
    if (have[c])
      fprintf(out.f, "%s_event %zu\n%s_reserved %" PRId64 "\n%s_at %s\n", config_name[c], event[c], config_name[c],
              reserved[c], config_name[c], oom[c] ? "oom" : "peak");
  return ab_output_commit(&out, diag);
}

/* The runs of one trace, one task per configuration (ab_tune_each): its timeline and its map. */
typedef struct runs_s {
  const ab_tune_trace_t *t;
  const ab_tune_opts_t *o; /* the trace's own (opts_for) */
  const ab_tune_candidate_t *const *cand;
  const ab_tune_seen_t *seen; /* the trace's NCONFIGS */
  series_t *ser;              /* ... */
  ab_oommap_t *map;
  size_t *event;
  ab_status st[NCONFIGS];
  ab_diag_t diag[NCONFIGS];
  bool interrupted[NCONFIGS];
} runs_t;

static void figure_task(void *ctx, size_t c, ab_run_t *run) {
  runs_t *x = ctx;
  ab_bisect_opts_t b;
  ab_tune_probe_opts(x->o, x->cand[c], &b);
  x->st[c] = figure_run(x->t->es, &b, limit_of(x->o), &x->seen[c], run, &x->ser[c], &x->map[c], &x->event[c], &x->diag[c]);
  x->interrupted[c] = x->st[c] == AB_OK && x->ser[c].status == AB_RUN_INTERRUPTED;
}

/* The runs of the first n configurations of trace t, at once; the first error goes to diag. */
static ab_status run_tasks(runs_t *x, const ab_tune_trace_t *t, const ab_tune_opts_t *o, int n, bool *interrupted,
                           ab_diag_t *diag) {
  ab_tune_opts_t to = opts_for(o, t);
  x->t = t;
  x->o = &to;
  for (int c = 0; c < NCONFIGS; c++) x->st[c] = AB_OK, x->diag[c].msg[0] = '\0', x->interrupted[c] = false;
  if (!ab_tune_each(t->es, (size_t)n, &to, figure_task, x)) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  for (int c = 0; c < n; c++) {
    *interrupted |= x->interrupted[c];
    if (x->st[c] != AB_OK) {
      *diag = x->diag[c];
      if (diag->msg[0] == '\0') ab_diag_set(diag, x->st[c], "out of host memory");
      return x->st[c];
    }
  }
  return AB_OK;
}

ab_status ab_tune_figures_write(const ab_tune_trace_t *traces, size_t ntraces, const ab_tune_opts_t *o,
                                const ab_tune_candidate_t *recorded, const ab_tune_candidate_t *recommended,
                                const ab_tune_seen_t *seen, const char *dir, bool *interrupted, ab_diag_t *diag) {
  *interrupted = false;
  const ab_tune_candidate_t *cand[NCONFIGS] = {recorded, recommended};
  bool same = recommended == NULL || recommended == recorded ||
              (strcmp(recommended->strategy, recorded->strategy) == 0 && strcmp(recommended->conf, recorded->conf) == 0);
  int nruns = same ? 1 : NCONFIGS;
  size_t slots = ntraces * NCONFIGS;
  series_t *ser = calloc(slots ? slots : 1, sizeof *ser);
  ab_oommap_t *map = calloc(slots ? slots : 1, sizeof *map);
  size_t *event = calloc(slots ? slots : 1, sizeof *event);
  for (size_t k = 0; map && k < slots; k++) ab_oommap_init(&map[k]);
  ab_table_t t;
  ab_table_init(&t, timeline_cols, TL_NCOLS);
  runs_t x = {.cand = cand};
  ab_status st = ser && map && event ? AB_OK : ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  size_t worst = 0;
  /* The runs, and the worst trace: the most reserved under the configuration pasted. */
  for (size_t i = 0; i < ntraces && st == AB_OK && !*interrupted; i++) {
    size_t alike = traces[i].same; /* Note [Traces alike]: its runs are an earlier trace's */
    if (alike != i) {
      for (int c = 0; c < NCONFIGS; c++) ser[i * NCONFIGS + c] = ser[alike * NCONFIGS + c];
    } else {
      x.seen = &seen[i * NCONFIGS];
      x.ser = &ser[i * NCONFIGS];
      x.map = &map[i * NCONFIGS];
      x.event = &event[i * NCONFIGS];
      st = run_tasks(&x, &traces[i], o, nruns, interrupted, diag);
    }
    if (st != AB_OK || *interrupted) break;
    if (same) ser[i * NCONFIGS + RECOMMENDED] = ser[i * NCONFIGS + RECORDED];
    int64_t peak = ser[i * NCONFIGS + (recommended ? RECOMMENDED : RECORDED)].peak_reserved;
    if (peak > ser[worst * NCONFIGS + (recommended ? RECOMMENDED : RECORDED)].peak_reserved) worst = i;
    for (int c = 0; c < NCONFIGS && st == AB_OK; c++) {
      if (c == RECOMMENDED && recommended == NULL) continue;
      const series_t *y = &ser[i * NCONFIGS + c];
      for (size_t j = 0; j < y->n && st == AB_OK; j++) st = add_sample(&t, traces[i].name, config_name[c], &y->s[j], true);
    }
    if (st == AB_OK && traces[i].es->nsegs) st = add_recorded(&t, traces[i].name, traces[i].es, &ser[i * NCONFIGS]);
    if (st != AB_OK && diag->msg[0] == '\0') ab_diag_set(diag, st, "out of host memory");
  }
  /* The maps of the worst trace, made by the runs of the first trace alike it. */
  size_t w = ntraces ? traces[worst].same * NCONFIGS : 0;
  size_t ev[NCONFIGS] = {0};
  int64_t reserved[NCONFIGS] = {0};
  bool oom[NCONFIGS] = {false}, have[NCONFIGS] = {false};
  for (int c = 0; st == AB_OK && !*interrupted && c < NCONFIGS && ntraces; c++) {
    int made = same ? RECORDED : c; /* the run that made it */
    if (c == RECOMMENDED && recommended == NULL) continue;
    const series_t *y = &ser[w + made];
    have[c] = map[w + made].captured && map[w + made].walk_status == AB_OK;
    oom[c] = y->status == AB_RUN_OOM;
    ev[c] = event[w + made];
    reserved[c] = oom[c] ? (int64_t)y->oom_reserved : y->peak_reserved;
  }
  if (st == AB_OK && !*interrupted) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tune_timeline.csv", dir);
    st = ab_table_write_file(&t, path, diag);
    for (int c = 0; c < NCONFIGS && st == AB_OK; c++) {
      snprintf(path, sizeof path, "%s/tune_segments_%s.csv", dir, config_name[c]);
      if (have[c]) st = ab_oomreport_write_file(&map[w + (same ? RECORDED : c)], path, NULL, diag);
      else remove(path); /* an older run's map would be taken for this one's */
    }
    if (st == AB_OK) st = write_notes(dir, traces[worst].name, ev, reserved, oom, have, diag);
  }
  for (size_t i = 0; ser && i < ntraces; i++)
    if (traces[i].same == i) free(ser[i * NCONFIGS].s), free(same ? NULL : ser[i * NCONFIGS + 1].s);
  free(ser);
  for (size_t k = 0; map && k < slots; k++) ab_oommap_free(&map[k]);
  free(map);
  free(event);
  ab_table_free(&t);
  return st;
}
