# One HTTP/1.1 client for every outgoing request: request head, bounded head reads, deadlines.
#
# The URL is parsed and checked by master/net/url.py; header names and values are checked here,
# so no input adds a line to a head.
#
# An answer's head is read through a buffer the caller owns (preallocated, reused: nothing here
# grows with the input). A line is capped at MAX_LINE bytes and the head at MAX_HEAD; only the
# headers asked for are kept, the rest is read past. A head is never read beyond its end (reads of
# at most 2 bytes while the next byte could end it), so what follows (a body, WebSocket frames)
# stays in the stream for its own reader. Every exchange runs under one deadline.
import sys

import asyncio

from micropython import const

from master.net.url import NetError, alnum, hexdigit, host_header, parse_url

_MP = sys.implementation.name == "micropython"

MAX_LINE = const(4096)  # bytes of one line of an answer's head, its CR LF aside
MAX_HEAD = const(8192)  # bytes of an answer's whole head
SECURE = ("https", "wss")

_CR = const(13)
_LF = const(10)
_TCHAR = b"!#$%&'*+-.^_`|~"  # a header name's characters besides letters and digits


class NetTimeout(NetError):
    """A connection, a request or an answer that did not complete within its deadline."""


async def wait_ms(aw, ms):
    """`aw` within `ms` milliseconds, else asyncio.TimeoutError (both interpreters)."""
    if _MP:
        return await asyncio.wait_for_ms(aw, ms)
    return await asyncio.wait_for(aw, ms / 1000)


async def read_some(stream, mv):
    """Bytes of `stream` read into `mv`: how many (at least 1), 0 at the end of the stream."""
    ri = getattr(stream, "readinto", None)
    if ri is not None:
        while True:
            k = await ri(mv)
            if k is not None:  # None: TLS, readable, but no whole record yet
                return k
    data = await stream.read(len(mv))
    k = len(data)
    mv[:k] = data
    return k


# -- request heads ---------------------------------------------------------------------------------


def _token(name):
    if not name:
        return False
    for c in name.encode():
        if not (alnum(c) or c in _TCHAR):
            return False
    return True


def request_field_ok(value):
    """True when `value` can be a header's value: no control character but a tab."""
    for ch in value:
        if (ch < " " and ch != "\t") or ch == "\x7f":
            return False
    return True


def head_lines(method, url_parts, headers=()):
    """The request head's lines as bytes, CR LF included, the blank line last: the request line,
    Host, `headers` ((name, value) pairs or a dict). NetError, before anything is sent, for a
    header name or value that could break a line."""
    scheme, host, port, target = url_parts
    lines = [("%s %s HTTP/1.1\r\n" % (method, target)).encode()]
    lines.append(("Host: %s\r\n" % host_header(host, port, scheme)).encode())
    for k, v in headers.items() if isinstance(headers, dict) else headers:
        v = str(v)
        if not isinstance(k, str) or not _token(k):
            raise NetError("header name %s cannot go on a request" % repr(k)[:40])
        if not request_field_ok(v):
            raise NetError("the value of header %s holds a control character: refused" % k)
        lines.append((k + ": " + v + "\r\n").encode())
    lines.append(b"\r\n")
    return lines


def request_head(method, url_parts, headers=()):
    """head_lines() as one bytes."""
    return b"".join(head_lines(method, url_parts, headers))


def write_lines(writer, lines):
    """Each line (or piece) written as it is: no block the size of the whole (a heap in small
    free runs still sends it); the caller drains."""
    for b in lines:
        writer.write(b)


# -- answers ---------------------------------------------------------------------------------------


def _text(mv):
    b = bytes(mv)
    try:
        return str(b, "utf-8")
    except UnicodeError:
        return repr(b)


