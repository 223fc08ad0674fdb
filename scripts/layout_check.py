#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The library's folders and their rules (issue 41; docs/design.md "The tree").

    scripts/layout_check.py [ROOT]

Each folder src/F/ names what its files may include in its meson.build:

    # may include: base config engine/transport.h

a word is a folder (any header of it) or one header (folder/x.h). A file
of src/F/ includes a library header as "folder/x.h" (resolved from src/,
the build's include directory), never by a bare or relative name, and only
from its own rule; the files at src/ itself (open.c) may include every
folder. kvf_build.h (generated) and <...> headers are free. The unit tests
mirror the folders: tests/unit/F/ needs src/F/.

Prints one line per violation (file:line: what, and the rule) and exits 1
if there is any.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
RULE = re.compile(r"^#\s*may include:\s*(.*?)(?:\s+\(.*)?$", re.M)
FREE = {"kvf_build.h"}


def rules(src):
    out = {}
    for f in sorted(os.listdir(src)):
        build = os.path.join(src, f, "meson.build")
        if not os.path.isfile(build):
            continue
        with open(build, encoding="utf-8") as fp:
            m = RULE.search(fp.read())
        out[f] = set(m.group(1).split()) if m else None
    return out


def judge(folder, inc, allowed, src):
    """Why including inc from folder breaks the rules, or None."""
    if inc in FREE:
        return None
    if "/" not in inc or inc.startswith("."):
        return 'includes "%s": a library header is named "folder/x.h"' % inc
    if not os.path.isfile(os.path.join(src, inc)):
        return 'includes "%s", which is not in src/' % inc
    if folder is None:  # src/ itself: the file above the folders
        return None
    if inc.split("/")[0] in allowed or inc in allowed:
        return None
    return 'includes "%s": src/%s/ may include only %s' % (inc, folder, " ".join(sorted(allowed)))


def check_file(path, rel, folder, allowed, src):
    bad = []
    with open(path, encoding="utf-8") as fp:
        for n, line in enumerate(fp, 1):
            m = INCLUDE.match(line)
            why = m and judge(folder, m.group(1), allowed, src)
            if why:
                bad.append("%s:%d: %s" % (rel, n, why))
    return bad


def check(root):
    src = os.path.join(root, "src")
    table = rules(src)
    bad = ["src/%s/meson.build: no '# may include:' line" % f for f, r in table.items() if r is None]
    for dirpath, dirnames, files in os.walk(src):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, src)
        folder = None if rel_dir == "." else rel_dir.split(os.sep)[0]
        if folder is not None and folder not in table:
            bad.append("src/%s/: no meson.build with its rule" % rel_dir)
            continue
        allowed = (table.get(folder) or set()) | ({folder} if folder else set())
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                path = os.path.join(dirpath, f)
                bad += check_file(path, os.path.relpath(path, root), folder, allowed, src)
    tests = os.path.join(root, "tests", "unit")
    for f in sorted(os.listdir(tests)) if os.path.isdir(tests) else []:
        if os.path.isdir(os.path.join(tests, f)) and f not in table and not f.startswith((".", "__")):
            bad.append("tests/unit/%s/: no src/%s/ for it to mirror" % (f, f))
    return bad


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    bad = check(root)
    for line in bad:
        print(line)
    if bad:
        print("layout: %d violation(s) of the folders' rules (docs/design.md, The tree)" % len(bad))
        return 1
    print("layout: ok (%d folders)" % len(rules(os.path.join(root, "src"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
