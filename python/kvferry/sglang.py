# SPDX-License-Identifier: Apache-2.0
"""kvferry as a transfer backend of SGLang's disaggregation package.

The classes have the names and method signatures SGLang expects of a backend
(sglang.srt.disaggregation.base.conn): a manager built from its KVArgs, a
sender, a receiver and a bootstrap server. Where SGLang is importable they
subclass its bases; where it is not, they are plain classes with the same
interface (the module then defines KVArgs and KVPoll itself), so it imports
and is tested without SGLang. docs/sglang.md says how to wire it in.

One room per request (bootstrap_room) on each rank pair. The engine is
driven by KVFerryKVManager.progress(), once per scheduler iteration; a
sender's or receiver's poll() calls it too when it has not run for
progress_interval_s, so an unpatched event loop still moves (and keeps the
heartbeats going).

What moves: three kinds of regions (kvf_region_register), matched with the
peer's by name: "kv" (the KV buffers, an item = one page), "aux" (the
metadata buffers, an item = one request's row: first output token,
logprobs) and, for hybrid models, one "state-<type>" per state type (an item =
one request's state slot). The decode's send_metadata() is one ROOM_INFO
with a list per region and decode_prefix_len as user data; each send() of
a chunked prefill posts that chunk's pages at once (kvf_sender_send_chunk),
and the last one carries the aux row and the state slots. A decode that
holds a prefix of the request already asks for fewer pages than the
prefill has: the sender skips the first ones (the difference).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import struct
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

import kvferry

log = logging.getLogger("kvferry.sglang")

try:  # SGLang's bases where it is installed
    from sglang.srt.disaggregation.base.conn import (  # type: ignore
        BaseKVBootstrapServer,
        BaseKVManager,
        BaseKVReceiver,
        BaseKVSender,
        KVArgs,
        KVPoll,
    )

    try:
        from sglang.srt.disaggregation.base.conn import KVTransferMetric  # type: ignore
    except ImportError:  # older SGLang: no metric class
        KVTransferMetric = None  # type: ignore
    HAVE_SGLANG = True
except ImportError:
    HAVE_SGLANG = False

    class KVArgs:  # type: ignore[no-redef]
        """What SGLang's KVArgs carries that this backend reads."""

        engine_rank: int = 0
        kv_data_ptrs: List[int]
        kv_data_lens: List[int]
        kv_item_lens: List[int]
        aux_data_ptrs: List[int] = []
        aux_data_lens: List[int] = []
        aux_item_lens: List[int] = []
        state_data_ptrs: List[Any] = []
        state_data_lens: List[Any] = []
        state_item_lens: List[Any] = []
        ib_device: str = ""
        gpu_id: int = 0
        page_size: int = 1
        system_dp_rank: int = 0
        pp_rank: int = 0

    class KVPoll:  # type: ignore[no-redef]
        Failed = 0
        Bootstrapping = 1
        WaitingForInput = 2
        Transferring = 3
        Success = 4

    class BaseKVManager:  # type: ignore[no-redef]
        pass

    class BaseKVSender:  # type: ignore[no-redef]
        pass

    class BaseKVReceiver:  # type: ignore[no-redef]
        pass

    class BaseKVBootstrapServer:  # type: ignore[no-redef]
        pass

    KVTransferMetric = None  # type: ignore


class KVTransferError(Exception):
    """A request's transfer failed: raised by failure_exception()."""

    def __init__(self, bootstrap_room: int, failure_reason: str):
        super().__init__(failure_reason)
        self.bootstrap_room = bootstrap_room
        self.failure_reason = failure_reason

    def __str__(self) -> str:
        return f"KVTransferError(bootstrap_room={self.bootstrap_room}): {self.failure_reason}"


@dataclasses.dataclass
class TransferMetric:
    """Used as get_transfer_metric()'s result where SGLang has no KVTransferMetric."""

    transfer_latency_s: Optional[float] = None
    alloc_latency_s: Optional[float] = None
    transfer_total_bytes: Optional[int] = None


def _mode_name(mode: Any) -> str:
    name = str(getattr(mode, "value", mode)).lower()
    if name not in ("prefill", "decode"):
        raise ValueError(f"disaggregation mode {mode!r}: kvferry serves 'prefill' or 'decode'")
    return name


