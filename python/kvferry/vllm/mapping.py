# SPDX-License-Identifier: Apache-2.0
"""What maps to what between vLLM and kvferry: request id -> room id, the
kv_transfer_params a prefill returns and a decode reads, the decode rank's
prefill ranks (heterogeneous TP, pipeline stages), the user data of a
ROOM_INFO, and a vLLM KV cache tensor -> kvferry buffers with geometry.

Pure functions of their arguments: no vLLM import, no engine, no network."""
from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..ranks import Geometry, kv_heads_held, pack_fan_user_data, pair_ranks

ROOM_MASK = (1 << 63) - 1
PARAMS_KEY = "kvferry"   # kv_transfer_params[PARAMS_KEY]: kvferry's part of the side channel
PARAMS_VERSION = 1


def room_id_of(engine_id: str, request_id: str) -> int:
    """The room of a request: a stable 63-bit hash (BLAKE2b) of the prefill
    engine's id and the prefill's request id, never 0. The prefill computes
    it in request_finished; the decode computes it again from
    remote_engine_id and remote_request_id and checks it against the room
    the prefill sent (a proxy that rewrote one of them is caught). Stable
    across processes and Python runs (not hash(), which is salted)."""
    h = hashlib.blake2b(f"{engine_id}\0{request_id}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") & ROOM_MASK or 1


def pack_user_data(fan_out: int) -> bytes:
    """A decode rank's ROOM_INFO user data: the fan-out tag alone (how many
    decode ranks the prefill rank it goes to serves for the request, which
    only the decode knows: its TP size)."""
    return pack_fan_user_data(fan_out)


# ---------------------------------------------------------------- side channel
@dataclasses.dataclass
class PrefillInfo:
    """kvferry's part of the kv_transfer_params a prefill's request_finished
    returns (under PARAMS_KEY), as the decode reads it."""

    room: int
    peers: List[List[str]]  # [pp stage][tp rank] -> "host:port" of that rank's engine
    tp_size: int
    pp_size: int
    block_size: int
    use_mla: bool
    num_blocks: int         # blocks the prefill holds for the request

    def to_params(self) -> Dict[str, Any]:
        return {"v": PARAMS_VERSION, "room": self.room, "peers": self.peers,
                "tp_size": self.tp_size, "pp_size": self.pp_size,
                "block_size": self.block_size, "use_mla": self.use_mla,
                "num_blocks": self.num_blocks}


class ParamsError(ValueError):
    """kv_transfer_params that do not name a kvferry prefill (the text says why)."""


def prefill_info(params: Optional[Dict[str, Any]]) -> PrefillInfo:
    """The decode's reading of a prefill's kv_transfer_params; ParamsError
    when they are not a kvferry prefill's or do not add up."""
    if not params:
        raise ParamsError("no kv_transfer_params")
    k = params.get(PARAMS_KEY)
    if not isinstance(k, dict):
        raise ParamsError(f"no {PARAMS_KEY!r} entry (not from a kvferry prefill)")
    try:
        if int(k.get("v", 0)) != PARAMS_VERSION:
            raise ParamsError(f"{PARAMS_KEY} version {k.get('v')!r}, this decode reads "
                              f"{PARAMS_VERSION}")
        info = PrefillInfo(room=int(k["room"]), peers=[[str(p) for p in stage]
                                                       for stage in k["peers"]],
                           tp_size=int(k["tp_size"]), pp_size=int(k["pp_size"]),
                           block_size=int(k["block_size"]), use_mla=bool(k["use_mla"]),
                           num_blocks=int(k["num_blocks"]))
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, ParamsError):
            raise
        raise ParamsError(f"bad {PARAMS_KEY} entry: {e!r}") from e
    if len(info.peers) != info.pp_size or any(len(s) != info.tp_size for s in info.peers):
        raise ParamsError(f"peers {info.peers} are not {info.pp_size} stages of "
                          f"{info.tp_size} ranks")
    eng, req = params.get("remote_engine_id"), params.get("remote_request_id")
    if eng is not None and req is not None and room_id_of(str(eng), str(req)) != info.room:
        raise ParamsError(f"room {info.room:#x} is not the hash of remote_engine_id "
                          f"{eng!r} and remote_request_id {req!r}")
    return info


# ---------------------------------------------------------------- ranks
@dataclasses.dataclass
class Target:
    """One prefill rank a decode rank reads from."""

    pp: int
    tp: int
    dummy: bool  # MLA with prefill TP > decode TP: only one rank of each stage sends


