# GET /mcp notification streams are bounded per session and in all (503 with Retry-After), and end with their session; CPython, the unix port, RV32.
try:
    import asyncio
except ImportError:  # pragma: no cover
    import uasyncio as asyncio

from master.links import mcp
from master.links import mcpstream
from fake_body import FakeBody

UNIX_PORT = True

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip


class Req:
    def __init__(self, msg=None, headers=None):
        self.json = msg
        self.headers = headers or {}


class Writer:
    """An asyncio writer that takes everything (a client reading its stream)."""

    def __init__(self):
        self.out = []

    def write(self, b):
        self.out.append(bytes(b))

    async def drain(self):
        pass


def _session(srv):
    code, out, hdrs = asyncio.run(srv.handle(Req(INIT)))
    assert code == 200 and "result" in out, out
    return hdrs["Mcp-Session-Id"]


def _get(srv, sid):
    h = {"accept": "text/event-stream", "mcp-session-id": sid}
    return asyncio.run(srv.stream(Req(None, h)))


def test_one_stream_per_session_more_get_503_with_retry_after():
    srv = mcp.McpServer(FakeBody())
    sid = _session(srv)
    code, stream, hdrs = _get(srv, sid)
    assert code == 200 and hasattr(stream, "write_to"), (code, stream)
    # the attack: many GETs on one session (57 were held); each is refused, none held
    for _ in range(8):
        code, out, hdrs = _get(srv, sid)
        assert code == 503 and hdrs == {"Retry-After": "5"}, (code, out, hdrs)
        assert "this session has 1 notification stream" in out["error"], out
    st = srv.stats()
    assert st["streams"] == 1 and st["streams_refused"] == 8, st
    stream.close()
    stream.close()  # the server may close twice: counted once
    assert srv.stats()["streams"] == 0, srv.stats()
    code, again, _ = _get(srv, sid)
    assert code == 200, "the session's stream opens again once the first closed: %r" % code
    again.close()


def test_streams_in_all_are_bounded_across_sessions():
    srv = mcp.McpServer(FakeBody())
    sids = [_session(srv) for _ in range(4)]
    held = []
    for sid in sids[: mcpstream.MAX_STREAMS]:
        code, stream, _ = _get(srv, sid)
        assert code == 200, code
        held.append(stream)
    for sid in sids[mcpstream.MAX_STREAMS :]:
        code, out, hdrs = _get(srv, sid)
        assert code == 503 and hdrs["Retry-After"] == "5", (code, out)
        assert "%d MCP notification streams are open already" % mcpstream.MAX_STREAMS in (
            out["error"]
        ), out
    held[0].close()
    code, stream, _ = _get(srv, sids[-1])
    assert code == 200, "a stream that closed makes room: %r" % code
    for s in (stream, held[1]):
        s.close()
    assert srv.stats()["streams"] == 0, srv.stats()


def _write_while(stream, action):
    """Run stream.write_to in a task, await `action()`, then wait (bounded) for the stream to
    end; True when it ended by itself."""

    async def go():
        w = Writer()
        t = asyncio.create_task(stream.write_to(w))
        await asyncio.sleep(0.05)
        await action()
        for _ in range(100):
            await asyncio.sleep(0.01)
            if t.done():
                return True
        t.cancel()
        return False

    try:
        return asyncio.run(go())
    finally:
        stream.close()


def test_a_session_that_ends_ends_its_stream_and_frees_its_place():
    srv = mcp.McpServer(FakeBody())
    sid = _session(srv)
    code, stream, _ = _get(srv, sid)
    assert code == 200, code

    async def delete():
        code, _, _ = await srv.end(Req(None, {"mcp-session-id": sid}))
        assert code == 200, code

    ended = _write_while(stream, delete)
    assert ended, "DELETE /mcp ended the session's open stream"
    assert srv.stats()["streams"] == 0 and srv.sessions.get(sid) is None, srv.stats()


def test_a_session_with_a_stream_is_never_evicted():
    # issue 26 (was: the oldest went, streaming or not): a session whose stream is open is in
    # use; with the table full of them initialize is answered without a session (the client
    # goes on statelessly), counted, and the streams go on
    srv = mcp.McpServer(FakeBody(), mcpstream.Sessions(limit=2))
    a = _session(srv)
    b = _session(srv)
    code, sa, _ = _get(srv, a)
    code2, sb, _ = _get(srv, b)
    assert code == code2 == 200, (code, code2)
    hdrs = []

    async def one_more():
        code, out, h = await srv.handle(Req(INIT))
        assert code == 200 and "result" in out, out
        hdrs.append(h)

    ended = _write_while(sa, one_more)
    assert not ended, "a session in use keeps its stream"
    assert hdrs == [None], "answered without a session: %r" % hdrs
    assert srv.sessions.get(a) is sa.session and srv.sessions.get(b) is sb.session
    st = srv.stats()
    assert st["sessions_full"] == 1 and st["sessions_evicted"] == 0, st
    sb.close()
    c = _session(srv)  # a's stream closed (by _write_while), b's too: a, the older use, goes
    assert srv.sessions.get(a) is None and srv.sessions.get(c) is not None, srv.sessions.table
    assert srv.stats()["sessions_evicted"] == 1, srv.stats()
