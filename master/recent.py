# The ring of the last plan reports and lifecycle events for /status: what was asked, what happened, why it was refused.
#
# `Recent` subscribes to the hub and keeps the newest `size` entries (older ones are counted in
# `dropped`). An entry is built when its event happens (a plan's end, a refusal, an organ's
# arrival or loss): never per heartbeat or per step, so the steady state adds nothing.
from organbus.ticks import ticks_diff

from master.hub import describe

KEPT = ("plan", "rejected", "registered", "refused", "offline", "duplicate", "event")


def stamper(clock, t0):
    """fn() -> ms since `t0` on `clock` (the `t_ms` of /events items and of the ring)."""

    def stamp():
        return ticks_diff(clock(), t0)

    return stamp


class Recent:
    """`items()`: the kept entries, oldest first, each {"t_ms", "event", ...its fields}."""

    def __init__(self, hub, stamp, size=16, events=KEPT):
        self.stamp = stamp
        self.events = events
        self.ring = [None] * size
        self.next = 0
        self.n = 0
        self.dropped = 0
        hub.subscribe(self.on_event, events)

    def on_event(self, event, port, data):
        if event == "event":
            # an organ's EVENT (one per continuous step, on the scheduler's hot path): kept as
            # it came, (t_ms, port, (name, status)) (immutable, so safe to keep), made an
            # entry when the ring is read
            e = (self.stamp(), port, data)
            size = len(self.ring)  # _put, inline
            if self.n == size:
                self.dropped += 1
            else:
                self.n += 1
            self.ring[self.next] = e
            self.next = (self.next + 1) % size
            return
        e = {"t_ms": self.stamp(), "event": event}
        for k, v in describe(event, port, data):
            e[k] = v
        if event == "plan":
            # what was asked beside what happened: the params of every step
            steps = []
            for s in data.steps:
                d = s.entry()
                d["params"] = s.params
                steps.append(d)
            e["steps"] = steps
            e["notes"] = list(data.notes)
        self._put(e)

    def _put(self, e):
        size = len(self.ring)
        if self.n == size:
            self.dropped += 1
        else:
            self.n += 1
        self.ring[self.next] = e
        self.next = (self.next + 1) % size

    def items(self):
        size = len(self.ring)
        start = (self.next - self.n) % size
        return [_entry(self.ring[(start + i) % size]) for i in range(self.n)]

    def last(self, n):
        """The newest `n` entries, oldest first."""
        out = self.items()
        return out[len(out) - n :] if n < len(out) else out


def _entry(e):
    # a ring item as its entry: an EVENT's tuple becomes the dict describe() gives
    if isinstance(e, tuple):
        return {"t_ms": e[0], "event": "event", "port": e[1], "name": e[2][0], "status": e[2][1]}
    return e
