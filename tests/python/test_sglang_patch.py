# SPDX-License-Identifier: Apache-2.0
"""docs/sglang-backend.patch against SGLang's pinned release: it applies with
`git apply` (and reverses), and the patched files do what docs/sglang.md says,
read with ast (no import of SGLang: this suite stays light).

The files: the installed sglang package's (tests/requirements.txt pins the
release); the patch's paths are SGLang's source tree's (python/sglang/...).
Only the files the patch names are copied, to a scratch directory. No
SGLang, or no git: a skip that says why, a failure with CI=true."""
import ast
import os
import pathlib
import re
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PATCH = REPO / "docs" / "sglang-backend.patch"
SRT = "python/sglang/srt/"


def _unavailable(why):
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{why} (CI=true: a test that cannot run is a failure)")
    pytest.skip(why)


def _tree() -> pathlib.Path:
    """The directory the patch's paths start at: python/ of SGLang's source
    tree is the directory holding the installed sglang package."""
    from importlib import metadata
    try:  # by its metadata: conftest hides the module from this suite's imports
        pkg = pathlib.Path(metadata.distribution("sglang").locate_file("sglang"))
    except metadata.PackageNotFoundError:
        pkg = None
    if pkg is None or not (pkg / "srt" / "disaggregation" / "utils.py").is_file():
        _unavailable("sglang is not installed in this Python (scripts/test.sh installs "
                     "tests/requirements.txt into KVF_VENV)")
    if shutil.which("git") is None:
        _unavailable("git is not installed (apt-get install git)")
    return pkg.resolve().parent


def _patched_paths():
    return re.findall(r"^diff --git a/(\S+) b/\1$", PATCH.read_text(), re.M)


def _git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def patched(tmp_path_factory):
    """A scratch copy of the files the patch names, the patch applied."""
    tree = _tree()
    work = tmp_path_factory.mktemp("sglang")
    # its own repository: git apply takes the paths from its top, whatever
    # repository the scratch directory might sit in
    assert _git(work, "init", "-q").returncode == 0
    for rel in _patched_paths():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tree / pathlib.Path(rel).relative_to("python"), work / rel)
    check = _git(work, "apply", "--check", "--whitespace=error", "-v", str(PATCH))
    assert check.returncode == 0, f"git apply --check:\n{check.stdout}{check.stderr}"
    done = _git(work, "apply", "--whitespace=error", str(PATCH))
    assert done.returncode == 0, f"git apply:\n{done.stdout}{done.stderr}"
    return work


def _module(work, name) -> ast.Module:
    return ast.parse((work / SRT / name).read_text(), filename=name)


def _node(tree, *names):
    """The class or function at the dotted path names."""
    node = tree
    for name in names:
        node = next(n for n in ast.iter_child_nodes(node)
                    if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name)
    return node


def _calls(node, name):
    """Calls of name (a function or a method), in source order."""
    out = [n for n in ast.walk(node) if isinstance(n, ast.Call)
           and ((isinstance(n.func, ast.Name) and n.func.id == name)
                or (isinstance(n.func, ast.Attribute) and n.func.attr == name))]
    return sorted(out, key=lambda n: (n.lineno, n.col_offset))


def _is_getattr(node, attr, default):
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "getattr" and len(node.args) == 3
            and isinstance(node.args[1], ast.Constant) and node.args[1].value == attr
            and isinstance(node.args[2], ast.Constant) and node.args[2].value is default)


def test_names_the_pinned_release_and_sglang_files():
    from importlib.metadata import version
    paths = _patched_paths()
    assert paths and all(p.startswith(SRT) for p in paths), paths
    assert f"{SRT}disaggregation/utils.py" in paths and f"{SRT}server_args.py" in paths
    header = PATCH.read_text().split("diff --git")[0]
    assert f"sglang {version('sglang')}" in header, \
        f"the patch's header does not name the installed release (sglang {version('sglang')})"


def test_reverses_cleanly(patched):
    r = _git(patched, "apply", "-R", "--check", str(PATCH))
    assert r.returncode == 0, r.stderr


def test_transfer_backend_and_get_kv_class(patched):
    utils = _module(patched, "disaggregation/utils.py")
    members = {t.id: s.value.value for s in _node(utils, "TransferBackend").body
               if isinstance(s, ast.Assign) for t in s.targets}
    assert members.get("KVFERRY") == "kvferry"

    # the get_kv_class with a body (the others are @overload stubs)
    fn = [n for n in utils.body if isinstance(n, ast.FunctionDef)
          and n.name == "get_kv_class" and not n.decorator_list][-1]
    branch = next(n for n in ast.walk(fn) if isinstance(n, ast.If)
                  and ast.unparse(n.test) == "transfer_backend == TransferBackend.KVFERRY")
    imports = {(n.module, a.name) for n in ast.walk(ast.Module(branch.body, []))
               if isinstance(n, ast.ImportFrom) for a in n.names}
    assert ("sglang.srt.disaggregation.base", "KVArgs") in imports
    for cls in ("KVManager", "KVSender", "KVReceiver", "KVBootstrapServer"):
        assert ("kvferry.sglang", cls) in imports, cls
    mapping = next(n for n in ast.walk(ast.Module(branch.body, []))
                   if isinstance(n, ast.Dict))
    assert {ast.unparse(k): ast.unparse(v) for k, v in zip(mapping.keys, mapping.values)} == {
        "KVClassType.KVARGS": "KVArgs",
        "KVClassType.MANAGER": "KVManager",
        "KVClassType.SENDER": "KVSender",
        "KVClassType.RECEIVER": "KVReceiver",
        "KVClassType.BOOTSTRAP_SERVER": "KVBootstrapServer",
    }
    assert isinstance(branch.body[-1], ast.Return)