# SGLang's environment knobs and the kvferry keys they set (docs/sglang.md).
SGLANG_ENV_KEYS = {
    "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": ("deadlines.bootstrap_s", 1),
    "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": ("deadlines.receiver_waiting_s", 1),
    "SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL": ("heartbeat.interval_ms", 1000),
    "SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE": ("heartbeat.misses", 1),
}


def engine_overrides(mode: str, kv_args: Any, env: Optional[Dict[str, str]] = None) -> List[str]:
    """The overrides a rank opens its engine with, in order (a later one wins):
    SGLang's timeouts from its environment, the rank's device and, on prefill,
    an ephemeral port; then KVFERRY_OVERRIDES ("key=value;key=value"), which
    wins over all of them."""
    env = os.environ if env is None else env
    out = []
    for var, (key, scale) in SGLANG_ENV_KEYS.items():
        if env.get(var):
            out.append(f"{key}={int(float(env[var]) * scale)}")
    if getattr(kv_args, "ib_device", None):
        # SGLang may list several ("mlx5_0,mlx5_1"): one engine, one device
        out.append(f"rdma.device={str(kv_args.ib_device).split(',')[0]}")
    if mode == "prefill":
        out.append("rdma.listen_port=0")
    out += [o.strip() for o in env.get("KVFERRY_OVERRIDES", "").split(";") if o.strip()]
    return out


# The receiver's user data: decode_prefix_len, little-endian u64.
USER_DATA = struct.Struct("<Q")


def _state_groups(x: Any) -> List[List[Any]]:
    """SGLang's state fields are one list per state type (newer) or one flat
    list (older, one type): as a list of groups."""
    x = list(x or [])
    if x and not isinstance(x[0], (list, tuple, np.ndarray)):
        return [x]
    return [list(g) for g in x]


