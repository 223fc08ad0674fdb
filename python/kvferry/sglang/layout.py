# SPDX-License-Identifier: Apache-2.0
"""Who talks to whom, and what each buffer holds: the parallel layout of a
rank (from SGLang's server args and KVArgs), the decode's rank mapping onto a
prefill (the facts SGLang's CommonKVManager._resolve_rank_mapping computes),
and the per-buffer geometry that lets kvferry slice heads and layers between
ranks of different TP and PP (kvferry.h, struct kvf_buf_geometry).

Pure functions of their arguments: no SGLang import, no network."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional

from ..ranks import Geometry, kv_heads_held, pair_ranks


def _int(obj: Any, name: str, default: int) -> int:
    v = getattr(obj, name, None) if obj is not None else None
    return default if v is None else int(v)


@dataclasses.dataclass
class Layout:
    """One rank's place in its server: what SGLang's register_to_bootstrap
    publishes (attn_* from tp/dp/dp-attention, as SGLang's ParallelContext
    derives them)."""

    engine_rank: int = 0
    tp_size: int = 1
    attn_tp_size: int = 1
    attn_tp_rank: int = 0
    attn_dp_size: int = 1
    attn_dp_rank: int = 0
    pp_size: int = 1
    pp_rank: int = 0
    system_dp_size: int = 1
    system_dp_rank: int = 0

    @property
    def dp_group(self) -> int:
        """The prefill DP group a route is filed under (SGLang's server: the
        attention DP rank with DP attention, else the system DP rank)."""
        return self.attn_dp_rank if self.system_dp_size == 1 else self.system_dp_rank


def layout_of(server_args: Any, kv_args: Any) -> Layout:
    """The rank's layout. kv_args.engine_rank is its TP rank (SGLang sets it
    from tp_rank); context parallelism is not supported (a clear error)."""
    cp = _int(server_args, "attn_cp_size", 1)
    if cp != 1:
        raise ValueError(f"kvferry.sglang: attn_cp_size {cp}: context parallelism is not "
                         "supported (docs/sglang.md, known limits)")
    rank = _int(kv_args, "engine_rank", 0)
    tp = _int(server_args, "tp_size", 1)
    dp = _int(server_args, "dp_size", 1)
    dp_attn = bool(getattr(server_args, "enable_dp_attention", False))
    attn_tp = tp // dp if dp_attn and dp > 1 else tp
    if attn_tp < 1 or tp % attn_tp:
        raise ValueError(f"kvferry.sglang: tp_size {tp} and dp_size {dp} give no attention TP size")
    return Layout(
        engine_rank=rank, tp_size=tp, attn_tp_size=attn_tp, attn_tp_rank=rank % attn_tp,
        attn_dp_size=dp if dp_attn else 1, attn_dp_rank=rank // attn_tp if dp_attn else 0,
        pp_size=_int(server_args, "pp_size", 1), pp_rank=_int(kv_args, "pp_rank", 0),
        system_dp_size=1 if dp_attn else dp, system_dp_rank=_int(kv_args, "system_dp_rank", 0))


@dataclasses.dataclass
class RankMap:
    """A decode rank's view of one prefill server (SGLang's PrefillServerInfo
    target_* fields): the prefill ranks it reads from, which of them send data
    (MLA: one; the others are dummies that only complete their rooms), how many
    decode ranks each prefill rank serves (required_dst_info_num: the fan-out
    the prefill must wait for) and how many prefill ranks answer
    (required_prefill_response_num: the fan-in)."""

    target_tp_rank: int
    target_tp_ranks: List[int]
    target_pp_ranks: List[int]
    required_dst_info_num: int
    required_prefill_response_num: int


def rank_map(me: Layout, prefill_attn_tp: int, prefill_pp: int, is_mla: bool) -> RankMap:
    """The decode's mapping onto a prefill of prefill_attn_tp x prefill_pp
    ranks (the same facts as SGLang's _resolve_rank_mapping, CP = 1): the
    TP pairing of kvferry.ranks, then SGLang's count of the prefill ranks
    that answer (with MLA one of a fan-in's; every stage of a deeper PP)."""
    d_tp = me.attn_tp_size
    pair = pair_ranks(d_tp, me.engine_rank % d_tp, prefill_attn_tp)
    resp = 1 if is_mla else len(pair.prefill_ranks)
    if me.pp_size not in (prefill_pp, 1):
        raise ValueError(f"decode pp_size {me.pp_size}: must be the prefill's ({prefill_pp}) or 1")
    pp = [me.pp_rank] if prefill_pp == me.pp_size else list(range(prefill_pp))
    if prefill_pp != me.pp_size:
        resp *= prefill_pp
    return RankMap(pair.prefill_ranks[0], pair.prefill_ranks, pp, pair.fan_out, resp)


def kv_geometry(me: Layout, kv_args: Any, is_mla: bool) -> Optional[List[Geometry]]:
    """One (page_tokens, heads, head0, head_bytes, layer, kind) per KV buffer,
    or None when the buffers cannot be described (no head counts, or an odd
    number of non-MLA buffers without layer ids): then they pair by position
    and both sides must hold the same layers and heads.

    Layers: kv_args.kv_layer_ids (SGLang's get_transfer_kv_layer_ids: global
    ids, K buffers then V buffers, the same id twice), else prefill_start_layer
    + i over K then V. kind counts a layer id's repeats (0 = K, 1 = V). MLA
    buffers hold one latent "head" per token that every rank holds whole."""
    lens = [int(x) for x in kv_args.kv_item_lens]
    page = _int(kv_args, "page_size", 1)
    layer_ids = list(getattr(kv_args, "kv_layer_ids", None) or [])
    if len(layer_ids) != len(lens):
        if len(lens) % 2 and not is_mla:
            return None
        start = _int(kv_args, "prefill_start_layer", 0)
        per = len(lens) if is_mla else len(lens) // 2
        layer_ids = [start + i % per for i in range(len(lens))]
    if is_mla:
        head0, heads = 0, 1
    elif not _int(kv_args, "kv_head_num", 0) and not _int(kv_args, "total_kv_head_num", 0):
        return None  # SGLang gave no head counts: whole pages, by position
    else:
        head0, heads = kv_heads_held(me.attn_tp_rank, me.attn_tp_size,
                                     _int(kv_args, "kv_head_num", 0),
                                     _int(kv_args, "total_kv_head_num", 0))
    seen: Dict[int, int] = {}
    out = []
    for n, layer in zip(lens, layer_ids):
        if n % (page * heads):
            raise ValueError(f"kv item of {n} bytes is not page_size {page} x {heads} heads")
        kind = seen.get(layer, 0)
        seen[layer] = kind + 1
        out.append((page, heads, head0, n // (page * heads), int(layer), kind))
    return out
