# The body as the tool server of a xiaozhi MCP endpoint (a relay), dialled out: its state and its link.
#
# Config "xiaozhi": {"mcp_endpoint": "ws://...?token=..."}: master/links/xiaozhi_link.py's start
# opens it beside (or instead of) the device link. Endpoint is the Device without the device's
# envelope; EndpointLink the Link without discovery or hello.
import asyncio

from organbus import log
from master.links import jsonrpc
from master.links.jsonrpc import INVALID_PARAMS
from master.links.xiaozhi import Device
from master.links.xiaozhi_link import BodyFacade, Link
from master.links.xiaozhi_mcp import id_ok
from master.net import http, jsonin, ws

PING_MS = 30000  # the relay link pings after this long without a message of its own


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
            why, code = self._unreadable(e)
            return self._mcp_out(jsonrpc.error(None, code, why))
        ask = isinstance(msg, dict) and "method" in msg and "id" in msg
        mid = msg["id"] if ask and id_ok(msg) else None
        if nonfinite >= 0:
            self.counts["malformed"] += 1
            why = "NaN or Infinity at offset %d: not JSON" % nonfinite
            log.emit("xiaozhi", [("what", "malformed"), ("error", why)])
            if ask:
                self._mcp_out(jsonrpc.error(mid, INVALID_PARAMS, "invalid request: " + why))
            return
        if clipped:
            self.counts["clipped"] += clipped
            if ask and msg.get("method") == "tools/call":
                why = "the request holds a string of %d bytes; at most %d are read" % (
                    jsonin.longest(),
                    jsonin.MAX_STRING,
                )
                return self._mcp_out(jsonrpc.error(mid, INVALID_PARAMS, why))
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
            self._menu_changed()


class EndpointLink(Link):
    """The relay link: dials the xiaozhi MCP endpoint (config "mcp_endpoint", its token in the
    URL's query), answers the relay's JSON-RPC over the one socket, reconnects with backoff
    (slowly after the relay's 1008 for a bad token), re-opens when the menu changed after a
    device session listed and none listed again (the relay cannot notify). No discovery, no
    hello: requests may come as soon as the socket is open, or none for a long time, so the
    writer pings after PING_MS without a message and the watchdog hears the pongs."""

    ping_ms = PING_MS

    def __init__(self, device, config, backoff=None):
        super().__init__(device, {"max_message": config.get("max_message", 4096),
                                  "cadata": config.get("cadata")}, None, backoff=backoff)  # fmt: skip
        self.endpoint = config.get("mcp_endpoint")

    def pairs(self):
        url = shown(self.endpoint)
        return [(k, url if k == "url" else v) for k, v in Link.pairs(self) if k != "ota_url"]

    async def session(self):
        self.url = self.endpoint
        self._say("connecting", [("url", shown(self.url))])
        ctx = None
        if self.url.startswith("wss://"):
            ctx = ws.default_ssl_context(self.cadata)
        await self.sock.connect(self.url, {}, ctx)
        self.device.open()
        self._say("ready")


def open_endpoint(body, config, version="0.1.0", reset=None):
    """Start the relay link (config "mcp_endpoint": a ws:// or wss:// URL, its token in the
    query as the relay wants it); the EndpointLink, or None (the reason on the event log)."""
    url = config.get("mcp_endpoint")
    why = None
    if not isinstance(url, str) or not (url.startswith("ws://") or url.startswith("wss://")):
        why = "xiaozhi.mcp_endpoint must be a ws:// or wss:// URL, not %r" % (shown(url),)
    else:
        try:
            http.parse_url(url, ("ws", "wss"))
        except http.NetError as e:
            why = "xiaozhi.mcp_endpoint: %s" % e
    if why:
        log.emit("xiaozhi", [("what", "refused"), ("reason", why)])
        return None
    dev = Endpoint(BodyFacade(body, reset), version)
    link = EndpointLink(dev, config)
    asyncio.create_task(link.run())
    return link


def shown(url):
    # a URL as /status and the log show it: its query (the relay's token) hidden
    if not isinstance(url, str) or "?" not in url:
        return url
    return url.split("?", 1)[0] + "?..."
