# WebSocket client (RFC 6455, client side) on asyncio streams, one module for MicroPython and CPython.
#
# Receive buffers are allocated once per WebSocket: a 14-byte frame header, a 125-byte control
# payload and one message buffer of `max_message` bytes that fragments are read into in place.
# A message longer than that is read through the message buffer and dropped (counted in
# `oversize`), never held whole. Sends are masked chunk by chunk through one `tx_chunk` buffer,
# so a long message needs no second copy. Every read has a deadline: the first byte of a frame
# waits at most `idle_ms` (the caller's watchdog), the rest of the frame `read_timeout_ms`.
import sys

import asyncio
import binascii
import hashlib
import os
import random

import micropython
from micropython import const

from organbus.utf8 import valid_utf8

_MP = sys.implementation.name == "micropython"

CONT = const(0)
TEXT = const(1)
BINARY = const(2)
CLOSE = const(8)
PING = const(9)
PONG = const(10)

NORMAL = const(1000)
GOING_AWAY = const(1001)
PROTOCOL_ERROR = const(1002)
BAD_DATA = const(1007)
TOO_BIG = const(1009)
NO_STATUS = const(1005)
ABNORMAL = const(1006)

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_MAX_HEAD = const(4096)  # bytes of the server's upgrade answer
_SKIP_LIMIT = const(1 << 20)  # an oversize frame longer than this is a protocol error, not skipped


class WsError(Exception):
    """A WebSocket failure with a specific reason (handshake, protocol, size)."""


class WsTimeout(WsError):
    """A connect or a read did not complete within its deadline."""


class WsClosed(WsError):
    """The connection is closed: `code` and `reason` of the close (ABNORMAL when it was lost)."""

    def __init__(self, code, reason=""):
        super().__init__("closed %d %s" % (code, reason))
        self.code = code
        self.reason = reason


def parse_url(url):
    """(secure, host, port, target) of a ws:// or wss:// URL; WsError naming what is wrong."""
    if not isinstance(url, str):
        raise WsError("websocket url must be a string, not %r" % (url,))
    if url.startswith("ws://"):
        secure, rest = False, url[5:]
    elif url.startswith("wss://"):
        secure, rest = True, url[6:]
    else:
        raise WsError("websocket url %r must start with ws:// or wss://" % url[:80])
    i = rest.find("/")
    j = rest.find("?")
    if j >= 0 and (i < 0 or j < i):
        i = j
    hostport, target = (rest, "/") if i < 0 else (rest[:i], rest[i:])
    if target.startswith("?"):
        target = "/" + target
    if "@" in hostport:
        raise WsError("websocket url %r: user info is not supported" % url[:80])
    host, port = hostport, 443 if secure else 80
    k = hostport.rfind(":")
    if k >= 0:
        host = hostport[:k]
        try:
            port = int(hostport[k + 1 :])
        except ValueError:
            raise WsError("websocket url %r: port is not a number" % url[:80])
        if not 0 < port < 65536:
            raise WsError("websocket url %r: port %d out of range" % (url[:80], port))
    if not host:
        raise WsError("websocket url %r has no host" % url[:80])
    return secure, host, port, target


def accept_for(key):
    """Sec-WebSocket-Accept the server must answer for `key` (bytes or str)."""
    if isinstance(key, str):
        key = key.encode()
    return binascii.b2a_base64(hashlib.sha1(key + _GUID).digest()).strip().decode()


if _MP:

    @micropython.viper
    def _mask_mp(buf: ptr8, n: int, key: ptr8, k: int):
        i = 0
        while i < n:
            buf[i] = buf[i] ^ key[(k + i) & 3]
            i += 1

    def _mask(mv, n, key, k):
        _mask_mp(mv, n, key, k)

