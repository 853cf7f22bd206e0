# Deliberately broken organs for the kit's tests: the template button organ with one defect each.
import socket
import threading
import time

from organbus import frame
from organbus.command import CommandError, decode_command
from organbus.crc16 import crc16

from organs.runtime import Organ
from organs.template import ButtonOrgan


class Released:
    """A button pin nobody presses (pull-up: reads 1)."""

    def value(self):
        return 1


class Aliasing(Organ):
    """Takes a name that differs only in case for the ability (BUTTON_CANCEL -> button_cancel)."""

    def _find(self, payload, n):
        i = Organ._find(self, payload, n)
        if i >= 0 or not n or payload[0] > n - 1:
            return i
        asked = bytes(payload[1 : 1 + payload[0]]).lower()
        for k, b in enumerate(self._name_bytes):
            if b == asked:
                return k
        return -1


class Unclamped(Organ):
    """Hands the numbers to the ability as they came (only rounded to int)."""

    def _decode(self, ci, payload, n):
        raw, text = decode_command(payload, n, self._caps[ci])
        values = self._values[ci]
        for i in range(len(raw)):
            values[i] = int(raw[i])
        return values, text


class SkipsHeartbeats(Organ):
    """Sends only every other HEARTBEAT (one every 2 s)."""

    beats = 0

    def _queue(self, f):
        if f is frame.HEARTBEAT_FRAME:
            self.beats += 1
            if self.beats % 2 == 0:
                return
        Organ._queue(self, f)


class Silent(Organ):
    """Never sends the EVENT of a continuous ability."""

    def finish(self, name, status):
        pass


class NoResync(Organ):
    """A naive receiver: after a bad frame it skips the whole length the header claimed (and a
    stale candidate is thrown away whole after 200 ms), so a good frame inside is lost."""

    def feed(self, data, now, n=-1):
        buf = getattr(self, "_naive", None)
        if buf is None:
            buf = self._naive = bytearray()
            self._naive_t = now
        if not buf:
            self._naive_t = now
        elif now - self._naive_t > 200:
            del buf[:]
            self._naive_t = now
        buf.extend(bytes(data[: len(data) if n < 0 else n]))
        while buf:
            if buf[0] != 0xAA:
                del buf[0]
                continue
            if len(buf) < 5:
                return
            if buf[1] != 3:
                del buf[0]
                continue
            total = 8 + (buf[3] << 8 | buf[4])
            if len(buf) < total:
                return
            whole = bytes(buf[:total])
            del buf[:total]
            ok = whole[-1] == 0x55 and crc16(whole, 0xFFFF, 1, total - 3) == (
                whole[-3] << 8 | whole[-2]
            )
            if ok:
                self._now = now
                p = memoryview(bytearray(whole[5:-3]))
                self._on_frame(whole[2], p, len(p))


def bad_descriptor(organ):
    """Replace the organ's DESCRIPTOR by one whose second capability name breaks section 4."""
    good = organ.descriptor_frame[5:-3]
    bad = good.replace(b"button_cancel", b"Button_cancel")
    organ.descriptor_frame = frame.encode(frame.DESCRIPTOR, bad)


DEFECTS = {
    "alias": (Aliasing, None, "organ.unknown_name"),
    "no_clamp": (Unclamped, None, "organ.clamp"),
    "skips_heartbeats": (SkipsHeartbeats, None, "organ.heartbeat"),
    "bad_descriptor": (Organ, bad_descriptor, "organ.descriptor"),
    "no_event": (Silent, None, "organ.event"),
    "no_resync": (NoResync, None, "organ.resync"),
    "good": (Organ, None, None),
}


def make(defect):
    cls, patch, _ = DEFECTS[defect]
    b = ButtonOrgan(Released(), log=lambda line: None)
    b.organ.__class__ = cls  # the same organ, with one method of the runtime broken
    if patch is not None:
        patch(b.organ)
    return b


def _serve(organ, recv, send, stopped):
    """The organ's loop: recv() -> bytes (b"" when nothing came, None when the link is gone)."""
    ms = lambda: int(time.monotonic() * 1000)  # noqa: E731
    organ.start(ms())
    while not stopped():
        data = recv()
        if data is None:
            return
        if data:
            organ.feed(data, ms())
        organ.poll(ms())
        while True:
            f = organ.pop()
            if f is None:
                break
            send(f)


class SocketOrgan:
    """Runs an organ on a TCP connection to the kit (the organ powers up when it connects)."""

    def __init__(self, defect, port, host="127.0.0.1"):
        self.button = make(defect)
        self.organ = self.button.organ
        self.addr = (host, port)
        self.stopped = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        deadline = time.monotonic() + 20
        while True:
            s = socket.socket()
            try:
                s.connect(self.addr)
                break
            except OSError:
                s.close()
                if time.monotonic() > deadline or self.stopped:
                    return
                time.sleep(0.05)
        s.settimeout(0.005)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def recv():
            try:
                return s.recv(4096) or None
            except socket.timeout:
                return b""

        try:
            _serve(self.organ, recv, s.sendall, lambda: self.stopped)
        except OSError:
            return
        finally:
            s.close()

    def stop(self):
        self.stopped = True
        self.thread.join(2)


class PtyOrgan:
    """Runs an organ on the controller side of a pseudo-terminal: `path` is the serial port
    (the pty's other end) that the kit opens with pyserial, as it would a USB-UART adapter."""

    def __init__(self, defect):
        import os
        import tty

        self.button = make(defect)
        self.organ = self.button.organ
        self.fd, self.peer = os.openpty()
        tty.setraw(self.fd)
        tty.setraw(self.peer)
        self.path = os.ttyname(self.peer)
        self.stopped = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        import os
        import select

        def recv():
            r, _, _ = select.select([self.fd], [], [], 0.005)
            if not r:
                return b""
            try:
                return os.read(self.fd, 4096)
            except OSError:
                return None

        def send(f):
            os.write(self.fd, f)

        try:
            _serve(self.organ, recv, send, lambda: self.stopped)
        except OSError:
            return

    def stop(self):
        import os

        self.stopped = True
        self.thread.join(2)
        os.close(self.fd)
        os.close(self.peer)
