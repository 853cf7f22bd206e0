# A scripted stand-in for master.bus.body.Body (section 9 organs) for the links tests, and a CPython server thread around it.
#
# It keeps the Body facade's contract (docs/DESIGN.md): menu() of the online organs,
# execute(plan, on_accept) -> (REPORT, report) | (PROBLEMS | UNREADABLE | TOO_LARGE, {"problems"}),
# the sans-IO submit(plan, on_accept, on_done) -> (ACCEPTED, Run) with cancel(run, why), and
# speak_ready(). Its checks are a small subset of the master's validation, enough to exercise
# the links honestly; a raw plan is read by the master's own strict reader (plan.parse).
# submit's runs keep the scheduler's rule that one resource group never overlaps itself: a
# continuous step holds its group while it plays, and a step for a held group waits, pending.
from organbus import plan as _plan

from master.bus.outcome import ACCEPTED, PROBLEMS, REPORT, TOO_LARGE, UNREADABLE

try:
    import asyncio
except ImportError:  # pragma: no cover
    import uasyncio as asyncio


LED = [
    {"name": "led_on", "description": "Turn the light on.", "exec_type": "immediate",
     "resource_group": "led", "max_duration_ms": 0, "params": []},
    {"name": "led_off", "description": "Turn the light off.", "exec_type": "immediate",
     "resource_group": "led", "max_duration_ms": 0, "params": []},
    {"name": "led_blink", "description": "Blink the light a number of times.",
     "exec_type": "continuous", "resource_group": "led", "max_duration_ms": 40000,
     "params": [{"name": "count", "type": "int", "min": 1, "max": 20, "unit": ""},
                {"name": "period_ms", "type": "int", "min": 100, "max": 2000, "unit": "ms"}]},
]  # fmt: skip
SPK = [
    {"name": "speak", "description": "Say the text out loud.", "exec_type": "continuous",
     "resource_group": "audio", "max_duration_ms": 30000,
     "params": [{"name": "text", "type": "string", "min": 1, "max": 240, "unit": ""}]},
    {"name": "chime", "description": "Play a short attention chime.", "exec_type": "continuous",
     "resource_group": "audio", "max_duration_ms": 2000, "params": []},
]  # fmt: skip
ORGANS = {"LED_001": LED, "SPK_001": SPK}
_TYPES = {"int": int, "float": (int, float), "bool": bool, "string": str}


KEPT = 16


def _keep(log, x):
    log.append(x)
    if len(log) > KEPT:
        log.pop(0)


class FakeStep:
    def __init__(self, st):
        self.task_id = st["task_id"]
        self.action = st["action"]
        self.params = st.get("params", {})
        self.status = "pending"
        self.reason = None
        self.t_sent = 0
        self.ms = None

    def entry(self):
        e = {"task_id": self.task_id, "action": self.action, "status": self.status}
        if self.ms is not None:
            e["ms"] = self.ms
        if self.reason:
            e["reason"] = self.reason
        return e


class FakeRun:
    """A plan submitted to the fake body (master.bus.run.Run's attributes the links read)."""

    def __init__(self, plan, notes, on_accept, on_done):
        self.steps = [FakeStep(st) for st in plan["steps"]]
        self.notes = list(notes)
        self.on_accept = on_accept
        self.on_done = on_done
        self.finished = not self.steps

    def report(self):
        return {
            "ok": all(s.status in ("done", "started") for s in self.steps),
            "steps": [s.entry() for s in self.steps],
            "notes": list(self.notes),
        }


