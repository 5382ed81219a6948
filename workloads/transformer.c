#include "workloads/transformer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A block's parameters, in PyTorch's registration order. */
enum { LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC1_W, FC1_B, FC2_W, FC2_B, BLOCK_PARAMS };

/* What a block's autograd nodes saved. AB_NO_TENSOR where nothing was saved. */
typedef struct ab_block_saved_s {
  uint32_t x_in, ln1_mean, ln1_rstd, ln1_out, w_qkv;     /* LN1, QKV linear */
  uint32_t qkv, o_attn, lse, q_scaled, k_scaled, probs;   /* attention */
  uint32_t o_proj, w_proj;                                /* projection */
  uint32_t x_mid, ln2_mean, ln2_rstd, ln2_out, w_fc1;     /* LN2, FC1 */
  uint32_t h, g, w_fc2;                                   /* GELU, FC2 */
} ab_block_saved_t;

/* The head's saved tensors live in the step (one head). */
typedef struct head_saved_s {
  uint32_t x_last, mean, rstd, lnf_out, w_head, log_probs, total_weight;
} head_saved_t;

ab_transformer_cfg_t ab_transformer_defaults(void) {
  return (ab_transformer_cfg_t){.layers = 12,
                                .d_model = 1024,
                                .heads = 16,
                                .vocab = 32000,
                                .ffn_mult = 4,
                                .flash = true,
                                .checkpoint = false,
                                .compute = AB_F32,
                                .autocast = false,
                                .workspace_bytes = 32 * AB_MiB};
}

ab_status ab_transformer_parse(ab_kvlist_t *p, ab_transformer_cfg_t *cfg, ab_diag_t *diag) {
  AB_TRY(ab_kv_get_u64(p, "layers", 1, 1024, &cfg->layers, diag));
  AB_TRY(ab_kv_get_u64(p, "d_model", 8, 1 << 16, &cfg->d_model, diag));
  AB_TRY(ab_kv_get_u64(p, "heads", 1, 1024, &cfg->heads, diag));
  AB_TRY(ab_kv_get_u64(p, "vocab", 2, 1 << 22, &cfg->vocab, diag));
  AB_TRY(ab_kv_get_u64(p, "ffn", 1, 64, &cfg->ffn_mult, diag));
  AB_TRY(ab_kv_get_bool(p, "flash", &cfg->flash, diag));
  AB_TRY(ab_kv_get_bool(p, "checkpoint", &cfg->checkpoint, diag));
  AB_TRY(ab_kv_get_size(p, "workspace", &cfg->workspace_bytes, diag));
  if (cfg->workspace_bytes > (1ULL << 40)) return ab_kv_errorf(p, ab_kv_get(p, "workspace"), diag, "need workspace <= 1TiB");
  if (cfg->d_model % cfg->heads != 0)
    return ab_kv_errorf(p, ab_kv_get(p, "heads") ? ab_kv_get(p, "heads") : ab_kv_get(p, "d_model"), diag,
                        "heads (%llu) must divide d_model (%llu)", (unsigned long long)cfg->heads,
                        (unsigned long long)cfg->d_model);
  return AB_OK;
}

/* The first of the keys (comma-separated) that was given. */
static ab_kv_t *first_given(ab_kvlist_t *p, const char *keys) {
  char key[32];
  for (const char *k = keys; *k;) {
    size_t len = strcspn(k, ",");
    snprintf(key, sizeof key, "%.*s", (int)len, k);
    ab_kv_t *item = ab_kv_get(p, key);
    if (item) return item;
    k += len + (k[len] == ',');
  }
  return NULL;
}

ab_status ab_transformer_check_step(ab_kvlist_t *p, const ab_transformer_cfg_t *cfg, uint64_t tokens, uint64_t seq,
                                    const char *tokens_keys, ab_diag_t *diag) {
  /* In doubles: the point is that the integers may wrap. */
  double d = (double)cfg->d_model, widest = (double)cfg->vocab;
  const char *width = "vocab";
  if ((double)cfg->ffn_mult * d > widest) widest = (double)cfg->ffn_mult * d, width = "ffn x d_model";
  if (!cfg->flash && (double)cfg->heads * (double)seq > widest) widest = (double)cfg->heads * (double)seq, width = "heads x seq";
  if (3 * d > widest) widest = 3 * d, width = "3 x d_model";
  double elements = (double)tokens * widest;
  if (elements <= (double)AB_MAX_TENSOR_ELEMENTS) return AB_OK;
  char keys[128], product[128];
  snprintf(keys, sizeof keys, "%s,vocab,ffn,d_model,heads", tokens_keys);
  size_t n = 0;
  for (const char *k = tokens_keys; *k && n + 4 < sizeof product; k++) {
    if (*k == ',') n += (size_t)snprintf(product + n, sizeof product - n, " x ");
    else product[n++] = *k;
  }
  product[n] = '\0';
  return ab_kv_errorf(p, first_given(p, keys), diag, "a step's tensor would hold %.3g elements (%s x %s), more than 2^46",
                      elements, product, width);
}

