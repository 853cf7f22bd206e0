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
import json
import sys
import time

from micropython import const

from organbus import jsonread
from organbus.plan import MAX_PLAN_BYTES

_MP = sys.implementation.name == "micropython"
_READ = const(512)
_PIECE = const(256)  # bytes of a request body read at once: blocks a fragmented heap still has
_LINGER_MAX = const(65536)
_LINGER_MS = const(300)
_RATE_CLIENTS = const(16)
_STREAMING = const(2)  # conns record [3]: a streamed answer, its request slot given back
_SPARE = const(640)  # bytes held back at boot for a request that finds no block (_conn)
_OUT = const(512)  # bytes of a JSON answer given to the socket at once (never built whole)
_HAS_MEM_FREE = hasattr(gc, "mem_free")

# Built once: the answer when the heap runs short, sent without allocating a new response.
_BODY_LOW = b'{"error": "the master is short of memory right now, try again"}'
_LOW_MEMORY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(_BODY_LOW)
) + _BODY_LOW

DEFAULTS = {
    "token": None,  # bearer token; None or "" means no authentication
    "max_body": MAX_PLAN_BYTES,  # bytes; more gets 413 (the one plan limit, for every route)
    "max_head": 2048,  # request line plus headers; more gets 431
    "max_conns": 5,  # connections served at once, all clients together
    "max_conns_per_client": 3,  # connections served at once for one client address
    # A connection still sending its head or body this long after it came gives its slot to a
    # new client when every slot (or the client's own share) is taken and the new client has
    # no request of its own still arriving: slow clients can never lock the others out (the
    # oldest slow one is answered 408 and closed).
    "reclaim_ms": 200,
    "rate_per_s": 10,  # requests per second per client address, sustained
    "rate_burst": 30,  # requests per client address in a burst
    # Never rate limited: loopback, where only the simulation's own tools live (a board
    # has no local HTTP client). Set () to limit loopback too (the tests do).
    "rate_exempt": ("127.0.0.1",),
    "header_timeout_ms": 3000,  # whole head must arrive within this after accept
    "body_timeout_ms": 3000,  # whole body must arrive within this after the head
    "write_timeout_ms": 5000,  # response must be taken by the client within this
    # Listen backlog: connections the stack completes before the server accepts them (Linux
    # caps it at net.core.somaxconn, lwIP at 255; a queued connection costs no MicroPython heap,
    # on a board lwIP's PCB pool bounds it).
    # MicroPython's asyncio defaults to 5: in a burst the queue overflowed, Linux dropped the
    # client's final ACK (the client thinks it is connected) and its request waited for a
    # SYN-ACK retransmission, 1 to 31 s later (issue 17, tools/bench_stall.py). With room in
    # the queue every connection is accepted at once and one over the bound gets its 503 then.
    "backlog": 512,
    "min_free": 6144,  # MicroPython: heap bytes free (after a collect) to take a request, else 503
    "origins": (),  # browser Origins allowed; a request with any other Origin gets 403
}

# The reason phrase of every status this server and its routes send (RFC 9110 section 15), and
# of the others a route is likely to choose; any other status gets its class's name
# (`reason`), never a made-up word.
REASONS = {
    100: "Continue",
    200: "OK",
    201: "Created",
    202: "Accepted",
    204: "No Content",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    408: "Request Timeout",
    409: "Conflict",
    410: "Gone",
    411: "Length Required",
    412: "Precondition Failed",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    416: "Range Not Satisfiable",
    417: "Expectation Failed",
    422: "Unprocessable Content",
    423: "Locked",
    428: "Precondition Required",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    507: "Insufficient Storage",
}
_CLASSES = ("Informational", "Successful", "Redirection", "Client Error", "Server Error")


def reason(status):
    """The reason phrase of `status`: its own (REASONS), else its class's (RFC 9110 15.1)."""
    r = REASONS.get(status)
    if r is None:
        k = status // 100 - 1
        r = _CLASSES[k] if 0 <= k < len(_CLASSES) else "Unknown"
    return r


