# SPDX-License-Identifier: Apache-2.0
"""kvferry.vllm without RDMA: the request -> room mapping, the side channel
(kv_transfer_params), the rank mapping, the KV cache layouts, and the
scheduler-side logic, driven through vllm_harness.py in the call order of
vLLM commit 00f4240 (its docstring lists the steps, file:function). Engines
have no transport (no rdma.* key, as tests/python/conftest.py's): a
prefill's send waits for a ROOM_INFO that never comes and frees its blocks
at deadlines.bootstrap_s; a decode's receive fails "connect failed" and goes
back through vLLM's failure path (invalid blocks, recompute or fail).

The base classes are kvferry.vllm._compat's stand-ins unless vLLM imports
(kvferry.vllm.HAVE_VLLM); test_base_classes says which."""
import importlib
import inspect
import os
import time

import pytest

import kvferry
import kvferry.vllm as kv
from kvferry.vllm import mapping
from kvferry.vllm.metadata import KVFerryHandshake

import vllm_harness as H

BS = 16
MODEL = H.ModelShape(layers=2, kv_heads=4, head_size=8)
CI = os.environ.get("CI", "") in ("true", "1", "yes")


def torch_or_skip():
    """Debian's python3-torch (scripts/lib.sh installs it): the layouts of
    real tensors. Missing: skipped, and a failure under CI=true."""
    try:
        import torch
    except ImportError:
        if CI:
            raise
        pytest.skip("not run: python3-torch is not installed")
    return torch


# ---------------------------------------------------------------- mapping
def test_room_id_stable_63_bits_both_sides():
    a = kv.room_id_of("prefill-engine-0", "cmpl-abc-0-1f2e3d4c")
    # a fixed value: the same on every process, Python run and machine
    assert a == kv.room_id_of("prefill-engine-0", "cmpl-abc-0-1f2e3d4c")
    assert 0 < a < 2 ** 63
    assert a != kv.room_id_of("prefill-engine-1", "cmpl-abc-0-1f2e3d4c")
    assert a != kv.room_id_of("prefill-engine-0", "cmpl-abc-0-1f2e3d4d")
    ids = {kv.room_id_of("e", f"req-{i}") for i in range(20000)}
    assert len(ids) == 20000
    # a pinned value: the hash may not change between releases (a prefill and
    # a decode of different versions must agree)
    assert kv.room_id_of("e", "r") == int.from_bytes(
        __import__("hashlib").blake2b(b"e\0r", digest_size=8).digest(), "little") & (2 ** 63 - 1)


def _params(room=None, **kw):
    p = {"do_remote_prefill": True, "remote_engine_id": "P", "remote_request_id": "r1",
         kv.PARAMS_KEY: {"v": 1, "room": kv.room_id_of("P", "r1") if room is None else room,
                         "peers": [["10.0.0.1:7000"]], "tp_size": 1, "pp_size": 1,
                         "block_size": BS, "use_mla": False, "num_blocks": 3}}
    p[kv.PARAMS_KEY].update(kw)
    return p


def test_prefill_info_checks_what_it_reads():
    info = kv.prefill_info(_params())
    assert info.room == kv.room_id_of("P", "r1") and info.peers == [["10.0.0.1:7000"]]
    with pytest.raises(kv.ParamsError, match="not the hash"):
        kv.prefill_info(_params(room=12345))
    with pytest.raises(kv.ParamsError, match="not from a kvferry prefill"):
        kv.prefill_info({"do_remote_prefill": True, "remote_block_ids": [1]})
    with pytest.raises(kv.ParamsError, match="version"):
        kv.prefill_info(_params(v=2))
    with pytest.raises(kv.ParamsError, match="stages"):
        kv.prefill_info(_params(tp_size=2))
    with pytest.raises(kv.ParamsError, match="bad"):
        kv.prefill_info(_params(room="x"))


def test_user_data_round_trip():
    assert kv.parse_user_data(kv.pack_user_data(4)) == 4
    assert kv.parse_user_data(b"") == 1
    assert kv.parse_user_data(b"\0" * 16) == 1  # not ours: one receiver


