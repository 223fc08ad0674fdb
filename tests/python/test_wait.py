# SPDX-License-Identifier: Apache-2.0
"""Engine.wait / fileno / wait_prepare (kvf_engine_wait, kvf_engine_fd,
kvf_engine_wait_prepare) without RDMA: the timeout, a due deadline, the fd in
an asyncio loop, and a close from another thread during a wait."""
import asyncio
import threading
import time

import pytest

import kvferry
from kvferry import Poll


@pytest.fixture
def short():
    """An engine whose bootstrap deadline is 1 s."""
    e = kvferry.Engine(overrides={"engine.max_rooms": 8, "deadlines.bootstrap_s": 1})
    yield e
    e.close()


def test_wait_times_out_with_nothing_to_do(eng):
    t0 = time.monotonic()
    assert eng.wait(60) is False
    assert 0.05 <= time.monotonic() - t0 < 2.0
    assert eng.wait(0) is False


def test_wait_prepare_without_deadlines():
    e = kvferry.Engine(overrides={"engine.summary_interval_s": 0})
    try:
        assert e.wait_prepare() is None  # nothing falls due on any clock
        e.progress()
    finally:
        e.close()


def test_wait_returns_when_a_deadline_falls_due(short):
    room = short.sender(1)
    t0 = time.monotonic()
    while room.poll() != Poll.FAILED and time.monotonic() - t0 < 10:
        short.wait(20000)
        short.progress()
    assert room.poll() == Poll.FAILED
    assert time.monotonic() - t0 < 2.5


def test_fileno_in_an_asyncio_loop(short):
    room = short.sender(1)
    assert short.fileno() >= 0
    timeout = short.wait_prepare()
    assert timeout is not None and 0.0 < timeout <= 1.0

    async def drive():
        loop = asyncio.get_running_loop()
        woke = asyncio.Event()
        loop.add_reader(short.fileno(), woke.set)
        try:
            while True:
                short.progress()
                if room.poll() == Poll.FAILED:
                    break
                t = short.wait_prepare()
                try:
                    await asyncio.wait_for(woke.wait(), t)
                except asyncio.TimeoutError:
                    pass
                woke.clear()
        finally:
            loop.remove_reader(short.fileno())

    t0 = time.monotonic()
    asyncio.run(asyncio.wait_for(drive(), 10))
    assert time.monotonic() - t0 < 2.5


def test_close_from_another_thread_ends_a_wait(eng):
    t = threading.Timer(0.1, eng.close)
    t.start()
    t0 = time.monotonic()
    with pytest.raises(ValueError):
        eng.wait(10000)
    t.join()
    assert time.monotonic() - t0 < 5
    assert eng.closed
    with pytest.raises(ValueError):
        eng.wait(0)