def status_line(status):
    return "HTTP/1.1 %d %s\r\n" % (status, reason(status))


if hasattr(time, "ticks_ms"):
    _ticks = time.ticks_ms
    _diff = time.ticks_diff
else:

    def _ticks():
        return int(time.monotonic() * 1000)

    def _diff(a, b):
        return a - b


_BODY_RECLAIMED = b'{"error": "request not received in time while other clients waited"}'
_RECLAIMED = (
    b"HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(_BODY_RECLAIMED)
) + _BODY_RECLAIMED


class HttpError(Exception):
    """A refusal: status, reason, extra headers (and `problems`, listed in the answer too)."""

    def __init__(self, status, reason, headers=None, problems=None):
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = headers
        self.problems = problems

    def payload(self):
        d = {"error": self.reason}
        if self.problems is not None:
            d["problems"] = self.problems
        return d


_UNREAD = object()


class Stream:
    """A route whose handler reads its own body as it arrives (`req.stream`), up to
    `max_body` bytes, instead of the server reading it whole first (the OTA upload). Its
    read buffer is allocated here, with the routes at boot, before the heap fragments: a
    fragmented small heap may have no free 1 KB block left by the time an upload comes."""

    def __init__(self, handler, max_body):
        self.handler = handler
        self.max_body = max_body
        self.buf = bytearray(_READ * 2) if _MP else None
        self.taken = False  # the buffer is lent to a BodyStream


class Fed:
    """A route whose body goes, piece by piece as it is read, to the feeder `start(req)` gives
    (`feed(piece)`: a bytes-like piece valid during the call only; `close()` once the request
    ended, however): a body as long as `max_body` then needs no block of its own, nor of its
    pieces (the Body Protocol's long texts, master/links/bodyclamp.py). Its deadlines and the
    reclaim of slow clients are those of any body; the handler finds the feeder in `req.fed`."""

    def __init__(self, handler, start):
        self.handler = handler
        self.start = start


class BodyStream:
    """The body of a Stream route: `await read()` gives the next piece (b"" once all came);
    EOFError when the client stops early, asyncio.TimeoutError after `idle_ms` without data."""

    def __init__(self, reader, rest, length, idle_ms, route=None):
        self.reader = reader
        self.rest = rest[:length]
        self.left = length
        self.idle_ms = idle_ms
        # MicroPython: one buffer for the whole body (a fresh 1 KB piece per read fragments a
        # small heap until a read fails), the route's own when it is free (give it back with
        # close()); a piece is valid until the next read
        self.route = None
        self.buf = None
        if hasattr(reader, "readinto"):
            if route is not None and route.buf is not None and not route.taken:
                route.taken = True
                self.route = route
                self.buf = route.buf
            else:
                self.buf = bytearray(_READ * 2)

    def close(self):
        """Give the route's buffer back (the server calls it once the handler returned)."""
        if self.route is not None:
            self.route.taken = False
            self.route = None
        self.buf = None

    async def read(self):
        if self.rest:
            chunk, self.rest = self.rest, b""
        elif self.left <= 0:
            return b""
        elif self.buf is not None:
            mv = memoryview(self.buf)[: min(len(self.buf), self.left)]
            n = await asyncio.wait_for(self.reader.readinto(mv), self.idle_ms / 1000)
            if not n:
                raise EOFError
            chunk = mv[:n]
        else:
            chunk = await asyncio.wait_for(
                self.reader.read(min(_READ * 2, self.left)), self.idle_ms / 1000
            )
            if not chunk:
                raise EOFError
        self.left -= len(chunk)
        return chunk