@pytest.mark.parametrize("dtp,ptp,pp,mla,want", [
    (1, 1, 1, False, [[(0, 0, False)], 1]),
    (2, 1, 1, False, [[(0, 0, False)], 2]),   # fan-out: prefill rank 0 serves 2
    (4, 2, 1, False, [[(0, 1, False)], 2]),   # (rank 3)
    (1, 2, 1, False, [[(0, 0, False), (0, 1, False)], 1]),  # fan-in, each writes its heads
    (1, 2, 1, True, [[(0, 0, False), (0, 1, True)], 1]),    # MLA: one data rank, one dummy
    (1, 1, 2, False, [[(0, 0, False), (1, 0, False)], 1]),  # two stages: layers
])
def test_rank_map(dtp, ptp, pp, mla, want):
    rank = 3 if (dtp, ptp) == (4, 2) else 0
    m = kv.rank_map(dtp, rank, ptp, pp, mla)
    assert [(t.pp, t.tp, t.dummy) for t in m.targets] == want[0]
    assert m.fan_out == want[1]


def test_rank_map_refuses():
    with pytest.raises(ValueError, match="divide"):
        kv.rank_map(3, 0, 2, 1, False)
    with pytest.raises(ValueError, match="out of range"):
        kv.rank_map(2, 2, 1, 1, False)


def test_layer_index():
    assert kv.layer_index("model.layers.12.self_attn.attn") == 12
    assert kv.layer_index("transformer.h.3.attn") == 3
    assert kv.layer_index("language_model.model.layers.0.self_attn.attn") == 0
    assert kv.layer_index("attn") is None


def test_cache_layout_flash_attention_torch():
    torch = torch_or_skip()
    caches = {f"model.layers.{i}.self_attn.attn": torch.zeros(2, 10, BS, 2, 8, dtype=torch.float16)
              for i in (1, 0)}
    lay = kv.cache_layout(caches, block_size=BS, tp_rank=1, tp_size=2, total_kv_heads=4,
                          use_mla=False)
    assert lay.sliceable and lay.num_blocks == 10 and len(lay.buffers) == 4
    t0 = caches["model.layers.0.self_attn.attn"]
    b = lay.buffers[0]
    assert b.addr == t0.data_ptr() and b.item_size == BS * 2 * 8 * 2
    assert b.geometry == (BS, 2, 2, 16, 0, 0)                      # rank 1 of 2: heads 2, 3
    assert lay.buffers[1].addr == t0[1].data_ptr()                 # V of layer 0
    assert lay.buffers[1].geometry == (BS, 2, 2, 16, 0, 1)
    assert [g[4] for g in lay.geometry] == [0, 0, 1, 1]            # by layer, K then V


def test_cache_layout_hnd_flashinfer_mla_and_refusals():
    torch = torch_or_skip()
    # HND: a block is [heads, tokens, head size]: whole blocks only
    hnd = torch.zeros(2, 10, 2, BS, 8, dtype=torch.float16).permute(0, 1, 3, 2, 4)
    lay = kv.cache_layout({"model.layers.0.attn": hnd}, block_size=BS, tp_rank=0, tp_size=1,
                          total_kv_heads=2, use_mla=False)
    assert not lay.sliceable and "HND" in lay.why_not and lay.geometry is None
    # K and V side by side (FlashInfer, Triton)
    fi = torch.zeros(10, 2, BS, 2, 8, dtype=torch.float16)
    lay = kv.cache_layout({"model.layers.0.attn": fi}, block_size=BS, tp_rank=0, tp_size=1,
                          total_kv_heads=2, use_mla=False, num_blocks=10)
    assert not lay.sliceable and lay.buffers[0].item_size == 2 * BS * 2 * 8 * 2
    # MLA: one latent buffer a layer, held whole by every rank
    mla = {f"model.layers.{i}.attn": torch.zeros(10, BS, 72, dtype=torch.bfloat16)
           for i in range(3)}
    lay = kv.cache_layout(mla, block_size=BS, tp_rank=1, tp_size=2, total_kv_heads=1,
                          use_mla=True)
    assert lay.sliceable and [b.geometry for b in lay.buffers] == \
        [(BS, 1, 0, 144, i, 0) for i in range(3)]
    with pytest.raises(ValueError, match="block_size"):
        kv.cache_layout({"model.layers.0.attn": torch.zeros(2, 10, 8, 2, 8)}, block_size=BS,
                        tp_rank=0, tp_size=1, total_kv_heads=2, use_mla=False)
    with pytest.raises(ValueError, match="different block counts"):
        kv.cache_layout({"model.layers.0.attn": torch.zeros(2, 10, BS, 2, 8),
                         "model.layers.1.attn": torch.zeros(2, 9, BS, 2, 8)}, block_size=BS,
                        tp_rank=0, tp_size=1, total_kv_heads=2, use_mla=False)