def _nitems(lens: List[int], item_lens: List[int], what: str) -> int:
    counts = {int(n) // int(i) for n, i in zip(lens, item_lens)}
    if len(counts) != 1 or 0 in counts:
        raise ValueError(f"{what}: buffers of different item counts or empty ({sorted(counts)})")
    return counts.pop()


class KVFerryKVManager(BaseKVManager):
    """One kvferry engine per rank, its regions, the rooms waiting to be released."""

    def __init__(self, args: Any, disaggregation_mode: Any, server_args: Any = None,
                 is_mla_backend: Optional[bool] = False, *, config_path: Optional[str] = None,
                 overrides: Optional[List[str]] = None, progress_interval_s: float = 0.001):
        self.kv_args = args
        self.mode = _mode_name(disaggregation_mode)
        self.server_args = server_args
        self.is_mla_backend = bool(is_mla_backend)
        self.engine = kvferry.Engine(
            config_path if config_path is not None else os.environ.get("KVFERRY_CONFIG"),
            overrides=(overrides if overrides is not None
                       else engine_overrides(self.mode, args)))
        self.page_bytes = [int(x) for x in args.kv_item_lens]
        self.num_pages = _nitems(args.kv_data_lens, args.kv_item_lens, "kv buffers")
        self.kv_region = self._region("kv", args.kv_data_ptrs, args.kv_data_lens,
                                      args.kv_item_lens)
        self.aux_region = None
        if getattr(args, "aux_data_ptrs", None):
            self.aux_region = self._region("aux", args.aux_data_ptrs, args.aux_data_lens,
                                           args.aux_item_lens)
        types = list(getattr(args, "state_types", None) or [])
        self.state_regions = []
        for k, (ptrs, lens, items) in enumerate(zip(
                _state_groups(getattr(args, "state_data_ptrs", None)),
                _state_groups(getattr(args, "state_data_lens", None)),
                _state_groups(getattr(args, "state_item_lens", None)))):
            name = f"state-{getattr(types[k], 'value', types[k])}" if k < len(types) else f"state{k}"
            self.state_regions.append(self._region(name[:kvferry.REGION_NAME_MAX], ptrs, lens,
                                                   items))
        self.progress_interval_ns = int(progress_interval_s * 1e9)
        self._last_progress_ns = 0
        # rooms cleared while not yet quiescent: released by a later progress()
        self._parked: Dict[Tuple[str, int], Tuple[kvferry.Room, Any]] = {}
        # page_release_hook(receiver): called when a parked receiver's room is
        # released: its kv_indices, aux_index and state_indices may be reused
        # (docs/sglang.md, "Failed rooms")
        self.page_release_hook: Optional[Callable[[Any], None]] = None
        self._routes: Dict[Tuple[str, int, int], str] = {}
        log.info("kvferry %s rank %s: %d pages x %d buffers, aux %s, %d state regions",
                 self.mode, getattr(args, "engine_rank", 0), self.num_pages,
                 len(self.page_bytes), "yes" if self.aux_region is not None else "no",
                 len(self.state_regions))

    def _region(self, name: str, ptrs: List[int], lens: List[int], items: List[int]) -> int:
        n = _nitems(lens, items, f"{name} buffers")
        return self.engine.register_region(name, [int(p) for p in ptrs],
                                           [int(i) for i in items], n)

    # ---- driving the engine
    def progress(self) -> int:
        """Once per scheduler iteration: events, deadlines, heartbeats; then the
        parked rooms that became quiescent are released."""
        n = self.engine.progress()
        self._last_progress_ns = time.monotonic_ns()
        if self._parked:
            self._release_parked()
        return n

    def maybe_progress(self) -> None:
        """progress() unless it ran within progress_interval_s: what poll() calls."""
        if time.monotonic_ns() - self._last_progress_ns >= self.progress_interval_ns:
            self.progress()

    def _release_parked(self) -> None:
        for key, (room, owner) in list(self._parked.items()):
            if room.release():
                del self._parked[key]
                log.info("room %#x: quiescent, released after clear()", room.id)
                if owner is not None and self.page_release_hook is not None:
                    self.page_release_hook(owner)

    def park(self, room: kvferry.Room, owner: Any) -> bool:
        """Release room now if it can be; else keep it for a later progress().
        True when it was released now."""
        if room.release():
            return True
        self._parked[(room.role, room.id)] = (room, owner)
        return False

    @property
    def parked(self) -> int:
        return len(self._parked)

    # ---- bootstrap
    def _bootstrap_url(self, addr: str) -> str:
        return f"http://{addr}/route"

    def register_to_bootstrap(self) -> None:
        """Prefill: publish this rank's kvferry address to its bootstrap server
        (server_args.host : server_args.disaggregation_bootstrap_port)."""
        if self.mode != "prefill":
            return
        host, port = self.engine.listen_addr()
        if host in ("0.0.0.0", "::"):
            raise ValueError("rdma.listen_addr is a wildcard: set it to this rank's RDMA "
                             "interface address (KVFERRY_OVERRIDES='rdma.listen_addr=...')")
        sa = self.server_args
        bs_host = getattr(sa, "host", "127.0.0.1")
        bs_port = getattr(sa, "disaggregation_bootstrap_port", 8998)
        body = json.dumps({
            "role": "prefill",
            "dp_rank": int(getattr(self.kv_args, "system_dp_rank", 0) or 0),
            "engine_rank": int(getattr(self.kv_args, "engine_rank", 0)),
            "tp_size": int(getattr(sa, "tp_size", 1) or 1),
            "addr": _host_port(host, port),
        }).encode()
        req = urllib.request.Request(self._bootstrap_url(f"{bs_host}:{bs_port}"), data=body,
                                     method="PUT", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()
        log.info("prefill rank %s published %s to %s:%s", self.kv_args.engine_rank,
                 _host_port(host, port), bs_host, bs_port)

    def resolve(self, bootstrap_addr: str, dp_rank: int) -> str:
        """Decode: the kvferry address of the prefill rank this rank reads from
        (same engine rank, modulo the prefill's tp size), cached."""
        me = int(getattr(self.kv_args, "engine_rank", 0))
        key = (bootstrap_addr, dp_rank, me)
        if key not in self._routes:
            q = urllib.parse.urlencode({"dp_rank": dp_rank, "engine_rank": me})
            with urllib.request.urlopen(f"{self._bootstrap_url(bootstrap_addr)}?{q}",
                                        timeout=10) as r:
                self._routes[key] = json.loads(r.read())["addr"]
        return self._routes[key]

    def close(self) -> None:
        self.engine.close()


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _failure_text(room: kvferry.Room) -> str:
    f = room.failure()
    return f"{f.reason}: {f.detail}"


class KVFerryKVSender(BaseKVSender):
    """Prefill side of one request: a kvferry sender room."""

    def __init__(self, mgr: KVFerryKVManager, bootstrap_addr: str, bootstrap_room: int,
                 dest_tp_ranks: Optional[List[int]] = None, pp_rank: int = 0,
                 req_has_disagg_prefill_dp_rank: bool = False):
        self.kv_mgr = mgr
        self.bootstrap_room = int(bootstrap_room)
        self.room = mgr.engine.sender(self.bootstrap_room)
        self.num_kv_indices: Optional[int] = None
        self.aux_index: Optional[int] = None
        self._sent = 0       # pages of the request handed to send() so far
        self._skip: Optional[int] = None  # leading pages the decode has already
        self._cleared = False

    def init(self, num_kv_indices: int, aux_index: Optional[int] = None) -> None:
        self.num_kv_indices = int(num_kv_indices)
        self.aux_index = aux_index

    def _fail(self, why: str) -> None:
        self.room.abort()
        raise ValueError(f"room {self.bootstrap_room}: {why}")

    def send(self, kv_indices: Any, state_indices: Optional[List] = None,
             token_position_offset: int = 0) -> None:
        """One chunk of the request's pages, in order: posted now. The last
        chunk (the pages reach init()'s count) also carries the aux row and
        the state slots, and completes the room."""
        if self.num_kv_indices is None:
            raise RuntimeError(f"room {self.bootstrap_room}: send() before init()")
        mgr = self.kv_mgr
        idx = np.asarray(kv_indices)
        pos, n = self._sent, int(idx.size)
        self._sent += n
        if self._sent > self.num_kv_indices:
            self._fail(f"{self._sent} pages sent, init() said {self.num_kv_indices}")
        try:
            if self._skip is None:  # the decode's list is known from WaitingForInput on
                want = self.room.peer_count(mgr.kv_region)
                if want > self.num_kv_indices:
                    self._fail(f"the decode asks for {want} pages, the request has "
                               f"{self.num_kv_indices}")
                self._skip = self.num_kv_indices - want
            parts = []
            first = max(pos, self._skip)
            if first < pos + n:
                parts.append((mgr.kv_region, first - self._skip, idx[first - pos:]))
            last = self._sent == self.num_kv_indices
            if last:
                parts += self._last_parts(state_indices)
            if parts or last:
                self.room.send_chunk(parts, last=last)
        except kvferry.KVFerryError as e:
            # the room is FAILED and says why; poll() reports it
            log.warning("room %#x: send failed: %s", self.bootstrap_room, e)

    def _last_parts(self, state_indices: Optional[List]) -> List[Tuple[int, int, Any]]:
        """The aux row and the state slots the decode asked for."""
        mgr, parts = self.kv_mgr, []
        if mgr.aux_region is not None and self.aux_index is not None and \
                self.room.peer_count(mgr.aux_region):
            parts.append((mgr.aux_region, 0, [int(self.aux_index)]))
        groups = _state_groups(state_indices)
        if len(groups) > len(mgr.state_regions):
            self._fail(f"{len(groups)} state groups, {len(mgr.state_regions)} registered")
        for region, g in zip(mgr.state_regions, groups):
            if g and self.room.peer_count(region):
                parts.append((region, 0, np.asarray(g)))
        return parts

    def pop_decode_prefix_len(self) -> int:
        """The decode's decode_prefix_len, from the room's user data."""
        try:
            data = self.room.user_data()
        except kvferry.KVFerryError:
            return 0  # no ROOM_INFO yet
        return USER_DATA.unpack(data)[0] if len(data) == USER_DATA.size else 0

    def should_send_kv_chunk(self, num_pages: int, last_chunk: bool) -> bool:
        # the last chunk carries the aux row and state even with no page
        return num_pages > 0 or last_chunk

    def poll(self) -> int:
        self.kv_mgr.maybe_progress()
        try:
            return self.room.poll()
        except kvferry.KVFerryError:
            return KVPoll.Failed  # released (cleared) already

    def failure_exception(self) -> None:
        raise KVTransferError(self.bootstrap_room, _failure_text(self.room))

    def get_transfer_metric(self) -> Any:
        st = self.room.stats()
        lat = (st.success_ns - st.send_ns) / 1e9 if st.success_ns and st.send_ns else None
        cls = KVTransferMetric or TransferMetric
        return cls(transfer_latency_s=lat, transfer_total_bytes=st.bytes or None)

    def abort(self) -> None:
        self.room.abort()

    def clear(self) -> None:
        """Hand the room back; a failed room that is not yet quiescent is kept
        by the manager and released by a later progress()."""
        if self._cleared:
            return
        self._cleared = True
        if self.room.poll() not in (KVPoll.Success, KVPoll.Failed):
            self.room.abort()  # SGLang clears a request it gave up on
        self.kv_mgr.park(self.room, None)


class KVFerryKVReceiver(BaseKVReceiver):
    """Decode side of one request: a kvferry receiver room, created once the
    prefill rank's address is known (init)."""

    def __init__(self, mgr: KVFerryKVManager, bootstrap_addr: str,
                 bootstrap_room: Optional[int] = None, prefill_dp_rank: Optional[int] = None):
        self.kv_mgr = mgr
        self.bootstrap_addr = bootstrap_addr
        self.bootstrap_room = int(bootstrap_room or 0)
        self.room: Optional[kvferry.Room] = None
        self.peer: Optional[str] = None
        self.kv_indices: Optional[np.ndarray] = None
        self.aux_index: Optional[int] = None
        self.state_indices: Optional[List] = None
        self._failure: Optional[str] = None  # failed before its room existed
        self._cleared = False
        self.pages_deferred = False
        if prefill_dp_rank is not None:  # older SGLang: known at construction
            self.init(prefill_dp_rank)

    def init(self, prefill_dp_rank: int = 0) -> None:
        """Find the prefill rank (bootstrap server) and create the room."""
        if self.room is not None or self._failure is not None:
            return
        try:
            self.peer = self.kv_mgr.resolve(self.bootstrap_addr, int(prefill_dp_rank or 0))
            self.room = self.kv_mgr.engine.receiver(self.bootstrap_room, self.peer)
        except (OSError, ValueError, KeyError) as e:
            self._failure = f"bootstrap {self.bootstrap_addr}: {e}"
            log.warning("room %#x: %s", self.bootstrap_room, self._failure)

    def send_metadata(self, kv_indices: Any, aux_index: Optional[int] = None,
                      state_indices: Optional[List] = None,
                      decode_prefix_len: Optional[int] = None) -> None:
        """The destination pages, aux row and state slots, and the prefix
        length: one ROOM_INFO to the prefill rank."""
        if self.room is None:
            if self._failure is None:
                self._failure = "send_metadata() before init()"
            return
        mgr = self.kv_mgr
        self.kv_indices = np.asarray(kv_indices)
        self.aux_index, self.state_indices = aux_index, state_indices
        lists = {}
        if self.kv_indices.size:
            lists[mgr.kv_region] = self.kv_indices
        if aux_index is not None:
            if mgr.aux_region is None:
                raise ValueError("send_metadata: an aux_index, but no aux buffers registered")
            lists[mgr.aux_region] = [int(aux_index)]
        groups = _state_groups(state_indices)
        if len(groups) > len(mgr.state_regions):
            raise ValueError(f"send_metadata: {len(groups)} state groups, "
                             f"{len(mgr.state_regions)} registered")
        for region, g in zip(mgr.state_regions, groups):
            if len(g):
                lists[region] = np.asarray(g)
        try:
            self.room.init_regions(lists, USER_DATA.pack(int(decode_prefix_len or 0)))
        except kvferry.KVFerryError as e:
            log.warning("room %#x: init failed: %s", self.bootstrap_room, e)

    def poll(self) -> int:
        if self._failure is not None:
            return KVPoll.Failed
        if self.room is None:
            return KVPoll.Bootstrapping
        self.kv_mgr.maybe_progress()
        try:
            st = self.room.poll()
        except kvferry.KVFerryError:
            return KVPoll.Failed
        # Created and waiting for send_metadata: ready for it, as SGLang reads
        # WaitingForInput on the decode side.
        return KVPoll.WaitingForInput if st == KVPoll.Bootstrapping else st

    def failure_exception(self) -> None:
        reason = self._failure if self._failure is not None else _failure_text(self.room)
        raise KVTransferError(self.bootstrap_room, reason)

    def abort(self) -> None:
        if self.room is not None:
            self.room.abort()
        elif self._failure is None:
            self._failure = "aborted before bootstrap"

    def clear(self) -> None:
        """Hand the room back. A failed room that is not yet quiescent (an RDMA
        write may still land in its pages) is kept by the manager and
        released by a later progress(), which then calls
        manager.page_release_hook(receiver): until then pages_deferred is True
        and SGLang must not reuse its kv_indices, aux_index or state_indices."""
        if self._cleared or self.room is None:
            self._cleared = True
            return
        self._cleared = True
        if self.room.poll() not in (KVPoll.Success, KVPoll.Failed):
            self.room.abort()
        self.pages_deferred = not self.kv_mgr.park(self.room, self)


class KVFerryKVBootstrapServer(BaseKVBootstrapServer):
    """Where the decode ranks find each prefill rank's kvferry address: an HTTP
    server in a thread of the prefill's process.
        PUT /route  {"role": "prefill", "dp_rank", "engine_rank", "tp_size", "addr"}
        GET /route?dp_rank=D&engine_rank=R -> {"addr": "host:port", "tp_size": N}
    A decode rank R reads from prefill rank R mod tp_size of its dp group."""

    def __init__(self, host: str, port: int):
        self.routes: Dict[Tuple[int, int], Dict[str, Any]] = {}
        self.tp_size: Dict[int, int] = {}
        self._lock = threading.Lock()
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt: str, *args: Any) -> None:
                log.debug("bootstrap: " + fmt, *args)

            def _reply(self, code: int, obj: Any) -> None:
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_PUT(self) -> None:  # noqa: N802 - http.server's name
                try:
                    n = int(self.headers.get("Content-Length", 0))
                    d = json.loads(self.rfile.read(n))
                    key = (int(d["dp_rank"]), int(d["engine_rank"]))
                    entry = {"addr": str(d["addr"]), "tp_size": int(d.get("tp_size", 1))}
                except (ValueError, KeyError, TypeError) as e:
                    self._reply(400, {"error": f"bad registration: {e}"})
                    return
                with srv._lock:
                    srv.routes[key] = entry
                    srv.tp_size[key[0]] = entry["tp_size"]
                log.info("bootstrap: prefill dp %d rank %d at %s", key[0], key[1], entry["addr"])
                self._reply(200, {"ok": True})

            def do_GET(self) -> None:  # noqa: N802
                u = urllib.parse.urlparse(self.path)
                if u.path != "/route":
                    self._reply(404, {"error": f"no {u.path}"})
                    return
                q = urllib.parse.parse_qs(u.query)
                try:
                    dp = int(q.get("dp_rank", ["0"])[0])
                    rank = int(q["engine_rank"][0])
                except (ValueError, KeyError) as e:
                    self._reply(400, {"error": f"bad query: {e}"})
                    return
                with srv._lock:
                    tp = srv.tp_size.get(dp)
                    entry = srv.routes.get((dp, rank % tp)) if tp else None
                if entry is None:
                    self._reply(404, {"error": f"prefill dp {dp} rank {rank} not registered"})
                else:
                    self._reply(200, entry)

        self.httpd = ThreadingHTTPServer((host, int(port)), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       name="kvferry-bootstrap", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


# The names SGLang's get_kv_class maps to (docs/sglang.md, "The patch").
KVManager = KVFerryKVManager
KVSender = KVFerryKVSender
KVReceiver = KVFerryKVReceiver
KVBootstrapServer = KVFerryKVBootstrapServer
