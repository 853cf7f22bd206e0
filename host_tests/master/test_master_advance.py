# The scheduler's step path (Scheduler.on_event's own body, on_resp's immediate steps too) against its general path: the same plans, the same COMMANDs, the same reports.
from organbus import frame
import master_rig as mf

from master.bus import body

UNIX_PORT = True

_CONTINUOUS = ("led_blink", "speak", "chime")


_Tx = mf.Tx
_plan = mf.plan_text


# a chain, a fan-out over both ports (t2 and t3 ready at once), a step waiting for two
_FAN = _plan(
    [
        ("t0", "led_on", {}, []),
        ("t1", "led_blink", {"count": 2, "period_ms": 100}, ["t0"]),
        ("t2", "speak", {"text": "One."}, ["t1"]),
        ("t3", "led_off", {}, ["t1"]),
        ("t4", "chime", {}, ["t2"]),
        ("t5", "led_on", {}, ["t3", "t4"]),
        ("t6", "led_off", {}, ["t5"]),
    ]
)
_CHAIN = _plan(
    [
        ("c%d" % i, ("led_on", "led_off")[i % 2], {}, ["c%d" % (i - 1)] if i else [])
        for i in range(5)
    ]
)


def _name(f):
    return str(f[6 : 6 + f[5]], "utf-8")


def _drive(general, plans):
    """Run `plans` (submitted together) against instant organs; `general`: a "step" subscriber
    is attached, which sends every step through the general path. Returns what was sent per
    port, the reports and how often _start ran."""
    txs = {0: _Tx(), 1: _Tx()}
    now = [1000]
    b = body.build(txs, lambda: now[0])
    b.port(0).feed(frame.encode(frame.DESCRIPTOR, mf.encode_descriptor(mf.led())), now[0])
    b.port(1).feed(frame.encode(frame.DESCRIPTOR, mf.encode_descriptor(mf.speaker())), now[0])
    if general:
        b.hub.subscribe(lambda e, p, d: None, ("step",))
    sch = b.scheduler
    starts = [0]
    start = sch._start

    def counting(s, t):
        starts[0] += 1
        start(s, t)

    sch._start = counting
    for p in txs.values():
        p.frames = []
    runs = []
    for raw in plans:
        kind, run = b.submit(raw)
        assert kind == "accepted", run
        runs.append(run)
    seen = {0: 0, 1: 0}
    for _ in range(200):
        moved = False
        for i in (0, 1):
            fs = txs[i].frames
            while seen[i] < len(fs):
                f = fs[seen[i]]
                seen[i] += 1
                if f[2] != frame.COMMAND:
                    continue
                moved = True
                now[0] += 3
                b.port(i).feed(frame.RESP_OK_FRAME, now[0])
                name = _name(f)
                if name in _CONTINUOUS:
                    now[0] += 7
                    ev = frame.encode(frame.EVENT, mf.command.encode_event(name, 0))
                    b.port(i).feed(ev, now[0])
        if not moved:
            break
    sent = {i: [_name(f) for f in txs[i].frames if f[2] == frame.COMMAND] for i in (0, 1)}
    return sent, [r.report() for r in runs], sch.sent, starts[0], [r.finished for r in runs]


def test_the_hot_path_sends_and_reports_what_the_general_path_does():
    fast = _drive(False, [_FAN])
    slow = _drive(True, [_FAN])
    assert fast[4] == [True] and slow[4] == [True], (fast, slow)
    assert fast[0] == slow[0], (fast[0], slow[0])
    assert fast[1] == slow[1], (fast[1], slow[1])
    assert fast[2] == slow[2] == 7, (fast[2], slow[2])
    assert fast[1][0]["ok"], fast[1]
    assert fast[0][0] == ["led_on", "led_blink", "led_off", "led_on", "led_off"], fast[0]
    assert fast[0][1] == ["speak", "chime"], fast[0]
    # the hot path took the chain's steps without _start; the general path started all 7
    assert slow[3] >= 7, slow[3]
    assert fast[3] < slow[3], (fast[3], slow[3])


def test_two_plans_at_once_go_the_general_way_with_the_same_result():
    fast = _drive(False, [_FAN, _CHAIN])
    slow = _drive(True, [_FAN, _CHAIN])
    assert fast[4] == [True, True] and slow[4] == [True, True], (fast, slow)
    assert fast[0] == slow[0], (fast[0], slow[0])
    assert fast[1] == slow[1], (fast[1], slow[1])
    assert fast[2] == slow[2] == 12, (fast[2], slow[2])
    assert all(r["ok"] for r in fast[1]), fast[1]
