# SPDX-License-Identifier: Apache-2.0
"""SGLang's own disaggregation queues, built by tests/sglang/harness.py, with
SGLang's FAKE transfer backend (srt/disaggregation/fake): no RDMA, both
sides in this process. It proves the harness builds SGLang's queues the way
its scheduler does (PrefillBootstrapQueue, the prefill inflight handling,
DecodePreallocQueue, DecodeTransferQueue) independent of kvferry.

A second backend, LOOPBACK, is SGLang's fake classes plus a copy of the bytes
through the KVArgs SGLang's _init_kv_manager built (data pointers, item
lengths): every page and metadata row the decode checks arrived that way, so
the harness's byte check and SGLang's index plumbing (the decode's page list
from pop_preallocated against the prefill's send_kv_chunk pages) are tested
here too, and a corrupted byte must be caught.

Needs SGLang's pinned release (tests/requirements.txt); without it the tests skip,
and with CI=true they fail.
"""
import ctypes
import os

import pytest

import harness as H

CI = os.environ.get("CI", "") in ("true", "1", "yes")
WHY = H.missing_reason()
if WHY:
    if CI:
        raise RuntimeError(f"CI=true and the SGLang tree is missing: {WHY}")
    pytest.skip(f"not run: {WHY}", allow_module_level=True)

S = H.load()
KVPoll = S.base.KVPoll


@pytest.fixture(autouse=True)
def _gloo_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    yield


def _pair(tmp_path, backend, shape=None, **kw):
    shape = shape or H.Shape(pool_tokens=1024, max_reqs=8, chunk_tokens=32)
    p = H.PrefillRank(shape, backend, 18998, gloo_path=str(tmp_path / "gp"), **kw)
    d = H.DecodeRank(shape, backend, 18998, gloo_path=str(tmp_path / "gd"), **kw)
    return p, d


def _assert_empty(p, d):
    pq, dq = p.queues(), d.queues()
    assert (pq["bootstrap"], pq["waiting"], pq["chunked"], pq["inflight"]) == (0, 0, 0, 0), pq
    assert (dq["prealloc"], dq["pending"], dq["transfer"], dq["waiting"]) == (0, 0, 0, 0), dq
    for q in (pq, dq):
        assert q["kv_free"] == q["kv_total"], q
        assert q["req_slots_free"] == q["req_slots_total"], q
        assert q["metadata_free"] == q["metadata_total"] == p.shape.max_reqs * 2, q


FAKE = S.utils.FAKE_BOOTSTRAP_HOST


def test_fake_backend_both_sides(tmp_path):
    p, d = _pair(tmp_path, "fake")
    assert type(p.kv_manager).__name__ == "FakeKVManager"
    assert type(d.kv_manager).__name__ == "FakeKVManager"
    # KVArgs as SGLang's prefill _init_kv_manager built them from its pools
    ka = p.kv_manager.kv_args
    sh = p.shape
    assert len(ka.kv_data_ptrs) == 2 * sh.layers
    assert ka.kv_item_lens == [sh.page_size * sh.heads * sh.head_dim * 2] * (2 * sh.layers)
    assert ka.page_size == sh.page_size and ka.kv_head_num == sh.heads
    assert ka.total_kv_head_num == sh.total_kv_heads and ka.prefill_start_layer == 0
    assert len(ka.aux_data_ptrs) == len(p.sched.disagg_metadata_buffers.get_buf_infos()[0])
    reqs = [H.Request(room=r, input_len=17 + 23 * r) for r in range(1, 9)]
    for r in reqs:
        p.add(r, bootstrap_host=FAKE)
        d.add(r, bootstrap_host=FAKE)
    assert H.run_pair(p, d, 100, check_bytes=False)
    assert p.done == {r.room: "ok" for r in reqs}
    assert d.done == {r.room: "ok" for r in reqs}
    _assert_empty(p, d)


def test_fake_backend_failures(tmp_path):
    """SGLang's failure paths: a decode receiver aborted in the prealloc queue
    (_update_handshake_waiters -> prepare_abort, pop_preallocated drops it),
    a prefill sender aborted in the bootstrap queue (handle_bootstrap_failure).
    The transfer-queue failure branch is in test_loopback_every_byte."""
    p, d = _pair(tmp_path, "fake")
    reqs = [H.Request(room=r, input_len=40) for r in range(1, 5)]
    for r in reqs:
        p.add(r, bootstrap_host=FAKE)
        d.add(r, bootstrap_host=FAKE)
    # decode: room 2's receiver fails before its handshake is seen
    for dr in d.sched.disagg_decode_prealloc_queue.queue:
        if dr.req.bootstrap_room == 2:
            dr.kv_receiver.abort()
    # prefill: room 3's sender fails as soon as it is created
    for req in p.sched.disagg_prefill_bootstrap_queue.queue:
        if req.bootstrap_room == 3:
            req.disagg_kv_sender.abort()
    assert H.run_pair(p, d, 100, check_bytes=False)
    assert d.done[2].startswith("failed: Decode handshake failed"), d.done
    assert p.done[3].startswith("failed: Prefill bootstrap failed"), p.done
    assert [d.done[r] for r in (1, 3, 4)] == ["ok"] * 3
    assert [p.done[r] for r in (1, 2, 4)] == ["ok"] * 3
    _assert_empty(p, d)


