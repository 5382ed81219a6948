"""The program `allocbench record` runs in tests/record_test.sh, on the stand-in torch.

usage: job.py MODE [ARG]
  exit N     allocates and frees, then exits with status N
  oom        allocates, then asks for more than the card has, uncaught
  wait FILE  allocates, writes its pid to FILE, then sleeps until a signal ends it
  catch FILE as wait, but catches KeyboardInterrupt and exits with status 5
  nocuda     imports torch and never uses CUDA
  osexit     allocates, then ends by os._exit(0), where no exit hook runs
Each allocates 5 blocks and frees 2 of them (3 live at the end)."""

import os
import sys
import time

import torch


def allocate():
    addrs = [torch.cuda.stand_in_alloc(n) for n in (1000, 3 << 20, 512, 5 << 20, 70000)]
    torch.cuda.stand_in_free(addrs[1])
    torch.cuda.stand_in_free(addrs[3])
    return addrs


mode = sys.argv[1]
if mode == "exit":
    allocate()
    sys.exit(int(sys.argv[2]))
elif mode == "oom":
    allocate()
    torch.cuda.stand_in_alloc(1 << 40)
elif mode == "wait":
    allocate()
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    time.sleep(60)
elif mode == "catch":
    allocate()
    open(sys.argv[2], "w").close()
    try:
        time.sleep(60)
    except KeyboardInterrupt:
        sys.exit(5)
elif mode == "nocuda":
    print(torch.__version__)
elif mode == "osexit":
    allocate()
    os._exit(0)