class Request:
    """What a handler gets: `method path query headers content json client` (`content`: the
    request body's bytes; "body" in master/ is the Body facade). The body is kept as the
    pieces it was read in (`pieces`, 256 bytes at most each after the head's read: a small
    heap may have no free block of a whole body's size) and joined only when a handler reads
    `content`."""

    def __init__(self, method, path, query, headers, client):
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers  # lower-case name -> str
        self.pieces = ()
        self._content = None
        self.client = client  # peer address as a string ("127.0.0.1")
        self.json_dups = ()  # duplicate keys the strict read of the body found: (path, key)
        self._json = _UNREAD

    @property
    def content(self):
        if self._content is None:
            p = self.pieces
            self._content = p[0] if len(p) == 1 else b"".join(p)
            self.pieces = (self._content,) if self._content else ()
        return self._content

    @content.setter
    def content(self, data):
        self._content = data
        self.pieces = (data,) if data else ()

    def length(self):
        """Bytes of the body, without joining it."""
        n = 0
        for p in self.pieces:
            n += len(p)
        return n

    @property
    def json(self):
        """The body as JSON, read strictly on first use (None when the body is empty); a body
        that is not JSON raises HttpError(400), answered by the server."""
        if self._json is _UNREAD:
            if not self.content:
                self._json = None
            else:
                try:
                    self._json, self.json_dups = jsonread.read(self.content)
                except jsonread.JsonError as e:
                    why = "body: not JSON: %s" % e.msg
                    raise HttpError(400, why, None, [why])
        return self._json


def client_address(peer):
    """The peer's IP as a string, from a CPython tuple or a MicroPython sockaddr."""
    if isinstance(peer, tuple):
        return str(peer[0])
    if isinstance(peer, (bytes, bytearray)) and len(peer) >= 8 and peer[0] == 2:
        return "%d.%d.%d.%d" % (peer[4], peer[5], peer[6], peer[7])
    return "?" if peer is None else str(peer)


def parse_head(head, max_headers=32):
    """Parse request line and headers (bytes without the blank line); raises HttpError(400)."""
    try:
        text = head.decode()
    except Exception:
        raise HttpError(400, "request head is not valid UTF-8")
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[0] or not parts[1].startswith("/"):
        raise HttpError(400, "malformed request line %r" % lines[0][:80])
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise HttpError(400, "unsupported HTTP version %r" % version[:16])
    if len(lines) - 1 > max_headers:
        raise HttpError(431, "more than %d header lines" % max_headers)
    headers = {}
    for line in lines[1:]:
        i = line.find(":")
        if i <= 0 or " " in line[:i] or "\t" in line[:i]:
            raise HttpError(400, "malformed header line %r" % line[:80])
        name = line[:i].lower()
        value = line[i + 1 :].strip()
        if name in headers:
            if name in ("content-length", "authorization", "host"):
                if headers[name] != value:
                    raise HttpError(400, "conflicting %s headers" % name)
            else:
                value = headers[name] + ", " + value
        headers[name] = value
    q = target.find("?")
    path, query = (target, "") if q < 0 else (target[:q], target[q + 1 :])
    return method, path, query, headers


class RateLimiter:
    """Token bucket per client address; tokens kept in thousandths, integers only.

    The table keeps `clients` addresses. It never fails open: a new address takes the place of
    a bucket that has refilled to the brim (forgetting it changes nothing), and when every
    bucket is still in use, new addresses share one overflow bucket with the same rate and
    burst, so rotating addresses buys no more than one client gets."""

    def __init__(self, rate_per_s, burst, clients=_RATE_CLIENTS):
        self.rate = max(1, int(rate_per_s))  # thousandths of a token per ms
        self.cap = max(1, int(burst)) * 1000
        self.clients = clients
        self.buckets = {}  # address -> [milli-tokens, last ms]
        self.overflow = None  # the bucket every address beyond a full table shares

    def _refill(self, b, now):
        dt = _diff(now, b[1])
        if dt > 0:
            b[0] = min(self.cap, b[0] + min(dt, 3600000) * self.rate)
            b[1] = now

    def _bucket(self, addr, now):
        b = self.buckets.get(addr)
        if b is not None:
            self._refill(b, now)
            return b
        if len(self.buckets) >= self.clients:
            full = None
            for k in self.buckets:
                self._refill(self.buckets[k], now)
                if self.buckets[k][0] >= self.cap:
                    full = k
                    break
            if full is None:
                if self.overflow is None:
                    self.overflow = [self.cap, now]
                else:
                    self._refill(self.overflow, now)
                return self.overflow
            del self.buckets[full]
        b = [self.cap, now]
        self.buckets[addr] = b
        return b

    def take(self, addr, now):
        """0 when the request may go on, else the seconds to wait (Retry-After)."""
        b = self._bucket(addr, now)
        if b[0] >= 1000:
            b[0] -= 1000
            return 0
        return (1000 - b[0] + self.rate * 1000 - 1) // (self.rate * 1000) or 1


