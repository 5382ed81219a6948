/* serve.c: an LLM inference server's life as vLLM's V1 engine runs it (vllm-project/vllm at
 * commit 35d5cda: vllm/v1/worker/gpu_worker.py, Worker.init_device,
 * determine_available_memory and compile_or_warm_up_model; the functions they call, read in
 * copies of the same months: vllm/utils/mem_utils.py memory_profiling, MemorySnapshot and
 * MemoryProfilingResult; vllm/platforms/cuda.py get_current_memory_usage;
 * vllm/v1/worker/gpu_model_runner.py load_model, profile_run, capture_model and
 * _capture_cudagraphs; vllm/config/vllm.py VllmConfig.__post_init__ and
 * _set_cudagraph_sizes; vllm/compilation/cuda_graph.py CUDAGraphWrapper and
 * vllm/compilation/backends.py, which wraps each piece of a split model), from start-up to a
 * stream of requests.
 *
 * Size model and sequence (d = hidden, q = heads x head_dim = d, kv = kv_heads x head_dim,
 * b = dtype bytes; vLLM's gpu_model_runner and gpu_worker):
 *   1. The runner's persistent buffers, made when the runner is built, after the start-up
 *      snapshot and before the model: input ids (int32), positions and slot mapping (int64)
 *      of max_tokens, inputs_embeds (max_tokens x d x b), the block table (max_batch x
 *      blocks per request, int32).
 *   2. The model built on the device, module by module (`with torch.device("cuda")`): the
 *      embedding (vocab x d), per layer the fused QKV (d x (q + 2 kv)), the output
 *      projection (q x d), two RMSNorm weights (d), and the MLP: dense, gate_up (d x 2 ffn)
 *      and down (ffn x d); with experts, the router (d x experts) and the fused experts' w13
 *      (experts x 2 ffn x d) and w2 (experts x ffn x d) at moe_bits per weight (4.25 for
 *      mxfp4's values and scales); then the final norm and an untied lm_head (vocab x d).
 *      load_weights copies the checkpoint in from the host: no device allocation. The load
 *      is measured as vLLM's DeviceMemoryProfiler measures it: empty_cache on each side
 *      (get_current_memory_usage), the weights' bytes the rise of allocated bytes across it.
 *   3. With repack: process_weights_after_loading, inside that measure, layer by layer,
 *      moves each layer's w13 and then its w2 to a new layout (mxfp4's convert_layout on
 *      Hopper): the new tensor, repack_pad larger, is made while the old one is live, a copy
 *      kernel fills it, the old one is freed. Where the fragmentation
 *      vllm-project/vllm#41158 describes (a pull request, closed; #41268 fixed it) comes
 *      from: the w2 of a layer is carved out of the freed w13 segment of the same layer, and
 *      the rest of that segment, too small for anything later, stays pinned (workloads/README.md,
 *      "serve").
 *   4. determine_available_memory: empty_cache, the peak statistics reset, then profile_run:
 *      a forward of max_tokens tokens, eager, each request's last hidden state gathered
 *      (max_batch rows), and the dummy sampler run over them (fp32 logits, probabilities,
 *      the sampled ids) while the forward's output still lives; everything freed, then
 *      empty_cache. The KV cache's bytes follow Note [vLLM's KV cache bytes].
 *   5. The KV cache, in blocks of `block` tokens, one tensor per layer of num_blocks x block
 *      x 2 kv x b. No bytes left, or less than one request's prompt_max + gen_max tokens
 *      (vLLM's check of max_model_len against the cache): vLLM's start-up error, and so a
 *      refusal here.
 *   6. compile_or_warm_up_model: the CUDA graphs of `graphs` (Note [vLLM's CUDA graphs]),
 *      then, eager on the default stream, the sampler's warm-up: a forward of max_batch
 *      tokens and the sampler over max_batch requests, made after the captures so that no
 *      empty_cache of theirs frees its blocks.
 *   7. The requests: prompt lengths uniform in prompt_min..prompt_max, output lengths in
 *      gen_min..gen_max, all waiting at the start (an offline batch). Each step, STEP first:
 *      when a request waits, fewer than max_batch run, and its prompt + output tokens fit
 *      in the free KV blocks, a prefill step takes waiting requests in order while their
 *      prompts fit in max_tokens; otherwise a decode step of the running requests. A step
 *      replays the graph vLLM's dispatcher picks for its tokens (Note [vLLM's CUDA graphs]),
 *      or runs the forward eager; then each request's last hidden state is gathered and the
 *      logits and sampler run, eager. A request that has its output leaves and gives its
 *      blocks back.
 * The forward of T tokens, per layer: the norm output (T x d), QKV (T x (q + 2 kv)), the
 * attention output (T x q), the projection (T x d), the second norm's output, then gate_up
 * (T x 2 ffn), the activation (T x ffn) and down (T x d); with experts the router logits
 * (fp32), top-k ids and weights, and gate_up, activation and down for T x topk rows before
 * the weighted sum (T x d). Each dies at its last use; the residual stream is updated in
 * place (fused_add_rms_norm). Kernels (dtype 2: bf16, 4: fp32; none for 1, an 8-bit
 * format the kernels do not have): the GEMMs on the dense weights, the activation, the
 * repack's copies, the logits' GEMM, and for a graph's replay one GEMM a layer into that
 * layer's KV cache, which the replayed graph writes (the graph's own buffers are the pool's,
 * freed in the stream); quantized experts get none.
 * The suggested budget is the card less `outside`: `allocbench run -w serve` runs under it.
 *
 * Note [vLLM's KV cache bytes]: vLLM measures the device once NCCL is up (init_device's
 * MemorySnapshot: free and total by cudaMemGetInfo), refuses to start when the free memory is
 * less than requested_memory = gpu_memory_utilization x total, and gives the KV cache
 *     requested_memory - non_kv_cache_memory,
 *     non_kv_cache_memory = weights_memory + torch_peak_increase + non_torch_increase
 * (determine_available_memory; memory_profiling), where
 *   - weights_memory is the runner's model_memory_usage: allocated bytes after load_model
 *     less before it (step 2), the repacked layouts included;
 *   - torch_peak_increase is the peak of allocated bytes during profile_run less the
 *     allocated bytes at its start: the peak statistics are reset before it, so the load's
 *     own peak (a repack's old and new tensor side by side) is in no term;
 *   - non_torch_increase is what the device holds outside PyTorch's reserve (used less
 *     memory_reserved) after the profile, less the same at the start-up snapshot.
 * The runner's buffers (step 1) are made after the snapshot, before the load, and are live
 * when the peak is reset: they are in no term, and take their bytes from the 1 - util of the
 * card left over. So is what the process held outside PyTorch before the snapshot (the CUDA
 * context, NCCL's buffers): it is on the card, so PyTorch can have only card - outside. Here
 * `outside` is that memory, taken from the budget; the start-up refusal is card - outside <
 * util x card; what grows outside PyTorch during the profile (some attention backends'
 * buffers) is not modelled (non_torch_increase 0). Allocated bytes are the requests rounded
 * up to 512, as PyTorch rounds them (below, what differs). num_blocks is the bytes over one
 * block of every layer, rounded down (vllm/v1/core/kv_cache_utils.py, get_num_blocks).
 *
 * Note [vLLM's CUDA graphs]: `graphs` is vLLM's cudagraph_mode, FULL_AND_PIECEWISE by
 * default (VllmConfig.__post_init__ under the default VLLM_COMPILE). The capture sizes are
 * 1, 2, 4, every 8 from 8 to 248, every 16 from 256, up to min(2 x max_num_seqs, 512,
 * max_num_batched_tokens) (_set_cudagraph_sizes). capture_model, on a stream of its own
 * (graph_capture), takes the sizes largest first, so that a smaller graph reuses the larger
 * ones' blocks, into the one global pool every graph shares (CUDAGraphWrapper's graph_pool):
 *   - first the mixed batches' graphs, for every capture size: PIECEWISE under
 *     full_and_piecewise and piecewise, FULL under full, none under full_decode_only;
 *   - then, where the mode keeps decode apart (full_and_piecewise, full_decode_only), FULL
 *     graphs of uniform decode batches for the capture sizes up to max_num_seqs.
 * Per size, cudagraph_num_of_warmups (1) eager runs of the size, then the capture run (each a
 * _dummy_run, which also gathers min(size, max_num_seqs) rows of last hidden states, eager).
 * A FULL graph is the whole forward in one torch.cuda.graph; a PIECEWISE graph is the model
 * split at its attention ops, layers + 1 pieces each captured alone while attention runs
 * eager between them, writing into the output buffer the piece before allocated. Each
 * capture's torch.cuda.graph synchronises and empties the cache first (PyTorch,
 * torch/cuda/graphs.py, graph.__enter__), except for the pieces after the first of a
 * forward, where CUDAGraphWrapper's gc_disable patches empty_cache out. A piece's outputs are
 * live after its capture and are freed once the next piece, or attention, has used them;
 * the output of a FULL graph and of the last piece is made a weak reference inside the
 * capture (weak_ref_output), so its blocks go back to the pool at once, and the replays
 * write there.
 * At run time a uniform decode batch of n requests replays the FULL decode graph of the
 * smallest capture size >= n if there is one, else the mixed graph of that size; a prefill
 * step replays the mixed graph of the smallest capture size >= its tokens; without a graph
 * (more tokens than the largest size, or none captured) the forward runs eager. A replay
 * allocates nothing; a piecewise replay's attention writes into buffers of the pool.
 *
 * What differs from vLLM:
 *   - Allocated bytes here are the requests, each rounded up to 512; PyTorch's are its
 *     blocks', which keep a remainder too small to split off (up to 1 MiB in the large pool),
 *     so vLLM's terms read somewhat higher under the caching allocator (the gpt-oss profile's
 *     peak of workloads/README.md's "serve" by 19.5 MiB) and depend on the allocator; here they do not.
 *   - compile_or_warm_up_model's compile-size warm-ups and kernel_warmup are not modelled,
 *     nor the small tensors a dummy run makes beside the gather.
 *   - The scheduler here admits prompts whole and runs prefill and decode in separate steps;
 *     vLLM's V1 scheduler chunks prefills and mixes them with decodes in one batch (the
 *     mixed graphs serve those). Prefix caching is not modelled.
 *   - Every layer is full attention: a model with sliding-window layers (gpt-oss alternates
 *     them) has its KV cache laid out by vLLM's hybrid KV cache manager instead.
 *   - What vLLM's log suggests for --kv-cache-memory (the graphs' bytes and a 150 MiB
 *     redundancy buffer taken off) is not what it allocates, and is not modelled.
 *   - A smallest-budget search (allocbench oom) varies the budget, not the card: the KV cache
 *     stays sized for `card`, so the search measures how much room the strategy needs above
 *     that, and a budget between two that pass can fail where the caching allocator's
 *     release-and-retry takes a different path (during capture). To search the card, vary
 *     card= with the budget left to its suggestion.
 */
