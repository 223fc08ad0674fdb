# SPDX-License-Identifier: Apache-2.0
"""scripts/layout_check.py: the folders' rules (issue 41), on a small tree
and on the real one."""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
spec = importlib.util.spec_from_file_location(
    "layout_check", os.path.join(ROOT, "scripts", "layout_check.py"))
layout = importlib.util.module_from_spec(spec)
spec.loader.exec_module(layout)


def tree(tmp_path, files):
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return str(tmp_path)


def small(tmp_path, extra):
    files = {"src/base/meson.build": "# may include: base\n",
             "src/base/b.h": "",
             "src/eng/meson.build": "# may include: base eng  (note)\n",
             "src/eng/e.h": "",
             "src/rd/meson.build": "# may include: base rd eng/e.h\n",
             "src/rd/r.h": "",
             "src/top.c": '#include "rd/r.h"\n#include "eng/e.h"\n'}
    files.update(extra)
    return tree(tmp_path, files)


def test_the_tree_keeps_its_rules():
    assert layout.check(ROOT) == []


def test_allowed_includes_pass(tmp_path):
    root = small(tmp_path, {"src/eng/e.c": '#include "base/b.h"\n#include "eng/e.h"\n'
                                           '#include "kvf_build.h"\n#include <stdio.h>\n',
                            "src/rd/r.c": '#include "eng/e.h"\n'})
    assert layout.check(root) == []


def test_a_forbidden_folder_names_file_line_and_rule(tmp_path):
    root = small(tmp_path, {"src/eng/e.c": '#include "base/b.h"\n\n#include "rd/r.h"\n'})
    assert layout.check(root) == [
        'src/eng/e.c:3: includes "rd/r.h": src/eng/ may include only base eng']


def test_one_header_allowed_is_not_its_folder(tmp_path):
    root = small(tmp_path, {"src/eng/x.h": "", "src/rd/r.c": '#include "eng/x.h"\n'})
    assert layout.check(root) == [
        'src/rd/r.c:1: includes "eng/x.h": src/rd/ may include only base eng/e.h rd']


def test_bare_and_missing_headers_and_unruled_folders(tmp_path):
    root = small(tmp_path, {"src/eng/e.c": '#include "e.h"\n#include "base/gone.h"\n',
                            "src/new/n.c": "",
                            "tests/unit/old/test_o.c": ""})
    assert layout.check(root) == [
        'src/eng/e.c:1: includes "e.h": a library header is named "folder/x.h"',
        'src/eng/e.c:2: includes "base/gone.h", which is not in src/',
        "src/new/: no meson.build with its rule",
        "tests/unit/old/: no src/old/ for it to mirror"]
