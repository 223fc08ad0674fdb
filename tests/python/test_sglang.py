# SPDX-License-Identifier: Apache-2.0
"""kvferry.sglang without RDMA: the interface SGLang calls, the bootstrap
server, the overrides from SGLang's environment, and the refusals. The
transfers themselves run on rxe (tests/rxe/python_sglang.py)."""
import json
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

import kvferry
from kvferry import ranks
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
    def __init__(self, port, tp_size=1, pp_size=1, dp_size=1, dp_attention=False):
        self.host = "127.0.0.1"
        self.disaggregation_bootstrap_port = port
        self.tp_size, self.pp_size, self.dp_size = tp_size, pp_size, dp_size
        self.enable_dp_attention = dp_attention


@pytest.fixture
def bootstrap():
    srv = ks.KVFerryBootstrapServer("127.0.0.1", 0)
    yield srv
    srv.close()


def _mgr(mode, sa=None, **kw):
    # overrides=[]: no transport (no rdma.* key), the room engine alone;
    # server_args None: a prefill does not register itself
    return ks.KVFerryKVManager(Args(**kw), mode, sa, overrides=[])


def registration(tp_rank=0, tp=1, pp_rank=0, pp=1, ip="10.9.9.9", port=1):
    """A PUT /route body as SGLang's CommonKVManager.register_to_bootstrap sends it."""
    return {"attn_tp_size": tp, "attn_tp_rank": tp_rank, "attn_cp_size": 1, "attn_cp_rank": 0,
            "attn_dp_size": 1, "attn_dp_rank": 0, "pp_size": pp, "pp_rank": pp_rank,
            "system_dp_size": 1, "system_dp_rank": 0, "rank_ip": ip, "rank_port": port,
            "page_size": 1, "kv_cache_dtype": "auto", "load_balance_method": "round_robin",
            "enable_dsa_cache_layer_split": False, "prefill_http_port": 30000}


