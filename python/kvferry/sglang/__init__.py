# SPDX-License-Identifier: Apache-2.0
"""kvferry as a transfer backend of SGLang's disaggregation package.

The classes have the names and method signatures SGLang expects of a backend
(sglang.srt.disaggregation.base.conn) and the attributes its queues read
(prefill.py, decode.py): a manager built from its KVArgs, a sender, a
receiver and a bootstrap server. Where SGLang is importable they subclass its
bases; where it is not, they are plain classes with the same interface, so
the package imports and is tested without SGLang. docs/sglang.md says how to
wire it in.

One room per request (bootstrap_room) on each rank pair; ranks of different
TP or PP meet through fan-out (the prefill serves several decode ranks),
fan-in (a decode rank reads several prefill ranks) and per-buffer geometry
(heads and layers): layout.py. The engine is driven by
KVFerryKVManager.progress(), once per scheduler iteration; a sender's or
receiver's poll() calls it too when it has not run for progress_interval_s.

What moves: three kinds of regions, matched with the peer's by name: "kv"
(an item = one page), "aux" (SGLang's metadata buffers, an item = one
request's row) and, for hybrid models, one "state-<type>" per state type
(an item = one state slot). The decode's send_metadata() is one ROOM_INFO
per prefill rank; each send() of a chunked prefill posts that chunk's pages
at once, and the last one carries the aux row and the state slots.
"""
from ._compat import HAVE_SGLANG, KVArgs, KVPoll, KVTransferError, TransferMetric
from .bootstrap import KVFerryBootstrapServer, bootstrap_server_class
from .layout import Layout, RankMap, kv_geometry, layout_of, rank_map
from .manager import (KVFerryKVManager, engine_overrides, pack_user_data, parse_user_data,
                      peer_list, rank_devices)
from .receiver import KVFerryKVReceiver
from .sender import KVFerryKVSender


def KVBootstrapServer(host: str, port: int):  # noqa: N802 - the name SGLang looks up
    """The bootstrap server SGLang starts on the prefill: SGLang's own
    CommonKVBootstrapServer where SGLang imports, else kvferry's, which
    answers the same routes (bootstrap.py)."""
    return bootstrap_server_class()(host, port)


# The names SGLang's get_kv_class maps to (docs/sglang.md, "The patch").
KVManager = KVFerryKVManager
KVSender = KVFerryKVSender
KVReceiver = KVFerryKVReceiver

__all__ = [
    "HAVE_SGLANG", "KVArgs", "KVPoll", "KVTransferError", "TransferMetric",
    "KVFerryBootstrapServer", "KVBootstrapServer", "Layout", "RankMap",
    "kv_geometry", "layout_of", "rank_map", "KVFerryKVManager",
    "engine_overrides", "pack_user_data", "parse_user_data", "peer_list", "rank_devices", "KVFerryKVReceiver",
    "KVFerryKVSender",
    "KVManager", "KVSender", "KVReceiver",
]