#include "workloads/serve.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/base/rng.h"
#include "kernels/base/units.h"
#include "workloads/autograd.h"

/* The capture stream: vLLM captures on a stream of its own (graph_capture()). */
#define CAPTURE_STREAM 1
/* The one private pool every graph shares. */
#define GRAPH_POOL 1
/* 32 MiB per stream's handle on sm_90 (Note [cuBLAS workspaces], autograd.h). */
#define CUBLAS_WORKSPACE_BYTES (32 * AB_MiB)
#define MAX_CAPTURES 1024
/* Piece inputs a capture frees when it ends: the attention output and the residual. */
#define MAX_DEFERRED 8

/* vLLM's cudagraph_mode, in its own names. */
typedef enum graphs_e { G_NONE, G_PIECEWISE, G_FULL, G_FULL_DECODE_ONLY, G_FULL_AND_PIECEWISE } graphs_t;
static const char *const graph_names[] = {"none", "piecewise", "full", "full_decode_only", "full_and_piecewise", NULL};

/* How a forward runs: eager, or captured as one FULL graph or as PIECEWISE graphs. */
typedef enum how_e { EAGER, FULL, PIECEWISE } how_t;

/* CUDAGraphMode.mixed_mode(): the graphs of mixed batches. */
static how_t mixed_mode(graphs_t g) {
  switch (g) {
    case G_PIECEWISE:
    case G_FULL_AND_PIECEWISE: return PIECEWISE;
    case G_FULL: return FULL;
    default: return EAGER;
  }
}
/* decode_mode() == FULL and separate_routine(): FULL graphs of uniform decode batches. */
static bool decode_graphs(graphs_t g) { return g == G_FULL_AND_PIECEWISE || g == G_FULL_DECODE_ONLY; }

