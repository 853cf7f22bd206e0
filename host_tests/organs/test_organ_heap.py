# Heap: a steady state of heartbeats and led_on/led_off round trips allocates nothing (heap_lock on the unix port).
import asyncio

import micropython

from organbus import frame
from organbus.command import encode_command
from organs.led import LedOrgan, Light
from organs.runtime import Link

UNIX_PORT = True

ON = frame.encode(frame.COMMAND, encode_command("led_on"))
OFF = frame.encode(frame.COMMAND, encode_command("led_off"))
LOGGED = [0]
TYPES = [0] * 256  # frames written, by type


def _count_log(line):
    LOGGED[0] += 1


class Pin:
    def __init__(self):
        self.level = 0
        self.writes = 0

    def value(self, x=None):
        if x is None:
            return self.level
        self.level = x
        self.writes += 1


class FakeUart:
    """timeout=0 UART: readinto takes what was injected; write counts frames by type."""

    def __init__(self):
        self.rx = bytearray(256)
        self.n = 0
        self.tx_bytes = 0

    def inject(self, data):
        k = len(data)
        self.rx[self.n : self.n + k] = data
        self.n += k

    def readinto(self, buf):
        n = self.n
        if not n:
            return None
        buf[0:n] = self.rx[0:n]  # slice assignment of a slice: see _copy note below
        self.n = 0
        return n

    def write(self, f):
        TYPES[f[2]] += 1
        self.tx_bytes += len(f)
        return len(f)


def _copy_into(dst, src, n):
    for i in range(n):
        dst[i] = src[i]


class CopyUart(FakeUart):
    # bytearray slicing on the right-hand side allocates on MicroPython: copy by index instead.
    def readinto(self, buf):
        n = self.n
        if not n:
            return None
        _copy_into(buf, self.rx, n)
        self.n = 0
        return n


def _registered_led():
    for i in range(256):
        TYPES[i] = 0
    LOGGED[0] = 0
    pin = Pin()
    led = LedOrgan(Light(pin=pin), log=_count_log)
    assert led.organ.start(0), led.organ.refusal
    led.organ.feed(frame.ACK_FRAME, 1000)
    return led, pin


def test_core_steady_state_allocates_nothing():
    led, pin = _registered_led()
    uart = CopyUart()
    link = Link(led.organ, uart, poll_ms=1)
    now = 1000
    link.write_once(now)  # warm-up: first poll
    cmds = 0
    micropython.heap_lock()
    try:
        for i in range(400):
            now += 50
            uart.inject(ON if i & 1 else OFF)
            link.read_once(now)
            cmds += 1
            link.write_once(now)
    finally:
        micropython.heap_unlock()
    assert TYPES[frame.COMMAND_RESP] == cmds, "every command answered: %d of %d" % (
        TYPES[frame.COMMAND_RESP],
        cmds,
    )
    assert TYPES[frame.HEARTBEAT] == 20, "20 s of heartbeats: %d" % TYPES[frame.HEARTBEAT]
    assert TYPES[frame.DESCRIPTOR] == 4, "a DESCRIPTOR every 5 s: %d" % TYPES[frame.DESCRIPTOR]
    assert pin.writes == cmds + 1 and pin.level == 1, "the pin followed: %d" % pin.writes
    assert LOGGED[0] == cmds + 2, "a log line per command (+ boot, ack): %d" % LOGGED[0]
    assert led.organ.counters()["refused"] == 0, led.organ.counters()


def test_printing_a_log_line_allocates_nothing():
    line = '{"event": "command", "name": "led_on", "status": 0}'
    micropython.heap_lock()
    try:
        print(line)
    finally:
        micropython.heap_unlock()


def test_asyncio_link_steady_state_allocates_nothing():
    led, pin = _registered_led()
    uart = CopyUart()
    link = Link(led.organ, uart, poll_ms=2)
    sent = [0]
    errors = []

    def sleep_ms(ms):
        f = getattr(asyncio, "sleep_ms", None)
        return f(ms) if f else asyncio.sleep(ms / 1000)

    async def main():
        r = asyncio.create_task(link.reader())
        w = asyncio.create_task(link.writer())
        await sleep_ms(50)  # warm-up outside the lock
        micropython.heap_lock()
        try:
            # Plays master on the fake wire, a command every 20 ms (inline: calling a
            # coroutine function allocates its generator).
            for i in range(100):
                uart.inject(ON if i & 1 else OFF)
                sent[0] += 1
                await sleep_ms(20)
            await sleep_ms(100)
        except Exception as e:
            errors.append(e)
        finally:
            micropython.heap_unlock()
        alive = not r.done() and not w.done()
        r.cancel()
        w.cancel()
        return alive

    alive = asyncio.run(main())
    assert not errors, "no error under heap_lock: %r" % errors
    assert alive, "reader and writer tasks survived the locked heap"
    assert TYPES[frame.COMMAND_RESP] == sent[0] == 100, "every command answered: %d of %d" % (
        TYPES[frame.COMMAND_RESP],
        sent[0],
    )
    assert TYPES[frame.HEARTBEAT] >= 1, "heartbeats kept coming: %d" % TYPES[frame.HEARTBEAT]
    assert led.organ.counters()["refused"] == 0, led.organ.counters()
