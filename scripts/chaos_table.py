#!/usr/bin/python3
"""The table, total line and JSON of scripts/chaos.sh, from the raw output of
tests/rxe/scenarios/chaos.sh ("chaos:" and "chaos-sample:" lines).

    chaos_table.py [--json] [--soak N] RAW

Exit 1 when a side has a pinned room, a wrong byte, a leak, did not finish
(a side killed on purpose excepted), a scenario printed no line, or (soak)
memory or fds did not stay flat; 0 otherwise.
"""
import json
import re
import sys

# Soak flatness, first sample past 10,000 rooms to the last: fds exactly,
# heap bytes in use (main arena, and every arena where the driver printed
# heap_all) and RSS within these (rooms in flight at the moment of a sample
# hold a few KiB each). The RSS checked is rss_trim_kb where printed: RSS
# after malloc_trim(0), as glibc keeps a thread arena's freed pages as it
# likes (RSS alone wandered by 20-30 MB with every heap flat); and no more
# mappings (a QP or buffer never unmapped). Samples taken while a connection
# was being remade are left out of the comparison (steady() says why).
HEAP_SLACK = 512 * 1024
# Heap an engine may leave after close (tests/rxe/scenarios/chaos.sh says why).
LEAK_SLACK = 65536
RSS_SLACK_KB = 4096
# malloc's own mmapped chunks come and go by a few; a QP's queues are 2-3.
MAPS_SLACK = 4


def fields(line):
    return dict(re.findall(r'(\w+)=(\S+)', line))


def num(v, cast=int):
    try:
        return cast(v)
    except (TypeError, ValueError):
        return None


def parse(path):
    rows, samples, times = [], [], {}
    with open(path, errors='replace') as f:
        for line in f:
            line = line.strip()
            if line.startswith('chaos: scenario='):
                rows.append(fields(line))
            elif line.startswith('chaos-sample: '):
                samples.append(fields(line))
            elif line.startswith('chaos-time: '):
                d = fields(line)
                times[d['scenario']] = num(d.get('seconds'), float)
    return rows, samples, times


def row_ok(r):
    if r.get('status') == 'killed' and r['scenario'] == 'peer_kill' and r['side'] == 'prefill':
        return True
    # leak_ours: bytes kvf_driver (kvferry) still held after close, by the
    # preloaded shim's account; any is a leak. The libraries' (leak_named)
    # are their one-time state, bounded by LEAK_SLACK with the rest.
    return (r.get('status') == 'done' and r.get('pinned') == '0' and r.get('bad_words') == '0'
            and r.get('leak_fds') == '0' and (num(r.get('leak_heap')) or 0) <= LEAK_SLACK
            and r.get('leak_ours') == '0' and (num(r.get('leak_total')) or 0) <= LEAK_SLACK)


def steady(ss):
    """The samples to compare: those taken with the side's usual number of
    connections holding buffers (conns, where printed). A sample taken while
    a connection is remade holds a second set of frame buffers (megabytes,
    given back when the old one drains): not growth."""
    held = [s.get('conns') for s in ss if num(s['rooms']) >= 10000]
    if None in held or not held:
        return ss
    usual = max(set(held), key=held.count)
    return [s for s in ss if s['conns'] == usual]


def flat(samples):
    """Per side: first sample past 10,000 rooms vs the last (both with the
    usual connections held); problems."""
    out, bad = [], []
    for side in sorted({s['side'] for s in samples}):
        every = [s for s in samples if s['side'] == side]
        ss = steady(every)
        first = next((s for s in ss if num(s['rooms']) >= 10000), None)
        last = ss[-1] if ss else None
        if not first or first is last:
            bad.append(f'{side}: fewer than two samples past 10,000 rooms')
            continue
        if num(last['rooms']) < 0.8 * num(every[-1]['rooms']):
            bad.append(f"{side}: no steady sample in the last fifth (last {last['rooms']})")
            continue
        keys = [k for k in ('fds', 'heap', 'heap_all', 'rss_kb', 'rss_trim_kb', 'anon_kb',
                            'file_kb', 'maps') if k in first and k in last]
        d = {k: num(last[k]) - num(first[k]) for k in keys}
        out.append({'side': side, 'first': first, 'last': last, 'delta': d})
        rss = d.get('rss_trim_kb', d['rss_kb'])
        if (d['fds'] != 0 or abs(d['heap']) > HEAP_SLACK
                or abs(d.get('heap_all', 0)) > HEAP_SLACK or abs(rss) > RSS_SLACK_KB
                or d.get('maps', 0) > MAPS_SLACK):
            bad.append(f'{side}: not flat: {d}')
    return out, bad


