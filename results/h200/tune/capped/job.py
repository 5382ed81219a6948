"""The job of ../job.py under a memory cap set in its own code (run.sh).

torch.cuda.set_per_process_memory_fraction(CAP / total) before the model is built, as a user
who shares a GPU writes it: nothing of it reaches PYTORCH_CUDA_ALLOC_CONF or the snapshot.
CAP in bytes is the first argument (default 17 GB). At the end it prints, one line each, the
cap and torch.cuda.memory_stats()'s figures.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch  # noqa: E402

import job  # noqa: E402


def main():
    cap = int(sys.argv[1]) if len(sys.argv) > 1 else 17_000_000_000
    total = torch.cuda.mem_get_info()[1]
    torch.cuda.set_per_process_memory_fraction(cap / total)
    print("cap_bytes", int(cap / total * total))
    print("total_bytes", total)
    job.main()
    stats = torch.cuda.memory_stats()
    for key in ("num_ooms", "num_alloc_retries", "num_device_free", "allocated_bytes.all.peak",
                "reserved_bytes.all.current"):
        print(key, stats[key])


if __name__ == "__main__":
    main()
