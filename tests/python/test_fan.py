# SPDX-License-Identifier: Apache-2.0
"""Rooms across ranks from Python: Engine.sender(room_id, n) (fan-out),
Engine.receiver(room_id, peers=[...]) (fan-in), init_regions(part=k),
init_dummy, peer_count/user_data of receiver k, receivers(). Without a
transport: the bookkeeping; the bytes are the rxe suite's (fan.sh)."""
import errno

import numpy as np
import pytest

import kvferry
from kvferry import KVFerryError, Poll


def test_fanout_sender_takes_n_slots_and_waits_for_all(pooled):
    s = pooled.sender(7, n=3)
    assert s.poll() == Poll.BOOTSTRAPPING
    assert s.receivers() == (3, 0)
    assert pooled.stats().created == 3
    with pytest.raises(KVFerryError) as ei:
        s.peer_count(0, k=2)
    assert ei.value.errno == errno.EAGAIN
    with pytest.raises(KVFerryError) as ei:
        s.user_data(k=1)
    assert ei.value.errno == errno.EAGAIN
    s.abort()
    assert s.poll() == Poll.FAILED and s.failure().reason == "local abort"
    assert s.quiescent() and s.release()
    st = pooled.stats()
    assert st.created == st.released == 3


def test_fanout_bad_count(pooled):
    with pytest.raises(KVFerryError) as ei:
        pooled.sender(7, n=kvferry.FAN_MAX + 1)
    assert ei.value.errno == errno.EINVAL
    assert pooled.stats().created == 0


def test_fanout_learned_is_one_slot_until_the_first_room_info(pooled):
    """n=0: kvf_sender_create_learned; the first ROOM_INFO's fan-out tag
    (kvferry.ranks) sizes it (tests/unit/engine/test_fanout.c, on the wire: rxe)."""
    r = pooled.sender(7, n=0)
    assert r.receivers() == (1, 0) and r.poll() == kvferry.Poll.BOOTSTRAPPING
    assert pooled.stats().created == 1


def test_fanin_receiver_sends_to_each_peer(pooled):
    r = pooled.receiver(9, peers=["10.0.0.1:1", "10.0.0.2:1"])
    assert pooled.stats().created == 2
    with pytest.raises(KVFerryError) as ei:
        r.init_regions({0: [0, 1]}, part=2)
    assert ei.value.errno == errno.EINVAL
    # no transport: sending ROOM_INFO to rank 0 fails, the room with it
    with pytest.raises(KVFerryError) as ei:
        r.init_regions({0: np.array([0, 1], np.int32)}, part=0)
    assert ei.value.errno == errno.ENOTCONN
    assert r.poll() == Poll.FAILED and r.quiescent() and r.release()


def test_fanin_argument_refusals(pooled):
    with pytest.raises(TypeError, match="not both"):
        pooled.receiver(9, "10.0.0.1:1", peers=["10.0.0.2:1"])
    with pytest.raises(ValueError, match="1 to"):
        pooled.receiver(9, peers=[])
    with pytest.raises(KVFerryError) as ei:
        pooled.receiver(9, peers=["10.0.0.1:1", "no-port"])
    assert ei.value.errno == errno.EINVAL
    with pytest.raises(TypeError):
        pooled.receiver(9, peers=["10.0.0.1:1", 5])
    assert pooled.stats().created == 0


def test_dummy_receiver(pooled):
    r = pooled.receiver(11, "10.0.0.1:1")
    with pytest.raises(KVFerryError) as ei:
        r.init_dummy()
    assert ei.value.errno == errno.ENOTCONN  # well formed: no transport to send on
    assert r.poll() == Poll.FAILED
    s = pooled.sender(12)
    with pytest.raises(TypeError):
        s.init_dummy()
