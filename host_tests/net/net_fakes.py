# Fake asyncio streams for the network client's tests (master/net/, master/net/ws.py): scripted bytes in, writes kept.
try:
    import asyncio
except ImportError:  # pragma: no cover
    import uasyncio as asyncio


class Source:
    """A reader that serves `parts` (bytes, or an int n: n bytes of `fill` made as they are read,
    so a 10 MB line costs nothing to offer) and then the end of the stream, or waits for ever
    when `hang`. `gap_ms` sleeps before each read (a trickle). `taken` counts the bytes read."""

    def __init__(self, parts, hang=False, gap_ms=0, fill=b"a"[0], readinto=True):
        self.parts = list(parts)
        self.hang = hang
        self.gap_ms = gap_ms
        self.fill = fill
        self.taken = 0
        self.reads = 0
        self._at = 0  # offset into parts[0] when it is bytes
        if not readinto:
            self.readinto = None  # the CPython StreamReader's shape: read(n) only

    def rest(self):
        """What is left unread, as bytes (ints spelled out)."""
        out = b""
        at = self._at
        for p in self.parts:
            out += p[at:] if isinstance(p, bytes) else bytes([self.fill]) * p
            at = 0
        return out

    async def _next(self, n):
        self.reads += 1
        if self.gap_ms:
            await sleep_ms(self.gap_ms)
        while self.parts:
            p = self.parts[0]
            if isinstance(p, int):
                k = min(n, p)
                if p - k:
                    self.parts[0] = p - k
                else:
                    self.parts.pop(0)
                self.taken += k
                return bytes([self.fill]) * k
            out = p[self._at : self._at + n]  # a part is served from an offset: no tail copies
            self._at += len(out)
            if self._at >= len(p):
                self.parts.pop(0)
                self._at = 0
            if out:
                self.taken += len(out)
                return out
        if self.hang:
            await asyncio.sleep(3600)
        return b""

    async def readinto(self, mv):
        data = await self._next(len(mv))
        mv[: len(data)] = data
        return len(data)

    async def read(self, n):
        return await self._next(n)


class Sink:
    """A writer that keeps what is written."""

    def __init__(self):
        self.data = b""
        self.closed = False

    def write(self, b):
        self.data += bytes(b)

    async def drain(self):
        pass

    def close(self):
        self.closed = True

    async def wait_closed(self):
        pass


async def sleep_ms(ms):
    if hasattr(asyncio, "sleep_ms"):
        await asyncio.sleep_ms(ms)
    else:
        await asyncio.sleep(ms / 1000)


def run(coro):
    return asyncio.run(coro)
