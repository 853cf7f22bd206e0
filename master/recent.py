# The ring of the last plan reports and lifecycle events for /status: what was asked, what happened, why it was refused.
#
# `Recent` subscribes to the hub and keeps the newest `size` entries (older ones are counted in
# `dropped`). An entry is built when its event happens (a plan's end, a refusal, an organ's
# arrival or loss): never per heartbeat or per step, so the steady state adds nothing.
#
# The entries are kept as their JSON text, back to back in one bytearray of `cap` bytes taken
# at boot (a ring of dicts, each built while a request's garbage lay beside it and kept for 16
# plans, pinned holes all over a small heap until a plan's 416-byte coroutine found no block:
# docs/master.md); a new entry overwrites the oldest ones it needs room from. An entry over a
# quarter of `cap` loses its steps' params, then its steps (their count kept), and says so in
# "cut". An organ's EVENT (one per continuous step, on the scheduler's hot path) is kept as its
# tick, port, name and status in preallocated lists, no text and no bytes in the buffer, and
# made an entry when the ring is read. `items()` reads them back (only when /status is asked).
# With a `stamper` stamp the ring is the hub's `ring`: the registry's reader hands it each
# EVENT with the tick its bytes came at (`organ_event`, one call; that tick is the clock's
# reading the stamp would take, uart.py feeds with `clock()`), and the stamp is made from
# it when the ring is read; another stamp (a test's counter) hears "event" on the hub.
import json

from organbus.ticks import ticks_diff

from master.hub import describe

KEPT = ("plan", "rejected", "registered", "refused", "offline", "duplicate", "event")
CAP = 3072  # bytes of the entries' JSON (a one-step plan's report: 190, an organ's arrival: 160)


class stamper:
    """stamper(clock, t0)() -> ms since `t0` on `clock` (the `t_ms` of /events items and of the
    ring); `clock` and `t0` are there for the ring, which stamps EVENTs from their tick."""

    def __init__(self, clock, t0):
        self.clock = clock
        self.t0 = t0

    def __call__(self):
        return ticks_diff(self.clock(), self.t0)


def _fit(e, slot):
    """The UTF-8 JSON of entry `e` in at most `slot` bytes, shortened as said above."""
    data = json.dumps(e).encode()
    if len(data) <= slot:
        return data
    steps = e.get("steps")
    if steps:
        for d in steps:
            d.pop("params", None)
        e["cut"] = "params"
        data = json.dumps(e).encode()
        if len(data) <= slot:
            return data
        e["steps"] = len(steps)
        e["cut"] = "steps"
        data = json.dumps(e).encode()
        if len(data) <= slot:
            return data
    out = {"t_ms": e["t_ms"], "event": e["event"], "cut": "all"}
    return json.dumps(out).encode()


class Recent:
    """`items()`: the kept entries, oldest first, each {"t_ms", "event", ...its fields}."""

    def __init__(self, hub, stamp, size=16, events=KEPT, cap=CAP):
        if size < 1 or cap < 256:
            raise ValueError(
                "recent ring: size >= 1 and cap >= 256 bytes, not %r, %r" % (size, cap)
            )
        self.stamp = stamp
        self.events = events
        self.size = size
        self.buf = bytearray(cap)
        self.starts = [0] * size
        self.lens = [0] * size
        # an EVENT entry: its name (None: the entry's text is in `buf`), port, status, tick
        # (the clock's reading when `t0` is known, else the stamp)
        self.ev_name = [None] * size
        self.ev_port = [0] * size
        self.ev_status = [0] * size
        self.ev_tick = [0] * size
        self.t0 = None
        self.tail = 0  # the byte after the newest entry
        self.next = 0
        self.n = 0
        self.dropped = 0
        if "event" in events and isinstance(stamp, stamper) and hub.ring is None:
            self.t0 = stamp.t0
            hub.ring = self
            events = tuple([e for e in events if e != "event"])
        hub.subscribe(self.on_event, events)

    def organ_event(self, port, name, status, tick):
        """An organ's EVENT that came at `tick` (the registry's reader, with `t0` known)."""
        i = self.next
        if self.n == self.size:
            self.dropped += 1  # full: slot i holds the oldest entry, and it goes
        else:
            self.n += 1
        self.starts[i] = self.tail
        self.lens[i] = 0
        self.ev_name[i] = name
        self.ev_port[i] = port
        self.ev_status[i] = status
        self.ev_tick[i] = tick
        i += 1
        self.next = 0 if i == self.size else i

    def on_event(self, event, port, data):
        if event == "event":
            t = self.stamp() if self.t0 is None else self.stamp.clock()
            self.organ_event(port, data[0], data[1], t)
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
        raw = _fit(e, len(self.buf) // 4)
        e = None
        self._put(raw)

    def _oldest(self):
        return (self.next - self.n) % self.size

    def _drop(self):
        self.ev_name[self._oldest()] = None
        self.n -= 1
        self.dropped += 1

    def _put(self, raw):
        n = len(raw)
        pos = self.tail
        if pos + n > len(self.buf):
            # wrap: the entries from the tail to the end are the oldest; they go first
            while self.n and self.starts[self._oldest()] >= pos:
                self._drop()
            pos = 0
        while self.n:
            i = self._oldest()
            a = self.starts[i]
            if self.n < self.size and (a >= pos + n or a + self.lens[i] <= pos):
                break
            self._drop()
        self.buf[pos : pos + n] = raw
        i = self.next
        self.starts[i] = pos
        self.lens[i] = n
        self.ev_name[i] = None
        self.tail = pos + n
        self.n += 1
        self.next = (i + 1) % self.size

    def items(self):
        mv = memoryview(self.buf)
        out = []
        for k in range(self.n):
            i = (self.next - self.n + k) % self.size
            name = self.ev_name[i]
            if name is not None:  # an EVENT, as the dict describe() gives
                t = self.ev_tick[i]
                out.append(
                    {
                        "t_ms": t if self.t0 is None else ticks_diff(t, self.t0),
                        "event": "event",
                        "port": self.ev_port[i],
                        "name": name,
                        "status": self.ev_status[i],
                    }
                )
                continue
            a = self.starts[i]
            out.append(json.loads(bytes(mv[a : a + self.lens[i]])))
        return out

    def last(self, n):
        """The newest `n` entries, oldest first."""
        out = self.items()
        return out[len(out) - n :] if n < len(out) else out
