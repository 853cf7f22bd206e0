# A plan being run: its Steps, their dispatch order and readiness, and the COMMAND frame a step sends.
#
# Built once per accepted plan (master/bus/scheduler.py's submit); the scheduler moves the
# steps through it. Readiness is kept up to date instead of searched for (Run.ready).
from organbus import command
from organbus import frame

from master.bus.outcome import GOOD, PENDING


class Step:
    # Twelve attributes at most: a MicroPython instance keeps them in a hash map whose
    # allocation steps up after 12 (and after 17), so every field here costs heap per step.
    # Derived instead of stored: the plan index is key[2]; the owner's capability, module id
    # and resource group are `own` (the registry's own tuple, shared); a continuous step's
    # COMMAND_RESP tick is t_sent + ms.
    def __init__(self, run, i, st):
        self.run = run
        self.task_id = st["task_id"]
        self.action = st["action"]
        self.params = st["params"]
        self.deps = ()  # Steps this one waits for
        self.key = (-st["priority"], run.seq, i)  # dispatch order among ready steps
        self.status = PENDING
        self.reason = None
        self.port = None
        self.own = None  # the owner tuple (master/bus/owners.py) of the organ it was sent to
        self.t_sent = 0
        self.ms = None

    def entry(self):
        e = {"task_id": self.task_id, "action": self.action, "status": self.status}
        if self.ms is not None:
            e["ms"] = self.ms
        if self.reason:
            e["reason"] = self.reason
        return e


class Run:
    """One accepted plan being executed."""

    def __init__(self, seq, plan, notes, on_accept, on_done):
        self.seq = seq
        self.notes = list(notes)
        self.on_accept = on_accept
        self.on_done = on_done
        sts = plan["steps"]
        self.steps = [Step(self, i, st) for i, st in enumerate(sts)]
        by_id = {}
        for s in self.steps:
            by_id[s.task_id] = s
        for i, st in enumerate(sts):
            if st["depends_on"]:
                self.steps[i].deps = tuple([by_id[d] for d in st["depends_on"]])
        # dispatch order within this plan: by priority, then plan index; with one priority
        # for every step (the common plan) that is plan order, taken without the sort (a
        # sort by key was ~117,000 RV32 instructions for 16 steps)
        k0 = self.steps[0].key[0] if self.steps else 0
        for s in self.steps:
            if s.key[0] != k0:
                self.order = sorted(self.steps, key=dispatch_key)
                break
        else:
            self.order = list(self.steps)
        self.left = n = len(self.steps)
        # Every step has its final status: kept as an attribute beside `left` (set where left
        # reaches 0), not a property: on MicroPython a class with a property makes every
        # attribute store on its instances look the name up in the class first, which cost
        # `run.left -= 1` ~800 instructions per step.
        self.finished = n == 0
        # Readiness kept up to date instead of searched for, in order positions (a step's
        # place in `order`): how many of a step's deps are not yet good (`waiting`, by
        # position), the positions of the steps that depend on a step (`after`, by plan
        # index); `ready` holds the positions of the pending steps whose deps are all good,
        # ascending (so in dispatch order). Built here, once per plan.
        pos = [0] * n  # plan index -> position in order
        for k, t in enumerate(self.order):
            pos[t.key[2]] = k
        self.waiting = [len(t.deps) for t in self.order]
        self.after = after = [None] * n
        for t in self.steps:
            for d in t.deps:
                i = d.key[2]
                if after[i] is None:
                    after[i] = [pos[t.key[2]]]
                else:
                    after[i].append(pos[t.key[2]])
        self.ready = sorted([k for k in range(n) if not self.waiting[k]])
        # by plan index: the position of a step's one dependent when it has exactly one and
        # that one waits for this step alone (a chain's next step), else -1: the step path's
        # case, where the dependent is ready once this step is done (no count, no loop)
        self.single = single = [-1] * n
        for i in range(n):
            a = after[i]
            if a is not None and len(a) == 1 and self.waiting[a[0]] == 1:
                single[i] = a[0]
        # By plan index: (capability, COMMAND frame) encoded at admission for the owner of the
        # time (Scheduler.submit), or None; a step sends it as it is while its owner's
        # capability is still that object (else it is checked and encoded when it starts).
        self.frames = [None] * n
        # By order position: (owner tuple, COMMAND frame) of the same admission, or None,
        # valid while the owners table is still at `version` (then the owner is that very
        # tuple): the step path starts a step from it without looking the owner up again.
        self.hot = [None] * n
        self.version = -1

    def insert_ready(self, k):
        # order position k joins ready, which stays ascending (it holds a few entries); the
        # common case, k after every entry, is an append in deps_done
        ready = self.ready
        j = len(ready)
        ready.append(k)
        while j and ready[j - 1] > k:
            ready[j] = ready[j - 1]
            j -= 1
        ready[j] = k

    def drop_started(self):
        # ready keeps only pending steps (in place: nothing allocated)
        ready = self.ready
        order = self.order
        j = 0
        for k in ready:
            if order[k].status == PENDING:
                ready[j] = k
                j += 1
        while len(ready) > j:
            ready.pop()

    def deps_done(self, i):
        # the step at plan index i went well: each step waiting for it has one dependency less,
        # and joins ready (kept ascending) once it has none left and is still pending
        after = self.after[i]
        if after is None:
            return
        waiting = self.waiting
        ready = self.ready
        order = self.order
        for k in after:
            w = waiting[k] - 1
            waiting[k] = w
            if w == 0 and order[k].status == PENDING:
                if ready and ready[-1] > k:
                    self.insert_ready(k)
                else:
                    ready.append(k)

    def report(self):
        return {
            "ok": all(s.status in GOOD for s in self.steps),
            "steps": [s.entry() for s in self.steps],
            "notes": list(self.notes),
        }


def dispatch_key(s):
    return s.key


def before(s, t):
    # s comes before t in plan order (older plan, then plan index)
    a = s.run.seq
    b = t.run.seq
    return a < b or (a == b and s.key[2] < t.key[2])


def same_params(params, given):
    # the capability's params (descriptor form) are exactly the names the plan gives
    if len(params) != len(given):
        return False
    for p in params:
        if p["name"] not in given:
            return False
    return True


def command_frame(cap, params):
    """The COMMAND frame for `cap` (descriptor form) with validated `params` (dict by name)."""
    values = []
    text = None
    for p in cap["params"]:
        v = params[p["name"]]
        if p["type"] == "string":
            text = v
        elif p["type"] == "bool":
            values.append(1.0 if v else 0.0)
        else:
            values.append(float(v))
    return frame.encode(frame.COMMAND, command.encode_command(cap["name"], values, text))