def test_replicated_heads_head0():
    # 2 KV heads on TP 4: each rank holds one head, two ranks per head
    assert [mapping.head_range(r, 4, 1, 2) for r in range(4)] == [0, 0, 1, 1]
    assert [mapping.head_range(r, 2, 2, 4) for r in range(2)] == [0, 2]


def test_tail_blocks():
    assert mapping.tail_blocks([5, 6, 7, 8], 2) == [7, 8]
    assert mapping.tail_blocks([5, 6], 0) == []
    with pytest.raises(ValueError, match="asks for 3"):
        mapping.tail_blocks([5, 6], 3)


# ---------------------------------------------------------------- the interface
def test_base_classes_and_signatures():
    """The connector is what vLLM's factory loads and implements every
    method of the base class with the base's parameters."""
    mod = importlib.import_module("kvferry.vllm")
    cls = getattr(mod, "KVFerryConnector")
    assert issubclass(cls, kv.KVConnectorBase_V1)
    print(f"vllm base: {'vLLM ' if kv.HAVE_VLLM else 'stand-ins (kvferry.vllm._compat)'}")
    abstract = ["get_num_new_matched_tokens", "update_state_after_alloc", "build_connector_meta",
                "start_load_kv", "wait_for_layer_load", "save_kv_layer", "wait_for_save"]
    used = abstract + ["request_finished", "get_finished", "get_block_ids_with_load_errors",
                       "register_kv_caches", "get_handshake_metadata", "update_connector_output",
                       "set_xfer_handshake_metadata", "set_xfer_handshake_metadata_pp_aware",
                       "has_pending_push_work", "shutdown"]
    for name in used:
        assert name in cls.__dict__, f"{name} not implemented"
        base = getattr(kv.KVConnectorBase_V1, name)
        assert list(inspect.signature(getattr(cls, name)).parameters) == \
            list(inspect.signature(base).parameters), name
    assert cls.get_required_kvcache_layout(H._NS(model_config=H._NS(use_mla=False))) == "NHD"
    assert cls.get_required_kvcache_layout(H._NS(model_config=H._NS(use_mla=True))) is None


# ---------------------------------------------------------------- the scheduler side
def prefill(tp=1, nblocks=32, wait_s=1, **extra):
    return H.Instance("kv_producer", "P", tp, MODEL, nblocks, BS,
                      lambda r: dict({"kvferry_listen_port": None,
                                      "kvferry_overrides": {"deadlines.bootstrap_s": wait_s}},
                                     **extra))


def decode(tp=1, nblocks=32, policy="recompute"):
    return H.Instance("kv_consumer", "D", tp, MODEL, nblocks, BS, lambda r: {}, policy)


def publish(inst, addrs):
    """What the workers' handshakes would say on a real device."""
    inst.scheduler.connector.set_xfer_handshake_metadata_pp_aware(
        {(0, r): KVFerryHandshake("P", r, 0, a, True, 32) for r, a in enumerate(addrs)})


def run(inst, until, limit=400, before=None):
    for _ in range(limit):
        if until():
            return
        inst.step(before)
        time.sleep(0.005)
    raise AssertionError(f"not done in {limit} steps")


def assert_nothing_held(X):
    """Every room of X's workers is gone from the worker's books: no live
    request, no watched room (Engine.changed's map), none waiting for a
    release, no send waiting for its decode."""
    for w in X.workers:
        ws = w.connector.worker_side
        assert ws.live == 0 and not ws._by_handle and not ws._retry and not ws._pending, \
            (ws.live, ws._by_handle, ws._retry, ws._pending)


def test_prefill_offers_and_frees_at_its_deadline():
    P = prefill(tp=2)
    publish(P, ["10.0.0.1:7000", "10.0.0.1:7001"])
    prompt = H.rng_prompt(1, 40)
    r = H.Request("r1", prompt, 1, {"do_remote_decode": True})
    P.scheduler.add_request(r)
    free0 = len(P.pool.free_ids)
    P.step()
    params = P.scheduler.outputs["r1"]
    assert params["do_remote_prefill"] and params["remote_request_id"] == "r1"
    k = params[kv.PARAMS_KEY]
    assert k["room"] == kv.room_id_of("P", "r1") and k["peers"] == [["10.0.0.1:7000",
                                                                    "10.0.0.1:7001"]]
    assert k["tp_size"] == 2 and k["num_blocks"] == 3 and params["remote_block_ids"] == \
        P.scheduler.kv_cache_manager.req_blocks["r1"]
    assert P.scheduler.connector.has_pending_push_work()
    assert len(P.pool.free_ids) == free0 - 3    # held for the decode
    t0 = time.monotonic()
    run(P, lambda: "r1" not in P.scheduler.requests)
    assert time.monotonic() - t0 >= 0.9           # deadlines.bootstrap_s = 1, not sooner
    assert len(P.pool.free_ids) == free0 and not P.scheduler.has_requests()
    assert all(w.connector.kvferry_outcomes() == {"send no decode": 1} for w in P.workers)
    assert_nothing_held(P)
    P.shutdown()


