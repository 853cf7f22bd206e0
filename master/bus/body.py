# The Body facade every link uses (menu, status, check/submit/execute a plan, speak_ready) and the
# sans-IO master's wiring (`build`).
#
# One plan path for every link: raw bytes (or a plan built in code by `plan.one_step`) ->
# `plan.parse` (the strict reader, the one size limit `plan.MAX_PLAN_BYTES`) -> `plan.check`
# against the live capabilities -> the scheduler. The Body says what happened as an outcome
# kind (master/bus/outcome.py); only the links choose a status code for it (master/links/routes.py).
from organbus import menu as _menu
from organbus import plan as _plan
from organbus.ticks import ticks_diff

from master.bus.hub import Hub
from master.bus.outcome import ACCEPTED, PROBLEMS, REPORT, TOO_LARGE, UNREADABLE  # noqa: F401
from master.bus.owners import Owners
from master.bus.port import Port
from master.bus.recent import Recent, stamper
from master.bus.registry import Registry
from master.bus.scheduler import Scheduler
from master.bus.status import Status

_FAR_MS = 60000
SPEAK_FRESH_MS = 3000  # speak_ready wants a frame from the speaker this recently (heartbeat 1 s)


def build(txs, clock, mode="two-port", max_steps=16, note=None, hub=None):
    """The sans-IO master over `txs` ({port number: tx with send(frame), command(frame) and unread()}), in
    dependency order: every object gets what it calls in its constructor."""
    if hub is None:
        hub = Hub()
    owners = Owners()
    scheduler = Scheduler(owners, hub)
    indexes = sorted(txs)
    registry = Registry(indexes, owners, scheduler, hub)
    ports = [Port(i, txs[i], registry, hub) for i in indexes]
    status = Status(ports, registry, scheduler, hub, clock, mode, note)
    b = Body(ports, registry, owners, scheduler, status, hub, clock, max_steps)
    b.recent = Recent(hub, b.stamp)
    status.attach("recent", b.recent.items, b.recent.texts)
    status.ends.append(("speak_ready", b.speak_ready))  # last, after the links' sections
    return b


