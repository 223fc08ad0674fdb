#!/usr/bin/env python3
"""The peers of scripts/bench-compare.sh's peers step (issue 39): Mooncake's
transfer engine and NIXL (UCX backend, host memory) moving the rooms
kvferry-bench moves, two processes, prefill on one rxe device writing into
the decode's buffers on the other.

    bench_peers.py --peer mooncake|nixl --role prefill|decode
        --dev RXE --addr IP --ctrl PORT [--gid N]
        [--rooms N] [--buffers N] [--blocks-per-room N] [--block-size B]
        [--window N] [--layout rotated|contiguous|sglang] [--seed N] [--out F]

The block lists are kvferry-bench's (tools/bench_layout.c, same --seed,
--window and --layout): room i uses partition i % window of each buffer;
each buffer holds window partitions. Every room moves, in every buffer, its
blocks-per-room blocks (src block -> dst block).

How each peer is driven is how SGLang 0.5.18's backend for it drives it
(sglang/srt/disaggregation/{mooncake,nixl}/conn.py, read, not copied):

- Mooncake: the (src, dst) page lists of a room are merged into runs of
  pages contiguous on both sides (SGLang's group_concurrent_contiguous), the
  runs of every buffer go in one batch_transfer_sync_write per room (one
  batch for all layers, as SGLang does without a custom memory pool), from a
  pool of --window threads; after the sync write returns, the prefill sends
  the decode a status message (SGLang: ZMQ; here a line on the control
  socket), which is when the decode sees the room. P2P handshake, no
  metadata server.
- NIXL: prep_xfer_dlist over every page slot of every buffer on each side,
  one make_prepped_xfer per room with every (buffer, page) of the room and a
  notification (NIXL merges adjacent descriptors itself), transfer(), then
  check_xfer_state until DONE; the decode sees the room when its
  notification comes out of get_new_notifs.

One untimed room first (the connection's setup), then the timed pass, as
kvferry-bench leaves the connection's setup out. Each side writes one JSON
line (--out, else stdout): the decode's has the bandwidth (timed bytes over
the first timed room's send to the last room seen), per-room latency (send
stamp, CLOCK_MONOTONIC, to seen on the decode; both processes on one host),
the CPU seconds of the process over the timed pass (every thread, the
Python loop included), and the check of the last room of every partition.
"""
import argparse
import ctypes
import json
import mmap
import os
import socket
import sys
import threading
import time

import numpy as np

M64 = (1 << 64) - 1


def mix(x):
    """tools/bench_layout.c's bench_mix (splitmix64's finaliser)."""
    x &= M64
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def part_blocks(o):
    return 2 * o.blocks_per_room if o.layout == "sglang" else o.blocks_per_room


def room_block(o, i, j, src):
    """bench_room_block: room i's j-th block on the source or destination."""
    base = (i % o.window) * part_blocks(o)
    bpr = o.blocks_per_room
    if o.layout == "contiguous":
        return base + j
    if o.layout == "sglang":
        h = (bpr + 1) // 2
        if j < h:
            return base + j
        return base + h + 1 + 2 * ((j - h) if src else (bpr - 1 - j))
    rot = mix(o.seed ^ ((i << 1) | int(src))) % bpr
    return base + (j + rot) % bpr


def room_lists(o, i):
    src = np.array([room_block(o, i, j, True) for j in range(o.blocks_per_room)], dtype=np.int64)
    dst = np.array([room_block(o, i, j, False) for j in range(o.blocks_per_room)], dtype=np.int64)
    return src, dst


def group_contiguous(src, dst):
    """Runs of pages contiguous on both sides, in list order (what SGLang's
    group_concurrent_contiguous computes): [(src0, dst0, npages)]."""
    brk = np.where((np.diff(src) != 1) | (np.diff(dst) != 1))[0] + 1
    return [(int(s[0]), int(d[0]), len(s)) for s, d in zip(np.split(src, brk), np.split(dst, brk))]


