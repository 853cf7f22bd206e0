# The organ's UART edge under a UART that takes 1..N bytes per write: 10,000 frames arrive whole, in order.
#
# The reader path (COMMAND_RESP), the timer path (HEARTBEAT, DESCRIPTOR, the blink's EVENT) and the
# writer's finishing of partial writes all write to one UART. A fake master answers the first
# DESCRIPTOR with ACK and sends the next COMMAND once the last one's RESP came (one outstanding,
# section 5). The bytes on the wire must be exactly the frames the organ queued, in queue order.
# Two drivers: the Link's own asyncio tasks (poll mode, as on a board), and the Link's steps in
# a random interleaving (each asyncio step runs whole, so this covers the orders the loop can take).
from organbus import frame
from organbus.command import encode_command
from organbus.ticks import ticks_add
from organs.led import LedOrgan, Light
from organs.runtime import Link

UNIX_PORT = True

FRAMES = 10000
START = ticks_add(0, -7000)  # the run crosses the tick wrap of the interpreter it runs on
COMMANDS = (
    frame.encode(frame.COMMAND, encode_command("led_on")),
    frame.encode(frame.COMMAND, encode_command("led_off")),
    frame.encode(frame.COMMAND, encode_command("led_blink", (1.0, 100.0))),
    frame.encode(frame.COMMAND, encode_command("led_blink", (2.0, 100.0))),
    frame.encode(frame.COMMAND, encode_command("led_dim")),  # unknown: answered 1
)


class Rand:
    """A small LCG: the same draws on every interpreter."""

    def __init__(self, seed):
        self.x = seed

    def below(self, n):
        self.x = (self.x * 1103515245 + 12345) & 0x7FFFFFFF
        return (self.x >> 8) % n


class Pin:
    def value(self, x=None):
        return 0


class Master:
    """The far end: decodes every byte the organ wrote, ACKs the first DESCRIPTOR, and has the
    next COMMAND ready once the previous one's COMMAND_RESP arrived."""

    def __init__(self, rand, queued):
        self.rand = rand
        self.queued = queued  # every frame the organ queued, in queue order
        self.got = 0  # frames arrived
        self.wrong = None  # the first frame that is not the one queued at its place
        self.types = {}
        self.dec = frame.Decoder(self._on)
        self.rx = b""  # bytes on their way to the organ
        self.acked = False

    def _on(self, ftype, payload, n):
        f = frame.encode(ftype, bytes(payload[:n]))
        i = self.got
        want = self.queued[i] if i < len(self.queued) else None
        if f != want and self.wrong is None:
            self.wrong = "frame %d on the wire is %r, the organ queued %r" % (i, f, want)
        self.queued[i] = None  # checked: keep no 10,000 frames around
        self.got = i + 1
        self.types[ftype] = self.types.get(ftype, 0) + 1
        if ftype == frame.DESCRIPTOR and not self.acked:
            self.acked = True
            self.rx += frame.ACK_FRAME + self._next()
        elif ftype == frame.COMMAND_RESP:
            self.rx += self._next()

    def _next(self):
        return COMMANDS[self.rand.below(len(COMMANDS))]


class Uart:
    """timeout=0 UART double: write() takes 1..max_take bytes at random (what the driver's TX
    buffer had room for); readinto() hands over 1..16 of the master's bytes at random."""

    def __init__(self, master, rand, max_take):
        self.master = master
        self.rand = rand
        self.max_take = max_take
        self.writes = 0
        self.partial = 0

    def write(self, f):
        k = 1 + self.rand.below(self.max_take)
        if k > len(f):
            k = len(f)
        else:
            self.partial += k < len(f)
        self.writes += 1
        self.master.dec.feed(f[:k])
        return k

    def readinto(self, buf):
        m = self.master
        if not m.rx:
            return None
        k = 1 + self.rand.below(16)
        if k > len(m.rx):
            k = len(m.rx)
        buf[0:k] = m.rx[:k]
        m.rx = m.rx[k:]
        return k


class Clock:
    def __init__(self, rand):
        self.rand = rand
        self.t = START

    def __call__(self):
        self.t = ticks_add(self.t, self.rand.below(16))  # 0..15 ms per read of the clock
        return self.t


def _rig(seed, max_take, sleep_ms=None):
    rand = Rand(seed)
    queued = []
    master = Master(rand, queued)
    uart = Uart(master, rand, max_take)
    clock = Clock(rand)
    led = LedOrgan(Light(pin=Pin()), log=lambda line: None)
    organ = led.organ
    queue = organ._queue

    def recording_queue(f):
        queued.append(f)
        queue(f)

    organ._queue = recording_queue
    assert organ.start(clock()), organ.refusal
    if sleep_ms is None:
        link = Link(organ, uart, poll_ms=1, clock=clock)
    else:
        link = Link(organ, uart, poll_ms=1, clock=clock, sleep_ms=sleep_ms)
    return rand, master, uart, clock, led, link, queued


def _check(master, uart, led, queued, how):
    assert master.got >= FRAMES, "%s: only %d frames arrived" % (how, master.got)
    assert master.wrong is None, "%s: %s" % (how, master.wrong)
    c = master.dec.counters()
    for k in ("junk", "crc_errors", "bad_version", "oversize", "bad_eof", "abandoned"):
        assert c[k] == 0, "%s: a frame did not arrive whole (%s): %r" % (how, k, c)
    assert led.organ.dropped == 0, "%s: %d frames dropped" % (how, led.organ.dropped)
    t = master.types
    for ftype in (frame.COMMAND_RESP, frame.HEARTBEAT, frame.DESCRIPTOR, frame.EVENT):
        assert t.get(ftype, 0) >= 10, "%s: too few frames of type 0x%02x: %r" % (how, ftype, t)
    assert uart.partial > FRAMES // 4, "%s: only %d partial writes" % (how, uart.partial)


def test_link_steps_in_any_order_keep_every_frame_whole():
    for seed, max_take in ((1, 3), (7, 12)):
        rand, master, uart, clock, led, link, queued = _rig(seed, max_take)
        steps = 0
        while master.got < FRAMES:
            r = rand.below(8)
            if r < 4:
                link.read_once(clock())  # the reader task's step
            elif r < 6:
                link.write_once(clock())  # the writer's step: timers, then what is queued
            elif r < 7:
                link.flush()  # the writer woken to finish a partial frame
            else:
                led.organ.poll(clock())  # the timers' step alone (IO-wait mode's clock task)
            steps += 1
            assert steps < 40 * FRAMES, "no progress: %d frames after %d steps" % (
                master.got,
                steps,
            )
        _check(master, uart, led, queued, "steps seed %d take 1..%d" % (seed, max_take))


def test_link_tasks_keep_every_frame_whole():
    # The Link's own reader and writer tasks on the event loop (poll mode, as on a board). Time
    # is the fake clock's, so a task's sleep is a yield to the loop (any order of the two tasks).
    import asyncio

    def yield_ms(ms):
        return asyncio.sleep(0)

    rand, master, uart, clock, led, link, queued = _rig(3, 5, yield_ms)

    died = []

    async def guard(coro):
        try:
            await coro
        except Exception as e:  # a task that died: the test says why
            died.append(e)

    async def main():
        tasks = [
            asyncio.create_task(guard(link.reader())),
            asyncio.create_task(guard(link.writer())),
        ]
        while master.got < FRAMES and not died:
            await asyncio.sleep(0)
        for t in tasks:
            t.cancel()

    asyncio.run(main())
    assert not died, "a task died: %r" % died
    _check(master, uart, led, queued, "asyncio tasks")
