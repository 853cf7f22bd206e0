# master/edge.py, the UART edge: frames whole and in order under partial writes, and the reader's early wake-up.
#
# `test_frames_whole_and_in_order_*` runs on CPython and on the unix port (UNIX_PORT): a UART
# double takes 1..N bytes per write at random while the HTTP, timer and reader paths all send.
import asyncio
import io
import random

import micropython

from organbus import frame

from master.edge import IDLE_POLL_MS, UartEdge

UNIX_PORT = True
FRAMES = 10000

try:
    _sleep_ms = asyncio.sleep_ms
except AttributeError:  # CPython

    def _sleep_ms(ms):
        return asyncio.sleep(ms / 1000)


class ChokingUart:
    """Takes 1..most bytes per write (sometimes none at all), and has rx bytes to read."""

    def __init__(self, seed, most=12):
        self.rng = random.Random(seed) if hasattr(random, "Random") else None
        if self.rng is None:
            random.seed(seed)
        self.most = most
        self.rx = []  # chunks for readinto
        self.writes = 0
        # what went out, decoded as it goes (no copy of the whole stream kept)
        self.next = {}  # path tag -> the number its next frame must carry
        self.frames = 0
        self.misordered = []
        self.decoder = frame.Decoder(self._got)

    def _got(self, ftype, payload, n):
        tag = payload[0]
        k = int(bytes(payload[1:n]))
        if self.next.get(tag, 0) != k and len(self.misordered) < 5:
            self.misordered.append((chr(tag), k, self.next.get(tag, 0)))
        self.next[tag] = k + 1
        self.frames += 1

    def _rand(self, n):
        return self.rng.randint(0, n) if self.rng is not None else random.randint(0, n)

    def write(self, b):
        self.writes += 1
        k = self._rand(self.most)
        if k > len(b):
            k = len(b)
        if k:
            self.decoder.feed(b[:k], 0)
        return k if k else None

    def readinto(self, buf):
        if not self.rx:
            return None
        d = self.rx.pop(0)
        buf[0 : len(d)] = d
        return len(d)

    def any(self):
        return len(self.rx)


class _Port:
    # what the reader feeds: a port whose every received frame makes the reader path answer
    index = 0
    resp_due = False

    def __init__(self, edge, frames):
        self.edge = edge
        self.frames = frames
        self.fed = 0

    def feed(self, buf, now, n):
        self.fed += 1
        self.edge.send(next(self.frames))  # the reader path sends from inside its own read


def _frames(tag, count):
    # distinct frames, each naming its path and its number: the order is checkable per path
    for i in range(count):
        yield frame.encode(frame.EVENT, b"%s%05d" % (tag, i))


def test_frames_whole_and_in_order_under_partial_writes():
    u = ChokingUart(11, 24)
    edge = UartEdge(u, slots=64)
    per = FRAMES // 4
    counts = {"h": per, "t": per, "r": per, "d": FRAMES - 3 * per}
    http = _frames(b"h", per)
    timer = _frames(b"t", per)
    direct = _frames(b"d", counts["d"])  # sent by the HTTP path too, between its own
    port = _Port(edge, _frames(b"r", per))
    for _ in range(per):
        u.rx.append(b"x")

    async def room():
        # the master never has more than a few frames out per port; keep the ring from filling
        while edge.pending() >= 40:
            await _sleep_ms(1)

    async def http_path():
        for f in http:
            await room()
            edge.send(f)
            edge.send(next(direct))
            await _sleep_ms(0)

    async def timer_path():
        for f in timer:
            await room()
            edge.send(f)
            await _sleep_ms(0)

    async def main():
        tasks = edge.tasks(port)
        await asyncio.gather(http_path(), timer_path())
        for _ in range(20000):
            if not edge.pending() and not u.rx:
                break
            await _sleep_ms(1)
        for t in tasks:
            t.cancel()
        await _sleep_ms(0)

    asyncio.run(main())
    d = u.decoder
    assert d.crc_errors == 0 and d.junk == 0 and d.bad_eof == 0, "a frame was cut: %r" % (
        d.counters(),
    )
    assert edge.dropped == 0, "the ring overflowed: %d frames dropped" % edge.dropped
    assert not u.misordered, "frames out of order (path, got, wanted): %r" % u.misordered
    assert u.frames == FRAMES, "%d of %d frames arrived" % (u.frames, FRAMES)
    for tag in counts:
        assert u.next.get(ord(tag)) == counts[tag], "path %s: %r of %d frames" % (
            tag,
            u.next.get(ord(tag)),
            counts[tag],
        )
    assert u.writes > FRAMES, "the double never cut a write (%d writes)" % u.writes


def test_a_full_ring_drops_and_counts():
    class Stuck:
        def write(self, b):
            return None

    edge = UartEdge(Stuck(), slots=4)
    for i in range(6):
        edge.send(frame.HEARTBEAT_FRAME)
    assert edge.dropped == 1, "4 slots plus the tail held, then one dropped: %d" % edge.dropped
    assert edge.pending() == 5, edge.pending()


def test_command_wakes_the_idle_reader():
    class Uart(io.IOBase):
        # pollable by MicroPython's asyncio through ioctl, like tools/simhw's UART
        def __init__(self):
            self.data = None
            self.written = 0

        def ioctl(self, req, arg):
            if req == 3:  # MP_STREAM_POLL
                return (arg & 4) | (arg & 1 if self.data else 0)
            return -22  # no file descriptor: poll through this ioctl

        def readinto(self, buf):
            d = self.data
            if not d:
                return None
            self.data = None
            buf[0 : len(d)] = d
            return len(d)

        def write(self, b):
            self.written += len(b)
            return len(b)

    class Port:
        index = 0
        resp_due = False
        fed = 0

        def feed(self, buf, now, n):
            self.fed += n
            self.resp_due = False

    u = Uart()
    port = Port()
    edge = UartEdge(u)
    seen = []

    async def main():
        task = asyncio.create_task(edge.reader(port))
        await _sleep_ms(0)
        await _sleep_ms(0)
        seen.append(edge._napper is not None)  # asleep in its IDLE_POLL_MS poll
        cmd = frame.encode(frame.COMMAND, b"\x06led_on")
        port.resp_due = True  # the Port marks the COMMAND_RESP due before it sends
        micropython.heap_lock()
        try:
            edge.command(cmd)
        finally:
            micropython.heap_unlock()
        seen.append(edge._napper is None)
        u.data = frame.RESP_OK_FRAME
        for _ in range(3):  # a few loop passes: far less than IDLE_POLL_MS
            await _sleep_ms(0)
        seen.append(port.fed)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            seen.append("cancelled")

    asyncio.run(main())
    assert seen[0] is True, "the reader was not asleep in its idle poll"
    assert seen[1] is True, "command() left the reader asleep"
    assert u.written == 15, "the COMMAND went out whole: %d" % u.written
    assert seen[2] == 9, (
        "the COMMAND_RESP was not read within a few loop passes (the reader waited for its %d "
        "ms poll): fed %r" % (IDLE_POLL_MS, seen[2])
    )
    assert seen[3] == "cancelled", "a real cancel no longer stops the reader"