typedef struct args_s {
  uint64_t hidden, layers, heads, kv_heads, vocab, dtype, ffn, experts, topk;
  double moe_bits;     /* bits per expert weight */
  bool repack;
  uint64_t repack_pad; /* bytes a repacked tensor grows by */
  uint64_t max_batch, max_tokens, block;
  double util;
  uint64_t card;
  uint64_t outside; /* memory outside PyTorch before vLLM's snapshot (Note [vLLM's KV cache bytes]) */
  int graphs;       /* graphs_t */
  uint64_t requests, prompt_min, prompt_max, gen_min, gen_max;
} args_t;

typedef struct layer_s {
  uint32_t qkv, o, norm1, norm2, router, w13, w2;
  uint64_t w13_bytes, w2_bytes; /* as requested, for the repack */
} layer_t;

typedef struct request_s {
  uint64_t prompt, gen, done; /* tokens: prompt, to generate, generated */
} request_t;

/* The graphs captured: sizes largest first. */
typedef struct graph_set_s {
  uint64_t size[MAX_CAPTURES];
  size_t n;
} graph_set_t;

typedef struct serve_s {
  const args_t *a;
  ab_events_t *es;
  uint64_t *bytes;           /* per id while live: bytes as PyTorch counts them; 0 once freed */
  uint32_t cap;
  uint64_t live, peak;       /* allocated bytes, now and at most since the last reset */
  bool kernels;              /* whether the dtype has kernels */
  ab_dtype_t kdt;
  uint64_t head_dim, qkv_n;  /* q + 2 kv */
  layer_t *layer;
  uint32_t embed, final_norm, lm_head, embeds; /* embeds: the persistent inputs_embeds */
  uint32_t *kv;              /* per layer its KV cache tensor, once made */
  uint64_t kv_bytes;         /* bytes of each */
  uint32_t workspace[2];     /* per stream its cuBLAS workspace, once made */
  bool capturing;            /* between a capture's BEGIN and END */
  uint32_t capture_first;    /* the first id the open capture made: older ones are its inputs */
  uint32_t deferred[MAX_DEFERRED]; /* inputs the open capture frees when it ends */
  size_t ndeferred;
} serve_t;

/* ---- allocations, each counted as PyTorch counts a request: rounded up to 512 ------------ */

static uint32_t new_on(serve_t *s, uint64_t bytes, ab_tag_t tag, unsigned stream) {
  uint32_t id = ab_events_alloc(s->es, bytes, stream, tag);
  if (id >= s->cap) {
    uint32_t cap = s->cap ? s->cap * 2 : 4096;
    while (cap <= id) cap *= 2;
    uint64_t *grown = realloc(s->bytes, cap * sizeof *grown);
    if (grown == NULL) {
      s->es->failed = true; /* reported by ab_events_finish */
      return id;
    }
    memset(grown + s->cap, 0, (cap - s->cap) * sizeof *grown);
    s->bytes = grown;
    s->cap = cap;
  }
  s->bytes[id] = (bytes + 511) / 512 * 512;
  s->live += s->bytes[id];
  if (s->live > s->peak) s->peak = s->live;
  return id;
}

static uint32_t new_buf(serve_t *s, uint64_t bytes, ab_tag_t tag) { return new_on(s, bytes, tag, 0); }

static void drop(serve_t *s, uint32_t id) {
  if (id == AB_NO_TENSOR || id >= s->cap || s->bytes[id] == 0) return;
  /* A capture's input is held by its caller until the capture returns. */
  if (s->capturing && id < s->capture_first && s->ndeferred < MAX_DEFERRED) {
    s->deferred[s->ndeferred++] = id;
    return;
  }
  s->live -= s->bytes[id];
  s->bytes[id] = 0;
  ab_events_free_id(s->es, id);
}

/* ---- kernels ------------------------------------------------------------------------------ */

static void gemm(serve_t *s, uint32_t a, uint32_t b, uint32_t c, uint64_t m, uint64_t n, uint64_t k, unsigned stream) {
  if (!s->kernels) return;
  ab_kernel_t kd = {.op = AB_K_GEMM, .dtype = {(uint8_t)s->kdt, (uint8_t)s->kdt}, .nbuf = 3, .buf = {a, b, c},
                    .m = m, .n = n, .k = k};
  ab_events_kernel(s->es, &kd, stream);
}

static void act(serve_t *s, uint32_t in, uint32_t out, uint64_t n, unsigned stream) {
  if (!s->kernels) return;
  ab_kernel_t kd = {.op = AB_K_GELU, .dtype = {(uint8_t)s->kdt, (uint8_t)s->kdt}, .nbuf = 2, .buf = {in, out}, .n = n};
  ab_events_kernel(s->es, &kd, stream);
}

static void copy(serve_t *s, uint32_t src, uint32_t dst, uint64_t bytes, unsigned stream) {
  if (!s->kernels) return;
  ab_kernel_t kd = {.op = AB_K_COPY, .nbuf = 2, .buf = {src, dst}, .n = bytes};
  ab_events_kernel(s->es, &kd, stream);
}

/* ---- the model ----------------------------------------------------------------------------- */