def http(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_receiver_aux_without_aux_buffers(bootstrap):
    base = f"127.0.0.1:{bootstrap.port}"
    ks.bootstrap.put_route(base, registration())
    m = _mgr("decode", aux=False, state=False)
    r = ks.KVReceiver(m, base, 9)
    r.init(0)
    r.send_metadata(np.arange(2, dtype=np.int32), 3)
    assert r.poll() == ks.KVPoll.Failed
    with pytest.raises(ks.KVTransferError, match="no aux buffers"):
        r.failure_exception()
    m.close()


def test_interface_names():
    for cls, methods in [
        (ks.KVSender, ["init", "send", "poll", "failure_exception", "abort", "clear",
                       "pop_decode_prefix_len", "should_send_kv_chunk", "get_transfer_metric"]),
        (ks.KVReceiver, ["init", "send_metadata", "poll", "failure_exception", "abort",
                         "clear"]),
        (ks.KVManager, ["register_to_bootstrap", "try_ensure_parallel_info",
                        "submit_prefill_recompute"]),
    ]:
        for m in methods:
            assert callable(getattr(cls, m)), (cls, m)
    assert ks.KVPoll.Success == kvferry.Poll.SUCCESS == 4
    assert ks.KVPoll.WaitingForInput == kvferry.Poll.WAITING_FOR_INPUT


def test_bootstrap_routes_as_sglang_server(bootstrap):
    """The routes and answers of SGLang's CommonKVBootstrapServer (common/conn.py)."""
    base = f"http://127.0.0.1:{bootstrap.port}"
    layout = f"{base}/route?prefill_dp_rank=-1&prefill_cp_rank=-1&target_tp_rank=-1&target_pp_rank=-1"
    assert http("GET", f"{base}/health") == (200, b"OK")
    assert http("GET", layout)[0] == 503  # nobody registered
    assert http("PUT", f"{base}/route", registration(0, tp=2, ip="10.0.0.1", port=4000))[0] == 200
    assert http("GET", layout)[0] == 503  # one of two
    assert http("PUT", f"{base}/route", registration(1, tp=2, ip="10.0.0.2", port=4001))[0] == 200
    code, body = http("GET", layout)
    info = json.loads(body)
    assert code == 200 and info["attn_tp_size"] == 2 and info["dp_size"] == 1
    assert info["follow_bootstrap_room"] is False and info["prefill_http_port"] == 30000
    code, body = http("GET", f"{base}/route?prefill_dp_rank=0&prefill_cp_rank=0"
                      "&target_tp_rank=1&target_pp_rank=0")
    assert code == 200 and json.loads(body) == {"rank_ip": "10.0.0.2", "rank_port": 4001}
    assert http("GET", f"{base}/route?prefill_dp_rank=1&prefill_cp_rank=0"
                "&target_tp_rank=0&target_pp_rank=0")[0] == 404
    assert http("GET", f"{base}/route?prefill_dp_rank=0")[0] == 400
    assert http("PUT", f"{base}/route", {"attn_tp_size": 1})[0] == 400
    assert http("POST", f"{base}/register_dp_rank", {"bootstrap_room": 77, "dp_rank": 3})[0] == 200
    code, body = http("POST", f"{base}/query_dp_ranks", {"bootstrap_rooms": [77, 78]})
    assert code == 200 and json.loads(body) == {"77": 3}


def test_rank_mapping_as_sglang():
    """The facts of SGLang's _resolve_rank_mapping for each TP/PP pairing."""
    d = ks.Layout(engine_rank=3, attn_tp_size=4, attn_tp_rank=3)
    m = ks.rank_map(d, 2, 1, False)  # decode TP 4 > prefill TP 2: the prefill fans out
    assert (m.target_tp_ranks, m.required_dst_info_num, m.required_prefill_response_num) == (
        [1], 2, 1)
    d = ks.Layout(engine_rank=1, attn_tp_size=2, attn_tp_rank=1)
    m = ks.rank_map(d, 4, 1, False)  # decode TP 2 < prefill TP 4: fan-in of 2
    assert (m.target_tp_ranks, m.required_dst_info_num, m.required_prefill_response_num) == (
        [2, 3], 1, 2)
    assert ks.rank_map(d, 4, 1, True).required_prefill_response_num == 1  # MLA: one sends
    m = ks.rank_map(ks.Layout(), 1, 2, False)  # a 2-stage prefill into one decode
    assert (m.target_pp_ranks, m.required_prefill_response_num) == ([0, 1], 2)
    with pytest.raises(ValueError, match="divide"):
        ks.rank_map(ks.Layout(attn_tp_size=2), 3, 1, False)
    with pytest.raises(ValueError, match="pp_size"):
        ks.rank_map(ks.Layout(pp_size=2), 1, 4, False)


def test_layout_and_geometry_from_kv_args():
    lay = ks.layout_of(ServerArgs(0, tp_size=4, dp_size=2, dp_attention=True), Args(rank=3))
    assert (lay.attn_tp_size, lay.attn_tp_rank, lay.attn_dp_rank, lay.dp_group) == (2, 1, 1, 1)
    a = Args(rank=1)
    a.kv_head_num, a.total_kv_head_num, a.page_size = 2, 4, 4
    a.kv_layer_ids = [10, 11, 10, 11]  # K of layers 10, 11 then V
    g = ks.kv_geometry(ks.layout_of(ServerArgs(0, tp_size=2), a), a, False)
    # PAGE_BYTES 256 = 4 tokens x 2 heads x 32 bytes; rank 1 holds heads 2, 3
    assert g == [(4, 2, 2, 32, 10, 0), (4, 2, 2, 32, 11, 0), (4, 2, 2, 32, 10, 1),
                 (4, 2, 2, 32, 11, 1)]
    a.kv_layer_ids = []
    a.prefill_start_layer = 6  # a second PP stage: its layers are 6, 7
    g = ks.kv_geometry(ks.layout_of(ServerArgs(0, tp_size=2), a), a, False)
    assert [x[4:] for x in g] == [(6, 0), (7, 0), (6, 1), (7, 1)]
    g = ks.kv_geometry(ks.layout_of(None, a), a, True)  # MLA: one latent head, whole
    assert g[0] == (4, 1, 0, 64, 6, 0) and len(g) == NBUF
    a.kv_head_num = 3
    with pytest.raises(ValueError, match="heads"):
        ks.kv_geometry(ks.layout_of(ServerArgs(0, tp_size=2), a), a, False)


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
        "heartbeat.interval_ms=2500", "heartbeat.misses=3", "rdma.devices=mlx5_3,mlx5_4",
        "rdma.listen_port=0", "rdma.listen_addr=10.0.0.1", "deadlines.bootstrap_s=40",
    ]
    assert "rdma.listen_port=0" not in ks.engine_overrides("decode", a, {})


