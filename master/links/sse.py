# GET /events: the body's hub as a Server-Sent Events stream; one bounded queue and one task per subscriber.
#
# Each stream is a hub `Feed` (a bounded queue filled in the publisher's task, which only copies
# the described event) and the HTTP connection's own task, which writes it: a slow or stalled
# client fills only its own queue, loses the oldest items and is told once how many (`lost`),
# and never holds up the bus or another client. A stream does not hold one of the HTTP
# server's request slots (master/links/httpd.py `write_to`); `max_subscribers` bounds the streams.
import asyncio
import json

from master.bus.hub import EVENTS, Feed

DEFAULTS = {
    "max_subscribers": 3,  # streams at once; one more is answered 503
    "queue": 32,  # items kept per stream while its client is slow
    "keepalive_ms": 15000,  # a comment line when nothing happened for this long
    "stall_ms": 30000,  # a client that takes nothing for this long is closed
}
_HEAD = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}


def item_bytes(event, pairs):
    """One SSE item: `event: KIND`, `data: {...}` in the pairs' order, a blank line."""
    parts = []
    for k, v in pairs:
        parts.append("%s: %s" % (json.dumps(k), json.dumps(v)))
    return ("event: %s\ndata: {%s}\n\n" % (event, ", ".join(parts))).encode()


class Stream:
    """One subscriber's feed, written by its HTTP connection's task (`write_to`)."""

    def __init__(self, events, feed):
        self.events = events
        self.feed = feed
        self.told = 0  # feed.dropped already reported in a `lost` item

    async def write_to(self, writer):
        ev = self.events
        cfg = ev.cfg
        feed = self.feed
        stall = cfg["stall_ms"] / 1000
        _small_buffers(writer)
        writer.write(b": organbus /events\n\n")
        await asyncio.wait_for(writer.drain(), stall)
        while True:
            item = feed.get()
            if item is None:
                try:
                    await asyncio.wait_for(feed.ready.wait(), cfg["keepalive_ms"] / 1000)
                except asyncio.TimeoutError:
                    writer.write(b": keep-alive\n\n")
                    await asyncio.wait_for(writer.drain(), stall)
                continue
            if feed.dropped != self.told:
                n = feed.dropped - self.told
                self.told = feed.dropped
                ev.lost += n
                writer.write(item_bytes("lost", [("t_ms", ev.stamp()), ("count", n)]))
            writer.write(item_bytes(item[0], item[1]))
            ev.sent += 1
            await asyncio.wait_for(writer.drain(), stall)

    def close(self):
        """Unsubscribe (the HTTP server calls it however the stream ended)."""
        self.feed.close()
        if self in self.events.streams:
            self.events.streams.remove(self)


def _small_buffers(writer):
    # CPython (the simulator's host side): the bounded queue, not a socket's megabytes of send
    # buffer, holds what a slow client has not taken, so it loses items as it would on a board
    # (lwIP keeps a few KB per socket). MicroPython's writer has neither call.
    t = getattr(writer, "transport", None)
    if t is not None and hasattr(t, "set_write_buffer_limits"):
        t.set_write_buffer_limits(high=2048)
    try:
        import socket

        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    except Exception:
        pass


class StampedFeed(Feed):
    """A Feed whose items carry `t_ms` (when the hub published them) first."""

    def __init__(self, hub, size, stamp, events=EVENTS):
        self.stamp = stamp
        super().__init__(hub, size, events)

    def on_event(self, event, port, data):
        Feed.on_event(self, event, port, data)
        last = self.items[(self.head + self.n - 1) % len(self.items)]
        last[1].insert(0, ("t_ms", self.stamp()))


class Events:
    """The /events route over a hub: `routes()`, `stats()` (for /status)."""

    def __init__(self, hub, stamp, config=None):
        cfg = dict(DEFAULTS)
        if config:
            for k in config:
                if k in DEFAULTS:
                    cfg[k] = int(config[k])
        self.cfg = cfg
        self.hub = hub
        self.stamp = stamp
        self.streams = []
        self.sent = 0
        self.lost = 0
        self.refused = 0

    async def handle(self, req):
        if len(self.streams) >= self.cfg["max_subscribers"]:
            self.refused += 1
            why = "%d event streams already, the most this body serves" % len(self.streams)
            return 503, {"error": why}, {"Retry-After": "5"}
        try:
            feed = StampedFeed(self.hub, self.cfg["queue"], self.stamp)
        except ValueError as e:  # the hub's own subscriber limit
            self.refused += 1
            return 503, {"error": str(e)}, {"Retry-After": "5"}
        s = Stream(self, feed)
        self.streams.append(s)
        return 200, s, _HEAD

    def stats(self):
        lost = self.lost  # told in `lost` items, and dropped from the queues not told yet
        for s in self.streams:
            lost += s.feed.dropped - s.told
        return {
            "subscribers": len(self.streams),
            "max_subscribers": self.cfg["max_subscribers"],
            "sent": self.sent,
            "lost": lost,
            "refused": self.refused,
        }

    def routes(self):
        return {("GET", "/events"): self.handle}


def start(body, config):
    """The link's entry: the /events route over the Body's hub (config "events": DEFAULTS),
    its counters in /status."""
    events = Events(body, body.stamp, config.get("events"))
    body.add_status_section("events", events.stats)
    return events.routes()
