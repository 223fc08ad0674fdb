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
/query_dp_ranks, GET /health.

Authentication: with KVFERRY_BOOTSTRAP_TOKEN set (in the prefill's and the
decode's environment alike), every route of KVFerryBootstrapServer wants
"Authorization: Bearer <token>", checked in constant time; a request
without it or with another token gets 401, counted (server.refused) and
logged. The client below sends it. SGLang 0.5.18's CommonKVBootstrapServer
takes no token, so with one set KVFerryBootstrapServer runs even where
SGLang imports (docs/sglang.md, "The bootstrap server"). The token is not
rdma.auth_token: that one never travels, and this one crosses the network
in every request."""
from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
import os
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
TOKEN_ENV = "KVFERRY_BOOTSTRAP_TOKEN"
MIN_TOKEN = 16  # shorter ones are taken, with a warning: they can be guessed


class BootstrapError(Exception):
    """A bootstrap request that got no usable answer (the text says which)."""


class BootstrapRefused(BootstrapError):
    """The bootstrap server refused our bearer token (401): retrying cannot
    help until the two sides' KVFERRY_BOOTSTRAP_TOKEN agree."""


def check_token(token: str, what: str = TOKEN_ENV) -> str:
    """token, if an Authorization header can carry it (visible ASCII, no
    space); else ValueError naming what was wrong."""
    bad = [c for c in token if not 0x21 <= ord(c) <= 0x7E]
    if bad:
        raise ValueError(f"{what}: the bootstrap token must be visible ASCII without spaces "
                         f"(it travels in an Authorization header); found {bad[0]!r}")
    return token


def bootstrap_token() -> Optional[str]:
    """KVFERRY_BOOTSTRAP_TOKEN from the environment; None when unset or empty."""
    token = os.environ.get(TOKEN_ENV, "")
    return check_token(token) if token else None


def _call(method: str, url: str, body: Optional[dict] = None) -> Tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    token = bootstrap_token()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        if e.code == 401:
            raise BootstrapRefused(
                f"{method} {url}: refused by the bootstrap server (401 {e.read()[:200]!r}): "
                f"{TOKEN_ENV} is {'not set here' if not token else 'not the server one'}"
            ) from None
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


class _Gate:
    """The bearer-token check every route passes (none without a token).
    Compared as SHA-256 digests with hmac.compare_digest: constant time, and
    the lengths do not show either. Refusals are counted per reason and
    logged, at most one line a second (a scanner must not flood the log)."""

    def __init__(self, token: Optional[str]):
        if token and len(token) < MIN_TOKEN:
            log.warning("bootstrap: the bearer token is %d characters; use %d or more "
                        "(e.g. 32 random bytes in hex)", len(token), MIN_TOKEN)
        self.want = hashlib.sha256(token.encode()).digest() if token else None
        self.refused = {"missing": 0, "wrong": 0}
        self._lock = threading.Lock()
        self._logged_at = 0.0
        self._unlogged = 0

    def verdict(self, header: Optional[str]) -> Optional[str]:
        """None: let it through; else why not ("missing" or "wrong")."""
        if self.want is None:
            return None
        scheme, _, got = (header or "").strip().partition(" ")
        if not header:
            return "missing"
        if scheme.lower() != "bearer":
            return "wrong"
        ok = hmac.compare_digest(hashlib.sha256(got.strip().encode()).digest(), self.want)
        return None if ok else "wrong"

    def count(self, why: str, method: str, path: str, client: str) -> None:
        with self._lock:
            self.refused[why] += 1
            now = time.monotonic()
            if now - self._logged_at < 1.0:
                self._unlogged += 1
                return
            more, self._unlogged, self._logged_at = self._unlogged, 0, now
            total = sum(self.refused.values())
        log.warning("bootstrap: refused %s %s from %s: %s bearer token (%d refused in all%s)",
                    method, path, client, "no" if why == "missing" else "a wrong", total,
                    f"; {more} more not logged" if more else "")


class _Handler(BaseHTTPRequestHandler):
    """KVFerryBootstrapServer's routes; srv is set per server (_handler)."""

    srv: "KVFerryBootstrapServer"

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

    def _refused(self) -> bool:
        """Every route: a request without the bearer token is
        answered 401 (its body, up to 64 KiB, read first so the
        client sees the answer rather than a reset)."""
        why = self.srv.gate.verdict(self.headers.get("Authorization"))
        if why is None:
            return False
        path = urllib.parse.urlparse(self.path).path
        self.srv.gate.count(why, self.command, path, self.client_address[0])
        try:
            n = int(self.headers.get("Content-Length", 0) or 0)
        except ValueError:
            n = 0
        if 0 < n <= 65536:
            self.rfile.read(n)
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Bearer realm="kvferry-bootstrap"')
        raw = f"bootstrap: {why} bearer token ({TOKEN_ENV})".encode()
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(raw)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(raw)
        return True

    def do_PUT(self) -> None:  # noqa: N802 - http.server's names
        if self._refused():
            return
        if urllib.parse.urlparse(self.path).path != "/route":
            return self._reply(404, "Not Found")
        try:
            with self.srv._lock:
                key = _register(self.srv.table, self._body())
        except (ValueError, KeyError, TypeError) as e:
            return self._reply(400, f"bad registration: {e!r}")
        log.info("bootstrap: prefill DP%d CP%d TP%d PP%d registered", *key)
        self._reply(200, "OK")

    def do_GET(self) -> None:  # noqa: N802
        if self._refused():
            return
        u = urllib.parse.urlparse(self.path)
        if u.path == "/health":
            return self._reply(200, "OK")
        if u.path != "/route":
            return self._reply(404, "Not Found")
        self._reply(*self.srv.route_get(urllib.parse.parse_qs(u.query)))

    def do_POST(self) -> None:  # noqa: N802
        if self._refused():
            return
        path = urllib.parse.urlparse(self.path).path
        try:
            d = self._body()
            if path == "/register_dp_rank":
                with self.srv._lock:
                    self.srv.table.room_dp[int(d["bootstrap_room"])] = (int(d["dp_rank"]),
                                                                   time.time())
                return self._reply(200, "OK")
            if path == "/query_dp_ranks":
                with self.srv._lock:
                    got = {str(int(r)): self.srv.table.room_dp[int(r)][0]
                           for r in d["bootstrap_rooms"] if int(r) in self.srv.table.room_dp}
                return self._reply(200, got)
        except (ValueError, KeyError, TypeError) as e:
            return self._reply(400, f"bad request: {e!r}")
        self._reply(404, "Not Found")


class KVFerryBootstrapServer(BaseKVBootstrapServer):
    """SGLang's bootstrap routes, for where SGLang's own server is not
    importable, or where a bootstrap token is set (SGLang's server takes
    none). An HTTP server in a thread of the prefill's process. token: the
    bearer token every route wants; None reads KVFERRY_BOOTSTRAP_TOKEN, ""
    is none."""

    def __init__(self, host: str, port: int, token: Optional[str] = None):
        token = bootstrap_token() if token is None else (check_token(token, "token") or None)
        self.gate = _Gate(token)
        self.table = _Table()
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer((host, int(port)), self._handler())
        self.host, self.port = host, self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       name="kvferry-bootstrap", daemon=True)
        self.thread.start()

    def _handler(self) -> type:
        return type("Handler", (_Handler,), {"srv": self})

    def route_get(self, q: Dict[str, list]) -> Tuple[int, Any]:
        """GET /route: (code, body), as SGLang's server answers."""
        names = ("prefill_dp_rank", "prefill_cp_rank", "target_tp_rank", "target_pp_rank")
        try:
            dp, cp, tp, pp = (int(q[n][0]) for n in names)
        except (KeyError, ValueError, IndexError):
            return 400, "Missing inputs for bootstrap server."
        with self._lock:
            t = self.table
            if not t.ready():
                return 503, (f"Prefill server not fully registered yet ({len(t.ranks)} "
                             "workers registered).")
            key = (dp, cp, tp, pp)
            if key == (-1, -1, -1, -1):
                return 200, {f: t.layout[f] for f in INFO_FIELDS}
            info = t.ranks.get(key)
        if info is None:
            return 404, ("Bootstrap info not found for dp_rank={} cp_rank={} tp_rank={} "
                         "pp_rank={}".format(*key))
        return 200, info

    @property
    def refused(self) -> Dict[str, int]:
        """Requests refused for their bearer token, per reason (missing, wrong)."""
        return dict(self.gate.refused)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


def bootstrap_server_class() -> type:
    """SGLang's CommonKVBootstrapServer where SGLang imports and no bootstrap
    token is set, else ours: SGLang 0.5.18's server has no token option
    (CommonKVBootstrapServer(host, port), no check on any route), so a
    token is kept only by KVFerryBootstrapServer."""
    if bootstrap_token() is not None:
        return KVFerryBootstrapServer
    try:
        from sglang.srt.disaggregation.common.conn import CommonKVBootstrapServer  # type: ignore
    except ImportError:
        return KVFerryBootstrapServer
    return CommonKVBootstrapServer
