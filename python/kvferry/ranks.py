# SPDX-License-Identifier: Apache-2.0
"""Ranks of different tensor-parallel sizes, as both integrations
(kvferry.sglang, kvferry.vllm) pair them: which prefill ranks a decode rank
reads and how many decode ranks each of them serves (the fan-out), which KV
heads a rank holds, and how a decode rank tells a prefill rank the fan-out
(the fan-out tag its ROOM_INFO's user data begins with).

Pure functions of their arguments: no engine, no network."""
from __future__ import annotations

import dataclasses
import struct
from typing import List, Tuple

# The fan-out tag, little-endian: magic, version, flags (0), then how many
# decode ranks the prefill rank that gets this ROOM_INFO serves for the room.
# A decode rank's user data begins with it; what an integration adds follows.
FAN_TAG = struct.Struct("<4sHHI")
FAN_MAGIC = b"KVFN"
FAN_VERSION = 1

# One buffer's geometry, kvferry.h's struct kvf_buf_geometry: (tokens a
# page, heads, first head, bytes a head, layer, kind).
Geometry = Tuple[int, int, int, int, int, int]


@dataclasses.dataclass
class Pairing:
    """What decode rank r of decode TP d reads of a prefill of TP p."""

    prefill_ranks: List[int]  # the prefill TP ranks it reads, in order
    fan_out: int              # decode ranks each of them serves (its sender room's n)


def pair_ranks(decode_tp: int, decode_rank: int, prefill_tp: int) -> Pairing:
    """d >= p: rank r reads prefill rank r // (d / p), which serves d / p
    decode ranks (a fan-out); d < p: rank r reads prefill ranks r * (p / d)
    .. (r + 1) * (p / d) - 1 (a fan-in), each serving it alone. One size must
    divide the other (ValueError otherwise)."""
    if decode_tp < 1 or prefill_tp < 1 or not 0 <= decode_rank < decode_tp:
        raise ValueError(f"decode rank {decode_rank} of TP {decode_tp}, prefill TP "
                         f"{prefill_tp}: out of range")
    if decode_tp % prefill_tp and prefill_tp % decode_tp:
        raise ValueError(f"tensor parallel sizes {prefill_tp} (prefill) and {decode_tp} "
                         "(decode): one must divide the other")
    if decode_tp >= prefill_tp:
        ratio = decode_tp // prefill_tp
        return Pairing([decode_rank // ratio], ratio)
    ratio = prefill_tp // decode_tp
    return Pairing(list(range(decode_rank * ratio, (decode_rank + 1) * ratio)), 1)


def kv_heads_held(tp_rank: int, tp_size: int, local_heads: int,
                  total_heads: int) -> Tuple[int, int]:
    """(first head, heads) of a model's total_heads KV heads that TP rank
    tp_rank holds, local_heads of them: an equal share, or one head
    replicated on several ranks when TP exceeds the head count (as SGLang
    and vLLM shard them). ValueError when the counts do not fit."""
    if local_heads < 1 or total_heads < 1:
        raise ValueError(f"{local_heads} KV heads of {total_heads}: both must be >= 1")
    head0 = tp_rank * total_heads // tp_size
    if head0 + local_heads > total_heads:
        raise ValueError(f"TP rank {tp_rank} of {tp_size} holds heads "
                         f"{head0}..{head0 + local_heads - 1} of {total_heads}")
    return head0, local_heads


def pack_fan_user_data(fan_out: int, rest: bytes = b"") -> bytes:
    """A decode rank's ROOM_INFO user data: the fan-out tag, then rest."""
    return FAN_TAG.pack(FAN_MAGIC, FAN_VERSION, 0, int(fan_out)) + bytes(rest)


def parse_fan_user_data(data: bytes) -> Tuple[int, bytes]:
    """(fan-out, the bytes after the tag) of a decode rank's user data;
    (1, data) when it does not begin with the tag (a peer that fans out to
    no one)."""
    if len(data) >= FAN_TAG.size:
        magic, _ver, _flags, fan = FAN_TAG.unpack(data[:FAN_TAG.size])
        if magic == FAN_MAGIC and fan >= 1:
            return fan, bytes(data[FAN_TAG.size:])
    return 1, bytes(data)
