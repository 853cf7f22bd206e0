# The scheduler's step path in the cases its fast start gives way: a chain's next step with its link busy, the owners changed since admission.
from organbus import frame
import master_rig as mf

from master.bus import body

UNIX_PORT = True


_Tx = mf.Tx
_plan = mf.plan_text


def _name(f):
    return str(f[6 : 6 + f[5]], "utf-8")


def _event(name):
    return frame.encode(frame.EVENT, mf.command.encode_event(name, 0))


def _drive(general, raw, script, before=None):
    """Submit `raw`, then feed `script` ((port, frame) or a callable of the body), tick 5 ms
    apart; `general`: a "step" subscriber sends every step through the general path. Returns
    the COMMANDs per port after each feed, the report, the sent count and the step statuses
    after each feed."""
    txs = {0: _Tx(), 1: _Tx()}
    now = [1000]
    b = body.build(txs, lambda: now[0])
    b.port(0).feed(frame.encode(frame.DESCRIPTOR, mf.encode_descriptor(mf.led())), now[0])
    b.port(1).feed(frame.encode(frame.DESCRIPTOR, mf.encode_descriptor(mf.speaker())), now[0])
    if general:
        b.hub.subscribe(lambda e, p, d: None, ("step",))
    kind, run = b.submit(raw)
    assert kind == "accepted", run
    trace = []
    for item in script:
        now[0] += 5
        if callable(item):
            item(b, now[0])
        else:
            b.port(item[0]).feed(item[1], now[0])
        sent = [[_name(f) for f in txs[i].frames if f[2] == frame.COMMAND] for i in (0, 1)]
        trace.append((sent, [s.status for s in run.steps], list(run.ready)))
    return trace, run.report(), b.scheduler.sent, run.finished


def _same(raw, script):
    fast = _drive(False, raw, script)
    slow = _drive(True, raw, script)
    assert fast[0] == slow[0], (fast[0], slow[0])
    assert fast[1] == slow[1], (fast[1], slow[1])
    assert fast[2] == slow[2], (fast[2], slow[2])
    assert fast[3] and slow[3], (fast, slow)
    assert fast[1]["ok"], fast[1]
    return fast


_RESP = frame.RESP_OK_FRAME


def test_a_chains_next_step_waits_for_its_busy_link_and_group():
    # a (speak, port 1) -> b (led_on, port 0); c (led_off, port 0) is outstanding when a's
    # EVENT makes b ready: b waits (link and group busy) and goes with c's COMMAND_RESP
    raw = _plan(
        [
            ("a", "speak", {"text": "One."}, []),
            ("b", "led_on", {}, ["a"]),
            ("c", "led_off", {}, []),
        ]
    )
    script = [(1, _RESP), (1, _event("speak")), (0, _RESP), (0, _RESP)]
    trace = _same(raw, script)[0]
    sent, statuses, ready = trace[1]  # after a's EVENT
    assert sent == [["led_off"], ["speak"]], sent
    assert statuses == ["done", "pending", "sent"], statuses
    assert ready == [1], ready  # b (order position 1) waits in ready
    assert trace[2][0] == [["led_off", "led_on"], ["speak"]], trace[2]


def test_a_chain_after_the_owners_changed_starts_the_general_way():
    # another organ registers on port 1 while the chain runs: the owners table is rebuilt,
    # the LED's steps are started by _start (the owner looked up again), the same COMMANDs
    raw = _plan(
        [
            ("c%d" % i, ("led_on", "led_off")[i % 2], {}, ["c%d" % (i - 1)] if i else [])
            for i in range(4)
        ]
    )
    desc = frame.encode(frame.DESCRIPTOR, mf.encode_descriptor(mf.speaker("SPK_002")))
    script = [(0, _RESP), (1, desc), (0, _RESP), (0, _RESP), (0, _RESP)]
    trace = _same(raw, script)[0]
    assert trace[-1][0][0] == ["led_on", "led_off", "led_on", "led_off"], trace[-1]


def test_a_chain_whose_next_step_lost_its_owner_is_offline():
    # the speaker goes offline (its descriptor now invalid) before the chain reaches speak
    raw = _plan(
        [
            ("a", "led_on", {}, []),
            ("b", "speak", {"text": "One."}, ["a"]),
            ("c", "led_off", {}, ["b"]),
        ]
    )
    bad = frame.encode(frame.DESCRIPTOR, b"\x00")
    for general in (False, True):
        trace, rep, sent, finished = _drive(general, raw, [(1, bad), (0, _RESP)])
        assert finished, rep
        assert [s["status"] for s in rep["steps"]] == ["done", "offline", "skipped"], rep
        assert sent == 1, sent


def test_a_chains_next_step_skipped_by_give_way_stays_skipped():
    # a (led_blink) -> b (led_off); c (speak) runs beside: the plan gives way while a and c
    # run (b skipped), then a's EVENT finds b no longer pending and starts nothing
    raw = _plan(
        [
            ("a", "led_blink", {"count": 2, "period_ms": 100}, []),
            ("b", "led_off", {}, ["a"]),
            ("c", "speak", {"text": "One."}, []),
        ]
    )

    def give_way(b, now):
        sch = b.scheduler
        sch.give_way(sch.runs[0], "another plan", now)

    script = [(0, _RESP), (1, _RESP), give_way, (0, _event("led_blink")), (1, _event("speak"))]
    out = []
    for general in (False, True):
        out.append(_drive(general, raw, script))
    assert out[0][0] == out[1][0], out
    assert out[0][1] == out[1][1], out
    trace, rep, sent, finished = out[0]
    assert finished, rep
    assert [s["status"] for s in rep["steps"]] == ["done", "skipped", "done"], rep
    assert trace[-1][0] == [["led_blink"], ["speak"]], trace[-1]
    assert sent == 2, sent