class Buffers:
    """--buffers page-aligned anonymous mappings, one per buffer (a layer's
    K or V), window partitions each."""

    def __init__(self, o, fill):
        self.size = o.window * part_blocks(o) * o.block_size
        self.maps = [mmap.mmap(-1, self.size) for _ in range(o.buffers)]
        self.arrays = [np.frombuffer(m, dtype=np.uint8) for m in self.maps]
        self.ptrs = [ctypes.addressof(ctypes.c_char.from_buffer(m)) for m in self.maps]
        for b, a in enumerate(self.arrays):
            if fill:
                a[:] = pattern(o, b, self.size)
            else:
                a[:] = 0xA5


def pattern(o, b, size):
    return np.random.default_rng([o.seed, b]).integers(0, 256, size, dtype=np.uint8)


def cpu_s():
    return time.process_time()


def thread_cpu():
    """CPU seconds per thread of this process (/proc/self/task), by
    name:tid ("main" the main thread)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/stat") as f:
                st = f.read()
        except OSError:
            continue
        name = "main" if int(t) == os.getpid() else f'{st[st.index("(") + 1:st.rindex(")")]}:{t}'
        f = st[st.rindex(")") + 2:].split()
        out[name] = (int(f[11]) + int(f[12])) / tick
    return out


def threads_delta(t0):
    """Which threads took the CPU since thread_cpu() gave t0: the six
    busiest, seconds each."""
    t1 = thread_cpu()
    d = {k: round(v - t0.get(k, 0), 2) for k, v in t1.items()}
    return dict(sorted(d.items(), key=lambda kv: -kv[1])[:6])


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


class Ctrl:
    """The control connection (SGLang's bootstrap and status messages):
    JSON lines over TCP on loopback; the decode listens."""

    def __init__(self, o):
        if o.role == "decode":
            ls = socket.socket()
            ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            ls.bind(("127.0.0.1", o.ctrl))
            ls.listen(1)
            print(f"bench_peers: decode listening on {o.ctrl}", file=sys.stderr, flush=True)
            self.s, _ = ls.accept()
            ls.close()
        else:
            for _ in range(600):
                try:
                    self.s = socket.create_connection(("127.0.0.1", o.ctrl))
                    break
                except OSError:
                    time.sleep(0.1)
            else:
                raise SystemExit("bench_peers: no decode on the control port")
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile("rb")
        self.lock = threading.Lock()

    def send(self, obj):
        data = (json.dumps(obj) + "\n").encode()
        with self.lock:
            self.s.sendall(data)

    def recv(self):
        line = self.f.readline()
        if not line:
            raise SystemExit("bench_peers: the control connection closed")
        return json.loads(line)


# ---- Mooncake -------------------------------------------------------------
def mooncake_engine(o):
    from mooncake.engine import TransferEngine

    e = TransferEngine()
    rc = e.initialize(o.addr, "P2PHANDSHAKE", o.protocol, o.dev)
    if rc != 0:
        raise SystemExit(f"bench_peers: mooncake initialize({o.addr}, P2PHANDSHAKE, {o.protocol}, {o.dev}) = {rc}")
    return e


def mooncake_register(e, bufs):
    rc = e.batch_register_memory(list(bufs.ptrs), [bufs.size] * len(bufs.ptrs))
    if rc != 0:
        raise SystemExit(f"bench_peers: mooncake batch_register_memory = {rc}")


def mooncake_prefill(o, ctrl, bufs):
    e = mooncake_engine(o)
    mooncake_register(e, bufs)
    info = ctrl.recv()
    session, dptrs = info["session"], info["ptrs"]
    bs = o.block_size
    plans = {}

    def plan(i):
        p = i % o.window
        if p not in plans or o.layout == "rotated":
            runs = group_contiguous(*room_lists(o, i))
            s, d, n = [], [], []
            for b in range(o.buffers):
                for rs, rd, k in runs:
                    s.append(bufs.ptrs[b] + rs * bs)
                    d.append(dptrs[b] + rd * bs)
                    n.append(k * bs)
            if o.layout == "rotated":
                return s, d, n
            plans[p] = (s, d, n)
        return plans[p]

    calls = []  # how long each timed room's batch_transfer_sync_write took (us)

    def room(i, tag):
        s, d, n = plan(i)
        t = now_ns()
        rc = e.batch_transfer_sync_write(session, s, d, n)
        if rc != 0:
            raise SystemExit(f"bench_peers: mooncake batch_transfer_sync_write room {i} = {rc}")
        if tag == "timed":
            calls.append((now_ns() - t) / 1000)
        ctrl.send({"room": i, "tag": tag, "sent": t})
        return len(s)

    room(0, "warmup")
    ctrl.recv()  # the decode's go
    c0, t0, th0 = cpu_s(), now_ns(), thread_cpu()
    writes = [0] * o.window
    err = []

    # --window threads, as SGLang's transfer executors; thread k moves the
    # rooms of partition k in turn, so a partition is reused only after its
    # previous room's sync write returned
    def work(k):
        try:
            for i in range(k, o.rooms, o.window):
                writes[k] += room(i, "timed")
        except BaseException as ex:  # noqa: BLE001 - raised below
            err.append(ex)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(o.window)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if err:
        raise err[0]
    return {"cpu_s": cpu_s() - c0, "seconds": (now_ns() - t0) / 1e9, "writes_requested": sum(writes),
            "threads_cpu_s": threads_delta(th0),
            "sync_write_us": {"p50": pct(calls, 50), "p99": pct(calls, 99)}}


def mooncake_decode(o, ctrl, bufs):
    e = mooncake_engine(o)
    mooncake_register(e, bufs)
    ctrl.send({"session": f"{o.addr}:{e.get_rpc_port()}", "ptrs": bufs.ptrs})
    m = ctrl.recv()
    assert m["tag"] == "warmup"
    ctrl.send({"go": 1})
    c0, th0 = cpu_s(), thread_cpu()
    sent, seen = [None] * o.rooms, [None] * o.rooms
    for _ in range(o.rooms):
        m = ctrl.recv()
        seen[m["room"]] = now_ns()
        sent[m["room"]] = m["sent"]
    return sent, seen, cpu_s() - c0, threads_delta(th0), e


# ---- NIXL -----------------------------------------------------------------
def nixl_agent(o):
    from nixl._api import nixl_agent, nixl_agent_config

    # SGLang's: no backend at creation, the progress thread on (the default)
    cfg = nixl_agent_config(enable_prog_thread=not o.no_prog_thread, backends=[])
    a = nixl_agent(f"bench-{o.role}", cfg)
    params = {}
    if o.nixl_params:
        params.update(json.loads(o.nixl_params))
    a.create_backend("UCX", params)
    return a


def nixl_slots(bufs, o):
    """Every page slot of every buffer: (addr, len, dev 0), buffer-major."""
    n = o.window * part_blocks(o)
    return np.vstack([np.column_stack([np.arange(n, dtype=np.uint64) * np.uint64(o.block_size)
                                       + np.uint64(p), np.full(n, o.block_size, dtype=np.uint64),
                                       np.zeros(n, dtype=np.uint64)]) for p in bufs.ptrs])


def nixl_register(a, bufs):
    regs = a.register_memory([(p, bufs.size, 0, "") for p in bufs.ptrs], "DRAM")
    if not regs:
        raise SystemExit("bench_peers: NIXL register_memory failed")
    return regs


def nixl_prefill(o, ctrl, bufs):
    a = nixl_agent(o)
    nixl_register(a, bufs)
    ctrl.send({"meta": a.get_agent_metadata().hex()})
    info = ctrl.recv()
    peer = a.add_remote_agent(bytes.fromhex(info["meta"]))
    if isinstance(peer, bytes):
        peer = peer.decode()
    n = o.window * part_blocks(o)
    slots_local = nixl_slots(bufs, o)
    slots_remote = slots_local.copy()
    for b, p in enumerate(info["ptrs"]):
        slots_remote[b * n:(b + 1) * n, 0] = (np.arange(n, dtype=np.uint64) * np.uint64(o.block_size)
                                               + np.uint64(p))
    src_prep = a.prep_xfer_dlist("NIXL_INIT_AGENT", slots_local, "DRAM")
    dst_prep = a.prep_xfer_dlist(peer, slots_remote, "DRAM")
    offs = np.arange(o.buffers, dtype=np.int64)[:, None] * n

    def indices(i):
        s, d = room_lists(o, i)
        return (offs + s[None, :]).ravel(), (offs + d[None, :]).ravel()

    posted, done = {}, []  # post time per live handle; post -> DONE (us)

    def post(i, tag):
        si, di = indices(i)
        t = now_ns()
        h = a.make_prepped_xfer("WRITE", src_prep, si, dst_prep, di, f"{tag}:{i}:{t}".encode())
        if not h:
            raise SystemExit(f"bench_peers: NIXL make_prepped_xfer room {i} failed")
        st = a.transfer(h)
        if st == "ERR":
            raise SystemExit(f"bench_peers: NIXL transfer room {i}: ERR")
        posted[h] = t
        return h

    def finish(h, i):
        while True:
            st = a.check_xfer_state(h)
            if st == "DONE":
                done.append((now_ns() - posted.pop(h)) / 1000)
                a.release_xfer_handle(h)
                return True
            if st == "ERR":
                raise SystemExit(f"bench_peers: NIXL room {i}: ERR")
            return False

    h = post(0, "warmup")
    while not finish(h, 0):
        time.sleep(o.poll_us / 1e6)
    ctrl.recv()  # the decode's go
    done.clear()
    c0, t0, th0 = cpu_s(), now_ns(), thread_cpu()
    live = {}  # partition -> (handle, room)
    i = 0
    while i < o.rooms or live:
        progressed = False
        for p, (h, r) in list(live.items()):
            if finish(h, r):
                del live[p]
                progressed = True
        while i < o.rooms and (i % o.window) not in live:
            live[i % o.window] = (post(i, "timed"), i)
            i += 1
            progressed = True
        if not progressed:
            time.sleep(o.poll_us / 1e6)
    out = {"cpu_s": cpu_s() - c0, "seconds": (now_ns() - t0) / 1e9,
           "descs_requested": o.rooms * o.buffers * o.blocks_per_room,
           "post_to_done_us": {"p50": pct(done, 50), "p99": pct(done, 99)},
           "threads_cpu_s": threads_delta(th0)}
    ctrl.recv()  # the decode has seen every room: only then tear down
    return out


def nixl_decode(o, ctrl, bufs):
    a = nixl_agent(o)
    nixl_register(a, bufs)
    info = ctrl.recv()
    a.add_remote_agent(bytes.fromhex(info["meta"]))
    ctrl.send({"meta": a.get_agent_metadata().hex(), "ptrs": bufs.ptrs})
    sent, seen = [None] * o.rooms, [None] * o.rooms

    def drain(want_timed):
        got = 0
        for msgs in a.get_new_notifs().values():
            for m in msgs:
                tag, i, t = m.decode().split(":")
                if tag == "timed":
                    seen[int(i)] = now_ns()
                    sent[int(i)] = int(t)
                    got += 1
                elif not want_timed:
                    got += 1
        return got

    while not drain(False):
        time.sleep(o.poll_us / 1e6)
    ctrl.send({"go": 1})
    c0, th0 = cpu_s(), thread_cpu()
    n = 0
    while n < o.rooms:
        k = drain(True)
        n += k
        if not k:
            time.sleep(o.poll_us / 1e6)
    c, th = cpu_s() - c0, threads_delta(th0)
    ctrl.send({"seen": n})
    return sent, seen, c, th, a


# ---- both -------------------------------------------------------------------
def check(o, bufs):
    """The last room of every partition: each destination block holds its
    source block's bytes (the source pattern is derived from --seed)."""
    bad = 0
    bs = o.block_size
    last = range(max(0, o.rooms - o.window), o.rooms)
    srcs = [pattern(o, b, bufs.size) for b in range(o.buffers)]
    for i in last:
        s, d = room_lists(o, i)
        for b in range(o.buffers):
            for sb, db in zip(s, d):
                if not np.array_equal(bufs.arrays[b][db * bs:(db + 1) * bs], srcs[b][sb * bs:(sb + 1) * bs]):
                    bad += 1
    return {"rooms_checked": len(last), "blocks_bad": bad}


def pct(v, q):
    return round(float(np.percentile(np.array(v), q)), 1) if v else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peer", choices=("mooncake", "nixl"), required=True)
    ap.add_argument("--role", choices=("prefill", "decode"), required=True)
    ap.add_argument("--dev", required=True)
    ap.add_argument("--addr", required=True)
    ap.add_argument("--ctrl", type=int, required=True)
    ap.add_argument("--rooms", type=int, default=100)
    ap.add_argument("--buffers", type=int, default=8)
    ap.add_argument("--blocks-per-room", type=int, default=8)
    ap.add_argument("--block-size", type=int, default=16384)
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--layout", choices=("rotated", "contiguous", "sglang"), default="rotated")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--poll-us", type=float, default=50.0,
                    help="NIXL: sleep between polls that found nothing (default 50)")
    ap.add_argument("--nixl-params", default="", help="NIXL UCX backend parameters, JSON")
    ap.add_argument("--no-prog-thread", action="store_true",
                    help="NIXL: no progress thread (the calls progress UCX; not SGLang's setting)")
    ap.add_argument("--protocol", default="rdma", help="Mooncake: rdma (default), tcp to try it on a host")
    ap.add_argument("--out", default="")
    o = ap.parse_args()
    o.window = min(o.window, o.rooms)
    bufs = Buffers(o, fill=o.role == "prefill")
    ctrl = Ctrl(o)
    if o.role == "prefill":
        res = (mooncake_prefill if o.peer == "mooncake" else nixl_prefill)(o, ctrl, bufs)
    else:
        sent, seen, c, th, keep = (mooncake_decode if o.peer == "mooncake" else nixl_decode)(o, ctrl, bufs)
        lat = [(b - a) / 1000 for a, b in zip(sent, seen)]
        secs = (max(seen) - min(sent)) / 1e9
        nbytes = o.rooms * o.buffers * o.blocks_per_room * o.block_size
        res = {"gbit_per_s": float(f"{nbytes * 8 / secs / 1e9:.5g}"), "seconds": round(secs, 4),
               "bytes": nbytes, "rooms_per_s": round(o.rooms / secs, 1),
               "send_to_seen_us": {"p50": pct(lat, 50), "p99": pct(lat, 99), "p999": pct(lat, 99.9)},
               "cpu_s": c, "threads_cpu_s": th, "check": check(o, bufs)}
        del keep
    res.update({"peer": o.peer, "role": o.role, "no_prog_thread": o.no_prog_thread, "rooms": o.rooms, "buffers": o.buffers,
                "blocks_per_room": o.blocks_per_room, "block_size": o.block_size,
                "window": o.window, "layout": o.layout})
    line = json.dumps(res)
    if o.out:
        with open(o.out, "w") as f:
            f.write(line + "\n")
    print(line, flush=True)
    # out now: the peers' teardown (NIXL's agent after its registered
    # buffers) may crash, and says nothing about the figures
    os._exit(1 if o.role == "decode" and res["check"]["blocks_bad"] else 0)


if __name__ == "__main__":
    main()
