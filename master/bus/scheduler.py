# Sans-IO scheduler: runs validated plans on the organs (PROTOCOL.md sections 5, 6 and 8).
#
# Steps start when every step they depend on finished well; among ready steps higher priority
# first (then older plan, then plan order); one resource group never overlaps itself; one
# COMMAND is outstanding per link, answered within RESP_TIMEOUT_MS or the step is `timeout`.
# Times are ms ticks passed in; a COMMAND leaves through its owner's Port (`port.command`),
# and every step's dispatch and end is published on the hub ("step"), every finished plan
# too ("plan"). `poll(now)` runs the timeouts and returns ms until the next one is due.
import micropython
from micropython import const

from organbus.ticks import ticks_diff

from master.bus.port import RESP_TIMEOUT_MS
from master.bus.run import Run, before, command_frame, dispatch_key, same_params

_IDLE_MS = const(60000)  # poll's answer with nothing in flight
SETTLE_MS = const(250)  # after a timeout the link stays quiet this long: a late answer is not
# taken for the next COMMAND's (the wire has no sequence numbers)

from master.bus.outcome import DONE, FINAL, GOOD, OFFLINE, PENDING, REFUSED, RUNNING  # noqa: F401
from master.bus.outcome import SENT, SKIPPED, STARTED, STOPPED, TIMEOUT  # noqa: F401


