#!/usr/bin/env python3
"""includes.py [ROOT]: the include graph of allocbench's C sources, counted.

A module is a source file, its header and its private header (x.c, x.h and x_internal.h are
one module, x); module a reaches b when a file of a includes a header of b. Every include of a
header of the tree is spelled with the layer it belongs to, "LINK/PATH" (LINK a layer's include
link, CMakeLists.txt's ab_layer: "kernels/base/units.h", "harness/run/engine.h", "strategies/caching/caching.h";
the tests' own, "tests/check.h"), its own header included. The script prints
  circles   the strongly connected groups of more than one module (a reaches b and b reaches
            a, directly or through others), each with its modules;
  upward    the includes from a file of a layer to a header of a layer its library does not
            link (the layers of CMakeLists.txt, each folder one library);
  spelled   the includes of a header of the tree not spelled as its path;
and exits 1 when any count is not 0. An include that names no file of the tree (a system or
generated header) is passed over."""
import os
import re
import sys

# Each layer's folder, and the layers its library links (itself included), as CMakeLists.txt
# declares them.
LAYERS = {
    "kernels/base": {"kernels/base"},
    "kernels/device": {"kernels/device", "kernels/base"},
    "strategies/protocol": {"strategies/protocol", "kernels/device", "kernels/base"},
    "strategies": {"strategies", "strategies/protocol", "kernels/device", "kernels/base"},
    "kernels": {"kernels", "kernels/device", "kernels/base"},
    "workloads/events": {"workloads/events", "strategies/protocol", "kernels", "kernels/device", "kernels/base"},
}
LAYERS["workloads/traces"] = {"workloads/traces"} | LAYERS["workloads/events"]
LAYERS["workloads"] = {"workloads"} | LAYERS["workloads/traces"]
LAYERS["harness/run"] = {"harness/run"} | LAYERS["workloads"] | LAYERS["strategies"]
LAYERS["harness/ranks"] = {"harness/ranks"} | LAYERS["harness/run"]
LAYERS["harness/tune"] = {"harness/tune"} | LAYERS["harness/run"]
LAYERS["harness/cli"] = {"harness/cli"} | LAYERS["harness/ranks"] | LAYERS["harness/tune"]
LAYERS["harness/micro"] = {"harness/micro"} | LAYERS["harness/cli"]
# The tests reach every layer.
LAYERS["tests"] = {"tests"} | set(LAYERS)
# Folders of a layer besides its own (one library built from several folders).
FOLDERS = {
    "strategies/common": "strategies",
    "strategies/caching": "strategies",
    "strategies/planned": "strategies",
    "strategies/pluggable": "strategies",
    "tests/kernels": "tests",
    "tests/strategies": "tests",
    "tests/workloads": "tests",
    "tests/harness": "tests",
    "tests/bench": "tests",
    "tests/layers": "tests",
    "tests/fuzz": "tests",
}
SOURCE = re.compile(r"\.(c|h|cu|cuh|cc|cpp)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def files(root):
    """Every source file directly in a layer's folders: {path: layer}."""
    out = {}
    for folder, layer in [(layer, layer) for layer in LAYERS] + list(FOLDERS.items()):
        for name in sorted(os.listdir(os.path.join(root, folder))):
            if SOURCE.search(name) and os.path.isfile(os.path.join(root, folder, name)):
                out[os.path.join(folder, name)] = layer
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    layer_of = files(root)
    spelled_as = {}  # an include's text: the header it names
    named = set()    # the headers' file names
    for path, layer in layer_of.items():
        if path.endswith(".h"):
            spelled_as[path] = path
            named.add(os.path.basename(path))
    module = lambda path: re.sub(r"_internal$", "", SOURCE.sub("", path))
    reaches = {module(p): set() for p in layer_of}
    upward, spelled = [], []
    for path, layer in layer_of.items():
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for name in INCLUDE.findall(text):
            found = spelled_as.get(name)
            if found is None:
                if os.path.basename(name) in named:
                    spelled.append(f"{path} includes {name}")
                continue
            if layer_of[found] not in LAYERS[layer]:
                upward.append(f"{path} includes {name} ({layer_of[found]})")
                continue
            if module(found) != module(path):
                reaches[module(path)].add(module(found))
    circles = strongly_connected(reaches)
    for group in circles:
        print("circle: " + " -> ".join(sorted(group)))
    for line in upward:
        print("upward: " + line)
    for line in spelled:
        print("spelled: " + line + " (not its path)")
    print(f"{len(reaches)} modules, {len(circles)} circles, {len(upward)} upward includes, "
          f"{len(spelled)} includes not spelled as their path")
    return 1 if circles or upward or spelled else 0


def strongly_connected(graph):
    """Tarjan's algorithm, iterative: the groups of more than one node."""
    index, low, on, stack, groups, counter = {}, {}, set(), [], [], [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    top = stack.pop()
                    on.discard(top)
                    group.add(top)
                    if top == node:
                        break
                if len(group) > 1:
                    groups.append(group)
    return groups


if __name__ == "__main__":
    sys.exit(main())