class Answer:
    """One HTTP answer read from `stream` through `buf` (the caller's bytearray, reused):
    `await head(want)` sets `status`, `reason` and `headers` (the lower-case names in `want`,
    values as str); `await body()` reads the body into `buf` and gives its length. `ms`: a
    deadline of the call's own (None: the caller's deadline bounds it)."""

    def __init__(self, stream, buf):
        self.stream = stream
        self.buf = buf
        self.mv = memoryview(buf)
        self._two = bytearray(2)
        tv = memoryview(self._two)
        self._reads = (None, tv[:1], tv)  # the view for a read of 1 or 2 bytes
        self.status = 0
        self.reason = ""
        self.headers = {}
        self.size = 0  # bytes of the head read so far
        self.got = 0  # bytes of the body read so far

    async def head(self, want=(), ms=None):
        if ms is None:
            return await self._head(want)
        try:
            return await wait_ms(self._head(want), ms)
        except asyncio.TimeoutError:
            raise NetTimeout("no whole answer head within %d ms (%d bytes came)" % (ms, self.size))

    async def _head(self, want):
        buf, two, reads = self.buf, self._two, self._reads
        cap = len(buf)
        n = 0  # bytes of the current line held in buf[:n]
        size = 0  # bytes of the current line, its LF aside
        t1 = t2 = 0  # the last two bytes read
        first = True
        while True:
            # 1 byte when the next one could end the head, else 2: never a byte past its end
            k = 1 if t1 == _LF or (t1 == _CR and t2 == _LF) else 2
            got = await read_some(self.stream, reads[k])
            if not got:
                if not self.size:
                    raise NetError("the connection closed before an answer")
                raise NetError(
                    "the connection closed inside the answer's head (%d bytes)" % self.size
                )
            self.size += got
            if self.size > MAX_HEAD:
                raise NetError("the answer's head is longer than %d bytes" % MAX_HEAD)
            for j in range(got):
                c = two[j]
                t2, t1 = t1, c
                if c != _LF:
                    if n < cap:
                        buf[n] = c
                        n += 1
                    size += 1
                    if size > MAX_LINE:
                        raise NetError(
                            "a line of the answer's head is longer than %d bytes" % MAX_LINE
                        )
                    continue
                cr = size > 0 and t2 == _CR
                length = size - 1 if cr else size
                held = n - 1 if cr and n == size else n
                if first:
                    self._status(held)
                    first = False
                elif not length:
                    return self.status
                else:
                    self._header(held, held < length, want)
                n = size = 0

    def _status(self, h):
        b = self.buf
        ok = (
            h >= 12
            and bytes(self.mv[:7]) == b"HTTP/1."
            and b[8] == 0x20
            and (h == 12 or b[12] == 0x20)
        )
        for i in range(9, 12 if ok else 9):
            ok = ok and 0x30 <= b[i] <= 0x39
        if not ok:
            raise NetError("not an HTTP answer: %r" % bytes(self.mv[: min(h, 60)]))
        self.status = (b[9] - 0x30) * 100 + (b[10] - 0x30) * 10 + b[11] - 0x30
        self.reason = _text(self.mv[13 : min(h, 73)]) if h > 13 else ""

    def _header(self, h, long, want):
        b = self.buf
        if b[0] == 0x20 or b[0] == 0x09:
            raise NetError("a folded header line (obs-fold) in the answer: refused")
        colon = b.find(b":", 0, h)
        if colon <= 0:
            raise NetError("a header line without a name: %r" % bytes(self.mv[: min(h, 40)]))
        for name in want:
            if len(name) != colon:
                continue
            i = 0
            while i < colon and b[i] | 0x20 == ord(name[i]) | 0x20:
                i += 1
            if i < colon:
                continue
            if long:
                raise NetError("the answer's %s header is longer than %d bytes" % (name, len(b)))
            v = _text(self.mv[colon + 1 : h]).strip()
            old = self.headers.get(name)
            if old is not None and old != v:
                if name == "content-length":
                    raise NetError("two different Content-Length headers (%s, %s)" % (old, v))
                v = old + ", " + v
            self.headers[name] = v
            return

    async def body(self, ms=None):
        """The body into buf: its length n (in buf[:n]), by Content-Length, chunked, or until the
        server closes; NetError when it is longer than buf."""
        if ms is None:
            return await self._body()
        try:
            return await wait_ms(self._body(), ms)
        except asyncio.TimeoutError:
            raise NetTimeout(
                "the answer's body did not come within %d ms (%d bytes came)" % (ms, self.got)
            )

    async def _body(self):
        cap = len(self.buf)
        te = self.headers.get("transfer-encoding")
        if te is not None:
            if te.lower() != "chunked":
                raise NetError("transfer-encoding %r is not supported" % te[:40])
            return await self._chunked(cap)
        cl = self.headers.get("content-length")
        if cl is not None:
            if not cl.isdigit() or len(cl) > 9:
                raise NetError("Content-Length %r is not a number" % cl[:20])
            n = int(cl)
            if n > cap:
                raise NetError("an answer of %d bytes is longer than %d" % (n, cap))
            await self._exact(n)
            return n
        while True:  # until the server closes
            if self.got >= cap:
                if await read_some(self.stream, self._reads[1]):
                    raise NetError("the answer is longer than %d bytes" % cap)
                return self.got
            k = await read_some(self.stream, self.mv[self.got :])
            if not k:
                return self.got
            self.got += k

    async def _exact(self, n):
        # buf[got:got + n] from the stream, exactly
        end = self.got + n
        while self.got < end:
            k = await read_some(self.stream, self.mv[self.got : end])
            if not k:
                raise NetError("the connection closed %d bytes into the answer's body" % self.got)
            self.got += k

    async def _chunked(self, cap):
        while True:
            size = await self._line(True)
            if size == 0:
                while await self._line(False):  # trailer lines, read past
                    pass
                return self.got
            if self.got + size > cap:
                raise NetError("a chunked answer longer than %d bytes" % cap)
            await self._exact(size)
            if await self._line(False):
                raise NetError("a chunk of the answer does not end with CR LF")

    async def _line(self, hex_size):
        # One line of a chunked body, read a byte at a time (where it ends is not known): its
        # chunk size when `hex_size`, else its length, CR LF aside; bounded by MAX_LINE.
        one, two = self._reads[1], self._two
        value = size = last = 0
        digits = 0  # hex digits of the size; -1 once the size has ended
        while True:
            if not await read_some(self.stream, one):
                raise NetError("the connection closed inside a chunked answer")
            c = two[0]
            if c == _LF:
                break
            size += 1
            last = c
            if size > MAX_LINE:
                raise NetError("a line of the chunked answer is longer than %d bytes" % MAX_LINE)
            if hex_size and digits >= 0:
                if hexdigit(c):
                    if digits >= 6:
                        raise NetError("a chunk size of more than 6 hex digits")
                    value = value * 16 + (c - 0x30 if c <= 0x39 else (c | 0x20) - 0x57)
                    digits += 1
                elif digits:
                    digits = -1  # ";extension" or the CR: the size is complete
                else:
                    raise NetError("a chunk without a size")
        if hex_size:
            if not digits:
                raise NetError("a chunk without a size")
            return value
        return size - 1 if last == _CR else size


