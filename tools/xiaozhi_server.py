# Stand-in xiaozhi v1 server (the seed's server contract, section 8) and replicas of the real peers: xinnan's server, the MCP endpoint relay.
"""A small xiaozhi v1 server for tests and for people without one.

    python tools/xiaozhi_server.py                     # OTA on http://127.0.0.1:8002/xiaozhi/ota/
    python tools/xiaozhi_server.py --port 8002 --token secret --say "Hello." "I am here."
    python tools/xiaozhi_server.py --peer xinnan       # as xinnan-tech/xiaozhi-esp32-server behaves
    python tools/xiaozhi_server.py --relay             # an MCP endpoint relay (mcp-endpoint-server)

Point a device at the printed OTA URL. The server answers the OTA/discovery POST with
`websocket` (url, token), `server_time` and `firmware` (the device's own version, so nothing is
offered); on the WebSocket it waits for the client hello (10 s), sends the server hello with a
session id, then `initialize` and `tools/list` until no `nextCursor` is left. Console lines:

    tools                         print the device's tools
    call NAME {"arg": 1}          tools/call, print the answer
    say Hello there. | Goodbye.   one TTS reply: start, one sentence_start per sentence, stop
    emotion happy                 {"type": "llm", "emotion": ...}
    stt what time is it           {"type": "stt", "text": ...}
    alert Warning Battery low     {"type": "alert", "status", "message", "emotion": "sad"}
    reboot                        {"type": "system", "command": "reboot"}
    quit

It implements the contract and nothing of organbus's own: it has no speech engine, so the
binary frames it sends inside a TTS reply stand in for Opus packets (a device without an Opus
decoder drops them). Loopback addresses only.

`--peer xinnan` replicates what xinnan-tech/xiaozhi-esp32-server's device MCP handler does
(core/handle/helloHandle.py, core/providers/tools/device_mcp/mcp_handler.py, docs/peers.md):
at every hello a fresh tool list, `initialize` (id 1), 1 s after its answer `tools/list`
(id 2, the same id for every `nextCursor` page), tools only ever added; a page answered with
an error leaves the session never ready; a method from the device (list_changed included) is
only logged; `tools/call` ids from 1 again, the answer matched by int(id), 30 s to answer, a
refusal's text read from a top-level "error"; the connection closed after `--idle-close`
seconds (180) without voice in or TTS out.

`--relay` replicates xinnan-tech/mcp-endpoint-server: tools/xiaozhi_relay.py says how.
"""

import argparse
import asyncio
import json
import sys
import threading
import time
import uuid

import websockets
from websockets.asyncio.server import serve

LOOPBACK = ("127.0.0.1", "localhost", "::1")
HELLO_TIMEOUT_S = 10
CALL_TIMEOUT_S = 30  # xinnan's call_mcp_tool and call_mcp_endpoint_tool
IDLE_CLOSE_S = 180  # xinnan: close_connection_no_voice_time (120) + 60
OTA_PATH = "/xiaozhi/ota/"
WS_PATH = "/xiaozhi/v1/"


async def _request(owner, out, method, params, timeout):
    """A JSON-RPC request sent with `await out(msg)`, its id the next of `owner.next_id`, its
    answer's future in `owner.pending` until it comes (whole payload) or `timeout` s pass."""
    mid = owner.next_id
    owner.next_id += 1
    fut = asyncio.get_running_loop().create_future()
    owner.pending[mid] = fut
    msg = {"jsonrpc": "2.0", "id": mid, "method": method}
    if params is not None:
        msg["params"] = params
    await out(msg)
    try:
        return await asyncio.wait_for(fut, timeout)
    finally:
        owner.pending.pop(mid, None)