def test_rank_devices_takes_every_form_of_sglangs_flag(tmp_path):
    assert ks.rank_devices(None, 0) == "" and ks.rank_devices(" ", 3) == ""
    assert ks.rank_devices("mlx5_0", 5) == "mlx5_0"
    assert ks.rank_devices("mlx5_0, mlx5_1,mlx5_0", 5) == "mlx5_0,mlx5_1"  # shared, deduplicated
    m = '{"0": "mlx5_0,mlx5_1", "1": "mlx5_2"}'
    assert ks.rank_devices(m, 0) == "mlx5_0,mlx5_1" and ks.rank_devices(m, 1) == "mlx5_2"
    f = tmp_path / "ib.json"
    f.write_text(m)
    assert ks.rank_devices(str(f), 1) == "mlx5_2"
    with pytest.raises(ValueError, match="GPU 7"):
        ks.rank_devices(m, 7)
    a = Args()
    a.ib_device, a.gpu_id = m, 1
    assert "rdma.device=mlx5_2" in ks.engine_overrides("decode", a, {})
    a.gpu_id = 0
    assert "rdma.devices=mlx5_0,mlx5_1" in ks.engine_overrides("decode", a, {})


def test_peer_list_from_a_rank_ip_of_rails():
    assert ks.peer_list("10.0.0.1", 5) == "10.0.0.1:5"
    assert ks.peer_list("10.0.0.1,10.0.1.1", 5) == "10.0.0.1:5,10.0.1.1:5"
    assert ks.peer_list("fe80::1", 5) == "[fe80::1]:5"


def test_manager_registers_kv_aux_and_state_regions():
    m = _mgr("prefill")
    assert len({m.kv_region, m.aux_region, *m.state_regions}) == 3
    assert len(m.state_regions) == 1
    # flat (older SGLang) state fields are one group
    a = Args(state=False)
    a.state_data_ptrs, a.state_data_lens, a.state_item_lens = (
        [a.state[0].ctypes.data], [a.state[0].nbytes], [32])
    m2 = ks.KVFerryKVManager(a, "decode", None, overrides=[])
    assert len(m2.state_regions) == 1 and m2.aux_region is not None
    m3 = ks.KVFerryKVManager(Args(aux=False, state=False), "decode", None, overrides=[])
    assert m3.aux_region is None and m3.state_regions == []
    for x in (m, m2, m3):
        x.close()


def test_manager_refuses_uneven_buffers():
    a = Args()
    a.aux_data_lens = [64, 64]  # 8 rows and 4 rows
    with pytest.raises(ValueError, match="aux buffers"):
        ks.KVFerryKVManager(a, "decode", None, overrides=[])


def test_manager_refuses_bad_mode():
    with pytest.raises(ValueError, match="prefill"):
        _mgr("null")


