# SPDX-License-Identifier: Apache-2.0
"""What a user may do wrong from the API side (docs/chaos.md, "What a user
may do wrong"): each is refused with a clear error or is documented, and
nothing else is lost. The rest of the table is tested where its subject is:
calls on a closed engine and from another thread (test_binding.py), a region
unregistered while a room uses it (test_regions.py)."""
import errno
import os

import numpy as np
import pytest

import kvferry


def test_fork_after_open_child_is_refused_parent_goes_on():
    """The child shares the parent's verbs objects but none of its threads:
    its engine refuses (ECHILD) and its close tears nothing of the parent's
    down (src/engine/guard.c)."""
    e = kvferry.Engine(overrides={"engine.max_rooms": 8})
    r = e.sender(5)
    pid = os.fork()
    if pid == 0:  # the child: report by exit code only
        code = 0
        try:
            e.progress()
            code |= 1
        except kvferry.KVFerryError as x:
            code |= 0 if x.errno == errno.ECHILD else 2
        except BaseException:  # noqa: BLE001 - anything else is a failure
            code |= 4
        try:
            e.close()
        except BaseException:  # noqa: BLE001
            code |= 8
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert e.progress() >= 0
    assert r.poll() == kvferry.Poll.BOOTSTRAPPING
    e.close()


def _fds():
    return len(os.listdir("/proc/self/fd"))


def _rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


@pytest.fixture
def quiet_logger():
    """The aborts log a warning each: 10,000 records kept by pytest would be
    what the RSS measures."""
    level = kvferry.logger.level
    kvferry.logger.setLevel("ERROR")
    yield
    kvferry.logger.setLevel(level)


def test_ten_thousand_engines_opened_and_closed_fds_and_memory_flat(quiet_logger):
    buf = np.zeros(64, dtype=np.uint8)
    for _ in range(200):  # warm-up: what is allocated once is not counted
        with kvferry.Engine() as e:
            e.register_region("kv", [buf], [8], 8)
    fds, rss = _fds(), _rss_kib()
    for i in range(10_000):
        with kvferry.Engine(overrides={"engine.max_rooms": 16}) as e:
            e.register_region("kv", [buf], [8], 8)
            e.sender(i).abort()
    assert _fds() == fds, "file descriptors left open"
    assert _rss_kib() - rss < 4 * 1024, "RSS grew over 10,000 engines"


def test_wrong_role_names_the_call_the_room_and_both_roles():
    e = kvferry.Engine()
    try:
        e.register_pool([np.zeros(1024, dtype=np.uint8)], 64, 16)
        s, r = e.sender(0x1A), e.receiver(0x2B, "10.0.0.1:1")
        with pytest.raises(TypeError, match=r"^init_regions\(\) is for receiver rooms; "
                                            r"room 0x1a is a sender$"):
            s.init_regions({"kv": [0]})  # type: ignore[dict-item]  # the role is checked first
        with pytest.raises(TypeError, match=r"^send_chunk\(\) is for sender rooms; "
                                            r"room 0x2b is a receiver$"):
            r.send_chunk([])
        s.abort()
        r.abort()
    finally:
        e.close()
