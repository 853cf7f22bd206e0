# MCP notifications with the official SDK client (CPython master, live loop): list_changed on replug/unplug, progress, resources.
import asyncio
import json
import time

import pytest
from mcp import Client

from events_rig import LiveRig


def url(live):
    return "http://127.0.0.1:%d/mcp" % live.port


def method_of(msg):
    m = getattr(msg, "root", msg)
    return getattr(m, "method", None), m


def test_list_changed_on_unplug_and_replug_then_tools_match_the_menu():
    live = LiveRig(speed=4).start()
    led = live.rig.organs[0]
    seen = []  # (method, rig ms when it arrived)

    async def handler(msg):
        method, m = method_of(msg)
        if method:
            seen.append((method, live.rig.now))

    def wait_for(n, limit_s):
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            got = [s for s in seen if s[0] == "notifications/tools/list_changed"]
            if len(got) >= n:
                return got[n - 1]
            time.sleep(0.01)
        return None

    async def go():
        async with Client(url(live), message_handler=handler) as c:
            assert c.server_capabilities.tools.list_changed
            before = [t.name for t in (await c.list_tools()).tools]
            assert "led_blink" in before, before
            await asyncio.sleep(0.3)  # the client opens its GET stream after initialized
            t_unplug = live.call(lambda: (setattr(led, "alive", False), live.rig.now)[1])
            got = await asyncio.to_thread(wait_for, 1, 30)
            assert got is not None, "no list_changed after the unplug: %r" % seen
            assert got[1] - t_unplug <= 15500, "unplug: %d ms" % (got[1] - t_unplug)
            gone = [t.name for t in (await c.list_tools()).tools]
            assert gone == [c_["name"] for c_ in live.call(live.rig.body.menu)["capabilities"]]
            assert "led_blink" not in gone and "chime" in gone, gone
            t_plug = live.call(lambda: (setattr(led, "alive", True), live.rig.now)[1])
            got = await asyncio.to_thread(wait_for, 2, 10)
            assert got is not None, "no list_changed after the replug: %r" % seen
            assert got[1] - t_plug <= 3000, "replug: %d ms" % (got[1] - t_plug)
            back = [t.name for t in (await c.list_tools()).tools]
            menu = live.call(live.rig.body.menu)["capabilities"]
            assert back == [c_["name"] for c_ in menu] and sorted(back) == sorted(before), back
        return True

    try:
        assert asyncio.run(go())
        st = live.call(live.rig.body.status)["mcp"]
        assert st["notified"] >= 2, st
    finally:
        live.stop()


def test_blink_with_a_progress_token_gets_progress_then_its_result_after_the_blink():
    live = LiveRig().start()
    led = live.rig.organs[0]
    led.event_ms = 2500  # the blink's EVENT 2.5 s after its COMMAND_RESP
    progress = []

    async def on_progress(p, total, message):
        progress.append((time.monotonic(), p, message, len(led.pending_events)))

    async def go():
        async with Client(url(live)) as c:
            t0 = time.monotonic()
            r = await c.call_tool(
                "led_blink", {"count": 3, "period_ms": 500}, progress_callback=on_progress
            )
            return r, time.monotonic() - t0

    try:
        r, took = asyncio.run(go())
        assert not r.is_error and r.content[0].text.startswith("led_blink: done"), r
        assert took >= 2.4, "the result came before the blink ended: %.2f s" % took
        assert r.structured_content["steps"][0]["status"] == "done", r.structured_content
        msgs = [p[2] for p in progress]
        assert any("accepted it, running" in m for m in msgs), msgs
        assert any("running for" in m for m in msgs), msgs
        assert [p[1] for p in progress] == sorted(p[1] for p in progress), progress
        assert all(p[3] == 1 for p in progress[1:]), "progress only while the EVENT was due"
    finally:
        live.stop()


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
def test_status_and_reports_are_resources_with_updates():
    live = LiveRig().start()
    seen = []

    async def handler(msg):
        method, m = method_of(msg)
        if method == "notifications/resources/updated":
            seen.append(str(m.params.uri))

    async def go():
        async with Client(url(live), message_handler=handler) as c:
            assert c.server_capabilities.resources.subscribe
            uris = [str(r.uri) for r in (await c.list_resources()).resources]
            assert uris == ["organbus://status", "organbus://reports"], uris
            st = json.loads((await c.read_resource("organbus://status")).contents[0].text)
            assert [o["module_id"] for o in st["organs"]] == ["LED_001", "SPK_001"], st
            await c.subscribe_resource("organbus://reports")
            await asyncio.sleep(0.3)
            r = await c.call_tool("led_on", {})
            assert not r.is_error
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.02)
            rep = json.loads((await c.read_resource("organbus://reports")).contents[0].text)
            return rep

    try:
        rep = asyncio.run(go())
        assert seen and seen[0] == "organbus://reports", seen
        assert "organbus://status" not in seen, "only the subscribed resource is told"
        last = rep["reports"][-1]
        assert last["event"] == "plan" and last["steps"][0]["action"] == "led_on", rep
    finally:
        live.stop()
