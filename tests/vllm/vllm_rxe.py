#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One vLLM instance (kv_producer or kv_consumer) of a disaggregated pair on
a real RDMA device, its connector driven in exactly the call order of vLLM
commit 00f4240 (tests/vllm/vllm_harness.py's docstring lists every step with
its file:function). tests/rxe/scenarios/vllm.sh runs a prefill and a decode
process; every TP rank of an instance is a worker with its own kvferry
engine, stepped in lockstep as vLLM's executor does (collective_rpc), in
the instance's process. numpy float16 arrays in vLLM's FlashAttention
layout (2, blocks, block_size, heads, head_size) stand in for the GPU KV
cache. The prefill hands each request's kv_transfer_params to the decode
through DIR/params.jsonl (the proxy).

  vllm_rxe.py --role prefill|decode --dir DIR --dev DEV --addr ADDR
              [--prefill-tp P --decode-tp D --mla] [--phase full|shape]

full (TP 1 -> 1): requests s0..s{N-1} of 1 to 192 tokens, every third with
a prefix of up to 2 blocks cached at the decode (only the tail is sent), a
request of every length class; the decode checks every byte of every block
of every layer, K and V, of each request once its load is reported and
before its forward runs. Then:
  a-mid     the decode aborts it (client gone) just after its ROOM_INFO went
            out, while the prefill's scheduler is away (PAUSE_S: a long batch):
            the ABORT's ACK waits for it, so the room is FAILED and not
            quiescent for seconds and vLLM must keep the blocks that long
  a-flight  the same with 120 blocks and no pause: the abort meets the writes
            (or loses the race to the last one); either way, the moment vLLM
            frees the blocks of either abort a canary takes them, and no byte
            of it may change: no write of an aborted room landed late
  a-before  the decode aborts it before it is scheduled: a ROOM_INFO without
            data and an ABORT free the prefill's blocks at once
  a-none    no decode ever asks: the prefill frees its blocks at its
            deadlines.bootstrap_s (not 480 s as NIXL's TTL)
  kill      the decode's rooms k0..k3 wait while the prefill is SIGKILLed
            (by the scenario): each fails "peer lost", is reported with its
            blocks as load errors, and vLLM's scheduler recomputes it here
shape: 8 requests between a prefill of TP P and a decode of TP D (MLA: one
latent buffer a layer), every byte checked on every decode rank.

Prints "vllm-rxe: role=... key=value ..." summary lines; exits 0 when
every request ended as expected."""
import argparse
import json
import logging
import os
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vllm_harness as H  # noqa: E402

BS = 16
N_STREAM = 30
ABORT_MID, ABORT_FLIGHT, ABORT_BEFORE, NO_DECODE = "a-mid", "a-flight", "a-before", "a-none"
ABORTS_AFTER_INFO = (ABORT_MID, ABORT_FLIGHT)
KILL = [f"k{j}" for j in range(4)]
CANARY = 0x5A
PAUSE_S = 3.0       # the prefill's scheduler away after a-mid (a long batch)
LENGTHS = {}


def out(msg):
    print(msg, flush=True)


def requests_for(args):
    """(id, prompt length, decode max tokens, prefix blocks cached at the decode)."""
    if args.phase == "shape":
        reqs = [(f"h{i}", 1 + (i * 53) % (8 * BS), 2, 0) for i in range(8)]
    else:
        reqs = []
        for i in range(N_STREAM):
            length = 1 + (i * 37) % (12 * BS)
            reqs.append((f"s{i}", length, 2 + i % 3,
                         min(2, (length - 1) // BS) if i % 3 == 0 else 0))
        reqs += [(ABORT_MID, 20 * BS, 2, 0), (ABORT_FLIGHT, 120 * BS, 2, 0),
                 (ABORT_BEFORE, 5 * BS, 2, 0), (NO_DECODE, 3 * BS, 2, 0)]
        reqs += [(k, 2 * BS + 3, 2, 0) for k in KILL]
    for rid, length, _, _ in reqs:
        LENGTHS[rid] = length
    return reqs


def prompt_of(rid):
    return H.rng_prompt(sum((i + 1) * ord(c) for i, c in enumerate(rid)), LENGTHS[rid])


def model_of(args):
    if args.mla:
        return H.ModelShape(layers=4, use_mla=True, latent=48)
    return H.ModelShape(layers=4, kv_heads=4, head_size=16)


def engine_extra(args, role):
    base = {"heartbeat.interval_ms": 1000, "heartbeat.misses": 5,
            "deadlines.bootstrap_s": args.bootstrap_s, "deadlines.quiesce_s": 10,
            "engine.tombstone_ttl_s": 60, "rdma.device": args.dev}
    if role == "prefill":
        base["rdma.listen_addr"] = args.addr
    elif args.addr != args.peer_addr:
        base["rdma.source_addr"] = args.addr
    return lambda r: {"kvferry_overrides": dict(base)}


def wait_file(path, seconds):
    end = time.time() + seconds
    while time.time() < end:
        if os.path.exists(path):
            return True
        time.sleep(0.1)
    return False


def touch(path, text=""):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def outcomes_of(inst):
    c = Counter()
    for w in inst.workers:
        c.update(w.connector.kvferry_outcomes())
    return json.dumps(dict(c), separators=(",", ":")).replace(" ", "_"), c


# ---------------------------------------------------------------- prefill
def run_prefill(args):
    P = H.Instance("kv_producer", "prefill-0", args.prefill_tp, model_of(args), 400, BS,
                   engine_extra(args, "prefill"))
    sched = P.scheduler
    side = sched.connector.scheduler_side
    out(f"vllm-rxe: prefill up, tp {args.prefill_tp}: "
        + " ".join(m.addr for m in side.workers.values()))
    if not wait_file(os.path.join(args.dir, "decode-ready"), args.timeout):
        out("vllm-rxe: UNEXPECTED no decode-ready")
        return 1
    full = args.phase == "full"
    plan = [r[0] for r in requests_for(args)]
    main = [r for r in plan if r not in KILL]
    params_f = open(os.path.join(args.dir, "params.jsonl"), "a")
    added, t_added, t_finished, published = [], {}, {}, set()
    paused = False
    end = time.time() + args.timeout
    while time.time() < end:
        # clients arrive a few at a time; the kill requests once the rest is done
        todo = [r for r in main if r not in t_added]
        if not todo and full and all(r in t_finished for r in main):
            todo = [k for k in KILL if k not in t_added]
        while todo and sum(1 for r in added if r not in t_finished) < 6:
            rid = todo.pop(0)
            sched.add_request(H.Request(rid, prompt_of(rid), 1, {"do_remote_decode": True}))
            added.append(rid)
            t_added[rid] = time.time()
        P.step()
        for rid, params in list(sched.outputs.items()):
            params_f.write(json.dumps({"id": rid, "params": params}) + "\n")
            params_f.flush()
            published.add(rid)
            del sched.outputs[rid]
        for rid in added:
            if rid not in t_finished and rid not in sched.requests and \
                    rid not in side.pending_sends:
                t_finished[rid] = time.time()
        if full and ABORT_MID in published and not paused:
            # the scheduler away (a long batch, GC): no progress, so a decode's
            # ABORT of a-mid waits for its ACK at least this long
            paused = True
            time.sleep(PAUSE_S)
        if full and all(k in published for k in KILL):
            break  # their sends are never started: the decode's rooms wait
        if not full and len(t_finished) == len(plan):
            break
        time.sleep(0.002)
    text, outcomes = outcomes_of(P)
    held = {r: round(t_finished[r] - t_added[r], 1) for r in (ABORT_BEFORE, NO_DECODE)
            if r in t_finished}
    unfinished = [r for r in main if r not in t_finished]
    st = [w.connector.worker_side.engine.stats() for w in P.workers]
    unexpected = len(unfinished)
    for rid in unfinished:  # what each worker knows of it
        where = []
        for w in P.workers:
            snd = w.connector.worker_side._sends.get(rid)
            where.append("no send" if snd is None else
                         f"room={'none' if snd.room is None else snd.room.poll()} sent={snd.sent}")
        out(f"vllm-rxe: UNEXPECTED unfinished {rid}: in requests={rid in sched.requests} "
            f"pending={rid in side.pending_sends} workers: {'; '.join(where)}")
    if full:
        if outcomes.get("send no decode") != args.prefill_tp:
            out("vllm-rxe: UNEXPECTED a-none was not freed at its deadline")
            unexpected += 1
        if not held.get(NO_DECODE, 0) >= args.bootstrap_s - 1:
            out(f"vllm-rxe: UNEXPECTED a-none freed after {held.get(NO_DECODE)} s, "
                f"deadlines.bootstrap_s is {args.bootstrap_s}")
            unexpected += 1
        if held.get(ABORT_BEFORE, 1e9) >= args.bootstrap_s / 2:
            out(f"vllm-rxe: UNEXPECTED a-before held {held.get(ABORT_BEFORE)} s")
            unexpected += 1
        if not all(k in published for k in KILL):
            out("vllm-rxe: UNEXPECTED the kill requests were not offered")
            unexpected += 1
    out(f"vllm-rxe: role=prefill phase={args.phase} requests={len(added)} "
        f"finished={len(t_finished)} unexpected={unexpected} "
        f"inflight={sum(s.inflight for s in st)} unquiescent={sum(s.unquiescent for s in st)} "
        f"held_s={json.dumps(held, separators=(',', ':'))} outcomes={text}")
    if full:
        if not wait_file(os.path.join(args.dir, "kill-rooms"), args.timeout):
            out("vllm-rxe: UNEXPECTED the decode's kill rooms never came")
            return 1
        touch(os.path.join(args.dir, "kill-ready"))
        out("vllm-rxe: prefill stopped stepping with k0..k3 offered; waiting for SIGKILL")
        time.sleep(args.timeout)
        return 2
    time.sleep(3)  # the decode's last releases before the engines close
    P.shutdown()
    return 0 if unexpected == 0 else 1


# ---------------------------------------------------------------- decode
def run_decode(args):
    D = H.Instance("kv_consumer", "decode-0", args.decode_tp, model_of(args), 400, BS,
                   engine_extra(args, "decode"))
    sched = D.scheduler
    plan = {r[0]: r for r in requests_for(args)}
    full = args.phase == "full"
    touch(os.path.join(args.dir, "decode-ready"))
    out(f"vllm-rxe: decode up, tp {args.decode_tp}")
    params_path = os.path.join(args.dir, "params.jsonl")
    while not os.path.exists(params_path):
        time.sleep(0.05)
    pf = open(params_path)
    buf = ""
    added, done = {}, {}
    aborted = {}        # request -> its blocks when aborted
    canary = {}         # request -> the blocks a canary took the moment they were freed
    st = {"checked": 0, "wrong": 0, "early_free": 0}

    def has_room(rid):
        return all(rid + "-d" in w.connector.worker_side._recvs for w in D.workers)

    def before(step_out):
        # async loads promoted this step: their blocks hold what landed and the
        # forward has not run: every byte of every block, layer, K and V
        for req in sched.promoted:
            ids = sched.kv_cache_manager.req_blocks[req.request_id]
            c, x = D.check(req, ids, req.num_prompt_tokens)
            st["checked"] += c
            st["wrong"] += x
            if x:
                out(f"vllm-rxe: UNEXPECTED {req.request_id}: {x} bytes wrong")
            done[req.request_id] = "ok"

    def on_free(ids):
        # an aborted request's blocks, the moment vLLM frees them: taken at
        # once by a canary that must stay intact to the end
        for rid, blocks in aborted.items():
            mine = [b for b in ids if b in blocks]
            if not mine or rid in canary:
                continue
            if has_room(rid) or any(rid + "-d" in w.connector.worker_side._recvs
                                    for w in D.workers):
                out(f"vllm-rxe: UNEXPECTED {rid}'s blocks freed while its room is live")
                st["early_free"] += 1
            for b in mine:
                D.pool.free_ids.remove(b)
            for w in D.workers:
                w.cache.fill(mine, CANARY)
            canary[rid] = mine
    D.pool.on_free = on_free

    end = time.time() + args.timeout
    kill_rooms = False
    while time.time() < end:
        buf += pf.read()
        while "\n" in buf:
            line, buf = buf.split("\n", 1)
            rec = json.loads(line)
            rid = rec["id"]
            if rid not in plan or rid == NO_DECODE:
                continue
            _, length, max_tokens, cached = plan[rid]
            prompt = prompt_of(rid)
            if cached:  # a prefix this decode computed before: cached whole blocks
                blocks = D.pool.alloc(cached)
                for w in D.workers:
                    w.cache.write(blocks, prompt, 0, cached * BS)
                sched.kv_cache_manager.cache_prefix(prompt, blocks)
            req = H.Request(rid + "-d", prompt, max_tokens, rec["params"])
            sched.add_request(req)
            added[rid] = req
            if rid == ABORT_BEFORE:  # the client gone before the request was scheduled
                D.abort(req.request_id)
                done[req.request_id] = "aborted"
        for rid in ABORTS_AFTER_INFO:  # the client gone just after the ROOM_INFO went out
            req = added.get(rid)
            if req is not None and rid not in aborted and has_room(rid) and \
                    req.status == H.RequestStatus.WAITING_FOR_REMOTE_KVS:
                aborted[rid] = list(sched.kv_cache_manager.req_blocks[req.request_id])
                D.abort(req.request_id)
                done[req.request_id] = "aborted"
        D.step(before)
        main_done = all(r in added and added[r].is_finished() and r + "-d" not in sched.requests
                        for r in plan if r not in KILL and r != NO_DECODE)
        if not full and main_done:
            break
        if full and main_done and all(k in added for k in KILL):
            if not kill_rooms and all(has_room(k) for k in KILL):
                touch(os.path.join(args.dir, "kill-rooms"))
                kill_rooms = True
                out("vllm-rxe: decode rooms k0..k3 wait; kill-rooms written")
            if all(added[k].is_finished() and k + "-d" not in sched.requests for k in KILL):
                break
        time.sleep(0.002)
    text, outcomes = outcomes_of(D)
    deferred = set().union(*(w.connector.worker_side.deferred_ids for w in D.workers))
    canary_wrong = sum(w.cache.count_not(b, CANARY) for b in canary.values() for w in D.workers)
    stream = [r for r in plan if r not in KILL and r not in (NO_DECODE, ABORT_BEFORE)
              and r not in ABORTS_AFTER_INFO]
    ok = sum(1 for r in stream if done.get(r + "-d") == "ok" and
             added[r].status == H.RequestStatus.FINISHED_LENGTH_CAPPED)
    unexpected = len(stream) - ok + st["early_free"]
    if outcomes.get("changed: room not ours"):  # Engine.changed named a room the worker lost
        out(f"vllm-rxe: UNEXPECTED {outcomes['changed: room not ours']} changes of unknown rooms")
        unexpected += 1
    if full:
        if ABORT_MID + "-d" not in deferred:
            out("vllm-rxe: UNEXPECTED a-mid was released without waiting for quiescence")
            unexpected += 1
        if set(canary) != set(ABORTS_AFTER_INFO):
            out(f"vllm-rxe: UNEXPECTED canaries over {sorted(canary)}, not both aborts")
            unexpected += 1
        if canary_wrong:
            out(f"vllm-rxe: UNEXPECTED canary over aborted blocks: {canary_wrong} bytes changed")
            unexpected += 1
    live = sum(w.connector.worker_side.live for w in D.workers)
    es = [w.connector.worker_side.engine.stats() for w in D.workers]
    out(f"vllm-rxe: role=decode phase={args.phase} tp={args.prefill_tp}x{args.decode_tp}"
        f"{'_mla' if args.mla else ''} requests={len(added)} ok={ok} of={len(stream)} "
        f"bytes_checked={st['checked']} wrong={st['wrong']} unexpected={unexpected} "
        f"deferred={len(deferred)} canary_blocks={sum(len(b) for b in canary.values())} "
        f"canary_wrong={canary_wrong} live={live} unquiescent={sum(s.unquiescent for s in es)} "
        f"outcomes={text}")
    rc = 0 if unexpected == 0 and st["wrong"] == 0 else 1
    if full:
        rec = sum(1 for k in KILL if k in added and added[k].request_id in sched.recomputed)
        fin = sum(1 for k in KILL if k in added and
                  added[k].status == H.RequestStatus.FINISHED_LENGTH_CAPPED)
        lost = outcomes.get("recv peer lost", 0)
        out(f"vllm-rxe: role=decode-kill requests={len(KILL)} recomputed={rec} finished={fin} "
            f"peer_lost={lost} live={live}")
        if rec != len(KILL) or fin != len(KILL) or lost != len(KILL) * args.decode_tp:
            rc = 1
    D.shutdown()
    return rc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", choices=["prefill", "decode"], required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--dev", required=True)
    ap.add_argument("--addr", required=True)
    ap.add_argument("--peer-addr", default="", help="the prefill's address (decode)")
    ap.add_argument("--prefill-tp", type=int, default=1)
    ap.add_argument("--decode-tp", type=int, default=1)
    ap.add_argument("--mla", action="store_true")
    ap.add_argument("--phase", choices=["full", "shape"], default="full")
    # a-none waits this out after everything else is done: the full phase's
    # longest step (every other room's decode asks within seconds)
    ap.add_argument("--bootstrap-s", type=int, default=15)
    ap.add_argument("--timeout", type=float, default=200)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    requests_for(args)
    sys.exit(run_prefill(args) if args.role == "prefill" else run_decode(args))


if __name__ == "__main__":
    main()
