# SPDX-License-Identifier: Apache-2.0
"""kvferry._kvferry without RDMA: the API, its errors, stale rooms, wrong
threads, bad overrides, buffer-protocol edge cases."""
import array
import errno
import gc
import logging
import sys
import threading
import weakref

import numpy as np
import pytest

import kvferry
from kvferry import KVFerryError, Poll, WrongThreadError


# ------------------------------------------------------------------ engine


def test_open_without_config_and_close_twice():
    e = kvferry.Engine()
    assert not e.closed
    assert e.owner_thread == threading.get_ident()
    e.close()
    e.close()
    assert e.closed


def test_context_manager_closes():
    with kvferry.Engine() as e:
        assert not e.closed
    assert e.closed
    with pytest.raises(ValueError, match="closed"):
        e.progress()


def test_overrides_as_dict_and_list():
    with kvferry.Engine(overrides={"engine.max_rooms": 2, "engine.id": "a b"}) as e:
        e.sender(1)
        e.sender(2)
        with pytest.raises(KVFerryError) as ei:
            e.sender(3)
        assert ei.value.errno == errno.ENOSPC
    with kvferry.Engine(overrides=["engine.max_rooms=1"]) as e:
        e.sender(1)
        with pytest.raises(KVFerryError):
            e.sender(2)


def test_bad_override_key_names_the_nearest():
    with pytest.raises(KVFerryError) as ei:
        kvferry.Engine(overrides={"rdma.devcie": "mlx5_0"})
    assert ei.value.errno == errno.EINVAL
    assert isinstance(ei.value, OSError)
    assert "rdma.device" in str(ei.value)


def test_bad_override_value_names_the_key():
    with pytest.raises(KVFerryError, match="engine.max_rooms") as ei:
        kvferry.Engine(overrides={"engine.max_rooms": 0})
    assert ei.value.errno == errno.EINVAL


@pytest.mark.parametrize(
    "ov, exc",
    [
        ("engine.max_rooms=4", TypeError),  # one string, not a list
        ({"engine.max_rooms": [4]}, TypeError),
        ({4: 4}, TypeError),
        ([b"engine.max_rooms=4"], TypeError),
        (42, TypeError),
    ],
)
def test_override_types_refused(ov, exc):
    with pytest.raises(exc):
        kvferry.Engine(overrides=ov)


def test_missing_config_file():
    with pytest.raises(KVFerryError) as ei:
        kvferry.Engine("/nonexistent/kvferry.conf")
    assert ei.value.errno == errno.ENOENT


def test_listen_addr_without_transport():
    with kvferry.Engine() as e:
        with pytest.raises(KVFerryError) as ei:
            e.listen_addr()
        assert ei.value.errno == errno.ENOTCONN


def test_engine_is_weakly_referenceable_and_freed():
    e = kvferry.Engine()
    w = weakref.ref(e)
    del e
    gc.collect()
    assert w() is None


# ------------------------------------------------------------------ threads


def _in_thread(fn):
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as x:  # noqa: BLE001 - handed back to the test
            out["exc"] = x

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out


def test_calls_from_another_thread_raise(pooled):
    r = pooled.sender(7)
    for fn in (pooled.progress, pooled.stats, pooled.dump, r.poll, r.abort,
               lambda: pooled.poll_many([r]), lambda: pooled.sender(8),
               lambda: pooled.watch(r), pooled.changed):
        out = _in_thread(fn)
        assert isinstance(out.get("exc"), WrongThreadError), fn
        assert str(threading.get_ident()) in str(out["exc"])
    # nothing happened to the room
    assert r.poll() == Poll.BOOTSTRAPPING


def test_close_from_another_thread(eng):
    r = eng.sender(1)
    out = _in_thread(eng.close)
    assert "exc" not in out
    assert eng.closed
    with pytest.raises(ValueError, match="closed"):
        r.poll()


# ------------------------------------------------------------------ pools


def test_register_pool_from_arrays_keeps_them_alive(eng):
    a = np.zeros(4 * 128, dtype=np.uint8)
    before = sys.getrefcount(a)
    eng.register_pool([a], [128], 4)
    assert sys.getrefcount(a) == before + 1  # one memoryview holds it
    w = weakref.ref(a)
    del a
    gc.collect()
    assert w() is not None  # the engine still holds the memory
    eng.close()
    gc.collect()
    assert w() is None  # let go once the engine is closed


def test_register_pool_from_int_addresses(eng):
    a = np.zeros((2, 8 * 32), dtype=np.uint8)
    ptrs = [a[i].ctypes.data for i in range(2)]
    eng.register_pool(ptrs, 32, 8)


