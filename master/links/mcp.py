# MCP server on the master (Streamable HTTP): one tool per capability of the live menu, the body's status and reports as resources.
#
# `initialize` makes a session (Mcp-Session-Id, master/links/mcpstream.py) so the client can hold
# the GET /mcp stream: `notifications/tools/list_changed` on every menu change and
# `notifications/resources/updated` for the resources it subscribed. A POST without a
# session id still stands alone. A `tools/call` with a progressToken is answered as an SSE
# stream: `notifications/progress` while the step runs, then the result once it finished;
# without one a step still running after CALL_WAIT_MS is answered then, as started, and goes
# on (a client's deadline: Home Assistant's 5 s read timeout). The routes also answer at
# `/mcp/<token>` (httpd: the token in the path for a client that holds only a URL).
# Tools carry no annotations: a descriptor has no title or hints to take them from.
import asyncio
import json

from micropython import const

from organbus.menu import param_schema
from organbus.plan import one_step
from organbus.ticks import ticks_add, ticks_diff, ticks_ms

from master.links.httpd import HttpError
from master.links.mcpstream import SSE_HEAD, Call, CallStream, NotifyStream, Sessions
from master.links.mcpstream import cancelled, notification
from master.bus.outcome import ACCEPTED, OFFLINE, PROBLEMS, REFUSED, REPORT, SKIPPED, STOPPED
from master.bus.outcome import RUNNING, SENT, TIMEOUT

# Handshake-era revisions whose transport is Streamable HTTP, newest first.
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
SERVER_INFO = {"name": "organbus", "version": "0.1.0"}
INSTRUCTIONS = (
    "Each tool is one ability of an organ on the robot's bus; a call runs it as a one-step "
    "plan through the master's validation and scheduler and returns the master's report. "
    "Numbers outside a parameter's range are forwarded as given and clamped by the organ. "
    "The tool list follows the organs that are online now: list again when a call fails."
)