static uint64_t expert_bytes(const args_t *a, uint64_t rows) {
  return (uint64_t)((double)a->experts * (double)rows * (double)a->hidden * a->moe_bits / 8 + 0.5);
}

/* Step 2: the model's parameters in module order. */
static void build_model(serve_t *s) {
  const args_t *a = s->a;
  uint64_t d = a->hidden, b = a->dtype;
  s->embed = new_buf(s, a->vocab * d * b, AB_TAG_PARAM);
  for (uint64_t l = 0; l < a->layers && !s->es->failed; l++) {
    layer_t *L = &s->layer[l];
    L->qkv = new_buf(s, d * s->qkv_n * b, AB_TAG_PARAM);
    L->o = new_buf(s, d * d * b, AB_TAG_PARAM);
    L->router = a->experts ? new_buf(s, d * a->experts * b, AB_TAG_PARAM) : AB_NO_TENSOR;
    L->w13_bytes = a->experts ? expert_bytes(a, 2 * a->ffn) : d * 2 * a->ffn * b;
    L->w2_bytes = a->experts ? expert_bytes(a, a->ffn) : a->ffn * d * b;
    L->w13 = new_buf(s, L->w13_bytes, AB_TAG_PARAM);
    L->w2 = new_buf(s, L->w2_bytes, AB_TAG_PARAM);
    L->norm1 = new_buf(s, d * b, AB_TAG_PARAM);
    L->norm2 = new_buf(s, d * b, AB_TAG_PARAM);
  }
  s->final_norm = new_buf(s, d * b, AB_TAG_PARAM);
  s->lm_head = new_buf(s, a->vocab * d * b, AB_TAG_PARAM);
}

/* Step 3: one tensor to its new layout: made beside the old, filled, the old freed. */
static uint32_t repack_one(serve_t *s, uint32_t old, uint64_t *bytes) {
  uint32_t id = new_buf(s, *bytes + s->a->repack_pad, AB_TAG_PARAM);
  copy(s, old, id, *bytes, 0);
  drop(s, old);
  *bytes += s->a->repack_pad;
  return id;
}
static void repack(serve_t *s) {
  for (uint64_t l = 0; l < s->a->layers && !s->es->failed; l++) {
    ab_events_step(s->es);
    layer_t *L = &s->layer[l];
    L->w13 = repack_one(s, L->w13, &L->w13_bytes);
    L->w2 = repack_one(s, L->w2, &L->w2_bytes);
  }
}

/* The first GEMM on a stream makes its cuBLAS workspaces, kept for the process's life. */
static void workspace(serve_t *s, unsigned stream) {
  if (!s->kernels || s->workspace[stream] != AB_NO_TENSOR) return;
  s->workspace[stream] = new_on(s, CUBLAS_WORKSPACE_BYTES, AB_TAG_WORKSPACE, stream);
  if (stream == 0) new_on(s, AB_CUBLASLT_WORKSPACE_BYTES, AB_TAG_WORKSPACE, stream);
}

/* ---- CUDA graph captures (Note [vLLM's CUDA graphs]) --------------------------------------- */

/* torch.cuda.graph's entry: with empty, the synchronize and empty_cache it does first. */
static void capture_begin(serve_t *s, unsigned st, bool empty) {
  if (empty) {
    ab_events_sync(s->es, st);
    ab_events_empty_cache(s->es);
  }
  ab_events_pool(s->es, AB_POOL_BEGIN, GRAPH_POOL, st, 0);
  s->capturing = true;
  s->capture_first = s->es->nids;
  s->ndeferred = 0;
}

/* The capture returns: the inputs its caller let go of are freed, outside it. */
static void capture_end(serve_t *s, unsigned st) {
  ab_events_pool(s->es, AB_POOL_END, GRAPH_POOL, st, 0);
  s->capturing = false;
  for (size_t i = 0; i < s->ndeferred; i++) drop(s, s->deferred[i]);
  s->ndeferred = 0;
}

/* ---- the forward --------------------------------------------------------------------------- */

/* The MLP of layer L over T tokens from x (T x d); returns its output (T x d). */
static uint32_t mlp(serve_t *s, const layer_t *L, uint32_t x, uint64_t T, unsigned st) {
  const args_t *a = s->a;
  uint64_t d = a->hidden, b = a->dtype, rows = T;
  uint32_t router = AB_NO_TENSOR, ids = AB_NO_TENSOR, weights = AB_NO_TENSOR;
  if (a->experts) {
    router = new_on(s, T * a->experts * 4, AB_TAG_ACT, st);
    ids = new_on(s, T * a->topk * 4, AB_TAG_ACT, st);
    weights = new_on(s, T * a->topk * 4, AB_TAG_ACT, st);
    drop(s, router);
    rows = T * a->topk;
  }
  uint32_t gu = new_on(s, rows * 2 * a->ffn * b, AB_TAG_ACT, st);
  if (!a->experts) gemm(s, x, L->w13, gu, T, 2 * a->ffn, d, st);
  uint32_t h = new_on(s, rows * a->ffn * b, AB_TAG_ACT, st);
  act(s, gu, h, rows * a->ffn, st);
  drop(s, gu);
  uint32_t down = new_on(s, rows * d * b, AB_TAG_ACT, st);
  if (!a->experts) gemm(s, h, L->w2, down, T, d, a->ffn, st);
  drop(s, h);
  if (!a->experts) return down;
  uint32_t out = new_on(s, T * d * b, AB_TAG_ACT, st); /* the top-k rows weighted and summed */
  drop(s, down);
  drop(s, ids);
  drop(s, weights);
  return out;
}

/* A forward over T tokens on stream st, run as `how` says. Eager, it returns the final hidden
 * states (T x d); captured, the output is a weak reference, freed inside the capture, and it
 * returns AB_NO_TENSOR. */
