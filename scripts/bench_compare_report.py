#!/usr/bin/python3
"""The figures of scripts/bench-compare.sh: reads DIR/raw (the guest's
perftest, ucx_perftest and kvferry-bench outputs), prints every raw figure
and the ratios against issue 11's goals, writes DIR/results.json and draws
DIR/bandwidth.svg and DIR/latency.svg with gnuplot.

    bench_compare_report.py DIR
"""
import json
import math
import os
import shutil
import subprocess
import sys

SIZES = [64, 2048, 16384, 65536, 1048576]
MIB_S_TO_GBPS = 1048576 * 8 / 1e9  # ucx_perftest's MB/s are MiB/s
# the kvferry-bench runs of the goals and of the policy and wait parts
RUNS = ("goal-16k", "goal-sglang", "sglang-spin", "goal-lat64", "lat64-spin", "lat64-wait",
        "lat64-sleep", "lat64-sleep-wait", "lat64-yield", "16k-wait", "16k-yield", "16k-sleep",
        "16k-sleep-wait")


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def perftest_row(text, size):
    """The result row of a perftest client log: its fields, or None."""
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 5 and f[0] == str(size) and f[1].isdigit():
            return f
    return None


def ucx_final(text):
    for line in text.splitlines():
        if line.startswith("Final:"):
            return line.split()
    return None


def ucx_error(text):
    """Why ucx_perftest gave no figure: its first error line."""
    for line in text.splitlines():
        if "rror" in line or "not supported" in line or "no " in line.lower():
            return line.strip()[:200]
    return text.strip().splitlines()[-1][:200] if text.strip() else "no output"


def kvf_json(path):
    lines = [l for l in read(path).splitlines() if l.startswith("{")]
    return json.loads(lines[-1]) if lines else None


def raw_figures(raw):
    res = {"ib_write_bw": {}, "ib_write_lat": {}, "ucx_put_bw": {}, "ucx_put_lat": {},
           "ucx_errors": {}, "kvferry_sweep": {}}
    for s in SIZES:
        r = perftest_row(read(f"{raw}/ib_write_bw-{s}.log"), s)
        if r:
            res["ib_write_bw"][s] = float(r[3])
        r = perftest_row(read(f"{raw}/ib_write_lat-{s}.log"), s)
        if r and len(r) >= 9 and all(math.isfinite(float(x)) for x in (r[4], r[5], r[7], r[8])):
            res["ib_write_lat"][s] = {"typical": float(r[4]), "avg": float(r[5]),
                                      "p99": float(r[7]), "p999": float(r[8])}
        elif r:
            res["ib_write_lat_unusable"] = res.get("ib_write_lat_unusable", []) + [s]
        for t, key in (("ucp_put_bw", "ucx_put_bw"), ("ucp_put_lat", "ucx_put_lat")):
            text = read(f"{raw}/ucx-{t}-{s}.log")
            f = ucx_final(text)
            if f and len(f) >= 7:
                res[key][s] = (float(f[6]) * MIB_S_TO_GBPS if key == "ucx_put_bw"
                               else {"p50": float(f[2]), "avg": float(f[3])})
            else:
                res["ucx_errors"][f"{t}-{s}"] = ucx_error(text + read(f"{raw}/ucx-{t}-{s}.log.server"))
        k = kvf_json(f"{raw}/kvf-sweep-{s}.json")
        if k:
            res["kvferry_sweep"][s] = k
    for g in RUNS:
        res[g] = kvf_json(f"{raw}/kvf-{g}.json")
        pre = kvf_json(f"{raw}/kvf-{g}.prefill.json")
        if res[g] and pre:
            res[g]["prefill_process"] = pre
    return res


def ratio(a, b):
    return round(a / b, 3) if a is not None and b else None


