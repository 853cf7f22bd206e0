# The asyncio edge of one organ port: one reader task and one writer task per UART.
#
# The reader has two gears. While a COMMAND is outstanding on the link it waits in the
# poller (`StreamReader.readinto`), so the COMMAND_RESP is taken the moment it lands. Otherwise
# (heartbeats, DESCRIPTORs) it polls the UART (timeout=0, `readinto` into one preallocated
# buffer) every IDLE_POLL_MS: a poller wait allocates (a coroutine and an I/O queue entry per
# wake-up), a sleep does not, so the steady state of heartbeats allocates nothing. A COMMAND
# sent from another task (HTTP, console, timer) while the reader sleeps in that poll brings
# the reader forward at once (`send` -> `_kick`), so it is in the poller before the answer
# can arrive: no step waits for the rest of a poll period.
# Frames go out by a plain write into the UART driver's TX buffer; the writer task only
# drains what did not fit, in order (see `send`).
import asyncio
import time

try:
    # MicroPython: the run queue (a pairing heap of Tasks); the C6 stubs do not declare it
    _tasks = asyncio.core._task_queue  # type: ignore[attr-defined]
except AttributeError:  # another asyncio: no early wake-up, the reader keeps its poll period
    _tasks = None

from micropython import const

_RX = const(256)  # bytes per read; the UART driver's rxbuf (board.json) absorbs bursts beyond it
IDLE_POLL_MS = const(10)  # one esp32 tick; well inside the decoder's 50 ms quiet rule


def _never_busy():
    return False


def _report(where, port, e):
    import sys

    from organbus import log

    log.emit("error", [("where", where), ("port", port), ("error", repr(e))])
    sys.print_exception(e)


class Link:
    def __init__(self, uart, index, registry, rxsize=_RX, busy=_never_busy):
        self.busy = busy  # () -> True while a COMMAND waits for its COMMAND_RESP on this link
        self.uart = uart
        self.index = index
        self.registry = registry
        self.buf = bytearray(rxsize)
        self.queue = []
        self.ready = asyncio.Event()
        self.written = 0
        self._task = None  # the reader's Task, while it sleeps in its idle poll (see _kick)

    def send(self, frame_bytes):
        """Send one frame (called from the sans-IO core, in whichever task is running).

        With nothing queued the frame goes straight into the UART driver's TX buffer (a
        plain write: nothing is awaited, so no two tasks ever drain the stream, and an ACK
        allocates nothing); whatever does not fit is left to the writer task, in order."""
        if self._task is not None and self.busy():
            self._kick()  # a COMMAND is out: its answer must not wait for the idle poll
        q = self.queue
        if not q:
            n = self.uart.write(frame_bytes)
            if n is not None and n >= len(frame_bytes):
                self.written += n
                return
            if n:
                frame_bytes = frame_bytes[n:]
                self.written += n
        q.append(frame_bytes)
        self.ready.set()

    def _kick(self):
        # The reader sleeps in asyncio.sleep_ms(IDLE_POLL_MS), i.e. it sits in the run queue
        # keyed by its wake-up time: re-queue it keyed now, as Task.cancel() brings a sleeping
        # task forward (without the exception). Nothing is allocated.
        t = self._task
        self._task = None
        if _tasks is not None:
            _tasks.remove(t)
            _tasks.push(t)

    def drain(self, now):
        """Feed whatever the UART holds (the timer calls this before the quiet-line rule, so a
        reader that was held up never makes waiting bytes look like a quiet line)."""
        uart, buf = self.uart, self.buf
        while True:
            n = uart.readinto(buf)
            if not n:
                return
            self.registry.feed(self.index, buf, now, n)

    async def reader(self):
        s = asyncio.StreamReader(self.uart)
        uart = self.uart
        buf = self.buf
        reg = self.registry
        index = self.index
        busy = self.busy
        me = asyncio.current_task()
        while True:
            if busy():
                # A COMMAND_RESP is due: straight into the poller (the COMMAND it answers has
                # only just been written, so a read first would find nothing).
                n = await s.readinto(buf)
                if not n:
                    await asyncio.sleep_ms(1)  # woken without data (a connection being set up)
                    continue
            else:
                n = uart.readinto(buf)
                if not n:
                    self._task = me
                    try:
                        await asyncio.sleep_ms(IDLE_POLL_MS)
                    finally:
                        self._task = None  # never re-queue a task that is not sleeping here
                    continue
            try:
                reg.feed(index, buf, time.ticks_ms(), n)
            except Exception as e:  # a bug must not silence the port: say so, keep reading
                _report("link", index, e)

    async def writer(self):
        w = asyncio.StreamWriter(self.uart, {})
        q = self.queue
        while True:
            await self.ready.wait()
            self.ready.clear()
            while q:
                f = q.pop(0)
                w.write(f)
                await w.drain()
                self.written += len(f)

    def tasks(self):
        return [asyncio.create_task(self.reader()), asyncio.create_task(self.writer())]
