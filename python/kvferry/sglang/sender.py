# SPDX-License-Identifier: Apache-2.0
"""KVFerryKVSender: the prefill side of one request, a kvferry sender room.

The room is created with the sender, its fan-out learned by the library
from the first decode rank's ROOM_INFO (Engine.sender(n=0),
kvf_sender_create_learned): its fan-out tag says how many decode ranks this
prefill rank serves for the request (SGLang's required_dst_info_num, a fact
of the decode's layout). The room's bootstrap deadline runs from creation
(deadlines.bootstrap_s; SGLang's SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT
sets it)."""
from __future__ import annotations

import logging
from typing import Any, List, Optional, Tuple

import numpy as np

import kvferry

from . import bootstrap as bs
from ._compat import BaseKVSender, KVPoll, KVTransferError, metric
from .manager import KVFerryKVManager, parse_user_data, state_groups

log = logging.getLogger("kvferry.sglang")


def failure_text(room: kvferry.Room) -> str:
    f = room.failure()
    return f"{f.reason}: {f.detail}"


def sglang_failed_text(st: int) -> str:
    """The reason of a request SGLang failed while its room, in state st,
    had not (aborted then, unless it had succeeded)."""
    return (f"failed by SGLang, not by kvferry (the room was {kvferry.Poll(st).name}"
            f"{'' if st == KVPoll.Success else '; aborted now'})")


def _joined(room: kvferry.Room) -> bool:
    """Whether a decode rank's ROOM_INFO reached the room."""
    try:
        room.user_data()
        return True
    except kvferry.KVFerryError:
        return False  # -EAGAIN: none yet