def _tokens_equal(a, b):
    # Compare without an early exit so the time taken does not tell how much matched.
    if len(a) != len(b):
        return False
    d = 0
    for i in range(len(a)):
        d |= ord(a[i]) ^ ord(b[i])
    return d == 0


def response_parts(status, payload=None, headers=None):
    """(head bytes, content bytes) of a response; dict/list payloads become JSON. Kept apart
    so large content is never copied once more just to join it to its head."""
    ctype = "application/json"
    if payload is None:
        content = b""
    elif isinstance(payload, (bytes, bytearray)):
        content = payload
        ctype = "application/octet-stream"
    elif isinstance(payload, str):
        content = payload.encode()
        ctype = "text/plain; charset=utf-8"
    else:
        content = json.dumps(payload).encode()
    return _head(status, headers, ctype, len(content)), content


def encode_response(status, payload=None, headers=None):
    """Bytes of a whole response (tests and small answers)."""
    head, content = response_parts(status, payload, headers)
    return head + bytes(content)


class Each:
    """A JSON array made afresh at each pass: fn(x) for x in items, one at a time (the menu's
    entries, master/links/routes.py): json_pieces walks it like a list, twice with json_length, and
    only one entry's objects exist at once."""

    def __init__(self, fn, items):
        self.fn = fn
        self.items = items

    def __iter__(self):
        for x in self.items:
            yield self.fn(x)


_OPEN = {dict: (b"{", b"}"), list: (b"[", b"]"), tuple: (b"[", b"]"), Each: (b"[", b"]")}


def json_pieces(obj):
    """The bytes of json.dumps(obj) as a generator of small pieces (a container's brackets,
    keys, separators and each scalar): a large answer (the menu) is never one string, so a
    fragmented heap without one large free block still serves it. A `bytes` value is JSON
    text already (the /status ring's entries, kept as text) and goes out as it is."""
    t = type(obj)
    if t is bytes:
        yield obj
        return
    if t not in _OPEN:
        yield json.dumps(obj).encode()
        return
    first = True
    yield _OPEN[t][0]
    if t is dict:
        for k in obj:
            if not first:
                yield b", "
            first = False
            yield json.dumps(k if isinstance(k, str) else str(k)).encode()
            yield b": "
            yield from json_pieces(obj[k])
    else:
        for v in obj:
            if not first:
                yield b", "
            first = False
            yield from json_pieces(v)
    yield _OPEN[t][1]


def json_length(obj):
    """Bytes of json.dumps(obj).encode(), counted piece by piece (for Content-Length)."""
    n = 0
    for p in json_pieces(obj):
        n += len(p)
    return n


def _held(writer):
    """True unless `writer` is MicroPython's stream holding nothing: its drain() then only
    yields, with no need of the timeout (asyncio.wait_for takes a task and a coroutine, some
    300 bytes, at every piece of an answer)."""
    return not _MP or bool(getattr(writer, "out_buf", True))


