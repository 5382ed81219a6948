#!/usr/bin/env python3
"""includes.py [ROOT [BUILD]]: the graphs of allocbench's C sources, counted at two levels.

Module level, from the #include lines: a module is a source file, its header and its private
header (x.c, x.h and x_internal.h are one module, x); module a reaches b when a file of a
includes a header of b. Every include of a header of the tree is spelled as the header's path
from the repository's root ("kernels/base/units.h", "harness/run/engine.h", "tests/check.h"),
its own header included. The script prints
  circles   the strongly connected groups of more than one module (a reaches b and b reaches
            a, directly or through others), each with its modules;
  upward    the includes from a file of a layer to a header of a layer its library does not
            link (the layers of CMakeLists.txt, each folder one library);
  spelled   the includes of a header of the tree not spelled as its path.
An include that names no file of the tree (a system or generated header) is passed over.

File level, from the objects of the build in BUILD (when given): a file is a source file of
ROOT that the build compiled; file a reaches b when an object of a uses a symbol (nm -P: U)
that an object of b defines. A symbol defined by several files (each test's main, the test
plugins' hooks) names none of them and is passed over. The script prints
  circles   the strongly connected groups of more than one file.
Each level says what it counted. The script exits 1 when any count is not 0, or when BUILD
holds no object (a count of nothing would pass)."""
import collections
import os
import re
import subprocess
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
        print("circle of modules: " + " -> ".join(sorted(group)))
    for line in upward:
        print("upward: " + line)
    for line in spelled:
        print("spelled: " + line + " (not its path)")
    print(f"module level (#include lines): {len(reaches)} modules, {len(circles)} circles, {len(upward)} upward "
          f"includes, {len(spelled)} includes not spelled as their path")
    failed = bool(circles or upward or spelled)
    if len(sys.argv) > 2:
        failed |= file_level(root, sys.argv[2])
    else:
        print("file level (objects' symbols): not counted, no BUILD given")
    return 1 if failed else 0


def file_level(root, build):
    """The circles between files, from the symbols of the objects under build; whether any."""
    source_of = {}  # an object: the source file it was compiled from
    for folder, _, names in os.walk(build):
        for name in names:
            # CMake writes the object of SOURCE of the folder DIR as DIR/CMakeFiles/TARGET.dir/SOURCE.o.
            path = os.path.join(folder, name)
            found = re.match(r"(.*?)/?CMakeFiles/[^/]+\.dir/(.+)\.o$", os.path.relpath(path, build))
            source = found and os.path.normpath(os.path.join(found.group(1), found.group(2)))
            if source and os.path.isfile(os.path.join(root, source)):  # not CMake's probes, nor generated
                source_of[path] = source
    if not source_of:
        print(f"file level: no objects of the sources in {build}: build first")
        return True
    reaches = {source: set() for source in source_of.values()}
    defined, used = collections.defaultdict(set), collections.defaultdict(set)
    nm = subprocess.run(["nm", "-P", "-A"] + sorted(source_of), capture_output=True, text=True)
    for line in nm.stdout.splitlines():
        path, rest = line.split(": ", 1)  # -A: each symbol after its object's path
        symbol, kind = rest.split()[:2]
        if kind == "U":
            used[source_of[path]].add(symbol)
        elif kind.isupper():
            defined[symbol].add(source_of[path])
    for source, symbols in used.items():
        for symbol in symbols:
            if len(defined.get(symbol, ())) == 1 and source not in defined[symbol]:
                reaches[source] |= defined[symbol]
    circles = strongly_connected(reaches)
    for group in circles:
        print("circle of files: " + " -> ".join(sorted(group)))
    shared = sum(len(files) > 1 for files in defined.values())
    print(f"file level (nm -P of the objects in {build}): {len(reaches)} files, {len(circles)} circles "
          f"({shared} symbols defined by several files passed over)")
    return bool(circles)


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
