# MCP server on the master (Streamable HTTP, JSON responses): one tool per capability of the live menu.
#
# Stateless: no Mcp-Session-Id is issued, so every POST stands alone and a board keeps no
# per-client state. No SSE stream is offered (GET /mcp answers 405), so the server can
# never send notifications/tools/list_changed and does not declare it: clients list the
# tools again when they need the current organs.
import json

from micropython import const

from organbus.menu import param_schema
from organbus.plan import one_step

from master.outcome import PROBLEMS, REPORT

# Handshake-era revisions whose transport is Streamable HTTP, newest first.
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
SERVER_INFO = {"name": "organbus", "version": "0.1.0"}
INSTRUCTIONS = (
    "Each tool is one ability of an organ on the robot's bus; a call runs it as a one-step "
    "plan through the master's validation and scheduler and returns the master's report. "
    "Numbers outside a parameter's range are forwarded as given and clamped by the organ. "
    "The tool list follows the organs that are online now: list again when a call fails."
)

INVALID_REQUEST = const(-32600)
METHOD_NOT_FOUND = const(-32601)
INVALID_PARAMS = const(-32602)
INTERNAL_ERROR = const(-32603)

_FAILED = {
    "refused": "the organ refused the command (it answered status 1)",
    "timeout": "the organ did not answer the command within 1 s",
    "offline": "the organ went offline",
    "stopped": "the organ stopped before finishing",
    "skipped": "the step was skipped",
}


def tool_for(cap):
    """The MCP tool of one menu capability."""
    props = {}
    names = []
    for p in cap.get("params", ()):
        props[p["name"]] = param_schema(p)
        names.append(p["name"])
    return {
        "name": cap["name"],
        "description": cap.get("description", ""),
        "inputSchema": {
            "type": "object",
            "properties": props,
            "required": names,
            "additionalProperties": False,
        },
    }


def tools(menu):
    return [tool_for(c) for c in menu.get("capabilities", ())]


def _error(mid, code, message, data=None):
    err = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": mid, "error": err}


def _result(mid, result):
    return {"jsonrpc": "2.0", "id": mid, "result": result}


def _summary(step):
    """One honest line for a step of the report."""
    line = "%s: %s" % (step.get("action"), step.get("status"))
    if "ms" in step:
        line += " (%s ms)" % step["ms"]
    why = step.get("reason") or _FAILED.get(step.get("status"))
    if why:
        line += ": " + why
    return line


