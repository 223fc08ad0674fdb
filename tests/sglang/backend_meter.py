"""What SGLang's scheduler loop pays kvferry's SGLang backend per request
(issue 26): wall time inside the methods SGLang calls on
kvferry.sglang's KVSender and KVReceiver (made, init, send / send_metadata,
poll, abort, ...), and, inside those, the manager's progress() (the
engine's kvf_progress and the events it applies: work shared by every
request, not the backend's Python). Per request: the total over every call divided by the
senders (or receivers) made, one per request and rank.

    meter = backend_meter.install()   # after harness.use_kvferry()
    ... the shape's loop ...
    meter.snapshot()                  # {"made", "calls", "us_per_request", ...}

install(profile=True) also runs cProfile inside the metered methods (a
profile of its own per thread) and reports the time spent in calls into
kvferry's C objects (Engine, Room: posting the writes is there, and on
soft-RoCE ibv_post_send is a system call in which the kernel does the
emulated NIC's copying) as c_us_per_request. The profiler slows the Python
around those calls, so the totals of a profiled run are not the figures:
take us_per_request from a run without it, and the C share from one with.

Ranks are threads of one process: the nesting depth is per thread (a
metered method calling another is counted once), the sums under a lock.
"""
import cProfile
import pstats
import threading
import time

# The methods of BaseKVSender / BaseKVReceiver SGLang's queues call.
CALLED = ("__init__", "init", "send", "send_metadata", "poll", "failure_exception", "abort",
          "clear", "pop_decode_prefix_len", "should_send_kv_chunk", "get_transfer_metric")


class Meter:
    def __init__(self):
        self.lock = threading.Lock()
        self.local = threading.local()
        self.ns = self.progress_ns = self.calls = self.made = 0
        self.profiling, self.profiles = False, []
        self.by_name = {}  # method -> [calls, ns]

    def _depth(self, d):
        self.local.depth = getattr(self.local, "depth", 0) + d
        return self.local.depth

    def _profile(self):
        """This thread's profiler (made on first use), or None."""
        if not self.profiling:
            return None
        p = getattr(self.local, "prof", None)
        if p is None:
            p = self.local.prof = cProfile.Profile()
            with self.lock:
                self.profiles.append(p)
        return p

    def c_ns(self):
        """Time inside kvferry's C methods, over every thread's profile."""
        total = 0.0
        for p in self.profiles:
            for (_, _, fn), row in pstats.Stats(p).stats.items():
                if "of 'kvferry." in fn:
                    total += row[2]  # tottime: inside the C call itself
        return total * 1e9

    def wrap(self, fn, name):
        name = f"{fn.__qualname__.split('.')[0]}.{name}"

        def metered(*a, **kw):
            if self._depth(1) > 1:
                try:
                    return fn(*a, **kw)
                finally:
                    self._depth(-1)
            prof = self._profile()
            if prof:
                prof.enable()
            t0 = time.perf_counter_ns()
            try:
                return fn(*a, **kw)
            finally:
                dt = time.perf_counter_ns() - t0
                if prof:
                    prof.disable()
                self._depth(-1)
                with self.lock:
                    self.ns += dt
                    self.calls += 1
                    self.made += name.endswith(".__init__")
                    c = self.by_name.setdefault(name, [0, 0])
                    c[0] += 1
                    c[1] += dt
        metered.__wrapped__ = fn
        return metered

    def wrap_progress(self, fn):
        """The manager's progress(), counted only inside a metered method
        (what else calls it is not the per-request path)."""
        def metered(*a, **kw):
            if not getattr(self.local, "depth", 0):
                return fn(*a, **kw)
            t0 = time.perf_counter_ns()
            try:
                return fn(*a, **kw)
            finally:
                with self.lock:
                    self.progress_ns += time.perf_counter_ns() - t0
        metered.__wrapped__ = fn
        return metered

    def snapshot(self):
        with self.lock:
            n = max(self.made, 1)
            return {"made": self.made, "calls": self.calls,
                    "us_per_request": round(self.ns / n / 1e3, 1),
                    "progress_us_per_request": round(self.progress_ns / n / 1e3, 1),
                    "python_us_per_request": round((self.ns - self.progress_ns) / n / 1e3, 1),
                    "profiled": self.profiling,
                    "c_us_per_request": round(self.c_ns() / n / 1e3, 1) if self.profiling else None,
                    # per method: calls and us per request, the costliest first
                    "by_method": {k: [c, round(t / n / 1e3, 1)] for k, (c, t) in
                                  sorted(self.by_name.items(), key=lambda kv: -kv[1][1])}}


def install(profile=False):
    """Meter kvferry.sglang's sender and receiver classes in this process."""
    from kvferry.sglang import manager, receiver, sender
    m = Meter()
    m.profiling = profile
    for cls in (sender.KVFerryKVSender, receiver.KVFerryKVReceiver):
        for name in CALLED:
            if name in vars(cls):
                setattr(cls, name, m.wrap(vars(cls)[name], name))
    mgr = manager.KVFerryKVManager
    mgr.progress = m.wrap_progress(mgr.progress)
    return m
