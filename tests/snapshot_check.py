"""Checks that a memory snapshot is one PyTorch's memory viewer can draw.

usage: python3 snapshot_check.py SNAPSHOT.pickle [counts|peak]

Loads the snapshot with the standard pickle module only (as torch.cuda._memory_viz does) and
checks what the viewer relies on:
  - the layout: segments (each with device, address, total_size, stream, blocks), device_traces
    (a list per device of entries with action, addr or device_free, size, stream);
  - _memory_viz's `stats` view: each segment's blocks tile it exactly;
  - MemoryViz.js's segment view, which starts from the segments and undoes the trace backwards:
    at every point of the trace every live block lies inside a live segment, a free_requested
    finds its block, and an unmap finds the mapped range it cuts.
With `counts`, prints the count of each action of device_traces[0], one "name count" a line.
With `peak`, prints "segment_peak N": the highest total of the viewer's segment timeline
(MemoryViz.js, process_alloc_data with plot_segments: each segment_alloc an element until the
segment_free of its address, a segment of the end state that no segment_alloc made there from
the start).
Exits 0 when the snapshot passes, 1 with a message otherwise.
"""
import bisect
import collections
import pickle
import sys


def fail(msg):
    print(f"snapshot_check: {msg}", file=sys.stderr)
    sys.exit(1)


class Segments:
    """Live address ranges, kept sorted by start."""

    def __init__(self):
        self.starts, self.sizes = [], []

    def add(self, addr, size):
        i = bisect.bisect_left(self.starts, addr)
        self.starts.insert(i, addr)
        self.sizes.insert(i, size)

    def find(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0 and addr < self.starts[i] + self.sizes[i]:
            return i
        return None

    def remove_at(self, addr, size):
        i = self.find(addr)
        if i is None or self.starts[i] + self.sizes[i] < addr + size:
            return False
        start, total = self.starts[i], self.sizes[i]
        del self.starts[i], self.sizes[i]
        if addr > start:
            self.add(start, addr - start)
        if addr + size < start + total:
            self.add(addr + size, start + total - addr - size)
        return True


def main():
    if len(sys.argv) < 2:
        fail("usage: snapshot_check.py SNAPSHOT [counts]")
    with open(sys.argv[1], "rb") as f:
        snap = pickle.load(f)
    for key in ("segments", "device_traces"):
        if key not in snap:
            fail(f"no {key}")
    segs = Segments()
    blocks = {}  # address -> (size, free_requested)
    for s in snap["segments"]:
        for key in ("device", "address", "total_size", "stream", "blocks"):
            if key not in s:
                fail(f"segment without {key}: {s}")
        if s["device"] != 0:
            continue
        if sum(b["size"] for b in s["blocks"]) != s["total_size"]:
            fail(f"segment {s['address']:#x}: blocks do not tile its {s['total_size']} bytes")
        addr = s["address"]
        for b in s["blocks"]:
            if b.get("address", addr) != addr:
                fail(f"segment {s['address']:#x}: block at {b['address']:#x}, expected {addr:#x}")
            if b["state"] in ("active_allocated", "active_pending_free"):
                blocks[addr] = (b["size"], b["state"] == "active_pending_free")
            addr += b["size"]
        segs.add(s["address"], s["total_size"])
    trace = snap["device_traces"][0] if snap["device_traces"] else []
    for e in trace:
        for key in ("action", "size", "stream"):
            if key not in e:
                fail(f"entry without {key}: {e}")
        if ("device_free" if e["action"] == "oom" else "addr") not in e:
            fail(f"entry without its address: {e}")
    for addr, (size, _) in blocks.items():
        if segs.find(addr) is None:
            fail(f"block {addr:#x} lies in no segment at the end")
    # Undo the trace, newest first, as the viewer does.
    for i in range(len(trace) - 1, -1, -1):
        e = trace[i]
        a, addr = e["action"], e.get("addr")
        if a == "alloc":
            blocks.pop(addr, None)
        elif a == "free_completed":
            blocks[addr] = (e["size"], True)
            if segs.find(addr) is None:
                fail(f"entry {i}: block {addr:#x} lies in no segment before its free")
        elif a == "free_requested":
            if addr not in blocks:
                fail(f"entry {i}: free_requested of {addr:#x}, which the viewer does not know")
            blocks[addr] = (blocks[addr][0], False)
        elif a in ("segment_free", "segment_unmap"):
            segs.add(addr, e["size"])
        elif a in ("segment_alloc", "segment_map"):
            if not segs.remove_at(addr, e["size"]):
                fail(f"entry {i}: {a} of {addr:#x} matches no segment")
            live = sorted(blocks)
            j = bisect.bisect_left(live, addr)
            if j < len(live) and live[j] < addr + e["size"]:
                fail(f"entry {i}: block {live[j]:#x} is live before its segment {addr:#x} exists")
    if len(sys.argv) > 2 and sys.argv[2] == "counts":
        for name, n in collections.Counter(e["action"] for e in trace).items():
            print(name, n)
    if len(sys.argv) > 2 and sys.argv[2] == "peak":
        print("segment_peak", segment_peak(snap, trace))


def segment_peak(snap, trace):
    sizes, by_addr, actions, initial = [], {}, [], []
    for e in trace:
        if e["action"] == "segment_alloc":
            sizes.append(e["size"])
            by_addr[e["addr"]] = len(sizes) - 1
            actions.append(len(sizes) - 1)
        elif e["action"] == "segment_free":
            if e["addr"] in by_addr:
                actions.append(by_addr.pop(e["addr"]))
            else:
                sizes.append(e["size"])
                initial.append(len(sizes) - 1)
                actions.append(len(sizes) - 1)
    for s in snap["segments"]:
        if s["device"] == 0 and s["address"] not in by_addr:
            sizes.append(s["total_size"])
            initial.append(len(sizes) - 1)
    live = set(initial)
    total = peak = sum(sizes[i] for i in live)
    for i in actions:
        if i in live:
            live.remove(i)
            total -= sizes[i]
        else:
            live.add(i)
            total += sizes[i]
            peak = max(peak, total)
    return peak


main()
