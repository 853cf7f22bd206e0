# The sans-IO master on a live asyncio loop (fake organs, its clock driven by real time) with its HTTP routes, and a plain SSE client.
import asyncio
import json
import threading
import time

import loopback
from master import app
from master.links import httpd
from master_rig import FakeOrgan, Rig, led, speaker


class LiveRig:
    """`master_rig.Rig` (LED on port 0, speaker on port 1) whose fake clock moves `speed` ms
    per real ms in a task of its own loop, in a thread; the master's HTTP routes on loopback."""

    def __init__(self, config=None, http_config=None, speed=1, step=10):
        self.rig = Rig(start=False)
        self.rig.attach(0, FakeOrgan(led()))
        self.rig.attach(1, FakeOrgan(speaker()))
        self.config = config or {}
        self.http_config = http_config or {}
        self.speed = speed
        self.step = step
        self.loop = None
        self.server = None
        self.port = None
        self.extra = []  # coroutines started in the loop beside the server (fn(rig) -> coro)
        self.ticks = 0

    def start(self):
        ready = threading.Event()

        def run():
            self.loop = asyncio.new_event_loop()
            self.loop.set_exception_handler(_quiet_cancel)
            self.loop.run_until_complete(self._main(ready))

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert ready.wait(10), "the live rig did not start"
        return self

    async def _main(self, ready):
        self.rig.body.start(self.rig.now)
        self.rig.advance(100)
        self.loops = app.start_loops(self.rig.body, self.config)
        routes = app.http_routes(self.rig.body, self.config)
        self.server = await httpd.serve(routes, "127.0.0.1", 0, self.http_config)
        self.port = self.server.port
        self.stopping = asyncio.Event()
        for fn in self.extra:
            asyncio.ensure_future(fn(self))
        ready.set()
        t = time.monotonic()
        while not self.stopping.is_set():
            await asyncio.sleep(self.step / 1000 / self.speed)
            now = time.monotonic()
            ms = int((now - t) * 1000 * self.speed) // self.step * self.step
            if ms:
                t += ms / 1000 / self.speed
                self.rig.advance(min(ms, 200), self.step)
                self.ticks += 1
        self.server.close()
        me = asyncio.current_task()
        rest = [t for t in asyncio.all_tasks() if t is not me]
        for t in rest:
            t.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def call(self, fn, timeout=10):
        """Run fn() inside the loop (the rig is not thread-safe) and return its result."""
        done = threading.Event()
        out = []

        def go():
            try:
                out.append((True, fn()))
            except Exception as e:  # handed back to the test
                out.append((False, e))
            done.set()

        self.loop.call_soon_threadsafe(go)
        assert done.wait(timeout), "the rig's loop did not answer"
        ok, v = out[0]
        if not ok:
            raise v
        return v

    def plan(self, plan, timeout=30):
        """POST /plan over HTTP: (status, answer)."""
        return http(self.port, "POST", "/plan", plan, timeout=timeout)

    def stop(self):
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.stopping.set)
            self.thread.join(5)


def _quiet_cancel(loop, ctx):
    # CPython 3.11's stream callback asks a cancelled connection task for its exception at
    # shutdown; anything else is reported as usual.
    if isinstance(ctx.get("exception"), asyncio.CancelledError):
        return
    loop.default_exception_handler(ctx)


def http(port, method, path, obj=None, headers=None, timeout=10):
    status, _, content = loopback.request(("127.0.0.1", port), method, path, obj, headers, timeout)
    return status, (json.loads(content) if content else None)


class SseClient:
    """A plain loopback client of GET /events: `status`, `headers`, `next(timeout)` ->
    (event, data) (comments are counted in `comments`), `close()`."""

    def __init__(self, port, headers=None, rcvbuf=None, path="/events"):
        self.s = loopback.open_stream(("127.0.0.1", port), path, headers, rcvbuf)
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            c = self.s.recv(4096)
            if not c:
                break
            self.buf += c
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split(" ")[1])
        self.headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self.comments = 0
        self.items = []  # complete items read but not yet taken
        self.body = b""  # the whole answer when it was not a stream

    def read_body(self):
        while True:
            c = self.s.recv(65536)
            if not c:
                break
            self.buf += c
        return json.loads(self.buf) if self.buf else None

    def next(self, timeout=10):
        """The next item as (event, data dict); None at the end of the stream."""
        end = time.monotonic() + timeout
        while not self.items:
            items, self.buf, comments = loopback.sse_items(self.buf)
            self.items.extend(items)
            self.comments += comments
            if self.items:
                break
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError("no SSE item within %s s" % timeout)
            self.s.settimeout(left)
            c = self.s.recv(65536)
            if not c:
                return None
            self.buf += c
        return self.items.pop(0)

    def until(self, pred, timeout=10):
        """Items read until pred(event, data) is true: the list, the match last."""
        end = time.monotonic() + timeout
        out = []
        while True:
            it = self.next(max(0.01, end - time.monotonic()))
            if it is None:
                raise EOFError("stream ended; got %r" % out)
            out.append(it)
            if pred(*it):
                return out

    def close(self):
        self.s.close()
