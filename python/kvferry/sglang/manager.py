# SPDX-License-Identifier: Apache-2.0
"""KVFerryKVManager: one kvferry engine per SGLang rank, its regions, its
place in SGLang's bootstrap protocol, and the rooms waiting to be released."""
from __future__ import annotations

import json
import logging
import os
import struct
import time
import weakref
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import kvferry

from ..ranks import Geometry, pack_fan_user_data, parse_fan_user_data
from . import bootstrap as bs
from ._compat import BaseKVManager, PrefillInfo
from .layout import Layout, RankMap, kv_geometry, layout_of, rank_map

log = logging.getLogger("kvferry.sglang")

# SGLang's environment knobs and the kvferry keys they set (docs/sglang.md).
SGLANG_ENV_KEYS = {
    "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": ("deadlines.bootstrap_s", 1),
    "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": ("deadlines.receiver_waiting_s", 1),
    "SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL": ("heartbeat.interval_ms", 1000),
    "SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE": ("heartbeat.misses", 1),
}

# A receiver's user data: the fan-out tag (kvferry.ranks: how many decode
# ranks the prefill rank serves for this room, SGLang's
# required_dst_info_num), then decode_prefix_len (u64, little-endian).
PREFIX_LEN = struct.Struct("<Q")


def engine_overrides(mode: str, kv_args: Any,
                     env: Optional[Mapping[str, str]] = None) -> List[str]:
    """The overrides a rank opens its engine with, in order (a later one wins):
    SGLang's timeouts from its environment, the rank's device and, on prefill,
    an ephemeral port; then KVFERRY_OVERRIDES ("key=value;key=value"), which
    wins over all of them."""
    env = os.environ if env is None else env
    out: List[str] = []
    for var, (key, scale) in SGLANG_ENV_KEYS.items():
        if env.get(var):
            out.append(f"{key}={int(float(env[var]) * scale)}")
    devices = rank_devices(getattr(kv_args, "ib_device", None), getattr(kv_args, "gpu_id", 0))
    if devices:
        # one device keeps rdma.device's meaning (listen_addr, source_addr as
        # set); several are a rail each (docs/sglang.md "Several NICs")
        out.append(f"rdma.{'devices' if ',' in devices else 'device'}={devices}")
    if mode == "prefill":
        out.append("rdma.listen_port=0")
    out += [o.strip() for o in env.get("KVFERRY_OVERRIDES", "").split(";") if o.strip()]
    return out


def rank_devices(ib_device: Optional[str], gpu_id: Any) -> str:
    """SGLang's --disaggregation-ib-device for the rank on GPU gpu_id, as
    kvferry's rdma.devices ("a,b", "" for none): a list every GPU shares
    ("mlx5_0,mlx5_1"), a per-GPU JSON map ('{"0": "mlx5_0,mlx5_1", "1":
    "mlx5_2"}'), or the path of a .json file holding that map. A map without
    this GPU is an error: that rank would otherwise pick a device at random."""
    text = str(ib_device or "").strip()
    if not text:
        return ""
    if text.endswith(".json"):
        with open(text, encoding="utf-8") as f:
            text = f.read().strip()
    if text.startswith("{"):
        mapping = {str(k).strip(): v for k, v in json.loads(text).items()}
        if str(gpu_id) not in mapping:
            raise ValueError(f"--disaggregation-ib-device names GPUs {sorted(mapping)}, "
                             f"not this rank's GPU {gpu_id}")
        text = str(mapping[str(gpu_id)])
    devices = list(dict.fromkeys(d.strip() for d in text.split(",") if d.strip()))
    return ",".join(devices)


def mode_name(mode: Any) -> str:
    name = str(getattr(mode, "value", mode)).lower()
    if name not in ("prefill", "decode"):
        raise ValueError(f"disaggregation mode {mode!r}: kvferry serves 'prefill' or 'decode'")
    return name


def state_groups(x: Any) -> List[List[Any]]:
    """SGLang's state fields are one list per state type (newer) or one flat
    list (older, one type): as a list of groups."""
    import numpy as np

    x = list(x or [])
    if x and not isinstance(x[0], (list, tuple, np.ndarray)):
        return [x]
    return [list(g) for g in x]


