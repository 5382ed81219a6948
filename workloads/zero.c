/* zero.c: ZeRO-style sharded data-parallel training of the transformer, as rank r of N sees
 * it (DeepSpeed's ZeRO-1/2/3; stage 0 is plain data parallelism for comparison).
 *
 * Size model (peers.md §6.1 and §6.2; DeepSpeed's stage_1_and_2.py, stage3.py and
 * partitioned_param_coordinator.py; the transformer's activations are transformer.h's in
 * the half dtype). Psi parameters, P this rank's share of them:
 *   Model state, ZeRO paper's per-GPU formula with K = 12 (test: tests/workloads/workloads_test.c):
 *     stage 0: (2+2+K) Psi; 1: 2 Psi + 2 Psi + K Psi/N; 2: 2 Psi + (2+K) Psi/N;
 *     3: (2+2+K) Psi/N.
 *   1. Stages 0-2: the half parameters in one flat buffer (DeepSpeed flattens them; P =
 *      ceil(Psi/N), Psi for stage 0), the fp32 master of this rank's partition. Stage 3: the
 *      half partition of every parameter (ceil(numel/N) each) in one flat buffer, the fp32
 *      master of it, the gradient partition and the IPG bucket (reduce_bucket elements). Adam's
 *      m and v (fp32, P each) at the first step that runs.
 *   2. Stage 3 forward and backward, module by module (embedding, blocks, head; backward in
 *      reverse): before a module runs, the parameters it lacks are all-gathered into one
 *      buffer (the half size of all of them) on the all-gather stream; once the first step
 *      has recorded the module trace, the coordinator also prefetches the parameters next in
 *      the trace, up to prefetch_bucket elements and while at most max_live elements are
 *      gathered, into one buffer per fetch. After a module ran, its parameters are released
 *      unless they are used again within max_reuse elements of trace (all are released during
 *      the first step); a buffer is freed when none of its parameters is left, freed on the
 *      all-gather stream but used on the compute stream (record_stream): the free completes
 *      once the next module has been issued. Parameters under persistence_threshold elements
 *      are gathered once, at their first use, and kept (ds_persist). The optimizer step
 *      releases everything still gathered.
 *   3. Gradients. Stages 0-1: every parameter's half gradient accumulates in .grad; after
 *      backward they are reduced bucket by bucket (a flat IPG buffer of reduce_bucket
 *      elements, copied in and back). Stages 2-3: each gradient, as backward makes it, is
 *      copied into the IPG bucket and freed; a full bucket is reduce-scattered into this
 *      rank's gradient partition (stage 2: made at the first reduction of a step, freed after
 *      the step; stage 3 through a temporary partition-sized output). Stage 2 makes its IPG
 *      buffers (two with overlap_comm) at each backward and frees them at its end.
 *   4. The step: an fp32 copy of this rank's gradient partition (P elements), checked for
 *      overflow in fp16 (dynamic loss scaling, autograd.h), Adam on the partition, the
 *      updated half partition cast back and (stages 0-2) all-gathered into the flat
 *      parameters; gradients freed (stages 0-1 set_to_none, stage 2 its partition).
 * DeepSpeed's defaults (peers.md §6.2): reduce_bucket_size 5e8, allgather_bucket_size 5e8
 * (the flat parameters are gathered in place, so it sizes no buffer here),
 * stage3_prefetch_bucket_size 5e7, stage3_param_persistence_threshold 1e5,
 * stage3_max_live_parameters 1e9, stage3_max_reuse_distance 1e9, overlap_comm on for stage 3
 * only, contiguous_gradients on.
 * Collectives are described by their local traffic (events.h); an in-place one (the flat
 * bucket of stages 0-1, the flat parameters' all-gather) names the same buffer on both
 * sides, the rank's shard being its part of it. Each collective's full buffer holds N times
 * the shard, as NCCL needs and DeepSpeed pads for: the flat parameters of stages 1-2 are
 * N x P elements, the IPG buckets reduce_bucket rounded up to a multiple of N, a persistent
 * parameter's gathered copy N x ceil(numel/N) (partition_parameters.py), and a gradient
 * larger than the bucket whose size N does not divide is reduced from a padded copy
 * (reduce_scatter_coalesced's padding). Stage 0 gathers no parameters: every rank updates
 * all of them.
 * Not modelled: DeepSpeed's limit of two outstanding fetches (it bounds host-side work, not
 * the gathered bytes), CPU/NVMe offload, sub_group_size (one group here).
 */
