"""A program with one fragmenting call site, for `allocbench blame` (results/h200/blame/run.sh).

Each step the data loader (load_batch) makes a batch of 40 or 38 MiB and lets the previous one
go, double-buffering; then the cache (cache_kv) keeps a block of 30 MiB, which PyTorch's
caching allocator carves out of the batch just let go: the rest of that segment is too small
for anything after it, so the loader takes a new segment every step. With --pool the cache's
blocks go to a torch.cuda.MemPool of their own, the change blame proposes. Prints the peak
reserved bytes (torch.cuda.max_memory_reserved) as `peak_reserved_bytes N`."""

import argparse

import torch

MiB = 1 << 20


def load_batch(step):
    return torch.empty((40 if step % 2 == 0 else 38) * MiB, dtype=torch.uint8, device="cuda")


def cache_kv(cache, pool):
    if pool is None:
        cache.append(torch.empty(30 * MiB, dtype=torch.uint8, device="cuda"))
        return
    with torch.cuda.use_mem_pool(pool):
        cache.append(torch.empty(30 * MiB, dtype=torch.uint8, device="cuda"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pool", action="store_true", help="the cache in a MemPool of its own")
    parser.add_argument("--steps", type=int, default=24)
    args = parser.parse_args()
    pool = torch.cuda.MemPool() if args.pool else None
    cache, previous = [], None
    for step in range(args.steps):
        batch = load_batch(step)
        del previous  # the previous batch goes once the next is loaded
        cache_kv(cache, pool)
        previous = batch
        del batch
    torch.cuda.synchronize()
    print("peak_reserved_bytes %d" % torch.cuda.max_memory_reserved())


if __name__ == "__main__":
    main()