class Session:
    """One device connection: its hello, what it sent, its tools, pending MCP requests."""

    def __init__(self, ws, server):
        self.ws = ws
        self.server = server
        self.id = str(uuid.uuid4())
        self.headers = dict((k.lower(), v) for k, v in ws.request.headers.raw_items())
        self.hello = None
        self.received = []  # every JSON message from the device, in order
        self.binary_in = 0
        self.initialize = None  # the device's initialize result
        self.tools = None  # the device's tool list, all pages joined
        self.pages = []  # each tools/list result as it came (its size in bytes, its tools)
        self.next_id = 1
        self.pending = {}  # JSON-RPC id -> future of the payload
        self.ready = asyncio.Event()
        self.closed = asyncio.Event()
        self.aborted = False  # the device sent abort: the reply being streamed stops

    async def send(self, obj):
        await self.ws.send(json.dumps(obj))

    async def request(self, method, params=None, timeout=30):
        """A JSON-RPC request to the device's MCP server; its whole payload (result or error)."""
        return await _request(self, self._out, method, params, timeout)

    async def _out(self, msg):
        await self.send({"session_id": self.id, "type": "mcp", "payload": msg})

    async def list_tools(self):
        tools, cursor, pages = [], "", []
        while True:
            p = await self.request("tools/list", {"cursor": cursor, "withUserTools": False})
            if "error" in p:
                raise RuntimeError("tools/list failed: %s" % p["error"])
            r = p["result"]
            pages.append({"bytes": len(json.dumps(p)), "tools": [t["name"] for t in r["tools"]]})
            tools.extend(r["tools"])
            cursor = r.get("nextCursor")
            if not cursor:
                break
        self.tools, self.pages = tools, pages
        return tools

    async def say(self, sentences, opus_frames=2):
        """One TTS reply: start, sentence_start per sentence (with stand-in audio frames), stop."""
        self.aborted = False
        await self.send({"session_id": self.id, "type": "tts", "state": "start"})
        for s in sentences:
            if self.aborted:
                break
            await self.send(
                {"session_id": self.id, "type": "tts", "state": "sentence_start", "text": s}
            )
            for i in range(opus_frames):
                await self.ws.send(bytes((i + k) & 0xFF for k in range(120)))
        await self.send({"session_id": self.id, "type": "tts", "state": "stop"})


