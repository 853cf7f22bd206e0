# The HTTP server's limits beside its core: a token bucket per client, and the accept loop that survives a full heap.
import asyncio
import gc

from micropython import const

from organbus.ticks import ticks_diff

_RATE_CLIENTS = const(16)


class RateLimiter:
    """Token bucket per client address; tokens kept in thousandths, integers only.

    The table keeps `clients` addresses. It never fails open: a new address takes the place of
    a bucket that has refilled to the brim (forgetting it changes nothing), and when every
    bucket is still in use, new addresses share one overflow bucket with the same rate and
    burst, so rotating addresses buys no more than one client gets."""

    def __init__(self, rate_per_s, burst, clients=_RATE_CLIENTS):
        self.rate = max(1, int(rate_per_s))  # thousandths of a token per ms
        self.cap = max(1, int(burst)) * 1000
        self.clients = clients
        self.buckets = {}  # address -> [milli-tokens, last ms]
        self.overflow = None  # the bucket every address beyond a full table shares

    def _refill(self, b, now):
        dt = ticks_diff(now, b[1])
        if dt > 0:
            b[0] = min(self.cap, b[0] + min(dt, 3600000) * self.rate)
            b[1] = now

    def _bucket(self, addr, now):
        b = self.buckets.get(addr)
        if b is not None:
            self._refill(b, now)
            return b
        if len(self.buckets) >= self.clients:
            full = None
            for k in self.buckets:
                self._refill(self.buckets[k], now)
                if self.buckets[k][0] >= self.cap:
                    full = k
                    break
            if full is None:
                if self.overflow is None:
                    self.overflow = [self.cap, now]
                else:
                    self._refill(self.overflow, now)
                return self.overflow
            del self.buckets[full]
        b = [self.cap, now]
        self.buckets[addr] = b
        return b

    def take(self, addr, now):
        """0 when the request may go on, else the seconds to wait (Retry-After)."""
        b = self._bucket(addr, now)
        if b[0] >= 1000:
            b[0] -= 1000
            return 0
        return (1000 - b[0] + self.rate * 1000 - 1) // (self.rate * 1000) or 1


class _Listener:
    """MicroPython's `asyncio.start_server` (extmod/asyncio/stream.py) but for one thing: a
    client accepted on a heap too full for its Stream and task gets the spare block and one
    collection, else is closed at once (counted in `low_memory`), and the loop goes on. There,
    that MemoryError ends the accept loop and leaves the socket listening with nobody accepting:
    every later client waits in the backlog for good (seen at 64 KB on a loaded machine)."""

    def __init__(self, server, host, port, backlog):
        import socket

        ai = socket.getaddrinfo(host, port)[0]
        s = socket.socket(ai[0])
        s.setblocking(False)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(ai[-1])
        s.listen(backlog)
        self.closed = False
        self.task = asyncio.create_task(self._serve(server, s))

    def close(self):
        self.closed = True
        self.task.cancel()

    async def wait_closed(self):
        await self.task

    async def _serve(self, server, s):
        io = asyncio.core._io_queue  # the readiness wait start_server's loop uses
        try:
            while True:
                yield io.queue_read(s)
                try:
                    s2, addr = s.accept()
                except Exception:
                    continue  # a failed accept, as start_server ignores it
                try:
                    _accept(server, s2, addr)
                except MemoryError:
                    server.spare = None
                    gc.collect()
                    try:
                        _accept(server, s2, addr)
                    except MemoryError:
                        server.low_memory += 1
                        s2.close()
        except asyncio.CancelledError:
            if not self.closed:
                raise
        finally:
            s.close()


def _accept(server, s2, addr):
    s2.setblocking(False)
    st = asyncio.StreamReader(s2, {"peername": addr})
    asyncio.create_task(server._conn(st, st))