#include "workloads/zero.h"

#include <stdlib.h>
#include <string.h>

#include "workloads/transformer.h"

#define GATHER_STREAM 1u
#define REDUCE_STREAM 2u

typedef struct args_s {
  ab_transformer_cfg_t cfg;
  uint64_t stage, world, rank, batch, seq, steps;
  uint64_t reduce_bucket, prefetch_bucket, persistence, max_live, max_reuse;
  int dtype;
  bool overlap, overlap_set;
  double grad_max, grad_sigma, init_scale;
} args_t;

/* A gather buffer and how many parameters it still holds. */
typedef struct gather_s {
  uint32_t id;
  unsigned held;
} gather_t;

typedef struct zero_s {
  const args_t *a;
  ab_tape_t *t;
  ab_transformer_t *m;
  ab_dtype_t dt;
  uint64_t hb;
  uint64_t part;        /* elements of this rank's partition */
  uint32_t flat;        /* stages 0-2: the flat half parameters; stage 3: the half partition */
  uint32_t master;      /* fp32 partition */
  uint32_t grad_part;   /* half gradient partition (stages 2-3) */
  uint32_t ipg[2];      /* IPG buffers */
  unsigned ipg_cur;
  uint64_t ipg_fill;    /* elements in the current one */
  /* stage 3 */
  uint64_t *shard;      /* per parameter: ceil(numel / N) */
  bool *persist;        /* per parameter: kept gathered */
  uint32_t *gathered;   /* per parameter: the buffer holding its full copy, or AB_NO_TENSOR */
  gather_t *bufs;       /* live gather buffers */
  size_t nbufs, capbufs;
  uint32_t *pending;    /* gather buffers freed (REQUEST) whose free has not completed */
  size_t npending, cappending;
  uint64_t live;        /* gathered elements of non-persistent parameters */
  unsigned pos;         /* position in this step's module trace */
  bool trace_complete;  /* a step has run: the trace is known */
} zero_t;

static const char *const dtypes[] = {"fp16", "bf16", NULL};

static ab_status parse(const char *text, args_t *a, ab_diag_t *diag) {
  ab_kvlist_t p;
  AB_TRY(ab_kv_parse("-w zero", text, '=', &p, diag));
  memset(a, 0, sizeof *a);
  a->cfg = ab_transformer_defaults();
  a->stage = 3;
  a->world = 8;
  a->batch = 8;
  a->seq = 1024;
  a->steps = 10;
  a->reduce_bucket = 500000000;
  a->prefetch_bucket = 50000000;
  a->persistence = 100000;
  a->max_live = 1000000000;
  a->max_reuse = 1000000000;
  a->grad_max = 6;
  a->grad_sigma = 0.25;
  a->init_scale = 65536;
  AB_TRY(ab_transformer_parse(&p, &a->cfg, diag));
  AB_TRY(ab_kv_get_u64(&p, "stage", 0, 3, &a->stage, diag));
  AB_TRY(ab_kv_get_u64(&p, "world", 1, 1 << 16, &a->world, diag));
  AB_TRY(ab_kv_get_u64(&p, "rank", 0, (1 << 16) - 1, &a->rank, diag));
  AB_TRY(ab_kv_get_u64(&p, "batch", 1, 1 << 20, &a->batch, diag));
  AB_TRY(ab_kv_get_u64(&p, "seq", 1, 1 << 20, &a->seq, diag));
  AB_TRY(ab_kv_get_u64(&p, "steps", 1, 1000000, &a->steps, diag));
  AB_TRY(ab_kv_get_u64(&p, "reduce_bucket", 1, 1ULL << 36, &a->reduce_bucket, diag));
  AB_TRY(ab_kv_get_u64(&p, "prefetch_bucket", 0, 1ULL << 40, &a->prefetch_bucket, diag));
  AB_TRY(ab_kv_get_u64(&p, "persistence_threshold", 0, 1ULL << 40, &a->persistence, diag));
  AB_TRY(ab_kv_get_u64(&p, "max_live", 0, 1ULL << 40, &a->max_live, diag));
  AB_TRY(ab_kv_get_u64(&p, "max_reuse", 0, 1ULL << 40, &a->max_reuse, diag));
  a->overlap_set = ab_kv_get(&p, "overlap_comm") != NULL;
  AB_TRY(ab_kv_get_bool(&p, "overlap_comm", &a->overlap, diag));
  AB_TRY(ab_kv_get_choice(&p, "dtype", dtypes, &a->dtype, diag));
  AB_TRY(ab_kv_get_double(&p, "grad_max", 0, 1e30, &a->grad_max, diag));
  AB_TRY(ab_kv_get_double(&p, "grad_sigma", 0, 10, &a->grad_sigma, diag));
  AB_TRY(ab_kv_get_double(&p, "init_scale", 1, 1e30, &a->init_scale, diag));
  AB_TRY(ab_kv_finish(&p,
                      AB_TRANSFORMER_KEYS ", stage, world, rank, batch, seq, steps, reduce_bucket, prefetch_bucket, "
                                          "persistence_threshold, max_live, max_reuse, overlap_comm, dtype, grad_max, "
                                          "grad_sigma, init_scale",
                      diag));
  if (a->rank >= a->world)
    return ab_kv_errorf(&p, ab_kv_get(&p, "rank") ? ab_kv_get(&p, "rank") : ab_kv_get(&p, "world"), diag,
                        "need rank < world (%llu)", (unsigned long long)a->world);
  if (!a->overlap_set) a->overlap = a->stage == 3;
  a->cfg.compute = a->dtype == 0 ? AB_F16 : AB_BF16;
  a->cfg.autocast = false;
  return ab_transformer_check_step(&p, &a->cfg, a->batch * a->seq, a->seq, "batch,seq", diag);
}

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t cap2 = *cap ? *cap * 2 : 16;
  while (cap2 < need) cap2 *= 2;
  void *q = realloc(*p, cap2 * elem);
  if (q == NULL) return false;
  *p = q;
  *cap = cap2;
  return true;
}

