#include "workloads/autograd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ab_tape_init(ab_tape_t *t, ab_events_t *es, uint64_t cublas_bytes) {
  memset(t, 0, sizeof *t);
  t->es = es;
  t->cublas_bytes = cublas_bytes;
  for (size_t i = 0; i < sizeof t->workspace / sizeof t->workspace[0]; i++) t->workspace[i] = AB_NO_TENSOR;
}

void ab_tape_free(ab_tape_t *t) {
  free(t->refs);
  t->refs = NULL;
  t->cap = 0;
}

uint32_t ab_tape_new_on(ab_tape_t *t, uint64_t bytes, ab_tag_t tag, unsigned stream) {
  uint32_t id = ab_events_alloc(t->es, bytes, stream, tag);
  if (id >= t->cap) {
    uint32_t cap = t->cap ? t->cap * 2 : 4096;
    while (cap <= id) cap *= 2;
    uint16_t *grown = realloc(t->refs, cap * sizeof *grown);
    if (grown == NULL) {
      t->es->failed = true;
      return id;
    }
    memset(grown + t->cap, 0, (cap - t->cap) * sizeof *grown);
    t->refs = grown;
    t->cap = cap;
  }
  t->refs[id] = 1;
  return id;
}

uint32_t ab_tape_new(ab_tape_t *t, uint64_t bytes, ab_tag_t tag) { return ab_tape_new_on(t, bytes, tag, 0); }

uint32_t ab_tape_hold(ab_tape_t *t, uint32_t id) {
  if (id < t->cap && t->refs[id] > 0) t->refs[id]++;
  return id;
}

void ab_tape_drop(ab_tape_t *t, uint32_t id) {
  if (id >= t->cap || t->refs[id] == 0) return;
  if (--t->refs[id] == 0) ab_events_free_id(t->es, id);
}

void ab_tape_clear(ab_tape_t *t, uint32_t *id) {
  ab_tape_drop(t, *id);
  *id = AB_NO_TENSOR;
}

/* ---- kernels ------------------------------------------------------------------------------ */

void ab_tape_gemm(ab_tape_t *t, uint32_t a, uint32_t b, uint32_t c, uint64_t m, uint64_t n, uint64_t k, ab_dtype_t in,
                  ab_dtype_t out) {
  if (t->cublas_bytes > 0 && t->workspace[t->thread] == AB_NO_TENSOR) {
    t->workspace[t->thread] = ab_tape_new(t, t->cublas_bytes, AB_TAG_WORKSPACE);
    if (t->thread == 0) t->workspace[2] = ab_tape_new(t, AB_CUBLASLT_WORKSPACE_BYTES, AB_TAG_WORKSPACE);
  }
  ab_kernel_t kd = {
      .op = AB_K_GEMM, .dtype = {(uint8_t)in, (uint8_t)out}, .nbuf = 3, .buf = {a, b, c}, .m = m, .n = n, .k = k};
  ab_events_kernel(t->es, &kd, 0);
}

void ab_tape_unary(ab_tape_t *t, ab_kernel_op_t op, uint32_t in, uint32_t out, uint64_t n, ab_dtype_t din,
                   ab_dtype_t dout) {
  ab_kernel_t kd = {.op = (uint8_t)op, .dtype = {(uint8_t)din, (uint8_t)dout}, .nbuf = 2, .buf = {in, out}, .n = n};
  ab_events_kernel(t->es, &kd, 0);
}

void ab_tape_move(ab_tape_t *t, ab_kernel_op_t op, uint32_t src, uint32_t dst, uint64_t bytes, unsigned stream) {
  ab_kernel_t kd = {.op = (uint8_t)op, .nbuf = 2, .buf = {src, dst}, .n = bytes};
  ab_events_kernel(t->es, &kd, stream);
}

/* ---- optimizers ---------------------------------------------------------------------------- */

