"""A stand-in for torch, for the tests of `allocbench record` (tests/record_test.sh) on
machines without PyTorch. It has what the start-up hook calls (torch.cuda._lazy_call,
torch.cuda.memory._record_memory_history and _dump_snapshot, torch.OutOfMemoryError) and an
allocator that the test program drives (torch.cuda.stand_in_alloc and stand_in_free), whose
history _dump_snapshot writes as PyTorch 2.11 lays out a snapshot."""

from . import cuda
from .cuda import OutOfMemoryError

__version__ = "0.0+stand-in"