async def write_json(writer, obj, timeout_s, buf=None):
    """Write obj's JSON to an asyncio writer through one buffer (`buf`, else a new one of _OUT
    bytes), draining (within `timeout_s`) each time it fills: at most that much is ever held
    for the socket. MicroPython's writer copies what the socket did not take before write()
    returns, so one buffer serves every connection (HttpServer.out); CPython's may keep a view
    of it, so there each answer gets its own."""
    if buf is None:
        buf = bytearray(_OUT)
    size = len(buf)
    mv = memoryview(buf)
    n = 0
    for p in json_pieces(obj):
        k = len(p)
        if n + k > size:
            if n:
                writer.write(mv[:n])
                await _drain(writer, timeout_s)
                n = 0
            if k > size:  # a long scalar (a description): as it is
                writer.write(p)
                await _drain(writer, timeout_s)
                continue
        mv[n : n + k] = p
        n += k
    if n:
        writer.write(mv[:n])
    await _drain(writer, timeout_s)


async def _drain(writer, timeout_s):
    # wait_for (a task and a timer) only when the stream holds bytes the socket has not taken
    if _held(writer):
        await asyncio.wait_for(writer.drain(), timeout_s)
    else:
        await writer.drain()


def _head(status, headers, ctype, length):
    out = [status_line(status)]
    have_ctype = False
    if headers:
        for k in headers:
            if k.lower() == "content-type":
                have_ctype = True
            out.append("%s: %s\r\n" % (k, headers[k]))
    if length and not have_ctype:
        out.append("Content-Type: %s\r\n" % ctype)
    out.append("Content-Length: %d\r\nConnection: close\r\n\r\n" % length)
    return "".join(out).encode()


def encode_response(status, payload=None, headers=None):
    """Bytes of a whole response (tests and small answers)."""
    head, content = response_parts(status, payload, headers)
    return head + bytes(content)


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
        self.out = bytearray(_OUT) if _MP else None
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
        if isinstance(
            payload, (dict, list, tuple, Each)
        ):  # JSON in pieces, its length counted first
            writer.write(_head(status, headers, "application/json", json_length(payload)))
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
                return buf[:i], buf[i + 4 :]
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

    async def _linger(self, reader, n):
        # Take (and drop) what the client is still sending before closing, so the
        # close does not reset the connection under the response it has not read yet.
        n = min(n, _LINGER_MAX)
        t0 = _ticks()
        try:
            while n > 0:
                left = _LINGER_MS - _diff(_ticks(), t0)
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
        return _tokens_equal(got[7:].strip(), token)

    def _secret_path(self, path):
        """(route path, True) for "P/<the token>" of a route "P/<token>": the path carries the
        token instead of the header (a client that holds only a URL: Home Assistant's MCP);
        another token there is 404, never 401 (a 401 sends such a client into OAuth
        discovery). Else (path, False)."""
        token = self.cfg["token"]
        for p in self.secret:
            if path.startswith(p):
                if token and _tokens_equal(path[len(p) :], token):
                    return p + "<token>", True
                raise HttpError(404, "no route %s<token> with that token" % p)
        return path, False

    async def _handle(self, reader, writer, addr, rec):
        cfg = self.cfg
        try:
            head, rest = await asyncio.wait_for(
                self._read_head(reader), cfg["header_timeout_ms"] / 1000
            )
        except asyncio.TimeoutError:
            await self._send(writer, 408, {"error": "request head not received in time"})
            return
        wait = 0 if addr in cfg["rate_exempt"] else self.limiter.take(addr, _ticks())
        if wait:
            raise HttpError(
                429,
                "rate limit: at most %d requests per second" % cfg["rate_per_s"],
                {"Retry-After": str(wait)},
            )
        method, path, query, headers = parse_head(head)
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
        if stream:
            if headers.get("expect", "").lower() == "100-continue":
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                await asyncio.wait_for(writer.drain(), cfg["write_timeout_ms"] / 1000)
            req.stream = BodyStream(reader, rest, n, cfg["body_timeout_ms"], handler)
            rec[2] = None  # a long upload is not a slow client: never reclaimed
            handler = handler.handler
        elif n:
            if headers.get("expect", "").lower() == "100-continue":
                # curl asks before sending a body over 1 KB; say go on (refusals came first).
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                await asyncio.wait_for(writer.drain(), cfg["write_timeout_ms"] / 1000)
            try:
                req.pieces = await asyncio.wait_for(
                    self._read_body(reader, rest, n, rec[4]), cfg["body_timeout_ms"] / 1000
                )
            except asyncio.TimeoutError:
                await self._send(writer, 408, {"error": "request body not received in time"})
                return
        rec[2] = None  # read whole: from here on the slot is not reclaimable
        try:
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
            await self._stream(writer, rec, status, payload, extra)
            return
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
            if _diff(now, rec[2]) < self.cfg["reclaim_ms"]:
                continue
            if oldest is None or _diff(rec[2], oldest[2]) < 0:
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
        now = _ticks()
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
                if _HAS_MEM_FREE and gc.mem_free() < self.cfg["min_free"]:
                    gc.collect()
                    if gc.mem_free() < self.cfg["min_free"]:
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
                await handling
            except HttpError as e:
                await self._send(writer, e.status, e.payload(), e.headers)
                await self._linger(reader, self.cfg["max_body"] + self.cfg["max_head"])
            except MemoryError:
                self.low_memory += 1
                self.counts[503] = self.counts.get(503, 0) + 1
                writer.write(_LOW_MEMORY)
                await asyncio.wait_for(writer.drain(), self.cfg["write_timeout_ms"] / 1000)
                await self._linger(reader, self.cfg["max_body"] + self.cfg["max_head"])
        except asyncio.CancelledError:
            if rec[3] is not True:
                raise  # the server is being stopped
            # reclaimed (its slot went to a new client): say so if the socket still takes it
            self.counts[408] = self.counts.get(408, 0) + 1
            try:
                writer.write(_RECLAIMED)
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


