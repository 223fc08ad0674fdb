#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The tree's shape (issue 25): no source file over 700 lines and no
function over 60, in src, include, python and tools (tests are exempt:
a scenario table or a harness reads best whole).

    scripts/shape_check.py [--max-file N] [--max-function N] [ROOT]

C: a function is a definition whose body opens with "{" at column 0 and
closes with "}" at column 0 (the tree's style; a "{" at column 0 that does
not follow a ")" line is a data initialiser and not counted); its length
is from the signature's first line (the return type) to the closing brace.
Python: every def (ast), end_lineno - lineno + 1.
Prints one line per violation and exits 1 if there is any.

--allow FILE (what CI runs, scripts/shape_allow.txt): the violations the
tree still has, each "PATH SIZE" or "PATH:FUNCTION SIZE", are known and
pass at that size or less; a new one, one that grew, or an entry that no
longer applies (fixed: take it out) fails. The list only shrinks.
"""
import argparse
import ast
import os
import sys

DIRS = ("src", "include", "python", "tools")
SUFFIXES = (".c", ".h", ".py")


def c_functions(lines):
    """(name, first line, length) of each function definition."""
    out = []
    for i, line in enumerate(lines):
        if line.rstrip("\n") != "{" or i == 0 or not lines[i - 1].rstrip().endswith(")"):
            continue
        start = i - 1  # the signature may span lines: walk back to its first
        while start > 0 and lines[start - 1].strip() and not lines[start - 1].rstrip().endswith((";", "}", "*/")) \
                and not lines[start - 1].startswith(("#", "/*", " *")):
            start -= 1
        end = i + 1
        while end < len(lines) and not lines[end].startswith("}"):
            end += 1
        sig = "".join(lines[start:i]).split("(")[0].split()
        out.append((sig[-1].lstrip("*") if sig else "?", start + 1, end - start + 1))
    return out


def py_functions(text, path):
    tree = ast.parse(text, path)
    return [(n.name, n.lineno, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def check(root, max_file, max_function):
    bad = []
    for d in DIRS:
        for dirpath, dirnames, files in os.walk(os.path.join(root, d)):
            dirnames[:] = sorted(x for x in dirnames if not x.startswith((".", "__")))
            for f in sorted(files):
                if not f.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                lines = text.splitlines(keepends=True)
                if len(lines) > max_file:
                    bad.append((rel, len(lines), f"{rel}: {len(lines)} lines (at most {max_file})"))
                funcs = py_functions(text, path) if f.endswith(".py") else c_functions(lines)
                for name, at, n in funcs:
                    if n > max_function:
                        bad.append((f"{rel}:{name}", n,
                                    f"{rel}:{at}: {name}() {n} lines (at most {max_function})"))
    return bad


def read_allow(path):
    """{key: size} from "KEY SIZE" lines; # starts a comment."""
    allow = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.split("#")[0].split()
            if line:
                allow[line[0]] = int(line[1])
    return allow


def judge(bad, allow):
    """Lines to print and whether the tree passes against the allow list."""
    out, ok, seen = [], True, set()
    for key, size, msg in bad:
        seen.add(key)
        if key not in allow:
            out.append(f"NEW {msg}")
            ok = False
        elif size > allow[key]:
            out.append(f"GREW {msg} (allowed {allow[key]})")
            ok = False
        else:
            out.append(f"known {msg}")
    for key in sorted(set(allow) - seen):
        out.append(f"FIXED {key}: within the limits now; take it out of the allow list")
        ok = False
    return out, ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--max-file", type=int, default=700)
    p.add_argument("--max-function", type=int, default=60)
    p.add_argument("--allow", metavar="FILE", help="known violations (see above)")
    p.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), ".."))
    a = p.parse_args()
    bad = check(a.root, a.max_file, a.max_function)
    lines, ok = judge(bad, read_allow(a.allow) if a.allow else {})
    for line in lines:
        print(line)
    print(f"shape: {len(bad)} over the limits (files {a.max_file} lines, functions {a.max_function})"
          + (f", {len(read_allow(a.allow))} allowed" if a.allow else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
