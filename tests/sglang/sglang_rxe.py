#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One side (prefill or decode) of SGLang's own disaggregation queues over
kvferry on a real RDMA device (tests/rxe/scenarios/sglang_real.sh runs one
process per side). The queues, KVArgs, pools, requests and failure paths are
SGLang's, built by harness.py; the backend is TransferBackend.KVFERRY.

Importing torch and SGLang costs minutes in a TCG guest, so each side's
process imports once and forks one child per shape (a fork shares the
imports): the child builds the shape's ranks (one thread each, a gloo group
of the side's TP ranks), runs its requests, writes DIR/SHAPE.ROLE.json and
exits. The prefill child of a kill shape is SIGKILLed by its parent
mid-request. Shapes (the same list on both sides):

  tp1      TP 1 -> TP 1: 24 requests of 9..700 tokens in 64-token chunks
           (chunked prefill, page 16), every page, metadata row checked
  kill     TP 1 -> TP 1: 4 long requests; once the prefill has sent a chunk
           of each, its process is SIGKILLed: the decode sees KVPoll.Failed
           (SGLang's pop_transferred failure path), no page is freed while
           its room is not quiescent, every page comes back

Prints "sglang-real: shape=S role=R key=value..." per shape and
"sglang-real: import torch=Xs sglang=Ys" and exits 0 when every shape of
this side ended as expected.
"""
import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness as H  # noqa: E402

BOOTSTRAP_PORT0 = 18980  # + the shape's index


def requests_of(shape: str):
    if shape == "tp1":
        return [H.Request(room=1000 + i, input_len=9 + (i * 97) % 700) for i in range(24)]
    if shape == "kill":
        return [H.Request(room=2000 + i, input_len=600 + 40 * i) for i in range(4)]
    raise ValueError(shape)


def shapes_of(shape: str):
    """(prefill ranks' Shapes, decode ranks' Shapes)."""
    base = dict(pool_tokens=4096, max_reqs=32, max_context=1024, chunk_tokens=64)
    if shape in ("tp1", "kill"):
        return [H.Shape(**base)], [H.Shape(**base)]
    raise ValueError(shape)


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


def engine_gauges(mgr):
    st = mgr.engine.stats()
    return {"live": int(sum(st.rooms.values())), "inflight": int(st.inflight),
            "unquiescent": int(st.unquiescent), "parked": int(mgr.parked)}


# ---- one shape, one side: the child -------------------------------------------------

def run_prefill(a, shape, idx):
    S = H.load()
    H.use_kvferry()
    port = BOOTSTRAP_PORT0 + idx
    pshapes, _ = shapes_of(shape)
    # SGLang's bootstrap server, as its prefill's tokenizer process starts it
    # (managers/disagg_service.py): get_kv_class(KVFERRY, BOOTSTRAP_SERVER)
    srv_cls = S.utils.get_kv_class(S.utils.TransferBackend.KVFERRY, S.utils.KVClassType.BOOTSTRAP_SERVER)
    srv = srv_cls(host="127.0.0.1", port=port)
    ranks, errors = [None] * len(pshapes), []
    results = [None] * len(pshapes)
    reqs = requests_of(shape)
    killme = os.path.join(a.dir, f"{shape}.prefill-killme")

    def rank_main(k):
        try:
            r = ranks[k] = H.PrefillRank(pshapes[k], "kvferry", port, host="127.0.0.1",
                                         gloo_path=os.path.join(a.dir, f"{shape}.gloo-p"))
            barrier.wait()
            for q in reqs:
                r.add(q)
            decode_done = os.path.join(a.dir, f"{shape}.decode.json")
            end = time.monotonic() + a.timeout
            while time.monotonic() < end:
                r.turn()
                if shape == "kill" and k == 0 and not os.path.exists(killme):
                    # mid-request: every room has had a chunk sent, none its last
                    sent = {q.bootstrap_room for q in r.sched.disagg_prefill_inflight_queue}
                    started = [q for q in [r.sched.chunked_req] if q is not None]
                    if r.sched.chunked_req is not None and r.sched.chunked_req.start_send_idx > 0 \
                            and not sent:
                        write_file(killme, "now\n")
                        out(f"sglang-real: shape={shape} role=prefill kill-point room="
                            f"{started[0].bootstrap_room} sent_tokens={started[0].start_send_idx}")
                        time.sleep(3600)  # the parent SIGKILLs this process
                if r.idle() and len(r.done) == len(reqs) and os.path.exists(decode_done):
                    break
                time.sleep(0.002)
            # on this thread: the engine belongs to it
            results[k] = {"done": r.done, "queues": r.queues(), "gauges": engine_gauges(r.kv_manager),
                          "turns": r.turns, "bytes_written": r.bytes_written}
        except Exception:
            errors.append(traceback.format_exc())
            try:
                barrier.abort()
            except Exception:
                pass

    barrier = threading.Barrier(len(pshapes))
    t0 = time.monotonic()
    threads = [threading.Thread(target=rank_main, args=(k,), name=f"prefill-tp{k}") for k in range(len(pshapes))]
    for t in threads:
        t.start()
    # all ranks built and registered: the decode may start
    while any(r is None for r in ranks) and not errors and any(t.is_alive() for t in threads):
        time.sleep(0.05)
    write_file(os.path.join(a.dir, f"{shape}.prefill-up"), f"127.0.0.1:{port}\n")
    for t in threads:
        t.join()
    res = {"shape": shape, "role": "prefill", "errors": errors, "wall_s": round(time.monotonic() - t0, 2),
           "ranks": []}
    res["ranks"] = [x for x in results if x is not None]
    write_file(os.path.join(a.dir, f"{shape}.prefill.json"), json.dumps(res))
    try:
        srv.close() if hasattr(srv, "close") else None
    except Exception:
        pass
    return 0 if not errors else 1


def run_decode(a, shape, idx):
    H.load()
    H.use_kvferry()
    port = BOOTSTRAP_PORT0 + idx
    _, dshapes = shapes_of(shape)
    if not wait_file(os.path.join(a.dir, f"{shape}.prefill-up"), a.timeout):
        raise RuntimeError(f"{shape}: the prefill never came up")
    ranks, errors = [None] * len(dshapes), []
    results = [None] * len(dshapes)
    reqs = requests_of(shape)

    def rank_main(k):
        try:
            r = ranks[k] = H.DecodeRank(dshapes[k], "kvferry", port, host="127.0.0.1",
                                        gloo_path=os.path.join(a.dir, f"{shape}.gloo-d"))
            for q in reqs:
                r.add(q, bootstrap_host="127.0.0.1")
            end = time.monotonic() + a.timeout
            while time.monotonic() < end:
                r.turn()
                if r.idle() and len(r.done) == len(reqs) and r.kv_manager.parked == 0:
                    break
                time.sleep(0.002)
            results[k] = {"done": r.done, "queues": r.queues(), "gauges": engine_gauges(r.kv_manager),
                          "turns": r.turns, "bytes_checked": r.bytes_checked,
                          "freed_unquiescent": r.freed_unquiescent, "hooked": r.hooked}
        except Exception:
            errors.append(traceback.format_exc())

    t0 = time.monotonic()
    threads = [threading.Thread(target=rank_main, args=(k,), name=f"decode-tp{k}") for k in range(len(dshapes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    res = {"shape": shape, "role": "decode", "errors": errors, "wall_s": round(time.monotonic() - t0, 2),
           "ranks": []}
    res["ranks"] = [x for x in results if x is not None]
    write_file(os.path.join(a.dir, f"{shape}.decode.json"), json.dumps(res))
    return 0 if not errors else 1


# ---- the verdict ----------------------------------------------------------------------

def verdict(shape, role, res):
    """(ok, summary line fields)"""
    bad = list(res.get("errors", []))
    reqs = {q.room for q in requests_of(shape)}
    ok = failed = wrong = 0
    f = {}
    for r in res.get("ranks", []):
        done = {int(k): v for k, v in r["done"].items()}
        if set(done) != reqs:
            bad.append(f"outcomes for {sorted(done)} of {sorted(reqs)}")
        for room, v in done.items():
            if v == "ok":
                ok += 1
            elif v.startswith("bad"):
                wrong += 1
            else:
                failed += 1
                f.setdefault(v.split(" with exception ")[-1][:60], 0)
                f[v.split(" with exception ")[-1][:60]] += 1
        q = r["queues"]
        busy = {k: v for k, v in q.items() if k in ("bootstrap", "waiting", "chunked", "inflight", "prealloc",
                                                     "pending", "retracted", "transfer") and v}
        if busy:
            bad.append(f"queues not empty: {busy}")
        if q["kv_free"] != q["kv_total"]:
            bad.append(f"KV slots not all back: {q['kv_free']} of {q['kv_total']}")
        g = r["gauges"]
        if any(g.values()):
            bad.append(f"kvferry gauges not 0: {g}")
        if r.get("freed_unquiescent"):
            bad.append(f"{r['freed_unquiescent']} failed requests freed before their room was quiescent")
    expect_fail = shape == "kill" and role == "decode"
    if shape == "kill":
        if role == "decode" and (ok or wrong):
            bad.append(f"kill: {ok} ok, {wrong} wrong where every room should fail")
    elif failed or wrong:
        bad.append(f"{failed} failed, {wrong} wrong")
    if expect_fail and failed != len(reqs) * len(res.get("ranks", [])):
        bad.append(f"kill: {failed} failed of {len(reqs)}")
    fields = {"ok": ok, "failed": failed, "wrong": wrong, "wall_s": res.get("wall_s")}
    for r in res.get("ranks", []):
        for k in ("bytes_checked", "bytes_written", "hooked", "freed_unquiescent", "turns"):
            if k in r:
                fields[k] = fields.get(k, 0) + r[k]
    if f:
        fields["reasons"] = json.dumps(f, separators=(",", ":"))
    return not bad, fields, bad


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--role", choices=["prefill", "decode"], required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--shapes", default="tp1,kill")
    p.add_argument("--timeout", type=float, default=240, help="per shape")
    a = p.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(process)d %(threadName)s %(name)s %(levelname)s %(message)s")
    why = H.missing_reason()
    if why:
        out(f"sglang-real: not run: {why}")
        return 2
    t0 = time.monotonic()
    S = H.load()
    out(f"sglang-real: role={a.role} import torch={S.import_torch_s:.1f}s sglang={S.import_sglang_s:.1f}s "
        f"(total {time.monotonic() - t0:.1f}s)")
    rc = 0
    for idx, shape in enumerate(a.shapes.split(",")):
        t1 = time.monotonic()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = (run_prefill if a.role == "prefill" else run_decode)(a, shape, idx)
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        killed = False
        if shape == "kill" and a.role == "prefill":
            killme = os.path.join(a.dir, f"{shape}.prefill-killme")
            if wait_file(killme, a.timeout):
                os.kill(pid, signal.SIGKILL)
                killed = True
                out(f"sglang-real: shape={shape} role=prefill SIGKILL pid={pid}")
        _, status = os.waitpid(pid, 0)
        if killed:
            ok = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
            out(f"sglang-real: shape={shape} role=prefill killed={'yes' if ok else 'no'} "
                f"wall_s={time.monotonic() - t1:.1f}")
            rc |= 0 if ok else 1
            continue
        path = os.path.join(a.dir, f"{shape}.{a.role}.json")
        if not os.path.exists(path):
            out(f"sglang-real: shape={shape} role={a.role} FAIL no result (child status {status})")
            rc = 1
            continue
        with open(path) as f:
            res = json.load(f)
        good, fields, why = verdict(shape, a.role, res)
        line = " ".join(f"{k}={v}" for k, v in fields.items())
        out(f"sglang-real: shape={shape} role={a.role} {'PASS' if good else 'FAIL'} {line}")
        for w in why:
            out(f"sglang-real:   {shape} {a.role}: {w}")
        for e in res.get("errors", []):
            out(e)
        rc |= 0 if good and status == 0 else 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
