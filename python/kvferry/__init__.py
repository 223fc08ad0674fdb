# SPDX-License-Identifier: Apache-2.0
"""kvferry: KV-cache transfer over RDMA for disaggregated LLM serving.

The binding of include/kvferry/kvferry.h (the extension module _kvferry):

    eng = kvferry.Engine(overrides={"rdma.device": "mlx5_0", "rdma.listen_port": 0})
    kv = eng.register_region("kv", buffers, item_sizes, nitems)   # or register_pool
    room = eng.sender(room_id)          # or eng.receiver(room_id, "host:port")
    room.send_chunk([(kv, dst_offset, src_pages)], last=...)    # receiver: init_regions
    ... eng.progress() once per scheduler iteration; room.poll() ...

An engine is used from the thread that opened it (WrongThreadError
otherwise). Errors are KVFerryError (an OSError: errno, strerror, and for a
failed room its reason, detail and room_id). The library's log lines go to
the logger "kvferry". kvferry.sglang is a transfer backend for SGLang.
"""
import atexit
import enum
import logging

from . import _kvferry
from ._kvferry import (
    FAN_MAX,
    MAX_REGIONS,
    REGION_NAME_MAX,
    USER_DATA_MAX,
    Engine,
    Failure,
    KVFerryError,
    Room,
    RoomStats,
    Stats,
    WrongThreadError,
)
from ._version import __version__

__all__ = [
    "FAN_MAX",
    "MAX_REGIONS",
    "REGION_NAME_MAX",
    "USER_DATA_MAX",
    "Engine",
    "Failure",
    "KVFerryError",
    "Poll",
    "Room",
    "RoomStats",
    "Stats",
    "WrongThreadError",
]


class Poll(enum.IntEnum):
    """Room states, numbered as SGLang's KVPoll (kvferry.h: enum kvf_poll)."""

    FAILED = _kvferry.FAILED
    BOOTSTRAPPING = _kvferry.BOOTSTRAPPING
    WAITING_FOR_INPUT = _kvferry.WAITING_FOR_INPUT
    TRANSFERRING = _kvferry.TRANSFERRING
    SUCCESS = _kvferry.SUCCESS


logger = logging.getLogger("kvferry")
_kvferry._set_logger(logger)
# Before the interpreter finalizes: a transport thread that logs after that
# could not take the GIL, so the lines go back to stderr.
atexit.register(_kvferry._set_logger, None)
