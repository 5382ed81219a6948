/* dynamic_shapes.c: transformer training with the batch shape drawn per step.
 *
 * Size model (the tensors and their lives are transformer.h's; sources there and in
 * peers.md §8.2):
 *   1. The parameters, fp32, in module order (model.cuda()).
 *   2. Each step: a sequence length T from the distribution (fixed: seq_max; uniform:
 *      seq_min..seq_max; lognormal: seq_median * exp(seq_sigma z), clamped to the bounds),
 *      then a token budget uniform in tokens_min..tokens_max, batch = budget / T (at least
 *      1): N = batch * T tokens, the shape variable-length pretraining feeds.
 *   3. The input ids and targets (int64), forward, loss and backward (transformer.h) under
 *      the precision: fp32; bf16 autocast; fp16 autocast with torch.amp.GradScaler (the
 *      loss scaled, gradients unscaled and checked, the step skipped on overflow).
 *   4. optimizer.step(): AdamW (Adam's memory) or SGD, foreach; state made lazily at the
 *      first step that runs (autograd.h).
 *   5. optimizer.zero_grad(set_to_none=True) frees the gradients, then the step's locals
 *      (ids, targets, logits, loss) go; the cuBLAS workspace lives on.
 * Calibration (tests/workloads/workloads_test.c): the defaults are gpu_measurements.md's transformer
 * (184 M parameters, bf16 autocast, AdamW, 40 steps, tokens 8192..32768, sequence 64..2048);
 * PyTorch peaked at 32.0 GB allocated there. The peak comes at log_softmax's backward of the
 * largest step: saved activations (36 bytes per token per d_model per block), logits
 * (2 bytes per token per vocabulary entry) and three fp32 N x vocab tensors, over the model
 * state (16 bytes per parameter).
 */
#include "workloads/dynamic_shapes.h"

#include <math.h>

#include "kernels/base/rng.h"
#include "workloads/transformer.h"

typedef struct args_s {
  ab_transformer_cfg_t cfg;
  int precision, optimizer, seq_dist;
  bool momentum;
  uint64_t steps, tokens_min, tokens_max, seq_min, seq_max, seq_median;
  double seq_sigma, grad_max, grad_sigma, init_scale;
} args_t;

static const char *const precisions[] = {"fp32", "bf16", "fp16", NULL};
static const char *const optimizers[] = {"adamw", "adam", "sgd", NULL};
static const char *const seq_dists[] = {"uniform", "fixed", "lognormal", NULL};

/* The item to blame for a bad pair of keys: the first if it was given, else the second. */
static ab_kv_t *given(ab_kvlist_t *p, const char *first, const char *second) {
  ab_kv_t *item = ab_kv_get(p, first);
  return item ? item : ab_kv_get(p, second);
}

static ab_status parse(const char *text, args_t *a, ab_diag_t *diag) {
  ab_kvlist_t p;
  AB_TRY(ab_kv_parse("-w dynamic-shapes", text, '=', &p, diag));
  a->cfg = ab_transformer_defaults();
  a->precision = 1;
  a->optimizer = 0;
  a->seq_dist = 0;
  a->momentum = true;
  a->steps = 40;
  a->tokens_min = 8192;
  a->tokens_max = 32768;
  a->seq_min = 64;
  a->seq_max = 2048;
  a->seq_median = 512;
  a->seq_sigma = 0.75;
  a->grad_max = 6;
  a->grad_sigma = 0.25;
  a->init_scale = 65536;
  AB_TRY(ab_transformer_parse(&p, &a->cfg, diag));
  AB_TRY(ab_kv_get_choice(&p, "precision", precisions, &a->precision, diag));
  AB_TRY(ab_kv_get_choice(&p, "optimizer", optimizers, &a->optimizer, diag));
  AB_TRY(ab_kv_get_bool(&p, "momentum", &a->momentum, diag));
  AB_TRY(ab_kv_get_u64(&p, "steps", 1, 1000000, &a->steps, diag));
  AB_TRY(ab_kv_get_u64(&p, "tokens_min", 1, 1ULL << 24, &a->tokens_min, diag));
  AB_TRY(ab_kv_get_u64(&p, "tokens_max", 1, 1ULL << 24, &a->tokens_max, diag));
  AB_TRY(ab_kv_get_choice(&p, "seq", seq_dists, &a->seq_dist, diag));
  AB_TRY(ab_kv_get_u64(&p, "seq_min", 1, 1ULL << 20, &a->seq_min, diag));
  AB_TRY(ab_kv_get_u64(&p, "seq_max", 1, 1ULL << 20, &a->seq_max, diag));
  AB_TRY(ab_kv_get_u64(&p, "seq_median", 1, 1ULL << 20, &a->seq_median, diag));
  AB_TRY(ab_kv_get_double(&p, "seq_sigma", 0, 10, &a->seq_sigma, diag));
  AB_TRY(ab_kv_get_double(&p, "grad_max", 0, 1e30, &a->grad_max, diag));
  AB_TRY(ab_kv_get_double(&p, "grad_sigma", 0, 10, &a->grad_sigma, diag));
  AB_TRY(ab_kv_get_double(&p, "init_scale", 1, 1e30, &a->init_scale, diag));
  AB_TRY(ab_kv_finish(&p,
                      AB_TRANSFORMER_KEYS ", precision, optimizer, momentum, steps, tokens_min, tokens_max, seq, seq_min, "
                                          "seq_max, seq_median, seq_sigma, grad_max, grad_sigma, init_scale",
                      diag));
  if (a->tokens_min > a->tokens_max)
    return ab_kv_errorf(&p, given(&p, "tokens_min", "tokens_max"), diag, "need tokens_min <= tokens_max");
  if (a->seq_min > a->seq_max)
    return ab_kv_errorf(&p, given(&p, "seq_min", "seq_max"), diag, "need seq_min <= seq_max");
  if (a->seq_max > a->tokens_max)
    return ab_kv_errorf(&p, given(&p, "seq_max", "tokens_max"), diag,
                        "need seq_max <= tokens_max (a step holds at least one sequence)");
  a->cfg.autocast = a->precision != 0;
  a->cfg.compute = a->precision == 0 ? AB_F32 : a->precision == 1 ? AB_BF16 : AB_F16;
  return ab_transformer_check_step(&p, &a->cfg, a->tokens_max, a->seq_max, "tokens_max,seq_max", diag);
}