PARSE_ERROR = const(-32700)
INVALID_REQUEST = const(-32600)
METHOD_NOT_FOUND = const(-32601)
INVALID_PARAMS = const(-32602)
INTERNAL_ERROR = const(-32603)
RESOURCE_NOT_FOUND = const(-32002)
STREAM_RETRY_S = "5"  # Retry-After of a GET /mcp refused by the stream bounds (mcpstream.py)
# A tools/call without a progressToken whose step still runs this long after it came is
# answered then, saying it started and for how long it runs; the step goes on. Under Home
# Assistant's 5 s read timeout (httpx's default) with room for the handshake.
CALL_WAIT_MS = const(3000)
SECRET_PATH = "/mcp/<token>"  # the routes' URL form with the token in it (httpd.py)

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
    REFUSED: "the organ refused the command (it answered status 1)",
    TIMEOUT: "the organ did not answer the command within 1 s",
    OFFLINE: "the organ went offline",
    STOPPED: "the organ stopped before finishing",
    SKIPPED: "the step was skipped",
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

    def __init__(self, body, sessions=None, call_wait_ms=CALL_WAIT_MS):
        self.body = body
        self.call_wait_ms = call_wait_ms
        self.calls = 0
        self.calls_early = 0  # answered as started, the step still running (CALL_WAIT_MS)
        self.cancels = 0  # notifications/cancelled that cancelled a call in flight
        self.cancels_ignored = 0  # unknown, finished, malformed or sessionless ones
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
            "sessions_evicted": ss.evicted,
            "sessions_expired": ss.expired,
            "sessions_full": ss.full,
            "streams": ss.streams,
            "streams_refused": ss.refused,
            "notified": ss.notified,
            "calls": self.calls,
            "calls_early": self.calls_early,
            "cancelled": self.cancels,
            "cancels_ignored": self.cancels_ignored,
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
        session, refusal = self._session_of(req)
        if refusal:
            return refusal
        # the header, else what the session's initialize agreed, else (the spec) 2025-03-26
        version = want or (session.version if session is not None else None) or "2025-03-26"
        try:
            msg = (
                req.json
            )  # parsed here, strictly, on first use (master/links/httpd.py Request.json)
        except HttpError as e:
            return 400, _error(None, PARSE_ERROR, "parse error: " + e.reason), None
        dups = getattr(req, "json_dups", ())
        if isinstance(msg, list):
            return await self.batch(msg, version, dups, session)
        if msg is None:
            return 400, _error(None, INVALID_REQUEST, "empty body: send one JSON-RPC message"), None
        if isinstance(msg, dict) and msg.get("method") == "initialize" and "id" in msg:
            r = await self.dispatch(msg, version)
            made = self.sessions.new(r["result"]["protocolVersion"]) if "result" in r else None
            if made is None:  # refused, or every session in use: the client goes on without
                return 200, r, None
            return 200, r, {"Mcp-Session-Id": made.id}
        if isinstance(msg, dict) and msg.get("method") == "tools/call":
            streamed = self.call_streamed(
                msg, version, _arg_dups(dups, "params.arguments"), session
            )
            if streamed is not None:
                return streamed
        r = await self.dispatch(msg, version, _arg_dups(dups, "params.arguments"), session)
        if r is None:
            return 202, None, None
        return 200, r, None

    async def batch(self, msgs, version, dups, session):
        """A JSON-RPC batch: only in 2025-03-26 (2025-06-18 took batching out of MCP), each
        message within the POST's session; `initialize` may not be in one (2025-03-26)."""
        if version != "2025-03-26":
            why = (
                "JSON-RPC batches are not part of MCP %s (removed in 2025-06-18): send one "
                "message per POST" % version
            )
            return 400, _error(None, INVALID_REQUEST, why), None
        if not msgs:
            return 400, _error(None, INVALID_REQUEST, "empty JSON-RPC batch"), None
        out = []
        for i, m in enumerate(msgs):
            if isinstance(m, dict) and m.get("method") == "initialize":
                mid = m.get("id")
                why = "initialize must not be part of a JSON-RPC batch"
                out.append(_error(mid if _id_ok(mid) else None, INVALID_REQUEST, why))
                continue
            r = await self.dispatch(
                m, version, _arg_dups(dups, "[%d].params.arguments" % i), session
            )
            if r is not None:
                out.append(r)
        return (200, out, None) if out else (202, None, None)

    def _envelope(self, msg):
        """(mid, method, params) of a request, None for a notification or a response (taken,
        nothing answered: `cancelled` said so for notifications/cancelled), else an error
        response."""
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            mid = msg.get("id") if isinstance(msg, dict) else None
            why = 'not a JSON-RPC 2.0 message (need "jsonrpc": "2.0")'
            return _error(mid if _id_ok(mid) else None, INVALID_REQUEST, why)
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
            return _error(mid if _id_ok(mid) else None, INVALID_REQUEST, "request without a method")
        if not _id_ok(mid):
            why = "request id must be a string or an integer (MCP: never null), not %s" % (
                _kind(mid)
            )
            return _error(None, INVALID_REQUEST, why)
        params = msg.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return _error(mid, INVALID_PARAMS, "params must be an object, not %s" % _kind(params))
        meta = params.get("_meta")
        if meta is not None and not isinstance(meta, dict):
            return _error(
                mid, INVALID_PARAMS, "params._meta must be an object, not %s" % _kind(meta)
            )
        return mid, method, params

    async def dispatch(self, msg, version, dups=(), session=None):
        """One JSON-RPC message -> response dict, or None for notifications and responses.
        `dups`: duplicate keys the strict read found in its tool arguments, as plan paths."""
        got = self._envelope(msg)
        if got is None:
            if msg.get("method") == "notifications/cancelled" and "id" not in msg:
                self.cancel(session, msg.get("params"))
            return None
        if isinstance(got, dict):
            return got
        mid, method, params = got
        try:
            if method == "initialize":
                return self.initialize(mid, params)
            if method == "ping":
                return _result(mid, {})
            if method == "tools/list":
                return self.list_tools(mid, params)
            if method == "tools/call":
                return await self.call_json(mid, params, version, dups, session)
            if method == "resources/list":
                start = _cursor_or_error(mid, params, len(RESOURCES))
                return start if isinstance(start, dict) else _result(mid, {"resources": RESOURCES})
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

    def cancel(self, session, params):
        """notifications/cancelled: the session's tools/call of that request id answers the
        cancellation error instead of its result; a step of it not yet sent is skipped and a
        running one gives its resource group up (Body.cancel: the organ stops it when the
        group's next command comes; PROTOCOL.md has no frame to stop one). Unknown, finished,
        malformed or sessionless (request ids are only unique within a session): ignored, as
        the spec allows, and counted."""
        rid = params.get("requestId") if isinstance(params, dict) else None
        reason = params.get("reason") if isinstance(params, dict) else None
        for c in session.calls if session is not None and _id_ok(rid) else ():
            if c.id == rid and type(c.id) is type(rid) and c.cancelled is None:
                c.cancel(reason if isinstance(reason, str) else "")
                if c.run is not None and not c.run.finished:
                    why = "cancelled by the MCP client (notifications/cancelled)"
                    self.body.cancel(c.run, why)
                self.cancels += 1
                return
        self.cancels_ignored += 1

    def list_tools(self, mid, params):
        menu_tools = tools(self.body.menu())
        start = _cursor_or_error(mid, params, len(menu_tools))
        if isinstance(start, dict):
            return start
        return _result(mid, {"tools": menu_tools[start:]})

    def initialize(self, mid, params):
        asked = params.get("protocolVersion")
        if not isinstance(asked, str):
            why = "initialize: params.protocolVersion must be a string (the revision the client "
            why += "speaks, e.g. %s), not %s" % (PROTOCOL_VERSIONS[0], _kind(asked))
            return _error(mid, INVALID_PARAMS, why, {"supported": list(PROTOCOL_VERSIONS)})
        for k in ("capabilities", "clientInfo"):
            if k in params and not isinstance(params[k], dict):
                why = "initialize: params.%s must be an object, not %s" % (k, _kind(params[k]))
                return _error(mid, INVALID_PARAMS, why)
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        return _result(
            mid,
            {
                "protocolVersion": version,
                "capabilities": {
                    "tools": {"listChanged": True},
                    "resources": {"subscribe": True, "listChanged": False},
                },
                "serverInfo": SERVER_INFO,
                "instructions": INSTRUCTIONS,
            },
        )

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
        bad = _not_finite(args, "arguments")
        if bad:  # NaN or an infinity (json.loads takes both, 1e999 is inf): JSON carries neither
            why = "%s: %s is not a number JSON can carry" % bad
            return _error(
                mid,
                INVALID_PARAMS,
                "invalid arguments for %r: %s; available tools: %s" % (name, why, listed),
                {"problems": [why], "tools": names},
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

    async def call_json(self, mid, params, version, dups=(), session=None):
        """An HTTP tools/call answered as one JSON object once its step has its final status,
        or at once with the cancellation error when the client cancels it (`cancel`), or, the
        step still running after call_wait_ms (as long as the organ has not answered it yet, at
        most its 1 s), as started (`_started`): the step goes on."""
        got = self._call_args(mid, params)
        if isinstance(got, dict):
            return got
        name, args, names, listed = got
        self.calls += 1
        call = Call(mid)
        kind, run = self.body.submit(one_step(name, args), call.on_accept, call.on_done, dups)
        if kind == PROBLEMS:
            return self._problems(mid, name, run, names, listed)
        if kind != ACCEPTED:
            return _error(mid, INTERNAL_ERROR, "the master answered %s: %s" % (kind, run))
        call.run = run
        if session is not None:
            session.calls.append(call)
        try:
            until = ticks_add(ticks_ms(), self.call_wait_ms)
            while not run.finished and call.cancelled is None:
                left = ticks_diff(until, ticks_ms())
                if left <= 0 and run.steps[0].status != SENT:
                    break
                call.wake.clear()
                try:
                    await asyncio.wait_for(call.wake.wait(), max(left, 50) / 1000)
                except asyncio.TimeoutError:
                    pass
        finally:
            if session is not None:
                session.done(call)
        if call.cancelled is not None:
            return cancelled(mid, call.cancelled)
        if not run.finished:
            self.calls_early += 1
            return self._tool_result(mid, name, run.report(), version, self._started(name, run))
        return self._tool_result(mid, name, run.report(), version)

    def _started(self, name, run):
        """The first line of a call answered before its step ended: started (or waiting for its
        resource group), for how long it runs, and that it goes on."""
        st = run.steps[0]
        most = 0
        for c in self.body.menu().get("capabilities", ()):
            if c["name"] == name:
                most = c.get("max_duration_ms", 0)
        if st.status == RUNNING:
            ran = ticks_diff(self.body.clock(), st.t_sent)
            return (
                "%s: started, running for %d s now; it runs up to %d s in all (the organ's "
                "max_duration_ms) and goes on after this answer; its end is in "
                "organbus://reports" % (name, (ran + 500) // 1000, (most + 999) // 1000)
            )
        return (
            "%s: accepted, waiting for its resource group; it starts when the group is free, "
            "runs up to %d s (the organ's max_duration_ms) and goes on after this answer; its "
            "end is in organbus://reports" % (name, (most + 999) // 1000)
        )

    def call_streamed(self, msg, version, dups=(), session=None):
        """A tools/call with a progressToken: (200, CallStream, SSE head) once its plan was
        accepted, an error response when it was not (or the message is not a request); None
        without a token (answered as JSON)."""
        got = self._envelope(msg)
        if not isinstance(got, tuple):
            return None  # dispatch answers it
        mid, method, params = got
        meta = params.get("_meta")
        token = meta.get("progressToken") if meta is not None else None
        if token is None:
            return None
        if not (isinstance(token, str) or isinstance(token, int) and not isinstance(token, bool)):
            why = "params._meta.progressToken must be a string or an integer, not %s" % _kind(token)
            return 200, _error(mid, INVALID_PARAMS, why), None
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

        box.append(CallStream(mid, self.body, run, token, finish, session))
        return 200, box[0], SSE_HEAD

    def _tool_result(self, mid, name, out, version, said=None):
        """The result of a call: a line per step (or `said`, for a step still under way: no
        error), the master's notes, the report as JSON."""
        if said is None:
            steps = out.get("steps") or [{"action": name, "status": "missing from report"}]
            lines = [_summary(s) for s in steps]
        else:
            lines = [said]
        for n in out.get("notes", ()):
            lines.append("note: " + n)
        # The line for people first, then the master's report as JSON text (the spec asks
        # for the serialized JSON beside structuredContent, and 2025-03-26 has only this).
        result = {
            "content": [
                {"type": "text", "text": "\n".join(lines)},
                {"type": "text", "text": json.dumps(out)},
            ],
            "isError": said is None and not out.get("ok", False),
        }
        if version != "2025-03-26":
            result["structuredContent"] = out
        return _result(mid, result)

    def read_resource(self, mid, params):
        uri = params.get("uri")
        if not isinstance(uri, str):
            return _error(mid, INVALID_PARAMS, "params.uri must be a string, not %s" % _kind(uri))
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
        if not isinstance(uri, str):
            return _error(mid, INVALID_PARAMS, "params.uri must be a string, not %s" % _kind(uri))
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


def _kind(v):
    # what a JSON value is, for messages (bool before int: True is an int in Python)
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    return "an array" if isinstance(v, list) else "an object"


def _id_ok(mid):
    # MCP: a request id is a string or an integer, never null (nor a float, a bool, ...)
    return isinstance(mid, str) or isinstance(mid, int) and not isinstance(mid, bool)


def _not_finite(v, where, depth=0):
    """(path, value) of the first NaN or infinity in a decoded JSON value, else None."""
    if isinstance(v, float):
        return (where, v) if v - v != 0 else None  # inf - inf and nan - nan are nan
    if depth > 16:
        return None
    if isinstance(v, dict):
        for k in v:
            bad = _not_finite(v[k], "%s.%s" % (where, k), depth + 1)
            if bad:
                return bad
    elif isinstance(v, list):
        for i, x in enumerate(v):
            bad = _not_finite(x, "%s[%d]" % (where, i), depth + 1)
            if bad:
                return bad
    return None


def cursor_index(cursor, count):
    """The list index a pagination cursor names: None or "" is the first page, a cursor this
    server gave is the decimal index of a page's first item (0..count). Raises ValueError with
    the reason for any other (MCP: an invalid cursor is error -32602). The HTTP link answers
    every list whole, so it never gives one; the xiaozhi link pages its tools/list."""
    if cursor is None or cursor == "":
        return 0
    if not isinstance(cursor, str):
        raise ValueError("cursor must be a string from nextCursor, not %s" % _kind(cursor))
    if not cursor.isdigit() or len(cursor) > 6 or int(cursor) > count:
        raise ValueError("invalid cursor %r: not one this server gave" % cursor[:20])
    return int(cursor)


def _cursor_or_error(mid, params, count):
    try:
        return cursor_index(params.get("cursor"), count)
    except ValueError as e:
        return _error(mid, INVALID_PARAMS, str(e))


def _arg_dups(dups, prefix):
    # duplicate keys inside a tools/call's arguments, named as the one-step plan's params
    out = []
    for path, k in dups:
        if path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "["):
            out.append(("steps[0].params" + path[len(prefix) :], k))
    return out


def start(body, config):
    """The link's entry: the MCP routes for httpd.serve: POST (messages), GET (the session's
    stream), DELETE; each at /mcp (the bearer header) and at /mcp/<token> (httpd.py)."""
    srv = McpServer(body)
    body.add_status_section("mcp", srv.stats)
    routes = {}
    for path in ("/mcp", SECRET_PATH):
        routes[("POST", path)] = srv.handle
        routes[("GET", path)] = srv.stream
        routes[("DELETE", path)] = srv.end
    return routes
