/* cnn_dynamic.c: ResNet training with the image side drawn per step.
 *
 * Size model (torchvision's ResNet v1.5 under PyTorch's autograd; the recorded run in
 * fixtures/pytorch-2.11-h200, cnn_dyn, is this workload's defaults and shows every tensor
 * below in this order):
 *   1. model.cuda(): per module, its parameters then its buffers: convolution weights; batch
 *      norm weight and bias, running mean and variance (fp32) and num_batches_tracked
 *      (int64); the classifier's weight and bias.
 *   2. Each step: the side S drawn uniformly from side_min..side_max in side_step steps; the
 *      images (batch x 3 x S x S, fp32) and labels (int64).
 *   3. Forward under autocast (fp16 or bf16; fp32 runs as is): per convolution the weight's
 *      cast (cached for the forward, saved), the output (saved by batch norm), a cuDNN
 *      workspace for a k > 1 convolution (freed at once); batch norm's output and its saved
 *      mean and inverse std (fp32, per channel); ReLU in place (saving its result). The
 *      stem's input is cast to the compute dtype (saved by the first convolution); max
 *      pooling keeps int64 indices. A bottleneck block's downsample branch runs after its
 *      third convolution, its output dies in the in-place residual add. Then average
 *      pooling (saving its input), the classifier (weight and bias casts), the logits
 *      (kept by the step), their fp32 upcast and log_softmax for the loss.
 *   4. Backward on autograd's thread, in reverse: ReLU, batch norm and convolution
 *      backward each make their input gradient (a convolution's with a cuDNN workspace for
 *      data and one for the filter); weight gradients are made in the compute dtype and cast
 *      to fp32 by the cast's backward before AccumulateGrad; batch norm's are fp32; the
 *      identity gradient waits in the block input's buffer until the main branch adds into
 *      it; the downsample branch runs first (it was created last).
 *   5. GradScaler (fp16): unscale and check, skip the step on overflow (autograd.h's model:
 *      the recorded run skipped its first three); SGD with momentum (the buffers made at the
 *      first step that runs) or Adam; zero_grad(set_to_none=True); the step's locals go.
 * cuDNN's workspace sizes depend on the algorithm it picks; the recorded run's were 1.25 to
 * 5 times the larger of a convolution's input and output, most often 1.25 to 2: workspace
 * is cudnn_ws times that (0 for none).
 * Calibration (tests/workloads/workloads_test.c): PyTorch's peak allocated over the recorded 24 steps
 * was 7.81 GB, at the start of backward of the first S = 512 step.
 */
#include "workloads/cnn_dynamic.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/base/rng.h"
#include "kernels/base/units.h"
#include "workloads/autograd.h"

/* A convolution, its batch norm and, optionally, a ReLU in place. */
typedef struct unit_s {
  uint64_t cin, cout, k, stride, hin, hout; /* channels, kernel side, stride, input and output sides */
  size_t pw;                                /* the conv weight's parameter; bn weight pw+1, bias pw+2 */
  bool relu;
  uint32_t x_in, w, y, out_relu, mean, invstd; /* what the unit's nodes saved */
} unit_t;

typedef struct net_s {
  ab_tape_t *t;
  unit_t *units;                  /* stem, then per block conv1, conv2, conv3 and the downsample if any */
  size_t nunits, nblocks;
  size_t *block_first;            /* per block: its first unit */
  bool *block_ds;                 /* per block: has a downsample unit */
  uint32_t *block_out;            /* per block: its output, saved by its last ReLU */
  size_t nparams;                 /* three per unit, then the classifier's weight and bias */
  uint64_t *numel;                /* per parameter: elements */
  uint32_t *weight, *grad, *cast; /* per parameter: the fp32 tensor, .grad, autocast's cast */
  uint64_t classes, batch, side;  /* side: this step's */
  ab_dtype_t dt;                  /* the compute dtype */
  bool autocast;
  uint64_t hb;                    /* bytes of dt */
  double ws_factor;               /* cudnn_ws */
  /* saved by the stem's pooling, the average pooling, the classifier and the loss */
  uint32_t stem_pool_in, pool_idx, avg_in, pooled, w_fc, log_probs, total_weight;
} net_t;

