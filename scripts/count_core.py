#!/usr/bin/env python3
"""Counts the lines of the kernel-producing core, room by room (issue 48).

The set is the part that turns tensors into kernels: the tensor API and the
composite ops lowered through it, the graph and the scheduler, plans and their
replay with the tuner and the assembler, realize, and codegen. For each room
it prints its code lines (not blank, not only a comment) and its raw lines
(what `wc -l` counts), then the totals, so a before/after is reproducible:

    scripts/count_core.py [ROOT] [--files]

--files also prints each file. Headers and sources count alike; the READMEs
of the rooms do not.
"""
import argparse
import pathlib
import sys

# room -> glob patterns under core/ (the rooms of core/README.md's Layers)
ROOMS = [
    ("tensor", ["tensor.*", "tensor_movement.*", "tensor_nn.*", "tensor_internal.h",
                "tree_reduce.h", "depthwise.*", "jit.*"]),
    ("graph", ["ops.*", "dtype.*", "schedule.*"]),
    ("plan", ["replay.*", "tune.*", "assemble.*"]),
    ("realize", ["realize.*"]),
    ("codegen", ["codegen/*.cpp", "codegen/*.h"]),
]


def code_lines(text):
    """Lines holding something besides white space and comments. String
    literals are kept as code (a kernel's text in a raw string counts)."""
    count = 0
    in_block = False
    in_raw = None  # the closing delimiter of a raw string literal
    for line in text.split("\n"):
        has_code = False
        i, n = 0, len(line)
        while i < n:
            if in_raw is not None:
                has_code = True
                end = line.find(in_raw, i)
                if end < 0:
                    break
                i = end + len(in_raw)
                in_raw = None
                continue
            if in_block:
                end = line.find("*/", i)
                if end < 0:
                    break
                i = end + 2
                in_block = False
                continue
            c = line[i]
            if line.startswith("//", i):
                break
            if line.startswith("/*", i):
                in_block = True
                i += 2
                continue
            if line.startswith('R"', i) and (i == 0 or not (line[i - 1].isalnum() or line[i - 1] == "_")):
                paren = line.find("(", i + 2)
                if paren >= 0:
                    in_raw = ")" + line[i + 2:paren] + '"'
                    has_code = True
                    i = paren + 1
                    continue
            if c in "\"'":
                if c == "'" and i > 0 and line[i - 1].isalnum():  # 1'000'000
                    i += 1
                    continue
                has_code = True
                j = i + 1
                while j < n and line[j] != c:
                    j += 2 if line[j] == "\\" else 1
                i = j + 1
                continue
            if not c.isspace():
                has_code = True
            i += 1
        if has_code:
            count += 1
    return count


def raw_lines(text):
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", nargs="?", default=str(pathlib.Path(__file__).resolve().parent.parent))
    parser.add_argument("--files", action="store_true", help="also print each file")
    args = parser.parse_args()
    core = pathlib.Path(args.root) / "core"
    seen = set()
    total_code = total_raw = 0
    print(f"{'room':<10} {'files':>5} {'code':>6} {'raw':>6}")
    for room, patterns in ROOMS:
        paths = sorted({p for pattern in patterns for p in core.glob(pattern)
                        if p.suffix in (".cpp", ".h") and p not in seen})
        seen.update(paths)
        room_code = room_raw = 0
        rows = []
        for path in paths:
            text = path.read_text(encoding="utf-8", errors="replace")
            code, raw = code_lines(text), raw_lines(text)
            room_code += code
            room_raw += raw
            rows.append((path.relative_to(args.root), code, raw))
        print(f"{room:<10} {len(paths):>5} {room_code:>6} {room_raw:>6}")
        if args.files:
            for rel, code, raw in rows:
                print(f"  {str(rel):<36} {code:>6} {raw:>6}")
        total_code += room_code
        total_raw += room_raw
    print(f"{'total':<10} {len(seen):>5} {total_code:>6} {total_raw:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
