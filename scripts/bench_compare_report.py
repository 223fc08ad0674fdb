#!/usr/bin/python3
"""The figures of scripts/bench-compare.sh: reads DIR/raw (the guest's
perftest, ucx_perftest and kvferry-bench outputs, the host's
bench_python.py), prints every raw figure and the ratios against issue 11's
and issue 26's goals, writes DIR/results.json and draws DIR/bandwidth.svg
and DIR/latency.svg with gnuplot; where the peers step ran (issue 39),
kvferry against Mooncake's transfer engine and NIXL per layout, its goals,
and DIR/peers.svg. A figure whose log is absent or holds no
result is None in the JSON and "no figure" in the table, with the log.

    bench_compare_report.py DIR
"""
import json
import math
import os
import shutil
import subprocess
import sys

SIZES = [64, 2048, 16384, 65536, 1048576]
UCT_SIZES = [16384, 65536]  # the uct step's: UCT put_bw, ib_write_bw, kvferry on DEV0 -> DEV0
MIB_S_TO_GBPS = 1048576 * 8 / 1e9  # ucx_perftest's MB/s are MiB/s
# the kvferry-bench runs of the goals and of the policy and wait parts
RUNS = ("goal-16k", "goal-sglang", "sglang-spin", "goal-lat64", "lat64-spin", "lat64-wait",
        "lat64-sleep", "lat64-sleep-wait", "lat64-yield", "16k-wait", "16k-yield", "16k-sleep",
        "16k-sleep-wait", "uct-16384", "uct-65536", "uct-16384-qp1", "uct-65536-qp1",
        "goal-sglang-qp1", "lat64-idle-1000-1000", "lat64-idle-0-1000", "lat64-idle-0-200",
        "lat64-idle-0-50", "lat64-idle-0-0")


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


def perftest_lat(text, size):
    """A perftest latency log's row (#bytes #iterations t_min t_max t_typical
    t_avg t_stdev 99% 99.9%) as a dict; "unusable" when a figure is not a
    number (perftest prints nan/inf when its clock misbehaves); None without
    a row."""
    r = perftest_row(text, size)
    if not r:
        return None
    try:
        v = [float(x) for x in r[4:9]]
    except (ValueError, IndexError):
        return "unusable"
    if len(v) < 5 or not all(math.isfinite(x) for x in v):
        return "unusable"
    return {"typical": v[0], "avg": v[1], "p99": v[3], "p999": v[4]}


def ucx_final(text):
    for line in text.splitlines():
        if line.startswith("Final:"):
            return line.split()
    return None


def ucx_error(text):
    """Why ucx_perftest gave no figure: its first error line."""
    lines = [l for l in text.splitlines() if not l.startswith("$ ")]  # run_logged's command
    for line in lines:
        if "rror" in line or "not supported" in line or "no " in line.lower():
            return line.strip()[:200]
    return lines[-1].strip()[:200] if "".join(lines).strip() else "no log, or an empty one"


def kvf_json(path):
    lines = [l for l in read(path).splitlines() if l.startswith("{")]
    try:
        return json.loads(lines[-1]) if lines else None
    except ValueError:  # cut short (a bench killed by its timeout): no figure
        return None


def bw_gbps(path, size):
    """ib_write_bw's average Gb/s (--report_gbits) in a client log, or None."""
    r = perftest_row(read(path), size)
    return float(r[3]) if r else None


def raw_figures(raw):
    res = {"ib_write_bw": {}, "ib_write_lat": {}, "ib_send_lat": {}, "ucx_put_bw": {},
           "ucx_put_lat": {}, "ucx_errors": {}, "kvferry_sweep": {}}
    for s in SIZES:
        bw = bw_gbps(f"{raw}/ib_write_bw-{s}.log", s)
        if bw is not None:
            res["ib_write_bw"][s] = bw
        for tool in ("ib_write_lat", "ib_send_lat"):
            lat = perftest_lat(read(f"{raw}/{tool}-{s}.log"), s)
            if lat == "unusable":
                res.setdefault(f"{tool}_unusable", []).append(s)
            elif lat:
                res[tool][s] = lat
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
    uct_figures(raw, res)
    ev = perftest_lat(read(f"{raw}/ib_send_lat-events-64.log"), 64)
    if isinstance(ev, dict):
        res["ib_send_lat_events"] = {64: ev}
    res["python"] = kvf_json(f"{raw}/python.json")
    res["ib_write_bw_cpu_s_per_gb"] = perftest_cpu_per_gb(raw, "ib_write_bw", 16384)
    # the five step's runs, where it ran (each with its own reference)
    if os.path.exists(f"{raw}/ib_write_bw-run1-16384.log"):
        res["five_16k"] = [(kvf_json(f"{raw}/kvf-goal-16k-run{i}.json"),
                            kvf_json(f"{raw}/kvf-goal-16k-qp1-run{i}.json"),
                            bw_gbps(f"{raw}/ib_write_bw-run{i}-16384.log", 16384))
                           for i in range(1, 6)]
    return res


