# The master's /status document: ports and organs as they are now, plans and steps as the hub told them.
#
# `Status` subscribes to the hub and keeps small counters of what it hears (plans finished and
# rejected, the final statuses of finished plans' steps, offline and decoder events): integer
# updates of keys that exist from the start, so listening allocates nothing, and it does not
# ask for per-step events (counted once per finished plan instead). Organ EVENTs (one per
# continuous step) it does not hear: the hub counts them (`hub.organ_events`), no call each.
# `document(now)` builds the dict (only when asked).
from organbus.ticks import ticks_diff

from master.bus.outcome import FINAL

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
        if now is None:
            now = self.clock()
        organs = []
        ports = []
        sched = self.scheduler
        for p in self.ports:
            s = self.registry.slot(p.index)
            age = None if p.last_rx is None else ticks_diff(now, p.last_rx)
            if s.organ is not None:
                d = s.organ
                organs.append(
                    {
                        "module_id": d["module_id"],
                        "module_type": d["module_type"],
                        "hw_version": "%d.%d" % (d["hw_version"] >> 8, d["hw_version"] & 255),
                        "fw_version": "%d.%d" % (d["fw_version"] >> 8, d["fw_version"] & 255),
                        "port": p.index,
                        "online": s.online,
                        "last_frame_age_ms": age,
                        "abilities": list(s.owned) if s.online else [],
                        "duplicates": list(s.duplicates),
                        "refusals": [r[0] for r in s.refusals],
                    }
                )
            ports.append(
                {
                    "port": p.index,
                    "online": s.online,
                    "module_id": s.organ["module_id"] if s.online else None,
                    "last_frame_age_ms": age,
                    "refusals": [
                        {"reason": r[0], "count": r[1], "age_ms": ticks_diff(now, r[2])}
                        for r in s.refusals
                    ],
                    "discover_sent": s.discovers,
                    "ack_sent": s.acks,
                    "descriptors": s.descriptors,
                    "bad_payloads": s.bad_payloads,
                    "frames_sent": p.sent,
                    "tx_dropped": getattr(p.tx, "dropped", 0),  # the UART edge's full ring
                    "counters": p.decoder.counters(),
                }
            )
        doc = {
            "protocol": 3,
            "uptime_ms": ticks_diff(now, self.t0),
            "mode": self.mode,
            "organ_ports": [p.index for p in self.ports],
            "organs": organs,
            "ports": ports,
            "plans": {
                "accepted": self.accepted(),
                "refused": self.rejected,
                "running": len(sched.runs),
                "finished": self.finished,
                "commands_sent": sched.sent,
                "stray_resps": sched.stray_resps,
                "stray_events": self.registry.stray_events,
                "steps": dict(self.steps),
                "organ_events": self.hub.organ_events - self.events0,
            },
            "busy_groups": sched.busy_groups(),
            "hub": {"subscribers": len(self.hub.subs), "errors": self.hub.errors},
        }
        for k, fn, tf in self.parts:
            doc[k] = tf() if text and tf is not None else fn()
        if self.note:
            doc["note"] = self.note
        return doc
