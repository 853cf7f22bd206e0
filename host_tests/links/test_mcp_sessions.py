# MCP sessions (issue 26): idle expiry after 10 min and the LRU cap that never evicts a session in use, a long step answered as started; CPython, the unix port, RV32.
try:
    import asyncio
except ImportError:  # pragma: no cover
    import uasyncio as asyncio

from organbus.ticks import ticks_diff, ticks_ms

from fake_body import FakeBody
from master.links import mcp
from master.links import mcpstream
from test_mcp_streams import INIT, Req

UNIX_PORT = True


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
        t0 = ticks_ms()
        out = await srv.call_json(7, blink, "2025-06-18")
        took = ticks_diff(ticks_ms(), t0) / 1000
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
