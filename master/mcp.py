# MCP server on the master (Streamable HTTP): one tool per capability of the live menu, the body's status and reports as resources.
#
# `initialize` makes a session (Mcp-Session-Id, master/mcpstream.py) so the client can hold
# the GET /mcp stream: `notifications/tools/list_changed` on every menu change and
# `notifications/resources/updated` for the resources it subscribed. A POST without a
# session id still stands alone. A `tools/call` with a progressToken is answered as an SSE
# stream: `notifications/progress` while the step runs, then the result once it finished.
# Tools carry no annotations: a descriptor has no title or hints to take them from.
import json

from micropython import const

from organbus.menu import param_schema
from organbus.plan import one_step

from master.mcpstream import SSE_HEAD, CallStream, NotifyStream, Sessions, notification
from master.outcome import ACCEPTED, PROBLEMS, REPORT

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
RESOURCE_NOT_FOUND = const(-32002)
STREAM_RETRY_S = "5"  # Retry-After of a GET /mcp refused by the stream bounds (mcpstream.py)

STATUS_URI = "organbus://status"
REPORTS_URI = "organbus://reports"
RESOURCES = [
    {
        "uri": STATUS_URI,
        "name": "status",
        "description": "The body's /status document: organs, ports, plans, the event ring.",
        "mimeType": "application/json",
    },
    {
        "uri": REPORTS_URI,
        "name": "reports",
        "description": "The last plan reports and refused plans, oldest first.",
        "mimeType": "application/json",
    },
]
# hub events after which a resource reads differently
_STATUS_EVENTS = ("registered", "refused", "offline", "duplicate", "plan", "rejected")
_REPORT_EVENTS = ("plan", "rejected")
_HEARS = ("menu",) + _STATUS_EVENTS

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

    def __init__(self, body, sessions=None):
        self.body = body
        self.calls = 0
        self.sessions = sessions if sessions is not None else Sessions()
        hub = getattr(body, "hub", None)
        if hub is not None:
            hub.subscribe(self.on_event, _HEARS)

    def on_event(self, event, port, data):
        """Hub subscriber: queue notifications for the sessions' open GET streams."""
        ss = self.sessions
        if event == "menu":
            ss.push_all(notification("notifications/tools/list_changed"))
        if event in _STATUS_EVENTS:
            ss.push_subscribed(STATUS_URI)
        if event in _REPORT_EVENTS:
            ss.push_subscribed(REPORTS_URI)

    def _session_of(self, req):
        """(session or None, refusal (status, payload, headers) or None)."""
        sid = req.headers.get("mcp-session-id")
        if sid is None:
            return None, None
        s = self.sessions.get(sid)
        if s is None:
            why = "unknown or ended Mcp-Session-Id; initialize again"
            return None, (404, _error(None, INVALID_REQUEST, why), None)
        return s, None

    async def stream(self, req):
        """The `GET /mcp` route: the session's notification stream."""
        if "text/event-stream" not in req.headers.get("accept", ""):
            return 406, {"error": "GET /mcp is an event stream: send Accept: text/event-stream"}
        if req.headers.get("mcp-session-id") is None:
            why = "GET /mcp needs the Mcp-Session-Id that initialize answered"
            return 400, _error(None, INVALID_REQUEST, why), None
        s, refusal = self._session_of(req)
        if refusal:
            return refusal
        why = self.sessions.refusal(s)
        if why:
            return 503, {"error": why}, {"Retry-After": STREAM_RETRY_S}
        return 200, NotifyStream(self.sessions, s), SSE_HEAD

    async def end(self, req):
        """The `DELETE /mcp` route: the session ends."""
        sid = req.headers.get("mcp-session-id")
        if sid is None or self.sessions.end(sid) is None:
            return 404, {"error": "no such session"}, None
        return 200, None, None

    def stats(self):
        ss = self.sessions
        return {
            "sessions": len(ss.table),
            "streams": ss.streams,
            "streams_refused": ss.refused,
            "notified": ss.notified,
            "calls": self.calls,
        }

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
        session, refusal = self._session_of(req)
        if refusal:
            return refusal
        msg = req.json  # parsed here, strictly, on first use (master/httpd.py Request.json)
        dups = getattr(req, "json_dups", ())
        if isinstance(msg, dict) and msg.get("method") == "initialize" and "id" in msg:
            r = await self.dispatch(msg, version)
            if "result" in r:
                session = self.sessions.new()
                return 200, r, {"Mcp-Session-Id": session.id}
            return 200, r, None
        if isinstance(msg, dict) and msg.get("method") == "tools/call" and "id" in msg:
            streamed = self.call_streamed(msg, version, _arg_dups(dups, "params.arguments"))
            if streamed is not None:
                return streamed
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
        r = await self.dispatch(msg, version, _arg_dups(dups, "params.arguments"), session)
        if r is None:
            return 202, None, None
        return 200, r, None

    async def dispatch(self, msg, version, dups=(), session=None):
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
            if method == "resources/list":
                return _result(mid, {"resources": RESOURCES})
            if method == "resources/read":
                return self.read_resource(mid, params)
            if method in ("resources/subscribe", "resources/unsubscribe"):
                return self.subscribe(mid, params, session, method == "resources/subscribe")
        except MemoryError:
            raise  # the server answers 503 with a prebuilt response
        except Exception as e:
            return _error(mid, INTERNAL_ERROR, "internal error in %s: %r" % (method, e))
        return _error(
            mid,
            METHOD_NOT_FOUND,
            "method not found: %s (this server offers initialize, ping, tools/list, tools/call, "
            "resources/list, resources/read, resources/subscribe, resources/unsubscribe)"
            % method[:60],
        )

    def initialize(self, params):
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        return {
            "protocolVersion": version,
            "capabilities": {
                "tools": {"listChanged": True},
                "resources": {"subscribe": True, "listChanged": False},
            },
            "serverInfo": SERVER_INFO,
            "instructions": INSTRUCTIONS,
        }

    def _call_args(self, mid, params):
        """(name, args, names, listed) of a tools/call, or an error response."""
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
        return name, args, names, listed

    def _problems(self, mid, name, out, names, listed):
        problems = out.get("problems", [])
        return _error(
            mid,
            INVALID_PARAMS,
            "invalid arguments for %r: %s; available tools: %s"
            % (name, "; ".join(problems), listed),
            {"problems": problems, "tools": names},
        )

    async def call_tool(self, mid, params, version, dups=()):
        got = self._call_args(mid, params)
        if isinstance(got, dict):
            return got
        name, args, names, listed = got
        plan = one_step(name, args)
        self.calls += 1
        kind, out = await self.body.execute(plan, None, dups)
        if kind == PROBLEMS:
            return self._problems(mid, name, out, names, listed)
        if kind != REPORT:
            return _error(mid, INTERNAL_ERROR, "the master answered %s: %s" % (kind, out))
        return self._tool_result(mid, name, out, version)

    def call_streamed(self, msg, version, dups=()):
        """A tools/call with a progressToken: (200, CallStream, SSE head) once its plan was
        accepted, an error response when it was not; None without a token (answered as JSON)."""
        params = msg.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        if token is None or not isinstance(token, (str, int)):
            return None
        mid = msg["id"]
        got = self._call_args(mid, params)
        if isinstance(got, dict):
            return 200, got, None
        name, args, names, listed = got
        self.calls += 1
        box = []

        def on_accept(task_id, status):
            if box:
                box[0].on_accept(task_id, status)

        def on_done(run):
            if box:
                box[0].on_done(run)

        kind, run = self.body.submit(one_step(name, args), on_accept, on_done, dups)
        if kind == PROBLEMS:
            return 200, self._problems(mid, name, run, names, listed), None
        if kind != ACCEPTED:
            return (
                200,
                _error(mid, INTERNAL_ERROR, "the master answered %s: %s" % (kind, run)),
                None,
            )

        def finish(report):
            return self._tool_result(mid, name, report, version)

        box.append(CallStream(self.body, run, token, finish))
        return 200, box[0], SSE_HEAD

    def _tool_result(self, mid, name, out, version):
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

    def read_resource(self, mid, params):
        uri = params.get("uri")
        if uri == STATUS_URI:
            obj = self.body.status()
        elif uri == REPORTS_URI:
            obj = self.reports()
        else:
            return _error(
                mid,
                RESOURCE_NOT_FOUND,
                "no resource %r; this server has %s, %s" % (uri, STATUS_URI, REPORTS_URI),
                {"uri": uri},
            )
        text = json.dumps(obj)
        return _result(
            mid, {"contents": [{"uri": uri, "mimeType": "application/json", "text": text}]}
        )

    def reports(self):
        ring = getattr(self.body, "recent", None)
        items = ring.items() if ring is not None else []
        return {"reports": [e for e in items if e["event"] in _REPORT_EVENTS]}

    def subscribe(self, mid, params, session, on):
        uri = params.get("uri")
        if uri not in (STATUS_URI, REPORTS_URI):
            return _error(mid, RESOURCE_NOT_FOUND, "no resource %r to subscribe" % (uri,))
        if session is None:
            why = "resources/subscribe needs a session: send the Mcp-Session-Id of initialize"
            return _error(mid, INVALID_REQUEST, why)
        if on and uri not in session.subscribed:
            session.subscribed.append(uri)
        elif not on and uri in session.subscribed:
            session.subscribed.remove(uri)
        return _result(mid, {})


def _arg_dups(dups, prefix):
    # duplicate keys inside a tools/call's arguments, named as the one-step plan's params
    out = []
    for path, k in dups:
        if path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "["):
            out.append(("steps[0].params" + path[len(prefix) :], k))
    return out


def routes(body):
    """The MCP routes for httpd.serve: POST (messages), GET (the session's stream), DELETE."""
    srv = McpServer(body)
    if hasattr(body, "report"):
        body.report.attach("mcp", srv.stats)
    return {("POST", "/mcp"): srv.handle, ("GET", "/mcp"): srv.stream, ("DELETE", "/mcp"): srv.end}
