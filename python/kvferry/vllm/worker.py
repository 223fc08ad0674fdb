# SPDX-License-Identifier: Apache-2.0
"""The worker-side half of KVFerryConnector (in each vLLM worker process,
beside its model runner): one kvferry engine per rank, the layer tensors as
its region "kv", and the rooms.

Push, not pull: the prefill writes its blocks into the decode's with RDMA
WRITE. The decode rank creates a receiver room and sends its block ids
(ROOM_INFO, its user data the fan-out tag of kvferry.ranks); the prefill
rank's sender room is created with the request's send, its fan-out learned
by the library from the first ROOM_INFO and its bootstrap deadline running
from then (Engine.sender(n=0)), and sends the request's last blocks, as many
as the decode asked for.

Everything runs from get_finished (once per model-runner step, forward or
not): the engine's progress, the sends that can go, the rooms that ended.
A room is reported finished (its blocks may be freed or read) only once it
is released: SUCCESS, or FAILED and quiescent, so no RDMA write of it can
land after vLLM reuses the blocks. A failed receive is reported with its
blocks in get_block_ids_with_load_errors in the same step."""
from __future__ import annotations

import collections
import dataclasses
import logging
import os
from typing import Any, Dict, List, Optional, Set, Tuple

import numpy as np

import kvferry

from .mapping import CacheLayout, cache_layout, pack_user_data, rank_map, tail_blocks
from .metadata import KVFerryConnectorMetadata, KVFerryHandshake, RecvSpec, SendSpec
from .stats import KVFerryStats

log = logging.getLogger("kvferry.vllm")

REGION = "kv"
TERMINAL = (kvferry.Poll.SUCCESS, kvferry.Poll.FAILED)


def _room_stats(room: kvferry.Room) -> Any:
    """A terminal room's record (bytes, times), taken before its release."""
    try:
        return room.stats()
    except kvferry.KVFerryError:
        return None


def extra_config(vllm_config: Any) -> Dict[str, Any]:
    return dict(getattr(vllm_config.kv_transfer_config, "kv_connector_extra_config", None) or {})


def _overrides(value: Any) -> List[str]:
    """kvferry overrides from a dict {"rdma.device": "mlx5_0"} or a string
    "rdma.device=mlx5_0;rdma.listen_addr=10.0.0.1"."""
    if not value:
        return []
    if isinstance(value, dict):
        return [f"{k}={v}" for k, v in value.items()]
    if isinstance(value, str):
        return [o.strip() for o in value.split(";") if o.strip()]
    return [str(o) for o in value]


def ranks(vllm_config: Any) -> Tuple[int, int, int, int]:
    """(tp_rank, tp_size, pp_rank, pp_size) of this worker: vLLM's parallel
    groups where vLLM runs; else kv_connector_extra_config's kvferry_tp_rank
    and kvferry_pp_rank (a host that is not vLLM, and the tests)."""
    pc = vllm_config.parallel_config
    tp_size = int(getattr(pc, "tensor_parallel_size", 1) or 1)
    pp_size = int(getattr(pc, "pipeline_parallel_size", 1) or 1)
    extra = extra_config(vllm_config)
    if "kvferry_tp_rank" in extra:
        return int(extra["kvferry_tp_rank"]), tp_size, int(extra.get("kvferry_pp_rank", 0)), pp_size
    try:
        from vllm.distributed.parallel_state import (  # type: ignore
            get_pp_group,
            get_tensor_model_parallel_rank,
        )

        return int(get_tensor_model_parallel_rank()), tp_size, \
            int(get_pp_group().rank_in_group), pp_size
    except (ImportError, AssertionError, AttributeError):
        return 0, tp_size, 0, pp_size


@dataclasses.dataclass(eq=False)  # compared and hashed by identity: kept in sets
class _Send:
    rid: str
    spec: SendSpec
    room: Optional[kvferry.Room] = None
    sent: bool = False
    deferred: bool = False


