/* snapshot_frames.c: stack frames for written snapshots (snapshot_frames.h). */
#include "tests/snapshot_frames.h"

#include <stdio.h>
#include <stdlib.h>

#include "kernels/device/device_open.h"
#include "harness/run/engine.h"
#include "strategies/common/adaptor_trace.h"
#include "strategies/registry.h"
#include "workloads/workload.h"

#define POOL_FRAMES 20000
#define POOL_FILES 300
#define POOL_NAMES 4000

void ab_frames_init(ab_frames_t *f, uint64_t seed) {
  f->rng = ab_rng_seed(seed);
  f->pool = POOL_FRAMES;
  f->frame_memo = calloc(POOL_FRAMES, sizeof *f->frame_memo);
  f->file_memo = calloc(POOL_FILES, sizeof *f->file_memo);
  f->name_memo = calloc(POOL_NAMES, sizeof *f->name_memo);
  ab_map_init(&f->list_of);
}

void ab_frames_free(ab_frames_t *f) {
  free(f->frame_memo);
  free(f->file_memo);
  free(f->name_memo);
  ab_map_free(&f->list_of);
}

/* A string of the pool, written whole once and referred to after. */
static void pooled_str(ab_pkw_t *w, uint32_t *memo, const char *fmt, unsigned i) {
  if (memo[i]) {
    ab_pkw_get(w, memo[i] - 1);
    return;
  }
  char s[128];
  int n = snprintf(s, sizeof s, fmt, i, i * 7919u % 1000u);
  ab_pkw_str(w, s, (size_t)n);
  memo[i] = ab_pkw_memoize(w) + 1;
}

static void frame(ab_frames_t *f, ab_pkw_t *w) {
  /* Frames near the top of the stack repeat most: a skewed draw. */
  double u = ab_rng_uniform(&f->rng);
  unsigned i = (unsigned)((double)f->pool * u * u * u);
  if (f->frame_memo[i]) {
    ab_pkw_get(w, f->frame_memo[i] - 1);
    return;
  }
  ab_pkw_dict_begin(w);
  ab_pkw_name(w, "filename");
  pooled_str(w, f->file_memo, "/usr/lib/python3.12/site-packages/torch/nn/modules/module_%u_%u.py", i % POOL_FILES);
  ab_pkw_name(w, "line");
  ab_pkw_int(w, (int64_t)(i * 31u % 4000u) + 1);
  ab_pkw_name(w, "name");
  pooled_str(w, f->name_memo, "forward_%u_%u", i % POOL_NAMES);
  ab_pkw_dict_end(w);
  f->frame_memo[i] = ab_pkw_memoize(w) + 1;
}

void ab_frames_write(void *ctx, ab_pkw_t *w, const ab_trace_rec_t *r) {
  ab_frames_t *f = ctx;
  uint64_t list = 0;
  bool freeing = r->action == AB_TR_FREE_REQUESTED || r->action == AB_TR_FREE_COMPLETED;
  if (freeing && r->addr && ab_map_get(&f->list_of, r->addr, &list)) {
    ab_pkw_get(w, (uint32_t)(list - 1));
    if (r->action == AB_TR_FREE_COMPLETED) ab_map_take(&f->list_of, r->addr, NULL);
    return;
  }
  ab_pkw_list_begin(w);
  unsigned depth = (unsigned)ab_rng_range(&f->rng, 4, 12);
  for (unsigned d = 0; d < depth; d++) frame(f, w);
  ab_pkw_list_end(w);
  uint32_t idx = ab_pkw_memoize(w);
  if (r->action == AB_TR_ALLOC && r->addr && idx != UINT32_MAX) ab_map_put(&f->list_of, r->addr, (uint64_t)idx + 1);
}

static void capture(void *ctx, ab_strategy_t *s, const ab_run_t *run) {
  (void)ctx;
  (void)run;
  ab_adaptor_trace_capture(s);
}

/* es run through caching on the simulated H200, its log written at path with frames(ctx, ...). */
static ab_status run_and_write(ab_events_t *es, ab_snapshot_frames_fn frames, void *ctx, const char *path, size_t *records,
                               ab_diag_t *diag) {
  ab_run_t run;
  ab_device_t *dev = NULL;
  ab_strategy_t *s = NULL;
  ab_trace_log_t log;
  ab_trace_log_init(&log);
  ab_status st = ab_run_prepare(&run, es);
  if (st == AB_OK) st = ab_device_open("sim:h200", NULL, &dev, diag);
  if (st == AB_OK) st = ab_strategy_create("caching", dev, "", &s, diag);
  if (st == AB_OK) st = ab_adaptor_trace_create(s, &log, &s);
  if (st == AB_OK) {
    ab_run_opts_t ro = ab_run_defaults();
    ro.timeline = ro.time_calls = ro.kernels = false;
    ro.at_end = capture;
    st = ab_engine_replay(es, s, &ro, &run);
  }
  if (st == AB_OK) {
    st = ab_snapshot_write_frames(path, &log, NULL, 0, "", true, frames, ctx, diag);
    if (records) *records = log.n;
  }
  if (s) ab_strategy_destroy(s);
  if (dev) ab_device_close(dev, NULL);
  ab_trace_log_free(&log);
  ab_run_release(&run);
  return st;
}

ab_status ab_frames_export(const char *spec, bool frames, const char *path, size_t *records, ab_diag_t *diag) {
  ab_events_t es;
  AB_TRY(ab_workload_build(spec, 42, &es, diag));
  ab_frames_t f;
  ab_frames_init(&f, 7);
  ab_status st = run_and_write(&es, frames ? ab_frames_write : NULL, &f, path, records, diag);
  ab_frames_free(&f);
  ab_events_free(&es);
  return st;
}

ab_status ab_frames_write_back(ab_events_t *es, const char *path, ab_diag_t *diag) {
  ab_snapshot_stacks_t x;
  ab_snapshot_stacks_init(&x, es);
  ab_status st = run_and_write(es, ab_snapshot_write_stacks, &x, path, NULL, diag);
  ab_snapshot_stacks_free(&x);
  return st;
}
