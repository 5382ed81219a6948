#include "harness/run/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/device/device_open.h"
#include "harness/run/supervise.h"
#include "strategies/registry.h"

/* The search starts from half a byte up, the middle of the fractions that truncate to the
 * cap; 17 digits always find it. */
void ab_pipeline_cap_fraction(uint64_t cap, uint64_t total, char *buf, size_t size) {
  double middle = ((double)cap + 0.5) / (double)total;
  for (int digits = 1; digits < 17; digits++) {
    snprintf(buf, size, "%.*g", digits, middle);
    if ((uint64_t)(strtod(buf, NULL) * (double)total) == cap) return;
  }
  snprintf(buf, size, "%.17g", middle);
}

/* The user's conf with the cap as a fraction of the device; a cap of the whole card is a
 * fraction of 1, which PyTorch reads as no cap. */
ab_status ab_pipeline_conf(const ab_pipeline_t *p, uint64_t total, char *buf, size_t size, ab_diag_t *diag) {
  if (p->memory_cap == 0) {
    snprintf(buf, size, "%s", p->conf ? p->conf : "");
    return AB_OK;
  }
  char fraction[32] = "1";
  if (p->memory_cap < total) ab_pipeline_cap_fraction(p->memory_cap, total, fraction, sizeof fraction);
  int n = snprintf(buf, size, "%s%sper_process_memory_fraction:%s", p->conf ? p->conf : "",
                   p->conf && p->conf[0] ? "," : "", fraction);
  if (n < 0 || (size_t)n >= size) return ab_diag_set(diag, AB_ERR_INVALID, "-c '%s': too long", p->conf);
  return AB_OK;
}

ab_status ab_pipeline_open(const ab_pipeline_t *p, ab_world_t *w, ab_diag_t *diag) {
  memset(w, 0, sizeof *w);
  AB_TRY(ab_device_open(p->device ? p->device : "auto", &p->dev, &w->dev, diag));
  char capped[1200];
  const char *conf = p->conf;
  ab_status st = AB_OK;
  if (p->memory_cap) {
    st = ab_pipeline_conf(p, w->dev->total_bytes, capped, sizeof capped, diag);
    conf = capped;
  }
  if (st == AB_OK) st = ab_strategy_create(p->strategy, w->dev, conf, &w->s, diag);
  if (st == AB_OK && p->wrap) {
    st = p->wrap(p->wrap_ctx, &w->s, diag);
    if (st != AB_OK) ab_strategy_destroy(w->s);
  }
  if (st != AB_OK) {
    ab_device_close(w->dev, NULL);
    memset(w, 0, sizeof *w);
  }
  return st;
}

void ab_pipeline_leave(ab_world_t *w) {
  if (w->dev == NULL) return;
  snprintf(w->device, sizeof w->device, "%s", w->dev->name);
  w->kind = w->dev->kind;
  w->total_bytes = w->dev->total_bytes;
  w->held_peak = w->dev->held_peak;
}

ab_status ab_pipeline_close(ab_world_t *w, ab_run_t *run, ab_diag_t *diag) {
  ab_strategy_destroy(w->s);
  w->s = NULL;
  if (w->dev == NULL) return AB_OK;
  ab_pipeline_leave(w);
  ab_diag_t leak = {""};
  ab_status st = ab_device_close(w->dev, &leak);
  w->dev = NULL;
  if (st != AB_OK && run != NULL && run->status != AB_RUN_ERROR) {
    run->status = AB_RUN_ERROR;
    run->error = st;
    snprintf(run->message, sizeof run->message, "%s", leak.msg);
  }
  if (st != AB_OK && diag != NULL) *diag = leak;
  return st;
}

/* What a check in a process of its own carries besides ab_supervise_job_t, each way. */
typedef struct check_args_s {
  uint64_t memory_cap;
} check_args_t;
typedef struct check_reply_s {
  char device[96];
  int32_t kind;
  uint64_t total_bytes, held_peak;
} check_reply_t;

