# The xiaozhi v1 device's session state: hello, the message envelope, the server's messages, speech.
#
# Contract: the xiaozhi v1 device wire format (StackChan Protocol v1), described in docs/links.md.
# `Device` takes the server's messages in and puts its own out (`outbox`, for the one writer)
# against a facade (see `Facade`); nothing here opens a socket. Discovery (section 2) is
# master/links/xiaozhi_discovery.py, MCP over WS (section 6) master/links/xiaozhi_mcp.py, the I/O
# edge (discovery over HTTP, the WebSocket, watchdog, reconnects) master/links/xiaozhi_link.py.
# The body never waits on this link: tool calls and speech run as their own tasks, and no
# message content raises.
import gc
import random

import asyncio

from micropython import const

from organbus import log
from organbus.ticks import ticks_diff, ticks_ms
from organbus.utf8 import MAX_TEXT, clip_text
from organbus.plan import one_step
from master.links.bodyproto import express_action
from master.links import jsonrpc
from master.links.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR
from master.links.mcp import McpServer
from master.links.xiaozhi_discovery import XiaozhiError
from master.links.xiaozhi_mcp import McpOverWs, id_ok
from master.net import jsonin, jsonout

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


# -- the device (sections 3-5; its MCP half, section 6: master/links/xiaozhi_mcp.py) ---------------


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


class Device(McpOverWs):
    """One xiaozhi device session's protocol state over a Facade; messages out via `outbox`."""

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
            why, code = self._unreadable(e)
            if self.ready:  # it may have been a request: JSON-RPC's error for it, id null
                what = "parse error" if code == PARSE_ERROR else "invalid"
                self._mcp_out(jsonrpc.error(None, code, "%s: %s" % (what, why)))
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
                mid = p["id"] if id_ok(p) else None
                self._mcp_out(jsonrpc.error(mid, INVALID_PARAMS, "invalid request: " + why))
            return
        if clipped and msg["type"] == "mcp":
            p = msg.get("payload")
            if isinstance(p, dict) and p.get("method") == "tools/call" and "id" in p:
                why = "the request holds a string of %d bytes; at most %d are read" % (
                    jsonin.longest(),
                    jsonin.MAX_STRING,
                )  # a cut argument never runs
                return self._mcp_out(
                    jsonrpc.error(p["id"] if id_ok(p) else None, INVALID_PARAMS, why)
                )
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

    def _unreadable(self, e):
        # a message jsonin cannot read (not JSON, or beyond its bounds): counted and said; the
        # reason and the JSON-RPC error code for it (it may have been a request)
        self.counts["malformed"] += 1
        why = str(e)
        log.emit("xiaozhi", [("what", "malformed"), ("error", why)])
        return why, PARSE_ERROR if why.startswith("not JSON") else INVALID_REQUEST

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

    def on_body(self, kind, data):
        """A body event from the facade: organs online/offline, organ EVENTs, the menu changed."""
        if kind == "menu":
            self._menu_changed()
        if not self.ready:
            return
        if kind == "menu":
            if self.initialized:
                self._mcp_out({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            return
        name = {"online": "organ_online", "offline": "organ_offline", "event": "organ_event"}
        if kind in name and self.send({"type": "event", "name": name[kind], "data": data}):
            self.counts["events_out"] += 1

    def _menu_changed(self):
        self.menu_gen += 1
        if self.changed_at is None:
            self.changed_at = ticks_ms()
            self.wake.set()  # the writer starts looking for a re-open

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
        t = self.spawn(self._tracked(coro))
        self.tasks.append(t)
        return t

    async def _tracked(self, coro):
        # A task leaves `tasks` as it ends: a done MicroPython Task keeps its coroutine, so a
        # finished tools/call kept its frames and locals until the next one (2,272 B on the
        # unix port after a call, 256 B so).
        try:
            return await coro
        finally:
            t = asyncio.current_task()
            if t in self.tasks:
                self.tasks.remove(t)

    def status(self):
        return dict(self.pairs())

    def pairs(self):
        """status() as its (key, value) pairs: no dict's table for /status (Link.pairs)."""
        p = list(self.counts.items())
        p.append(("session_id", self.session_id))
        p.append(("speech_queued", len(self.speech)))
        p.append(("listed", self.listed_gen is not None and self.listed_gen == self.menu_gen))
        p.append(("speaking", self._speaking))
        return p


def _ok(out):
    # a report whose steps all went well; a refusal ({"problems": ...}) is not one
    return isinstance(out, dict) and out.get("ok") is True


def _cap(facade, name):
    # the live capability `name`: from facade.capabilities() where it has them (no menu built:
    # ~7 KB of objects on the unix port for every sentence), else from its menu
    caps = getattr(facade, "capabilities", None)
    for c in caps() if caps is not None else facade.menu().get("capabilities", ()):
        if c["name"] == name:
            return c
    return None


def _said(text):
    # a server's text as the event log shows it: at most LOG_TEXT characters (a line stays small)
    if not isinstance(text, str):
        return None
    return text if len(text) <= LOG_TEXT else text[: LOG_TEXT - 3] + "..."


def _free():
    return gc.mem_free() if hasattr(gc, "mem_free") else -1
