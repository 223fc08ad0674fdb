#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One rank of kvferry.sglang across ranks of different parallelism, on a real
RDMA device (tests/rxe/scenarios/python_sglang_shapes.sh starts every rank of
a shape as its own process). The backend alone, driven as SGLang's queues
drive it (the proof with SGLang's own queue code is tests/sglang/); what this
checks is the backend's rank mapping and geometry: prefill TP 2 -> decode TP 1
(fan-in, each prefill rank writes its heads), TP 1 -> TP 2 (the prefill's
room learns its fan-out from the decode's ROOM_INFO), MLA both ways (one data
rank and a dummy; the same latent KV to two decode ranks), a 2-stage PP
prefill into one decode (each stage writes its layers, the last the aux row).

  python_sglang_shapes.py P|D RANK PREFILL_TP DECODE_TP PREFILL_PP MLA(0|1) DEV ADDR

Every byte of every page of every layer and head, and the aux row, is checked
at the decode. Prints "P<rank>: ok=N of M" or "D<rank>: ok=N of M bad=B" and
exits 0 only when all M rooms succeeded with no wrong byte."""
import os
import sys
import time

import numpy as np

# The backend alone: kvferry.sglang's own classes, as a process without SGLang
# gets them (the tests' environment has SGLang 0.5.18, whose import takes
# minutes in a TCG guest; SGLang's own queues drive kvferry in kvf_sglang_real).
sys.modules.setdefault("sglang", None)  # type: ignore[arg-type]

from kvferry import sglang as ks

role, rank, ptp, dtp, ppn, mla = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "1"
dev, addr = sys.argv[7], sys.argv[8]
L, H, T, HB, PAGES = 4, 4, 4, 8, 32  # layers, total heads, tokens/page, head bytes
ROOMS = 6
class SA: pass
def args_for(tp, r, pp_rank, pp):
    a = ks.KVArgs(); lay_per = L // pp; start = pp_rank * lay_per
    heads = 1 if mla else H // tp
    item = T * heads * HB
    nb = lay_per if mla else 2 * lay_per
    a.bufs = [np.zeros(PAGES * item, np.uint8) for _ in range(nb)]
    a.engine_rank, a.pp_rank, a.system_dp_rank = r, pp_rank, 0
    a.kv_data_ptrs = [b.ctypes.data for b in a.bufs]; a.kv_data_lens = [b.nbytes for b in a.bufs]
    a.kv_item_lens = [item] * nb
    a.kv_layer_ids = list(range(start, start + lay_per)) * (1 if mla else 2)
    a.kv_head_num, a.total_kv_head_num, a.page_size, a.prefill_start_layer = heads, (1 if mla else H), T, start
    a.aux = np.zeros(8 * 16, np.uint8); a.aux_data_ptrs=[a.aux.ctypes.data]; a.aux_data_lens=[a.aux.nbytes]; a.aux_item_lens=[16]
    a.state_data_ptrs = []; a.ib_device = dev
    return a, heads, r * (1 if mla else H // tp) if not mla else 0, start, lay_per
def val(room, page_j, layer, kind, t, head, b):
    return (room * 31 + page_j * 7 + layer * 13 + kind * 5 + t * 3 + head * 11 + b) % 251 + 1
def fill(a, heads, h0, start, lay_per, room, src_pages):
    nb = len(a.bufs)
    for bi, buf in enumerate(a.bufs):
        layer = a.kv_layer_ids[bi]; kind = 0 if mla else bi // lay_per
        v = buf.reshape(PAGES, T, heads, HB)
        for j, p in enumerate(src_pages):
            for t in range(T):
                for h in range(heads):
                    v[p, t, h] = [val(room, j, layer, kind, t, h0 + h, b) for b in range(HB)]
os.environ["KVFERRY_OVERRIDES"] = (f"rdma.device={dev};rdma.listen_addr={addr};" if role == "P" else f"rdma.device={dev};rdma.source_addr={addr};") + f"heartbeat.interval_ms=1000;heartbeat.misses=5"
if role == "P":
    pp_rank = rank // ptp; tr = rank % ptp
    if rank == 0:
        srv = ks.KVFerryBootstrapServer("127.0.0.1", 18999)
    sa = SA(); sa.host = "127.0.0.1"; sa.disaggregation_bootstrap_port = 18999; sa.tp_size = ptp; sa.pp_size = ppn
    a, heads, h0, start, lay_per = args_for(ptp, tr, pp_rank, ppn)
    a.ib_device = ""
    for _ in range(100):
        try:
            m = ks.KVManager(a, "prefill", sa, mla); break
        except Exception as e:
            time.sleep(0.2)
    senders = {}
    for room in range(1, ROOMS + 1):
        src = np.arange(room % 3 + 2, dtype=np.int32) + 4 * room
        fill(a, heads, h0, start, lay_per, room, src)
        a.aux[(room % 8) * 16:(room % 8 + 1) * 16] = room
        senders[room] = (ks.KVSender(m, "127.0.0.1:18999", room, [tr], pp_rank), src)
    done = {}
    end = time.time() + 120
    while len(done) < ROOMS and time.time() < end:
        m.progress()
        for room, (s, src) in senders.items():
            if room in done: continue
            st = s.poll()
            if st == ks.KVPoll.WaitingForInput and s.num_kv_indices is None:
                s.init(len(src), room % 8); s.send(src[:1]); s.send(src[1:])
            elif st in (ks.KVPoll.Success, ks.KVPoll.Failed):
                done[room] = st
                if st == ks.KVPoll.Failed:
                    try: s.failure_exception()
                    except Exception as e: print("P", rank, room, e, flush=True)
                s.clear()
    ok = sum(1 for v in done.values() if v == ks.KVPoll.Success)
    print(f"P{rank}: ok={ok} of {ROOMS}", flush=True)
    time.sleep(3)  # the decode's last releases before this engine closes
    sys.exit(0 if ok == ROOMS else 1)
else:
    sa = SA(); sa.tp_size = dtp; sa.pp_size = 1
    a, heads, h0, start, lay_per = args_for(dtp, rank, 0, 1)
    a.ib_device = ""
    m = ks.KVManager(a, "decode", sa, mla)
    while not m.try_ensure_parallel_info("127.0.0.1:18999"): time.sleep(0.3)
    recv = {}
    for room in range(1, ROOMS + 1):
        r = ks.KVReceiver(m, "127.0.0.1:18999", room); r.init(0); recv[room] = r
    dst = {}
    done = {}; bad = 0
    end = time.time() + 120
    while len(done) < ROOMS and time.time() < end:
        m.progress()
        for room, r in recv.items():
            if room in done: continue
            st = r.poll()
            if st == ks.KVPoll.WaitingForInput and room not in dst:
                n = room % 3 + 2
                dst[room] = (np.arange(n, dtype=np.int32) + 4 * room)[::-1].copy()
                r.send_metadata(dst[room], room % 8, None, 0)
            elif st in (ks.KVPoll.Success, ks.KVPoll.Failed):
                done[room] = st
                if st == ks.KVPoll.Failed:
                    try: r.failure_exception()
                    except Exception as e: print("D", rank, room, e, flush=True)
                else:
                    for bi, buf in enumerate(a.bufs):
                        layer = a.kv_layer_ids[bi]; kind = 0 if mla else bi // lay_per
                        v = buf.reshape(PAGES, T, heads, HB)
                        for j, p in enumerate(dst[room]):
                            for t in range(T):
                                for h in range(heads):
                                    want = [val(room, j, layer, kind, t, h0 + h, b) for b in range(HB)]
                                    if list(v[p, t, h]) != want: bad += 1
                    if list(a.aux[(room % 8) * 16:(room % 8 + 1) * 16]) != [room] * 16: bad += 1
                r.clear()
    ok = sum(1 for v in done.values() if v == ks.KVPoll.Success)
    print(f"D{rank}: ok={ok} of {ROOMS} bad={bad}", flush=True)
    sys.exit(0 if ok == ROOMS and bad == 0 else 1)
