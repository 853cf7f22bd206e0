# Every malformed MCP request gets its JSON-RPC error (parse, envelope, id, params, cursor, uri, progressToken, NaN), and batches follow the announced versions; CPython, the unix port, RV32.
import json

try:
    import asyncio
except ImportError:  # pragma: no cover
    import uasyncio as asyncio

from master.links import mcp, mcptools
from master.links.httpd import Request
from fake_body import FakeBody

UNIX_PORT = True

NAMES = ["led_on", "led_off", "led_blink", "speak", "chime"]


def _req(body, headers=None):
    """The HTTP server's own Request, `body` its bytes (or a value, sent as its JSON)."""
    r = Request("POST", "/mcp", "", headers or {}, "127.0.0.1")
    r.content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return r


def _post(srv, body, headers=None):
    return asyncio.run(srv.handle(_req(body, headers)))


def _error_of(srv, body, headers=None):
    code, out, _ = _post(srv, body, headers)
    assert isinstance(out, dict) and "error" in out, (body, code, out)
    json.dumps(out)  # every answer is JSON
    return code, out["id"], out["error"]


def test_a_body_that_is_not_json_is_a_jsonrpc_parse_error():
    srv = mcp.McpServer(FakeBody())
    for body in (b"{oops", b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "x": NaN}', b"[1e999]",
                 b"\xff\xfe", b'{"jsonrpc": "2.0", "id": 1, "method": "ping"} trailing',
                 b'{"a": Infinity}'):  # fmt: skip
        code, mid, e = _error_of(srv, body)
        assert code == 400 and mid is None and e["code"] == -32700, (body, code, e)
        assert e["message"].startswith("parse error: body: not JSON: "), e


def test_bad_envelopes_and_ids_are_invalid_requests_with_a_null_id():
    srv = mcp.McpServer(FakeBody())
    for msg in (5, "ping", True, {}, {"id": 1, "method": "ping"},
                {"jsonrpc": "1.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 1},
                {"jsonrpc": "2.0", "id": 1, "method": 5}, {"jsonrpc": "2.0", "method": ["x"]}):  # fmt: skip
        code, mid, e = _error_of(srv, msg)
        assert e["code"] == -32600, (msg, e)
    # an id that is not a string or an integer is never echoed: MCP ids are never null either
    for bad in ([1], {}, {"a": 1}, True, False, 1.5, None):
        code, mid, e = _error_of(srv, {"jsonrpc": "2.0", "id": bad, "method": "tools/list"})
        assert mid is None and e["code"] == -32600, (bad, mid, e)
        assert "request id must be a string or an integer" in e["message"], e
    for good in (0, 7, "abc", ""):
        code, out, _ = _post(srv, {"jsonrpc": "2.0", "id": good, "method": "ping"})
        assert out == {"jsonrpc": "2.0", "id": good, "result": {}}, (good, out)


def test_params_and_meta_that_are_not_objects_are_invalid_params():
    srv = mcp.McpServer(FakeBody())
    for params in ([1], 5, "x", True):
        code, mid, e = _error_of(
            srv, {"jsonrpc": "2.0", "id": 3, "method": "ping", "params": params}
        )
        assert mid == 3 and e["code"] == -32602 and "params must be an object" in e["message"], e
    for meta in (5, [1], "t"):
        msg = {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"_meta": meta}}
        code, mid, e = _error_of(srv, msg)
        assert mid == 4 and e["code"] == -32602 and "_meta must be an object" in e["message"], e


def test_a_cursor_is_a_string_this_server_gave_else_invalid_params():
    # issue 24 (12): [1] and {} got no answer at all, 5, 1.5 and true were taken as indexes
    srv = mcp.McpServer(FakeBody())
    for method in ("tools/list", "resources/list"):
        for cur in ([1], {}, 5, 1.5, True, False, "x", "-1", "99", "1e3", " 1", "0x1"):
            msg = {"jsonrpc": "2.0", "id": 9, "method": method, "params": {"cursor": cur}}
            code, mid, e = _error_of(srv, msg)
            assert mid == 9 and e["code"] == -32602 and "cursor" in e["message"], (cur, e)
    for cur, names in ((None, NAMES), ("", NAMES), ("0", NAMES), ("2", NAMES[2:]), ("5", [])):
        params = {} if cur is None else {"cursor": cur}
        code, out, _ = _post(
            srv, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}
        )
        assert [t["name"] for t in out["result"]["tools"]] == names, (cur, out)
        assert "nextCursor" not in out["result"], "the HTTP list is always whole"
    # the one cursor rule, for the xiaozhi link's pages too
    assert mcptools.cursor_index("3", 5) == 3 and mcptools.cursor_index(None, 0) == 0
    for cur in (3, "6", "a", [1]):
        try:
            mcptools.cursor_index(cur, 5)
            assert False, "took cursor %r" % (cur,)
        except ValueError as e:
            assert "cursor" in str(e), e


