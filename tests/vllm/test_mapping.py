# SPDX-License-Identifier: Apache-2.0
"""kvferry.vllm's pure parts: the request -> room mapping, the side channel
(kv_transfer_params), the rank mapping of heterogeneous TP, and vLLM KV
cache tensors (real torch tensors in each attention backend's layout) as
kvferry buffers with geometry. No engine, no scheduler."""
import hashlib

import pytest
import torch

import kvferry.vllm as kv
from kvferry import ranks
from kvferry.vllm import mapping

BS = 16


# ---------------------------------------------------------------- mapping
def test_room_id_stable_63_bits_both_sides():
    a = kv.room_id_of("prefill-engine-0", "cmpl-abc-0-1f2e3d4c")
    # a fixed value: the same on every process, Python run and machine
    assert a == kv.room_id_of("prefill-engine-0", "cmpl-abc-0-1f2e3d4c")
    assert 0 < a < 2 ** 63
    assert a != kv.room_id_of("prefill-engine-1", "cmpl-abc-0-1f2e3d4c")
    assert a != kv.room_id_of("prefill-engine-0", "cmpl-abc-0-1f2e3d4d")
    ids = {kv.room_id_of("e", f"req-{i}") for i in range(20000)}
    assert len(ids) == 20000
    # a pinned value: the hash may not change between releases (a prefill and
    # a decode of different versions must agree)
    assert kv.room_id_of("e", "r") == int.from_bytes(
        hashlib.blake2b(b"e\0r", digest_size=8).digest(), "little") & (2 ** 63 - 1)


def _params(room=None, **kw):
    p = {"do_remote_prefill": True, "remote_engine_id": "P", "remote_request_id": "r1",
         kv.PARAMS_KEY: {"v": 1, "room": kv.room_id_of("P", "r1") if room is None else room,
                         "peers": [["10.0.0.1:7000"]], "tp_size": 1, "pp_size": 1,
                         "block_size": BS, "use_mla": False, "num_blocks": 3}}
    p[kv.PARAMS_KEY].update(kw)
    return p


def test_prefill_info_checks_what_it_reads():
    info = kv.prefill_info(_params())
    assert info.room == kv.room_id_of("P", "r1") and info.peers == [["10.0.0.1:7000"]]
    with pytest.raises(kv.ParamsError, match="not the hash"):
        kv.prefill_info(_params(room=12345))
    with pytest.raises(kv.ParamsError, match="not from a kvferry prefill"):
        kv.prefill_info({"do_remote_prefill": True, "remote_block_ids": [1]})
    with pytest.raises(kv.ParamsError, match="version"):
        kv.prefill_info(_params(v=2))
    with pytest.raises(kv.ParamsError, match="stages"):
        kv.prefill_info(_params(tp_size=2))
    with pytest.raises(kv.ParamsError, match="bad"):
        kv.prefill_info(_params(room="x"))


def test_user_data_is_the_fan_out_tag():
    assert kv.pack_user_data(4) == ranks.pack_fan_user_data(4)  # what the library reads
    assert ranks.parse_fan_user_data(kv.pack_user_data(4)) == (4, b"")


@pytest.mark.parametrize("dtp,ptp,pp,mla,want", [
    (1, 1, 1, False, [[(0, 0, False)], 1]),
    (2, 1, 1, False, [[(0, 0, False)], 2]),   # fan-out: prefill rank 0 serves 2
    (4, 2, 1, False, [[(0, 1, False)], 2]),   # (rank 3)
    (1, 2, 1, False, [[(0, 0, False), (0, 1, False)], 1]),  # fan-in, each writes its heads
    (1, 2, 1, True, [[(0, 0, False), (0, 1, True)], 1]),    # MLA: one data rank, one dummy
    (1, 1, 2, False, [[(0, 0, False), (1, 0, False)], 1]),  # two stages: layers
])
def test_rank_map(dtp, ptp, pp, mla, want):
    rank = 3 if (dtp, ptp) == (4, 2) else 0
    m = kv.rank_map(dtp, rank, ptp, pp, mla)
    assert [(t.pp, t.tp, t.dummy) for t in m.targets] == want[0]
    assert m.fan_out == want[1]


def test_rank_map_refuses():
    with pytest.raises(ValueError, match="divide"):
        kv.rank_map(3, 0, 2, 1, False)
    with pytest.raises(ValueError, match="out of range"):
        kv.rank_map(2, 2, 1, 1, False)