unsigned ab_transformer_modules(const ab_transformer_t *m) { return (unsigned)m->cfg.layers + 2; }

static size_t block_first(unsigned module) { return 1 + (size_t)(module - 1) * BLOCK_PARAMS; }

ab_status ab_transformer_init(ab_transformer_t *m, const ab_transformer_cfg_t *cfg, ab_tape_t *tape, ab_diag_t *diag) {
  memset(m, 0, sizeof *m);
  m->cfg = *cfg;
  m->tape = tape;
  uint64_t d = cfg->d_model, f = cfg->ffn_mult * d, L = cfg->layers;
  if (d % cfg->heads != 0)
    return ab_diag_set(diag, AB_ERR_INVALID, "transformer: heads (%llu) must divide d_model (%llu)",
                       (unsigned long long)cfg->heads, (unsigned long long)d);
  if (cfg->vocab * d > (1ULL << 38) || f * d > (1ULL << 38))
    return ab_diag_set(diag, AB_ERR_INVALID, "transformer: a weight of more than 2^38 elements");
  m->nparams = 1 + (size_t)L * BLOCK_PARAMS + 2;
  size_t n = m->nparams;
  m->numel = malloc(n * sizeof *m->numel);
  m->module = malloc(n * sizeof *m->module);
  m->weight = malloc(n * sizeof *m->weight);
  m->grad = malloc(n * sizeof *m->grad);
  m->cast = malloc(n * sizeof *m->cast);
  m->saved = calloc(L, sizeof *m->saved);
  m->checkpoint_in = malloc(L * sizeof *m->checkpoint_in);
  if (!m->numel || !m->module || !m->weight || !m->grad || !m->cast || !m->saved || !m->checkpoint_in) {
    ab_transformer_free(m);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  m->numel[0] = cfg->vocab * d;
  m->module[0] = 0;
  const uint64_t block[BLOCK_PARAMS] = {d, d, 3 * d * d, 3 * d, d * d, d, d, d, f * d, f, d * f, d};
  for (unsigned l = 1; l <= L; l++)
    for (size_t i = 0; i < BLOCK_PARAMS; i++) {
      m->numel[block_first(l) + i] = block[i];
      m->module[block_first(l) + i] = l;
    }
  m->numel[n - 2] = m->numel[n - 1] = d;
  m->module[n - 2] = m->module[n - 1] = (unsigned)L + 1;
  for (size_t i = 0; i < n; i++) m->weight[i] = m->grad[i] = m->cast[i] = AB_NO_TENSOR;
  for (uint64_t l = 0; l < L; l++) m->checkpoint_in[l] = AB_NO_TENSOR;
  return AB_OK;
}

void ab_transformer_free(ab_transformer_t *m) {
  free(m->numel);
  free(m->module);
  free(m->weight);
  free(m->grad);
  free(m->cast);
  free(m->saved);
  free(m->checkpoint_in);
  memset(m, 0, sizeof *m);
}

void ab_transformer_create_params(ab_transformer_t *m, ab_dtype_t dtype) {
  for (size_t p = 0; p < m->nparams; p++)
    m->weight[p] = ab_tape_new(m->tape, m->numel[p] * ab_dtype_bytes(dtype), AB_TAG_PARAM);
}

size_t ab_transformer_module_params(const ab_transformer_t *m, unsigned module,
                                    size_t out[AB_TRANSFORMER_MODULE_MAX_PARAMS]) {
  if (module == 0) {
    out[0] = 0;
    return 1;
  }
  if (module <= m->cfg.layers) {
    for (size_t i = 0; i < BLOCK_PARAMS; i++) out[i] = block_first(module) + i;
    return BLOCK_PARAMS;
  }
  out[0] = m->nparams - 2;
  out[1] = m->nparams - 1;
  out[2] = 0;
  return 3;
}

uint64_t ab_transformer_numel(const ab_transformer_t *m) {
  uint64_t n = 0;
  for (size_t p = 0; p < m->nparams; p++) n += m->numel[p];
  return n;
}

void ab_transformer_accumulate(ab_transformer_t *m, size_t p, uint32_t id) {
  if (m->grad[p] == AB_NO_TENSOR)
    m->grad[p] = id;
  else
    ab_tape_drop(m->tape, id);
}

void ab_transformer_zero_grad(ab_transformer_t *m) {
  for (size_t p = 0; p < m->nparams; p++) ab_tape_clear(m->tape, &m->grad[p]);
}

/* ---- the pieces of a step ------------------------------------------------------------------ */

/* The shapes of the step being generated. */
typedef struct shape_s {
  ab_transformer_t *m;
  ab_tape_t *t;
  uint64_t B, T, N, d, f, H, V;
  ab_dtype_t dt, rt, pt;  /* compute, residual, parameter dtypes */
  uint64_t hb, rb, pb;    /* their bytes */
} shape_t;

static uint32_t save(const shape_t *s, bool saving, uint32_t id) {
  return saving ? ab_tape_hold(s->t, id) : AB_NO_TENSOR;
}

static void enter(const shape_t *s, unsigned module, bool backward) {
  if (s->m->hooks && s->m->hooks->enter) s->m->hooks->enter(s->m->hooks_ctx, s->m, module, backward);
}

static void leave(const shape_t *s, unsigned module, bool backward) {
  if (s->m->hooks && s->m->hooks->leave) s->m->hooks->leave(s->m->hooks_ctx, s->m, module, backward);
}

/* The tensor a matmul reads parameter p from: under autocast its cached cast. */
static uint32_t compute_weight(const shape_t *s, size_t p) {
  ab_transformer_t *m = s->m;
  if (!m->cfg.autocast) return m->weight[p];
  if (m->cast[p] == AB_NO_TENSOR) {
    m->cast[p] = ab_tape_new(s->t, m->numel[p] * s->hb, AB_TAG_TEMP);
    ab_tape_unary(s->t, AB_K_CAST, m->weight[p], m->cast[p], m->numel[p], AB_F32, s->dt);
  }
  return m->cast[p];
}

/* Autocast leaving its context: the cache lets go; casts saved for backward stay. */
static void autocast_exit(const shape_t *s) {
  for (size_t p = 0; p < s->m->nparams; p++) ab_tape_clear(s->t, &s->m->cast[p]);
}

/* A parameter's gradient, made in the compute dtype: under autocast the cast's backward
 * brings it to fp32 (a weight's; biases too) before AccumulateGrad. */
static void param_grad(const shape_t *s, size_t p, uint32_t g, bool through_cast) {
  ab_transformer_t *m = s->m;
  if (through_cast && m->cfg.autocast) {
    uint32_t g32 = ab_tape_new(s->t, m->numel[p] * 4, AB_TAG_GRAD);
    ab_tape_unary(s->t, AB_K_CAST, g, g32, m->numel[p], s->dt, AB_F32);
    ab_tape_drop(s->t, g);
    g = g32;
  }
  if (m->hooks && m->hooks->grad)
    m->hooks->grad(m->hooks_ctx, m, p, g);
  else
    ab_transformer_accumulate(m, p, g);
}

/* The tag of a weight gradient as made: the gradient itself, or a temporary before its cast. */
static ab_tag_t wgrad_tag(const shape_t *s) { return s->m->cfg.autocast ? AB_TAG_TEMP : AB_TAG_GRAD; }

/* LayerNorm over x (N x d, residual dtype): its output in the compute dtype (under
 * autocast LN runs in fp32 and its output is cast); the statistics are saved or dropped. */
static uint32_t layer_norm(const shape_t *s, bool saving, uint32_t *mean, uint32_t *rstd) {
  uint32_t out = ab_tape_new(s->t, s->N * s->d * s->rb, AB_TAG_ACT);
  uint32_t mu = ab_tape_new(s->t, s->N * 4, AB_TAG_ACT), rs = ab_tape_new(s->t, s->N * 4, AB_TAG_ACT);
  *mean = save(s, saving, mu);
  *rstd = save(s, saving, rs);
  ab_tape_drop(s->t, mu);
  ab_tape_drop(s->t, rs);
  if (s->m->cfg.autocast) {
    uint32_t c = ab_tape_new(s->t, s->N * s->d * s->hb, AB_TAG_ACT);
    ab_tape_unary(s->t, AB_K_CAST, out, c, s->N * s->d, AB_F32, s->dt);
    ab_tape_drop(s->t, out);
    out = c;
  }
  return out;
}

/* Linear of in (N x n_in) with parameter pw (n_out x n_in) and bias pb: a new output. */
static uint32_t linear(const shape_t *s, bool saving, uint32_t in, size_t pw, size_t pb, uint64_t n_in, uint64_t n_out,
                       uint32_t *saved_in, uint32_t *saved_w) {
  uint32_t w = compute_weight(s, pw);
  compute_weight(s, pb);
  uint32_t out = ab_tape_new(s->t, s->N * n_out * s->hb, AB_TAG_ACT);
  ab_tape_gemm(s->t, in, w, out, s->N, n_out, n_in, s->dt, s->dt);
  *saved_in = save(s, saving, in);
  /* A parameter is saved as itself; only autocast's cast is a tensor of its own. */
  *saved_w = s->m->cfg.autocast ? save(s, saving, w) : AB_NO_TENSOR;
  return out;
}

/* Backward of linear: the input gradient (new), and the weight and bias gradients handed to
 * AccumulateGrad. Drops what the linear saved. */
static uint32_t linear_backward(const shape_t *s, uint32_t gout, uint32_t *saved_in, uint32_t *saved_w, size_t pw,
                                size_t pb, uint64_t n_in, uint64_t n_out) {
  uint32_t w = s->m->cfg.autocast ? *saved_w : s->m->weight[pw];
  uint32_t gin = ab_tape_new(s->t, s->N * n_in * s->hb, AB_TAG_TEMP);
  ab_tape_gemm(s->t, gout, w, gin, s->N, n_in, n_out, s->dt, s->dt);
  uint32_t gw = ab_tape_new(s->t, n_out * n_in * s->hb, wgrad_tag(s));
  ab_tape_gemm(s->t, gout, *saved_in, gw, n_out, n_in, s->N, s->dt, s->dt);
  uint32_t gb = ab_tape_new(s->t, n_out * s->hb, wgrad_tag(s));
  ab_tape_clear(s->t, saved_in);
  ab_tape_clear(s->t, saved_w);
  param_grad(s, pw, gw, true);
  param_grad(s, pb, gb, true);
  return gin;
}

/* Backward of LayerNorm (and of the cast after it): the input gradient in the residual
 * dtype; the LN's weight and bias gradients (in the parameters' dtype: LN runs in fp32 under
 * autocast, so no cast). */
static uint32_t layer_norm_backward(const shape_t *s, uint32_t gout, uint32_t *x, uint32_t *mean, uint32_t *rstd,
                                    size_t pw, size_t pb) {
  if (s->m->cfg.autocast) {
    uint32_t g32 = ab_tape_new(s->t, s->N * s->d * 4, AB_TAG_TEMP);
    ab_tape_unary(s->t, AB_K_CAST, gout, g32, s->N * s->d, s->dt, AB_F32);
    ab_tape_drop(s->t, gout);
    gout = g32;
  }
  uint32_t gin = ab_tape_new(s->t, s->N * s->d * s->rb, AB_TAG_TEMP);
  uint32_t gw = ab_tape_new(s->t, s->d * s->pb, AB_TAG_GRAD), gb = ab_tape_new(s->t, s->d * s->pb, AB_TAG_GRAD);
  ab_tape_clear(s->t, x);
  ab_tape_clear(s->t, mean);
  ab_tape_clear(s->t, rstd);
  ab_tape_drop(s->t, gout);
  param_grad(s, pw, gw, false);
  param_grad(s, pb, gb, false);
  return gin;
}

/* The gradient a residual add hands its branch: the same tensor, or under autocast its
 * cast to the branch's dtype (the add promoted the branch's output to fp32). */
static uint32_t branch_grad(const shape_t *s, uint32_t g) {
  if (!s->m->cfg.autocast) return ab_tape_hold(s->t, g);
  uint32_t c = ab_tape_new(s->t, s->N * s->d * s->hb, AB_TAG_TEMP);
  ab_tape_unary(s->t, AB_K_CAST, g, c, s->N * s->d, AB_F32, s->dt);
  return c;
}

/* Scaled dot-product attention over qkv (N x 3d): the output (N x d, new). */
static uint32_t attention(const shape_t *s, bool saving, uint32_t qkv, ab_block_saved_t *sv) {
  ab_tape_t *t = s->t;
  uint64_t N = s->N, d = s->d, H = s->H, T = s->T, hd = d / H;
  if (s->m->cfg.flash) {
    uint32_t o = ab_tape_new(t, N * d * s->hb, AB_TAG_ACT);
    uint32_t lse = ab_tape_new(t, N * H * 4, AB_TAG_ACT);
    sv->qkv = save(s, saving, qkv);
    sv->o_attn = save(s, saving, o);
    sv->lse = save(s, saving, lse);
    ab_tape_drop(t, lse);
    return o;
  }
  /* The math path: q and k scaled, scores = q k^T, the causal mask filled in, softmax,
   * probs v, and the heads laid back side by side. */
  uint32_t qs = ab_tape_new(t, N * d * s->hb, AB_TAG_ACT), ks = ab_tape_new(t, N * d * s->hb, AB_TAG_ACT);
  uint32_t scores = ab_tape_new(t, N * H * T * s->hb, AB_TAG_TEMP);
  ab_tape_gemm(t, qs, ks, scores, N * H, T, hd, s->dt, s->dt);
  uint32_t mask = ab_tape_new(t, T * T, AB_TAG_TEMP);
  ab_tape_drop(t, mask);
  uint32_t probs = ab_tape_new(t, N * H * T * s->hb, AB_TAG_ACT);
  ab_tape_drop(t, scores);
  uint32_t ov = ab_tape_new(t, N * d * s->hb, AB_TAG_TEMP);
  ab_tape_gemm(t, probs, qkv, ov, N * H, hd, T, s->dt, s->dt);
  sv->q_scaled = save(s, saving, qs);
  sv->k_scaled = save(s, saving, ks);
  sv->probs = save(s, saving, probs);
  sv->qkv = save(s, saving, qkv);
  ab_tape_drop(t, qs);
  ab_tape_drop(t, ks);
  ab_tape_drop(t, probs);
  uint32_t o = ab_tape_new(t, N * d * s->hb, AB_TAG_ACT);
  ab_tape_move(t, AB_K_COPY, ov, o, N * d * s->hb, 0);
  ab_tape_drop(t, ov);
  return o;
}

/* Backward of attention: the gradient of qkv (new). Drops what attention saved. */
static uint32_t attention_backward(const shape_t *s, uint32_t go, ab_block_saved_t *sv) {
  ab_tape_t *t = s->t;
  uint64_t N = s->N, d = s->d, H = s->H, T = s->T, hd = d / H;
  uint32_t dq, dk, dv;
  if (s->m->cfg.flash) {
    uint32_t acc = ab_tape_new(t, N * d * 4, AB_TAG_TEMP), sd = ab_tape_new(t, N * H * 4, AB_TAG_TEMP);
    dq = ab_tape_new(t, N * d * s->hb, AB_TAG_TEMP);
    dk = ab_tape_new(t, N * d * s->hb, AB_TAG_TEMP);
    dv = ab_tape_new(t, N * d * s->hb, AB_TAG_TEMP);
    ab_tape_drop(t, acc);
    ab_tape_drop(t, sd);
    ab_tape_clear(t, &sv->o_attn);
    ab_tape_clear(t, &sv->lse);
  } else {
    uint32_t gp = ab_tape_new(t, N * H * T * s->hb, AB_TAG_TEMP);
    ab_tape_gemm(t, go, sv->qkv, gp, N * H, T, hd, s->dt, s->dt);
    dv = ab_tape_new(t, N * d * s->hb, AB_TAG_TEMP);
    ab_tape_gemm(t, sv->probs, go, dv, N * H, hd, T, s->dt, s->dt);
    uint32_t gs = ab_tape_new(t, N * H * T * s->hb, AB_TAG_TEMP);
    ab_tape_drop(t, gp);
    ab_tape_clear(t, &sv->probs);
    uint32_t gqs = ab_tape_new(t, N * d * s->hb, AB_TAG_TEMP), gks = ab_tape_new(t, N * d * s->hb, AB_TAG_TEMP);
    ab_tape_gemm(t, gs, sv->k_scaled, gqs, N * H, hd, T, s->dt, s->dt);
    ab_tape_gemm(t, gs, sv->q_scaled, gks, N * H, hd, T, s->dt, s->dt);
    ab_tape_drop(t, gs);
    ab_tape_clear(t, &sv->q_scaled);
    ab_tape_clear(t, &sv->k_scaled);
    dq = ab_tape_new(t, N * d * s->hb, AB_TAG_TEMP);
    ab_tape_drop(t, gqs);
    dk = ab_tape_new(t, N * d * s->hb, AB_TAG_TEMP);
    ab_tape_drop(t, gks);
  }
  ab_tape_clear(t, &sv->qkv);
  uint32_t dqkv = ab_tape_new(t, N * 3 * d * s->hb, AB_TAG_TEMP);
  ab_tape_drop(t, dq);
  ab_tape_drop(t, dk);
  ab_tape_drop(t, dv);
  return dqkv;
}

/* A block's forward from x (the caller keeps its reference): the block's output, or, when
 * recomputing for a checkpoint, AB_NO_TENSOR (the last residual add is not needed). */
static uint32_t block_forward(const shape_t *s, unsigned module, uint32_t x, bool saving, bool recompute) {
  ab_tape_t *t = s->t;
  ab_block_saved_t *sv = &s->m->saved[module - 1];
  size_t p = block_first(module);
  uint64_t N = s->N, d = s->d, f = s->f;
  if (!recompute) enter(s, module, false);
  sv->x_in = save(s, saving, x);
  uint32_t ln1 = layer_norm(s, saving, &sv->ln1_mean, &sv->ln1_rstd);
  uint32_t qkv = linear(s, saving, ln1, p + QKV_W, p + QKV_B, d, 3 * d, &sv->ln1_out, &sv->w_qkv);
  ab_tape_drop(t, ln1);
  uint32_t o = attention(s, saving, qkv, sv);
  ab_tape_drop(t, qkv);
  uint32_t a = linear(s, saving, o, p + PROJ_W, p + PROJ_B, d, d, &sv->o_proj, &sv->w_proj);
  ab_tape_drop(t, o);
  uint32_t x_mid = ab_tape_new(t, N * d * s->rb, AB_TAG_ACT);
  ab_tape_drop(t, a);
  sv->x_mid = save(s, saving, x_mid);
  uint32_t ln2 = layer_norm(s, saving, &sv->ln2_mean, &sv->ln2_rstd);
  uint32_t h = linear(s, saving, ln2, p + FC1_W, p + FC1_B, d, f, &sv->ln2_out, &sv->w_fc1);
  ab_tape_drop(t, ln2);
  uint32_t g = ab_tape_new(t, N * f * s->hb, AB_TAG_ACT);
  ab_tape_unary(t, AB_K_GELU, h, g, N * f, s->dt, s->dt);
  sv->h = save(s, saving, h);
  ab_tape_drop(t, h);
  uint32_t y = linear(s, saving, g, p + FC2_W, p + FC2_B, f, d, &sv->g, &sv->w_fc2);
  ab_tape_drop(t, g);
  uint32_t out = AB_NO_TENSOR;
  if (!recompute) out = ab_tape_new(t, N * d * s->rb, AB_TAG_ACT);
  ab_tape_drop(t, y);
  ab_tape_drop(t, x_mid);
  if (!recompute) leave(s, module, false);
  return out;
}

/* A block's backward: gx, the gradient of its output, becomes (in place) that of its input. */
static void block_backward(const shape_t *s, unsigned module, uint32_t gx) {
  ab_tape_t *t = s->t;
  ab_block_saved_t *sv = &s->m->saved[module - 1];
  size_t p = block_first(module);
  uint64_t N = s->N, d = s->d, f = s->f;
  enter(s, module, true);
  if (s->m->cfg.checkpoint) {
    /* The recompute runs under the autocast state of the forward, whose exit clears the
     * cast cache again; the module's parameters are already there for its backward. */
    block_forward(s, module, s->m->checkpoint_in[module - 1], true, true);
    if (s->m->cfg.autocast) autocast_exit(s);
    ab_tape_clear(t, &s->m->checkpoint_in[module - 1]);
  }
  uint32_t gy = branch_grad(s, gx);
  uint32_t gg = linear_backward(s, gy, &sv->g, &sv->w_fc2, p + FC2_W, p + FC2_B, f, d);
  ab_tape_drop(t, gy);
  uint32_t gh = ab_tape_new(t, N * f * s->hb, AB_TAG_TEMP);
  ab_tape_unary(t, AB_K_GELU, gg, gh, N * f, s->dt, s->dt);
  ab_tape_drop(t, gg);
  ab_tape_clear(t, &sv->h);
  uint32_t gl = linear_backward(s, gh, &sv->ln2_out, &sv->w_fc1, p + FC1_W, p + FC1_B, d, f);
  ab_tape_drop(t, gh);
  ab_tape_drop(t, layer_norm_backward(s, gl, &sv->x_mid, &sv->ln2_mean, &sv->ln2_rstd, p + LN2_W, p + LN2_B));
  uint32_t ga = branch_grad(s, gx);
  uint32_t go = linear_backward(s, ga, &sv->o_proj, &sv->w_proj, p + PROJ_W, p + PROJ_B, d, d);
  ab_tape_drop(t, ga);
  uint32_t dqkv = attention_backward(s, go, sv);
  ab_tape_drop(t, go);
  gl = linear_backward(s, dqkv, &sv->ln1_out, &sv->w_qkv, p + QKV_W, p + QKV_B, d, 3 * d);
  ab_tape_drop(t, dqkv);
  ab_tape_drop(t, layer_norm_backward(s, gl, &sv->x_in, &sv->ln1_mean, &sv->ln1_rstd, p + LN1_W, p + LN1_B));
  leave(s, module, true);
}

void ab_transformer_forward_backward(ab_transformer_t *m, uint64_t batch, uint64_t seq, ab_scaler_t *scaler,
                                     ab_transformer_step_t *step) {
  const ab_transformer_cfg_t *c = &m->cfg;
  shape_t s = {.m = m, .t = m->tape, .B = batch, .T = seq, .N = batch * seq, .d = c->d_model,
               .f = c->ffn_mult * c->d_model, .H = c->heads, .V = c->vocab, .dt = c->compute};
  s.rt = s.pt = c->autocast ? AB_F32 : c->compute;
  s.hb = ab_dtype_bytes(s.dt);
  s.rb = ab_dtype_bytes(s.rt);
  s.pb = ab_dtype_bytes(s.pt);
  ab_tape_t *t = m->tape;
  uint64_t N = s.N, d = s.d, V = s.V;
  unsigned L = (unsigned)c->layers, head = L + 1;

  step->ids = ab_tape_new(t, N * 8, AB_TAG_INPUT);
  step->targets = ab_tape_new(t, N * 8, AB_TAG_INPUT);

  /* Forward. */
  enter(&s, 0, false);
  uint32_t x = ab_tape_new(t, N * d * s.rb, AB_TAG_ACT);
  leave(&s, 0, false);
  for (unsigned l = 1; l <= L; l++) {
    uint32_t y;
    if (c->checkpoint) {
      m->checkpoint_in[l - 1] = ab_tape_hold(t, x);
      y = block_forward(&s, l, x, false, false);
    } else {
      y = block_forward(&s, l, x, true, false);
    }
    ab_tape_drop(t, x);
    x = y;
  }
  head_saved_t hs;
  enter(&s, head, false);
  hs.x_last = ab_tape_hold(t, x);
  ab_tape_drop(t, x);
  uint32_t lnf = layer_norm(&s, true, &hs.mean, &hs.rstd);
  uint32_t w_head = compute_weight(&s, 0);
  step->logits = ab_tape_new(t, N * V * s.hb, AB_TAG_ACT);
  ab_tape_gemm(t, lnf, w_head, step->logits, N, V, d, s.dt, s.dt);
  hs.lnf_out = lnf;
  hs.w_head = c->autocast ? ab_tape_hold(t, w_head) : AB_NO_TENSOR;
  leave(&s, head, false);
  /* cross_entropy: in fp32, so half logits are upcast first. */
  uint32_t logits32 = step->logits;
  if (s.dt != AB_F32) {
    logits32 = ab_tape_new(t, N * V * 4, AB_TAG_TEMP);
    ab_tape_unary(t, AB_K_CAST, step->logits, logits32, N * V, s.dt, AB_F32);
  } else {
    ab_tape_hold(t, logits32);
  }
  hs.log_probs = ab_tape_new(t, N * V * 4, AB_TAG_ACT);
  ab_tape_drop(t, logits32);
  step->loss = ab_tape_new(t, 4, AB_TAG_ACT);
  hs.total_weight = ab_tape_new(t, 4, AB_TAG_ACT);
  if (c->autocast) autocast_exit(&s);
  step->scaled_loss = scaler ? ab_scaler_scale_loss(scaler, t, step->loss) : ab_tape_hold(t, step->loss);

  /* Backward, on autograd's thread: from ones_like(loss), through the scaling, the loss,
   * the head. */
  t->thread = 1;
  uint32_t g = ab_tape_new(t, 4, AB_TAG_TEMP);
  if (step->scaled_loss != step->loss) {
    uint32_t gl = ab_tape_new(t, 4, AB_TAG_TEMP);
    ab_tape_drop(t, g);
    g = gl;
  }
  uint32_t g_logp = ab_tape_new(t, N * V * 4, AB_TAG_TEMP);
  ab_tape_drop(t, g);
  ab_tape_clear(t, &hs.total_weight);
  uint32_t g_logits = ab_tape_new(t, N * V * 4, AB_TAG_TEMP);
  ab_tape_drop(t, g_logp);
  ab_tape_clear(t, &hs.log_probs);
  if (s.dt != AB_F32) {
    uint32_t gh = ab_tape_new(t, N * V * s.hb, AB_TAG_TEMP);
    ab_tape_unary(t, AB_K_CAST, g_logits, gh, N * V, AB_F32, s.dt);
    ab_tape_drop(t, g_logits);
    g_logits = gh;
  }
  enter(&s, head, true);
  uint32_t w = c->autocast ? hs.w_head : m->weight[0];
  uint32_t g_lnf = ab_tape_new(t, N * d * s.hb, AB_TAG_TEMP);
  ab_tape_gemm(t, g_logits, w, g_lnf, N, d, V, s.dt, s.dt);
  uint32_t g_emb = ab_tape_new(t, V * d * s.hb, wgrad_tag(&s));
  ab_tape_gemm(t, g_logits, hs.lnf_out, g_emb, V, d, N, s.dt, s.dt);
  ab_tape_drop(t, g_logits);
  ab_tape_clear(t, &hs.lnf_out);
  ab_tape_clear(t, &hs.w_head);
  /* The tied embedding's gradient from the head (cast first under autocast) waits in its
   * AccumulateGrad's input buffer for the lookup's, below. */
  uint32_t g_tied = g_emb;
  if (c->autocast) {
    g_tied = ab_tape_new(t, V * d * 4, AB_TAG_GRAD);
    ab_tape_unary(t, AB_K_CAST, g_emb, g_tied, V * d, s.dt, AB_F32);
    ab_tape_drop(t, g_emb);
  }
  uint32_t gx = layer_norm_backward(&s, g_lnf, &hs.x_last, &hs.mean, &hs.rstd, m->nparams - 2, m->nparams - 1);
  leave(&s, head, true);
  for (unsigned l = L; l >= 1; l--) block_backward(&s, l, gx);
  /* The embedding: ids sorted (two int64 temporaries), a dense gradient, added in place to
   * the head's; AccumulateGrad then runs once, with the sum. */
  enter(&s, 0, true);
  uint32_t sorted = ab_tape_new(t, N * 8, AB_TAG_TEMP), order = ab_tape_new(t, N * 8, AB_TAG_TEMP);
  uint32_t g_wte = ab_tape_new(t, V * d * s.pb, AB_TAG_GRAD);
  ab_tape_drop(t, sorted);
  ab_tape_drop(t, order);
  ab_tape_drop(t, gx);
  ab_tape_drop(t, g_wte);
  param_grad(&s, 0, g_tied, false);
  leave(&s, 0, true);
  t->thread = 0;
}

void ab_transformer_end_step(ab_transformer_t *m, ab_transformer_step_t *step) {
  ab_tape_clear(m->tape, &step->scaled_loss);
  ab_tape_clear(m->tape, &step->loss);
  ab_tape_clear(m->tape, &step->logits);
  ab_tape_clear(m->tape, &step->targets);
  ab_tape_clear(m->tape, &step->ids);
}
