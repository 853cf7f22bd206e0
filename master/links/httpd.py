# Small HTTP/1.1 server for the master's links (asyncio on MicroPython and CPython); owns every protection.
#
# One request per connection (`Connection: close`): a board keeps few sockets and a
# keep-alive connection would hold one of them for nothing. A connection gets, in order:
# a connection slot (total and per client), its head within `header_timeout_ms`, a rate
# token, an Origin check, the bearer token, a route, a body within `max_body` and
# `body_timeout_ms`, and only then the handler. The body is parsed only when a handler asks
# (`req.json`, the strict reader organbus.jsonread; `/plan` hands the raw bytes to the Body,
# which parses them once). Every refusal is answered with a status and a specific reason; no
# handler runs for a request refused before it.
import asyncio
import gc
import sys

from micropython import const

from organbus.ticks import ticks_diff, ticks_ms

from master.links.httplimits import DEFAULTS, HeapGuard, RateLimiter, _Listener, _close, _print_exc
from master.links.jsonout import OUT, WRITTEN, _drain, json_length, made_as_walked, write_json

# The message names (HttpError, Request, Stream, Fed, parse_head, ...) stay reachable as httpd's.
from master.links.httpmsg import REASONS, BodyStream, Fed, HttpError, Request, Stream, _head  # noqa: F401  # fmt: skip
from master.links.httpmsg import client_address, encode_response, parse_head, reason  # noqa: F401  # fmt: skip
from master.links.httpmsg import response_parts, same, status_line

_MP = sys.implementation.name == "micropython"
_READ = const(512)
_PIECE = const(256)  # bytes of a request body read at once: blocks a fragmented heap still has
_LINGER_MAX = const(65536)
_LINGER_MS = const(300)  # a closing connection's silence that ends the linger
_LINGER_CAP_MS = const(2000)  # and its whole length, however the client trickles
_STREAMING = const(2)  # conns record [3]: a streamed answer, its request slot given back
_SPARE = const(640)  # bytes held back at boot for a request that finds no block (_conn)

# Built once: the answer when the heap runs short, sent without allocating a new response.
_BODY_LOW = b'{"error": "the master is short of memory right now, try again"}'
_LOW_MEMORY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(_BODY_LOW)
) + _BODY_LOW

_BODY_RECLAIMED = b'{"error": "request not received in time while other clients waited"}'
_RECLAIMED = (
    b"HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(_BODY_RECLAIMED)
) + _BODY_RECLAIMED


