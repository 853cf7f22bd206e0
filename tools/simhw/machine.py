# Simulated `machine` for the MicroPython unix port: UART over loopback TCP, logged Pin, I2S to WAV.
#
# Never installed on a board. tools/vbody/launch.py puts this folder first on MICROPYPATH and
# passes the simulated hardware's settings in the environment:
#   ORGANBUS_SIM_UART<N>  "connect:127.0.0.1:PORT" or "listen:127.0.0.1:PORT" (loopback only);
#                         a UART with no setting is a pin with nothing attached (writes vanish).
#   ORGANBUS_SIM_PINLOG   file that gets one JSON line per output level change:
#                         {"t_ms": <Unix epoch ms>, "pin": 8, "value": 1} (WS2812 lines add "rgb"),
#                         and one line per audio take: {"t_ms", "i2s": 0, "wav": PATH, "rate"}.
#   ORGANBUS_SIM_WAV      where I2S audio goes: a path ending in ".wav" gets every take appended;
#                         anything else is a folder that gets one file per take (i2s0_001.wav ...).
#   ORGANBUS_SIM_ROLE     the board's role, in unique_id().
# Nothing here tells a board it is simulated: what differs for the board itself (HTTP on loopback,
# the console, its organ ports) reaches it as board settings (tools/vbody/launch.py).
import io
import os
import select
import socket
import struct
import sys
import time

from micropython import const

_GET_FILENO = const(10)
_POLL = const(3)
_POLL_RD = const(1)
_POLL_WR = const(4)
_EINVAL = const(22)
_EAGAIN = const(11)
_IPPROTO_TCP = const(6)  # the unix port's socket module has no names for these two
_TCP_NODELAY = const(1)

PWRON_RESET = const(1)
HARD_RESET = const(2)
WDT_RESET = const(3)
DEEPSLEEP_RESET = const(4)
SOFT_RESET = const(5)
RESET_EXIT_CODE = const(75)  # tools/sim.py restarts a board process that exits with this code


def _env(name):
    v = os.getenv("ORGANBUS_SIM_" + name)
    return v if v else None


_SIM = {
    "role": _env("ROLE"),
    "pinlog": _env("PINLOG"),
    "wav": _env("WAV"),
}

# Wall-clock base so that logs of different processes line up: t_ms = epoch ms.
_T0_MS = time.time_ns() // 1000000
_T0_TICKS = time.ticks_ms()


def epoch_ms(ticks=None):
    if ticks is None:
        ticks = time.ticks_ms()
    return _T0_MS + time.ticks_diff(ticks, _T0_TICKS)


def _parse_addr(spec, what):
    """'connect:127.0.0.1:7001' -> ('connect', '127.0.0.1', 7001); only loopback is accepted."""
    parts = spec.split(":")
    if len(parts) != 3 or parts[0] not in ("listen", "connect"):
        raise ValueError("%s: %r is not listen:HOST:PORT or connect:HOST:PORT" % (what, spec))
    host = parts[1]
    if not (host == "localhost" or host.startswith("127.")):
        raise ValueError("%s: %r is not a loopback address" % (what, host))
    return parts[0], "127.0.0.1" if host == "localhost" else host, int(parts[2])


# ---------------------------------------------------------------------------------------------
# Log of output changes: a preallocated ring, so Pin.value() allocates nothing (heap_lock safe);
# entries are written out as JSON lines whenever the heap allows it.

_REC = const(12)  # u32 ticks, i16 pin, u8 value, u8 r, u8 g, u8 b, u8 has_rgb, pad
_RING_N = const(256)


