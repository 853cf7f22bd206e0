# The registry's EVENT reader: its refusals, the hub's count and ring written inline, no allocation per continuous step.
import json

import micropython

from organbus import frame
from organbus.ticks import ticks_diff
import master_rig as mf

from master.bus import body

UNIX_PORT = True


def _rig():
    txs = {0: mf.SlotTx(), 1: mf.SlotTx()}
    now = [1000]
    b = body.build(txs, lambda: now[0])
    b.port(0).feed(frame.encode(frame.DESCRIPTOR, mf.encode_descriptor(mf.led())), now[0])
    b.port(1).feed(frame.encode(frame.DESCRIPTOR, mf.encode_descriptor(mf.speaker())), now[0])
    return b, txs, now


def _blinks(k):
    steps = [
        {
            "task_id": "t%d" % i,
            "action": "led_blink",
            "params": {"count": 2, "period_ms": 100},
            "priority": 5,
            "depends_on": ["t%d" % (i - 1)] if i else [],
        }
        for i in range(k)
    ]
    return json.dumps(
        {"heard_req": 0, "steps": steps, "can_execute": True, "missing": [], "response": ""}
    )


EVENT_DONE = frame.encode(frame.EVENT, mf.command.encode_event("led_blink", 0))


def test_continuous_steps_allocate_nothing():
    b, txs, now = _rig()
    p0 = b.port(0)
    for rnd in range(2):  # the first plan warms up every object the step path reuses
        kind, run = b.submit(_blinks(16))
        assert kind == "accepted", run
        micropython.heap_lock()
        try:
            for i in range(15):
                p0.feed(frame.RESP_OK_FRAME, now[0])
                p0.feed(EVENT_DONE, now[0])
        finally:
            micropython.heap_unlock()
        p0.feed(frame.RESP_OK_FRAME, now[0])
        p0.feed(EVENT_DONE, now[0])  # the last one reports the plan (it allocates)
        assert run.finished and run.report()["ok"], run.report()
    assert b.status()["plans"]["organ_events"] == 32


def test_the_ring_keeps_the_readers_events_from_their_tick_and_others_from_the_clock():
    b, txs, now = _rig()
    assert b.hub.ring is b.recent, "the body's ring does not take the hub's EVENTs"
    assert b.hub.wants["event"] == 0, "the count and the ring are still subscribers"
    t0 = b.sheet.t0
    kind, run = b.submit(_blinks(1))
    now[0] += 40
    b.port(0).feed(frame.RESP_OK_FRAME, now[0])
    b.port(0).feed(EVENT_DONE, now[0] + 700)  # the bytes' tick, not the clock's
    at = now[0] + 700
    now[0] += 900
    b.hub.publish("event", 1, ("chime", 1))  # another publisher: stamped from the clock
    evs = [e for e in b.recent.items() if e["event"] == "event"]
    assert evs == [
        {"t_ms": ticks_diff(at, t0), "event": "event", "port": 0, "name": "led_blink", "status": 0},
        {"t_ms": ticks_diff(now[0], t0), "event": "event", "port": 1, "name": "chime", "status": 1},
    ], evs
    assert b.status()["plans"]["organ_events"] == 2, b.status()["plans"]
    assert run.finished and run.report()["ok"], run.report()


def test_a_raising_event_subscriber_is_counted_and_the_step_goes_on():
    b, txs, now = _rig()
    heard = []

    def bad(event, port, data):
        heard.append(data)
        raise RuntimeError("event subscriber bug")

    b.hub.subscribe(bad, ("event",))
    kind, run = b.submit(_blinks(2))
    for i in range(2):
        b.port(0).feed(frame.RESP_OK_FRAME, now[0])
        b.port(0).feed(EVENT_DONE, now[0])
    assert heard == [("led_blink", 0)] * 2, heard
    assert b.hub.errors == 2 and "event subscriber bug" in b.hub.last_error, b.hub.last_error
    assert run.finished and run.report()["ok"], run.report()
    assert b.status()["plans"]["organ_events"] == 2
    assert len([e for e in b.recent.items() if e["event"] == "event"]) == 2


def test_short_and_not_done_events_are_refused_before_the_hub():
    b, txs, now = _rig()
    s = b.registry.slot(0)
    p0 = b.port(0)
    bad = s.bad_payloads
    p0.feed(frame.encode(frame.EVENT, b"\x01\x00"), now[0])  # under 3 bytes
    p0.feed(frame.encode(frame.EVENT, b"\x01\x05ab\x00"), now[0])  # name longer than the frame
    assert s.bad_payloads == bad + 2, s.bad_payloads
    p0.feed(frame.encode(frame.EVENT, b"\x02" + EVENT_DONE[6:-3]), now[0])  # not EVENT_DONE
    assert b.registry.stray_events == 1, b.registry.stray_events
    assert b.status()["plans"]["organ_events"] == 0, "a refused EVENT reached the hub"
    assert p0.last_rx == now[0], "a legal frame did not keep the port heard"