static uint64_t draw_seq(const args_t *a, ab_rng_t *rng) {
  if (a->seq_dist == 1) return a->seq_max;
  if (a->seq_dist == 0) return ab_rng_range(rng, a->seq_min, a->seq_max);
  double v = (double)a->seq_median * exp(a->seq_sigma * ab_rng_normal(rng));
  v = v < (double)a->seq_min ? (double)a->seq_min : v > (double)a->seq_max ? (double)a->seq_max : v;
  return (uint64_t)llround(v);
}

static ab_status generate(const char *text, uint64_t seed, ab_events_t *out, ab_diag_t *diag) {
  args_t a;
  AB_TRY(parse(text, &a, diag));
  ab_tape_t tape;
  ab_tape_init(&tape, out, a.cfg.workspace_bytes);
  ab_transformer_t m;
  ab_status st = ab_transformer_init(&m, &a.cfg, &tape, diag);
  if (st != AB_OK) return st;
  ab_optim_t opt;
  st = ab_optim_init(&opt, a.optimizer == 2 ? AB_OPTIM_SGD : AB_OPTIM_ADAM, a.momentum, m.nparams, diag);
  if (st != AB_OK) {
    ab_transformer_free(&m);
    return st;
  }
  ab_scaler_t scaler;
  ab_scaler_init(&scaler, a.precision == 2, a.cfg.compute, a.init_scale, a.grad_max, a.grad_sigma, seed);
  ab_rng_t rng = ab_rng_seed(seed);

  ab_transformer_create_params(&m, AB_F32);
  for (uint64_t i = 0; i < a.steps && !out->failed; i++) { /* a failed stream stops here (events.h) */
    ab_events_step(out);
    uint64_t T = draw_seq(&a, &rng);
    uint64_t budget = ab_rng_range(&rng, a.tokens_min, a.tokens_max);
    uint64_t batch = budget / T ? budget / T : 1;
    ab_transformer_step_t step;
    ab_transformer_forward_backward(&m, batch, T, &scaler, &step);
    bool skip = ab_scaler_unscale(&scaler, &tape, m.nparams, m.grad, m.numel, AB_F32);
    if (!skip) ab_optim_step(&opt, &tape, m.weight, m.grad, m.numel, AB_F32);
    ab_scaler_update(&scaler, &tape, skip);
    ab_transformer_zero_grad(&m);
    ab_transformer_end_step(&m, &step);
  }
  ab_optim_free(&opt);
  ab_transformer_free(&m);
  ab_tape_free(&tape);
  return AB_OK;
}

const ab_workload_t ab_workload_dynamic_shapes = {
    .name = "dynamic-shapes",
    .summary = "transformer training, sequence length and batch drawn per step (PyTorch autograd's lifecycle)",
    .params_help = AB_TRANSFORMER_HELP
    "  precision=fp32|bf16|fp16  fp32, bf16 autocast, or fp16 autocast with loss scaling (default bf16)\n"
    "  optimizer=adamw|adam|sgd  (default adamw)\n"
    "  momentum=BOOL  SGD keeps a momentum buffer (default true)\n"
    "  steps=N        training steps (default 40)\n"
    "  tokens_min=N, tokens_max=N  tokens per step, drawn uniformly (default 8192, 32768)\n"
    "  seq=uniform|fixed|lognormal  sequence length distribution (default uniform; fixed: seq_max)\n"
    "  seq_min=N, seq_max=N  its bounds (default 64, 2048)\n"
    "  seq_median=N, seq_sigma=X  lognormal parameters (default 512, 0.75)\n"
    "  grad_max=X, grad_sigma=X  fp16: a step's largest gradient, log-normal; overflow when it\n"
    "                 times the scale passes 65504 (default 6, 0.25)\n"
    "  init_scale=X   fp16: GradScaler's initial scale (default 65536)\n",
    .quick_args = "steps=8",
    .bench_args = "",
    .generate = generate,
    .scale = (const ab_scale_key_t[]){{"steps", 1}, {"layers", 1}, {NULL, 0}},
};
