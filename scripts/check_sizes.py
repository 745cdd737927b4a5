#!/usr/bin/env python3
"""Checks the size rules of core/ (DESIGN.md: short files with one purpose).

Prints every source file under core/ longer than 800 lines and every function
longer than 120 lines, and exits with status 1 when there is any.

    scripts/check_sizes.py [ROOT] [--max-file N] [--max-function N]

Functions are found with a brace-matching heuristic, not a C++ parser:
comments, string and character literals and preprocessor lines are blanked
out, then a `{` opened directly inside a namespace, class, struct, union or
extern block, whose header (the text since the previous `;`, `{` or `}`)
holds a `(`, starts a function body (braces inside parentheses, such as a
default argument `= {}`, are skipped). Its length runs from the first line of
the header to the line of the matching `}`. Lambdas and local classes count
toward the function that contains them.
"""
import argparse
import pathlib
import re
import sys

SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b|\bextern\s*$")


def blank_out(text):
    """Replaces comments, literals and preprocessor lines by spaces, keeping
    every newline so line numbers survive."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":
            # a preprocessor line, with its backslash continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        if c == "\n":
            out.append(c)
            line_start = True
            i += 1
            continue
        if c in " \t":
            out.append(c)
            i += 1
            continue
        line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:end]))
            i = end
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            paren = text.find("(", i + 2)
            delim = ")" + text[i + 2:paren] + '"'
            end = text.find(delim, paren)
            end = n if end < 0 else end + len(delim)
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:end]))
            i = end
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 1'000'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(text):
    """Yields (name, first line, last line) of every function body."""
    code = blank_out(text)
    # stack of (kind, header start offset): kind is "scope", "function" or "other"
    stack = []
    header_start = 0
    parens = 0  # braces inside parentheses are initializers: f(std::vector<int> v = {})
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c == "(":
            parens += 1
        elif c == ")":
            parens = max(0, parens - 1)
        elif parens > 0 and c in "{}":
            pass
        elif c == "{":
            inside_function = any(kind == "function" for kind, _ in stack)
            header = code[header_start:i]
            if inside_function:
                kind = "other"
            elif SCOPE.search(header.split("(")[0]):
                kind = "scope"
            elif "(" in header:
                kind = "function"
            else:
                kind = "other"  # an initializer list, an array, ...
            stack.append((kind, header_start))
            header_start = i + 1
        elif c == "}":
            if stack:
                kind, start = stack.pop()
                if kind == "function":
                    header = code[start:code.index("{", start)]
                    first = start + len(header) - len(header.lstrip())
                    name = re.findall(r"((?:[\w:]*operator\s*[^\s(]+)|[~\w:]+)\s*\(", header)
                    yield (name[0] if name else "?", code.count("\n", 0, first) + 1, code.count("\n", 0, i) + 1)
            header_start = i + 1
        elif c == ";":
            header_start = i + 1
        elif c == ":" and i + 1 < n and code[i + 1] != ":" and (i == 0 or code[i - 1] != ":"):
            # `public:` and friends end a header; a constructor's initializer
            # list is kept (its header already holds a parenthesis)
            if re.search(r"\b(public|private|protected)\s*$", code[header_start:i]):
                header_start = i + 1
        i += 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", nargs="?", default=str(pathlib.Path(__file__).resolve().parent.parent))
    parser.add_argument("--max-file", type=int, default=800)
    parser.add_argument("--max-function", type=int, default=120)
    args = parser.parse_args()
    core = pathlib.Path(args.root) / "core"
    problems = 0
    for path in sorted(core.rglob("*")):
        if path.suffix not in (".cpp", ".h", ".hpp", ".cc"):
            continue
        rel = path.relative_to(args.root)
        text = path.read_text(encoding="utf-8", errors="replace")
        lines = text.count("\n") + (0 if text.endswith("\n") else 1)
        if lines > args.max_file:
            print(f"{rel}: {lines} lines (file limit {args.max_file})")
            problems += 1
        for name, first, last in functions(text):
            length = last - first + 1
            if length > args.max_function:
                print(f"{rel}:{first}: {name}: {length} lines (function limit {args.max_function})")
                problems += 1
    if problems:
        print(f"{problems} over the limits")
        return 1
    print("core/: every file and function within the limits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
