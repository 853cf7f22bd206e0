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

from micropython import const

from organbus.plan import one_step
from organbus.ticks import ticks_add, ticks_diff, ticks_ms

from master.links.httpmsg import HttpError
from master.links import jsonrpc, mcpresources, mcptools
from master.links.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND
from master.links.jsonrpc import PARSE_ERROR
from master.links.mcptools import tools
from master.links.mcpstream import SSE_HEAD, Call, CallStream, NotifyStream, Sessions
from master.links.mcpstream import cancelled, notification
from master.bus.outcome import ACCEPTED, PROBLEMS, REPORT, RUNNING, SENT

# Handshake-era revisions whose transport is Streamable HTTP, newest first.
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
SERVER_INFO = {"name": "organbus", "version": "0.1.0"}
INSTRUCTIONS = (
    "Each tool is one ability of an organ on the robot's bus; a call runs it as a one-step "
    "plan through the master's validation and scheduler and returns the master's report. "
    "Numbers outside a parameter's range are forwarded as given and clamped by the organ. "
    "The tool list follows the organs that are online now: list again when a call fails."
)

STREAM_RETRY_S = "5"  # Retry-After of a GET /mcp refused by the stream bounds (mcpstream.py)
# A tools/call without a progressToken whose step still runs this long after it came is
# answered then, saying it started and for how long it runs; the step goes on. Under Home
# Assistant's 5 s read timeout (httpx's default) with room for the handshake.
CALL_WAIT_MS = const(3000)
SECRET_PATH = "/mcp/<token>"  # the routes' URL form with the token in it (httpd.py)

