# The stream, MCP notifications and the local loop on the virtual body (master on the unix port, real organs, paced cables).
import asyncio
import json
import os
import socket
import sys
import time

import pytest
from mcp import Client

from support import ROOT
from events_rig import SseClient

sys.path.insert(0, ROOT + "/tools")
from vbody.body import VirtualBody  # noqa: E402

ALL = ["led_on", "led_off", "led_blink", "chime"]


def step(tid, action, **params):
    return {"task_id": tid, "action": action, "params": params, "priority": 5, "depends_on": []}


def plan(*steps):
    return {"heard_req": 0, "steps": list(steps), "can_execute": True, "missing": [],
            "response": ""}  # fmt: skip


def start(tmp, **kw):
    b = VirtualBody(out_dir=str(tmp), **kw).start()
    assert b.wait_http(15), "the master's HTTP port did not open"
    got = b.wait_menu(ALL, 20)
    assert got and set(ALL) <= set(got), got
    return b


@pytest.fixture(scope="module")
def body(tmp_path_factory):
    b = start(tmp_path_factory.mktemp("ev"))
    yield b
    b.stop()


def test_sse_sees_offline_back_dispatched_done_in_order(body):
    c = SseClient(body.http[1])
    assert c.status == 200
    body.unplug("led")
    got = c.until(lambda e, d: e == "offline", 20)
    assert got[-1][1]["module_id"] == "LED_001", got[-1]
    body.replug("led")
    got = c.until(lambda e, d: e == "registered" and d["module_id"] == "LED_001", 10)
    assert got[-1][1]["again"] is True
    assert body.wait_menu(ALL, 10)
    status, rep = body.plan(plan(step("b", "led_blink", count=1, period_ms=200)))
    assert status == 200 and rep["ok"], rep
    got = c.until(lambda e, d: e == "plan", 10)
    seq = [(e, d.get("status")) for e, d in got if e in ("step", "event", "plan")]
    assert seq == [("step", "sent"), ("step", "running"), ("event", 0), ("step", "done"),
                   ("plan", None)], seq  # fmt: skip
    c.close()


def test_mcp_session_hears_list_changed_on_unplug_and_replug(body):
    seen = []

    async def handler(msg):
        m = getattr(msg, "root", msg)
        if getattr(m, "method", None) == "notifications/tools/list_changed":
            seen.append(time.monotonic())

    async def wait(n, limit):
        end = time.monotonic() + limit
        while len(seen) < n and time.monotonic() < end:
            await asyncio.sleep(0.02)
        return seen[n - 1] if len(seen) >= n else None

    async def go():
        url = "http://%s:%d/mcp" % body.http
        async with Client(url, message_handler=handler) as c:
            await asyncio.sleep(0.5)  # its GET stream opens after initialized
            t0 = time.monotonic()
            body.unplug("led")
            t = await wait(1, 20)
            assert t is not None, "no list_changed after the unplug"
            assert t - t0 <= 15.5, "unplug: %.2f s" % (t - t0)
            names = [x.name for x in (await c.list_tools()).tools]
            assert names == [x["name"] for x in body.menu()["capabilities"]], names
            assert "led_on" not in names
            t0 = time.monotonic()
            body.replug("led")
            t = await wait(2, 10)
            assert t is not None, "no list_changed after the replug"
            assert t - t0 <= 3.0, "replug: %.2f s" % (t - t0)
            names = [x.name for x in (await c.list_tools()).tools]
            assert names == [x["name"] for x in body.menu()["capabilities"]], names
            assert set(ALL) <= set(names)

            progress = []

            async def on_progress(p, total, message):
                progress.append((time.monotonic(), message))

            t0 = time.monotonic()
            r = await c.call_tool(
                "led_blink", {"count": 3, "period_ms": 500}, progress_callback=on_progress
            )
            return r, time.monotonic() - t0, progress

    r, took, progress = asyncio.run(go())
    assert not r.is_error and r.content[0].text.startswith("led_blink: done"), r
    assert took >= 1.4, "the result came before the blink ended (%.2f s)" % took
    assert any("accepted it, running" in m for _, m in progress), progress


def test_max_subscribers_and_the_status_ring(body):
    streams = [SseClient(body.http[1]) for _ in range(3)]
    assert [s.status for s in streams] == [200, 200, 200]
    extra = SseClient(body.http[1])
    assert extra.status == 503, extra.status
    st = body.status()
    assert st["events"]["subscribers"] == 3 and st["events"]["max_subscribers"] == 3, st["events"]
    kinds = [e["event"] for e in st["recent"]]
    assert "offline" in kinds and "plan" in kinds, kinds
    for s in streams:
        s.close()


@pytest.fixture
def idle_body(tmp_path):
    cfg = {"idle_after_s": 3, "idle": plan(step("idle", "led_blink", count=20, period_ms=400))}
    b = start(tmp_path, master_config=cfg)
    yield b
    b.stop()


def test_idle_plan_runs_after_quiet_and_a_link_plan_preempts_it_in_the_pin_log(idle_body):
    b = idle_body
    m = b.mark()
    toggles = []
    for _ in range(4):  # the idle blink: the LED pin going on and off
        ev = b.wait_for(lambda e: e["src"] == "led" and e.get("event") == "pin", 10, m)
        assert ev is not None, "the idle plan did not blink the LED"
        toggles.append(ev)
        m = b.events.index(ev) + 1
    st = b.status()["idle"]
    assert st["state"] == "running" and st["started"] == 1, st
    t_post = time.monotonic()
    status, rep = b.plan(plan(step("on", "led_on")))
    t_rep = time.monotonic()
    assert status == 200 and rep["ok"], rep
    assert rep["steps"][0]["ms"] < 100, rep
    mark = b.mark()
    on = b.wait_for(
        lambda e: e["src"] == "led" and e.get("event") == "pin" and e.get("at", 0) >= t_post, 5, m
    )
    assert on is not None and on["value"] == 1, on
    assert on["at"] - t_post < t_rep - t_post + 0.1, "the LED went on with the link's plan"
    time.sleep(1.5)  # no blink after it: the pin stays on
    later = b.select(lambda e: e["src"] == "led" and e.get("event") == "pin", mark)
    assert all(e["value"] == 1 for e in later), later
    st = b.status()
    assert st["idle"]["preempted"] == 1, st["idle"]
    idle_rep = [
        e for e in st["recent"] if e["event"] == "plan" and e["steps"][0]["task_id"] == "idle"
    ]
    assert idle_rep and idle_rep[-1]["steps"][0]["status"] == "stopped", st["recent"]
    lines = open(os.path.join(b.out_dir, "led.pins.jsonl")).read().splitlines()
    assert len(lines) >= 5, "the pin log holds the blink and the led_on"
