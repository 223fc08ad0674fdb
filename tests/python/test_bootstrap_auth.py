# SPDX-License-Identifier: Apache-2.0
"""The bootstrap routes authenticated (issue 43): with KVFERRY_BOOTSTRAP_TOKEN
set, KVFerryBootstrapServer wants "Authorization: Bearer <token>" on every
route, compared in constant time; a request without it or with another one
is refused (401), counted and logged; the client sends it; a decode whose
token is refused fails its requests at once, naming the reason."""
import hmac
import json
import logging
import time
import urllib.error
import urllib.request

import pytest

from kvferry import sglang as ks
from kvferry.sglang import bootstrap as bs

from test_sglang import Args, registration

TOKEN = "0123456789abcdef0123456789abcdef"
ROUTES = [("PUT", "/route", registration()),
          ("GET", "/route?prefill_dp_rank=-1&prefill_cp_rank=-1&target_tp_rank=-1"
                  "&target_pp_rank=-1", None),
          ("GET", "/health", None),
          ("POST", "/register_dp_rank", {"bootstrap_room": 77, "dp_rank": 0}),
          ("POST", "/query_dp_ranks", {"bootstrap_rooms": [77]}),
          ("GET", "/no-such-route", None)]


@pytest.fixture
def server(monkeypatch):
    monkeypatch.delenv(bs.TOKEN_ENV, raising=False)
    srv = ks.KVFerryBootstrapServer("127.0.0.1", 0, token=TOKEN)
    yield srv
    srv.close()