else:

    def _mask(mv, n, key, k):
        if n <= 0:
            return
        rot = bytes(key[(k + i) & 3] for i in range(4))
        full = rot * (n // 4 + 1)
        x = int.from_bytes(mv[:n], "little") ^ int.from_bytes(full[:n], "little")
        mv[:n] = x.to_bytes(n, "little")


def mask(data, key, k=0):
    """`data` XOR the 4-byte `key` starting at key phase `k` (tests and the stand-in server)."""
    b = bytearray(data)
    _mask(memoryview(b), len(b), key, k)
    return bytes(b)


async def _wait(aw, ms):
    if _MP:
        return await asyncio.wait_for_ms(aw, ms)
    return await asyncio.wait_for(aw, ms / 1000)


def _random_into(buf, n):
    # Mask keys and the handshake key: 16 random bits at a time, small ints on RV32 too.
    for i in range(0, n, 2):
        r = random.getrandbits(16)
        buf[i] = r & 0xFF
        if i + 1 < n:
            buf[i + 1] = r >> 8


def _seed():
    try:
        random.seed(int.from_bytes(os.urandom(4), "little"))
    except Exception:  # no urandom: the port's own seed stands
        pass


class WebSocket:
    """One client connection. `await connect(url, headers)`, `send_text`/`send_binary`,
    `recv() -> (opcode, n)` with the message in `message[:n]`, `ping`, `close(code)`.

    One writer: every send goes through one lock, so a pong never lands inside a message.
    Counters: `messages_in messages_out bytes_in bytes_out oversize pings pongs`."""

    max_message = 8192
    tx_chunk = 1024
    connect_timeout_ms = 10000
    read_timeout_ms = 10000
    write_timeout_ms = 10000
    close_timeout_ms = 2000

    def __init__(self, max_message=None, tx_chunk=None):
        if max_message:
            self.max_message = max_message
        if tx_chunk:
            self.tx_chunk = tx_chunk
        self._hdr = bytearray(14)
        self._hv = memoryview(self._hdr)
        self._ctrl = bytearray(125)
        self._cv = memoryview(self._ctrl)
        self._buf = bytearray(self.max_message)
        self.message = memoryview(self._buf)
        self._tx = bytearray(14 + self.tx_chunk)
        self._txv = memoryview(self._tx)
        self._key = bytearray(4)
        self._lock = asyncio.Lock()
        self.reader = self.writer = None
        self._readinto = None
        self.open = False
        self.close_code = None
        self.close_reason = ""
        self.response_headers = {}
        self.messages_in = self.messages_out = 0
        self.bytes_in = self.bytes_out = 0
        self.oversize = 0
        self.pings = self.pongs = 0
        _seed()

    def counters(self):
        return {
            "messages_in": self.messages_in,
            "messages_out": self.messages_out,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "oversize": self.oversize,
            "pings": self.pings,
            "pongs": self.pongs,
        }

    # -- connect -----------------------------------------------------------------------------

    async def connect(self, url, headers=None, ssl_context=None, timeout_ms=None):
        """Open the TCP (TLS for wss://) connection and upgrade it; WsError/WsTimeout on failure."""
        secure, host, port, target = parse_url(url)
        t = timeout_ms or self.connect_timeout_ms
        try:
            await _wait(self._connect(secure, host, port, target, headers, ssl_context), t)
        except (asyncio.TimeoutError, WsTimeout):
            await self.abort()
            raise WsTimeout("no websocket upgrade from %s:%d within %d ms" % (host, port, t))
        except WsError:
            await self.abort()
            raise
        except Exception as e:  # OSError and the like: say it as one reason
            await self.abort()
            raise WsError("cannot connect to %s:%d: %r" % (host, port, e))

    async def _connect(self, secure, host, port, target, headers, ssl_context):
        ctx = None
        if secure:
            ctx = ssl_context if ssl_context is not None else default_ssl_context()
        if ctx is not None:
            self.reader, self.writer = await asyncio.open_connection(
                host, port, ssl=ctx, server_hostname=host
            )
        else:
            self.reader, self.writer = await asyncio.open_connection(host, port)
        self._readinto = getattr(self.reader, "readinto", None)
        _random_into(self._key, 4)
        raw = bytearray(16)
        _random_into(raw, 16)
        key = binascii.b2a_base64(raw).strip().decode()
        hostline = host if port == (443 if secure else 80) else "%s:%d" % (host, port)
        lines = [
            "GET %s HTTP/1.1" % target,
            "Host: " + hostline,
            "Upgrade: websocket",
            "Connection: Upgrade",
            "Sec-WebSocket-Key: " + key,
            "Sec-WebSocket-Version: 13",
        ]
        if headers:
            for k in headers:
                v = str(headers[k])
                if "\r" in v or "\n" in v or "\r" in k or "\n" in k or ":" in k:
                    raise WsError("header %r cannot go on the upgrade request" % k[:40])
                lines.append("%s: %s" % (k, v))
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await self.writer.drain()
        status = await self.reader.readline()
        total = len(status)
        parts = status.decode().split(" ", 2) if status else []
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            raise WsError("not an HTTP answer to the upgrade: %r" % status[:60])
        hdrs = {}
        while True:
            line = await self.reader.readline()
            total += len(line)
            if total > _MAX_HEAD:
                raise WsError("upgrade answer head longer than %d bytes" % _MAX_HEAD)
            if not line:
                raise WsError("connection closed during the upgrade")
            if line in (b"\r\n", b"\n"):
                break
            s = line.decode().strip()
            i = s.find(":")
            if i > 0:
                hdrs[s[:i].strip().lower()] = s[i + 1 :].strip()
        self.response_headers = hdrs
        if parts[1] != "101":
            raise WsError("upgrade refused: HTTP %s %s" % (parts[1], parts[2].strip()[:60]))
        if hdrs.get("upgrade", "").lower() != "websocket":
            raise WsError("upgrade answer without Upgrade: websocket")
        if "upgrade" not in hdrs.get("connection", "").lower():
            raise WsError("upgrade answer without Connection: Upgrade")
        want = accept_for(key)
        got = hdrs.get("sec-websocket-accept")
        if got != want:
            raise WsError("Sec-WebSocket-Accept %r does not match the key (want %r)" % (got, want))
        if hdrs.get("sec-websocket-extensions"):
            raise WsError(
                "server chose extensions %r that were not offered"
                % hdrs["sec-websocket-extensions"][:60]
            )
        self.open = True
        self.close_code = None

    # -- send ---------------------------------------------------------------------------------

    async def send_text(self, s):
        await self.send(TEXT, s.encode() if isinstance(s, str) else s)

    async def send_binary(self, b):
        await self.send(BINARY, b)

    async def ping(self, payload=b""):
        if len(payload) > 125:
            raise WsError("ping payload over 125 bytes")
        await self.send(PING, payload)

    async def send(self, op, data):
        """One whole message (or control frame), masked, under the writer lock."""
        if not self.open:
            raise WsClosed(self.close_code or ABNORMAL, "not open")
        await self._lock.acquire()
        try:
            await _wait(self._send_frame(op, data), self.write_timeout_ms)
        except asyncio.TimeoutError:
            self._lost()
            raise WsTimeout("a frame was not taken within %d ms" % self.write_timeout_ms)
        except OSError as e:
            self._lost()
            raise WsClosed(ABNORMAL, "send failed: %r" % e)
        finally:
            self._lock.release()
        if op < CLOSE:
            self.messages_out += 1

    async def _send_frame(self, op, data):
        n = len(data)
        tx = self._tx
        tx[0] = 0x80 | op
        if n < 126:
            tx[1] = 0x80 | n
            h = 2
        elif n < 65536:
            tx[1] = 0x80 | 126
            tx[2] = n >> 8
            tx[3] = n & 0xFF
            h = 4
        else:
            tx[1] = 0x80 | 127
            for i in range(8):
                tx[2 + i] = (n >> (8 * (7 - i))) & 0xFF
            h = 10
        key = self._key
        _random_into(key, 4)
        tx[h : h + 4] = key
        h += 4
        src = memoryview(data) if not isinstance(data, memoryview) else data
        off = 0
        while True:
            k = min(n - off, self.tx_chunk)
            view = self._txv[h : h + k]
            view[:] = src[off : off + k]
            _mask(view, k, key, off)
            chunk = self._txv[: h + k]
            self.writer.write(chunk if _MP else bytes(chunk))
            await self.writer.drain()
            self.bytes_out += h + k
            off += k
            h = 0
            if off >= n:
                break

    # -- receive ------------------------------------------------------------------------------

    async def _read(self, mv, n, deadline_ms):
        """Exactly n bytes into mv[:n] within deadline_ms; WsClosed(ABNORMAL) at EOF."""
        got = 0
        ri = self._readinto
        while got < n:
            if ri is not None:
                k = await _wait(ri(mv[got:n]), deadline_ms)
                if k is None:  # TLS: readable, but no whole record yet
                    continue
            else:
                data = await _wait(self.reader.read(n - got), deadline_ms)
                k = len(data)
                mv[got : got + k] = data
            if not k:
                self._lost()
                raise WsClosed(ABNORMAL, "connection lost")
            got += k
        self.bytes_in += n

    async def _read_timed(self, mv, n, ms):
        try:
            await self._read(mv, n, ms)
        except asyncio.TimeoutError:
            raise WsTimeout("frame not complete within %d ms" % ms)

    async def recv(self, idle_ms=None):
        """The next whole text or binary message: (opcode, n), the bytes in `message[:n]`
        (valid until the next recv). Pings are answered, pongs counted, oversize messages
        dropped and counted. A close from the server raises WsClosed after the close reply;
        no frame start within `idle_ms` raises WsTimeout (the connection stays usable)."""
        if not self.open:
            raise WsClosed(self.close_code or ABNORMAL, self.close_reason or "not open")
        op = -1  # opcode of the message being assembled, -1 between messages
        n = 0
        skip = False
        hv = self._hv
        while True:
            try:
                if idle_ms is not None and op < 0:
                    try:
                        await self._read(hv, 1, idle_ms)
                    except asyncio.TimeoutError:
                        raise WsTimeout("no frame within %d ms" % idle_ms)
                    await self._read_timed(hv[1:], 1, self.read_timeout_ms)
                else:
                    await self._read_timed(hv, 2, self.read_timeout_ms)
                b0 = self._hdr[0]
                b1 = self._hdr[1]
                fin = b0 & 0x80
                fop = b0 & 0x0F
                if b0 & 0x70:
                    await self._fail(PROTOCOL_ERROR, "reserved bits set (no extension agreed)")
                if b1 & 0x80:
                    await self._fail(PROTOCOL_ERROR, "the server masked a frame")
                ln = b1 & 0x7F
                if ln == 126:
                    await self._read_timed(hv[2:], 2, self.read_timeout_ms)
                    ln = (self._hdr[2] << 8) | self._hdr[3]
                elif ln == 127:
                    await self._read_timed(hv[2:], 8, self.read_timeout_ms)
                    ln = 0
                    for i in range(2, 10):
                        ln = (ln << 8) | self._hdr[i]
                        if ln > _SKIP_LIMIT:
                            await self._fail(TOO_BIG, "frame longer than %d bytes" % _SKIP_LIMIT)
                if fop >= CLOSE:
                    if not fin or ln > 125:
                        await self._fail(PROTOCOL_ERROR, "fragmented or long control frame")
                    await self._read_timed(self._cv, ln, self.read_timeout_ms)
                    await self._control(fop, ln)
                    continue
                if fop == CONT:
                    if op < 0:
                        await self._fail(PROTOCOL_ERROR, "continuation without a message")
                elif fop == TEXT or fop == BINARY:
                    if op >= 0:
                        await self._fail(PROTOCOL_ERROR, "new message inside a fragmented one")
                    op = fop
                    n = 0
                    skip = False
                else:
                    await self._fail(PROTOCOL_ERROR, "reserved opcode %d" % fop)
                if skip or n + ln > self.max_message:
                    if ln > _SKIP_LIMIT:
                        await self._fail(TOO_BIG, "frame longer than %d bytes" % _SKIP_LIMIT)
                    skip = True
                    left = ln
                    while left > 0:  # read through the message buffer, keep nothing
                        k = min(left, self.max_message)
                        await self._read_timed(self.message, k, self.read_timeout_ms)
                        left -= k
                else:
                    await self._read_timed(self.message[n:], ln, self.read_timeout_ms)
                    n += ln
                if not fin:
                    continue
                if skip:
                    self.oversize += 1
                    op = -1
                    continue
                if op == TEXT and not valid_utf8(self._buf, 0, n):
                    await self._fail(BAD_DATA, "text message is not valid UTF-8")
                self.messages_in += 1
                return op, n
            except WsTimeout:
                if op >= 0 or idle_ms is None:
                    self._lost()  # mid-frame: the stream is out of step, the connection is dead
                raise

    async def _control(self, fop, ln):
        if fop == PING:
            self.pings += 1
            await self.send(PONG, self._cv[:ln])
        elif fop == PONG:
            self.pongs += 1
        elif fop == CLOSE:
            code, reason = NO_STATUS, ""
            if ln >= 2:
                code = (self._ctrl[0] << 8) | self._ctrl[1]
                try:
                    reason = bytes(self._ctrl[2:ln]).decode()
                except Exception:
                    reason = ""
            try:
                await self.send(CLOSE, self._cv[:2] if ln >= 2 else b"")
            except WsError:
                pass
            self.close_code, self.close_reason = code, reason
            await self.abort()
            raise WsClosed(code, reason)
        else:
            await self._fail(PROTOCOL_ERROR, "reserved control opcode %d" % fop)

    async def _fail(self, code, why):
        """Close with `code` and raise WsError(why): the stream cannot be trusted any more."""
        await self.close(code, why[:100])
        raise WsError(why)

    # -- close ---------------------------------------------------------------------------------

    async def close(self, code=NORMAL, reason=""):
        """Send a close frame with `code`, wait briefly for the server's, close the socket."""
        if self.open:
            c = bytearray(2)
            c[0] = code >> 8
            c[1] = code & 0xFF
            try:
                await self.send(CLOSE, bytes(c) + reason.encode()[:120])
                self.close_code, self.close_reason = code, reason
                await _wait(self._await_close(), self.close_timeout_ms)
            except Exception:
                pass
        await self.abort()

    async def _await_close(self):
        while True:  # frames after our close are read and dropped until the server's close
            await self._read(self._hv, 2, self.close_timeout_ms)
            ln = self._hdr[1] & 0x7F
            if ln >= 126:
                return
            await self._read(self.message, ln, self.close_timeout_ms)
            if self._hdr[0] & 0x0F == CLOSE:
                return

    def _lost(self):
        self.open = False
        if self.close_code is None:
            self.close_code = ABNORMAL

    async def abort(self):
        """Drop the connection without a close handshake."""
        self._lost()
        w = self.writer
        self.writer = self.reader = None
        if w is not None:
            try:
                w.close()
                await _wait(w.wait_closed(), 1000)
            except Exception:
                pass


def default_ssl_context(cadata=None):
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