class _Log:
    def __init__(self, path):
        self.path = path
        self.f = None
        self.ring = bytearray(_REC * _RING_N)
        self.head = 0  # next record to write out
        self.n = 0  # records waiting
        self.lost = 0

    def add(self, pin, value, r, g, b, has_rgb):
        if self.path is None:
            return
        if self.n == _RING_N:
            self.lost += 1
        else:
            i = (self.head + self.n) % _RING_N
            struct.pack_into(
                "<IhBBBBB", self.ring, i * _REC, time.ticks_ms(), pin, value, r, g, b, has_rgb
            )
            self.n += 1
        self.flush()

    def flush(self):
        try:
            while self.n:
                t, pin, value, r, g, b, has_rgb = struct.unpack_from(
                    "<IhBBBBB", self.ring, self.head * _REC
                )
                if has_rgb:
                    line = '{"t_ms": %d, "pin": %d, "value": %d, "rgb": [%d, %d, %d]}\n' % (
                        epoch_ms(t),
                        pin,
                        value,
                        r,
                        g,
                        b,
                    )
                else:
                    line = '{"t_ms": %d, "pin": %d, "value": %d}\n' % (epoch_ms(t), pin, value)
                self.write(line)
                self.head = (self.head + 1) % _RING_N
                self.n -= 1
            if self.lost:
                self.write('{"t_ms": %d, "lost": %d}\n' % (epoch_ms(), self.lost))
                self.lost = 0
        except MemoryError:
            pass  # heap locked: the records wait in the ring for the next chance

    def write(self, line):
        if self.f is None:
            self.f = open(self.path, "a")
        self.f.write(line)  # unbuffered on the unix port (flush() would fsync: far too slow)


_log = _Log(_SIM["pinlog"])


def log_line(line):
    """Append one raw JSON line (a dict's repr is not JSON: pass a formatted string)."""
    if _log.path is not None:
        _log.flush()
        _log.write(line)


# ---------------------------------------------------------------------------------------------


class Pin:
    IN = const(1)
    OUT = const(3)
    OPEN_DRAIN = const(7)
    PULL_UP = const(2)
    PULL_DOWN = const(1)
    PULL_HOLD = const(4)
    IRQ_RISING = const(1)
    IRQ_FALLING = const(2)
    DRIVE_0 = const(0)
    DRIVE_1 = const(1)
    DRIVE_2 = const(2)
    DRIVE_3 = const(3)

    def __init__(self, id, mode=-1, pull=-1, *, value=None, drive=None, alt=None):
        self.id = id
        self._mode = self.IN
        self._pull = None
        self._level = -1  # unknown until driven
        self.init(mode, pull, value=value)

    def init(self, mode=-1, pull=-1, *, value=None, drive=None, alt=None):
        if mode != -1 and mode is not None:
            self._mode = mode
        if pull != -1:
            self._pull = pull
        if value is not None:
            self.value(value)

    def value(self, x=None):
        if x is None:
            if self._level < 0:
                return 1 if self._pull == self.PULL_UP else 0
            return self._level
        v = 1 if x else 0
        if v != self._level:
            self._level = v
            if self._mode != self.IN:
                _log.add(self.id, v, 0, 0, 0, 0)

    def __call__(self, x=None):
        return self.value(x)

    def on(self):
        self.value(1)

    def off(self):
        self.value(0)

    high = on
    low = off

    def toggle(self):
        self.value(0 if self._level > 0 else 1)

    def mode(self, m=None):
        if m is None:
            return self._mode
        self._mode = m

    def pull(self, p=None):
        if p is None:
            return self._pull
        self._pull = p

    def irq(self, handler=None, trigger=3, *, wake=None, hard=False):
        return None

    def __repr__(self):
        return "Pin(%d)" % self.id


def neopixel_changed(pin, r, g, b):
    """Called by the simulated neopixel module on write(): logs pixel 0's colour."""
    _log.add(pin.id if isinstance(pin, Pin) else pin, 1 if (r or g or b) else 0, r, g, b, 1)


# ---------------------------------------------------------------------------------------------


