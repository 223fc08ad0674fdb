#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""tools/kvferry-stat against a real endpoint: metrics_serve (an engine on
the fake transport with rooms in known states, libmicrohttpd on loopback).

  test_kvferry_stat.py METRICS_SERVE KVFERRY_STAT
"""
import subprocess
import sys

serve, tool = sys.argv[1], sys.argv[2]
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok {name}")
    else:
        failed += 1
        print(f"FAIL {name}\n{detail}")


def stat(*args):
    p = subprocess.run([sys.executable, tool, "--url", url, *args], capture_output=True,
                       text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


srv = subprocess.Popen([serve], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
try:
    line = srv.stdout.readline().split()
    assert line[0] == "port", line
    url = f"http://127.0.0.1:{line[1]}"

    rc, out, err = stat()
    lines = out.splitlines()
    check("rooms exits 0", rc == 0, err)
    check("rooms: header", lines[0].startswith("engine kvferry: 5 of 5 live rooms shown"), out)
    check("rooms: columns", lines[1].split()[:6] == ["ID", "ROLE", "STATE", "AGE", "DEADLINE",
                                                   "LEFT"], out)
    ids = [ln.split()[0] for ln in lines[2:]]
    check("rooms: oldest first", ids == ["0xd1", "0x21", "0xb1", "0x22", "0x31"], out)
    check("rooms: failure with its deadline key",
          "deadline (deadlines.bootstrap_s): bootstrap deadline" in lines[2], out)
    f = lines[3].split()
    check("rooms: the inflight deadline and time left", f[4] == "deadlines.inflight_s"
          and f[5].endswith("s") and 280 < float(f[5][:-1]) < 300, out)
    check("rooms: quiescence only for terminal rooms", f[9] == "-"
          and lines[2].split()[9] == "yes", out)

    rc, out, err = stat("--state", "transferring")
    check("filter by state", rc == 0 and len(out.splitlines()) == 3 and "0x21" in out, out + err)
    rc, out, err = stat("--role", "receiver", "--min-age", "0.5")
    check("filter by role and age", rc == 0 and len(out.splitlines()) == 3 and "0x31" in out,
          out + err)

    rc, out, err = stat("--summary")
    rows = {ln.split()[0]: ln.split()[1:] for ln in out.splitlines()[1:6]}
    check("summary exits 0", rc == 0, err)
    check("summary per state", rows.get("TRANSFERRING") == ["1", "0", "1"]
          and rows.get("SUCCESS") == ["1", "0", "1"] and rows.get("FAILED") == ["1", "0", "1"]
          and rows.get("WAITING_FOR_INPUT") == ["0", "1", "1"], out)
    check("summary inflight and failures", "inflight 1," in out
          and "failures: sender deadline=1" in out, out)

    rc, out, err = stat("--summary", "--watch", "0.1", "--count", "3")
    check("watch repeats", rc == 0 and out.count("STATE") == 3, out + err)
finally:
    srv.stdin.close()
    srv.wait(timeout=30)

url = f"http://127.0.0.1:{line[1]}"  # the server is gone now
rc, out, err = stat()
check("a dead endpoint is exit 1 with the reason", rc == 1 and "kvferry-stat:" in err
      and "/rooms" in err, err)
rc, out, err = stat("--state", "nope")
check("a bad state is a usage error", rc == 2, err)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
