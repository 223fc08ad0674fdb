# SPDX-License-Identifier: Apache-2.0
"""What crosses vLLM's process boundaries: the per-step metadata from the
scheduler-side connector to the workers, and the handshake a worker gives
its scheduler-side connector once. Plain dataclasses (picklable)."""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional

from ._compat import KVConnectorHandshakeMetadata, KVConnectorMetadata
from .mapping import PrefillInfo


@dataclasses.dataclass
class RecvSpec:
    """Decode: receive a request's KV into block_ids (this instance's block
    ids, the same on every rank) from the prefill that info names.

    report: the request waits for it (WAITING_FOR_REMOTE_KVS) and must be
    reported in finished_recving, once its room is released. A receive that
    is not reported frees the prefill's blocks only: a decode that holds the
    whole prompt already (block_ids empty: a dummy ROOM_INFO, the prefill
    sends no data) or a request aborted before it was scheduled (cancel: the
    dummy ROOM_INFO is followed by an ABORT)."""

    room: int
    info: PrefillInfo
    block_ids: List[int]
    report: bool = True
    cancel: bool = False


@dataclasses.dataclass
class SendSpec:
    """Prefill: a finished request whose blocks wait for the decode's
    ROOM_INFO; block_ids are the prefill's own, in token order."""

    room: int
    block_ids: List[int]


class KVFerryConnectorMetadata(KVConnectorMetadata):
    """One step's work for the workers (build_connector_meta)."""

    def __init__(self, recv: Optional[Dict[str, RecvSpec]] = None,
                 send: Optional[Dict[str, SendSpec]] = None):
        self.recv: Dict[str, RecvSpec] = dict(recv or {})
        self.send: Dict[str, SendSpec] = dict(send or {})

    def __repr__(self) -> str:
        return f"KVFerryConnectorMetadata(recv={sorted(self.recv)}, send={sorted(self.send)})"


@dataclasses.dataclass
class KVFerryHandshake(KVConnectorHandshakeMetadata):
    """A worker's kvferry facts (get_handshake_metadata): where its engine
    listens (producers; None on a pure consumer) and whether its KV buffers
    carry a geometry (heads sliceable, so ranks of a different TP can pair)."""

    engine_id: str
    tp_rank: int
    pp_rank: int
    addr: Optional[str]
    sliceable: bool
    num_blocks: int