typedef struct args_s {
  uint64_t batch, side_min, side_max, side_step, classes, steps, workspace;
  int depth, precision, optimizer; /* indices into depths, precisions, optimizers */
  bool momentum;
  double cudnn_ws, grad_max, grad_sigma, init_scale;
} args_t;

static const char *const depths[] = {"50", "101", "152", NULL};
static const char *const precisions[] = {"fp32", "bf16", "fp16", NULL};
static const char *const optimizers[] = {"sgd", "adam", "adamw", NULL};

static ab_status parse(const char *text, args_t *a, ab_diag_t *diag) {
  ab_kvlist_t p;
  AB_TRY(ab_kv_parse("-w cnn-dynamic", text, '=', &p, diag));
  *a = (args_t){.depth = 0, .batch = 32, .side_min = 160, .side_max = 512, .side_step = 32, .classes = 1000,
                .steps = 24, .workspace = 32 * AB_MiB, .precision = 2, .optimizer = 0, .momentum = true,
                .cudnn_ws = 1.5, .grad_max = 6, .grad_sigma = 0.25, .init_scale = 65536};
  AB_TRY(ab_kv_get_choice(&p, "depth", depths, &a->depth, diag));
  AB_TRY(ab_kv_get_u64(&p, "batch", 1, 1 << 16, &a->batch, diag));
  AB_TRY(ab_kv_get_u64(&p, "side_min", 32, 1 << 14, &a->side_min, diag));
  AB_TRY(ab_kv_get_u64(&p, "side_max", 32, 1 << 14, &a->side_max, diag));
  AB_TRY(ab_kv_get_u64(&p, "side_step", 32, 1 << 14, &a->side_step, diag));
  AB_TRY(ab_kv_get_u64(&p, "classes", 1, 1 << 20, &a->classes, diag));
  AB_TRY(ab_kv_get_u64(&p, "steps", 1, 1000000, &a->steps, diag));
  AB_TRY(ab_kv_get_size(&p, "workspace", &a->workspace, diag));
  AB_TRY(ab_kv_get_choice(&p, "precision", precisions, &a->precision, diag));
  AB_TRY(ab_kv_get_choice(&p, "optimizer", optimizers, &a->optimizer, diag));
  AB_TRY(ab_kv_get_bool(&p, "momentum", &a->momentum, diag));
  AB_TRY(ab_kv_get_double(&p, "cudnn_ws", 0, 100, &a->cudnn_ws, diag));
  AB_TRY(ab_kv_get_double(&p, "grad_max", 0, 1e30, &a->grad_max, diag));
  AB_TRY(ab_kv_get_double(&p, "grad_sigma", 0, 10, &a->grad_sigma, diag));
  AB_TRY(ab_kv_get_double(&p, "init_scale", 1, 1e30, &a->init_scale, diag));
  AB_TRY(ab_kv_finish(&p,
                      "depth, batch, side_min, side_max, side_step, classes, steps, workspace, precision, optimizer, "
                      "momentum, cudnn_ws, grad_max, grad_sigma, init_scale",
                      diag));
  const char *bad = a->side_min % 32 ? "side_min" : a->side_max % 32 ? "side_max" : a->side_step % 32 ? "side_step" : NULL;
  if (bad) return ab_kv_errorf(&p, ab_kv_get(&p, bad), diag, "sides are multiples of 32 (the network's stride)");
  if (a->side_min > a->side_max) return ab_kv_errorf(&p, ab_kv_get(&p, "side_min"), diag, "need side_min <= side_max");
  /* As the transformer's: no card holds more, and sums of it stay far from 2^64. */
  if (a->workspace > (1ULL << 40)) return ab_kv_errorf(&p, ab_kv_get(&p, "workspace"), diag, "need workspace <= 1TiB");
  return AB_OK;
}

/* ---- the network ---------------------------------------------------------------------------- */

static unit_t unit(uint64_t cin, uint64_t cout, uint64_t k, uint64_t stride, bool relu, size_t *np) {
  unit_t u = {.cin = cin, .cout = cout, .k = k, .stride = stride, .pw = *np, .relu = relu};
  *np += 3;
  return u;
}