_HEARS = ("menu",) + mcpresources.STATUS_EVENTS


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
        if event in mcpresources.STATUS_EVENTS:
            ss.push_subscribed(mcpresources.STATUS_URI)
        if event in mcpresources.REPORT_EVENTS:
            ss.push_subscribed(mcpresources.REPORTS_URI)

    def _session_of(self, req):
        """(session or None, refusal (status, payload, headers) or None)."""
        sid = req.headers.get("mcp-session-id")
        if sid is None:
            return None, None
        s = self.sessions.get(sid)
        if s is None:
            why = "unknown or ended Mcp-Session-Id; initialize again"
            return None, (404, jsonrpc.error(None, INVALID_REQUEST, why), None)
        return s, None

    async def stream(self, req):
        """The `GET /mcp` route: the session's notification stream."""
        if "text/event-stream" not in req.headers.get("accept", ""):
            return 406, {"error": "GET /mcp is an event stream: send Accept: text/event-stream"}
        if req.headers.get("mcp-session-id") is None:
            why = "GET /mcp needs the Mcp-Session-Id that initialize answered"
            return 400, jsonrpc.error(None, INVALID_REQUEST, why), None
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
        # the menu's names, from the live capabilities where the body has them (building the
        # menu is ~160,000 RV32 instructions a call); a Facade (master/links/xiaozhi.py) has menu()
        live = getattr(self.body, "capabilities", None)
        caps = live() if live is not None else self.body.menu().get("capabilities", ())
        return [c["name"] for c in caps]

    async def handle(self, req):
        """The `POST /mcp` route: (status, payload, headers)."""
        want = req.headers.get("mcp-protocol-version")
        if want is not None and want not in PROTOCOL_VERSIONS:
            return (
                400,
                jsonrpc.error(
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
            return 400, jsonrpc.error(None, PARSE_ERROR, "parse error: " + e.reason), None
        dups = getattr(req, "json_dups", ())
        if isinstance(msg, list):
            return await self.batch(msg, version, dups, session)
        if msg is None:
            return (
                400,
                jsonrpc.error(None, INVALID_REQUEST, "empty body: send one JSON-RPC message"),
                None,
            )
        if isinstance(msg, dict) and msg.get("method") == "initialize" and "id" in msg:
            r = await self.dispatch(msg, version)
            made = self.sessions.new(r["result"]["protocolVersion"]) if "result" in r else None
            if made is None:  # refused, or every session in use: the client goes on without
                return 200, r, None
            return 200, r, {"Mcp-Session-Id": made.id}
        dups = mcptools.arg_dups(dups, "params.arguments")
        params = msg.get("params") if isinstance(msg, dict) else None
        if isinstance(params, dict) and "_meta" in params and msg.get("method") == "tools/call":
            streamed = self.call_streamed(msg, version, dups, session)  # (a progressToken)
            if streamed is not None:
                return streamed
        r = await self.dispatch(msg, version, dups, session)
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
            return 400, jsonrpc.error(None, INVALID_REQUEST, why), None
        if not msgs:
            return 400, jsonrpc.error(None, INVALID_REQUEST, "empty JSON-RPC batch"), None
        out = []
        for i, m in enumerate(msgs):
            if isinstance(m, dict) and m.get("method") == "initialize":
                mid = m.get("id")
                why = "initialize must not be part of a JSON-RPC batch"
                out.append(jsonrpc.error(mid if jsonrpc.id_ok(mid) else None, INVALID_REQUEST, why))
                continue
            r = await self.dispatch(
                m, version, mcptools.arg_dups(dups, "[%d].params.arguments" % i), session
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
            return jsonrpc.error(mid if jsonrpc.id_ok(mid) else None, INVALID_REQUEST, why)
        method = msg.get("method")
        if "id" not in msg:
            if isinstance(method, str):
                return None  # notification (notifications/initialized and any other)
            if "result" in msg or "error" in msg:
                return None  # a response to a request this server never sends
            return jsonrpc.error(None, INVALID_REQUEST, "message has neither method nor id")
        mid = msg["id"]
        if not isinstance(method, str):
            if "result" in msg or "error" in msg:
                return None
            return jsonrpc.error(
                mid if jsonrpc.id_ok(mid) else None, INVALID_REQUEST, "request without a method"
            )
        if not jsonrpc.id_ok(mid):
            why = "request id must be a string or an integer (MCP: never null), not %s" % (
                jsonrpc.kind(mid)
            )
            return jsonrpc.error(None, INVALID_REQUEST, why)
        params = msg.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return jsonrpc.error(
                mid, INVALID_PARAMS, "params must be an object, not %s" % jsonrpc.kind(params)
            )
        meta = params.get("_meta")
        if meta is not None and not isinstance(meta, dict):
            return jsonrpc.error(
                mid, INVALID_PARAMS, "params._meta must be an object, not %s" % jsonrpc.kind(meta)
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
                return jsonrpc.result(mid, {})
            if method == "tools/list":
                return self.list_tools(mid, params)
            if method == "tools/call":
                return await self.call_json(mid, params, version, dups, session)
            if method == "resources/list":
                start = mcptools.cursor_or_error(mid, params, len(mcpresources.RESOURCES))
                return (
                    start
                    if isinstance(start, dict)
                    else jsonrpc.result(mid, {"resources": mcpresources.RESOURCES})
                )
            if method == "resources/read":
                return mcpresources.read(self.body, mid, params)
            if method in ("resources/subscribe", "resources/unsubscribe"):
                return mcpresources.subscribe(mid, params, session, method == "resources/subscribe")
        except MemoryError:
            raise  # the server answers 503 with a prebuilt response
        except Exception as e:
            return jsonrpc.error(mid, INTERNAL_ERROR, "internal error in %s: %r" % (method, e))
        return jsonrpc.error(
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
        for c in session.calls if session is not None and jsonrpc.id_ok(rid) else ():
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
        start = mcptools.cursor_or_error(mid, params, len(menu_tools))
        if isinstance(start, dict):
            return start
        return jsonrpc.result(mid, {"tools": menu_tools[start:]})

    def initialize(self, mid, params):
        asked = params.get("protocolVersion")
        if not isinstance(asked, str):
            why = "initialize: params.protocolVersion must be a string (the revision the client "
            why += "speaks, e.g. %s), not %s" % (PROTOCOL_VERSIONS[0], jsonrpc.kind(asked))
            return jsonrpc.error(mid, INVALID_PARAMS, why, {"supported": list(PROTOCOL_VERSIONS)})
        for k in ("capabilities", "clientInfo"):
            if k in params and not isinstance(params[k], dict):
                why = "initialize: params.%s must be an object, not %s" % (
                    k,
                    jsonrpc.kind(params[k]),
                )
                return jsonrpc.error(mid, INVALID_PARAMS, why)
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        return jsonrpc.result(
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

    async def call_tool(self, mid, params, version, dups=()):
        got = mcptools.call_args(mid, params, self.tool_names())
        if isinstance(got, dict):
            return got
        name, args, names = got
        plan = one_step(name, args)
        self.calls += 1
        kind, out = await self.body.execute(plan, None, dups)
        if kind == PROBLEMS:
            return mcptools.problems(mid, name, out, names)
        if kind != REPORT:
            return jsonrpc.error(mid, INTERNAL_ERROR, "the master answered %s: %s" % (kind, out))
        return mcptools.tool_result(mid, name, out, version)

    async def call_json(self, mid, params, version, dups=(), session=None):
        """An HTTP tools/call answered as one JSON object once its step has its final status,
        or at once with the cancellation error when the client cancels it (`cancel`), or, the
        step still running after call_wait_ms (as long as the organ has not answered it yet, at
        most its 1 s), as started (`_started`): the step goes on."""
        got = mcptools.call_args(mid, params, self.tool_names())
        if isinstance(got, dict):
            return got
        name, args, names = got
        self.calls += 1
        call = Call(mid)
        kind, run = self.body.submit(one_step(name, args), call.on_accept, call.on_done, dups)
        if kind == PROBLEMS:
            return mcptools.problems(mid, name, run, names)
        if kind != ACCEPTED:
            return jsonrpc.error(mid, INTERNAL_ERROR, "the master answered %s: %s" % (kind, run))
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
            return mcptools.tool_result(mid, name, run.report(), version, self._started(name, run))
        return mcptools.tool_result(mid, name, run.report(), version)

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
            why = (
                "params._meta.progressToken must be a string or an integer, not %s"
                % jsonrpc.kind(token)
            )
            return 200, jsonrpc.error(mid, INVALID_PARAMS, why), None
        got = mcptools.call_args(mid, params, self.tool_names())
        if isinstance(got, dict):
            return 200, got, None
        name, args, names = got
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
            return 200, mcptools.problems(mid, name, run, names), None
        if kind != ACCEPTED:
            return (
                200,
                jsonrpc.error(mid, INTERNAL_ERROR, "the master answered %s: %s" % (kind, run)),
                None,
            )

        def finish(report):
            return mcptools.tool_result(mid, name, report, version)

        box.append(CallStream(mid, self.body, run, token, finish, session))
        return 200, box[0], SSE_HEAD


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