@dataclasses.dataclass(eq=False)
class _Recv:
    rid: str
    spec: RecvSpec
    room: kvferry.Room
    aborted: bool = False
    deferred: bool = False


class WorkerSide:
    def __init__(self, vllm_config: Any, engine_id: str, producer: bool, consumer: bool,
                 kv_cache_config: Any = None):
        self.vllm_config = vllm_config
        self.num_blocks = getattr(kv_cache_config, "num_blocks", None)
        self.engine_id = engine_id
        self.producer, self.consumer = producer, consumer
        self.tp_rank, self.tp_size, self.pp_rank, self.pp_size = ranks(vllm_config)
        self.block_size = int(vllm_config.cache_config.block_size)
        self.use_mla = bool(getattr(vllm_config.model_config, "use_mla", False))
        self.engine: Optional[kvferry.Engine] = None
        self.layout: Optional[CacheLayout] = None
        self.region: Optional[int] = None
        self._sends: Dict[str, _Send] = {}
        self._pending: Dict[str, _Send] = {}  # sends whose room the next step creates
        self._recvs: Dict[str, _Recv] = {}
        # the watched rooms by handle (Engine.changed() names them so), and
        # the terminal ones not released yet, looked at every step
        self._by_handle: Dict[int, Any] = {}
        self._retry: Set[Any] = set()
        self._invalid: Set[int] = set()     # blocks of failed receives, not reported yet
        self._done_recv: Set[str] = set()   # receives to report this step
        # the metadata already taken, held: its id() cannot be reused by the next
        self._taken: Optional[KVFerryConnectorMetadata] = None
        # outcomes by kind and reason: "send ok", "recv peer lost", ...
        self.outcomes: collections.Counter = collections.Counter()
        self.stats = KVFerryStats()  # this interval's, for vLLM (take_stats)
        self.deferred = 0  # rooms that ended FAILED and had to wait for quiescence
        self.deferred_ids: Set[str] = set()  # ... their request ids

    # ---- setup
    def _total_kv_heads(self, local: int) -> int:
        mc = self.vllm_config.model_config
        fn = getattr(mc, "get_total_num_kv_heads", None)
        if callable(fn):
            return int(fn())
        return int(extra_config(self.vllm_config).get("kvferry_total_kv_heads",
                                                      local * self.tp_size))

    def _engine_args(self) -> Tuple[Optional[str], List[str]]:
        extra = extra_config(self.vllm_config)
        ov: List[str] = []
        port = extra.get("kvferry_listen_port", 0)
        if self.producer and port is not None:
            # 0: ephemeral, published by the handshake (None: the config's, or
            # no transport at all when nothing names one: the tests without RDMA)
            ov.append(f"rdma.listen_port={int(port)}")
        ov += _overrides(extra.get("kvferry_overrides"))
        per_rank = extra.get("kvferry_rank_overrides") or []
        k = self.pp_rank * self.tp_size + self.tp_rank
        if k < len(per_rank):
            ov += _overrides(per_rank[k])
        ov += _overrides(os.environ.get("KVFERRY_OVERRIDES"))
        return extra.get("kvferry_config") or os.environ.get("KVFERRY_CONFIG"), ov

    def register(self, kv_caches: Dict[str, Any]) -> None:
        first = next(iter(kv_caches.values()))
        shape = tuple(first.shape)
        local = 1 if self.use_mla else int(shape[3])
        self.layout = cache_layout(kv_caches, block_size=self.block_size, tp_rank=self.tp_rank,
                                   tp_size=self.tp_size,
                                   total_kv_heads=1 if self.use_mla else self._total_kv_heads(local),
                                   use_mla=self.use_mla, num_blocks=self.num_blocks)
        if not self.layout.sliceable:
            log.warning("kvferry: %s: this rank pairs only with ranks of the same TP size",
                        self.layout.why_not)
        config, ov = self._engine_args()
        self.engine = kvferry.Engine(config, overrides=ov)
        lay = self.layout
        self.region = self.engine.register_region(
            REGION, [b.addr for b in lay.buffers], [b.item_size for b in lay.buffers],
            lay.num_blocks, geometry=lay.geometry)
        where = self.addr() if self.producer else None
        log.info("kvferry: %s rank tp %d/%d pp %d/%d: %d buffers x %d blocks of %d tokens%s%s",
                 "prefill" if self.producer else "decode", self.tp_rank, self.tp_size,
                 self.pp_rank, self.pp_size, len(lay.buffers), lay.num_blocks, self.block_size,
                 " with geometry" if lay.sliceable else "",
                 f", listening on {where}" if where else "")

    def addr(self) -> Optional[str]:
        if not self.producer or self.engine is None:
            return None
        try:
            host, port = self.engine.listen_addr()
        except kvferry.KVFerryError as e:  # no transport: nobody can reach us
            log.error("kvferry: this prefill rank has no listener: %s", e)
            return None
        if host in ("0.0.0.0", "::", ""):
            raise ValueError("kvferry: rdma.listen_addr is a wildcard: set it to this rank's RDMA "
                             "address (kv_connector_extra_config kvferry_overrides or "
                             "kvferry_rank_overrides, or KVFERRY_OVERRIDES)")
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def handshake(self) -> KVFerryHandshake:
        assert self.layout is not None, "get_handshake_metadata before register_kv_caches"
        return KVFerryHandshake(self.engine_id, self.tp_rank, self.pp_rank, self.addr(),
                                self.layout.sliceable, self.layout.num_blocks)

    # ---- a step's metadata
    def take(self, meta: Optional[KVFerryConnectorMetadata]) -> None:
        """Start this step's receives and record its sends, once per
        metadata (start_load_kv or get_finished, whichever comes first)."""
        if meta is None or meta is self._taken or self.engine is None:
            return
        self._taken = meta
        if meta.recv or meta.send:
            log.debug("kvferry: step metadata: receive %s, send %s", sorted(meta.recv),
                      sorted(meta.send))
        for rid, spec in meta.recv.items():
            self._start_recv(rid, spec)
        if meta.send and not self.producer:
            log.error("kvferry: sends %s for a consumer-only rank: ignored", sorted(meta.send))
            return
        for rid, sspec in meta.send.items():
            self._sends[rid] = self._pending[rid] = _Send(rid, sspec)

    @property
    def eng(self) -> kvferry.Engine:
        """The engine, which register_kv_caches opened: every room is one of it."""
        assert self.engine is not None, "kvferry: a room before register_kv_caches"
        return self.engine

    @property
    def kv_region(self) -> int:
        assert self.region is not None, "kvferry: a room before register_kv_caches"
        return self.region

    def _start_recv(self, rid: str, spec: RecvSpec) -> None:
        info = spec.info
        m = rank_map(self.tp_size, self.tp_rank, info.tp_size, info.pp_size, info.use_mla)
        peers = [info.peers[t.pp][t.tp] for t in m.targets]
        user = pack_user_data(m.fan_out)
        eng = self.eng
        try:
            room = eng.receiver(spec.room, peers[0]) if len(peers) == 1 else \
                eng.receiver(spec.room, peers=peers)
        except (kvferry.KVFerryError, ValueError) as e:
            log.warning("request %s: room %#x: receiver not created: %s", rid, spec.room, e)
            if spec.report:  # nothing was asked of the prefill: done, its data missing
                self._report_failed_recv(rid, spec, f"create {getattr(e, 'reason', None) or e}")
            return
        r = self._recvs[rid] = _Recv(rid, spec, room)
        self._watch(room, r)
        blocks = np.asarray(spec.block_ids, dtype=np.int32)
        try:
            for k, t in enumerate(m.targets):
                if not blocks.size or t.dummy:
                    room.init_dummy(part=k, user_data=user)
                else:
                    room.init_regions({self.kv_region: blocks}, user, part=k)
            if spec.cancel:
                room.abort()
                r.aborted = True
        except kvferry.KVFerryError as e:  # the room is FAILED and says why
            log.warning("request %s: room %#x: %s", rid, spec.room, e)
        except ValueError as e:
            log.error("request %s: room %#x: %s", rid, spec.room, e)
            room.abort()

    def _report_failed_recv(self, rid: str, spec: RecvSpec, why: str) -> None:
        self._done_recv.add(rid)
        self._invalid.update(spec.block_ids)
        self._count(f"recv {why}")

    # ---- once per step
    def finished(self, finished_req_ids: Set[str]) -> Tuple[Optional[Set[str]], Optional[Set[str]]]:
        if self.engine is None:
            return None, None
        for rid in finished_req_ids or ():
            r = self._recvs.get(rid)
            if r is not None and not r.aborted:
                # the decode request finished while its KV was on the way
                # (aborted): fail the room; it is reported once quiescent
                r.aborted = True
                r.room.abort()
        self.engine.progress()
        changed = self._changed()
        sending = self._advance_sends(changed)
        self._advance_recvs(changed)
        recving, self._done_recv = self._done_recv, set()
        return sending or None, recving or None

    def _changed(self) -> List[Any]:
        """The sends and receives whose room changed state since the last
        step. Every watched room is in _by_handle until released; one that
        is not would be a bug here, counted and logged, never a KeyError in
        vLLM's step."""
        out = []
        for h, st in self.eng.changed():
            x = self._by_handle.get(h)
            if x is None:
                self.outcomes["changed: room not ours"] += 1
                log.error("kvferry: room handle %#x changed to %s but is not a request's", h,
                          kvferry.Poll(st).name)
                continue
            out.append(x)
        return out

    def load_errors(self) -> Set[int]:
        out, self._invalid = self._invalid, set()
        return out

    def _failure(self, room: kvferry.Room) -> str:
        """The outcome's name: the failure's reason, or "no decode" for a
        sender room whose bootstrap deadline passed before any decode rank
        asked (its blocks were never read)."""
        try:
            reason = room.failure().reason
        except kvferry.KVFerryError:
            return "unknown"
        if reason == "deadline" and room.role == "sender":
            try:
                room.user_data()
            except kvferry.KVFerryError:  # -EAGAIN: no ROOM_INFO came
                return "no decode"
        return reason

    def _advance_sends(self, changed: List[Any]) -> Set[str]:
        done: Set[str] = set()
        eng = self.eng
        for rid, s in list(self._pending.items()):
            del self._pending[rid]
            try:  # the decode's early ABORT, if one came, makes the room FAILED at once
                s.room = eng.sender(s.spec.room, n=0)  # as many as the decode ranks say
            except kvferry.KVFerryError as e:
                log.warning("request %s: room %#x: sender not created: %s", rid,
                            s.spec.room, e)
                self._count("send create failed")
                done.add(rid)
                del self._sends[rid]
                continue
            self._watch(s.room, s)
            self._step_send(s, done)  # its state now: watching reports only what follows
        for s in changed:
            if isinstance(s, _Send):
                self._step_send(s, done)
        for s in [x for x in self._retry if isinstance(x, _Send)]:
            self._step_send(s, done)
        return done

    def _watch(self, room: kvferry.Room, x: Any) -> None:
        """The room's state changes come out of Engine.changed() from now on:
        a step looks at the rooms that changed and those waiting to be
        released (_retry), not at every room."""
        self.eng.watch(room)
        self._by_handle[room.handle] = x

    def _forget(self, x: Any) -> None:
        """x's room was released (or never watched): nothing of it is left."""
        self._by_handle.pop(x.room.handle, None)
        self._retry.discard(x)

    def _step_send(self, s: _Send, done: Set[str]) -> None:
        """One look at a sender room: send when the decode's lists are in,
        release when terminal; a terminal room not released yet (writes may
        still read the blocks) is looked at again every step."""
        assert s.room is not None
        st = s.room.poll()
        if st == kvferry.Poll.WAITING_FOR_INPUT and not s.sent:
            self._send(s)
            st = s.room.poll()
        rs = _room_stats(s.room) if st in TERMINAL else None
        if st == kvferry.Poll.SUCCESS:
            if not s.room.release():
                self._retry.add(s)
                return
            self._count("send ok", rs)
        elif st == kvferry.Poll.FAILED:
            why = self._failure(s.room)
            if not s.room.release():  # writes may still read the blocks
                if not s.deferred:
                    s.deferred = True
                    self.deferred += 1
                    self.deferred_ids.add(s.rid)
                self._retry.add(s)
                return
            self._count(f"send {why}", rs)
            log.warning("request %s: room %#x failed (%s); its blocks are freed", s.rid,
                        s.spec.room, why)
        else:
            return
        self._forget(s)
        done.add(s.rid)
        del self._sends[s.rid]

    def _send(self, s: _Send) -> None:
        room, region = s.room, self.kv_region
        assert room is not None
        s.sent = True
        try:
            n, _dummies = room.receivers()
            wants = {room.peer_count(region, k) for k in range(n)} - {0}
            if len(wants) > 1:
                raise ValueError(f"the decode ranks ask for different block counts {sorted(wants)}")
            src = tail_blocks(s.spec.block_ids, wants.pop() if wants else 0)
            room.send_chunk([(region, 0, np.asarray(src, dtype=np.int32))] if src else [],
                            last=True)
        except ValueError as e:
            log.error("request %s: room %#x: %s; aborted", s.rid, s.spec.room, e)
            room.abort()
        except kvferry.KVFerryError as e:  # the room is FAILED and says why
            log.warning("request %s: room %#x: send: %s", s.rid, s.spec.room, e)

    def _advance_recvs(self, changed: List[Any]) -> None:
        for r in changed:
            if isinstance(r, _Recv):
                self._step_recv(r)
        for r in [x for x in self._retry if isinstance(x, _Recv)]:
            self._step_recv(r)

    def _step_recv(self, r: _Recv) -> None:
        """One look at a receiver room: report it once released; a terminal
        room not released yet (a late write could still land) is looked at
        again every step."""
        rid = r.rid
        st = r.room.poll()
        rs = _room_stats(r.room) if st in TERMINAL else None
        if st == kvferry.Poll.SUCCESS:
            if not r.room.release():
                self._retry.add(r)
                return
            if r.spec.report:
                self._done_recv.add(rid)
            self._count("recv ok" if r.spec.report else "recv no data", rs)
        elif st == kvferry.Poll.FAILED:
            why = self._failure(r.room)
            if not r.room.release():  # a late write could still land: keep the blocks
                if not r.deferred:
                    r.deferred = True
                    self.deferred += 1
                    self.deferred_ids.add(rid)
                self._retry.add(r)
                return
            if r.spec.report:
                self._done_recv.add(rid)
                if not r.aborted:
                    self._invalid.update(r.spec.block_ids)
            self._count(f"recv {'aborted' if r.aborted else why}", rs)
            if not r.aborted:
                log.warning("request %s: room %#x failed (%s); %s", rid, r.spec.room, why,
                            f"{len(r.spec.block_ids)} blocks reported as load errors"
                            if r.spec.report else "no data was asked for")
        else:
            return
        self._forget(r)
        del self._recvs[rid]

    # ---- outcomes, vLLM's metrics
    def _count(self, outcome: str, rs: Any = None) -> None:
        """A room (or a request without one) ended: its outcome, and its bytes
        and time for vLLM's connector stats."""
        self.outcomes[outcome] += 1
        nbytes = int(rs.bytes) if rs is not None else 0
        secs = (rs.state_ns - rs.created_ns) / 1e9 if rs is not None else 0.0
        self.stats.record(outcome, nbytes, max(secs, 0.0))

    def take_stats(self) -> Optional[KVFerryStats]:
        """The rooms that ended since the last call; None when none did."""
        if self.stats.is_empty():
            return None
        st, self.stats = self.stats, KVFerryStats()
        return st

    # ---- introspection, shutdown
    @property
    def live(self) -> int:
        return len(self._sends) + len(self._recvs)

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None