/* Builds the layer list of a ResNet of depth and counts its parameters. */
static ab_status net_init(net_t *n, const args_t *a, ab_tape_t *t, ab_diag_t *diag) {
  static const uint64_t stages[3][4] = {{3, 4, 6, 3}, {3, 4, 23, 3}, {3, 8, 36, 3}};
  const uint64_t *blocks = stages[a->depth];
  memset(n, 0, sizeof *n);
  n->t = t;
  n->nblocks = (size_t)(blocks[0] + blocks[1] + blocks[2] + blocks[3]);
  n->units = malloc((1 + 3 * n->nblocks + 4) * sizeof *n->units);
  n->block_first = malloc(n->nblocks * sizeof *n->block_first);
  n->block_ds = malloc(n->nblocks * sizeof *n->block_ds);
  n->block_out = malloc(n->nblocks * sizeof *n->block_out);
  if (!n->units || !n->block_first || !n->block_ds || !n->block_out)
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  size_t np = 0, b = 0;
  n->units[n->nunits++] = unit(3, 64, 7, 2, true, &np);
  uint64_t cin = 64;
  for (unsigned stage = 0; stage < 4; stage++) {
    uint64_t w = 64ULL << stage;
    for (uint64_t i = 0; i < blocks[stage]; i++, b++) {
      uint64_t stride = stage > 0 && i == 0 ? 2 : 1;
      n->block_first[b] = n->nunits;
      n->units[n->nunits++] = unit(cin, w, 1, 1, true, &np);
      n->units[n->nunits++] = unit(w, w, 3, stride, true, &np);
      n->units[n->nunits++] = unit(w, 4 * w, 1, 1, false, &np);
      n->block_ds[b] = i == 0;
      if (i == 0) n->units[n->nunits++] = unit(cin, 4 * w, 1, stride, false, &np);
      cin = 4 * w;
    }
  }
  n->nparams = np + 2; /* and the classifier's weight and bias */
  n->numel = malloc(n->nparams * sizeof *n->numel);
  n->weight = malloc(n->nparams * sizeof *n->weight);
  n->grad = malloc(n->nparams * sizeof *n->grad);
  n->cast = malloc(n->nparams * sizeof *n->cast);
  if (!n->numel || !n->weight || !n->grad || !n->cast) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  for (size_t i = 0; i < n->nunits; i++) {
    const unit_t *u = &n->units[i];
    n->numel[u->pw] = u->cout * u->cin * u->k * u->k;
    n->numel[u->pw + 1] = n->numel[u->pw + 2] = u->cout;
  }
  n->numel[np] = a->classes * cin;
  n->numel[np + 1] = a->classes;
  for (size_t i = 0; i < n->nparams; i++) n->weight[i] = n->grad[i] = n->cast[i] = AB_NO_TENSOR;
  n->classes = a->classes;
  n->batch = a->batch;
  n->autocast = a->precision != 0;
  n->dt = a->precision == 0 ? AB_F32 : a->precision == 1 ? AB_BF16 : AB_F16;
  n->hb = ab_dtype_bytes(n->dt);
  n->ws_factor = a->cudnn_ws;
  return AB_OK;
}

static void net_free(net_t *n) {
  free(n->units);
  free(n->block_first);
  free(n->block_ds);
  free(n->block_out);
  free(n->numel);
  free(n->weight);
  free(n->grad);
  free(n->cast);
}

/* model.cuda(): per module its parameters, then its buffers. */
static void create_params(net_t *n) {
  ab_tape_t *t = n->t;
  for (size_t i = 0; i < n->nunits; i++) {
    const unit_t *u = &n->units[i];
    for (size_t p = u->pw; p < u->pw + 3; p++) n->weight[p] = ab_tape_new(t, n->numel[p] * 4, AB_TAG_PARAM);
    ab_tape_new(t, u->cout * 4, AB_TAG_PARAM); /* running_mean */
    ab_tape_new(t, u->cout * 4, AB_TAG_PARAM); /* running_var */
    ab_tape_new(t, 8, AB_TAG_PARAM);           /* num_batches_tracked */
  }
  for (size_t p = n->nparams - 2; p < n->nparams; p++) n->weight[p] = ab_tape_new(t, n->numel[p] * 4, AB_TAG_PARAM);
}

