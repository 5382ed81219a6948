"""torch.cuda.memory of the stand-in (see torch/__init__.py)."""

import os
import pickle
import sys

_history = None  # the trace entries, once recording is on
_max_entries = 0
_context = None  # PyTorch's context=: "alloc" or "all" record each allocation's stack


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, **kwargs):
    global _history, _max_entries, _context
    _history = [] if enabled else None
    _context = context
    _max_entries = max_entries if max_entries != sys.maxsize else 0


def _snapshot():
    from . import _live

    segments = []
    for addr, (requested, segment) in sorted(_live.items()):
        size = -(-requested // 512) * 512
        blocks = [{"address": addr, "size": size, "requested_size": requested, "state": "active_allocated",
                   "frames": []}]
        if segment > size:
            blocks.append({"address": addr + size, "size": segment - size, "requested_size": 0, "state": "inactive",
                           "frames": []})
        segments.append({"device": 0, "address": addr, "total_size": segment, "allocated_size": size,
                         "active_size": size, "requested_size": requested, "stream": 0, "segment_type": "large",
                         "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks})
    settings = {"PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "max_split_size": -1,
                "garbage_collection_threshold": 0.0, "expandable_segments": False,
                "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}}
    return {"segments": segments, "device_traces": [list(_history or [])], "allocator_settings": settings,
            "external_annotations": []}


def _dump_snapshot(filename="dump_snapshot.pickle"):
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)
