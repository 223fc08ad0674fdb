# SPDX-License-Identifier: Apache-2.0
"""The bootstrap server SGLang starts (KVBootstrapServer) under SGLang's
pinned release (issue 43): without KVFERRY_BOOTSTRAP_TOKEN, SGLang's own
CommonKVBootstrapServer; with one, kvferry's, which checks it on every route,
because SGLang 0.5.18's server has no token option to pass it to."""
import inspect
import urllib.error
import urllib.request

import kvferry.sglang as ks
from kvferry.sglang import bootstrap as bs
from sglang.srt.disaggregation.common.conn import CommonKVBootstrapServer

TOKEN = "0123456789abcdef0123456789abcdef"


def _get(url, token=None):
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_sglangs_server_has_no_token_option():
    """If a later release grows one (upstream PR #39416 proposes a bearer
    token), the same token is to be passed through to it: this fails then."""
    assert list(inspect.signature(CommonKVBootstrapServer.__init__).parameters) == [
        "self", "host", "port"]


def test_without_a_token_sglangs_server_runs(monkeypatch):
    monkeypatch.delenv(bs.TOKEN_ENV, raising=False)
    assert ks.HAVE_SGLANG
    assert ks.bootstrap_server_class() is CommonKVBootstrapServer


def test_with_a_token_kvferrys_server_runs_and_checks_it(monkeypatch):
    monkeypatch.setenv(bs.TOKEN_ENV, TOKEN)
    assert ks.bootstrap_server_class() is ks.KVFerryBootstrapServer
    srv = ks.KVBootstrapServer("127.0.0.1", 0)
    try:
        assert isinstance(srv, ks.KVFerryBootstrapServer)
        base = f"http://127.0.0.1:{srv.port}"
        assert _get(base + "/health") == 401
        assert _get(base + "/health", "wrong") == 401
        assert _get(base + "/health", TOKEN) == 200
        assert srv.refused == {"missing": 1, "wrong": 1}
    finally:
        srv.close()
