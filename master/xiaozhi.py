# The xiaozhi v1 link: the master as a xiaozhi device (discovery, one WebSocket, MCP over WS, TTS as speech).
#
# Contract: ../shared/seeds/002_*.txt (StackChan Protocol v1, the xiaozhi v1 wire format).
# `Device` is the protocol state of one device: it takes the server's messages in and puts its
# own out (`outbox`), against a facade (see `Facade` below); nothing there opens a socket.
# `Link` is the I/O edge: discovery over HTTP, then one WebSocket with a reader and a single
# writer task, the watchdog, and reconnects with exponential backoff and jitter. The body never
# waits on this link: tool calls and speech run as their own tasks, the writer drops what the
# server does not take in time, and every failure ends in a reconnect, never in the master.
import json
import random
import sys

try:
    import asyncio
except ImportError:  # pragma: no cover
    asyncio = None

from micropython import const

from organbus import log
from organbus.ticks import ticks_diff, ticks_ms
from organbus.utf8 import clip_text
from master import ws
from master.bodyproto import express_action, one_step_plan
from master.mcp import INVALID_REQUEST, METHOD_NOT_FOUND, McpServer, tools as mcp_tools

_MP = sys.implementation.name == "micropython"

MCP_VERSION = "2024-11-05"  # the MCP revision of the xiaozhi device contract (section 6)
PAGE_BYTES = const(8192)  # a tools/list answer, whole WebSocket message, is at most this long
HELLO_TIMEOUT_MS = const(10000)  # section 3.3: the server hello within 10 s, or drop
WATCHDOG_MS = const(120000)  # section 3.4: no frame for 120 s and the channel is dead
BACKOFF_MIN_MS = const(1000)
BACKOFF_MAX_MS = const(60000)
MAX_SENTENCES = const(16)  # sentences waiting to be spoken; more are dropped and counted
MAX_OUTBOX = const(24)  # messages waiting for the writer; more are dropped and counted
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
    """(headers, body) of the OTA/discovery POST (section 2.1)."""
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
    return headers, json.dumps(info)


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
    token = w.get("token")
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
    - `async execute(plan) -> (status, report | {"problems"})`: the one plan path;
    - `subscribe(fn)`: `fn(kind, data)` for body events, kind "online" / "offline"
      (data: module_id, module_type, port), "event" (module_id, name, status) and "menu"
      (the menu changed);
    - `quiet() -> bool`: no plan is running (a reboot waits for it);
    - `reset()`: reset the master (machine.reset on a board)."""


class Device:
    """One xiaozhi device session's protocol state over a Facade; messages out via `outbox`."""

    def __init__(self, facade, version="0.1.0", spawn=None):
        self.facade = facade
        self.version = version
        self.spawn = spawn or asyncio.create_task
        self.mcp = McpServer(facade)
        self.outbox = []  # JSON strings for the writer, in order
        self.wake = asyncio.Event()
        self.session_id = None
        self.ready = False  # the server hello has come: messages may go out
        self.initialized = False  # the server sent initialize
        self.speech = []  # sentences waiting for the speaker, in order
        self._speaking = False
        self.rebooting = False
        self.tasks = []  # tool calls and speech still running
        self.counts = {
            "messages_in": 0,
            "messages_out": 0,
            "audio_dropped": 0,
            "malformed": 0,
            "unknown": 0,
            "notifications": 0,
            "tool_calls": 0,
            "sentences": 0,
            "sentences_dropped": 0,
            "out_dropped": 0,
            "events_out": 0,
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
        if not self.ready:
            return False
        if len(self.outbox) >= MAX_OUTBOX:
            self.counts["out_dropped"] += 1
            return False
        obj["session_id"] = self.session_id
        self.outbox.append(json.dumps(obj))
        self.wake.set()
        return True

    def _mcp_out(self, payload):
        return self.send({"type": "mcp", "payload": payload})

    # -- session -----------------------------------------------------------------------------

    def start(self):
        """A new connection: nothing of the last one is sent on it."""
        self.outbox = []
        self.session_id = None
        self.ready = False
        self.initialized = False

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
        self.counts["messages_in"] += 1
        try:
            msg = json.loads(raw)
        except (ValueError, TypeError) as e:
            self.counts["malformed"] += 1
            log.emit("xiaozhi", [("what", "malformed"), ("error", "not JSON: %s" % e)])
            return
        if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
            self.counts["malformed"] += 1
            log.emit("xiaozhi", [("what", "malformed"), ("error", "not an object with a type")])
            return
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
                log.emit(
                    "xiaozhi", [("what", "stt"), ("text", text if isinstance(text, str) else None)]
                )
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
            mid = p.get("id") if isinstance(p, dict) else None
            return self._mcp_out(
                _error(mid, INVALID_REQUEST, "payload must be a JSON-RPC 2.0 object")
            )
        method = p.get("method")
        if "id" not in p:
            self.counts["notifications"] += 1  # notifications/* and anything else: dropped
            return
        mid = p["id"]
        if not isinstance(method, str):
            return  # a response to a request this device never sends
        params = p.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return self._mcp_out(_error(mid, -32602, "params must be an object"))
        if method == "initialize":
            self.initialized = True
            return self._mcp_out(_result(mid, self.initialize_result()))
        if method == "ping":
            return self._mcp_out(_result(mid, {}))
        if method == "tools/list":
            cur = params.get("cursor") or ""
            return self._mcp_out(self.tools_page(mid, cur))
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
        """The tools/list answer from index `cursor` on, whole message at most PAGE_BYTES."""
        try:
            start = int(cursor) if cursor else 0
        except ValueError:
            start = -1
        tools = mcp_tools(self.facade.menu())
        if not 0 <= start <= len(tools):
            return _error(mid, -32602, "invalid cursor %r" % (str(cursor)[:20],))
        # the envelope with an empty page and the longest cursor, then each tool and its comma
        env = {"session_id": self.session_id or "", "type": "mcp"}
        env["payload"] = _result(mid, {"tools": [], "nextCursor": str(len(tools))})
        used = _blen(env)
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
        return _result(mid, r)

    async def _call(self, mid, params):
        try:
            out = await self.mcp.call_tool(mid, params, MCP_VERSION)
        except MemoryError:
            raise
        except Exception as e:
            out = _error(mid, -32603, "internal error in tools/call: %r" % e)
        self._mcp_out(out)

    def on_body(self, kind, data):
        """A body event from the facade: organs online/offline, organ EVENTs, the menu changed."""
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

    def say(self, text):
        """Queue one sentence for the speaker organ; the queue is spoken in order."""
        if len(self.speech) >= MAX_SENTENCES:
            self.counts["sentences_dropped"] += 1
            log.emit("xiaozhi", [("what", "sentence_dropped"), ("queued", len(self.speech))])
            return
        self.speech.append(text)
        self.counts["sentences"] += 1
        if not self._speaking:
            self._speaking = True
            self._run(self._speak())

    async def _speak(self):
        try:
            while self.speech:
                text = self.speech.pop(0)
                cap = _cap(self.facade.menu(), "speak")
                if cap is None:
                    log.emit("xiaozhi", [("what", "cannot_speak"), ("why", "no speak on the menu")])
                    continue
                limit = cap["params"][0].get("max", 240) if cap.get("params") else 240
                status, out = await self.facade.execute(
                    one_step_plan("speak", {"text": clip_text(text, limit)})
                )
                if not _ok(out):
                    log.emit(
                        "xiaozhi", [("what", "speak_failed"), ("outcome", status), ("report", out)]
                    )
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
        pairs = [("what", "alert"), ("status", msg.get("status")), ("message", message)]
        if not isinstance(message, str) or not message.strip():
            log.emit("xiaozhi", pairs + [("announced", False), ("why", "no message")])
            return
        cap = _cap(self.facade.menu(), "announce")
        if cap is None:
            log.emit("xiaozhi", pairs + [("announced", False), ("why", "no announce on the menu")])
            return
        limit = cap["params"][0].get("max", 240) if cap.get("params") else 240
        log.emit("xiaozhi", pairs + [("announced", True)])
        self._run(self._step("announce", {"text": clip_text(message, limit)}))

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

    async def _step(self, action, params):
        status, out = await self.facade.execute(one_step_plan(action, params))
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
        return d


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


def _cap(menu, name):
    for c in menu.get("capabilities", ()):
        if c["name"] == name:
            return c
    return None


def _error(mid, code, message):
    return {"jsonrpc": "2.0", "id": mid, "error": {"code": code, "message": message}}


def _result(mid, result):
    return {"jsonrpc": "2.0", "id": mid, "result": result}


# -- the I/O edge ---------------------------------------------------------------------------------


async def _wait(aw, ms):
    if _MP:
        return await asyncio.wait_for_ms(aw, ms)
    return await asyncio.wait_for(aw, ms / 1000)


async def http_post(url, headers, body, timeout_ms=10000, limit=16384, ssl_context=None):
    """(status, body bytes) of one HTTP/1.1 POST to http:// or https://; XiaozhiError else."""
    if url.startswith("http://"):
        secure, rest = False, url[7:]
    elif url.startswith("https://"):
        secure, rest = True, url[8:]
    else:
        raise XiaozhiError("ota_url %r must start with http:// or https://" % url[:80])
    _, host, port, target = ws.parse_url(("wss://" if secure else "ws://") + rest)
    data = body.encode() if isinstance(body, str) else body

    async def go():
        if secure:
            ctx = ssl_context if ssl_context is not None else ws.default_ssl_context()
            r, w = await asyncio.open_connection(host, port, ssl=ctx, server_hostname=host)
        else:
            r, w = await asyncio.open_connection(host, port)
        try:
            lines = ["POST %s HTTP/1.1" % target, "Host: %s:%d" % (host, port)]
            for k in headers:
                lines.append("%s: %s" % (k, headers[k]))
            lines.append("Content-Length: %d" % len(data))
            lines.append("Connection: close")
            w.write(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
            await w.drain()
            status_line = await r.readline()
            parts = status_line.decode().split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
                raise XiaozhiError("OTA server answered %r, not HTTP" % status_line[:60])
            n = -1
            total = 0
            while True:
                line = await r.readline()
                total += len(line)
                if not line or total > 4096:
                    raise XiaozhiError("OTA answer head broken or over 4096 bytes")
                if line in (b"\r\n", b"\n"):
                    break
                s = line.decode()
                if s.lower().startswith("content-length:"):
                    n = int(s[15:].strip())
            if n > limit:
                raise XiaozhiError("OTA answer of %d bytes is over %d" % (n, limit))
            out = b""
            while n < 0 or len(out) < n:
                chunk = await r.read(min(1024, n - len(out)) if n >= 0 else 1024)
                if not chunk:
                    break
                out += chunk
                if len(out) > limit:
                    raise XiaozhiError("OTA answer over %d bytes" % limit)
            return int(parts[1]), out
        finally:
            try:
                w.close()
                await w.wait_closed()
            except Exception:
                pass

    try:
        return await _wait(go(), timeout_ms)
    except asyncio.TimeoutError:
        raise XiaozhiError("no OTA answer from %s:%d within %d ms" % (host, port, timeout_ms))
    except XiaozhiError:
        raise
    except Exception as e:
        raise XiaozhiError("OTA request to %s:%d failed: %r" % (host, port, e))


class Link:
    """The running link: discovery, the WebSocket session, reconnects; `status()` for /status.

    `ident`: {"device_id", "client_id"}; `set_clock(epoch_ms, tz_min)` and `facade.reset()`
    come from the board. `config`: {"ota_url", "token", "max_message", "cadata"}."""

    def __init__(self, device, config, ident, role="master", set_clock=None, backoff=None):
        self.device = device
        self.ota_url = config.get("ota_url")
        self.token = config.get("token")  # used when the OTA answer brings none
        self.ident = ident
        self.role = role
        self.set_clock = set_clock
        self.cadata = config.get("cadata")
        self.backoff = backoff or Backoff()
        self.hello_timeout_ms = HELLO_TIMEOUT_MS
        self.watchdog_ms = WATCHDOG_MS
        self.sock = ws.WebSocket(max_message=config.get("max_message", 4096))
        self.state = "off"
        self.url = None
        self.connects = 0  # sessions that reached ready
        self.reconnects = 0  # attempts after the first
        self.last_error = None
        self.firmware_offer = None
        self._stop = False

    def status(self):
        d = {
            "state": self.state,
            "ota_url": self.ota_url,
            "url": self.url,
            "reconnects": self.reconnects,
            "sessions": self.connects,
            "last_error": self.last_error,
        }
        d.update(self.device.status())
        c = self.sock.counters()
        d["oversize"] = c["oversize"]
        d["ws_messages_in"] = c["messages_in"]
        d["ws_messages_out"] = c["messages_out"]
        return d

    def _say(self, state, pairs=()):
        self.state = state
        log.emit("xiaozhi", [("what", "state"), ("state", state)] + list(pairs))

    async def run(self):
        """For ever: discover, connect, serve the session; after any failure, back off."""
        first = True
        while not self._stop:
            if not first:
                self.reconnects += 1
            first = False
            try:
                await self.session()
            except MemoryError:
                self.last_error = "MemoryError"
            except Exception as e:
                self.last_error = str(e)[:160] or repr(e)
            self.device.end()
            try:
                await self.sock.abort()
            except Exception:
                pass
            if self._stop:
                break
            d = self.backoff.next()
            self._say("backoff", [("ms", d), ("error", self.last_error)])
            await asyncio.sleep(d / 1000)

    async def discover(self):
        self._say("discovering", [("ota_url", self.ota_url)])
        headers, body = discovery_request(self.ident, self.role, self.device.version)
        status, raw = await http_post(self.ota_url, headers, body)
        if status != 200:
            raise XiaozhiError("OTA answered HTTP %d" % status)
        try:
            obj = json.loads(raw)
        except ValueError as e:
            raise XiaozhiError("OTA answer is not JSON: %s" % e)
        d = parse_discovery(obj)
        if d["firmware"] is not None and d["firmware"] != self.firmware_offer:
            self.firmware_offer = d["firmware"]
            fw = d["firmware"]
            log.emit(
                "xiaozhi",
                [("what", "firmware_offer"), ("version", fw.get("version")), ("url", fw.get("url")),
                 ("followed", False)],
            )  # fmt: skip
        if d["activation"] is not None:
            log.emit(
                "xiaozhi",
                [("what", "activation"), ("message", d["activation"].get("message")),
                 ("followed", False)],
            )  # fmt: skip
        if d["server_time_ms"] is not None and self.set_clock is not None:
            try:
                self.set_clock(d["server_time_ms"], d["tz_min"])
            except Exception as e:
                log.emit("xiaozhi", [("what", "clock_not_set"), ("error", repr(e))])
        return d

    async def session(self):
        d = await self.discover()
        self.url = d["url"]
        token = d["token"] or self.token
        hdrs = {
            "Protocol-Version": "1",
            "Device-Id": self.ident["device_id"],
            "Client-Id": self.ident["client_id"],
        }
        if token:
            hdrs["Authorization"] = "Bearer " + token
        self._say("connecting", [("url", self.url)])
        ctx = None
        if self.url.startswith("wss://"):
            ctx = ws.default_ssl_context(self.cadata)
        sock = self.sock
        await sock.connect(self.url, hdrs, ctx)
        dev = self.device
        dev.start()
        await sock.send_text(json.dumps(dev.client_hello()))
        self._say("hello")
        await self._await_hello()
        self._say("ready", [("session_id", dev.session_id)])
        self.connects += 1
        self.backoff.reset()
        # reader and writer each their own task; the first to end ends the session
        ended = asyncio.Event()
        errors = []

        async def guard(coro):
            try:
                await coro
            except Exception as e:
                errors.append(e)
            finally:
                ended.set()

        r = asyncio.create_task(guard(self._reader()))
        w = asyncio.create_task(guard(self._writer()))
        try:
            await ended.wait()
        finally:
            r.cancel()
            w.cancel()
        raise errors[0] if errors else XiaozhiError("session ended")

    async def _await_hello(self):
        sock, dev = self.sock, self.device
        left = self.hello_timeout_ms
        while True:
            t0 = ticks_ms()
            try:
                op, n = await sock.recv(max(left, 1))
            except ws.WsTimeout:
                await sock.close(ws.NORMAL, "no server hello")
                raise XiaozhiError("no server hello within %d ms" % self.hello_timeout_ms)
            left -= ticks_diff(ticks_ms(), t0)
            if op == ws.TEXT:
                try:
                    obj = json.loads(bytes(sock.message[:n]))
                except ValueError:
                    obj = None
                if dev.on_hello(obj):
                    return
            dev.counts["unknown"] += 1  # anything before the hello is dropped
            if left <= 0:
                await sock.close(ws.NORMAL, "no server hello")
                raise XiaozhiError("no server hello within %d ms" % self.hello_timeout_ms)

    async def _reader(self):
        sock, dev = self.sock, self.device
        while True:
            try:
                op, n = await sock.recv(self.watchdog_ms)
            except ws.WsTimeout:
                if sock.open:  # nothing at all for 120 s: the channel is dead (section 3.4)
                    await sock.close(ws.GOING_AWAY, "watchdog")
                    raise XiaozhiError("no frame from the server for %d ms" % self.watchdog_ms)
                raise
            if op == ws.BINARY:
                dev.on_binary(n)
            else:
                dev.on_text(bytes(sock.message[:n]))

    async def _writer(self):
        sock, dev = self.sock, self.device
        while True:
            while dev.outbox:
                m = dev.outbox.pop(0)
                await sock.send_text(m)  # a WsError ends the session: the link reconnects
                dev.counts["messages_out"] += 1
            dev.wake.clear()
            if not dev.outbox:
                await dev.wake.wait()

    def stop(self):
        self._stop = True
