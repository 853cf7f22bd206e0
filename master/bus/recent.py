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
# name, port, status and tick in a preallocated list, no text and no bytes in the buffer, and
# made an entry when the ring is read. `items()` reads them back (only when /status is asked).
# With a `stamper` stamp the ring is the hub's `ring`: the registry's reader hands it each
# EVENT with the tick its bytes came at (`organ_event`, one call; that tick is the clock's
# reading the stamp would take, uart.py feeds with `clock()`), and the stamp is made from
# it when the ring is read; another stamp (a test's counter) hears "event" on the hub.
import json
from array import array

import micropython
from micropython import const

from organbus.ticks import ticks_diff

from master.bus.hub import describe

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


# The ring's numbers in one array of C ints: the counters, then `size` words per field of each
# slot. An organ's EVENT (one per continuous step, on the scheduler's hot path) is written
# by `organ_event`, viper on MicroPython, which reaches all of them through one pointer: as a
# Python method writing six lists and four attributes it took ~4,000 RV32 instructions.
_NEXT = const(0)  # the slot the next entry takes
_N = const(1)  # entries kept
_TAIL = const(2)  # the byte after the newest entry
_DROPPED = const(3)  # entries dropped, in all
_SIZE = const(4)  # slots
_HEARD = const(5)  # organ EVENTs kept, in all (the hub's organ_events, while this is its ring)
_START = const(6)  # then slot i's start in `buf` at _START + i, its length at _START + size + i


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
        self.w = array("i", [0] * (_START + 2 * size))
        self.w[_SIZE] = size
        # slot i's EVENT at ev[4 * i:]: its name (None: the slot's text is in `buf`), port,
        # status and tick (the clock's reading when `t0` is known, else the stamp)
        self.ev = [None] * (4 * size)
        self.t0 = None
        if "event" in events and isinstance(stamp, stamper) and hub.ring is None:
            self.t0 = stamp.t0
            hub.ring = self
            events = tuple([e for e in events if e != "event"])
        hub.subscribe(self.on_event, events)

    @property
    def dropped(self):
        return self.w[_DROPPED]

    @property
    def heard(self):
        return self.w[_HEARD]

    @micropython.viper
    def organ_event(self, port, name, status, tick):
        """An organ's EVENT that came at `tick` (the registry's reader, `t0` known). Viper
        on a board, the same lines on CPython (the shim's ptr32 is the array itself)."""
        w = ptr32(self.w)
        w[_HEARD] += 1
        size = w[_SIZE]
        i = w[_NEXT]
        if w[_N] == size:
            w[_DROPPED] += 1  # full: slot i holds the oldest entry, and it goes
        else:
            w[_N] += 1
        w[_START + i] = w[_TAIL]
        w[_START + size + i] = 0
        ev = self.ev
        k = 4 * i
        ev[k] = name
        ev[k + 1] = port
        ev[k + 2] = status
        ev[k + 3] = tick
        i += 1
        if i == size:
            i = 0
        w[_NEXT] = i

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
        w = self.w
        return (w[_NEXT] - w[_N]) % self.size

    def _oldest_text(self):
        # the slot of the oldest entry kept as text in `buf`, or -1 (only EVENTs are kept)
        w = self.w
        size = self.size
        i = self._oldest()
        for _ in range(w[_N]):
            if self.ev[4 * i] is None:
                return i
            i = (i + 1) % size
        return -1

    def _drop(self):
        w = self.w
        k = 4 * self._oldest()
        self.ev[k] = None
        self.ev[k + 2] = None  # (the status a publisher gave, not kept longer)
        w[_N] -= 1
        w[_DROPPED] += 1

    def _put(self, raw):
        w = self.w
        size = self.size
        n = len(raw)
        pos = w[_TAIL]
        if pos + n > len(self.buf):
            # wrap: the texts from the tail to the end are the oldest; they go first (with the
            # EVENTs before them)
            while w[_N]:
                i = self._oldest_text()
                if i < 0 or w[_START + i] < pos:
                    break
                self._drop()
            pos = 0
        # the oldest text decides: an EVENT keeps no bytes, and the texts after the oldest one
        # lie beyond it, so it alone can overlap [pos, pos + n); the EVENTs before it go with it
        while w[_N]:
            if w[_N] < size:
                i = self._oldest_text()
                if i < 0:
                    break
                a = w[_START + i]
                if a >= pos + n or a + w[_START + size + i] <= pos:
                    break
            self._drop()
        self.buf[pos : pos + n] = raw
        i = w[_NEXT]
        w[_START + i] = pos
        w[_START + size + i] = n
        self.ev[4 * i] = None
        w[_TAIL] = pos + n
        w[_N] += 1
        w[_NEXT] = (i + 1) % size

    def items(self):
        return self._read(False)

    def texts(self):
        """`items()` with each entry as its JSON text: a view of the ring's own bytes (a copy
        of a 490-byte report needs a block a fragmented heap may not have), no objects made
        (HTTP's /status writes them as they are, before any other task runs: jsonout)."""
        return self._read(True)

    def _read(self, text):
        mv = memoryview(self.buf)
        w = self.w
        size = self.size
        ev = self.ev
        n = w[_N]
        out = []
        for k in range(n):
            i = (w[_NEXT] - n + k) % size
            name = ev[4 * i]
            if name is not None:  # an EVENT, as the dict describe() gives
                t = ev[4 * i + 3]
                e = {
                    "t_ms": t if self.t0 is None else ticks_diff(t, self.t0),
                    "event": "event",
                    "port": ev[4 * i + 1],
                    "name": name,
                    "status": ev[4 * i + 2],
                }
                out.append(json.dumps(e).encode() if text else e)
                continue
            a = w[_START + i]
            raw = mv[a : a + w[_START + size + i]]  # a view: no copy of the text
            out.append(raw if text else json.loads(bytes(raw)))
        return out

    def last(self, n):
        """The newest `n` entries, oldest first."""
        out = self.items()
        return out[len(out) - n :] if n < len(out) else out
