# SPDX-License-Identifier: Apache-2.0
"""kvferry.sglang without RDMA: the interface SGLang calls, the bootstrap
server, the overrides from SGLang's environment, and the refusals. The
transfers themselves run on rxe (tests/rxe/python_sglang.py)."""
import json
import urllib.error
import urllib.request

import numpy as np
import pytest

import kvferry
from kvferry import sglang as ks

PAGES, PAGE_BYTES, NBUF = 32, 256, 4


class Args(ks.KVArgs):
    def __init__(self, rank=0, aux=True, state=True):
        self.bufs = [np.zeros(PAGES * PAGE_BYTES, dtype=np.uint8) for _ in range(NBUF)]
        self.engine_rank = rank
        self.kv_data_ptrs = [b.ctypes.data for b in self.bufs]
        self.kv_data_lens = [b.nbytes for b in self.bufs]
        self.kv_item_lens = [PAGE_BYTES] * NBUF
        self.aux = [np.zeros(64, dtype=np.uint8), np.zeros(128, dtype=np.uint8)]
        self.aux_data_ptrs = [a.ctypes.data for a in self.aux] if aux else []
        self.aux_data_lens = [a.nbytes for a in self.aux] if aux else []
        self.aux_item_lens = [8, 16] if aux else []
        self.state = [np.zeros(4 * 32, dtype=np.uint8)]
        self.state_types = ["mamba"] if state else []
        self.state_data_ptrs = [[a.ctypes.data for a in self.state]] if state else []
        self.state_data_lens = [[a.nbytes for a in self.state]] if state else []
        self.state_item_lens = [[32]] if state else []
        self.ib_device = ""
        self.system_dp_rank = 0


class ServerArgs:
    def __init__(self, port):
        self.host = "127.0.0.1"
        self.disaggregation_bootstrap_port = port
        self.tp_size = 1


@pytest.fixture
def bootstrap():
    srv = ks.KVFerryKVBootstrapServer("127.0.0.1", 0)
    yield srv
    srv.close()


def _mgr(mode, **kw):
    # overrides=[]: no transport (no rdma.* key), the room engine alone
    return ks.KVFerryKVManager(Args(**kw), mode, ServerArgs(0), overrides=[])


def test_receiver_aux_without_aux_buffers(bootstrap):
    req = urllib.request.Request(
        f"http://127.0.0.1:{bootstrap.port}/route", method="PUT",
        data=json.dumps({"dp_rank": 0, "engine_rank": 0, "addr": "10.9.9.9:1"}).encode())
    urllib.request.urlopen(req, timeout=10).read()
    m = _mgr("decode", aux=False, state=False)
    r = ks.KVReceiver(m, f"127.0.0.1:{bootstrap.port}", 9)
    r.init(0)
    with pytest.raises(ValueError, match="no aux buffers"):
        r.send_metadata(np.arange(2, dtype=np.int32), 3)
    m.close()


def test_interface_names():
    for cls, methods in [
        (ks.KVSender, ["init", "send", "poll", "failure_exception", "abort", "clear",
                       "pop_decode_prefix_len", "should_send_kv_chunk", "get_transfer_metric"]),
        (ks.KVReceiver, ["init", "send_metadata", "poll", "failure_exception", "abort",
                         "clear"]),
        (ks.KVManager, ["register_to_bootstrap"]),
    ]:
        for m in methods:
            assert callable(getattr(cls, m)), (cls, m)
    assert ks.KVPoll.Success == kvferry.Poll.SUCCESS == 4
    assert ks.KVPoll.WaitingForInput == kvferry.Poll.WAITING_FOR_INPUT


def test_bootstrap_routes(bootstrap):
    base = f"http://127.0.0.1:{bootstrap.port}/route"

    def put(d):
        req = urllib.request.Request(base, data=json.dumps(d).encode(), method="PUT")
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status

    assert put({"role": "prefill", "dp_rank": 0, "engine_rank": 0, "tp_size": 2,
                "addr": "10.0.0.1:4000"}) == 200
    assert put({"role": "prefill", "dp_rank": 0, "engine_rank": 1, "tp_size": 2,
                "addr": "10.0.0.2:4000"}) == 200
    with urllib.request.urlopen(f"{base}?dp_rank=0&engine_rank=3", timeout=10) as r:
        assert json.loads(r.read())["addr"] == "10.0.0.2:4000"  # 3 mod 2
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(f"{base}?dp_rank=1&engine_rank=0", timeout=10)
    assert ei.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as ei:
        put({"role": "prefill"})
    assert ei.value.code == 400


def test_engine_overrides_from_sglang_env():
    a = Args()
    a.ib_device = "mlx5_3,mlx5_4"
    env = {
        "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": "30",
        "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "60",
        "SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL": "2.5",
        "SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE": "3",
        "KVFERRY_OVERRIDES": "rdma.listen_addr=10.0.0.1; deadlines.bootstrap_s=40",
    }
    ov = ks.engine_overrides("prefill", a, env)
    assert ov == [
        "deadlines.bootstrap_s=30", "deadlines.receiver_waiting_s=60",
        "heartbeat.interval_ms=2500", "heartbeat.misses=3", "rdma.device=mlx5_3",
        "rdma.listen_port=0", "rdma.listen_addr=10.0.0.1", "deadlines.bootstrap_s=40",
    ]
    assert "rdma.listen_port=0" not in ks.engine_overrides("decode", a, {})


