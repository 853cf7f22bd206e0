# The body event hub: the one place the master publishes what happens; the event log, /status and links read it.
#
# Publishers (registry, scheduler, ports, Body) call `hub.publish(event, port, data)`: `event`
# one of EVENTS, `port` the organ port's number or None, `data` the object the event is about,
# handed over as it is (no dict, no tuple built for it), so a publish allocates nothing and,
# with nobody subscribed, costs one loop over an empty list. Nothing is published per
# heartbeat or per repeated DESCRIPTOR: the steady state publishes nothing at all.
#
# A subscriber is `fn(event, port, data)`, called at once in the publisher's task, in
# subscription order, for the events it subscribed to (`subscribe(fn, events)`, all when None:
# the filter is a tuple test in the loop, so an event nobody asked for costs no call). It must return at once and never keep `data` (a Step or a Slot goes on
# changing): copy what it needs, e.g. `describe(event, port, data)`, into its own bounded
# queue (`Feed`) and let its own task do the slow part (a socket write, a model call). An
# exception from a subscriber is caught and counted (`hub.errors`, `hub.last_error`), never
# raised into the bus; the publishers' work is done before they publish.
#
#   event        port  data                      describe() pairs
#   registered   n     registry.Slot              module_id module_type capabilities again
#                                                 (again true: an organ back after offline/reboot)
#   refused      n     reason (str)               reason
#   offline      n     registry.Slot              module_id
#   duplicate    n     (module_id, name)          module_id name
#   menu         None  (version, added, removed)  version added removed (ability names)
#   step         n     run.Step                   plan task_id action status [ms] [reason]
#                      (status "sent" when dispatched, "running" when a continuous step was
#                      accepted, else its final status: done started refused timeout offline
#                      stopped skipped; port None for a step that never reached an organ)
#   event        n     (name, status)             name status (an organ's EVENT done)
#   plan         None  run.Run                    plan ok steps (a plan finished: its report)
#   rejected     None  problems (list of str)     problems (a plan refused before it ran)
#   decoder      n     frame.Decoder              its counters (published when an error
#                                                 counter moved, at most once per port poll)
from organbus import log
from organbus.frame import COUNTER_NAMES

EVENTS = (
    "registered",
    "refused",
    "offline",
    "duplicate",
    "menu",
    "step",
    "event",
    "plan",
    "rejected",
    "decoder",
)
MAX_SUBSCRIBERS = 16  # log, status, ring, nudges, idle loop, MCP, /events streams


class Hub:
    """`subscribe(fn, events=None) -> fn`, `unsubscribe(fn)`, `publish(event, port, data)`."""

    def __init__(self, limit=MAX_SUBSCRIBERS):
        self.subs = []  # (fn, events or None)
        # event -> how many subscribers hear it: a hot path (a step per COMMAND_RESP) checks
        # `hub.wants["step"]` and skips the call when nobody asked for the event
        self.wants = {}
        # event -> a tuple of the subscribers' fns that hear it, in subscription order (rebuilt
        # on every (un)subscribe; events nobody hears are left out): a publish walks only those
        self._to = {}
        for e in EVENTS:
            self.wants[e] = 0
        self.limit = limit
        # Organ EVENTs, one per continuous step on the scheduler's hot path, are also kept
        # here without a call out: their count (`organ_events`, /status's tally) and, when one
        # took them, the /status ring (`ring`, master/bus/recent.py), which then keeps and counts
        # every "event" itself: the registry's reader hands its EVENTs to the ring (or counts
        # them here) inline, and `publish("event", ...)` does the same for other publishers.
        self._events = 0  # the organ EVENTs no ring counted
        self.ring = None
        self.errors = 0
        self.last_error = None  # repr of the last exception a subscriber raised

    def subscribe(self, fn, events=None):
        """Call `fn(event, port, data)` for each event in `events` (a tuple of EVENTS names;
        None: every event)."""
        if len(self.subs) >= self.limit:
            raise ValueError("hub: %d subscribers already, the most it takes" % self.limit)
        if events is not None:
            for e in events:
                if e not in EVENTS:
                    raise ValueError("hub: no event %r (events: %s)" % (e, ", ".join(EVENTS)))
            events = tuple(events)
        self.subs.append((fn, events))
        self._count()
        return fn

    def unsubscribe(self, fn):
        for sub in self.subs:
            if sub[0] == fn:
                self.subs.remove(sub)
                self._count()
                return

    def _count(self):
        to = {}
        for e in EVENTS:
            fns = [fn for fn, events in self.subs if events is None or e in events]
            self.wants[e] = len(fns)
            if fns:
                to[e] = tuple(fns)
        self._to = to

    @property
    def organ_events(self):
        """Organ EVENTs published, in all."""
        if self.ring is None:
            return self._events
        return self._events + self.ring.heard

    def publish(self, event, port, data):
        if event == "event":
            if self.ring is None:
                self._events += 1
            else:
                try:
                    self.ring.on_event(event, port, data)
                except Exception as e:  # a subscriber never raises into the bus
                    self._events += 1  # (its stamp raised: the ring neither kept nor counted it)
                    self.failed(e)
        for fn in self._to.get(event, ()):
            try:
                fn(event, port, data)
            except Exception as e:  # a subscriber never raises into the bus
                self.failed(e)

    def failed(self, e):
        """Count `e`, raised by a subscriber (for publishers that walk `_to` themselves: the
        registry's EVENT path)."""
        self.errors += 1
        self.last_error = repr(e)