def goals(res):
    """Issue 11's table: (measure, figure, reference, ratio, goal, met)."""
    out = []

    def add(name, fig, ref, goal, le):
        r = ratio(fig, ref)
        out.append({"measure": name, "kvferry": fig, "reference": ref, "ratio": r,
                    "goal": ("<= " if le else ">= ") + str(goal),
                    "met": None if r is None else (r <= goal if le else r >= goal)})

    g16, gs, gl = res["goal-16k"], res["goal-sglang"], res["goal-lat64"]
    lat64 = res["ib_write_lat"].get(64, {}).get("typical")
    add("16 KiB x 64 buffers, 2 blocks/buffer (Gb/s) / ib_write_bw 16 KiB",
        g16 and g16["gbit_per_s"], res["ib_write_bw"].get(16384), 1.0, False)
    add("sglang 64 x 2 KiB pages (Gb/s) / ib_write_bw 64 KiB",
        gs and gs["gbit_per_s"], res["ib_write_bw"].get(65536), 0.9, False)
    add("64 B LAST send -> decode SUCCESS p50 (us) / ib_write_lat 64 B typical",
        gl and gl["send_to_success_us"]["p50"], lat64, 1.3, True)
    add("64 B whole room cycle p50 (us) / ib_write_lat 64 B typical",
        gl and gl["room_cycle_us"]["p50"], lat64, 3.0, True)
    for s in SIZES:
        k = res["kvferry_sweep"].get(s)
        add(f"kvferry {s} B blocks (Gb/s) / ucx put bw {s} B",
            k and k["gbit_per_s"], res["ucx_put_bw"].get(s), 1.0, False)
    return out


def fmt(x, p=4):
    return "-" if x is None else (f"{x:.{p}g}" if isinstance(x, float) else str(x))


def print_raw(res):
    print(f"{'size':>8} {'ib_write_bw':>12} {'ucx put bw':>11} {'kvferry':>9}"
          f"  {'ib_write_lat typ/p99/p99.9 us':>30} {'ucx put lat p50':>15}")
    for s in SIZES:
        lat = res["ib_write_lat"].get(s)
        k = res["kvferry_sweep"].get(s)
        ul = res["ucx_put_lat"].get(s)
        print(f"{s:>8} {fmt(res['ib_write_bw'].get(s)):>12} {fmt(res['ucx_put_bw'].get(s)):>11}"
              f" {fmt(k and k['gbit_per_s']):>9}  "
              f"{(lat and '%s/%s/%s' % (lat['typical'], lat['p99'], lat['p999'])) or '-':>30}"
              f" {fmt(ul and ul['p50']):>15}")
    for name, e in sorted(res["ucx_errors"].items()):
        print(f"ucx_perftest {name}: no figure: {e}")
    for g in RUNS:
        k = res[g]
        if not k:
            print(f"kvferry {g}: no figure")
            continue
        print(f"kvferry {g}: {k['gbit_per_s']} Gb/s, {k['rooms_per_s']} rooms/s, "
              f"send->SUCCESS p50/p99/p99.9 {k['send_to_success_us']['p50']}/"
              f"{k['send_to_success_us']['p99']}/{k['send_to_success_us']['p999']} us, "
              f"cycle {k['room_cycle_us']['p50']}/{k['room_cycle_us']['p99']}/"
              f"{k['room_cycle_us']['p999']} us, CPU s/GB scheduler "
              f"{k['cpu_s_per_gb']['scheduler']} pollers {k['cpu_s_per_gb']['pollers']}, "
              f"{k['ok']} ok {k['failed']} failed, verify {k['verify_ok']} ok {k['bad_words']} bad")
        land, hand = k.get("send_to_landed_us"), k.get("landed_to_success_us")
        if land and land["n"]:
            print(f"  send -> decode poller took the write p50/p99 {land['p50']}/{land['p99']} us, "
                  f"then -> SUCCESS (ring, scheduler thread) {hand['p50']}/{hand['p99']} us")
        pre = k.get("prefill_process")
        for side, j in (("decode", k), ("prefill", pre)):
            c = j and j.get(f"{side}_per_room")
            if c:
                print(f"  {side} per room: {c['wrs']} WRs, {c['doorbells']} doorbells, "
                      f"{c['completions']} completions, {c['poller_sleeps']} poller sleeps, "
                      f"{c['events']} events; CPU s/GB scheduler {j['cpu_s_per_gb']['scheduler']}"
                      f" pollers {j['cpu_s_per_gb']['pollers']}")