def test_manager_registers_kv_aux_and_state_regions():
    m = _mgr("prefill")
    assert len({m.kv_region, m.aux_region, *m.state_regions}) == 3
    assert len(m.state_regions) == 1
    # flat (older SGLang) state fields are one group
    a = Args(state=False)
    a.state_data_ptrs, a.state_data_lens, a.state_item_lens = (
        [a.state[0].ctypes.data], [a.state[0].nbytes], [32])
    m2 = ks.KVFerryKVManager(a, "decode", ServerArgs(0), overrides=[])
    assert len(m2.state_regions) == 1 and m2.aux_region is not None
    m3 = ks.KVFerryKVManager(Args(aux=False, state=False), "decode", ServerArgs(0),
                             overrides=[])
    assert m3.aux_region is None and m3.state_regions == []
    for x in (m, m2, m3):
        x.close()


def test_manager_refuses_uneven_buffers():
    a = Args()
    a.aux_data_lens = [64, 64]  # 8 rows and 4 rows
    with pytest.raises(ValueError, match="aux buffers"):
        ks.KVFerryKVManager(a, "decode", ServerArgs(0), overrides=[])


def test_manager_refuses_bad_mode():
    with pytest.raises(ValueError, match="prefill"):
        _mgr("null")


def test_sender_without_decode_stays_bootstrapping_then_clear():
    m = _mgr("prefill")
    s = ks.KVSender(m, "127.0.0.1:1", 42, [0], 0)
    assert s.poll() == ks.KVPoll.Bootstrapping
    s.init(3, None)
    with pytest.raises(kvferry.KVFerryError):  # ROOM_INFO not here: -EAGAIN
        s.room.send(np.arange(3, dtype=np.int32))
    s.clear()  # gives up: aborted, quiescent (nothing posted), released
    assert m.parked == 0
    assert m.engine.stats().released == 1
    assert s.poll() == ks.KVPoll.Failed  # the handle is stale now
    m.close()


def test_sender_chunks_more_than_init_said():
    m = _mgr("prefill")
    s = ks.KVSender(m, "127.0.0.1:1", 43, [0], 0)
    s.init(2)
    with pytest.raises(ValueError, match="3 pages sent"):
        s.send(np.arange(3, dtype=np.int32))
    assert s.poll() == ks.KVPoll.Failed
    with pytest.raises(ks.KVTransferError, match="local abort"):
        s.failure_exception()
    m.close()


def test_sender_before_room_info_fails_nothing():
    """SGLang sends only past WaitingForInput; a send before it is logged and
    the room is left as it was (its pages were not handed over)."""
    m = _mgr("prefill")
    s = ks.KVSender(m, "127.0.0.1:1", 44, [0], 0)
    s.init(1, 0)
    assert s.pop_decode_prefix_len() == 0  # no ROOM_INFO, no user data
    assert s.should_send_kv_chunk(0, True) and not s.should_send_kv_chunk(0, False)
    s.send(np.arange(1, dtype=np.int32), state_indices=[[1]])
    assert s.poll() == ks.KVPoll.Bootstrapping
    m.close()


def test_receiver_unregistered_prefill_fails_with_reason(bootstrap):
    m = _mgr("decode")
    r = ks.KVReceiver(m, f"127.0.0.1:{bootstrap.port}", 7)
    assert r.poll() == ks.KVPoll.Bootstrapping
    r.init(0)
    assert r.poll() == ks.KVPoll.Failed
    with pytest.raises(ks.KVTransferError, match="not registered|404") as ei:
        r.failure_exception()
    assert ei.value.bootstrap_room == 7
    r.clear()
    m.close()


def test_receiver_resolves_and_fails_without_transport(bootstrap):
    p = ks.KVFerryKVManager(Args(), "prefill", ServerArgs(bootstrap.port), overrides=[])
    # an engine without a transport has no address: publish one by hand
    req = urllib.request.Request(
        f"http://127.0.0.1:{bootstrap.port}/route", method="PUT",
        data=json.dumps({"dp_rank": 0, "engine_rank": 0, "addr": "10.9.9.9:1"}).encode())
    urllib.request.urlopen(req, timeout=10).read()
    with pytest.raises(kvferry.KVFerryError):
        p.register_to_bootstrap()  # no listener: ENOTCONN
    m = _mgr("decode")
    r = ks.KVReceiver(m, f"127.0.0.1:{bootstrap.port}", 8)
    r.init(0)
    assert r.peer == "10.9.9.9:1"
    assert r.poll() == ks.KVPoll.WaitingForInput  # ready for send_metadata
    with pytest.raises(ValueError, match="state groups"):
        r.send_metadata(np.arange(2, dtype=np.int32), 1, [[0], [1]])
    r.send_metadata(np.arange(2, dtype=np.int32), 1, [[2]], decode_prefix_len=5)
    assert r.poll() == ks.KVPoll.Failed  # no transport: connect failed
    with pytest.raises(ks.KVTransferError, match="connect failed"):
        r.failure_exception()
    released = []
    m.page_release_hook = lambda rc: released.append(rc.bootstrap_room)
    r.clear()
    assert not r.pages_deferred and m.parked == 0
    assert released == []  # released at once: the hook is for deferred rooms only
    m.close()
    p.close()


