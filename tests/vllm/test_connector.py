# SPDX-License-Identifier: Apache-2.0
"""kvferry.vllm under the installed vLLM (vllm 0.31.0, tests/requirements.txt):
vLLM's own VllmConfig, Scheduler, KVCacheManager, connector factory,
model-runner connector mixin and output aggregator, built by vllm_instance.py
(its docstring says what is vLLM's and what is the test's).

No RDMA here: the engines have no transport (no rdma.* key), so a prefill's
send waits for a ROOM_INFO that never comes and frees its blocks at
deadlines.bootstrap_s, and a decode's receive fails at once ("connect
failed") and goes back through vLLM's own failure path (invalid blocks:
recomputed or failed by kv_load_failure_policy). Transfers that land are
tests/rxe/scenarios/vllm.sh's (the same instances, on rxe devices)."""
import inspect
import json
import logging
import threading
import time

import pytest
from prometheus_client import REGISTRY
from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
from vllm.distributed.kv_transfer.kv_connector.v1 import KVConnectorRole, supports_hma
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1
from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (
    KVConnectorLogging,
    KVConnectorProm,
)
from vllm.v1.metrics.prometheus import unregister_vllm_metrics
from vllm.v1.request import RequestStatus

import kvferry
import kvferry.vllm as kv
from kvferry.vllm.metadata import KVFerryHandshake

import vllm_instance as V

BS = 16
MODEL = V.Model(layers=2, kv_heads=4, head_size=16)
# what vLLM's toy proxy sends a prefill (the NIXL tests' toy_proxy_server.py)
TOY_PROXY = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
             "remote_block_ids": None, "remote_host": None, "remote_port": None}


@pytest.fixture(autouse=True, params=[False, True], ids=["Scheduler", "AsyncScheduler"])
def scheduler_kind(request):
    """Every test with vLLM's Scheduler and with its AsyncScheduler (its
    default; stepped one batch at a time, as the engine core's batch queue
    of depth one would)."""
    V.ASYNC_SCHEDULING[0] = request.param
    yield request.param
    V.ASYNC_SCHEDULING[0] = False


def prefill(tp=1, publish=True, wait_s=1):
    P = V.Instance("kv_producer", "P", MODEL, tp=tp, extra={
        "kvferry_listen_port": None, "kvferry_overrides": {"deadlines.bootstrap_s": wait_s}})
    if publish:  # what the workers' handshakes say on a device (none here)
        P.connector.set_xfer_handshake_metadata_pp_aware(
            {(0, r): KVFerryHandshake("P", r, 0, f"127.0.0.1:{7000 + r}", True, 64)
             for r in range(tp)})
    return P


def decode(policy="recompute", tp=1):
    return V.Instance("kv_consumer", "D", MODEL, tp=tp, policy=policy)


def run(inst, until, limit=400, before=None):
    for _ in range(limit):
        if until():
            return
        inst.step(before)
        time.sleep(0.005)
    raise AssertionError(f"not done in {limit} steps")


def offered(P, rid, prompt):
    """The prefill runs rid (max_tokens 1, as a proxy asks) and returns its
    kv_transfer_params as a decode gets them: through JSON (an HTTP proxy)."""
    P.add(rid, prompt, 1, dict(TOY_PROXY))
    run(P, lambda: rid in P.finished)
    return json.loads(json.dumps(P.params[rid]))


def recv_specs(metas, rid):
    return [m.recv[rid] for m in metas if rid in m.recv]


def nothing_held(inst):
    for w in inst.workers:
        ws = w.connector.worker_side
        assert ws.live == 0 and not ws._by_handle and not ws._retry and not ws._pending, \
            (ws.live, ws._by_handle, ws._retry, ws._pending)