def test_uris_names_arguments_and_progress_tokens_of_the_wrong_kind_are_invalid_params():
    body = FakeBody()
    srv = mcp.McpServer(body)
    bad = []
    for uri in (5, None, [1], {"u": 1}, True):
        for method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
            bad.append((method, {"uri": uri}, "uri must be a string"))
    for name in (5, None, [1], True):
        bad.append(("tools/call", {"name": name}, "unknown tool"))
    for args in ([1], 5, "x", True):
        bad.append(("tools/call", {"name": "led_on", "arguments": args}, "must be an object"))
    for tok in (True, 1.5, [1], {"t": 1}):
        params = {"name": "led_on", "_meta": {"progressToken": tok}}
        bad.append(("tools/call", params, "progressToken must be a string or an integer"))
    for cap in (5, [1], "x"):
        params = {"protocolVersion": "2025-11-25", "capabilities": cap}
        bad.append(("initialize", params, "capabilities must be an object"))
    for method, params, words in bad:
        msg = {"jsonrpc": "2.0", "id": 11, "method": method, "params": params}
        code, mid, e = _error_of(srv, msg)
        assert mid == 11 and e["code"] == -32602 and words in e["message"], (method, params, e)
    code, mid, e = _error_of(
        srv, {"jsonrpc": "2.0", "id": 12, "method": "resources/read", "params": {"uri": "x://y"}}
    )
    assert e["code"] == -32002, "a string URI that is not a resource: not found (%r)" % e
    assert body.commands == [], "nothing ran: %r" % body.commands


def test_nan_and_infinities_in_arguments_are_invalid_params_and_run_nothing():
    # the HTTP body's strict reader refuses NaN and 1e999 (parse error above); a link that
    # decodes with json.loads (the xiaozhi link: CPython takes NaN, both interpreters read
    # 1e999 as inf) hands them to call_tool: each is an error that names it, never a silence
    body = FakeBody()
    srv = mcp.McpServer(body)
    nan, inf = float("nan"), float("inf")
    for args, where in (({"count": nan, "period_ms": 100}, "arguments.count"),
                        ({"count": 2, "period_ms": -inf}, "arguments.period_ms"),
                        ({"count": 2, "period_ms": 100, "x": [1, inf]}, "arguments.x[1]"),
                        ({"count": 2, "period_ms": 100, "x": {"y": nan}}, "arguments.x.y")):  # fmt: skip
        params = {"name": "led_blink", "arguments": args}
        out = asyncio.run(srv.call_tool(5, params, "2025-11-25"))
        e = out["error"]
        assert out["id"] == 5 and e["code"] == -32602 and where in e["message"], (args, e)
        assert "is not a number JSON can carry" in e["data"]["problems"][0], e
        msg = {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": params}
        code, out, _ = asyncio.run(srv.handle(_Obj(msg)))
        assert out["error"]["code"] == -32602 and where in out["error"]["message"], out
    assert body.commands == [], "nothing ran: %r" % body.commands


class _Obj:
    # a request whose body is already decoded (as a link with json.loads has it)
    def __init__(self, msg, headers=None):
        self.json = msg
        self.headers = headers or {}


def _init(srv, version):
    msg = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
           "params": {"protocolVersion": version, "capabilities": {}}}  # fmt: skip
    code, out, hdrs = _post(srv, msg)
    assert out["result"]["protocolVersion"] == version, out
    return hdrs["Mcp-Session-Id"]


PINGS = [
    {"jsonrpc": "2.0", "id": 1, "method": "ping"},
    {"jsonrpc": "2.0", "id": 2, "method": "ping"},
]


def test_batches_are_refused_where_the_version_has_none():
    # 2025-06-18 took batching out of MCP: a batch under it (or later) is refused whole,
    # whether the version comes from the header or from the session's initialize
    srv = mcp.McpServer(FakeBody())
    for version in ("2025-06-18", "2025-11-25"):
        code, mid, e = _error_of(srv, PINGS, {"mcp-protocol-version": version})
        assert code == 400 and mid is None and e["code"] == -32600, (version, e)
        assert "batches are not part of MCP %s" % version in e["message"], e
        sid = _init(srv, version)
        code, mid, e = _error_of(srv, PINGS, {"mcp-session-id": sid})
        assert code == 400 and "not part of MCP %s" % version in e["message"], e
    code, out, _ = _post(srv, PINGS)  # no header, no session: 2025-03-26, as the spec says
    assert code == 200 and [r["id"] for r in out] == [1, 2], out


def test_a_2025_03_26_batch_is_handled_within_its_session():
    srv = mcp.McpServer(FakeBody())
    sid = _init(srv, "2025-03-26")
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe",
         "params": {"uri": "organbus://reports"}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "initialize",
         "params": {"protocolVersion": "2025-03-26"}},
        {"jsonrpc": "2.0", "id": [3], "method": "ping"},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "led_on"}},
    ]  # fmt: skip
    made = srv.sessions.made
    code, out, _ = _post(srv, batch, {"mcp-session-id": sid})
    assert code == 200 and [r["id"] for r in out] == [1, 2, None, 4], out
    assert out[0] == {"jsonrpc": "2.0", "id": 1, "result": {}}, "subscribed in the session"
    assert srv.sessions.get(sid).subscribed == ["organbus://reports"], srv.sessions.get(sid)
    assert "initialize must not be part of a JSON-RPC batch" in out[1]["error"]["message"], out
    assert srv.sessions.made == made, "no session made from inside a batch"
    assert out[2]["error"]["code"] == -32600 and out[3]["result"]["isError"] is False, out
    code, out, _ = _post(srv, PINGS, {"mcp-session-id": "0" * 32})
    assert code == 404, "a batch names its session like any POST: %r" % code