def cpu_seconds(path):
    """user + sys of a /usr/bin/time -f 'cpu_s user=%U sys=%S' file, or None."""
    for line in read(path).splitlines():
        if line.startswith("cpu_s "):
            f = dict(kv.split("=", 1) for kv in line.split()[1:])
            return float(f["user"]) + float(f["sys"])
    return None


def perftest_cpu_per_gb(raw, tool, size):
    """CPU seconds of both perftest processes (client and server, the whole
    run) per GB (1e9 bytes) the client wrote, or None."""
    log = f"{raw}/{tool}-{size}.log"
    row = perftest_row(read(log), size)
    c, s = cpu_seconds(f"{log}.cpu"), cpu_seconds(f"{log}.server.cpu")
    if not row or c is None or s is None:
        return None
    return (c + s) / (int(row[0]) * int(row[1]) / 1e9)


def kvf_cpu_per_gb(run):
    """Scheduler + pollers CPU seconds per GB of both kvferry-bench
    processes (each over its timed pass), or None."""
    sides = (run, pick(run, "prefill_process"))
    per = [pick(x, "cpu_s_per_gb") for x in sides]
    if any(p is None for p in per):
        return None
    return sum(p["scheduler"] + p["pollers"] for p in per)


def uct_figures(raw, res):
    """The uct step's: UCT put_bw (Gb/s, or why none), ib_write_bw and
    kvferry on the same path, DEV0 -> DEV0."""
    res.update({"uct_put_bw": {}, "uct_errors": {}, "ib_write_bw_loop": {}})
    for s in UCT_SIZES:
        text = read(f"{raw}/uct-put_bw-{s}.log")
        f = ucx_final(text)
        if f and len(f) >= 7:
            res["uct_put_bw"][s] = float(f[6]) * MIB_S_TO_GBPS
        else:
            res["uct_errors"][s] = ucx_error(text + read(f"{raw}/uct-put_bw-{s}.log.server"))
        bw = bw_gbps(f"{raw}/ib_write_bw-loop-{s}.log", s)
        if bw is not None:
            res["ib_write_bw_loop"][s] = bw


def ratio(a, b):
    return round(a / b, 3) if a is not None and b else None


def pick(d, *keys):
    """d[k0][k1]..., or None where a level is missing (an absent log, a
    bench that died before its JSON)."""
    for k in keys:
        if not isinstance(d, dict) or d.get(k) is None:
            return None
        d = d[k]
    return d


