"""A training loop with many allocations, for what recording stacks costs a job
(results/h200/blame/run.sh): an MLP of 4 layers trained for STEPS steps on batches of varying
size, in bf16. Prints its own wall time as `loop_s S`."""

import sys
import time

import torch


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(4)]).cuda().bfloat16()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    t0 = time.time()
    for step in range(steps):
        x = torch.randn(64 + (step * 37) % 448, 2048, device="cuda", dtype=torch.bfloat16)
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    print("loop_s %.3f" % (time.time() - t0))


if __name__ == "__main__":
    main()