static uint32_t forward(serve_t *s, uint64_t T, unsigned st, how_t how) {
  const args_t *a = s->a;
  uint64_t d = a->hidden, b = a->dtype;
  workspace(s, st);
  if (how != EAGER) capture_begin(s, st, true); /* a FULL graph, or the first piece */
  uint32_t x = new_on(s, T * d * b, AB_TAG_ACT, st); /* the embedding's output, then the residual */
  for (uint64_t l = 0; l < a->layers; l++) {
    const layer_t *L = &s->layer[l];
    uint32_t n1 = new_on(s, T * d * b, AB_TAG_ACT, st);
    uint32_t qkv = new_on(s, T * s->qkv_n * b, AB_TAG_ACT, st);
    gemm(s, n1, L->qkv, qkv, T, s->qkv_n, d, st);
    drop(s, n1);
    uint32_t attn = new_on(s, T * d * b, AB_TAG_ACT, st); /* attention writes here */
    if (how == PIECEWISE) capture_end(s, st);            /* attention runs eager between pieces */
    drop(s, qkv);
    if (how == PIECEWISE) capture_begin(s, st, false);   /* gc_disable: no empty_cache */
    uint32_t o = new_on(s, T * d * b, AB_TAG_ACT, st);
    gemm(s, attn, L->o, o, T, d, d, st);
    drop(s, attn);
    uint32_t n2 = new_on(s, T * d * b, AB_TAG_ACT, st); /* residual += o, in place, normed */
    drop(s, o);
    uint32_t out = mlp(s, L, n2, T, st);
    drop(s, n2);
    drop(s, out); /* added into the residual in place by the next fused_add_rms_norm */
  }
  uint32_t y = new_on(s, T * d * b, AB_TAG_ACT, st);
  drop(s, x);
  if (how == EAGER) return y;
  drop(s, y); /* weak_ref_output */
  capture_end(s, st);
  return AB_NO_TENSOR;
}

/* compute_logits and the sampler for n sequences from hidden (n x d at least), eager. */
static void sample(serve_t *s, uint32_t hidden, uint64_t n) {
  const args_t *a = s->a;
  uint32_t logits = new_buf(s, n * a->vocab * a->dtype, AB_TAG_ACT);
  gemm(s, hidden, s->lm_head, logits, n, a->vocab, a->hidden, 0);
  uint32_t f32 = a->dtype == 4 ? AB_NO_TENSOR : new_buf(s, n * a->vocab * 4, AB_TAG_ACT);
  drop(s, logits);
  uint32_t probs = new_buf(s, n * a->vocab * 4, AB_TAG_ACT);
  uint32_t ids = new_buf(s, n * 8, AB_TAG_ACT);
  drop(s, probs);
  drop(s, f32);
  drop(s, ids);
}

/* Each request's last hidden state, gathered (hidden_states[logits_indices]) from y, or from
 * pool memory the stream does not hold when y is AB_NO_TENSOR; then the logits and sampler. */
static void gather_and_sample(serve_t *s, uint32_t y, uint64_t rows, unsigned st) {
  uint64_t bytes = rows * s->a->hidden * s->a->dtype;
  uint32_t last = new_on(s, bytes, AB_TAG_ACT, st);
  if (y != AB_NO_TENSOR) copy(s, y, last, bytes, st);
  sample(s, last, rows);
  drop(s, last);
}

/* ---- start-up ------------------------------------------------------------------------------ */

static uint64_t min_u64(uint64_t x, uint64_t y) { return x < y ? x : y; }

/* vLLM's default capture sizes, largest first. The largest is
 * min(2 x max_num_seqs, 512, max_num_batched_tokens) (_set_cudagraph_sizes). */
static void capture_sizes(uint64_t max_batch, uint64_t max_tokens, graph_set_t *out) {
  uint64_t top = min_u64(min_u64(2 * max_batch, 512), max_tokens), up[MAX_CAPTURES];
  size_t n = 0;
  for (uint64_t v = 1; v <= 4 && v <= top; v *= 2) up[n++] = v;
  for (uint64_t v = 8; v < 256 && v <= top; v += 8) up[n++] = v;
  for (uint64_t v = 256; v <= top; v += 16) up[n++] = v;
  for (size_t i = 0; i < n; i++) out->size[i] = up[n - 1 - i];
  out->n = n;
}

/* _dummy_run of T tokens on the capture stream, run as `how` says: the forward, then the
 * gather of min(T, max_num_seqs) last hidden states, which the capture code drops. */
static void dummy_run(serve_t *s, uint64_t T, how_t how) {
  uint32_t y = forward(s, T, CAPTURE_STREAM, how);
  drop(s, new_on(s, min_u64(T, s->a->max_batch) * s->a->hidden * s->a->dtype, AB_TAG_ACT, CAPTURE_STREAM));
  drop(s, y);
}

/* _capture_cudagraphs: per size, largest first, one eager warm-up, then the capture. */
static void capture(serve_t *s, const graph_set_t *g, how_t how) {
  for (size_t i = 0; i < g->n && !s->es->failed; i++) {
    ab_events_step(s->es);
    dummy_run(s, g->size[i], EAGER);
    dummy_run(s, g->size[i], how);
  }
}

/* ---- serving ------------------------------------------------------------------------------- */

static uint64_t blocks_for(const args_t *a, uint64_t tokens) { return (tokens + a->block - 1) / a->block; }

/* The smallest size of g that holds n, or 0. */
static uint64_t padded(const graph_set_t *g, uint64_t n) {
  uint64_t best = 0;
  for (size_t i = 0; i < g->n; i++)
    if (g->size[i] >= n) best = g->size[i]; /* largest first: the last that holds n is the smallest */
  return best;
}

/* A replay of a graph of T tokens: no allocation; its work, for the kernels, one GEMM a layer
 * into that layer's KV cache, which the graph writes. */
static void replay(serve_t *s, uint64_t T) {
  const args_t *a = s->a;
  if (s->kv_bytes < T * a->hidden * a->dtype) return;
  for (uint64_t l = 0; l < a->layers; l++) gemm(s, s->embeds, s->layer[l].o, s->kv[l], T, a->hidden, a->hidden, 0);
}

/* A step of T tokens for `rows` requests: the graph vLLM's dispatcher picks (decode: the
 * FULL decode graphs first), or the forward eager; then the gather and the sampler. */