def goals(res):
    """Issue 11's and 26's table: (measure, figure, reference, ratio, goal,
    met, and the logs of a figure that is missing)."""
    out = []

    def add(name, fig, ref, goal, le, logs, beside=None):
        r = ratio(fig, ref)
        # goal None: a figure shown beside a goal, judged by nothing
        row = {"measure": name, "kvferry": fig, "reference": ref, "ratio": r,
               "goal": "-" if goal is None else ("<= " if le else ">= ") + str(goal),
               "met": None if r is None or goal is None else (r <= goal if le else r >= goal)}
        missing = list(dict.fromkeys(log for log, v in zip(logs, (fig, ref)) if v is None))
        if missing:
            row["no_figure"] = missing
        if beside:
            row["beside"] = beside
        out.append(row)

    g16, gs, gl = res["goal-16k"], res["goal-sglang"], res["goal-lat64"]
    lk = "raw/kvf-goal-lat64.json"
    add("16 KiB x 64 buffers, 2 blocks/buffer (Gb/s) / ib_write_bw 16 KiB",
        pick(g16, "gbit_per_s"), res["ib_write_bw"].get(16384), 1.0, False,
        ("raw/kvf-goal-16k.json", "raw/ib_write_bw-16384.log"))
    add("sglang 64 x 2 KiB pages (Gb/s) / ib_write_bw 64 KiB",
        pick(gs, "gbit_per_s"), res["ib_write_bw"].get(65536), 0.9, False,
        ("raw/kvf-goal-sglang.json", "raw/ib_write_bw-65536.log"))
    add("the same, rdma.qps_per_peer 1 (Gb/s) / ib_write_bw 64 KiB (beside)",
        pick(res.get("goal-sglang-qp1"), "gbit_per_s"), res["ib_write_bw"].get(65536), None, False,
        ("raw/kvf-goal-sglang-qp1.json", "raw/ib_write_bw-65536.log"))
    add("16 KiB goal: scheduler + pollers CPU s/GB, both processes / ib_write_bw 16 KiB, both",
        kvf_cpu_per_gb(g16), res.get("ib_write_bw_cpu_s_per_gb"), 1.2, True,
        ("raw/kvf-goal-16k.json", "raw/ib_write_bw-16384.log.cpu"))
    latency_goals(res, gl, lk, add)
    for s in SIZES:
        k = res["kvferry_sweep"].get(s)
        add(f"kvferry {s} B blocks (Gb/s) / ucx put bw {s} B (UCP)",
            pick(k, "gbit_per_s"), res["ucx_put_bw"].get(s), 1.0, False,
            (f"raw/kvf-sweep-{s}.json", f"raw/ucx-ucp_put_bw-{s}.log"))
    uct_goals(res, add)
    for i, (k, k2, bw) in enumerate(res.get("five_16k", []), 1):
        logs = (f"raw/kvf-goal-16k-run{i}.json", f"raw/ib_write_bw-run{i}-16384.log")
        add(f"16 KiB goal, run {i} of 5 (Gb/s) / its ib_write_bw 16 KiB", pick(k, "gbit_per_s"), bw,
            1.0, False, logs)
        add(f"16 KiB goal, run {i} of 5, rdma.qps_per_peer 1 (Gb/s) / the same ib_write_bw (beside)",
            pick(k2, "gbit_per_s"), bw, None, False,
            (f"raw/kvf-goal-16k-qp1-run{i}.json", logs[1]))
    py = res.get("python")
    add(f"poll_many over {pick(py, 'rooms') or 1000} rooms (us) / as many single poll() (us)",
        pick(py, "poll_many_us"), pick(py, "single_polls_us"), 0.1, True,
        ("raw/python.json", "raw/python.json"))
    ch = (py or {}).get("changed_us") or {}
    for k in sorted(ch, key=int):
        goal_row = int(k) == pick(py, "goal_changes")
        add(f"changed() over {pick(py, 'rooms') or 1000} watched rooms, {k} changed (us) / "
            "as many single poll() (us)" + (" [the goal: 1% a scheduler iteration]"
                                              if goal_row else ""),
            ch[k], pick(py, "single_polls_us"), 0.1 if goal_row else None, True,
            ("raw/python.json", "raw/python.json"))
    return out


def latency_goals(res, gl, lk, add):
    """64 B: against ib_send_lat (a receive completion per message, as a
    room's immediate), then the old anchor ib_write_lat (polls memory)."""
    sl = res["ib_send_lat"].get(64, {})
    wl = res["ib_write_lat"].get(64, {})
    ls, lw = "raw/ib_send_lat-64.log", "raw/ib_write_lat-64.log"
    add("64 B LAST send -> decode SUCCESS p50 (us) / ib_send_lat 64 B typical",
        pick(gl, "send_to_success_us", "p50"), sl.get("typical"), 1.3, True, (lk, ls))
    add("64 B LAST send -> decode SUCCESS p99 (us) / ib_send_lat 64 B p99",
        pick(gl, "send_to_success_us", "p99"), sl.get("p99"), 3.0, True, (lk, ls))
    add("64 B whole room cycle p50 (us) / ib_send_lat 64 B typical",
        pick(gl, "room_cycle_us", "p50"), sl.get("typical"), 3.0, True, (lk, ls))
    # beside the goals, judged by nothing: perftest sleeping on CQ events,
    # as a waiting room's poller does
    el = res.get("ib_send_lat_events", {}).get(64, {})
    le = "raw/ib_send_lat-events-64.log"
    add("64 B LAST send -> decode SUCCESS p50 (us) / ib_send_lat -e (sleeps on events) typical",
        pick(gl, "send_to_success_us", "p50"), el.get("typical"), None, True, (lk, le))
    add("64 B LAST send -> decode SUCCESS p99 (us) / ib_send_lat -e p99",
        pick(gl, "send_to_success_us", "p99"), el.get("p99"), None, True, (lk, le))
    add("64 B LAST send -> decode SUCCESS p50 (us) / ib_write_lat 64 B typical (old anchor)",
        pick(gl, "send_to_success_us", "p50"), wl.get("typical"), 1.3, True, (lk, lw))
    add("64 B whole room cycle p50 (us) / ib_write_lat 64 B typical (old anchor)",
        pick(gl, "room_cycle_us", "p50"), wl.get("typical"), 3.0, True, (lk, lw))