class McpServer:
    """Answers MCP JSON-RPC messages against a master Body (see docs/DESIGN.md)."""

    def __init__(self, body):
        self.body = body
        self.calls = 0

    def tool_names(self):
        return [c["name"] for c in self.body.menu().get("capabilities", ())]

    async def handle(self, req):
        """The `POST /mcp` route: (status, payload, headers)."""
        want = req.headers.get("mcp-protocol-version")
        if want is not None and want not in PROTOCOL_VERSIONS:
            return (
                400,
                _error(
                    None,
                    INVALID_REQUEST,
                    "unsupported MCP-Protocol-Version %r; this server speaks %s"
                    % (want[:40], ", ".join(PROTOCOL_VERSIONS)),
                    {"supported": list(PROTOCOL_VERSIONS)},
                ),
                None,
            )
        version = want or "2025-03-26"
        msg = req.json  # parsed here, strictly, on first use (master/httpd.py Request.json)
        dups = getattr(req, "json_dups", ())
        if isinstance(msg, list):
            if not msg:
                return 400, _error(None, INVALID_REQUEST, "empty JSON-RPC batch"), None
            out = []
            for i, m in enumerate(msg):
                r = await self.dispatch(m, version, _arg_dups(dups, "[%d].params.arguments" % i))
                if r is not None:
                    out.append(r)
            return (200, out, None) if out else (202, None, None)
        if msg is None:
            return 400, _error(None, INVALID_REQUEST, "empty body: send one JSON-RPC message"), None
        r = await self.dispatch(msg, version, _arg_dups(dups, "params.arguments"))
        if r is None:
            return 202, None, None
        return 200, r, None

    async def dispatch(self, msg, version, dups=()):
        """One JSON-RPC message -> response dict, or None for notifications and responses.
        `dups`: duplicate keys the strict read found in its tool arguments, as plan paths."""
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            return _error(
                None, INVALID_REQUEST, 'not a JSON-RPC 2.0 message (need "jsonrpc": "2.0")'
            )
        method = msg.get("method")
        if "id" not in msg:
            if isinstance(method, str):
                return None  # notification (notifications/initialized and any other)
            if "result" in msg or "error" in msg:
                return None  # a response to a request this server never sends
            return _error(None, INVALID_REQUEST, "message has neither method nor id")
        mid = msg["id"]
        if not isinstance(method, str):
            if "result" in msg or "error" in msg:
                return None
            return _error(mid, INVALID_REQUEST, "request without a method")
        params = msg.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return _error(mid, INVALID_PARAMS, "params must be an object")
        try:
            if method == "initialize":
                return _result(mid, self.initialize(params))
            if method == "ping":
                return _result(mid, {})
            if method == "tools/list":
                return _result(mid, {"tools": tools(self.body.menu())})
            if method == "tools/call":
                return await self.call_tool(mid, params, version, dups)
        except MemoryError:
            raise  # the server answers 503 with a prebuilt response
        except Exception as e:
            return _error(mid, INTERNAL_ERROR, "internal error in %s: %r" % (method, e))
        return _error(
            mid,
            METHOD_NOT_FOUND,
            "method not found: %s (this server offers initialize, ping, tools/list, tools/call)"
            % method[:60],
        )

    def initialize(self, params):
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": SERVER_INFO,
            "instructions": INSTRUCTIONS,
        }

    async def call_tool(self, mid, params, version, dups=()):
        name = params.get("name")
        args = params.get("arguments")
        names = self.tool_names()
        listed = ", ".join(names) if names else "none (no organ is online)"
        if not isinstance(name, str) or name not in names:
            return _error(
                mid,
                INVALID_PARAMS,
                "unknown tool %r; available tools: %s" % (name, listed),
                {"tools": names},
            )
        if args is None:
            args = {}
        if not isinstance(args, dict):
            return _error(
                mid,
                INVALID_PARAMS,
                "arguments of %r must be an object; available tools: %s" % (name, listed),
                {"tools": names},
            )
        plan = one_step(name, args)
        self.calls += 1
        kind, out = await self.body.execute(plan, None, dups)
        if kind == PROBLEMS:
            problems = out.get("problems", [])
            return _error(
                mid,
                INVALID_PARAMS,
                "invalid arguments for %r: %s; available tools: %s"
                % (name, "; ".join(problems), listed),
                {"problems": problems, "tools": names},
            )
        if kind != REPORT:
            return _error(mid, INTERNAL_ERROR, "the master answered %s: %s" % (kind, out))
        steps = out.get("steps") or [{"action": name, "status": "missing from report"}]
        lines = [_summary(s) for s in steps]
        for n in out.get("notes", ()):
            lines.append("note: " + n)
        # The line for people first, then the master's report as JSON text (the spec asks
        # for the serialized JSON beside structuredContent, and 2025-03-26 has only this).
        result = {
            "content": [
                {"type": "text", "text": "\n".join(lines)},
                {"type": "text", "text": json.dumps(out)},
            ],
            "isError": not out.get("ok", False),
        }
        if version != "2025-03-26":
            result["structuredContent"] = out
        return _result(mid, result)


def _arg_dups(dups, prefix):
    # duplicate keys inside a tools/call's arguments, named as the one-step plan's params
    out = []
    for path, k in dups:
        if path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "["):
            out.append(("steps[0].params" + path[len(prefix) :], k))
    return out


def routes(body):
    """The MCP route for httpd.serve: {("POST", "/mcp"): handler}."""
    return {("POST", "/mcp"): McpServer(body).handle}
