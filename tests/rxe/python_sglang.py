#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One side of an SGLang-shaped transfer over kvferry.sglang, on a real RDMA
device (tests/rxe/scenarios/python_sglang.sh runs a prefill and a decode process).

It calls the backend classes in the order SGLang's event loops do:
  prefill: bootstrap server + manager (it registers itself); per request a
    KVSender polled in the bootstrap queue until WaitingForInput, init(pages,
    aux row), send() once per chunk of a chunked prefill (one chunk per
    scheduler iteration; the last one with the state slot), polled in the
    inflight queue, clear() and its pages, aux row and state slot freed;
  decode: per request a KVReceiver, init(prefill_dp_rank) and polled until
    WaitingForInput, pages, an aux row and a state slot allocated,
    send_metadata(pages, aux row, [[state slot]], decode_prefix_len), polled
    until Success or Failed, every byte of the pages, the aux row (two aux
    buffers of different row sizes) and the state slot checked, clear() and
    all of it freed (or, for a room not yet quiescent, left to
    manager.page_release_hook).
manager.progress() runs once per loop turn, as the patched event loop calls it.

Requests (the same list on both sides, by bootstrap_room):
  1..ROOMS   ok: 1 to 12 pages, sent in up to 3 chunks; both sides SUCCESS,
             the decode checks every byte of every page of every buffer, of
             its aux row and of its state slot; every third room the decode
             holds a prefix of the request already (PREFIX pages fewer,
             decode_prefix_len = PREFIX * PAGE_TOKENS): the prefill reads
             that length back (pop_decode_prefix_len) and skips those pages
  1001       the prefill aborts it once the decode's pages are known
  1002       the decode aborts it after send_metadata
  1003       the decode aborts it and clears it at once: the room is not
             quiescent yet (the prefill's ABORT_ACK is on its way), so its
             pages must stay out of the free list until the hook gives them
  1004       the prefill aborts it right after sending and clears it (its
             writes may still be in flight); the decode takes SUCCESS (every
             byte checked) or FAILED (peer abort)
Then the kill phase: the decode posts rooms 2001..2004, the prefill writes
DIR/kill-ready once it sees them all and waits to be SIGKILLed; the decode
must see every one FAILED (peer lost), clear them, and get their pages back.

Prints "room ID OUTCOME reason" lines and one summary line
  py-sglang: role=R ok=N failed=N expected_failures=N bad_bytes=N deferred=N released_by_hook=N inflight=N live=N
and exits 0 when every request ended as expected.
"""
import argparse
import logging
import os
import signal
import sys
import time

import numpy as np

# The backend alone: kvferry.sglang's own classes, as a process without SGLang
# gets them (the tests' environment has SGLang 0.5.18, whose import takes
# minutes in a TCG guest; SGLang's own queues drive kvferry in kvf_sglang_real).
sys.modules.setdefault("sglang", None)  # type: ignore[arg-type]

from kvferry import sglang as ks

NBUF, PAGES, PAGE_BYTES = 4, 48, 4096
AUX_ROWS, AUX_ITEM = 16, [64, 256]   # two metadata buffers, rows of different sizes
SLOTS, SLOT_BYTES = 16, 512          # one state type, one buffer
PAGE_TOKENS = 16
OK_ROOMS = 30
ABORT_BY_PREFILL, ABORT_BY_DECODE, CLEAR_UNQUIESCENT, PREFILL_ABORT_INFLIGHT = 1001, 1002, 1003, 1004
KILL_ROOMS = [2001, 2002, 2003, 2004]


def pages_of(room):
    return 12 if room == PREFILL_ABORT_INFLIGHT else 1 + (room * 5) % 12


def prefix_of(room):
    """Pages the decode already holds (its prefix cache)."""
    return min(2, pages_of(room) - 1) if room <= OK_ROOMS and room % 3 == 0 else 0


def pattern(room, j, b, size=PAGE_BYTES):
    return ((np.arange(size, dtype=np.uint32) + room * 7 + j * 131 + b * 17) % 251 +
            1).astype(np.uint8)


AUX_TAG, STATE_TAG = 1000, 2000  # j of the aux row's and the state slot's patterns


class Args(ks.KVArgs):
    def __init__(self):
        self.bufs = [np.zeros(PAGES * PAGE_BYTES, dtype=np.uint8) for _ in range(NBUF)]
        self.engine_rank = 0
        self.kv_data_ptrs = [b.ctypes.data for b in self.bufs]
        self.kv_data_lens = [b.nbytes for b in self.bufs]
        self.kv_item_lens = [PAGE_BYTES] * NBUF
        self.aux = [np.zeros(AUX_ROWS * n, dtype=np.uint8) for n in AUX_ITEM]
        self.aux_data_ptrs = [a.ctypes.data for a in self.aux]
        self.aux_data_lens = [a.nbytes for a in self.aux]
        self.aux_item_lens = list(AUX_ITEM)
        self.state = np.zeros(SLOTS * SLOT_BYTES, dtype=np.uint8)
        self.state_types = ["mamba"]
        self.state_data_ptrs = [[self.state.ctypes.data]]
        self.state_data_lens = [[self.state.nbytes]]
        self.state_item_lens = [[SLOT_BYTES]]
        self.ib_device = ""
        self.system_dp_rank = 0


class ServerArgs:
    def __init__(self, host, port):
        self.host, self.disaggregation_bootstrap_port, self.tp_size = host, port, 1


class Pages:
    """A page allocator like SGLang's: scrambled, reused as soon as freed
    (also the aux rows' and the state slots')."""

    def __init__(self, seed, n=PAGES):
        self.free = list(np.random.default_rng(seed).permutation(n))

    def alloc(self, n):
        if len(self.free) < n:
            return None
        out, self.free = self.free[:n], self.free[n:]
        return np.array(out, dtype=np.int32)

    def release(self, pages):
        self.free += [int(p) for p in pages]


def out(msg):
    print(msg, flush=True)


def wait_file(path, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if os.path.exists(path):
            return True
        time.sleep(0.05)
    return False


def write_file(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def run_prefill(a):
    args = Args()
    srv = ks.KVBootstrapServer("127.0.0.1", 0)
    # files itself with the bootstrap server, as SGLang's managers do
    mgr = ks.KVManager(args, "prefill", ServerArgs("127.0.0.1", srv.port), config_path=a.config)
    write_file(os.path.join(a.dir, "bootstrap"), f"127.0.0.1:{srv.port}\n")
    pages, rows, slots = Pages(1), Pages(3, AUX_ROWS), Pages(4, SLOTS)
    rooms = list(range(1, OK_ROOMS + 1)) + [ABORT_BY_PREFILL, ABORT_BY_DECODE,
                                             CLEAR_UNQUIESCENT, PREFILL_ABORT_INFLIGHT]
    bootstrap = {r: ks.KVSender(mgr, "", r, [0], 0) for r in rooms}
    forward = {}   # room -> (sender, (pages, aux row, state slot), chunks left)
    inflight = {}  # room -> (sender, (pages, aux row, state slot))
    results = {}
    deferred = bad_prefix = 0
    end = time.monotonic() + a.timeout
    while (bootstrap or forward or inflight) and time.monotonic() < end:
        mgr.progress()
        for r, s in list(bootstrap.items()):
            st = s.poll()
            if st == ks.KVPoll.WaitingForInput:
                if r == ABORT_BY_PREFILL:
                    s.abort()
                    inflight[r] = (s, None)
                    del bootstrap[r]
                    continue
                if len(pages.free) < pages_of(r) or not rows.free or not slots.free:
                    continue  # waits for memory, as a request does
                src, row, slot = pages.alloc(pages_of(r)), rows.alloc(1)[0], slots.alloc(1)[0]
                s.init(len(src), int(row))
                got = s.pop_decode_prefix_len()
                if got != prefix_of(r) * PAGE_TOKENS:
                    out(f"UNEXPECTED room {r}: decode_prefix_len {got}, "
                        f"the decode sent {prefix_of(r) * PAGE_TOKENS}")
                    bad_prefix += 1
                for j, p in enumerate(src):
                    for b in range(NBUF):
                        args.bufs[b][p * PAGE_BYTES:(p + 1) * PAGE_BYTES] = pattern(r, j, b)
                for i, n in enumerate(AUX_ITEM):
                    args.aux[i][row * n:(row + 1) * n] = pattern(r, AUX_TAG, i, n)
                args.state[slot * SLOT_BYTES:(slot + 1) * SLOT_BYTES] = \
                    pattern(r, STATE_TAG, 0, SLOT_BYTES)
                forward[r] = (s, (src, row, slot), np.array_split(src, min(3, len(src))))
                del bootstrap[r]
            elif st == ks.KVPoll.Failed:
                inflight[r] = (s, None)
                del bootstrap[r]
        for r, (s, src, chunks) in list(forward.items()):
            if r in (ABORT_BY_DECODE, CLEAR_UNQUIESCENT):
                # never forwarded: the decode aborts them; wait for that
                if s.poll() == ks.KVPoll.Failed:
                    inflight[r] = (s, src)
                    del forward[r]
                continue
            chunk = chunks.pop(0)  # one chunk per scheduler iteration
            s.send(chunk, state_indices=None if chunks else [[int(src[2])]])
            if not chunks:
                inflight[r] = (s, src)
                del forward[r]
                if r == PREFILL_ABORT_INFLIGHT:
                    s.abort()
        for r, (s, src) in list(inflight.items()):
            st = s.poll()
            if st in (ks.KVPoll.Success, ks.KVPoll.Failed):
                reason = ""
                if st == ks.KVPoll.Failed:
                    try:
                        s.failure_exception()
                    except ks.KVTransferError as e:
                        reason = e.failure_reason
                s.clear()
                if r == PREFILL_ABORT_INFLIGHT and mgr.parked:
                    deferred += 1
                if src is not None:  # the sender only reads them
                    pages.release(src[0])
                    rows.release([src[1]])
                    slots.release([src[2]])
                results[r] = (st, reason)
                out(f"room {r} {'SUCCESS' if st == ks.KVPoll.Success else 'FAILED'} {reason}")
                del inflight[r]
    # parked rooms go once quiescent
    while mgr.parked and time.monotonic() < end:
        mgr.progress()
        time.sleep(0.01)
    bad = expect(results, {ABORT_BY_PREFILL: "local abort", ABORT_BY_DECODE: "peer abort",
                           CLEAR_UNQUIESCENT: "peer abort", PREFILL_ABORT_INFLIGHT: "local abort"},
                 rooms)
    summary("prefill", results, bad + bad_prefix, deferred, 0, mgr.engine.stats(), mgr)
    # the kill phase: the decode's rooms arrive; report them, wait for SIGKILL
    kill = {r: ks.KVSender(mgr, "", r, [0], 0) for r in KILL_ROOMS}
    while time.monotonic() < end:
        mgr.progress()
        if all(s.poll() == ks.KVPoll.WaitingForInput for s in kill.values()):
            break
        time.sleep(0.01)
    write_file(os.path.join(a.dir, "kill-ready"), "ready\n")
    while time.monotonic() < end:  # alive, heartbeating, until killed
        mgr.progress()
        time.sleep(0.01)
    out("prefill: not killed before the timeout")
    return 1


def expect(results, failures, rooms):
    bad = 0
    for r in rooms:
        st, reason = results.get(r, (None, "no outcome"))
        if r in failures:
            ok = (st == ks.KVPoll.Failed and reason.startswith(failures[r])) or (
                r == PREFILL_ABORT_INFLIGHT and st == ks.KVPoll.Success)
        else:
            ok = st == ks.KVPoll.Success
        if not ok:
            out(f"UNEXPECTED room {r}: state {st} reason '{reason}'")
            bad += 1
    return bad


def summary(role, results, bad, deferred, hooked, st, mgr):
    ok = sum(1 for s, _ in results.values() if s == ks.KVPoll.Success)
    failed = len(results) - ok
    live = sum(st.rooms.values())
    out(f"py-sglang: role={role} ok={ok} failed={failed} unexpected={bad} "
        f"deferred={deferred} released_by_hook={hooked} inflight={st.inflight} "
        f"unquiescent={st.unquiescent} live={live} parked={mgr.parked}")


def check_bytes(args, room, rc):
    """The request's pages after the decode's prefix, its aux row in both
    aux buffers, its state slot; each zeroed after the check, so that a
    reused one must be written again to pass."""
    bad, pre = 0, prefix_of(room)
    for j, p in enumerate(rc.kv_indices):
        for b in range(NBUF):
            got = args.bufs[b][p * PAGE_BYTES:(p + 1) * PAGE_BYTES]
            bad += int(np.count_nonzero(got != pattern(room, pre + j, b)))
            got[:] = 0
    for i, n in enumerate(AUX_ITEM):
        got = args.aux[i][rc.aux_index * n:(rc.aux_index + 1) * n]
        bad += int(np.count_nonzero(got != pattern(room, AUX_TAG, i, n)))
        got[:] = 0
    slot = rc.state_indices[0][0]
    got = args.state[slot * SLOT_BYTES:(slot + 1) * SLOT_BYTES]
    bad += int(np.count_nonzero(got != pattern(room, STATE_TAG, 0, SLOT_BYTES)))
    got[:] = 0
    return bad


def run_decode(a):
    args = Args()
    if not wait_file(os.path.join(a.dir, "bootstrap"), 120):
        out("decode: no bootstrap file from the prefill in 120 s")
        return 1
    with open(os.path.join(a.dir, "bootstrap")) as f:
        baddr = f.read().strip()
    mgr = ks.KVManager(args, "decode", None, config_path=a.config)
    pages, rows, slots = Pages(2), Pages(5, AUX_ROWS), Pages(6, SLOTS)
    hooked = []

    def give_back(rc):
        pages.release(rc.kv_indices)
        rows.release([rc.aux_index])
        slots.release(rc.state_indices[0])

    def hook(rc):  # what SGLang's patch does: free the request's memory now
        hooked.append(rc.bootstrap_room)
        give_back(rc)

    mgr.page_release_hook = hook
    rooms = list(range(1, OK_ROOMS + 1)) + [ABORT_BY_PREFILL, ABORT_BY_DECODE,
                                             CLEAR_UNQUIESCENT, PREFILL_ABORT_INFLIGHT]
    prealloc = {r: ks.KVReceiver(mgr, baddr, r) for r in rooms}
    for rc in prealloc.values():
        rc.init(0)
    transfer = {}  # room -> (receiver, pages)
    results, bad_bytes, deferred = {}, 0, 0
    end = time.monotonic() + a.timeout
    while (prealloc or transfer) and time.monotonic() < end:
        mgr.progress()
        for r, rc in list(prealloc.items()):
            st = rc.poll()
            if st == ks.KVPoll.WaitingForInput:
                n = pages_of(r) - prefix_of(r)
                if len(pages.free) < n or not rows.free or not slots.free:
                    continue
                dst, row, slot = pages.alloc(n), int(rows.alloc(1)[0]), int(slots.alloc(1)[0])
                rc.send_metadata(dst, row, [[slot]], prefix_of(r) * PAGE_TOKENS)
                transfer[r] = (rc, dst)
                del prealloc[r]
                if r == ABORT_BY_DECODE:
                    rc.abort()
                elif r == CLEAR_UNQUIESCENT:
                    rc.abort()
                    rc.clear()
                    if not rc.pages_deferred:
                        out("UNEXPECTED room 1003: quiescent right after abort")
                        bad_bytes += 1
                    deferred += rc.pages_deferred
                    results[r] = (ks.KVPoll.Failed, "local abort")
                    out(f"room {r} FAILED local abort (cleared unquiescent: pages deferred)")
                    del transfer[r]
            elif st == ks.KVPoll.Failed:
                results[r] = (st, "bootstrap")
                del prealloc[r]
        for r, (rc, dst) in list(transfer.items()):
            st = rc.poll()
            if st not in (ks.KVPoll.Success, ks.KVPoll.Failed):
                continue
            reason = ""
            if st == ks.KVPoll.Success:
                n = check_bytes(args, r, rc)
                bad_bytes += n
                if n:
                    out(f"room {r}: {n} bytes wrong")
            else:
                try:
                    rc.failure_exception()
                except ks.KVTransferError as e:
                    reason = e.failure_reason
            rc.clear()
            if rc.pages_deferred:
                deferred += 1
            else:
                give_back(rc)
            results[r] = (st, reason)
            out(f"room {r} {'SUCCESS' if st == ks.KVPoll.Success else 'FAILED'} {reason}")
            del transfer[r]
    while mgr.parked and time.monotonic() < end:
        mgr.progress()
        time.sleep(0.01)
    bad = expect(results, {ABORT_BY_PREFILL: "peer abort", ABORT_BY_DECODE: "local abort",
                           CLEAR_UNQUIESCENT: "local abort",
                           PREFILL_ABORT_INFLIGHT: "peer abort"}, rooms)
    if CLEAR_UNQUIESCENT not in hooked:
        out("UNEXPECTED: the hook never gave back room 1003's pages")
        bad += 1
    if (len(pages.free), len(rows.free), len(slots.free)) != (PAGES, AUX_ROWS, SLOTS):
        out(f"UNEXPECTED: not all back in the free lists: {len(pages.free)}/{PAGES} pages, "
            f"{len(rows.free)}/{AUX_ROWS} aux rows, {len(slots.free)}/{SLOTS} state slots")
        bad += 1
    summary("decode", results, bad + bad_bytes, deferred, len(hooked), mgr.engine.stats(), mgr)
    bad += bad_bytes
    # the kill phase
    kill = {r: ks.KVReceiver(mgr, baddr, r) for r in KILL_ROOMS}
    for r, rc in kill.items():
        rc.init(0)
        rc.send_metadata(pages.alloc(4), int(rows.alloc(1)[0]), [[int(slots.alloc(1)[0])]])
    write_file(os.path.join(a.dir, "decode-kill-posted"), "posted\n")
    lost = {}
    while len(lost) < len(kill) and time.monotonic() < end:
        mgr.progress()
        for r, rc in kill.items():
            if r not in lost and rc.poll() == ks.KVPoll.Failed:
                try:
                    rc.failure_exception()
                except ks.KVTransferError as e:
                    lost[r] = e.failure_reason
                rc.clear()
                if not rc.pages_deferred:
                    give_back(rc)
                out(f"room {r} FAILED {lost[r]} t={time.monotonic():.3f}")
        time.sleep(0.005)
    while mgr.parked and time.monotonic() < end:
        mgr.progress()
        time.sleep(0.01)
    for r in KILL_ROOMS:
        if not lost.get(r, "").startswith("peer lost"):
            out(f"UNEXPECTED room {r}: '{lost.get(r, 'no outcome')}', not peer lost")
            bad += 1
    if (len(pages.free), len(rows.free), len(slots.free)) != (PAGES, AUX_ROWS, SLOTS):
        out("UNEXPECTED: pages, aux rows or state slots not back after the kill phase")
        bad += 1
    st = mgr.engine.stats()
    live = sum(st.rooms.values())
    out(f"py-sglang: role=decode-kill lost={len(lost)} unexpected={bad} "
        f"inflight={st.inflight} live={live} parked={mgr.parked} hooked={len(hooked)}")
    mgr.close()
    return 0 if bad == 0 and live == 0 else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--role", choices=["prefill", "decode"], required=True)
    p.add_argument("--dir", required=True, help="files shared by the two sides")
    p.add_argument("--config", required=True)
    p.add_argument("--timeout", type=float, default=120)
    a = p.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    return run_prefill(a) if a.role == "prefill" else run_decode(a)


if __name__ == "__main__":
    sys.exit(main())