class HttpServer:
    """A running server: `port`, `counts` (responses by status), `close()`, `wait_closed()`."""

    def __init__(self, routes, config=None):
        cfg = dict(DEFAULTS)
        if config:
            for k in config:
                if k in DEFAULTS:
                    cfg[k] = config[k]
        self.cfg = cfg
        self.routes = routes
        self.paths = {}
        self.secret = []  # "P/" of every route "P/<token>": there the path carries the token
        for method, path in routes:
            self.paths.setdefault(path, []).append(method)
            if path.endswith("/<token>") and path[:-7] not in self.secret:
                self.secret.append(path[:-7])
        self.limiter = RateLimiter(cfg["rate_per_s"], cfg["rate_burst"])
        self.heap = HeapGuard(cfg["min_free"])  # the min_free floor
        self.active = 0
        self.per_client = {}
        # [task, client, tick it came or None once read whole, reclaimed, a Fed route's feeder]
        self.conns = []
        self.reclaimed = 0  # slow connections closed to give their slot to a new client
        self.counts = {}
        self.errors = 0  # handler exceptions (answered 500)
        self.low_memory = 0  # requests answered 503, or clients closed unanswered, for want of heap
        self.streams = 0  # streamed answers being written now (not in `active`)
        self.port = None
        self.srv = None
        # the buffer every JSON answer goes through (write_json), taken at boot before the
        # heap fragments: a small heap may later have no free 512-byte block
        self.out = bytearray(OUT) if _MP else None
        # the buffer every request head is read into (then copied at its own size): a fresh
        # 512-byte read per head needs a block a fragmented small heap may not have; shared,
        # as the bytes are copied out before the reading task yields again
        self.head_in = memoryview(bytearray(_READ)) if _MP else None
        # a spare block: when a request's first allocation (its handler's coroutine, 416 B on
        # the unix port) finds no free block in a fragmented small heap, it is let go and the
        # request tried once more; taken again once a request has ended (docs/master.md)
        self.spare = bytearray(_SPARE) if _MP else None
        self.spared = 0  # requests served from the spare

    def stats(self):
        return {
            "active": self.active,
            "reclaimed": self.reclaimed,
            "responses": dict(self.counts),
            "errors": self.errors,
            "low_memory": self.low_memory,
            "streams": self.streams,
        }

    def close(self):
        if self.srv is not None:
            self.srv.close()

    async def wait_closed(self):
        if self.srv is not None:
            await self.srv.wait_closed()

    async def _send(self, writer, status, payload=None, headers=None):
        self.counts[status] = self.counts.get(status, 0) + 1
        timeout_s = self.cfg["write_timeout_ms"] / 1000
        if isinstance(payload, WRITTEN):  # JSON in pieces, its length counted first
            writer.write(_head(status, headers, "application/json", json_length(payload)))
            if self.spare is not None and made_as_walked(payload):
                # a document made as it is walked (/status) is made twice, and the second walk
                # may not fail (its head is out): the spare block is its reserve, let go so that
                # a heap in small holes has room for what the first walk found a block for
                # (at 80 KB beside a xiaozhi sentence: 248 B not found with 7.9 KB free)
                self.spare = None
            try:
                await write_json(writer, payload, timeout_s, self.out)
            except MemoryError:  # the head is out: no 503 can follow, the answer is cut short
                self.low_memory += 1
                raise OSError("out of memory in the middle of a %d answer" % status)
            return
        head, content = response_parts(status, payload, headers)
        payload = None
        writer.write(head)
        if content:
            writer.write(content)
        await _drain(writer, timeout_s)

    async def _read_head(self, reader):
        buf = b""
        limit = self.cfg["max_head"]
        mv = self.head_in if hasattr(reader, "readinto") else None
        while True:
            if mv is not None:
                n = await reader.readinto(mv)
                chunk = bytes(mv[:n]) if n else b""
            else:
                chunk = await reader.read(_READ)
            if not chunk:
                raise EOFError
            buf = buf + chunk if buf else chunk
            i = buf.find(b"\r\n\r\n")
            if 0 <= i <= limit:
                return buf, i  # the head is buf[:i]: parsed in place (parse_head's end)
            if len(buf) > limit + 3:
                raise HttpError(431, "request head longer than %d bytes" % limit)

    async def _read_body(self, reader, rest, n, fed=None):
        # The body's pieces as they come (Request.pieces), none over _PIECE bytes; for a Fed
        # route each piece goes to `fed.feed` instead, and is not kept (on MicroPython it is
        # read into the shared head buffer: fed before this task yields again, as a head is).
        parts = []
        chunk = rest[:n]
        mv = self.head_in if fed is not None and hasattr(reader, "readinto") else None
        while True:
            if chunk:
                n -= len(chunk)
                if fed is None:
                    parts.append(chunk)
                else:
                    fed.feed(chunk)
            if n <= 0:
                return parts
            if mv is not None:
                k = await reader.readinto(mv[: min(len(mv), n)])
                chunk = mv[:k] if k else b""
            else:
                chunk = await reader.read(min(_PIECE, n))
            if not chunk:
                raise EOFError

    async def _canned(self, reader, writer, status, answer):
        # an answer made at import (no heap needed), drained, then the request's rest lingered
        self.counts[status] = self.counts.get(status, 0) + 1
        writer.write(answer)
        await asyncio.wait_for(writer.drain(), self.cfg["write_timeout_ms"] / 1000)
        await self._linger(reader, self.cfg["max_body"] + self.cfg["max_head"])

    async def _linger(self, reader, n):
        # Take (and drop) what the client is still sending before closing, so the
        # close does not reset the connection under the response it has not read yet.
        # It ends on EOF, after n bytes, after _LINGER_MS of silence (a client that is
        # late only because the machine is loaded still gets its answer) or at the cap.
        n = min(n, _LINGER_MAX)
        t0 = ticks_ms()
        try:
            while n > 0:
                left = min(_LINGER_MS, _LINGER_CAP_MS - ticks_diff(ticks_ms(), t0))
                if left <= 0:
                    break
                chunk = await asyncio.wait_for(reader.read(min(n, _READ * 2)), left / 1000)
                if not chunk:
                    break
                n -= len(chunk)
        except Exception:
            pass

    def _origin_ok(self, origin):
        allowed = self.cfg["origins"]
        return allowed == "*" or origin in allowed

    def _auth_ok(self, headers):
        token = self.cfg["token"]
        if not token:
            return True
        got = headers.get("authorization", "")
        if not got[:7].lower() == "bearer ":
            return False
        return same(got[7:].strip(), token)

    def _secret_path(self, path):
        """(route path, True) for "P/<the token>" of a route "P/<token>": the path carries the
        token instead of the header (a client that holds only a URL: Home Assistant's MCP);
        another token there is 404, never 401 (a 401 sends such a client into OAuth
        discovery). Else (path, False)."""
        token = self.cfg["token"]
        for p in self.secret:
            if path.startswith(p):
                if token and same(path[len(p) :], token):
                    return p + "<token>", True
                raise HttpError(404, "no route %s<token> with that token" % p)
        return path, False

    async def _handle(self, reader, writer, addr, rec):
        cfg = self.cfg
        try:
            head, end = await asyncio.wait_for(
                self._read_head(reader), cfg["header_timeout_ms"] / 1000
            )
        except asyncio.TimeoutError:
            await self._send(writer, 408, {"error": "request head not received in time"})
            return
        wait = 0 if addr in cfg["rate_exempt"] else self.limiter.take(addr, ticks_ms())
        if wait:
            raise HttpError(
                429,
                "rate limit: at most %d requests per second" % cfg["rate_per_s"],
                {"Retry-After": str(wait)},
            )
        method, path, query, headers = parse_head(head, end=end)
        rest = head[end + 4 :]
        head = None  # not kept for the handler's time (an upload lasts seconds)
        cl = headers.get("content-length")
        origin = headers.get("origin")
        if origin is not None and not self._origin_ok(origin):
            raise HttpError(403, "requests from Origin %r are not allowed" % origin[:80])
        path, in_path = self._secret_path(path)
        if not in_path and not self._auth_ok(headers):
            raise HttpError(
                401,
                "a valid bearer token is required",
                {"WWW-Authenticate": 'Bearer realm="organbus"'},
            )
        handler = self.routes.get((method, path))
        if handler is None:
            methods = self.paths.get(path)
            if methods:
                raise HttpError(
                    405,
                    "%s %s is not served; use %s" % (method, path, ", ".join(methods)),
                    {"Allow": ", ".join(methods)},
                )
            raise HttpError(404, "no route %s %s" % (method, path))
        if "transfer-encoding" in headers:
            raise HttpError(411, "send the body with a Content-Length, not Transfer-Encoding")
        n = 0
        if cl is not None:
            try:
                n = int(cl)
            except ValueError:
                n = -1
            if n < 0 or not cl.isdigit():
                raise HttpError(400, "invalid Content-Length %r" % cl[:20])
        stream = isinstance(handler, Stream)
        limit = handler.max_body if stream else cfg["max_body"]
        if n > limit:
            raise HttpError(413, "body of %d bytes is over the limit of %d" % (n, limit))
        req = Request(method, path, query, headers, addr)
        if isinstance(handler, Fed):  # its feeder is closed by _conn, however this ends
            rec[4] = req.fed = handler.start(req)
            handler = handler.handler
        if (stream or n) and headers.get("expect", "").lower() == "100-continue":
            # curl asks before sending a body over 1 KB; say go on (refusals came first).
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await asyncio.wait_for(writer.drain(), cfg["write_timeout_ms"] / 1000)
        if stream:
            req.stream = BodyStream(reader, rest, n, cfg["body_timeout_ms"], handler)
            rec[2] = None  # a long upload is not a slow client: never reclaimed
            handler = handler.handler
        elif n and len(rest) >= n:  # the body came with the head: no read to wait for
            req.pieces = await self._read_body(reader, rest, n, rec[4])
        elif n:
            try:
                req.pieces = await asyncio.wait_for(
                    self._read_body(reader, rest, n, rec[4]), cfg["body_timeout_ms"] / 1000
                )
            except asyncio.TimeoutError:
                await self._send(writer, 408, {"error": "request body not received in time"})
                return
        rec[2] = None  # read whole: from here on the slot is not reclaimable
        try:
            try:
                result = await handler(req)
            except MemoryError:
                # a GET changes nothing: asked once more with the spare block let go, where a
                # heap in small holes has room for the one table or frame it found none for
                if method != "GET" or self.spare is None:
                    raise
                self.spare = None
                gc.collect()
                self.spared += 1
                result = await handler(req)
        except (MemoryError, HttpError):
            raise
        except Exception as e:
            self.errors += 1
            _print_exc(e)
            await self._send(writer, 500, {"error": "internal error: %r" % e})
            return
        finally:
            if stream:
                req.stream.close()
        status, payload = result[0], result[1]
        extra = result[2] if len(result) > 2 else None
        if hasattr(payload, "write_to"):
            return status, payload, extra  # _conn streams it, this frame let go (below)
        await self._send(writer, status, payload, extra)

    async def _stream(self, writer, rec, status, stream, headers):
        # A streamed answer (GET /events, an MCP GET stream): the head without a length, then
        # `stream.write_to(writer)` until the client goes or the stream ends. It gives its
        # request slot back first: the route bounds its streams itself (master/links/sse.py).
        try:
            self.counts[status] = self.counts.get(status, 0) + 1
            out = [status_line(status)]
            if headers:
                for k in headers:
                    out.append("%s: %s\r\n" % (k, headers[k]))
            out.append("Connection: close\r\n\r\n")
            writer.write("".join(out).encode())
            await asyncio.wait_for(writer.drain(), self.cfg["write_timeout_ms"] / 1000)
            self._release(rec)
            rec[3] = _STREAMING
            self.streams += 1
            await stream.write_to(writer)
        finally:
            if rec[3] == _STREAMING:
                self.streams -= 1
            stream.close()

    def _release(self, rec):
        self.active -= 1
        addr = rec[1]
        left = self.per_client.get(addr, 1) - 1
        if left > 0:
            self.per_client[addr] = left
        else:
            self.per_client.pop(addr, None)

    def _reclaim(self, addr, now):
        """Close the oldest connection (of `addr`, or of anyone) still sending its request
        after reclaim_ms, to free its slot; True when one was."""
        oldest = None
        for rec in self.conns:
            if rec[2] is None or rec[3] or (addr is not None and rec[1] != addr):
                continue
            if ticks_diff(now, rec[2]) < self.cfg["reclaim_ms"]:
                continue
            if oldest is None or ticks_diff(rec[2], oldest[2]) < 0:
                oldest = rec
        if oldest is None:
            return False
        oldest[3] = True
        self._release(oldest)
        self.reclaimed += 1
        oldest[0].cancel()
        return True

    def _reading(self, addr):
        # True when `addr` has a connection still sending its request
        for rec in self.conns:
            if rec[1] == addr and rec[2] is not None and not rec[3]:
                return True
        return False

    def _full(self, addr):
        return (
            self.active >= self.cfg["max_conns"]
            or self.per_client.get(addr, 0) >= self.cfg["max_conns_per_client"]
        )

    async def _conn(self, reader, writer):
        addr = client_address(writer.get_extra_info("peername"))
        now = ticks_ms()
        if self.per_client.get(addr, 0) >= self.cfg["max_conns_per_client"]:
            self._reclaim(addr, now)  # its own share: its own oldest slow request goes
        if self.active >= self.cfg["max_conns"] and not self._reading(addr):
            # every slot taken: a client with no request of its own still arriving takes the
            # slot of the oldest slow one (slow clients cannot take each other's, so they
            # cannot keep every slot young by coming back)
            self._reclaim(None, now)
        if self._full(addr):
            try:
                await self._send(
                    writer, 503, {"error": "too many connections, try again"}, {"Retry-After": "1"}
                )
                await self._linger(reader, self.cfg["max_head"])
            except Exception:
                pass
            await _close(writer)
            return
        self.active += 1
        self.per_client[addr] = self.per_client.get(addr, 0) + 1
        rec = [asyncio.current_task(), addr, now, False, None]
        self.conns.append(rec)
        try:
            try:
                if self.heap.short(now):
                    raise MemoryError
                try:
                    handling = self._handle(reader, writer, addr, rec)
                except MemoryError:
                    if self.spare is None:
                        raise
                    self.spare = None
                    gc.collect()
                    handling = self._handle(reader, writer, addr, rec)
                    self.spared += 1
                out = await handling
                if out is not None:
                    # A stream (/events, an MCP GET) lasts as long as its client: written from
                    # here, _handle's frame with its Request and headers is not held for it
                    # (about 800 B per stream on the unix port).
                    handling = None
                    await self._stream(writer, rec, out[0], out[1], out[2])
            except HttpError as e:
                await self._send(writer, e.status, e.payload(), e.headers)
                await self._linger(reader, self.cfg["max_body"] + self.cfg["max_head"])
            except MemoryError:
                self.low_memory += 1
                await self._canned(reader, writer, 503, _LOW_MEMORY)
        except asyncio.CancelledError:
            if rec[3] is not True:
                raise  # the server is being stopped
            # reclaimed (its slot went to a new client): say so if the socket still takes it
            try:
                await self._canned(reader, writer, 408, _RECLAIMED)
            except Exception:
                pass
        except (EOFError, OSError, asyncio.TimeoutError, MemoryError):
            pass  # the client went away or would not take the answer
        except Exception as e:
            self.errors += 1
            _print_exc(e)
        finally:
            if rec[4] is not None:
                rec[4].close()
            if rec in self.conns:
                self.conns.remove(rec)
            if not rec[3]:
                self._release(rec)
            await _close(writer)
            if _MP and self.spare is None:
                try:
                    self.spare = bytearray(_SPARE)
                except MemoryError:
                    pass  # taken after a later request


async def serve(routes, host, port, config=None):
    """Start serving `routes` ({(method, path): async handler}) on host:port; returns HttpServer.

    A handler takes a Request and returns `(status, dict_list_str_bytes_or_None[, headers])`;
    a payload with `async write_to(writer)` and `close()` is a stream (see `_stream`).
    """
    server = HttpServer(routes, config)
    backlog = server.cfg["backlog"]
    if not isinstance(backlog, int) or isinstance(backlog, bool) or backlog < 1:
        raise ValueError(
            "http backlog must be a whole number of connections >= 1, not %r" % backlog
        )
    if _MP:
        server.srv = _Listener(server, host, port, backlog)
    else:
        server.srv = await asyncio.start_server(server._conn, host, port, backlog=backlog)
    server.port = port
    socks = getattr(server.srv, "sockets", None)
    if socks:
        server.port = socks[0].getsockname()[1]
    return server
