# SPDX-License-Identifier: Apache-2.0
"""SGLang's bootstrap protocol, both ends.

A prefill rank files its address under (dp group, cp rank, tp rank, pp rank)
with PUT /route; a decode rank asks GET /route with all four -1 for the
server's layout (SGLang's PrefillServerInfo), then once per prefill rank it
reads from for that rank's address. The address a kvferry rank files is its
engine's RDMA listen address (rank_ip, rank_port): where SGLang's ZMQ
backends file a ZMQ port, the decode's kvferry engine connects.

The server: SGLang's own CommonKVBootstrapServer wherever SGLang imports (so
a kvferry prefill is found by exactly the code SGLang runs), else
KVFerryBootstrapServer below, which answers the same routes with the same
bodies and codes: PUT/GET /route, POST /register_dp_rank, POST
/query_dp_ranks, GET /health."""
from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Optional, Tuple

from ._compat import BaseKVBootstrapServer

log = logging.getLogger("kvferry.sglang")

TIMEOUT_S = 5  # as SGLang's client


class BootstrapError(Exception):
    """A bootstrap request that got no usable answer (the text says which)."""


def _call(method: str, url: str, body: Optional[dict] = None) -> Tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (OSError, ValueError) as e:
        raise BootstrapError(f"{method} {url}: {e}") from e


def put_route(server: str, payload: dict) -> None:
    code, text = _call("PUT", f"http://{server}/route", payload)
    if code != 200:
        raise BootstrapError(f"PUT http://{server}/route: {code} {text[:200]!r}")


def get_route(server: str, dp: int, cp: int, tp: int, pp: int) -> Optional[dict]:
    """The server's layout (all -1) or one rank's {rank_ip, rank_port}; None
    while the prefill is not fully registered (503), raises on other errors."""
    q = urllib.parse.urlencode({"prefill_dp_rank": dp, "prefill_cp_rank": cp,
                                "target_tp_rank": tp, "target_pp_rank": pp})
    code, text = _call("GET", f"http://{server}/route?{q}")
    if code == 503:
        return None
    if code != 200:
        raise BootstrapError(f"GET http://{server}/route?{q}: {code} {text[:200]!r}")
    return json.loads(text)


def register_dp_rank(server: str, room: int, dp_rank: int) -> None:
    code, text = _call("POST", f"http://{server}/register_dp_rank",
                       {"bootstrap_room": int(room), "dp_rank": int(dp_rank)})
    if code != 200:
        raise BootstrapError(f"POST http://{server}/register_dp_rank: {code} {text[:200]!r}")


def query_dp_ranks(server: str, rooms: list) -> Dict[str, int]:
    code, text = _call("POST", f"http://{server}/query_dp_ranks",
                       {"bootstrap_rooms": [int(r) for r in rooms]})
    if code != 200:
        raise BootstrapError(f"POST http://{server}/query_dp_ranks: {code} {text[:200]!r}")
    return json.loads(text)


@dataclasses.dataclass
class _Table:
    """What the server knows: the first registration's layout, the ranks."""

    layout: Dict[str, Any] = dataclasses.field(default_factory=dict)
    ranks: Dict[Tuple[int, int, int, int], Dict[str, Any]] = dataclasses.field(default_factory=dict)
    room_dp: Dict[int, Tuple[int, float]] = dataclasses.field(default_factory=dict)

    def expected(self) -> Optional[int]:
        lay = self.layout
        if not lay:
            return None
        return lay["dp_size"] * lay["attn_cp_size"] * lay["attn_tp_size"] * lay["pp_size"]

    def ready(self) -> bool:
        n = self.expected()
        return n is not None and len(self.ranks) >= n


INFO_FIELDS = ("attn_tp_size", "attn_cp_size", "dp_size", "pp_size", "page_size",
               "kv_cache_dtype", "follow_bootstrap_room", "enable_dsa_cache_layer_split",
               "prefill_http_port")