# ---- LOOPBACK: SGLang's fake classes plus the bytes ------------------------------------

class _Wire:
    def __init__(self):
        self.args = {}          # "prefill" / "decode" -> KVArgs
        self.dst = {}           # room -> (kv pages, aux row, state, decode_prefix_len)
        self.done = set()
        self.aborted = set()
        self.corrupt = set()    # rooms whose first copied page gets one wrong byte
        self.bytes = 0


WIRE = _Wire()


def _copy(ptrs, lens, items, dptrs, src_i, dst_i, room):
    for b, (sp, dp, n) in enumerate(zip(ptrs, dptrs, items)):
        assert (dst_i + 1) * n <= lens[b]
        ctypes.memmove(dp + dst_i * n, sp + src_i * n, n)
        WIRE.bytes += n
        if room in WIRE.corrupt and b == 0:
            ctypes.memset(dp + dst_i * n, 0x7F, 1)
            WIRE.corrupt.discard(room)


def _loopback_classes():
    fake = S.utils.get_kv_class(S.utils.TransferBackend.FAKE, S.utils.KVClassType.MANAGER)
    from sglang.srt.disaggregation.fake.conn import FakeKVReceiver, FakeKVSender

    from sglang.srt.disaggregation.common.conn import PrefillServerInfo

    class Manager(fake):
        """What decode.py reads of a non-fake manager: prefill_info_table and
        try_ensure_parallel_info (common/conn.py's, minus the HTTP GET)."""

        def __init__(self, args, mode, server_args, is_mla_backend=False):
            super().__init__(args, mode, server_args, is_mla_backend)
            WIRE.args[mode.value] = args
            self.prefill_info_table = {}

        def try_ensure_parallel_info(self, bootstrap_addr):
            self.prefill_info_table[bootstrap_addr] = PrefillServerInfo(
                attn_tp_size=1, attn_cp_size=1, dp_size=1, pp_size=1,
                page_size=self.kv_args.page_size, kv_cache_dtype="auto", follow_bootstrap_room=True)
            return True

    class Sender(FakeKVSender):
        def __init__(self, mgr, bootstrap_addr, bootstrap_room, dest_tp_ranks, pp_rank,
                     req_has_disagg_prefill_dp_rank=False):
            super().__init__(mgr, bootstrap_addr, bootstrap_room, dest_tp_ranks, pp_rank)
            self.room, self.sent = bootstrap_room, 0

        def poll(self):
            if self.conclude_state is not None:
                return self.conclude_state
            if self.room in WIRE.aborted:
                return KVPoll.Failed
            if self.room not in WIRE.dst:
                return KVPoll.Bootstrapping
            if self.room in WIRE.done:
                return KVPoll.Success
            return KVPoll.WaitingForInput if not self.has_sent else KVPoll.Transferring

        def pop_decode_prefix_len(self):
            return WIRE.dst[self.room][3]

        def init(self, num_kv_indices, aux_index=None):
            self.num_pages, self.aux_index = num_kv_indices, aux_index

        def send(self, kv_indices, state_indices=None, num_kv_tokens=None):
            self.has_sent = True
            if self.room in WIRE.aborted:
                return
            src, dst = WIRE.args["prefill"], WIRE.args["decode"]
            pages, aux, _state, _pre = WIRE.dst[self.room]
            for k, page in enumerate(kv_indices):
                _copy(src.kv_data_ptrs, dst.kv_data_lens, src.kv_item_lens, dst.kv_data_ptrs,
                      int(page), int(pages[self.sent + k]), self.room)
            self.sent += len(kv_indices)
            if self.sent == self.num_pages:
                _copy(src.aux_data_ptrs, dst.aux_data_lens, src.aux_item_lens, dst.aux_data_ptrs,
                      self.aux_index, aux, None)
                # state slots (a hybrid model's): one list per state type
                for t, (sidx, didx) in enumerate(zip(state_indices or [], _state or [])):
                    for a_, b_ in zip(list(sidx if sidx is not None else []),
                                      list(didx if didx is not None else [])):
                        _copy(src.state_data_ptrs[t], dst.state_data_lens[t], src.state_item_lens[t],
                              dst.state_data_ptrs[t], int(a_), int(b_), None)
                WIRE.done.add(self.room)

    class Receiver(FakeKVReceiver):
        def __init__(self, mgr, bootstrap_addr, bootstrap_room=None):
            super().__init__(mgr, bootstrap_addr, bootstrap_room)
            self.room = bootstrap_room

        def poll(self):
            if self.conclude_state is not None:
                return self.conclude_state
            if not self.bootstrap_done:
                return KVPoll.Bootstrapping
            if not self.has_sent_metadata:
                return KVPoll.WaitingForInput
            return KVPoll.Success if self.room in WIRE.done else KVPoll.Transferring

        def send_metadata(self, kv_indices, aux_index=None, state_indices=None, decode_prefix_len=None):
            self.has_sent_metadata = True
            WIRE.dst[self.room] = (list(kv_indices), aux_index, state_indices, decode_prefix_len or 0)

        def abort(self):
            super().abort()
            WIRE.aborted.add(self.room)

    K = S.utils.KVClassType
    return {K.KVARGS: S.base.KVArgs, K.MANAGER: Manager, K.SENDER: Sender, K.RECEIVER: Receiver}