/* ab_pipeline_check in a child (supervise.h); p->wrap is NULL. */
static ab_status check_apart(const ab_pipeline_t *p, ab_world_t *closed, ab_diag_t *diag) {
  check_args_t a = {p->memory_cap};
  ab_supervise_job_t j = {.unit = AB_UNIT_CHECK, .strategy = p->strategy, .conf = p->conf, .device = p->device,
                          .dev = p->dev, .args = &a, .args_bytes = sizeof a};
  ab_supervise_reply_t r;
  bool stopped;
  ab_status ended = ab_supervise_run(&j, &r, &stopped, diag);
  /* The library took its process down as it was loaded (a crash in a constructor or its init,
   * a deadline passed): not the user's arguments, and its run fails the same way, recorded as
   * an error row (AB_ERR_IO, where a refusal of the arguments is AB_ERR_INVALID). */
  if (ended != AB_OK) return ended == AB_ERR_INVALID ? AB_ERR_IO : ended;
  check_reply_t c;
  ab_supervise_get(&r.in, &c, sizeof c);
  if (r.status != AB_OK) {
    ab_diag_set(diag, r.status, "%s", r.msg);
  } else {
    if (diag) snprintf(diag->msg, sizeof diag->msg, "%s", r.msg); /* the strategy's note */
    if (closed) {
      memset(closed, 0, sizeof *closed);
      snprintf(closed->device, sizeof closed->device, "%s", c.device);
      closed->kind = (ab_device_kind_t)c.kind;
      closed->total_bytes = c.total_bytes;
      closed->held_peak = c.held_peak;
    }
  }
  ab_supervise_release(&r);
  return r.status;
}

bool ab_pipeline_check_child(ab_supervise_child_t *c) {
  const check_args_t *a = c->job.args;
  if (c->job.args_bytes != sizeof *a) return false;
  ab_pipeline_t p = {.device = c->job.device, .dev = c->job.dev, .strategy = c->job.strategy, .conf = c->job.conf,
                     .memory_cap = a->memory_cap};
  ab_world_t closed;
  ab_diag_t diag = {""};
  check_reply_t reply;
  memset(&reply, 0, sizeof reply);
  ab_status st = ab_pipeline_check(&p, &closed, &diag);
  if (st == AB_OK) {
    snprintf(reply.device, sizeof reply.device, "%s", closed.device);
    reply.kind = (int32_t)closed.kind;
    reply.total_bytes = closed.total_bytes;
    reply.held_peak = closed.held_peak;
  }
  ab_supervise_reply(c, st, diag.msg);
  ab_supervise_put(&c->out, &reply, sizeof reply);
  return ab_supervise_reply_end(c);
}

/* PyTorch takes per_process_memory_fraction:0 (every allocation then fails), and so does the
 * strategy; a run refuses a cap of 0 bytes, as --cap 0 is refused: its OOMs would be explained
 * against the card, since a memory_cap of 0 says there is none. */
ab_status ab_pipeline_runnable(const ab_pipeline_t *p, const ab_world_t *w, ab_diag_t *diag) {
  if (!w->s->cap_window || w->s->memory_cap != 0) return AB_OK;
  return ab_diag_set(diag, AB_ERR_INVALID,
                     "-c '%s': per_process_memory_fraction is a cap of 0 bytes on %s (%llu bytes): no allocation could "
                     "be served (expected a fraction of at least 1/%llu)",
                     p->conf ? p->conf : "", w->dev->name, (unsigned long long)w->dev->total_bytes,
                     (unsigned long long)w->dev->total_bytes);
}

ab_status ab_pipeline_check(const ab_pipeline_t *p, ab_world_t *closed, ab_diag_t *diag) {
  /* Loading a library runs its constructors: in a process of its own (supervise.h). */
  if (p->wrap == NULL && ab_supervise_apart(p->strategy)) return check_apart(p, closed, diag);
  ab_world_t w;
  AB_TRY(ab_pipeline_open(p, &w, diag));
  ab_status st = ab_pipeline_runnable(p, &w, diag);
  ab_pipeline_close(&w, NULL, NULL);
  if (closed) *closed = w;
  return st;
}