static void step(serve_t *s, uint64_t T, uint64_t rows, bool decode, const graph_set_t *mixed,
                 const graph_set_t *full_decode) {
  uint64_t g = decode ? padded(full_decode, T) : 0;
  if (g == 0) g = padded(mixed, T);
  if (g == 0) {
    uint32_t y = forward(s, T, 0, EAGER);
    gather_and_sample(s, y, rows, 0);
    drop(s, y);
    return;
  }
  replay(s, g);
  gather_and_sample(s, AB_NO_TENSOR, rows, 0);
}

static void serve_requests(serve_t *s, ab_rng_t *rng, uint64_t kv_blocks, const graph_set_t *mixed,
                           const graph_set_t *full_decode) {
  const args_t *a = s->a;
  request_t *req = malloc(a->requests * sizeof *req);
  uint64_t *running = malloc(a->max_batch * sizeof *running);
  if (req == NULL || running == NULL) {
    s->es->failed = true;
    free(req);
    free(running);
    return;
  }
  for (uint64_t i = 0; i < a->requests; i++) {
    req[i].prompt = ab_rng_range(rng, a->prompt_min, a->prompt_max);
    req[i].gen = ab_rng_range(rng, a->gen_min, a->gen_max);
    req[i].done = 0;
  }
  uint64_t next = 0, nrun = 0, free_blocks = kv_blocks;
  while ((next < a->requests || nrun > 0) && !s->es->failed) {
    ab_events_step(s->es);
    uint64_t T = 0, admitted = 0;
    while (next < a->requests && nrun < a->max_batch && T + req[next].prompt <= a->max_tokens &&
           blocks_for(a, req[next].prompt + req[next].gen) <= free_blocks) {
      free_blocks -= blocks_for(a, req[next].prompt + req[next].gen);
      T += req[next].prompt;
      req[next].done = 1; /* the prefill samples the first token */
      running[nrun++] = next++;
      admitted++;
    }
    if (admitted) {
      step(s, T, admitted, false, mixed, full_decode);
    } else {
      step(s, nrun, nrun, true, mixed, full_decode);
      for (uint64_t i = 0; i < nrun; i++) req[running[i]].done++;
    }
    /* Finished requests leave and give their blocks back. */
    uint64_t kept = 0;
    for (uint64_t i = 0; i < nrun; i++) {
      request_t *r = &req[running[i]];
      if (r->done >= r->gen)
        free_blocks += blocks_for(a, r->prompt + r->gen);
      else
        running[kept++] = running[i];
    }
    nrun = kept;
  }
  free(req);
  free(running);
}

/* ---- arguments ----------------------------------------------------------------------------- */

/* The item to blame for a bad pair of keys: the first if it was given, else the second. */
static ab_kv_t *given(ab_kvlist_t *p, const char *first, const char *second) {
  ab_kv_t *item = ab_kv_get(p, first);
  return item ? item : ab_kv_get(p, second);
}

