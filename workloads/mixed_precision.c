/* mixed_precision.c: transformer training with fp32 master weights and half working copies
 * (the master-weights scheme of Micikevicius et al. as Apex O2 and Megatron-LM run it), at
 * fixed shapes.
 *
 * Size model (peers.md §6.3 and §8.1; the transformer's tensors are transformer.h's, with
 * every parameter, activation and gradient in the half dtype and the logits upcast to fp32
 * for the loss):
 *   1. model.cuda() makes the parameters in fp32; model.half() replaces them one by one by
 *      their fp16/bf16 cast (the working copies); the fp32 master copies are then made from
 *      them, one per parameter (tagged optimizer state: ZeRO's K counts them).
 *   2. Each step: forward and backward in the half dtype, the loss scaled (dynamic loss
 *      scaling, autograd.h's model, when scaling is on): half gradients accumulate in
 *      .grad.
 *   3. Unscaling into the master gradients: per parameter in order, an fp32 gradient is made
 *      from the half one (cast, unscaled and checked for inf/NaN against found_inf), then
 *      the half gradient is freed: 4-byte tensors made while 2-byte ones die, one for one.
 *   4. On overflow the step is skipped: the fp32 gradients are dropped, the scale backs off.
 *      Otherwise Adam updates the masters (its state made at the first step that runs) and
 *      the working copies are re-cast from the masters in place.
 *   5. The fp32 gradients are freed (set_to_none), then the step's locals.
 * Model state at the optimizer step: 2 (working copy) + 4 (master) + 4 (fp32 gradient) + 8
 * (Adam) bytes per parameter, and 2 more for the half gradients while backward runs: the
 * 20 bytes Megatron-LM lists for fp16 parameters with fp16 gradients (peers.md §6.3).
 */
#include "workloads/mixed_precision.h"

#include <stdlib.h>

#include "workloads/transformer.h"

typedef struct args_s {
  ab_transformer_cfg_t cfg;
  uint64_t batch, seq, steps;
  int dtype;
  bool scaling;
  double grad_max, grad_sigma, init_scale;
} args_t;

static const char *const dtypes[] = {"fp16", "bf16", NULL};

static ab_status parse(const char *text, args_t *a, ab_diag_t *diag) {
  ab_kvlist_t p;
  AB_TRY(ab_kv_parse("-w mixed-precision", text, '=', &p, diag));
  a->cfg = ab_transformer_defaults();
  a->batch = 8;
  a->seq = 1024;
  a->steps = 20;
  a->dtype = 0;
  a->scaling = true;
  a->grad_max = 6;
  a->grad_sigma = 0.25;
  a->init_scale = 65536;
  AB_TRY(ab_transformer_parse(&p, &a->cfg, diag));
  AB_TRY(ab_kv_get_u64(&p, "batch", 1, 1 << 20, &a->batch, diag));
  AB_TRY(ab_kv_get_u64(&p, "seq", 1, 1 << 20, &a->seq, diag));
  AB_TRY(ab_kv_get_u64(&p, "steps", 1, 1000000, &a->steps, diag));
  AB_TRY(ab_kv_get_choice(&p, "dtype", dtypes, &a->dtype, diag));
  AB_TRY(ab_kv_get_bool(&p, "scaling", &a->scaling, diag));
  AB_TRY(ab_kv_get_double(&p, "grad_max", 0, 1e30, &a->grad_max, diag));
  AB_TRY(ab_kv_get_double(&p, "grad_sigma", 0, 10, &a->grad_sigma, diag));
  AB_TRY(ab_kv_get_double(&p, "init_scale", 1, 1e30, &a->init_scale, diag));
  AB_TRY(ab_kv_finish(&p, AB_TRANSFORMER_KEYS ", batch, seq, steps, dtype, scaling, grad_max, grad_sigma, init_scale",
                      diag));
  a->cfg.compute = a->dtype == 0 ? AB_F16 : AB_BF16;
  a->cfg.autocast = false;
  return ab_transformer_check_step(&p, &a->cfg, a->batch * a->seq, a->seq, "batch,seq", diag);
}