def test_register_pool_twice(eng):
    a = np.zeros(64, dtype=np.uint8)
    eng.register_pool([a], 8, 8)
    with pytest.raises(KVFerryError) as ei:
        eng.register_pool([a], 8, 8)
    assert ei.value.errno == errno.EEXIST


def test_register_pool_after_a_room(eng):
    eng.sender(1)
    a = np.zeros(64, dtype=np.uint8)
    before = sys.getrefcount(a)
    with pytest.raises(KVFerryError) as ei:
        eng.register_pool([a], 8, 8)
    assert ei.value.errno == errno.EBUSY
    assert sys.getrefcount(a) == before  # a refused registration keeps nothing


@pytest.mark.parametrize(
    "bufs, sizes, nblocks, exc, text",
    [
        ([], 8, 8, ValueError, "at least one"),
        ([np.zeros(63, np.uint8)], 8, 8, ValueError, "63 bytes"),
        ([np.zeros(0, np.uint8)], 8, 0, ValueError, "0 bytes"),
        ([b"x" * 64], 8, 8, ValueError, "read-only"),
        ([np.zeros(128, np.uint8)[::2]], 8, 8, ValueError, "contiguous"),
        ([np.zeros(64, np.uint8)], [8, 8], 8, ValueError, "item sizes"),
        ([np.zeros(64, np.uint8)], 0, 8, ValueError, "item size 0"),
        ([0], 8, 8, ValueError, "address 0"),
        (["abc"], 8, 8, TypeError, "buffer protocol"),
        ([-1], 8, 8, OverflowError, ""),
        (42, 8, 8, TypeError, "sequence"),
    ],
)
def test_register_pool_refusals(eng, bufs, sizes, nblocks, exc, text):
    with pytest.raises(exc, match=text):
        eng.register_pool(bufs, sizes, nblocks)


def test_register_pool_with_zero_blocks(eng):
    with pytest.raises(KVFerryError) as ei:
        eng.register_pool([np.zeros(64, np.uint8)], 8, 0)
    assert ei.value.errno == errno.EINVAL


def test_read_only_numpy_array_refused(eng):
    a = np.zeros(64, np.uint8)
    a.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        eng.register_pool([a], 8, 8)


def test_buffer_objects_of_any_type(eng):
    eng.register_pool([bytearray(64), array.array("q", [0] * 8)], [8, 8], 8)


# ------------------------------------------------------------------ rooms


def test_sender_room_lifecycle(pooled):
    r = pooled.sender(0x1234)
    assert r.id == 0x1234 and r.role == "sender" and r.engine is pooled
    assert "0x1234" in repr(r)
    assert r.poll() == Poll.BOOTSTRAPPING
    with pytest.raises(KVFerryError) as ei:
        r.send(np.arange(4, dtype=np.int32))
    assert ei.value.errno == errno.EAGAIN
    assert r.failure().reason == "none"
    assert not r.release()  # not terminal: -EBUSY is False
    r.abort()
    r.abort()  # idempotent
    assert r.poll() == Poll.FAILED
    f = r.failure()
    assert f.reason == "local abort" and f.err == errno.ECANCELED and f.detail
    assert isinstance(f, kvferry.Failure) and f.wc_status == -1
    assert r.quiescent()
    assert r.release()


def test_stale_room_raises_einval(pooled):
    r = pooled.sender(5)
    r.abort()
    assert r.release()
    for fn in (r.poll, r.abort, r.failure, r.quiescent, r.release, r.stats):
        with pytest.raises(KVFerryError) as ei:
            fn()
        assert ei.value.errno == errno.EINVAL
        assert ei.value.room_id == 5
    with pytest.raises(KVFerryError):
        pooled.poll_many([r])
    # the slot's next room is another generation: the old handle stays stale
    r2 = pooled.sender(5)
    assert r2.handle != r.handle
    with pytest.raises(KVFerryError):
        r.poll()
    assert r2.poll() == Poll.BOOTSTRAPPING


def test_duplicate_room_id(pooled):
    pooled.sender(9)
    with pytest.raises(KVFerryError) as ei:
        pooled.sender(9)
    assert ei.value.errno == errno.EEXIST
    pooled.receiver(9, "10.0.0.1:1")  # the other role's table


def test_room_id_range(pooled):
    pooled.sender(2**64 - 1)
    with pytest.raises(OverflowError):
        pooled.sender(2**64)
    with pytest.raises(OverflowError):
        pooled.sender(-1)
    with pytest.raises(TypeError):
        pooled.sender("1")


