# MCP for Home Assistant (issue 26) at unit level: the /mcp/<token> URL (a wrong token 404, never 401), tool names and every inputSchema through voluptuous-openapi.
import re

from voluptuous_openapi import convert_to_voluptuous

from fake_body import FakeBody, ServerThread
from master.links import mcptools
from organs.led import led_descriptor
from organs.speaker import speaker_descriptor
from organs.template import button_descriptor
from test_httpd import request
from test_mcp_streams import INIT

TOKEN = "s3cret-Token_42"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _menus():
    yield "fake body", FakeBody().menu()["capabilities"]
    for d in (led_descriptor(), speaker_descriptor(), button_descriptor()):
        yield d["module_id"], d["capabilities"]


def test_every_tool_name_and_schema_suits_home_assistant():
    seen = 0
    for where, caps in _menus():
        for cap in caps:
            t = mcptools.tool_for(cap)
            assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", t["name"]), (where, t["name"])
            try:
                convert_to_voluptuous(t["inputSchema"])  # what HA's coordinator does to each
            except Exception as e:
                raise AssertionError("%s %s: %r" % (where, t["name"], e))
            seen += 1
    assert seen >= 8, seen
    led = mcptools.tool_for(led_descriptor()["capabilities"][2])
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