def plot(d, res):
    with open(f"{d}/bandwidth.dat", "w") as f:
        f.write("# size ib_write_bw ucx_put_bw kvferry (Gb/s; -1 none)\n")
        for s in SIZES:
            k = res["kvferry_sweep"].get(s)
            f.write(f"{s} {res['ib_write_bw'].get(s, -1)} {res['ucx_put_bw'].get(s, -1)} "
                    f"{k['gbit_per_s'] if k else -1}\n")
    cols = [[], []]
    for line in read(f"{d}/raw/kvf-goal-lat64.lat").splitlines():
        f = line.split()
        if len(f) == 3 and not line.startswith("#"):
            for c in (0, 1):
                if float(f[c + 1]) >= 0:
                    cols[c].append(float(f[c + 1]))
    with open(f"{d}/latency.dat", "w") as f:
        f.write("# percentile send_to_success_us cycle_us\n")
        a, b = sorted(cols[0]), sorted(cols[1])
        for i in range(max(len(a), len(b))):
            pa = a[min(i, len(a) - 1)] if a else -1
            pb = b[min(i, len(b) - 1)] if b else -1
            f.write(f"{100.0 * (i + 1) / max(len(a), len(b), 1):.3f} {pa} {pb}\n")
    lat = res["ib_write_lat"].get(64, {})
    gp = f"""set terminal svg size 800,480 dynamic background rgb 'white'
set datafile missing '-1'
set output '{d}/bandwidth.svg'
set title 'Bandwidth against block size (soft-RoCE, two devices, one guest)'
set logscale x 2
set xlabel 'block / message size (bytes)'
set ylabel 'Gb/s'
set key top left
plot '{d}/bandwidth.dat' u 1:($2<0?1/0:$2) w lp t 'ib\\_write\\_bw', \\
     '' u 1:($3<0?1/0:$3) w lp t 'ucx\\_perftest ucp\\_put\\_bw', \\
     '' u 1:($4<0?1/0:$4) w lp t 'kvferry-bench (8 buffers x 1 block a room)'
set output '{d}/latency.svg'
set title 'kvferry room latency, one 64-byte block, one room at a time'
unset logscale x
set logscale y
set xlabel 'percentile of rooms'
set ylabel 'microseconds'
set key top left
plot '{d}/latency.dat' u 1:2 w l t 'LAST send -> decode SUCCESS', \\
     '' u 1:3 w l t 'whole room cycle (decode create -> release)', \\
     {lat.get('typical', 1)} w l dt 2 t 'ib\\_write\\_lat 64 B typical', \\
     {lat.get('p99', 1)} w l dt 3 t 'ib\\_write\\_lat 64 B p99'
"""
    with open(f"{d}/plots.gp", "w") as f:
        f.write(gp)
    if shutil.which("gnuplot"):
        subprocess.run(["gnuplot", f"{d}/plots.gp"], check=False)
    else:
        print("gnuplot not found: no plots (install gnuplot-nox)")


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "build/bench-compare"
    res = raw_figures(f"{d}/raw")
    res["env"] = read(f"{d}/raw/env.txt").strip().splitlines()
    res["goals"] = goals(res)
    print_raw(res)
    print()
    print(f"{'measure':<72} {'kvferry':>9} {'reference':>10} {'ratio':>7} {'goal':>7}  met")
    for g in res["goals"]:
        print(f"{g['measure']:<72} {fmt(g['kvferry']):>9} {fmt(g['reference']):>10} "
              f"{fmt(g['ratio']):>7} {g['goal']:>7}  {fmt(g['met'])}")
    with open(f"{d}/results.json", "w") as f:
        json.dump(res, f, indent=1, default=str)
    plot(d, res)
    print(f"JSON: {d}/results.json; plots: {d}/bandwidth.svg {d}/latency.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
