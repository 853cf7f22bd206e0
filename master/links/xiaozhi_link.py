# The xiaozhi links' I/O edge: discovery over HTTP, one WebSocket (reader + one writer), watchdog, backoff.
#
# Every failure (no OTA answer, no upgrade, no server hello in 10 s, no frame in 120 s, a frame
# cut off, a write not taken) ends the session and the link tries again after a backoff with
# jitter; the body goes on meanwhile and nothing here ever raises into the master. The first
# hello waits for the bus to settle; a server's close of a session that ran (xinnan's idle
# close) and a re-open for a changed menu are reconnected quietly, counted, not errors.
# The relay's tool side (config "mcp_endpoint") is master/links/xiaozhi_endpoint.py.
import json
import sys

import asyncio

from organbus import log
from organbus.ticks import ticks_diff, ticks_ms
from master.bus.pairs import Pairs
from master.net import http, ws, wsframe
from master.links.xiaozhi import BACKOFF_MAX_MS, HELLO_TIMEOUT_MS, WATCHDOG_MS, Backoff, Device
from master.links.xiaozhi_discovery import XiaozhiError, client_id, discovery_request, format_id
from master.links.xiaozhi_discovery import parse_discovery

_MP = sys.implementation.name == "micropython"
DISCOVERY_MS = 10000  # the whole discovery exchange
SETTLE_MS = 5000  # the first hello waits for every organ port to have its organ, this long at most
RAN_MS = 10000  # a session the server closes after this long is reconnected quietly
REOPEN_MIN_MS = 1000  # the first re-open's wait; each next one doubles it, up to 60 s
REOPEN_POLL_MS = 1000  # a menu change not listed yet: the writer looks this often for a re-open
POLICY = 1008  # the relay's close for a bad token (mcp-endpoint-server): retried slowly


class Reopen(Exception):
    """The menu changed after the server listed: a new session lists it (not an error)."""


# -- the live body as the Facade ------------------------------------------------------------------


class BodyFacade:
    """The master's Body as the link's Facade: hub events (master/bus/hub.py) translated."""

    def __init__(self, body, reset=None):
        self.body = body
        self._reset = reset

    def menu(self):
        return self.body.menu()

    def execute(self, plan, on_accept=None, dups=()):
        return self.body.execute(plan, on_accept, dups)  # its coroutine: no frame of our own

    def capabilities(self):
        return self.body.capabilities()

    def settled(self):
        # every organ port has its organ registered (the first DISCOVER round answered)
        return len(self.body.online_organs()) >= len(self.body.ports)

    def quiet(self):
        return self.body.quiet()

    def reset(self):
        if self._reset is not None:
            self._reset()

    def subscribe(self, fn):
        body = self.body

        def on(event, port, data):
            # called in the publisher's task: copy what is needed, return at once
            if event == "registered" or event == "offline":
                o = data.organ
                d = {"module_id": o["module_id"], "module_type": o["module_type"], "port": port}
                fn("online" if event == "registered" else "offline", d)
            elif event == "event":
                o = body.organ_at(port)
                mid = o["module_id"] if o else None
                fn("event", {"module_id": mid, "port": port, "name": data[0], "status": data[1]})
            elif event == "menu":
                fn("menu", {"added": list(data[1]), "removed": list(data[2])})

        body.subscribe(on)


def identity(mac, uid, client_id_path, rand16):
    """{"device_id", "client_id"}: the Wi-Fi MAC (or the board's unique id) as colon hex, and
    the Client-Id kept in `client_id_path`."""
    raw = mac if mac else uid
    return {"device_id": format_id(raw or b"\x00"), "client_id": client_id(client_id_path, rand16)}


def start(body, config):
    """The links' entry: config "xiaozhi" ({"ota_url"} for the device link, {"mcp_endpoint"}
    for the relay's tool side, or both) and the board's "xiaozhi" ({"ident", "set_clock",
    "reset"}); each link as its own task with its /status section ("xiaozhi",
    "xiaozhi_endpoint"); the device Link or None (reasons on the event log; never raises)."""
    from master.links.mcp import SERVER_INFO

    xz = config["board"]["xiaozhi"]
    cfg = config.get("xiaozhi")
    link = None
    ver = SERVER_INFO["version"]
    try:
        if not isinstance(cfg, dict) or "ota_url" in cfg or "mcp_endpoint" not in cfg:
            link = open_link(body, cfg, xz["ident"], ver, xz.get("set_clock"), xz.get("reset"))
        if isinstance(cfg, dict) and "mcp_endpoint" in cfg:
            from master.links.xiaozhi_endpoint import open_endpoint

            ep = open_endpoint(body, cfg, ver, xz.get("reset"))
            if ep is not None:
                body.add_status_section("xiaozhi_endpoint", ep.status, ep.text)
    except Exception as e:
        log.emit("xiaozhi", [("what", "refused"), ("reason", repr(e))])
        return None
    if link is not None:
        body.add_status_section("xiaozhi", link.status, link.text)
    return link


