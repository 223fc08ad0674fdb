# SPDX-License-Identifier: Apache-2.0
"""A real transfer from the kvferry an operator installs: run by
tests/rxe/scenarios/wheel.sh with the python of the virtual environment
scripts/wheel-test.sh installed the wheel into, under -I (no PYTHONPATH, no
script directory, no user site: nothing of the source tree on sys.path).

One process, two engines opened from overrides alone: a prefill on DEV0
listening on an ephemeral port, a decode on DEV1 dialing it. ROOMS rooms of
BLOCKS blocks each move from random source blocks to random destination
blocks; every destination byte is checked. Prints one line
"wheel: ok=N bad_bytes=N version=V file=PATH" and exits 0 when all is well.
"""
import argparse
import random
import sys
import time

import kvferry
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--dev0", required=True)
ap.add_argument("--addr0", required=True)
ap.add_argument("--dev1", required=True)
ap.add_argument("--addr1", required=True)
ap.add_argument("--rooms", type=int, default=20)
ap.add_argument("--blocks", type=int, default=8)
ap.add_argument("--timeout", type=float, default=120)
a = ap.parse_args()

# The package must be the installed one, not a tree on sys.path.
if not kvferry.__file__.startswith(sys.prefix + "/") or sys.prefix == sys.base_prefix:
    sys.exit(f"wheel: kvferry from {kvferry.__file__}, not from the venv {sys.prefix}")

NBUF, NBLOCKS, BS = 4, 64, 4096
TOKEN = "kvf-wheel-test"
common = {"rdma.auth_token": TOKEN, "log.level": "info", "heartbeat.interval_ms": 1000}
prefill = kvferry.Engine(overrides={**common, "engine.id": "wheel-prefill", "rdma.device": a.dev0,
                                    "rdma.listen_addr": a.addr0, "rdma.listen_port": 0})
dec = {**common, "engine.id": "wheel-decode", "rdma.device": a.dev1}
if a.addr1 != a.addr0:
    dec["rdma.source_addr"] = a.addr1
decode = kvferry.Engine(overrides=dec)
host, port = prefill.listen_addr()
print(f"wheel: prefill listens on {host}:{port}", flush=True)

src = [np.zeros(NBLOCKS * BS, np.uint8) for _ in range(NBUF)]
dst = [np.zeros(NBLOCKS * BS, np.uint8) for _ in range(NBUF)]
prefill.register_pool(src, BS, NBLOCKS)
decode.register_pool(dst, BS, NBLOCKS)

rng = random.Random(7)
ok = bad = 0
deadline = time.monotonic() + a.timeout
for r in range(a.rooms):
    room_id = 1000 + r
    sb = np.array(rng.sample(range(NBLOCKS), a.blocks), np.int32)
    db = np.array(rng.sample(range(NBLOCKS), a.blocks), np.int32)
    for i, buf in enumerate(src):
        for b in sb:
            buf[b * BS:(b + 1) * BS] = np.random.default_rng(room_id * 131 + i * 7 + int(b)).integers(
                0, 256, BS, np.uint8)
    rx = decode.receiver(room_id, f"{host}:{port}")
    rx.init(db)
    tx = prefill.sender(room_id)
    sent = False
    while True:
        prefill.progress()
        decode.progress()
        if not sent and tx.poll() == kvferry.Poll.WAITING_FOR_INPUT:
            tx.send(sb)
            sent = True
        states = (tx.poll(), rx.poll())
        if kvferry.Poll.FAILED in states:
            sys.exit(f"wheel: room {room_id} failed: sender {tx.failure()} receiver {rx.failure()}")
        if states == (kvferry.Poll.SUCCESS, kvferry.Poll.SUCCESS):
            break
        if time.monotonic() > deadline:
            sys.exit(f"wheel: room {room_id} not done in {a.timeout} s: {states}\n{prefill.dump()}\n{decode.dump()}")
    for i in range(NBUF):
        for s, d in zip(sb, db):
            bad += int(np.count_nonzero(src[i][s * BS:(s + 1) * BS] != dst[i][d * BS:(d + 1) * BS]))
    ok += 1
    for room in (tx, rx):
        while not room.release():
            prefill.progress()
            decode.progress()
            if time.monotonic() > deadline:
                sys.exit(f"wheel: room {room_id} ({room.role}) not released in {a.timeout} s")
decode.close()
prefill.close()
print(f"wheel: ok={ok} bad_bytes={bad} version={kvferry.__version__} file={kvferry.__file__}", flush=True)
sys.exit(0 if ok == a.rooms and bad == 0 else 1)