def test_layer_index():
    assert kv.layer_index("model.layers.12.self_attn.attn") == 12
    assert kv.layer_index("transformer.h.3.attn") == 3
    assert kv.layer_index("language_model.model.layers.0.self_attn.attn") == 0
    assert kv.layer_index("attn") is None


def test_cache_layout_flash_attention_torch():
    caches = {f"model.layers.{i}.self_attn.attn": torch.zeros(2, 10, BS, 2, 8, dtype=torch.float16)
              for i in (1, 0)}
    lay = kv.cache_layout(caches, block_size=BS, tp_rank=1, tp_size=2, total_kv_heads=4,
                          use_mla=False)
    assert lay.sliceable and lay.num_blocks == 10 and len(lay.buffers) == 4
    t0 = caches["model.layers.0.self_attn.attn"]
    b = lay.buffers[0]
    assert b.addr == t0.data_ptr() and b.item_size == BS * 2 * 8 * 2
    assert b.geometry == (BS, 2, 2, 16, 0, 0)                      # rank 1 of 2: heads 2, 3
    assert lay.buffers[1].addr == t0[1].data_ptr()                 # V of layer 0
    assert lay.buffers[1].geometry == (BS, 2, 2, 16, 0, 1)
    assert [g[4] for g in lay.geometry] == [0, 0, 1, 1]            # by layer, K then V


def test_cache_layout_hnd_flashinfer_mla_and_refusals():
    # HND: a block is [heads, tokens, head size]: whole blocks only
    hnd = torch.zeros(2, 10, 2, BS, 8, dtype=torch.float16).permute(0, 1, 3, 2, 4)
    lay = kv.cache_layout({"model.layers.0.attn": hnd}, block_size=BS, tp_rank=0, tp_size=1,
                          total_kv_heads=2, use_mla=False)
    assert not lay.sliceable and "HND" in lay.why_not and lay.geometry is None
    # K and V side by side (FlashInfer, Triton)
    fi = torch.zeros(10, 2, BS, 2, 8, dtype=torch.float16)
    lay = kv.cache_layout({"model.layers.0.attn": fi}, block_size=BS, tp_rank=0, tp_size=1,
                          total_kv_heads=2, use_mla=False, num_blocks=10)
    assert not lay.sliceable and lay.buffers[0].item_size == 2 * BS * 2 * 8 * 2
    # MLA: one latent buffer a layer, held whole by every rank
    mla = {f"model.layers.{i}.attn": torch.zeros(10, BS, 72, dtype=torch.bfloat16)
           for i in range(3)}
    lay = kv.cache_layout(mla, block_size=BS, tp_rank=1, tp_size=2, total_kv_heads=1,
                          use_mla=True)
    assert lay.sliceable and [b.geometry for b in lay.buffers] == \
        [(BS, 1, 0, 144, i, 0) for i in range(3)]
    with pytest.raises(ValueError, match="block_size"):
        kv.cache_layout({"model.layers.0.attn": torch.zeros(2, 10, 8, 2, 8)}, block_size=BS,
                        tp_rank=0, tp_size=1, total_kv_heads=2, use_mla=False)
    with pytest.raises(ValueError, match="different block counts"):
        kv.cache_layout({"model.layers.0.attn": torch.zeros(2, 10, BS, 2, 8),
                         "model.layers.1.attn": torch.zeros(2, 9, BS, 2, 8)}, block_size=BS,
                        tp_rank=0, tp_size=1, total_kv_heads=2, use_mla=False)


def test_replicated_heads_head0():
    # 2 KV heads on TP 4: each rank holds one head, two ranks per head
    g = [kv.cache_layout({"model.layers.0.attn": torch.zeros(2, 4, BS, 1, 8)}, block_size=BS,
                         tp_rank=r, tp_size=4, total_kv_heads=2, use_mla=False)
         for r in range(4)]
    assert [c.buffers[0].geometry[2] for c in g] == [0, 0, 1, 1]


def test_tail_blocks():
    assert mapping.tail_blocks([5, 6, 7, 8], 2) == [7, 8]
    assert mapping.tail_blocks([5, 6], 0) == []
    with pytest.raises(ValueError, match="asks for 3"):
        mapping.tail_blocks([5, 6], 3)