static uint32_t compute_weight(net_t *n, size_t p) {
  if (!n->autocast) return n->weight[p];
  if (n->cast[p] == AB_NO_TENSOR) {
    n->cast[p] = ab_tape_new(n->t, n->numel[p] * n->hb, AB_TAG_TEMP);
    ab_tape_unary(n->t, AB_K_CAST, n->weight[p], n->cast[p], n->numel[p], AB_F32, n->dt);
  }
  return n->cast[p];
}

static void param_grad(net_t *n, size_t p, uint32_t g, bool through_cast) {
  if (through_cast && n->autocast) {
    uint32_t g32 = ab_tape_new(n->t, n->numel[p] * 4, AB_TAG_GRAD);
    ab_tape_unary(n->t, AB_K_CAST, g, g32, n->numel[p], n->dt, AB_F32);
    ab_tape_drop(n->t, g);
    g = g32;
  }
  if (n->grad[p] == AB_NO_TENSOR)
    n->grad[p] = g;
  else
    ab_tape_drop(n->t, g);
}

static uint64_t act_bytes(const net_t *n, uint64_t c, uint64_t h) { return n->batch * c * h * h * n->hb; }

/* A cuDNN workspace, made and freed around a k > 1 convolution call. */
static void cudnn_workspace(net_t *n, const unit_t *u) {
  uint64_t larger = act_bytes(n, u->cin, u->hin) > act_bytes(n, u->cout, u->hout) ? act_bytes(n, u->cin, u->hin)
                                                                                  : act_bytes(n, u->cout, u->hout);
  uint64_t bytes = (uint64_t)(n->ws_factor * (double)larger);
  if (u->k > 1 && bytes > 0) ab_tape_drop(n->t, ab_tape_new(n->t, bytes, AB_TAG_WORKSPACE));
}

/* Convolution, batch norm and maybe ReLU over x (the caller keeps its reference); returns the
 * unit's output, new. */
static uint32_t unit_forward(net_t *n, unit_t *u, uint32_t x, uint64_t hin) {
  ab_tape_t *t = n->t;
  u->hin = hin;
  u->hout = (hin + u->stride - 1) / u->stride;
  uint32_t w = compute_weight(n, u->pw); /* batch norm is not autocast: its parameters stay fp32 */
  uint32_t y = ab_tape_new(t, act_bytes(n, u->cout, u->hout), AB_TAG_ACT);
  cudnn_workspace(n, u);
  /* A 1x1 stride-1 convolution is a GEMM over the pixels; the others have no kernel here. */
  if (u->k == 1 && u->stride == 1)
    ab_tape_gemm(t, x, w, y, n->batch * hin * hin, u->cout, u->cin, n->dt, n->dt);
  u->x_in = ab_tape_hold(t, x);
  u->w = n->autocast ? ab_tape_hold(t, w) : AB_NO_TENSOR;
  uint32_t out = ab_tape_new(t, act_bytes(n, u->cout, u->hout), AB_TAG_ACT);
  u->mean = ab_tape_new(t, u->cout * 4, AB_TAG_ACT);
  u->invstd = ab_tape_new(t, u->cout * 4, AB_TAG_ACT);
  u->y = y;
  u->out_relu = u->relu ? ab_tape_hold(t, out) : AB_NO_TENSOR;
  return out;
}

/* The unit's backward from g, the gradient of its output (the caller keeps its reference):
 * the gradient of its input, or AB_NO_TENSOR when its input needs none (the images). */
