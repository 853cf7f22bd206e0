# The scheduler's step path: routes from the port, COMMANDs encoded at admission, EVENT names, no allocation.
import json

import micropython

from organbus import frame
import master_rig as mf

from master.bus import body
from master.bus.run import command_frame

UNIX_PORT = True


def _rig():
    txs = {0: mf.SlotTx(), 1: mf.SlotTx()}
    now = [1000]
    b = body.build(txs, lambda: now[0])
    b.port(0).feed(frame.encode(frame.DESCRIPTOR, mf.encode_descriptor(mf.led())), now[0])
    b.port(1).feed(frame.encode(frame.DESCRIPTOR, mf.encode_descriptor(mf.speaker())), now[0])
    return b, txs, now


def _chain(actions, params=None):
    steps = []
    for i, a in enumerate(actions):
        steps.append(
            {
                "task_id": "t%d" % i,
                "action": a,
                "params": (params or {}).get(a, {}),
                "priority": 5,
                "depends_on": ["t%d" % (i - 1)] if i else [],
            }
        )
    return json.dumps(
        {"heard_req": 0, "steps": steps, "can_execute": True, "missing": [], "response": ""}
    )


def _name(f):
    return str(bytes(f[6 : 6 + f[5]]), "utf-8")


def test_immediate_steps_allocate_nothing():
    b, txs, now = _rig()
    raw = _chain(["led_on", "led_off"] * 8)
    for rnd in range(2):  # the first plan warms up every object the step path reuses
        txs[0].n = 0
        kind, run = b.submit(raw)
        assert kind == "accepted", run
        p0 = b.port(0)
        tx = txs[0]
        micropython.heap_lock()
        try:
            for i in range(15):
                p0.feed(frame.RESP_OK_FRAME, now[0])
        finally:
            micropython.heap_unlock()
        p0.feed(frame.RESP_OK_FRAME, now[0])  # the last one reports the plan (it allocates)
        names = [_name(f) for f in tx.frames[: tx.n] if f[2] == frame.COMMAND]
        assert names == ["led_on", "led_off"] * 8, names
        assert run.finished and run.report()["ok"], run.report()


def test_commands_are_encoded_at_admission_after_the_first_goes_out():
    b, txs, now = _rig()
    params = {"led_blink": {"count": 3, "period_ms": 250}, "speak": {"text": "Hello."}}
    raw = _chain(["led_blink", "speak", "led_on"], params)
    kind, run = b.submit(raw)
    assert kind == "accepted", run
    first = run.order[0]
    assert first.status == "sent" and run.frames[first.key[2]] is None  # encoded as it started
    assert txs[0].last() == command_frame(b.owners.owner("led_blink")[1], first.params)
    for s in run.order[1:]:
        cap, f = run.frames[s.key[2]]
        own = b.owners.owner(s.action)
        assert cap is own[1], "%s: encoded for another capability" % s.action
        assert f == command_frame(cap, s.params), "%s: admission bytes differ" % s.action
        assert run.hot[run.order.index(s)] == (own, f)


def test_a_changed_owner_is_checked_again_at_dispatch():
    # the LED organ re-registers with other params for led_blink while led_on runs: the
    # admitted bytes are for the old capability, so the step is refused, as before
    b, txs, now = _rig()
    raw = _chain(["led_on", "led_blink"], {"led_blink": {"count": 3, "period_ms": 250}})
    kind, run = b.submit(raw)
    d = mf.led("LED_002")
    d["capabilities"][2]["params"] = d["capabilities"][2]["params"][:1]  # count only
    b.port(0).feed(frame.encode(frame.DESCRIPTOR, mf.encode_descriptor(d)), now[0])
    b.port(0).feed(frame.RESP_OK_FRAME, now[0])
    rep = run.report()
    assert rep["steps"][1]["status"] == "refused", rep
    assert "changed its params" in rep["steps"][1]["reason"], rep


def test_event_names_are_the_declared_strs():
    b, txs, now = _rig()
    heard = []
    b.hub.subscribe(lambda e, p, d: heard.append(d), ("event",))
    raw = _chain(["led_blink"], {"led_blink": {"count": 3, "period_ms": 250}})
    kind, run = b.submit(raw)
    p0 = b.port(0)
    p0.feed(frame.RESP_OK_FRAME, now[0])
    p0.feed(frame.encode(frame.EVENT, mf.command.encode_event("led_blink", 0)), now[0] + 5)
    assert run.finished and run.report()["ok"], run.report()
    declared = b.registry.slot(0).organ["capabilities"][2]["name"]
    assert heard == [("led_blink", 0)], heard
    assert heard[0][0] is declared, "the EVENT's name was made, not the declared str"
    # a name the organ never declared is still read (and stray); bad UTF-8 is a bad payload
    p0.feed(frame.encode(frame.EVENT, mf.command.encode_event("led_spin", 0)), now[0] + 6)
    assert heard[-1] == ("led_spin", 0), heard
    strays = b.registry.stray_events
    assert strays == 1, strays
    bad = bytes([1, 2, 0xC3, 0x28, 0])
    s = b.registry.slot(0)
    before = s.bad_payloads
    p0.feed(frame.encode(frame.EVENT, bad), now[0] + 7)
    assert s.bad_payloads == before + 1, "invalid UTF-8 in an EVENT name not counted"


def test_routes_follow_registration():
    b, txs, now = _rig()
    p0 = b.port(0)
    assert p0.routes is not None, "registered, but no routes"
    s = b.registry.slot(0)
    bad = s.bad_payloads
    p0.feed(frame.encode(frame.COMMAND_RESP, b"\x00\x00"), now[0])
    assert s.bad_payloads == bad + 1, "a two-byte COMMAND_RESP was not counted as bad"
    now[0] += 16000
    b.poll(now[0])
    assert not s.online, "silent organ still online"
    assert p0.routes is None, "offline, routes kept"
    sent = txs[0].n
    p0.feed(frame.RESP_OK_FRAME, now[0])  # from an unregistered port: DISCOVER, as before
    assert txs[0].n == sent + 1 and txs[0].last() == frame.DISCOVER_FRAME, txs[0].last()


def test_recent_keeps_event_entries_as_before():
    b, txs, now = _rig()
    raw = _chain(["led_blink"], {"led_blink": {"count": 3, "period_ms": 250}})
    b.submit(raw)
    now[0] += 40
    b.port(0).feed(frame.RESP_OK_FRAME, now[0])
    now[0] += 700
    b.port(0).feed(frame.encode(frame.EVENT, mf.command.encode_event("led_blink", 0)), now[0])
    items = [e for e in b.recent.items() if e["event"] == "event"]
    want = {"t_ms": b.stamp(), "event": "event", "port": 0, "name": "led_blink", "status": 0}
    assert items == [want], items
    assert items[0] is not b.recent.items()[-2], "entries are made anew on every read"