class KVFerryKVSender(BaseKVSender):
    """Prefill side of one request: a kvferry sender room."""

    def __init__(self, mgr: KVFerryKVManager, bootstrap_addr: str, bootstrap_room: int,
                 dest_tp_ranks: Optional[List[int]] = None, pp_rank: int = 0,
                 req_has_disagg_prefill_dp_rank: bool = False):
        self.kv_mgr = mgr
        self.bootstrap_room = int(bootstrap_room)
        self.bootstrap_addr = bootstrap_addr
        self.room: Optional[kvferry.Room] = None
        self.conclude_state: Optional[int] = None
        self.num_kv_indices: Optional[int] = None
        self.aux_index: Optional[int] = None
        self._sent = 0       # pages of the request handed to send() so far
        self._skip: Optional[int] = None  # leading pages the decode has already
        self._failure: Optional[str] = None  # failed before its room existed
        self._cleared = False
        self._metric: Any = None  # get_transfer_metric()'s, kept at clear()
        if not req_has_disagg_prefill_dp_rank:
            self._register_dp_rank()
        try:
            self.room = mgr.engine.sender(self.bootstrap_room, n=0)
        except kvferry.KVFerryError as e:
            self._fail_local(f"room create failed: {e}")

    def _register_dp_rank(self) -> None:
        """With DP > 1 and a router that does not follow bootstrap_room, the
        decode asks the bootstrap server which DP rank has the request."""
        lay, sa = self.kv_mgr.layout, self.kv_mgr.server_args
        dp = max(lay.attn_dp_size, lay.system_dp_size)
        method = getattr(sa, "load_balance_method", None) or "follow_bootstrap_room"
        if dp <= 1 or method == "follow_bootstrap_room":
            return
        try:
            bs.register_dp_rank(self.bootstrap_addr, self.bootstrap_room, lay.dp_group)
        except bs.BootstrapError as e:
            log.error("room %#x: %s", self.bootstrap_room, e)

    def _fail_local(self, why: str) -> None:
        self._failure = why
        self.conclude_state = KVPoll.Failed
        log.warning("room %#x: %s", self.bootstrap_room, why)
        self.kv_mgr.refuse(self.bootstrap_room)

    def init(self, num_kv_indices: int, aux_index: Optional[int] = None) -> None:
        self.num_kv_indices = int(num_kv_indices)
        self.aux_index = aux_index

    def _abort_raise(self, why: str) -> None:
        self.abort()
        raise ValueError(f"room {self.bootstrap_room}: {why}")

    def send(self, kv_indices: Any, state_indices: Optional[List] = None,
             num_kv_tokens: Optional[int] = None) -> None:
        """One chunk of the request's pages, in order: posted now. The last
        chunk (the pages reach init()'s count) also carries the aux row and
        the state slots, and completes the room. num_kv_tokens (the chunk's
        token count) is not needed: pages are whole."""
        if self.num_kv_indices is None or self.room is None:
            raise RuntimeError(f"room {self.bootstrap_room}: send() before init() "
                               "(the decode's ROOM_INFO has not arrived)")
        idx = np.asarray(kv_indices)
        pos, n = self._sent, int(idx.size)
        self._sent += n
        if self._sent > self.num_kv_indices:
            self._abort_raise(f"{self._sent} pages sent, init() said {self.num_kv_indices}")
        try:
            self._post(self.room, self.num_kv_indices, idx, pos, state_indices)
        except kvferry.KVFerryError as e:
            # the room is FAILED and says why; poll() reports it
            log.warning("room %#x: send failed: %s", self.bootstrap_room, e)

    def _post(self, room: kvferry.Room, total: int, idx: np.ndarray, pos: int,
              state_indices: Optional[List]) -> None:
        """Pages pos.. of the request's total (idx), and with the last of
        them the aux row and state slots."""
        mgr = self.kv_mgr
        if self._skip is None:  # the decode's list is known from WaitingForInput on
            want = room.peer_count(mgr.kv_region)
            # a dummy decode rank (want 0) needs no page; a decode with a
            # prefix cache asks for fewer pages than the request has
            if want > total:
                self._abort_raise(f"the decode asks for {want} pages, the request has {total}")
            self._skip = total - want
        parts: List[Tuple[int, int, Any]] = []
        first = max(pos, self._skip)
        if first < pos + idx.size:
            parts.append((mgr.kv_region, first - self._skip, idx[first - pos:]))
        last = self._sent == total
        if last:
            parts += self._last_parts(room, state_indices)
        if parts or last:
            room.send_chunk(parts, last=last)

    def _last_parts(self, room: kvferry.Room,
                    state_indices: Optional[List]) -> List[Tuple[int, int, Any]]:
        """The aux row and the state slots, where the decode asked for them."""
        mgr = self.kv_mgr
        parts: List[Tuple[int, int, Any]] = []
        if mgr.aux_region is not None and self.aux_index is not None and \
                room.peer_count(mgr.aux_region):
            parts.append((mgr.aux_region, 0, [int(self.aux_index)]))
        groups = state_groups(state_indices)
        if len(groups) > len(mgr.state_regions):
            self._abort_raise(f"{len(groups)} state groups, {len(mgr.state_regions)} registered")
        for region, g in zip(mgr.state_regions, groups):
            if g is not None and len(g) and room.peer_count(region):
                parts.append((region, 0, np.asarray(g)))
        return parts

    def pop_decode_prefix_len(self) -> int:
        """The decode's decode_prefix_len, from the room's user data."""
        if self.room is None:
            return 0
        try:
            return parse_user_data(self.room.user_data())[0]
        except kvferry.KVFerryError:
            return 0  # no ROOM_INFO yet

    def should_send_kv_chunk(self, num_pages: int, last_chunk: bool) -> bool:
        # the last chunk carries the aux row and state even with no page
        return num_pages > 0 or last_chunk

    def poll(self) -> int:
        self.kv_mgr.maybe_progress()
        if self.room is None or self._failure is not None:
            return KVPoll.Failed  # not created, or failed and handed to the manager
        st = self.room.poll()
        if st in (KVPoll.Success, KVPoll.Failed):
            self.conclude_state = st
        if st == KVPoll.Failed:
            self._give_up(self.room, failure_text(self.room))
        return st

    def _give_up(self, room: kvferry.Room, why: str) -> None:
        """A failed request's room goes to the manager at once, its reason
        kept: SGLang's prefill failure paths (prefill.py:
        handle_inflight_transfer_failure, handle_bootstrap_failure) never
        call clear(), so a room left to clear() would stay live. The manager
        releases it once quiescent (the prefill's pages are only read)."""
        self._failure = why
        self.conclude_state = KVPoll.Failed
        if not self._cleared:
            self._cleared = True
            self._metric = self.get_transfer_metric()
            if not _joined(room):
                # a decode rank asking after the release is answered at once
                # (the manager aborts a room made for it), not at the
                # engine's tombstone TTL
                self.kv_mgr.refuse(self.bootstrap_room)
            self.kv_mgr.park(room, None)

    def failure_exception(self) -> None:
        """Why the request failed. SGLang may have failed it on its own
        (another rank's verdict, its failure injection) while the room was
        not failed here: then the room is aborted now, so that the decode
        hears it and nothing stays live."""
        if self._failure is None and self.room is not None:
            st = self.room.poll()
            if st != KVPoll.Failed:
                if st != KVPoll.Success:
                    self.room.abort()
                self._give_up(self.room, sglang_failed_text(st))
            else:
                self._give_up(self.room, failure_text(self.room))
        why = self._failure or "failed by SGLang before its room was created"
        raise KVTransferError(self.bootstrap_room, why)

    def get_transfer_metric(self) -> Any:
        """The room's latency and bytes. SGLang asks after clear()
        (prefill.py: process_disagg_prefill_inflight_queue), when the room is
        released: clear() keeps the figures."""
        if self._metric is not None:
            return self._metric
        if self.room is None:
            return metric()
        st = self.room.stats()
        lat = (st.success_ns - st.send_ns) / 1e9 if st.success_ns and st.send_ns else None
        return metric(transfer_latency_s=lat, transfer_total_bytes=st.bytes or None)

    def abort(self) -> None:
        if self.room is not None:
            self.room.abort()

    def clear(self) -> None:
        """Hand the room back; a failed room that is not yet quiescent is kept
        by the manager and released by a later progress()."""
        if self._cleared:
            return
        self._cleared = True
        if self.room is None:
            return
        if self.room.poll() not in (KVPoll.Success, KVPoll.Failed):
            self.room.abort()  # SGLang clears a request it gave up on
        self._metric = self.get_transfer_metric()
        self.kv_mgr.park(self.room, None)
