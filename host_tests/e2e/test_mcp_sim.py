# End to end: the MCP SDK client, Body Protocol and a slowloris against the virtual body (master on the unix port).
import asyncio
import json
import os
import socket
import sys
import time

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from e2e_support import running_body
from support import ROOT

PLAN = {
    "heard_req": 0,
    "steps": [{"task_id": "t1", "action": "led_on", "params": {}, "priority": 5, "depends_on": []}],
    "can_execute": True,
    "missing": [],
    "response": "",
}


@pytest.fixture(scope="module")
def body(tmp_path_factory):
    yield from running_body(str(tmp_path_factory.mktemp("sim")))


def mcp_url(b):
    return "http://%s:%d/mcp" % b.http


def call(coro):
    return asyncio.run(coro)


def test_mcp_lists_the_menu_and_runs_led_on(body):
    async def go():
        async with Client(mcp_url(body)) as c:
            tools = (await c.list_tools()).tools
            m = body.mark()
            r = await c.call_tool("led_on", {})
            return tools, r, m

    tools, r, m = call(go())
    menu = body.menu()
    assert [(t.name, t.description) for t in tools] == [
        (c["name"], c["description"]) for c in menu["capabilities"]
    ], "tools are the live menu"
    blink = [t for t in tools if t.name == "led_blink"][0].input_schema
    assert blink["properties"]["count"] == {"type": "integer", "minimum": 1, "maximum": 20}, blink
    assert not r.is_error and r.content[0].text.startswith("led_on: done"), r
    on = body.wait_for(lambda e: e["src"] == "led" and e.get("event") == "pin", 3, m)
    assert on is not None and on["value"] == 1, "the LED pin went on: %r" % on


def test_mcp_unknown_tool_lists_the_tools(body):
    async def go():
        async with Client(mcp_url(body)) as c:
            with pytest.raises(MCPError) as e:
                await c.call_tool("led_disco", {})
            return e.value.error

    err = call(go())
    names = [c["name"] for c in body.menu()["capabilities"]]
    assert err.code == -32602 and "led_disco" in err.message, err
    assert "available tools: " + ", ".join(names) in err.message, err.message


def test_mcp_out_of_range_is_forwarded_and_clamped(body):
    async def go():
        async with Client(mcp_url(body)) as c:
            off = await c.call_tool("led_off", {})
            assert not off.is_error, off
            await asyncio.sleep(0.2)  # the pin log is tailed every 50 ms
            m = body.mark()
            r = await c.call_tool("led_blink", {"count": 2, "period_ms": 20})
            return r, m

    r, m = call(go())
    text = r.content[0].text
    assert not r.is_error, text
    assert "period_ms" in text and "20" in text and "clamps" in text, (
        "the result notes the out-of-range value: " + text
    )

    def is_up(e):
        return e["src"] == "led" and e.get("event") == "pin" and e["value"] == 1

    first = body.wait_for(is_up, 3, m)
    assert first is not None, "the LED blinked"
    body.wait_for(is_up, 3, body.events.index(first) + 1)  # the pin log is tailed, not instant
    pins = body.select(lambda e: e["src"] == "led" and e.get("event") == "pin", m)
    ups = [e["t_ms"] for e in pins if e["value"] == 1]
    assert len(ups) >= 2, "two blinks happened: %r" % pins
    assert ups[1] - ups[0] >= 90, "the organ clamped the period to >= 100 ms: %r" % ups


def test_body_protocol_on_the_virtual_body(body):
    names = [c["name"] for c in body.menu()["capabilities"]]
    code, out = body.request("POST", "/status", {})
    assert code == 200 and out == {"online": "speak" in names}, (code, out, names)
    code, out = body.request("POST", "/look", {"question": "who is there?"})
    assert code == 200 and "no camera" in out["text"], out
    code, out = body.request("POST", "/express", {"emotion": "happy"})
    assert code == 501 and "happy" in out["error"], (code, out)
    if "speak" in names:
        code, out = body.request("POST", "/speak", {"text": "Hello."})
        # 2xx only once the organ accepted; otherwise the master's reason, never a fake 200.
        assert code == 200 and out == {} or code >= 500 and "speak failed" in out["error"], (
            code,
            out,
        )


