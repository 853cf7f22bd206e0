# The xiaozhi v1 device's protocol state: discovery request/answer, hello, MCP over WS, server messages.
#
# Contract: the xiaozhi v1 device wire format (StackChan Protocol v1), described in docs/links.md.
# `Device` takes the server's messages in and puts its own out (`outbox`, for the one writer)
# against a facade (see `Facade`); nothing here opens a socket. The I/O edge (discovery over
# HTTP, the WebSocket, watchdog, reconnects) is master/links/xiaozhi_link.py. The body never waits on
# this link: tool calls and speech run as their own tasks, and no message content raises.
import gc
import json
import random
import sys

import asyncio

from micropython import const

from organbus import log
from organbus.ticks import ticks_diff, ticks_ms
from organbus.utf8 import MAX_TEXT, clip_text
from organbus.plan import one_step
from master.links.bodyproto import express_action
from master.links.mcp import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND
from master.links.mcp import PARSE_ERROR, McpServer, cursor_index, tools as mcp_tools
from master.net import http, jsonin, jsonout

_MP = sys.implementation.name == "micropython"

MCP_VERSION = "2024-11-05"  # the MCP revision of the xiaozhi device contract (section 6)
PAGE_BYTES = const(8000)  # a tools/list answer, whole WebSocket message, at most (78's firmware)
CALL_DEADLINE_MS = const(25000)  # a tools/call answers by then (xinnan's server waits 30 s)
RELIST_WAIT_MS = const(3000)  # the menu changed and no tools/list came this long: re-open
HELLO_TIMEOUT_MS = const(10000)  # section 3.3: the server hello within 10 s, or drop
WATCHDOG_MS = const(120000)  # section 3.4: no frame for 120 s and the channel is dead
BACKOFF_MIN_MS = const(1000)
BACKOFF_MAX_MS = const(60000)
MAX_SENTENCES = const(16)  # sentences waiting to be spoken; more are dropped and counted
MAX_OUTBOX = const(24)  # messages waiting for the writer; more are dropped and counted
LOG_TEXT = const(120)  # characters of a server's text (stt, alert) on the event log
REBOOT_WAIT_MS = const(30000)  # system reboot waits this long at most for a quiet bus

STATES = ("off", "discovering", "connecting", "hello", "ready", "backoff")


class XiaozhiError(Exception):
    """A discovery or session failure, with a reason naming the field or the step."""


# -- discovery (section 2) ---------------------------------------------------------------------


def format_id(raw):
    """Device-Id: bytes (a MAC, or a board's unique id) as lower-case colon-separated hex."""
    return ":".join("%02x" % b for b in raw)


def new_client_id(rand16):
    """A version-4 UUID string from 16 random bytes."""
    b = bytearray(rand16)
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    h = "".join("%02x" % x for x in b)
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


def client_id(path, rand16):
    """The Client-Id kept in `path` (made once with `rand16` bytes); None path: not kept."""
    if path:
        try:
            with open(path) as f:
                cid = f.read().strip()
            if len(cid) == 36 and cid.count("-") == 4:
                return cid
        except OSError:
            pass
    cid = new_client_id(rand16)
    if path:
        try:
            with open(path, "w") as f:
                f.write(cid)
        except OSError as e:
            log.emit(
                "xiaozhi", [("what", "client_id_not_kept"), ("path", path), ("error", repr(e))]
            )
    return cid


def discovery_request(ident, role, version, language="en-US"):
    """(headers, body) of the OTA/discovery POST (section 2.1); the body in pieces."""
    headers = {
        "Activation-Version": "1",
        "Device-Id": ident["device_id"],
        "Client-Id": ident["client_id"],
        "User-Agent": "organbus-%s/%s" % (role, version),
        "Accept-Language": language,
        "Content-Type": "application/json",
    }
    info = {
        "version": 2,
        "language": language,
        "mac_address": ident["device_id"],
        "uuid": ident["client_id"],
        "chip_model_name": ident.get("chip", "esp32c6"),
        "application": {"name": "organbus-" + role, "version": version},
        "board": {"type": "organbus-" + role, "name": ident.get("board", "c6_master")},
    }
    return headers, jsonout.pieces(info)