/* ---- stage 3: gathering and releasing parameters -------------------------------------------- */

static unsigned trace_len(const zero_t *z) { return 2 * ab_transformer_modules(z->m); }

static unsigned trace_module(const zero_t *z, unsigned pos) {
  unsigned M = ab_transformer_modules(z->m);
  return pos < M ? pos : 2 * M - 1 - pos;
}

/* All-gathers the listed parameters into one new buffer. */
static void gather(zero_t *z, const size_t *ps, size_t n) {
  if (n == 0) return;
  uint64_t shard = 0;
  for (size_t i = 0; i < n; i++) shard += z->shard[ps[i]];
  uint32_t buf = ab_tape_new_on(z->t, shard * z->a->world * z->hb, AB_TAG_COMM, GATHER_STREAM);
  ab_tape_move(z->t, AB_K_ALLGATHER, z->flat, buf, shard * z->hb, GATHER_STREAM);
  if (!grow((void **)&z->bufs, &z->capbufs, z->nbufs + 1, sizeof *z->bufs)) {
    z->t->es->failed = true;
    return;
  }
  z->bufs[z->nbufs++] = (gather_t){buf, (unsigned)n};
  for (size_t i = 0; i < n; i++) {
    z->gathered[ps[i]] = z->m->weight[ps[i]] = buf;
    z->live += z->m->numel[ps[i]];
  }
}

/* A persistent parameter: gathered once, kept. */
static void gather_persistent(zero_t *z, size_t p) {
  uint32_t full = ab_tape_new_on(z->t, z->shard[p] * z->a->world * z->hb, AB_TAG_PARAM, GATHER_STREAM);
  ab_tape_move(z->t, AB_K_ALLGATHER, z->flat, full, z->shard[p] * z->hb, GATHER_STREAM);
  z->gathered[p] = z->m->weight[p] = full;
}

static void complete_pending(zero_t *z) {
  for (size_t i = 0; i < z->npending; i++) ab_events_free_phase(z->t->es, z->pending[i], AB_FREE_COMPLETE);
  z->npending = 0;
}

