# The asyncio edge of one organ port: one reader task and one writer task per UART.
#
# The reader sleeps in the poller until bytes arrive (UART timeout=0, `readinto` into one
# preallocated buffer) and feeds them, with their ms tick, to the registry's decoder for
# that port. The writer alone owns the TX stream: frames queued by `send` leave in order.
import asyncio
import time

_RX = 256  # bytes per read; the UART driver's rxbuf (board.json) absorbs bursts beyond it


class Link:
    def __init__(self, uart, index, registry, rxsize=_RX):
        self.uart = uart
        self.index = index
        self.registry = registry
        self.buf = bytearray(rxsize)
        self.queue = []
        self.ready = asyncio.Event()
        self.written = 0

    def send(self, frame_bytes):
        """Queue one frame for the writer task (called from the sans-IO core)."""
        self.queue.append(frame_bytes)
        self.ready.set()

    async def reader(self):
        s = asyncio.StreamReader(self.uart)
        buf = self.buf
        reg = self.registry
        index = self.index
        while True:
            n = await s.readinto(buf)
            if n:
                reg.feed(index, buf, time.ticks_ms(), n)
            elif n is None:
                await asyncio.sleep_ms(1)  # woken without data (a connection being set up)

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