class Scheduler:
    """`owners.owner(name) -> (Port, capability, module_id, link, group, continuous) | None`
    (master/bus/owners.py); `hub` hears every step."""

    def __init__(self, owners, hub):
        self.owner = owners.owner
        self._owners = owners  # its version: the admitted owners (Run.hot) still hold
        self.hub = hub
        self._wants = hub.wants  # the per-step publishes are skipped when nobody hears "step"
        self.runs = []
        self._solo = None  # the run when exactly one runs (the step path's case), else None
        # keyed by the port's number: hashing a Port (a class instance) looks up __hash__ and
        # __eq__ in its class on every access, a small int hashes as itself
        self.outstanding = {}  # port number -> Step awaiting COMMAND_RESP
        self.running = []  # the RUNNING steps of every run (the EVENT done they wait for)
        self.groups = {}  # resource group -> Step holding it
        self._seq = 0
        self.stray_resps = 0
        self.sent = 0
        self.late = {}  # port number -> (timed-out Step, tick of its timeout) during SETTLE_MS
        self._frames = {}  # name -> (capability, COMMAND frame) of abilities without params

    # -- inputs ----------------------------------------------------------------------------

    def submit(self, plan, notes, now, on_accept=None, on_done=None):
        """Start a validated plan; returns its Run (finished at once when it has no steps)."""
        self._seq += 1
        run = Run(self._seq, plan, notes, on_accept, on_done)
        if run.finished:
            self.hub.publish("plan", None, run)
            if on_done:
                on_done(run)
            return run
        self.runs.append(run)
        self._solo = run if len(self.runs) == 1 else None
        # The ready steps start first (_start encodes the one it sends), then the others'
        # COMMANDs are encoded for the step path while the first is on the wire: the first
        # COMMAND waits for none of them, and no later one waits longer than before.
        self._dispatch(now)
        self._encode(run)
        return run

    def give_way(self, run, why, now):
        """Pre-emption (the idle loop, master/bus/idle.py): `run`'s waiting steps are skipped with
        `why` and its running steps give their resource groups up at once, so the next plan's
        COMMAND in that group goes out now (the organ then ends the old one: EVENT status 1,
        and the step is `stopped`); then dispatch."""
        for s in run.steps:
            if s.status == PENDING:
                s.reason = why
                self._finish(s, SKIPPED, now)
            elif s.status == RUNNING:
                self._release(s)
        self._dispatch(now)

    # `on_resp` and `on_event`, the step path, are native code on MicroPython (the same object
    # operations without the bytecode loop: a continuous step 36,800 -> 33,800 RV32
    # instructions); on CPython the decorator is the host shim's (the function as it is).
    @micropython.native
    def on_resp(self, port, status, now):
        s = self.outstanding.pop(port.index, None)
        if s is None:
            self.stray_resps += 1
            late = self.late.get(port.index)
            if late is not None and late[0].run in self.runs:
                t = late[0]
                t.run.notes.append(
                    "steps[%d] (%s): COMMAND_RESP %d came %d ms after the COMMAND, too late"
                    % (t.key[2], t.task_id, status, ticks_diff(now, t.t_sent))
                )
            return
        s.ms = ticks_diff(now, s.t_sent)
        run = s.run
        on_accept = run.on_accept
        if on_accept:
            on_accept(s.task_id, status)
        if status != 0:
            s.reason = "%s answered %d (bad payload, unknown name or hardware refused)" % (
                s.own[2],
                status,
            )
            self._finish(s, REFUSED, now, True)
            self._dispatch(now)
        elif s.own[5]:  # continuous: decided once per registration (master/bus/owners.py)
            s.status = RUNNING  # its COMMAND_RESP tick is t_sent + ms
            self.running.append(s)
            if self._wants["step"]:
                self.hub.publish("step", s.port.index, s)
            # its link is free again, its group still held: with one plan, only a ready
            # step of that plan could go now
            if run is not self._solo or run.ready:
                self._dispatch(now)
        else:
            self.on_event(port, None, 0, now, s)  # an immediate step done: the step path

    @micropython.native
    def on_event(self, port, name, status, now, s=None):
        """EVENT done from `port`; returns True when it finished a running step (the first
        running step of that port and name in plan order: older plan, then plan index)."""
        # The step path: on_resp hands an immediate step answered 0 in as `s`, so both ends of
        # a step (EVENT done, or COMMAND_RESP 0 of an immediate one) run this one body with no
        # Python call in between: the step ends DONE, its dependents become ready and, with
        # one plan and one ready step admitted for the owners of now, that step's COMMAND goes
        # out (_finish, _dispatch and _start inline for that case: the same state changes in
        # the same order). Anything else (the last step of a plan, several plans, a "step"
        # subscriber, a late answer settling, the owners changed since admission) goes the
        # general way. A Python operation costs ~100-900 instructions on the C6's core
        # (docs/rv32.md): hence the locals, and the owner's link, group and kind read from the
        # owner tuple (master/bus/owners.py) rather than from the capability's dict.
        if s is None:
            running = self.running
            hit = None
            j = at = 0
            for t in running:
                if t.port is port and t.action == name:
                    if hit is None or before(t, hit):
                        hit = t
                        at = j
                j += 1
            if hit is None:
                return False
            hit.ms = ticks_diff(now, hit.t_sent)
            if status != 0:
                hit.reason = "EVENT status %d: stopped early or failed" % status
                self._finish(hit, STOPPED, now)
                self._dispatch(now)
                return True
            del running[at]  # by place: list.remove compares Steps with ==, looked up per item
            s = hit
        run = s.run
        if run is not self._solo or run.left == 1 or self._wants["step"]:
            s.status = SENT  # answered (now or earlier): _finish takes it as a step just answered
            self._finish(s, DONE, now, True)
            self._dispatch(now)
            return True
        s.status = DONE
        groups = self.groups
        group = s.own[4]
        if group and groups.get(group) is s:
            del groups[group]
        run.left -= 1
        ready = run.ready
        order = run.order
        k = run.single[s.key[2]]
        if k >= 0 and not ready:
            # a chain: s's one dependent, which waits for s alone, nothing else ready: k is
            # ready now when still pending (it is then held out of ready, empty, until it
            # starts or goes back). Its waiting count is left at 1: nothing reads it again.
            t = order[k]
            if t.status != PENDING:
                return True
        else:
            run.deps_done(s.key[2])
            # _dispatch with one run
            if len(ready) != 1:
                if ready:
                    self._dispatch(now)
                return True
            k = ready.pop()  # the one ready step, held out as above
            t = order[k]
            if t.status != PENDING:
                return True
        # _start: the one ready step t (position k), pending, held out of the empty ready list
        h = run.hot[k]
        if h is None or run.version != self._owners.version or self.late:
            # _start decides (the owner looked up, checked, encoded); ready as _dispatch leaves it
            ready.append(k)
            self._start(t, now)
            if t.status != PENDING:
                ready.pop()
            return True
        # _start's common case: the step admitted for this very owner, its link and group free
        own, f = h
        link = own[3]
        group = own[4]
        outstanding = self.outstanding
        if link in outstanding or (group and group in groups):
            ready.append(k)  # still ready: it waits for its link or group
            return True
        t.port = port = own[0]
        t.own = own
        t.status = SENT
        t.t_sent = now
        outstanding[link] = t
        if group:
            groups[group] = t
        self.sent += 1
        port.command(f, now)
        return True

    def on_offline(self, port, now):
        """The organ on `port` went offline: its steps in flight and its waiting steps fail."""
        self.outstanding.pop(port.index, None)
        for run in list(self.runs):
            for s in run.steps:
                if s.status in (SENT, RUNNING) and s.port == port:
                    s.reason = "%s went offline" % s.own[2]
                    self._finish(s, OFFLINE, now)
                elif s.status == PENDING and self.owner(s.action) is None:
                    s.reason = "no online organ offers %s" % s.action
                    self._finish(s, OFFLINE, now)
        self._dispatch(now)

    def poll(self, now):
        """COMMAND_RESP timeouts, settle ends and max_duration_ms releases; returns ms until
        the next of them is due (a long wait when nothing is in flight)."""
        if not self.runs and not self.late:
            return _IDLE_MS  # idle: allocate nothing
        changed = False
        for port in list(self.late):
            if ticks_diff(now, self.late[port][1]) >= SETTLE_MS:
                del self.late[port]  # the link may take the next COMMAND
                changed = True
        for run in list(self.runs):
            for s in run.steps:
                if s.status == SENT and ticks_diff(now, s.t_sent) >= RESP_TIMEOUT_MS:
                    if self.outstanding.get(s.port.index) is s:
                        del self.outstanding[s.port.index]
                    self.late[s.port.index] = (s, now)
                    s.ms = ticks_diff(now, s.t_sent)
                    s.reason = "no COMMAND_RESP from %s within %d ms" % (
                        s.own[2],
                        RESP_TIMEOUT_MS,
                    )
                    self._finish(s, TIMEOUT, now)
                    changed = True
                elif (
                    s.status == RUNNING
                    and ticks_diff(now, s.t_sent) - s.ms >= s.own[1]["max_duration_ms"]
                ):
                    s.ms = ticks_diff(now, s.t_sent)
                    run.notes.append(
                        "steps[%d] (%s): no EVENT within max_duration_ms %d; counted as finished"
                        % (s.key[2], s.task_id, s.own[1]["max_duration_ms"])
                    )
                    self._finish(s, STARTED, now)
                    changed = True
        if changed:
            self._dispatch(now)
        return self._due(now)

    def _due(self, now):
        best = _IDLE_MS
        for run in self.runs:
            for s in run.steps:
                if s.status == SENT:
                    d = RESP_TIMEOUT_MS - ticks_diff(now, s.t_sent)
                elif s.status == RUNNING:
                    d = s.own[1]["max_duration_ms"] - (ticks_diff(now, s.t_sent) - s.ms)
                else:
                    continue
                if d < best:
                    best = d
        for port in self.late:
            d = SETTLE_MS - ticks_diff(now, self.late[port][1])
            if d < best:
                best = d
        return best if best > 0 else 0

    # -- internals -------------------------------------------------------------------------

    def _release(self, s):
        if s.own is not None:
            group = s.own[4]
            if group and self.groups.get(group) is s:
                del self.groups[group]

    def _finish(self, s, status, now, answered=False):
        # answered: its COMMAND_RESP came now (on_resp), or earlier (a RUNNING step)
        if s.status == RUNNING:
            answered = True
            self.running.remove(s)
        s.status = status
        own = s.own
        if own is not None:  # _release, inline on the hot path
            group = own[4]
            if group and self.groups.get(group) is s:
                del self.groups[group]
        if self._wants["step"]:
            self.hub.publish("step", None if s.port is None else s.port.index, s)
        run = s.run
        run.left -= 1
        if run.left == 0:
            run.finished = True
        good = status == DONE or status == STARTED
        if good:
            run.deps_done(s.key[2])  # the steps waiting for s may be ready now
        if not answered and run.on_accept:
            run.on_accept(s.task_id, status)
        if not good:
            for t in run.steps:
                if t.status == PENDING and s in t.deps:
                    t.reason = "depends on %s which %s" % (
                        s.task_id,
                        "was skipped" if status == SKIPPED else "failed",
                    )
                    self._finish(t, SKIPPED, now)
        if run.left == 0 and run in self.runs:
            self.runs.remove(run)
            self._solo = self.runs[0] if len(self.runs) == 1 else None
            self.hub.publish("plan", None, run)
            if run.on_done:
                run.on_done(run)

    def _candidates(self):
        # The ready steps of every run in dispatch order (priority, older plan, plan order);
        # the caller checks each one's state. Several plans only: one plan uses its own
        # ready list as it is (see _dispatch).
        out = []
        for run in self.runs:
            order = run.order
            for k in run.ready:
                out.append(order[k])
        out.sort(key=dispatch_key)
        return out

    def _frame(self, cap, params):
        # An ability without params always has the same COMMAND: encode it once per capability.
        if cap["params"]:
            return command_frame(cap, params)
        name = cap["name"]
        c = self._frames.get(name)
        if c is None or c[0] is not cap:
            c = self._frames[name] = (cap, command_frame(cap, params))
        return c[1]

    def _encode(self, run):
        # Admission: each waiting step's COMMAND encoded once for the owner of now, so a dispatch
        # only hands ready bytes to the port (a step whose owner is missing, has other params or
        # cannot be encoded is left to _start, which says why).
        frames = run.frames
        hot = run.hot
        run.version = self._owners.version
        for k, s in enumerate(run.order):
            if s.status != PENDING:
                continue  # started (or finished) by the dispatch before
            own = self.owner(s.action)
            if own is None:
                continue
            cap = own[1]
            if not same_params(cap["params"], s.params):
                continue
            try:
                f = self._frame(cap, s.params)
            except (ValueError, OverflowError):
                continue
            frames[s.key[2]] = (cap, f)
            hot[k] = (own, f)

    def _dispatch(self, now):
        # Steps only leave the ready set while dispatching (sent, or finished as offline,
        # refused or skipped): none becomes ready, so one pass in order is enough. Only the
        # ready steps are visited (Run.ready, kept by _finish): the hot path (one plan, a
        # dispatch per COMMAND_RESP) walks a list of a few ints and allocates nothing.
        pending = PENDING
        runs = self.runs
        if len(runs) == 1:
            run = runs[0]
            ready = run.ready
            if not ready:
                return
            order = run.order
            if len(ready) == 1:  # the common case: one ready step
                s = order[ready[0]]
                if s.status == pending:
                    self._start(s, now)
            else:
                for k in ready:
                    s = order[k]
                    if s.status == pending:
                        self._start(s, now)
            # ready keeps only pending steps (what _start did may have changed it)
            if len(ready) == 1:
                if order[ready[0]].status != pending:
                    ready.pop()
            elif ready:
                run.drop_started()
            return
        for s in self._candidates():
            if s.status == pending:
                self._start(s, now)
        for run in self.runs:
            run.drop_started()

    def _start(self, s, now):
        # a ready step: to its owner's link when that link and its resource group are free
        own = self.owner(s.action)
        if own is None:
            s.reason = "no online organ offers %s" % s.action
            self._finish(s, OFFLINE, now)
            return
        port = own[0]
        cap = own[1]
        link = own[3]
        group = own[4]
        if link in self.outstanding or (group and group in self.groups):
            return
        if self.late:
            late = self.late.get(link)
            if late is not None:
                if ticks_diff(now, late[1]) < SETTLE_MS:
                    return
                del self.late[link]
        c = s.run.frames[s.key[2]]
        if c is not None and c[0] is cap:
            f = c[1]  # encoded at admission for this very capability
        else:
            if not same_params(cap["params"], s.params):
                s.reason = "%s changed its params since the plan was checked" % own[2]
                self._finish(s, REFUSED, now)
                return
            try:
                f = self._frame(cap, s.params)
            except (ValueError, OverflowError) as e:  # validation keeps this from happening
                s.port = port
                s.own = own
                s.reason = "COMMAND not encodable: %s" % e
                self._finish(s, REFUSED, now)
                return
        s.port = port
        s.own = own
        s.status = SENT
        s.t_sent = now
        self.outstanding[link] = s
        if group:
            self.groups[group] = s
        self.sent += 1
        port.command(f, now)
        if self._wants["step"]:
            self.hub.publish("step", port.index, s)

    def busy_groups(self):
        return list(self.groups)

    def queued(self, group):
        """Steps waiting for `group` (pending steps whose owner is in that group)."""
        n = 0
        for run in self.runs:
            for s in run.steps:
                if s.status == PENDING:
                    own = self.owner(s.action)
                    if own and own[1]["resource_group"] == group:
                        n += 1
        return n