def uct_goals(res, add):
    """kvferry >= UCT put_bw on the one path UCT runs here, DEV0 -> DEV0,
    with ib_write_bw on that path beside it."""
    dev0 = next((l.split()[1] for l in res.get("env", []) if l.startswith("devices ")), "DEV0")
    for s in UCT_SIZES:
        k = pick(res.get(f"uct-{s}"), "gbit_per_s")
        bw = res["ib_write_bw_loop"].get(s)
        add(f"kvferry {s // 1024} KiB, 8 x 8 blocks/room, {dev0} -> {dev0} (Gb/s) / "
            f"UCT put_bw rc_verbs", k, res["uct_put_bw"].get(s), 1.0, False,
            (f"raw/kvf-uct-{s}.json", f"raw/uct-put_bw-{s}.log"),
            {"ib_write_bw_same_path": bw, "kvferry_over_ib_write_bw": ratio(k, bw),
             "uct_over_ib_write_bw": ratio(res["uct_put_bw"].get(s), bw),
             "log": f"raw/ib_write_bw-loop-{s}.log"})
        add("the same, rdma.qps_per_peer 1 (Gb/s) / UCT put_bw rc_verbs (beside)",
            pick(res.get(f"uct-{s}-qp1"), "gbit_per_s"), res["uct_put_bw"].get(s), None, False,
            (f"raw/kvf-uct-{s}-qp1.json", f"raw/uct-put_bw-{s}.log"))


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
    print_anchors(res)
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


def print_anchors(res):
    """Issue 26's raw figures: ib_send_lat 64 B, the uct step, Python."""
    sl = res["ib_send_lat"].get(64)
    print("ib_send_lat -I 0 64 B typ/avg/p99/p99.9 us: " +
          ("%s/%s/%s/%s" % (sl["typical"], sl["avg"], sl["p99"], sl["p999"]) if sl else
           "no figure (raw/ib_send_lat-64.log)"))
    for s in UCT_SIZES:
        u, k = res["uct_put_bw"].get(s), pick(res.get(f"uct-{s}"), "gbit_per_s")
        print(f"{s} B, DEV0 -> DEV0: UCT put_bw rc_verbs {fmt(u)} Gb/s"
              f"{'' if u is not None else ' (no figure: ' + res['uct_errors'].get(s, '?') + ')'}, "
              f"ib_write_bw {fmt(res['ib_write_bw_loop'].get(s))} Gb/s, kvferry {fmt(k)} Gb/s")
    py = res.get("python")
    print(f"python: {pick(py, 'rooms')} single poll() {pick(py, 'single_polls_us')} us, "
          f"poll_many {pick(py, 'poll_many_us')} us, changed() by changes "
          f"{py.get('changed_us')} us" if py else
          "python: no figure (raw/python.json)")


def print_goals(goals_):
    """The goals table; a row without a figure names the logs that lack it,
    a row with a same-path perftest figure prints it under the row."""
    w = max(len(g["measure"]) for g in goals_)
    print(f"{'measure':<{w}} {'kvferry':>9} {'reference':>10} {'ratio':>7} {'goal':>7}  met")
    for g in goals_:
        met = fmt(g["met"]) if g["met"] is not None else \
            "no figure: " + ", ".join(g["no_figure"]) if g.get("no_figure") else "-"
        print(f"{g['measure']:<{w}} {fmt(g['kvferry']):>9} {fmt(g['reference']):>10} "
              f"{fmt(g['ratio']):>7} {g['goal']:>7}  {met}")
        b = g.get("beside")
        if b:
            print(f"{'':<4}beside it, ib_write_bw on that path: "
                  f"{fmt(b['ib_write_bw_same_path'])} Gb/s; kvferry / ib_write_bw "
                  f"{fmt(b['kvferry_over_ib_write_bw'])}, UCT / ib_write_bw "
                  f"{fmt(b['uct_over_ib_write_bw'])} ({b['log']})")


def five_summary(goals_):
    """The five step in one line: how many of its rounds met the goal with
    the default configuration (issue 26 asks for five of five)."""
    rounds = [g for g in goals_ if g["measure"].startswith("16 KiB goal, run ")
              and g["goal"] != "-"]
    if not rounds:
        return None
    met = sum(1 for g in rounds if g["met"])
    ratios = ", ".join(fmt(g["ratio"]) for g in rounds)
    return f"16 KiB goal, five rounds: {met} of {len(rounds)} met (ratios {ratios})"