static uint32_t unit_backward(net_t *n, unit_t *u, uint32_t g, bool input_grad) {
  ab_tape_t *t = n->t;
  uint64_t out_bytes = act_bytes(n, u->cout, u->hout);
  uint32_t gbn = ab_tape_hold(t, g);
  if (u->relu) {
    ab_tape_drop(t, gbn);
    gbn = ab_tape_new(t, out_bytes, AB_TAG_TEMP);
    ab_tape_clear(t, &u->out_relu);
  }
  uint32_t gy = ab_tape_new(t, out_bytes, AB_TAG_TEMP);
  uint32_t gw = ab_tape_new(t, u->cout * 4, AB_TAG_GRAD), gb = ab_tape_new(t, u->cout * 4, AB_TAG_GRAD);
  ab_tape_clear(t, &u->y);
  ab_tape_clear(t, &u->mean);
  ab_tape_clear(t, &u->invstd);
  ab_tape_drop(t, gbn);
  param_grad(n, u->pw + 1, gw, false);
  param_grad(n, u->pw + 2, gb, false);
  uint32_t gx = AB_NO_TENSOR;
  if (input_grad) {
    gx = ab_tape_new(t, act_bytes(n, u->cin, u->hin), AB_TAG_TEMP);
    cudnn_workspace(n, u);
  }
  uint32_t gk = ab_tape_new(t, n->numel[u->pw] * n->hb, n->autocast ? AB_TAG_TEMP : AB_TAG_GRAD);
  cudnn_workspace(n, u);
  ab_tape_clear(t, &u->x_in);
  ab_tape_clear(t, &u->w);
  ab_tape_drop(t, gy);
  param_grad(n, u->pw, gk, true);
  return gx;
}

/* ---- a step ----------------------------------------------------------------------------------- */

static uint32_t forward(net_t *n, uint32_t images) {
  ab_tape_t *t = n->t;
  uint64_t S = n->side, B = n->batch;
  /* Stem: the weight's cast, then the images' (the recorded order), 7x7/2 conv, bn, relu,
   * 3x3/2 max pooling. */
  unit_t *stem = &n->units[0];
  compute_weight(n, stem->pw);
  uint32_t x16 = images;
  if (n->autocast) {
    x16 = ab_tape_new(t, B * 3 * S * S * n->hb, AB_TAG_ACT);
    ab_tape_unary(t, AB_K_CAST, images, x16, B * 3 * S * S, AB_F32, n->dt);
  } else {
    ab_tape_hold(t, x16);
  }
  uint32_t x = unit_forward(n, stem, x16, S);
  ab_tape_drop(t, x16);
  uint64_t h = stem->hout / 2;
  uint32_t pooled = ab_tape_new(t, act_bytes(n, 64, h), AB_TAG_ACT);
  n->pool_idx = ab_tape_new(t, B * 64 * h * h * 8, AB_TAG_ACT);
  n->stem_pool_in = x;
  x = pooled;
  for (size_t b = 0; b < n->nblocks; b++) {
    unit_t *u = &n->units[n->block_first[b]];
    uint32_t o1 = unit_forward(n, &u[0], x, h);
    uint32_t o2 = unit_forward(n, &u[1], o1, h);
    ab_tape_drop(t, o1);
    uint32_t o3 = unit_forward(n, &u[2], o2, u[1].hout);
    ab_tape_drop(t, o2);
    if (n->block_ds[b]) ab_tape_drop(t, unit_forward(n, &u[3], x, h)); /* added in place into o3, then gone */
    n->block_out[b] = ab_tape_hold(t, o3);                               /* the last ReLU, in place */
    ab_tape_drop(t, x);
    x = o3;
    h = u[1].hout;
  }
  /* Average pooling and the classifier. */
  uint64_t c = n->units[n->nunits - 1].cout, K = n->classes;
  n->avg_in = x;
  n->pooled = ab_tape_new(t, B * c * n->hb, AB_TAG_ACT);
  compute_weight(n, n->nparams - 1);
  n->w_fc = ab_tape_hold(t, compute_weight(n, n->nparams - 2));
  uint32_t logits = ab_tape_new(t, B * K * n->hb, AB_TAG_ACT);
  ab_tape_gemm(t, n->pooled, n->w_fc, logits, B, K, c, n->dt, n->dt);
  if (!n->autocast) ab_tape_clear(t, &n->w_fc);
  /* cross_entropy in fp32. */
  uint32_t l32 = logits;
  if (n->dt != AB_F32) {
    l32 = ab_tape_new(t, B * K * 4, AB_TAG_TEMP);
    ab_tape_unary(t, AB_K_CAST, logits, l32, B * K, n->dt, AB_F32);
  } else {
    ab_tape_hold(t, l32);
  }
  n->log_probs = ab_tape_new(t, B * K * 4, AB_TAG_ACT);
  ab_tape_drop(t, l32);
  n->total_weight = ab_tape_new(t, 4, AB_TAG_ACT);
  for (size_t p = 0; p < n->nparams; p++) ab_tape_clear(t, &n->cast[p]);
  return logits;
}