static void release(zero_t *z, size_t p) {
  uint32_t buf = z->gathered[p];
  z->gathered[p] = z->m->weight[p] = AB_NO_TENSOR;
  z->live -= z->m->numel[p];
  for (size_t i = 0; i < z->nbufs; i++) {
    if (z->bufs[i].id != buf) continue;
    if (--z->bufs[i].held == 0) {
      ab_events_free_phase(z->t->es, buf, AB_FREE_REQUEST);
      if (!grow((void **)&z->pending, &z->cappending, z->npending + 1, sizeof *z->pending)) {
        z->t->es->failed = true;
        return;
      }
      z->pending[z->npending++] = buf;
      z->bufs[i] = z->bufs[--z->nbufs];
    }
    return;
  }
}

/* Is p used again within max_reuse elements of trace after position pos? */
static bool reused_soon(const zero_t *z, size_t p, unsigned pos) {
  uint64_t traversed = 0;
  size_t ps[AB_TRANSFORMER_MODULE_MAX_PARAMS];
  for (unsigned q = pos + 1; q < trace_len(z) && traversed < z->a->max_reuse; q++) {
    size_t n = ab_transformer_module_params(z->m, trace_module(z, q), ps);
    for (size_t i = 0; i < n; i++) {
      if (ps[i] == p) return true;
      traversed += z->m->numel[ps[i]];
    }
  }
  return false;
}

static void enter(void *ctx, ab_transformer_t *m, unsigned module, bool backward) {
  zero_t *z = ctx;
  (void)backward;
  size_t ps[AB_TRANSFORMER_MODULE_MAX_PARAMS], missing[AB_TRANSFORMER_MODULE_MAX_PARAMS], nmissing = 0;
  size_t n = ab_transformer_module_params(m, module, ps);
  for (size_t i = 0; i < n; i++) {
    if (z->gathered[ps[i]] != AB_NO_TENSOR) continue;
    if (z->persist[ps[i]])
      gather_persistent(z, ps[i]);
    else
      missing[nmissing++] = ps[i];
  }
  gather(z, missing, nmissing);
  if (!z->trace_complete) return;
  /* Prefetch along the trace, parameter by parameter, into one buffer. */
  uint64_t room = z->a->max_live > z->live ? z->a->max_live - z->live : 0;
  uint64_t budget = z->a->prefetch_bucket < room ? z->a->prefetch_bucket : room, numel = 0;
  size_t *pre = NULL, npre = 0, cappre = 0;
  for (unsigned q = z->pos + 1; q < trace_len(z) && numel < budget; q++) {
    n = ab_transformer_module_params(m, trace_module(z, q), ps);
    for (size_t i = 0; i < n && numel < budget; i++) {
      size_t p = ps[i];
      bool listed = false;
      for (size_t j = 0; j < npre; j++) listed = listed || pre[j] == p;
      if (listed || z->persist[p] || z->gathered[p] != AB_NO_TENSOR) continue;
      if (!grow((void **)&pre, &cappre, npre + 1, sizeof *pre)) {
        z->t->es->failed = true;
        free(pre);
        return;
      }
      pre[npre++] = p;
      numel += m->numel[p];
    }
  }
  gather(z, pre, npre);
  free(pre);
}

static void leave(void *ctx, ab_transformer_t *m, unsigned module, bool backward) {
  zero_t *z = ctx;
  (void)backward;
  complete_pending(z);
  size_t ps[AB_TRANSFORMER_MODULE_MAX_PARAMS];
  size_t n = ab_transformer_module_params(m, module, ps);
  for (size_t i = 0; i < n; i++) {
    size_t p = ps[i];
    if (z->persist[p] || z->gathered[p] == AB_NO_TENSOR) continue;
    if (!z->trace_complete || !reused_soon(z, p, z->pos)) release(z, p);
  }
  z->pos++;
}

/* ---- gradients ------------------------------------------------------------------------------- */

/* Reduces the filled part of the current IPG bucket into this rank's gradient partition. */
static void reduce_bucket(zero_t *z) {
  if (z->ipg_fill == 0) return;
  uint64_t share = ceil_div(z->ipg_fill, z->a->world) * z->hb;
  unsigned stream = z->a->overlap ? REDUCE_STREAM : 0;
  if (z->grad_part == AB_NO_TENSOR) z->grad_part = ab_tape_new(z->t, z->part * z->hb, AB_TAG_GRAD);
  if (z->a->stage == 3) {
    uint32_t out = ab_tape_new_on(z->t, share, AB_TAG_COMM, stream);
    ab_tape_move(z->t, AB_K_REDUCE_SCATTER, z->ipg[z->ipg_cur], out, share, stream);
    ab_tape_move(z->t, AB_K_COPY, out, z->grad_part, share, stream);
    ab_tape_drop(z->t, out);
  } else {
    ab_tape_move(z->t, AB_K_REDUCE_SCATTER, z->ipg[z->ipg_cur], z->grad_part, share, stream);
  }
  z->ipg_fill = 0;
  if (z->ipg[1] != AB_NO_TENSOR) z->ipg_cur ^= 1;
}

