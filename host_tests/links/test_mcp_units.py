# MCP message handling over the fake body, run on CPython and on the unix port.
import json

try:
    import asyncio
except ImportError:  # pragma: no cover
    import uasyncio as asyncio

from master.links import mcp, mcptools
from fake_body import FakeBody

UNIX_PORT = True


class Req:
    def __init__(self, msg, headers=None):
        self.json = msg
        self.headers = headers or {}


def call(srv, msg, headers=None):
    return asyncio.run(srv.handle(Req(msg, headers)))


def test_param_schemas_follow_the_descriptor():
    from organbus import menu

    assert mcptools.param_schema is menu.param_schema, "MCP keeps no copy of the menu's mapping"
    s = mcptools.param_schema({"name": "x", "type": "int", "min": 1, "max": 20, "unit": ""})
    assert s == {"type": "integer", "minimum": 1, "maximum": 20}, s
    s = mcptools.param_schema({"name": "x", "type": "float", "min": 0, "max": 1, "unit": "V"})
    assert s == {"type": "number", "minimum": 0, "maximum": 1, "description": "unit: V"}, s
    s = mcptools.param_schema({"name": "x", "type": "bool", "min": 0, "max": 1, "unit": ""})
    assert s == {"type": "boolean"}, s
    s = mcptools.param_schema({"name": "x", "type": "string", "min": 1, "max": 240, "unit": ""})
    assert s == {"type": "string", "minLength": 1, "maxLength": 240}, s


def test_tools_list_is_the_live_menu():
    body = FakeBody()
    srv = mcp.McpServer(body)
    code, out, _ = call(srv, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    names = [t["name"] for t in out["result"]["tools"]]
    assert code == 200 and names == ["led_on", "led_off", "led_blink", "speak", "chime"], out
    body.online = ["LED_001"]
    code, out, _ = call(srv, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    names = [t["name"] for t in out["result"]["tools"]]
    assert names == ["led_on", "led_off", "led_blink"], "offline organ's tools gone: %r" % names


def test_initialize_negotiates_and_declares_only_what_it_sends():
    srv = mcp.McpServer(FakeBody())
    for asked, got in (("2025-03-26", "2025-03-26"), ("2025-11-25", "2025-11-25"),
                       ("2024-11-05", "2025-11-25")):  # fmt: skip
        msg = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": asked, "capabilities": {}}}  # fmt: skip
        code, out, _ = call(srv, msg)
        r = out["result"]
        assert r["protocolVersion"] == got, (asked, r)
        assert r["capabilities"] == {
            "tools": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": False},
        }, r["capabilities"]
    code, out, _ = call(srv, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert (code, out) == (202, None), (code, out)
    # the version is required and a string (the schema's); no session is made without it
    made = srv.sessions.made
    for asked in (None, 20251125, ["2025-11-25"]):
        msg = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": asked, "capabilities": {}}}  # fmt: skip
        code, out, hdrs = call(srv, msg)
        e = out["error"]
        assert e["code"] == -32602 and "protocolVersion must be a string" in e["message"], e
        assert hdrs is None and srv.sessions.made == made, "no session for a refused one"


def test_tools_call_runs_and_reports():
    body = FakeBody()
    srv = mcp.McpServer(body)
    msg = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
           "params": {"name": "led_blink", "arguments": {"count": 2, "period_ms": 5000}}}  # fmt: skip
    code, out, _ = call(srv, msg, {"mcp-protocol-version": "2025-06-18"})
    r = out["result"]
    assert out["id"] == 7 and r["isError"] is False, out
    assert "5000" in r["content"][0]["text"] and "clamps" in r["content"][0]["text"], r
    assert r["structuredContent"]["steps"][0]["status"] == "done", r
    assert body.commands == [("led_blink", {"count": 2, "period_ms": 5000})], body.commands
    assert json.loads(r["content"][1]["text"]) == r["structuredContent"], "the report as JSON text"
    code, out, _ = call(srv, msg, {"mcp-protocol-version": "2025-03-26"})
    assert "structuredContent" not in out["result"], "2025-03-26 has no structured content"
    report = json.loads(out["result"]["content"][1]["text"])
    assert report["steps"][0]["action"] == "led_blink", report
    body.script = {"led_blink": "refused"}
    code, out, _ = call(srv, msg)
    assert out["result"]["isError"] is True and "refused" in out["result"]["content"][0]["text"]


def test_unknown_tool_and_bad_arguments_list_the_tools():
    body = FakeBody(online=["SPK_001"])
    srv = mcp.McpServer(body)
    msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "led_on"}}
    code, out, _ = call(srv, msg)
    e = out["error"]
    assert e["code"] == -32602 and "'led_on'" in e["message"], e
    assert "available tools: speak, chime" in e["message"], e["message"]
    msg["params"] = {"name": "speak", "arguments": {"text": 5}}
    code, out, _ = call(srv, msg)
    e = out["error"]
    assert "text" in e["message"] and "available tools: speak, chime" in e["message"], e
    assert body.commands == [], body.commands
    body.online = []
    msg["params"] = {"name": "speak", "arguments": {"text": "hi"}}
    code, out, _ = call(srv, msg)
    assert "no organ is online" in out["error"]["message"], out


def test_malformed_messages_get_jsonrpc_errors():
    srv = mcp.McpServer(FakeBody())
    cases = [
        ({"id": 1, "method": "ping"}, -32600),
        ({"jsonrpc": "2.0", "id": 1}, -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}, -32602),
        ({"jsonrpc": "2.0", "id": 1, "method": "prompts/list"}, -32601),
        (5, -32600),
    ]
    for msg, want in cases:
        code, out, _ = call(srv, msg)
        assert out["error"]["code"] == want, (msg, out)
    code, out, _ = call(srv, [])
    assert code == 400, (code, out)
    code, out, _ = call(srv, None)
    assert code == 400 and "empty" in out["error"]["message"], out
    code, out, _ = call(srv, {"jsonrpc": "2.0", "id": 1, "result": {}})
    assert code == 202, "a client's response is accepted silently"
    code, out, _ = call(
        srv, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"mcp-protocol-version": "x"}
    )
    assert code == 400 and "x" in out["error"]["message"], out
    assert json.dumps(out), "answers are JSON-serialisable"
