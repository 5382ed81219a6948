/* transformer.h: a GPT-style decoder's tensors through PyTorch's autograd, for the training
 * workloads (dynamic-shapes, mixed-precision, zero).
 *
 * The model: a token embedding (vocab x d_model, tied to the output head, no learned
 * positions: rotary-style), `layers` pre-LayerNorm blocks (LN, fused QKV linear, causal
 * attention, output projection, residual add; LN, linear to ffn_mult x d_model, GELU,
 * linear back, residual add; every linear with a bias), a final LayerNorm and the head.
 * Parameters: vocab*d + layers*(4 + 2*ffn_mult)*d^2 + layers*(9 + ffn_mult)*d + 2d; the
 * 184 M of gpu_measurements.md's transformer at its shape.
 *
 * Size model of one training step over N = batch*seq tokens (hb: bytes of the compute dtype;
 * rb: of the residual stream, 4 under autocast since the residual adds promote to fp32):
 * forward, per block, the tensors autograd saves, freed in backward when the op that saved
 * them has run:
 *   block input (rb, saved by LN1), LN1 output cast to the compute dtype (hb, by the QKV
 *   linear), QKV (3 hb), attention output (hb, by attention and the projection),
 *   logsumexp (fp32, heads per token) with flash attention or, without it (the SDPA math
 *   path), q and k scaled (hb each) and the softmax probabilities (heads*seq per token, hb),
 *   residual after attention (rb, by LN2), LN2 output cast (hb), FC1 output (ffn hb, by
 *   GELU), GELU output (ffn hb, by FC2), and two fp32 LN statistics per LN.
 *   Under autocast: the LN outputs are fp32 temporaries before their cast, each linear's
 *   weight is cast once per forward (cached while autocast is on) and saved, bias casts die
 *   when autocast exits.
 *   Temporaries freed at once: the projection and FC2 outputs after their residual add, the
 *   raw attention scores and the causal mask (math path).
 * Head and loss: final LN (saving its input), logits (N x vocab, hb), kept by the step until
 * it ends; for a half compute dtype their fp32 upcast (4 bytes, autocast's cast for
 * cross_entropy), log_softmax output (fp32, saved), the upcast freed once log_softmax ran.
 * Backward: nll_loss_backward and log_softmax_backward each make an N x vocab fp32 tensor
 * while the saved output and the logits are live (where the step peaks: 14 bytes per token
 * per vocabulary entry under bf16 autocast), then the cast back; per block in reverse
 * the input gradient of each op is made, the saved tensors of the op dropped; residual
 * gradients accumulate in place (autograd's InputBuffer steals the buffer); flash attention
 * backward makes an fp32 dq accumulator and dq, dk, dv, then SplitBackward concatenates them;
 * a weight gradient is made in the compute dtype and, under autocast, cast to fp32 by the
 * cast's backward; the gradient then reaches AccumulateGrad and becomes .grad (the tied
 * embedding's two, from the head and from the lookup, are first summed in place in its
 * input buffer, so AccumulateGrad runs once); the embedding's backward sorts the token ids
 * (two int64 temporaries).
 * Activation checkpointing (torch.utils.checkpoint per block, non-reentrant): the forward
 * keeps only each block's input; backward recomputes the block (saving as above, without
 * the final residual add, which no saved tensor needs; no hooks: the module is already
 * entered for its backward) and then runs its backward.
 * Sources: PyTorch's autocast op lists (layer_norm, log_softmax, cross_entropy in fp32;
 * linear in the low precision), derivatives.yaml (what each op saves), the flash attention
 * backward (dq_accum), and the recorded traces in fixtures/pytorch-2.11-h200 (the order of
 * weight casts, gradient casts and frees); peers.md §8.
 *
 * Modules (for hooks): 0 the embedding, 1..layers the blocks, layers+1 the head (final LN
 * and the tied embedding). Forward enters them in order, backward in reverse.
 *
 * Thread-safety: a model belongs to one thread.
 */
#ifndef AB_TRANSFORMER_H
#define AB_TRANSFORMER_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/base/units.h"
#include "workloads/autograd.h"

typedef struct ab_transformer_cfg_s {
  uint64_t layers, d_model, heads, vocab, ffn_mult;
  bool flash;               /* flash attention: no seq x seq scores */
  bool checkpoint;          /* activation checkpointing per block */
  ab_dtype_t compute;       /* dtype of matmuls and activations */
  bool autocast;            /* fp32 parameters cast on use (torch.autocast); else parameters in `compute` */
  uint64_t workspace_bytes; /* cuBLAS workspace per thread (the tape's; parsed here) */
} ab_transformer_cfg_t;

typedef struct ab_transformer_s ab_transformer_t;

/* Optional callbacks; any may be NULL. */
typedef struct ab_transformer_hooks_s {
  /* Before and after module runs in forward or backward (ZeRO-3 gathers and releases its
   * parameters here, setting m->weight). */
  void (*enter)(void *ctx, ab_transformer_t *m, unsigned module, bool backward);
  void (*leave)(void *ctx, ab_transformer_t *m, unsigned module, bool backward);
  /* A gradient (one reference, the hook's) for parameter p was made, in the parameters'
   * dtype. NULL: ab_transformer_accumulate. */
  void (*grad)(void *ctx, ab_transformer_t *m, size_t p, uint32_t id);
} ab_transformer_hooks_t;

