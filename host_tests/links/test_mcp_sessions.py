# MCP for Home Assistant (issue 26) at unit level: idle expiry and LRU eviction of sessions, a long step answered as started, the /mcp/<token> URL, tool names and schemas through voluptuous-openapi.
import asyncio
import re
import time

from voluptuous_openapi import convert_to_voluptuous

from fake_body import FakeBody, ServerThread
from master.links import mcp
from master.links import mcpstream
from organs.led import led_descriptor
from organs.speaker import speaker_descriptor
from organs.template import button_descriptor
from test_httpd import request
from test_mcp_streams import INIT, Req

TOKEN = "s3cret-Token_42"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class Clock:
    def __init__(self):
        self.t = 1000

    def __call__(self):
        return self.t


def _sid(srv):
    code, out, hdrs = asyncio.run(srv.handle(Req(INIT)))
    assert code == 200 and "result" in out and hdrs, (code, out, hdrs)
    return hdrs["Mcp-Session-Id"]


def _ping(srv, sid):
    msg = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    return asyncio.run(srv.handle(Req(msg, {"mcp-session-id": sid})))


def test_an_idle_session_expires_after_10_minutes_one_in_use_does_not():
    clock = Clock()
    srv = mcp.McpServer(FakeBody(), mcpstream.Sessions(clock=clock))
    idle, used, calling = _sid(srv), _sid(srv), _sid(srv)
    srv.sessions.get(calling).calls.append(mcpstream.Call(9))  # a tools/call in flight
    clock.t += mcpstream.IDLE_MS - 1
    assert _ping(srv, used)[0] == 200, "used just before its 10 min"
    clock.t += 1
    code, out, _ = _ping(srv, idle)
    assert code == 404 and "unknown or ended Mcp-Session-Id" in out["error"]["message"], out
    assert srv.sessions.get(used) is not None and srv.sessions.get(calling) is not None
    assert srv.stats()["sessions_expired"] == 1, srv.stats()
    clock.t += mcpstream.IDLE_MS
    assert srv.sessions.get(calling) is not None, "in use: never expires"
    assert srv.sessions.get(used) is None and srv.stats()["sessions_expired"] == 2, srv.stats()


def test_fifty_sessions_per_call_never_evict_the_ones_in_use():
    # Home Assistant's pattern without its DELETE (a call that timed out): 50 sessions made,
    # each used once; the table stays at 8, the least recently used idle one goes each time
    clock = Clock()
    srv = mcp.McpServer(FakeBody(), mcpstream.Sessions(clock=clock))
    held = _sid(srv)  # another client's session, used between the calls
    calling = _sid(srv)
    call = mcpstream.Call(5)
    srv.sessions.get(calling).calls.append(call)
    for i in range(50):
        clock.t += 1000
        sid = _sid(srv)
        assert _ping(srv, sid)[0] == 200, i
        if i % 3 == 0:
            assert _ping(srv, held)[0] == 200, "the held session survives call %d" % i
    assert len(srv.sessions.table) == mcpstream.MAX_SESSIONS == 8, srv.sessions.table
    assert srv.sessions.get(calling) is not None, "a session with a call in flight stays"
    st = srv.stats()
    assert st["sessions_evicted"] == 52 - 8 and st["sessions_full"] == 0, st
    srv.sessions.get(calling).done(call)
    assert not srv.sessions.get(calling).busy()


def test_a_long_step_is_answered_as_started_and_goes_on():
    body = FakeBody(play_ms=1500)
    srv = mcp.McpServer(body, call_wait_ms=300)
    blink = {"name": "led_blink", "arguments": {"count": 20, "period_ms": 2000}}

    async def go():
        t0 = time.monotonic()
        out = await srv.call_json(7, blink, "2025-06-18")
        took = time.monotonic() - t0
        playing = body.playing
        queued = await srv.call_json(8, blink, "2025-06-18")  # the led group is held
        await asyncio.sleep(3.5)
        return out, took, playing, queued

    out, took, playing, queued = asyncio.run(go())
    r = out["result"]
    text = r["content"][0]["text"]
    assert 0.25 < took < 1.0, "answered after call_wait_ms, not at the step's end: %.2f s" % took
    assert playing == 1, "the step still ran when the answer came"
    assert text.startswith("led_blink: started, running for 0 s now"), text
    assert "runs up to 40 s in all" in text and "goes on after this answer" in text, text
    assert r["isError"] is False and r["structuredContent"]["steps"][0]["status"] == "running", r
    q = queued["result"]["content"][0]["text"]
    assert q.startswith("led_blink: accepted, waiting for its resource group"), q
    assert srv.stats()["calls_early"] == 2, srv.stats()
    assert body.playing == 0 and body.commands == [("led_blink", blink["arguments"])] * 2, (
        "both steps went on and ran: %r" % body.commands
    )


