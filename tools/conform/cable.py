# The kit's end of the cable: loopback TCP (listen/connect) or a serial port, paced at 115200 8N1.
#
# A reader thread feeds everything it receives to the core's Decoder and keeps every legal frame
# with its arrival time (time.monotonic()), so rules look at what came and when; writes are paced
# so that the kit never sends faster than the wire would carry (a frame is not started before
# the previous one has left at BYTE_S per byte), whatever sits at the other end.
import socket
import threading
import time

from organbus import frame

import cablespec

_PERIOD = 1 << 30  # the Decoder's ticks wrap here (as on the C6)


def parse_spec(spec):
    """'listen:127.0.0.1:7001' -> ('listen', host, port); anything else is a serial device path.

    Only loopback addresses are taken for TCP; a bad SPEC raises ValueError with the reason."""
    return cablespec.parse_spec(spec, "--uart", serial=True)


class Frame:
    __slots__ = ("t", "ftype", "payload")

    def __init__(self, t, ftype, payload):
        self.t = t
        self.ftype = ftype
        self.payload = payload

    @property
    def name(self):
        return frame.TYPE_NAMES.get(self.ftype, "0x%02X" % self.ftype)

    def __repr__(self):
        return "%s(%s)" % (self.name, self.payload.hex())


class Cable:
    """One link to the implementation under test. `frames` is every legal frame received."""

    def __init__(self, spec, baud=115200, pace=True):
        self.mode, self.host, self.port = parse_spec(spec)
        self.spec = spec
        self.baud = baud
        self.pacer = cablespec.Pacer(10.0 / baud if pace else 0.0)  # the wire's pace
        self.frames = []
        self.cond = threading.Condition()
        self.t_up = None  # when the link came up (connection made, port opened)
        self.written = []  # (t, bytes) of every write, for the report's evidence
        self.decoder = frame.Decoder(self._on_frame)
        self._sock = None
        self._serial = None
        self._lsock = None
        self._closed = False
        self._thread = None
        if self.mode == "listen":
            ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            ls.bind((self.host, self.port))
            ls.listen(1)
            self._lsock = ls
            self.port = ls.getsockname()[1]
            self.spec = "listen:%s:%d" % (self.host, self.port)

    # -- opening -------------------------------------------------------------------------------

    def open(self, timeout=30.0):
        """Wait until the other side is there (accepted, dialled or the port opened)."""
        deadline = time.monotonic() + timeout
        if self.mode == "listen":
            self._lsock.settimeout(timeout)
            try:
                s, _ = self._lsock.accept()
            except socket.timeout:
                raise TimeoutError("nothing connected to %s in %.0f s" % (self.spec, timeout))
            self._use_sock(s)
        elif self.mode == "connect":
            while True:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    s.connect((self.host, self.port))
                    break
                except OSError:
                    s.close()
                    if time.monotonic() > deadline:
                        raise TimeoutError(
                            "could not connect to %s in %.0f s" % (self.spec, timeout)
                        )
                    time.sleep(0.1)
            self._use_sock(s)
        else:
            import serial  # pyserial, only for real ports

            self._serial = serial.Serial(self.host, self.baud, timeout=0.01)
            self.t_up = time.monotonic()
        self._thread = threading.Thread(target=self._read, name="conform-rx", daemon=True)
        self._thread.start()
        return self

    def _use_sock(self, s):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.settimeout(0.01)
        self._sock = s
        self.t_up = time.monotonic()

    def close(self):
        self._closed = True
        for s in (self._sock, self._lsock):
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass
        if self._serial is not None:
            self._serial.close()

    # -- receiving -----------------------------------------------------------------------------

    def _on_frame(self, ftype, payload, n):
        f = Frame(time.monotonic(), ftype, bytes(payload[:n]))
        with self.cond:
            self.frames.append(f)
            self.cond.notify_all()

    def _read(self):
        while not self._closed:
            try:
                if self._sock is not None:
                    data = self._sock.recv(4096)
                    if not data:
                        break
                else:
                    # the first byte waits up to 10 ms, the rest of what is there comes at once
                    data = self._serial.read(max(1, self._serial.in_waiting))
            except socket.timeout:
                data = b""
            except OSError:
                break
            now = int(time.monotonic() * 1000) % _PERIOD
            with self.cond:
                if data:
                    self.decoder.feed(data, now)
                else:
                    self.decoder.idle(now)
        with self.cond:
            self._closed = True
            self.cond.notify_all()

    @property
    def closed(self):
        return self._closed

    def mark(self):
        """An index into `frames`: wait_for(..., since=mark) looks only at what comes later."""
        with self.cond:
            return len(self.frames)

    def wait_for(self, ftype, since=0, timeout=1.0, match=None):
        """The first frame of `ftype` (and `match(frame)`) at index >= since, or None."""
        deadline = time.monotonic() + timeout
        i = since
        with self.cond:
            while True:
                while i < len(self.frames):
                    f = self.frames[i]
                    i += 1
                    if f.ftype == ftype and (match is None or match(f)):
                        return f
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    return None
                self.cond.wait(left)

    def since(self, since, ftype=None):
        with self.cond:
            return [f for f in self.frames[since:] if ftype is None or f.ftype == ftype]

    def counters(self):
        with self.cond:
            return self.decoder.counters()

    # -- sending -------------------------------------------------------------------------------

    def write(self, data):
        """Write bytes as one burst on the wire, after what was written before has left."""
        now = time.monotonic()
        start = self.pacer.start(now)
        if start > now:
            time.sleep(start - now)
            now = time.monotonic()
        data = bytes(data)
        if self._sock is not None:
            self._sock.sendall(data)
        elif self._serial is not None:
            self._serial.write(data)
        else:
            raise OSError("the cable is not open")
        self.pacer.sent(now, len(data))
        self.written.append((now, data))
        return now

    def send(self, ftype, payload=b""):
        return self.write(frame.encode(ftype, payload))

    def wire_s(self, n):
        """Seconds n bytes take on the wire."""
        return self.pacer.wire_s(n)

    @property
    def t_free(self):
        """When the last byte written has left, at wire speed."""
        return self.pacer.t_free
