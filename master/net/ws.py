# WebSocket client (RFC 6455, client side) on asyncio streams, one module for MicroPython and CPython.
#
# Receive buffers are allocated once per WebSocket: a 14-byte frame header, a 125-byte control
# payload and one message buffer of `max_message` bytes that fragments are read into in place.
# A message longer than that is read through the message buffer and dropped (counted in
# `oversize`), never held whole. Sends are masked chunk by chunk through one `tx_chunk` buffer,
# so a long message needs no second copy; the framing itself is master/net/wsframe.py. The upgrade
# goes through master/net/http.py (the request head checked, the answer's head read through the
# message buffer, bounded lines).
# Every read has a deadline: the first byte of a frame waits at most `idle_ms` (the caller's
# watchdog; `within_ms` bounds a whole recv, control frames included), each part of a frame
# `read_timeout_ms`; a frame begun and not finished in time is a stall and ends the connection.
import sys

import asyncio
import binascii

from micropython import const

from organbus.ticks import ticks_diff, ticks_ms
from organbus.utf8 import valid_utf8
from master.net import http
from master.net.wsframe import ABNORMAL, BAD_DATA, BINARY, CLOSE, CONT, NO_STATUS, NORMAL, PING
from master.net.wsframe import PONG, PROTOCOL_ERROR, TEXT, TOO_BIG
from master.net.wsframe import accept_for, close_code_ok, mask_into, put_head, random_into, seed

_MP = sys.implementation.name == "micropython"

_UPGRADE_HEADERS = ("upgrade", "connection", "sec-websocket-accept", "sec-websocket-extensions")
_SKIP_LIMIT = const(1 << 20)  # an oversize frame longer than this is a protocol error, not skipped


class WsError(http.NetError):
    """A WebSocket failure with a specific reason (handshake, protocol, size)."""


class WsTimeout(WsError):
    """A connect or a read did not complete within its deadline."""


class WsStalled(WsTimeout):
    """A frame began and did not complete within its deadline: the connection is dropped."""


class WsClosed(WsError):
    """The connection is closed: `code` and `reason` of the close (ABNORMAL when it was lost)."""

    def __init__(self, code, reason=""):
        super().__init__("closed %d %s" % (code, reason))
        self.code = code
        self.reason = reason


def parse_url(url):
    """(secure, host, port, target) of a ws:// or wss:// URL (master/net/url.py's rules: control
    characters refused, the target percent-encoded); WsError naming what is wrong."""
    try:
        scheme, host, port, target = http.parse_url(url, ("ws", "wss"))
    except http.NetError as e:
        raise WsError("websocket " + str(e))
    return scheme == "wss", host, port, target