async def _close(writer):
    try:
        writer.close()
        await writer.wait_closed()
    except Exception:
        pass


class _Listener:
    """MicroPython's `asyncio.start_server` (extmod/asyncio/stream.py) but for one thing: a
    client accepted on a heap too full for its Stream and task gets the spare block and one
    collection, else is closed at once (counted in `low_memory`), and the loop goes on. There,
    that MemoryError ends the accept loop and leaves the socket listening with nobody accepting:
    every later client waits in the backlog for good (seen at 64 KB on a loaded machine)."""

    def __init__(self, server, host, port, backlog):
        import socket

        ai = socket.getaddrinfo(host, port)[0]
        s = socket.socket(ai[0])
        s.setblocking(False)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(ai[-1])
        s.listen(backlog)
        self.closed = False
        self.task = asyncio.create_task(self._serve(server, s))

    def close(self):
        self.closed = True
        self.task.cancel()

    async def wait_closed(self):
        await self.task

    async def _serve(self, server, s):
        io = asyncio.core._io_queue  # the readiness wait start_server's loop uses
        try:
            while True:
                yield io.queue_read(s)
                try:
                    s2, addr = s.accept()
                except Exception:
                    continue  # a failed accept, as start_server ignores it
                try:
                    _accept(server, s2, addr)
                except MemoryError:
                    server.spare = None
                    gc.collect()
                    try:
                        _accept(server, s2, addr)
                    except MemoryError:
                        server.low_memory += 1
                        s2.close()
        except asyncio.CancelledError:
            if not self.closed:
                raise
        finally:
            s.close()


def _accept(server, s2, addr):
    s2.setblocking(False)
    st = asyncio.StreamReader(s2, {"peername": addr})
    asyncio.create_task(server._conn(st, st))


def _print_exc(e):
    if _MP:
        sys.print_exception(e)
    else:
        import traceback

        traceback.print_exception(type(e), e, e.__traceback__)


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