/* The tensors a step keeps until it ends (Python locals of the training step). */
typedef struct ab_transformer_step_s {
  uint32_t ids, targets, logits, loss, scaled_loss;
} ab_transformer_step_t;

struct ab_transformer_s {
  ab_transformer_cfg_t cfg;
  ab_tape_t *tape;          /* not owned */
  size_t nparams;
  uint64_t *numel;          /* per parameter: elements */
  unsigned *module;         /* per parameter: the module it belongs to */
  uint32_t *weight;         /* per parameter: the live tensor holding it; set by the workload */
  uint32_t *grad;           /* per parameter: .grad, or AB_NO_TENSOR */
  const ab_transformer_hooks_t *hooks; /* may be NULL */
  void *hooks_ctx;
  uint32_t *cast;           /* autocast's weight cache, per parameter (internal) */
  struct ab_block_saved_s *saved; /* per block (internal) */
  uint32_t *checkpoint_in;  /* per block: its input, kept by the checkpoint (internal) */
};

/* The parameters of a module: at most this many (a block's 12, the head's 3). */
#define AB_TRANSFORMER_MODULE_MAX_PARAMS 12

/* The shared command-line keys of a transformer workload, their help lines, and a parser
 * that reads them into cfg (its fields hold the defaults). precision is not among them. */
#define AB_TRANSFORMER_KEYS "layers, d_model, heads, vocab, ffn, flash, checkpoint, workspace"
#define AB_TRANSFORMER_HELP                                                              \
  "  layers=N       transformer blocks (default 12)\n"                                  \
  "  d_model=N      model width (default 1024)\n"                                       \
  "  heads=N        attention heads, dividing d_model (default 16)\n"                   \
  "  vocab=N        vocabulary, the size of the logits' rows (default 32000)\n"         \
  "  ffn=N          FFN width as a multiple of d_model (default 4)\n"                   \
  "  flash=BOOL     flash attention; false: the math path with seq x seq scores (default true)\n" \
  "  checkpoint=BOOL  activation checkpointing per block (default false)\n"             \
  "  workspace=SIZE cuBLAS workspace (default 32MiB, PyTorch's on sm_90)\n"
ab_status ab_transformer_parse(ab_kvlist_t *p, ab_transformer_cfg_t *cfg, ab_diag_t *diag);
/* Note [Sizes that fit in 64 bits]
 * A step's tensors are products of the arguments (batch x seq x vocab for the logits, with
 * heads x seq more per token without flash attention), and with the largest values each key
 * allows they pass 2^64 and wrap to nonsense (an ALLOC of 0 bytes). No tensor of a step may
 * hold more than AB_MAX_TENSOR_ELEMENTS elements (2^46: 256 TiB in fp32, past any device,
 * and far enough below 2^64 that the sums of a step's tensors do not wrap either); past it
 * the arguments are refused, naming the ones that multiply. */
#define AB_MAX_TENSOR_ELEMENTS (1ULL << 46)
/* Checks a step of `tokens` tokens (the product of tokens_keys, given for the message) in
 * sequences of `seq` against the Note; the item blamed is the first of blame_keys given. */
ab_status ab_transformer_check_step(ab_kvlist_t *p, const ab_transformer_cfg_t *cfg, uint64_t tokens, uint64_t seq,
                                    const char *tokens_keys, ab_diag_t *diag);
/* The defaults: gpu_measurements.md's transformer (d_model 1024, 12 layers, 16 heads,
 * vocabulary 32000, FFN 4x, flash attention, 32 MiB workspace) in fp32. */
ab_transformer_cfg_t ab_transformer_defaults(void);

/* Sets up m for cfg on tape; weights and gradients start absent. AB_ERR_INVALID for a
 * shape that does not fit (heads not dividing d_model, sizes past 2^40 bytes). */
ab_status ab_transformer_init(ab_transformer_t *m, const ab_transformer_cfg_t *cfg, ab_tape_t *tape, ab_diag_t *diag);
void ab_transformer_free(ab_transformer_t *m);

/* Allocates every parameter in dtype, in module order, into m->weight (model.cuda()). */
void ab_transformer_create_params(ab_transformer_t *m, ab_dtype_t dtype);
/* The parameters of module into out (the head lists the tied embedding); their number. */
size_t ab_transformer_module_params(const ab_transformer_t *m, unsigned module,
                                    size_t out[AB_TRANSFORMER_MODULE_MAX_PARAMS]);
/* Modules in the model: layers + 2. */
unsigned ab_transformer_modules(const ab_transformer_t *m);
/* Total parameter elements. */
uint64_t ab_transformer_numel(const ab_transformer_t *m);

/* One forward and backward over batch x seq tokens: inputs, activations, loss, gradients.
 * scaler (may be NULL) scales the loss. The step's locals come back in step; drop them with
 * ab_transformer_end_step when the step is over. */
void ab_transformer_forward_backward(ab_transformer_t *m, uint64_t batch, uint64_t seq, ab_scaler_t *scaler,
                                     ab_transformer_step_t *step);
void ab_transformer_end_step(ab_transformer_t *m, ab_transformer_step_t *step);
/* AccumulateGrad: the first gradient of p becomes m->grad[p]; a later one is added in place
 * and freed. Takes over the reference to id. */
void ab_transformer_accumulate(ab_transformer_t *m, size_t p, uint32_t id);
/* optimizer.zero_grad(set_to_none=True). */
void ab_transformer_zero_grad(ab_transformer_t *m);

#endif
