# The master's /status document: ports and organs as they are now, plans and steps as the hub told them.
#
# `Status` subscribes to the hub and keeps small counters of what it hears (plans finished and
# rejected, the final statuses of finished plans' steps, offline and decoder events): integer
# updates of keys that exist from the start, so listening allocates nothing, and it does not
# ask for per-step events (counted once per finished plan instead). Organ EVENTs (one per
# continuous step) it does not hear: the hub counts them (`hub.organ_events`), no call each.
# `document(now)` is the document made as it is walked (only when asked): its objects `Pairs`,
# a section built when it is written and let go after, so a fragmented heap that has no block
# for a dict's hash table still serves it (issue 24, defect 8; docs/master.md).
from organbus.ticks import ticks_diff

from master.bus.outcome import FINAL
from master.bus.pairs import Pairs, plain

_HEARS = ("plan", "rejected", "offline", "decoder")  # and organ EVENTs, counted by the hub
_STEP_ENDS = FINAL


class Status:
    """`ports` (Port list), `registry`, `scheduler`, `hub`; `clock() -> ms tick`."""

    def __init__(self, ports, registry, scheduler, hub, clock, mode="two-port", note=None):
        self.ports = ports
        self.registry = registry
        self.scheduler = scheduler
        self.clock = clock
        self.mode = mode
        self.note = note
        self.t0 = clock()
        self.finished = 0  # plans that ran to their report
        self.rejected = 0  # plans refused before anything ran
        self.steps = {}
        for k in _STEP_ENDS:
            self.steps[k] = 0
        self.events0 = hub.organ_events  # the hub's count of organ EVENTs when this started
        self.offline = 0
        self.decoder_events = 0
        self.hub = hub
        self.parts = []  # (key, fn() -> its value) of the links' and loops' own sections
        self.ends = []  # (key, fn()) of the values after them (the Body's speak_ready)
        hub.subscribe(self.on_event, _HEARS)

    def attach(self, key, fn, text=None):
        """Add a section `key` to the document, its value `fn()` when it is built; `text()`,
        when given, is the same value with JSON text (bytes) in place of its objects, for an
        answer written piece by piece (HTTP: `document(text=True)`)."""
        self.parts.append((key, fn, text))

    def on_event(self, event, port, data):
        if event == "plan":
            self.finished += 1
            steps = self.steps
            for s in data.steps:
                if s.status in steps:
                    steps[s.status] += 1
        elif event == "rejected":
            self.rejected += 1
        elif event == "offline":
            self.offline += 1
        elif event == "decoder":
            self.decoder_events += 1

    def accepted(self):
        return self.finished + len(self.scheduler.runs)

    def document(self, now=None, text=False):
        """The /status document as Pairs made as it is walked (with JSON text, bytes, for the
        ring's entries when `text`: HTTP's answer), else as dicts."""
        if now is None:
            now = self.clock()
        doc = Pairs(lambda: self._pairs(now, text))
        return doc if text else plain(doc)

    def _pairs(self, now, text):
        sched = self.scheduler
        yield "protocol", 3
        yield "uptime_ms", ticks_diff(now, self.t0)
        yield "mode", self.mode
        yield "organ_ports", [p.index for p in self.ports]
        yield "organs", (self._organ(p, now) for p in self.ports if self._slot(p).organ is not None)
        yield "ports", (self._port(p, now) for p in self.ports)
        steps = self.steps
        yield "plans", Pairs(
            [
                ("accepted", self.accepted()),
                ("refused", self.rejected),
                ("running", len(sched.runs)),
                ("finished", self.finished),
                ("commands_sent", sched.sent),
                ("stray_resps", sched.stray_resps),
                ("stray_events", self.registry.stray_events),
                ("steps", Pairs([(k, steps[k]) for k in _STEP_ENDS])),
                ("organ_events", self.hub.organ_events - self.events0),
            ]
        )
        yield "busy_groups", sched.busy_groups()
        yield "hub", Pairs([("subscribers", len(self.hub.subs)), ("errors", self.hub.errors)])
        for k, fn, tf in self.parts:
            yield k, tf() if text and tf is not None else fn()
        if self.note:
            yield "note", self.note
        for k, fn in self.ends:
            yield k, fn()

    def _slot(self, p):
        return self.registry.slot(p.index)

    def _age(self, p, now):
        return None if p.last_rx is None else ticks_diff(now, p.last_rx)

    def _organ(self, p, now):
        s = self._slot(p)
        d = s.organ
        return Pairs(
            [
                ("module_id", d["module_id"]),
                ("module_type", d["module_type"]),
                ("hw_version", "%d.%d" % (d["hw_version"] >> 8, d["hw_version"] & 255)),
                ("fw_version", "%d.%d" % (d["fw_version"] >> 8, d["fw_version"] & 255)),
                ("port", p.index),
                ("online", s.online),
                ("last_frame_age_ms", self._age(p, now)),
                ("abilities", list(s.owned) if s.online else []),
                ("duplicates", list(s.duplicates)),
                ("refusals", [r[0] for r in s.refusals]),
            ]
        )

    def _port(self, p, now):
        from organbus.frame import COUNTER_NAMES  # here: jsonout takes Pairs without the bus

        s = self._slot(p)
        dec = p.decoder
        return Pairs(
            [
                ("port", p.index),
                ("online", s.online),
                ("module_id", s.organ["module_id"] if s.online else None),
                ("last_frame_age_ms", self._age(p, now)),
                (
                    "refusals",
                    [
                        Pairs(
                            [
                                ("reason", r[0]),
                                ("count", r[1]),
                                ("age_ms", ticks_diff(now, r[2])),
                            ]
                        )
                        for r in s.refusals
                    ],
                ),
                ("discover_sent", s.discovers),
                ("ack_sent", s.acks),
                ("descriptors", s.descriptors),
                ("bad_payloads", s.bad_payloads),
                ("frames_sent", p.sent),
                ("tx_dropped", getattr(p.tx, "dropped", 0)),  # the UART edge's full ring
                ("counters", Pairs([(k, getattr(dec, k)) for k in COUNTER_NAMES])),
            ]
        )
