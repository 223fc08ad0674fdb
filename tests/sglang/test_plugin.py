# SPDX-License-Identifier: Apache-2.0
"""The plugin route (docs/sglang-plugin.md): SGLang's own load_plugins()
finds kvferry's entry point (as pyproject.toml declares it) and, with no patch,
SGLang lists, parses and builds the kvferry backend: the CLI choice, the
TransferBackend member, get_kv_class through every module that imported it,
and progress() once per scheduler iteration. In a subprocess: the plugin
changes SGLang's enum for the whole process. The transfer itself through this
route runs on soft-RoCE (tests/rxe/scenarios/sglang_real.sh, shape plugin)."""
import os
import subprocess
import sys
from pathlib import Path

import harness as H

REPO = Path(__file__).resolve().parents[2]

PROBE = r'''
import sglang.srt.managers.scheduler as sch  # run_scheduler_process imports it first
from sglang.srt.plugins import load_plugins
from sglang.srt.disaggregation import decode, prefill, utils
load_plugins()
import kvferry.sglang as ks
from kvferry.sglang import plugin

tb = utils.TransferBackend("kvferry")
assert tb is utils.TransferBackend.KVFERRY, tb
assert [m.name for m in utils.TransferBackend][-1] == "KVFERRY"
K = utils.KVClassType
want = {K.MANAGER: ks.KVManager, K.SENDER: ks.KVSender, K.RECEIVER: ks.KVReceiver,
        K.BOOTSTRAP_SERVER: ks.KVBootstrapServer}
for mod in (utils, prefill, decode):  # prefill and decode imported it before the plugin
    for k, cls in want.items():
        assert mod.get_kv_class(tb, k) is cls, (mod.__name__, k)
assert utils.get_kv_class(utils.TransferBackend.FAKE, K.MANAGER).__name__ == "FakeKVManager"

from sglang.srt.server_args import prepare_server_args
sa = prepare_server_args(["--model-path", "dummy", "--disaggregation-mode", "prefill",
                          "--disaggregation-transfer-backend", "kvferry"])
assert sa.disaggregation_transfer_backend == "kvferry"

class Manager:
    calls = 0
    def progress(self):
        Manager.calls += 1

class Queue:
    kv_manager = Manager()

class Sched(sch.Scheduler):  # SGLang's process_input_requests, hooked
    def __init__(self, backend):
        self.server_args = sa if backend == "kvferry" else prepare_server_args(
            ["--model-path", "dummy"])
        self.disagg_prefill_bootstrap_queue = Queue()

for backend, calls in (("kvferry", 3), ("mooncake", 0)):
    Manager.calls = 0
    s = Sched(backend)
    for _ in range(3):
        plugin._progress_after_input(None, s)
    assert Manager.calls == calls, (backend, Manager.calls)
hooked = sch.Scheduler.process_input_requests
assert hooked is not sch.Scheduler.__dict__.get("_kvf_original"), hooked
print("ok", [m.name for m in utils.TransferBackend])
'''


def test_load_plugins_lists_and_builds_kvferry(tmp_path):
    assert H.missing_reason() is None, H.missing_reason()
    env = dict(os.environ)
    paths = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(H.plugin_dist_info(tmp_path)), *paths])
    env.pop("SGLANG_PLUGINS", None)
    r = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr[-4000:]
    assert "KVFERRY" in r.stdout