def test_receiver_bad_peer(pooled):
    with pytest.raises(KVFerryError) as ei:
        pooled.receiver(1, "no-port")
    assert ei.value.errno == errno.EINVAL
    with pytest.raises(KVFerryError):
        pooled.receiver(1)  # no default peer in the config


def test_receiver_init_without_transport_fails_the_room(pooled):
    r = pooled.receiver(3, "10.0.0.1:18515")
    with pytest.raises(KVFerryError) as ei:
        r.init(np.arange(4, dtype=np.int32))
    e = ei.value
    assert e.errno == errno.ENOTCONN
    assert e.reason == "connect failed" and "10.0.0.1:18515" in str(e.detail)
    assert e.room_id == 3
    assert r.poll() == Poll.FAILED
    with pytest.raises(KVFerryError) as ei:
        r.init(np.arange(4, dtype=np.int32))
    assert ei.value.errno == errno.ECANCELED and ei.value.reason == "connect failed"


def test_init_and_send_are_per_role(pooled):
    s = pooled.sender(1)
    r = pooled.receiver(1, "10.0.0.1:1")
    with pytest.raises(TypeError, match="receiver"):
        s.init([0])
    with pytest.raises(TypeError, match="sender"):
        r.send([0])


def test_init_without_pool(eng):
    r = eng.receiver(1, "10.0.0.1:1")
    with pytest.raises(KVFerryError) as ei:
        r.init([0])
    assert ei.value.errno == errno.ENOBUFS


# ------------------------------------------------------------------ index lists


@pytest.mark.parametrize(
    "idx",
    [
        np.array([0, 3, 15], dtype=np.int32),
        np.array([0, 3, 15], dtype=np.uint32),
        np.array([0, 3, 15], dtype=np.int64),
        np.array([0, 3, 15], dtype=np.uint64),
        np.array([0, 3, 15], dtype=np.int16),
        np.array([0, 3, 15], dtype=np.uint8),
        np.array([0, 9, 3, 9, 15, 9], dtype=np.int32)[::2],  # strided
        np.array([0, 9, 3, 9, 15, 9], dtype=np.int64)[::2],
        [0, 3, 15],
        (0, 3, np.int64(15)),
        array.array("i", [0, 3, 15]),
        range(0, 16, 5),
    ],
)
def test_index_lists_accepted(pooled, idx):
    # A block id inside the pool passes the binding; the engine then
    # refuses it for want of a transport: ENOTCONN, not a conversion error.
    r = pooled.receiver(1, "10.0.0.1:1")
    with pytest.raises(KVFerryError) as ei:
        r.init(idx)
    assert ei.value.errno == errno.ENOTCONN


@pytest.mark.parametrize(
    "idx, exc, text",
    [
        (np.array([], dtype=np.int32), ValueError, "empty"),
        ([], ValueError, "empty"),
        (np.array([0, -1], dtype=np.int32), ValueError, "index 1 is negative"),
        (np.array([0, -5], dtype=np.int64), ValueError, "index 1 is negative"),
        ([3, -2], ValueError, "index 1 is negative"),
        (np.array([2**32], dtype=np.int64), ValueError, "4294967295"),
        (np.array([2**32], dtype=np.uint64), ValueError, "4294967295"),
        ([2**64], ValueError, "out of range"),
        (np.array([1.0, 2.0]), TypeError, "format 'd'"),
        (np.array([True, False]), TypeError, "format '\\?'"),
        (np.zeros((2, 2), dtype=np.int32), ValueError, "2-dimensional"),
        (np.int32(4), ValueError, "0-dimensional"),
        ([1.5], TypeError, "index 0 is a float"),
        (["1"], TypeError, "index 0 is a str"),
        ("12", TypeError, "not str"),
        (7, TypeError, "not int"),
        (None, TypeError, "index list"),
        (np.array([0, 1], dtype=">i4"), TypeError, "format '>i'"),
    ],
)
def test_index_lists_refused(pooled, idx, exc, text):
    r = pooled.receiver(1, "10.0.0.1:1")
    with pytest.raises(exc, match=text):
        r.init(idx)
    assert r.poll() == Poll.BOOTSTRAPPING  # a refused list leaves the room as it was


def test_index_outside_the_pool_fails_the_room(pooled):
    r = pooled.receiver(1, "10.0.0.1:1")
    with pytest.raises(KVFerryError) as ei:
        r.init(np.array([0, 16], dtype=np.int32))
    assert ei.value.errno == errno.ERANGE
    assert ei.value.reason == "bad request"
    assert "[1] = 16" in str(ei.value.detail) and "outside" in str(ei.value.detail)
    assert r.poll() == Poll.FAILED