def test_loopback_every_byte(tmp_path):
    H.register_backend("loopback", _loopback_classes)
    global WIRE
    WIRE = _Wire()
    p, d = _pair(tmp_path, "loopback")
    reqs = [H.Request(room=100 + r, input_len=9 + 37 * r) for r in range(1, 11)]
    WIRE.corrupt = {105}
    for r in reqs[:6]:
        p.add(r, bootstrap_host="127.0.0.1")
        d.add(r, bootstrap_host="127.0.0.1")
    # the rest arrive while the first ones are in flight; room 104's
    # receiver is aborted in the transfer queue (pop_transferred's failure
    # branch: release_kv_cache, metadata row freed)
    aborted = False
    for _ in range(200):
        p.turn()
        d.turn()
        for dr in d.sched.disagg_decode_transfer_queue.queue:
            if dr.req.bootstrap_room == 104 and 104 not in WIRE.done:
                dr.kv_receiver.abort()
                aborted = True
        if aborted:
            break
    assert aborted
    for r in reqs[6:]:
        p.add(r, bootstrap_host="127.0.0.1")
        d.add(r, bootstrap_host="127.0.0.1")
    assert H.run_pair(p, d, 300)
    assert p.done.pop(104).startswith("failed: Prefill "), p.done  # bootstrap or inflight queue
    assert p.done == {r.room: "ok" for r in reqs if r.room != 104}
    assert d.done.pop(104).startswith("failed: Decode transfer failed"), d.done
    want = {r.room: "ok" for r in reqs if r.room != 104}
    want[105] = "bad: 1 wrong elements"
    assert d.done == want
    assert d.bytes_checked == sum(d.side.slot_bytes(r.input_len) for r in reqs if r.room != 104)
    assert WIRE.bytes > d.bytes_checked  # whole pages, and the metadata rows
    _assert_empty(p, d)


def test_loopback_decode_prefix_cache(tmp_path):
    """SGLang's decode-side prefix cache (RadixCache,
    --disaggregation-decode-enable-radix-cache): a finished request's pages
    stay in the decode's tree; later requests sharing its prompt prefix get
    decode_prefix_len from DecodePreallocQueue, the prefill reads it back
    (pop_decode_prefix_len -> start_send_idx) and sends only the rest; the
    decode's check covers the cached prefix too (it holds the first request's
    KV of the same tokens)."""
    H.register_backend("loopback", _loopback_classes)
    global WIRE
    WIRE = _Wire()
    shape = H.Shape(pool_tokens=2048, max_reqs=8, chunk_tokens=32)
    p = H.PrefillRank(shape, "loopback", 18997, gloo_path=str(tmp_path / "gp"))
    d = H.DecodeRank(shape, "loopback", 18997, gloo_path=str(tmp_path / "gd"), radix=True)
    first = H.Request(room=300, input_len=200)
    p.add(first, bootstrap_host="127.0.0.1")
    d.add(first, bootstrap_host="127.0.0.1")
    assert H.run_pair(p, d, 100)
    later = [H.Request(room=301, input_len=290, prefix_of=300, shared_prefix=170),
             H.Request(room=302, input_len=100, prefix_of=300, shared_prefix=100),
             H.Request(room=303, input_len=120)]
    for r in later:
        p.add(r, bootstrap_host="127.0.0.1")
        d.add(r, bootstrap_host="127.0.0.1")
    assert H.run_pair(p, d, 200)
    assert d.done == {r: "ok" for r in (300, 301, 302, 303)}, d.done
    assert p.done == {r: "ok" for r in (300, 301, 302, 303)}, p.done
    # what SGLang's decode computed as decode_prefix_len (page-aligned matches)
    assert d.prefix_tokens == {300: 0, 301: 160, 302: 96, 303: 0}
    assert WIRE.dst[301][3] == 160 and WIRE.dst[302][3] == 96
    # the pages sent: only those past the prefix
    assert len(WIRE.dst[301][0]) == (290 - 160 + 15) // 16
    pq = p.queues()
    assert (pq["bootstrap"], pq["waiting"], pq["chunked"], pq["inflight"]) == (0, 0, 0, 0)
    assert pq["kv_free"] == pq["kv_total"]
    dq = d.queues()
    assert (dq["prealloc"], dq["transfer"], dq["waiting"]) == (0, 0, 0)
    # the decode's tree keeps the finished requests' pages (evictable), none locked
    tc = d.side.tree_cache
    assert dq["kv_free"] + tc.evictable_size() == dq["kv_total"] and tc.protected_size() == 0