def table(rows, times, out):
    hdr = ('scenario', 'side', 'rooms', 'SUCCESS', 'FAILED', 'pinned', 'worst_late_s',
           'worst_life_s', 'bad_bytes', 'leak_fds', 'leak_heap', 'leak_ours', 'status', 'secs',
           'failed by reason', 'faults injected')
    lines = [hdr]
    for r in rows:
        bw = num(r.get('bad_words'))
        lines.append((r['scenario'], r['side'], r.get('rooms', '?'), r.get('ok', '-'),
                      r.get('failed', '-'), r.get('pinned', '-'), r.get('worst_late', '-'),
                      r.get('worst_life', '-'),
                      str(bw * 8) if bw is not None else '-', r.get('leak_fds', '-'),
                      r.get('leak_heap', '-'), r.get('leak_ours', '-'), r.get('status', '?'),
                      f"{times.get(r['scenario']) or '-'}", r.get('reasons', '-'),
                      ','.join(f for f in r.get('faults', '-').split(',')
                               if not f.endswith(':0')) or '-'))
    w = [max(len(str(l[i])) for l in lines) for i in range(len(hdr) - 2)]
    for l in lines:
        print('  '.join(str(c).ljust(w[i]) for i, c in enumerate(l[:-2])), l[-2], l[-1],
              file=out)


def main(argv):
    as_json = '--json' in argv
    soak = 0
    if '--soak' in argv:
        soak = int(argv[argv.index('--soak') + 1])
    path = argv[-1]
    rows, samples, times = parse(path)
    out = sys.stderr if as_json else sys.stdout
    problems = [f"{r['scenario']}/{r['side']}" for r in rows if not row_ok(r)]
    if not rows:
        problems.append('no scenario printed a result line')
    table(rows, times, out)
    tot = {k: sum(num(r.get(k)) or 0 for r in rows)
           for k in ('ok', 'failed', 'pinned', 'bad_words', 'leak_fds', 'leak_heap', 'leak_ours',
                     'leak_total')}
    tot['rooms'] = sum(num(r.get('created')) or 0 for r in rows)
    worst = max((num(r.get('worst_late'), float) or 0 for r in rows), default=0)
    print(f"total: {len(rows)} rows, rooms created {tot['rooms']}, SUCCESS {tot['ok']}, "
          f"FAILED {tot['failed']}, pinned {tot['pinned']}, worst late {worst:.3f} s, "
          f"bad bytes {tot['bad_words'] * 8}, leaked fds {tot['leak_fds']}, "
          f"leaked heap bytes {tot['leak_heap']} (main arena), after close by the shim: "
          f"{tot['leak_total']} bytes, kvferry's {tot['leak_ours']}", file=out)
    named = {}
    for r in rows:
        for kv in (r.get('leak_named') or '-').split(','):
            if ':' in kv:
                k, v = kv.split(':', 1)
                named[k] = named.get(k, 0) + (num(v) or 0)
    if named:
        print("held after close by library (one-time state, freed at exit): " +
              ", ".join(f"{k} {v}" for k, v in sorted(named.items())), file=out)
    soak_res = None
    if soak:
        for s in samples:
            print(f"sample {s['side']:8} rooms={s['rooms']:>7} rss_kb={s['rss_kb']:>7} "
                  f"rss_trim_kb={s.get('rss_trim_kb', '-'):>7} "
                  f"anon_kb={s.get('anon_kb', '-'):>6} file_kb={s.get('file_kb', '-'):>6} "
                  f"maps={s.get('maps', '-'):>4} conns={s.get('conns', '-'):>2} "
                  f"fds={s['fds']:>3} heap={s['heap']:>9} heap_all={s.get('heap_all', '-'):>9} "
                  f"t={s['t']}", file=out)
        soak_res, bad = flat(samples)
        problems += bad
        for f in soak_res:
            print(f"soak {f['side']}: rooms {f['first']['rooms']} -> {f['last']['rooms']}: "
                  f"delta {f['delta']}", file=out)
    if problems:
        print('chaos: PROBLEMS: ' + '; '.join(problems), file=out)
    if as_json:
        json.dump({'rows': rows, 'total': tot, 'worst_late_s': worst, 'samples': samples,
                   'soak': soak_res, 'seconds': times, 'problems': problems},
                  sys.stdout, indent=1)
        print()
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
