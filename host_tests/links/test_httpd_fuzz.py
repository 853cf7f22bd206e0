# Random request heads and bodies: the parser only ever refuses with an HttpError, and the server always answers and lives on.
import json
import socket
import time

from hypothesis import given, settings, strategies as st

from master.links import httpd
from master.links import mcp
from test_httpd import raw_exchange, request, status_of
from fake_body import FakeBody, ServerThread

KNOWN = sorted(httpd.REASONS)
TOKENS = [b"GET", b"POST", b" ", b"/", b"/mcp", b"/plan", b"HTTP/1.1", b"\r\n", b":", b"Host",
          b"Content-Length", b"0", b"5", b"-1", b"\x00", b"\xff", b"\t", b"?", b"%"]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(TOKENS) | st.binary(max_size=8), max_size=30))
def test_parse_head_refuses_only_with_http_errors(parts):
    head = b"".join(parts)
    try:
        method, path, query, headers = httpd.parse_head(head)
    except httpd.HttpError as e:
        assert e.status in (400, 431) and e.reason, (head, e.status)
        return
    assert path.startswith("/") and isinstance(headers, dict), (head, path)


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                    max_leaves=12))  # fmt: skip
def test_mcp_answers_any_json_with_jsonrpc(msg):
    import asyncio

    class Req:
        headers = {}

    Req.json = msg
    srv = mcp.McpServer(FakeBody())
    code, out, _ = asyncio.run(srv.handle(Req()))
    assert code in (200, 202, 400), (msg, code)
    if out is not None:
        json.dumps(out)
        for r in out if isinstance(out, list) else [out]:
            assert r["jsonrpc"] == "2.0" and ("result" in r or "error" in r), r


def _send_and_shut(port, data):
    k = socket.create_connection(("127.0.0.1", port), timeout=5)
    k.sendall(data)
    k.shutdown(socket.SHUT_WR)
    out = b""
    try:
        while True:
            chunk = k.recv(4096)
            if not chunk:
                break
            out += chunk
    except ConnectionResetError:
        pass
    k.close()
    return out


def test_server_answers_random_requests_and_lives_on():
    import random

    rnd = random.Random(7)
    s = ServerThread({"header_timeout_ms": 500, "body_timeout_ms": 500})
    try:
        answered = 0
        for i in range(120):
            parts = [rnd.choice(TOKENS) for _ in range(rnd.randint(1, 25))]
            data = b"".join(parts) + rnd.choice(
                [b"\r\n\r\n", b"\r\n\r\n{}", b"", b'\r\n\r\n{"jsonrpc"']
            )
            if i % 20:
                raw = _send_and_shut(s.port, data)  # EOF after the bytes: no waiting
            else:
                raw = raw_exchange(s.port, data, timeout=5)  # the head deadline cuts it
            if raw:
                answered += 1
                assert status_of(raw) in KNOWN, (data, raw[:100])
        assert answered > 60, "most random requests got an HTTP answer: %d" % answered
        code, _, out = request(s.port, "GET", "/menu")
        assert code == 200 and out["capabilities"], "still serving"
        assert s.srv.errors == 0, "no handler crashed"
        for _ in range(100):  # the last answer is read before its task has closed
            if s.srv.active == 0:
                break
            time.sleep(0.01)
        assert s.srv.active == 0, "no connection left behind"
        assert s.body.commands == [], s.body.commands
    finally:
        s.stop()