def describe(event, port, data):
    """The (key, value) pairs of one hub event, "port" first when there is one (a new list)."""
    out = [] if port is None else [("port", port)]
    if event == "registered":
        d = data.organ
        out += [
            ("module_id", d["module_id"]),
            ("module_type", d["module_type"]),
            ("capabilities", [c["name"] for c in d["capabilities"]]),
            ("again", data.again),
        ]
    elif event == "offline":
        out.append(("module_id", data.organ["module_id"]))
    elif event == "refused":
        out.append(("reason", data))
    elif event == "duplicate":
        out += [("module_id", data[0]), ("name", data[1])]
    elif event == "menu":
        out += [("version", data[0]), ("added", list(data[1])), ("removed", list(data[2]))]
    elif event == "step":
        out += [
            ("plan", data.run.seq),
            ("task_id", data.task_id),
            ("action", data.action),
            ("status", data.status),
        ]
        if data.ms is not None:
            out.append(("ms", data.ms))
        if data.reason:
            out.append(("reason", data.reason))
    elif event == "event":
        out += [("name", data[0]), ("status", data[1])]
    elif event == "plan":
        r = data.report()
        out += [("plan", data.seq), ("ok", r["ok"]), ("steps", r["steps"])]
    elif event == "rejected":
        out.append(("problems", list(data)))
    elif event == "decoder":
        c = data.counters()
        out += [(k, c[k]) for k in COUNTER_NAMES if k in c]
    return out


# Lines the event log prints (docs/DESIGN.md "Event log"): the lifecycle, as tools read it.
LOGGED = ("registered", "refused", "offline", "duplicate")


class EventLog:
    """The master's event log: one `organbus.log` line per lifecycle event on the hub."""

    def __init__(self, hub, emit=log.emit, events=LOGGED):
        self.emit = emit
        hub.subscribe(self.on_event, events)

    def on_event(self, event, port, data):
        self.emit(event, describe(event, port, data))


class Feed:
    """A bounded queue of described hub events for one consumer (an SSE stream, a link).

    Keeps the newest `size` events; older ones are dropped and counted (`dropped`), so a slow
    consumer never holds the bus. `get() -> (event, pairs) | None`; `await wait()` until one
    is there; `close()` unsubscribes."""

    def __init__(self, hub, size=16, events=EVENTS):
        import asyncio

        self.hub = hub
        self.events = events
        self.items = [None] * size
        self.head = 0
        self.n = 0
        self.dropped = 0
        self.ready = asyncio.Event()
        hub.subscribe(self.on_event, events)

    def on_event(self, event, port, data):
        item = (event, describe(event, port, data))
        size = len(self.items)
        if self.n == size:
            self.items[self.head] = None
            self.head = (self.head + 1) % size
            self.n -= 1
            self.dropped += 1
        self.items[(self.head + self.n) % size] = item
        self.n += 1
        self.ready.set()

    def get(self):
        if not self.n:
            return None
        item = self.items[self.head]
        self.items[self.head] = None
        self.head = (self.head + 1) % len(self.items)
        self.n -= 1
        if not self.n:
            self.ready.clear()
        return item

    async def wait(self):
        while not self.n:
            await self.ready.wait()
        return self.get()

    def close(self):
        self.hub.unsubscribe(self.on_event)
