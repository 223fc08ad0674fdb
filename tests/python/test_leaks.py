# SPDX-License-Identifier: Apache-2.0
"""No reference or memory leaks over 100,000 calls of each kind, success and
error paths alike: reference counts of the objects passed in stay where they
were, and neither the interpreter's allocated blocks (sys.getallocatedblocks:
every Python object and buffer) nor the process (RSS: the library's malloc)
grow."""
import gc
import resource
import sys

import numpy as np
import pytest

import kvferry
from kvferry import KVFerryError

N = 100_000


def _rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() // 1024


def _run(fn, n=N, watched=()):
    """fn n times after a warm-up (what is allocated once is not counted).
    Returns the growth of the interpreter's allocated blocks and of the RSS
    (KiB), and the reference counts of watched before and after."""
    for _ in range(max(1000, n // 20)):
        fn()
    gc.collect()
    counts0 = [sys.getrefcount(o) for o in watched]
    blocks0 = sys.getallocatedblocks()
    rss0 = _rss_kib()
    for _ in range(n):
        fn()
    gc.collect()
    blocks1 = sys.getallocatedblocks()
    rss1 = _rss_kib()
    counts1 = [sys.getrefcount(o) for o in watched]
    return blocks1 - blocks0, rss1 - rss0, counts0, counts1


def _check(fn, *watched, n=N):
    blocks, rss, before, after = _run(fn, n, watched)
    assert after == before, "reference counts changed"
    # an object leaked per call would be >= n blocks
    assert blocks < 200, f"{blocks} more Python blocks allocated after {n} calls"
    assert rss < 4 * 1024, f"RSS grew {rss} KiB over {n} calls"


@pytest.fixture(autouse=True)
def quiet_logger():
    """The aborts log a warning each: 100,000 records would be the test."""
    lg = kvferry.logger
    level = lg.level
    lg.setLevel("ERROR")
    yield
    lg.setLevel(level)


@pytest.fixture(scope="module")
def world():
    e = kvferry.Engine(overrides={"engine.max_rooms": 128})
    bufs = [np.zeros(16 * 64, dtype=np.uint8) for _ in range(2)]
    e.register_pool(bufs, 64, 16)
    rooms = [e.sender(i) for i in range(64)]
    stale = e.sender(1000)
    stale.abort()
    stale.release()
    recv = e.receiver(2000, "10.0.0.1:1")
    yield e, rooms, stale, recv
    e.close()


def test_poll_progress_poll_many(world):
    e, rooms, _, _ = world
    r = rooms[0]

    def f():
        r.poll()
        e.progress()
        e.poll_many(rooms)
        e.watch(r)
        e.changed()
        e.unwatch(r)

    _check(f, e, r, rooms)


def test_stats_failure_room_stats_dump(world):
    e, rooms, _, _ = world
    r = rooms[1]

    def f():
        e.stats()
        r.failure()
        r.stats()

    _check(f, e, r)
    _check(e.dump, e, n=10_000)


def test_error_paths(world):
    e, _, stale, recv = world
    neg = np.array([0, -1], dtype=np.int32)
    big = np.array([1 << 40], dtype=np.int64)
    lst = [0, 1, -1]

    def f():
        try:
            stale.poll()
        except KVFerryError:
            pass
        for idx in (neg, big, lst):
            try:
                recv.init(idx)
            except ValueError:
                pass

    _check(f, e, stale, recv, neg, big, lst)


def test_index_conversions(world):
    """An out-of-pool list takes the whole path (conversion, the C call,
    KVFerryError with the failure attached) on an already failed room."""
    e, _, _, _ = world
    r = e.receiver(3000, "10.0.0.1:1")
    try:
        r.init([99])
    except KVFerryError:
        pass
    i32 = np.arange(8, dtype=np.int32)
    i64 = np.arange(8, dtype=np.int64)
    lst = list(range(8))

    def f():
        for idx in (i32, i64, lst):
            try:
                r.init(idx)
            except KVFerryError as x:
                assert x.reason == "bad request"

    _check(f, e, r, i32, i64, lst)


def test_room_create_abort_release(world):
    e, _, _, _ = world

    def f():
        r = e.sender(5000)
        r.abort()
        r.release()

    _check(f, e)


def test_engine_open_close_and_register():
    """Engines with a pool from buffer objects: the buffers' counts come back."""
    bufs = [np.zeros(64, dtype=np.uint8)]

    def f():
        with kvferry.Engine() as e:
            e.register_pool(bufs, 8, 8)

    _check(f, bufs[0], n=5_000)


def test_region_calls():
    """register/unregister with buffer objects, init_regions and send_chunk
    on their error paths, peer_count/user_data before ROOM_INFO."""
    bufs = [np.zeros(64, dtype=np.uint8)]
    lists = {0: np.arange(4, dtype=np.int32)}
    user = bytes(16)
    with kvferry.Engine() as e:
        e.register_region("kv", [np.zeros(16 * 8, np.uint8)], 8, 16)
        s = e.sender(1)
        r = e.receiver(1, "10.0.0.1:1")
        try:
            r.init_regions({0: [99]})  # fails the room: the later calls take ECANCELED
        except KVFerryError:
            pass
        parts = [(0, 0, np.arange(2, dtype=np.int64))]

        def f():
            reg = e.register_region("aux", bufs, 8, 8)
            e.unregister_region(reg)
            calls: tuple = (lambda: r.init_regions(lists, user), lambda: s.send_chunk(parts),
                            s.user_data, lambda: s.peer_count(0))
            for fn in calls:
                try:
                    fn()
                except KVFerryError:
                    pass

        _check(f, e, s, r, bufs[0], lists, user, parts, n=20_000)
