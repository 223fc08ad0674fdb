# SPDX-License-Identifier: Apache-2.0
"""kvferry.ranks: the TP pairing, the heads a rank holds and the fan-out
tag, the arithmetic kvferry.sglang and kvferry.vllm share."""
import pytest

from kvferry import ranks


@pytest.mark.parametrize("d_tp,rank,p_tp,want", [
    (1, 0, 1, ([0], 1)),
    (2, 1, 1, ([0], 2)),          # fan-out: prefill rank 0 serves both decode ranks
    (4, 3, 2, ([1], 2)),
    (8, 5, 2, ([1], 4)),
    (1, 0, 2, ([0, 1], 1)),       # fan-in: decode rank 0 reads both prefill ranks
    (2, 1, 4, ([2, 3], 1)),
])
def test_pair_ranks(d_tp, rank, p_tp, want):
    p = ranks.pair_ranks(d_tp, rank, p_tp)
    assert (p.prefill_ranks, p.fan_out) == want


def test_pair_ranks_every_prefill_rank_serves_its_fan_out():
    """Over all decode ranks, each prefill rank is read by exactly fan_out of them."""
    for d_tp, p_tp in [(4, 2), (8, 1), (2, 2), (2, 8)]:
        seen = {}
        for r in range(d_tp):
            p = ranks.pair_ranks(d_tp, r, p_tp)
            for t in p.prefill_ranks:
                seen.setdefault(t, []).append(p.fan_out)
        assert sorted(seen) == list(range(p_tp))
        assert all(len(v) == v[0] for v in seen.values())


def test_pair_ranks_refuses():
    with pytest.raises(ValueError, match="divide"):
        ranks.pair_ranks(3, 0, 2)
    with pytest.raises(ValueError, match="out of range"):
        ranks.pair_ranks(2, 2, 1)
    with pytest.raises(ValueError, match="out of range"):
        ranks.pair_ranks(2, 0, 0)


def test_kv_heads_held():
    assert [ranks.kv_heads_held(r, 2, 2, 4) for r in range(2)] == [(0, 2), (2, 2)]
    # 2 KV heads on TP 4: one head each, two ranks per head
    assert [ranks.kv_heads_held(r, 4, 1, 2)[0] for r in range(4)] == [0, 0, 1, 1]
    assert ranks.kv_heads_held(0, 1, 8, 8) == (0, 8)
    with pytest.raises(ValueError, match="holds heads"):
        ranks.kv_heads_held(1, 2, 3, 4)
    with pytest.raises(ValueError, match=">= 1"):
        ranks.kv_heads_held(0, 1, 0, 4)


def test_fan_user_data():
    data = ranks.pack_fan_user_data(4, b"rest")
    assert data[:4] == b"KVFN" and len(data) == ranks.FAN_TAG.size + 4
    assert ranks.parse_fan_user_data(data) == (4, b"rest")
    assert ranks.parse_fan_user_data(b"") == (1, b"")  # a dummy's: no tag
    assert ranks.parse_fan_user_data(b"\0" * 16) == (1, b"\0" * 16)  # not a tag
    assert ranks.parse_fan_user_data(ranks.pack_fan_user_data(0)) == (1, ranks.pack_fan_user_data(0))