/* An IPG bucket: reduce_bucket elements, padded to a multiple of N. */
static uint32_t new_bucket(zero_t *z) {
  return ab_tape_new(z->t, ceil_div(z->a->reduce_bucket, z->a->world) * z->a->world * z->hb, AB_TAG_COMM);
}

static void make_ipg(zero_t *z) {
  z->ipg[0] = new_bucket(z);
  if (z->a->overlap && z->a->stage < 3) z->ipg[1] = new_bucket(z);
  z->ipg_cur = 0;
  z->ipg_fill = 0;
}

/* Stages 2-3: a gradient goes into the IPG bucket (contiguous_gradients) and is freed. */
static void grad_to_bucket(void *ctx, ab_transformer_t *m, size_t p, uint32_t g) {
  zero_t *z = ctx;
  uint64_t e = m->numel[p];
  if (z->ipg[0] == AB_NO_TENSOR) make_ipg(z);
  if (z->ipg_fill + e > z->a->reduce_bucket) reduce_bucket(z);
  if (e > z->a->reduce_bucket) {
    /* Larger than a bucket: reduced from where it lies, or from a padded copy. */
    uint64_t share = ceil_div(e, z->a->world) * z->hb;
    if (z->grad_part == AB_NO_TENSOR) z->grad_part = ab_tape_new(z->t, z->part * z->hb, AB_TAG_GRAD);
    uint32_t from = g;
    if (e % z->a->world) {
      from = ab_tape_new(z->t, share * z->a->world, AB_TAG_COMM);
      ab_tape_move(z->t, AB_K_COPY, g, from, e * z->hb, 0);
    }
    ab_tape_move(z->t, AB_K_REDUCE_SCATTER, from, z->grad_part, share, 0);
    if (from != g) ab_tape_drop(z->t, from);
  } else {
    ab_tape_move(z->t, AB_K_COPY, g, z->ipg[z->ipg_cur], e * z->hb, 0);
    z->ipg_fill += e;
  }
  ab_tape_drop(z->t, g);
}

/* Stages 0-1: the bucket holding the gradients of parameters [lo, hi) is reduced (stage 0
 * all-reduces: reduce-scatter, then all-gather) and copied back into them. A parameter
 * larger than the bucket stands in with its first reduce_bucket elements. */
static uint64_t in_bucket(const zero_t *z, size_t p) {
  return z->m->numel[p] < z->a->reduce_bucket ? z->m->numel[p] : z->a->reduce_bucket;
}

static void reduce_flat(zero_t *z, size_t lo, size_t hi) {
  uint32_t ipg = z->ipg[0];
  uint64_t share = ceil_div(z->ipg_fill, z->a->world) * z->hb;
  ab_tape_move(z->t, AB_K_REDUCE_SCATTER, ipg, ipg, share, 0);
  if (z->a->stage == 0) ab_tape_move(z->t, AB_K_ALLGATHER, ipg, ipg, share, 0);
  for (size_t q = lo; q < hi; q++) ab_tape_move(z->t, AB_K_COPY, ipg, z->m->grad[q], in_bucket(z, q) * z->hb, 0);
  z->ipg_fill = 0;
}

/* After backward. Stages 0-1: the gradients, in the order backward made them, go through a
 * flat bucket. Stages 2-3: the last bucket is reduced. */