ab_status ab_optim_init(ab_optim_t *o, ab_optim_kind_t kind, bool momentum, size_t n, ab_diag_t *diag) {
  memset(o, 0, sizeof *o);
  o->kind = kind;
  o->momentum = momentum;
  o->n = n;
  o->exp_avg = malloc((n ? n : 1) * sizeof *o->exp_avg);
  o->exp_avg_sq = malloc((n ? n : 1) * sizeof *o->exp_avg_sq);
  if (o->exp_avg == NULL || o->exp_avg_sq == NULL) {
    ab_optim_free(o);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  for (size_t i = 0; i < n; i++) o->exp_avg[i] = o->exp_avg_sq[i] = AB_NO_TENSOR;
  return AB_OK;
}

void ab_optim_free(ab_optim_t *o) {
  free(o->exp_avg);
  free(o->exp_avg_sq);
  memset(o, 0, sizeof *o);
}

void ab_optim_step(ab_optim_t *o, ab_tape_t *t, const uint32_t *param, const uint32_t *grad, const uint64_t *numel,
                   ab_dtype_t gdtype) {
  uint64_t gb = ab_dtype_bytes(gdtype);
  if (o->kind == AB_OPTIM_SGD) {
    if (!o->momentum) return;
    for (size_t i = 0; i < o->n; i++)
      if (o->exp_avg[i] == AB_NO_TENSOR) {
        o->exp_avg[i] = ab_tape_new(t, numel[i] * 4, AB_TAG_OPTIM);
        ab_tape_move(t, AB_K_COPY, grad[i], o->exp_avg[i], numel[i] * gb, 0);
      }
    return;
  }
  /* _init_group: the state of every parameter, in order, before the update. */
  for (size_t i = 0; i < o->n; i++)
    if (o->exp_avg[i] == AB_NO_TENSOR) {
      o->exp_avg[i] = ab_tape_new(t, numel[i] * 4, AB_TAG_OPTIM);
      o->exp_avg_sq[i] = ab_tape_new(t, numel[i] * 4, AB_TAG_OPTIM);
    }
  /* _multi_tensor_adam: exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs), all at once. */
  uint32_t first = t->es->nids;
  for (size_t i = 0; i < o->n; i++) ab_tape_new(t, numel[i] * 4, AB_TAG_TEMP);
  for (size_t i = 0; i < o->n; i++) {
    ab_kernel_t kd = {.op = AB_K_ADAM,
                      .dtype = {(uint8_t)gdtype, AB_F32},
                      .nbuf = 4,
                      .buf = {param[i], grad[i], o->exp_avg[i], o->exp_avg_sq[i]},
                      .n = numel[i]};
    ab_events_kernel(t->es, &kd, 0);
  }
  for (size_t i = 0; i < o->n; i++) ab_tape_drop(t, first + (uint32_t)i);
}

/* ---- loss scaling -------------------------------------------------------------------------- */

void ab_scaler_init(ab_scaler_t *s, bool enabled, ab_dtype_t dtype, double init_scale, double grad_max,
                    double grad_sigma, uint64_t seed) {
  memset(s, 0, sizeof *s);
  s->enabled = enabled;
  s->scale = init_scale;
  s->growth_factor = 2.0;
  s->backoff_factor = 0.5;
  s->growth_interval = 2000;
  s->grad_max = grad_max;
  s->grad_sigma = grad_sigma;
  s->finite_max = dtype == AB_F16 ? 65504.0 : 3.3895313892515355e38;
  /* Its own stream of draws, so that switching scaling on does not move the workload's. */
  s->rng = ab_rng_seed(seed ^ 0x5CA1E5CA1E5CA1E5ULL);
  s->scale_t = s->tracker_t = s->inv_scale = s->found_inf = AB_NO_TENSOR;
}

uint32_t ab_scaler_scale_loss(ab_scaler_t *s, ab_tape_t *t, uint32_t loss) {
  if (!s->enabled) return ab_tape_hold(t, loss);
  if (s->scale_t == AB_NO_TENSOR) {
    s->scale_t = ab_tape_new(t, 4, AB_TAG_OTHER);
    s->tracker_t = ab_tape_new(t, 4, AB_TAG_OTHER);
  }
  return ab_tape_new(t, 4, AB_TAG_TEMP);
}

bool ab_scaler_begin_unscale(ab_scaler_t *s, ab_tape_t *t) {
  if (!s->enabled) return false;
  /* inv_scale = scale.double().reciprocal().float(): a double on the way. */
  uint32_t dbl = ab_tape_new(t, 8, AB_TAG_TEMP);
  s->inv_scale = ab_tape_new(t, 4, AB_TAG_TEMP);
  ab_tape_drop(t, dbl);
  s->found_inf = ab_tape_new(t, 4, AB_TAG_TEMP);
  double g = s->grad_max * exp(s->grad_sigma * ab_rng_normal(&s->rng));
  return g * s->scale > s->finite_max;
}

bool ab_scaler_unscale(ab_scaler_t *s, ab_tape_t *t, size_t n, const uint32_t *grad, const uint64_t *numel,
                       ab_dtype_t dtype) {
  if (!s->enabled) return false;
  bool overflow = ab_scaler_begin_unscale(s, t);
  for (size_t i = 0; i < n; i++) {
    if (grad[i] == AB_NO_TENSOR) continue;
    ab_kernel_t kd = {.op = AB_K_SCALE_CHECK,
                      .dtype = {(uint8_t)dtype, (uint8_t)dtype},
                      .nbuf = 2,
                      .buf = {grad[i], s->found_inf},
                      .n = numel[i]};
    ab_events_kernel(t->es, &kd, 0);
  }
  return overflow;
}

void ab_scaler_update(ab_scaler_t *s, ab_tape_t *t, bool overflowed) {
  if (!s->enabled) return;
  if (overflowed) {
    s->scale *= s->backoff_factor;
    s->clean_steps = 0;
    s->skipped++;
  } else if (++s->clean_steps == s->growth_interval) {
    s->scale *= s->growth_factor;
    s->clean_steps = 0;
  }
  ab_tape_clear(t, &s->found_inf);
  ab_tape_clear(t, &s->inv_scale);
}