# ---------------------------------------------------------------- the interface
def test_factory_loads_it_with_the_base_signature(scheduler_kind):
    """vLLM's factory finds the class by module path, takes its constructor
    (the 3-argument one it requires of external connectors), and every
    method it overrides has the base's parameters."""
    P = prefill(publish=False)
    assert type(P.scheduler).__name__ == ("AsyncScheduler" if scheduler_kind else "Scheduler")
    cls = KVConnectorFactory.get_connector_class(P.vc.kv_transfer_config)
    assert cls is kv.KVFerryConnector and isinstance(P.connector, cls)
    assert type(P.workers[0].connector) is cls
    assert list(inspect.signature(cls.__init__).parameters) == \
        list(inspect.signature(KVConnectorBase_V1.__init__).parameters)
    overridden = [n for n in vars(cls) if not n.startswith("_") and hasattr(KVConnectorBase_V1, n)]
    used = {"get_num_new_matched_tokens", "update_state_after_alloc", "build_connector_meta",
            "request_finished", "update_connector_output", "has_pending_push_work",
            "set_xfer_handshake_metadata", "set_xfer_handshake_metadata_pp_aware",
            "register_kv_caches", "get_handshake_metadata", "start_load_kv",
            "wait_for_layer_load", "save_kv_layer", "wait_for_save", "get_finished",
            "get_block_ids_with_load_errors", "get_kv_connector_stats",
            "build_kv_connector_stats", "build_prom_metrics", "get_required_kvcache_layout",
            "shutdown"}
    assert used <= set(overridden), used - set(overridden)
    for name in overridden:
        base = inspect.signature(getattr(KVConnectorBase_V1, name))
        assert list(inspect.signature(getattr(cls, name)).parameters) == \
            list(base.parameters), name
    assert not getattr(cls, "__abstractmethods__", None)
    # NHD asked of vLLM's attention backends (heads sliced token by token); MLA: any
    assert cls.get_required_kvcache_layout(P.vc) == "NHD"
    mla = V.vllm_config(V.Model(mla=True), "kv_producer", "M", 1, BS, 64, {})
    assert mla.model_config.use_mla and cls.get_required_kvcache_layout(mla) is None
    P.shutdown()


def test_init_does_not_hide_a_type_error(monkeypatch):
    """A TypeError inside the base's __init__ reaches the caller as it is,
    raised once (no retry with other arguments)."""
    P = prefill(publish=False)
    calls = []

    def broken(self, *a, **k):
        calls.append(a)
        raise TypeError("inside the base")
    monkeypatch.setattr(KVConnectorBase_V1, "__init__", broken)
    with pytest.raises(TypeError, match="inside the base"):
        kv.KVFerryConnector(P.vc, KVConnectorRole.SCHEDULER, P.kcc)
    assert len(calls) == 1
    monkeypatch.undo()
    with pytest.raises(TypeError):
        kv.KVFerryConnector(P.vc, KVConnectorRole.SCHEDULER)  # kv_cache_config is required
    P.shutdown()


def test_not_hma_so_vllm_turns_the_hybrid_manager_off():
    """Not SupportsHMA: vLLM's config turns its hybrid KV cache manager off
    by itself, its factory refuses to create the connector with it on, and
    the connector refuses a KV cache of two groups, naming the flag."""
    P = prefill(publish=False)
    assert not supports_hma(kv.KVFerryConnector)
    assert not KVConnectorFactory.supports_hma_config(P.vc.kv_transfer_config)
    assert P.vc.scheduler_config.disable_hybrid_kv_cache_manager is True
    P.vc.scheduler_config.disable_hybrid_kv_cache_manager = False
    with pytest.raises(ValueError, match="does not support HMA"):
        KVConnectorFactory.create_connector(P.vc, KVConnectorRole.SCHEDULER, P.kcc)
    P.vc.scheduler_config.disable_hybrid_kv_cache_manager = True
    two = V.KVCacheConfig(num_blocks=64, kv_cache_tensors=[],
                          kv_cache_groups=P.kcc.kv_cache_groups * 2)
    with pytest.raises(ValueError, match="disable-hybrid-kv-cache-manager"):
        kv.KVFerryConnector(P.vc, KVConnectorRole.SCHEDULER, two)
    P.shutdown()


