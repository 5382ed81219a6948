"""PyTorch programs whose memory lives in private pools, recorded for allocbench's fixtures.

usage: programs.py NAME OUT_DIR [STEM]
Each program switches PyTorch's allocator history on before its first allocation, runs, and
writes OUT_DIR/STEM.pickle (torch.cuda.memory._dump_snapshot) and OUT_DIR/STEM.json (STEM
defaults to NAME)
(torch.cuda.memory_stats() at the end, whether it ran out of memory, the cap). The
PYTORCH_CUDA_ALLOC_CONF of each is set by run.sh, so that the snapshot keeps it.

  graph_pool      decode CUDA graphs for nine batch sizes, largest first, captured into one
                  shared pool (torch.cuda.graph_pool_handle()); then requests: eager prefill of
                  drawn lengths beside graph replays of decode
  compiled        torch.compile(mode="reduce-overhead") (CUDA graph trees) on three input shapes
  mempool_oom     a MemPool(use_on_oom=True) holding KV-cache-like buffers, some freed; then
                  training steps of a growing batch in the default pool under a cap, until
                  PyTorch runs out of memory
  mempool_gone    a no_split MemPool kept to the end, and a MemPool used, deleted and emptied
                  before the snapshot (its segments are gone from the snapshot)
  gc              random training-like allocations under garbage_collection_threshold and a
                  memory fraction (set in the conf string), two streams
  moe             training steps of a mixture-of-experts transformer (top-2 routing over eight
                  experts, so each expert's activations change size every step; AdamW), with
                  a batch drawn per step, under the conf's cap and garbage collection
"""

import json
import os
import random
import sys

import torch

name, out = sys.argv[1], sys.argv[2]
stem = sys.argv[3] if len(sys.argv) > 3 else name
torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=400000)
dev = torch.device("cuda")
result = {"program": name, "conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "oom": False}


def decode_model(hidden, layers, dtype=torch.bfloat16):
    torch.manual_seed(0)
    ws = []
    for _ in range(layers):
        ws.append((torch.randn(hidden, 3 * hidden, device=dev, dtype=dtype) * 0.02,
                   torch.randn(hidden, hidden, device=dev, dtype=dtype) * 0.02,
                   torch.randn(hidden, 4 * hidden, device=dev, dtype=dtype) * 0.02,
                   torch.randn(4 * hidden, hidden, device=dev, dtype=dtype) * 0.02))
    return ws


def layer_step(x, w, kcache, vcache):
    qkv = x @ w[0]
    q, k, v = qkv.chunk(3, dim=-1)
    kc = torch.cat([kcache, k.unsqueeze(1)], dim=1)
    vc = torch.cat([vcache, v.unsqueeze(1)], dim=1)
    s = torch.softmax((kc * q.unsqueeze(1)).sum(-1) * 0.05, dim=-1)
    a = (s.unsqueeze(-1) * vc).sum(1)
    x = x + a @ w[1]
    return x + torch.nn.functional.gelu(x @ w[2]) @ w[3]


def graph_pool():
    hidden, layers, ctx = 1024, 6, 128
    ws = decode_model(hidden, layers)
    sizes = [256, 224, 192, 160, 128, 96, 64, 32, 16]
    kcache = [torch.zeros(sizes[0], ctx, hidden, device=dev, dtype=torch.bfloat16) for _ in range(layers)]
    vcache = [torch.zeros(sizes[0], ctx, hidden, device=dev, dtype=torch.bfloat16) for _ in range(layers)]
    pool = torch.cuda.graph_pool_handle()
    graphs = {}
    side = torch.cuda.Stream()
    for b in sizes:
        static_in = torch.randn(b, hidden, device=dev, dtype=torch.bfloat16)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the graph, as PyTorch's docs advise
            x = static_in
            for l in range(layers):
                x = layer_step(x, ws[l], kcache[l][:b], vcache[l][:b])
            del x
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            x = static_in
            for l in range(layers):
                x = layer_step(x, ws[l], kcache[l][:b], vcache[l][:b])
            static_out = x
        graphs[b] = (g, static_in, static_out)
    rng = random.Random(1)
    outs = []
    for req in range(40):
        n = rng.randint(16, 1024)  # prefill tokens, eager
        x = torch.randn(n, hidden, device=dev, dtype=torch.bfloat16)
        for l in range(layers):
            h = x @ ws[l][0]
            x = x + h[:, :hidden] @ ws[l][1]
            x = x + torch.nn.functional.gelu(x @ ws[l][2]) @ ws[l][3]
            del h
        b = rng.choice(sizes)
        g, static_in, static_out = graphs[b]
        static_in.copy_(x[: b].mean(0, keepdim=True).expand(b, hidden))
        for _ in range(4):  # decode steps
            g.replay()
        outs.append(static_out[:1].clone())
        if len(outs) > 8:
            outs.pop(0)
        del x
    torch.cuda.synchronize()
    result["graphs"] = len(graphs)


def compiled():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 4096),
                                torch.nn.GELU(), torch.nn.Linear(4096, 1024)).to(dev)
    f = torch.compile(model, mode="reduce-overhead", dynamic=False)
    keep = []
    with torch.no_grad():
        for n in (256, 1024, 4096):
            x = torch.randn(n, 1024, device=dev)
            for i in range(6):
                torch.compiler.cudagraph_mark_step_begin()
                y = f(x)
                keep.append(y.sum().clone())
            del x, y
    torch.cuda.synchronize()
    result["shapes"] = 3


