# MCP tools over the real master Body with scripted fake organs on a fake clock (both interpreters).
from master.links import mcp
from test_bodyproto_master import rig_with, run_with_clock

UNIX_PORT = True


class Req:
    def __init__(self, msg):
        self.json = msg
        self.headers = {"mcp-protocol-version": "2025-11-25"}


def rpc(rig, method, params=None):
    srv = mcp.McpServer(rig.body)
    msg = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    (code, out, _), _ = run_with_clock(rig, srv.handle(Req(msg)))
    assert code == 200, (code, out)
    return out


def test_tools_are_the_live_menu_with_descriptor_schemas():
    rig = rig_with()
    tools = rpc(rig, "tools/list")["result"]["tools"]
    menu = rig.body.menu()
    assert [t["name"] for t in tools] == [c["name"] for c in menu["capabilities"]], tools
    by = {}
    for t in tools:
        by[t["name"]] = t["inputSchema"]
    assert by["led_blink"]["properties"]["period_ms"] == {
        "type": "integer", "minimum": 100, "maximum": 2000, "description": "unit: ms"}  # fmt: skip
    assert by["speak"]["properties"]["text"]["maxLength"] == 240, by["speak"]
    assert by["chime"] == {"type": "object", "properties": {}, "required": [],
                           "additionalProperties": False}  # fmt: skip
    # 15 s without a frame from the speaker: its tools leave the list.
    rig.organs[1].alive = False
    rig.advance(16000)
    names = [t["name"] for t in rpc(rig, "tools/list")["result"]["tools"]]
    assert names == ["led_on", "led_off", "led_blink"], names


def test_call_runs_through_validation_and_scheduler():
    rig = rig_with()
    r = rpc(rig, "tools/call", {"name": "led_blink", "arguments": {"count": 50, "period_ms": 100}})
    res = r["result"]
    assert res["isError"] is False, res
    assert "outside 1..20" in res["content"][0]["text"], res["content"][0]["text"]
    assert "the organ clamps" in res["content"][0]["text"], res["content"][0]["text"]
    assert res["structuredContent"]["steps"][0]["status"] == "done", res
    cmds = rig.organs[0].commands
    assert [c[1] for c in cmds] == ["led_blink"] and list(cmds[0][2]) == [50.0, 100.0], cmds


def test_bad_arguments_carry_the_masters_problems():
    rig = rig_with()
    r = rpc(rig, "tools/call", {"name": "led_blink", "arguments": {"count": 2.5, "period_ms": 100}})
    e = r["error"]
    assert e["code"] == -32602 and "steps[0].params.count" in e["message"], e
    assert "available tools: led_on, led_off, led_blink, speak, announce, chime" in e["message"], e
    assert rig.commands_sent() == 0, "nothing ran"


def test_refusal_and_timeout_are_tool_errors_with_the_reason():
    rig = rig_with(resp=1)
    res = rpc(rig, "tools/call", {"name": "chime"})["result"]
    assert res["isError"] is True and "SPK_001 answered 1" in res["content"][0]["text"], res
    rig = rig_with(resp=None)
    res = rpc(rig, "tools/call", {"name": "chime"})["result"]
    assert res["isError"] is True and "no COMMAND_RESP" in res["content"][0]["text"], res
    assert res["content"][0]["text"].startswith("chime: timeout"), res


def test_a_duplicate_argument_is_a_problem_of_the_call():
    # The HTTP body is read strictly (httpd Request.json): a repeated argument is not silently
    # the last value, it is refused like a repeated key in a plan, and nothing is sent.
    from master.links.httpd import Request

    rig = rig_with()
    before = rig.commands_sent()
    req = Request("POST", "/mcp", "", {"mcp-protocol-version": "2025-11-25"}, "127.0.0.1")
    req.content = (
        b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "led_blink",'
        b' "arguments": {"count": 2, "count": 3, "period_ms": 100}}}'
    )
    srv = mcp.McpServer(rig.body)
    (code, out, _), _ = run_with_clock(rig, srv.handle(req))
    assert code == 200 and out["error"]["code"] == mcp.INVALID_PARAMS, out
    assert out["error"]["data"]["problems"] == ['steps[0].params: duplicate key "count"'], out
    assert rig.commands_sent() == before, "a COMMAND left for a refused call"