def parse_discovery(obj):
    """The OTA answer -> {"url", "token", "server_time_ms", "tz_min", "firmware", "activation"};
    XiaozhiError when there is no usable websocket url."""
    if not isinstance(obj, dict):
        raise XiaozhiError("OTA answer is not a JSON object")
    w = obj.get("websocket")
    if not isinstance(w, dict):
        raise XiaozhiError("OTA answer has no websocket object (no server to connect to)")
    url = w.get("url")
    if not isinstance(url, str) or not (url.startswith("ws://") or url.startswith("wss://")):
        raise XiaozhiError("OTA answer websocket.url %r is not a ws:// or wss:// url" % (url,))
    try:  # what the upgrade request is built from: no control characters, a real host
        http.parse_url(url, ("ws", "wss"))
    except http.NetError as e:
        raise XiaozhiError("OTA answer websocket.%s" % e)
    token = w.get("token")
    if isinstance(token, str) and not http.request_field_ok(token):
        raise XiaozhiError("OTA answer websocket.token holds a control character: refused")
    out = {"url": url, "token": token if isinstance(token, str) and token else None}
    st = obj.get("server_time")
    out["server_time_ms"] = None
    out["tz_min"] = 0
    if isinstance(st, dict) and isinstance(st.get("timestamp"), (int, float)):
        out["server_time_ms"] = int(st["timestamp"])
        tz = st.get("timezone_offset")
        out["tz_min"] = int(tz) if isinstance(tz, (int, float)) else 0
    out["firmware"] = obj.get("firmware") if isinstance(obj.get("firmware"), dict) else None
    out["activation"] = obj.get("activation") if isinstance(obj.get("activation"), dict) else None
    return out


class Backoff:
    """Reconnect delays: doubling from `lo` to `hi` ms, each with up to +-25 % jitter."""

    def __init__(self, lo=BACKOFF_MIN_MS, hi=BACKOFF_MAX_MS, rand=None):
        self.lo, self.hi = lo, hi
        self.rand = rand or random.random
        self.base = lo

    def next(self):
        d = self.base
        self.base = min(self.base * 2, self.hi)
        return int(d * (0.75 + 0.5 * self.rand()))

    def reset(self):
        self.base = self.lo


# -- the device (sections 3-6) -------------------------------------------------------------------


class Facade:
    """What the xiaozhi link needs of the master (master.app wires the live Body to it):

    - `menu() -> dict`: the live section 8 menu;
    - `async execute(plan, on_accept=None, dups=()) -> (outcome, report | {"problems"})`: the
      one plan path (master.bus.body.Body.execute);
    - `subscribe(fn)`: `fn(kind, data)` for body events, kind "online" / "offline"
      (data: module_id, module_type, port), "event" (module_id, name, status) and "menu"
      (the menu changed);
    - `quiet() -> bool`: no plan is running (a reboot waits for it);
    - `settled() -> bool` (optional): every organ port has its organ (the first hello waits);
    - `reset()`: reset the master (machine.reset on a board)."""