def mempool_oom():
    pool = torch.cuda.MemPool(use_on_oom=True)
    with torch.cuda.use_mem_pool(pool):
        kv = [torch.empty(256 << 20, dtype=torch.uint8, device=dev) for _ in range(8)]
        small = [torch.empty(300 << 10, dtype=torch.uint8, device=dev) for _ in range(16)]
    del kv[1::2], small[::2]  # half the cache blocks go back to the pool's free lists
    torch.manual_seed(0)
    w1 = torch.randn(2048, 8192, device=dev) * 0.01
    w2 = torch.randn(8192, 2048, device=dev) * 0.01
    opt_state = [torch.zeros_like(w1), torch.zeros_like(w2)]
    batch = 1024
    try:
        for step in range(100):
            x = torch.randn(batch, 2048, device=dev)
            h = torch.relu(x @ w1)
            y = h @ w2
            loss = (y * y).mean()
            g2 = h.t() @ (2 * y / y.numel())
            gh = (2 * y / y.numel()) @ w2.t() * (h > 0)
            g1 = x.t() @ gh
            opt_state[0].add_(g1)
            opt_state[1].add_(g2)
            del x, h, y, loss, g1, g2, gh
            batch += 1536
        result["steps"] = 100
    except torch.OutOfMemoryError as e:
        result["oom"] = True
        result["oom_at_batch"] = batch
        result["oom_message"] = str(e).split(" If reserved")[0]
    result["pool_segments_at_end"] = len(pool.snapshot())


def mempool_gone():
    keep_pool = torch.cuda.MemPool(no_split=True)
    gone_pool = torch.cuda.MemPool()
    live = []
    with torch.cuda.use_mem_pool(keep_pool):
        ks = [torch.empty(4 << 20, dtype=torch.uint8, device=dev) for _ in range(6)]
    del ks[::2]
    with torch.cuda.use_mem_pool(gone_pool):
        gs = [torch.empty(n << 20, dtype=torch.uint8, device=dev) for n in (3, 5, 40, 1, 64)]
    rng = random.Random(2)
    for i in range(200):
        live.append(torch.empty(rng.randint(1, 64) << 19, dtype=torch.uint8, device=dev))
        if len(live) > 20:
            live.pop(rng.randrange(len(live)))
        if i == 100:
            del gs
            del gone_pool
            torch.cuda.empty_cache()
    with torch.cuda.use_mem_pool(keep_pool):
        ks += [torch.empty(4 << 20, dtype=torch.uint8, device=dev) for _ in range(3)]
    torch.cuda.synchronize()


