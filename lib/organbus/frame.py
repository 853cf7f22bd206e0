# Protocol V3 frames: an encoder into caller buffers and a resyncing stream decoder (PROTOCOL.md section 2).
import sys
from array import array

import micropython
from micropython import const

from organbus.crc16 import TABLE as _CRC_TABLE
from organbus.crc16 import crc16, crc16_raw

from organbus.ticks import ticks_diff

SOF = const(0xAA)
VER = const(0x03)
EOF = const(0x55)
MAX_LEN = const(512)
OVERHEAD = const(8)
IDLE_MS = const(50)
AGE_MS = const(90)

DESCRIPTOR = const(0x01)
ACK = const(0x02)
HEARTBEAT = const(0x03)
DISCOVER = const(0x04)
COMMAND = const(0x10)
COMMAND_RESP = const(0x11)
EVENT = const(0x20)
DATA = const(0x21)

TYPE_NAMES = {
    DESCRIPTOR: "DESCRIPTOR",
    ACK: "ACK",
    HEARTBEAT: "HEARTBEAT",
    DISCOVER: "DISCOVER",
    COMMAND: "COMMAND",
    COMMAND_RESP: "COMMAND_RESP",
    EVENT: "EVENT",
    DATA: "DATA",
}

COUNTER_NAMES = (
    "frames",
    "bytes",
    "junk",
    "crc_errors",
    "bad_version",
    "oversize",
    "bad_eof",
    "abandoned",
    "unknown",
)

_BUF_SIZE = const(520)  # MAX_LEN + OVERHEAD


def encode_into(buf, ftype, payload=b"", n=-1, off=0):
    """Write one frame at buf[off:]; returns its length. Allocates nothing."""
    if n < 0:
        n = len(payload)
    if n > MAX_LEN:
        raise ValueError("payload of %d bytes exceeds LEN 512" % n)
    if n > len(payload):
        raise ValueError("n=%d but the payload has %d bytes" % (n, len(payload)))
    if off < 0 or off + n + OVERHEAD > len(buf):
        raise ValueError("a %d-byte frame does not fit the buffer at %d" % (n + OVERHEAD, off))
    buf[off] = SOF
    buf[off + 1] = VER
    buf[off + 2] = ftype
    buf[off + 3] = n >> 8
    buf[off + 4] = n & 0xFF
    p = off + 5
    if n == len(payload):
        buf[p : p + n] = payload
    else:
        _copy(buf, p, payload, 0, n)
    crc = crc16(buf, 0xFFFF, off + 1, p + n)
    buf[p + n] = crc >> 8
    buf[p + n + 1] = crc & 0xFF
    buf[p + n + 2] = EOF
    return n + OVERHEAD


def encode(ftype, payload=b""):
    """One frame as bytes (convenience; the hot path uses encode_into)."""
    buf = bytearray(len(payload) + OVERHEAD)
    encode_into(buf, ftype, payload)
    return bytes(buf)


ACK_FRAME = encode(ACK)
HEARTBEAT_FRAME = encode(HEARTBEAT)
DISCOVER_FRAME = encode(DISCOVER)
RESP_OK_FRAME = encode(COMMAND_RESP, b"\x00")
RESP_FAIL_FRAME = encode(COMMAND_RESP, b"\x01")


if sys.implementation.name == "micropython":

    @micropython.viper
    def _copy(dst: ptr8, doff: int, src: ptr8, soff: int, n: int) -> int:
        i = 0
        while i < n:
            dst[doff + i] = src[soff + i]
            i += 1
        return n

    @micropython.viper
    def _find_sof(src: ptr8, i: int, end: int) -> int:
        while i < end:
            if src[i] == 0xAA:
                return i
            i += 1
        return end

else:

    def _copy(dst, doff, src, soff, n):
        dst[doff : doff + n] = src[soff : soff + n]
        return n

    def _find_sof(src, i, end):
        j = bytes(src[i:end]).find(b"\xaa")
        return end if j < 0 else i + j