def test_cli_choice(patched):
    sa = _module(patched, "server_args.py")
    choices = next(n.value for n in sa.body if isinstance(n, ast.Assign)
                   and [ast.unparse(t) for t in n.targets] == ["DISAGG_TRANSFER_BACKEND_CHOICES"])
    assert "kvferry" in ast.literal_eval(choices)


# (file, class, loop, the first call that polls a disaggregation queue)
LOOPS = [
    ("disaggregation/prefill.py", "SchedulerDisaggregationPrefillMixin",
     "event_loop_normal_disagg_prefill", "pop_bootstrapped"),
    ("disaggregation/prefill.py", "SchedulerDisaggregationPrefillMixin",
     "event_loop_overlap_disagg_prefill", "pop_bootstrapped"),
    ("disaggregation/decode.py", "SchedulerDisaggregationDecodeMixin",
     "event_loop_normal_disagg_decode", "process_decode_queue"),
    ("disaggregation/decode.py", "SchedulerDisaggregationDecodeMixin",
     "event_loop_overlap_disagg_decode", "process_decode_queue"),
    ("managers/scheduler_pp_mixin.py", "SchedulerPPMixin",
     "event_loop_pp_disagg_prefill", "_pp_pd_get_bootstrapped_ids"),
    ("managers/scheduler_pp_mixin.py", "SchedulerPPMixin",
     "event_loop_pp_disagg_decode", "_pp_pd_get_retract_ids"),
]


@pytest.mark.parametrize("path,cls,loop,poll", LOOPS, ids=[l[2] for l in LOOPS])
def test_progress_once_per_iteration(patched, path, cls, loop, poll):
    fn = _node(_module(patched, path), cls, loop)
    # kv_progress = getattr(<queue>.kv_manager, "progress", None), before the loop
    guard = next(n for n in fn.body if isinstance(n, ast.Assign)
                 and _is_getattr(n.value, "progress", None))
    assert ast.unparse(guard.value.args[0]).endswith(".kv_manager")
    while_ = next(n for n in fn.body if isinstance(n, ast.While))
    assert guard.lineno < while_.lineno
    # in the loop: `if kv_progress is not None: kv_progress()`, once, after the
    # requests are received and before the queue is polled
    calls = _calls(while_, "kv_progress")
    assert len(calls) == 1
    received = _calls(while_, "process_input_requests")[0]
    polled = _calls(while_, poll)[0]
    assert received.lineno < calls[0].lineno < polled.lineno
    ifs = [n for n in ast.walk(while_) if isinstance(n, ast.If)
           and ast.unparse(n.test) == "kv_progress is not None"]
    assert len(ifs) == 1 and ast.unparse(ifs[0].body[0]) == "kv_progress()"


def test_failed_transfer_defers_its_release(patched):
    decode = _module(patched, "disaggregation/decode.py")
    pop = _node(decode, "DecodeTransferQueue", "pop_transferred")
    # the receiver is cleared first; its memory is released only without
    # pages_deferred
    guard = next(n for n in ast.walk(pop) if isinstance(n, ast.If)
                 and _is_getattr(n.test, "pages_deferred", False))
    assert _calls(ast.Module(guard.orelse, []), "release_kv_cache")
    assert not _calls(ast.Module(guard.body, []), "release_kv_cache")
    cleared = [c for c in _calls(pop, "clear") if c.lineno < guard.lineno]
    assert cleared and ast.unparse(cleared[-1].func) == "decode_req.kv_receiver.clear"
    # nor its metadata row, in the loop at the end of pop_transferred
    loop = next(n for n in ast.walk(pop) if isinstance(n, ast.For)
                and ast.unparse(n.iter) == "indices_to_remove")
    free = _calls(loop, "free")[0]
    assert ast.unparse(free.func) == "self.req_to_metadata_buffer_idx_allocator.free"
    skip = [n for n in loop.body if isinstance(n, ast.If)
            and ast.unparse(n.test) == "self.queue[i].pages_deferred"]
    assert len(skip) == 1 and isinstance(skip[0].body[0], ast.Continue)
    assert skip[0].lineno < free.lineno

    # the hook frees all three later: pages and state (release_kv_cache), the
    # metadata row (the allocator)
    hook = _node(decode, "DecodeTransferQueue", "release_deferred")
    assert _calls(hook, "release_kv_cache")
    assert [ast.unparse(c.func) for c in _calls(hook, "free")] == [
        "self.req_to_metadata_buffer_idx_allocator.free"]
    # registered once, where the manager is built
    init = _node(decode, "DecodePreallocQueue", "__init__")
    sets = [ast.unparse(n) for n in ast.walk(init) if isinstance(n, ast.Assign)
            and ast.unparse(n.targets[0]) == "self.kv_manager.page_release_hook"]
    assert sets == ["self.kv_manager.page_release_hook = "
                    "self.transfer_queue.release_deferred"]

    # a scheduler with such a request waiting is not idle: no idle leak check
    idle = _node(_module(patched, "managers/scheduler.py"), "Scheduler", "is_fully_idle")
    assert "self.disagg_decode_transfer_queue.deferred" in ast.unparse(idle)