def open_link(body, config, ident, version="0.1.0", set_clock=None, reset=None):
    """Start the link as its own task; the Link, or None (the reason on the event log)."""
    url = config.get("ota_url") if isinstance(config, dict) else None
    if not isinstance(url, str) or not (url.startswith("http://") or url.startswith("https://")):
        why = "xiaozhi.ota_url must be an http:// or https:// URL, not %r" % (url,)
        log.emit("xiaozhi", [("what", "refused"), ("reason", why)])
        return None
    dev = Device(BodyFacade(body, reset), version)
    link = Link(dev, config, ident, set_clock=set_clock)
    asyncio.create_task(link.run())
    return link


# -- the I/O edge ---------------------------------------------------------------------------------


def _loads(buf, n):
    # JSON of buf[:n] read in place on MicroPython (json.loads takes any buffer), copied on CPython
    return json.loads(memoryview(buf)[:n] if _MP else bytes(buf[:n]))


class Link:
    """The running link: discovery, the WebSocket session, reconnects; `status()` for /status.

    `ident`: {"device_id", "client_id"}; `set_clock(epoch_ms, tz_min)` and `facade.reset()`
    come from the board. `config`: {"ota_url", "token", "max_message", "cadata"}."""

    settle_ms = SETTLE_MS  # class attributes: tests may set them on an instance
    ran_ms = RAN_MS
    ping_ms = None  # type: int | None  # the device link: the server's pings keep the watchdog fed

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
        self.reopens = 0  # sessions re-opened for a changed menu the server did not list
        self.server_closes = 0  # sessions the server closed after they ran (reconnected quietly)
        self.reopen_ms = REOPEN_MIN_MS  # the wait before the next re-open's session: doubling
        self._ready_at = None
        self._reopen = False  # a re-open is due: the writer ends the session when it can
        self._stop = False

    def status(self):
        return dict(self.pairs())

    def text(self):
        # /status's section as Pairs: its 24 keys as a dict took 464 bytes in one block, more
        # than the 80 KB heap had while a sentence was spoken (issue 24, defect 8)
        return Pairs(self.pairs())

    def pairs(self):
        ws = self.sock
        p = [
            ("state", self.state),
            ("ota_url", self.ota_url),
            ("url", self.url),
            ("reconnects", self.reconnects),
            ("sessions", self.connects),
            ("last_error", self.last_error),
            ("reopens", self.reopens),
            ("server_closes", self.server_closes),
        ]
        p += self.device.pairs()
        p.append(("oversize", ws.oversize))
        p.append(("ws_messages_in", ws.messages_in))
        p.append(("ws_messages_out", ws.messages_out))
        return p

    def _say(self, state, pairs=()):
        self.state = state
        log.emit("xiaozhi", [("what", "state"), ("state", state)] + list(pairs))

    async def run(self):
        """For ever: (once) wait for the bus to settle, discover, connect, serve the session;
        after a failure, back off; after a re-open or a server's close of a session that ran,
        reconnect quietly (one line on the event log, no error)."""
        await self._settle()
        first = True
        while not self._stop:
            if not first:
                self.reconnects += 1
            first = False
            quiet = None
            self._ready_at = None
            try:
                await self.session()  # connected (and the hello exchanged)
                await self._serve()
            except Reopen as e:
                quiet = str(e)
            except ws.WsClosed as e:
                quiet = self._closed(e)
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
            if quiet is None:
                self.reopen_ms = REOPEN_MIN_MS
                d = self.backoff.next()
                self._say("backoff", [("ms", d), ("error", self.last_error)])
            else:
                d = self.backoff.next()
                if quiet.startswith("re-open"):
                    d = self.reopen_ms
                    self.reopen_ms = min(d * 2, BACKOFF_MAX_MS)
                self._say("backoff", [("ms", d), ("why", quiet)])
            await asyncio.sleep(d / 1000)

    async def _settle(self):
        # the first hello only once every organ port has its organ, or after settle_ms: a
        # server that lists once per session lists what the body has (docs/links.md)
        settled = getattr(self.device.facade, "settled", None)
        if settled is None or settled():
            return
        self._say("settling", [("ms", self.settle_ms)])
        t0 = ticks_ms()
        while not settled() and ticks_diff(ticks_ms(), t0) < self.settle_ms:
            await asyncio.sleep(0.1)

    def _closed(self, e):
        # the server closed the session: quiet (None: an error) when it had run RAN_MS
        ran = self._ready_at is not None and ticks_diff(ticks_ms(), self._ready_at) >= self.ran_ms
        if e.code == POLICY:
            self.backoff.base = self.backoff.hi  # a refused token is not retried fast
        if not ran or e.code not in (wsframe.NORMAL, wsframe.GOING_AWAY):
            self.last_error = "closed by the server: %d %s" % (e.code, e.reason[:80])
            return None
        self.server_closes += 1
        log.emit("xiaozhi", [("what", "closed_by_server"), ("code", e.code),
                             ("reason", e.reason[:80])])  # fmt: skip
        return "the server closed the session"

    async def discover(self):
        self._say("discovering", [("ota_url", self.ota_url)])
        headers, body = discovery_request(self.ident, self.role, self.device.version)
        buf = self.sock._buf  # the message buffer: idle until the WebSocket is open
        try:
            status, n = await http.request("POST", self.ota_url, headers, body, buf, DISCOVERY_MS)
        except http.NetError as e:
            raise XiaozhiError("OTA request: %s" % e)
        if status != 200:
            raise XiaozhiError("OTA answered HTTP %d" % status)
        try:
            obj = _loads(buf, n)
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

    async def _serve(self):
        # reader and writer each their own task; the first to end ends the session
        self.connects += 1
        self._ready_at = ticks_ms()
        self._reopen = False
        self.backoff.reset()
        sock = self.sock
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
        e = errors[0] if errors else XiaozhiError("session ended")
        if isinstance(e, Reopen):
            await asyncio.sleep(0)  # the reader and the writer are gone before the close
            await sock.close(wsframe.NORMAL, "re-open: the menu changed")
        raise e

    def _reopen_due(self):
        # a re-open is due (Device.reopen_due): said once, then the writer ends the session
        dev = self.device
        if not self._reopen and dev.reopen_due(ticks_ms()):
            self._reopen = True
            self.reopens += 1
            if ticks_diff(ticks_ms(), self._ready_at) > 60000:
                self.reopen_ms = REOPEN_MIN_MS  # a re-open after a long session: no storm
            log.emit("xiaozhi", [("what", "reopen"), ("listed", dev.listed_gen),
                                 ("menu", dev.menu_gen)])  # fmt: skip
        return self._reopen

    async def _await_hello(self):
        # The server hello within hello_timeout_ms of the client's (section 3.3), whatever else
        # comes meanwhile: pings are answered inside recv and do not extend the wait.
        sock, dev = self.sock, self.device
        t0 = ticks_ms()
        while True:
            left = self.hello_timeout_ms - ticks_diff(ticks_ms(), t0)
            try:
                if left <= 0:
                    raise ws.WsTimeout("no time left")
                op, n = await sock.recv(within_ms=left)
            except ws.WsStalled:
                raise
            except ws.WsTimeout:
                await sock.close(wsframe.NORMAL, "no server hello")
                raise XiaozhiError("no server hello within %d ms" % self.hello_timeout_ms)
            if op == wsframe.TEXT:
                try:
                    obj = _loads(sock.message, n)
                except ValueError:
                    obj = None
                if dev.on_hello(obj):
                    return
            dev.counts["unknown"] += 1  # anything before the hello is dropped

    async def _reader(self):
        sock, dev = self.sock, self.device
        while True:
            try:
                op, n = await sock.recv(self.watchdog_ms)
            except ws.WsStalled:
                raise  # a frame begun and cut off: its own reason, not the watchdog's
            except ws.WsTimeout:
                # nothing at all for 120 s: the channel is dead (section 3.4)
                await sock.close(wsframe.GOING_AWAY, "watchdog")
                raise XiaozhiError("no frame from the server for %d ms" % self.watchdog_ms)
            if op == wsframe.BINARY:
                dev.on_binary(n)
            else:
                dev.on_message(sock._buf, n)  # read in place: no copy of the message

    async def _writer(self):
        sock, dev = self.sock, self.device
        while True:
            while dev.outbox:
                m = dev.outbox.pop(0)
                await sock.send_text(m)  # a WsError ends the session: the link reconnects
                m = None  # the message sent is not kept until the next one
                dev.counts["messages_out"] += 1
            dev.wake.clear()
            if dev.outbox:
                continue
            if self._reopen_due():
                raise Reopen("re-open: the menu changed and the server did not list it")
            # waits for the next message; while a menu change is not listed, it looks again
            # every second whether a re-open is due (no task of its own: 80 KB has no room)
            wait = REOPEN_POLL_MS if dev.changed_at is not None else self.ping_ms
            if wait is None:
                await dev.wake.wait()
                continue
            try:
                await asyncio.wait_for(dev.wake.wait(), wait / 1000)
            except asyncio.TimeoutError:
                if self.ping_ms is not None and wait == self.ping_ms:
                    await sock.ping()

    def stop(self):
        self._stop = True