static void backward(net_t *n, bool scaled) {
  ab_tape_t *t = n->t;
  uint64_t B = n->batch, K = n->classes, c = n->units[n->nunits - 1].cout;
  t->thread = 1;
  uint32_t g = ab_tape_new(t, 4, AB_TAG_TEMP);
  if (scaled) {
    uint32_t gl = ab_tape_new(t, 4, AB_TAG_TEMP);
    ab_tape_drop(t, g);
    g = gl;
  }
  uint32_t g_logp = ab_tape_new(t, B * K * 4, AB_TAG_TEMP);
  ab_tape_drop(t, g);
  ab_tape_clear(t, &n->total_weight);
  uint32_t g_logits = ab_tape_new(t, B * K * 4, AB_TAG_TEMP);
  ab_tape_drop(t, g_logp);
  ab_tape_clear(t, &n->log_probs);
  if (n->dt != AB_F32) {
    uint32_t gh = ab_tape_new(t, B * K * n->hb, AB_TAG_TEMP);
    ab_tape_unary(t, AB_K_CAST, g_logits, gh, B * K, AB_F32, n->dt);
    ab_tape_drop(t, g_logits);
    g_logits = gh;
  }
  size_t pfc = n->nparams - 2;
  uint32_t w = n->autocast ? n->w_fc : n->weight[pfc];
  uint32_t g_pooled = ab_tape_new(t, B * c * n->hb, AB_TAG_TEMP);
  ab_tape_gemm(t, g_logits, w, g_pooled, B, c, K, n->dt, n->dt);
  uint32_t g_w = ab_tape_new(t, K * c * n->hb, n->autocast ? AB_TAG_TEMP : AB_TAG_GRAD);
  ab_tape_gemm(t, g_logits, n->pooled, g_w, K, c, B, n->dt, n->dt);
  uint32_t g_b = ab_tape_new(t, K * n->hb, n->autocast ? AB_TAG_TEMP : AB_TAG_GRAD);
  ab_tape_drop(t, g_logits);
  ab_tape_clear(t, &n->pooled);
  ab_tape_clear(t, &n->w_fc);
  param_grad(n, pfc, g_w, true);
  param_grad(n, pfc + 1, g_b, true);
  uint64_t h = n->side / 32;
  uint32_t gx = ab_tape_new(t, act_bytes(n, c, h), AB_TAG_TEMP);
  ab_tape_drop(t, g_pooled);
  ab_tape_clear(t, &n->avg_in);
  for (size_t b = n->nblocks; b-- > 0;) {
    unit_t *u = &n->units[n->block_first[b]];
    /* The last ReLU, then the add hands the same gradient to both branches. */
    uint32_t g1 = ab_tape_new(t, act_bytes(n, u[2].cout, u[2].hout), AB_TAG_TEMP);
    ab_tape_drop(t, gx);
    ab_tape_clear(t, &n->block_out[b]);
    uint32_t g_id = n->block_ds[b] ? unit_backward(n, &u[3], g1, true) : ab_tape_hold(t, g1);
    uint32_t g3 = unit_backward(n, &u[2], g1, true);
    ab_tape_drop(t, g1);
    uint32_t g2 = unit_backward(n, &u[1], g3, true);
    ab_tape_drop(t, g3);
    gx = unit_backward(n, &u[0], g2, true);
    ab_tape_drop(t, g2);
    ab_tape_drop(t, g_id); /* added into gx in place */
  }
  /* Max pooling, then the stem, whose input needs no gradient. */
  unit_t *stem = &n->units[0];
  uint32_t g_pool = ab_tape_new(t, act_bytes(n, 64, stem->hout), AB_TAG_TEMP);
  ab_tape_drop(t, gx);
  ab_tape_clear(t, &n->pool_idx);
  ab_tape_clear(t, &n->stem_pool_in);
  unit_backward(n, stem, g_pool, false);
  ab_tape_drop(t, g_pool);
  t->thread = 0;
}

