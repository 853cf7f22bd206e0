# The local loop: the config's idle plan runs when no link has run a plan for idle_after_s; any link's plan pre-empts it.
#
# Sans-IO, on the master's timer: `poll(now) -> ms until due` (Body.poll calls it), and
# `preempt(now)` (Body.submit calls it before a link's plan goes to the scheduler). The idle
# plan is an ordinary plan, checked against the live menu at start and after every menu
# change (a hub "menu" event); one that does not fit is refused whole, its problems on the
# event log, and never runs in part. It never speaks: `speak` and `announce` are refused
# (speak text is written by the model, never by the master). After it ran, the quiet time
# starts again: the idle plan repeats every idle_after_s while nobody sends a plan.
from organbus import log
from organbus.ticks import ticks_diff

SPEAKING = ("speak", "announce")
PREEMPTED = "pre-empted by a link's plan"
_FAR_MS = 60000


def speaking_problems(plan):
    """Problems of an idle plan that speaks (a new list, empty when it does not)."""
    out = []
    steps = plan.get("steps") if isinstance(plan, dict) else None
    if isinstance(steps, list):
        for i, st in enumerate(steps):
            if isinstance(st, dict) and st.get("action") in SPEAKING:
                out.append(
                    "steps[%d].action: %s in an idle plan: speak text is written by the model, "
                    "never by the master" % (i, st["action"])
                )
    return out


class Idle:
    """`body` (check, scheduler, hub, clock), `plan` (the config's plan object), `after_ms`."""

    def __init__(self, body, plan, after_ms, emit=log.emit):
        if not isinstance(after_ms, int) or after_ms < 1000:
            raise ValueError("idle_after_s must be a whole number of seconds, at least 1")
        self.body = body
        self.scheduler = body.scheduler
        self.raw = plan
        self.after_ms = after_ms
        self.emit = emit
        self.plan = None  # the checked plan when it fits the live menu
        self.notes = ()
        self.problems = []
        self.run = None  # its Run while it runs
        self.t_quiet = body.clock()
        self.dirty = True  # check at the next poll
        self.started = 0
        self.preempted = 0
        self.refusals = 0
        body.hub.subscribe(self.on_event, ("menu", "plan"))

    def on_event(self, event, port, data):
        if event == "menu":
            self.dirty = True
        elif event == "plan":
            if data is self.run:
                self.run = None
            self.t_quiet = self.body.clock()

    def check(self):
        self.dirty = False
        problems = speaking_problems(self.raw)
        p = None
        if not problems:
            kind, p, problems, notes = self.body.check(self.raw)
        if problems:
            if problems != self.problems:
                self.refusals += 1
                self.emit("idle_refused", [("problems", problems)])
            self.plan = None
            self.problems = problems
            return
        if self.plan is None:
            self.emit(
                "idle_ready", [("steps", len(p["steps"])), ("after_s", self.after_ms // 1000)]
            )
        self.plan = p
        self.notes = notes
        self.problems = []

    def _link_running(self):
        for r in self.scheduler.runs:
            if r is not self.run:
                return True
        return False

    def poll(self, now):
        if self.dirty:
            self.check()
        if self.plan is None or self.run is not None:
            return _FAR_MS
        if self._link_running():
            self.t_quiet = now
            return self.after_ms
        left = self.after_ms - ticks_diff(now, self.t_quiet)
        if left > 0:
            return left
        self.started += 1
        self.run = self.scheduler.submit(self.plan, self.notes, now)
        if self.run.finished:
            self.run = None
        return _FAR_MS if self.run is not None else self.after_ms

    def preempt(self, now):
        """A link's plan comes: the idle plan gives way at once (Scheduler.give_way)."""
        self.t_quiet = now
        run = self.run
        if run is not None and run in self.scheduler.runs:
            self.preempted += 1
            self.scheduler.give_way(run, PREEMPTED, now)

    def stats(self):
        return {
            "state": "refused" if self.problems else ("running" if self.run else "waiting"),
            "after_s": self.after_ms // 1000,
            "problems": list(self.problems),
            "started": self.started,
            "preempted": self.preempted,
        }


def start(body, config):
    """The loop of config's "idle" plan after "idle_after_s" (default 30) quiet seconds, its
    counters in /status; None when the config is refused (said on the event log)."""
    after = config.get("idle_after_s", 30)
    ok = isinstance(after, int) and not isinstance(after, bool)
    try:
        i = Idle(body, config["idle"], after * 1000 if ok else -1)
    except (ValueError, TypeError) as e:
        log.emit("idle_refused", [("problems", [str(e)])])
        return None
    body.idle = i
    body.add_status_section("idle", i.stats)
    return i
