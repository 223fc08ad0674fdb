# SPDX-License-Identifier: Apache-2.0
"""python/kvferry/_kvferry.pyi, the extension's type stubs, holds (issue 25):
mypy's stubtest finds every name, method and argument of the built module in
the stubs and nothing else, and mypy checks the binding's tests against them
(a call with a wrong name, argument or type fails), and mypy checks the
whole package, kvferry.sglang and kvferry.vllm included. Needs python3-mypy;
a failure under CI=true when it is missing, a skip otherwise."""
import ast
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# the tests of the binding itself (the backends' tests drive SGLang and vLLM
# through fakes mypy cannot follow; the backends are checked as the package)
BINDING_TESTS = ["test_binding.py", "test_fan.py", "test_leaks.py", "test_misuse.py",
                 "test_regions.py", "test_wait.py"]


def _mypy(*args, env=None):
    try:
        import mypy  # noqa: F401
    except ImportError:
        if os.environ.get("CI") in ("true", "1", "yes"):
            pytest.fail("python3-mypy is not installed (scripts/lib.sh KVF_PKGS_BUILD)")
        pytest.skip("python3-mypy is not installed")
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=600)


def _env(tmp_path):
    env = dict(os.environ)
    env["MYPYPATH"] = os.path.join(ROOT, "python")  # the stubs, beside the sources
    env["MYPY_CACHE_DIR"] = str(tmp_path / "cache")
    return env


def test_stubs_match_the_built_module(tmp_path):
    import kvferry._kvferry as ext  # the built one, from PYTHONPATH

    env = _env(tmp_path)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(ext.__file__))
    r = _mypy("mypy.stubtest", "kvferry._kvferry", env=env)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_whole_package_type_checks(tmp_path):
    """python/kvferry, every module: the binding's users (kvferry.sglang,
    kvferry.vllm, kvferry.ranks) against the stubs, SGLang's and vLLM's
    types where they are installed."""
    r = _mypy("mypy", "--check-untyped-defs", "--ignore-missing-imports",
              "--follow-imports=silent", "-p", "kvferry", env=_env(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_binding_tests_type_check_against_the_stubs(tmp_path):
    files = [os.path.join("tests", "python", f) for f in BINDING_TESTS]
    r = _mypy("mypy", "--check-untyped-defs", "--ignore-missing-imports",
              "--follow-imports=silent", *files, env=_env(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr


def _stats_list():
    """[(name, is_array)] of KVF_STATS_FIELDS, the one list of kvf_stats'
    fields (include/kvferry/stats.h), in its order."""
    text = open(os.path.join(ROOT, "include", "kvferry", "stats.h")).read()
    body = text.split("#define KVF_STATS_FIELDS(N, A)", 1)[1]
    body = body.split("\n\n", 1)[0]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return [(m.group(2), m.group(1) == "A") for m in re.finditer(r"\b([NA])\((\w+),", body)]


def _stub_stats():
    """The Stats class of the stubs: its __match_args__ and its properties'
    return annotations, in order."""
    tree = ast.parse(open(os.path.join(ROOT, "python", "kvferry", "_kvferry.pyi")).read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Stats")
    match = next(ast.literal_eval(a.value) for n in ast.walk(cls)
                 if isinstance(n, ast.AnnAssign) for a in [n]
                 if isinstance(a.target, ast.Name) and a.target.id == "__match_args__")
    props = [(f.name, ast.unparse(f.returns)) for f in cls.body
             if isinstance(f, ast.FunctionDef)]
    return list(match), props


def test_the_stats_stub_follows_the_one_list():
    """kvferry.Stats and its stub are KVF_STATS_FIELDS, field for field: a
    count an int, an array a Dict[str, int] (no mypy needed)."""
    import kvferry._kvferry as ext

    fields = _stats_list()
    names = [n for n, _ in fields]
    assert len(names) > 40 and len(set(names)) == len(names), names
    assert list(ext.Stats.__match_args__) == names
    match, props = _stub_stats()
    assert match == names, "the stub's Stats.__match_args__ is not KVF_STATS_FIELDS"
    want = [(n, "Dict[str, int]" if a else "int") for n, a in fields]
    assert props == want, "the stub's Stats properties are not KVF_STATS_FIELDS"