class Decoder:
    """Reassembles frames from a byte stream; hands each legal frame to on_frame(ftype, payload, n).

    Buffer layout: _buf[0] is the SOF of the current candidate, _buf[0:_fill] the bytes
    taken so far; _need is how many the candidate needs (5 until LEN is known). A wrong
    VER is refused as soon as it is there, even when the header is still incomplete.
    `payload` is one fixed view of _buf[5:]: only its first n bytes belong to the frame,
    and only during the call.

    Times are ticks (ms unless tick_ms says how many ticks make a millisecond). _last is
    when the last byte came. Arrival marks: _mt[i] is the tick of the read that brought
    _buf[_mpos[i]:_mpos[i+1]] (the last mark runs to _fill; _mpos[0] == 0, _nm marks). A
    candidate's age counts from the read that brought its SOF, wherever a rescan finds it:
    _since == _mt[0]. A read adds a mark only for a candidate carried over from an earlier
    read, and only at a later tick, so the live marks hold distinct ticks younger than the age
    limit: AGE_MS * tick_ms + 2 of them always suffice (capped at the buffer's size; should
    they run out, new bytes join the last mark, which makes them older, never younger).
    """

    def __init__(self, on_frame, handled=None, tick_ms=1):
        self.on_frame = on_frame
        self._quiet = IDLE_MS * tick_ms
        self._age = AGE_MS * tick_ms
        self._buf = bytearray(_BUF_SIZE)
        self.payload = memoryview(self._buf)[5:]
        self._handled = bytearray(256)
        for t in TYPE_NAMES if handled is None else handled:
            self._handled[t] = 1
        self._fill = 0
        self._need = 5
        self._last = 0
        self._since = 0
        cap = AGE_MS * tick_ms + 2
        if cap > _BUF_SIZE:
            cap = _BUF_SIZE
        self._mpos = array("H", bytes(2 * cap))
        self._mt = [0] * cap
        self._nm = 0
        self._error = None
        self.reset_counters()

    def reset_counters(self):
        self.frames = self.bytes = self.junk = self.crc_errors = self.bad_version = 0
        self.oversize = self.bad_eof = self.abandoned = self.unknown = 0

    def counters(self):
        """The counters as a dict (key order is not kept on MicroPython: use COUNTER_NAMES)."""
        return {k: getattr(self, k) for k in COUNTER_NAMES}

    def pending(self):
        """Bytes held in an incomplete candidate."""
        return self._fill

    def feed(self, data, now=0, n=-1):
        """Take data[:n] arriving at tick now (see DESIGN.md). An exception raised by on_frame
        does not disturb the decoder: the chunk is still taken whole, later frames still come
        out, and the first such exception is raised again when feed() returns."""
        self._take(data, now, n)
        if self._error is not None:
            self._raise()

    def _raise(self):
        e = self._error
        self._error = None
        raise e

    def _take(self, data, now, n):
        if n < 0:
            n = len(data)
        if n == 0:
            if self._fill:
                self._stale(now)
            return
        # Bytes that come in are no evidence of a quiet line (they may have waited in the UART
        # while the reader was held up): the quiet rule is idle()'s, an empty read's. The age
        # rule is applied after the read is taken, so a frame whose rest waited is completed.
        self._last = now
        self.bytes += n
        buf = self._buf
        if self._fill:
            self._mark(now)
        i = 0
        while i < n:
            fill = self._fill
            if fill == 0:
                j = _find_sof(data, i, n)
                self.junk += j - i
                if j >= n:
                    return
                buf[0] = SOF
                self._fill = 1
                self._need = 5
                self._since = now
                self._mt[0] = now
                self._nm = 1
                i = j + 1
                continue
            k = self._need - fill
            if k > n - i:
                k = n - i
            _copy(buf, fill, data, i, k)
            self._fill = fill + k
            i += k
            if self._fill >= self._need:
                self._process()
        if 1 < self._fill < 5:
            self._process()  # the read ended inside a header: refuse a wrong VER now
        while self._fill and ticks_diff(now, self._since) >= self._age:
            self._abandon()

    def _mark(self, now):
        # The bytes this read appends to a carried candidate arrived at `now`.
        m = self._nm
        if m < len(self._mt) and ticks_diff(now, self._mt[m - 1]) > 0:
            self._mpos[m] = self._fill
            self._mt[m] = now
            self._nm = m + 1

    def idle(self, now):
        """The reader saw no byte (call it on every empty poll): apply the time rules."""
        if self._fill:
            self._stale(now)
            if self._error is not None:
                self._raise()

    def _stale(self, now):
        # Quiet line: no byte for 50 ms. Every byte held came before the gap, so a candidate
        # found by the rescan is as stale as the one abandoned: repeat until nothing is pending
        # (frames hidden behind come out on the way).
        # Old candidate: incomplete 90 ms after the read that brought its SOF while bytes kept
        # trickling in. At 115200 baud a whole 520-byte frame takes 45 ms, so it is a corrupt
        # header swallowing later frames: abandon it, and every candidate the rescan finds that
        # is as old (a chain of corrupt headers read together goes at once). A frame is held
        # back only by candidates whose SOF came before its own last byte, so each legal frame
        # is out within 90 ms (plus one poll) of its last byte, however long the chain.
        if ticks_diff(now, self._last) >= self._quiet:
            self._flush()
        else:
            while self._fill and ticks_diff(now, self._since) >= self._age:
                self._abandon()

    def flush(self):
        """End of input: whatever is incomplete is abandoned (frames behind it still come out)."""
        self._flush()
        if self._error is not None:
            self._raise()

    def _flush(self):
        while self._fill:
            self._abandon()

    def _abandon(self):
        self.abandoned += 1
        self._reject()

    def _reject(self):
        # Resume at the byte after the rejected SOF, never after the claimed length.
        self.junk += 1
        self._shift(1)
        self._process()

    def _shift(self, k):
        # Drop _buf[0:k]; the next candidate starts at the next SOF in what remains.
        fill = self._fill
        buf = self._buf
        j = _find_sof(buf, k, fill)
        self.junk += j - k
        if j >= fill:
            self._fill = 0
        else:
            _copy(buf, 0, buf, j, fill - j)
            self._fill = fill - j
            # The marks of bytes before j go; the new candidate's age is its SOF's read.
            mpos = self._mpos
            mt = self._mt
            nm = self._nm
            i = 1
            while i < nm and mpos[i] <= j:
                i += 1
            i -= 1
            self._since = mt[i]
            mt[0] = mt[i]
            mpos[0] = 0
            d = 1
            i += 1
            while i < nm:
                mpos[d] = mpos[i] - j
                mt[d] = mt[i]
                d += 1
                i += 1
            self._nm = d
        self._need = 5

    def _process(self):
        buf = self._buf
        while True:
            fill = self._fill
            if fill < 2:
                self._need = 5
                return
            if buf[1] != VER:
                self.bad_version += 1
            elif fill < 5:
                self._need = 5
                return
            else:
                length = (buf[3] << 8) | buf[4]
                if length > MAX_LEN:
                    self.oversize += 1
                else:
                    need = length + OVERHEAD
                    self._need = need
                    if fill < need:
                        return
                    if buf[need - 1] != EOF:
                        self.bad_eof += 1
                    elif crc16_raw(0xFFFF, buf, _CRC_TABLE, 1, need - 3) != (
                        (buf[need - 3] << 8) | buf[need - 2]
                    ):
                        self.crc_errors += 1
                    else:
                        self.frames += 1
                        ftype = buf[2]
                        if not self._handled[ftype]:
                            self.unknown += 1
                        try:
                            self.on_frame(ftype, self.payload, length)
                        except Exception as e:  # raised again when feed/idle/flush returns
                            if self._error is None:
                                self._error = e
                        if fill == need:
                            self._fill = 0
                            self._need = 5
                            return
                        self._shift(need)
                        continue
            # A defect: drop this SOF and rescan the rest (the _reject step, inline).
            self.junk += 1
            self._shift(1)
