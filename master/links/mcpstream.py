# MCP sessions and their server-to-client streams: the GET /mcp notification stream and a tools/call answered as SSE with progress.
#
# A session is made at `initialize` (its id in the Mcp-Session-Id header) so a client can open
# the GET stream; POSTs without a session id still work, statelessly, as before. The table is
# small (`MAX_SESSIONS`); a session unused for `IDLE_MS` expires, and a new one takes the place
# of the least recently used session that is not in use (no call, no stream): a client that
# opens a session per call (Home Assistant) never pushes out another's live one. Each session
# keeps a bounded queue of notifications, filled only while its GET stream is open and written
# by that stream's own task. A stream holds a connection's task and buffers (about 3.4 KB on
# the 64-bit unix port), so they are bounded: `SESSION_STREAMS` per session, `MAX_STREAMS` in
# all; a session that ends (DELETE, expired or evicted) ends its streams.
import asyncio
import json
import os
import time

from micropython import const

from organbus.ticks import ticks_diff, ticks_ms

MAX_SESSIONS = const(8)
IDLE_MS = const(600000)  # a session with no request, call or stream for 10 min expires
MAX_STREAMS = const(2)  # GET /mcp streams open at once, every session together
SESSION_STREAMS = const(1)  # GET /mcp streams one session may hold
QUEUE = const(16)
KEEPALIVE_MS = const(15000)
STALL_MS = const(30000)
SSE_HEAD = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
# The answer to a request the client cancelled (notifications/cancelled) on the 2025 wire,
# whose POST ends only with a response: the MCP SDK's own server answers so (its
# REQUEST_CANCELLED, after LSP's RequestCancelled); the SDK client, no longer waiting, drops it.
REQUEST_CANCELLED = const(-32800)


_made = [0]


def _new_id():
    # os.urandom where the port has it (the C6: its hardware RNG); else random, else a counter
    # with the tick (a port with neither, e.g. the RV32 test image). The id names a session,
    # it is no credential: the bearer token guards the routes.
    try:
        b = os.urandom(16)
    except AttributeError:
        try:
            import random

            b = [random.getrandbits(8) for _ in range(16)]
        except (ImportError, AttributeError):
            _made[0] += 1
            n = (_made[0] << 32) ^ (time.ticks_ms() if hasattr(time, "ticks_ms") else 0)
            b = [(n >> (8 * i)) & 255 for i in range(16)]
    return "".join(["%02x" % x for x in b])


def sse_message(msg):
    """One JSON-RPC message as an SSE item of a Streamable HTTP stream."""
    return ("event: message\ndata: %s\n\n" % json.dumps(msg)).encode()


def cancelled(mid, reason):
    """The error that ends a cancelled request instead of its result."""
    why = "request cancelled by the client (notifications/cancelled)"
    if reason:
        why += ": " + reason[:80]
    return {"jsonrpc": "2.0", "id": mid, "error": {"code": REQUEST_CANCELLED, "message": why}}


def notification(method, params=None):
    m = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        m["params"] = params
    return m


class Call:
    """A tools/call of a session until it is answered: notifications/cancelled finds it by its
    request id. `run` is its accepted plan's Run; `cancelled` the client's reason once
    cancelled ("" when it gave none), else None; `wake` is set when it ran or was cancelled."""

    def __init__(self, mid):
        self.id = mid
        self.run = None
        self.cancelled = None
        self.wake = asyncio.Event()

    def on_accept(self, task_id, status):
        self.wake.set()

    def on_done(self, run):
        self.wake.set()

    def cancel(self, reason):
        self.cancelled = reason
        self.wake.set()


class Session:
    """One client's session: its negotiated version, the resources it subscribed, its
    notification queue, its tools/calls in flight (`calls`), the tick it was last used."""

    def __init__(self, sid, version=None, clock=ticks_ms):
        self.id = sid
        self.clock = clock
        self.used = clock()
        self.version = version  # the protocolVersion initialize answered
        self.calls = []  # Call: tools/calls not answered yet
        self.subscribed = []  # resource URIs
        self.queue = []
        self.dropped = 0
        self.streaming = 0  # GET streams open now
        self.ended = False  # DELETEd or evicted: its streams end
        self.ready = asyncio.Event()

    def busy(self):
        """In use: a tools/call unanswered or a GET stream open (never evicted, never expired)."""
        return bool(self.calls) or self.streaming > 0

    def done(self, call):
        """`call` was answered (or its stream closed): no longer in flight; used until now."""
        if call in self.calls:
            self.calls.remove(call)
        self.used = self.clock()

    def end(self):
        self.ended = True
        self.queue = []
        self.ready.set()  # its streams wake, see it ended and return

    def push(self, msg):
        if not self.streaming:
            return  # no stream: nobody would hear it (a client lists again when it comes back)
        if len(self.queue) >= QUEUE:
            self.queue.pop(0)
            self.dropped += 1
        self.queue.append(msg)
        self.ready.set()