def test_worker_registers_vllms_kv_cache_tensors():
    D = decode(tp=2)
    for w in D.workers:
        lay = w.connector.worker_side.layout
        assert lay.sliceable and lay.num_blocks == 64 and len(lay.buffers) == 2 * MODEL.layers
        assert lay.buffers[0].addr == w.caches[MODEL.layer_names()[0]].data_ptr()
        assert lay.buffers[0].geometry == (BS, 2, 2 * w.rank, 16 * 2, 0, 0)  # its 2 heads of 4
        hs = w.connector.get_handshake_metadata()
        assert (hs.tp_rank, hs.sliceable, hs.addr) == (w.rank, True, None)
    D.shutdown()


# ---------------------------------------------------------------- prefill
def test_prefill_offers_nixl_keys_and_frees_at_its_deadline():
    P = prefill(tp=2)
    free0 = P.free_blocks()
    params = offered(P, "r1", V.prompt_of(1, 40))
    blocks = P.blocks("r1")                       # held for the decode
    assert len(blocks) == 3 and P.free_blocks() == free0 - 3
    assert params["remote_block_ids"] == [blocks]  # one list per KV cache group
    assert params["remote_num_tokens"] == 40 and params["remote_request_id"] == "r1"
    assert params["do_remote_prefill"] is True and params["remote_engine_id"] == "P"
    assert (params["remote_host"], params["remote_port"], params["tp_size"]) == \
        ("127.0.0.1", 7000, 2)
    k = params[kv.PARAMS_KEY]
    assert k["room"] == kv.room_id_of("P", "r1") and k["num_blocks"] == 3
    assert k["peers"] == [["127.0.0.1:7000", "127.0.0.1:7001"]]
    assert P.finished["r1"] == "length" and P.connector.has_pending_push_work()
    t0 = time.monotonic()
    run(P, lambda: not P.scheduler.has_requests())
    assert time.monotonic() - t0 >= 0.9           # deadlines.bootstrap_s = 1, not sooner
    assert P.free_blocks() == free0 and "r1" not in P.scheduler.requests
    assert P.outcomes() == {"send no decode": 2}  # each TP rank's room
    nothing_held(P)
    P.shutdown()


def test_prefill_offers_a_stopped_request_and_nothing_aborted_or_unaddressed():
    P = prefill()
    prompt = V.prompt_of(2, 20)
    eos = V.sample(prompt[-1], len(prompt))       # its one token is a stop token
    P.add("stop", prompt, 4, dict(TOY_PROXY), stop_token_ids=[eos])
    run(P, lambda: "stop" in P.finished)
    assert P.finished["stop"] == "stop" and P.params["stop"]["remote_num_tokens"] == 20
    free0 = P.free_blocks()
    P.add("ab", V.prompt_of(3, 20), 1, dict(TOY_PROXY))
    P.step(before=lambda so: P.abort("ab"))      # aborted at the prefill: nothing to send
    assert "ab" not in P.params and "ab" not in P.scheduler.requests
    Q = prefill(publish=False)                    # no worker addresses: nothing offered
    Q.add("r", V.prompt_of(4, 20), 1, dict(TOY_PROXY))
    run(Q, lambda: "r" in Q.finished)
    assert "r" not in Q.params and "r" not in Q.scheduler.requests
    run(P, lambda: not P.scheduler.has_requests())
    assert P.free_blocks() >= free0
    P.shutdown()
    Q.shutdown()