class UART(io.IOBase):
    """A UART whose wire is a loopback TCP connection (see ORGANBUS_SIM_UART<N>).

    Non-blocking like the boards' `timeout=0` UARTs: read()/readinto() return None when nothing
    is waiting. asyncio polls the socket's own file descriptor (ioctl MP_STREAM_GET_FILENO), so
    a reader sleeps in the kernel, never in a polling loop. A peer that closes the connection
    is the simulation tool going away: the board process exits, as a board whose power is cut.
    """

    INV_TX = const(1)
    INV_RX = const(2)
    IRQ_RXIDLE = const(1)
    IRQ_RX = const(2)
    IRQ_BREAK = const(4)

    def __init__(self, id, baudrate=115200, bits=8, parity=None, stop=1, **kw):
        self.id = id
        self.baudrate = baudrate
        self._conn = None
        self._lsock = None
        self._mode = None
        self._poll = select.poll()
        self._polled = None
        spec = _env("UART%d" % id)
        self._pend = bytearray(kw.get("rxbuf", 256) or 256)
        self._np = 0  # bytes taken from the socket by any(), not yet read
        self._off = 0
        if spec:
            self._mode, host, port = _parse_addr(spec, "ORGANBUS_SIM_UART%d" % id)
            self._addr = socket.getaddrinfo(host, port)[0][-1]
            if self._mode == "listen":
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(self._addr)
                except OSError as e:
                    s.close()
                    raise OSError("UART%d: cannot listen on %s:%d: %s" % (id, host, port, e))
                s.listen(1)
                s.setblocking(False)
                self._lsock = s
            else:
                self._connect()

    def init(self, baudrate=115200, bits=8, parity=None, stop=1, **kw):
        self.baudrate = baudrate

    def deinit(self):
        for s in (self._conn, self._lsock):
            if s is not None:
                s.close()
        self._conn = self._lsock = None
        self._mode = None

    def _connect(self):
        # The cable is plugged in by the tool before the board starts: a few tries are enough.
        err = None
        for _ in range(50):
            s = socket.socket()
            try:
                s.connect(self._addr)
                s.setblocking(False)
                self._use(s)
                return
            except OSError as e:
                err = e
                s.close()
                time.sleep_ms(100)
        raise OSError("UART(%d): cannot connect to the cable (%r)" % (self.id, err))

    def _use(self, s):
        # No Nagle: a frame written right after another (a HEARTBEAT, then a COMMAND_RESP) would
        # wait for the first one's TCP ACK, which the peer delays up to 40 ms. A UART sends at once.
        try:
            s.setsockopt(_IPPROTO_TCP, _TCP_NODELAY, 1)
        except OSError:
            pass
        if self._polled is not None:
            self._poll.unregister(self._polled)
        self._conn = s
        self._poll.register(s, select.POLLIN)
        self._polled = s
        self._poll.ipoll(0)  # allocates its result tuple once, so any() allocates nothing later

    def _sock(self):
        if self._conn is None and self._lsock is not None:
            try:
                c, _ = self._lsock.accept()
            except OSError:
                return None
            c.setblocking(False)
            self._use(c)
        return self._conn

    def _eof(self):
        sys.stderr.write("UART(%d): the other end closed: board powered off\n" % self.id)
        _log.flush()
        sys.exit(0)

    def any(self):
        if self._np > self._off:
            return self._np - self._off
        s = self._sock()
        if s is None:
            return 0
        for _ in self._poll.ipoll(0):
            n = s.readinto(self._pend)
            if n == 0:
                self._eof()
            if n:
                self._np = n
                self._off = 0
                return n
        return 0

    def readinto(self, buf, nbytes=-1):
        if nbytes < 0 or nbytes > len(buf):
            nbytes = len(buf)
        if self._np > self._off:
            k = self._np - self._off
            if k > nbytes:
                k = nbytes
            p = self._pend
            o = self._off
            for i in range(k):
                buf[i] = p[o + i]
            self._off = o + k
            if self._off >= self._np:
                self._np = self._off = 0
            return k
        s = self._sock()
        if s is None:
            return None
        n = s.readinto(buf, nbytes)
        if n == 0 and nbytes:
            self._eof()
        return n

    def read(self, nbytes=-1):
        if nbytes < 0:
            nbytes = self.any() or len(self._pend)
        buf = bytearray(nbytes)
        n = self.readinto(buf, nbytes)
        if not n:
            return None
        return bytes(buf) if n == nbytes else bytes(buf[:n])

    def readline(self):
        out = bytearray()
        while True:
            b = self.read(1)
            if not b:
                break
            out += b
            if b == b"\n":
                break
        return bytes(out) if out else None

    def write(self, buf):
        n = len(buf)
        s = self._sock()
        if s is None:
            return n  # nothing on the other end of the wire: the bytes vanish, as on a board
        off = 0
        while off < n:
            try:
                k = s.write(buf if off == 0 else memoryview(buf)[off:])
            except OSError:
                self._eof()
            if k is None:
                time.sleep_ms(1)  # kernel buffer full: a UART write blocks until there is room
            else:
                off += k
        return n

    def flush(self):
        pass

    def txdone(self):
        return True

    def sendbreak(self):
        pass

    def irq(self, handler=None, trigger=0, hard=False):
        return None

    def ioctl(self, req, arg):
        if req == _GET_FILENO:
            if self._np > self._off:
                return -_EINVAL  # bytes already taken off the socket: poll through ioctl
            s = self._sock()
            if s is not None:
                return s.fileno()
            if self._lsock is not None:
                return self._lsock.fileno()
            return -_EINVAL
        if req == _POLL:
            ret = arg & _POLL_WR
            if arg & _POLL_RD and self.any():
                ret |= _POLL_RD
            return ret
        return -_EINVAL

    def __repr__(self):
        return "UART(%d, baudrate=%d, sim=%s)" % (self.id, self.baudrate, self._mode)