def gc_trace():
    rng = random.Random(3)
    side = torch.cuda.Stream()
    live = []
    sizes = [(1 << 20) * k for k in (3, 7, 24, 40, 96, 130, 200, 260, 300)]
    try:
        for i in range(3000):
            s = side if rng.random() < 0.25 else torch.cuda.current_stream()
            with torch.cuda.stream(s):
                n = rng.choice(sizes) + rng.randint(0, 64) * 4096
                live.append((torch.empty(n, dtype=torch.uint8, device=dev), s))
                while sum(t.numel() for t, _ in live) > (1500 << 20):
                    t, ts = live.pop(rng.randrange(len(live)))
                    del t
    except torch.OutOfMemoryError as e:
        result["oom"] = True
        result["oom_message"] = str(e).split(" If reserved")[0]
    torch.cuda.synchronize()


def moe():
    torch.manual_seed(5)
    rng = random.Random(5)
    hidden, ffn, experts, layers, vocab = 1024, 1408, 8, 4, 16384

    class Expert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = torch.nn.Linear(hidden, ffn, bias=False)
            self.up = torch.nn.Linear(hidden, ffn, bias=False)
            self.down = torch.nn.Linear(ffn, hidden, bias=False)

        def forward(self, x):
            return self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(hidden)
            self.attn = torch.nn.MultiheadAttention(hidden, 16, batch_first=True)
            self.norm2 = torch.nn.LayerNorm(hidden)
            self.router = torch.nn.Linear(hidden, experts, bias=False)
            self.experts = torch.nn.ModuleList(Expert() for _ in range(experts))

        def forward(self, x):
            h = self.norm(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            h = self.norm2(x).flatten(0, 1)
            weight, chosen = torch.topk(self.router(h).softmax(-1), 2, dim=-1)
            out = torch.zeros_like(h)
            for e in range(experts):
                rows, slot = torch.nonzero(chosen == e, as_tuple=True)
                if rows.numel():
                    out.index_add_(0, rows, self.experts[e](h[rows]) * weight[rows, slot, None])
            return x + out.view_as(x)

    emb = torch.nn.Embedding(vocab, hidden)
    body = torch.nn.Sequential(*[Layer() for _ in range(layers)])
    model = torch.nn.ModuleDict({"emb": emb, "body": body}).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    try:
        for step in range(30):
            batch, seq = rng.choice((2, 4, 6, 8)), rng.choice((256, 384, 512, 768))
            tokens = torch.randint(0, vocab, (batch, seq), device=dev)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                h = model["body"](model["emb"](tokens))
                loss = torch.nn.functional.cross_entropy((h @ model["emb"].weight.t()).float().flatten(0, 1),
                                                         tokens.flatten())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    except torch.OutOfMemoryError as e:
        result["oom"] = True
        result["oom_message"] = str(e).split(" If reserved")[0]
    torch.cuda.synchronize()


programs = {"graph_pool": graph_pool, "compiled": compiled, "mempool_oom": mempool_oom,
            "mempool_gone": mempool_gone, "gc": gc_trace, "moe": moe}
programs[name]()
stats = torch.cuda.memory_stats()
keys = ["reserved_bytes.all.peak", "allocated_bytes.all.peak", "requested_bytes.all.peak", "active_bytes.all.peak",
        "reserved_bytes.all.current", "allocated_bytes.all.current", "num_device_alloc", "num_device_free",
        "num_alloc_retries", "num_ooms", "num_sync_all_streams", "segment.all.peak", "segment.all.current"]
result["stats"] = {k: stats.get(k) for k in keys}
result["total_memory"] = torch.cuda.get_device_properties(0).total_memory
result["fraction"] = torch.cuda.get_per_process_memory_fraction()
torch.cuda.memory._dump_snapshot(os.path.join(out, stem + ".pickle"))
with open(os.path.join(out, stem + ".json"), "w") as f:
    json.dump(result, f, indent=1, sort_keys=True)
print(json.dumps(result, sort_keys=True))