# ---------------------------------------------------------------- decode
@pytest.mark.parametrize("policy", ["recompute", "fail"])
def test_load_failure_goes_through_vllms_failure_path(policy):
    """The prefill offers; the decode asks for the whole prompt
    (WAITING_FOR_REMOTE_KVS), its receive fails, its blocks come back as
    invalid_block_ids with the request in finished_recving, and vLLM's
    scheduler recomputes it here (every byte of its KV then as computed) or
    finishes it as an error; the prefill frees its blocks at its deadline."""
    P, D = prefill(), decode(policy)
    prompt = V.prompt_of(8, 45)
    params = offered(P, "r1", prompt)
    free0 = D.free_blocks()
    req = D.add("r1-d", prompt, 3, params)
    metas, tables = [], {}

    def before(so):
        metas.append(so.kv_connector_metadata)
        tables.setdefault("scheduled", D.blocks("r1-d"))
        if "r1-d" in so.num_scheduled_tokens:
            tables["r1-d"] = D.blocks("r1-d")
    D.step(before)
    (spec,) = recv_specs(metas, "r1-d")
    assert spec.room == kv.room_id_of("P", "r1") and spec.report
    assert spec.block_ids == tables["scheduled"] and len(spec.block_ids) == 3
    run(D, lambda: "r1-d" in D.finished, before=before)
    assert D.outcomes() == {"recv connect failed": 1}
    assert D.loaded == ["r1-d"] and D.invalid == set(spec.block_ids)
    if policy == "recompute":
        assert D.finished["r1-d"] == "length" and len(req.output_token_ids) == 3
        checked, wrong = D.workers[0].check(tables["r1-d"], prompt, 0, 45)
        assert checked == 45 * 2 * MODEL.layers * 4 * 16 * 2 and wrong == 0
    else:
        assert D.finished["r1-d"] == "error" and "r1-d" not in tables
    assert D.free_blocks() == free0 and "r1-d" not in D.scheduler.requests
    nothing_held(D)
    run(P, lambda: not P.scheduler.has_requests())
    nothing_held(P)
    P.shutdown()
    D.shutdown()


def test_prefix_hit_asks_for_the_tail_and_keeps_it_on_failure():
    """A decode that computed a prompt's first two blocks before asks the
    prefill for the rest only; when that load fails vLLM truncates the
    request at its first invalid block and recomputes from there."""
    P, D = prefill(), decode()
    base = V.prompt_of(9, 40)
    local_ids = []
    D.add("local", base, 1)
    run(D, lambda: "local" in D.finished,
        before=lambda so: local_ids[:] or local_ids.extend(D.blocks("local")))
    prompt = base[:32] + V.prompt_of(10, 21)       # 53 tokens: 2 blocks cached here
    params = offered(P, "r2", prompt)
    assert params["remote_block_ids"] == [P.blocks("r2")] and len(P.blocks("r2")) == 4
    req = D.add("r2-d", prompt, 2, params)
    metas, sched, seen = [], [], []

    def before(so):
        metas.append(so.kv_connector_metadata)
        sched.append(so.num_scheduled_tokens.get("r2-d"))
        if not seen:  # as scheduled: waiting for the load, local + external tokens computed
            seen.append((req.status, req.num_computed_tokens, D.blocks("r2-d")))
    D.step(before)
    (spec,) = recv_specs(metas, "r2-d")
    (status, computed, ids), = seen
    assert status == RequestStatus.WAITING_FOR_REMOTE_KVS and computed == 53
    assert ids[:2] == local_ids[:2] and spec.block_ids == ids[2:4] and sched == [None]
    assert D.scheduler.connector.scheduler_side.total["recvs"] + \
        D.scheduler.connector.scheduler_side.counts["recvs"] == 1
    run(D, lambda: "r2-d" in D.finished, before=before)
    assert D.invalid == set(ids[2:4])
    assert [n for n in sched if n] == [53 - 32, 1]  # recomputed from block 2, then decoded
    P.shutdown()
    D.shutdown()


