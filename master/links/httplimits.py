# The HTTP server's limits beside its core: its settings, a token bucket per client, the heap's floor, the accept loop that survives a full heap, a connection's close.
import asyncio
import gc
import sys

from micropython import const

from organbus.plan import MAX_PLAN_BYTES
from organbus.ticks import ticks_diff

_RATE_CLIENTS = const(16)
_FREE_MS = const(1000)  # HeapGuard: while the heap has room, gc.mem_free() at most this often
_HAS_MEM_FREE = hasattr(gc, "mem_free")  # MicroPython


DEFAULTS = {
    "token": None,  # bearer token; None or "" means no authentication
    "max_body": MAX_PLAN_BYTES,  # bytes; more gets 413 (the one plan limit, for every route)
    "max_head": 2048,  # request line plus headers; more gets 431
    "max_conns": 5,  # connections served at once, all clients together
    "max_conns_per_client": 3,  # connections served at once for one client address
    # A connection still sending its head or body this long after it came gives its slot to a
    # new client when every slot (or the client's own share) is taken and the new client has
    # no request of its own still arriving: slow clients can never lock the others out (the
    # oldest slow one is answered 408 and closed).
    "reclaim_ms": 200,
    "rate_per_s": 10,  # requests per second per client address, sustained
    "rate_burst": 30,  # requests per client address in a burst
    # Never rate limited: loopback, where only the simulation's own tools live (a board
    # has no local HTTP client). Set () to limit loopback too (the tests do).
    "rate_exempt": ("127.0.0.1",),
    "header_timeout_ms": 3000,  # whole head must arrive within this after accept
    "body_timeout_ms": 3000,  # whole body must arrive within this after the head
    "write_timeout_ms": 5000,  # response must be taken by the client within this
    # Listen backlog: connections the stack completes before the server accepts them (Linux
    # caps it at net.core.somaxconn, lwIP at 255; a queued connection costs no MicroPython heap,
    # on a board lwIP's PCB pool bounds it).
    # MicroPython's asyncio defaults to 5: in a burst the queue overflowed, Linux dropped the
    # client's final ACK (the client thinks it is connected) and its request waited for a
    # SYN-ACK retransmission, 1 to 31 s later (issue 17, tools/bench_stall.py). With room in
    # the queue every connection is accepted at once and one over the bound gets its 503 then.
    "backlog": 512,
    "min_free": 6144,  # MicroPython: heap bytes free (after a collect) to take a request, else 503
    "origins": (),  # browser Origins allowed; a request with any other Origin gets 403
}


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


class HeapGuard:
    """`short(now)`: True when the heap has under `min_free` bytes free after a collection,
    when a request is answered 503 instead of taken. gc.mem_free() walks the whole heap's
    table (about 2 instructions per byte of heap: 2 M on the bench image's 1 MB, ~130,000 at
    64 KB; the rest of an MCP call is ~770,000), so it is asked at most once per `period_ms`
    while its last answer was at least twice `min_free`, and at every request otherwise; an
    allocation that finds no block in between is a 503 all the same (docs/master.md)."""

    def __init__(self, min_free, period_ms=_FREE_MS):
        self.min_free = min_free
        self.period = period_ms
        self.at = None  # ticks_ms of the last look, None before the first
        self.free = 0  # what it found

    def short(self, now):
        if not _HAS_MEM_FREE:
            return False  # CPython: no heap of its own to run out of
        if (
            self.at is not None
            and self.free >= 2 * self.min_free
            and ticks_diff(now, self.at) < self.period
        ):
            return False
        free = gc.mem_free()
        if free < self.min_free:
            gc.collect()
            free = gc.mem_free()
        self.at = now
        self.free = free
        return free < self.min_free


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


async def _close(writer):
    try:
        writer.close()
        await writer.wait_closed()
    except Exception:
        pass


def _print_exc(e):
    if sys.implementation.name == "micropython":
        sys.print_exception(e)
    else:
        import traceback

        traceback.print_exception(type(e), e, e.__traceback__)