def bandwidth_figures(res):
    """Every bandwidth.svg figure (None where none)."""
    for s in SIZES:
        yield res["ib_write_bw"].get(s)
        yield res["ucx_put_bw"].get(s)
        yield pick(res["kvferry_sweep"].get(s), "gbit_per_s")
        yield res["uct_put_bw"].get(s)
        yield res["ib_write_bw_loop"].get(s)
        yield pick(res.get(f"uct-{s}"), "gbit_per_s")


def plot(d, res):
    with open(f"{d}/bandwidth.dat", "w") as f:
        f.write("# size ib_write_bw ucx_put_bw kvferry, then DEV0 -> DEV0 (uct step):"
                " uct_put_bw ib_write_bw kvferry (Gb/s; -1 none)\n")
        for s in SIZES:
            k = res["kvferry_sweep"].get(s)
            ku = pick(res.get(f"uct-{s}"), "gbit_per_s")
            f.write(f"{s} {res['ib_write_bw'].get(s, -1)} {res['ucx_put_bw'].get(s, -1)} "
                    f"{k['gbit_per_s'] if k else -1} {res['uct_put_bw'].get(s, -1)} "
                    f"{res['ib_write_bw_loop'].get(s, -1)} {-1 if ku is None else ku}\n")
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
    slat = res["ib_send_lat"].get(64, {})
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
     '' u 1:($4<0?1/0:$4) w lp t 'kvferry-bench (8 buffers x 1 block a room)', \\
     '' u 1:($5<0?1/0:$5) w p pt 6 t 'UCT put\\_bw rc\\_verbs (DEV0 -> DEV0)', \\
     '' u 1:($6<0?1/0:$6) w p pt 4 t 'ib\\_write\\_bw (DEV0 -> DEV0)', \\
     '' u 1:($7<0?1/0:$7) w p pt 8 t 'kvferry-bench 8 x 8 blocks a room (DEV0 -> DEV0)'
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
     {lat.get('p99', 1)} w l dt 3 t 'ib\\_write\\_lat 64 B p99', \\
     {slat.get('typical', 1)} w l dt 4 t 'ib\\_send\\_lat 64 B typical', \\
     {slat.get('p99', 1)} w l dt 5 t 'ib\\_send\\_lat 64 B p99'