def test_nothing_to_load_still_frees_the_prefill():
    """The decode holds every token the prefill computed (its prefix cache):
    no load, the request runs at once, and a receive without data tells the
    prefill to free its blocks (not reported to vLLM)."""
    P, D = prefill(), decode()
    base = V.prompt_of(11, 40)
    D.add("local", base, 1)
    run(D, lambda: "local" in D.finished)
    params = offered(P, "r3", base[:32])           # the prefill computed 32 tokens
    metas = []
    D.add("r3-d", base[:32] + V.prompt_of(12, 8), 1, params)
    D.step(lambda so: metas.append(so.kv_connector_metadata))
    (spec,) = recv_specs(metas, "r3-d")
    assert spec.block_ids == [] and not spec.report and not spec.cancel
    run(D, lambda: "r3-d" in D.finished)
    assert D.finished["r3-d"] == "length" and D.loaded == []
    P.shutdown()
    D.shutdown()


def test_abort_before_scheduling_and_while_waiting():
    """Aborted before it was scheduled: a cancel (ROOM_INFO without data,
    then ABORT) frees the prefill. Aborted while WAITING_FOR_REMOTE_KVS:
    vLLM keeps its blocks until the connector reports the receive."""
    P, D = prefill(), decode()
    prompt = V.prompt_of(13, 40)
    p1, p2 = offered(P, "a1", prompt), offered(P, "a2", prompt)
    free0 = D.free_blocks()
    D.add("a1-d", prompt, 2, p1)
    D.abort("a1-d")
    metas, held = [], []
    D.step(lambda so: metas.append(so.kv_connector_metadata))
    (spec,) = recv_specs(metas, "a1-d")
    assert spec.cancel and not spec.report and spec.block_ids == []
    assert D.free_blocks() == free0 and "a1-d" not in D.scheduler.requests

    def abort_now(so):  # scheduled into WAITING_FOR_REMOTE_KVS, then the client is gone
        if "a2-d" in D.scheduler.requests and not held:
            D.abort("a2-d")
            held.append((D.free_blocks(), "a2-d" in D.scheduler.requests))
    D.add("a2-d", prompt, 2, p2)
    D.step(abort_now)
    assert held == [(free0 - 3, True)]             # blocks kept by vLLM while the room lives
    assert "a2-d" not in D.scheduler.requests and D.free_blocks() == free0
    assert D.loaded == ["a2-d"] and D.finished.get("a2-d") is None
    nothing_held(D)
    P.shutdown()
    D.shutdown()


def test_refused_pairing_is_computed_here():
    P, D = prefill(), decode()
    prompt = V.prompt_of(14, 40)
    params = offered(P, "x", prompt)
    clean = json.dumps(params)
    params[kv.PARAMS_KEY]["block_size"] = 32       # a prefill of another --block-size
    metas = []
    D.add("x-d", prompt, 1, params)
    D.step(lambda so: metas.append(so.kv_connector_metadata))
    (spec,) = recv_specs(metas, "x-d")
    assert spec.cancel and not spec.report          # the prefill's blocks are still freed
    run(D, lambda: "x-d" in D.finished)
    assert D.finished["x-d"] == "length" and D.loaded == []
    def asks(**change):
        r = D.request("y-d", prompt, 1, dict(json.loads(clean), **change))
        return D.connector.get_num_new_matched_tokens(r, 0)
    assert asks() == (40, True)
    assert asks(remote_num_tokens=41) == (0, False)      # more than this prompt: not the same
    assert asks(remote_block_ids=[[1, 2, 3], [4, 5, 6]]) == (0, False)  # two KV cache groups
    assert asks(remote_block_ids=[1, 2]) == (0, False)   # 2 blocks cannot hold 40 tokens
    assert asks(remote_block_ids=[1, 2, 3]) == (40, True)  # a flat list: one group
    assert asks(remote_num_tokens=None) == (40, True)
    assert D.scheduler.connector.scheduler_side.total["refused"] + \
        D.scheduler.connector.scheduler_side.counts["refused"] == 4
    P.shutdown()
    D.shutdown()