static ab_status generate(const char *text, uint64_t seed, ab_events_t *out, ab_diag_t *diag) {
  args_t a;
  AB_TRY(parse(text, &a, diag));
  ab_tape_t tape;
  ab_tape_init(&tape, out, a.workspace);
  net_t n;
  ab_optim_t opt;
  ab_status st = net_init(&n, &a, &tape, diag);
  if (st == AB_OK)
    st = ab_optim_init(&opt, a.optimizer == 0 ? AB_OPTIM_SGD : AB_OPTIM_ADAM, a.momentum, n.nparams, diag);
  if (st != AB_OK) {
    net_free(&n);
    return st;
  }
  ab_scaler_t scaler;
  ab_scaler_init(&scaler, a.precision == 2, n.dt, a.init_scale, a.grad_max, a.grad_sigma, seed);
  ab_rng_t rng = ab_rng_seed(seed);
  uint64_t nsides = (a.side_max - a.side_min) / a.side_step + 1;

  create_params(&n);
  for (uint64_t i = 0; i < a.steps && !out->failed; i++) { /* a failed stream stops here (events.h) */
    ab_events_step(out);
    n.side = a.side_min + ab_rng_range(&rng, 0, nsides - 1) * a.side_step;
    uint32_t images = ab_tape_new(&tape, a.batch * 3 * n.side * n.side * 4, AB_TAG_INPUT);
    uint32_t labels = ab_tape_new(&tape, a.batch * 8, AB_TAG_INPUT);
    uint32_t logits = forward(&n, images);
    uint32_t loss = ab_tape_new(&tape, 4, AB_TAG_ACT);
    uint32_t scaled = ab_scaler_scale_loss(&scaler, &tape, loss);
    backward(&n, scaled != loss);
    bool skip = ab_scaler_unscale(&scaler, &tape, n.nparams, n.grad, n.numel, AB_F32);
    if (!skip) ab_optim_step(&opt, &tape, n.weight, n.grad, n.numel, AB_F32);
    ab_scaler_update(&scaler, &tape, skip);
    for (size_t p = 0; p < n.nparams; p++) ab_tape_clear(&tape, &n.grad[p]);
    ab_tape_drop(&tape, scaled);
    ab_tape_drop(&tape, logits);
    ab_tape_drop(&tape, images);
    ab_tape_drop(&tape, labels);
    ab_tape_drop(&tape, loss);
  }
  ab_optim_free(&opt);
  net_free(&n);
  ab_tape_free(&tape);
  return AB_OK;
}

const ab_workload_t ab_workload_cnn_dynamic = {
    .name = "cnn-dynamic",
    .summary = "ResNet training, image side drawn per step (the recorded cnn_dyn run's shape)",
    .params_help = "  depth=50|101|152  ResNet depth (default 50)\n"
                   "  batch=N        images per step (default 32)\n"
                   "  side_min=N, side_max=N, side_step=N  image side drawn uniformly from this range,\n"
                   "                 multiples of 32 (default 160, 512, 32)\n"
                   "  classes=N      classifier outputs (default 1000)\n"
                   "  steps=N        training steps (default 24)\n"
                   "  precision=fp32|bf16|fp16  fp32, or autocast; fp16 with loss scaling (default fp16)\n"
                   "  optimizer=sgd|adam|adamw  (default sgd)\n"
                   "  momentum=BOOL  SGD keeps a momentum buffer (default true)\n"
                   "  cudnn_ws=X     cuDNN workspace of a k > 1 convolution call, as a multiple of its\n"
                   "                 larger operand (default 1.5; 0: none)\n"
                   "  workspace=SIZE cuBLAS workspace (default 32MiB)\n"
                   "  grad_max=X, grad_sigma=X, init_scale=X  fp16 loss scaling (autograd.h; default 6,\n"
                   "                 0.25, 65536)\n",
    .quick_args = "steps=6",
    .bench_args = "",
    .generate = generate,
    .scale = (const ab_scale_key_t[]){{"steps", 1}, {NULL, 0}},
};
