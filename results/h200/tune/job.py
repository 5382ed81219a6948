"""A small training job for the check of `allocbench tune` against PyTorch (run.sh).

A transformer language model (8 blocks, d_model 1024, 16 heads, vocabulary 32000) trained for
12 steps with AdamW under bf16 autocast, each step's batch shape drawn from a fixed list by a
seeded generator, so that activations of changing sizes leave the caching allocator's blocks
in changing places: the fragmentation that the settings differ on. Attention is written out
(no fused kernel that might choose its workspace by free memory), so the program asks for the
same allocations, in the same order, under every PYTORCH_CUDA_ALLOC_CONF.

At the end it prints, one line each, torch.cuda.memory_stats()'s
    reserved_bytes.all.peak N
    num_device_alloc N
"""

import random

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, D_MODEL, LAYERS, HEADS, STEPS = 32000, 1024, 8, 16, 12
SHAPES = [(8, 512), (4, 1536), (16, 256), (2, 2048), (6, 1024), (12, 384)]  # (batch, sequence)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
        self.qkv, self.proj = nn.Linear(D_MODEL, 3 * D_MODEL), nn.Linear(D_MODEL, D_MODEL)
        self.fc1, self.fc2 = nn.Linear(D_MODEL, 4 * D_MODEL), nn.Linear(4 * D_MODEL, D_MODEL)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * (d // HEADS) ** -0.5 + mask
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, VOCAB, bias=False)

    def forward(self, tokens):
        t = tokens.shape[1]
        mask = torch.full((t, t), float("-inf"), device=tokens.device).triu(1)
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln(x))


def main():
    torch.manual_seed(0)
    draw = random.Random(0)
    model = Model().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(STEPS):
        batch, seq = draw.choice(SHAPES)
        tokens = torch.randint(0, VOCAB, (batch, seq), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens)
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), tokens.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    stats = torch.cuda.memory_stats()
    print("reserved_bytes.all.peak", stats["reserved_bytes.all.peak"])
    print("num_device_alloc", stats["num_device_alloc"])


if __name__ == "__main__":
    main()