def test_sender_waits_for_the_decode_then_times_out():
    """No decode rank asked: Bootstrapping, its room made at once (its
    fan-out learned from the first ROOM_INFO); then the room's bootstrap
    deadline (the engine's deadlines.bootstrap_s) fails it with that reason."""
    m = ks.KVFerryKVManager(Args(), "prefill", None, overrides=["deadlines.bootstrap_s=1"])
    s = ks.KVSender(m, "127.0.0.1:1", 42, [0], 0)
    assert s.poll() == ks.KVPoll.Bootstrapping and s.room is not None
    assert s.pop_decode_prefix_len() == 0
    assert s.should_send_kv_chunk(0, True) and not s.should_send_kv_chunk(0, False)
    with pytest.raises(RuntimeError, match="before init"):
        s.send(np.arange(1, dtype=np.int32))
    time.sleep(1.05)
    assert s.poll() == ks.KVPoll.Failed and s.conclude_state == ks.KVPoll.Failed
    with pytest.raises(ks.KVTransferError, match="bootstrap deadline"):
        s.failure_exception()
    assert m.refused == 1, "a decode rank asking later is answered at once"
    s.clear()
    assert sum(m.engine.stats().rooms.values()) == 0 and m.engine.stats().inflight == 0
    m.close()


def test_sender_aborted_before_the_decode_asked():
    """No decode rank asked yet: the room fails, and its id is remembered for
    deadlines.bootstrap_s so that a decode rank asking later is answered with
    an abort at once (the answer itself runs on rxe: sglang_rxe.py's abort
    shape)."""
    m = ks.KVFerryKVManager(Args(), "prefill", None, overrides=["deadlines.bootstrap_s=1"])
    s = ks.KVSender(m, "127.0.0.1:1", 43, [0], 0)
    s.abort()
    assert s.poll() == ks.KVPoll.Failed
    with pytest.raises(ks.KVTransferError, match="aborted by the local caller"):
        s.failure_exception()
    assert m.refused == 1 and m.refused_answered == 0
    m.progress()
    assert m.refused == 1
    time.sleep(1.05)
    m.progress()
    assert m.refused == 0 and sum(m.engine.stats().rooms.values()) == 0
    m.close()


def test_refused_requests_are_bounded():
    m = _mgr("prefill")
    m.REFUSED_MAX = 3
    for rid in range(100, 105):
        m.refuse(rid)
    assert m.refused == 3 and m.refused_dropped == 2
    m.close()


def test_user_data_carries_prefix_and_fan_out():
    assert ks.parse_user_data(ks.pack_user_data(48, 2)) == (48, 2)
    assert ks.parse_user_data(b"") == (0, 1)  # a dummy's
    assert ks.pack_user_data(48, 2)[:12] == ranks.pack_fan_user_data(2)  # the one tag


def test_receiver_of_an_unknown_prefill_fails_with_reason(bootstrap):
    m = _mgr("decode")
    r = ks.KVReceiver(m, f"127.0.0.1:{bootstrap.port}", 7)
    assert r.poll() == ks.KVPoll.Bootstrapping
    assert not m.try_ensure_parallel_info(f"127.0.0.1:{bootstrap.port}")  # 503
    r.init(0)
    assert r.poll() == ks.KVPoll.Failed and r.conclude_state == ks.KVPoll.Failed
    with pytest.raises(ks.KVTransferError, match="no prefill layout") as ei:
        r.failure_exception()
    assert ei.value.bootstrap_room == 7
    r.clear()
    m.close()


