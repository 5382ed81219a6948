# Records a PyTorch 2.11 allocator snapshot of about 1.5 M trace entries from
# an eager decoding loop (a small GPT-style model generating token by token
# with a growing KV cache), the shape of a Hugging Face generate() run.
import gzip, pickle, sys, time
import torch

TARGET = int(sys.argv[2]) if len(sys.argv) > 2 else 1_450_000
out = sys.argv[1]

torch.manual_seed(0)
dev = "cuda"
layers, hidden, heads, vocab = 12, 1024, 16, 32000
head_dim = hidden // heads
W = [dict(qkv=torch.randn(hidden, 3 * hidden, device=dev, dtype=torch.bfloat16),
          o=torch.randn(hidden, hidden, device=dev, dtype=torch.bfloat16),
          up=torch.randn(hidden, 4 * hidden, device=dev, dtype=torch.bfloat16),
          down=torch.randn(4 * hidden, hidden, device=dev, dtype=torch.bfloat16))
     for _ in range(layers)]
emb = torch.randn(vocab, hidden, device=dev, dtype=torch.bfloat16)

def step(x, cache):
    for i, w in enumerate(W):
        h = torch.nn.functional.layer_norm(x, (hidden,))
        q, k, v = (h @ w["qkv"]).split(hidden, dim=-1)
        b, t, _ = q.shape
        q = q.view(b, t, heads, head_dim).transpose(1, 2)
        k = k.view(b, t, heads, head_dim).transpose(1, 2)
        v = v.view(b, t, heads, head_dim).transpose(1, 2)
        if cache[i] is not None:
            k = torch.cat([cache[i][0], k], dim=2)
            v = torch.cat([cache[i][1], v], dim=2)
        cache[i] = (k, v)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        x = x + a.transpose(1, 2).reshape(b, t, hidden) @ w["o"]
        h = torch.nn.functional.layer_norm(x, (hidden,))
        x = x + torch.nn.functional.gelu(h @ w["up"]) @ w["down"]
    return x[:, -1:, :] @ emb.t()

def generate(batch, prompt, new_tokens):
    tokens = torch.randint(0, vocab, (batch, prompt), device=dev)
    cache = [None] * layers
    x = emb[tokens]
    for _ in range(new_tokens):
        logits = step(x, cache)
        nxt = torch.argmax(logits.float().softmax(-1), dim=-1)
        x = emb[nxt]

def request(r):
    generate(1 + r % 8, 32 + 17 * (r % 11), 24 + r % 9)

torch.cuda.memory._record_memory_history(max_entries=TARGET + 100_000, stacks="python")
t0 = time.time()
# Calibrate: entries per request, then run to the target without wrapping the buffer.
for r in range(20):
    request(r)
n = len(torch.cuda.memory._snapshot()["device_traces"][0])
per = n / 20
total = int(TARGET / per)
for r in range(20, total):
    request(r)
snap = torch.cuda.memory._snapshot()
torch.cuda.memory._record_memory_history(enabled=None)
entries = len(snap["device_traces"][0])
raw = pickle.dumps(snap)
with gzip.open(out, "wb", compresslevel=6) as f:
    f.write(raw)
print(f"requests {total} entries {entries} pickle {len(raw)} bytes "
      f"recorded in {time.time() - t0:.1f} s; "
      f"reserved peak {torch.cuda.memory_stats()['reserved_bytes.all.peak']}")
