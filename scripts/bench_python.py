#!/usr/bin/python3
"""What one scheduler iteration pays in Python to learn the state of its
rooms (issue 26): Engine.poll_many over 1,000 rooms against 1,000 single
Room.poll() calls, goal ratio <= 0.1. The engine has no transport (no rdma.*
key: the room engine alone, as tests/python's fixtures), the rooms are
senders left in BOOTSTRAPPING, so both calls do the same lookups and only
the Python crossings differ. Prints both raw figures, the ratio and a JSON
line.

    PYTHONPATH=build-dev/python /usr/bin/python3 scripts/bench_python.py [--rooms N] [--reps N]
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np

import kvferry


def per_call(fn, reps):
    """Median seconds of fn() over reps calls (the median: a loaded host's
    preemptions land in the tail, not in the figure)."""
    t = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        fn()
        t.append(time.perf_counter_ns() - t0)
    return statistics.median(t) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rooms", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=200)
    a = ap.parse_args()
    with kvferry.Engine(overrides={"engine.max_rooms": a.rooms + 16}) as e:
        # one pool, as a sender room needs one; its size does not matter here
        e.register_pool([np.zeros(16 * 64, dtype=np.uint8)], 64, 16)
        rooms = [e.sender(i) for i in range(a.rooms)]

        def singles():
            for r in rooms:
                r.poll()

        def many():
            e.poll_many(rooms)

        # both once first, so neither pays first-touch costs in the figures
        singles()
        many()
        states = set(e.poll_many(rooms))
        t_single = per_call(singles, a.reps)
        t_many = per_call(many, a.reps)
        for r in rooms:
            r.abort()
            r.release()
    ratio = t_many / t_single
    res = {"rooms": a.rooms, "reps": a.reps, "states": sorted(int(s) for s in states),
           "single_polls_us": round(t_single * 1e6, 2), "poll_many_us": round(t_many * 1e6, 2),
           "ratio": round(ratio, 4), "goal": "<= 0.1", "met": ratio <= 0.1}
    print(f"{a.rooms} single poll() calls: {res['single_polls_us']} us "
          f"({t_single * 1e9 / a.rooms:.0f} ns a room)")
    print(f"poll_many over {a.rooms} rooms: {res['poll_many_us']} us "
          f"({t_many * 1e9 / a.rooms:.0f} ns a room)")
    print(f"ratio poll_many / singles: {res['ratio']} (goal <= 0.1: "
          f"{'met' if res['met'] else 'not met'})")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
