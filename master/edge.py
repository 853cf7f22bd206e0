# The asyncio UART edge of one organ port: one reader task, one writer, a preallocated TX ring.
#
# TX: every frame goes through `send`, which puts it in a ring of FRAME_SLOTS references
# (frames are prebuilt bytes: nothing is copied or allocated) and flushes at once, a plain
# non-blocking write in whichever task called. `flush` is the one writer of the UART: it first
# finishes the unsent tail of a partial write, then the ring in order, and stops at the first
# partial write, so no frame ever starts ahead of the tail of the one before it. The writer
# task only retries a tail the driver did not take (woken through an asyncio.Event).
#
# RX: the reader is the only task that reads the UART. It has two gears. While the port waits
# for a COMMAND_RESP (`port.resp_due`) it waits in the poller (`StreamReader.readinto`), so
# the answer is taken the moment it lands. Otherwise it polls the UART (timeout=0, `readinto`
# into one preallocated buffer) every IDLE_POLL_MS with `asyncio.sleep_ms`, which allocates
# nothing (a poller wait allocates a coroutine and an I/O queue entry per wake-up), so the
# steady state of heartbeats allocates nothing. A COMMAND sent from another task (HTTP,
# console, timer) while the reader sleeps in that poll brings it forward (`expect`): the
# sleep is cut short with `Task.cancel()`, the public way to wake a sleeping task, and the
# reader takes that one CancelledError as "look now"; any other cancel still ends it.
import asyncio

from micropython import const

from organbus import log
from organbus.ticks import ticks_ms

_RX = const(256)  # bytes per read; the UART driver's rxbuf (board.json) absorbs bursts beyond it
FRAME_SLOTS = const(16)  # frames waiting for the UART driver (ACKs, DISCOVERs, COMMANDs)
IDLE_POLL_MS = const(10)  # one esp32 tick; well inside the decoder's 50 ms quiet rule
_RETRY_MS = const(1)  # the writer's wait before it offers a tail to the driver again

try:
    _sleep_ms = asyncio.sleep_ms  # MicroPython: a singleton generator, no allocation
except AttributeError:  # CPython

    def _sleep_ms(ms):
        return asyncio.sleep(ms / 1000)


def _poller(uart):
    # MicroPython's StreamReader waits on any pollable stream; CPython's takes no stream.
    try:
        return asyncio.StreamReader(uart)
    except TypeError:
        return None


class UartEdge:
    """One organ port's UART (`timeout=0`): `send(frame)`, `command(frame)`, `expect()`,
    `unread()`, `tasks(port)`.

    Counters: `written` (frames handed whole to the driver), `dropped` (frames refused because
    the ring was full: the driver took nothing for FRAME_SLOTS frames)."""

    def __init__(self, uart, rxsize=_RX, slots=FRAME_SLOTS, clock=ticks_ms):
        self.uart = uart
        self._any = getattr(uart, "any", None)  # bound once: a poll then allocates nothing
        self.clock = clock
        self.buf = bytearray(rxsize)
        self._ring = [None] * slots
        self._head = 0
        self._n = 0
        self._tail = None  # the frame the driver took only part of
        self._off = 0  # bytes of _tail already written
        self.ready = asyncio.Event()  # set when a tail waits for the writer task
        self.written = 0
        self.dropped = 0
        self._napper = None  # the reader's Task while it sleeps in its idle poll
        self._kicked = False

    # -- TX: one writer ---------------------------------------------------------------------

    def send(self, f):
        """Queue one prebuilt frame and write what the driver takes now (any task)."""
        ring = self._ring
        if self._n >= len(ring):
            self.dropped += 1
        else:
            i = self._head + self._n
            if i >= len(ring):
                i -= len(ring)
            ring[i] = f
            self._n += 1
        self.flush()

    def command(self, f):
        """Send a COMMAND frame and bring the reader to its COMMAND_RESP (`expect`)."""
        # The scheduler's step path ends here: send, flush's common case and expect inline,
        # one Python call per COMMAND. With nothing queued and no tail the frame goes straight
        # to the driver, as flush would take it from the ring; otherwise it queues behind.
        if self._n or self._tail is not None:
            self.send(f)
        else:
            w = self.uart.write(f)
            if w is not None and w >= len(f):
                self.written += 1
            else:
                self._tail = f  # flush's partial write: the tail, retried as flush does
                self._off = w or 0
                self.flush()
        t = self._napper
        if t is not None:  # expect()
            self._napper = None
            self._kicked = True
            t.cancel()

    def pending(self):
        """Frames not yet handed whole to the driver (a partial tail counts as one)."""
        return self._n + (1 if self._tail is not None else 0)

    def flush(self):
        """Write the tail, then queued frames in order, until the driver takes less than all."""
        uart = self.uart
        while True:
            f = self._tail
            if f is not None:
                w = uart.write(memoryview(f)[self._off :])
                self._off += w or 0
                if self._off < len(f):
                    self.ready.set()
                    return
                self._tail = None
                self.written += 1
            if not self._n:
                return
            ring = self._ring
            f = ring[self._head]
            ring[self._head] = None
            self._head += 1
            if self._head >= len(ring):
                self._head = 0
            self._n -= 1
            w = uart.write(f)
            if w is not None and w >= len(f):
                self.written += 1
            else:
                self._tail = f
                self._off = w or 0

    async def writer(self):
        ready = self.ready
        while True:
            await ready.wait()
            ready.clear()
            while self.pending():
                await _sleep_ms(_RETRY_MS)
                self.flush()

    # -- RX: one reader ---------------------------------------------------------------------

    def unread(self):
        """True when the UART driver holds bytes the reader has not taken (it was held up):
        the timers then do not take the line for quiet."""
        a = self._any
        return a is not None and a() > 0

    def expect(self):
        """A COMMAND is out: its COMMAND_RESP must not wait for the reader's idle poll."""
        t = self._napper
        if t is not None:
            self._napper = None
            self._kicked = True
            t.cancel()

    async def reader(self, port):
        """Feed `port` (`feed(buf, now, n)`, `resp_due`) with everything the UART receives."""
        s = _poller(self.uart)
        uart = self.uart
        buf = self.buf
        clock = self.clock
        me = asyncio.current_task()
        uncancel = getattr(me, "uncancel", None)
        while True:
            if port.resp_due and s is not None:
                # A COMMAND_RESP is due: straight into the poller (the COMMAND it answers has
                # only just been written, so a read first would find nothing).
                n = await s.readinto(buf)
                if not n:
                    await _sleep_ms(1)  # woken without data (a connection being set up)
                    continue
            else:
                n = uart.readinto(buf)
                if not n and port.resp_due:
                    await _sleep_ms(1)  # no poller for this stream (CPython): poll closely
                    continue
                if not n:
                    # inline, not a helper coroutine: calling one would allocate every poll
                    self._napper = me
                    try:
                        await _sleep_ms(IDLE_POLL_MS)
                    except asyncio.CancelledError:
                        if not self._kicked:
                            raise  # a real cancel: the edge is being stopped
                        self._kicked = False
                        if uncancel is not None:
                            uncancel()  # CPython counts cancels; this one was only a wake-up
                    finally:
                        self._napper = None
                    continue
            try:
                port.feed(buf, clock(), n)
            except Exception as e:  # a bug must not silence the port: say so, keep reading
                log.emit("error", [("where", "uart"), ("port", port.index), ("error", repr(e))])
                log.print_exception(e)

    def tasks(self, port):
        """Start the reader (feeding `port`) and the writer."""
        return [asyncio.create_task(self.reader(port)), asyncio.create_task(self.writer())]