def test_loopback_hybrid_state(tmp_path):
    """A hybrid (Mamba2) model: SGLang's HybridReqToTokenPool /
    HybridMambaDecodeReqToTokenPool and HybridLinearKVPool, KVArgs' state
    region from setup_state_kv_args (StateType.MAMBA), the last chunk's
    state_indices from send_kv_chunk's _mamba_payload and the decode's from
    pop_preallocated; every state slot byte checked, every slot back."""
    H.register_backend("loopback", _loopback_classes)
    global WIRE
    WIRE = _Wire()
    shape = H.Shape(pool_tokens=1024, max_reqs=8, chunk_tokens=32, hybrid=True)
    p = H.PrefillRank(shape, "loopback", 18996, gloo_path=str(tmp_path / "gp"))
    d = H.DecodeRank(shape, "loopback", 18996, gloo_path=str(tmp_path / "gd"))
    ka = p.kv_manager.kv_args
    assert [t.value for t in ka.state_types] == ["mamba"] and ka.state_layer_ids == [[1, 3, 1, 3]]
    assert len(ka.kv_data_ptrs) == 4  # K and V of the two full-attention layers
    reqs = [H.Request(room=400 + r, input_len=20 + 41 * r) for r in range(6)]
    for r in reqs:
        p.add(r, bootstrap_host="127.0.0.1")
        d.add(r, bootstrap_host="127.0.0.1")
    assert H.run_pair(p, d, 200)
    assert p.done == d.done == {r.room: "ok" for r in reqs}, (p.done, d.done)
    assert all(WIRE.dst[r.room][2] is not None for r in reqs)
    _assert_empty(p, d)
    for q in (p.queues(), d.queues()):
        assert q["state_free"] == q["state_total"] > 0, q


def test_fake_backend_pp_prefill(tmp_path):
    """A 2-stage PP prefill, each stage a thread with its own
    PrefillBootstrapQueue (pp_rank, its layers: prefill_start_layer), its
    pop_bootstrapped and inflight queue driven by the PP consensus of
    scheduler_pp_mixin (get_ready_bootstrapped_rids_for_pp and
    get_transferred_rids of each stage, combined with SGLang's own
    _pp_ordered_intersection/_union and _pp_merge_transfer_status)."""
    import threading

    chan = H.PPChannel(2)
    shapes = [H.Shape(pool_tokens=1024, max_reqs=8, chunk_tokens=32, pp_size=2, pp_rank=k) for k in (0, 1)]
    reqs = [H.Request(room=500 + r, input_len=30 + 29 * r) for r in range(6)]
    ranks, errors = [None, None], []
    built = threading.Barrier(2)

    def stage(k):
        try:
            r = ranks[k] = H.PrefillRank(shapes[k], "fake", 18995, gloo_path=str(tmp_path / f"g{k}"), pp=chan)
            built.wait()
            for q in reqs:
                r.add(q, bootstrap_host=FAKE)
            for _ in range(100):
                r.turn()
                if r.idle() and len(r.done) == len(reqs):
                    break
        except Exception as e:  # noqa: BLE001
            errors.append(e)
            chan.barrier.abort()
    ts = [threading.Thread(target=stage, args=(k,)) for k in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert [r.kv_manager.kv_args.prefill_start_layer for r in ranks] == [0, 2]
    for r in ranks:
        assert r.done == {q.room: "ok" for q in reqs}
        q = r.queues()
        assert (q["bootstrap"], q["waiting"], q["chunked"], q["inflight"]) == (0, 0, 0, 0), q
        assert q["kv_free"] == q["kv_total"] and q["metadata_free"] == q["metadata_total"], q
