# SPDX-License-Identifier: Apache-2.0
"""KVFerryKVReceiver: the decode side of one request, a kvferry receiver
room on every prefill rank the decode rank reads from.

One prefill rank (equal TP, or decode TP larger: the prefill fans out): a
plain receiver room. Several (prefill TP larger, or a PP prefill): one fan-in
room, each prefill rank a part. Non-MLA: each part gets the page list and the
geometry makes it write its heads and layers. MLA: the target rank sends the
pages, the others are dummies that only end their rooms. The aux row and the
state slots come from one part: the target TP rank of the last PP stage,
which holds the request's output (SGLang's metadata buffers)."""
from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

import kvferry

from . import bootstrap as bs
from ._compat import BaseKVReceiver, KVPoll, KVTransferError
from .manager import KVFerryKVManager, pack_user_data, state_groups
from .sender import failure_text, sglang_failed_text

log = logging.getLogger("kvferry.sglang")


class KVFerryKVReceiver(BaseKVReceiver):
    """Decode side of one request, created by SGLang's prealloc queue; init()
    finds the prefill ranks and creates the room."""

    def __init__(self, mgr: KVFerryKVManager, bootstrap_addr: str,
                 bootstrap_room: Optional[int] = None, prefill_dp_rank: Optional[int] = None):
        self.kv_mgr = mgr
        self.bootstrap_addr = bootstrap_addr
        self.bootstrap_room = int(bootstrap_room or 0)
        self.room: Optional[kvferry.Room] = None
        self.conclude_state: Optional[int] = None
        self.require_staging = False  # SGLang's staging buffer: not used by kvferry
        self.prefill_info: Any = None
        self.parts: List[Tuple[int, int, bool]] = []  # (tp, pp, dummy) per prefill rank
        self.kv_indices: Optional[np.ndarray] = None
        self.aux_index: Optional[int] = None
        self.state_indices: Optional[List] = None
        self._failure: Optional[str] = None  # failed before its room existed
        self._cleared = False
        self.pages_deferred = False
        mgr.await_bootstrap(bootstrap_addr, self)  # a refused token fails it at once
        if prefill_dp_rank is not None:  # older SGLang: known at construction
            self.init(prefill_dp_rank)

    def fail_local(self, why: str) -> None:
        """Failed by this side before or beside the room: the room (if any)
        is aborted so the prefill hears it."""
        self.kv_mgr.await_bootstrap(self.bootstrap_addr, self, waiting=False)
        if self._failure is None:
            self._failure = why
            log.warning("room %#x: %s", self.bootstrap_room, why)
        self.conclude_state = KVPoll.Failed
        if self.room is not None and self.room.poll() not in (KVPoll.Success, KVPoll.Failed):
            self.room.abort()

    # ---- bootstrap
    def init(self, prefill_dp_rank: int = 0) -> None:
        """Find the prefill ranks this rank reads from and create the room."""
        if self.room is not None or self._failure is not None:
            return
        mgr = self.kv_mgr
        try:
            if not mgr.try_ensure_parallel_info(self.bootstrap_addr):
                self.fail_local(f"bootstrap {self.bootstrap_addr}: no prefill layout (server "
                                "down or not every prefill rank registered)")
                return
            info = self.prefill_info = mgr.prefill_info_table[self.bootstrap_addr]
            self.parts = [(tp, pp, mgr.is_mla_backend and tp != info.target_tp_rank)
                          for tp in info.target_tp_ranks for pp in info.target_pp_ranks]
            peers = [mgr.peer(self.bootstrap_addr, int(prefill_dp_rank or 0), tp, pp)
                     for tp, pp, _ in self.parts]
            if len(peers) == 1:
                self.room = mgr.engine.receiver(self.bootstrap_room, peers[0])
            else:
                self.room = mgr.engine.receiver(self.bootstrap_room, peers=peers)
            mgr.await_bootstrap(self.bootstrap_addr, self, waiting=False)
        except (bs.BootstrapError, ValueError, RuntimeError, KeyError,
                kvferry.KVFerryError) as e:
            mgr.forget_peers(self.bootstrap_addr)
            self.fail_local(f"bootstrap {self.bootstrap_addr}: {e}")

    def _lists(self, kv: np.ndarray, aux_index: Optional[int],
               state_indices: Optional[List]) -> Tuple[Dict[int, Any], Dict[int, Any]]:
        """(the page list, the aux/state lists) by region id."""
        mgr = self.kv_mgr
        pages = {mgr.kv_region: kv} if kv.size else {}
        extra: Dict[int, Any] = {}
        if aux_index is not None:
            if mgr.aux_region is None:
                raise ValueError("send_metadata: an aux_index, but no aux buffers registered")
            extra[mgr.aux_region] = [int(aux_index)]
        groups = state_groups(state_indices)
        if len(groups) > len(mgr.state_regions):
            raise ValueError(f"send_metadata: {len(groups)} state groups, "
                             f"{len(mgr.state_regions)} registered")
        for region, g in zip(mgr.state_regions, groups):
            if g is not None and len(g):
                extra[region] = np.asarray(g)
        if len(extra) > (aux_index is not None) and \
                int(self.prefill_info.attn_tp_size) != mgr.layout.attn_tp_size:
            raise ValueError("send_metadata: state slots between ranks of different attention "
                             "TP are not supported (SGLang slices them; kvferry does not yet)")
        return pages, extra

    def send_metadata(self, kv_indices: Any, aux_index: Optional[int] = None,
                      state_indices: Optional[List] = None,
                      decode_prefix_len: Optional[int] = None, **_: Any) -> None:
        """The destination pages, aux row and state slots, and the prefix
        length: one ROOM_INFO to each prefill rank."""
        if self.room is None:
            if self._failure is None:
                self.fail_local("send_metadata() before init()")
            return
        self.kv_indices = np.asarray(kv_indices)
        self.aux_index, self.state_indices = aux_index, state_indices
        info = self.prefill_info
        user = pack_user_data(int(decode_prefix_len or 0), int(info.required_dst_info_num))
        try:
            pages, extra = self._lists(self.kv_indices, aux_index, state_indices)
            if len(self.parts) == 1:
                self.room.init_regions({**pages, **extra}, user)
                return
            last_pp = max(info.target_pp_ranks)
            for k, (tp, pp, dummy) in enumerate(self.parts):
                mine = dict(pages)
                if tp == info.target_tp_rank and pp == last_pp:
                    mine.update(extra)
                if dummy or not mine:
                    self.room.init_dummy(part=k, user_data=user)
                else:
                    self.room.init_regions(mine, user, part=k)
        except ValueError as e:
            self.fail_local(str(e))
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
        if st in (KVPoll.Success, KVPoll.Failed):
            self.conclude_state = st
        if st == KVPoll.Failed and self.room.failure().reason in ("peer lost", "connect failed"):
            # the prefill may come back elsewhere (a restart on an ephemeral
            # port): its layout and addresses are asked for again, as
            # SGLang's _handle_node_failure drops its caches
            self.kv_mgr.forget_prefill(self.bootstrap_addr)
        # Created and waiting for send_metadata: ready for it, as SGLang reads
        # WaitingForInput on the decode side.
        return KVPoll.WaitingForInput if st == KVPoll.Bootstrapping else st

    def failure_exception(self) -> None:
        """Why the request failed. SGLang may have failed it on its own
        (another rank's verdict, its failure injection) while the room was
        not failed here: then the room is aborted now (clear() follows)."""
        if self._failure is None and self.room is not None:
            st = self.room.poll()
            if st != KVPoll.Failed:
                if st != KVPoll.Success:
                    self.room.abort()
                self.fail_local(sglang_failed_text(st))
        reason = self._failure if self._failure is not None else \
            failure_text(self.room) if self.room is not None else "failed before its room existed"
        raise KVTransferError(self.bootstrap_room, reason)

    def abort(self) -> None:
        if self.room is not None:
            self.room.abort()
            self.conclude_state = KVPoll.Failed
        else:
            self.fail_local("aborted before bootstrap")

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