class FakeBody:
    """Body facade over scripted organs. `script[action]` = final step status to report."""

    def __init__(self, online=("LED_001", "SPK_001"), play_ms=150):
        self.online = list(online)
        self.script = {}
        # the last KEPT plans that passed the checks (COMMANDs "sent") and (action, params) in
        # the order they were "sent": bounded, as a long-running server's fake must not grow
        self.executed = []
        self.commands = []
        self.play_ms = play_ms  # how long a continuous step runs after its accept
        self.playing = 0  # continuous steps accepted and still running
        self.groups = {}  # resource group -> the FakeStep of submit's run holding it
        self.waiting = []  # (FakeRun, FakeStep) of submit's runs waiting for their group
        self.sections = []  # (name, fn) of the links' /status sections (Body.add_status_section)

    def clock(self):
        import time

        if hasattr(time, "ticks_ms"):
            return time.ticks_ms()
        return int(time.monotonic() * 1000)

    def menu(self):
        caps = []
        for mid in self.online:
            for c in ORGANS[mid]:
                d = dict(c)
                d["module_id"] = mid
                caps.append(d)
        names = [c["name"] for c in caps]
        schema = {"type": "object", "properties": {"steps": {"type": "array", "maxItems": 16,
                  "items": {"properties": {"action": {"enum": names}}}}}}  # fmt: skip
        return {"protocol": 3, "max_steps": 16, "capabilities": caps, "plan_schema": schema}

    def status(self, text=False):
        doc = {"organs": [{"module_id": m, "online": True} for m in self.online]}
        for name, fn in self.sections:
            doc[name] = fn()
        return doc

    def add_status_section(self, name, fn, text=None):
        self.sections.append((name, fn))

    def speak_ready(self):
        return "SPK_001" in self.online

    def _caps(self):
        d = {}
        for c in self.menu()["capabilities"]:
            d[c["name"]] = c
        return d

    def check(self, plan):
        problems, notes = [], []
        caps = self._caps()
        steps = plan.get("steps") if isinstance(plan, dict) else None
        if not isinstance(steps, list):
            return ["plan: steps must be a list"], notes
        for i, s in enumerate(steps):
            cap = caps.get(s.get("action"))
            if cap is None:
                problems.append(
                    "steps[%d].action: unknown action %r; the menu has %s"
                    % (i, s.get("action"), ", ".join(sorted(caps)))
                )
                continue
            params = s.get("params", {})
            declared = [p["name"] for p in cap["params"]]
            for k in params:
                if k not in declared:
                    problems.append("steps[%d].params.%s: not a param of %s" % (i, k, cap["name"]))
            for p in cap["params"]:
                if p["name"] not in params:
                    problems.append("steps[%d].params.%s: missing" % (i, p["name"]))
                    continue
                v = params[p["name"]]
                if (
                    isinstance(v, bool)
                    and p["type"] != "bool"
                    or not isinstance(v, _TYPES[p["type"]])
                ):
                    problems.append("steps[%d].params.%s: wrong type" % (i, p["name"]))
                elif p["type"] in ("int", "float") and not p["min"] <= v <= p["max"]:
                    notes.append(
                        "steps[%d].params.%s: %s is outside %s..%s; forwarded as given, the organ clamps"
                        % (i, p["name"], v, p["min"], p["max"])
                    )
        return problems, notes

    async def execute(self, plan, on_accept=None, dups=()):
        if isinstance(plan, (bytes, bytearray, str)):
            try:
                plan, dups = _plan.parse(plan)
            except _plan.TooLarge as e:
                return TOO_LARGE, {"problems": [e.msg]}
            except _plan.ParseError as e:
                return UNREADABLE, {"problems": [e.msg]}
        problems, notes = self.check(plan)
        if problems:
            return PROBLEMS, {"problems": problems}
        _keep(self.executed, plan)
        out = []
        ok = True
        for s in plan["steps"]:
            _keep(self.commands, (s["action"], s.get("params", {})))
            status = self.script.get(s["action"], "done")
            if on_accept is not None:
                on_accept(
                    s["task_id"], 0 if status == "done" else 1 if status == "refused" else status
                )
            if status == "done" and self._caps()[s["action"]]["exec_type"] == "continuous":
                self.playing += 1
                try:
                    await asyncio.sleep(self.play_ms / 1000)
                finally:
                    self.playing -= 1
            step = {"task_id": s["task_id"], "action": s["action"], "status": status, "ms": 1}
            if status != "done":
                ok = False
            out.append(step)
        return REPORT, {"ok": ok, "steps": out, "notes": notes}

    def submit(self, plan, on_accept=None, on_done=None, dups=()):
        """(ACCEPTED, FakeRun) or (kind, {"problems"}); the steps run from their own tasks,
        one after another, and on_done(run) once each has its final status."""
        if isinstance(plan, (bytes, bytearray, str)):
            try:
                plan, dups = _plan.parse(plan)
            except _plan.TooLarge as e:
                return TOO_LARGE, {"problems": [e.msg]}
            except _plan.ParseError as e:
                return UNREADABLE, {"problems": [e.msg]}
        problems, notes = self.check(plan)
        if problems:
            return PROBLEMS, {"problems": problems, "notes": notes}
        _keep(self.executed, plan)
        run = FakeRun(plan, notes, on_accept, on_done)
        self._next(run)
        return ACCEPTED, run

    def _next(self, run):
        for s in run.steps:
            if s.status == "pending":
                group = self._caps()[s.action]["resource_group"]
                if group and group in self.groups:
                    self.waiting.append((run, s))
                else:
                    s.status = "sent"
                    s.t_sent = self.clock()
                    _keep(self.commands, (s.action, s.params))
                    asyncio.create_task(self._play(run, s, group))
                return
        if not run.finished:
            run.finished = True
            if run.on_done:
                run.on_done(run)

    async def _play(self, run, s, group):
        await asyncio.sleep(0.01)  # the COMMAND_RESP comes a moment later
        status = self.script.get(s.action, "done")
        if status in ("done", "refused") and run.on_accept:
            run.on_accept(s.task_id, 0 if status == "done" else 1)
        if status == "done" and self._caps()[s.action]["exec_type"] == "continuous":
            s.status = "running"
            if group:
                self.groups[group] = s
            self.playing += 1
            try:
                await asyncio.sleep(self.play_ms / 1000)
            finally:
                self.playing -= 1
        s.status = status
        s.ms = 1
        self._release(s, group)
        self._next(run)

    def _release(self, s, group):
        if group and self.groups.get(group) is s:
            del self.groups[group]
            for i, (r, w) in enumerate(self.waiting):
                if self._caps()[w.action]["resource_group"] == group:
                    self.waiting.pop(i)
                    self._next(r)
                    break

    def cancel(self, run, why):
        """As master.bus.body.Body.cancel: waiting steps skipped with `why`, running ones give
        their group up."""
        for s in run.steps:
            if s.status == "pending":
                s.status = "skipped"
                s.reason = why
                self.waiting = [w for w in self.waiting if w[1] is not s]
            elif s.status == "running":
                self._release(s, self._caps()[s.action]["resource_group"])
        if all(s.status not in ("pending", "sent", "running") for s in run.steps):
            self._next(run)


