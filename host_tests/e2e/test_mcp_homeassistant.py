# End to end: a client built like Home Assistant's MCP coordinator, given only the secret URL, against the virtual body (issue 26).
#
# homeassistant/components/mcp/coordinator.py (read for issue 26, docs/peers.md section 1): the
# MCP SDK's Streamable HTTP client on an httpx client with httpx's default 5 s timeout, a new
# session (initialize + one request + DELETE) for the tools poll and for every tool call, each
# under asyncio.timeout(10), every inputSchema through voluptuous_openapi.convert_to_voluptuous.
import asyncio
import http.client
import json
import time
from contextlib import asynccontextmanager

import httpx2
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from voluptuous_openapi import convert_to_voluptuous

from e2e_support import running_body

TOKEN = "ha-Secret_0123456789abcdef"
TIMEOUT = 10  # coordinator.py TIMEOUT
READ_S = 5.0  # httpx's default timeout: HA's create_async_httpx_client sets none


@pytest.fixture(scope="module")
def body(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("ha"))
    yield from running_body(out, master_config={"http": {"token": TOKEN}})


def secret_url(b, token=TOKEN):
    return "http://%s:%d/mcp/%s" % (b.http[0], b.http[1], token)


@asynccontextmanager
async def mcp_client(url, terminate=True):
    """coordinator.py mcp_client, Streamable HTTP (HA falls back to SSE only on a 405)."""
    async with httpx2.AsyncClient(timeout=READ_S) as http:
        async with streamable_http_client(
            url, http_client=http, terminate_on_close=terminate
        ) as streams:
            async with ClientSession(*streams[:2]) as session:
                result = await session.initialize()
                yield session, result


async def update_data(url):
    """ModelContextProtocolCoordinator._async_update_data: the tools, their schemas converted
    (HA reads tool.inputSchema of the 1.x SDK; 2.x names it input_schema)."""
    async with asyncio.timeout(TIMEOUT):
        async with mcp_client(url) as (session, init):
            result = await session.list_tools()
    return init, result.tools, [convert_to_voluptuous(t.input_schema) for t in result.tools]


async def async_call(url, name, args, terminate=True):
    """ModelContextProtocolTool.async_call: a new session for the call, 10 s for all of it."""
    async with asyncio.timeout(TIMEOUT):
        async with mcp_client(url, terminate) as (session, _):
            result = await session.call_tool(name, args)
    # what HA hands its LLM; by_alias: the wire's names, as the 1.x SDK HA runs dumps them
    return result.model_dump(exclude_unset=True, exclude_none=True, by_alias=True)


def test_home_assistant_lists_the_tools_and_every_schema_converts(body):
    init, tools, schemas = asyncio.run(update_data(secret_url(body)))
    assert init.capabilities.tools is not None, "HA aborts without capabilities.tools"
    assert init.server_info.name == "organbus", init.server_info
    menu = [c["name"] for c in body.menu()["capabilities"]]
    assert [t.name for t in tools] == menu, "the live menu, one page"
    blink = schemas[menu.index("led_blink")]
    assert blink({"count": 20, "period_ms": 2000}) == {"count": 20, "period_ms": 2000}


def test_a_wrong_token_is_404_not_401(body):
    for path in ("/mcp/" + TOKEN[:-1] + "x", "/mcp/"):
        c = http.client.HTTPConnection(*body.http, timeout=5)
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        c.request("POST", path, json.dumps(init), {"Content-Type": "application/json"})
        r = c.getresponse()
        out = json.loads(r.read())
        c.close()
        assert r.status == 404 and r.getheader("WWW-Authenticate") is None, (path, r.status)
        assert out == {"error": "no route /mcp/<token> with that token"}, out

    async def go():
        with pytest.raises(Exception) as e:
            await update_data(secret_url(body, "nope"))
        return e.value

    err = repr(asyncio.run(go()))
    # the SDK (2.x) turns a 404 into an MCPError "Not Found"; HA then tries SSE, GET: 404 again
    assert "Not Found" in err and "401" not in err and "Unauthorized" not in err, err


def test_a_session_opened_before_survives_50_per_call_sessions(body):
    # half of the per-call sessions end with the SDK's DELETE, half never do (a call HA's
    # timeout cut short): those fill the table, and the eviction takes idle ones only
    def evicted():
        return body.status()["mcp"]["sessions_evicted"]

    async def go():
        before = evicted()
        async with Client(secret_url(body)) as held:
            assert (await held.call_tool("led_on", {})).content[0].text.startswith("led_on")
            took = []
            for i in range(50):
                t0 = time.monotonic()
                name = "led_off" if i % 2 else "led_on"
                r = await async_call(secret_url(body), name, {}, terminate=i % 2 == 0)
                took.append(time.monotonic() - t0)
                assert r["isError"] is False and r["content"][0]["text"].startswith(name), r
            tools = [t.name for t in (await held.list_tools()).tools]
            r = await held.call_tool("led_blink", {"count": 1, "period_ms": 100})
        return before, took, tools, r

    before, took, tools, r = asyncio.run(go())
    assert "led_blink" in tools and r.content[0].text.startswith("led_blink: done"), r
    st = body.status()["mcp"]
    assert st["sessions"] <= 8, st
    assert st["sessions_evicted"] - before >= 25 - 8, "the undeleted sessions were evicted: %r" % st
    assert max(took) < TIMEOUT, took


def test_home_assistant_calls_a_40_s_blink_and_gets_its_answer_within_10_s(body):
    m = body.mark()
    t0 = time.monotonic()
    r = asyncio.run(async_call(secret_url(body), "led_blink", {"count": 20, "period_ms": 2000}))
    took = time.monotonic() - t0
    text = r["content"][0]["text"]
    assert took < TIMEOUT, "answered after %.1f s" % took
    assert r["isError"] is False and text.startswith("led_blink: started"), text
    assert "runs up to 40 s in all" in text and "goes on" in text, text

    def up(e):
        return e["src"] == "led" and e.get("event") == "pin" and e["value"] == 1

    answered = body.mark()
    assert body.wait_for(up, 5, answered), "the blink goes on after the answer"
    assert body.select(up, m), "it blinked"