"""
    if not any(v is not None for v in bandwidth_figures(res)):
        # gnuplot stops the script at a plot with no point at all ("x range
        # is invalid"), which would lose the latency plot too
        gp = gp.replace(gp[gp.index(f"set output '{d}/bandwidth.svg'"):
                           gp.index(f"set output '{d}/latency.svg'")], "")
        print("no bandwidth figure: no bandwidth.svg")
    with open(f"{d}/plots.gp", "w") as f:
        f.write(gp)
    if shutil.which("gnuplot"):
        subprocess.run(["gnuplot", f"{d}/plots.gp"], check=False)
    else:
        print("gnuplot not found: no plots (install gnuplot-nox)")


# ---- the peers step (issue 39) ---------------------------------------------
PEER_LAYOUTS = (("c64k", "contiguous 64 KiB blocks, 8 buffers x 8 a room"),
                ("r16k", "16 KiB blocks, 8 buffers x 8 a room, rotated"),
                ("sgl1", "SGLang layout, page size 1 (2 KiB pages, 16 buffers x 64)"),
                ("sgl16", "SGLang layout, page size 16 (32 KiB pages, 16 buffers x 4)"),
                ("lat64", "one 64 B block a room, one room in flight"))
PEERS = ("mooncake", "nixl")


def kvf_peer_figures(raw, tag):
    """kvferry-bench's run of a peers layout, in the peers' terms."""
    k = kvf_json(f"{raw}/kvf-peers-{tag}.json")
    pre = kvf_json(f"{raw}/kvf-peers-{tag}.prefill.json")
    if not k:
        return None
    if pre:
        k["prefill_process"] = pre
    # the processes' CPU over the timed pass (every thread), as the peers'
    procs = [pick(x, "cpu_s", "process") for x in (k, pre)]
    cpu = sum(procs) / (k["bytes"] / 1e9) if None not in procs and k.get("bytes") else None
    return {"gbit_per_s": k.get("gbit_per_s"), "p50_us": pick(k, "send_to_success_us", "p50"),
            "p99_us": pick(k, "send_to_success_us", "p99"), "cpu_s_per_gb": cpu,
            "sched_pollers_cpu_s_per_gb": kvf_cpu_per_gb(k),
            "decode_per_room": k.get("decode_per_room"),
            "prefill_per_room": pick(pre, "prefill_per_room"),
            "log": f"raw/kvf-peers-{tag}.json"}


def peer_figures(raw, peer, tag):
    """bench_peers.py's decode and prefill JSON of a run: bandwidth, the
    send -> seen-on-the-decode latency, both processes' CPU seconds over
    the timed pass per GB (1e9 bytes)."""
    d = kvf_json(f"{raw}/peer-{peer}-{tag}.json")
    p = kvf_json(f"{raw}/peer-{peer}-{tag}.prefill.json")
    if not d:
        return None
    cpu = (d["cpu_s"] + p["cpu_s"]) / (d["bytes"] / 1e9) if p else None
    return {"gbit_per_s": d.get("gbit_per_s"), "p50_us": pick(d, "send_to_seen_us", "p50"),
            "p99_us": pick(d, "send_to_seen_us", "p99"), "cpu_s_per_gb": cpu,
            "check": d.get("check"),
            # Mooncake: the merged runs asked for (one batch entry each);
            # NIXL: the page descriptors handed over (before its own merging)
            "requests_per_room": (p.get("writes_requested") or p.get("descs_requested") or 0)
            / p["rooms"] if p else None,
            "sender_wait_us": p and (p.get("sync_write_us") or p.get("post_to_done_us")),
            "threads_cpu_s": {"prefill": pick(p, "threads_cpu_s"),
                              "decode": d.get("threads_cpu_s")},
            "cores": {"prefill": p and p["cpu_s"] / p["seconds"],
                      "decode": d["cpu_s"] / d["seconds"]},
            "log": f"raw/peer-{peer}-{tag}.json"}


# beside the race (bench-compare.sh's peer_variants): tag, peer, what
PEER_VARIANTS = (("r16k-w1", "mooncake", "MC_WORKERS_PER_CTX=1"),
                 ("r16k-noprog", "nixl", "no progress thread"),
                 ("lat64-w1", "mooncake", "MC_WORKERS_PER_CTX=1"),
                 ("lat64-noprog", "nixl", "no progress thread"),
                 ("lat64-spin", "nixl", "the decode polls without sleeping"))


def median_run(runs):
    """The round with the median kvferry bandwidth (the figure shown for a
    layout with several rounds)."""
    ok = [r for r in runs if pick(r, "kvferry", "gbit_per_s") is not None]
    if not ok:
        return runs[0] if runs else None
    return sorted(ok, key=lambda r: r["kvferry"]["gbit_per_s"])[len(ok) // 2]


def peers_figures(raw):
    """Per layout: kvferry's and each peer's figures and the ratios
    kvferry / peer; None where the step did not run."""
    if not any(f.startswith("peer-") for f in (os.listdir(raw) if os.path.isdir(raw) else [])):
        return None
    out = {"ucx": read(f"{raw}/peer-nixl-ucx.txt").strip() or None}
    for name, what in PEER_LAYOUTS:
        tags = [name] if os.path.exists(f"{raw}/kvf-peers-{name}.json") or \
            not os.path.exists(f"{raw}/kvf-peers-{name}-run1.json") else \
            [f"{name}-run{i}" for i in range(1, 6)]
        runs = []
        for t in tags:
            r = {"tag": t, "kvferry": kvf_peer_figures(raw, t)}
            for p in PEERS:
                r[p] = peer_figures(raw, p, t)
                r[f"ratio_{p}"] = {m: ratio(pick(r, "kvferry", m), pick(r, p, m))
                                   for m in ("gbit_per_s", "p50_us", "p99_us", "cpu_s_per_gb")}
            runs.append(r)
        shown = median_run(runs)
        out[name] = {"what": what, "shown": shown, "runs": runs if len(runs) > 1 else None}
    out["variants"] = {}
    for tag, p, what in PEER_VARIANTS:
        f = peer_figures(raw, p, tag)
        if f:
            k = pick(out, tag.split("-")[0], "shown", "kvferry")
            out["variants"][tag] = {"peer": p, "what": what, "figures": f,
                                    "ratio": {m: ratio(pick(k, m), f.get(m)) for m in
                                              ("gbit_per_s", "p50_us", "p99_us", "cpu_s_per_gb")}}
    k = kvf_peer_figures(raw, "lat64-spin")
    if k:
        out["variants"]["lat64-spin-kvferry"] = {
            "peer": "kvferry", "what": "spinning, no --wait", "figures": k,
            "ratio_nixl_noprog": {m: ratio(k.get(m), pick(out, "variants", "lat64-noprog", "figures", m))
                                  for m in ("gbit_per_s", "p50_us", "p99_us", "cpu_s_per_gb")}}
    return out


def peers_goals(pf):
    """Issue 39's goals: kvferry >= 1.0x each peer's bandwidth on every
    layout, CPU per GB <= the peer's, p50 latency <= the peer's (at 64 B);
    the 16 KiB layout in five of five rounds."""
    rows = []
    for name, _ in PEER_LAYOUTS:
        r = pick(pf, name, "shown")
        if not r or not any(r.get(w) for w in ("kvferry",) + PEERS):
            continue
        for p in PEERS:
            q = r[f"ratio_{p}"]
            # at 64 B, one room in flight, the latency is the figure: the
            # bandwidth and CPU per GB are shown, not judged
            bw_goal = None if name == "lat64" else 1.0
            checks = [("bandwidth kvferry / peer", "gbit_per_s", bw_goal, False)]
            checks.append(("CPU s/GB kvferry / peer", "cpu_s_per_gb", bw_goal, True))
            checks.append(("p50 latency kvferry / peer", "p50_us", 1.0 if name == "lat64" else None,
                           True))
            for what, m, goal, le in checks:
                rv = q[m]
                rows.append({"layout": name, "peer": p, "measure": what,
                             "kvferry": pick(r, "kvferry", m), "peer_figure": pick(r, p, m),
                             "ratio": rv, "goal": "-" if goal is None else ("<= " if le else ">= ")
                             + str(goal), "met": None if rv is None or goal is None else
                             (rv <= goal if le else rv >= goal)})
    for p in PEERS:
        runs = pick(pf, "r16k", "runs") or []
        rs = [pick(r, f"ratio_{p}", "gbit_per_s") for r in runs]
        if rs:
            met = sum(1 for x in rs if x is not None and x >= 1.0)
            rows.append({"layout": "r16k", "peer": p, "measure": "bandwidth, rounds >= 1.0",
                         "kvferry": f"{met} of {len(rs)}", "peer_figure": None,
                         "ratio": ", ".join(fmt(x) for x in rs), "goal": "5 of 5",
                         "met": met == 5 and len(rs) == 5})
    return rows


def print_peers(pf, rows):
    print(f"peers (issue 39); NIXL's UCX setting: {pf.get('ucx')}")
    print(f"{'layout':<7} {'who':<9} {'Gb/s':>8} {'p50 us':>9} {'p99 us':>9} {'CPU s/GB':>9}"
          f"  kvferry/peer: {'bw':>6} {'p50':>6} {'p99':>6} {'cpu':>6}")
    for name, _ in PEER_LAYOUTS:
        r = pick(pf, name, "shown")
        if not r or not any(r.get(w) for w in ("kvferry",) + PEERS):
            continue
        for who in ("kvferry",) + PEERS:
            f = r.get(who)
            q = r.get(f"ratio_{who}", {})
            print(f"{name:<7} {who:<9} {fmt(pick(f, 'gbit_per_s')):>8} {fmt(pick(f, 'p50_us')):>9}"
                  f" {fmt(pick(f, 'p99_us')):>9} {fmt(pick(f, 'cpu_s_per_gb')):>9}" +
                  ("" if who == "kvferry" else
                   f"  {'':>13} {fmt(q.get('gbit_per_s')):>6} {fmt(q.get('p50_us')):>6}"
                   f" {fmt(q.get('p99_us')):>6} {fmt(q.get('cpu_s_per_gb')):>6}") +
                  ("" if f else "  no figure"))
        k = r.get("kvferry") or {}
        print(f"  kvferry per room: decode {k.get('decode_per_room')}, prefill "
              f"{k.get('prefill_per_room')}; scheduler + pollers CPU s/GB "
              f"{fmt(k.get('sched_pollers_cpu_s_per_gb'))}")
        for p in PEERS:
            c = pick(r, p, "check")
            if c and c.get("blocks_bad"):
                print(f"  {p}: {c['blocks_bad']} blocks wrong in the check")
            if r.get(p):
                print(f"  {p}: busy cores prefill {fmt(pick(r[p], 'cores', 'prefill'), 3)} "
                      f"decode {fmt(pick(r[p], 'cores', 'decode'), 3)}; busiest threads "
                      f"{r[p]['threads_cpu_s']}")
                print(f"  {p}: {fmt(r[p]['requests_per_room'])} requests a room; the sender's "
                      f"{'sync write' if p == 'mooncake' else 'post -> DONE'} p50/p99 "
                      f"{pick(r[p], 'sender_wait_us', 'p50')}/{pick(r[p], 'sender_wait_us', 'p99')} us")
    for tag, v in pf.get("variants", {}).items():
        if "ratio_nixl_noprog" in v:
            f, q = v["figures"], v["ratio_nixl_noprog"]
            print(f"{tag:<13} ({v['what']}): p50/p99 {fmt(f['p50_us'])}/{fmt(f['p99_us'])} us, "
                  f"CPU {fmt(f['cpu_s_per_gb'])} s/GB; / NIXL without its progress thread: p50 "
                  f"{fmt(q['p50_us'])} p99 {fmt(q['p99_us'])} cpu {fmt(q['cpu_s_per_gb'])} (beside)")
            continue
        f, q = v["figures"], v["ratio"]
        print(f"{tag:<13} {v['peer']} ({v['what']}): {fmt(f['gbit_per_s'])} Gb/s, p50/p99 "
              f"{fmt(f['p50_us'])}/{fmt(f['p99_us'])} us, CPU {fmt(f['cpu_s_per_gb'])} s/GB; "
              f"kvferry/it bw {fmt(q['gbit_per_s'])} p50 {fmt(q['p50_us'])} cpu "
              f"{fmt(q['cpu_s_per_gb'])} (beside, not judged)")
    print()
    w = max(len(x["measure"]) for x in rows) if rows else 10
    print(f"{'layout':<7} {'peer':<9} {'measure':<{w}} {'ratio':>24} {'goal':>7}  met")
    for x in rows:
        print(f"{x['layout']:<7} {x['peer']:<9} {x['measure']:<{w}} {fmt(x['ratio']):>24} "
              f"{x['goal']:>7}  {fmt(x['met']) if x['met'] is not None else '-'}")


def plot_peers(d, pf):
    """DIR/peers.svg: bandwidth per layout (kvferry, Mooncake, NIXL) and
    the 64 B p50/p99."""
    with open(f"{d}/peers.dat", "w") as f:
        f.write("# layout kvferry mooncake nixl (Gb/s; -1 none)\n")
        for name, _ in PEER_LAYOUTS[:-1]:
            r = pick(pf, name, "shown") or {}
            f.write(f'"{name}" ' + " ".join(str(pick(r, w, "gbit_per_s") or -1)
                                            for w in ("kvferry",) + PEERS) + "\n")
    with open(f"{d}/peers-lat.dat", "w") as f:
        f.write("# percentile kvferry mooncake nixl (64 B, us; -1 none)\n")
        r = pick(pf, "lat64", "shown") or {}
        for m in ("p50_us", "p99_us"):
            f.write(f'"{m[:3]}" ' + " ".join(str(pick(r, w, m) or -1)
                                           for w in ("kvferry",) + PEERS) + "\n")
    gp = f"""set terminal svg size 900,420 dynamic background rgb 'white'