@dataclasses.dataclass
class RankMap:
    targets: List[Target]
    fan_out: int  # decode ranks each target serves for a request (its room's n)


def rank_map(decode_tp: int, decode_rank: int, prefill_tp: int, prefill_pp: int,
             use_mla: bool) -> RankMap:
    """The prefill ranks decode rank decode_rank of decode_tp reads, as
    vLLM's NIXL connector pairs them (kvferry.ranks.pair_ranks): a fan-out
    room when decode TP >= prefill TP (each decode rank gets its own heads
    through the geometry), a fan-in room otherwise (each prefill rank writes
    its heads; with MLA only the first of them sends, the others are
    dummies: every rank holds the whole latent KV). Every pipeline stage of
    the prefill is read (the geometry pairs layers)."""
    if prefill_pp < 1:
        raise ValueError(f"prefill PP {prefill_pp}: out of range")
    pair = pair_ranks(decode_tp, decode_rank, prefill_tp)
    targets = [Target(pp, tp, use_mla and k > 0)
               for pp in range(prefill_pp) for k, tp in enumerate(pair.prefill_ranks)]
    return RankMap(targets, pair.fan_out)


# ---------------------------------------------------------------- KV caches
_LAYER_RE = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer)\.(\d+)(?:\.|$)")


def layer_index(name: str) -> Optional[int]:
    """The global layer index in a vLLM attention layer name
    ("model.layers.12.self_attn.attn" -> 12), None when it has none."""
    m = _LAYER_RE.search(name)
    if m:
        return int(m.group(1))
    nums = re.findall(r"\.(\d+)\.", f".{name}.")
    return int(nums[0]) if len(nums) == 1 else None


@dataclasses.dataclass
class Buffer:
    addr: int
    item_size: int
    geometry: Optional[Geometry]


@dataclasses.dataclass
class CacheLayout:
    """The "kv" region a rank registers: one or two buffers per layer, the
    number of blocks, and whether every buffer has a geometry (heads
    sliceable: ranks of different TP can pair)."""

    buffers: List[Buffer]
    num_blocks: int
    block_size: int
    sliceable: bool
    why_not: str = ""  # when not sliceable: why (the layout)

    @property
    def geometry(self) -> Optional[List[Geometry]]:
        if not self.sliceable:
            return None
        return [b.geometry for b in self.buffers if b.geometry is not None]


