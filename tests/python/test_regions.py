# SPDX-License-Identifier: Apache-2.0
"""The region/chunk calls of the binding without RDMA: registration and its
refusals, buffers kept per region, init_regions / send_chunk / peer_count /
user_data arguments and the errors of rooms with no peer."""
import errno
import gc
import sys
import weakref

import numpy as np
import pytest

import kvferry
from kvferry import KVFerryError, Poll


def _arrays(n, size):
    return [np.zeros(size, dtype=np.uint8) for _ in range(n)]


def test_register_regions_by_name(eng):
    kv = eng.register_region("kv", _arrays(2, 16 * 64), 64, 16)
    aux = eng.register_region("aux", _arrays(2, 8 * 32), [16, 32], 8)
    assert kv != aux
    with pytest.raises(KVFerryError) as ei:
        eng.register_region("kv", _arrays(1, 64), 8, 8)
    assert ei.value.errno == errno.EEXIST
    with pytest.raises(KVFerryError) as ei:  # the pool is the region "kv"
        eng.register_pool(_arrays(1, 64), 8, 8)
    assert ei.value.errno == errno.EEXIST


@pytest.mark.parametrize(
    "name, exc",
    [("", KVFerryError), ("x" * (kvferry.REGION_NAME_MAX + 1), KVFerryError), (b"kv", TypeError)],
)
def test_region_name_refusals(eng, name, exc):
    with pytest.raises(exc):
        eng.register_region(name, _arrays(1, 64), 8, 8)


def test_too_many_regions(eng):
    for i in range(kvferry.MAX_REGIONS):
        eng.register_region(f"r{i}", [np.zeros(8, np.uint8)], 8, 1)
    with pytest.raises(KVFerryError) as ei:
        eng.register_region("one-more", [np.zeros(8, np.uint8)], 8, 1)
    assert ei.value.errno == errno.ENOSPC


def test_unregister_lets_the_buffers_go(eng):
    a = np.zeros(64, np.uint8)
    r = eng.register_region("aux", [a], 8, 8)
    w = weakref.ref(a)
    before = sys.getrefcount(a)
    eng.unregister_region(r)
    assert sys.getrefcount(a) == before - 1
    del a
    gc.collect()
    assert w() is None
    with pytest.raises(KVFerryError) as ei:
        eng.unregister_region(r)
    assert ei.value.errno == errno.EINVAL
    # the name is free again
    eng.register_region("aux", _arrays(1, 64), 8, 8)


def test_refused_region_keeps_nothing(eng):
    a = np.zeros(64, np.uint8)
    before = sys.getrefcount(a)
    with pytest.raises(KVFerryError):
        eng.register_region("", [a], 8, 8)
    assert sys.getrefcount(a) == before


@pytest.fixture
def regions(eng):
    kv = eng.register_region("kv", _arrays(2, 16 * 64), 64, 16)
    aux = eng.register_region("aux", _arrays(1, 8 * 32), 32, 8)
    return eng, kv, aux


def test_init_regions_arguments(regions):
    eng, kv, aux = regions
    r = eng.receiver(1, "10.0.0.1:1")
    with pytest.raises(ValueError, match="0 lists"):
        r.init_regions({})
    with pytest.raises(TypeError, match="pair"):
        r.init_regions([kv])
    with pytest.raises(TypeError):
        r.init_regions({kv: [0]}, user_data="text")
    with pytest.raises(ValueError, match="negative"):
        r.init_regions({kv: [0, -1]})
    with pytest.raises(KVFerryError) as ei:  # an unknown region
        r.init_regions({99: [0]})
    assert ei.value.errno == errno.EINVAL
    with pytest.raises(KVFerryError) as ei:
        r.init_regions({kv: [0]}, user_data=bytes(kvferry.USER_DATA_MAX + 1))
    assert ei.value.errno == errno.EINVAL
    assert r.poll() == Poll.BOOTSTRAPPING
    # well formed: the engine has no transport to send ROOM_INFO on
    with pytest.raises(KVFerryError) as ei:
        r.init_regions([(kv, np.array([3, 4], np.int32)), (aux, [1])],
                       user_data=bytes(kvferry.USER_DATA_MAX))
    assert ei.value.errno == errno.ENOTCONN and ei.value.reason == "connect failed"


def test_init_regions_item_outside_its_region(regions):
    eng, kv, aux = regions
    r = eng.receiver(1, "10.0.0.1:1")
    with pytest.raises(KVFerryError) as ei:
        r.init_regions({kv: [0], aux: [8]})
    assert ei.value.errno == errno.ERANGE and "aux" in str(ei.value.detail)


def test_sender_calls_before_room_info(regions):
    eng, kv, aux = regions
    s = eng.sender(1)
    for fn in (lambda: s.peer_count(kv), s.user_data,
               lambda: s.send_chunk([(kv, 0, [1])]), lambda: s.send_chunk([], last=True)):
        with pytest.raises(KVFerryError) as ei:
            fn()
        assert ei.value.errno == errno.EAGAIN
    assert s.poll() == Poll.BOOTSTRAPPING


def test_send_chunk_arguments(regions):
    eng, kv, aux = regions
    s = eng.sender(1)
    with pytest.raises(TypeError, match="part 0"):
        s.send_chunk([(kv, [1])])
    with pytest.raises(ValueError, match="at most"):
        s.send_chunk([(kv, i, [1]) for i in range(kvferry.MAX_REGIONS + 1)])
    with pytest.raises(OverflowError):
        s.send_chunk([(kv, -1, [1])])
    with pytest.raises(ValueError, match="empty"):
        s.send_chunk([(kv, 0, [])])


def test_region_calls_are_per_role(regions):
    eng, kv, aux = regions
    s = eng.sender(1)
    r = eng.receiver(1, "10.0.0.1:1")
    with pytest.raises(TypeError, match="receiver"):
        s.init_regions({kv: [0]})
    for fn in (lambda: r.peer_count(kv), r.user_data, lambda: r.send_chunk([], last=True)):
        with pytest.raises(TypeError, match="sender"):
            fn()