class ServerThread:
    """CPython only: an asyncio loop in a daemon thread serving `routes_fn(body)` or the fake links."""

    def __init__(self, config=None, routes=None, body=None):
        import threading

        self.body = body or FakeBody()
        self.config = config or {}
        self.extra = routes
        self.ready = threading.Event()
        self.loop = None
        self.srv = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10), "server thread did not start"
        self.port = self.srv.port

    def _run(self):
        from master.links import bodyproto
        from master.links import httpd
        from master.links import mcp
        from master.links.routes import answer

        self.loop = asyncio.new_event_loop()
        body = self.body

        async def plan_route(req):
            kind, out = await body.execute(req.content)
            status, payload = answer(kind, out)
            return status, payload, None

        async def menu(req):
            return 200, body.menu(), None

        async def boom(req):
            raise RuntimeError("handler bug")

        routes = {("GET", "/menu"): menu, ("POST", "/plan"): plan_route, ("GET", "/boom"): boom}
        routes.update(mcp.start(body, {}))
        routes.update(bodyproto.start(body, {}))
        if self.extra:
            routes.update(self.extra)

        async def start():
            self.srv = await httpd.serve(routes, "127.0.0.1", 0, self.config)
            self.ready.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()

    def stop(self):
        def _stop():
            self.srv.close()
            self.loop.stop()

        self.loop.call_soon_threadsafe(_stop)
        self.thread.join(5)