class Device:
    """One xiaozhi device session's protocol state over a Facade; messages out via `outbox`."""

    call_deadline_ms = CALL_DEADLINE_MS  # a class attribute: tests may set it on an instance

    def __init__(self, facade, version="0.1.0", spawn=None):
        self.facade = facade
        self.version = version
        self.spawn = spawn or asyncio.create_task
        self.mcp = McpServer(facade)
        self.outbox = []  # messages for the writer, in order: JSON in pieces (jsonout.pieces)
        self.wake = asyncio.Event()
        self.session_id = None
        self.ready = False  # the server hello has come: messages may go out
        self.initialized = False  # the server sent initialize
        self.speech = []  # sentences waiting for the speaker, in order
        self._speaking = False
        self.calls = 0  # tools/call not answered yet
        self.menu_gen = 0  # the menu's changes seen, counted
        self.listed_gen = None  # menu_gen of the server's last whole tools/list (None: none yet)
        self.changed_at = None  # ticks of the first menu change the server did not list yet
        self._listing = 0  # menu_gen when the tools/list being paged began
        self.rebooting = False
        self.tasks = []  # tool calls and speech still running
        self.counts = {
            "messages_in": 0,
            "messages_out": 0,
            "audio_dropped": 0,
            "malformed": 0,
            "clipped": 0,
            "no_memory": 0,
            "unknown": 0,
            "notifications": 0,
            "tool_calls": 0,
            "sentences": 0,
            "sentences_dropped": 0,
            "out_dropped": 0,
            "events_out": 0,
            "lists": 0,
            "calls_late": 0,
        }
        facade.subscribe(self.on_body)

    # -- out ---------------------------------------------------------------------------------

    def client_hello(self):
        return {
            "type": "hello",
            "version": 1,
            "transport": "websocket",
            "features": {"mcp": True, "aec": False},
            "audio_params": {
                "format": "opus",
                "sample_rate": 16000,
                "channels": 1,
                "frame_duration": 60,
            },
        }

    def send(self, obj):
        """Queue one message for the server, with the session id (section 4)."""
        obj["session_id"] = self.session_id
        return self._queue(obj)

    def _queue(self, obj):
        # False when not ready or the outbox is full (counted): the message is dropped
        if not self.ready:
            return False
        if len(self.outbox) >= MAX_OUTBOX:
            self.counts["out_dropped"] += 1
            return False
        self.outbox.append(jsonout.pieces(obj))  # pieces of 256 bytes: no large heap block
        self.wake.set()
        return True

    def _mcp_out(self, payload):
        return self.send({"type": "mcp", "payload": payload})

    def _wrapped(self, payload):
        # the whole message a payload goes out in (what PAGE_BYTES bounds)
        return {"session_id": self.session_id or "", "type": "mcp", "payload": payload}

    # -- session -----------------------------------------------------------------------------

    def start(self):
        """A new connection: nothing of the last one is sent on it."""
        self.outbox = []
        self.session_id = None
        self.ready = False
        self.initialized = False
        self.listed_gen = None
        self.changed_at = None

    def on_hello(self, obj):
        """The server hello (section 3.3): True when it is one, and the session may start."""
        if not isinstance(obj, dict) or obj.get("type") != "hello":
            return False
        sid = obj.get("session_id")
        if not isinstance(sid, str) or not sid:
            raise XiaozhiError("server hello without a session_id")
        if obj.get("transport") not in (None, "websocket"):
            raise XiaozhiError("server hello names transport %r" % (obj.get("transport"),))
        self.session_id = sid
        self.ready = True
        return True

    def end(self):
        self.ready = False

    # -- in ----------------------------------------------------------------------------------

    def on_binary(self, n):
        # Opus audio of a TTS reply: the speaker board has no decoder, the sentence text is spoken.
        self.counts["audio_dropped"] += 1

    def on_text(self, raw):
        """One text message from the server (bytes or str); never raises on its content."""
        b = bytearray(raw.encode() if isinstance(raw, str) else raw)
        self.on_message(b, len(b))

    def on_message(self, buf, n):
        """The text message in buf[:n] (the WebSocket's receive buffer, read in place within
        master/net/jsonin.py's bounds); never raises on its content, and a message the heap
        cannot hold is counted (`no_memory`) and dropped, never the end of the session."""
        self.counts["messages_in"] += 1
        try:
            self._message(buf, n)
        except MemoryError:
            self.counts["no_memory"] += 1
            gc.collect()
            log.emit("xiaozhi", [("what", "no_memory"), ("bytes", n), ("free", _free())])

    def _message(self, buf, n):
        try:
            msg, clipped, nonfinite = jsonin.read(buf, n)
        except ValueError as e:
            self.counts["malformed"] += 1
            log.emit("xiaozhi", [("what", "malformed"), ("error", str(e))])
            if self.ready:  # it may have been a request: JSON-RPC's error for it, id null
                why = str(e)
                bad = why.startswith("not JSON")  # else beyond jsonin's bounds
                code, what = (PARSE_ERROR, "parse error") if bad else (INVALID_REQUEST, "invalid")
                self._mcp_out(_error(None, code, "%s: %s" % (what, why)))
            return
        if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
            self.counts["malformed"] += 1
            log.emit("xiaozhi", [("what", "malformed"), ("error", "not an object with a type")])
            return
        if clipped:
            self.counts["clipped"] += clipped
            log.emit(
                "xiaozhi",
                [("what", "clipped"), ("type", msg["type"][:20]), ("strings", clipped),
                 ("longest", jsonin.longest()), ("kept", jsonin.MAX_STRING)],
            )  # fmt: skip
        if nonfinite >= 0:
            # counted and said; a request (it has an id and a method) gets its JSON-RPC error
            p = msg.get("payload")
            why = "NaN or Infinity at offset %d: not JSON" % nonfinite
            self.counts["malformed"] += 1
            log.emit("xiaozhi", [("what", "malformed"), ("type", msg["type"][:20]), ("error", why)])
            if msg["type"] == "mcp" and isinstance(p, dict) and "method" in p and "id" in p:
                mid = p["id"] if _id_ok(p) else None
                self._mcp_out(_error(mid, INVALID_PARAMS, "invalid request: " + why))
            return
        if clipped and msg["type"] == "mcp":
            p = msg.get("payload")
            if isinstance(p, dict) and p.get("method") == "tools/call" and "id" in p:
                why = "the request holds a string of %d bytes; at most %d are read" % (
                    jsonin.longest(),
                    jsonin.MAX_STRING,
                )  # a cut argument never runs
                return self._mcp_out(_error(p["id"] if _id_ok(p) else None, INVALID_PARAMS, why))
        t = msg["type"]
        try:
            if t == "mcp":
                self.on_mcp(msg.get("payload"))
            elif t == "tts":
                self.on_tts(msg)
            elif t == "llm":
                self.on_llm(msg)
            elif t == "alert":
                self.on_alert(msg)
            elif t == "system":
                self.on_system(msg)
            elif t == "stt":
                text = msg.get("text")
                log.emit("xiaozhi", [("what", "stt"), ("text", _said(text))])
            elif t == "hello":
                log.emit(
                    "xiaozhi", [("what", "hello_again"), ("session_id", msg.get("session_id"))]
                )
            else:
                self.counts["unknown"] += 1
        except MemoryError:
            raise
        except Exception as e:  # a message the handlers did not foresee: said, never fatal
            self.counts["malformed"] += 1
            log.emit("xiaozhi", [("what", "error"), ("type", t[:20]), ("error", repr(e))])

    # -- MCP over WS (section 6) ---------------------------------------------------------------

    def on_mcp(self, p):
        if not isinstance(p, dict) or p.get("jsonrpc") != "2.0":
            self.counts["malformed"] += 1
            mid = p.get("id") if isinstance(p, dict) and _id_ok(p) else None
            return self._mcp_out(
                _error(mid, INVALID_REQUEST, "payload must be a JSON-RPC 2.0 object")
            )
        method = p.get("method")
        if "id" not in p:
            self.counts["notifications"] += 1  # notifications/* and anything else: dropped
            return
        if not _id_ok(p):
            self.counts["malformed"] += 1
            return self._mcp_out(
                _error(None, INVALID_REQUEST, "id must be a string, a number or null")
            )
        mid = p["id"]
        if method is None and ("result" in p or "error" in p):
            return  # a response to a request this device never sends
        if not isinstance(method, str):
            self.counts["malformed"] += 1
            return self._mcp_out(_error(mid, INVALID_REQUEST, "method must be a string"))
        params = p.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return self._mcp_out(_error(mid, INVALID_PARAMS, "params must be an object"))
        if method == "initialize":
            self.initialized = True
            return self._mcp_out(_result(mid, self.initialize_result()))
        if method == "ping":
            return self._mcp_out(_result(mid, {}))
        if method == "tools/list":
            return self._mcp_out(self.tools_page(mid, params.get("cursor")))  # never an error
        if method == "tools/call":
            self.counts["tool_calls"] += 1
            self._run(self._call(mid, params))
            return
        return self._mcp_out(
            _error(
                mid,
                METHOD_NOT_FOUND,
                "method not found: %s (this device offers initialize, ping, tools/list, tools/call)"
                % method[:60],
            )
        )

    def initialize_result(self):
        return {
            "protocolVersion": MCP_VERSION,
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "organbus", "version": self.version},
        }

    def tools_page(self, mid, cursor):
        """The tools/list answer from `cursor` (a nextCursor this device gave) on, whole message
        at most PAGE_BYTES. A cursor it did not give (or a stale one) starts again at the first
        page: an error to any page leaves xinnan's server without tools for the session."""
        tools = mcp_tools(self.facade.menu())
        try:
            start = cursor_index(cursor, len(tools))
        except ValueError as e:
            log.emit("xiaozhi", [("what", "bad_cursor"), ("error", str(e)), ("answered", "page 1")])
            start = 0
        if start == 0:
            self._listing = self.menu_gen
        # the envelope with an empty page and the longest cursor, then each tool and its comma
        used = _blen(self._wrapped(_result(mid, {"tools": [], "nextCursor": str(len(tools))})))
        page = []
        i = start
        while i < len(tools):
            n = _blen(tools[i]) + (2 if page else 0)
            if page and used + n > PAGE_BYTES:
                break
            used += n
            page.append(tools[i])
            i += 1
        r = {"tools": page}
        if i < len(tools):
            r["nextCursor"] = str(i)
        else:  # the whole list went out: the server knows the menu of when it began
            self.counts["lists"] += 1
            self.listed_gen = self._listing
            if self.listed_gen == self.menu_gen:
                self.changed_at = None
        return _result(mid, r)

    def reopen_due(self, now):
        """True when the menu changed after the server's last whole tools/list, the server has
        not listed again within RELIST_WAIT_MS of it, and nothing is under way (no tool call
        unanswered, no speech, no plan): the link then opens a new session, whose hello makes
        the server list again (xinnan's server lists once per hello, ignores list_changed).
        The writer ends the session once what waits in the outbox has gone out."""
        if self.listed_gen is None or self.listed_gen == self.menu_gen or self.changed_at is None:
            return False
        if ticks_diff(now, self.changed_at) < RELIST_WAIT_MS:
            return False
        return not (self.calls or self.speech or self._speaking) and self.facade.quiet()

    async def _call(self, mid, params):
        # The answer by CALL_DEADLINE_MS: a step still running then is said so, and goes on
        # (its own answer is dropped). A refusal carries its text as "error" too: xinnan's
        # server reads a failed call's reason there, not in content.
        self.calls += 1  # until its answer is queued: no re-open drops it
        try:
            box = []
            done = asyncio.Event()
            self._run(self._step_call(mid, params, box, done))
            try:
                await asyncio.wait_for(done.wait(), self.call_deadline_ms / 1000)
            except asyncio.TimeoutError:
                self.counts["calls_late"] += 1
                name = params.get("name")
                text = "%s: started, still running after %d s; it goes on" % (
                    name if isinstance(name, str) else "tool",
                    self.call_deadline_ms // 1000,
                )
                return self._mcp_out(_result(mid, {"content": [{"type": "text", "text": text}]}))
            out = box[0]
            r = out.get("result")
            if isinstance(r, dict) and r.get("isError") is True:
                c = r.get("content")
                if c and isinstance(c[0], dict):
                    r["error"] = c[0].get("text")
            self._mcp_out(out)
        finally:
            self.calls -= 1

    async def _step_call(self, mid, params, box, done):
        try:
            out = await self.mcp.call_tool(mid, params, MCP_VERSION)
        except MemoryError:
            self._short("tools/call")
            out = _error(mid, INTERNAL_ERROR, "short of memory in tools/call: try again")
        except Exception as e:
            out = _error(mid, INTERNAL_ERROR, "internal error in tools/call: %r" % e)
        box.append(out)
        done.set()

    def on_body(self, kind, data):
        """A body event from the facade: organs online/offline, organ EVENTs, the menu changed."""
        if kind == "menu":
            self.menu_gen += 1
            if self.changed_at is None:
                self.changed_at = ticks_ms()
                self.wake.set()  # the writer starts looking for a re-open
        if not self.ready:
            return
        if kind == "menu":
            if self.initialized:
                self._mcp_out({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            return
        name = {"online": "organ_online", "offline": "organ_offline", "event": "organ_event"}
        if kind in name and self.send({"type": "event", "name": name[kind], "data": data}):
            self.counts["events_out"] += 1

    # -- the server's other messages (section 5) ---------------------------------------------

    def on_tts(self, msg):
        state = msg.get("state")
        if state == "sentence_start":
            text = msg.get("text")
            if not isinstance(text, str) or not text.strip():
                return
            self.say(text)
        # start / stop: one reply is one queue; its sentences already keep their order in it

    def say(self, text, action="speak"):
        """Queue one sentence (`speak`) or alert (`announce`) for the speaker organ. The queue
        is spoken in order, one plan at a time: what waits is its text, never a plan, a task or
        a coroutine (at 80 KB each plan in flight holds ~3 KB of the heap; docs/links.md)."""
        if len(self.speech) >= MAX_SENTENCES:
            self.counts["sentences_dropped"] += 1
            log.emit("xiaozhi", [("what", "sentence_dropped"), ("queued", len(self.speech))])
            return
        self.speech.append((action, text))
        self.counts["sentences"] += 1
        if not self._speaking:
            self._speaking = True
            self._run(self._speak())

    async def _speak(self):
        try:
            while self.speech:
                action, text = self.speech.pop(0)
                cap = _cap(self.facade, action)
                if cap is None:
                    why = "no %s on the menu" % action
                    log.emit("xiaozhi", [("what", "cannot_speak"), ("why", why)])
                    continue
                limit = cap["params"][0].get("max", MAX_TEXT) if cap.get("params") else MAX_TEXT
                plan = one_step(action, {"text": clip_text(text, limit)})
                text = None  # the queue's text is not kept while the plan runs
                try:
                    status, out = await self.facade.execute(plan)
                except MemoryError:
                    self._short(action)  # this sentence is lost, the next ones are tried
                    continue
                finally:
                    plan = None
                if not _ok(out):
                    log.emit(
                        "xiaozhi", [("what", "speak_failed"), ("outcome", status), ("report", out)]
                    )
                out = None
        finally:
            self._speaking = False

    def on_llm(self, msg):
        emotion = msg.get("emotion")
        if not isinstance(emotion, str) or not emotion:
            return
        found = express_action(self.facade.menu(), emotion)
        if found is None:
            log.emit("xiaozhi", [("what", "emotion"), ("emotion", emotion[:40]), ("shown", False)])
            return
        self._run(self._step(found[0], found[1]))

    def on_alert(self, msg):
        message = msg.get("message")
        pairs = [
            ("what", "alert"),
            ("status", _said(msg.get("status"))),
            ("message", _said(message)),
        ]
        if not isinstance(message, str) or not message.strip():
            log.emit("xiaozhi", pairs + [("announced", False), ("why", "no message")])
            return
        if _cap(self.facade, "announce") is None:
            log.emit("xiaozhi", pairs + [("announced", False), ("why", "no announce on the menu")])
            return
        log.emit("xiaozhi", pairs + [("announced", True)])
        self.say(message, "announce")  # the speech queue: after the sentences before it

    def on_system(self, msg):
        if msg.get("command") == "reboot":
            if not self.rebooting:
                self.rebooting = True
                self._run(self._reboot())
        else:
            self.counts["unknown"] += 1

    async def _reboot(self, poll_ms=100):
        log.emit("xiaozhi", [("what", "reboot"), ("when", "once the bus is quiet")])
        waited = 0
        while waited < REBOOT_WAIT_MS and (
            self.speech or self._speaking or not self.facade.quiet()
        ):
            await asyncio.sleep(poll_ms / 1000)
            waited += poll_ms
        if waited >= REBOOT_WAIT_MS:
            log.emit("xiaozhi", [("what", "reboot"), ("why", "bus not quiet after 30 s")])
        self.facade.reset()

    def _short(self, what):
        # a task of this device met a full heap: counted and said, never a task's lost exception
        self.counts["no_memory"] += 1
        gc.collect()
        log.emit("xiaozhi", [("what", "no_memory"), ("in", what), ("free", _free())])

    async def _step(self, action, params):
        try:
            status, out = await self.facade.execute(one_step(action, params))
        except MemoryError:
            return self._short(action)
        if not _ok(out):
            log.emit("xiaozhi", [("what", "step_failed"), ("action", action), ("report", out)])

    def _run(self, coro):
        t = self.spawn(coro)
        self.tasks = [x for x in self.tasks if not _done(x)]
        self.tasks.append(t)
        return t

    def status(self):
        d = dict(self.counts)
        d["session_id"] = self.session_id
        d["speech_queued"] = len(self.speech)
        d["listed"] = self.listed_gen is not None and self.listed_gen == self.menu_gen
        d["speaking"] = self._speaking
        return d


class Endpoint(Device):
    """The body as the tool server of a xiaozhi MCP endpoint (接入点, a relay such as xinnan's
    mcp-endpoint-server): bare JSON-RPC in WebSocket text frames, no hello, no envelope. The
    relay sends one initialize and tools/list per device session over the one socket, ids
    rewritten into strings ("<uuid>_n_1"), and drops what this side sends without an id: each
    request is answered on its own, its id echoed as it came, and nothing is notified."""

    def send(self, obj):
        return self._queue(obj)  # bare JSON-RPC: no envelope, no session id

    def _mcp_out(self, payload):
        return self.send(payload)

    def _wrapped(self, payload):
        return payload

    def open(self):
        """A new connection to the relay: it may carry requests at once."""
        self.start()
        self.ready = True

    def _message(self, buf, n):
        try:
            msg, clipped, nonfinite = jsonin.read(buf, n)
        except ValueError as e:
            self.counts["malformed"] += 1
            log.emit("xiaozhi", [("what", "malformed"), ("error", str(e))])
            why = str(e)
            code = PARSE_ERROR if why.startswith("not JSON") else INVALID_REQUEST
            return self._mcp_out(_error(None, code, why))
        ask = isinstance(msg, dict) and "method" in msg and "id" in msg
        mid = msg["id"] if ask and _id_ok(msg) else None
        if nonfinite >= 0:
            self.counts["malformed"] += 1
            why = "NaN or Infinity at offset %d: not JSON" % nonfinite
            log.emit("xiaozhi", [("what", "malformed"), ("error", why)])
            if ask:
                self._mcp_out(_error(mid, INVALID_PARAMS, "invalid request: " + why))
            return
        if clipped:
            self.counts["clipped"] += clipped
            if ask and msg.get("method") == "tools/call":
                why = "the request holds a string of %d bytes; at most %d are read" % (
                    jsonin.longest(),
                    jsonin.MAX_STRING,
                )
                return self._mcp_out(_error(mid, INVALID_PARAMS, why))
        try:
            self.on_mcp(msg)
        except MemoryError:
            raise
        except Exception as e:
            self.counts["malformed"] += 1
            log.emit("xiaozhi", [("what", "error"), ("type", "mcp"), ("error", repr(e))])

    def on_body(self, kind, data):
        # organ events and list_changed would be dropped by the relay: only the menu is followed
        if kind == "menu":
            self.menu_gen += 1
            if self.changed_at is None:
                self.changed_at = ticks_ms()
                self.wake.set()


def _ok(out):
    # a report whose steps all went well; a refusal ({"problems": ...}) is not one
    return isinstance(out, dict) and out.get("ok") is True


def _blen(obj):
    # UTF-8 length of the JSON text: MicroPython does not escape non-ASCII as CPython does
    s = json.dumps(obj)
    return len(s.encode()) if _MP else len(s)


def _done(t):
    d = getattr(t, "done", None)
    return d() if d is not None else False


def _cap(facade, name):
    # the live capability `name`: from facade.capabilities() where it has them (no menu built:
    # ~7 KB of objects on the unix port for every sentence), else from its menu
    caps = getattr(facade, "capabilities", None)
    for c in caps() if caps is not None else facade.menu().get("capabilities", ()):
        if c["name"] == name:
            return c
    return None


def _id_ok(p):
    # a JSON-RPC id: a string, a number or null (JSON-RPC 2.0 section 4)
    mid = p.get("id")
    return mid is None or (isinstance(mid, (str, int, float)) and not isinstance(mid, bool))


def _said(text):
    # a server's text as the event log shows it: at most LOG_TEXT characters (a line stays small)
    if not isinstance(text, str):
        return None
    return text if len(text) <= LOG_TEXT else text[: LOG_TEXT - 3] + "..."


def _free():
    return gc.mem_free() if hasattr(gc, "mem_free") else -1


def _error(mid, code, message):
    return {"jsonrpc": "2.0", "id": mid, "error": {"code": code, "message": message}}


def _result(mid, result):
    return {"jsonrpc": "2.0", "id": mid, "result": result}
