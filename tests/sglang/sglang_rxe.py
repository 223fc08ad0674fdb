#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One side (prefill or decode) of SGLang's own disaggregation queues over
kvferry on a real RDMA device (tests/rxe/scenarios/sglang_real.sh runs one
process per side). The queues, KVArgs, pools, requests and failure paths are
SGLang's, built by harness.py; the backend is TransferBackend.KVFERRY: on the
prefill through kvferry's plugin (SGLang unpatched, KVF_SGLANG_ROUTE=plugin:
SGLang's load_plugins() finds the entry point), on the decode through
docs/sglang-backend.patch (KVF_SGLANG_PATCH: the deferred release of a failed
room's pages and the decode's head geometry need it).

Importing torch and SGLang costs about a minute in a TCG guest, so each
side's process imports once and forks one child per shape (a fork shares the
imports), in two lanes (SECOND_LANE below), one shape at a time in each: the
child builds the shape's ranks (one thread each, a gloo group of the side's
TP ranks), runs its requests, writes DIR/SHAPE.ROLE.json and exits. Shapes
(SHAPES below; the same list on both sides):

  tp1      TP 1 -> 1: 24 requests of 9..700 tokens in 64-token chunks
  tp2to1   prefill TP 2 -> decode TP 1 (fan-in, each prefill rank half the heads)
  tp1to2   prefill TP 1 -> decode TP 2 (fan-out, each decode rank half the heads)
  mla      MLA, prefill TP 1 -> decode TP 2 (every decode rank the whole latent)
  pp       a 2-stage PP prefill (each stage a thread with its layers, the PP
           consensus of scheduler_pp_mixin) -> one decode rank with all layers
  hybrid   a hybrid (Mamba2) model: SGLang's hybrid pools, the state region
           (StateType.MAMBA), every state slot checked
  prefix   SGLang's decode prefix cache (RadixCache): later requests sharing a
           finished one's prompt send decode_prefix_len, the prefill sends the rest
  abort    the decode aborts a request in its prealloc queue and one in its
           transfer queue, the prefill one in its bootstrap queue
           (Scheduler.abort_request's disaggregation branch)
  timeout  requests only the decode gets and one only the prefill gets, with
           SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT / _WAITING_TIMEOUT short
  inject   SGLANG_TEST_DISAGG_FAILURE_PROB: SGLang's polls fail at random
           while kvferry's rooms are fine; any outcome, the invariants hold
  busy     each side's scheduler loop stops for 15 s (3x the heartbeat
           detection time) mid-stream: every room still succeeds
  kill     the prefill process SIGKILLed mid-request (a chunk of a request
           sent, not its last): SGLang's decode failure path runs, no page is
           freed while its room is not quiescent; then a new prefill process
           on the same bootstrap address serves new requests

Every page (every layer, head, K and V element) and the metadata SGLang
commits (output_ids, cached_tokens, bootstrap_room) are checked at the
decode; every shape ends with SGLang's queues empty, every KV slot, request
slot and metadata row back, and kvferry's gauges (live rooms, inflight,
unquiescent, parked) at 0.

Prints "sglang-real: shape=S role=R PASS|FAIL key=value..." per shape and
"sglang-real: role=R import torch=Xs sglang=Ys" and exits 0 when every shape
of this side ended as expected.
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

import backend_meter  # noqa: E402
import harness as H  # noqa: E402

BOOTSTRAP_PORT0 = 18980  # + the shape's index
GRACE_S = 45  # how long a prefill serves on once its decode is done (> the shapes' bootstrap timeouts)
R = H.Request
BASE = dict(pool_tokens=4096, max_reqs=32, max_context=1024, chunk_tokens=64)


def _tp(n, **kw):
    return [H.Shape(**BASE, **kw, tp_size=n, tp_rank=k) for k in range(n)]