static ab_status parse(ab_kvlist_t *p, const char *text, args_t *a, ab_diag_t *diag) {
  AB_TRY(ab_kv_parse("-w serve", text, '=', p, diag));
  /* Llama-3.1-8B in bf16 on an 80 GB card, vLLM's defaults (max_num_seqs 256,
   * max_num_batched_tokens 8192, block 16, gpu_memory_utilization 0.9). */
  *a = (args_t){.hidden = 4096, .layers = 32, .heads = 32, .kv_heads = 8, .vocab = 128256, .dtype = 2,
                .ffn = 14336, .experts = 0, .topk = 4, .moe_bits = 0, .repack = false, .repack_pad = 0,
                .max_batch = 256, .max_tokens = 8192, .block = 16, .util = 0.9, .card = 80 * AB_GiB,
                .graphs = G_FULL_AND_PIECEWISE, .requests = 64, .prompt_min = 16, .prompt_max = 2048, .gen_min = 16, .gen_max = 256};
  AB_TRY(ab_kv_get_u64(p, "hidden", 1, 1 << 20, &a->hidden, diag));
  AB_TRY(ab_kv_get_u64(p, "layers", 1, 4096, &a->layers, diag));
  AB_TRY(ab_kv_get_u64(p, "heads", 1, 4096, &a->heads, diag));
  a->kv_heads = a->heads < a->kv_heads ? a->heads : a->kv_heads;
  AB_TRY(ab_kv_get_u64(p, "kv_heads", 1, 4096, &a->kv_heads, diag));
  AB_TRY(ab_kv_get_u64(p, "vocab", 1, 1 << 24, &a->vocab, diag));
  AB_TRY(ab_kv_get_u64(p, "dtype", 1, 4, &a->dtype, diag));
  AB_TRY(ab_kv_get_u64(p, "ffn", 1, 1 << 22, &a->ffn, diag));
  AB_TRY(ab_kv_get_u64(p, "experts", 0, 4096, &a->experts, diag));
  AB_TRY(ab_kv_get_u64(p, "topk", 1, 4096, &a->topk, diag));
  AB_TRY(ab_kv_get_double(p, "moe_bits", 1, 64, &a->moe_bits, diag));
  AB_TRY(ab_kv_get_bool(p, "repack", &a->repack, diag));
  AB_TRY(ab_kv_get_size(p, "repack_pad", &a->repack_pad, diag));
  AB_TRY(ab_kv_get_u64(p, "max_batch", 1, 4096, &a->max_batch, diag));
  AB_TRY(ab_kv_get_u64(p, "max_tokens", 1, 1 << 20, &a->max_tokens, diag));
  AB_TRY(ab_kv_get_u64(p, "block", 1, 4096, &a->block, diag));
  AB_TRY(ab_kv_get_double(p, "util", 0.01, 1, &a->util, diag));
  AB_TRY(ab_kv_get_size(p, "card", &a->card, diag));
  AB_TRY(ab_kv_get_size(p, "outside", &a->outside, diag));
  AB_TRY(ab_kv_get_choice(p, "graphs", graph_names, &a->graphs, diag));
  AB_TRY(ab_kv_get_u64(p, "requests", 0, 1 << 24, &a->requests, diag));
  AB_TRY(ab_kv_get_u64(p, "prompt_min", 1, 1 << 20, &a->prompt_min, diag));
  AB_TRY(ab_kv_get_u64(p, "prompt_max", 1, 1 << 20, &a->prompt_max, diag));
  AB_TRY(ab_kv_get_u64(p, "gen_min", 1, 1 << 20, &a->gen_min, diag));
  AB_TRY(ab_kv_get_u64(p, "gen_max", 1, 1 << 20, &a->gen_max, diag));
  AB_TRY(ab_kv_finish(p,
                      "hidden, layers, heads, kv_heads, vocab, dtype, ffn, experts, topk, moe_bits, repack, repack_pad, "
                      "max_batch, max_tokens, block, util, card, outside, graphs, requests, prompt_min, prompt_max, gen_min, gen_max",
                      diag));
  if (a->dtype == 3) return ab_kv_errorf(p, ab_kv_get(p, "dtype"), diag, "need dtype 1, 2 or 4 (bytes)");
  if (a->hidden % a->heads)
    return ab_kv_errorf(p, given(p, "heads", "hidden"), diag, "need heads dividing hidden (%llu)",
                        (unsigned long long)a->hidden);
  if (a->heads % a->kv_heads)
    return ab_kv_errorf(p, given(p, "kv_heads", "heads"), diag, "need kv_heads dividing heads (%llu)",
                        (unsigned long long)a->heads);
  if (a->experts && a->topk > a->experts)
    return ab_kv_errorf(p, given(p, "topk", "experts"), diag, "need topk <= experts");
  if (a->moe_bits == 0) a->moe_bits = 8.0 * (double)a->dtype;
  if (a->card == 0 || a->card > (1ULL << 50)) return ab_kv_errorf(p, ab_kv_get(p, "card"), diag, "need 0 < card <= 1PiB");
  if (a->outside >= a->card) return ab_kv_errorf(p, given(p, "outside", "card"), diag, "need outside < card");
  /* init_device's refusal: less free at start-up than gpu_memory_utilization asks for. */
  if ((double)(a->card - a->outside) < a->util * (double)a->card)
    return ab_kv_errorf(p, given(p, "outside", "util"), diag,
                        "card - outside (%.4g GB free at start-up) is less than util x card (%.4g GB)",
                        (double)(a->card - a->outside) / 1e9, a->util * (double)a->card / 1e9);
  if (a->repack_pad > (1ULL << 40))
    return ab_kv_errorf(p, ab_kv_get(p, "repack_pad"), diag, "need repack_pad <= 1TiB");
  if (a->prompt_min > a->prompt_max)
    return ab_kv_errorf(p, given(p, "prompt_min", "prompt_max"), diag, "need prompt_min <= prompt_max");
  if (a->gen_min > a->gen_max) return ab_kv_errorf(p, given(p, "gen_min", "gen_max"), diag, "need gen_min <= gen_max");
  if (a->prompt_max > a->max_tokens)
    return ab_kv_errorf(p, given(p, "prompt_max", "max_tokens"), diag,
                        "need prompt_max <= max_tokens (%llu): a prompt is prefilled in one step",
                        (unsigned long long)a->max_tokens);
  if (a->max_batch > a->max_tokens)
    return ab_kv_errorf(p, given(p, "max_batch", "max_tokens"), diag, "need max_batch <= max_tokens");
  /* Note [Sizes that fit in 64 bits] (transformer.h): the largest tensors are the vocabulary
   * ones (the embedding, the logits of max_batch) and the forward's per-token widths. */
  double d = (double)a->hidden, widest = (double)a->vocab * (d > (double)a->max_batch ? d : (double)a->max_batch);
  double per_token = d + 2.0 * (double)a->ffn * (a->experts ? (double)a->topk : 1) + (double)a->experts;
  if (widest * 4 > 0x1p46 || (double)a->max_tokens * per_token * 4 > 0x1p46 ||
      (double)a->experts * 2 * (double)a->ffn * d * a->moe_bits / 8 > 0x1p46)
    return ab_kv_errorf(p, given(p, "hidden", "vocab"), diag,
                        "hidden, ffn, experts, vocab or max_tokens make a tensor of more than 2^46 elements");
  return AB_OK;
}

/* ---- the generator ------------------------------------------------------------------------- */

/* DeviceMemoryProfiler's and memory_profiling's measure: empty_cache after a synchronize. */
static void empty_cache(serve_t *s) {
  ab_events_sync(s->es, 0);
  ab_events_empty_cache(s->es);
}

