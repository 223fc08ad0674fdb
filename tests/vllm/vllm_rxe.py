#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One vLLM instance process (kv_producer or kv_consumer) of a disaggregated
pair on real RDMA devices, built from the installed vLLM (vllm_instance.py:
vLLM's VllmConfig, Scheduler, KVConnectorFactory, model-runner connector
mixin, KVOutputAggregator; torch CPU tensors as the KV cache), kvferry.vllm
as its connector. tests/rxe/scenarios/vllm.sh runs a prefill and a decode
process; every TP rank is a worker with its own kvferry engine, stepped in
lockstep in the instance's process. The prefill hands each request's
kv_transfer_params to the decode through PHASE_DIR/params.jsonl, as JSON
(the proxy). vLLM is imported once, by a parent that then forks the two
instance processes (importing torch and vLLM takes minutes in a TCG guest;
the children share it); their stdout and stderr go to DIR/prefill.out,
.log and DIR/decode.out, .log, the prefill's pid to DIR/prefill.pid. The
phases run one after the other, each with fresh instances (new engines, new
ports). The parent exits with the decode's status.

  vllm_rxe.py --dir DIR --dev0 DEV --addr0 ADDR --dev1 DEV --addr1 ADDR
              [--phases shape:2:1:0,...,full]

shape:P:D:M  8 requests between a prefill of TP P and a decode of TP D
             (M=1: MLA, one latent buffer a layer), every byte checked on
             every decode rank; both instances on vLLM's AsyncScheduler
             (vLLM's default), stepped one batch at a time.
full (TP 1 -> 1, vLLM's Scheduler; last: it ends with the prefill SIGKILLed): requests
s0..s{N-1} of 1 to 192 tokens, every third with a prefix of up to 2 blocks
computed at the decode first (vLLM's prefix cache hits it: only the tail
moves); every byte of every block of every layer, K and V, of each request
checked when its load is reported, before its forward. Then:
  a-mid     the decode aborts it (client gone) just after its ROOM_INFO went
            out, while the prefill's scheduler is away (PAUSE_S): the ABORT's
            ACK waits for it, so the room is FAILED and not quiescent for
            seconds, and vLLM must keep the blocks that long
  a-flight  the same with 120 blocks and no pause; for both, the moment vLLM
            frees the blocks a canary takes them (BlockPool.touch) and no
            byte of it may change: no write of an aborted room landed late
  a-before  aborted before it is scheduled: a ROOM_INFO without data and an
            ABORT free the prefill's blocks at once
  a-none    no decode asks: the prefill frees its blocks at
            deadlines.bootstrap_s (not at a TTL)
  kill      the decode's rooms k0..k3 wait while the prefill is SIGKILLed
            (by the scenario): each fails "peer lost", is reported with its
            blocks as invalid_block_ids, and vLLM's scheduler recomputes it
Prints "vllm-rxe: role=... key=value ..." summary lines; exits 0 when
every request ended as expected."""
import argparse
import json
import logging
import os
import sys
import time
from collections import Counter

T_IMPORT = time.time()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vllm_instance as V  # noqa: E402

import kvferry.vllm  # noqa: E402,F401 - what vLLM's factory loads, imported before the fork

V.register_models()  # vLLM's model classes, in this process (no inspection subprocess)

BS = 16
N_STREAM = 30
ABORT_MID, ABORT_FLIGHT, ABORT_BEFORE, NO_DECODE = "a-mid", "a-flight", "a-before", "a-none"
ABORTS_AFTER_INFO = (ABORT_MID, ABORT_FLIGHT)
KILL = [f"k{j}" for j in range(4)]
CANARY = 0x5A5A     # int16 pattern the canary writes
PAUSE_S = 3.0       # the prefill's scheduler away after a-mid (a long batch)


def out(msg):
    print(msg, flush=True)


class Phase:
    """One phase's shape, requests and hand-over files."""

    def __init__(self, spec, args):
        self.name = spec.replace(":", "")
        self.full = spec == "full"
        if self.full:
            self.ptp = self.dtp = 1
            self.mla = False
        else:
            _, p, d, m = spec.split(":")
            self.ptp, self.dtp, self.mla = int(p), int(d), m == "1"
        # the shapes on vLLM's AsyncScheduler (its default), full on its Scheduler
        self.async_sched = not self.full
        self.dir = os.path.join(args.dir, self.name)
        os.makedirs(self.dir, exist_ok=True)
        self.model = V.Model(layers=4, mla=True) if self.mla else \
            V.Model(layers=4, kv_heads=4, head_size=16)
        self.reqs = self._requests()
        self.lengths = {r[0]: r[1] for r in self.reqs}

    def _requests(self):
        """(id, prompt length, decode max tokens, prefix blocks computed at the decode)."""
        if not self.full:
            return [(f"h{i}", 1 + (i * 53) % (8 * BS), 2, 0) for i in range(8)]
        reqs = []
        for i in range(N_STREAM):
            n = 1 + (i * 37) % (12 * BS)
            reqs.append((f"s{i}", n, 2 + i % 3, min(2, (n - 1) // BS) if i % 3 == 0 else 0))
        reqs += [(ABORT_MID, 20 * BS, 2, 0), (ABORT_FLIGHT, 120 * BS, 2, 0),
                 (ABORT_BEFORE, 5 * BS, 2, 0), (NO_DECODE, 3 * BS, 2, 0)]
        return reqs + [(k, 2 * BS + 3, 2, 0) for k in KILL]

    def prompt(self, rid):
        return V.prompt_of(sum((i + 1) * ord(c) for i, c in enumerate(rid)), self.lengths[rid])

    def path(self, name):
        return os.path.join(self.dir, name)


def engine_extra(args, role):
    base = {"heartbeat.interval_ms": 1000, "heartbeat.misses": 5,
            "deadlines.bootstrap_s": args.bootstrap_s, "deadlines.quiesce_s": 10,
            "engine.tombstone_ttl_s": 60, "rdma.device": args.dev}
    if role == "prefill":
        base["rdma.listen_addr"] = args.addr
    elif args.addr != args.peer_addr:
        base["rdma.source_addr"] = args.addr
    extra = {"kvferry_overrides": base}
    if role == "prefill":
        extra["kvferry_listen_port"] = 0
    return extra


def wait_file(path, seconds):
    end = time.time() + seconds
    while time.time() < end:
        if os.path.exists(path):
            return True
        time.sleep(0.05)
    return False


def touch(path, text=""):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def outcome_text(inst):
    return json.dumps(inst.outcomes(), separators=(",", ":")).replace(" ", "_")


# ---------------------------------------------------------------- prefill
class Prefill:
    def __init__(self, ph, args):
        self.ph, self.args = ph, args
        V.ASYNC_SCHEDULING[0] = ph.async_sched
        self.P = V.Instance("kv_producer", f"prefill-{ph.name}", ph.model, tp=ph.ptp,
                            num_blocks=1024, extra=engine_extra(args, "prefill"))
        self.added, self.t_added, self.t_freed, self.published = [], {}, {}, set()
        self.params_f = open(ph.path("params.jsonl"), "a")

    def plan(self):
        main = [r[0] for r in self.ph.reqs if r[0] not in KILL]
        todo = [r for r in main if r not in self.t_added]
        if not todo and self.ph.full and all(r in self.t_freed for r in main):
            todo = [k for k in KILL if k not in self.t_added]
        return main, todo

    def step(self):
        """Clients arrive a few at a time; the kill requests once the rest is done."""
        P, side = self.P, self.P.connector.scheduler_side
        _, todo = self.plan()
        while todo and sum(1 for r in self.added if r not in self.t_freed) < 6:
            rid = todo.pop(0)
            P.add(rid, self.ph.prompt(rid), 1, {"do_remote_decode": True})
            self.added.append(rid)
            self.t_added[rid] = time.time()
        P.step()
        for rid, params in list(P.params.items()):
            if rid not in self.published:
                self.params_f.write(json.dumps({"id": rid, "params": params}) + "\n")
                self.params_f.flush()
                self.published.add(rid)
        for rid in self.added:
            if rid not in self.t_freed and rid not in P.scheduler.requests and \
                    rid not in side.pending_sends:
                self.t_freed[rid] = time.time()

    def run(self):
        ph, paused = self.ph, False
        end = time.time() + self.args.timeout
        main, _ = self.plan()
        while time.time() < end:
            self.step()
            if ph.full and ABORT_MID in self.published and not paused:
                paused = True           # the scheduler away: a-mid's ABORT waits for its ACK
                time.sleep(PAUSE_S)
            if ph.full and all(k in self.published for k in KILL):
                break                   # k0..k3 are never sent: the decode's rooms wait
            if not ph.full and len(self.t_freed) == len(main):
                break
            time.sleep(0.002)
        return self.summary(main)

    def summary(self, main):
        ph, P, args = self.ph, self.P, self.args
        held = {r: round(self.t_freed[r] - self.t_added[r], 1)
                for r in (ABORT_BEFORE, NO_DECODE) if r in self.t_freed}
        unexpected = [f"unfinished {r}" for r in main if r not in self.t_freed]
        oc = P.outcomes()
        if ph.full:
            if oc.get("send no decode") != ph.ptp:
                unexpected.append("a-none was not freed at its deadline")
            if not held.get(NO_DECODE, 0) >= args.bootstrap_s - 1:
                unexpected.append(f"a-none freed after {held.get(NO_DECODE)} s")
            if held.get(ABORT_BEFORE, 1e9) >= args.bootstrap_s / 2:
                unexpected.append(f"a-before held {held.get(ABORT_BEFORE)} s")
        if not P.stats:
            unexpected.append("no kv_connector_stats reached vLLM's SchedulerStats")
        for u in unexpected:
            out(f"vllm-rxe: UNEXPECTED prefill {ph.name}: {u}")
        st = [w.connector.worker_side.engine.stats() for w in P.workers]
        out(f"vllm-rxe: role=prefill phase={ph.name} requests={len(self.added)} "
            f"finished={len(self.t_freed)} unexpected={len(unexpected)} "
            f"inflight={sum(s.inflight for s in st)} unquiescent={sum(s.unquiescent for s in st)} "
            f"held_s={json.dumps(held, separators=(',', ':'))} outcomes={outcome_text(P)}")
        return len(unexpected)


def run_prefill(args):
    bad = 0
    for spec in args.phases.split(","):
        ph = Phase(spec, args)
        pre = Prefill(ph, args)
        touch(ph.path("prefill-up"))
        if not wait_file(ph.path("decode-ready"), args.timeout):
            out(f"vllm-rxe: UNEXPECTED {ph.name}: no decode-ready")
            return 1
        bad += pre.run()
        if ph.full:
            if not wait_file(ph.path("kill-rooms"), args.timeout):
                out("vllm-rxe: UNEXPECTED the decode's kill rooms never came")
                return 1
            touch(ph.path("kill-ready"))
            out("vllm-rxe: prefill stopped stepping with k0..k3 offered; waiting for SIGKILL")
            time.sleep(args.timeout)
            return 2
        wait_file(ph.path("decode-done"), 60)  # the decode's last releases first
        pre.P.shutdown()
    return 0 if bad == 0 else 1


# ---------------------------------------------------------------- decode
class Decode:
    def __init__(self, ph, args):
        self.ph, self.args = ph, args
        V.ASYNC_SCHEDULING[0] = ph.async_sched
        self.D = V.Instance("kv_consumer", f"decode-{ph.name}", ph.model, tp=ph.dtp,
                            num_blocks=1024, extra=engine_extra(args, "decode"))
        self.D.on_loaded = self.loaded
        self.plan = {r[0]: r for r in ph.reqs}
        self.added, self.aborted, self.canary = {}, {}, {}
        self.st = Counter()
        self.tail_only = set()   # requests whose receive asked for less than the prompt
        self.sched = {}          # request -> tokens scheduled per step

    def precompute_prefixes(self):
        """Each cached request's first blocks, computed here as a request of
        its own: vLLM's prefix cache keeps them and the remote request hits."""
        D = self.D
        for rid, _, _, cached in self.ph.reqs:
            if cached:
                D.add(f"pre-{rid}", self.ph.prompt(rid)[:cached * BS], 1)
        while any(f"pre-{r[0]}" not in D.finished for r in self.ph.reqs if r[3]):
            D.step()

    def loaded(self, rid):
        """A receive reported in finished_recving: every byte of the prompt's
        KV on every rank, before any forward of it (a failed one: its blocks
        are in invalid_block_ids, recomputed by vLLM)."""
        D, req = self.D, self.D.scheduler.requests.get(rid)
        if req is None or req.is_finished():
            return
        ids = D.blocks(rid)
        if set(ids) & D.invalid:
            self.st["failed_loads"] += 1
            return
        n = req.num_prompt_tokens
        for w in D.workers:
            c, x = w.check(ids, req.prompt_token_ids, 0, n)
            self.st["checked"] += c
            self.st["wrong"] += x
            if x:
                out(f"vllm-rxe: UNEXPECTED {rid} rank {w.rank}: {x} bytes wrong")
        self.st["ok"] += 1

    def before(self, so):
        for rid, spec in so.kv_connector_metadata.recv.items():
            base = rid[:-2]
            if base in self.plan and spec.report and \
                    len(spec.block_ids) < -(-self.ph.lengths[base] // BS):
                self.tail_only.add(base)
        for rid, n in so.num_scheduled_tokens.items():
            self.sched.setdefault(rid, []).append(n)

    def has_room(self, rid):
        return all(rid + "-d" in w.connector.worker_side._recvs for w in self.D.workers)

    def take(self, line):
        rec = json.loads(line)
        rid = rec["id"]
        if rid not in self.plan or rid == NO_DECODE:
            return
        _, _, max_tokens, _ = self.plan[rid]
        self.added[rid] = self.D.add(rid + "-d", self.ph.prompt(rid), max_tokens, rec["params"])
        if rid == ABORT_BEFORE:  # the client gone before the request was scheduled
            self.D.abort(rid + "-d")

    def abort_after_info(self):
        """The client gone just after the ROOM_INFO went out (every rank's room)."""
        for rid in ABORTS_AFTER_INFO:
            req = self.added.get(rid)
            if req is not None and rid not in self.aborted and self.has_room(rid) and \
                    req.status == V.RequestStatus.WAITING_FOR_REMOTE_KVS:
                self.aborted[rid] = self.D.blocks(rid + "-d")
                self.D.abort(rid + "-d")

    def take_canaries(self):
        """An aborted request's blocks, the moment vLLM freed them: held by a
        canary (BlockPool.touch) that must stay intact to the end."""
        D = self.D
        for rid, ids in self.aborted.items():
            if rid in self.canary or rid + "-d" in D.scheduler.requests:
                continue
            if any(rid + "-d" in w.connector.worker_side._recvs for w in D.workers):
                out(f"vllm-rxe: UNEXPECTED {rid}'s blocks freed while its room is live")
                self.st["early_free"] += 1
            pool = D.scheduler.kv_cache_manager.block_pool
            pool.touch([pool.blocks[i] for i in ids])
            for w in D.workers:
                w.fill(ids, CANARY)
            self.canary[rid] = ids

    def done(self, rids):
        return all(r in self.added and r + "-d" not in self.D.scheduler.requests for r in rids)

    def run(self):
        ph, D = self.ph, self.D
        while not os.path.exists(ph.path("params.jsonl")):
            time.sleep(0.05)
        pf, buf, kill_rooms = open(ph.path("params.jsonl")), "", False
        main = [r for r in self.plan if r not in KILL and r != NO_DECODE]
        end = time.time() + self.args.timeout
        while time.time() < end:
            buf += pf.read()
            while "\n" in buf:
                line, buf = buf.split("\n", 1)
                self.take(line)
            self.abort_after_info()
            D.step(self.before)
            self.take_canaries()
            if not ph.full and self.done(main):
                break
            if ph.full and self.done(main) and all(k in self.added for k in KILL):
                if not kill_rooms and all(self.has_room(k) for k in KILL):
                    touch(ph.path("kill-rooms"))
                    kill_rooms = True
                    out("vllm-rxe: decode rooms k0..k3 wait; kill-rooms written")
                if self.done(KILL):
                    break
            time.sleep(0.002)
        return self.summary()

    def summary(self):
        ph, D, st = self.ph, self.D, self.st
        stream = [r for r in self.plan if r not in KILL and r not in
                  (NO_DECODE, ABORT_BEFORE) and r not in ABORTS_AFTER_INFO]
        ok = sum(1 for r in stream if r in self.added and D.finished.get(r + "-d") == "length"
                 and r + "-d" in D.loaded)
        unexpected = [f"{len(stream) - ok} of {len(stream)} requests not loaded and finished"] \
            if ok != len(stream) else []
        if st["early_free"]:
            unexpected.append(f"{st['early_free']} aborted requests freed while their room lived")
        if D.outcomes().get("changed: room not ours"):
            unexpected.append("Engine.changed named rooms the workers lost")
        if not D.stats:
            unexpected.append("no kv_connector_stats reached vLLM's SchedulerStats")
        cached = {r[0] for r in ph.reqs if r[3]}
        if self.tail_only != cached:
            unexpected.append(f"tail-only receives {sorted(self.tail_only)}, "
                              f"prefix-cached {sorted(cached)}")
        unexpected += self.full_checks() if ph.full else []
        for u in unexpected:
            out(f"vllm-rxe: UNEXPECTED decode {ph.name}: {u}")
        return ok, len(stream), unexpected

    def full_checks(self):
        deferred = set().union(*(w.connector.worker_side.deferred_ids for w in self.D.workers))
        bad = []
        if ABORT_MID + "-d" not in deferred:
            bad.append("a-mid was released without waiting for quiescence")
        if set(self.canary) != set(ABORTS_AFTER_INFO):
            bad.append(f"canaries over {sorted(self.canary)}, not both aborts")
        if self.canary_wrong():
            bad.append(f"canary over aborted blocks: {self.canary_wrong()} bytes changed")
        return bad

    def canary_wrong(self):
        return sum(w.count_not(b, CANARY) for b in self.canary.values() for w in self.D.workers)

    def report(self, ok, of, unexpected):
        ph, D, st = self.ph, self.D, self.st
        live = sum(w.connector.worker_side.live for w in D.workers)
        es = [w.connector.worker_side.engine.stats() for w in D.workers]
        deferred = set().union(*(w.connector.worker_side.deferred_ids for w in D.workers))
        out(f"vllm-rxe: role=decode phase={ph.name} tp={ph.ptp}x{ph.dtp}"
            f"{'_mla' if ph.mla else ''} scheduler={type(D.scheduler).__name__} "
            f"requests={len(self.added)} ok={ok} of={of} "
            f"bytes_checked={st['checked']} wrong={st['wrong']} unexpected={len(unexpected)} "
            f"tail_only={len(self.tail_only)} deferred={len(deferred)} "
            f"canary_blocks={sum(len(b) for b in self.canary.values())} "
            f"canary_wrong={self.canary_wrong() if ph.full else 0} live={live} "
            f"unquiescent={sum(s.unquiescent for s in es)} outcomes={outcome_text(D)}")
        if not ph.full:
            return 0 if not unexpected and st["wrong"] == 0 else 1
        return self.report_kill(live, unexpected)

    def report_kill(self, live, unexpected):
        """k0..k3: failed peer lost, reported with their blocks as invalid,
        recomputed by vLLM (the whole prompt scheduled again), finished."""
        D = self.D
        rec = sum(1 for k in KILL if k in self.added and
                  self.sched.get(k + "-d", [None])[0] == self.ph.lengths[k])
        fin = sum(1 for k in KILL if D.finished.get(k + "-d") == "length")
        lost = D.outcomes().get("recv peer lost", 0)
        out(f"vllm-rxe: role=decode-kill requests={len(KILL)} recomputed={rec} finished={fin} "
            f"peer_lost={lost} failed_loads={self.st['failed_loads']} live={live}")
        good = rec == fin == len(KILL) and lost == len(KILL) * self.ph.dtp
        return 0 if good and not unexpected and self.st["wrong"] == 0 else 1


def run_decode(args):
    rc = 0
    for spec in args.phases.split(","):
        ph = Phase(spec, args)
        if not wait_file(ph.path("prefill-up"), args.timeout):
            out(f"vllm-rxe: UNEXPECTED {ph.name}: no prefill")
            return 1
        dec = Decode(ph, args)
        dec.precompute_prefixes()
        touch(ph.path("decode-ready"))
        out(f"vllm-rxe: decode {ph.name} up, tp {ph.dtp}")
        rc |= dec.report(*dec.run())
        dec.D.shutdown()
        touch(ph.path("decode-done"))
    return rc


def child(args, role):
    """A forked instance process: its own output files, then its role."""
    for fd, ext in ((1, "out"), (2, "log")):
        f = os.open(os.path.join(args.dir, f"{role}.{ext}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(f, fd)
        os.close(f)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, force=True,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if role == "prefill":
        args.dev, args.addr, args.peer_addr = args.dev0, args.addr0, ""
        touch(os.path.join(args.dir, "prefill.pid"), str(os.getpid()))
    else:
        args.dev, args.addr, args.peer_addr = args.dev1, args.addr1, args.addr0
    t0 = time.time()
    rc = run_prefill(args) if role == "prefill" else run_decode(args)
    out(f"vllm-rxe: {role} exits {rc} after {time.time() - t0:.1f} s")
    sys.stdout.flush()
    os._exit(rc)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--dev0", required=True, help="the prefill's device")
    ap.add_argument("--addr0", required=True)
    ap.add_argument("--dev1", required=True, help="the decode's device")
    ap.add_argument("--addr1", required=True)
    ap.add_argument("--phases", default="shape:2:1:0,shape:1:2:0,shape:2:1:1,shape:1:2:1,full")
    # a-none waits this out after everything else is done: the full phase's
    # longest step (every other room's decode asks within seconds)
    ap.add_argument("--bootstrap-s", type=int, default=15)
    ap.add_argument("--timeout", type=float, default=200)
    args = ap.parse_args()
    out(f"vllm-rxe: vLLM {V.vllm_version()} and torch {V.torch.__version__} imported in "
        f"{time.time() - T_IMPORT:.1f} s")
    pids = {}
    for role in ("prefill", "decode"):
        pid = os.fork()
        if pid == 0:
            child(args, role)
        pids[role] = pid
    rcs = {}
    for role, pid in pids.items():
        _, status = os.waitpid(pid, 0)
        rcs[role] = os.waitstatus_to_exitcode(status)
    out(f"vllm-rxe: children exited: {rcs}")
    killed = args.phases.endswith("full")  # the scenario SIGKILLs the prefill
    sys.exit(1 if rcs["decode"] or (rcs["prefill"] and not killed) else 0)


if __name__ == "__main__":
    main()