class Body:
    """The live body: its ports, registry, owners, scheduler and status, read through `clock()`."""

    def __init__(self, ports, registry, owners, scheduler, status, hub, clock, max_steps=16):
        self.ports = ports
        self.registry = registry
        self.owners = owners
        self.scheduler = scheduler
        self.sheet = status  # the /status document's builder (master/bus/status.py)
        self.hub = hub
        self.clock = clock
        self.max_steps = max_steps
        self.mode = status.mode
        self.stamp = stamper(clock, status.t0)  # fn() -> ms since boot: every item's t_ms
        self.recent = None  # the /status ring of plan reports and events (master/bus/recent.py)
        self.idle = None  # the local loop (master/bus/idle.py), when the config names one

    def port(self, index):
        for p in self.ports:
            if p.index == index:
                return p
        raise KeyError(index)

    def start(self, now=None):
        """Boot: DISCOVER on every organ port."""
        if now is None:
            now = self.clock()
        for p in self.ports:
            p.start(now)

    def poll(self, now=None):
        """Every timer of the master (ports: quiet line; registry: offline; scheduler:
        timeouts, group releases); returns ms until the next is due."""
        if now is None:
            now = self.clock()
        # in this order: frames a quiet line releases first, then the offline rule, then the
        # timeouts (a COMMAND_RESP the decoder still held is never judged late)
        wait = _FAR_MS
        for p in self.ports:
            w = p.poll(now)
            if w < wait:
                wait = w
        w = self.registry.poll(now)
        if w < wait:
            wait = w
        w = self.scheduler.poll(now)
        if w < wait:
            wait = w
        if self.idle is not None:
            w = self.idle.poll(now)
            if w < wait:
                wait = w
        return wait

    @property
    def refused(self):
        return self.sheet.rejected

    @property
    def accepted(self):
        return self.sheet.accepted()

    def menu(self):
        """The section 8 menu with plan_schema, built afresh from the live abilities at each
        call: never kept (about 7 KB of objects for two organs on the 64-bit unix port, 3.5 KB
        on the C6, that a small heap needs between menu reads; docs/master.md)."""
        return _menu.build_menu(self.owners.capabilities(), self.max_steps)

    def check(self, raw, dups=()):
        """(kind, plan, problems, notes) without running anything. `raw`: the plan's bytes or
        text, or a plan object (built in code by `plan.one_step`, or read strictly by a link,
        which passes the duplicate keys it saw as `dups`)."""
        if isinstance(raw, (bytes, bytearray, memoryview, str)):
            try:
                raw, dups = _plan.parse(raw)
            except _plan.TooLarge as e:
                return TOO_LARGE, None, [e.msg], []
            except _plan.ParseError as e:
                return UNREADABLE, None, [e.msg], []
        p, problems, notes = _plan.check(raw, self.owners.capabilities(), dups, self.max_steps)
        return (PROBLEMS if problems else ACCEPTED), p, problems, notes

    def submit(self, raw, on_accept=None, on_done=None, dups=()):
        """Sans-IO execute: (ACCEPTED, Run) or (PROBLEMS | UNREADABLE | TOO_LARGE, {"problems",
        "notes"})."""
        kind, p, problems, notes = self.check(raw, dups)
        if problems:
            self.hub.publish("rejected", None, problems)
            return kind, {"problems": problems, "notes": notes}
        now = self.clock()
        if self.idle is not None:
            self.idle.preempt(now)  # a link's plan: the idle plan gives way first
        return ACCEPTED, self.scheduler.submit(p, notes, now, on_accept, on_done)

    def cancel(self, run, why):
        """A link's client withdrew `run` (MCP notifications/cancelled): its steps not sent yet
        are skipped with `why`, its running steps give their resource groups up, so the
        group's next COMMAND goes out now and the organ stops the old one (Scheduler.give_way;
        PROTOCOL.md has no frame that stops a command by itself)."""
        self.scheduler.give_way(run, why, self.clock())

    async def execute(self, raw, on_accept=None, dups=()):
        """(REPORT, report) once every step has its final status, else (kind, {"problems"})."""
        import asyncio  # only here: the rest of the Body is sans-IO and runs without it

        ev = asyncio.Event()
        kind, run = self.submit(raw, on_accept, lambda r: ev.set(), dups)
        if kind != ACCEPTED:
            return kind, run
        if not run.finished:
            await ev.wait()
        return REPORT, run.report()

    def speak_ready(self):
        """True when a plan with `speak` would reach a live speaker now (Body Protocol /status)."""
        own = self.owners.owner("speak")
        if own is None:
            return False
        port = own[0]
        cap = own[1]
        if port.last_rx is None or ticks_diff(self.clock(), port.last_rx) > SPEAK_FRESH_MS:
            return False
        group = cap["resource_group"]
        return not group or self.scheduler.queued(group) < self.max_steps

    def status(self, text=False):
        """The /status document; `text`: the ring's entries as their JSON text (bytes), for
        HTTP's answer written piece by piece (Status.document)."""
        return self.sheet.document(self.clock(), text)

    # -- what a link may ask of the bus besides plans: every link reaches it only through these

    def add_status_section(self, name, fn, text=None):
        """A link's own section `name` in the /status document: `fn()` when it is built
        (`text()`: the same with JSON text in place of its objects, Status.attach)."""
        self.sheet.attach(name, fn, text)

    def subscribe(self, fn, events=None):
        """`fn(event, port, data)` hears the hub's `events` (None: every one; master/bus/hub.py)."""
        return self.hub.subscribe(fn, events)

    def unsubscribe(self, fn):
        self.hub.unsubscribe(fn)

    def capabilities(self):
        """The live capabilities in menu order (read them, do not change them)."""
        return self.owners.capabilities()

    def online_organs(self):
        """The online organs' descriptors in registration order."""
        return [s.organ for s in self.registry.online()]

    def organ_at(self, port):
        """The descriptor of the organ online on port number `port`, or None."""
        return self.registry.slot(port).organ

    def quiet(self):
        """True when no plan is running or waiting."""
        return not self.scheduler.runs
