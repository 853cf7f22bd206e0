# HTTP/1.1 messages for the master's server: reason phrases, response heads, the request head, Request and its body kinds, HttpError.
import asyncio
import json
import sys

from micropython import const

from organbus import jsonread
from organbus.utf8 import valid_utf8

_MP = sys.implementation.name == "micropython"
_READ = const(512)

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


# what bytes.strip() takes off a header's value: ASCII white space, as MicroPython's str.strip
# (CPython's str.strip also took \x1c..\x1f and Unicode spaces; RFC 9110's OWS is SP and HTAB)
_OWS = b" \t\r\n\x0b\x0c"
# The header names clients send most, lower-case, by their bytes: parse_head takes these str
# instead of making new ones (about 500 B of heap on the C6 for 9,000 instructions a header)
_NAMES = {}
for _n in ("host", "user-agent", "accept", "content-type", "content-length", "authorization"):
    _NAMES[_n.encode()] = _n
for _n in ("origin", "expect", "transfer-encoding", "mcp-session-id", "mcp-protocol-version"):
    _NAMES[_n.encode()] = _n


def parse_head(head, max_headers=32, end=-1):
    """Parse request line and headers (bytes without the blank line, or `head[:end]`); raises
    HttpError(400). Cut from the bytes in place, a header's name and value made str and no
    line kept: on MicroPython a new str is a search of the interned strings (~8,000 RV32
    instructions with the master's modules loaded as .mpy), a new bytes ~1,000."""
    n = len(head) if end < 0 else end
    if not valid_utf8(head, 0, n):
        raise HttpError(400, "request head is not valid UTF-8")
    end = head.find(b"\r\n", 0, n)
    end = n if end < 0 else end
    a = head.find(b" ", 0, end)
    b = head.find(b" ", a + 1, end)
    if a <= 0 or b < 0 or head[a + 1] != 47 or head.find(b" ", b + 1, end) >= 0:  # 47: "/"
        raise HttpError(400, "malformed request line %r" % head[:end].decode()[:80])
    version = head[b + 1 : end]
    if version != b"HTTP/1.1" and version != b"HTTP/1.0":
        raise HttpError(400, "unsupported HTTP version %r" % version.decode()[:16])
    method = head[:a].decode()
    target = head[a + 1 : b].decode()
    if head.count(b"\r\n", 0, n) > max_headers:
        raise HttpError(431, "more than %d header lines" % max_headers)
    headers = {}
    while end < n:
        start = end + 2
        end = head.find(b"\r\n", start, n)
        end = n if end < 0 else end
        i = head.find(b":", start, end)
        name = head[start:i]
        if i <= start or b" " in name or b"\t" in name:
            raise HttpError(400, "malformed header line %r" % head[start:end].decode()[:80])
        name = name.lower()
        name = _NAMES.get(name) or name.decode()
        value = head[i + 1 : end]
        if value and (value[0] in _OWS or value[-1] in _OWS):
            value = value.strip()
        value = value.decode()
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


def same(a, b):
    """Equal tokens or digests (str or bytes), compared without an early exit: the time taken
    does not tell how much matched (the bearer token, the token in a URL, an update's HMAC)."""
    if isinstance(a, str):
        a = a.encode()
    if isinstance(b, str):
        b = b.encode()
    if len(a) != len(b):
        return False
    d = 0
    for i in range(len(a)):
        d |= a[i] ^ b[i]
    return d == 0