static ab_status generate(const char *text, uint64_t seed, ab_events_t *out, ab_diag_t *diag) {
  args_t a;
  AB_TRY(parse(text, &a, diag));
  ab_tape_t tape;
  ab_tape_init(&tape, out, a.cfg.workspace_bytes);
  ab_transformer_t m;
  AB_TRY(ab_transformer_init(&m, &a.cfg, &tape, diag));
  size_t n = m.nparams;
  ab_optim_t opt;
  uint32_t *master = malloc(n * sizeof *master), *grad32 = malloc(n * sizeof *grad32);
  ab_status st = master && grad32 ? ab_optim_init(&opt, AB_OPTIM_ADAM, false, n, diag)
                                  : ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  if (st != AB_OK) {
    free(master);
    free(grad32);
    ab_transformer_free(&m);
    return st;
  }
  ab_dtype_t dt = a.cfg.compute;
  uint64_t hb = ab_dtype_bytes(dt);
  ab_scaler_t scaler;
  ab_scaler_init(&scaler, a.scaling, dt, a.init_scale, a.grad_max, a.grad_sigma, seed);

  ab_transformer_create_params(&m, AB_F32);
  for (size_t p = 0; p < n; p++) {
    uint32_t half = ab_tape_new(&tape, m.numel[p] * hb, AB_TAG_PARAM);
    ab_tape_unary(&tape, AB_K_CAST, m.weight[p], half, m.numel[p], AB_F32, dt);
    ab_tape_drop(&tape, m.weight[p]);
    m.weight[p] = half;
  }
  for (size_t p = 0; p < n; p++) {
    master[p] = ab_tape_new(&tape, m.numel[p] * 4, AB_TAG_OPTIM);
    ab_tape_unary(&tape, AB_K_CAST, m.weight[p], master[p], m.numel[p], dt, AB_F32);
  }
  for (uint64_t i = 0; i < a.steps && !out->failed; i++) { /* a failed stream stops here (events.h) */
    ab_events_step(out);
    ab_transformer_step_t step;
    ab_transformer_forward_backward(&m, a.batch, a.seq, &scaler, &step);
    bool skip = ab_scaler_begin_unscale(&scaler, &tape);
    for (size_t p = 0; p < n; p++) {
      grad32[p] = ab_tape_new(&tape, m.numel[p] * 4, AB_TAG_GRAD);
      ab_tape_unary(&tape, AB_K_CAST, m.grad[p], grad32[p], m.numel[p], dt, AB_F32);
      if (scaler.found_inf != AB_NO_TENSOR) {
        ab_kernel_t check = {.op = AB_K_SCALE_CHECK, .dtype = {AB_F32, AB_F32}, .nbuf = 2,
                             .buf = {grad32[p], scaler.found_inf}, .n = m.numel[p]};
        ab_events_kernel(out, &check, 0);
      }
      ab_tape_clear(&tape, &m.grad[p]);
    }
    if (!skip) {
      ab_optim_step(&opt, &tape, master, grad32, m.numel, AB_F32);
      for (size_t p = 0; p < n; p++) ab_tape_unary(&tape, AB_K_CAST, master[p], m.weight[p], m.numel[p], AB_F32, dt);
    }
    ab_scaler_update(&scaler, &tape, skip);
    for (size_t p = 0; p < n; p++) ab_tape_drop(&tape, grad32[p]);
    ab_transformer_end_step(&m, &step);
  }
  ab_optim_free(&opt);
  free(master);
  free(grad32);
  ab_transformer_free(&m);
  ab_tape_free(&tape);
  return AB_OK;
}

const ab_workload_t ab_workload_mixed_precision = {
    .name = "mixed-precision",
    .summary = "fp32 master weights, fp16/bf16 working copies, loss scaling with skipped steps; fixed shapes",
    .params_help = AB_TRANSFORMER_HELP
    "  batch=N, seq=N sequences per step and their length (default 8, 1024)\n"
    "  steps=N        training steps (default 20)\n"
    "  dtype=fp16|bf16  the working copies' dtype (default fp16)\n"
    "  scaling=BOOL   dynamic loss scaling (default true)\n"
    "  grad_max=X, grad_sigma=X  a step's largest gradient, log-normal; the step overflows when it\n"
    "                 times the scale passes the dtype's largest value (default 6, 0.25)\n"
    "  init_scale=X   the initial loss scale (default 65536)\n",
    .quick_args = "steps=5",
    .bench_args = "",
    .generate = generate,
    .scale = (const ab_scale_key_t[]){{"steps", 1}, {"layers", 1}, {NULL, 0}},
};