def test_slowloris_does_not_delay_a_plan_on_the_unix_port_master(body):
    def plan_ms():
        t0 = time.monotonic()
        code, out = body.request("POST", "/plan", PLAN)
        assert code == 200 and out["ok"], (code, out)
        return (time.monotonic() - t0) * 1000

    base = min(plan_ms() for _ in range(3))
    held = []
    for _ in range(2):
        k = socket.create_connection(body.http, timeout=5)
        k.sendall(b"POST /plan HTTP/1.1\r\nContent-Length: 400\r\n")
        held.append(k)
    try:
        with_slow = []
        for _ in range(3):
            for k in held:
                k.sendall(b"X-Drip: 1\r\n")
            with_slow.append(plan_ms())
            time.sleep(0.05)
    finally:
        for k in held:
            k.close()
    assert min(with_slow) - base < 100, "base %.1f ms, with slowloris %r" % (base, with_slow)


def test_chat_bridge_drives_the_virtual_body(body):
    # the stand-in model of the chat bridge's own tests (host_tests/links/test_chat.py)
    sys.path.insert(0, os.path.join(ROOT, "host_tests", "links"))
    from test_chat import StandInModel, recorded_completion, run_chat

    plan = dict(PLAN, steps=[dict(PLAN["steps"][0], action="led_off")], response="Light off.")
    model = StandInModel(recorded_completion(json.dumps(plan)))
    m = body.mark()
    try:
        r = run_chat(body.http[1], model.url, "Switch the light off.")
    finally:
        model.close()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "body: Light off." in r.stdout and "t1 led_off: done" in r.stdout, r.stdout
    sent = model.requests[0]["body"]
    names = [c["name"] for c in body.menu()["capabilities"]]
    assert sent["response_format"]["json_schema"]["schema"] == body.menu()["plan_schema"]
    assert all('"%s"' % n in sent["messages"][0]["content"] for n in names), "menu in the prompt"
    ev = body.wait_for(lambda e: e.get("event") == "command" and e.get("name") == "led_off", 3, m)
    assert ev is not None and ev["src"] == "led", "the plan reached the LED organ: %r" % ev


def test_unplugged_organs_leave_the_tools_and_status(body):
    """Speaker unplugged first, the LED organ 4 s later: each leaves the tools when it goes
    offline (15 s without a frame), and /status follows the speaker."""

    async def tools_now():
        async with Client(mcp_url(body)) as c:
            tools = [t.name for t in (await c.list_tools()).tools]
            try:
                await c.call_tool("led_on", {})
                err = None
            except MCPError as e:
                err = e.error
            return tools, err

    def offline(mid):
        return lambda e: e.get("event") == "offline" and e.get("module_id") == mid

    m = body.mark()
    body.unplug("speaker")
    time.sleep(4)
    body.unplug("led")
    try:
        assert body.wait_for(offline("SPK_001"), 25, m), "the speaker went offline (15 s + slack)"
        assert not body.select(offline("LED_001"), m), "the LED organ is still online here"
        tools, err = call(tools_now())
        assert tools == ["led_on", "led_off", "led_blink"], "speaker's tools gone: %r" % tools
        assert err is None, "led_on still works: %r" % err
        code, out = body.request("POST", "/status", {})
        assert (code, out) == (200, {"online": False}), "no speaker, not online: %r" % out
        code, out = body.request("POST", "/speak", {"text": "anyone?"})
        assert code == 503 and "speaker" in out["error"], (code, out)
        assert body.wait_for(offline("LED_001"), 15, m), "the LED organ went offline"
        tools, err = call(tools_now())
        assert tools == [], "the LED organ's tools are gone too: %r" % tools
        assert err.code == -32602 and "no organ is online" in err.message, err
    finally:
        body.replug("led")
        body.replug("speaker")
    got = body.wait_menu(["led_on", "chime"], 20)
    assert got and "led_on" in got and "chime" in got, "the organs came back: %r" % got
    code, out = body.request("POST", "/status", {})
    assert out == {"online": "speak" in got}, (out, got)