class XinnanSession(Session):
    """One device connection as xinnan's server holds it: the MCP client made afresh at every
    hello (`hellos` counts them), its tools added page by page, `ready` once a page has no
    nextCursor; `call_tool` numbers its ids from 1 (they meet initialize's and the list's)."""

    def __init__(self, ws, server):
        super().__init__(ws, server)
        self.hellos = 0
        self.lists = []  # per hello: the tool names listed, in order (all pages joined)
        self.list_errors = []  # error replies to tools/list (the session then never gets ready)
        self.ignored = []  # methods the device sent: logged only
        self.calls = []  # (name, seconds to the answer, payload) of every tools/call
        self.last_activity = time.monotonic()

    def new_client(self):
        # handleHelloMessage: conn.mcp_client = MCPClient(); send_mcp_initialize_message
        self.hellos += 1
        self.tools_by_name = {}
        self.tools, self.pages = None, []
        self.lists.append([])
        self.next_id = 1
        self.pending = {}
        self.ready = asyncio.Event()

    async def mcp(self, payload):
        await self.send({"type": "mcp", "payload": payload})

    async def send_initialize(self):
        caps = {"roots": {"listChanged": True}, "sampling": {}, "vision": {"url": "", "token": ""}}
        params = {"protocolVersion": "2024-11-05", "capabilities": caps,
                  "clientInfo": {"name": "XiaozhiClient", "version": "1.0.0"}}  # fmt: skip
        await self.mcp({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})

    async def on_mcp(self, p):
        """handle_mcp_message, as it reads a payload from the device."""
        if not isinstance(p, dict):
            return
        if "result" in p:
            result = p["result"]
            mid = int(p.get("id", 0))
            fut = self.pending.pop(mid, None)
            if fut is not None:
                if not fut.done():
                    fut.set_result(p)
                return
            if mid == 1:
                self.initialize = result
                await asyncio.sleep(1)
                await self.mcp({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            elif mid == 2 and isinstance(result, dict) and isinstance(result.get("tools"), list):
                self.pages.append({"bytes": len(json.dumps(p)),
                                   "tools": [t.get("name") for t in result["tools"]]})  # fmt: skip
                for t in result["tools"]:
                    if isinstance(t, dict):
                        self.tools_by_name[t.get("name", "")] = t  # added, never removed
                        self.lists[-1].append(t.get("name"))
                cursor = result.get("nextCursor", "")
                if cursor:
                    params = {"cursor": cursor}
                    await self.mcp(
                        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": params}
                    )
                else:
                    self.tools = list(self.tools_by_name.values())
                    self.ready.set()
        elif "method" in p:
            self.ignored.append(p["method"])  # logger.info("收到MCP客户端请求: ...") and nothing
        elif "error" in p:
            mid = int(p.get("id", 0)) if not isinstance(p.get("id"), type(None)) else 0
            fut = self.pending.pop(mid, None)
            if fut is not None and not fut.done():
                fut.set_result(p)
            elif mid == 2:
                self.list_errors.append(p["error"])

    async def request(self, method, params=None, timeout=CALL_TIMEOUT_S):
        """A request with the call ids (from 1 again per hello); its whole payload."""
        return await _request(self, self.mcp, method, params, timeout)

    async def call_tool(self, name, arguments=None, timeout=CALL_TIMEOUT_S):
        """call_mcp_tool: content[0].text, or RuntimeError with the top-level "error" of an
        isError result (or the MCP error's message); TimeoutError after 30 s."""
        if not self.ready.is_set():
            raise RuntimeError("MCP客户端尚未准备就绪")
        t0 = time.monotonic()
        p = await self.request("tools/call", {"name": name, "arguments": arguments or {}}, timeout)
        self.calls.append((name, time.monotonic() - t0, p))
        if "error" in p:
            raise RuntimeError("MCP错误: %s" % p["error"].get("message", "未知错误"))
        r = p.get("result")
        if isinstance(r, dict):
            if r.get("isError") is True:
                raise RuntimeError("工具调用错误: %s" % r.get("error", "未提供具体错误信息"))
            c = r.get("content")
            if isinstance(c, list) and c and isinstance(c[0], dict) and "text" in c[0]:
                return c[0]["text"]
        return str(r)

    async def say(self, sentences, opus_frames=2):
        self.last_activity = time.monotonic()  # sending TTS counts as activity, as there
        await super().say(sentences, opus_frames)
        self.last_activity = time.monotonic()


class XiaozhiServer:
    """The stand-in server; `await start()` then use `session` (the latest connection)."""

    def __init__(self, host="127.0.0.1", port=0, ws_port=0, token=None, firmware="0.1.0",
                 peer=None, idle_close_s=IDLE_CLOSE_S):  # fmt: skip
        if host not in LOOPBACK:
            raise ValueError("the stand-in server listens on loopback only, not %r" % host)
        if peer not in (None, "xinnan"):
            raise ValueError("peer %r: expected xinnan (or none: the stand-in)" % (peer,))
        self.peer = peer  # "xinnan": as xinnan-tech/xiaozhi-esp32-server behaves
        self.idle_close_s = idle_close_s  # xinnan: no voice in nor TTS out this long, closed
        self.host, self.port, self.ws_port = host, port, ws_port
        self.token = token
        self.firmware = firmware
        self.send_hello = True  # False: take the client hello and never answer (tests)
        self.list_on_connect = True
        self.keepalive_s = 60  # a JSON message at least this often (the device's 120 s watchdog)
        self.ota_requests = []  # (headers, parsed body) of every OTA call
        self.sessions = []
        self.connections = 0
        self.on_message = None  # fn(session, obj) for each JSON message (the console prints)
        self._http = self._ws = None
        self.changed = asyncio.Event()

    @property
    def ota_url(self):
        return "http://%s:%d%s" % (self.host, self.port, OTA_PATH)

    @property
    def ws_url(self):
        return "ws://%s:%d%s" % (self.host, self.ws_port, WS_PATH)

    @property
    def session(self):
        return self.sessions[-1] if self.sessions else None

    async def start(self):
        self._ws = await serve(self._ws_conn, self.host, self.ws_port, max_size=1 << 20)
        self.ws_port = self._ws.sockets[0].getsockname()[1]
        self._http = await asyncio.start_server(self._http_conn, self.host, self.port)
        self.port = self._http.sockets[0].getsockname()[1]
        return self

    async def stop(self):
        for srv in (self._http, self._ws):
            if srv is not None:
                srv.close()
        if self._ws is not None:
            await self._ws.wait_closed()
        if self._http is not None:
            await self._http.wait_closed()
        self._http = self._ws = None

    def _changed(self):
        self.changed.set()
        self.changed = asyncio.Event()

    async def wait(self, pred, timeout=30):
        """Until pred() is true (checked on every change); its value, or TimeoutError."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            v = pred()
            if v:
                return v
            left = end - loop.time()
            if left <= 0:
                raise asyncio.TimeoutError("condition not met in %s s" % timeout)
            ev = self.changed
            try:
                await asyncio.wait_for(ev.wait(), min(left, 0.5))
            except asyncio.TimeoutError:
                pass

    # -- OTA / discovery (section 2) ----------------------------------------------------------

    async def _http_conn(self, reader, writer):
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            n = int(headers.get("content-length", "0"))
            body = await asyncio.wait_for(reader.readexactly(n), 10) if n else b""
            if path.split("?")[0].rstrip("/") != OTA_PATH.rstrip("/") or method not in (
                "GET",
                "POST",
            ):
                status, out = 404, {"error": "no route %s %s" % (method, path)}
            else:
                try:
                    info = json.loads(body) if body else None
                except ValueError:
                    info = {"unparsed": body.decode("utf-8", "replace")}
                self.ota_requests.append((headers, info))
                self._changed()
                status, out = 200, self.ota_answer()
            data = json.dumps(out).encode()
            writer.write(
                b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                b"Connection: close\r\n\r\n"
                % (status, b"OK" if status == 200 else b"Not Found", len(data))
                + data
            )
            await writer.drain()
        except Exception:
            pass
        finally:
            writer.close()

    def ota_answer(self):
        ws = {"url": self.ws_url, "version": 1}
        if self.token:
            ws["token"] = self.token
        return {
            "websocket": ws,
            "server_time": {"timestamp": int(time.time() * 1000), "timezone_offset": 0},
            "firmware": {"version": self.firmware, "url": ""},
        }

    # -- WebSocket (sections 3-6) ---------------------------------------------------------------

    async def _ws_conn(self, ws):
        self.connections += 1
        if ws.request.path.split("?")[0] != WS_PATH:
            await ws.close(4004, "no such path")
            return
        if self.token and ws.request.headers.get("Authorization") != "Bearer " + self.token:
            await ws.close(4001, "bad token")
            return
        s = (XinnanSession if self.peer == "xinnan" else Session)(ws, self)
        self.sessions.append(s)
        self._changed()
        try:
            try:
                raw = await asyncio.wait_for(ws.recv(), HELLO_TIMEOUT_S)
                hello = json.loads(raw)
            except (asyncio.TimeoutError, ValueError, TypeError):
                await ws.close(4002, "no client hello")
                return
            if not isinstance(hello, dict) or hello.get("type") != "hello":
                await ws.close(4002, "the first message must be the client hello")
                return
            s.hello = hello
            self._changed()
            if not self.send_hello:
                await ws.wait_closed()
                return
            if self.peer == "xinnan":
                await self._xinnan(s, hello)
                return
            await s.send(
                {
                    "type": "hello",
                    "transport": "websocket",
                    "session_id": s.id,
                    "audio_params": {"sample_rate": 24000, "frame_duration": 60},
                }
            )
            reader = asyncio.create_task(self._read(s))
            keep = asyncio.create_task(self._keepalive(s))
            try:
                if self.list_on_connect:
                    init = await s.request(
                        "initialize", {"protocolVersion": "2024-11-05", "capabilities": {}}
                    )
                    s.initialize = init.get("result")
                    await s.send(
                        {
                            "session_id": s.id,
                            "type": "mcp",
                            "payload": {"jsonrpc": "2.0", "method": "notifications/initialized"},
                        }
                    )
                    await s.list_tools()
                s.ready.set()
                self._changed()
                await reader
            finally:
                reader.cancel()
                keep.cancel()
        except websockets.ConnectionClosed:
            pass
        except asyncio.TimeoutError:
            pass
        finally:
            s.closed.set()
            self._changed()

    async def _xinnan(self, s, hello):
        # xinnan's ConnectionHandler: every text message through its handlers, a hello (the
        # first and any later one) makes a fresh MCP client; the idle check every few seconds
        tasks = set()

        async def on_hello(h):
            s.hello = h
            mcp = isinstance(h.get("features"), dict) and h["features"].get("mcp")
            if mcp:
                s.new_client()
            await s.send(self.welcome(s))
            if mcp:
                await s.send_initialize()
            self._changed()

        def spawn(coro):
            t = asyncio.create_task(coro)
            tasks.add(t)
            t.add_done_callback(tasks.discard)

        async def idle():
            while True:
                await asyncio.sleep(min(10, self.idle_close_s / 4))
                if time.monotonic() - s.last_activity > self.idle_close_s:
                    s.idle_closed = True
                    await s.ws.close()  # ConnectionHandler.close: a normal close
                    return

        s.idle_closed = False
        watch = asyncio.create_task(idle())
        try:
            await on_hello(hello)
            async for raw in s.ws:
                if isinstance(raw, bytes):
                    s.binary_in += 1
                    s.last_activity = time.monotonic()  # voice from the device
                    continue
                try:
                    msg = json.loads(raw)
                except ValueError:
                    continue
                s.received.append(msg)
                if self.on_message:
                    self.on_message(s, msg)
                if isinstance(msg, dict) and msg.get("type") == "hello":
                    await on_hello(msg)
                elif isinstance(msg, dict) and msg.get("type") == "mcp":
                    spawn(s.on_mcp(msg.get("payload")))
                self._changed()
        finally:
            watch.cancel()
            for t in list(tasks):
                t.cancel()

    def welcome(self, s):
        return {"type": "hello", "version": 1, "transport": "websocket", "session_id": s.id,
                "audio_params": {"format": "opus", "sample_rate": 24000, "channels": 1,
                                 "frame_duration": 60}}  # fmt: skip

    async def _keepalive(self, s):
        while True:
            await asyncio.sleep(self.keepalive_s)
            note = {"jsonrpc": "2.0", "method": "notifications/keepalive"}
            await s.send({"session_id": s.id, "type": "mcp", "payload": note})

    async def _read(self, s):
        async for raw in s.ws:
            if isinstance(raw, bytes):
                s.binary_in += 1
                continue
            try:
                msg = json.loads(raw)
            except ValueError:
                msg = {"unparsed": raw}
            s.received.append(msg)
            if isinstance(msg, dict) and msg.get("type") == "abort":
                s.aborted = True  # section 8: stop streaming, drop pending audio
            if self.on_message:
                self.on_message(s, msg)
            if isinstance(msg, dict) and msg.get("type") == "mcp":
                p = msg.get("payload") or {}
                fut = s.pending.get(p.get("id"))
                if fut is not None and not fut.done() and ("result" in p or "error" in p):
                    fut.set_result(p)
                elif p.get("method") == "notifications/tools/list_changed" and s.ready.is_set():
                    asyncio.create_task(self._relist(s))
            self._changed()

    async def _relist(self, s):
        try:
            await s.list_tools()
        except Exception:
            pass
        self._changed()


class ServerThread:
    """The server (or `cls`, e.g. EndpointRelay) on its own event loop in a thread (tests):
    `call(coro_fn, *args)`."""

    def __init__(self, cls=None, **kw):
        self.cls = cls or XiaozhiServer
        self.kw = kw
        self.server = None
        self.loop = None
        self._ready = threading.Event()

    def __enter__(self):
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("xiaozhi stand-in server did not start")
        return self

    def _run(self):
        self.loop = asyncio.new_event_loop()
        self.server = self.cls(**self.kw)
        self.loop.run_until_complete(self.server.start())
        self._ready.set()
        self.loop.run_forever()

    def call(self, fn, *args, timeout=60):
        """Run `fn(server, *args)` (a coroutine function) on the server's loop; its result."""
        fut = asyncio.run_coroutine_threadsafe(fn(self.server, *args), self.loop)
        return fut.result(timeout)

    def wait(self, pred, timeout=30):
        async def w(srv):
            return await srv.wait(pred, timeout)

        return self.call(w, timeout=timeout + 5)

    def restart(self, down_s=0.0):
        """Stop both listeners (dropping every connection), then serve again on the same ports."""

        async def r(srv):
            for s in srv.sessions:
                s.ws.transport.abort()
            await srv.stop()
            await asyncio.sleep(down_s)
            await srv.start()

        self.call(r)

    def __exit__(self, *exc):
        async def stop(srv):
            await srv.stop()

        try:
            self.call(stop, timeout=10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)


# -- the console --------------------------------------------------------------------------------


def _print(obj):
    print(json.dumps(obj), flush=True)


async def _console(srv, args):
    loop = asyncio.get_running_loop()
    print("xiaozhi stand-in server: OTA URL %s (WebSocket %s)" % (srv.ota_url, srv.ws_url))
    srv.on_message = lambda s, m: _print({"from_device": m})
    if args.say:
        asyncio.create_task(_say_when_ready(srv, args.say))
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        line = line.strip()
        if not line:
            continue
        word, _, rest = line.partition(" ")
        s = srv.session
        try:
            if word == "quit":
                return
            if s is None or not s.ready.is_set():
                print("no device session yet")
                continue
            if word == "tools":
                for t in s.tools or ():
                    print("  %s  %s" % (t["name"], t.get("description", "")))
            elif word == "call":
                name, _, a = rest.partition(" ")
                arguments = json.loads(a) if a.strip() else {}
                _print(await s.request("tools/call", {"name": name, "arguments": arguments}))
            elif word == "say":
                await s.say([x.strip() for x in rest.split("|") if x.strip()])
            elif word == "emotion":
                await s.send({"session_id": s.id, "type": "llm", "emotion": rest})
            elif word == "stt":
                await s.send({"session_id": s.id, "type": "stt", "text": rest})
            elif word == "alert":
                status, _, message = rest.partition(" ")
                await s.send(
                    {
                        "session_id": s.id,
                        "type": "alert",
                        "status": status,
                        "message": message,
                        "emotion": "sad",
                    }
                )
            elif word == "reboot":
                await s.send({"session_id": s.id, "type": "system", "command": "reboot"})
            else:
                print("unknown command %r (tools, call, say, emotion, stt, alert, reboot)" % word)
        except Exception as e:
            print("error: %r" % e)


async def _say_when_ready(srv, sentences):
    s = await srv.wait(lambda: srv.session if srv.session and srv.session.ready.is_set() else None)
    await s.say(sentences)


async def _main(args):
    if args.relay:
        from xiaozhi_relay import EndpointRelay, _relay_console

        relay = EndpointRelay(args.host, args.port, {args.token: "single_module"} if args.token
                              else None)  # fmt: skip
        await relay.start()
        try:
            await _relay_console(relay)
        finally:
            await relay.stop()
        return
    srv = XiaozhiServer(args.host, args.port, args.ws_port, args.token, args.firmware,
                        args.peer, args.idle_close)  # fmt: skip
    await srv.start()
    try:
        await _console(srv, args)
    finally:
        await srv.stop()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="loopback address to listen on")
    p.add_argument("--port", type=int, default=8002, help="OTA/discovery HTTP port (0: any)")
    p.add_argument("--ws-port", type=int, default=0, help="WebSocket port (default: any)")
    p.add_argument("--token", help="bearer token handed out and required on the WebSocket")
    p.add_argument("--firmware", default="0.1.0", help="firmware version the OTA answer names")
    p.add_argument("--say", nargs="+", help="once the device is ready, one TTS reply of these")
    p.add_argument("--peer", choices=["xinnan"], help="behave as this real server does")
    p.add_argument("--idle-close", type=float, default=IDLE_CLOSE_S,
                   help="--peer xinnan: close after this many seconds without voice (180)")  # fmt: skip
    p.add_argument("--relay", action="store_true",
                   help="an MCP endpoint relay replica instead (--port: its port, 8004 if 8002)")  # fmt: skip
    args = p.parse_args(argv)
    if args.relay and args.port == 8002:
        args.port = 8004
    if args.host not in LOOPBACK:
        p.error("only loopback addresses are allowed, not %r" % args.host)
    try:
        asyncio.run(_main(args))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