# ---------------------------------------------------------------------------------------------


def _wav_header(buf, rate, nbytes):
    struct.pack_into(
        "<4sI4s4sIHHIIHH4sI",
        buf,
        0,
        b"RIFF",
        36 + nbytes,
        b"WAVE",
        b"fmt ",
        16,
        1,
        1,
        rate,
        rate * 2,
        2,
        16,
        b"data",
        nbytes,
    )


class I2S(io.IOBase):
    """I2S TX (16-bit mono) into WAV files, drained at the real sample rate.

    The DMA buffer of `ibuf` bytes empties at rate * 2 bytes/s of virtual playback time, so a
    writer is paced as on a board: write() blocks until everything is queued, except after
    asyncio has polled the object (as on the esp32 port), when it queues what fits and returns
    the count. A write after the buffer ran dry for TAKE_GAP_MS starts a new take (a new file
    in folder mode).
    """

    TX = const(5)
    RX = const(4)
    MONO = const(0)
    STEREO = const(1)
    TAKE_GAP_MS = const(150)

    def __init__(
        self,
        id,
        *,
        sck=None,
        ws=None,
        sd=None,
        mck=None,
        mode=5,
        bits=16,
        format=0,
        rate=11025,
        ibuf=8192,
    ):
        if mode != self.TX:
            raise ValueError("simulated I2S supports TX only")
        if bits != 16 or format != self.MONO:
            raise ValueError("simulated I2S supports 16-bit mono only")
        self.id = id
        self.rate = rate
        self.ibuf = ibuf
        self._end_us = time.ticks_us()  # when the queued audio finishes playing
        # the queue never holds more than ibuf: an end further ahead than this is a stale
        # end from before ticks_us wrapped around (unix port: every ~18 minutes)
        self._cap_us = (ibuf // 2) * 1000000 // rate + 1000
        self._async = False
        self._hdr = bytearray(44)
        self._f = None
        self._take = 0
        self._nbytes = 0
        self._path = None
        self.total_bytes = 0
        self._callback = None

    def init(self, **kw):
        pass

    def deinit(self):
        self._close()

    def _buffered(self, now):
        left = time.ticks_diff(self._end_us, now)
        if left <= 0 or left > self._cap_us:
            return 0
        return (left * self.rate // 1000000) * 2

    def _open_take(self):
        self._close()
        self._take += 1
        dest = _SIM["wav"]
        if dest is None:
            self._path = None
            return
        if dest.endswith(".wav"):
            self._path = dest
            if self._take == 1:
                self._f = open(dest, "wb")
                self._nbytes = 0
                _wav_header(self._hdr, self.rate, 0)
                self._f.write(self._hdr)
            else:
                self._f = open(dest, "r+b")
                self._f.seek(0, 2)
        else:
            try:
                os.mkdir(dest)
            except OSError:
                pass
            while True:  # a rebooted board keeps the takes of its earlier lives
                self._path = "%s/i2s%d_%03d.wav" % (dest, self.id, self._take)
                try:
                    os.stat(self._path)
                except OSError:
                    break
                self._take += 1
            self._f = open(self._path, "wb")
            self._nbytes = 0
            _wav_header(self._hdr, self.rate, 0)
            self._f.write(self._hdr)
        log_line(
            '{"t_ms": %d, "i2s": %d, "wav": "%s", "rate": %d}\n'
            % (epoch_ms(), self.id, self._path, self.rate)
        )

    def _close(self):
        if self._f is not None:
            self._f.close()
            self._f = None

    def _queue(self, buf, off, n, now):
        if self._f is not None:
            self._f.write(buf if off == 0 and n == len(buf) else memoryview(buf)[off : off + n])
            self._nbytes += n
            _wav_header(self._hdr, self.rate, self._nbytes)
            self._f.seek(0)
            self._f.write(self._hdr)
            self._f.seek(0, 2)
        start = self._end_us if self._buffered(now) > 0 else now
        self._end_us = time.ticks_add(start, (n // 2) * 1000000 // self.rate)
        self.total_bytes += n

    def write(self, buf):
        n = len(buf) & ~1
        if n == 0:
            return 0
        now = time.ticks_us()
        idle = time.ticks_diff(now, self._end_us)
        if idle > self.TAKE_GAP_MS * 1000 or idle < -self._cap_us or self._take == 0:
            self._open_take()
        room = (self.ibuf - self._buffered(now)) & ~1
        if self._async:  # asyncio mode: queue what fits, say how much
            if room < 2:
                return None
            k = n if n <= room else room
            self._queue(buf, 0, k, now)
            return k
        off = 0  # blocking mode: returns when everything is queued
        while off < n:
            if room < 2:
                time.sleep_ms(max(1, (n - off) * 1000 // (self.rate * 2) // 4))
            else:
                k = n - off if n - off <= room else room
                self._queue(buf, off, k, now)
                off += k
            now = time.ticks_us()
            room = (self.ibuf - self._buffered(now)) & ~1
        return n

    def readinto(self, buf):
        raise OSError("simulated I2S is TX only")

    def irq(self, handler):
        self._callback = handler

    def ioctl(self, req, arg):
        if req == _POLL:
            self._async = True
            ret = 0
            if arg & _POLL_WR and self.ibuf - self._buffered(time.ticks_us()) >= 2:
                ret |= _POLL_WR
            return ret
        return -_EINVAL  # no file descriptor: asyncio polls the buffer level through ioctl

    @staticmethod
    def shift(buf, bits, shift):
        if bits != 16:
            raise ValueError("shift: 16-bit only")
        for i in range(0, len(buf) - 1, 2):
            v = struct.unpack_from("<h", buf, i)[0]
            v = v << shift if shift >= 0 else v >> -shift
            v = -32768 if v < -32768 else 32767 if v > 32767 else v
            struct.pack_into("<h", buf, i, v)


# ---------------------------------------------------------------------------------------------


class WDT:
    def __init__(self, id=0, timeout=5000):
        self.timeout = timeout

    def feed(self):
        pass


class Timer:
    ONE_SHOT = const(0)
    PERIODIC = const(1)

    def __init__(self, id=-1, **kw):
        pass

    def init(self, **kw):
        raise OSError("simulated machine.Timer is not implemented: use asyncio")

    def deinit(self):
        pass


def reset():
    """A board reset: the process exits with RESET_EXIT_CODE and tools/sim.py starts it again."""
    _log.flush()
    print('{"event": "reset"}')
    sys.exit(RESET_EXIT_CODE)


def soft_reset():
    reset()


def reset_cause():
    return PWRON_RESET


def freq(hz=None):
    return 160000000


def unique_id():
    return b"SIM-" + (_SIM["role"] or "board").encode()


def idle():
    time.sleep_ms(1)


def lightsleep(ms=None):
    time.sleep_ms(ms or 0)


def deepsleep(ms=None):
    reset()


def disable_irq():
    return 0


def enable_irq(state=0):
    pass