def http(method, url, body=None, auth=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if auth is not None:
        req.add_header("Authorization", auth)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.mark.parametrize("method,path,body", ROUTES)
def test_every_route_refuses_a_missing_or_wrong_token(server, method, path, body, caplog):
    base = f"http://127.0.0.1:{server.port}"
    caplog.set_level(logging.WARNING, logger="kvferry.sglang")
    for auth, why in [(None, "missing"), ("Bearer " + TOKEN[:-1] + "0", "wrong"),
                      ("Bearer " + TOKEN + "x", "wrong"), ("Basic " + TOKEN, "wrong"),
                      ("Bearer", "wrong")]:
        code, text = http(method, base + path, body, auth)
        assert code == 401, (auth, code, text)
        assert why.encode() in text and bs.TOKEN_ENV.encode() in text
    assert server.refused == {"missing": 1, "wrong": 4}
    # logged (one line a second at most), never the token itself
    lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert lines and f"{method} {path.split('?')[0]} from 127.0.0.1" in lines[0], lines
    assert all(TOKEN not in ln for ln in lines)
    assert server.table.layout == {} and server.table.room_dp == {}, "nothing was taken"


def test_the_right_token_passes_every_route(server):
    base = f"http://127.0.0.1:{server.port}"
    auth = "Bearer " + TOKEN
    assert http("PUT", base + "/route", registration(), auth)[0] == 200
    assert http("GET", base + ROUTES[1][1], auth=auth)[0] == 200
    assert http("GET", base + "/health", auth=auth) == (200, b"OK")
    assert http("POST", base + "/register_dp_rank", ROUTES[3][2], auth)[0] == 200
    assert http("POST", base + "/query_dp_ranks", ROUTES[4][2], auth) == (200, b'{"77": 0}')
    assert http("GET", base + "/no-such-route", auth=auth)[0] == 404
    assert server.refused == {"missing": 0, "wrong": 0}


def test_compared_in_constant_time(server, monkeypatch):
    calls, real = [], hmac.compare_digest

    def spy(a, b):
        calls.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(bs.hmac, "compare_digest", spy)
    base = f"http://127.0.0.1:{server.port}"
    http("GET", base + "/health", auth="Bearer short")
    http("GET", base + "/health", auth="Bearer " + TOKEN)
    assert calls == [(32, 32), (32, 32)], "digests of equal length, whatever was sent"


def test_the_client_sends_the_token_from_the_environment(server, monkeypatch):
    addr = f"127.0.0.1:{server.port}"
    monkeypatch.setenv(bs.TOKEN_ENV, TOKEN)
    bs.put_route(addr, registration())
    assert bs.get_route(addr, -1, -1, -1, -1)["attn_tp_size"] == 1
    monkeypatch.setenv(bs.TOKEN_ENV, "another-token-of-32-characters!!")
    with pytest.raises(bs.BootstrapRefused, match="401.*KVFERRY_BOOTSTRAP_TOKEN is not the server"):
        bs.get_route(addr, -1, -1, -1, -1)
    monkeypatch.delenv(bs.TOKEN_ENV)
    with pytest.raises(bs.BootstrapRefused, match="KVFERRY_BOOTSTRAP_TOKEN is not set here"):
        bs.register_dp_rank(addr, 5, 0)


def test_a_token_a_header_cannot_carry_is_refused_by_name(monkeypatch):
    monkeypatch.setenv(bs.TOKEN_ENV, "has space")
    with pytest.raises(ValueError, match="KVFERRY_BOOTSTRAP_TOKEN.*visible ASCII"):
        bs.bootstrap_token()
    with pytest.raises(ValueError, match="token: .*visible ASCII"):
        ks.KVFerryBootstrapServer("127.0.0.1", 0, token="t\u00e9st-token-long-enough")


def test_with_a_token_kvferrys_server_runs(monkeypatch):
    """SGLang 0.5.18's CommonKVBootstrapServer takes no token: with one set,
    kvferry's server is the one SGLang starts (KVBootstrapServer)."""
    monkeypatch.setenv(bs.TOKEN_ENV, TOKEN)
    assert ks.bootstrap_server_class() is ks.KVFerryBootstrapServer
    srv = ks.KVBootstrapServer("127.0.0.1", 0)
    try:
        assert http("GET", f"http://127.0.0.1:{srv.port}/health")[0] == 401
    finally:
        srv.close()


@pytest.mark.parametrize("token", [None, "another-token-of-32-characters!!"])
def test_a_refused_decode_fails_its_requests_at_once_with_the_reason(server, monkeypatch, token):
    """SGLang's prealloc queue asks for the layout (try_ensure_parallel_info)
    and then polls its receivers: a refusal fails every receiver waiting on
    that server in the same turn, with the reason, not after SGLang's
    retries ("aborted before bootstrap") or a deadline."""
    addr = f"127.0.0.1:{server.port}"
    monkeypatch.setenv(bs.TOKEN_ENV, TOKEN)
    bs.put_route(addr, registration())  # the prefill has the token
    if token is None:
        monkeypatch.delenv(bs.TOKEN_ENV)
    else:
        monkeypatch.setenv(bs.TOKEN_ENV, token)
    m = ks.KVFerryKVManager(Args(), "decode", None, overrides=[])
    try:
        rs = [ks.KVReceiver(m, addr, room) for room in (7, 8)]
        other = ks.KVReceiver(m, "127.0.0.1:1", 9)  # another prefill: not touched
        assert all(r.poll() == ks.KVPoll.Bootstrapping for r in rs)
        t0 = time.monotonic()
        assert not m.try_ensure_parallel_info(addr)
        for r in rs:
            assert r.poll() == ks.KVPoll.Failed and r.conclude_state == ks.KVPoll.Failed
            with pytest.raises(ks.KVTransferError, match="refused by the bootstrap server \\(401"):
                r.failure_exception()
            r.init(0)  # what SGLang calls next: nothing more happens
            r.clear()
        assert time.monotonic() - t0 < 5
        assert other.poll() == ks.KVPoll.Bootstrapping
        assert server.refused["missing" if token is None else "wrong"] == 1
        # the right token: the same decode finds the layout
        monkeypatch.setenv(bs.TOKEN_ENV, TOKEN)
        assert m.try_ensure_parallel_info(addr)
    finally:
        m.close()


def test_a_refused_prefill_does_not_retry(server, monkeypatch):
    """register_to_bootstrap retries a server that is not up yet, not one
    that refused the token: it raises at once, naming the variable."""
    monkeypatch.setenv(bs.TOKEN_ENV, "another-token-of-32-characters!!")

    class SA:
        host, disaggregation_bootstrap_port = "127.0.0.1", server.port
        tp_size = pp_size = dp_size = 1
        enable_dp_attention = False

    m = ks.KVFerryKVManager(Args(), "prefill", None, overrides=[])
    try:
        m.server_args = SA()
        m.registration = registration
        t0 = time.monotonic()
        with pytest.raises(bs.BootstrapRefused, match="KVFERRY_BOOTSTRAP_TOKEN"):
            m.register_to_bootstrap()
        assert time.monotonic() - t0 < 1.0 and server.refused["wrong"] == 1
    finally:
        m.close()