def _nitems(lens: List[int], item_lens: List[int], what: str) -> int:
    counts = {int(n) // int(i) for n, i in zip(lens, item_lens)}
    if len(counts) != 1 or 0 in counts:
        raise ValueError(f"{what}: buffers of different item counts or empty ({sorted(counts)})")
    return counts.pop()


def host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def peer_list(rank_ip: str, port: int) -> str:
    """A prefill's rank_ip may list one address a rail ("10.0.0.1,10.0.1.1",
    every rail on one port: Engine.endpoint()); as kvferry's peer list."""
    return ",".join(host_port(h.strip(), port) for h in rank_ip.split(","))


class KVFerryKVManager(BaseKVManager):
    """One kvferry engine per rank, its regions, the rooms waiting to be released."""

    def __init__(self, args: Any, disaggregation_mode: Any, server_args: Any = None,
                 is_mla_backend: Optional[bool] = False, *, config_path: Optional[str] = None,
                 overrides: Optional[List[str]] = None, progress_interval_s: float = 0.001):
        self.kv_args = args
        self.mode = mode_name(disaggregation_mode)
        self.disaggregation_mode = disaggregation_mode
        self.server_args = server_args
        self.is_mla_backend = bool(is_mla_backend)
        self.layout: Layout = layout_of(server_args, args)
        self.engine = kvferry.Engine(
            config_path if config_path is not None else os.environ.get("KVFERRY_CONFIG"),
            overrides=(overrides if overrides is not None
                       else engine_overrides(self.mode, args)))
        self._register_regions(args)
        self.progress_interval_ns = int(progress_interval_s * 1e9)
        self._last_progress_ns = 0
        # rooms cleared while not yet quiescent: released by a later progress()
        self._parked: Dict[Tuple[str, int], Tuple[kvferry.Room, Any]] = {}
        # prefill: requests failed before any decode rank asked for their room
        # (room id -> until when a late ROOM_INFO is answered; refuse())
        self._refused: Dict[int, float] = {}
        self._refused_seen = -1  # Stats.early_infos_parked when last looked
        self.refused_answered = 0  # late ROOM_INFOs answered with an abort
        self.refused_dropped = 0   # refusals forgotten early: the table was full
        # page_release_hook(receiver): called when a parked receiver's room is
        # released: its kv_indices, aux_index and state_indices may be reused
        # (docs/sglang.md, "Failed rooms")
        self.page_release_hook: Optional[Callable[[Any], None]] = None
        # decode: SGLang's names (decode.py reads prefill_info_table)
        self.prefill_info_table: Dict[str, Any] = {}
        self.enable_staging = False
        self._peers: Dict[Tuple[str, int, int, int], str] = {}
        # decode: receivers not yet past their bootstrap, per bootstrap
        # address: a refused bootstrap token fails them all at once
        self._waiting: Dict[str, "weakref.WeakSet[Any]"] = {}
        log.info("kvferry %s rank %d (attn TP %d/%d, PP %d/%d): %d pages x %d buffers%s, "
                 "aux %s, %d state regions", self.mode, self.layout.engine_rank,
                 self.layout.attn_tp_rank, self.layout.attn_tp_size, self.layout.pp_rank,
                 self.layout.pp_size, self.num_pages, len(self.page_bytes),
                 " with geometry" if self.kv_geometry else "",
                 "yes" if self.aux_region is not None else "no", len(self.state_regions))
        if self.mode == "prefill" and server_args is not None:
            self.register_to_bootstrap()  # as SGLang's CommonKVManager.__init__ does

    def _register_regions(self, args: Any) -> None:
        self.page_bytes = [int(x) for x in args.kv_item_lens]
        self.num_pages = _nitems(args.kv_data_lens, args.kv_item_lens, "kv buffers")
        self.kv_geometry = kv_geometry(self.layout, args, self.is_mla_backend)
        if self.kv_geometry is None and not self.is_mla_backend:
            log.warning("kvferry %s: KVArgs has no kv_head_num/total_kv_head_num: KV pages "
                        "move whole, by buffer position; a peer that gives head geometry "
                        "refuses the connection (SGLang's decode sets them with "
                        "docs/sglang-backend.patch)", self.mode)
        self.kv_region = self._region("kv", args.kv_data_ptrs, args.kv_data_lens,
                                      args.kv_item_lens, self.kv_geometry)
        self.aux_region = None
        if getattr(args, "aux_data_ptrs", None):
            self.aux_region = self._region("aux", args.aux_data_ptrs, args.aux_data_lens,
                                           args.aux_item_lens)
        types = list(getattr(args, "state_types", None) or [])
        self.state_regions = []
        for k, (ptrs, lens, items) in enumerate(zip(
                state_groups(getattr(args, "state_data_ptrs", None)),
                state_groups(getattr(args, "state_data_lens", None)),
                state_groups(getattr(args, "state_item_lens", None)))):
            name = f"state-{getattr(types[k], 'value', types[k])}" if k < len(types) else f"state{k}"
            self.state_regions.append(self._region(name[:kvferry.REGION_NAME_MAX], ptrs, lens,
                                                   items))

    def _region(self, name: str, ptrs: List[int], lens: List[int], items: List[int],
                geometry: Optional[List[Geometry]] = None) -> int:
        n = _nitems(lens, items, f"{name} buffers")
        return self.engine.register_region(name, [int(p) for p in ptrs],
                                           [int(i) for i in items], n, geometry=geometry)

    # ---- driving the engine
    def progress(self) -> int:
        """Once per scheduler iteration: events, deadlines, heartbeats; then the
        parked rooms that became quiescent are released."""
        n = self.engine.progress()
        self._last_progress_ns = time.monotonic_ns()
        if self._refused:
            self._answer_refused()
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

    # ---- prefill: requests failed before their room existed
    REFUSED_MAX = 65536

    @property
    def refused(self) -> int:
        """Requests failed before any decode rank asked, answered if one does."""
        return len(self._refused)

    def refuse(self, room_id: int) -> None:
        """The prefill failed room_id (an abort, its bootstrap deadline) before
        any decode rank asked for it, so no sender room was made. A decode
        rank's ROOM_INFO parked for it now, or arriving within
        deadlines.bootstrap_s, gets the room made and aborted at once: the
        decode hears it now instead of at the engine's tombstone TTL (its
        pages held that long)."""
        if len(self._refused) >= self.REFUSED_MAX:
            del self._refused[next(iter(self._refused))]
            self.refused_dropped += 1
        keep_s = self.engine.deadline_s("deadlines.bootstrap_s") or 600
        self._refused[room_id] = time.monotonic() + keep_s
        self._answer(room_id)

    def _answer_refused(self) -> None:
        now = time.monotonic()
        while self._refused:  # oldest first: one keep time for all
            rid, until = next(iter(self._refused.items()))
            if until > now:
                break
            del self._refused[rid]
        parked = self.engine.stats().early_infos_parked
        if parked == self._refused_seen:
            return  # no ROOM_INFO parked since the last look
        self._refused_seen = parked
        for rid in list(self._refused):
            self._answer(rid)

    def _answer(self, room_id: int) -> None:
        """Make and abort the room of a refused request if a decode rank's
        ROOM_INFO waits for it (the abort reaches every rank bound to it; a
        late rank of a fan-out meets the failed room, or a new one made here
        once the first is released)."""
        n, _user = self.engine.sender_pending(room_id)
        if n < 0:
            self._refused.pop(room_id, None)  # the decode aborted it itself
        if n <= 0:
            return
        try:
            room = self.engine.sender(room_id, n=0)  # as many as the decode ranks say
        except kvferry.KVFerryError as e:
            log.warning("room %#x: a decode rank asked after this rank failed the request; "
                        "its room could not be made to abort it: %s", room_id, e)
            return  # tried again when the next ROOM_INFO parks; else its TTL ends it
        room.abort()
        self.refused_answered += 1
        log.info("room %#x: a decode rank asked after this rank failed the request: aborted",
                 room_id)
        self.park(room, None)

    # ---- bootstrap, prefill side
    def bootstrap_server_addr(self) -> str:
        """Where this prefill's bootstrap server listens, as SGLang's
        register_to_bootstrap finds it (dist_init_addr's host when set, else
        server_args.host, a wildcard read as loopback)."""
        sa = self.server_args
        dist = getattr(sa, "dist_init_addr", None)
        if dist:
            host = dist.rsplit(":", 1)[0].strip("[]")
        else:
            host = str(getattr(sa, "host", "127.0.0.1"))
            host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
        return host_port(host, int(getattr(sa, "disaggregation_bootstrap_port", 8998)))

    def registration(self) -> Dict[str, Any]:
        """The PUT /route body: SGLang's fields, with this engine's RDMA listen
        address as rank_ip/rank_port."""
        host, port = self.engine.listen_addr()
        # every rail's address, one port: "ip0,ip1" (one address, one rail)
        rails = [ep.rsplit(":", 1)[0].strip("[]") for ep in self.engine.endpoint().split(",")]
        host = ",".join(rails) if len(rails) > 1 else host
        if host in ("0.0.0.0", "::"):
            raise ValueError("rdma.listen_addr is a wildcard: set it to this rank's RDMA "
                             "interface address (KVFERRY_OVERRIDES='rdma.listen_addr=...')")
        lay, sa = self.layout, self.server_args
        return {
            "attn_tp_size": lay.attn_tp_size, "attn_tp_rank": lay.attn_tp_rank,
            "attn_cp_size": 1, "attn_cp_rank": 0,
            "attn_dp_size": lay.attn_dp_size, "attn_dp_rank": lay.attn_dp_rank,
            "pp_size": lay.pp_size, "pp_rank": lay.pp_rank,
            "system_dp_size": lay.system_dp_size, "system_dp_rank": lay.system_dp_rank,
            "rank_ip": host, "rank_port": port,
            "page_size": int(getattr(self.kv_args, "page_size", 1) or 1),
            "kv_cache_dtype": getattr(self.kv_args, "kv_cache_dtype_str", None) or None,
            "load_balance_method": getattr(sa, "load_balance_method", None)
            or "follow_bootstrap_room",
            "enable_dsa_cache_layer_split": False,
            "prefill_http_port": getattr(sa, "port", None),
        }

    def register_to_bootstrap(self, attempts: int = 5) -> None:
        """Prefill: file this rank's kvferry address with its bootstrap server,
        retried with a doubling wait as SGLang does; the last failure raises
        (a prefill no decode can find is of no use)."""
        if self.mode != "prefill":
            return
        server, body = self.bootstrap_server_addr(), self.registration()
        for i in range(attempts):
            try:
                bs.put_route(server, body)
                log.info("prefill rank TP%d PP%d published %s to %s", self.layout.attn_tp_rank,
                         self.layout.pp_rank, peer_list(body["rank_ip"], body["rank_port"]),
                         server)
                return
            except bs.BootstrapError as e:
                if i == attempts - 1 or isinstance(e, bs.BootstrapRefused):
                    raise  # a refused token stays refused: no point retrying
                log.warning("register to bootstrap %s (attempt %d of %d): %s", server, i + 1,
                            attempts, e)
                time.sleep(min(2.0 ** i, 30.0))

    # ---- bootstrap, decode side
    def await_bootstrap(self, bootstrap_addr: str, receiver: Any, waiting: bool = True) -> None:
        """receiver waits for bootstrap_addr's layout (waiting=False: no more)."""
        ws = self._waiting.setdefault(bootstrap_addr, weakref.WeakSet())
        if waiting:
            ws.add(receiver)
        else:
            ws.discard(receiver)

    def _refused_by(self, bootstrap_addr: str, e: Exception) -> None:
        """The bootstrap server refused our token: SGLang would retry its
        layout query for a while and then fail the requests as "aborted";
        they fail now instead, with the reason."""
        log.error("prefill layout from %s: %s", bootstrap_addr, e)
        for r in list(self._waiting.pop(bootstrap_addr, ())):
            r.fail_local(f"bootstrap {bootstrap_addr}: {e}")

    def try_ensure_parallel_info(self, bootstrap_addr: str) -> bool:
        """One attempt to learn the prefill server's layout (GET /route with -1s)
        and this rank's mapping onto it; True when known. A layout this rank
        cannot pair with (page size, KV dtype, TP sizes) raises, as SGLang does."""
        if bootstrap_addr in self.prefill_info_table:
            return True
        try:
            d = bs.get_route(bootstrap_addr, -1, -1, -1, -1)
        except bs.BootstrapRefused as e:
            self._refused_by(bootstrap_addr, e)
            return False
        except bs.BootstrapError as e:
            log.error("prefill layout from %s: %s", bootstrap_addr, e)
            return False
        if d is None:
            return False  # 503: not every prefill rank registered yet
        fields: Dict[str, Any] = {f: d.get(f) for f in bs.INFO_FIELDS}
        info = PrefillInfo(**fields)
        self._check_pairing(info)
        m: RankMap = rank_map(self.layout, int(info.attn_tp_size), int(info.pp_size),
                              self.is_mla_backend)
        info.target_tp_rank, info.target_tp_ranks = m.target_tp_rank, m.target_tp_ranks
        info.target_cp_ranks, info.target_pp_ranks = [0], m.target_pp_ranks
        info.required_dst_info_num = m.required_dst_info_num
        info.required_prefill_response_num = m.required_prefill_response_num
        self.prefill_info_table[bootstrap_addr] = info
        log.info("prefill %s: attn TP %s PP %s DP %s; this rank reads TP %s PP %s (fan-out %d, "
                 "fan-in %d)", bootstrap_addr, info.attn_tp_size, info.pp_size, info.dp_size,
                 m.target_tp_ranks, m.target_pp_ranks, m.required_dst_info_num,
                 m.required_prefill_response_num)
        return True

    def _check_pairing(self, info: PrefillInfo) -> None:
        mine = int(getattr(self.kv_args, "page_size", 1) or 1)
        if info.page_size is not None and int(info.page_size) != mine:
            raise RuntimeError(f"page size mismatch: prefill {info.page_size}, decode {mine}: "
                               "both must use the same --page-size")
        dtype = getattr(self.kv_args, "kv_cache_dtype_str", None)
        if info.kv_cache_dtype and dtype and info.kv_cache_dtype != dtype:
            raise RuntimeError(f"KV cache dtype mismatch: prefill {info.kv_cache_dtype}, "
                               f"decode {dtype}")
        if int(info.attn_cp_size) != 1:
            raise RuntimeError(f"prefill attn_cp_size {info.attn_cp_size}: kvferry.sglang does "
                               "not support context parallelism")

    def peer(self, bootstrap_addr: str, dp: int, tp: int, pp: int) -> str:
        """The kvferry address of prefill rank (dp, tp, pp), cached."""
        key = (bootstrap_addr, dp, tp, pp)
        if key not in self._peers:
            d = bs.get_route(bootstrap_addr, dp, 0, tp, pp)
            if d is None:
                raise bs.BootstrapError(f"{bootstrap_addr}: prefill not fully registered")
            self._peers[key] = peer_list(str(d["rank_ip"]), int(d["rank_port"]))
        return self._peers[key]

    def forget_peers(self, bootstrap_addr: str) -> None:
        """A prefill that failed us may have restarted elsewhere: ask again."""
        for key in [k for k in self._peers if k[0] == bootstrap_addr]:
            del self._peers[key]

    def forget_prefill(self, bootstrap_addr: str) -> None:
        """A prefill lost or refusing: its layout and addresses are asked for
        again by the next request (a restarted one registers anew)."""
        if self.prefill_info_table.pop(bootstrap_addr, None) is not None:
            log.info("prefill %s: lost; its layout and addresses will be asked for again",
                     bootstrap_addr)
        self.forget_peers(bootstrap_addr)

    def submit_prefill_recompute(self, kv_receiver: Any, payload: dict) -> None:
        """SGLang's PD retract rebootstrap: not supported. The receiver fails
        with a reason saying so, rather than waiting for KV nobody sends."""
        kv_receiver.fail_local("PD retract rebootstrap is not supported by kvferry.sglang")

    def close(self) -> None:
        self.engine.close()


def pack_user_data(decode_prefix_len: int, fan_out: int) -> bytes:
    """A decode rank's user data for the ROOM_INFO to a prefill rank that
    serves fan_out decode ranks for the room."""
    return pack_fan_user_data(fan_out, PREFIX_LEN.pack(int(decode_prefix_len)))


def parse_user_data(data: bytes) -> Tuple[int, int]:
    """(decode_prefix_len, fan-out) from a receiver's user data; (0, 1) for
    one without them (a dummy's)."""
    fan, rest = parse_fan_user_data(data)
    prefix = PREFIX_LEN.unpack(rest[:PREFIX_LEN.size])[0] if len(rest) >= PREFIX_LEN.size else 0
    return prefix, fan
