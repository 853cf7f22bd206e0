# Protocol V3 frames: an encoder into caller buffers and a resyncing stream decoder (PROTOCOL.md section 2).
import sys

import micropython
from micropython import const

from organbus import rxscan
from organbus.crc16 import crc16
from organbus.rxscan import FLUSH as _FLUSH
from organbus.rxscan import IDLE as _IDLE
from organbus.rxscan import RESUME as _RESUME
from organbus.rxscan import TAKE as _TAKE
from organbus.rxscan import run as _run
from organbus.rxscan import word as _word

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

else:

    def _copy(dst, doff, src, soff, n):
        dst[doff : doff + n] = src[soff : soff + n]
        return n


def _counter(name):
    k = rxscan.FRAMES + COUNTER_NAMES.index(name)  # the counters' words, in that order
    return property(lambda self: _word(self._mem, k))


class Decoder:
    """Reassembles frames from a byte stream; hands each legal frame to on_frame(ftype, payload, n).

    The candidate and every piece of state live in one preallocated bytearray worked by
    rxscan.run (machine code on MicroPython, the same lines as Python on CPython): one call per read.
    A wrong VER is refused as soon as it is there, even when the header is still incomplete.
    `payload` is one fixed view of the candidate from byte 5: only its first n bytes belong
    to the frame, and only during the call.

    Times are ticks (ms unless tick_ms says how many ticks make a millisecond). A candidate's
    age counts from the read that brought its SOF, wherever a rescan finds it: the decoder
    keeps the tick of each read that added bytes to a carried candidate (arrival marks). A
    read adds a mark only for a candidate carried over from an earlier read, and only at a
    later tick, so the live marks hold distinct ticks younger than the age limit:
    AGE_MS * tick_ms + 2 of them always suffice (capped at the buffer's size; should they run
    out, new bytes join the last mark, which makes them older, never younger).
    """

    frames = _counter("frames")
    bytes = _counter("bytes")
    junk = _counter("junk")
    crc_errors = _counter("crc_errors")
    bad_version = _counter("bad_version")
    oversize = _counter("oversize")
    bad_eof = _counter("bad_eof")
    abandoned = _counter("abandoned")
    unknown = _counter("unknown")

    def __init__(self, on_frame, handled=None, tick_ms=1):
        self.on_frame = on_frame
        cap = AGE_MS * tick_ms + 2
        if cap > _BUF_SIZE:
            cap = _BUF_SIZE
        self._mem = rxscan.memory(
            cap, TYPE_NAMES if handled is None else handled, AGE_MS * tick_ms, IDLE_MS * tick_ms
        )
        self.payload = memoryview(self._mem)[5:_BUF_SIZE]

    def reset_counters(self):
        rxscan.zero(self._mem, rxscan.FRAMES, rxscan.UNKNOWN + 1)

    def counters(self):
        """The counters as a dict (key order is not kept on MicroPython: use COUNTER_NAMES)."""
        return {k: getattr(self, k) for k in COUNTER_NAMES}

    def errors(self):
        """junk + crc_errors + bad_version + oversize + bad_eof + abandoned, in one call."""
        m = self._mem
        e = 0
        k = rxscan.JUNK
        while k <= rxscan.ABANDONED:  # their words are in a row (COUNTER_NAMES order)
            e += _word(m, k)
            k += 1
        return e

    def pending(self):
        """Bytes held in an incomplete candidate."""
        return _word(self._mem, rxscan.FILL)

    # `feed` and `idle` are native code on MicroPython: a call of the bytecode function around
    # the scan cost ~4,000 RV32 instructions, ~1,600 so (once per read: half the receive path's
    # instructions on the bench's mix, docs/rv32.md). On CPython the decorator is the host
    # shim's (tools/shim/micropython.py: the function as it is), as in master/bus/port.py.
    @micropython.native
    def feed(self, data, now=0, n=-1):
        """Take data[:n] arriving at tick now (see DESIGN.md); an empty read is idle(now). An
        exception raised by on_frame does not disturb the decoder: the chunk is still taken
        whole, later frames still come out, and the first such exception is raised again when
        feed() returns. Returns the bytes still pending (as pending() would)."""
        if n < 0:
            n = len(data)
        try:
            return _run(self.on_frame, self.payload, self._mem, data, n, now, _TAKE)
        except Exception as e:
            self._resume(e, data, n)

    @micropython.native
    def idle(self, now):
        """The reader saw no byte (call it on every empty poll): apply the time rules. Returns
        the bytes still pending (as pending() would)."""
        try:
            return _run(self.on_frame, self.payload, self._mem, b"", 0, now, _IDLE)
        except Exception as e:
            self._resume(e, b"", 0)

    def flush(self):
        """End of input: whatever is incomplete is abandoned (frames behind it still come out)."""
        try:
            _run(self.on_frame, self.payload, self._mem, b"", 0, 0, _FLUSH)
        except Exception as e:
            self._resume(e, b"", 0)

    def _resume(self, e, data, n):
        # on_frame raised: finish the run (each later exception is dropped), then raise e.
        while True:
            try:
                _run(self.on_frame, self.payload, self._mem, data, n, 0, _RESUME)
                break
            except Exception:
                pass
        raise e