def test_prefill_offers_nothing_when_not_length_capped_or_unknown_peers():
    P = prefill()
    r = H.Request("r1", H.rng_prompt(2, 20), 1, {"do_remote_decode": True})
    P.scheduler.add_request(r)
    P.step()                                      # no handshake: no address to offer
    assert "r1" not in P.scheduler.outputs and "r1" not in P.scheduler.requests
    publish(P, ["10.0.0.1:7000"])
    r = H.Request("r2", H.rng_prompt(3, 20), 1, {"do_remote_decode": True})
    P.scheduler.add_request(r)
    P.abort("r2")                                 # aborted at the prefill: nothing to send
    assert "r2" not in P.scheduler.requests and not P.scheduler.connector.has_pending_push_work()
    P.shutdown()


def test_decode_asks_the_tail_after_its_prefix_hit():
    D = decode()
    sched = D.scheduler
    prompt = H.rng_prompt(4, 50)                  # 4 blocks, 2 of them cached here
    cached = D.pool.alloc(2)
    sched.kv_cache_manager.cache_prefix(prompt, cached)
    r = H.Request("d1", prompt, 2, _params(num_blocks=4))
    sched.add_request(r)
    n, async_ = sched.connector.get_num_new_matched_tokens(r, 2 * BS)
    assert (n, async_) == (50 - 2 * BS, True)
    out = sched.schedule()                        # the harness calls it the same way
    meta = out.kv_connector_metadata
    spec = meta.recv["d1"]
    assert spec.room == kv.room_id_of("P", "r1") and spec.report
    ids = sched.kv_cache_manager.req_blocks["d1"]
    assert ids[:2] == cached and spec.block_ids == ids[2:4]
    assert r.status == H.RequestStatus.WAITING_FOR_REMOTE_KVS
    assert r.kv_transfer_params["do_remote_prefill"] is False   # one transfer per request
    D.shutdown()


def test_decode_full_hit_and_cancel_free_the_prefill_without_reporting():
    D = decode()
    c = D.scheduler.connector
    r = H.Request("d1", H.rng_prompt(5, 20), 2, _params())
    c.update_state_after_alloc(r, H.KVCacheBlocks([3, 4]), 0)   # nothing to load
    r2 = H.Request("d2", H.rng_prompt(6, 20), 2, dict(_params(), remote_request_id="r2"))
    r2.kv_transfer_params[kv.PARAMS_KEY]["room"] = kv.room_id_of("P", "r2")
    r2.status = H.RequestStatus.FINISHED_ABORTED
    assert c.request_finished(r2, []) == (False, None)           # aborted before scheduled
    meta = c.build_connector_meta(None)
    assert meta.recv["d1"].block_ids == [] and not meta.recv["d1"].report
    assert not meta.recv["d1"].cancel
    assert meta.recv["d2"].cancel and not meta.recv["d2"].report
    assert c.build_connector_meta(None).recv == {}                # consumed
    D.shutdown()


def test_decode_refuses_a_pairing_it_cannot_do_and_computes_locally():
    D = decode()
    c = D.scheduler.connector
    r = H.Request("d1", H.rng_prompt(7, 40), 2, _params(block_size=32))
    assert c.get_num_new_matched_tokens(r, 0) == (0, False)
    c.update_state_after_alloc(r, H.KVCacheBlocks([1, 2, 3]), 0)
    spec = c.build_connector_meta(None).recv["d1"]
    assert spec.cancel and not spec.report        # the prefill's blocks are still freed
    D.shutdown()