def _register(t: _Table, d: dict) -> Tuple[int, int, int, int]:
    """A PUT /route body into the table (the first one sets the layout, as in
    SGLang's server); the key it was filed under."""
    if not t.layout:
        sys_dp = int(d["system_dp_size"])
        t.layout = {
            "attn_tp_size": int(d["attn_tp_size"]), "attn_cp_size": int(d["attn_cp_size"]),
            "dp_size": int(d["attn_dp_size"]) if sys_dp == 1 else sys_dp,
            "pp_size": int(d["pp_size"]),
            "page_size": int(d["page_size"]) if d.get("page_size") is not None else None,
            "kv_cache_dtype": d.get("kv_cache_dtype"),
            "follow_bootstrap_room":
                d.get("load_balance_method", "follow_bootstrap_room") == "follow_bootstrap_room",
            "enable_dsa_cache_layer_split": bool(d.get("enable_dsa_cache_layer_split", False)),
            "prefill_http_port": d.get("prefill_http_port"),
        }
    group = int(d["attn_dp_rank"]) if int(d["system_dp_size"]) == 1 else int(d["system_dp_rank"])
    key = (group, int(d["attn_cp_rank"]), int(d["attn_tp_rank"]), int(d["pp_rank"]))
    t.ranks[key] = {"rank_ip": str(d["rank_ip"]), "rank_port": int(d["rank_port"])}
    return key


class KVFerryBootstrapServer(BaseKVBootstrapServer):
    """SGLang's bootstrap routes, for where SGLang's own server is not
    importable (kvferry's tests without SGLang, a non-SGLang prefill). An HTTP
    server in a thread of the prefill's process."""

    def __init__(self, host: str, port: int):
        self.table = _Table()
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer((host, int(port)), self._handler())
        self.host, self.port = host, self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       name="kvferry-bootstrap", daemon=True)
        self.thread.start()

    def _handler(self) -> type:
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt: str, *args: Any) -> None:
                log.debug("bootstrap: " + fmt, *args)

            def _reply(self, code: int, body: Any) -> None:
                raw = (json.dumps(body) if not isinstance(body, str) else body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json" if not isinstance(
                    body, str) else "text/plain")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _body(self) -> Any:
                return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))

            def do_PUT(self) -> None:  # noqa: N802 - http.server's names
                if urllib.parse.urlparse(self.path).path != "/route":
                    return self._reply(404, "Not Found")
                try:
                    with srv._lock:
                        key = _register(srv.table, self._body())
                except (ValueError, KeyError, TypeError) as e:
                    return self._reply(400, f"bad registration: {e!r}")
                log.info("bootstrap: prefill DP%d CP%d TP%d PP%d registered", *key)
                self._reply(200, "OK")

            def do_GET(self) -> None:  # noqa: N802
                u = urllib.parse.urlparse(self.path)
                if u.path == "/health":
                    return self._reply(200, "OK")
                if u.path != "/route":
                    return self._reply(404, "Not Found")
                self._reply(*srv.route_get(urllib.parse.parse_qs(u.query)))

            def do_POST(self) -> None:  # noqa: N802
                path = urllib.parse.urlparse(self.path).path
                try:
                    d = self._body()
                    if path == "/register_dp_rank":
                        with srv._lock:
                            srv.table.room_dp[int(d["bootstrap_room"])] = (int(d["dp_rank"]),
                                                                           time.time())
                        return self._reply(200, "OK")
                    if path == "/query_dp_ranks":
                        with srv._lock:
                            got = {str(int(r)): srv.table.room_dp[int(r)][0]
                                   for r in d["bootstrap_rooms"] if int(r) in srv.table.room_dp}
                        return self._reply(200, got)
                except (ValueError, KeyError, TypeError) as e:
                    return self._reply(400, f"bad request: {e!r}")
                self._reply(404, "Not Found")

        return Handler

    def route_get(self, q: Dict[str, list]) -> Tuple[int, Any]:
        """GET /route: (code, body), as SGLang's server answers."""
        names = ("prefill_dp_rank", "prefill_cp_rank", "target_tp_rank", "target_pp_rank")
        try:
            key = tuple(int(q[n][0]) for n in names)
        except (KeyError, ValueError, IndexError):
            return 400, "Missing inputs for bootstrap server."
        with self._lock:
            t = self.table
            if not t.ready():
                return 503, (f"Prefill server not fully registered yet ({len(t.ranks)} "
                             "workers registered).")
            if key == (-1, -1, -1, -1):
                return 200, {f: t.layout[f] for f in INFO_FIELDS}
            info = t.ranks.get(key)
        if info is None:
            return 404, ("Bootstrap info not found for dp_rank={} cp_rank={} tp_rank={} "
                         "pp_rank={}".format(*key))
        return 200, info

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


def bootstrap_server_class() -> type:
    """SGLang's CommonKVBootstrapServer where SGLang imports, else ours."""
    try:
        from sglang.srt.disaggregation.common.conn import CommonKVBootstrapServer  # type: ignore
    except ImportError:
        return KVFerryBootstrapServer
    return CommonKVBootstrapServer