static ab_status generate(const char *text, uint64_t seed, ab_events_t *out, ab_diag_t *diag) {
  ab_kvlist_t p;
  args_t a;
  AB_TRY(parse(&p, text, &a, diag));
  serve_t s = {.a = &a, .es = out, .kernels = a.dtype != 1, .kdt = a.dtype == 4 ? AB_F32 : AB_BF16,
               .workspace = {AB_NO_TENSOR, AB_NO_TENSOR}};
  s.head_dim = a.hidden / a.heads;
  s.qkv_n = a.hidden + 2 * a.kv_heads * s.head_dim;
  s.layer = calloc(a.layers, sizeof *s.layer);
  s.kv = calloc(a.layers, sizeof *s.kv);
  graph_set_t *mixed = calloc(1, sizeof *mixed), *full_decode = calloc(1, sizeof *full_decode);
  if (s.layer == NULL || s.kv == NULL || mixed == NULL || full_decode == NULL) {
    free(s.layer);
    free(s.kv);
    free(mixed);
    free(full_decode);
    return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  }
  /* The graphs of Note [vLLM's CUDA graphs]: the decode ones are the capture sizes up to
   * max_num_seqs (one token a request). */
  graph_set_t all;
  capture_sizes(a.max_batch, a.max_tokens, &all);
  if (mixed_mode((graphs_t)a.graphs) != EAGER) *mixed = all;
  if (decode_graphs((graphs_t)a.graphs))
    for (size_t i = 0; i < all.n; i++)
      if (all.size[i] <= a.max_batch) full_decode->size[full_decode->n++] = all.size[i];
  out->suggested_budget = a.card - a.outside;
  ab_status st = AB_OK;

  /* 1-3: the runner's buffers, then the model and its repacking inside the load's measure. */
  ab_events_step(out);
  uint64_t max_len = a.prompt_max + a.gen_max;
  new_buf(&s, a.max_tokens * 4, AB_TAG_INPUT);
  new_buf(&s, a.max_tokens * 8, AB_TAG_INPUT);
  new_buf(&s, a.max_tokens * 8, AB_TAG_INPUT);
  s.embeds = new_buf(&s, a.max_tokens * a.hidden * a.dtype, AB_TAG_INPUT);
  new_buf(&s, a.max_batch * blocks_for(&a, max_len) * 4, AB_TAG_INPUT);
  empty_cache(&s);
  uint64_t before_load = s.live;
  build_model(&s);
  if (a.repack) repack(&s);
  empty_cache(&s);
  uint64_t weights = s.live - before_load;

  /* 4: profile_run after the peak statistics are reset, between memory_profiling's
   * empty_caches; its last hidden states are max_num_reqs = max_batch rows. */
  ab_events_step(out);
  uint64_t base = s.live;
  s.peak = s.live;
  uint32_t y = forward(&s, a.max_tokens, 0, EAGER);
  gather_and_sample(&s, y, a.max_batch, 0);
  drop(&s, y);
  empty_cache(&s);
  uint64_t peak_increase = s.peak - base;

  /* 5: Note [vLLM's KV cache bytes]. */
  double requested = a.util * (double)a.card;
  double available = requested - (double)(weights + peak_increase);
  uint64_t page = a.block * 2 * a.kv_heads * s.head_dim * a.dtype; /* one block of one layer */
  uint64_t kv_blocks = available > 0 ? (uint64_t)(available / (double)(page * a.layers)) : 0;
  if (kv_blocks == 0) {
    st = ab_kv_errorf(&p, given(&p, "util", "card"), diag,
                      "no memory for the KV cache: util x card %.4g GB is below the weights %.4g GB and the "
                      "profile's peak increase %.4g GB",
                      requested / 1e9, (double)weights / 1e9, (double)peak_increase / 1e9);
  } else if (blocks_for(&a, max_len) > kv_blocks) {
    st = ab_kv_errorf(&p, given(&p, "prompt_max", "gen_max"), diag,
                      "prompt_max + gen_max (%llu tokens) is more than the KV cache holds (%llu tokens)",
                      (unsigned long long)max_len, (unsigned long long)(kv_blocks * a.block));
  }
  if (st == AB_OK) {
    ab_events_step(out);
    s.kv_bytes = kv_blocks * page;
    for (uint64_t l = 0; l < a.layers; l++) s.kv[l] = new_buf(&s, s.kv_bytes, AB_TAG_OTHER);
    /* 6: the captures, then the sampler's warm-up, eager on the default stream. */
    capture(&s, mixed, mixed_mode((graphs_t)a.graphs));
    capture(&s, full_decode, FULL);
    ab_events_step(out);
    y = forward(&s, a.max_batch, 0, EAGER);
    gather_and_sample(&s, y, a.max_batch, 0);
    drop(&s, y);
    /* 7. */
    ab_rng_t rng = ab_rng_seed(seed);
    serve_requests(&s, &rng, kv_blocks, mixed, full_decode);
  }
  /* What lives to the end (the weights, the cache) stays live: the engine frees it, untimed,
   * as the server's exit does. */
  free(s.bytes);
  free(s.layer);
  free(s.kv);
  free(mixed);
  free(full_decode);
  return st;
}

const ab_workload_t ab_workload_serve = {
    .name = "serve",
    .summary = "LLM inference server as vLLM runs it: weights, profiling, KV cache, CUDA graphs in one pool, requests",
    .params_help =
    "  hidden=N, layers=N, heads=N, kv_heads=N, vocab=N, ffn=N  the model's shapes\n"
    "                 (default Llama-3.1-8B: 4096, 32, 32, 8, 128256, 14336)\n"
    "  dtype=N        bytes per weight and activation: 1, 2 (bf16) or 4 (default 2; 1 runs no kernels)\n"
    "  experts=N, topk=N  MoE: experts per layer and experts per token (default 0: dense; 4)\n"
    "  moe_bits=X     bits per expert weight, scales included (default 8 x dtype; mxfp4: 4.25)\n"
    "  repack=BOOL    process_weights_after_loading moves each layer's w13, then w2, to a new\n"
    "                 layout (mxfp4 on Hopper; default false)\n"
    "  repack_pad=SIZE  how much larger the new layout is (default 0)\n"
    "  max_batch=N    max_num_seqs: requests at once, the largest decode graph (default 256)\n"
    "  max_tokens=N   max_num_batched_tokens: the profiling forward, a prefill's bound (default 8192)\n"
    "  block=N        tokens per KV block (default 16)\n"
    "  util=X         gpu_memory_utilization (default 0.9)\n"
    "  card=SIZE      the card's memory, for the KV cache (default 80GiB)\n"
    "  outside=SIZE   memory outside PyTorch before start-up (CUDA context, NCCL); the suggested\n"
    "                 budget is card - outside (default 0)\n"
    "  graphs=MODE    vLLM's cudagraph_mode: full_and_piecewise (default), full_decode_only,\n"
    "                 full, piecewise or none\n"
    "  requests=N     requests served (default 64)\n"
    "  prompt_min=N, prompt_max=N  prompt tokens, uniform (default 16, 2048)\n"
    "  gen_min=N, gen_max=N  output tokens, uniform (default 16, 256)\n",
    .quick_args = "requests=8",
    .generate = generate,
    .scale = (const ab_scale_key_t[]){{"requests", 1}, {"layers", 1}, {NULL, 0}},
};