static void reduce_after_backward(zero_t *z) {
  if (z->a->stage >= 2) {
    reduce_bucket(z);
    if (z->a->stage == 2) {
      ab_tape_clear(z->t, &z->ipg[0]);
      ab_tape_clear(z->t, &z->ipg[1]);
    }
    return;
  }
  z->ipg[0] = new_bucket(z);
  z->ipg_fill = 0;
  size_t hi = z->m->nparams;
  for (size_t p = z->m->nparams; p-- > 0;) {
    if (z->ipg_fill + in_bucket(z, p) > z->a->reduce_bucket) {
      reduce_flat(z, p + 1, hi);
      hi = p + 1;
    }
    ab_tape_move(z->t, AB_K_COPY, z->m->grad[p], z->ipg[0], in_bucket(z, p) * z->hb, 0);
    z->ipg_fill += in_bucket(z, p);
  }
  reduce_flat(z, 0, hi);
  ab_tape_clear(z->t, &z->ipg[0]);
}

/* ---- the step ----------------------------------------------------------------------------- */

static void optimizer_step(zero_t *z, ab_optim_t *opt, ab_scaler_t *scaler) {
  ab_transformer_t *m = z->m;
  ab_tape_t *t = z->t;
  if (z->a->stage == 3) {
    for (size_t p = 0; p < m->nparams; p++)
      if (!z->persist[p] && z->gathered[p] != AB_NO_TENSOR) release(z, p);
    complete_pending(z);
  }
  uint32_t g32 = ab_tape_new(t, z->part * 4, AB_TAG_TEMP);
  if (z->a->stage >= 2) {
    ab_tape_unary(t, AB_K_CAST, z->grad_part, g32, z->part, z->dt, AB_F32);
  } else {
    /* This rank's slice of the gradients, parameter by parameter. */
    uint64_t lo = z->a->stage == 0 ? 0 : z->a->rank * z->part, hi = lo + z->part, at = 0;
    for (size_t p = 0; p < m->nparams; at += m->numel[p], p++) {
      uint64_t a = at > lo ? at : lo, b = at + m->numel[p] < hi ? at + m->numel[p] : hi;
      if (a < b) ab_tape_unary(t, AB_K_CAST, m->grad[p], g32, b - a, z->dt, AB_F32);
    }
  }
  bool skip = ab_scaler_begin_unscale(scaler, t);
  if (scaler->found_inf != AB_NO_TENSOR) {
    ab_kernel_t check = {.op = AB_K_SCALE_CHECK, .dtype = {AB_F32, AB_F32}, .nbuf = 2, .buf = {g32, scaler->found_inf},
                         .n = z->part};
    ab_events_kernel(t->es, &check, 0);
  }
  if (!skip) {
    ab_optim_step(opt, t, &z->master, &g32, &z->part, AB_F32);
    ab_tape_unary(t, AB_K_CAST, z->master, z->flat, z->part, AB_F32, z->dt);
    if (z->a->stage == 1 || z->a->stage == 2) ab_tape_move(t, AB_K_ALLGATHER, z->flat, z->flat, z->part * z->hb, 0);
  }
  ab_tape_drop(t, g32);
  ab_scaler_update(scaler, t, skip);
  if (z->a->stage < 2) ab_transformer_zero_grad(m);
  if (z->a->stage == 2) ab_tape_clear(t, &z->grad_part);
}