# ------------------------------------------------------------------ many, stats, dump, logs


def test_poll_many(pooled):
    rooms = [pooled.sender(i) for i in range(10)]
    rooms[3].abort()
    st = pooled.poll_many(rooms)
    assert st == [Poll.BOOTSTRAPPING] * 3 + [Poll.FAILED] + [Poll.BOOTSTRAPPING] * 6
    assert pooled.poll_many(()) == []
    with pytest.raises(TypeError, match="item 1"):
        pooled.poll_many([rooms[0], 5])
    with kvferry.Engine() as other:
        with pytest.raises(ValueError, match="another engine"):
            other.poll_many([rooms[0]])


def test_changed_reports_each_watched_change_once(pooled):
    rooms = [pooled.sender(i) for i in range(10)]
    for r in rooms[:8]:
        pooled.watch(r)
    assert pooled.changed() == [], "watching reports nothing: the state then counts as said"
    rooms[3].abort()
    rooms[9].abort()  # not watched
    assert pooled.changed() == [(rooms[3].handle, Poll.FAILED)]
    assert pooled.changed() == [], "said once"
    pooled.unwatch(rooms[5])
    rooms[5].abort()
    rooms[6].abort()
    assert rooms[6].release()
    assert pooled.changed() == [], "unwatched, and released: neither is reported"
    with pytest.raises(KVFerryError) as ei:
        pooled.unwatch(rooms[5])
    assert ei.value.errno == errno.EINVAL
    with pytest.raises(TypeError, match="not a Room"):
        pooled.watch(5)
    with kvferry.Engine() as other:
        with pytest.raises(ValueError, match="another engine"):
            other.watch(rooms[0])


def test_changed_hands_back_more_than_one_batch():
    """kvf_changed is called 256 at a time: 600 changes come back whole."""
    with kvferry.Engine(overrides={"engine.max_rooms": 700}) as e:
        e.register_pool([np.zeros(16 * 64, dtype=np.uint8)], 64, 16)
        rooms = [e.sender(i) for i in range(600)]
        for r in rooms:
            e.watch(r)
            r.abort()
        got = e.changed()
        assert got == [(r.handle, Poll.FAILED) for r in rooms]
        assert e.changed() == []


def test_stats_and_room_stats(pooled):
    rooms = [pooled.sender(i) for i in range(3)]
    rooms[0].abort()
    st = pooled.stats()
    assert isinstance(st, kvferry.Stats)
    assert st.created == 3 and st.released == 0 and st.inflight == 0
    assert st.rooms["BOOTSTRAPPING"] == 2 and st.rooms["FAILED"] == 1
    assert st.failures["local abort"] == 1
    assert set(st.deadlines) >= {"none", "bootstrap"}
    # every field of struct kvf_stats; no transport: its counters are 0
    assert st.connects == 0 and st.connect_backoffs == 0 and st.conns_held == 0
    assert st.wrs_posted == 0 and st.early_infos_refused == 0 and st.staged_bytes == 0
    assert st.keepalives_sent == 0 and st.keepalives_acked == 0 and st.keepalives_late == 0
    assert st.calls_concurrent == 0
    assert st.auth_ok == 0 and st.auth_dropped == 0 and st.conns_over_max == 0
    assert st.auth_refused == {"refused by the peer": 0, "bad token": 0, "replayed proof": 0,
                               "identity mismatch": 0, "malformed proof": 0,
                               "frame before proof": 0, "no proof in time": 0}
    rs = rooms[1].stats()
    assert rs.role == "sender" and rs.state == "BOOTSTRAPPING" and rs.room_id == 1
    assert rs.deadline == "bootstrap" and rs.deadline_ns > rs.now_ns
    assert rooms[0].stats().fail_reason == "local abort"


def test_dump(pooled):
    pooled.sender(0xABC)
    text = pooled.dump()
    assert isinstance(text, str)
    assert "0xabc" in text.lower()


def test_logs_go_to_the_kvferry_logger(pooled, caplog):
    with caplog.at_level(logging.DEBUG, logger="kvferry"):
        r = pooled.sender(0x77)
        r.abort()
    recs = [x for x in caplog.records if x.name == "kvferry"]
    assert any("0x77" in x.getMessage() for x in recs), [x.getMessage() for x in recs]


def test_progress_returns_count(pooled):
    assert pooled.progress() >= 0
