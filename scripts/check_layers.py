#!/usr/bin/env python3
"""Checks that no file includes a file of a higher layer (core/README.md, Layers).

The layers and the files in each are the table under "## Layers" in
core/README.md, bottom layer first: its first column names a layer, its
second lists glob patterns in backticks (`*` matches within one folder, `**`
across folders; a file belongs to the layer of the most specific pattern that
matches it, the one with the most literal characters). Every source file under
core/, app/, ui/ and tests/ must belong to a layer. Each `#include "..."` is
resolved from the repository root, then from the including file's folder;
includes of files outside those folders (generated files, system headers)
are not checked.

Prints every upward include and every file without a layer, then one line
with the count, and exits with status 1 when there is any.

    scripts/check_layers.py [ROOT]
"""
import argparse
import pathlib
import re
import sys

CHECKED = ("core", "app", "ui", "tests")
SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".c")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def glob_regex(pattern):
    """`**` crosses folders, `*` does not, `?` is one character."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def read_layers(readme):
    """[(layer name, [patterns])], bottom first, from the table under ## Layers."""
    text = readme.read_text(encoding="utf-8")
    section = re.search(r"^## Layers\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    if not section:
        raise SystemExit(f"{readme}: no '## Layers' section")
    layers = []
    for line in section.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not line.lstrip().startswith("|"):
            continue
        patterns = re.findall(r"`([^`]+)`", cells[1])
        if cells[0] in ("layer", "") or set(cells[0]) <= set("-: ") or not patterns:
            continue
        layers.append((cells[0], patterns))
    if not layers:
        raise SystemExit(f"{readme}: the Layers table has no rows")
    return layers


class LayerMap:
    def __init__(self, layers):
        self.names = [name for name, _ in layers]
        self.rules = []  # (specificity, regex, layer index, pattern)
        for index, (_, patterns) in enumerate(layers):
            for p in patterns:
                self.rules.append((len(p.replace("*", "").replace("?", "")), glob_regex(p), index, p))

    def layer_of(self, rel):
        """The layer index of a root-relative path, or None."""
        best = None
        for specificity, regex, index, _ in self.rules:
            if regex.match(rel) and (best is None or specificity > best[0]):
                best = (specificity, index)
        return None if best is None else best[1]


def source_files(root):
    for top in CHECKED:
        for path in sorted((root / top).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file():
                yield path


def resolve(root, path, name):
    for candidate in (root / name, path.parent / name):
        if candidate.is_file():
            rel = candidate.resolve().relative_to(root.resolve()).as_posix()
            return rel if rel.split("/")[0] in CHECKED else None
    return None


def check(root):
    """Returns (problems as lines, number of include lines checked)."""
    layers = LayerMap(read_layers(root / "core" / "README.md"))
    problems, checked = [], 0
    for path in source_files(root):
        rel = path.relative_to(root).as_posix()
        own = layers.layer_of(rel)
        if own is None:
            problems.append(f"{rel}: in no layer (add it to the Layers table of core/README.md)")
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in INCLUDE.finditer(text):
            target = resolve(root, path, match.group(1))
            if target is None:
                continue
            checked += 1
            theirs = layers.layer_of(target)
            if theirs is not None and theirs > own:
                line = text.count("\n", 0, match.start()) + 1
                problems.append(f"{rel}:{line}: includes {target}, of layer {layers.names[theirs]}, "
                                f"above its own layer {layers.names[own]}")
    return problems, checked


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", nargs="?", default=str(pathlib.Path(__file__).resolve().parent.parent))
    args = parser.parse_args()
    problems, checked = check(pathlib.Path(args.root))
    for p in problems:
        print(p)
    if problems:
        print(f"layers: {len(problems)} upward includes or files without a layer ({checked} includes checked)")
        return 1
    print(f"layers: no upward include ({checked} includes checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
