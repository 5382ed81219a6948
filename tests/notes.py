#!/usr/bin/env python3
"""notes.py [ROOT]: every Note reference of the tree resolves.

A Note is a piece of reasoning written once, where the code that relies on it lives, and
named so that other places can point at it. Its definition opens a comment or a paragraph of
one with its name, alone or followed by a colon ("/* Note [Size bins]", " * Note [Cap map]:
...", "# Note [X]" after an empty comment line); every other mention of "Note [NAME]" is a
reference. The script prints
  broken      names split across two lines (a search for the name misses them);
  undefined   references to a name no definition has;
  twice       names defined more than once;
and exits 1 when any count is not 0 (77, skipped, outside a git checkout). It reads the tracked
source and text files (git ls-files)."""
import collections
import os
import re
import subprocess
import sys

TEXT = (".c", ".h", ".cu", ".cc", ".cpp", ".py", ".sh", ".md", ".txt", ".cmake", ".gp", "Makefile")
DEFINITION = re.compile(r"^\s*(?:/\*+|\*|#|//)\s*Note \[([^\]]+)\](?::|\s*$)")
NONEMPTY = re.compile(r"^\s*(?:/\*|\*|#|//)\s*\S")  # a comment's line with words on it
MENTION = re.compile(r"Note \[([^\]]*)(\]?)")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    try:
        listed = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        print(f"skipped: {root} is not a git checkout (the files read are the tracked ones)")
        return 77
    defined, referenced, broken = collections.defaultdict(list), collections.defaultdict(list), []
    for path in listed.stdout.split("\n"):
        # This file's own examples name no Note.
        if not path.endswith(TEXT) or path == "tests/notes.py" or not os.path.isfile(os.path.join(root, path)):
            continue
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        for number, line in enumerate(lines, 1):
            where = f"{path}:{number}"
            before = lines[number - 2] if number > 1 else ""
            opens = line.lstrip().startswith("/*") or not NONEMPTY.match(before) or before.rstrip().endswith("*/")
            definition = DEFINITION.match(line) if opens else None
            if definition:
                defined[definition.group(1)].append(where)
            for mention in MENTION.finditer(line):
                if not mention.group(2):
                    broken.append(f"{where}: {line.strip()}")
                elif not (definition and mention.start() == line.index("Note [")):
                    referenced[mention.group(1)].append(where)
    undefined = {name: at for name, at in referenced.items() if name not in defined}
    twice = {name: at for name, at in defined.items() if len(at) > 1}
    for line in broken:
        print("broken: " + line)
    for name, at in sorted(undefined.items()):
        print(f"undefined: Note [{name}] at {', '.join(at)}")
    for name, at in sorted(twice.items()):
        print(f"twice: Note [{name}] at {', '.join(at)}")
    print(f"{len(defined)} Notes, {sum(map(len, referenced.values()))} references, {len(broken)} broken, "
          f"{len(undefined)} undefined, {len(twice)} defined twice")
    return 1 if broken or undefined or twice else 0


if __name__ == "__main__":
    sys.exit(main())