set output '{d}/peers.svg'
set datafile missing '-1'
set multiplot layout 1,2 title 'kvferry, Mooncake TE and NIXL (UCX) on the same two soft-RoCE devices, one guest'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key below horizontal
set ylabel 'Gb/s'
set yrange [0:*]
set title 'bandwidth per layout'
plot '{d}/peers.dat' u ($2<0?0:$2):xtic(1) t 'kvferry', '' u ($3<0?0:$3) t 'Mooncake TE', \
     '' u ($4<0?0:$4) t 'NIXL'
set ylabel 'microseconds'
set logscale y
set yrange [*:*]
set title '64 B, one room in flight: send -> seen (us)'
plot '{d}/peers-lat.dat' u ($2<0?1/0:$2):xtic(1) t 'kvferry', '' u ($3<0?1/0:$3) t 'Mooncake TE', \
     '' u ($4<0?1/0:$4) t 'NIXL'
unset multiplot
"""
    with open(f"{d}/peers.gp", "w") as f:
        f.write(gp)
    if shutil.which("gnuplot"):
        subprocess.run(["gnuplot", f"{d}/peers.gp"], check=False)


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "build/bench-compare"
    res = raw_figures(f"{d}/raw")
    res["env"] = read(f"{d}/raw/env.txt").strip().splitlines()
    res["goals"] = goals(res)
    print_raw(res)
    print()
    print_goals(res["goals"])
    five = five_summary(res["goals"])
    if five:
        res["five_16k_summary"] = five
        print(five)
    pf = peers_figures(f"{d}/raw")
    if pf:
        res["peers"] = pf
        res["peers_goals"] = peers_goals(pf)
        res["peers_versions"] = read(f"{d}/peers-freeze.txt").split()  # name==version, pip list
        print()
        print_peers(pf, res["peers_goals"])
        plot_peers(d, pf)
    with open(f"{d}/results.json", "w") as f:
        json.dump(res, f, indent=1, default=str)
    plot(d, res)
    print(f"JSON: {d}/results.json; plots: {d}/bandwidth.svg {d}/latency.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