def test_receiver_finds_every_prefill_rank(bootstrap):
    """Decode TP 1 against a prefill of TP 2: a fan-in room of both ranks,
    their addresses from the server; no transport here, so the connects fail."""
    base = f"127.0.0.1:{bootstrap.port}"
    for k in range(2):
        ks.bootstrap.put_route(base, registration(k, tp=2, ip=f"10.9.9.{k + 1}", port=7))
    m = _mgr("decode")
    assert m.try_ensure_parallel_info(base)
    info = m.prefill_info_table[base]
    assert info.target_tp_ranks == [0, 1] and info.required_prefill_response_num == 2
    r = ks.KVReceiver(m, base, 8)
    r.init(0)
    assert r.parts == [(0, 0, False), (1, 0, False)]
    assert r.poll() == ks.KVPoll.WaitingForInput  # ready for send_metadata
    r.send_metadata(np.arange(2, dtype=np.int32), 1, [[0], [1]])
    assert r.poll() == ks.KVPoll.Failed  # two state groups, one registered
    with pytest.raises(ks.KVTransferError, match="state groups"):
        r.failure_exception()
    r2 = ks.KVReceiver(m, base, 9)
    r2.init(0)
    r2.send_metadata(np.arange(2, dtype=np.int32), 1, [[2]], decode_prefix_len=5)
    assert r2.poll() == ks.KVPoll.Failed  # state between different TP: refused
    with pytest.raises(ks.KVTransferError, match="different attention TP"):
        r2.failure_exception()
    r3 = ks.KVReceiver(m, base, 10)
    r3.init(0)
    r3.send_metadata(np.arange(2, dtype=np.int32), 1, None, decode_prefix_len=5)
    assert r3.poll() == ks.KVPoll.Failed  # no transport: connect failed
    with pytest.raises(ks.KVTransferError, match="connect"):
        r3.failure_exception()
    released = []
    m.page_release_hook = lambda rc: released.append(rc.bootstrap_room)
    for x in (r, r2, r3):
        x.clear()
    assert not r3.pages_deferred and m.parked == 0
    assert released == []  # released at once: the hook is for deferred rooms only
    m.close()


def test_prefill_registers_its_address(bootstrap):
    """A prefill manager files itself at creation (SGLang calls
    register_to_bootstrap from CommonKVManager.__init__); an engine without a
    transport has no address, which is an error naming why."""
    with pytest.raises(kvferry.KVFerryError):
        ks.KVFerryKVManager(Args(), "prefill", ServerArgs(bootstrap.port), overrides=[])


def test_retract_rebootstrap_fails_the_receiver(bootstrap):
    m = _mgr("decode")
    r = ks.KVReceiver(m, f"127.0.0.1:{bootstrap.port}", 11)
    m.submit_prefill_recompute(r, {"rid": "x"})
    assert r.poll() == ks.KVPoll.Failed
    with pytest.raises(ks.KVTransferError, match="rebootstrap is not supported"):
        r.failure_exception()
    m.close()


def test_maybe_progress_is_rate_limited():
    m = ks.KVFerryKVManager(Args(), "decode", None, overrides=[], progress_interval_s=3600)
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
    cls = cls if isinstance(cls, type) else ks.bootstrap_server_class()
    assert issubclass(cls, base), cls
    assert not cls.__abstractmethods__, (cls, cls.__abstractmethods__)
a = conn.KVArgs()
buf = np.zeros(8 * 64, np.uint8)
a.engine_rank, a.kv_data_ptrs, a.kv_data_lens, a.kv_item_lens = 0, [buf.ctypes.data], [512], [64]
m = ks.KVManager(a, "prefill", None, overrides=[])
s = ks.KVSender(m, "127.0.0.1:1", 5, [0], 0)
assert isinstance(s.get_transfer_metric(), conn.KVTransferMetric)
r = ks.KVReceiver(m, "127.0.0.1:1", 6)
srv = ks.KVBootstrapServer("127.0.0.1", 0)  # SGLang's CommonKVBootstrapServer
import time
t_end = time.monotonic() + 30  # its close() needs the loop its thread sets up
while getattr(srv, "_loop", None) is None and time.monotonic() < t_end:
    time.sleep(0.05)
srv.close()
m.close()
print("ok")
'''


def test_subclasses_sglang_bases_where_installed():
    """In a process with SGLang's pinned release (tests/requirements.txt), the
    classes derive from SGLang's own bases; here SGLang is hidden (conftest):
    the stand-ins."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", WITH_SGLANG], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]
    assert not ks.HAVE_SGLANG  # this process has SGLang hidden: the plain classes
