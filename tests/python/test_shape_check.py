# SPDX-License-Identifier: Apache-2.0
"""scripts/shape_check.py: what it counts and how the allow list ratchets."""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "shape_check", os.path.join(HERE, "..", "..", "scripts", "shape_check.py"))
shape = importlib.util.module_from_spec(spec)
spec.loader.exec_module(shape)


def c_function(name, body_lines):
    return f"static int\n{name}(int a,\n\tint b)\n{{\n" + "\tx();\n" * body_lines + "}\n"


def tree(tmp_path, files):
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return str(tmp_path)


def test_counts_c_functions_from_signature_to_brace():
    lines = c_function("f", 10).splitlines(keepends=True)
    assert shape.c_functions(lines) == [("f", 1, 15)]  # type line to "}"


def test_data_initialiser_is_not_a_function():
    lines = "static const int t[] =\n{\n\t1,\n};\n".splitlines(keepends=True)
    assert shape.c_functions(lines) == []


def test_long_function_and_file_found(tmp_path):
    root = tree(tmp_path, {"src/a.c": c_function("big", 70), "src/b.h": "x;\n" * 701,
                           "tests/c.c": c_function("exempt", 200)})
    keys = sorted(k for k, _, _ in shape.check(root, 700, 60))
    assert keys == ["src/a.c:big", "src/b.h"]


def test_python_def_length(tmp_path):
    root = tree(tmp_path, {"python/m.py": "def f():\n" + "    x = 1\n" * 61})
    assert [(k, n) for k, n, _ in shape.check(root, 700, 60)] == [("python/m.py:f", 62)]


def test_allow_list_passes_known_and_fails_new_grown_fixed():
    bad = [("src/a.c:big", 70, "a"), ("src/b.h", 800, "b")]
    assert shape.judge(bad, {"src/a.c:big": 70, "src/b.h": 800})[1]
    assert shape.judge(bad, {"src/a.c:big": 75, "src/b.h": 900})[1]
    out, ok = shape.judge(bad, {"src/a.c:big": 70})
    assert not ok and out[1].startswith("NEW")
    out, ok = shape.judge(bad, {"src/a.c:big": 69, "src/b.h": 800})
    assert not ok and out[0].startswith("GREW")
    out, ok = shape.judge(bad, {"src/a.c:big": 70, "src/b.h": 800, "src/gone.c": 900})
    assert not ok and out[-1].startswith("FIXED src/gone.c")


def test_the_tree_passes_its_allow_list():
    root = os.path.join(HERE, "..", "..")
    bad = shape.check(root, 700, 60)
    allow = shape.read_allow(os.path.join(root, "scripts", "shape_allow.txt"))
    out, ok = shape.judge(bad, allow)
    assert ok, "\n".join(out)
