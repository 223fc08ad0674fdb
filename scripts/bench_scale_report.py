#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/bench-scale.sh's figures: DIR/raw/N.log -> DIR/scale.json, a
table on stdout and DIR/scale.svg (memory per peer and setup time against
the number of peers).

    bench_scale_report.py DIR
"""
import json
import os
import re
import sys


def parse(path):
    """The scale: line of one run, as numbers, and whether it passed."""
    text = open(path).read()
    m = re.search(r"^scale: (.*)$", text, re.M)
    if not m:
        return None
    row = {}
    for k, v in re.findall(r"(\w+)=(\S+)", m.group(1)):
        try:
            row[k] = float(v)
        except ValueError:
            row[k] = v  # window=all

    row["passed"] = bool(re.search(r"^PASS", text, re.M))
    return row


def derive(r):
    """Per-connection, per-engine and engine-wide figures of one row (KiB,
    seconds). The prefill's are per connection (each QP is one to it); the
    decodes' per engine (a decode engine is a rank: its frames and engine
    are its own)."""
    e, c = r["engines"], r["conns"]
    return {
        "connections": int(c), "decode_engines": int(e), "qps_per_peer": int(r["qps"]),
        "passed": r["passed"],
        "prefill_fixed_frame_kib": r["prefill_frame_kb"],
        "prefill_pinned_kib_per_conn": (r["prefill_pin_kb"] - r["prefill_pin0_kb"]) / c,
        "prefill_rss_kib_per_conn": (r["prefill_rss_kb"] - r["prefill_rss0_kb"]) / c,
        "decode_pinned_kib_per_engine": (r["decode_pin_kb"] - r["decode_pin0_kb"]) / e,
        "decode_rss_kib_per_engine": (r["decode_rss_kb"] - r["decode_rss0_kb"]) / e,
        "setup_s": r["setup_s"], "setup_ms_per_conn": 1000 * r["setup_s"] / c,
        # a decode engine's open to its room's SUCCESS: its connection's setup
        "engine_setup_p50_s": r.get("lat_p50_s"), "engine_setup_max_s": r.get("lat_max_s"),
        "window": r.get("window"),
    }


def svg(rows, path):
    """Two panels, log2 x: KiB per peer (prefill pinned, RSS), setup s."""
    w, h, pad = 720, 300, 50
    xs = [r["connections"] for r in rows]
    if not xs:
        return
    import math
    lx = [math.log2(x) for x in xs]
    x0, x1 = min(lx), max(lx) if max(lx) > min(lx) else min(lx) + 1

    def px(x):
        return pad + (math.log2(x) - x0) / (x1 - x0) * (w / 2 - 2 * pad)

    def panel(off, series, title, unit):
        top = max([v for _, vals, _ in series for v in vals] + [1e-9])
        out = [f'<g transform="translate({off},0)">',
               f'<text x="{w / 4}" y="20" text-anchor="middle" font-size="13">{title}</text>',
               f'<line x1="{pad}" y1="{h - pad}" x2="{w / 2 - pad}" y2="{h - pad}" stroke="black"/>',
               f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>',
               f'<text x="{pad - 4}" y="{pad + 4}" text-anchor="end" font-size="10">{top:.0f}</text>',
               f'<text x="{pad - 4}" y="{h - pad}" text-anchor="end" font-size="10">0 {unit}</text>']
        for x in xs:
            out.append(f'<text x="{px(x)}" y="{h - pad + 14}" text-anchor="middle" '
                       f'font-size="10">{x}</text>')
        out.append(f'<text x="{w / 4}" y="{h - 12}" text-anchor="middle" font-size="11">'
                   'connections to the prefill</text>')
        for k, (name, vals, color) in enumerate(series):
            pts = " ".join(f"{px(x)},{h - pad - v / top * (h - 2 * pad)}" for x, v in zip(xs, vals))
            out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
            out.append(f'<text x="{pad + 6}" y="{pad + 14 * (k + 1)}" font-size="10" '
                       f'fill="{color}">{name}</text>')
        out.append("</g>")
        return out

    body = panel(0, [("prefill pinned KiB/connection", [r["prefill_pinned_kib_per_conn"] for r in rows], "#c33"),
                     ("prefill RSS KiB/connection", [r["prefill_rss_kib_per_conn"] for r in rows], "#36c")],
                 "prefill memory per connection", "KiB")
    body += panel(w / 2, [("every room SUCCESS, s", [r["setup_s"] for r in rows], "#393"),
                          ("slowest decode engine, s", [r["engine_setup_max_s"] or 0 for r in rows], "#c93")],
                  "setup: prefill start to the last room", "s")
    with open(path, "w") as f:
        f.write(f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}">\n')
        f.write("\n".join(body) + "\n</svg>\n")


def main():
    d = sys.argv[1]
    raw = os.path.join(d, "raw")
    rows = []
    for name in sorted(os.listdir(raw), key=lambda s: int(s.split(".")[0])):
        r = parse(os.path.join(raw, name))
        if r:
            rows.append(derive(r))
    print(f"{'conns':>6} {'engines':>7} {'qps':>4} {'pass':>5} {'p frames KiB':>12} "
          f"{'p pin/conn':>10} {'p rss/conn':>10} {'d pin/eng':>10} {'d rss/eng':>10} "
          f"{'setup s':>8} {'ms/conn':>8} {'eng p50 s':>9} {'eng max s':>9}")
    for r in rows:
        print(f"{r['connections']:>6} {r['decode_engines']:>7} {r['qps_per_peer']:>4} "
              f"{str(r['passed']):>5} {r['prefill_fixed_frame_kib']:>12.0f} "
              f"{r['prefill_pinned_kib_per_conn']:>10.1f} {r['prefill_rss_kib_per_conn']:>10.1f} "
              f"{r['decode_pinned_kib_per_engine']:>10.1f} {r['decode_rss_kib_per_engine']:>10.1f} "
              f"{r['setup_s']:>8.2f} {r['setup_ms_per_conn']:>8.2f} "
              f"{r['engine_setup_p50_s'] or 0:>9.3f} {r['engine_setup_max_s'] or 0:>9.3f}")
    with open(os.path.join(d, "scale.json"), "w") as f:
        json.dump({"rows": rows}, f, indent=1)
    svg(rows, os.path.join(d, "scale.svg"))
    return 0 if rows and all(r["passed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