def test_a_short_step_and_a_progress_call_are_answered_as_before():
    body = FakeBody(play_ms=100)
    srv = mcp.McpServer(body, call_wait_ms=300)
    blink = {"name": "led_blink", "arguments": {"count": 2, "period_ms": 100}}
    out = asyncio.run(srv.call_json(1, blink, "2025-06-18"))
    assert out["result"]["content"][0]["text"].startswith("led_blink: done"), out
    msg = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
           "params": dict(blink, _meta={"progressToken": "p"})}  # fmt: skip

    async def streamed():
        got = srv.call_streamed(msg, "2025-06-18")
        got[1].close()
        await asyncio.sleep(0.2)
        return got

    got = asyncio.run(streamed())
    assert isinstance(got[1], mcpstream.CallStream), got
    assert srv.stats()["calls_early"] == 0, srv.stats()


def _menus():
    yield "fake body", FakeBody().menu()["capabilities"]
    for d in (led_descriptor(), speaker_descriptor(), button_descriptor()):
        yield d["module_id"], d["capabilities"]


def test_every_tool_name_and_schema_suits_home_assistant():
    seen = 0
    for where, caps in _menus():
        for cap in caps:
            t = mcp.tool_for(cap)
            assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", t["name"]), (where, t["name"])
            try:
                convert_to_voluptuous(t["inputSchema"])  # what HA's coordinator does to each
            except Exception as e:
                raise AssertionError("%s %s: %r" % (where, t["name"], e))
            seen += 1
    assert seen >= 8, seen
    led = mcp.tool_for(led_descriptor()["capabilities"][2])
    schema = convert_to_voluptuous(led["inputSchema"])
    assert schema({"count": 20, "period_ms": 2000}) == {"count": 20, "period_ms": 2000}


def _post(port, path, msg, headers=None):
    h = dict(ACCEPT)
    h.update(headers or {})
    return request(port, "POST", path, msg, h)


def test_the_token_in_the_path_stands_for_the_header():
    s = ServerThread({"token": TOKEN})
    try:
        code, hdrs, out = _post(s.port, "/mcp/" + TOKEN, INIT)
        assert code == 200 and out["result"]["capabilities"]["tools"], (code, out)
        sid = hdrs["mcp-session-id"]
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "led_on"}}
        code, _, out = _post(s.port, "/mcp/" + TOKEN, call, {"Mcp-Session-Id": sid})
        assert code == 200 and out["result"]["content"][0]["text"].startswith("led_on: done")
        code, _, _ = request(s.port, "DELETE", "/mcp/" + TOKEN, None, {"Mcp-Session-Id": sid})
        assert code == 200, code
        code, hdrs, out = _post(s.port, "/mcp", INIT, {"Authorization": "Bearer " + TOKEN})
        assert code == 200 and "mcp-session-id" in hdrs, "the header still works: %r" % out
        code, hdrs, out = _post(s.port, "/mcp", INIT)
        assert code == 401 and out["error"] == "a valid bearer token is required", (code, out)
        code, hdrs, _ = request(s.port, "PUT", "/mcp/" + TOKEN, {}, ACCEPT)
        assert code == 405 and hdrs["allow"] == "POST, GET, DELETE", (code, hdrs)
    finally:
        s.stop()


def test_a_wrong_token_in_the_path_is_404_never_401():
    # a 401 would send Home Assistant into OAuth discovery
    s = ServerThread({"token": TOKEN})
    try:
        before = list(s.body.commands)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "led_on"}}
        for path in ("/mcp/" + TOKEN[:-1], "/mcp/" + TOKEN + "x", "/mcp/", "/mcp/<token>"):
            for headers in ({}, {"Authorization": "Bearer " + TOKEN}):
                code, hdrs, out = _post(s.port, path, call, headers)
                assert code == 404 and "www-authenticate" not in hdrs, (path, code, hdrs)
                assert out["error"] == "no route /mcp/<token> with that token", out
                assert TOKEN not in str(out), "the answer never shows the token"
        assert s.body.commands == before, "a wrong token ran nothing"
    finally:
        s.stop()
    s = ServerThread()  # no token configured: no secret URL either
    try:
        code, _, out = _post(s.port, "/mcp/anything", INIT)
        assert code == 404, (code, out)
        assert _post(s.port, "/mcp", INIT)[0] == 200
    finally:
        s.stop()
