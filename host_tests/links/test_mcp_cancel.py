# notifications/cancelled: a tools/call in flight answers the cancellation error at once, never its result; a step not sent yet is skipped; CPython, the unix port, RV32.
#
# Issue 24 (14): the notification was ignored and the result still sent. The 2025 wire ends a
# request's POST only with a response: the answer is error -32800, as the MCP SDK's own server
# answers a cancelled request there (its REQUEST_CANCELLED); its client, no longer waiting,
# drops it. Over the fake body (its runs keep the scheduler's group rule) and the real Body.
try:
    import asyncio
except ImportError:  # pragma: no cover
    import uasyncio as asyncio

from master.links import mcp
from fake_body import FakeBody
from test_bodyproto_master import rig_with, run_with_clock

UNIX_PORT = True


class Req:
    def __init__(self, msg, headers=None):
        self.json = msg
        self.headers = headers or {}


class Writer:
    def __init__(self):
        self.out = []

    def write(self, b):
        self.out.append(bytes(b))

    async def drain(self):
        pass


def _session(srv):
    msg = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
           "params": {"protocolVersion": "2025-11-25", "capabilities": {}}}  # fmt: skip
    code, out, hdrs = asyncio.run(srv.handle(Req(msg)))
    return {"mcp-session-id": hdrs["Mcp-Session-Id"], "mcp-protocol-version": "2025-11-25"}


def _call(mid, name, args=None, token=None):
    params = {"name": name, "arguments": args or {}}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": mid, "method": "tools/call", "params": params}


def _cancel(rid, reason="the user changed their mind"):
    params = {"requestId": rid}
    if reason is not None:
        params["reason"] = reason
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}


def _ms():
    import time

    if hasattr(time, "ticks_ms"):
        return time.ticks_ms()
    return int(time.monotonic() * 1000)


def test_a_running_call_answers_the_cancellation_at_once_and_never_its_result():
    body = FakeBody(play_ms=3000)
    srv = mcp.McpServer(body)
    h = _session(srv)

    async def go():
        t0 = _ms()
        call = asyncio.create_task(
            srv.handle(Req(_call(7, "led_blink", {"count": 3, "period_ms": 500}), h))
        )
        await asyncio.sleep(0.2)
        assert body.playing == 1, "the blink runs"
        code, out, _ = await srv.handle(Req(_cancel(7), h))
        assert (code, out) == (202, None), (code, out)
        got = await call
        return got, _ms() - t0

    (code, out, _), took = asyncio.run(go())
    assert code == 200 and "result" not in out, out
    assert out["id"] == 7 and out["error"]["code"] == -32800, out
    assert "cancelled by the client" in out["error"]["message"], out
    assert "the user changed their mind" in out["error"]["message"], out
    assert took < 2000, "answered at the cancellation, not after the 3 s blink: %d ms" % took
    st = srv.stats()
    assert st["cancelled"] == 1 and st["cancels_ignored"] == 0, st
    assert srv.sessions.get(h["mcp-session-id"]).calls == [], "the call left its session"


def test_a_call_waiting_for_its_group_is_skipped_and_never_sent():
    body = FakeBody(play_ms=1500)
    srv = mcp.McpServer(body)
    h = _session(srv)

    async def go():
        first = asyncio.create_task(srv.handle(Req(_call(1, "chime"), h)))
        await asyncio.sleep(0.1)
        second = asyncio.create_task(srv.handle(Req(_call(2, "speak", {"text": "later"}), h)))
        await asyncio.sleep(0.1)
        pending = [s.status for r, s in body.waiting]
        await srv.handle(Req(_cancel(2, None), h))
        b = await second
        a = await first
        await asyncio.sleep(0.2)
        return a, b, pending

    (_, a, _), (_, b, _), pending = asyncio.run(go())
    assert pending == ["pending"], "speak waited for the audio group: %r" % pending
    assert b["error"]["code"] == -32800 and b["id"] == 2, b
    assert b["error"]["message"] == "request cancelled by the client (notifications/cancelled)", b
    assert a["result"]["isError"] is False, "the other call ran whole: %r" % a
    assert body.commands == [("chime", {})], (
        "the cancelled speak never went out: %r" % body.commands
    )


