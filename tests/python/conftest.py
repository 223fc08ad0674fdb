# SPDX-License-Identifier: Apache-2.0
"""The kvferry package under test: the build dir's copy (PYTHONPATH=<build>/python,
as scripts/test.sh sets it) or an installed one. Not importable is an error,
never a skip.

The engines' packages (SGLang, vLLM) are in the tests' environment for
tests/sglang and tests/vllm; here they are hidden, so this suite tests
kvferry.sglang's own stand-ins (what a process without SGLang gets) and
measures no torch in its leak checks. A test that wants the real engine runs
it in a subprocess (test_sglang.py); kvferry.vllm needs vLLM (tests/vllm)."""
import sys

import numpy as np
import pytest

for _engine in ("sglang", "vllm"):
    sys.modules.setdefault(_engine, None)  # type: ignore[arg-type]  # import -> ImportError

import kvferry  # noqa: E402


@pytest.fixture
def eng():
    """An engine without a transport (no rdma.* key): the room engine alone."""
    e = kvferry.Engine(overrides={"engine.max_rooms": 64})
    yield e
    e.close()


@pytest.fixture
def pooled(eng):
    """An engine with a registered pool of 2 buffers x 16 blocks x 64 bytes."""
    bufs = [np.zeros(16 * 64, dtype=np.uint8) for _ in range(2)]
    eng.register_pool(bufs, 64, 16)
    return eng