static ab_status generate(const char *text, uint64_t seed, ab_events_t *out, ab_diag_t *diag) {
  args_t a;
  AB_TRY(parse(text, &a, diag));
  ab_tape_t tape;
  ab_tape_init(&tape, out, a.cfg.workspace_bytes);
  ab_transformer_t m;
  AB_TRY(ab_transformer_init(&m, &a.cfg, &tape, diag));
  size_t n = m.nparams;
  zero_t z = {.a = &a, .t = &tape, .m = &m, .dt = a.cfg.compute, .hb = ab_dtype_bytes(a.cfg.compute),
              .flat = AB_NO_TENSOR, .master = AB_NO_TENSOR, .grad_part = AB_NO_TENSOR,
              .ipg = {AB_NO_TENSOR, AB_NO_TENSOR}};
  z.shard = malloc(n * sizeof *z.shard);
  z.persist = malloc(n * sizeof *z.persist);
  z.gathered = malloc(n * sizeof *z.gathered);
  ab_optim_t opt;
  ab_status st = z.shard && z.persist && z.gathered ? ab_optim_init(&opt, AB_OPTIM_ADAM, false, 1, diag)
                                                     : ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  if (st != AB_OK) {
    free(z.shard);
    free(z.persist);
    free(z.gathered);
    ab_transformer_free(&m);
    return st;
  }
  ab_scaler_t scaler;
  ab_scaler_init(&scaler, a.dtype == 0, z.dt, a.init_scale, a.grad_max, a.grad_sigma, seed);
  ab_transformer_hooks_t hooks = {.enter = a.stage == 3 ? enter : NULL,
                                  .leave = a.stage == 3 ? leave : NULL,
                                  .grad = a.stage >= 2 ? grad_to_bucket : NULL};
  m.hooks = &hooks;
  m.hooks_ctx = &z;

  uint64_t psi = ab_transformer_numel(&m);
  for (size_t p = 0; p < n; p++) {
    z.shard[p] = ceil_div(m.numel[p], a.world);
    z.persist[p] = m.numel[p] < a.persistence;
    z.gathered[p] = AB_NO_TENSOR;
  }
  if (a.stage == 3) {
    z.part = 0;
    for (size_t p = 0; p < n; p++) z.part += z.shard[p];
    z.flat = ab_tape_new(&tape, z.part * z.hb, AB_TAG_PARAM);
  } else {
    z.part = a.stage == 0 ? psi : ceil_div(psi, a.world);
    z.flat = ab_tape_new(&tape, (a.stage == 0 ? psi : z.part * a.world) * z.hb, AB_TAG_PARAM);
    for (size_t p = 0; p < n; p++) m.weight[p] = z.flat;
  }
  z.master = ab_tape_new(&tape, z.part * 4, AB_TAG_OPTIM);
  ab_tape_unary(&tape, AB_K_CAST, z.flat, z.master, z.part, z.dt, AB_F32);
  if (a.stage == 3) {
    z.grad_part = ab_tape_new(&tape, z.part * z.hb, AB_TAG_GRAD);
    make_ipg(&z);
  }
  for (uint64_t i = 0; i < a.steps && !out->failed; i++) { /* a failed stream stops here (events.h) */
    ab_events_step(out);
    z.pos = 0;
    ab_transformer_step_t step;
    ab_transformer_forward_backward(&m, a.batch, a.seq, &scaler, &step);
    reduce_after_backward(&z);
    optimizer_step(&z, &opt, &scaler);
    ab_transformer_end_step(&m, &step);
    z.trace_complete = true;
  }
  ab_optim_free(&opt);
  free(z.shard);
  free(z.persist);
  free(z.gathered);
  free(z.bufs);
  free(z.pending);
  ab_transformer_free(&m);
  ab_tape_free(&tape);
  return AB_OK;
}

const ab_workload_t ab_workload_zero = {
    .name = "zero",
    .summary = "ZeRO stages 1-3 (DeepSpeed's defaults) over the transformer, as rank r of N holds it",
    .params_help = AB_TRANSFORMER_HELP
    "  stage=0|1|2|3  what is sharded: 1 optimizer state, 2 and gradients, 3 and parameters;\n"
    "                 0 none (default 3)\n"
    "  world=N, rank=R  data-parallel ranks and the one generated (default 8, 0)\n"
    "  batch=N, seq=N sequences per step and their length (default 8, 1024)\n"
    "  steps=N        training steps (default 10)\n"
    "  dtype=fp16|bf16  training dtype; fp16 with dynamic loss scaling (default fp16)\n"
    "  reduce_bucket=N  IPG bucket, elements (reduce_bucket_size; default 500000000)\n"
    "  prefetch_bucket=N  stage 3 prefetch, elements (stage3_prefetch_bucket_size; default 50000000)\n"
    "  persistence_threshold=N  stage 3: parameters smaller than this stay gathered (default 100000)\n"
    "  max_live=N     stage 3: most gathered elements (stage3_max_live_parameters; default 1000000000)\n"
    "  max_reuse=N    stage 3: keep a parameter used again within this many elements\n"
    "                 (stage3_max_reuse_distance; default 1000000000)\n"
    "  overlap_comm=BOOL  reduce on a side stream with two IPG buffers (default: true iff stage 3)\n"
    "  grad_max=X, grad_sigma=X, init_scale=X  fp16 loss scaling (autograd.h; default 6, 0.25, 65536)\n",
    .quick_args = "steps=4",
    .bench_args = "stage=3",
    .generate = generate,
    .scale = (const ab_scale_key_t[]){{"steps", 1}, {"layers", 1}, {NULL, 0}},
};