def ssl_context(cadata=None):
    """A TLS client context: the server's certificate is checked against `cadata` (DER bytes)
    when given, else against the system's CAs on CPython; MicroPython has no CA store, so
    without `cadata` the certificate is not checked there (docs/links.md)."""
    import ssl

    if _MP:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if cadata:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(cadata=cadata)
        return ctx
    ctx = ssl.create_default_context()
    if cadata:
        ctx.load_verify_locations(cadata=cadata)
    return ctx


async def connect(host, port, secure, ctx=None):
    """(reader, writer) of a TCP connection, TLS over it when `secure` (`ctx`, else ssl_context())."""
    if secure:
        if ctx is None:
            ctx = ssl_context()
        return await asyncio.open_connection(host, port, ssl=ctx, server_hostname=host)
    return await asyncio.open_connection(host, port)


async def close(writer):
    """Close a connection, waiting for it a second at most; never raises."""
    try:
        writer.close()
        await wait_ms(writer.wait_closed(), 1000)
    except Exception:
        pass


async def request(method, url, headers=(), body=b"", buf=None, ms=10000, ctx=None, read_body=True):
    """(status, n) of one HTTP/1.1 exchange with `url` (http:// or https://, or parse_url's
    tuple; Connection: close; `body` bytes, str or a list of pieces), the whole of it within `ms`: the answer's body in buf[:n] (n is 0
    without `read_body`; `buf` a bytearray the caller keeps, else 256 bytes for this one).
    NetError / NetTimeout with the reason, naming the server and how far the exchange got."""
    parts = url if isinstance(url, tuple) else parse_url(url)
    host, port = parts[1], parts[2]
    if isinstance(body, str):
        body = body.encode()
    if not isinstance(body, list):  # a list: the body in pieces (master/net/jsonout.py)
        body = [body] if body else []
    size = 0
    for p in body:
        size += len(p)
    hdrs = list(headers.items() if isinstance(headers, dict) else headers)
    if size or method in ("POST", "PUT"):
        hdrs.append(("Content-Length", size))
    hdrs.append(("Connection", "close"))
    head = head_lines(method, parts, hdrs)
    if buf is None:
        buf = bytearray(256)
    ans = None
    stage = ["connecting"]

    async def go():
        nonlocal ans
        r, w = await connect(host, port, parts[0] in SECURE, ctx)
        try:
            stage[0] = "sending the request"
            write_lines(w, head)
            write_lines(w, body)
            await w.drain()
            stage[0] = "waiting for the answer"
            ans = Answer(r, buf)
            await ans.head(("content-length", "transfer-encoding"))
            stage[0] = "reading the answer's body"
            return ans.status, (await ans.body()) if read_body else 0
        finally:
            await close(w)

    try:
        return await wait_ms(go(), ms)
    except asyncio.TimeoutError:
        came = " (%d bytes of its head came)" % ans.size if ans is not None and ans.size else ""
        raise NetTimeout(
            "%s %s:%d: no whole answer within %d ms, %s%s"
            % (method, host, port, ms, stage[0], came)
        )
    except NetError as e:
        raise NetError("%s %s:%d: %s" % (method, host, port, e))
    except Exception as e:  # OSError and the like: said as one reason
        raise NetError("%s %s:%d failed %s: %r" % (method, host, port, stage[0], e))