# ---------------------------------------------------------------- vLLM's metrics
def test_vllms_metrics_show_kvferrys_figures():
    """The workers' and the scheduler side's figures reach SchedulerStats,
    vLLM's log line (KVConnectorLogging) and its Prometheus counters
    (KVConnectorProm) through build_kv_connector_stats / build_prom_metrics."""
    P, D = prefill(tp=2), decode()
    prompt = V.prompt_of(15, 40)
    D.add("m-d", prompt, 1, offered(P, "m", prompt))
    run(D, lambda: "m-d" in D.finished)
    run(P, lambda: not P.scheduler.has_requests())
    log = KVConnectorLogging(D.vc.kv_transfer_config)
    for data in D.stats:
        log.observe(data)
    lines = []
    log.log(log_fn=lambda fmt, *a: lines.append(fmt % a))
    assert len(lines) == 1 and "recv connect failed=1" in lines[0], lines
    assert "requests recvs=1" in lines[0]
    unregister_vllm_metrics()  # as vLLM's PrometheusStatLogger does before registering
    prom = KVConnectorProm(P.vc, ["model_name", "engine"], {0: ["tiny", "0"]})
    for data in P.stats:
        prom.observe(data, 0)
    got = REGISTRY.get_sample_value("vllm:kvferry_rooms_total",
                                    {"model_name": "tiny", "engine": "0",
                                     "outcome": "send no decode"})
    assert got == 2                                  # both TP ranks' rooms
    P.shutdown()
    D.shutdown()


# ---------------------------------------------------------------- the worker's step
def _params(rid="r1"):
    return {"do_remote_prefill": True, "remote_engine_id": "P", "remote_request_id": rid,
            kv.PARAMS_KEY: {"v": 1, "room": kv.room_id_of("P", rid),
                            "peers": [["127.0.0.1:7000"]], "tp_size": 1, "pp_size": 1,
                            "block_size": BS, "use_mla": False, "num_blocks": 3}}


def test_every_step_metadata_is_taken_once():
    """start_load_kv and get_finished both take a step's metadata: the
    second is a no-op, and the next metadata is always taken (the worker
    holds the last one, so a new one cannot sit at its address)."""
    D = decode()
    c = D.workers[0].connector
    info = kv.prefill_info(_params())
    reported = set()
    with D.workers[0].active():
        for i in range(30):
            meta = kv.KVFerryConnectorMetadata(recv={f"x{i}": kv.RecvSpec(1000 + i, info,
                                                                          [1 + i % 30])})
            c.bind_connector_metadata(meta)
            c.start_load_kv(None)
            c.start_load_kv(None)
            _, recving = c.get_finished(set())
            assert c.worker_side._taken is meta
            reported |= recving or set()
            assert c.get_block_ids_with_load_errors() == {1 + i % 30}
            assert c.get_block_ids_with_load_errors() == set()  # reported once
            c.clear_connector_metadata()
    assert reported == {f"x{i}" for i in range(30)}
    assert D.outcomes() == {"recv connect failed": 30}
    D.shutdown()


def test_engine_belongs_to_the_workers_thread():
    D = decode()
    err = []

    def other():
        try:
            D.workers[0].connector.get_finished(set())
        except Exception as e:  # noqa: BLE001 - returned to the test
            err.append(e)
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(err) == 1 and isinstance(err[0], kvferry.WrongThreadError)
    D.shutdown()


def test_no_stand_ins():
    """kvferry.vllm subclasses vLLM's own base; nothing of vLLM is replaced."""
    import kvferry.vllm._compat as compat
    import vllm.distributed.kv_transfer.kv_connector.v1.base as base
    assert compat.KVConnectorBase_V1 is base.KVConnectorBase_V1
    assert kv.KVConnectorMetadata is base.KVConnectorMetadata
    assert issubclass(kv.KVFerryHandshake, base.KVConnectorHandshakeMetadata)
    logging.getLogger("kvferry.vllm").debug("vllm %s", __import__("vllm").__version__)