def test_cancellations_that_name_no_call_of_the_session_are_ignored():
    body = FakeBody(play_ms=300)
    srv = mcp.McpServer(body)
    h = _session(srv)
    other = _session(srv)
    bad = [
        (_cancel(8), h),  # no such request
        (_cancel("7"), h),  # "7" is not 7
        (_cancel(7), other),  # another session's
        (_cancel(7), {}),  # no session: request ids are only unique within one
        ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [7]}}, h),
        ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": 5}, h),
        ({"jsonrpc": "2.0", "method": "notifications/cancelled"}, h),
    ]

    async def go():
        call = asyncio.create_task(srv.handle(Req(_call(7, "chime"), h)))
        await asyncio.sleep(0.05)
        answers = []
        for msg, hdrs in bad:
            answers.append((await srv.handle(Req(msg, hdrs)))[:2])
        return await call, answers

    (code, out, _), answers = asyncio.run(go())
    assert answers == [(202, None)] * len(bad), answers
    assert out["result"]["isError"] is False, "the call still gets its result: %r" % out
    st = srv.stats()
    assert st["cancelled"] == 0 and st["cancels_ignored"] == len(bad), st
    # after the result, a late cancellation finds nothing: ignored too
    asyncio.run(srv.handle(Req(_cancel(7), h)))
    assert srv.stats()["cancels_ignored"] == len(bad) + 1, srv.stats()


def test_a_progress_stream_ends_with_the_cancellation_not_the_result():
    body = FakeBody(play_ms=3000)
    srv = mcp.McpServer(body)
    h = _session(srv)

    async def go():
        code, stream, head = await srv.handle(
            Req(_call(3, "led_blink", {"count": 3, "period_ms": 500}, "tok"), h)
        )
        assert code == 200 and head["Content-Type"] == "text/event-stream", (code, head)
        w = Writer()
        t = asyncio.create_task(stream.write_to(w))
        await asyncio.sleep(0.2)
        await srv.handle(Req(_cancel(3), h))
        for _ in range(100):
            if t.done():
                break
            await asyncio.sleep(0.02)
        done = t.done()
        stream.close()
        return done, w.out

    done, out = asyncio.run(go())
    assert done, "the stream ended at the cancellation"
    last = out[-1].decode()
    assert '"code": -32800' in last and '"id": 3' in last, last
    assert not any(b'"result"' in o for o in out), "no result went out: %r" % out
    assert srv.sessions.get(h["mcp-session-id"]).calls == [], "the stream left its session"


def test_on_the_real_body_a_queued_step_is_skipped_and_a_running_one_gives_its_group_up():
    rig = rig_with(event_ms=5000)
    srv = mcp.McpServer(rig.body)
    h = _session(srv)
    speaker = rig.organs[1]

    async def go():
        speak = asyncio.create_task(srv.handle(Req(_call(1, "speak", {"text": "a long one"}), h)))
        await asyncio.sleep(0)
        chime = asyncio.create_task(srv.handle(Req(_call(2, "chime"), h)))
        for _ in range(50):
            await asyncio.sleep(0)
        await srv.handle(Req(_cancel(2), h))
        b = await chime
        sent_after_chime = [c[1] for c in speaker.commands]
        busy = rig.body.status()["busy_groups"]
        await srv.handle(Req(_cancel(1), h))
        a = await speak
        return a, b, sent_after_chime, busy, rig.body.status()["busy_groups"]

    (a, b, sent, busy, after), _ = run_with_clock(rig, go())
    assert "audio" in str(busy) and "audio" not in str(after), (busy, after)
    assert speaker.pending_events, "the speech itself plays on (no frame stops it)"
    assert b[1]["error"]["code"] == -32800 and a[1]["error"]["code"] == -32800, (a, b)
    assert sent == ["speak"], "the queued chime was never sent: %r" % sent
    rig.advance(6000)
    assert [c[1] for c in speaker.commands] == ["speak"], speaker.commands
    plans = [e for e in rig.body.status()["recent"] if e.get("event") == "plan"]
    steps = [(e["steps"][0]["action"], e["steps"][0]["status"]) for e in plans]
    assert ("chime", "skipped") in steps, "the chime's report says it was skipped: %r" % plans
    chime = [e for e in plans if e["steps"][0]["action"] == "chime"][0]["steps"][0]
    assert "cancelled by the MCP client" in chime["reason"], chime