def _tensor_facts(t: Any) -> Tuple[Tuple[int, ...], Tuple[int, ...], int, int]:
    """(shape, strides in elements, element size, address) of a torch tensor
    or a numpy array."""
    if hasattr(t, "data_ptr"):  # torch
        return tuple(t.shape), tuple(t.stride()), int(t.element_size()), int(t.data_ptr())
    import numpy as np  # a numpy array: host memory in the same layout

    a = np.asarray(t)
    return (tuple(a.shape), tuple(s // a.itemsize for s in a.strides), int(a.itemsize),
            int(a.ctypes.data))


def cache_layout(kv_caches: Dict[str, Any], *, block_size: int, tp_rank: int, tp_size: int,
                 total_kv_heads: int, use_mla: bool,
                 num_blocks: Optional[int] = None) -> CacheLayout:
    """vLLM's per-layer KV cache tensors as kvferry buffers.

    Layouts (vLLM's attention backends, get_kv_cache_shape):
      (2, num_blocks, block_size, heads, head_size)  FlashAttention, K then V:
          a buffer for K and one for V of each layer, geometry (block_size,
          heads, head0, head_size bytes, layer, 0|1) when a block is
          token-major (NHD strides), so that heads can be sliced;
      (num_blocks, 2, block_size, heads, head_size)  FlashInfer/Triton, K and
          V of a block side by side: one buffer per layer, whole blocks, no
          geometry (both sides need the same TP);
      (num_blocks, block_size, latent)  MLA: one buffer per layer, geometry
          (block_size, 1, 0, latent bytes, layer, 0): every rank holds it whole.
    The layer of a buffer is the index in its layer's name, else its position."""
    buffers: List[Buffer] = []
    nblocks = set()
    sliceable, why = True, ""
    for layer, name, t in _ordered_layers(kv_caches):
        facts = _tensor_facts(t)
        if use_mla:
            bufs, nb, not_sliceable = _mla_buffers(name, layer, facts, block_size)
        elif len(facts[0]) != 5:
            raise ValueError(f"layer {name}: cache shape {facts[0]}, expected 5 dimensions "
                             "(K/V, blocks, tokens, heads, head size in some order)")
        elif facts[0][0] == 2 and (num_blocks is None or facts[0][1] == num_blocks):
            bufs, nb, not_sliceable = _kv_first_buffers(
                name, layer, facts, block_size,
                ranks=(tp_rank, tp_size, total_kv_heads))
        else:
            bufs, nb, not_sliceable = _kv_paired_buffers(name, facts, block_size)
        if not_sliceable:
            sliceable, why = False, not_sliceable
        buffers.extend(bufs)
        nblocks.add(nb)
    if len(nblocks) != 1:
        raise ValueError(f"register_kv_caches: layers of different block counts {sorted(nblocks)}")
    return CacheLayout(buffers, nblocks.pop(), block_size, sliceable, why)


def _ordered_layers(kv_caches: Dict[str, Any]) -> List[Tuple[int, str, Any]]:
    """(layer, name, tensor) by layer: the index in a layer's name, else its
    position (also when names repeat an index)."""
    if not kv_caches:
        raise ValueError("register_kv_caches: no KV cache tensors")
    named = []
    for pos, (name, t) in enumerate(kv_caches.items()):
        li = layer_index(name)
        named.append((pos if li is None else li, name, t))
    if len({li for li, _, _ in named}) != len(named):
        named = [(pos, n, t) for pos, (_, n, t) in enumerate(named)]  # names do not tell
    named.sort(key=lambda x: x[0])
    return named


def _mla_buffers(name, layer, facts, block_size):
    """(num_blocks, block_size, latent): one buffer, whole on every rank."""
    shape, strides, esz, addr = facts
    if len(shape) != 3 or shape[1] != block_size:
        raise ValueError(f"layer {name}: MLA cache shape {shape}, expected "
                         f"(num_blocks, {block_size}, latent)")
    nb, _, lat = shape
    if strides != (block_size * lat, lat, 1):
        raise ValueError(f"layer {name}: MLA cache strides {strides} not contiguous")
    item = block_size * lat * esz
    return [Buffer(addr, item, (block_size, 1, 0, lat * esz, layer, 0))], nb, ""


def _kv_first_buffers(name, layer, facts, block_size, ranks):
    """(2, num_blocks, block_size, heads, head_size): a K and a V buffer with
    geometry; heads can be sliced only when a block is token-major. ranks:
    (tp_rank, tp_size, total_kv_heads), where this rank's heads begin."""
    shape, strides, esz, addr = facts
    _, nb, bs, heads, hd = shape
    per_block = bs * heads * hd
    if bs != block_size:
        raise ValueError(f"layer {name}: {bs} tokens a block, vLLM's block_size is "
                         f"{block_size}")
    if strides[1] != per_block or strides[0] != nb * per_block:
        raise ValueError(f"layer {name}: blocks are not contiguous (strides {strides})")
    why = ""
    if strides[2:] != (heads * hd, hd, 1):
        why = (f"layer {name}: blocks are not token-major (strides "
               f"{strides}: an HND layout); heads cannot be sliced")
    tp_rank, tp_size, total_kv_heads = ranks
    # no head count known: the heads are taken as the first (whole-model TP 1)
    head0 = kv_heads_held(tp_rank, tp_size, heads, total_kv_heads)[0] if total_kv_heads > 0 else 0
    item = per_block * esz
    return [Buffer(addr + kind * nb * item, item, (bs, heads, head0, hd * esz, layer, kind))
            for kind in (0, 1)], nb, why


def _kv_paired_buffers(name, facts, block_size):
    """(num_blocks, 2, block_size, heads, head_size): K and V side by side,
    whole blocks only."""
    shape, strides, esz, addr = facts
    if shape[1] != 2:
        raise ValueError(f"layer {name}: cache shape {shape}: neither (2, blocks, ...) "
                         "nor (blocks, 2, ...)")
    nb, _, bs, heads, hd = shape
    per_block = 2 * bs * heads * hd
    if bs != block_size or strides[0] != per_block:
        raise ValueError(f"layer {name}: shape {shape} strides {strides}: blocks of "
                         f"{block_size} tokens are not contiguous")
    why = f"layer {name}: K and V side by side in a block ({shape}); whole blocks only"
    return [Buffer(addr, per_block * esz, None)], nb, why


def tail_blocks(src: Sequence[int], want: int) -> List[int]:
    """The prefill blocks a decode asking for `want` blocks gets: the last
    ones (the decode's prefix cache holds the first), as NIXL reads them."""
    if want > len(src):
        raise ValueError(f"the decode asks for {want} blocks, the prefill holds {len(src)}")
    return list(src[len(src) - want:]) if want else []
