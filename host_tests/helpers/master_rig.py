# The tests' master rig: tools/master_fakes.py (shared with the benches) and what only tests use.
import json

from organbus import command  # noqa: F401  (mf.command, as the tests spell it)
from organbus.descriptor import encode_descriptor  # noqa: F401

from master.bus import body as _body
from master.bus.outcome import CODE
from master_fakes import FakeOrgan, Rig, Wire, led, menu_caps, speaker, standard_rig  # noqa: F401
from master_fakes import _cap, _p


def gadget():
    """An organ with two groups on one link and every param type (for link/param tests)."""
    return {
        "module_id": "GAD_001",
        "module_type": "gadget",
        "hw_version": 0x0100,
        "fw_version": 0x0100,
        "capabilities": [
            _cap(
                "arm_move",
                "Move the arm.",
                "immediate",
                "arm",
                0,
                [_p("angle", "float", -90.0, 90.0, "deg"), _p("fast", "bool", 0, 1)],
            ),
            _cap("fan_on", "Run the fan.", "immediate", "fan", 0),
            _cap("beep", "Beep.", "immediate", "", 0),
        ],
    }


class Tx:
    """A UART edge that keeps what the master sent, each frame as bytes (`frames`)."""

    def __init__(self):
        self.frames = []

    def send(self, f):
        self.frames.append(bytes(f))

    def command(self, f):
        self.frames.append(bytes(f))

    def unread(self):
        return False


class SlotTx:
    """A UART edge that keeps what the master sent in a preallocated list (`frames`, `n`): a
    step's own allocations can be measured around it."""

    def __init__(self, size=64):
        self.frames = [None] * size
        self.n = 0

    def send(self, f):
        self.frames[self.n] = f
        self.n += 1

    def command(self, f):
        self.frames[self.n] = f
        self.n += 1

    def unread(self):
        return False

    def last(self):
        return self.frames[self.n - 1]


def plan_text(steps):
    """The JSON text of a plan of (task_id, action, params, depends_on) steps, priority 5."""
    out = []
    for task_id, action, params, deps in steps:
        out.append(
            {
                "task_id": task_id,
                "action": action,
                "params": params,
                "priority": 5,
                "depends_on": deps,
            }
        )
    return json.dumps(
        {"heard_req": 0, "steps": out, "can_execute": True, "missing": [], "response": ""}
    )


def run_plan(rig, plan, limit_ms=60000):
    """Submit and advance the fake clock until the report is ready; (HTTP status the /plan
    route would answer, report)."""
    done = []
    kind, run = rig.body.submit(plan, None, lambda r: done.append(r))
    if kind != _body.ACCEPTED:
        return CODE[kind], run
    t = 0
    while not done and t < limit_ms:
        rig.advance(10)
        t += 10
    assert done, "plan did not finish within %d ms" % limit_ms
    return CODE[_body.REPORT], run.report()


def submit(rig, raw, on_accept=None, on_done=None):
    """rig.body.submit with the outcome as the HTTP status the /plan route answers for it."""
    kind, obj = rig.body.submit(raw, on_accept, on_done)
    return CODE[kind], obj