@pytest.mark.parametrize("policy", ["recompute", "fail"])
def test_failed_receive_goes_through_vllms_failure_path(policy):
    """Prefill and decode in one process, no transport: the prefill offers,
    the decode's receive fails at once (connect failed), is reported with
    its blocks as load errors, and vLLM's scheduler recomputes the request
    (or fails it); the prefill frees its blocks at its deadline."""
    P, D = prefill(), decode(policy=policy)
    publish(P, ["10.0.0.1:7000"])
    prompt = H.rng_prompt(8, 45)
    P.scheduler.add_request(H.Request("r1", prompt, 1, {"do_remote_decode": True}))
    P.step()
    params = P.scheduler.outputs["r1"]
    req = H.Request("r1-d", prompt, 3, params)
    D.scheduler.add_request(req)
    free0 = len(D.pool.free_ids)
    run(D, lambda: "r1-d" in D.scheduler.recomputed or "r1-d" in D.scheduler.errors or
        "r1-d" not in D.scheduler.requests)
    (w,) = D.workers
    assert w.connector.kvferry_outcomes() == {"recv connect failed": 1}
    if policy == "recompute":
        assert "r1-d" in D.scheduler.recomputed
        run(D, lambda: req.is_finished())
        assert req.status == H.RequestStatus.FINISHED_LENGTH_CAPPED
    else:
        assert "r1-d" in D.scheduler.errors and req.status == H.RequestStatus.FINISHED_ERROR
    assert len(D.pool.free_ids) == free0
    assert_nothing_held(D)
    run(P, lambda: not P.scheduler.has_requests())
    assert_nothing_held(P)
    P.shutdown()
    D.shutdown()


def test_decode_recompute_writes_every_block_itself():
    """After the failed load, the request's blocks are computed here: every
    byte checked as the forward wrote it."""
    P, D = prefill(), decode()
    publish(P, ["10.0.0.1:7000"])
    prompt = H.rng_prompt(9, 37)
    P.scheduler.add_request(H.Request("r1", prompt, 1, {"do_remote_decode": True}))
    P.step()
    D.scheduler.add_request(H.Request("r1-d", prompt, 5, P.scheduler.outputs["r1"]))
    seen = {}

    def before(out):
        if "r1-d" in out.num_scheduled_tokens and "r1-d" in D.scheduler.recomputed:
            seen["blocks"] = list(D.scheduler.kv_cache_manager.req_blocks["r1-d"])
    run(D, lambda: "blocks" in seen, before=before)
    req = D.scheduler.requests["r1-d"]
    checked, wrong = D.check(req, D.scheduler.kv_cache_manager.req_blocks["r1-d"], 37)
    assert checked == 37 * 2 * 2 * 4 * 8 * 2 and wrong == 0
    P.shutdown()
    D.shutdown()


def test_worker_takes_a_metadata_once():
    """start_load_kv and get_finished both take the step's metadata: the
    second is a no-op (no second room for the same request)."""
    D = decode()
    (w,) = D.workers
    c = w.connector
    meta = kv.KVFerryConnectorMetadata(recv={"x": kv.RecvSpec(77, kv.prefill_info(_params()),
                                                              [1, 2])})
    c.bind_connector_metadata(meta)
    c.start_load_kv(None)
    sending, recving = c.get_finished(set())
    assert recving == {"x"} and c.get_block_ids_with_load_errors() == {1, 2}
    assert c.get_block_ids_with_load_errors() == set()   # reported once
    c.clear_connector_metadata()
    assert c.get_finished(set()) == (None, None)
    D.shutdown()


def test_engine_belongs_to_the_workers_thread():
    D = decode()
    (w,) = D.workers
    import threading
    err = []
    t = threading.Thread(target=lambda: err.append(_try(lambda: w.connector.get_finished(set()))))
    t.start()
    t.join()
    assert isinstance(err[0], kvferry.WrongThreadError)
    D.shutdown()


def _try(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - returned to the test
        return e
    return None


def test_every_step_metadata_is_taken():
    """Each step's metadata is taken once, however many times it is seen,
    and the next one always: the worker holds the last one it took, so a
    new metadata cannot sit at its address (an id() check could skip a
    step's work when CPython reused the freed address)."""
    D = decode()
    (w,) = D.workers
    c = w.connector
    info = kv.prefill_info(_params())
    reported = set()
    for i in range(50):
        meta = kv.KVFerryConnectorMetadata(recv={f"x{i}": kv.RecvSpec(1000 + i, info, [i % 30])})
        c.bind_connector_metadata(meta)
        c.start_load_kv(None)
        c.start_load_kv(None)                      # the same metadata again: nothing new
        _, recving = c.get_finished(set())
        assert w.connector.worker_side._taken is meta
        reported |= recving or set()
        c.get_block_ids_with_load_errors()
        c.clear_connector_metadata()
        del meta
    assert reported == {f"x{i}" for i in range(50)}
    assert w.connector.kvferry_outcomes() == {"recv connect failed": 50}
    D.shutdown()
