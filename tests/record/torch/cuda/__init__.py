"""torch.cuda of the stand-in (see torch/__init__.py): lazy initialisation as PyTorch does it,
and an allocator of one segment per allocation on a card of STAND_IN_CAPACITY bytes
(default 1 GiB)."""

import os
import time
import traceback

from . import memory


class OutOfMemoryError(RuntimeError):
    pass


_initialized = False
_queued_calls = []


def is_initialized():
    return _initialized


def _lazy_call(callable, **kwargs):
    """As PyTorch's: at once when CUDA is initialised, else queued until it is."""
    if _initialized:
        callable()
    else:
        _queued_calls.append(callable)


def init():
    global _initialized
    if _initialized:
        return
    _initialized = True
    for call in _queued_calls:
        call()
    _queued_calls.clear()


_SEGMENT_ROUND = 2 << 20
_capacity = int(os.environ.get("STAND_IN_CAPACITY", 1 << 30))
_next_addr = 0x7F0000000000
_reserved = 0
_live = {}  # addr -> (requested, segment bytes)


def _frames():
    """The Python stack as PyTorch records it (context="alloc"): innermost first, this
    package's own frames included, as torch's are."""
    return [{"filename": f.filename, "line": f.lineno, "name": f.name} for f in reversed(traceback.extract_stack())]


def _record(action, addr, size):
    if memory._history is not None:
        stacked = memory._context in ("alloc", "all") and action == "alloc"
        memory._history.append({"action": action, "addr": addr, "size": size, "stream": 0,
                                "time_us": int(time.time() * 1e6), "compile_context": "N/A",
                                "user_metadata": "", "frames": _frames() if stacked else []})
        if memory._max_entries and len(memory._history) > memory._max_entries:
            del memory._history[0]


def stand_in_alloc(nbytes):
    """One allocation of nbytes in a segment of its own; its address."""
    global _next_addr, _reserved
    init()
    segment = -(-nbytes // _SEGMENT_ROUND) * _SEGMENT_ROUND
    if _reserved + segment > _capacity:
        if memory._history is not None:
            memory._history.append({"action": "oom", "device_free": _capacity - _reserved, "size": nbytes,
                                    "stream": 0, "time_us": int(time.time() * 1e6)})
        raise OutOfMemoryError("CUDA out of memory. Tried to allocate %d bytes (stand-in)" % nbytes)
    addr = _next_addr
    _next_addr += segment
    _reserved += segment
    _live[addr] = (nbytes, segment)
    _record("segment_alloc", addr, segment)
    _record("alloc", addr, nbytes)
    return addr


def stand_in_free(addr):
    global _reserved
    nbytes, segment = _live.pop(addr)
    _record("free_requested", addr, nbytes)
    _record("free_completed", addr, nbytes)
    _record("segment_free", addr, segment)
    _reserved -= segment