class Sessions:
    """The session table: `new()`, `get(sid)`, `end(sid)`, `push_all(msg)`, `push_subscribed`,
    and the bound on GET streams: `refusal(session)` says why one more may not open. `clock`
    gives ms ticks (organbus.ticks.ticks_ms; a test passes its own)."""

    def __init__(
        self,
        limit=MAX_SESSIONS,
        max_streams=MAX_STREAMS,
        per_session=SESSION_STREAMS,
        idle_ms=IDLE_MS,
        clock=ticks_ms,
    ):
        self.limit = limit
        self.max_streams = max_streams
        self.per_session = per_session
        self.idle_ms = idle_ms
        self.clock = clock
        self.table = []  # least recently used first
        self.made = 0
        self.evicted = 0  # idle sessions ended to make room for a new one
        self.expired = 0  # sessions ended after idle_ms unused
        self.full = 0  # initialize answered without a session: every one was in use
        self.notified = 0
        self.streams = 0  # GET streams open now, ended sessions' included until they close
        self.refused = 0  # GET streams refused by the bounds

    def expire(self, now):
        """End the sessions unused for idle_ms that are not in use."""
        i = 0
        while i < len(self.table):
            s = self.table[i]
            if not s.busy() and ticks_diff(now, s.used) >= self.idle_ms:
                self.table.pop(i)
                s.end()
                self.expired += 1
            else:
                i += 1

    def new(self, version=None):
        """A new session, or None when the table is full of sessions in use (the caller then
        answers without one: the client goes on statelessly)."""
        now = self.clock()
        self.expire(now)
        if len(self.table) >= self.limit:
            victim = None
            for s in self.table:  # least recently used first
                if not s.busy():
                    victim = s
                    break
            if victim is None:
                self.full += 1
                return None
            self.table.remove(victim)
            victim.end()
            self.evicted += 1
        s = Session(_new_id(), version, self.clock)
        self.table.append(s)
        self.made += 1
        return s

    def get(self, sid):
        """The live session of that id, marked used now (it moves to the table's end)."""
        now = self.clock()
        self.expire(now)
        for s in self.table:
            if s.id == sid:
                s.used = now
                if self.table[-1] is not s:
                    self.table.remove(s)
                    self.table.append(s)
                return s
        return None

    def end(self, sid):
        for s in self.table:
            if s.id == sid:
                self.table.remove(s)
                s.end()
                return s
        return None

    def refusal(self, session):
        """None when `session` may open one more GET stream, else the reason it may not."""
        why = None
        if session.streaming >= self.per_session:
            why = (
                "this session has %d notification stream(s) open already, the most one session "
                "may hold; close it first (a stream whose client went is noticed within %d s)"
                % (session.streaming, 2 * KEEPALIVE_MS // 1000)
            )
        elif self.streams >= self.max_streams:
            why = "%d MCP notification streams are open already, the most this body serves" % (
                self.streams
            )
        if why:
            self.refused += 1
        return why

    def push_all(self, msg):
        for s in self.table:
            if s.streaming:
                s.push(msg)
                self.notified += 1

    def push_subscribed(self, uri):
        for s in self.table:
            if s.streaming and uri in s.subscribed:
                s.push(notification("notifications/resources/updated", {"uri": uri}))
                self.notified += 1


class NotifyStream:
    """The GET /mcp stream of one session (httpd writes it with `write_to`) until the client
    goes or the session ends; counted in the session's and the table's bounds until closed."""

    def __init__(self, sessions, session):
        self.sessions = sessions
        self.session = session
        self.open = True
        session.streaming += 1
        sessions.streams += 1

    async def write_to(self, writer):
        s = self.session
        writer.write(b": organbus mcp notifications\n\n")
        await asyncio.wait_for(writer.drain(), STALL_MS / 1000)
        while not s.ended:
            if not s.queue:
                s.ready.clear()
                try:
                    await asyncio.wait_for(s.ready.wait(), KEEPALIVE_MS / 1000)
                except asyncio.TimeoutError:
                    writer.write(b": keep-alive\n\n")
                    await asyncio.wait_for(writer.drain(), STALL_MS / 1000)
                continue
            writer.write(sse_message(s.queue.pop(0)))
            await asyncio.wait_for(writer.drain(), STALL_MS / 1000)

    def close(self):
        if not self.open:
            return
        self.open = False
        self.sessions.streams -= 1
        self.session.streaming -= 1
        self.session.used = self.session.clock()
        if not self.session.streaming:
            self.session.queue = []


class CallStream(Call):
    """A tools/call answered as an SSE stream: notifications/progress while its step runs,
    then the result (or, once cancelled, the cancellation error instead). `run` was accepted
    already; `finish(report) -> response message`; `session` (or None) lists it in its calls
    until the stream closes."""

    def __init__(self, mid, body, run, token, finish, session=None, tick_ms=1000):
        super().__init__(mid)
        self.body = body
        self.run = run
        self.token = token
        self.finish = finish
        self.session = session
        self.tick_ms = tick_ms
        self.accepted = None  # (task_id, status) of the COMMAND_RESP
        self.n = 0
        if session is not None:
            session.calls.append(self)

    def on_accept(self, task_id, status):
        self.accepted = (task_id, status)
        self.wake.set()

    def on_done(self, run):
        self.wake.set()

    def _progress(self, message):
        self.n += 1
        return sse_message(
            notification(
                "notifications/progress",
                {"progressToken": self.token, "progress": self.n, "message": message},
            )
        )

    async def write_to(self, writer):
        run = self.run
        st = run.steps[0]
        said_accept = False
        if not run.finished and st.status == "sent":
            writer.write(self._progress("%s: sent to the organ" % st.action))
            await writer.drain()
        while not run.finished and self.cancelled is None:
            self.wake.clear()
            try:
                await asyncio.wait_for(self.wake.wait(), self.tick_ms / 1000)
            except asyncio.TimeoutError:
                pass
            if run.finished or self.cancelled is not None:
                break
            if self.accepted is not None and not said_accept:
                said_accept = True
                writer.write(self._progress("%s: the organ accepted it, running" % st.action))
            elif st.status == "running":
                ms = ticks_diff(self.body.clock(), st.t_sent)
                writer.write(self._progress("%s: running for %d ms" % (st.action, ms)))
            await writer.drain()
        if self.cancelled is not None:
            writer.write(sse_message(cancelled(self.id, self.cancelled)))
        else:
            writer.write(sse_message(self.finish(run.report())))
        await writer.drain()

    def close(self):
        if self.session is not None:
            self.session.done(self)
        self.session = None