# name: prefill ranks, decode ranks, phases (lists of requests), expected
# outcomes per role ({room: "ok" | "failed" | "any"}; missing: "ok"), extras
SHAPES = {
    "tp1": dict(p=_tp(1), d=_tp(1),
                phases=[[R(1000 + i, 9 + (i * 97) % 700) for i in range(24)]]),
    "tp2to1": dict(p=_tp(2), d=_tp(1), phases=[[R(1100 + i, 40 + 83 * i) for i in range(8)]]),
    "tp1to2": dict(p=_tp(1), d=_tp(2), phases=[[R(1200 + i, 40 + 83 * i) for i in range(8)]]),
    "mla": dict(p=_tp(1, mla=True), d=_tp(2, mla=True),
                phases=[[R(1300 + i, 40 + 83 * i) for i in range(8)]]),
    "pp": dict(p=[H.Shape(**BASE, pp_size=2, pp_rank=k) for k in (0, 1)], d=_tp(1), pp=True,
               phases=[[R(1950 + i, 40 + 83 * i) for i in range(8)]]),
    "hybrid": dict(p=_tp(1, hybrid=True), d=_tp(1, hybrid=True),
                   phases=[[R(1900 + i, 30 + 61 * i) for i in range(8)]]),
    "prefix": dict(p=_tp(1), d=_tp(1), radix=True,
                   phases=[[R(1400, 300), R(1401, 130)],
                           [R(1402, 420, prefix_of=1400, shared_prefix=250),
                            R(1403, 300, prefix_of=1400, shared_prefix=300),
                            R(1404, 200, prefix_of=1401, shared_prefix=100), R(1405, 90)]],
                   prefix_tokens={1402: 240, 1403: 288, 1404: 96}),
    "abort": dict(p=_tp(1), d=_tp(1), env={"SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": "30"},
                  phases=[[R(1503 + i, 70 + 50 * i) for i in range(5)],
                          [R(1500, 500), R(1501, 500), R(1502, 500)]],
                  # phase 1, once both know each other: 1500, the decode aborts it
                  # in its prealloc queue (room created, no metadata yet); 1501, in
                  # its transfer queue; 1502, the prefill in its bootstrap queue
                  # (the timeouts: long enough for a loaded TCG guest, where
                  # the decode takes tens of seconds to reach a request)
                  expect={"decode": {1500: "failed", 1501: "failed", 1502: "failed"},
                          "prefill": {1500: "failed", 1501: "failed", 1502: "failed"}},
                  # 1502's decode hears the prefill's abort at once (the
                  # manager's refuse()), not at its tombstone TTL (reason deadline)
                  why={"decode": {1502: "its reason: local abort"}}),
    "timeout": dict(p=_tp(1), d=_tp(1),
                    env={"SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": "20",
                         "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "30"},
                    phases=[[R(1600 + i, 100 + 40 * i) for i in range(5)]],
                    # 1600, 1601 reach only the decode; 1602 only the prefill
                    only={"decode": {1600, 1601}, "prefill": {1602}},
                    expect={"decode": {1600: "failed", 1601: "failed"}, "prefill": {1602: "failed"}}),
    # SGLang's own failure injection (utils.py _poll_with_failure_injection,
    # what its peer-liveness test uses): a poll SGLang sees as Failed while the
    # backend's room is fine; both sides run their failure paths on live rooms
    "inject": dict(p=_tp(1), d=_tp(1), env={"SGLANG_TEST_DISAGG_FAILURE_PROB": "0.001"},
                   phases=[[R(1800 + i, 60 + 37 * i) for i in range(16)]],
                   expect={"decode": {1800 + i: "any" for i in range(16)},
                           "prefill": {1800 + i: "any" for i in range(16)}}),
    # a busy scheduler (a long forward, CUDA graph capture): each side's loop
    # stops for 3x the heartbeat detection time (1 s x 5) mid-stream, every
    # room must still succeed
    "busy": dict(p=_tp(1), d=_tp(1), phases=[[R(1850 + i, 300 + 50 * i) for i in range(6)]],
                 stall_s=15.0),
    "kill": dict(p=_tp(1), d=_tp(1),
                 phases=[[R(1700 + i, 600 + 40 * i) for i in range(4)],
                         [R(1710 + i, 100 + 90 * i) for i in range(4)]],
                 expect={"decode": {1700 + i: "failed" for i in range(4)}}),
}


# The shapes run in two lanes, a forked process each running its shapes in
# order, both sides splitting the list alike. The second holds the shapes
# that mostly wait (SGLang's bootstrap and waiting timeouts, the abort
# shape's bootstrap deadline at the prefill, two 15 s stalls) and kill: about
# half of the ~100 s the shapes take one after another on a TCG guest.
SECOND_LANE = {"abort", "timeout", "busy", "kill"}


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


def mine(spec, role, phase):
    """The requests of a phase this side gets (the router sends most to both)."""
    only = spec.get("only", {})
    other = "prefill" if role == "decode" else "decode"
    return [q for q in spec["phases"][phase] if q.room not in only.get(other, set())]


def run_ranks(shapes, target, barriers=()):
    """target(k) on one thread per rank; its result or traceback per rank (a
    rank's exception breaks the barriers the others may wait on)."""
    results, errors = [None] * len(shapes), []

    def main(k):
        try:
            results[k] = target(k)
        except Exception:
            errors.append(traceback.format_exc())
            for b in barriers:
                b.abort()
    threads = [threading.Thread(target=main, args=(k,), name=f"rank{k}") for k in range(len(shapes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors


# ---- the children ---------------------------------------------------------------------

def run_prefill(a, shape, idx, phase0=0):
    """The prefill ranks of one shape (from phase0 on); a kill shape's first
    child stops at the kill point and is SIGKILLed by the parent."""
    S = H.load()
    H.use_kvferry()
    meter = backend_meter.install(profile=os.environ.get("KVF_METER_PROFILE") == "1")
    spec = SHAPES[shape]
    port = BOOTSTRAP_PORT0 + idx
    # SGLang's bootstrap server, as its prefill's HTTP server process starts
    # it (managers/disagg_service.py): get_kv_class(..., BOOTSTRAP_SERVER)
    srv = S.utils.get_kv_class(S.utils.TransferBackend.KVFERRY,
                               S.utils.KVClassType.BOOTSTRAP_SERVER)(host="127.0.0.1", port=port)
    built = threading.Barrier(len(spec["p"]) + 1)
    tag = f"{shape}.p{phase0}"
    decode_done = os.path.join(a.dir, f"{shape}.decode.json")
    killing = shape == "kill" and phase0 == 0
    chan = H.PPChannel(len(spec["p"])) if spec.get("pp") else None

    def rank(k):
        stalled = []
        r = H.PrefillRank(spec["p"][k], "kvferry", port, host="127.0.0.1",
                          gloo_path=os.path.join(a.dir, f"{tag}.gloo{k if chan else ''}"), pp=chan)
        built.wait()
        end = time.monotonic() + a.timeout

        def votes(*flags):
            """Every stage's flags: PP stages rendezvous in each turn(), so
            they must leave a loop on the same turn (one leaving alone left
            the other waiting in the next turn's gather for ever)."""
            return chan.gather(k, flags) if chan else [flags]
        for ph in range(phase0, len(spec["phases"])):
            if ph > phase0:
                while not any(x[0] for x in votes(os.path.exists(os.path.join(a.dir, f"{shape}.decode-phase{ph}")))):
                    if os.path.exists(decode_done) or time.monotonic() > end:
                        raise RuntimeError(f"phase {ph}: the decode never got there")
                    r.turn()
                    time.sleep(0.01)
            reqs = mine(spec, "prefill", ph)
            for q in reqs:
                r.add(q)
                if shape == "abort" and q.room == 1502:
                    # Scheduler.abort_request, prefill: a bootstrap-queue request
                    # (aborted as it arrives: still in the queue, whatever the decode did)
                    for req in r.sched.disagg_prefill_bootstrap_queue.queue:
                        if req.bootstrap_room == 1502:
                            req.disagg_kv_sender.abort()
            want = {q.room for q in reqs}
            decode_ended = None
            while time.monotonic() < end:
                r.turn()
                if spec.get("stall_s") and not stalled and r.sched.chunked_req is not None \
                        and r.sched.chunked_req.start_send_idx > 0:
                    stalled.append(time.monotonic())
                    out(f"sglang-real: shape={shape} role=prefill stalls {spec['stall_s']} s mid-request")
                    time.sleep(spec["stall_s"])  # no turn(), no progress(): a long forward
                if killing and k == 0:
                    c = r.sched.chunked_req
                    if c is not None and c.start_send_idx > 0 and not r.sched.disagg_prefill_inflight_queue:
                        out(f"sglang-real: shape={shape} role=prefill kill-point room={c.bootstrap_room} "
                            f"sent_tokens={c.start_send_idx} of {len(c.origin_input_ids)}")
                        write_file(os.path.join(a.dir, f"{shape}.prefill-killme"), "now\n")
                        time.sleep(3600)  # SIGKILLed by the parent
                if decode_ended is None and os.path.exists(decode_done):
                    decode_ended = time.monotonic()
                # (past the grace, the decode ended long ago: what is left waits for nothing)
                v = votes(r.idle() and want <= set(r.done),
                          decode_ended is not None and time.monotonic() - decode_ended > GRACE_S)
                if all(x[0] for x in v) or any(x[1] for x in v):
                    break
                time.sleep(0.002)
        while time.monotonic() < end and not any(x[0] for x in votes(os.path.exists(decode_done))):
            r.turn()  # keep serving (heartbeats) until the decode is done
            time.sleep(0.01)
        # on this thread: its engine belongs to it
        return {"done": r.done, "queues": r.queues(), "gauges": engine_gauges(r.kv_manager),
                "turns": r.turns, "bytes_written": r.bytes_written}

    t0 = time.monotonic()
    holder = {}
    barriers = [built] + ([chan.barrier] if chan else [])
    th = threading.Thread(target=lambda: holder.update(res=run_ranks(spec["p"], rank, barriers)))
    th.start()
    try:
        built.wait(timeout=a.timeout)  # every rank built and registered
        write_file(os.path.join(a.dir, f"{shape}.prefill-up{phase0}"), f"127.0.0.1:{port}\n")
    except threading.BrokenBarrierError:
        pass
    th.join()
    results, errors = holder.get("res", ([], ["no result"]))
    res = {"shape": shape, "role": "prefill", "phase0": phase0, "errors": errors,
           "wall_s": round(time.monotonic() - t0, 2), "ranks": [x for x in results if x is not None],
           "backend": meter.snapshot()}
    write_file(os.path.join(a.dir, f"{shape}.prefill.json"), json.dumps(res))
    if hasattr(srv, "close"):
        srv.close()
    return 0 if not errors else 1


def run_decode(a, shape, idx):
    H.load()
    H.use_kvferry()
    meter = backend_meter.install(profile=os.environ.get("KVF_METER_PROFILE") == "1")
    spec = SHAPES[shape]
    port = BOOTSTRAP_PORT0 + idx
    if not wait_file(os.path.join(a.dir, f"{shape}.prefill-up0"), a.timeout):
        raise RuntimeError(f"{shape}: the prefill never came up")

    def rank(k):
        r = H.DecodeRank(spec["d"][k], "kvferry", port, host="127.0.0.1",
                         gloo_path=os.path.join(a.dir, f"{shape}.gloo-d"), radix=spec.get("radix", False))
        end = time.monotonic() + a.timeout
        for ph in range(len(spec["phases"])):
            if ph > 0:
                if k == 0:
                    write_file(os.path.join(a.dir, f"{shape}.decode-phase{ph}"), "go\n")
                if shape == "kill" and not wait_file(os.path.join(a.dir, f"{shape}.prefill-up{ph}"), a.timeout):
                    raise RuntimeError("kill: no new prefill on the same address")
            reqs = mine(spec, "decode", ph)
            for q in reqs:
                r.add(q, bootstrap_host="127.0.0.1")
            want = {q.room for q in reqs}
            aborted = set()
            if shape == "abort" and ph == 1:
                # Scheduler.abort_request, decode: kv_receiver.abort() of a
                # prealloc-queue request (its room made in add(): the prefill's
                # layout is known by now), then of a transfer-queue one
                for dr in r.sched.disagg_decode_prealloc_queue.queue:
                    if dr.req.bootstrap_room == 1500:
                        dr.kv_receiver.abort()
                        aborted.add(1500)
            stalled = False
            while time.monotonic() < end:
                r.turn()
                if spec.get("stall_s") and not stalled and r.done and r.sched.disagg_decode_transfer_queue.queue:
                    stalled = True
                    out(f"sglang-real: shape={shape} role=decode stalls {spec['stall_s']} s with "
                        f"{len(r.sched.disagg_decode_transfer_queue.queue)} requests in transfer")
                    time.sleep(spec["stall_s"])
                if shape == "abort":
                    for dr in r.sched.disagg_decode_transfer_queue.queue:
                        if dr.req.bootstrap_room == 1501 and 1501 not in aborted:
                            dr.kv_receiver.abort()
                            aborted.add(1501)
                if r.idle() and want <= set(r.done) and r.kv_manager.parked == 0:
                    break
                time.sleep(0.002)
        return {"done": r.done, "queues": r.queues(), "gauges": engine_gauges(r.kv_manager),
                "turns": r.turns, "bytes_checked": r.bytes_checked, "prefix_tokens": r.prefix_tokens,
                "freed_unquiescent": r.freed_unquiescent, "hooked": r.hooked,
                "evictable": r.side.tree_cache.evictable_size()}

    t0 = time.monotonic()
    results, errors = run_ranks(spec["d"], rank)
    res = {"shape": shape, "role": "decode", "errors": errors, "wall_s": round(time.monotonic() - t0, 2),
           "ranks": [x for x in results if x is not None], "backend": meter.snapshot()}
    write_file(os.path.join(a.dir, f"{shape}.decode.json"), json.dumps(res))
    return 0 if not errors else 1


# ---- the verdict ----------------------------------------------------------------------

def verdict(shape, role, res):
    """(ok, fields of the summary line, what was wrong)"""
    spec = SHAPES[shape]
    # a rank's exception: its last line (the whole traceback is in the child's stderr)
    bad = [e.strip().splitlines()[-1] for e in res.get("errors", [])]
    phases = range(res.get("phase0", 0), len(spec["phases"]))
    want = {q.room for ph in phases for q in mine(spec, role, ph)}
    expect = spec.get("expect", {}).get(role, {})
    if len(res.get("ranks", [])) != len(spec["p" if role == "prefill" else "d"]):
        bad.append(f"{len(res.get('ranks', []))} rank results")
    f = {"ok": 0, "failed": 0, "wrong": 0}
    reasons = {}
    for r in res.get("ranks", []):
        done = {int(k): v for k, v in r["done"].items()}
        if set(done) != want:
            bad.append(f"outcomes for {sorted(done)}, requests {sorted(want)}")
        for room, v in sorted(done.items()):
            kind = "ok" if v == "ok" else "wrong" if v.startswith("bad") else "failed"
            f[kind] += 1
            if kind == "failed":
                why = v.split(" with exception ")[-1]
                why = why.split(": ", 1)[-1] if why.startswith("room") else why
                reasons[why[:70]] = reasons.get(why[:70], 0) + 1
            e = expect.get(room, "ok")
            if kind == "wrong" or (e != "any" and kind != e):
                bad.append(f"room {room}: {v[:160]} (expected {e})")
            w = spec.get("why", {}).get(role, {}).get(room)
            if w and w not in v:
                bad.append(f"room {room}: {v[:200]} (expected its reason to say '{w}')")
        q = r["queues"]
        busy = {k: v for k, v in q.items() if k in ("bootstrap", "waiting", "chunked", "inflight", "prealloc",
                                                     "pending", "retracted", "transfer") and v}
        if busy:
            bad.append(f"queues not empty: {busy}")
        if q["kv_free"] + r.get("evictable", 0) != q["kv_total"]:
            bad.append(f"KV slots not all back: {q['kv_free']} (+{r.get('evictable', 0)} cached) "
                       f"of {q['kv_total']}")
        if q.get("state_free") != q.get("state_total"):
            bad.append(f"state slots not all back: {q['state_free']} of {q['state_total']}")
        if q["metadata_free"] != q["metadata_total"] or q["req_slots_free"] != q["req_slots_total"]:
            bad.append(f"metadata rows / request slots not all back: {q}")
        if any(r["gauges"].values()):
            bad.append(f"kvferry gauges not 0: {r['gauges']}")
        if r.get("freed_unquiescent"):
            bad.append(f"{r['freed_unquiescent']} failed requests freed while their room was not quiescent")
        for room, n in spec.get("prefix_tokens", {}).items():
            if role == "decode" and int(r.get("prefix_tokens", {}).get(str(room), -1)) != n:
                bad.append(f"room {room}: decode_prefix_len {r.get('prefix_tokens', {}).get(str(room))}, "
                           f"expected {n}")
        for k in ("bytes_checked", "bytes_written", "hooked", "freed_unquiescent", "turns"):
            if k in r:
                f[k] = f.get(k, 0) + r[k]
    f["wall_s"] = res.get("wall_s")
    # what the backend cost SGLang's loop a request (backend_meter.py)
    b = res.get("backend") or {}
    for k in ("us_per_request", "python_us_per_request", "progress_us_per_request",
              "c_us_per_request"):
        if b.get(k) is not None:
            f["backend_" + k] = b[k]
    if b.get("by_method"):
        f["backend_top"] = ",".join(f"{m}:{us}" for m, (_, us) in list(b["by_method"].items())[:3])
    if reasons:
        f["reasons"] = json.dumps(reasons, separators=(",", ":"))
    return not bad, f, bad


def report(shape, role, path, status):
    if not os.path.exists(path):
        out(f"sglang-real: shape={shape} role={role} FAIL no result (child status {status})")
        return False
    with open(path) as fh:
        res = json.load(fh)
    good, fields, why = verdict(shape, role, res)
    good = good and status == 0
    out(f"sglang-real: shape={shape} role={role} {'PASS' if good else 'FAIL'} "
        + " ".join(f"{k}={v}" for k, v in fields.items()))
    for w in why[:8]:
        out(f"sglang-real:   {shape} {role}: {w}")
    if len(why) > 8:
        out(f"sglang-real:   {shape} {role}: ... and {len(why) - 8} more")
    for e in res.get("errors", []):
        sys.stderr.write(f"{shape} {role}: {e}\n")
    return good


def fork(fn, *args):
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = fn(*args)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def run_lane(a, lane):
    """The shapes of one lane in order, a forked child each; 0 when all passed."""
    rc = 0
    for idx, shape in lane:
        rc |= run_shape(a, shape, idx)
    return rc


def run_shape(a, shape, idx):
    spec = SHAPES[shape]
    saved = dict(os.environ)
    os.environ.update(spec.get("env", {}))  # the children's SGLang environment
    try:
        path = os.path.join(a.dir, f"{shape}.{a.role}.json")
        if a.role == "decode":
            _, status = os.waitpid(fork(run_decode, a, shape, idx), 0)
            return 0 if report(shape, a.role, path, status) else 1
        rc = 0
        pid = fork(run_prefill, a, shape, idx, 0)
        if shape == "kill":
            t1 = time.monotonic()
            if wait_file(os.path.join(a.dir, f"{shape}.prefill-killme"), a.timeout):
                os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
            out(f"sglang-real: shape={shape} role=prefill {'PASS' if killed else 'FAIL'} "
                f"SIGKILLed={'yes' if killed else 'no'} pid={pid} wall_s={time.monotonic() - t1:.1f}")
            rc |= 0 if killed else 1
            # the prefill restarts on the same bootstrap address
            pid = fork(run_prefill, a, shape, idx, 1)
        _, status = os.waitpid(pid, 0)
        return rc | (0 if report(shape, a.role, path, status) else 1)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--role", choices=["prefill", "decode"], required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--timeout", type=float, default=240, help="per shape and phase")
    a = p.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(process)d %(threadName)s %(name)s %(levelname)s %(message)s")
    why = H.missing_reason()
    if why:
        out(f"sglang-real: not run: {why}")
        return 2
    t0 = time.monotonic()
    S = H.load()
    route = "plugin" if os.environ.get("KVF_SGLANG_ROUTE") == "plugin" else \
        f"patch {os.path.basename(S.patched)}" if S.patched else "none"
    out(f"sglang-real: role={a.role} route={route} import torch={S.import_torch_s:.1f}s sglang={S.import_sglang_s:.1f}s "
        f"(total {time.monotonic() - t0:.1f}s)")
    # both sides start their shapes together: the imports take minutes under
    # TCG and differ by minutes on a loaded host, longer than the shapes'
    # own SGLang bootstrap timeouts (abort: 10 s)
    write_file(os.path.join(a.dir, f"{a.role}.imported"), "")
    other = "decode" if a.role == "prefill" else "prefill"
    if not wait_file(os.path.join(a.dir, f"{other}.imported"), 1200):
        out(f"sglang-real: role={a.role} FAIL the {other} did not import SGLang in 1200 s")
        return 1
    order = list(enumerate(a.shapes.split(",")))  # the index: the shape's bootstrap port
    first = [s for s in order if s[1] not in SECOND_LANE]
    second = [s for s in order if s[1] in SECOND_LANE]
    pids = [fork(run_lane, a, lane) for lane in (first, second) if lane]
    rc = 0
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        rc |= 0 if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