def test_maybe_progress_is_rate_limited():
    m = ks.KVFerryKVManager(Args(), "decode", ServerArgs(0), overrides=[],
                            progress_interval_s=3600)
    m.progress()
    events = m.engine.stats().events
    calls = []
    orig = m.progress
    m.progress = lambda: calls.append(1) or orig()
    for _ in range(100):
        m.maybe_progress()
    assert calls == [] and m.engine.stats().events == events
    m.progress_interval_ns = 0
    m.maybe_progress()
    assert calls == [1]
    m.close()


# SGLang's base classes as its disaggregation package declares them (abstract
# methods by name), for the import path where SGLang is installed: kvferry's
# classes must subclass them and leave nothing abstract.
SGLANG_BASES = '''
import dataclasses
from abc import ABC, abstractmethod
from typing import Optional


class KVArgs:
    pass


class KVPoll:
    Failed, Bootstrapping, WaitingForInput, Transferring, Success = range(5)


@dataclasses.dataclass
class KVTransferMetric:
    transfer_latency_s: Optional[float] = None
    alloc_latency_s: Optional[float] = None
    transfer_total_bytes: Optional[int] = None


class BaseKVManager(ABC):
    @abstractmethod
    def __init__(self, args, disaggregation_mode, server_args, is_mla_backend=False): ...

    @abstractmethod
    def register_to_bootstrap(self): ...


class BaseKVSender(ABC):
    @abstractmethod
    def __init__(self, mgr, bootstrap_addr, bootstrap_room, dest_tp_ranks, pp_rank): ...

    @abstractmethod
    def init(self, num_kv_indices, aux_index=None): ...

    @abstractmethod
    def send(self, kv_indices, state_indices=None): ...

    @abstractmethod
    def get_transfer_metric(self): ...

    @abstractmethod
    def poll(self): ...

    @abstractmethod
    def failure_exception(self): ...


class BaseKVReceiver(ABC):
    @abstractmethod
    def __init__(self, mgr, bootstrap_addr, bootstrap_room=None): ...

    @abstractmethod
    def init(self, prefill_dp_rank): ...

    @abstractmethod
    def send_metadata(self, kv_indices, aux_index=None, state_indices=None,
                      decode_prefix_len=None): ...

    @abstractmethod
    def poll(self): ...

    @abstractmethod
    def failure_exception(self): ...


class BaseKVBootstrapServer(ABC):
    @abstractmethod
    def __init__(self, host, port): ...
'''

WITH_SGLANG = '''
import sys
import numpy as np
import kvferry.sglang as ks
from sglang.srt.disaggregation.base import conn
assert ks.HAVE_SGLANG
assert ks.KVPoll is conn.KVPoll and ks.KVArgs is conn.KVArgs
pairs = [(ks.KVManager, conn.BaseKVManager), (ks.KVSender, conn.BaseKVSender),
         (ks.KVReceiver, conn.BaseKVReceiver), (ks.KVBootstrapServer, conn.BaseKVBootstrapServer)]
for cls, base in pairs:
    assert issubclass(cls, base), cls
    assert not cls.__abstractmethods__, (cls, cls.__abstractmethods__)
a = conn.KVArgs()
buf = np.zeros(8 * 64, np.uint8)
a.engine_rank, a.kv_data_ptrs, a.kv_data_lens, a.kv_item_lens = 0, [buf.ctypes.data], [512], [64]
m = ks.KVManager(a, "prefill", None, overrides=[])
s = ks.KVSender(m, "127.0.0.1:1", 5, [0], 0)
assert isinstance(s.get_transfer_metric(), conn.KVTransferMetric)
r = ks.KVReceiver(m, "127.0.0.1:1", 6)
srv = ks.KVBootstrapServer("127.0.0.1", 0)
srv.close()
m.close()
print("ok")
'''


def test_subclasses_sglang_bases_where_installed(tmp_path):
    import os
    import subprocess
    import sys

    base = tmp_path / "sglang" / "srt" / "disaggregation" / "base"
    base.mkdir(parents=True)
    for d in (base, *base.parents):
        if d == tmp_path:
            break
        (d / "__init__.py").write_text("")
    (base / "conn.py").write_text(SGLANG_BASES)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", WITH_SGLANG], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    assert not ks.HAVE_SGLANG  # this process has no SGLang: the plain classes
