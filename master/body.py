# The Body facade every link uses: menu, status, execute a plan, speak_ready (docs/DESIGN.md).
try:
    import asyncio
except ImportError:  # pragma: no cover
    asyncio = None

from organbus import menu as _menu
from organbus import plan as _plan
from organbus.ticks import ticks_diff

SPEAK_FRESH_MS = 3000  # speak_ready wants a frame from the speaker this recently (heartbeat 1 s)


class Body:
    """The live body: a Registry and a Scheduler joined, read through `clock()` (ms ticks)."""

    def __init__(self, registry, scheduler, clock, mode="two-port", max_steps=16, note=None):
        self.registry = registry
        self.scheduler = scheduler
        self.clock = clock
        self.mode = mode
        self.note = note
        self.max_steps = max_steps
        self.t0 = clock()
        self.accepted = self.refused = 0
        self._menu = None
        self._menu_version = -1
        registry.on_resp = scheduler.on_resp
        registry.on_event = scheduler.on_event
        registry.on_offline = scheduler.on_offline

    def tick(self, now=None):
        """Timers: decoder idle, offline detection, COMMAND_RESP timeouts, group releases."""
        if now is None:
            now = self.clock()
        self.registry.tick(now)
        self.scheduler.poll(now)

    def menu(self):
        if self._menu_version != self.registry.version or self._menu is None:
            self._menu = _menu.build_menu(self.registry.capabilities(), self.max_steps)
            self._menu_version = self.registry.version
        return self._menu

    def check(self, raw):
        """(http_status, plan, problems, notes) without running anything."""
        if isinstance(raw, (bytes, bytearray, memoryview, str)):
            try:
                obj, dups = _plan.parse(raw)
            except _plan.TooLarge as e:
                return 413, None, [e.msg], []
            except _plan.ParseError as e:
                return 400, None, [e.msg], []
        else:
            obj, dups = raw, ()
        caps = self.registry.capabilities()
        p, problems, notes = _plan.check(obj, caps, dups, self.max_steps)
        return (422 if problems else 200), p, problems, notes

    def submit(self, raw, on_accept=None, on_done=None):
        """Sans-IO execute: (status, Run) when accepted, (status, {"problems"...}) when not."""
        status, p, problems, notes = self.check(raw)
        if problems:
            self.refused += 1
            return status, {"problems": problems, "notes": notes}
        self.accepted += 1
        return 200, self.scheduler.submit(p, notes, self.clock(), on_accept, on_done)

    async def execute(self, raw, on_accept=None):
        """(200, report) once every step has its final status; (4xx, {"problems": [...]})."""
        ev = asyncio.Event()
        status, run = self.submit(raw, on_accept, lambda r: ev.set())
        if status != 200:
            return status, run
        if not run.finished:
            await ev.wait()
        return 200, run.report()

    def speak_ready(self):
        """True when a plan with `speak` would reach a live speaker now (Body Protocol /status)."""
        own = self.registry.owner("speak")
        if own is None:
            return False
        port, cap, _ = own
        p = self.registry.port(port)
        if p.last_rx is None or ticks_diff(self.clock(), p.last_rx) > SPEAK_FRESH_MS:
            return False
        group = cap["resource_group"]
        return not group or self.scheduler.queued(group) < self.max_steps

    def status(self):
        now = self.clock()
        organs, ports = self.registry.status(now)
        s = {
            "protocol": 3,
            "uptime_ms": ticks_diff(now, self.t0),
            "mode": self.mode,
            "organ_ports": [p.index for p in self.registry.ports],
            "organs": organs,
            "ports": ports,
            "plans": {
                "accepted": self.accepted,
                "refused": self.refused,
                "running": len(self.scheduler.runs),
                "commands_sent": self.scheduler.sent,
                "stray_resps": self.scheduler.stray_resps,
                "stray_events": self.registry.stray_events,
            },
            "busy_groups": self.scheduler.busy_groups(),
            "speak_ready": self.speak_ready(),
        }
        if self.note:
            s["note"] = self.note
        return s

    def routes(self):
        """The master's own HTTP routes for master.httpd.serve."""

        async def get_menu(req):
            return 200, self.menu(), None

        async def post_plan(req):
            status, obj = await self.execute(req.body)
            return status, obj, None

        async def get_status(req):
            return 200, self.status(), None

        return {
            ("GET", "/menu"): get_menu,
            ("POST", "/plan"): post_plan,
            ("GET", "/status"): get_status,
        }