_wait = http.wait_ms


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
        seed()

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
        """Open the TCP (TLS for wss://) connection and upgrade it; WsError/WsTimeout on failure.
        A header that could break the request's head is refused before anything is sent."""
        secure, host, port, target = parse_url(url)
        random_into(self._key, 4)
        raw = bytearray(16)
        random_into(raw, 16)
        key = binascii.b2a_base64(raw).strip().decode()
        hdrs = [
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", key),
            ("Sec-WebSocket-Version", "13"),
        ]
        if headers:
            hdrs += headers.items() if isinstance(headers, dict) else headers
        parts = ("wss" if secure else "ws", host, port, target)
        try:
            head = http.head_lines("GET", parts, hdrs)
        except http.NetError as e:
            raise WsError("upgrade request to %s:%d: %s" % (host, port, e))
        t = timeout_ms or self.connect_timeout_ms
        try:
            await _wait(self._connect(secure, host, port, head, key, ssl_context), t)
        except (asyncio.TimeoutError, WsTimeout):
            await self.abort()
            raise WsTimeout("no websocket upgrade from %s:%d within %d ms" % (host, port, t))
        except WsError:
            await self.abort()
            raise
        except http.NetError as e:
            await self.abort()
            raise WsError("websocket upgrade from %s:%d: %s" % (host, port, e))
        except Exception as e:  # OSError and the like: say it as one reason
            await self.abort()
            raise WsError("cannot connect to %s:%d: %r" % (host, port, e))

    async def _connect(self, secure, host, port, head, key, ssl_context):
        self.reader, self.writer = await http.connect(host, port, secure, ssl_context)
        self._readinto = getattr(self.reader, "readinto", None)
        http.write_lines(self.writer, head)
        await self.writer.drain()
        # the answer's head read through the message buffer: nothing is received yet
        ans = http.Answer(self.reader, self._buf)
        await ans.head(_UPGRADE_HEADERS)
        hdrs = ans.headers
        self.response_headers = hdrs
        if ans.status != 101:
            raise WsError("upgrade refused: HTTP %d %s" % (ans.status, ans.reason[:60]))
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
        """A text message: a str, bytes, or a list of bytes-like pieces (one message)."""
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
        # `data`: bytes-like, or a list of bytes-like pieces sent as one message (no join)
        parts = data if isinstance(data, list) else (data,)
        n = 0
        for p in parts:
            n += len(p)
        tx = self._tx
        h = put_head(tx, op, n)
        key = self._key
        random_into(key, 4)
        tx[h : h + 4] = key
        fill = h + 4  # bytes waiting in tx
        off = 0  # bytes of the message masked so far: the key's phase
        room = len(tx)
        for p in parts:
            src = p if isinstance(p, memoryview) else memoryview(p)
            i = 0
            end = len(src)
            while i < end:
                k = min(end - i, room - fill)
                view = self._txv[fill : fill + k]
                view[:] = src[i : i + k]
                mask_into(view, k, key, off)
                off += k
                i += k
                fill += k
                if fill == room:
                    await self._write(fill)
                    fill = 0
        if fill:
            await self._write(fill)

    async def _write(self, k):
        chunk = self._txv[:k]
        self.writer.write(chunk if _MP else bytes(chunk))
        await self.writer.drain()
        self.bytes_out += k

    # -- receive ------------------------------------------------------------------------------

    async def _fill(self, mv, n):
        # exactly n bytes into mv[:n]; `_got` counts them as they come (for a stall's reason)
        self._got = 0
        ri = self._readinto
        while self._got < n:
            if ri is not None:
                k = await ri(mv[self._got : n])
                if k is None:  # TLS: readable, but no whole record yet
                    continue
            else:
                data = await self.reader.read(n - self._got)
                k = len(data)
                mv[self._got : self._got + k] = data
            if not k:
                self._lost()
                raise WsClosed(ABNORMAL, "connection lost")
            self._got += k
        self.bytes_in += n

    async def _read(self, mv, n, what, have=0):
        """n bytes of a frame already begun into mv[:n] within read_timeout_ms, else the stream
        is out of step: the connection is dropped and WsStalled says where it stopped."""
        try:
            await _wait(self._fill(mv, n), self.read_timeout_ms)
        except asyncio.TimeoutError:
            self._lost()
            raise WsStalled(
                "the server stalled inside a frame: %s, %d of %d bytes within %d ms"
                % (what, have + self._got, have + n, self.read_timeout_ms)
            )

    async def _frame_start(self, ms):
        # the first byte of a frame within ms; WsTimeout (nothing of a frame read) else
        try:
            await _wait(self._fill(self._hv, 1), ms)
        except asyncio.TimeoutError:
            raise WsTimeout("no frame within %d ms" % ms)

    async def recv(self, idle_ms=None, within_ms=None):
        """The next whole text or binary message: (opcode, n), the bytes in `message[:n]`
        (valid until the next recv). Pings are answered, pongs counted, oversize messages
        dropped and counted. A close from the server raises WsClosed after the close reply.
        No frame start within `idle_ms`, or no whole message within `within_ms` (pings and
        pongs do not extend it), raises WsTimeout: between messages the connection stays
        usable. A frame begun and not completed within read_timeout_ms raises WsStalled."""
        if not self.open:
            raise WsClosed(self.close_code or ABNORMAL, self.close_reason or "not open")
        op = -1  # opcode of the message being assembled, -1 between messages
        n = 0
        skip = False
        hv = self._hv
        t0 = ticks_ms()
        while True:
            wait = idle_ms
            whole = False  # the wait is what is left of within_ms
            if within_ms is not None:
                left = within_ms - ticks_diff(ticks_ms(), t0)
                if wait is None or left < wait:
                    wait, whole = max(left, 0), True
            if wait is None:
                await self._read(hv, 2, "its header")
            else:
                try:
                    if whole and not wait:
                        raise WsTimeout("no time left")
                    await self._frame_start(wait)
                except WsTimeout:
                    if op >= 0:
                        self._lost()  # a message cut between its frames: out of step
                    if whole:
                        raise WsTimeout("no whole message within %d ms" % within_ms)
                    raise
                await self._read(hv[1:], 1, "its header", 1)
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
                await self._read(hv[2:], 2, "its length", 2)
                ln = (self._hdr[2] << 8) | self._hdr[3]
            elif ln == 127:
                await self._read(hv[2:], 8, "its length", 2)
                ln = 0
                for i in range(2, 10):
                    ln = (ln << 8) | self._hdr[i]
                    if ln > _SKIP_LIMIT:
                        await self._fail(TOO_BIG, "frame longer than %d bytes" % _SKIP_LIMIT)
            if fop >= CLOSE:
                if not fin or ln > 125:
                    await self._fail(PROTOCOL_ERROR, "fragmented or long control frame")
                await self._read(self._cv, ln, "a control frame's payload")
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
                    await self._read(self.message, k, "an oversize message's payload")
                    left -= k
            else:
                await self._read(self.message[n:], ln, "a message's payload")
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

    async def _control(self, fop, ln):
        if fop == PING:
            self.pings += 1
            await self.send(PONG, self._cv[:ln])
        elif fop == PONG:
            self.pongs += 1
        elif fop == CLOSE:
            code, reason = NO_STATUS, ""
            if ln == 1:
                await self._refuse_close(PROTOCOL_ERROR, "a close frame of 1 byte")
            if ln >= 2:
                code = (self._ctrl[0] << 8) | self._ctrl[1]
                if not close_code_ok(code):
                    await self._refuse_close(PROTOCOL_ERROR, "close code %d" % code)
                if not valid_utf8(self._ctrl, 2, ln):
                    await self._refuse_close(BAD_DATA, "a close reason that is not UTF-8")
                reason = bytes(self._ctrl[2:ln]).decode()
            try:  # the close echoed: its code, or nothing for a close without one
                await self.send(CLOSE, self._cv[:2] if ln >= 2 else b"")
            except WsError:
                pass
            self.close_code, self.close_reason = code, reason
            await self.abort()
            raise WsClosed(code, reason)
        else:
            await self._fail(PROTOCOL_ERROR, "reserved control opcode %d" % fop)

    async def _refuse_close(self, code, what):
        # An invalid close from the server: answered with our own close (1002 or 1007, RFC 6455
        # section 7.4.1), not echoed; the server has closed, so nothing more is read.
        try:
            c = self._tx_code(code)
            await self.send(CLOSE, c)
        except WsError:
            pass
        self.close_code, self.close_reason = code, "invalid close"
        await self.abort()
        raise WsClosed(code, "the server's close is invalid (%s): answered %d" % (what, code))

    async def _fail(self, code, why):
        """Close with `code` and raise WsError(why): the stream cannot be trusted any more."""
        await self.close(code, why[:100])
        raise WsError(why)

    # -- close ---------------------------------------------------------------------------------

    async def close(self, code=NORMAL, reason=""):
        """Send a close frame with `code`, wait briefly for the server's, close the socket."""
        if self.open:
            try:
                await self.send(CLOSE, self._tx_code(code) + reason.encode()[:120])
                self.close_code, self.close_reason = code, reason
                await _wait(self._await_close(), self.close_timeout_ms)
            except Exception:
                pass
        await self.abort()

    def _tx_code(self, code):
        return bytes(((code >> 8) & 0xFF, code & 0xFF))

    async def _await_close(self):
        while True:  # frames after our close are read and dropped until the server's close
            await self._fill(self._hv, 2)
            ln = self._hdr[1] & 0x7F
            if ln >= 126:
                return
            await self._fill(self.message, ln)
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
    """master/net/http.py's TLS client context (the certificate checked against `cadata`)."""
    return http.ssl_context(cadata)
